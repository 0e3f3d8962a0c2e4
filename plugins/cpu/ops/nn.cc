// CPU kernels of the "nn" op group: softmax and log_softmax with their
// backward ops (here), normalization (norm.cc) and losses (loss.cc).
// Softmax works row by row along DIM: float32 rows in place in memory,
// other dtypes and non-last dims gathered into a float/double row first.
// Float rows of softmax and log_softmax use explicit SIMD (below).
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_ops.hpp"
#include "nn_common.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using nn::acc_t;
using nn::exp_f;
using nn::lane_max;
using nn::lane_sum;

// ---- float rows of softmax / log_softmax: explicit SIMD -------------------------
// GCC/Clang vector extensions at the widest width -march allows. The
// auto-vectorised loops below left the max sweep scalar and vmath::exp's
// overflow selects in the hot loop (0.7x PyTorch on 4096 x 4096 float32);
// these compile to straight vector code on any target.
namespace simd {

#if defined(__AVX512F__)
inline constexpr int kW = 16;
#elif defined(__AVX__)
inline constexpr int kW = 8;
#else
inline constexpr int kW = 4;
#endif
typedef float VecF __attribute__((vector_size(kW * sizeof(float))));
typedef int32_t VecI __attribute__((vector_size(kW * sizeof(int32_t))));

HAL_NN_INLINE VecF load(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
HAL_NN_INLINE void store(float* p, VecF v) { std::memcpy(p, &v, sizeof v); }
HAL_NN_INLINE VecF splat(float f) { return VecF{} + f; }
// NaN lanes of A lose to B: NaNs reach the output through the sum instead.
HAL_NN_INLINE VecF max(VecF a, VecF b) { return a > b ? a : b; }
// Horizontal sum and max as trees (log2(kW) dependent steps, not kW - 1): a
// short row (64 floats: 4 vectors) is latency-bound on them.
HAL_NN_INLINE float hsum(VecF v) {
  float t[kW];
  std::memcpy(t, &v, sizeof t);
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] += t[j + w];
  return t[0];
}
// NaN lanes lose where the other lane is a number (as the max sweep's).
HAL_NN_INLINE float hmax(VecF v) {
  float t[kW];
  std::memcpy(t, &v, sizeof t);
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] = t[j + w] > t[j] ? t[j + w] : t[j];
  return t[0];
}

// e^x for x <= 0 or NaN (softmax's x - max): vmath::exp's reduction and
// polynomial without its overflow and subnormal handling. Results below
// FLT_MIN (x < ln FLT_MIN) are 0: next to the row's sum (>= 1) they are
// negligible, and masked -inf entries come out exactly 0.
HAL_NN_INLINE VecF exp_nonpositive(VecF x) {
  const float kMin = -87.3365478515625f;  // ln(FLT_MIN), rounded up
  VecF xc = x < kMin ? splat(kMin) : x;
  const float kShift = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  VecF n = (xc * 1.44269504088896341f + kShift) - kShift;
  VecF r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  VecF p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  VecF y = p * (r * r) + r + 1.0f;
  // 2^n for n in [-126, 0]: the exponent field directly (NaN lanes carry garbage, multiplied into NaN).
  VecI e = (__builtin_convertvector(n, VecI) + 127) << 23;
  VecF scale;
  std::memcpy(&scale, &e, sizeof scale);
  y = y * scale;
  return x < kMin ? VecF{} : y;
}

