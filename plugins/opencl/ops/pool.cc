// OpenCL plugin: the "linalg" group's pools (max_pool2d, avg_pool2d,
// adaptive_avg_pool2d and their backward), float32 and float64: direct
// kernels of the group's program (ops/linalg.hpp), one work-item per output
// (backward: one per (n, c) plane, which owns it).
#include <string>

#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "linalg.hpp"

namespace hal::opencl::linalg {
namespace {

namespace op = sdk::op;
using sdk::kernel::View4;

struct PoolArgs {
  cl_long n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, include_pad, divisor;
};

PoolArgs pool_args(const sdk::shape_rules::PoolGeometry& g) {
  return {g.n, g.c, g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.stride[0], g.stride[1],
          g.padding[0], g.padding[1], g.dilation[0], g.dilation[1], 0, 0};
}

int64_t outputs_of(const PoolArgs& a) { return a.n * a.c * a.oh * a.ow; }

void max_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto g = sdk::shape_rules::pool_geometry(c, 0, true);
  const Tensor &x = c.input(0), &y = c.output(0), &ind = c.output(1);
  PoolArgs a = pool_args(g);
  int64_t total = outputs_of(a);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(x.dtype), "max_pool");
    l.tensor(y).value(v4(View4(y, g.batched, 2).stride)).tensor(ind).value(v4(View4(ind, g.batched, 2).stride));
    l.tensor(x).value(v4(View4(x, g.batched, 2).stride)).value(a).value<cl_long>(total);
    l.enqueue(q, global_1d(total), kLocalSize);
  });
}

void max_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto g = sdk::shape_rules::pool_geometry(c, 1, true);
  const Tensor &gy = c.input(0), &ind = c.input(2), &gx = c.output(0);
  PoolArgs a = pool_args(g);
  int64_t total = outputs_of(a), plane = a.h * a.w;
  V4 is = v4(View4(ind, g.batched, 2).stride);
  int64_t site = status_site("max_pool2d_backward: an index in 'indices' is out of range [0, " +
                             std::to_string(plane) + ")");
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    {
      Launch l(dev, source(gy.dtype), "index_guard");
      l.tensor(ind).value(is).value(a).value<cl_long>(plane).mem(q.status).value<cl_long>(site).value<cl_long>(total);
      l.enqueue(q, global_1d(total), kLocalSize);
    }
    Launch l(dev, source(gy.dtype), "max_pool_backward");
    l.tensor(gx).value(v4(View4(gx, g.batched, 2).stride)).tensor(gy).value(v4(View4(gy, g.batched, 2).stride));
    l.tensor(ind).value(is).value(a).mem(q.status);
    l.enqueue(q, global_1d(a.n * a.c), kLocalSize);
  });
}

template <class Op>
PoolArgs avg_args(const OpCall& c, size_t index, bool& batched) {
  auto g = sdk::shape_rules::pool_geometry(c, index, false);
  batched = g.batched;
  PoolArgs a = pool_args(g);
  a.include_pad = Op::count_include_pad(c) ? 1 : 0;
  a.divisor = Op::divisor_override(c);
  return a;
}

// Runs forward pool kernel NAME: Y from X.
void pool_forward(const OpCall& c, sdk::Stream* stream, const char* name, const PoolArgs& a, bool batched) {
  const Tensor &x = c.input(0), &y = c.output(0);
  int64_t total = outputs_of(a);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(x.dtype), name);
    l.tensor(y).value(v4(View4(y, batched, 2).stride)).tensor(x).value(v4(View4(x, batched, 2).stride));
    l.value(a).value<cl_long>(total);
    l.enqueue(q, global_1d(total), kLocalSize);
  });
}

// Runs backward pool kernel NAME: GX (output 0) from GY (input 0).
void pool_backward(const OpCall& c, sdk::Stream* stream, const char* name, const PoolArgs& a, bool batched) {
  const Tensor &gy = c.input(0), &gx = c.output(0);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(gy.dtype), name);
    l.tensor(gx).value(v4(View4(gx, batched, 2).stride)).tensor(gy).value(v4(View4(gy, batched, 2).stride));
    l.value(a);
    l.enqueue(q, global_1d(a.n * a.c), kLocalSize);
  });
}

void avg_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = avg_args<op::avg_pool2d>(*call, 0, batched);
  pool_forward(*call, stream, "avg_pool", a, batched);
}

void avg_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = avg_args<op::avg_pool2d_backward>(*call, 1, batched);
  pool_backward(*call, stream, "avg_pool_backward", a, batched);
}

// Adaptive pools: input INDEX, the pooled tensor SMALL.
PoolArgs adaptive_args(const OpCall& c, size_t index, const Tensor& small, bool& batched) {
  auto g = sdk::shape_rules::pool_input(c, index);
  g.out[0] = small.shape[small.rank - 2];
  g.out[1] = small.shape[small.rank - 1];
  batched = g.batched;
  return pool_args(g);
}

void adaptive_avg_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = adaptive_args(*call, 0, call->output(0), batched);
  pool_forward(*call, stream, "adaptive_avg_pool", a, batched);
}

void adaptive_avg_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = adaptive_args(*call, 1, call->input(0), batched);
  pool_backward(*call, stream, "adaptive_avg_pool_backward", a, batched);
}

}  // namespace

void register_pool_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::max_pool2d>(&max_pool2d_kernel, F);
  ops.add<op::max_pool2d_backward>(&max_pool2d_backward_kernel, F);
  ops.add<op::avg_pool2d>(&avg_pool2d_kernel, F);
  ops.add<op::avg_pool2d_backward>(&avg_pool2d_backward_kernel, F);
  ops.add<op::adaptive_avg_pool2d>(&adaptive_avg_pool2d_kernel, F);
  ops.add<op::adaptive_avg_pool2d_backward>(&adaptive_avg_pool2d_backward_kernel, F);
}

}  // namespace hal::opencl::linalg
