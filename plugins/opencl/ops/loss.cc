// OpenCL plugin, "nn" group: losses (cross_entropy, nll_loss, mse_loss,
// binary_cross_entropy_with_logits) and their backward ops. Class-index
// losses: a check kernel first reports the lowest out-of-range target
// (OUT_OF_RANGE, as the CPU plugin words it) and every later kernel of the
// op then returns without writing; one work-group per position computes
// its (log-)softmax row. Pointwise losses walk their strided, broadcast
// operands directly (the SDK's geometry). Reductions to a scalar sum
// per-work-group partials, then one final kernel.
#include <sstream>

#include "cl_sources.hpp"
#include "hal/sdk/kernel/rows.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"

namespace hal::opencl::nn {
namespace {

namespace op = sdk::op;

const char* const kClassSource = cl_source::loss_class;  // kernels/loss_class.cl

std::string class_source(hal_dtype_e dtype) { return row_prelude(dtype) + kClassSource; }
hal_dtype_e acc(hal_dtype_e dtype) { return dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// input [N, C, D] (or [C]: N = D = 1), target [N, D].
using sdk::kernel::class_layout;
using sdk::kernel::ClassLayout;

struct ClassLossArgs {
  size_t first;  // index of input
  const Tensor* weight;
  int reduction;
  int64_t ignore;
  double smoothing;  // cross_entropy only
  bool logits;       // cross_entropy: input is logits
};

void queue_check(const OpCall& c, Ops& ops, const Dense& target, const ClassLayout& l, int64_t ignore) {
  std::string site = std::string(c.name()) + ": target {value} in 'target' at position {position} is out of range [0, " +
                     std::to_string(l.c) + ") (and not ignore_index " + std::to_string(ignore) + ")";
  Launch k(ops.device(), class_source(c.input(0).dtype), "check_targets");
  Ops::arg(k, target).value<cl_long>(l.positions()).value<cl_long>(l.c).value<cl_long>(ignore);
  k.mem(ops.queue().status).value<cl_long>(kStatusIndexAt).value<cl_long>(status_site(site));
  k.enqueue(ops.queue(), kWorkGroup, kWorkGroup);
}

void class_loss_forward(const OpCall& c, sdk::Stream* stream, const ClassLossArgs& a) {
  const Tensor& input = c.input(0);
  ClassLayout l = class_layout(input);
  ClDevice& device = device_of(c);
  hal_dtype_e dt = input.dtype;
  std::string source = class_source(dt);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense x = ops.in(input), t = ops.in(c.input(1)), w = ops.in(a.weight);
    Dense out = ops.out(c.output(0));
    queue_check(c, ops, t, l, a.ignore);
    int64_t p = l.positions();
    cl_mem loss = ops.temp(dt, a.reduction ? p : 0), wsel = ops.temp(dt, a.reduction ? p : 0);
    {
      Launch k(device, source, "class_loss");
      for (const Dense* d : {&x, &t, &w, &out}) Ops::arg(k, *d);
      k.mem(loss).mem(wsel).value<cl_long>(l.c).value<cl_long>(l.d).value<cl_long>(a.ignore);
      k.scalar(acc(dt), a.smoothing).value<cl_int>(a.logits ? 1 : 0).value<cl_int>(a.reduction ? 1 : 0).mem(q.status);
      k.enqueue(q, static_cast<size_t>(p) * kWorkGroup, kWorkGroup);
    }
    if (a.reduction) {
      cl_mem partial = ops.temp(dt, 2 * kPartialGroups);
      ops.partial_sum(dt, loss, 0, p, partial, 0);
      ops.partial_sum(dt, wsel, 0, p, partial, 1);
      ops.final_sum(dt, partial, out, a.reduction == 1 ? 2 : 1, 1.0);
    }
    ops.finish(out);
  });
}

// (grad_output, input, target, weight?) -> grad_input.
void class_loss_backward(const OpCall& c, sdk::Stream* stream, const ClassLossArgs& a) {
  const Tensor& input = c.input(1);
  ClassLayout l = class_layout(input);
  ClDevice& device = device_of(c);
  hal_dtype_e dt = input.dtype;
  std::string source = class_source(dt);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense g = ops.in(c.input(0)), x = ops.in(input), t = ops.in(c.input(2)), w = ops.in(a.weight);
    Dense dx = ops.out(c.output(0));
    queue_check(c, ops, t, l, a.ignore);
    cl_mem dn = ops.temp(dt, 2);
    {
      Launch k(device, source, "class_denom");
      Ops::arg(Ops::arg(k, t), w).value<cl_long>(l.positions()).value<cl_long>(l.c).value<cl_long>(a.ignore);
      k.mem(dn).mem(q.status);
      k.enqueue(q, kWorkGroup, kWorkGroup);
    }
    {
      Launch k(device, source, "class_loss_backward");
      for (const Dense* d : {&g, &x, &t, &w, &dx}) Ops::arg(k, *d);
      k.mem(dn).value<cl_long>(l.c).value<cl_long>(l.d).value<cl_long>(a.ignore).scalar(acc(dt), a.smoothing);
      k.value<cl_int>(a.logits ? 1 : 0).value<cl_int>(a.reduction).mem(q.status);
      k.enqueue(q, static_cast<size_t>(l.positions()) * kWorkGroup, kWorkGroup);
    }
    ops.finish(dx);
  });
}