// A row of N split as BODY = N - N % kW elements loaded directly and the rest
// as one vector padded with -inf (whose e^(x - max) adds 0 to the sum).
struct Row {
  const float* x;
  int64_t n, body;
  VecF tail;
  Row(const float* x_, int64_t n_) : x(x_), n(n_), body(n_ - n_ % kW) {
    if (body == n) {  // no tail (a multiple of kW): skip the padded vector's loads and exp
      tail = splat(-std::numeric_limits<float>::infinity());
      return;
    }
    float buf[kW];
    for (int j = 0; j < kW; ++j) buf[j] = body + j < n ? x[body + j] : -std::numeric_limits<float>::infinity();
    tail = load(buf);
  }
  float max() const {
    VecF m0 = tail, m1 = tail;
    int64_t i = 0;
    for (; i + 2 * kW <= body; i += 2 * kW) {
      m0 = simd::max(m0, load(x + i));
      m1 = simd::max(m1, load(x + i + kW));
    }
    if (i < body) m0 = simd::max(m0, load(x + i));
    return hmax(simd::max(m0, m1));
  }
  // Σ e^(x - M); with kStore, stores the body's terms to Y too.
  template <bool kStore>
  float sum_exp(float m, float* y) const {
    VecF vm = splat(m), s0 = body < n ? exp_nonpositive(tail - vm) : VecF{}, s1 = {};
    int64_t i = 0;
    for (; i + 2 * kW <= body; i += 2 * kW) {
      VecF e0 = exp_nonpositive(load(x + i) - vm), e1 = exp_nonpositive(load(x + i + kW) - vm);
      if constexpr (kStore) {
        store(y + i, e0);
        store(y + i + kW, e1);
      }
      s0 += e0;
      s1 += e1;
    }
    if (i < body) {
      VecF e0 = exp_nonpositive(load(x + i) - vm);
      if constexpr (kStore) store(y + i, e0);
      s0 += e0;
    }
    return hsum(s0 + s1);
  }
};

// Y may be X (in place): each sweep reads an element before writing it.
HAL_NN_INLINE void softmax_row(const float* x, float* y, int64_t n) {
  Row row(x, n);
  float m = row.max();
  float inv = 1.0f / row.sum_exp<true>(m, y);
  VecF vinv = splat(inv), et = exp_nonpositive(row.tail - splat(m));
  for (int64_t i = 0; i < row.body; i += kW) store(y + i, load(y + i) * vinv);
  for (int64_t j = row.body; j < n; ++j) y[j] = et[j - row.body] * inv;
}

// (x - max) - log Σ, as PyTorch: x - (max + log Σ) would round max + log Σ
// at max's magnitude first (an error of 5e-4 next to 1e4 in float32).
HAL_NN_INLINE void log_softmax_row(const float* x, float* y, int64_t n) {
  Row row(x, n);
  float m = row.max();
  float log_sum = std::log(row.sum_exp<false>(m, nullptr));
  VecF vm = splat(m), vlog = splat(log_sum), tail = (row.tail - vm) - vlog;
  for (int64_t i = 0; i < row.body; i += kW) store(y + i, (load(x + i) - vm) - vlog);
  for (int64_t j = row.body; j < n; ++j) y[j] = tail[j - row.body];
}

}  // namespace simd

// ---- row functions (A = float or double) ---------------------------------------

// softmax_row / log_softmax_row here serve float64 (float rows take simd::
// above); the backward rows serve both.
template <class A>
HAL_NN_INLINE void softmax_row(const A* x, A* y, int64_t n) {
  A m = lane_max(x, n);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f(x[i] - m);
  A inv = A(1) / lane_sum<A>(n, [&](int64_t i) { return y[i]; });
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

template <class A>
HAL_NN_INLINE void log_softmax_row(const A* x, A* y, int64_t n) {
  A m = lane_max(x, n);
  A log_sum = std::log(lane_sum<A>(n, [&](int64_t i) { return exp_f(x[i] - m); }));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_sum;  // as simd::log_softmax_row
}

template <class A>
HAL_NN_INLINE void softmax_backward_row(const A* g, const A* y, A* gi, int64_t n) {
  A s = lane_sum<A>(n, [&](int64_t i) { return g[i] * y[i]; });
  for (int64_t i = 0; i < n; ++i) gi[i] = y[i] * (g[i] - s);
}

template <class A>
HAL_NN_INLINE void log_softmax_backward_row(const A* g, const A* y, A* gi, int64_t n) {
  A s = lane_sum<A>(n, [&](int64_t i) { return g[i]; });
  for (int64_t i = 0; i < n; ++i) gi[i] = g[i] - exp_f(y[i]) * s;
}

enum class Kind { kSoftmax, kLogSoftmax, kSoftmaxBackward, kLogSoftmaxBackward };

template <Kind kKind, class A>
HAL_NN_INLINE void row(const A* a, const A* b, A* y, int64_t n) {
  constexpr bool kFloat = std::is_same_v<A, float>;
  if constexpr (kKind == Kind::kSoftmax && kFloat) simd::softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kSoftmax) softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kLogSoftmax && kFloat) simd::log_softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kLogSoftmax) log_softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kSoftmaxBackward) softmax_backward_row(a, b, y, n);
  else log_softmax_backward_row(a, b, y, n);
}

