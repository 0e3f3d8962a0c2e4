// OpenCL plugin: elementwise ops as generated OpenCL C kernels.
#include "elementwise.hpp"

#include <functional>
#include <sstream>
#include <unordered_map>

#include "hal/sdk/op_catalog.hpp"

namespace hal::opencl {
namespace {

std::string load(const std::string& var, const std::string& type, size_t k) {
  return "  " + type + " " + var + " = (" + type + ")in" + std::to_string(k) + "[o" + std::to_string(k) + "];\n";
}

std::string store_expr(hal_dtype_e out, hal_dtype_e compute, const std::string& value) {
  if (out == HAL_DTYPE_BOOL) return "(uchar)((" + value + ") != 0)";
  // Floating to integer: through a saturating 64-bit conversion (NaN gives
  // 0; a plain cast is undefined), then wrapping to the width, as the CPU.
  if (sdk::is_integral(out) && sdk::is_floating(compute))
    return "(" + std::string(cl_type(out)) + ")convert_long_sat(" + value + ")";
  return "(" + std::string(cl_type(out)) + ")(" + value + ")";
}

hal_dtype_e compute_of(const ElementwiseKernel& k, size_t i) {
  return i < k.input_compute.size() && k.input_compute[i] != HAL_DTYPE_INVALID ? k.input_compute[i] : k.compute;
}

void run_guard(ClDevice& device, const Queue& q, const ElementwiseKernel& k) {
  const Tensor& t = *k.inputs.at(k.guard_input);
  hal_dtype_e c = compute_of(k, k.guard_input);
  Geometry g(t, {&t});
  std::ostringstream s;
  s << cl_prelude({t.dtype, c}) << kDimsTypedef << "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"
    << "__kernel void guard(__global const " << cl_type(t.dtype) << "* in0, long off0, long n, " << geometry_params(1)
    << ", __global long* status, long kind, long site) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n) return;\n"
    << offset_code(1) << "  " << cl_type(c) << " v = (" << cl_type(c) << ")in0[o0];\n"
    << "  if (" << k.guard << ") {\n"
    << "    if (atom_cmpxchg((volatile __global long*)status, 0L, kind) == 0L) {\n"
    << "      status[1] = site; status[2] = (long)v; status[3] = i; }\n  }\n}\n";
  Launch l(device, s.str(), "guard");
  l.tensor(t).value<cl_long>(g.numel);
  geometry_args(l, g);
  l.mem(q.status).value<cl_long>(k.guard_kind).value<cl_long>(status_site(k.guard_site));
  l.enqueue(q, global_1d(g.numel), kLocalSize);
}

}  // namespace

void launch_elementwise(ClDevice& device, sdk::Stream* stream, const ElementwiseKernel& k, const Tensor& out) {
  std::vector<const Tensor*> operands{&out};
  for (const Tensor* t : k.inputs)
    if (t != nullptr) operands.push_back(t);
  Geometry g(out, operands);
  if (g.numel == 0) return;

  std::vector<hal_dtype_e> dtypes{out.dtype, k.compute};
  for (const Tensor* t : k.inputs)
    if (t != nullptr) dtypes.push_back(t->dtype);
  bool guarded = !k.guard.empty();
  std::ostringstream s;
  s << cl_prelude(dtypes) << kDimsTypedef << "typedef " << cl_type(k.compute) << " C;\n" << k.helpers << "\n"
    << "__kernel void ew(__global " << cl_type(out.dtype) << "* in0, long off0";
  size_t op = 1;
  for (const Tensor* t : k.inputs)
    if (t != nullptr) s << ", __global const " << cl_type(t->dtype) << "* in" << op << ", long off" << op, ++op;
  s << ", long n, " << geometry_params(operands.size());
  for (size_t j = 0; j < k.scalars.size(); ++j) s << ", C s" << j;
  if (guarded) s << ", __global const long* status";
  s << ") {\n  long i = get_global_id(0);\n  if (i >= n) return;\n";
  if (guarded) s << "  if (status[0] != 0) return;\n";
  s << offset_code(operands.size());
  op = 1;
  for (size_t j = 0; j < k.inputs.size(); ++j)
    if (k.inputs[j] != nullptr) s << load("x" + std::to_string(j), cl_type(compute_of(k, j)), op++);
  s << "  in0[o0] = " << store_expr(out.dtype, k.compute, k.expr) << ";\n}\n";
  std::string source = s.str();

  device.programs().kernel(source, "ew");  // build failures surface before anything is queued
  device.submit(stream, [&](const Queue& q) {
    if (guarded) run_guard(device, q, k);
    Launch l(device, source, "ew");
    l.tensor(out);
    for (const Tensor* t : k.inputs)
      if (t != nullptr) l.tensor(*t);
    l.value<cl_long>(g.numel);
    geometry_args(l, g);
    for (const sdk::Scalar& v : k.scalars) l.scalar(k.compute, v);
    if (guarded) l.mem(q.status);
    l.enqueue(q, global_1d(g.numel), kLocalSize);
  });
}

namespace {

enum Cls { kF = 1, kI = 2, kB = 4 };  // float, integer, bool compute classes
int cls(hal_dtype_e d) { return sdk::is_floating(d) ? kF : d == HAL_DTYPE_BOOL ? kB : kI; }

// How one op maps to an ElementwiseKernel.
struct Spec {
  // Expressions by compute class ("" = not supported for that class).
  std::string f, i, b;
  std::string helpers;  // for float and bool compute
  // Compute dtype: the output's (true) or the call's common dtype (false).
  bool compute_is_output = false;
  // Inputs computed in their own dtype (bit k), e.g. where's condition.
  unsigned own_dtype_inputs = 0;
  // Names of scalar attributes passed as s0, s1, ...
  std::vector<const char*> scalar_attrs;
  std::string helpers_i;  // for integer compute ("" = HELPERS)
};

const char* const kGeluHelpers = R"(
C gelu_tanh(C x) { return (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))); }
C gelu_erf(C x) { return (C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476)); }
C gelu_erf_grad(C x) {
  C cdf = (C)0.5 * ((C)1 + erf(x * (C)0.7071067811865476));
  C pdf = exp((C)-0.5 * x * x) * (C)0.3989422804014327;
  return cdf + x * pdf;
}
C gelu_tanh_grad(C x) {
  C k = (C)0.7978845608028654, c = (C)0.044715;
  C t = tanh(k * (x + c * x * x * x));
  return (C)0.5 * ((C)1 + t) + (C)0.5 * x * ((C)1 - t * t) * k * ((C)1 + (C)3 * c * x * x);
}
)";

