// OpenCL plugin: the "linalg" group's matrix products (mm, bmm, matmul,
// addmm, baddbmm, linear and its backward), float32 and float64, and the
// GEMM every product of the group is; ops/conv.cc and ops/pool.cc hold the
// rest of the group, ops/linalg.hpp what the three share.
//
// Every matrix product is one batched, strided GEMM kernel tiled for local
// memory (each work-group computes a TM x TN tile of C, each work-item a
// WM x WN register block of it): strides of A, B, C and their batch strides
// are arguments, so transposed and permuted views need no copy; an alpha/beta
// epilogue adds a broadcast tensor (addmm's self, a bias). C's column index
// may split in two (j -> j / cw, j % cw), so a convolution writes its
// [N, C, H, W] output through any strides.
#include "linalg.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "cl_sources.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace linalg {
namespace {

// GEMM tiling: a work-group of (TN / WN) x (TM / WM) work-items computes a
// TM x TN tile of C, stepping through K by TK (float32: 32, float64: 16, so
// both tiles take 32 KiB of local memory). Tuned for PoCL on an AVX-512
// CPU: 1024³ float32 went from 2.0 GFLOP/s (64x64 tiles, 4x4 scalar
// blocks) to ~7.3 (128x128, 8 rows x 16-wide vectors per work-item).
constexpr int kTM = 128, kTN = 128, kWM = 8, kWN = 16;

const char* const kSource = cl_source::linalg;  // kernels/linalg.cl

std::string make_source(hal_dtype_e dt) {
  std::string t = cl_type(dt), wn = std::to_string(kWN);
  return cl_prelude({dt}) + "typedef " + t + " T;\ntypedef " + t + wn + " VT;\n" + kDimsTypedef +
         "#define TM " + std::to_string(kTM) + "\n#define TN " + std::to_string(kTN) + "\n#define TK " +
         (dt == HAL_DTYPE_FLOAT64 ? "16" : "32") + "\n#define WM " + std::to_string(kWM) + "\n#define WN " + wn +
         "\n" + kSource;
}

}  // namespace

const std::string& source(hal_dtype_e dt) {
  static const std::string s32 = make_source(HAL_DTYPE_FLOAT32), s64 = make_source(HAL_DTYPE_FLOAT64);
  if (dt == HAL_DTYPE_FLOAT64) return s64;
  if (dt == HAL_DTYPE_FLOAT32) return s32;
  sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, "linalg: no OpenCL kernel for dtype ", sdk::dtype_name(dt));
}

void gemm(ClDevice& dev, const Queue& q, hal_dtype_e dt, const GemmCall& g) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  Launch l(dev, source(dt), "gemm");
  auto arg = [&](const Operand& o, bool split) {
    l.mem(o.mem).value<cl_long>(o.off).value<cl_long>(o.bs).value<cl_long>(o.rs).value<cl_long>(o.cs);
    if (split) l.value<cl_long>(o.cs2);
  };
  arg(g.a, false);
  arg(g.b, false);
  arg(g.c, true);
  Operand s = g.s.off >= 0 ? g.s : Operand{g.c.mem, -1, 0, 0, 0, 0};
  arg(s, true);
  l.value<cl_long>(g.cw > 0 ? g.cw : g.n).value<cl_long>(g.m).value<cl_long>(g.n).value<cl_long>(g.k);
  l.scalar(dt, g.k == 0 ? 0.0 : g.alpha).scalar(dt, g.beta);  // no K: alpha·0, NaN-free
  constexpr size_t lx = kTN / kWN, ly = kTM / kWM;
  size_t global[3] = {static_cast<size_t>((g.n + kTN - 1) / kTN) * lx, static_cast<size_t>((g.m + kTM - 1) / kTM) * ly,
                      static_cast<size_t>(g.batch)};
  size_t local[3] = {lx, ly, 1};
  l.enqueue(q, 3, global, local);
}

void contiguous(int rank, const int64_t* shape, int64_t* st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    st[d] = s;
    s *= shape[d];
  }
}

