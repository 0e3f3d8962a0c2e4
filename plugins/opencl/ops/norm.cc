// OpenCL plugin, "nn" group: layer_norm, rms_norm, group_norm, batch_norm
// and their backward ops. Statistics of a row (layer/rms norm), a (sample,
// group) or a channel are one work-group's tree reductions in A (float;
// double for float64); per-feature gradients are one work-item per feature
// looping over the rows. Per-channel parameters are read by the statistics
// kernel before it writes (batch_norm's running stats may be updated in place).
#include <cfloat>

#include "cl_sources.hpp"
#include "hal/sdk/kernel/rows.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"

namespace hal::opencl::nn {
namespace {

namespace op = sdk::op;

const char* const kNormSource = cl_source::norm;  // kernels/norm.cl

std::string norm_source(hal_dtype_e dtype) { return row_prelude(dtype) + kNormSource; }
hal_dtype_e acc(hal_dtype_e dtype) { return dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// Rows of a normalization over trailing dims (M rows of D), and [N, C, HW]
// of an [N, C, *] input.
using sdk::kernel::nchw;
using sdk::kernel::Nchw;
using sdk::kernel::Rows;
using sdk::kernel::split_rows;

// layer_norm: (input, weight?, bias?) -> out, mean, rstd; rms_norm:
// (input, weight?) -> out, rstd.
void norm_forward(const OpCall& c, sdk::Stream* stream, size_t normalized_dims, double eps, bool rms) {
  const Tensor& input = c.input(0);
  Rows rows = split_rows(input, normalized_dims);
  if (rms && eps < 0) eps = input.dtype == HAL_DTYPE_FLOAT64 ? DBL_EPSILON : FLT_EPSILON;
  if (rows.m == 0) return;
  ClDevice& device = device_of(c);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense x = ops.in(input), w = ops.in(c.optional_input(1)), b = ops.in(rms ? nullptr : c.optional_input(2));
    Dense y = ops.out(c.output(0)), mean = rms ? ops.in(nullptr) : ops.out(c.output(1)),
          rstd = ops.out(c.output(rms ? 1 : 2));
    Launch l(device, norm_source(input.dtype), "norm_forward");
    for (const Dense* d : {&x, &w, &b, &y, &mean, &rstd}) Ops::arg(l, *d);
    l.value<cl_long>(rows.d).scalar(acc(input.dtype), eps).value<cl_int>(rms ? 1 : 0);
    l.enqueue(q, static_cast<size_t>(rows.m) * kWorkGroup, kWorkGroup);
    ops.finish(y);
    ops.finish(mean);
    ops.finish(rstd);
  });
}

void layer_norm_kernel(const CallPtr& c, sdk::Stream* s) {
  norm_forward(*c, s, op::layer_norm::normalized_shape(*c).size(), op::layer_norm::eps(*c), false);
}
void rms_norm_kernel(const CallPtr& c, sdk::Stream* s) {
  norm_forward(*c, s, op::rms_norm::normalized_shape(*c).size(), op::rms_norm::eps(*c), true);
}

// layer_norm_backward: (grad_out, input, mean, rstd, weight?) -> grad_input,
// grad_weight, grad_bias; rms_norm_backward: (grad_out, input, rstd,
// weight?) -> grad_input, grad_weight.
void norm_backward(const OpCall& c, sdk::Stream* stream, size_t normalized_dims, bool rms) {
  const Tensor& input = c.input(1);
  Rows rows = split_rows(input, normalized_dims);
  ClDevice& device = device_of(c);
  std::string source = norm_source(input.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dy = ops.in(c.input(0)), x = ops.in(input), mean = ops.in(rms ? nullptr : &c.input(2)),
          rstd = ops.in(c.input(rms ? 2 : 3)), w = ops.in(c.optional_input(rms ? 3 : 4));
    Dense dx = ops.out(c.output(0)), dw = ops.out(c.output(1)), db = rms ? ops.in(nullptr) : ops.out(c.output(2));
    if (rows.m > 0) {
      Launch l(device, source, "norm_backward");
      for (const Dense* d : {&dy, &x, &mean, &rstd, &w, &dx}) Ops::arg(l, *d);
      l.value<cl_long>(rows.d).value<cl_int>(rms ? 1 : 0);
      l.enqueue(q, static_cast<size_t>(rows.m) * kWorkGroup, kWorkGroup);
    }
    Launch p(device, source, "norm_param_grads");
    for (const Dense* d : {&dy, &x, &mean, &rstd, &dw, &db}) Ops::arg(p, *d);
    p.value<cl_long>(rows.m).value<cl_long>(rows.d).value<cl_int>(rms ? 1 : 0);
    p.enqueue(q, global_1d(rows.d), kLocalSize);
    ops.finish(dx);
    ops.finish(dw);
    ops.finish(db);
  });
}

