// OpenCL plugin, "data" group: arange, cat, stack, split, pad, flip, roll,
// repeat, tril, triu, one_hot (copy and fill are elementwise ops).
//
// cat, stack, split and flip are strided copies between views (a slice of
// the output, a narrowed or reversed input) through launch_elementwise.
// pad, roll, repeat, tril and triu share one gather kernel: each output
// element computes its source coordinates dim by dim (the shapes, strides and
// per-dim parameters are runtime arguments), so one program per element size
// serves every shape, dtype and mode of these ops.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "cl_sources.hpp"
#include "elementwise.hpp"
#include "hal/sdk/kernel/view.hpp"
#include "hal/sdk/kernel/wrap.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;

using sdk::kernel::positive_mod;
using sdk::kernel::wrap_dim;

// T restricted to [BEGIN, BEGIN + SIZE) along DIM.
Tensor narrow(const Tensor& t, int dim, int64_t begin, int64_t size) {
  Tensor v = t;
  v.byte_offset = static_cast<uint64_t>(static_cast<int64_t>(t.byte_offset) +
                                        begin * t.strides[dim] * static_cast<int64_t>(t.element_size()));
  v.shape[dim] = size;
  return v;
}

// OUT = IN (converted to OUT's dtype, IN broadcast to OUT's shape).
void copy_view(ClDevice& device, sdk::Stream* stream, const Tensor& out, const Tensor& in) {
  ElementwiseKernel k;
  k.expr = "x0";
  k.compute = out.dtype;
  k.inputs = {&in};
  launch_elementwise(device, stream, k, out);
}

// ---- the gather kernel ---------------------------------------------------------------

// How output coordinate c of a dim maps to the source coordinate j (m: the
// source dim's size, a: the dim's parameter).
enum GatherMode {
  kPadConstant = 0,  // j = c - a; outside [0, m): the fill value
  kPadReflect = 1,   // j = c - a, mirrored at the edges (edge not repeated)
  kPadReplicate = 2, // j = c - a, clamped to [0, m)
  kRoll = 3,         // j = (c - a) mod m, a in [0, m)
  kRepeat = 4,       // j = c mod m
  kFlatRoll = 5,     // the row-major index rolled by a.v[0] over the whole tensor
};
// Triangle kept (others are 0): none, j - i <= diag (tril), j - i >= diag (triu).
enum Triangle { kAll = 0, kLower = 1, kUpper = 2 };

const char* unsigned_of_size(size_t bytes) {
  switch (bytes) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
  }
}

std::string gather_source(size_t element_size) {
  std::ostringstream s;
  s << kDimsTypedef << "typedef " << unsigned_of_size(element_size) << " T;\n" << R"(
__kernel void gather(__global T* out, long out_off, __global const T* in, long in_off, long n, int rank,
                     dims_t osz, dims_t ost, dims_t isz, dims_t ist, dims_t a, int mode, int tri, long diag,
                     T fill) {
  long i = get_global_id(0);
  if (i >= n) return;
  long rest = i, oo = out_off, io = in_off;
  long row = 0, col = 0;
  int inside = 1;
  if (mode == 5) {
    long li = i - a.v[0];
    if (li < 0) li += n;
    for (int d = rank - 1; d >= 0; --d) {
      long c = rest % osz.v[d]; rest /= osz.v[d];
      oo += c * ost.v[d];
      long j = li % isz.v[d]; li /= isz.v[d];
      io += j * ist.v[d];
    }
  } else {
    for (int d = rank - 1; d >= 0; --d) {
      long c = rest % osz.v[d]; rest /= osz.v[d];
      oo += c * ost.v[d];
      if (d == rank - 1) col = c;
      if (d == rank - 2) row = c;
      long m = isz.v[d];
      long j = c - a.v[d];
      if (mode == 0) {
        if (j < 0 || j >= m) inside = 0;
      } else if (mode == 1) {
        if (j < 0) j = -j; else if (j >= m) j = 2 * (m - 1) - j;
      } else if (mode == 2) {
        j = j < 0 ? 0 : j >= m ? m - 1 : j;
      } else if (mode == 3) {
        if (j < 0) j += m;
      } else if (mode == 4) {
        j = c % m;
      }
      io += j * ist.v[d];
    }
  }
  if ((tri == 1 && col - row > diag) || (tri == 2 && col - row < diag)) { inside = 0; fill = 0; }
  out[oo] = inside ? in[io] : fill;
}
)";
  return s.str();
}