// ROWS contiguous float32 rows of N (vectorised for the plugin's -march).
template <Kind kKind>
void float_rows(const float* a, const float* b, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) row<kKind>(a + r * n, b == nullptr ? nullptr : b + r * n, y + r * n, n);
}

// Runs the row function of KKIND along the DIM attribute: inputs (self) or
// (grad_output, output), output 0.
template <Kind kKind>
void along_dim(const OpCall& c, int64_t dim_attr) {
  constexpr bool kBackward = kKind == Kind::kSoftmaxBackward || kKind == Kind::kLogSoftmaxBackward;
  const Tensor& dst = c.output(0);
  if (dst.numel() == 0) return;
  nn::In a(&c.input(0));
  nn::In b(kBackward ? &c.input(1) : nullptr);
  nn::Out out(dst);
  int dim = dst.rank == 0 ? 0 : static_cast<int>(dim_attr < 0 ? dim_attr + dst.rank : dim_attr);
  int64_t n = dst.rank == 0 ? 1 : dst.shape[dim], inner = 1;
  for (int d = dim + 1; d < dst.rank; ++d) inner *= dst.shape[d];
  int64_t outer = dst.numel() / (n * inner);
  nn::dispatch(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* pa = a.ptr<T>();
    const T* pb = b.ptr<T>();
    T* py = out.ptr<T>();
    int64_t grain = std::max<int64_t>(1, 16384 / n);
    if constexpr (std::is_same_v<T, float>) {
      if (inner == 1) {
        parallel_for(outer, grain, [&](int64_t lo, int64_t hi) {
          float_rows<kKind>(pa + lo * n, pb == nullptr ? nullptr : pb + lo * n, py + lo * n, hi - lo, n);
        });
        return;
      }
    }
    // Gather each row (stride INNER) into A, compute, scatter back.
    parallel_for(outer * inner, grain, [&](int64_t lo, int64_t hi) {
      std::vector<A> buf(static_cast<size_t>(3 * n));
      A *ra = buf.data(), *rb = ra + n, *ry = rb + n;
      for (int64_t r = lo; r < hi; ++r) {
        int64_t base = (r / inner) * n * inner + r % inner;
        for (int64_t j = 0; j < n; ++j) ra[j] = static_cast<A>(pa[base + j * inner]);
        if (kBackward)
          for (int64_t j = 0; j < n; ++j) rb[j] = static_cast<A>(pb[base + j * inner]);
        row<kKind>(ra, rb, ry, n);
        for (int64_t j = 0; j < n; ++j) py[base + j * inner] = static_cast<T>(ry[j]);
      }
    });
  });
  out.commit();
}

void softmax_body(const OpCall& c) { along_dim<Kind::kSoftmax>(c, op::softmax::dim(c)); }
void log_softmax_body(const OpCall& c) { along_dim<Kind::kLogSoftmax>(c, op::log_softmax::dim(c)); }
void softmax_backward_body(const OpCall& c) {
  along_dim<Kind::kSoftmaxBackward>(c, op::softmax_backward::dim(c));
}
void log_softmax_backward_body(const OpCall& c) {
  along_dim<Kind::kLogSoftmaxBackward>(c, op::log_softmax_backward::dim(c));
}
HAL_CPU_KERNEL(softmax_kernel, softmax_body)
HAL_CPU_KERNEL(log_softmax_kernel, log_softmax_body)
HAL_CPU_KERNEL(softmax_backward_kernel, softmax_backward_body)
HAL_CPU_KERNEL(log_softmax_backward_kernel, log_softmax_backward_body)

}  // namespace

void register_nn_ops(sdk::OpRegistry& ops) {
  ops.add<op::softmax>(&softmax_kernel, sdk::kFloatDtypes);
  ops.add<op::log_softmax>(&log_softmax_kernel, sdk::kFloatDtypes);
  ops.add<op::softmax_backward>(&softmax_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::log_softmax_backward>(&log_softmax_backward_kernel, sdk::kFloatDtypes);
  nn::register_norm_ops(ops);
  nn::register_loss_ops(ops);
}

}  // namespace hal::cpu
