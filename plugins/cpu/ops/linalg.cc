// CPU kernels of the "linalg" group, matrix products: every op is reduced to
// a batched GEMM over strided matrices (transposes are strides, not copies).
// float32 runs on oneDNN's matmul (primitives cached by shape and strides);
// float16/bfloat16 are staged through float32; float64 (no oneDNN support)
// uses a row-blocked loop. Convolution and pooling are in conv.cc, pool.cc.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "cpu_kernel.hpp"
#include "fused.hpp"
#include "vector_math.hpp"
#include "cpu_ops.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "linalg_util.hpp"
#include "onednn_util.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
namespace dn = onednn;
using sdk::kernel::compute_t;
using sdk::kernel::MatrixView;

// A GEMM operand: the SDK's matrix geometry (shared with the OpenCL plugin)
// over host memory P, the tensor's element 0 (the view's offset counts from it).
struct Mat {
  void* p = nullptr;
  MatrixView v;

  Mat t() const { return {p, v.t()}; }
  template <class T>
  T* at(int64_t b, int64_t i, int64_t j) const {
    return static_cast<T*>(p) + v.index(b, i, j);
  }
};

Mat mat2d(const Tensor& t) { return {t.data, sdk::kernel::matrix_2d(t)}; }
Mat mat3d(const Tensor& t) { return {t.data, sdk::kernel::matrix_3d(t)}; }

// T's leading dims folded into rows ([..., n] -> [rows, n]); false when the
// strides do not allow it without a copy.
bool fold_rows(const Tensor& t, Mat& m) {
  m.p = t.data;
  return sdk::kernel::fold_rows(t, m.v);
}

// ---- GEMM ---------------------------------------------------------------------

// C = A·B (+ BIAS[j]) in T, for float and double: rows in blocks of 4 share
// each loaded row of B; B is packed row-major first when its rows are strided.
template <class T>
void gemm_loops(const Mat& a, const Mat& b, const Mat& c, const T* bias) {
  const int64_t M = c.v.rows, N = c.v.cols, K = a.v.cols;
  std::vector<T> packed;
  bool pack = b.v.cs != 1 && K > 0 && N > 0;
  if (pack) {
    packed.resize(static_cast<size_t>(b.v.batch * K * N));
    for (int64_t bb = 0; bb < b.v.batch; ++bb)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) packed[(bb * K + k) * N + j] = *b.at<T>(bb, k, j);
  }
  constexpr int64_t kRows = 4;
  const int64_t blocks = (M + kRows - 1) / kRows;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, kRows * N * std::max<int64_t>(K, 1)));
  parallel_for(c.v.batch * blocks, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(kRows * N));
    for (int64_t task = lo; task < hi; ++task) {
      int64_t bi = task / blocks, i0 = (task % blocks) * kRows, nr = std::min(kRows, M - i0);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t j = 0; j < N; ++j) acc[r * N + j] = bias ? bias[j] : T(0);
      for (int64_t k = 0; k < K; ++k) {
        const T* brow = pack ? packed.data() + ((b.v.batch == 1 ? 0 : bi) * K + k) * N : b.at<T>(bi, k, 0);
        for (int64_t r = 0; r < nr; ++r) {
          T av = *a.at<T>(bi, i0 + r, k);
          T* arow = acc.data() + r * N;
          for (int64_t j = 0; j < N; ++j) arow[j] += av * brow[j];
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        T* crow = c.at<T>(bi, i0 + r, 0);
        for (int64_t j = 0; j < N; ++j) crow[j * c.v.cs] = acc[r * N + j];
      }
    }
  });
}

// An activation applied to a GEMM's result: oneDNN's eltwise post-op, or
// (where oneDNN does not run the product) the same function over the result.
struct Activation {
  dnnl::algorithm alg;
  float alpha, beta;
  void (*row)(float* p, int64_t n);  // in place over N contiguous floats (a loop GCC vectorises)
};