struct GatherArgs {
  int mode = kPadConstant;
  int tri = kAll;
  int64_t diag = 0;
  Dims a{};
  uint64_t fill = 0;  // bits of the fill value in the element's storage
  // Source shape and strides (elements) per output dim; by default IN's.
  Dims isz{}, ist{};
};

void gather(ClDevice& device, sdk::Stream* stream, const Tensor& out, const Tensor& in, const GatherArgs& g) {
  int64_t n = out.numel();
  if (n == 0) return;
  const size_t esize = out.element_size();
  const std::string source = gather_source(esize);
  device.programs().kernel(source, "gather");  // build failures surface before anything is queued
  Dims osz{}, ost{};
  for (int d = 0; d < out.rank; ++d) {
    osz.v[d] = out.shape[d];
    ost.v[d] = out.strides[d];
  }
  device.submit(stream, [&](const Queue& q) {
    Launch l(device, source, "gather");
    l.tensor(out).tensor(in).value<cl_long>(n).value<cl_int>(out.rank);
    l.value(osz).value(ost).value(g.isz).value(g.ist).value(g.a);
    l.value<cl_int>(g.mode).value<cl_int>(g.tri).value<cl_long>(g.diag);
    switch (esize) {
      case 1: l.value<cl_uchar>(static_cast<cl_uchar>(g.fill)); break;
      case 2: l.value<cl_ushort>(static_cast<cl_ushort>(g.fill)); break;
      case 4: l.value<cl_uint>(static_cast<cl_uint>(g.fill)); break;
      default: l.value<cl_ulong>(g.fill); break;
    }
    l.enqueue(q, global_1d(n), kLocalSize);
  });
}

GatherArgs source_of(const Tensor& in) {
  GatherArgs g;
  for (int d = 0; d < in.rank; ++d) {
    g.isz.v[d] = in.shape[d];
    g.ist.v[d] = in.strides[d];
  }
  return g;
}

// The storage bits of V converted to DTYPE (V fits it: the catalog checked).
uint64_t scalar_bits(hal_dtype_e dtype, const sdk::Scalar& v) {
  uint64_t bits = 0;
  auto put = [&](auto x) { std::memcpy(&bits, &x, sizeof(x)); };
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: put(v.to<float>()); break;
    case HAL_DTYPE_FLOAT64: put(v.to<double>()); break;
    case HAL_DTYPE_BOOL: put(static_cast<uint8_t>(v.is_integral() ? v.to_int() != 0 : v.to_double() != 0)); break;
    case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: put(static_cast<uint8_t>(v.to<int64_t>())); break;
    case HAL_DTYPE_INT16: put(static_cast<uint16_t>(v.to<int64_t>())); break;
    case HAL_DTYPE_INT32: put(static_cast<uint32_t>(v.to<int64_t>())); break;
    default: put(v.to<int64_t>()); break;
  }
  return bits;
}

// ---- arange --------------------------------------------------------------------------

void arange_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& out = c.output(0);
  const int64_t n = out.shape[0];
  if (n == 0) return;
  const sdk::Scalar& start = op::arange::start(c);
  const sdk::Scalar& step = op::arange::step(c);
  const bool integral = start.is_integral() && step.is_integral();
  const std::string t = cl_type(out.dtype);
  std::string from_long, from_double;
  if (out.dtype == HAL_DTYPE_BOOL) {
    from_long = from_double = "(uchar)(v != 0)";
  } else if (sdk::is_floating(out.dtype)) {
    from_long = from_double = "(" + t + ")v";
  } else {  // truncated to int64 (saturating, NaN 0), then wrapped
    from_long = "(" + t + ")v";
    from_double = "(" + t + ")convert_long_sat(v)";
  }
  std::ostringstream s;
  s << cl_prelude({HAL_DTYPE_FLOAT64}) << "__kernel void arange_i(__global " << t
    << "* out, long off, long stride, long n, long a, long step) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n) return;\n  long v = a + i * step;\n"
    << "  out[off + i * stride] = " << from_long << ";\n}\n"
    << "__kernel void arange_f(__global " << t << "* out, long off, long stride, long n, double a, double step) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n) return;\n  double v = a + (double)i * step;\n"
    << "  out[off + i * stride] = " << from_double << ";\n}\n";
  const std::string source = s.str();
  const char* name = integral ? "arange_i" : "arange_f";
  ClDevice& device = device_of(c);
  device.programs().kernel(source, name);
  device.submit(stream, [&](const Queue& q) {
    Launch l(device, source, name);
    l.tensor(out).value<cl_long>(out.strides[0]).value<cl_long>(n);
    if (integral) l.value<cl_long>(start.to_int()).value<cl_long>(step.to_int());
    else l.value<cl_double>(start.to_double()).value<cl_double>(step.to_double());
    l.enqueue(q, global_1d(n), kLocalSize);
  });
}