const char* const kIntHelpers = R"(
C floor_div(C a, C b) { if (b == 0) return 0; C q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) --q; return q; }
C py_mod(C a, C b) { if (b == 0) return 0; C r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
C ipow(C base, C e) {
  if (e < 0) return base == 1 ? (C)1 : base == (C)-1 ? (C)((e & 1) ? -1 : 1) : (C)0;
  C r = 1;
  while (e) { if (e & 1) r = (C)(r * base); base = (C)(base * base); e >>= 1; }
  return r;
}
)";

const char* const kFloatHelpers = R"(
C py_fmod(C a, C b) { C r = fmod(a, b); if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b; return r; }
C lerp_(C a, C b, C w) { return w < (C)0.5 ? a + w * (b - a) : b - (b - a) * ((C)1 - w); }
)";

const std::string kMax = "((x0 != x0) ? x0 : (x1 != x1) ? x1 : (x0 > x1 ? x0 : x1))";
const std::string kMin = "((x0 != x0) ? x0 : (x1 != x1) ? x1 : (x0 < x1 ? x0 : x1))";

const std::unordered_map<std::string, Spec>& specs() {
  static const auto* table = new std::unordered_map<std::string, Spec>{
      // unary
      {"abs", {"fabs(x0)", "(x0 < 0 ? (C)-x0 : x0)", "x0"}},
      {"neg", {"-x0", "(C)-x0", ""}},
      {"exp", {"exp(x0)", "", "", "", true}},
      {"log", {"log(x0)", "", "", "", true}},
      {"log1p", {"log1p(x0)", "", "", "", true}},
      {"expm1", {"expm1(x0)", "", "", "", true}},
      {"sqrt", {"sqrt(x0)", "", "", "", true}},
      {"rsqrt", {"rsqrt(x0)", "", "", "", true}},
      {"reciprocal", {"(C)1 / x0", "", "", "", true}},
      {"sin", {"sin(x0)", "", "", "", true}},
      {"cos", {"cos(x0)", "", "", "", true}},
      {"tanh", {"tanh(x0)", "", "", "", true}},
      {"sigmoid", {"(C)1 / ((C)1 + exp(-x0))", "", "", "", true}},
      {"erf", {"erf(x0)", "", "", "", true}},
      {"relu", {"(x0 < (C)0 ? (C)0 : x0)", "(x0 < 0 ? (C)0 : x0)", ""}},
      {"silu", {"x0 / ((C)1 + exp(-x0))", "", ""}},
      {"floor", {"floor(x0)", "x0", ""}},
      {"ceil", {"ceil(x0)", "x0", ""}},
      {"round", {"rint(x0)", "x0", ""}},
      {"sign", {"(isnan(x0) ? x0 : (C)((x0 > (C)0) - (x0 < (C)0)))", "(C)((x0 > 0) - (x0 < 0))", "x0"}},
      {"logical_not", {"x0 == (C)0", "x0 == 0", "x0 == 0", "", false, 1}},
      {"isnan", {"isnan(x0)", "0", "0", "", false, 1}},
      {"isinf", {"isinf(x0)", "0", "0", "", false, 1}},
      {"relu_backward", {"(x1 > (C)0 ? x0 : (C)0)", "", ""}},
      {"silu_backward", {"x0 * ((C)1 / ((C)1 + exp(-x1))) * ((C)1 + x1 * ((C)1 - (C)1 / ((C)1 + exp(-x1))))", "", ""}},
      {"sigmoid_backward", {"x0 * x1 * ((C)1 - x1)", "", ""}},
      {"tanh_backward", {"x0 * ((C)1 - x1 * x1)", "", ""}},
      // binary
      {"add", {"x0 + s0 * x1", "(C)(x0 + s0 * x1)", "(x0 | (s0 & x1))", "", false, 0, {"alpha"}}},
      {"sub", {"x0 - s0 * x1", "(C)(x0 - s0 * x1)", "", "", false, 0, {"alpha"}}},
      {"mul", {"x0 * x1", "(C)(x0 * x1)", "(x0 & x1)"}},
      {"maximum", {kMax, kMax, kMax}},
      {"minimum", {kMin, kMin, kMin}},
      {"fmod", {"fmod(x0, x1)", "(x1 == 0 ? (C)0 : (C)(x0 % x1))", ""}},
      {"remainder", {"py_fmod(x0, x1)", "py_mod(x0, x1)", "", kFloatHelpers, false, 0, {}, kIntHelpers}},
      {"eq", {"x0 == x1", "x0 == x1", "x0 == x1"}},
      {"ne", {"x0 != x1", "x0 != x1", "x0 != x1"}},
      {"lt", {"x0 < x1", "x0 < x1", "x0 < x1"}},
      {"le", {"x0 <= x1", "x0 <= x1", "x0 <= x1"}},
      {"gt", {"x0 > x1", "x0 > x1", "x0 > x1"}},
      {"ge", {"x0 >= x1", "x0 >= x1", "x0 >= x1"}},
      {"logical_and", {"(x0 != 0) && (x1 != 0)", "(x0 != 0) && (x1 != 0)", "(x0 != 0) && (x1 != 0)", "", false, 3}},
      {"logical_or", {"(x0 != 0) || (x1 != 0)", "(x0 != 0) || (x1 != 0)", "(x0 != 0) || (x1 != 0)", "", false, 3}},
      {"logical_xor", {"(x0 != 0) != (x1 != 0)", "(x0 != 0) != (x1 != 0)", "(x0 != 0) != (x1 != 0)", "", false, 3}},
      {"bitwise_and", {"", "(C)(x0 & x1)", "(x0 & x1)"}},
      {"bitwise_or", {"", "(C)(x0 | x1)", "(x0 | x1)"}},
      {"bitwise_xor", {"", "(C)(x0 ^ x1)", "(x0 ^ x1)"}},
      {"where", {"(x0 ? x1 : x2)", "(x0 ? x1 : x2)", "(x0 ? x1 : x2)", "", false, 1}},
      {"lerp", {"lerp_(x0, x1, x2)", "", "", kFloatHelpers}},
      {"addcmul", {"x0 + s0 * x1 * x2", "(C)(x0 + s0 * x1 * x2)", "", "", false, 0, {"value"}}},
      {"addcdiv", {"x0 + s0 * x1 / x2", "", "", "", false, 0, {"value"}}},
      // data
      {"fill", {"s0", "s0", "s0", "", true, 0, {"value"}}},
      // index
      {"masked_fill", {"(x1 ? s0 : x0)", "(x1 ? s0 : x0)", "(x1 ? s0 : x0)", "", false, 2, {"value"}}},
  };
  return *table;
}

