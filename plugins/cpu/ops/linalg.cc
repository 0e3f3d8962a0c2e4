// CPU kernels of the "linalg" group, matrix products: every op is reduced to
// a batched GEMM over strided matrices (transposes are strides, not copies).
// float32 runs on oneDNN's matmul (primitives cached by shape and strides);
// float16/bfloat16 are staged through float32; float64 (no oneDNN support)
// uses a row-blocked loop. Convolution and pooling are in conv.cc, pool.cc.
#include <algorithm>
#include <vector>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "linalg_util.hpp"
#include "onednn_util.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
namespace dn = onednn;
using sdk::kernel::compute_t;

// BATCH matrices of ROWS x COLS; element (b, i, j) at p[b·bs + i·rs + j·cs]
// (elements). batch 1 against a larger batch broadcasts.
struct Mat {
  void* p = nullptr;
  int64_t batch = 1, rows = 0, cols = 0, bs = 0, rs = 0, cs = 0;

  Mat t() const { return {p, batch, cols, rows, bs, cs, rs}; }
  template <class T>
  T* at(int64_t b, int64_t i, int64_t j) const {
    return static_cast<T*>(p) + (batch == 1 ? 0 : b * bs) + i * rs + j * cs;
  }
};

Mat mat2d(const Tensor& t) { return {t.data, 1, t.shape[0], t.shape[1], 0, t.strides[0], t.strides[1]}; }
Mat mat3d(const Tensor& t) {
  return {t.data, t.shape[0], t.shape[1], t.shape[2], t.strides[0], t.strides[1], t.strides[2]};
}

// T's leading dims folded into rows ([..., n] -> [rows, n]); false when the
// strides do not allow it without a copy (the SDK's geometry, shared with the
// OpenCL plugin).
bool fold_rows(const Tensor& t, Mat& m) {
  sdk::kernel::MatrixView v;
  bool ok = sdk::kernel::fold_rows(t, v);
  m = Mat{t.data, v.batch, v.rows, v.cols, v.bs, v.rs, v.cs};
  return ok;
}

// ---- GEMM ---------------------------------------------------------------------

// C = A·B (+ BIAS[j]) in T, for float and double: rows in blocks of 4 share
// each loaded row of B; B is packed row-major first when its rows are strided.
template <class T>
void gemm_loops(const Mat& a, const Mat& b, const Mat& c, const T* bias) {
  const int64_t M = c.rows, N = c.cols, K = a.cols;
  std::vector<T> packed;
  bool pack = b.cs != 1 && K > 0 && N > 0;
  if (pack) {
    packed.resize(static_cast<size_t>(b.batch * K * N));
    for (int64_t bb = 0; bb < b.batch; ++bb)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) packed[(bb * K + k) * N + j] = *b.at<T>(bb, k, j);
  }
  constexpr int64_t kRows = 4;
  const int64_t blocks = (M + kRows - 1) / kRows;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, kRows * N * std::max<int64_t>(K, 1)));
  parallel_for(c.batch * blocks, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(kRows * N));
    for (int64_t task = lo; task < hi; ++task) {
      int64_t bi = task / blocks, i0 = (task % blocks) * kRows, nr = std::min(kRows, M - i0);
      for (int64_t r = 0; r < nr; ++r)
        for (int64_t j = 0; j < N; ++j) acc[r * N + j] = bias ? bias[j] : T(0);
      for (int64_t k = 0; k < K; ++k) {
        const T* brow = pack ? packed.data() + ((b.batch == 1 ? 0 : bi) * K + k) * N : b.at<T>(bi, k, 0);
        for (int64_t r = 0; r < nr; ++r) {
          T av = *a.at<T>(bi, i0 + r, k);
          T* arow = acc.data() + r * N;
          for (int64_t j = 0; j < N; ++j) arow[j] += av * brow[j];
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        T* crow = c.at<T>(bi, i0 + r, 0);
        for (int64_t j = 0; j < N; ++j) crow[j * c.cs] = acc[r * N + j];
      }
    }
  });
}

struct MatmulEntry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

dn::PrimitiveCache<MatmulEntry>& matmul_cache() {
  static dn::PrimitiveCache<MatmulEntry> cache;
  return cache;
}