template <float (*F)(float)>
void activate_row(float* p, int64_t n) {
  for (int64_t j = 0; j < n; ++j) p[j] = F(p[j]);
}
inline float relu_f(float x) { return x < 0.0f ? 0.0f : x; }
inline float gelu_f(float x) { return vmath::gelu(x, false); }
inline float gelu_tanh_f(float x) { return vmath::gelu(x, true); }
inline float tanh_f(float x) { return vmath::tanh(x); }
inline float sigmoid_f(float x) { return vmath::sigmoid(x); }
inline float silu_f(float x) { return vmath::silu(x); }

const Activation* activation_or_none(GemmActivation a);

const Activation& activation(GemmActivation a) {
  static const Activation relu{dnnl::algorithm::eltwise_relu, 0.0f, 0.0f, &activate_row<relu_f>};
  static const Activation gelu{dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f, &activate_row<gelu_f>};
  static const Activation gelu_tanh{dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f, &activate_row<gelu_tanh_f>};
  static const Activation tanh{dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f, &activate_row<tanh_f>};
  static const Activation sigmoid{dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f, &activate_row<sigmoid_f>};
  static const Activation silu{dnnl::algorithm::eltwise_swish, 1.0f, 0.0f, &activate_row<silu_f>};
  switch (a) {
    case GemmActivation::kRelu: return relu;
    case GemmActivation::kGelu: return gelu;
    case GemmActivation::kGeluTanh: return gelu_tanh;
    case GemmActivation::kTanh: return tanh;
    case GemmActivation::kSigmoid: return sigmoid;
    case GemmActivation::kSilu:
    case GemmActivation::kNone: break;
  }
  return silu;
}
const Activation* activation_or_none(GemmActivation a) { return a == GemmActivation::kNone ? nullptr : &activation(a); }

// ACT over C's elements, in place (float32).
void apply_activation(const Mat& c, const Activation& act) {
  const MatrixView& v = c.v;
  parallel_for(v.batch * v.rows, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      if (v.cs == 1) {
        act.row(c.at<float>(r / v.rows, r % v.rows, 0), v.cols);
        continue;
      }
      for (int64_t j = 0; j < v.cols; ++j) act.row(c.at<float>(r / v.rows, r % v.rows, j), 1);
    }
  });
}

struct MatmulEntry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  bool reference = false;  // oneDNN's unoptimised implementation ("ref:any")
};

dn::PrimitiveCache<MatmulEntry>& matmul_cache() {
  static dn::PrimitiveCache<MatmulEntry> cache;
  return cache;
}

// dnnl_sgemm's view of V: 'N' (row-major, leading dim *LD) or 'T' (column-
// major); false when neither has unit stride (or the rows overlap).
bool sgemm_layout(const MatrixView& v, char* t, int64_t* ld) {
  if ((v.cols <= 1 || v.cs == 1) && (v.rows <= 1 || v.rs >= v.cols)) {
    *t = 'N';
    *ld = v.rows <= 1 ? std::max<int64_t>(v.cols, 1) : v.rs;
    return true;
  }
  if ((v.rows <= 1 || v.rs == 1) && (v.cols <= 1 || v.cs >= v.rows)) {
    *t = 'T';
    *ld = v.cols <= 1 ? std::max<int64_t>(v.rows, 1) : v.cs;
    return true;
  }
  return false;
}

// One small float32 product C = A·B (+ BIAS) through dnnl_sgemm: no
// primitive, memory objects or cache lookup (at decode sizes, [3, 128] x
// [128, 256], ~2 µs instead of ~8 through the matmul primitive). False when
// a layout has no unit stride.
bool gemm_small(const Mat& a, const Mat& b, const Mat& c, const float* bias, const Activation* act = nullptr) {
  char ta, tb, tc;
  int64_t lda, ldb, ldc;
  if (!sgemm_layout(a.v, &ta, &lda) || !sgemm_layout(b.v, &tb, &ldb) || !sgemm_layout(c.v, &tc, &ldc) || tc != 'N')
    return false;
  const int64_t M = c.v.rows, N = c.v.cols, K = a.v.cols;
  float* cp = c.at<float>(0, 0, 0);
  if (bias != nullptr)
    for (int64_t i = 0; i < M; ++i) std::copy(bias, bias + N, cp + i * ldc);
  dn::sgemm(ta, tb, M, N, K, 1.0f, a.at<float>(0, 0, 0), lda, b.at<float>(0, 0, 0), ldb, bias ? 1.0f : 0.0f, cp, ldc);
  if (act != nullptr)  // small: the result is still in the caches
    for (int64_t i = 0; i < M; ++i) act->row(cp + i * ldc, N);
  return true;
}