// dst = src elementwise over SHAPE (rank <= 8), each with its strides.
void copy_nd(ClDevice& dev, const Queue& q, hal_dtype_e dt, int rank, const int64_t* shape, cl_mem dst,
             int64_t d_off, const int64_t* dst_st, cl_mem src, int64_t s_off, const int64_t* src_st) {
  int64_t n = 1;
  Dims sz{}, ds{}, ss{};
  for (int d = 0; d < rank; ++d) {
    n *= shape[d];
    sz.v[d] = shape[d];
    ds.v[d] = dst_st[d];
    ss.v[d] = src_st[d];
  }
  for (int d = rank; d < 8; ++d) sz.v[d] = 1;
  Launch l(dev, source(dt), "copy_nd");
  l.mem(dst).value<cl_long>(d_off).mem(src).value<cl_long>(s_off).value<cl_long>(n).value<cl_int>(rank);
  l.value(sz).value(ds).value(ss);
  l.enqueue(q, global_1d(n), kLocalSize);
}

void channel_sums(ClDevice& dev, const Queue& q, hal_dtype_e dt, const Tensor& out, cl_mem x, int64_t x_off,
                  const int64_t* stride, const int64_t* size) {
  Launch l(dev, source(dt), "channel_sums");
  l.tensor(out).value<cl_long>(out.strides[0]).mem(x).value<cl_long>(x_off).value(v4(stride)).value(v4(size));
  l.enqueue(q, global_1d(size[1]), kLocalSize);
}

namespace {

namespace op = sdk::op;
using sdk::kernel::MatrixView;

// T as rows x cols: itself when its leading dims fold, else a contiguous
// copy in SCRATCH.
Operand rows_operand(ClDevice& dev, const Queue& q, const Tensor& t, std::unique_ptr<Scratch>& scratch,
                     MatrixView& m) {
  if (sdk::kernel::fold_rows(t, m)) return operand(t, m);
  scratch = std::make_unique<Scratch>(dev, t.numel(), t.dtype);
  copy_nd(dev, q, t.dtype, t.rank, t.shape, scratch->mem, 0, t.contiguous_strides().data(), mem_of(t), off_of(t),
          t.strides);
  m.rs = m.cols;
  m.cs = 1;
  return {scratch->mem, 0, 0, m.cols, 1, 0};
}

// Where a GEMM writes OUT as rows x cols: OUT itself when its leading dims
// fold, else a contiguous SCRATCH that finish_rows copies to OUT.
Operand rows_output(ClDevice& dev, const Tensor& out, std::unique_ptr<Scratch>& scratch) {
  MatrixView m;
  if (sdk::kernel::fold_rows(out, m)) return operand(out, m);
  scratch = std::make_unique<Scratch>(dev, out.numel(), out.dtype);
  return {scratch->mem, 0, 0, m.cols, 1, 0};
}
void finish_rows(ClDevice& dev, const Queue& q, const Tensor& out, const std::unique_ptr<Scratch>& scratch) {
  if (!scratch) return;
  copy_nd(dev, q, out.dtype, out.rank, out.shape, mem_of(out), off_of(out), out.strides, scratch->mem, 0,
          out.contiguous_strides().data());
}

// ---- matrix products ------------------------------------------------------------

// OUT (= C) = beta·SELF + alpha·(A·B); SELF (may be nullptr) broadcasts to OUT.
void product(const CallPtr& call, sdk::Stream* stream, const Tensor& x, const MatrixView& a, const Tensor& y,
             const MatrixView& b, const Tensor& out, const MatrixView& c, const Tensor* self = nullptr,
             double alpha = 1, double beta = 0) {
  ClDevice& dev = device_of(*call);
  GemmCall g;
  g.a = operand(x, a);
  g.b = operand(y, b);
  g.c = operand(out, c);
  g.batch = c.batch;
  g.m = c.rows;
  g.n = c.cols;
  g.k = a.cols;
  g.alpha = alpha;
  g.beta = beta;
  if (self != nullptr && beta != 0.0) {
    int64_t st[HAL_TENSOR_MAX_RANK];
    sdk::kernel::broadcast_byte_strides(*self, out.rank, out.shape, st);
    int64_t es = static_cast<int64_t>(self->element_size());
    g.s = {mem_of(*self), off_of(*self), 0, 0, 0, 0};
    if (out.rank == 3) g.s.bs = st[0] / es;
    g.s.rs = st[out.rank - 2] / es;
    g.s.cs = st[out.rank - 1] / es;
  }
  dev.submit(stream, [&](const Queue& q) { gemm(dev, q, out.dtype, g); });
}

void mm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(0), sdk::kernel::matrix_2d(c.input(0)), c.input(1), sdk::kernel::matrix_2d(c.input(1)),
          c.output(0), sdk::kernel::matrix_2d(c.output(0)));
}

void bmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(0), sdk::kernel::matrix_3d(c.input(0)), c.input(1), sdk::kernel::matrix_3d(c.input(1)),
          c.output(0), sdk::kernel::matrix_3d(c.output(0)));
}

void addmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(1), sdk::kernel::matrix_2d(c.input(1)), c.input(2), sdk::kernel::matrix_2d(c.input(2)),
          c.output(0), sdk::kernel::matrix_2d(c.output(0)), &c.input(0), op::addmm::alpha(c).to_double(),
          op::addmm::beta(c).to_double());
}

void baddbmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(1), sdk::kernel::matrix_3d(c.input(1)), c.input(2), sdk::kernel::matrix_3d(c.input(2)),
          c.output(0), sdk::kernel::matrix_3d(c.output(0)), &c.input(0), op::baddbmm::alpha(c).to_double(),
          op::baddbmm::beta(c).to_double());
}

void matmul_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  std::vector<sdk::kernel::Gemm> gemms = sdk::kernel::matmul_gemms(c);
  ClDevice& dev = device_of(c);
  const Tensor &x = c.input(0), &y = c.input(1), &out = c.output(0);
  dev.submit(stream, [&](const Queue& q) {
    for (const sdk::kernel::Gemm& m : gemms) {
      GemmCall g;
      g.a = operand(x, m.a);
      g.b = operand(y, m.b);
      g.c = operand(out, m.c);
      g.batch = m.c.batch;
      g.m = m.c.rows;
      g.n = m.c.cols;
      g.k = m.a.cols;
      gemm(dev, q, out.dtype, g);
    }
  });
}

void linear_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor &x = op::linear::input(c), &w = op::linear::weight(c), &out = op::linear::out(c);
  const Tensor* bias = op::linear::bias(c);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> xs, os;
    MatrixView xm;
    GemmCall g;
    g.a = rows_operand(dev, q, x, xs, xm);
    g.b = operand(w, sdk::kernel::matrix_2d(w).t());
    g.c = rows_output(dev, out, os);
    g.m = xm.rows;
    g.n = w.shape[0];
    g.k = w.shape[1];
    if (bias != nullptr) {
      g.s = {mem_of(*bias), off_of(*bias), 0, 0, bias->strides[0], 0};
      g.beta = 1;
    }
    gemm(dev, q, out.dtype, g);
    finish_rows(dev, q, out, os);
  });
}

void linear_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using lb = op::linear_backward;
  const Tensor &gy = lb::grad_output(c), &x = lb::input(c), &w = lb::weight(c);
  const Tensor &gx = lb::grad_input(c), &gw = lb::grad_weight(c), &gb = lb::grad_bias(c);
  ClDevice& dev = device_of(c);
  hal_dtype_e dt = w.dtype;
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> gs, xs, os;
    MatrixView gm, xm;
    Operand G = rows_operand(dev, q, gy, gs, gm), X = rows_operand(dev, q, x, xs, xm);
    GemmCall gi;  // grad_input = grad_output · weight
    gi.a = G;
    gi.b = operand(w, sdk::kernel::matrix_2d(w));
    gi.c = rows_output(dev, gx, os);
    gi.m = gm.rows;
    gi.n = w.shape[1];
    gi.k = w.shape[0];
    gemm(dev, q, dt, gi);
    finish_rows(dev, q, gx, os);
    GemmCall gwc;  // grad_weight = grad_outputᵀ · input
    gwc.a = G.t();
    gwc.b = X;
    gwc.c = operand(gw, sdk::kernel::matrix_2d(gw));
    gwc.m = w.shape[0];
    gwc.n = w.shape[1];
    gwc.k = gm.rows;
    gemm(dev, q, dt, gwc);
    int64_t size[4] = {gm.rows, gm.cols, 1, 1}, stride[4] = {G.rs, G.cs, 0, 0};
    channel_sums(dev, q, dt, gb, G.mem, G.off, stride, size);
  });
}

}  // namespace
}  // namespace linalg

void register_linalg_ops(sdk::OpRegistry& ops) {
  using namespace linalg;
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::mm>(&mm_kernel, F);
  ops.add<op::bmm>(&bmm_kernel, F);
  ops.add<op::matmul>(&matmul_kernel, F);
  ops.add<op::addmm>(&addmm_kernel, F);
  ops.add<op::baddbmm>(&baddbmm_kernel, F);
  ops.add<op::linear>(&linear_kernel, F);
  ops.add<op::linear_backward>(&linear_backward_kernel, F);
  register_conv_ops(ops);
  register_pool_ops(ops);
}

}  // namespace hal::opencl
