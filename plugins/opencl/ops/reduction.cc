// OpenCL plugin: the "reduction" op group as one generated kernel family.
// A reduction is described by OpenCL C snippets — accumulator declarations,
// a step over one element "x" (compute type C) at reduced position "p", and
// the stored value(s) — and runs one work-item per output over the SDK's
// ReduceIter geometry (kept and reduced dims merged on the host, passed as
// runtime arguments, so one program serves every shape). Float sums are
// compensated (Kahan) in the compute dtype; integer sums wrap in 64 bits.
// The scans (cumsum, cumprod) walk one line per work-item.
#include <cmath>
#include <sstream>

#include "cl_kernel.hpp"
#include "hal/sdk/kernel/reduce.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace rules = sdk::shape_rules;
using sdk::kernel::ReduceIter;

// One reduction: snippets of OpenCL C (see the file comment). STORE0 and
// STORE1 are expressions of the accumulators and "n" (the reduced count).
struct Reducer {
  std::string name;   // kernel family (part of the program source)
  hal_dtype_e compute = HAL_DTYPE_FLOAT32;  // typedef'd as C
  std::string load;   // expression converting "v" (the stored input) to C
  std::string init;   // statements declaring the accumulators
  std::string step;   // statements folding "x" at position "p"
  std::string store0, store1;  // store1 empty: one output
  double scalar = 0;  // passed as "C s0"
};

// "v" (of dtype FROM) converted to dtype TO as a copy would (floating to
// integer saturates, NaN to 0; bool is != 0).
std::string convert(hal_dtype_e from, hal_dtype_e to, const std::string& v) {
  if (from == to) return v;
  if (to == HAL_DTYPE_BOOL) return "(uchar)((" + v + ") != 0)";
  if (sdk::is_floating(from) && sdk::is_integral(to)) return "convert_" + std::string(cl_type(to)) + "_sat(" + v + ")";
  return "(" + std::string(cl_type(to)) + ")(" + v + ")";
}

// Stores accumulator expression A into dtype OUT.
std::string store(hal_dtype_e out, const std::string& a) {
  if (out == HAL_DTYPE_BOOL) return "(uchar)((" + a + ") != 0)";
  return "(" + std::string(cl_type(out)) + ")(" + a + ")";
}

const char* const kKahanStep = "{ C y_ = T_ - kc; C t_ = ks + y_; kc = isfinite(t_) ? (t_ - ks) - y_ : (C)0; ks = t_; }";

// Kahan-compensated Σ TERM (an expression of x) in C.
std::string kahan(const std::string& term) {
  std::string s = kKahanStep;
  return s.replace(s.find("T_"), 2, "(" + term + ")");
}