// float32 C = A·B (+ BIAS, contiguous [N]) on oneDNN; false when oneDNN
// refuses the layout (the caller then loops).
bool gemm_onednn(const Mat& a, const Mat& b, const Mat& c, const float* bias) {
  // oneDNN broadcasts the weights' batch but not the source's: then solve
  // Cᵀ = Bᵀ·Aᵀ (strides only).
  if (a.batch == 1 && c.batch > 1 && b.batch > 1) return bias == nullptr && gemm_onednn(b.t(), a.t(), c.t(), nullptr);
  const int64_t M = c.rows, N = c.cols, K = a.cols;
  std::vector<int64_t> ad{a.batch, M, K}, as{a.bs, a.rs, a.cs}, bd{b.batch, K, N}, bst{b.bs, b.rs, b.cs},
      cd{c.batch, M, N}, cst{c.bs, c.rs, c.cs};
  dn::Key key(1);
  key.add(ad).add(as).add(bd).add(bst).add(cd).add(cst).add(bias != nullptr);
  std::shared_ptr<const MatmulEntry> e;
  try {
    e = matmul_cache().get(key, [&] {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::memory::desc bias_md = bias ? dn::md({1, 1, N}, {N, N, 1}) : dnnl::memory::desc();
      dnnl::matmul::desc d(dn::md(ad, as), dn::md(bd, bst), bias_md, dn::md(cd, cst));
      dnnl::matmul::primitive_desc pd(d, attr, dn::engine());
      return std::make_shared<const MatmulEntry>(MatmulEntry{pd, dnnl::matmul(pd)});
    });
  } catch (const dnnl::error&) {
    return false;
  }
  thread_local dn::Scratch scratch;
  dnnl::engine& eng = dn::engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(e->pd.src_desc(), eng, a.p)},
      {DNNL_ARG_WEIGHTS, dnnl::memory(e->pd.weights_desc(), eng, b.p)},
      {DNNL_ARG_DST, dnnl::memory(e->pd.dst_desc(), eng, c.p)},
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

// A contiguous float32 copy of the matrices M of storage type T.
template <class T>
Mat pack_f32(const Mat& m, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(m.batch * m.rows * m.cols));
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j)
        buf[(b * m.rows + i) * m.cols + j] = static_cast<float>(*m.at<T>(b, i, j));
  return {buf.data(), m.batch, m.rows, m.cols, m.rows * m.cols, m.cols, 1};
}

// BIAS (1-D, strided, may be nullptr) as a contiguous vector of V.
template <class V>
std::vector<V> bias_vector(const Tensor* bias) {
  std::vector<V> out;
  if (bias == nullptr) return out;
  out.resize(static_cast<size_t>(bias->shape[0]));
  sdk::kernel::dispatch_float(bias->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t j = 0; j < out.size(); ++j)
      out[j] = static_cast<V>(static_cast<compute_t<T>>(bias->ptr<T>()[static_cast<int64_t>(j) * bias->strides[0]]));
  });
  return out;
}