int attr_index(const OpCall& c, const char* name) {
  const sdk::OpSchema& s = c.schema();
  for (size_t i = 0; i < s.attr_count; ++i)
    if (std::strcmp(s.attrs[i].name, name) == 0) return static_cast<int>(i);
  sdk::fail(HAL_STATUS_INTERNAL, c.name(), ": no attribute '", name, "'");
}

sdk::Scalar attr_scalar(const OpCall& c, const char* name) {
  const sdk::AttrValue& a = c.attr(attr_index(c, name));
  switch (a.kind) {
    case sdk::AttrKind::kScalar: return a.as_scalar();
    case sdk::AttrKind::kFloat: return sdk::Scalar::from_float(a.as_float());
    default: return sdk::Scalar::from_int(a.as_int());
  }
}

// Builds the kernel description of a call from its op's Spec.
ElementwiseKernel describe(const OpCall& c, const Spec& spec) {
  ElementwiseKernel k;
  const Tensor& out = c.output(0);
  k.compute = spec.compute_is_output ? out.dtype : c.common_dtype();
  for (size_t i = 0; i < c.input_count(); ++i) {
    k.inputs.push_back(c.optional_input(i));
    k.input_compute.push_back((spec.own_dtype_inputs >> i) & 1u ? c.input(i).dtype : HAL_DTYPE_INVALID);
  }
  int cl = cls(k.compute);
  k.expr = cl == kF ? spec.f : cl == kI ? spec.i : spec.b;
  if (k.expr.empty())
    sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, c.name(), ": no OpenCL kernel for dtype ", sdk::dtype_name(k.compute));
  k.helpers = cl == kI && !spec.helpers_i.empty() ? spec.helpers_i : spec.helpers;
  for (const char* a : spec.scalar_attrs) k.scalars.push_back(attr_scalar(c, a));
  return k;
}