// Matrix I of M's batch (the one matrix of a batch-1 M, which broadcasts).
Mat matrix(const Mat& m, int64_t i) { return {m.p, {m.v.index(i, 0, 0), 1, m.v.rows, m.v.cols, 0, m.v.rs, m.v.cs}}; }

// BATCH dense row-major ROWS x COLS matrices at P.
Mat dense(void* p, int64_t batch, int64_t rows, int64_t cols) { return {p, {0, batch, rows, cols, rows * cols, cols, 1}}; }

// A contiguous float32 copy of the matrices M of storage type T.
template <class T>
Mat pack_f32(const Mat& m, std::vector<float>& buf) {
  const MatrixView& v = m.v;
  buf.resize(static_cast<size_t>(v.batch * v.rows * v.cols));
  for (int64_t b = 0; b < v.batch; ++b)
    for (int64_t i = 0; i < v.rows; ++i)
      for (int64_t j = 0; j < v.cols; ++j)
        buf[(b * v.rows + i) * v.cols + j] = static_cast<float>(*m.at<T>(b, i, j));
  return dense(buf.data(), v.batch, v.rows, v.cols);
}

// float32 C = A·B (+ BIAS, contiguous [N]) on oneDNN; false when oneDNN
// refuses the layout (the caller then loops).
bool gemm_onednn(const Mat& a, const Mat& b, const Mat& c, const float* bias, const Activation* act = nullptr) {
  // oneDNN broadcasts the weights' batch but not the source's: then solve
  // Cᵀ = Bᵀ·Aᵀ (strides only).
  const MatrixView &av = a.v, &bv = b.v, &cv = c.v;
  if (av.batch == 1 && cv.batch > 1 && bv.batch > 1)
    return bias == nullptr && gemm_onednn(b.t(), a.t(), c.t(), nullptr, act);
  const int64_t M = cv.rows, N = cv.cols, K = av.cols;
  const double macs = static_cast<double>(cv.batch) * M * N * K;
  dn::ThreadLimit limit(dn::threads_for(macs));
  if (cv.batch == 1 && av.batch == 1 && bv.batch == 1 && macs < dn::kSmallMacs && K > 0 &&
      gemm_small(a, b, c, bias, act))
    return true;
  std::vector<int64_t> ad{av.batch, M, K}, as{av.bs, av.rs, av.cs}, bd{bv.batch, K, N}, bst{bv.bs, bv.rs, bv.cs},
      cd{cv.batch, M, N}, cst{cv.bs, cv.rs, cv.cs};
  dn::Key key(1);
  key.add(ad).add(as).add(bd).add(bst).add(cd).add(cst).add(bias != nullptr);
  key.add(act != nullptr ? static_cast<int64_t>(act->alg) + 1 : 0);
  std::shared_ptr<const MatmulEntry> e;
  try {
    e = matmul_cache().get(key, [&] {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (act != nullptr) {  // the activation in the same pass over C
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, act->alg, act->alpha, act->beta);
        attr.set_post_ops(ops);
      }
      dnnl::memory::desc bias_md = bias ? dn::md({1, 1, N}, {N, N, 1}) : dnnl::memory::desc();
      dnnl::matmul::desc d(dn::md(ad, as), dn::md(bd, bst), bias_md, dn::md(cd, cst));
      dnnl::matmul::primitive_desc pd(d, attr, dn::engine());
      const bool reference = std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
      return std::make_shared<const MatmulEntry>(MatmulEntry{pd, dnnl::matmul(pd), reference});
    });
  } catch (const dnnl::error&) {
    return false;
  }
  // Strides oneDNN's optimised matmuls do not take (a batch stride below a
  // matrix stride: views of head-split attention tensors) get its reference
  // loops, ~300x slower (0.9 ms for a 4x32x32x8 product): one dnnl_sgemm per
  // batch matrix instead, after a dense copy of an operand sgemm cannot read.
  if (e->reference) {
    char t;
    int64_t ld;
    if (!sgemm_layout(cv, &t, &ld) || t != 'N') return false;  // the caller loops
    thread_local std::vector<float> dense_a, dense_b;
    const Mat a2 = sgemm_layout(av, &t, &ld) ? a : pack_f32<float>(a, dense_a);
    const Mat b2 = sgemm_layout(bv, &t, &ld) ? b : pack_f32<float>(b, dense_b);
    for (int64_t i = 0; i < cv.batch; ++i) gemm_small(matrix(a2, i), matrix(b2, i), matrix(c, i), bias, act);
    return true;
  }
  thread_local dn::Scratch scratch;
  dnnl::engine& eng = dn::engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(e->pd.src_desc(), eng, a.at<float>(0, 0, 0))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(e->pd.weights_desc(), eng, b.at<float>(0, 0, 0))},
      {DNNL_ARG_DST, dnnl::memory(e->pd.dst_desc(), eng, c.at<float>(0, 0, 0))},
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(e->pd.scratchpad_desc(), eng, scratch.get(e->pd.scratchpad_desc().get_size()))}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e->pd.bias_desc(), eng, const_cast<float*>(bias)));
  try {
    e->prim.execute(dn::stream(), args);
    dn::stream().wait();
  } catch (const dnnl::error&) {
    return false;  // refused before computing: the caller loops
  }
  return true;
}

