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
using nn::Dense;
using nn::Ops;

std::string rnn_source(hal_dtype_e dtype) { return nn::row_prelude(dtype) + cl_source::rnn; }

// Runs KERNEL over the B·H items with the inputs and then the outputs of C
// as (buffer, offset) pairs, then B and H.
void run_cell(const CallPtr& call, sdk::Stream* stream, const char* kernel, int64_t b, int64_t h) {
  const OpCall& c = *call;
  if (b * h == 0) return;
  ClDevice& device = device_of(c);
  const std::string source = rnn_source(c.input(0).dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    std::vector<Dense> ins, outs;
    ins.reserve(c.input_count());
    outs.reserve(c.output_count());
    for (size_t i = 0; i < c.input_count(); ++i) ins.push_back(ops.in(c.optional_input(i)));
    for (size_t i = 0; i < c.output_count(); ++i) outs.push_back(ops.out(c.output(i)));
    Launch l(device, source, kernel);
    for (const Dense& d : ins) Ops::arg(l, d);
    for (const Dense& d : outs) Ops::arg(l, d);
    l.value<cl_long>(b).value<cl_long>(h);
    l.enqueue(q, global_1d(b * h), kLocalSize);
    for (Dense& d : outs) ops.finish(d);
  });
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