void run_spec(const CallPtr& call, sdk::Stream* stream, const Spec& spec) {
  launch_elementwise(device_of(*call), stream, describe(*call, spec), call->output(0));
}

void table_kernel(const CallPtr& call, sdk::Stream* stream) { run_spec(call, stream, specs().at(call->name())); }

void gelu_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool tanh_approx = sdk::op::gelu::approximate(*call) == "tanh";
  ElementwiseKernel k = describe(*call, Spec{tanh_approx ? "gelu_tanh(x0)" : "gelu_erf(x0)", "", "", kGeluHelpers});
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}

void gelu_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool tanh_approx = sdk::op::gelu_backward::approximate(*call) == "tanh";
  ElementwiseKernel k =
      describe(*call, Spec{tanh_approx ? "x0 * gelu_tanh_grad(x1)" : "x0 * gelu_erf_grad(x1)", "", "", kGeluHelpers});
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}

// div and pow need the rounding mode or integer checks.
void div_kernel(const CallPtr& call, sdk::Stream* stream) {
  const std::string& mode = sdk::op::div::rounding_mode(*call);
  Spec spec;
  if (mode == "none") {
    spec = {"x0 / x1", "", "", "", true};
  } else if (mode == "trunc") {
    spec = {"trunc(x0 / x1)", "(x1 == 0 ? (C)0 : (C)(x0 / x1))", "(x0 & x1)"};
  } else {
    spec = {"floor(x0 / x1)", "floor_div(x0, x1)", "(x0 & x1)", "", false, 0, {}, kIntHelpers};
  }
  ElementwiseKernel k = describe(*call, spec);
  if (mode != "none" && cls(k.compute) == kI) {
    k.guard = "v == 0";
    k.guard_kind = kStatusDivisionByZero;
    k.guard_site = "div: integer division by zero: 'other'";
  }
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}