// BIAS (1-D, strided, may be nullptr) as a contiguous vector of V.
template <class V>
std::vector<V> bias_vector(const Tensor* bias) {
  std::vector<V> out;
  if (bias == nullptr || (bias->dtype == sdk::kernel::dtype_of<V>() && bias->strides[0] == 1)) return out;  // read in place
  out.resize(static_cast<size_t>(bias->shape[0]));
  sdk::kernel::dispatch_float(bias->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t j = 0; j < out.size(); ++j)
      out[j] = static_cast<V>(static_cast<compute_t<T>>(bias->ptr<T>()[static_cast<int64_t>(j) * bias->strides[0]]));
  });
  return out;
}

// C = ACT?(A·B (+ BIAS [N])) in dtype DT; every operand may be strided.
// ACT: float32 only (nullptr for the other dtypes).
void gemm(hal_dtype_e dt, const Mat& a, const Mat& b, const Mat& c, const Tensor* bias,
          const Activation* act = nullptr) {
  const MatrixView& cv = c.v;
  if (cv.rows == 0 || cv.cols == 0 || cv.batch == 0) return;
  if (dt == HAL_DTYPE_FLOAT64) {
    std::vector<double> bv = bias_vector<double>(bias);
    gemm_loops<double>(a, b, c, bias ? (bv.empty() ? bias->ptr<double>() : bv.data()) : nullptr);
    return;
  }
  std::vector<float> bv = bias_vector<float>(bias);
  const float* bp = bias ? (bv.empty() ? bias->ptr<float>() : bv.data()) : nullptr;
  if (dt == HAL_DTYPE_FLOAT32) {
    if (a.v.cols > 0 && gemm_onednn(a, b, c, bp, act)) return;
    gemm_loops<float>(a, b, c, bp);
    if (act != nullptr) apply_activation(c, *act);
    return;
  }
  sdk::kernel::dispatch_float(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, sdk::kernel::Half> || std::is_same_v<T, sdk::kernel::BFloat16>) {
      std::vector<float> ab, bb, cb(static_cast<size_t>(cv.batch * cv.rows * cv.cols));
      Mat a32 = pack_f32<T>(a, ab), b32 = pack_f32<T>(b, bb);
      Mat c32 = dense(cb.data(), cv.batch, cv.rows, cv.cols);
      if (a.v.cols == 0 || !gemm_onednn(a32, b32, c32, bp)) gemm_loops<float>(a32, b32, c32, bp);
      parallel_for(cv.batch * cv.rows, 64, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r)
          for (int64_t j = 0; j < cv.cols; ++j) *c.at<T>(r / cv.rows, r % cv.rows, j) = T(cb[r * cv.cols + j]);
      });
    }
  });
}