void launch_reduce(const OpCall& c, sdk::Stream* stream, uint32_t mask, const Reducer& r) {
  const Tensor& in = c.input(0);
  const Tensor& out0 = c.output(0);
  const Tensor* out1 = r.store1.empty() ? nullptr : &c.output(1);
  ReduceIter it = out1 ? ReduceIter(in, mask, {&out0, out1}) : ReduceIter(in, mask, {&out0});
  if (it.out_numel() == 0) return;
  ClDevice& device = device_of(c);

  std::ostringstream s;
  s << cl_prelude({in.dtype, out0.dtype, r.compute}) << kDimsTypedef << "typedef " << cl_type(r.compute) << " C;\n"
    << "// " << r.name << "\n"
    << "__kernel void reduce(__global const " << cl_type(in.dtype) << "* in, long in_off, __global "
    << cl_type(out0.dtype) << "* out0, long off0, __global long* out1, long off1, long outs, long n,\n"
    << "    int kept_rank, dims_t ksz, dims_t kin, dims_t ko0, dims_t ko1, int red_rank, dims_t rsz, dims_t rst, C s0) {\n"
    << "  long o = get_global_id(0);\n  if (o >= outs) return;\n"
    << "  long base = in_off, o0 = off0, o1 = off1, rest = o;\n"
    << "  for (int d = kept_rank - 1; d >= 0; --d) {\n"
    << "    long i = rest % ksz.v[d]; rest /= ksz.v[d];\n"
    << "    base += i * kin.v[d]; o0 += i * ko0.v[d]; o1 += i * ko1.v[d];\n  }\n"
    << r.init << "\n"
    << "  if (n > 0) {\n"
    << "    long inner = red_rank ? rsz.v[red_rank - 1] : n, ist = red_rank ? rst.v[red_rank - 1] : 0;\n"
    << "    long outer = n / inner;\n"
    << "    for (long q = 0; q < outer; ++q) {\n"
    << "      long off = base; rest = q;\n"
    << "      for (int d = red_rank - 2; d >= 0; --d) { off += (rest % rsz.v[d]) * rst.v[d]; rest /= rsz.v[d]; }\n"
    << "      for (long j = 0; j < inner; ++j) {\n"
    << "        long p = q * inner + j;\n"
    << "        " << cl_type(in.dtype) << " v = in[off + j * ist];\n"
    << "        C x = " << r.load << ";\n"
    << "        " << r.step << "\n"
    << "      }\n    }\n  }\n"
    << "  out0[o0] = " << store(out0.dtype, r.store0) << ";\n";
  if (out1) s << "  out1[o1] = " << r.store1 << ";\n";
  s << "}\n";
  std::string source = s.str();
  device.programs().kernel(source, "reduce");

  Dims ksz{}, kin{}, ko0{}, ko1{}, rsz{}, rst{};
  for (int d = 0; d < it.kept_rank(); ++d) {
    ksz.v[d] = it.kept_size(d);
    kin.v[d] = it.kept_in_stride(d);
    ko0.v[d] = it.kept_out_stride(0, d);
    ko1.v[d] = out1 ? it.kept_out_stride(1, d) : 0;
  }
  for (int d = 0; d < it.red_rank(); ++d) {
    rsz.v[d] = it.red_size(d);
    rst.v[d] = it.red_stride(d);
  }
  device.submit(stream, [&](const Queue& q) {
    Launch l(device, source, "reduce");
    l.tensor(in).tensor(out0);
    if (out1) l.tensor(*out1);
    else l.mem(mem_or_null(out0.buffer)).value<cl_long>(-1);
    l.value<cl_long>(it.out_numel()).value<cl_long>(it.red_numel());
    l.value<cl_int>(it.kept_rank()).value(ksz).value(kin).value(ko0).value(ko1);
    l.value<cl_int>(it.red_rank()).value(rsz).value(rst);
    l.scalar(r.compute, r.scalar);
    l.enqueue(q, global_1d(it.out_numel()), kLocalSize);
  });
}

// The dtype sums and products accumulate in for output dtype OUT.
hal_dtype_e wide(hal_dtype_e out) { return sdk::is_floating(out) ? out : HAL_DTYPE_INT64; }
// Input "v" as the output's dtype (the 'dtype' attribute casts first), then C.
std::string load_as_output(const OpCall& c) { return "(C)(" + convert(c.input(0).dtype, c.output(0).dtype, "v") + ")"; }

void sum_like(const CallPtr& call, sdk::Stream* stream, bool mean) {
  const OpCall& c = *call;
  Reducer r;
  r.name = mean ? "mean" : "sum";
  hal_dtype_e out = c.output(0).dtype;
  r.compute = wide(out);
  r.load = load_as_output(c);
  if (sdk::is_floating(out)) {
    r.init = "  C ks = 0, kc = 0;";
    r.step = kahan("x");
    r.store0 = mean ? "ks / (C)n" : "ks";
  } else {
    r.init = "  ulong ks = 0;";
    r.step = "ks += (ulong)x;";
    r.store0 = "(long)ks";
  }
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}
void sum_kernel(const CallPtr& call, sdk::Stream* stream) { sum_like(call, stream, false); }
void mean_kernel(const CallPtr& call, sdk::Stream* stream) { sum_like(call, stream, true); }

void prod_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  Reducer r;
  r.name = "prod";
  hal_dtype_e out = c.output(0).dtype;
  r.compute = wide(out);
  r.load = load_as_output(c);
  if (sdk::is_floating(out)) {
    r.init = "  C a = 1;";
    r.step = "a *= x;";
    r.store0 = "a";
  } else {
    r.init = "  ulong a = 1;";
    r.step = "a *= (ulong)x;";
    r.store0 = "(long)a";
  }
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}

// "X beats the current extreme A" (a NaN beats everything and stays).
std::string beats(hal_dtype_e dtype, bool max, const std::string& x, const std::string& a) {
  std::string cmp = x + (max ? " > " : " < ") + a;
  if (!sdk::is_floating(dtype)) return "(" + cmp + ")";
  return "(!isnan(" + a + ") && (isnan(" + x + ") || " + cmp + "))";
}