void cross_entropy_kernel(const CallPtr& call, sdk::Stream* s) {
  const OpCall& c = *call;
  class_loss_forward(c, s, {0, op::cross_entropy::weight(c), reduction_code(op::cross_entropy::reduction(c)),
                            op::cross_entropy::ignore_index(c), op::cross_entropy::label_smoothing(c), true});
}
void nll_loss_kernel(const CallPtr& call, sdk::Stream* s) {
  const OpCall& c = *call;
  class_loss_forward(c, s, {0, op::nll_loss::weight(c), reduction_code(op::nll_loss::reduction(c)),
                            op::nll_loss::ignore_index(c), 0.0, false});
}
void cross_entropy_backward_kernel(const CallPtr& call, sdk::Stream* s) {
  const OpCall& c = *call;
  class_loss_backward(c, s, {1, op::cross_entropy_backward::weight(c),
                             reduction_code(op::cross_entropy_backward::reduction(c)),
                             op::cross_entropy_backward::ignore_index(c),
                             op::cross_entropy_backward::label_smoothing(c), true});
}
void nll_loss_backward_kernel(const CallPtr& call, sdk::Stream* s) {
  const OpCall& c = *call;
  class_loss_backward(c, s, {1, op::nll_loss_backward::weight(c), reduction_code(op::nll_loss_backward::reduction(c)),
                             op::nll_loss_backward::ignore_index(c), 0.0, false});
}

// ---- pointwise losses --------------------------------------------------------------

// Operands: 0 the per-element result (the output, or dense scratch for a
// reduction), 1 input, 2 target, 3 weight?, 4 pos_weight?, 5 grad_output
// (backward); absent ones have offset -1.
std::string pointwise_source(hal_dtype_e dtype) {
  std::ostringstream s;
  s << row_prelude(dtype) << kDimsTypedef
    << "__kernel void pointwise(__global T* in0, long off0, __global const T* in1, long off1, "
       "__global const T* in2, long off2, __global const T* in3, long off3, __global const T* in4, long off4, "
       "__global const T* in5, long off5, long n, "
    << geometry_params(6) << ", int bce, int backward, int reduction, A inv_n) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n) return;\n"
    << offset_code(6) << R"(
  A xi = (A)in1[o1], ti = (A)in2[o2];
  A r;
  if (!backward) {
    if (bce) {
      A lw = off4 >= 0 ? (A)1 + ((A)in4[o4] - (A)1) * ti : (A)1;
      A softplus = fmax(-xi, (A)0) + log1p(exp(-fabs(xi)));
      r = ((A)1 - ti) * xi + lw * softplus;
      if (off3 >= 0) r *= (A)in3[o3];
    } else {
      r = (xi - ti) * (xi - ti);
    }
  } else {
    A gi = reduction == 0 ? (A)in5[o5] : (A)in5[o5] * inv_n;
    if (bce) {
      A sig = (A)1 / ((A)1 + exp(-xi));
      A tp = off4 >= 0 ? (A)in4[o4] * ti : ti;
      r = (tp + (A)1 - ti) * sig - tp;
      if (off3 >= 0) r *= (A)in3[o3];
    } else {
      r = (A)2 * (xi - ti);
    }
    r *= gi;
  }
  in0[o0] = (T)r;
}
)";
  return s.str();
}