// C = A·B (+ BIAS [N]) in dtype DT; every operand may be strided.
void gemm(hal_dtype_e dt, const Mat& a, const Mat& b, const Mat& c, const Tensor* bias) {
  if (c.rows == 0 || c.cols == 0 || c.batch == 0) return;
  if (dt == HAL_DTYPE_FLOAT64) {
    std::vector<double> bv = bias_vector<double>(bias);
    gemm_loops<double>(a, b, c, bias ? bv.data() : nullptr);
    return;
  }
  std::vector<float> bv = bias_vector<float>(bias);
  const float* bp = bias ? bv.data() : nullptr;
  if (dt == HAL_DTYPE_FLOAT32) {
    if (a.cols == 0 || !gemm_onednn(a, b, c, bp)) gemm_loops<float>(a, b, c, bp);
    return;
  }
  sdk::kernel::dispatch_float(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, sdk::kernel::Half> || std::is_same_v<T, sdk::kernel::BFloat16>) {
      std::vector<float> ab, bb, cb(static_cast<size_t>(c.batch * c.rows * c.cols));
      Mat a32 = pack_f32<T>(a, ab), b32 = pack_f32<T>(b, bb);
      Mat c32{cb.data(), c.batch, c.rows, c.cols, c.rows * c.cols, c.cols, 1};
      if (a.cols == 0 || !gemm_onednn(a32, b32, c32, bp)) gemm_loops<float>(a32, b32, c32, bp);
      parallel_for(c.batch * c.rows, 64, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r)
          for (int64_t j = 0; j < c.cols; ++j) *c.at<T>(r / c.rows, r % c.rows, j) = T(cb[r * c.cols + j]);
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
void add_product(const Tensor& out, const Tensor& self, const Mat& a, const Mat& b, const Mat& c, double alpha,
                 double beta) {
  Tensor row;
  if (alpha == 1.0 && beta == 1.0 && as_row_bias(self, c.cols, row)) {
    gemm(out.dtype, a, b, c, &row);
    return;
  }
  gemm(out.dtype, a, b, c, nullptr);
  if (a.cols == 0 && beta != 0.0) {
    scale_add(out, self, 0.0, beta);  // alpha·0: keeps NaN-free zeros
    return;
  }
  scale_add(out, self, alpha, beta);
}

// ---- ops ------------------------------------------------------------------------

void mm_body(const OpCall& c) {
  gemm(c.output(0).dtype, mat2d(c.input(0)), mat2d(c.input(1)), mat2d(c.output(0)), nullptr);
}
HAL_CPU_KERNEL(mm_kernel, mm_body)

void bmm_body(const OpCall& c) {
  gemm(c.output(0).dtype, mat3d(c.input(0)), mat3d(c.input(1)), mat3d(c.output(0)), nullptr);
}
HAL_CPU_KERNEL(bmm_kernel, bmm_body)

void addmm_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  add_product(out, c.input(0), mat2d(c.input(1)), mat2d(c.input(2)), mat2d(out),
              op::addmm::alpha(c).to_double(), op::addmm::beta(c).to_double());
}
HAL_CPU_KERNEL(addmm_kernel, addmm_body)

void baddbmm_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  add_product(out, c.input(0), mat3d(c.input(1)), mat3d(c.input(2)), mat3d(out),
              op::baddbmm::alpha(c).to_double(), op::baddbmm::beta(c).to_double());
}
HAL_CPU_KERNEL(baddbmm_kernel, baddbmm_body)

