// OpenCL plugin, "random" group: uniform, normal, bernoulli, dropout — the
// catalog's Philox4x32-10 streams (sdk/catalog/ops/random.toml, and its host
// rendering sdk/include/hal/sdk/kernel/philox.hpp), bit for bit: one
// work-item per 128-bit block of the stream, which holds the words of
// 4 elements (2 for float64, whose elements take two words each).
#include <sstream>

#include "cl_sources.hpp"
#include "elementwise.hpp"
#include "hal/sdk/kernel/philox.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
namespace philox = sdk::kernel::philox;

// One program per float dtype T, after the SDK's portable Philox source
// (philox::kPortableSource: the stream and which words feed which element,
// the same code the CPU plugin runs): block B of stream (seed, offset) feeds
// elements EPB·B .. EPB·B + EPB - 1 (EPB = 4, or 2 for float64's two-word
// elements).
const char* const kRandomSource = cl_source::random;  // kernels/random.cl

std::string random_source(hal_dtype_e dtype) {
  std::ostringstream s;
  s << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    << philox::kOpenClTypedefs << philox::kPortableSource << "\ntypedef " << cl_type(dtype) << " T;\n#define WIDE "
    << (dtype == HAL_DTYPE_FLOAT64 ? 1 : 0) << "\n"
    << kRandomSource;
  return s.str();
}

uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

// Blocks covering N elements of DTYPE (normal's odd N rounds up: same count).
size_t blocks(int64_t n, hal_dtype_e dtype) {
  int64_t per = 4 / static_cast<int64_t>(philox::words_per_element(dtype));
  return static_cast<size_t>((n + per - 1) / per);
}

struct Layout {
  Dims sz{}, st{};
};
Layout layout(const Tensor& t) {
  Layout l;
  for (int d = 0; d < t.rank; ++d) {
    l.sz.v[d] = t.shape[d];
    l.st.v[d] = t.strides[d];
  }
  return l;
}

template <class AddArgs>
void launch(const OpCall& c, sdk::Stream* stream, const char* name, hal_dtype_e dtype, int64_t n, AddArgs&& add) {
  if (n == 0) return;
  ClDevice& device = device_of(c);
  const std::string source = random_source(dtype);
  device.programs().kernel(source, name);
  device.submit(stream, [&](const Queue& q) {
    Launch l(device, source, name);
    add(l, q);
    l.enqueue(q, global_1d(static_cast<int64_t>(blocks(n, dtype))), kLocalSize);
  });
}

void uniform_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& out = c.output(0);
  Layout g = layout(out);
  launch(c, stream, "uniform", out.dtype, out.numel(), [&](Launch& l, const Queue&) {
    l.tensor(out).value<cl_long>(out.numel()).value<cl_int>(out.rank).value(g.sz).value(g.st);
    l.value<cl_ulong>(u64(op::uniform::seed(c))).value<cl_ulong>(u64(op::uniform::offset(c)));
    if (out.dtype == HAL_DTYPE_FLOAT64) {
      double lo = op::uniform::from(c), hi = op::uniform::to(c);
      l.value<cl_double>(lo).value<cl_double>(hi - lo);
    } else {
      float lo = static_cast<float>(op::uniform::from(c)), hi = static_cast<float>(op::uniform::to(c));
      l.value<cl_float>(lo).value<cl_float>(hi - lo);
    }
  });
}

void normal_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& out = c.output(0);
  Layout g = layout(out);
  launch(c, stream, "normal", out.dtype, out.numel(), [&](Launch& l, const Queue&) {
    l.tensor(out).value<cl_long>(out.numel()).value<cl_int>(out.rank).value(g.sz).value(g.st);
    l.value<cl_ulong>(u64(op::normal::seed(c))).value<cl_ulong>(u64(op::normal::offset(c)));
    l.scalar(out.dtype, op::normal::mean(c)).scalar(out.dtype, op::normal::std_(c));
  });
}

void bernoulli_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const int64_t n = self.numel();
  if (n == 0) return;
  Layout g = layout(self), o = layout(out);
  ClDevice& device = device_of(c);
  const std::string source = random_source(self.dtype);
  device.programs().kernel(source, "bernoulli");
  const int64_t site = status_site("bernoulli: probability outside [0, 1] in 'self'");
  device.submit(stream, [&](const Queue& q) {
    {
      Launch l(device, source, "bernoulli_check");
      l.tensor(self).value<cl_long>(n).value<cl_int>(self.rank).value(g.sz).value(g.st);
      l.mem(q.status).value<cl_long>(kStatusFloatOutOfRange).value<cl_long>(site);
      l.enqueue(q, global_1d(n), kLocalSize);
    }
    Launch l(device, source, "bernoulli");
    l.tensor(out).tensor(self).value<cl_long>(n).value<cl_int>(self.rank).value(g.sz).value(o.st).value(g.st);
    l.value<cl_ulong>(u64(op::bernoulli::seed(c))).value<cl_ulong>(u64(op::bernoulli::offset(c))).mem(q.status);
    l.enqueue(q, global_1d(static_cast<int64_t>(blocks(n, self.dtype))), kLocalSize);
  });
}

void dropout_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const Tensor& mask = c.output(1);
  const double p = op::dropout::p(c);
  if (!op::dropout::train(c)) {
    ElementwiseKernel copy;
    copy.expr = "x0";
    copy.compute = out.dtype;
    copy.inputs = {&self};
    launch_elementwise(device_of(c), stream, copy, out);
    ElementwiseKernel ones;
    ones.expr = "1";
    ones.compute = HAL_DTYPE_BOOL;
    launch_elementwise(device_of(c), stream, ones, mask);
    return;
  }
  Layout g = layout(self), o = layout(out), m = layout(mask);
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  launch(c, stream, "dropout", self.dtype, self.numel(), [&](Launch& l, const Queue&) {
    l.tensor(out).tensor(mask).tensor(self).value<cl_long>(self.numel()).value<cl_int>(self.rank);
    l.value(g.sz).value(o.st).value(m.st).value(g.st);
    l.value<cl_ulong>(u64(op::dropout::seed(c))).value<cl_ulong>(u64(op::dropout::offset(c)));
    l.value<cl_double>(1.0 - p).scalar(self.dtype, scale);
  });
}

}  // namespace

void register_random_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::uniform>(&uniform_kernel, F);
  ops.add<op::normal>(&normal_kernel, F);
  ops.add<op::bernoulli>(&bernoulli_kernel, F);
  ops.add<op::dropout>(&dropout_kernel, F);
}

}  // namespace hal::opencl