// ---- cat, stack, split -----------------------------------------------------------------

void cat_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& out = c.output(0);
  int dim = wrap_dim(op::cat::dim(c), out.rank);
  int64_t offset = 0;
  for (const Tensor& in : op::cat::tensors(c)) {
    copy_view(device_of(c), stream, narrow(out, dim, offset, in.shape[dim]), in);
    offset += in.shape[dim];
  }
}

void stack_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& out = c.output(0);
  int dim = wrap_dim(op::stack::dim(c), out.rank);
  sdk::TensorList ins = op::stack::tensors(c);
  for (size_t i = 0; i < ins.size(); ++i) {
    Tensor slice = narrow(out, dim, static_cast<int64_t>(i), 1);  // without DIM, at index I of it
    for (int d = dim; d + 1 < out.rank; ++d) {
      slice.shape[d] = slice.shape[d + 1];
      slice.strides[d] = slice.strides[d + 1];
    }
    slice.rank = out.rank - 1;
    copy_view(device_of(c), stream, slice, ins[i]);
  }
}

void split_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  int dim = wrap_dim(op::split::dim(c), self.rank);
  int64_t offset = 0;
  for (const Tensor& out : op::split::outs(c)) {
    copy_view(device_of(c), stream, out, narrow(self, dim, offset, out.shape[dim]));
    offset += out.shape[dim];
  }
}

// ---- pad, flip, roll, repeat -----------------------------------------------------------

void pad_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const std::vector<int64_t>& p = op::pad::pad_(c);
  const std::string& m = op::pad::mode(c);
  GatherArgs g = source_of(self);
  g.mode = m == "reflect" ? kPadReflect : m == "replicate" ? kPadReplicate : kPadConstant;
  for (size_t k = 0; k < p.size() / 2; ++k) g.a.v[self.rank - 1 - k] = p[2 * k];
  if (g.mode == kPadConstant) g.fill = scalar_bits(self.dtype, op::pad::value(c));
  gather(device_of(c), stream, out, self, g);
}

void flip_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  if (self.numel() == 0) return;
  Tensor view = self;
  if (self.rank > 0) {
    for (int64_t dim : op::flip::dims(c)) {
      int d = wrap_dim(dim, self.rank);
      view.byte_offset = static_cast<uint64_t>(static_cast<int64_t>(view.byte_offset) +
                                               (self.shape[d] - 1) * self.strides[d] *
                                                   static_cast<int64_t>(self.element_size()));
      view.strides[d] = -self.strides[d];
    }
  }
  copy_view(device_of(c), stream, c.output(0), view);
}

// ---- reshape, permute -------------------------------------------------------------

// Row-major order kept: the bytes of self's dense form (self itself when
// contiguous, else a packed copy) copied into out's dense form.
void reshape_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  if (out.numel() == 0) return;
  ClDevice& device = device_of(c);
  size_t es = self.element_size();
  device.submit(stream, [&](const Queue& q) {
    nn::Ops ops(device, q);
    nn::Dense src = ops.in(self);
    nn::Dense dst = ops.out(out);
    cl_check(clEnqueueCopyBuffer(q.queue, src.mem, dst.mem, static_cast<size_t>(src.off) * es,
                                 static_cast<size_t>(dst.off) * es, static_cast<size_t>(out.numel()) * es, 0, nullptr,
                                 nullptr),
             "clEnqueueCopyBuffer", " (reshape)");
    ops.finish(dst);
  });
}

void permute_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  if (self.numel() == 0) return;
  copy_view(device_of(c), stream, c.output(0), sdk::kernel::permuted(self, op::permute::dims(c)));
}