// OUT = alpha·OUT + beta·SELF (SELF broadcast; not read when beta is 0).
void scale_add(const Tensor& out, const Tensor& self, double alpha, double beta) {
  if (alpha == 1.0 && beta == 0.0) return;
  sdk::kernel::dispatch_float(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = compute_t<T>;
    V al = static_cast<V>(alpha), be = static_cast<V>(beta);
    if (beta == 0.0) map<T, T>(out, {&out}, [=](V x) { return al * x; });
    else map<T, T, T>(out, {&out, &self}, [=](V x, V s) { return al * x + be * s; });
  });
}

// SELF as a 1-D [N] view when it is [N] or [1, N] (then addmm can hand it to
// the GEMM as a bias).
bool as_row_bias(const Tensor& self, int64_t n, Tensor& row) {
  if (self.rank == 0 || self.shape[self.rank - 1] != n) return false;
  for (int d = 0; d + 1 < self.rank; ++d)
    if (self.shape[d] != 1) return false;
  row = self;
  row.rank = 1;
  row.shape[0] = n;
  row.strides[0] = self.strides[self.rank - 1];
  return true;
}

// addmm / baddbmm: OUT = beta·SELF + alpha·(A·B).
// ACT (float32 only): applied to the result.
void add_product(const Tensor& out, const Tensor& self, const Mat& a, const Mat& b, const Mat& c, double alpha,
                 double beta, const Activation* act = nullptr) {
  Tensor row;
  if (alpha == 1.0 && beta == 1.0 && as_row_bias(self, c.v.cols, row)) {
    gemm(out.dtype, a, b, c, &row, act);
    return;
  }
  gemm(out.dtype, a, b, c, nullptr);
  if (a.v.cols == 0 && beta != 0.0) scale_add(out, self, 0.0, beta);  // alpha·0: keeps NaN-free zeros
  else scale_add(out, self, alpha, beta);
  if (act != nullptr) apply_activation(c, *act);
}

// ---- ops ------------------------------------------------------------------------

void mm_with(const OpCall& c, const Activation* act) {
  gemm(c.output(0).dtype, mat2d(c.input(0)), mat2d(c.input(1)), mat2d(c.output(0)), nullptr, act);
}
void mm_body(const OpCall& c) { mm_with(c, nullptr); }
HAL_CPU_KERNEL(mm_kernel, mm_body)

void bmm_body(const OpCall& c) {
  gemm(c.output(0).dtype, mat3d(c.input(0)), mat3d(c.input(1)), mat3d(c.output(0)), nullptr);
}
HAL_CPU_KERNEL(bmm_kernel, bmm_body)

void addmm_with(const OpCall& c, const Activation* act) {
  const Tensor& out = c.output(0);
  add_product(out, c.input(0), mat2d(c.input(1)), mat2d(c.input(2)), mat2d(out),
              op::addmm::alpha(c).to_double(), op::addmm::beta(c).to_double(), act);
}
void addmm_body(const OpCall& c) { addmm_with(c, nullptr); }
HAL_CPU_KERNEL(addmm_kernel, addmm_body)

void baddbmm_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  add_product(out, c.input(0), mat3d(c.input(1)), mat3d(c.input(2)), mat3d(out),
              op::baddbmm::alpha(c).to_double(), op::baddbmm::beta(c).to_double());
}
HAL_CPU_KERNEL(baddbmm_kernel, baddbmm_body)

// torch.matmul as the SDK's batched GEMMs (broadcast batch dims have stride
// 0; one GEMM per outer batch index where the strides do not fold).
void matmul_body(const OpCall& c) {
  const Tensor &x = c.input(0), &y = c.input(1), &out = c.output(0);
  for (const sdk::kernel::Gemm& g : sdk::kernel::matmul_gemms(c))
    gemm(out.dtype, {x.data, g.a}, {y.data, g.b}, {out.data, g.c}, nullptr);
}
HAL_CPU_KERNEL(matmul_kernel, matmul_body)

// T as [rows, n] (a contiguous copy in TMP when its strides do not fold).
Mat rows_of(const Tensor& t, Tensor& tmp, std::vector<unsigned char>& storage) {
  Mat m;
  if (fold_rows(t, m)) return m;
  tmp = cast_contiguous(t, t.dtype, storage);
  fold_rows(tmp, m);
  return m;
}

