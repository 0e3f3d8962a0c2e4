// OpenCL kernels of the "rnn" group: LSTM / GRU cells and their gradients
// (kernels/rnn.cl; formulas in sdk/catalog/ops/rnn.toml). One work item per
// (row, hidden unit), computed in float (double for float64); strided
// operands arrive as dense copies (nn::Ops).
#include <string>
#include <vector>

#include "cl_sources.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;

std::string rnn_source(hal_dtype_e dtype) { return nn::row_prelude(dtype) + cl_source::rnn; }

// Runs KERNEL over the B·H items with the call's operands, then B and H.
void run_cell(const CallPtr& call, sdk::Stream* stream, const char* kernel, int64_t b, int64_t h) {
  nn::run_dense(call, stream, rnn_source(call->input(0).dtype), kernel, b * h,
                [&](Launch& l) { l.value<cl_long>(b).value<cl_long>(h); });
}

// The state input (cx / hx / grad_hy) is [B, H] in every op of the group.
void lstm_cell_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& cx = op::lstm_cell::cx(*call);
  run_cell(call, stream, "rnn_lstm_cell", cx.shape[0], cx.shape[1]);
}
void lstm_cell_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& cx = op::lstm_cell_backward::cx(*call);
  run_cell(call, stream, "rnn_lstm_cell_backward", cx.shape[0], cx.shape[1]);
}
void gru_cell_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& hx = op::gru_cell::hx(*call);
  run_cell(call, stream, "rnn_gru_cell", hx.shape[0], hx.shape[1]);
}
void gru_cell_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& g = op::gru_cell_backward::grad_hy(*call);
  run_cell(call, stream, "rnn_gru_cell_backward", g.shape[0], g.shape[1]);
}

}  // namespace

void register_rnn_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::lstm_cell>(&lstm_cell_kernel, F);
  ops.add<op::lstm_cell_backward>(&lstm_cell_backward_kernel, F);
  ops.add<op::gru_cell>(&gru_cell_kernel, F);
  ops.add<op::gru_cell_backward>(&gru_cell_backward_kernel, F);
}

}  // namespace hal::opencl
