// OpenCL plugin, "nn" group: softmax and log_softmax with their backward
// ops (here), normalization (norm.cc) and losses (loss.cc). A softmax row
// along DIM of the dense [outer, n, inner] view is one work-group: max,
// sum of exponentials, then the outputs (each item reads its elements
// before writing them, so the output may be the input).
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
using nn::Dense;
using nn::kWorkGroup;
using nn::Ops;

const char* const kSoftmaxSource = R"(
// Row r of the [outer, n, inner] view: elements base + j * inner.
__kernel void softmax(__global const T* x, long xo, __global T* y, long yo, long n, long inner, int log_mode) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = (r / inner) * n * inner + r % inner;
  A m = -INFINITY;
  for (long j = l; j < n; j += WG) { A v = (A)x[xo + base + j * inner]; m = v > m ? v : m; }
  m = wg_max(m, red);
  A s = 0;
  for (long j = l; j < n; j += WG) s += exp((A)x[xo + base + j * inner] - m);
  s = wg_sum(s, red);
  if (log_mode) {
    A lse = m + log(s);
    for (long j = l; j < n; j += WG) y[yo + base + j * inner] = (T)((A)x[xo + base + j * inner] - lse);
  } else {
    A inv = (A)1 / s;
    for (long j = l; j < n; j += WG) y[yo + base + j * inner] = (T)(exp((A)x[xo + base + j * inner] - m) * inv);
  }
}
// softmax: gi = y·(g - Σ g·y); log_softmax: gi = g - exp(y)·Σ g.
__kernel void softmax_backward(__global const T* g, long go, __global const T* y, long yo, __global T* gi, long gio,
                               long n, long inner, int log_mode) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = (r / inner) * n * inner + r % inner;
  A s = 0;
  for (long j = l; j < n; j += WG) {
    long k = base + j * inner;
    s += log_mode ? (A)g[go + k] : (A)g[go + k] * (A)y[yo + k];
  }
  s = wg_sum(s, red);
  for (long j = l; j < n; j += WG) {
    long k = base + j * inner;
    A gv = (A)g[go + k], yv = (A)y[yo + k];
    gi[gio + k] = (T)(log_mode ? gv - exp(yv) * s : yv * (gv - s));
  }
}
)";

std::string softmax_source(hal_dtype_e dtype) { return nn::row_prelude(dtype) + kSoftmaxSource; }

// Runs the softmax kernel family along DIM_ATTR: inputs (self) or
// (grad_output, output).
void along_dim(const OpCall& c, sdk::Stream* stream, int64_t dim_attr, bool backward, bool log_mode) {
  const Tensor& dst = c.output(0);
  if (dst.numel() == 0) return;
  int dim = dst.rank == 0 ? 0 : static_cast<int>(dim_attr < 0 ? dim_attr + dst.rank : dim_attr);
  int64_t n = dst.rank == 0 ? 1 : dst.shape[dim], inner = 1;
  for (int d = dim + 1; d < dst.rank; ++d) inner *= dst.shape[d];
  int64_t rows = dst.numel() / n;
  ClDevice& device = device_of(c);
  std::string source = softmax_source(dst.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense a = ops.in(c.input(0));
    Dense b = backward ? ops.in(c.input(1)) : Dense();
    Dense y = ops.out(dst);
    Launch l(device, source, backward ? "softmax_backward" : "softmax");
    Ops::arg(l, a);
    if (backward) Ops::arg(l, b);
    Ops::arg(l, y).value<cl_long>(n).value<cl_long>(inner).value<cl_int>(log_mode ? 1 : 0);
    l.enqueue(q, static_cast<size_t>(rows) * kWorkGroup, kWorkGroup);
    ops.finish(y);
  });
}

void softmax_kernel(const CallPtr& c, sdk::Stream* s) { along_dim(*c, s, op::softmax::dim(*c), false, false); }
void log_softmax_kernel(const CallPtr& c, sdk::Stream* s) { along_dim(*c, s, op::log_softmax::dim(*c), false, true); }
void softmax_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  along_dim(*c, s, op::softmax_backward::dim(*c), true, false);
}
void log_softmax_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  along_dim(*c, s, op::log_softmax_backward::dim(*c), true, true);
}

}  // namespace

void register_nn_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::softmax>(&softmax_kernel, F);
  ops.add<op::log_softmax>(&log_softmax_kernel, F);
  ops.add<op::softmax_backward>(&softmax_backward_kernel, F);
  ops.add<op::log_softmax_backward>(&log_softmax_backward_kernel, F);
  nn::register_norm_ops(ops);
  nn::register_loss_ops(ops);
}

}  // namespace hal::opencl