// Runs F(mat) on OUT as [rows, n]: directly, or through a contiguous
// scratch copied back when OUT's strides do not fold.
template <class F>
void write_rows(const Tensor& out, F&& f) {
  Mat m;
  if (fold_rows(out, m)) {
    f(m);
    return;
  }
  std::vector<unsigned char> storage(static_cast<size_t>(out.numel()) * out.element_size() + 1);
  Tensor tmp = out;
  tmp.set_contiguous_strides();
  tmp.data = storage.data();
  fold_rows(tmp, m);
  f(m);
  linalg::copy_convert(out, tmp);
}

void linear_with(const OpCall& c, const Activation* act) {
  Tensor tmp;
  std::vector<unsigned char> storage;
  Mat x = rows_of(op::linear::input(c), tmp, storage);
  Mat w = mat2d(op::linear::weight(c)).t();
  const Tensor& out = op::linear::out(c);
  write_rows(out, [&](const Mat& o) { gemm(out.dtype, x, w, o, op::linear::bias(c), act); });
}
void linear_body(const OpCall& c) { linear_with(c, nullptr); }
HAL_CPU_KERNEL(linear_kernel, linear_body)

// linear_with for a float32 weight kept transposed: WT is [in, out] row-major.
void linear_transposed_weight(const OpCall& c, const std::vector<float>& wt, const Activation* act) {
  Tensor tmp;
  std::vector<unsigned char> storage;
  Mat x = rows_of(op::linear::input(c), tmp, storage);
  const Tensor& w = op::linear::weight(c);
  Mat wm = dense(const_cast<float*>(wt.data()), 1, w.shape[1], w.shape[0]);
  const Tensor& out = op::linear::out(c);
  write_rows(out, [&](const Mat& o) { gemm(out.dtype, x, wm, o, op::linear::bias(c), act); });
}

// OUT[j] = Σ_i G[i, j], accumulated in double.
template <class T>
void column_sums(const Mat& g, const Tensor& out) {
  const int64_t N = g.v.cols;
  constexpr int64_t kBlock = 256;
  parallel_for((N + kBlock - 1) / kBlock, 1, [&](int64_t lo, int64_t hi) {
    double acc[kBlock];
    for (int64_t blk = lo; blk < hi; ++blk) {
      int64_t j0 = blk * kBlock, nj = std::min(kBlock, N - j0);
      std::fill(acc, acc + nj, 0.0);
      for (int64_t i = 0; i < g.v.rows; ++i) {
        const T* row = g.at<T>(0, i, j0);
        for (int64_t j = 0; j < nj; ++j) acc[j] += static_cast<double>(static_cast<compute_t<T>>(row[j * g.v.cs]));
      }
      for (int64_t j = 0; j < nj; ++j) out.ptr<T>()[(j0 + j) * out.strides[0]] = static_cast<T>(acc[j]);
    }
  });
}

void linear_backward_body(const OpCall& c) {
  Tensor tg, tx;
  std::vector<unsigned char> sg, sx;
  Mat g = rows_of(op::linear_backward::grad_output(c), tg, sg);
  Mat x = rows_of(op::linear_backward::input(c), tx, sx);
  const Tensor &w = op::linear_backward::weight(c), &gi = op::linear_backward::grad_input(c);
  hal_dtype_e dt = w.dtype;
  write_rows(gi, [&](const Mat& o) { gemm(dt, g, mat2d(w), o, nullptr); });
  gemm(dt, g.t(), x, mat2d(op::linear_backward::grad_weight(c)), nullptr);
  sdk::kernel::dispatch_float(dt, [&](auto tag) {
    column_sums<typename decltype(tag)::type>(g, op::linear_backward::grad_bias(c));
  });
}
HAL_CPU_KERNEL(linear_backward_kernel, linear_backward_body)

}  // namespace

// The GEMM node's call, re-pointed at each run's tensors: its kernel body
// with the activation.
class GemmActivationStep final : public sdk::HostGraphStep {
 public:
  GemmActivationStep(sdk::Device& device, const sdk::OpSchema& schema, std::vector<sdk::AttrValue> attrs,
                     GemmActivation act, bool weight_constant)
      : device_(device), schema_(schema), attrs_(std::move(attrs)), act_(activation_or_none(act)),
        body_(std::strcmp(schema.name, "linear") == 0 ? &linear_with
              : std::strcmp(schema.name, "mm") == 0   ? &mm_with
                                                      : &addmm_with),
        transpose_weight_(weight_constant && std::strcmp(schema.name, "linear") == 0) {}