// amax/amin (values only), max/min (values, indices), argmax/argmin.
void extreme(const CallPtr& call, sdk::Stream* stream, bool max, bool values, bool indices, uint32_t mask) {
  const OpCall& c = *call;
  Reducer r;
  r.name = max ? "max" : "min";
  r.compute = c.input(0).dtype;
  r.load = "v";
  r.init = "  C best = 0; long at = -1;";
  r.step = "if (at < 0 || " + beats(r.compute, max, "x", "best") + ") { best = x; at = p; }";
  if (values) {
    r.store0 = "best";
    if (indices) r.store1 = "at";
  } else {
    r.store0 = "at";
  }
  launch_reduce(c, stream, mask, r);
}
void amax_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, true, true, false, rules::reduce_mask(*c)); }
void amin_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, false, true, false, rules::reduce_mask(*c)); }
void max_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, true, true, true, rules::one_dim_mask(*c)); }
void min_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, false, true, true, rules::one_dim_mask(*c)); }
void argmax_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, true, false, false, rules::arg_mask(*c)); }
void argmin_kernel(const CallPtr& c, sdk::Stream* s) { extreme(c, s, false, false, false, rules::arg_mask(*c)); }

// Welford's running mean and Σ(x - mean)²; s0 is the correction.
void var_like(const CallPtr& call, sdk::Stream* stream, bool take_sqrt) {
  const OpCall& c = *call;
  Reducer r;
  r.name = take_sqrt ? "std" : "var";
  r.compute = c.input(0).dtype;
  r.load = "v";
  r.init = "  C mean = 0, m2 = 0; long cnt = 0;";
  r.step = "++cnt; C d = x - mean; mean += d / (C)cnt; m2 += d * (x - mean);";
  std::string v = "m2 / fmax((C)0, (C)n - s0)";
  r.store0 = take_sqrt ? "sqrt(" + v + ")" : v;
  r.scalar = static_cast<double>(rules::attr_named(c, "correction").as_int());
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}
void var_kernel(const CallPtr& c, sdk::Stream* s) { var_like(c, s, false); }
void std_kernel(const CallPtr& c, sdk::Stream* s) { var_like(c, s, true); }

void norm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  double p = sdk::op::norm::p(c);
  Reducer r;
  r.compute = c.input(0).dtype;
  r.load = "v";
  r.scalar = p;
  if (std::isinf(p)) {
    bool max = p > 0;
    r.name = max ? "norm_inf" : "norm_neg_inf";
    r.init = max ? "  C a = 0;" : "  C a = INFINITY;";
    r.step = "C y = fabs(x); if (" + beats(r.compute, max, "y", "a") + ") a = y;";
    r.store0 = "a";
  } else {
    r.init = "  C ks = 0, kc = 0;";
    if (p == 2) r.name = "norm2", r.step = kahan("x * x"), r.store0 = "sqrt(ks)";
    else if (p == 1) r.name = "norm1", r.step = kahan("fabs(x)"), r.store0 = "ks";
    else if (p == 0) r.name = "norm0", r.step = "ks += (x != (C)0) ? (C)1 : (C)0;", r.store0 = "ks";
    else r.name = "normp", r.step = kahan("pow(fabs(x), s0)"), r.store0 = "pow(ks, (C)1 / s0)";
  }
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}

// Running maximum M and Σ exp(x - M) of the finite elements; NaN and +inf
// decide the result alone.
void logsumexp_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  Reducer r;
  r.name = "logsumexp";
  r.compute = c.output(0).dtype;
  r.load = "(C)v";
  r.init = "  C m = -INFINITY, sum = 0; int nan_ = 0, inf_ = 0;";
  r.step =
      "if (isnan(x)) nan_ = 1; else if (isinf(x)) { if (x > (C)0) inf_ = 1; }"
      " else if (x > m) { sum = sum * exp(m - x) + (C)1; m = x; } else sum += exp(x - m);";
  r.store0 = "nan_ ? (C)NAN : inf_ ? (C)INFINITY : sum == (C)0 ? (C)-INFINITY : m + log(sum)";
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}

void any_all(const CallPtr& call, sdk::Stream* stream, bool any) {
  const OpCall& c = *call;
  Reducer r;
  r.name = any ? "any" : "all";
  r.compute = c.input(0).dtype;
  r.load = "v";
  r.init = any ? "  int a = 0;" : "  int a = 1;";
  r.step = any ? "a = a || (x != (C)0);" : "a = a && (x != (C)0);";
  r.store0 = "a";
  launch_reduce(c, stream, rules::reduce_mask(c), r);
}
void any_kernel(const CallPtr& c, sdk::Stream* s) { any_all(c, s, true); }
void all_kernel(const CallPtr& c, sdk::Stream* s) { any_all(c, s, false); }

