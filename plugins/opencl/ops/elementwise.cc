// OpenCL plugin: elementwise ops as generated OpenCL C kernels.
#include "elementwise.hpp"

#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "cl_sources.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/ops.hpp"  // OpCallBuilder
#include "hal/sdk/plugin.hpp"

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

const char* const kGeluHelpers = cl_source::gelu_helpers;  // kernels/gelu_helpers.cl

const char* const kIntHelpers = cl_source::int_helpers;  // kernels/int_helpers.cl

const char* const kFloatHelpers = cl_source::float_helpers;  // kernels/float_helpers.cl

const char* const kSpecialHelpers = cl_source::special_helpers;  // kernels/special_helpers.cl

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
      {"erf", {"erf_(x0)", "", "", kGeluHelpers, true}},
      {"tan", {"tan(x0)", "", "", "", true}},
      {"asin", {"asin(x0)", "", "", "", true}},
      {"acos", {"acos(x0)", "", "", "", true}},
      {"atan", {"atan(x0)", "", "", "", true}},
      {"sinh", {"sinh(x0)", "", "", "", true}},
      {"cosh", {"cosh(x0)", "", "", "", true}},
      {"asinh", {"asinh(x0)", "", "", "", true}},
      {"acosh", {"acosh(x0)", "", "", "", true}},
      {"atanh", {"atanh(x0)", "", "", "", true}},
      {"log2", {"log2(x0)", "", "", "", true}},
      {"log10", {"log10(x0)", "", "", "", true}},
      {"exp2", {"exp2(x0)", "", "", "", true}},
      {"erfc", {"erfc(x0)", "", "", "", true}},
      {"lgamma", {"lgamma(x0)", "", "", "", true}},
      {"trunc", {"trunc(x0)", "x0", ""}},
      {"digamma", {"digamma_(x0)", "", "", kSpecialHelpers, true}},
      {"i0", {"i0_(x0)", "", "", kSpecialHelpers, true}},
      {"i0e", {"i0e_(x0)", "", "", kSpecialHelpers, true}},
      {"i1", {"i1_(x0)", "", "", kSpecialHelpers, true}},
      {"i1e", {"i1e_(x0)", "", "", kSpecialHelpers, true}},
      {"spherical_bessel_j0", {"spherical_j0_(x0)", "", "", kSpecialHelpers, true}},
      {"signbit", {"(signbit(x0) != 0)", "(x0 < 0)", "0", "", false, 1}},
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
      {"atan2", {"atan2(x0, x1)", "", "", "", true}},
      {"hypot", {"hypot(x0, x1)", "", ""}},
      {"fmax", {"fmax(x0, x1)", "(x0 > x1 ? x0 : x1)", "(x0 | x1)"}},
      {"fmin", {"fmin(x0, x1)", "(x0 < x1 ? x0 : x1)", "(x0 & x1)"}},
      {"nextafter", {"nextafter(x0, x1)", "", ""}},
      {"copysign", {"copysign(x0, x1)", "", "", "", true}},
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

// One application of an op, from a launch (OpCall) or a graph node: the
// operands' dtypes and ranks, the output dtype and the attributes.
struct Site {
  const sdk::OpSchema& schema;
  std::vector<const Tensor*> inputs;  // nullptr: absent
  hal_dtype_e out;
  hal_dtype_e common;
  const OpCall* call = nullptr;                     // attributes from the call,
  const std::vector<sdk::AttrValue>* attrs = nullptr;  // or from this list

  const char* name() const { return schema.name; }
  const sdk::AttrValue& attr(const char* attr_name) const {
    for (size_t i = 0; i < schema.attr_count; ++i)
      if (std::strcmp(schema.attrs[i].name, attr_name) == 0) return call ? call->attr(i) : attrs->at(i);
    sdk::fail(HAL_STATUS_INTERNAL, schema.name, ": no attribute '", attr_name, "'");
  }
  sdk::Scalar scalar(const char* attr_name) const {
    const sdk::AttrValue& a = attr(attr_name);
    switch (a.kind) {
      case sdk::AttrKind::kScalar: return a.as_scalar();
      case sdk::AttrKind::kFloat: return sdk::Scalar::from_float(a.as_float());
      default: return sdk::Scalar::from_int(a.as_int());
    }
  }
};

Site site_of(const OpCall& c) {
  Site s{c.schema(), {}, c.output(0).dtype, c.common_dtype(), &c, nullptr};
  for (size_t i = 0; i < c.input_count(); ++i) s.inputs.push_back(c.optional_input(i));
  return s;
}

// Builds the kernel description of a site from its op's Spec; false (with
// WHY) when the spec has no expression for the compute dtype.
bool describe(const Site& c, const Spec& spec, ElementwiseKernel& k, std::string& why) {
  k.compute = spec.compute_is_output ? c.out : c.common;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    k.inputs.push_back(c.inputs[i]);
    k.input_compute.push_back((spec.own_dtype_inputs >> i) & 1u && c.inputs[i] ? c.inputs[i]->dtype
                                                                                : HAL_DTYPE_INVALID);
  }
  int cl = cls(k.compute);
  k.expr = cl == kF ? spec.f : cl == kI ? spec.i : spec.b;
  if (k.expr.empty()) {
    why = std::string(c.name()) + ": no OpenCL kernel for dtype " + sdk::dtype_name(k.compute);
    return false;
  }
  k.helpers = cl == kI && !spec.helpers_i.empty() ? spec.helpers_i : spec.helpers;
  for (const char* a : spec.scalar_attrs) k.scalars.push_back(c.scalar(a));
  return true;
}