  void run(const Tensor* const* inputs, const Tensor* const* outputs) override {
    // The call assembled at the first run (from its tensors: the common
    // dtype is the graph's, the same every run), then re-pointed at each
    // run's tensors (no allocation per run); a run that finds it in use
    // assembles its own.
    auto fill = [&](std::vector<Tensor>& in) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = inputs[i] != nullptr ? *inputs[i] : Tensor();
    };
    std::unique_lock<std::mutex> lock(call_mu_, std::try_to_lock);
    std::shared_ptr<OpCall> call = lock.owns_lock() ? call_ : nullptr;
    if (call != nullptr) {
      fill(sdk::OpCallBuilder::inputs_of(*call));
      sdk::OpCallBuilder::outputs_of(*call)[0] = *outputs[0];
    } else {
      std::vector<Tensor> in(schema_.input_count);
      fill(in);
      call = sdk::OpCallBuilder::assemble(schema_, device_, std::move(in), attrs_, {*outputs[0]});
      if (lock.owns_lock()) call_ = call;
    }
    const Tensor& w = op::linear::weight(*call);
    // A copy of at most kMaxTransposedWeightBytes: the gain is sgemm's, at the small sizes it serves
    // (oneDNN's matmul packs a large B itself); a large weight is not held twice.
    if (transpose_weight_ && w.dtype == HAL_DTYPE_FLOAT32 && w.rank == 2 &&
        w.shape[0] * w.shape[1] * 4 <= kMaxTransposedWeightBytes) {
      std::call_once(transposed_, [&] {  // runs may share the step: the first one fills it
        wt_.resize(static_cast<size_t>(w.shape[0] * w.shape[1]));
        const float* p = w.ptr<float>();
        for (int64_t o = 0; o < w.shape[0]; ++o)
          for (int64_t i = 0; i < w.shape[1]; ++i) wt_[i * w.shape[0] + o] = p[o * w.strides[0] + i * w.strides[1]];
      });
      linear_transposed_weight(*call, wt_, act_);
      return;
    }
    body_(*call, act_);
  }

 private:
  sdk::Device& device_;
  const sdk::OpSchema& schema_;
  const std::vector<sdk::AttrValue> attrs_;
  const Activation* act_;  // nullptr: none
  void (*const body_)(const OpCall&, const Activation*);
  const bool transpose_weight_;
  std::once_flag transposed_;
  std::vector<float> wt_;  // the constant weight, [in, out] row-major
  std::mutex call_mu_;     // guards call_ while a run uses it
  std::shared_ptr<OpCall> call_;
};

std::unique_ptr<sdk::HostGraphStep> make_gemm_activation_step(sdk::Device& device, const sdk::OpSchema& schema,
                                                              std::vector<sdk::AttrValue> attrs, GemmActivation act,
                                                              bool weight_constant) {
  return std::make_unique<GemmActivationStep>(device, schema, std::move(attrs), act, weight_constant);
}

void register_conv_ops(sdk::OpRegistry& ops);
void register_pool_ops(sdk::OpRegistry& ops);

void register_linalg_ops(sdk::OpRegistry& ops) {
  ops.add<op::mm>(&mm_kernel, sdk::kFloatDtypes);
  ops.add<op::bmm>(&bmm_kernel, sdk::kFloatDtypes);
  ops.add<op::matmul>(&matmul_kernel, sdk::kFloatDtypes);
  ops.add<op::addmm>(&addmm_kernel, sdk::kFloatDtypes);
  ops.add<op::baddbmm>(&baddbmm_kernel, sdk::kFloatDtypes);
  ops.add<op::linear>(&linear_kernel, sdk::kFloatDtypes);
  ops.add<op::linear_backward>(&linear_backward_kernel, sdk::kFloatDtypes);
  register_conv_ops(ops);
  register_pool_ops(ops);
}

}  // namespace hal::cpu