void roll_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const std::vector<int64_t>& shifts = op::roll::shifts(c);
  const std::vector<int64_t>& dims = op::roll::dims(c);
  int64_t numel = self.numel();
  if (numel == 0) return;
  GatherArgs g = source_of(self);
  if (dims.empty()) {
    g.mode = kFlatRoll;
    g.a.v[0] = positive_mod(shifts[0], numel);
  } else {
    g.mode = kRoll;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (self.rank == 0) continue;
      int d = wrap_dim(dims[i], self.rank);
      g.a.v[d] = positive_mod(positive_mod(shifts[i], self.shape[d]) + g.a.v[d], self.shape[d]);
    }
  }
  gather(device_of(c), stream, out, self, g);
}

void repeat_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  GatherArgs g;
  g.mode = kRepeat;
  int lead = out.rank - self.rank;  // self viewed with LEAD leading dims of size 1
  for (int i = 0; i < out.rank; ++i) {
    g.isz.v[i] = i < lead ? 1 : self.shape[i - lead];
    g.ist.v[i] = i < lead ? 0 : self.strides[i - lead];
  }
  gather(device_of(c), stream, out, self, g);
}

// ---- tril, triu, one_hot ---------------------------------------------------------------

template <bool kLowerTriangle>
void triangle_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  GatherArgs g = source_of(self);
  g.tri = kLowerTriangle ? kLower : kUpper;
  const int64_t rows = out.shape[out.rank - 2], cols = out.shape[out.rank - 1];
  // Clamped so that the comparison cannot overflow; the result is the same.
  g.diag = std::clamp<int64_t>(kLowerTriangle ? op::tril::diagonal(c) : op::triu::diagonal(c), -rows - 1, cols + 1);
  gather(device_of(c), stream, out, self, g);
}

const char* const kOneHotSource = cl_source::one_hot;  // kernels/one_hot.cl

void one_hot_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const int64_t classes = op::one_hot::num_classes(c);
  const int64_t n = self.numel();
  if (n == 0) return;
  Dims sz{}, st{}, ost{};
  for (int d = 0; d < self.rank; ++d) {
    sz.v[d] = self.shape[d];
    st.v[d] = self.strides[d];
  }
  for (int d = 0; d < out.rank; ++d) ost.v[d] = out.strides[d];
  ClDevice& device = device_of(c);
  device.programs().kernel(kOneHotSource, "one_hot");
  const int64_t site = status_site("one_hot: class outside [0, num_classes) in 'self'");
  device.submit(stream, [&](const Queue& q) {
    {
      Launch l(device, kOneHotSource, "one_hot_check");
      l.tensor(self).value<cl_long>(n).value<cl_int>(self.rank).value(sz).value(st).value<cl_long>(classes);
      l.mem(q.status).value<cl_long>(kStatusValueOutOfRange).value<cl_long>(site);
      l.enqueue(q, global_1d(n), kLocalSize);
    }
    Launch l(device, kOneHotSource, "one_hot");
    l.tensor(out).tensor(self).value<cl_long>(out.numel()).value<cl_int>(self.rank).value(sz).value(st).value(ost);
    l.value<cl_long>(classes).mem(q.status);
    l.enqueue(q, global_1d(out.numel()), kLocalSize);
  });
}

}  // namespace

void register_data_ops(sdk::OpRegistry& ops) {
  const uint64_t all = sdk::kFloatDtypes | sdk::kIntDtypes | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);
  const uint64_t mask = all & ~(HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16) | HAL_DTYPE_BIT(HAL_DTYPE_BFLOAT16));
  ops.add<op::arange>(&arange_kernel, mask);
  ops.add<op::cat>(&cat_kernel, mask);
  ops.add<op::stack>(&stack_kernel, mask);
  ops.add<op::split>(&split_kernel, mask);
  ops.add<op::pad>(&pad_kernel, mask);
  ops.add<op::flip>(&flip_kernel, mask);
  ops.add<op::reshape>(&reshape_kernel, mask);
  ops.add<op::permute>(&permute_kernel, mask);
  ops.add<op::roll>(&roll_kernel, mask);
  ops.add<op::repeat>(&repeat_kernel, mask);
  ops.add<op::tril>(&triangle_kernel<true>, mask);
  ops.add<op::triu>(&triangle_kernel<false>, mask);
  ops.add<op::one_hot>(&one_hot_kernel, HAL_DTYPE_BIT(HAL_DTYPE_INT64));
}

}  // namespace hal::opencl
