// HAL shared layer (hal::common): the schema-only half of validating an op
// call — input and output counts, attributes (catalog defaults applied, kinds
// and choices checked), the common dtype, the outputs' dtype rules and the
// catalog's shape rule. Nothing here touches a device or a buffer, so both
// sides use it: the plugin SDK (hal::sdk::OpCallBuilder adds descriptors,
// buffers and aliasing on top) and libhal's graph shape inference (which has
// only dtypes and shapes). Header-only; every function throws
// hal::common::Error (INVALID_ARGUMENT, or UNSUPPORTED_DTYPE for a dtype the
// catalog does not allow) whose message starts with the OP prefix it was given
// ("add", "node 3 ('add')"). All functions are pure and thread-safe.
#ifndef HAL_COMMON_OP_CALL_BUILDER_HPP_
#define HAL_COMMON_OP_CALL_BUILDER_HPP_

#include <cstring>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hal/common/dtype.hpp"
#include "hal/common/error.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/hal.h"

namespace hal::common {

struct OpCallBuilder {
  // "input 'self'", "output 'out'[2]": streamed into a message only when a
  // check fails, so a valid launch builds no strings.
  struct Role {
    const char* role;
    const char* name;
    bool variadic;
    size_t index;
    friend std::ostream& operator<<(std::ostream& os, const Role& r) {
      os << r.role << " '" << r.name << "'";
      if (r.variadic) os << "[" << r.index << "]";
      return os;
    }
  };
  static Role input_role(const OpSchema& schema, size_t i) {
    bool variadic = schema.variadic_inputs();
    return Role{"input", schema.inputs[variadic ? 0 : i].name, variadic, i};
  }
  static Role output_role(const OpSchema& schema, size_t i) {
    bool variadic = variadic_outputs(schema);
    return Role{"output", schema.outputs[variadic ? 0 : i].name, variadic, i};
  }
  static bool variadic_outputs(const OpSchema& schema) {
    return schema.output_count == 1 && schema.outputs[0].variadic;
  }