void matmul_body(const OpCall& c) {
  const Tensor &x = c.input(0), &y = c.input(1), &out = c.output(0);
  std::vector<int64_t> batch;
  sdk::shape_rules::matmul_shape(c, &batch);
  const int nb = static_cast<int>(batch.size());
  // The matrices: a 1-D self is a row, a 1-D other a column.
  Mat a = x.rank == 1 ? Mat{x.data, 1, 1, x.shape[0], 0, 0, x.strides[0]}
                      : Mat{x.data, 1, x.shape[x.rank - 2], x.shape[x.rank - 1], 0, x.strides[x.rank - 2],
                            x.strides[x.rank - 1]};
  Mat b = y.rank == 1 ? Mat{y.data, 1, y.shape[0], 1, 0, y.strides[0], 0}
                      : Mat{y.data, 1, y.shape[y.rank - 2], y.shape[y.rank - 1], 0, y.strides[y.rank - 2],
                            y.strides[y.rank - 1]};
  int out_mat = (x.rank >= 2) + (y.rank >= 2);  // matrix dims in out
  Mat o{out.data, 1, a.rows, b.cols, 0, 0, 0};
  o.rs = x.rank >= 2 ? out.strides[out.rank - out_mat] : 0;
  o.cs = y.rank >= 2 ? out.strides[out.rank - 1] : 0;
  // Per batch dim: the element stride of each operand (0 = broadcast).
  std::vector<std::array<int64_t, 3>> st(nb);
  for (int d = 0; d < nb; ++d) {
    int dx = d - (nb - std::max(x.rank - 2, 0)), dy = d - (nb - std::max(y.rank - 2, 0));
    st[d][0] = dx >= 0 && x.shape[dx] != 1 ? x.strides[dx] : 0;
    st[d][1] = dy >= 0 && y.shape[dy] != 1 ? y.strides[dy] : 0;
    st[d][2] = batch[d] != 1 ? out.strides[d] : 0;
  }
  // Fold the batch dims into one when all three operands allow it.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> strides;
  for (int d = 0; d < nb; ++d) {
    if (batch[d] == 1) continue;
    if (!sizes.empty()) {
      auto& s = strides.back();
      bool fold = true;
      for (int k = 0; k < 3; ++k) fold = fold && s[k] == st[d][k] * batch[d];
      if (fold) {
        sizes.back() *= batch[d];
        s = st[d];
        continue;
      }
    }
    sizes.push_back(batch[d]);
    strides.push_back(st[d]);
  }
  hal_dtype_e dt = out.dtype;
  if (sizes.size() <= 1) {
    int64_t n = sizes.empty() ? 1 : sizes[0];
    auto s = strides.empty() ? std::array<int64_t, 3>{0, 0, 0} : strides[0];
    Mat ab = a, bb = b, ob = o;
    ab.batch = s[0] != 0 ? n : 1;
    ab.bs = s[0];
    bb.batch = s[1] != 0 ? n : 1;
    bb.bs = s[1];
    ob.batch = n;
    ob.bs = s[2];
    gemm(dt, ab, bb, ob, nullptr);
    return;
  }
  // Irregular batch strides: one GEMM per inner run of the innermost dim.
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < sizes.size(); ++d) outer *= sizes[d];
  const size_t es = sdk::dtype_size(dt);
  for (int64_t i = 0; i < outer; ++i) {
    int64_t rem = i, off[3] = {0, 0, 0};
    for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d) {
      int64_t idx = rem % sizes[d];
      rem /= sizes[d];
      for (int k = 0; k < 3; ++k) off[k] += idx * strides[d][k];
    }
    auto s = strides.back();
    int64_t n = sizes.back();
    Mat ab = a, bb = b, ob = o;
    ab.p = static_cast<char*>(a.p) + off[0] * es;
    bb.p = static_cast<char*>(b.p) + off[1] * es;
    ob.p = static_cast<char*>(o.p) + off[2] * es;
    ab.batch = s[0] != 0 ? n : 1;
    ab.bs = s[0];
    bb.batch = s[1] != 0 ? n : 1;
    bb.bs = s[1];
    ob.batch = n;
    ob.bs = s[2];
    gemm(dt, ab, bb, ob, nullptr);
  }
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
  int64_t stride = 1;
  for (int d = tmp.rank - 1; d >= 0; --d) {
    tmp.strides[d] = stride;
    stride *= tmp.shape[d];
  }
  tmp.data = storage.data();
  fold_rows(tmp, m);
  f(m);
  linalg::copy_convert(out, tmp);
}

void linear_body(const OpCall& c) {
  Tensor tmp;
  std::vector<unsigned char> storage;
  Mat x = rows_of(op::linear::input(c), tmp, storage);
  Mat w = mat2d(op::linear::weight(c)).t();
  const Tensor& out = op::linear::out(c);
  write_rows(out, [&](const Mat& o) { gemm(out.dtype, x, w, o, op::linear::bias(c)); });
}
HAL_CPU_KERNEL(linear_kernel, linear_body)

// OUT[j] = Σ_i G[i, j], accumulated in double.
template <class T>
void column_sums(const Mat& g, const Tensor& out) {
  const int64_t N = g.cols;
  constexpr int64_t kBlock = 256;
  parallel_for((N + kBlock - 1) / kBlock, 1, [&](int64_t lo, int64_t hi) {
    double acc[kBlock];
    for (int64_t blk = lo; blk < hi; ++blk) {
      int64_t j0 = blk * kBlock, nj = std::min(kBlock, N - j0);
      std::fill(acc, acc + nj, 0.0);
      for (int64_t i = 0; i < g.rows; ++i) {
        const T* row = g.at<T>(0, i, j0);
        for (int64_t j = 0; j < nj; ++j) acc[j] += static_cast<double>(static_cast<compute_t<T>>(row[j * g.cs]));
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