// cumsum / cumprod: one work-item per line along DIM; the output may be the
// input itself (each element is read before it is written).
void scan(const CallPtr& call, sdk::Stream* stream, bool prod) {
  const OpCall& c = *call;
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  int dim = rules::normalize_dim(c, "dim", rules::attr_named(c, "dim").as_int(), in.rank);
  ReduceIter it(in, in.rank == 0 ? 0u : 1u << dim, {&out});
  const int64_t len = in.rank == 0 ? 1 : in.shape[dim];
  const int64_t si = in.rank == 0 ? 0 : in.strides[dim], so = in.rank == 0 ? 0 : out.strides[dim];
  if (it.out_numel() == 0 || len == 0) return;
  ClDevice& device = device_of(c);
  hal_dtype_e compute = wide(out.dtype);
  bool fl = sdk::is_floating(out.dtype);
  std::string init, step, value;
  if (!fl) {
    init = "  ulong a = " + std::string(prod ? "1" : "0") + ";";
    step = prod ? "a *= (ulong)x;" : "a += (ulong)x;";
    value = "(long)a";
  } else if (prod) {
    init = "  C a = 1;", step = "a *= x;", value = "a";
  } else {
    init = "  C ks = 0, kc = 0;", step = kahan("x"), value = "ks";
  }
  std::ostringstream s;
  s << cl_prelude({in.dtype, out.dtype, compute}) << kDimsTypedef << "typedef " << cl_type(compute) << " C;\n"
    << "__kernel void scan(__global const " << cl_type(in.dtype) << "* in, long in_off, __global "
    << cl_type(out.dtype) << "* out, long off0, long lines, long len, long si, long so,\n"
    << "    int kept_rank, dims_t ksz, dims_t kin, dims_t ko0) {\n"
    << "  long o = get_global_id(0);\n  if (o >= lines) return;\n"
    << "  long base = in_off, o0 = off0, rest = o;\n"
    << "  for (int d = kept_rank - 1; d >= 0; --d) {\n"
    << "    long i = rest % ksz.v[d]; rest /= ksz.v[d];\n"
    << "    base += i * kin.v[d]; o0 += i * ko0.v[d];\n  }\n"
    << init << "\n"
    << "  for (long k = 0; k < len; ++k) {\n"
    << "    " << cl_type(in.dtype) << " v = in[base + k * si];\n"
    << "    C x = (C)(" << convert(in.dtype, out.dtype, "v") << ");\n"
    << "    " << step << "\n"
    << "    out[o0 + k * so] = " << store(out.dtype, value) << ";\n  }\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "scan");
  Dims ksz{}, kin{}, ko0{};
  for (int d = 0; d < it.kept_rank(); ++d) {
    ksz.v[d] = it.kept_size(d);
    kin.v[d] = it.kept_in_stride(d);
    ko0.v[d] = it.kept_out_stride(0, d);
  }
  device.submit(stream, [&](const Queue& q) {
    Launch l(device, source, "scan");
    l.tensor(in).tensor(out);
    l.value<cl_long>(it.out_numel()).value<cl_long>(len).value<cl_long>(si).value<cl_long>(so);
    l.value<cl_int>(it.kept_rank()).value(ksz).value(kin).value(ko0);
    l.enqueue(q, global_1d(it.out_numel()), kLocalSize);
  });
}
void cumsum_kernel(const CallPtr& c, sdk::Stream* s) { scan(c, s, false); }
void cumprod_kernel(const CallPtr& c, sdk::Stream* s) { scan(c, s, true); }

}  // namespace

void register_reduction_ops(sdk::OpRegistry& ops) {
  namespace op = sdk::op;
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  const uint64_t all = F | sdk::kIntDtypes | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);
  ops.add<op::sum>(&sum_kernel, all);
  ops.add<op::mean>(&mean_kernel, all);
  ops.add<op::prod>(&prod_kernel, all);
  ops.add<op::amax>(&amax_kernel, all);
  ops.add<op::amin>(&amin_kernel, all);
  ops.add<op::max>(&max_kernel, all);
  ops.add<op::min>(&min_kernel, all);
  ops.add<op::argmax>(&argmax_kernel, all);
  ops.add<op::argmin>(&argmin_kernel, all);
  ops.add<op::var>(&var_kernel, F);
  ops.add<op::std_>(&std_kernel, F);
  ops.add<op::norm>(&norm_kernel, F);
  ops.add<op::logsumexp>(&logsumexp_kernel, all);
  ops.add<op::any>(&any_kernel, all);
  ops.add<op::all>(&all_kernel, all);
  ops.add<op::cumsum>(&cumsum_kernel, all);
  ops.add<op::cumprod>(&cumprod_kernel, all);
}

}  // namespace hal::opencl