// mse_loss (BCE false) or binary_cross_entropy_with_logits on inputs from
// FIRST: (input, target, weight?, pos_weight?); BACKWARD: input 0 is
// grad_output and the result grad_input.
void pointwise_loss(const OpCall& c, sdk::Stream* stream, bool bce, bool backward, int reduction) {
  const size_t first = backward ? 1 : 0;
  const Tensor& input = c.input(first);
  const Tensor& out = c.output(0);
  hal_dtype_e dt = input.dtype;
  int64_t n = input.numel();
  bool to_scratch = !backward && reduction != 0;
  Tensor dense = input;  // the scratch's layout: input's shape, row-major
  dense.set_contiguous_strides();
  const Tensor* w = bce ? c.optional_input(first + 2) : nullptr;
  const Tensor* pw = bce ? c.optional_input(first + 3) : nullptr;
  const Tensor* g = backward ? &c.input(0) : nullptr;
  Geometry geo(input, {to_scratch ? &dense : &out, &input, &c.input(first + 1), w, pw, g});
  if (!to_scratch && n == 0) return;
  ClDevice& device = device_of(c);
  std::string source = pointwise_source(dt);
  double inv_n = reduction == 1 ? 1.0 / static_cast<double>(n) : 1.0;
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    cl_mem scratch = to_scratch ? ops.temp(dt, n) : nullptr;
    if (n > 0) {
      Launch k(device, source, "pointwise");
      if (to_scratch) k.mem(scratch).value<cl_long>(0);
      else k.tensor(out);
      k.tensor(input).tensor(c.input(first + 1)).optional_tensor(w, q.status).optional_tensor(pw, q.status);
      k.optional_tensor(g, q.status).value<cl_long>(n);
      geometry_args(k, geo);
      k.value<cl_int>(bce ? 1 : 0).value<cl_int>(backward ? 1 : 0).value<cl_int>(reduction).scalar(acc(dt), inv_n);
      k.enqueue(q, global_1d(n), kLocalSize);
    }
    if (to_scratch) {
      cl_mem partial = ops.temp(dt, 2 * kPartialGroups);
      ops.partial_sum(dt, scratch, 0, n, partial, 0);
      Dense o = ops.out(out);
      ops.final_sum(dt, partial, o, reduction == 1 ? 3 : 1, static_cast<double>(n));
      ops.finish(o);
    }
  });
}

void mse_loss_kernel(const CallPtr& c, sdk::Stream* s) {
  pointwise_loss(*c, s, false, false, reduction_code(op::mse_loss::reduction(*c)));
}
void mse_loss_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  pointwise_loss(*c, s, false, true, reduction_code(op::mse_loss_backward::reduction(*c)));
}
void bce_logits_kernel(const CallPtr& c, sdk::Stream* s) {
  pointwise_loss(*c, s, true, false, reduction_code(op::binary_cross_entropy_with_logits::reduction(*c)));
}
void bce_logits_backward_kernel(const CallPtr& c, sdk::Stream* s) {
  pointwise_loss(*c, s, true, true, reduction_code(op::binary_cross_entropy_with_logits_backward::reduction(*c)));
}

}  // namespace

void register_loss_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::cross_entropy>(&cross_entropy_kernel, F);
  ops.add<op::cross_entropy_backward>(&cross_entropy_backward_kernel, F);
  ops.add<op::nll_loss>(&nll_loss_kernel, F);
  ops.add<op::nll_loss_backward>(&nll_loss_backward_kernel, F);
  ops.add<op::mse_loss>(&mse_loss_kernel, F);
  ops.add<op::mse_loss_backward>(&mse_loss_backward_kernel, F);
  ops.add<op::binary_cross_entropy_with_logits>(&bce_logits_kernel, F);
  ops.add<op::binary_cross_entropy_with_logits_backward>(&bce_logits_backward_kernel, F);
}

}  // namespace hal::opencl::nn