void int_guard(ElementwiseKernel& k, const char* site) {
  if (cls(k.compute) == kI) {
    k.guard = "v == 0";
    k.guard_kind = kStatusDivisionByZero;
    k.guard_site = site;
  }
}

// The kernel description of any op this file generates.
bool build_kernel(const Site& c, ElementwiseKernel& k, std::string& why) {
  const std::string name = c.name();
  if (name == "gelu" || name == "gelu_backward") {
    bool tanh_approx = c.attr("approximate").as_string() == "tanh";
    std::string e = name == "gelu" ? (tanh_approx ? "gelu_tanh(x0)" : "gelu_erf(x0)")
                                   : (tanh_approx ? "x0 * gelu_tanh_grad(x1)" : "x0 * gelu_erf_grad(x1)");
    return describe(c, Spec{e, "", "", kGeluHelpers}, k, why);
  }
  if (name == "div") {
    // div needs the rounding mode and integer checks.
    const std::string& mode = c.attr("rounding_mode").as_string();
    Spec spec;
    if (mode == "none") {
      spec = {"x0 / x1", "", "", "", true};
    } else if (mode == "trunc") {
      spec = {"trunc(x0 / x1)", "(x1 == 0 ? (C)0 : (C)(x0 / x1))", "(x0 & x1)"};
    } else {
      spec = {"floor(x0 / x1)", "floor_div(x0, x1)", "(x0 & x1)", "", false, 0, {}, kIntHelpers};
    }
    if (!describe(c, spec, k, why)) return false;
    if (mode != "none") int_guard(k, "div: integer division by zero: 'other'");
    return true;
  }
  if (name == "fmod" || name == "remainder") {
    if (!describe(c, specs().at(name), k, why)) return false;
    int_guard(k, name == "fmod" ? "fmod: integer division by zero: 'other'"
                                : "remainder: integer division by zero: 'other'");
    return true;
  }
  if (name == "pow") {
    if (!describe(c, Spec{"pow(x0, x1)", "ipow(x0, x1)", "", "", false, 0, {}, kIntHelpers}, k, why)) return false;
    hal_dtype_e e = c.inputs.at(1)->dtype;
    if (cls(k.compute) == kI && sdk::is_integral(e) && e != HAL_DTYPE_UINT8) {
      k.guard = "v < 0";
      k.guard_kind = kStatusInvalidValue;
      k.guard_site = "pow: integers to negative integer powers are not allowed: 'other'";
    }
    return true;
  }
  if (name == "copy") {
    // Floating to integer copies go through a saturating 64-bit conversion
    // (NaN gives 0; a plain cast is undefined), then wrap to the width.
    std::string expr = "x0";
    if (sdk::is_floating(c.inputs.at(0)->dtype) && sdk::is_integral(c.out)) expr = "convert_long_sat(x0)";
    return describe(c, Spec{expr, expr, expr, "", true, 1}, k, why);
  }
  if (name == "clamp") {
    // A NaN bound gives NaN, as in PyTorch (x != x only holds for NaN).
    std::string r = "x0";
    if (c.inputs.size() > 1 && c.inputs[1]) r = "((x1 != x1 || x1 > " + r + ") ? x1 : " + r + ")";
    if (c.inputs.size() > 2 && c.inputs[2]) r = "((x2 != x2 || x2 < " + r + ") ? x2 : " + r + ")";
    return describe(c, Spec{r, r, ""}, k, why);
  }
  auto it = specs().find(name);
  if (it == specs().end()) {
    why = name + ": not an elementwise op of the OpenCL plugin";
    return false;
  }
  return describe(c, it->second, k, why);
}

void generic_kernel(const CallPtr& call, sdk::Stream* stream) {
  ElementwiseKernel k;
  std::string why;
  if (!build_kernel(site_of(*call), k, why)) sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, why);
  launch_elementwise(device_of(*call), stream, k, call->output(0));
}

}  // namespace

bool elementwise_expression(const sdk::OpSchema& op, const std::vector<sdk::Tensor>& inputs, hal_dtype_e out,
                            const std::vector<sdk::AttrValue>& attrs, ElementwiseKernel& k, std::string* why) {
  if (std::strcmp(op.name, "fill") == 0) {
    if (why) *why = "fill: has no inputs";
    return false;
  }
  Site site{op, {}, out, sdk::OpCallBuilder::common_dtype(op, inputs), nullptr, &attrs};
  for (const sdk::Tensor& t : inputs) site.inputs.push_back(t.defined ? &t : nullptr);
  std::string reason;
  k = ElementwiseKernel{};
  bool ok = build_kernel(site, k, reason);
  if (!ok && why) *why = reason;
  return ok;
}

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
    ops.add(*sdk::find_schema(name.c_str()), &generic_kernel, mask);
  }
  ops.add<sdk::op::gelu>(&generic_kernel, F);
  ops.add<sdk::op::gelu_backward>(&generic_kernel, F);
  ops.add<sdk::op::div>(&generic_kernel, F | I | B);
  ops.add<sdk::op::pow>(&generic_kernel, F | I);
  ops.add<sdk::op::clamp>(&generic_kernel, F | I);
  ops.add<sdk::op::copy>(&generic_kernel, F | I | B);
}

}  // namespace hal::opencl
