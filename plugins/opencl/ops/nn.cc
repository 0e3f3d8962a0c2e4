// OpenCL plugin, "nn" group: softmax and log_softmax with their backward
// ops (here), normalization (norm.cc) and losses (loss.cc). A softmax row
// along DIM of the dense [outer, n, inner] view is one work-group: max,
// sum of exponentials, then the outputs (each item reads its elements
// before writing them, so the output may be the input).
#include "cl_sources.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
using nn::Dense;
using nn::kWorkGroup;
using nn::Ops;

const char* const kSoftmaxSource = cl_source::softmax;  // kernels/softmax.cl

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