  // Throws INVALID_ARGUMENT unless COUNT inputs fit SCHEMA (optional
  // trailing inputs may be left out; variadic takes 1 or more).
  static void check_input_count(const OpSchema& schema, const char* op, size_t count) {
    bool variadic = schema.variadic_inputs();
    size_t required = 0;
    for (size_t i = 0; i < schema.input_count; ++i) required += schema.inputs[i].optional ? 0 : 1;
    if (variadic ? count == 0 : (count < required || count > schema.input_count))
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": got ", count, " inputs but the op takes ",
           variadic ? std::string("1 or more") :
           required == schema.input_count ? std::to_string(required) :
           std::to_string(required) + " to " + std::to_string(schema.input_count),
           " (", input_names(schema), ")");
  }
  static void check_output_count(const OpSchema& schema, const char* op, size_t count) {
    bool variadic = variadic_outputs(schema);
    if (variadic ? count == 0 : count != schema.output_count)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": got ", count, " outputs but the op has ",
           variadic ? std::string("1 or more") : std::to_string(schema.output_count));
  }

  // UNSUPPORTED_DTYPE unless input I of SCHEMA accepts DTYPE.
  static void check_input_dtype(const OpSchema& schema, const char* op, size_t i, hal_dtype_e dtype) {
    const TensorSpec& spec = schema.inputs[schema.variadic_inputs() ? 0 : i];
    if ((spec.dtypes & HAL_DTYPE_BIT(dtype)) == 0)
      fail(HAL_STATUS_UNSUPPORTED_DTYPE, op, ": ", input_role(schema, i), " has dtype ", dtype_name(dtype),
           "; the catalog allows ", dtype_mask_names(spec.dtypes));
  }

  // The op's attributes in catalog order: defaults, then ATTRS[0..COUNT)
  // checked against the schema; required ones must be given.
  static std::vector<AttrValue> parse_attrs(const OpSchema& schema, const char* op, const hal_attr_t* attrs,
                                            size_t count) {
    std::vector<AttrValue> values;
    parse_attrs_into(schema, op, attrs, count, values);
    return values;
  }
  // The same into VALUES (emptied first; its capacity is kept).
  static void parse_attrs_into(const OpSchema& schema, const char* op, const hal_attr_t* attrs, size_t count,
                               std::vector<AttrValue>& values) {
    values.clear();
    values.resize(schema.attr_count);
    for (size_t i = 0; i < schema.attr_count; ++i) set_default(schema.attrs[i], values[i]);
    if (count > 0 && attrs == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attrs is NULL but attr_count is ", count);
    for (size_t k = 0; k < count; ++k) parse_attr(schema, op, attrs[k], values);
    for (size_t i = 0; i < schema.attr_count; ++i)
      if (schema.attrs[i].required && !values[i].given)
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": missing required attribute '", schema.attrs[i].name, "' (",
             attr_kind_name(schema.attrs[i].kind), ")");
  }

  // OpCall::common_dtype of SCHEMA applied to INPUTS (only defined, dtype
  // and rank are read): graph compilers use it for a node's values.
  static hal_dtype_e common_dtype(const OpSchema& schema, const std::vector<Tensor>& inputs) {
    return compute_dtype(schema, inputs.size(), [&](size_t i, bool* defined, hal_dtype_e* dt, int* rank) {
      *defined = inputs[i].defined;
      *dt = inputs[i].dtype;
      *rank = inputs[i].rank;
    });
  }

  // The outputs CALL must have (OUTPUT_COUNT of them): dtypes from the
  // catalog's dtype rules, shapes from its shape rule (which may override a
  // dtype). Throws what the rule throws.
  static std::vector<TensorMeta> expected_outputs(const OpCall& call, size_t output_count) {
    std::vector<TensorMeta> expected;
    expected_outputs_into(call, output_count, expected);
    return expected;
  }
  // The same into EXPECTED (refilled; its capacity is kept).
  static void expected_outputs_into(const OpCall& call, size_t output_count, std::vector<TensorMeta>& expected) {
    const OpSchema& schema = call.schema();
    bool variadic = variadic_outputs(schema);
    expected.assign(output_count, TensorMeta{});
    for (size_t i = 0; i < expected.size(); ++i)
      expected[i].dtype = output_dtype(call, schema.outputs[variadic ? 0 : i]);
    schema.shape(call, expected);
  }

  // Validates a call described by INPUTS (nullptr = an absent optional
  // input; only dtype, rank and shape are read; sizes must be >= 0, each
  // tensor at most MAX_NUMEL elements — a launch's bound by default) and
  // ATTRS[0..ATTR_COUNT) against SCHEMA, and returns the OUTPUT_COUNT
  // outputs the catalog's rules give. No device, no buffers: the call's
  // tensors have no data. OP prefixes every message.
  // GIVEN (empty, or one entry per output; nullptr = not given) are the
  // caller's outputs, which the rules of ops whose output is the caller's
  // choice (copy, fill) read.
  static std::vector<TensorMeta> infer(const OpSchema& schema, const char* op,
                                       const std::vector<const TensorMeta*>& inputs, const hal_attr_t* attrs,
                                       size_t attr_count, size_t output_count,
                                       const std::vector<const TensorMeta*>& given = {},
                                       int64_t max_numel = int64_t{1} << 56) {
    check_input_count(schema, op, inputs.size());
    check_output_count(schema, op, output_count);
    OpCall call;
    call.schema_ = &schema;
    size_t n_in = schema.variadic_inputs() ? inputs.size() : schema.input_count;
    call.inputs_.resize(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      const TensorMeta* t = i < inputs.size() ? inputs[i] : nullptr;
      if (t == nullptr) {
        if (!schema.inputs[schema.variadic_inputs() ? 0 : i].optional)
          fail(HAL_STATUS_INVALID_ARGUMENT, op, ": required ", input_role(schema, i), " is absent");
        continue;
      }
      check_input_dtype(schema, op, i, t->dtype);
      set_meta(op, input_role(schema, i), *t, max_numel, call.inputs_[i]);
    }
    call.outputs_.resize(given.size());
    for (size_t i = 0; i < given.size(); ++i)
      if (given[i] != nullptr) set_meta(op, output_role(schema, i), *given[i], max_numel, call.outputs_[i]);
    call.attrs_ = parse_attrs(schema, op, attrs, attr_count);
    call.common_dtype_ = common_dtype(schema, call.inputs_);
    try {
      return expected_outputs(call, output_count);
    } catch (const std::out_of_range&) {  // the rule read an output that was not given
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": the op's output shapes or dtypes are the caller's choice (its rule "
           "reads the outputs); declare them");
    }
  }

 private:
  // DST = T (defined, contiguous strides) once its sizes are checked.
  static void set_meta(const char* op, const Role& role, const TensorMeta& t, int64_t max_numel, Tensor& dst) {
    static_cast<TensorMeta&>(dst) = t;
    int64_t numel = 1;
    for (int d = 0; d < dst.rank; ++d) {
      if (dst.shape[d] < 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", role, " has negative size ", dst.shape[d], " in dim ", d,
             " of shape ", dst.shape_str());
      if (__builtin_mul_overflow(numel, dst.shape[d], &numel) || numel > max_numel)
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", role, " of shape ", dst.shape_str(), " has too many elements");
    }
    dst.defined = true;
    dst.set_contiguous_strides();
  }

  static std::string input_names(const OpSchema& s) {
    std::string out;
    for (size_t i = 0; i < s.input_count; ++i)
      out += (i ? ", " : "") + std::string(s.inputs[i].name) + (s.inputs[i].optional ? "?" : "");
    return out;
  }

  static void set_default(const AttrSpec& spec, AttrValue& v) {
    v.kind = spec.kind;
    v.i = spec.default_i;
    v.f = spec.default_f;
    if (spec.default_s != nullptr) v.s = spec.default_s;
    if (spec.default_ints != nullptr) v.ints.assign(spec.default_ints, spec.default_ints + spec.default_count);
    if (spec.default_floats != nullptr)
      v.floats.assign(spec.default_floats, spec.default_floats + spec.default_count);
    if (spec.kind == AttrKind::kScalar)
      v.scalar = spec.default_f == static_cast<double>(spec.default_i) ? Scalar::from_int(spec.default_i)
                                                                       : Scalar::from_float(spec.default_f);
  }

  static const char* attr_type_name(uint32_t type) {
    static const char* const names[] = {"invalid", "INT", "FLOAT", "BOOL", "STRING", "INTS", "FLOATS", "DTYPE"};
    return type <= HAL_ATTR_TYPE_DTYPE ? names[type] : "unknown";
  }

  static void parse_attr(const OpSchema& schema, const char* op, const hal_attr_t& a, std::vector<AttrValue>& values) {
    if (!HAL_STRUCT_HAS_FIELD(&a, hal_attr_t, count))
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": hal_attr_t.struct_size ", a.struct_size, " is too small");
    if (a.name == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, op, ": an attribute has a NULL name");
    size_t idx = schema.attr_count;
    for (size_t i = 0; i < schema.attr_count; ++i)
      if (std::strcmp(schema.attrs[i].name, a.name) == 0) idx = i;
    if (idx == schema.attr_count) {
      std::string known;
      for (size_t i = 0; i < schema.attr_count; ++i) known += (i ? ", " : "") + std::string(schema.attrs[i].name);
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": unknown attribute '", a.name, "' (the op has: ",
           known.empty() ? "no attributes" : known, ")");
    }
    const AttrSpec& spec = schema.attrs[idx];
    AttrValue& v = values[idx];
    if (v.given) fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute '", a.name, "' given twice");
    auto wrong = [&] {
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute '", a.name, "' must be ", attr_kind_name(spec.kind),
           " but a ", attr_type_name(a.type), " was given");
    };
    switch (spec.kind) {
      case AttrKind::kInt:
        if (a.type != HAL_ATTR_TYPE_INT) wrong();
        v.i = a.value.i;
        break;
      case AttrKind::kFloat:
        if (a.type == HAL_ATTR_TYPE_FLOAT) v.f = a.value.f;
        else if (a.type == HAL_ATTR_TYPE_INT) v.f = static_cast<double>(a.value.i);
        else wrong();
        break;
      case AttrKind::kBool:
        if (a.type != HAL_ATTR_TYPE_BOOL || (a.value.i != 0 && a.value.i != 1)) wrong();
        v.i = a.value.i;
        break;
      case AttrKind::kString:
        if (a.type != HAL_ATTR_TYPE_STRING || a.value.s == nullptr) wrong();
        v.s = a.value.s;
        if (spec.choices != nullptr) {
          bool ok = false;
          std::string list;
          for (const char* const* c = spec.choices; *c != nullptr; ++c) {
            ok = ok || v.s == *c;
            list += (list.empty() ? "" : ", ") + std::string(*c);
          }
          if (!ok)
            fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute '", a.name, "' = '", v.s, "' is not one of ", list);
        }
        break;
      case AttrKind::kInts:
        if (a.type != HAL_ATTR_TYPE_INTS || (a.count > 0 && a.value.ints == nullptr)) wrong();
        v.ints.assign(a.value.ints, a.value.ints + a.count);
        break;
      case AttrKind::kFloats:
        if (a.type != HAL_ATTR_TYPE_FLOATS || (a.count > 0 && a.value.floats == nullptr)) wrong();
        v.floats.assign(a.value.floats, a.value.floats + a.count);
        break;
      case AttrKind::kDtype:
        if (a.type != HAL_ATTR_TYPE_DTYPE) wrong();
        if (a.value.i < 0 || a.value.i >= HAL_DTYPE_COUNT_ || dtype_size(static_cast<uint32_t>(a.value.i)) == 0)
          if (a.value.i != HAL_DTYPE_INVALID)
            fail(HAL_STATUS_UNSUPPORTED_DTYPE, op, ": attribute '", a.name, "' = ", a.value.i, " is not a dtype");
        v.i = a.value.i;
        break;
      case AttrKind::kScalar:
        if (a.type == HAL_ATTR_TYPE_INT || a.type == HAL_ATTR_TYPE_BOOL) v.scalar = Scalar::from_int(a.value.i);
        else if (a.type == HAL_ATTR_TYPE_FLOAT) v.scalar = Scalar::from_float(a.value.f);
        else wrong();
        v.i = v.scalar.to_int();
        v.f = v.scalar.to_double();
        break;
    }
    v.given = true;
  }

  static hal_dtype_e output_dtype(const OpCall& call, const TensorSpec& spec) {
    hal_dtype_e common = call.common_dtype();
    auto to_float = [](hal_dtype_e d) { return is_floating(d) ? d : HAL_DTYPE_FLOAT32; };
    switch (spec.out_dtype) {
      case OutDtype::kSame: return call.input_count() > 0 && call.input(0).defined ? call.input(0).dtype : common;
      case OutDtype::kPromoted: return common;
      case OutDtype::kFloat: return to_float(common);
      case OutDtype::kBool: return HAL_DTYPE_BOOL;
      case OutDtype::kInt64: return HAL_DTYPE_INT64;
      case OutDtype::kFixed: return static_cast<hal_dtype_e>(spec.fixed_dtype);
      case OutDtype::kAttr:
      case OutDtype::kDiv: {
        const OpSchema& s = call.schema();
        for (size_t i = 0; i < s.attr_count; ++i) {
          if (spec.out_dtype == OutDtype::kAttr && std::strcmp(s.attrs[i].name, "dtype") == 0) {
            hal_dtype_e d = call.attr(i).as_dtype();
            return d != HAL_DTYPE_INVALID ? d : common;
          }
          if (spec.out_dtype == OutDtype::kDiv && std::strcmp(s.attrs[i].name, "rounding_mode") == 0)
            return call.attr(i).as_string() == "none" ? to_float(common) : common;
        }
        return common;
      }
    }
    return common;
  }
};

}  // namespace hal::common

#endif  // HAL_COMMON_OP_CALL_BUILDER_HPP_