void layer_norm_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  norm_backward(*c, s, op::layer_norm_backward::normalized_shape(*c).size(), false);
}
void rms_norm_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  norm_backward(*c, s, op::rms_norm_backward::normalized_shape(*c).size(), true);
}

void group_norm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& input = c.input(0);
  Nchw s = nchw(input);
  int64_t groups = op::group_norm::num_groups(c);
  if (s.n * groups == 0) return;
  ClDevice& device = device_of(c);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense x = ops.in(input), w = ops.in(c.optional_input(1)), b = ops.in(c.optional_input(2));
    Dense y = ops.out(c.output(0)), mean = ops.out(c.output(1)), rstd = ops.out(c.output(2));
    Launch l(device, norm_source(input.dtype), "group_norm");
    for (const Dense* d : {&x, &w, &b, &y, &mean, &rstd}) Ops::arg(l, *d);
    l.value<cl_long>(s.c).value<cl_long>(s.hw).value<cl_long>(groups).scalar(acc(input.dtype),
                                                                               op::group_norm::eps(c));
    l.enqueue(q, static_cast<size_t>(s.n * groups) * kWorkGroup, kWorkGroup);
    ops.finish(y);
    ops.finish(mean);
    ops.finish(rstd);
  });
}

// (grad_out, input, mean, rstd, weight?) -> grad_input, grad_weight, grad_bias.
void group_norm_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& input = c.input(1);
  Nchw s = nchw(input);
  int64_t groups = op::group_norm_backward::num_groups(c);
  ClDevice& device = device_of(c);
  std::string source = norm_source(input.dtype);
  hal_dtype_e a = acc(input.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dy = ops.in(c.input(0)), x = ops.in(input), mean = ops.in(c.input(2)), rstd = ops.in(c.input(3)),
          w = ops.in(c.optional_input(4));
    Dense dx = ops.out(c.output(0)), dw = ops.out(c.output(1)), db = ops.out(c.output(2));
    cl_mem ds = ops.temp(a, s.n * s.c), dbs = ops.temp(a, s.n * s.c);
    {
      Launch l(device, source, "gn_channel_sums");
      Ops::arg(Ops::arg(l, dy), x).mem(ds).mem(dbs).value<cl_long>(s.hw);
      l.enqueue(q, static_cast<size_t>(s.n * s.c) * kWorkGroup, kWorkGroup);
    }
    {
      Launch l(device, source, "gn_input_grad");
      for (const Dense* d : {&dy, &x, &mean, &rstd, &w}) Ops::arg(l, *d);
      l.mem(ds).mem(dbs);
      Ops::arg(l, dx).value<cl_long>(s.c).value<cl_long>(s.hw).value<cl_long>(groups);
      l.enqueue(q, static_cast<size_t>(s.n * groups) * kWorkGroup, kWorkGroup);
    }
    {
      Launch l(device, source, "gn_param_grads");
      Ops::arg(Ops::arg(l, mean), rstd).mem(ds).mem(dbs);
      Ops::arg(Ops::arg(l, dw), db).value<cl_long>(s.n).value<cl_long>(s.c).value<cl_long>(groups);
      l.enqueue(q, global_1d(s.c), kLocalSize);
    }
    ops.finish(dx);
    ops.finish(dw);
    ops.finish(db);
  });
}