void int_guarded_kernel(const CallPtr& call, sdk::Stream* stream, const Spec& spec, const char* site) {
  ElementwiseKernel k = describe(*call, spec);
  if (cls(k.compute) == kI) {
    k.guard = "v == 0";
    k.guard_kind = kStatusDivisionByZero;
    k.guard_site = site;
  }
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}
void fmod_kernel(const CallPtr& call, sdk::Stream* stream) {
  int_guarded_kernel(call, stream, specs().at("fmod"), "fmod: integer division by zero: 'other'");
}
void remainder_kernel(const CallPtr& call, sdk::Stream* stream) {
  int_guarded_kernel(call, stream, specs().at("remainder"), "remainder: integer division by zero: 'other'");
}

void pow_kernel(const CallPtr& call, sdk::Stream* stream) {
  ElementwiseKernel k = describe(*call, Spec{"pow(x0, x1)", "ipow(x0, x1)", "", "", false, 0, {}, kIntHelpers});
  if (cls(k.compute) == kI && sdk::is_integral(call->input(1).dtype) && call->input(1).dtype != HAL_DTYPE_UINT8) {
    k.guard = "v < 0";
    k.guard_kind = kStatusInvalidValue;
    k.guard_site = "pow: integers to negative integer powers are not allowed: 'other'";
  }
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}

// Floating to integer copies go through a saturating 64-bit conversion
// (NaN gives 0; a plain cast is undefined), then wrap to the width.
void copy_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& in = call->input(0);
  const Tensor& out = call->output(0);
  std::string expr = "x0";
  if (sdk::is_floating(in.dtype) && sdk::is_integral(out.dtype))
    expr = "convert_long_sat(x0)";
  ElementwiseKernel k = describe(*call, Spec{expr, expr, expr, "", true, 1});
  launch_elementwise(device_of(*call), stream, k, out);
}

void clamp_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  // A NaN bound gives NaN, as in PyTorch (x != x only holds for NaN).
  std::string r = "x0";
  if (c.optional_input(1)) r = "((x1 != x1 || x1 > " + r + ") ? x1 : " + r + ")";
  if (c.optional_input(2)) r = "((x2 != x2 || x2 < " + r + ") ? x2 : " + r + ")";
  ElementwiseKernel k = describe(c, Spec{r, r, ""});
  launch_elementwise(device_of(c), stream, k, c.output(0));
}

}  // namespace

void register_elementwise_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  const uint64_t I = sdk::kIntDtypes;
  const uint64_t B = HAL_DTYPE_BIT(HAL_DTYPE_BOOL);
  for (const auto& [name, spec] : specs()) {
    // The dtypes a call may compute in: those the op's expressions cover
    // (for ops computing in the output's float dtype, every input dtype).
    uint64_t mask = spec.compute_is_output ? F | I | B
                                           : (spec.f.empty() ? 0 : F) | (spec.i.empty() ? 0 : I) |
                                                 (spec.b.empty() ? 0 : B);
    if (name == "fmod" || name == "remainder") {
      ops.add(*sdk::find_schema(name.c_str()), name == "fmod" ? &fmod_kernel : &remainder_kernel, mask);
      continue;
    }
    ops.add(*sdk::find_schema(name.c_str()), &table_kernel, mask);
  }
  ops.add<sdk::op::gelu>(&gelu_kernel, F);
  ops.add<sdk::op::gelu_backward>(&gelu_backward_kernel, F);
  ops.add<sdk::op::div>(&div_kernel, F | I | B);
  ops.add<sdk::op::pow>(&pow_kernel, F | I);
  ops.add<sdk::op::clamp>(&clamp_kernel, F | I);
  ops.add<sdk::op::copy>(&copy_kernel, F | I | B);
}

}  // namespace hal::opencl
