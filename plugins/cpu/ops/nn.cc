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
#include "softmax_simd.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using nn::acc_t;
using nn::exp_f;
using nn::lane_max;
using nn::lane_sum;

// ---- float rows of softmax / log_softmax: explicit SIMD (softmax_simd.hpp) ------
namespace simd_rows {
using namespace simd;

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

}  // namespace simd_rows

// ---- row functions (A = float or double) ---------------------------------------

// softmax_row / log_softmax_row here serve float64 (float rows take simd_rows::
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
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_sum;  // as simd_rows::log_softmax_row
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
  if constexpr (kKind == Kind::kSoftmax && kFloat) simd_rows::softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kSoftmax) softmax_row(a, y, n);
  else if constexpr (kKind == Kind::kLogSoftmax && kFloat) simd_rows::log_softmax_row(a, y, n);
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