void batch_norm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& input = c.input(0);
  Nchw s = nchw(input);
  bool training = op::batch_norm::training(c);
  ClDevice& device = device_of(c);
  std::string source = norm_source(input.dtype);
  hal_dtype_e a = acc(input.dtype);
  if (s.c == 0) return;
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense x = ops.in(input), w = ops.in(c.optional_input(1)), b = ops.in(c.optional_input(2)),
          rm = ops.in(op::batch_norm::running_mean(c)), rv = ops.in(op::batch_norm::running_var(c));
    Dense y = ops.out(c.output(0)), smean = ops.out(c.output(1)), sinv = ops.out(c.output(2)),
          rm_out = ops.out(c.output(3)), rv_out = ops.out(c.output(4));
    cl_mem stats = ops.temp(a, 2 * s.c);
    {
      Launch l(device, source, "bn_stats");
      Ops::arg(Ops::arg(Ops::arg(l, x), rm), rv).mem(stats);
      for (const Dense* d : {&smean, &sinv, &rm_out, &rv_out}) Ops::arg(l, *d);
      l.value<cl_long>(s.n).value<cl_long>(s.c).value<cl_long>(s.hw).value<cl_int>(training ? 1 : 0);
      l.scalar(a, op::batch_norm::momentum(c)).scalar(a, op::batch_norm::eps(c));
      l.enqueue(q, static_cast<size_t>(s.c) * kWorkGroup, kWorkGroup);
    }
    int64_t total = input.numel();
    if (total > 0) {
      Launch l(device, source, "bn_apply");
      Ops::arg(Ops::arg(Ops::arg(l, x), w), b).mem(stats);
      Ops::arg(l, y).value<cl_long>(total).value<cl_long>(s.c).value<cl_long>(s.hw);
      l.enqueue(q, global_1d(total), kLocalSize);
    }
    for (Dense* d : {&y, &smean, &sinv, &rm_out, &rv_out}) ops.finish(*d);
  });
}

// (grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?) -> grad_input, grad_weight, grad_bias.
void batch_norm_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& input = c.input(1);
  Nchw s = nchw(input);
  bool training = op::batch_norm_backward::training(c);
  if (s.c == 0) return;
  ClDevice& device = device_of(c);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dy = ops.in(c.input(0)), x = ops.in(input), w = ops.in(c.optional_input(2)),
          mean = ops.in(c.optional_input(training ? 5 : 3)), inv = ops.in(c.optional_input(training ? 6 : 4));
    Dense dx = ops.out(c.output(0)), dw = ops.out(c.output(1)), db = ops.out(c.output(2));
    Launch l(device, norm_source(input.dtype), "bn_backward");
    for (const Dense* d : {&dy, &x, &w, &mean, &inv, &dx, &dw, &db}) Ops::arg(l, *d);
    l.value<cl_long>(s.n).value<cl_long>(s.c).value<cl_long>(s.hw).value<cl_int>(training ? 1 : 0);
    l.scalar(acc(input.dtype), op::batch_norm_backward::eps(c));
    l.enqueue(q, static_cast<size_t>(s.c) * kWorkGroup, kWorkGroup);
    ops.finish(dx);
    ops.finish(dw);
    ops.finish(db);
  });
}

}  // namespace

void register_norm_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::layer_norm>(&layer_norm_kernel, F);
  ops.add<op::layer_norm_backward>(&layer_norm_backward_kernel, F);
  ops.add<op::rms_norm>(&rms_norm_kernel, F);
  ops.add<op::rms_norm_backward>(&rms_norm_backward_kernel, F);
  ops.add<op::group_norm>(&group_norm_kernel, F);
  ops.add<op::group_norm_backward>(&group_norm_backward_kernel, F);
  ops.add<op::batch_norm>(&batch_norm_kernel, F);
  ops.add<op::batch_norm_backward>(&batch_norm_backward_kernel, F);
}

}  // namespace hal::opencl::nn
