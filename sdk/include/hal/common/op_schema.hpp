// HAL shared layer (hal::common): the types an op call is made of — the
// catalog's schema types (filled by the generated hal/common/op_catalog.hpp)
// and the validated, owned view of one call (OpCall) that kernels and shape
// rules read. Tensor and OpCall point at the plugin SDK's Device and Buffer,
// which are only declared here (this layer never dereferences them).
// Header-only; no type here crosses the C ABI.
#ifndef HAL_COMMON_OP_SCHEMA_HPP_
#define HAL_COMMON_OP_SCHEMA_HPP_

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/common/dtype.hpp"
#include "hal/common/error.hpp"

// The plugin SDK's objects (hal/sdk/buffer.hpp, device.hpp), declared only.
namespace hal::sdk {
class Buffer;
class Device;
struct OpCallBuilder;
}  // namespace hal::sdk

namespace hal::common {

class OpCall;
struct OpCallBuilder;  // hal/common/op_call_builder.hpp

// ---- schema (filled by the generated catalog) -------------------------------

enum class AttrKind : uint8_t { kInt, kFloat, kBool, kString, kInts, kFloats, kDtype, kScalar };
inline const char* attr_kind_name(AttrKind k) {
  static const char* const names[] = {"int", "float", "bool", "string", "ints", "floats", "dtype", "scalar"};
  return names[static_cast<int>(k)];
}

// How an output's dtype follows from the call (see docs/ops.md).
enum class OutDtype : uint8_t { kSame, kPromoted, kFloat, kBool, kInt64, kAttr, kDiv, kFixed };
enum class Alias : uint8_t { kNone, kExact };

struct TensorSpec {
  const char* name;
  uint64_t dtypes;  // HAL_DTYPE_BIT mask of accepted dtypes (inputs)
  bool optional;
  bool variadic;
  OutDtype out_dtype;  // outputs only
  uint32_t fixed_dtype;  // outputs with OutDtype::kFixed
};

struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool required;
  int64_t default_i;  // int, bool, dtype, integral scalar
  double default_f;   // float, scalar
  const char* default_s;
  const int64_t* default_ints;
  const double* default_floats;
  size_t default_count;
  const char* const* choices;  // NULL-terminated, strings only; nullptr = any
};

struct TensorMeta;
// Computes the outputs' shapes (dtypes are preset from the rules; a rule may
// override them) or throws INVALID_ARGUMENT naming the op and values.
using ShapeFn = void (*)(const OpCall& call, std::vector<TensorMeta>& outputs);

struct OpSchema {
  uint32_t index;
  const char* name;
  const char* group;
  const char* summary;
  const TensorSpec* inputs;
  size_t input_count;
  const TensorSpec* outputs;
  size_t output_count;
  const AttrSpec* attrs;
  size_t attr_count;
  uint32_t promote_mask;  // bit i: input i takes part in type promotion
  Alias alias;
  const char* shape_rule;
  ShapeFn shape;

  bool variadic_inputs() const { return input_count == 1 && inputs[0].variadic; }
  // Whether input I takes part in type promotion (every input of a variadic
  // op that promotes at all).
  bool promotes_input(size_t i) const {
    return promote_mask != 0 && (variadic_inputs() || (i < 32 && ((promote_mask >> i) & 1u)));
  }
};

// The dtype an op computes in (OpCall::common_dtype) for N inputs, input i
// described by GET(i, &defined, &dtype, &rank): PyTorch's result_type over
// the promoted inputs (dimensioned tensors decide unless a 0-d tensor is of
// a higher category: bool < integer < floating); the first defined input's
// dtype when the op promotes nothing; HAL_DTYPE_INVALID without inputs. Used
// by the SDK to build a call and by libhal to cast for a uniform kernel, so
// both agree.
template <class Get>
hal_dtype_e compute_dtype(const OpSchema& schema, size_t n, Get get) {
  bool defined = false;
  hal_dtype_e dt = HAL_DTYPE_INVALID;
  int rank = 0;
  if (schema.promote_mask == 0) {
    for (size_t i = 0; i < n; ++i) {
      get(i, &defined, &dt, &rank);
      if (defined) return dt;
    }
    return HAL_DTYPE_INVALID;
  }
  hal_dtype_e dim = HAL_DTYPE_INVALID, zero = HAL_DTYPE_INVALID;
  for (size_t i = 0; i < n; ++i) {
    if (!schema.promotes_input(i)) continue;
    get(i, &defined, &dt, &rank);
    if (!defined) continue;
    hal_dtype_e& slot = rank == 0 ? zero : dim;
    slot = slot == HAL_DTYPE_INVALID ? dt : promote_types(slot, dt);
  }
  if (dim == HAL_DTYPE_INVALID) return zero;
  if (zero == HAL_DTYPE_INVALID) return dim;
  auto category = [](uint32_t d) { return d == HAL_DTYPE_BOOL ? 0 : is_floating(d) ? 2 : 1; };
  return category(zero) > category(dim) ? promote_types(dim, zero) : dim;
}

// The compute dtypes (OpCall::common_dtype) the catalog allows for SCHEMA,
// as a HAL_DTYPE_BIT mask: the dtypes of the inputs that decide
// compute_dtype, closed under promote_types for an op that promotes; 0 for
// an op without inputs (its calls have no compute dtype). Registration
// (hal/sdk/op_registry.hpp) refuses a kernel for a dtype outside it.
inline uint64_t catalog_compute_dtypes(const OpSchema& schema) {
  uint64_t mask = 0;
  if (schema.promote_mask == 0) {
    // The first defined input decides: optional inputs up to the first required one.
    for (size_t i = 0; i < schema.input_count; ++i) {
      mask |= schema.inputs[i].dtypes;
      if (!schema.inputs[i].optional) break;
    }
    return mask;
  }
  for (size_t i = 0; i < schema.input_count; ++i)
    if (schema.promotes_input(i)) mask |= schema.inputs[i].dtypes;
  for (bool grew = true; grew;) {
    grew = false;
    for (uint32_t a = 0; a < HAL_DTYPE_COUNT_; ++a)
      for (uint32_t b = 0; b < HAL_DTYPE_COUNT_; ++b) {
        if (!(mask & HAL_DTYPE_BIT(a)) || !(mask & HAL_DTYPE_BIT(b))) continue;
        const hal_dtype_e p = promote_types(static_cast<hal_dtype_e>(a), static_cast<hal_dtype_e>(b));
        if (p != HAL_DTYPE_INVALID && !(mask & HAL_DTYPE_BIT(p))) {
          mask |= HAL_DTYPE_BIT(p);
          grew = true;
        }
      }
  }
  return mask;
}

// ---- values of one call -----------------------------------------------------

// An attribute of kind "scalar": an integer or a floating value.
class Scalar {
 public:
  Scalar() = default;
  static Scalar from_int(int64_t v) { Scalar s; s.integral_ = true; s.i_ = v; s.f_ = static_cast<double>(v); return s; }
  static Scalar from_float(double v) { Scalar s; s.integral_ = false; s.f_ = v; s.i_ = static_cast<int64_t>(v); return s; }
  bool is_integral() const { return integral_; }
  double to_double() const { return f_; }
  int64_t to_int() const { return i_; }
  template <class T> T to() const { return integral_ ? static_cast<T>(i_) : static_cast<T>(f_); }

 private:
  bool integral_ = true;
  int64_t i_ = 0;
  double f_ = 0;
};

// One attribute, defaults applied. Owned by its OpCall.
class AttrValue {
 public:
  AttrKind kind = AttrKind::kInt;
  bool given = false;  // false: the catalog default
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  Scalar scalar;

  int64_t as_int() const { return i; }
  double as_float() const { return f; }
  bool as_bool() const { return i != 0; }
  const std::string& as_string() const { return s; }
  const std::vector<int64_t>& as_ints() const { return ints; }
  const std::vector<double>& as_floats() const { return floats; }
  hal_dtype_e as_dtype() const { return static_cast<hal_dtype_e>(i); }
  const Scalar& as_scalar() const { return scalar; }
};

struct TensorMeta {
  hal_dtype_e dtype = HAL_DTYPE_INVALID;
  int rank = 0;
  int64_t shape[HAL_TENSOR_MAX_RANK] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= shape[d];
    return n;
  }
  std::vector<int64_t> sizes() const { return std::vector<int64_t>(shape, shape + rank); }
  void set_shape(const std::vector<int64_t>& s) {
    if (s.size() > HAL_TENSOR_MAX_RANK)
      fail(HAL_STATUS_INVALID_ARGUMENT, "result rank ", s.size(), " exceeds HAL_TENSOR_MAX_RANK");
    rank = static_cast<int>(s.size());
    for (int d = 0; d < rank; ++d) shape[d] = s[d];
  }
};

// "[2, 3]"
inline std::string shape_string(const int64_t* shape, int rank) {
  std::string out = "[";
  for (int d = 0; d < rank; ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

// A validated tensor of one call: owned copy of the descriptor, with strides
// always filled in. DATA is the host address of element 0 when the buffer is
// host-accessible, else nullptr (device plugins use BUFFER + BYTE_OFFSET).
struct Tensor : TensorMeta {
  bool defined = false;  // false: an absent optional input
  sdk::Buffer* buffer = nullptr;  // not owned; nullptr in checks and graphs
  uint64_t byte_offset = 0;
  int64_t strides[HAL_TENSOR_MAX_RANK] = {};
  void* data = nullptr;

  size_t element_size() const { return dtype_size(dtype); }
  bool is_contiguous() const {
    int64_t expect = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != expect) return false;
      expect *= shape[d];
    }
    return true;
  }
  // Row-major (C-contiguous) strides of this shape, in elements: the last dim
  // has stride 1; entries from RANK on are 0. Pure; reads only the shape.
  std::array<int64_t, HAL_TENSOR_MAX_RANK> contiguous_strides() const {
    std::array<int64_t, HAL_TENSOR_MAX_RANK> s{};
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      s[d] = stride;
      stride *= shape[d];
    }
    return s;
  }
  // Sets STRIDES[0, RANK) to the row-major strides of this shape: the
  // descriptor now describes a dense tensor (DATA / BUFFER and the entries
  // from RANK on are not touched). A scalar loop on purpose: it runs for
  // every tensor of every launch, and a whole-array copy compiles to one
  // 512-bit store that cost ~15 ns per tensor there.
  void set_contiguous_strides() {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= shape[d];
    }
  }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
  std::string shape_str() const { return shape_string(shape, rank); }
  std::string strides_str() const { return shape_string(strides, rank); }
};

// A read-only list of tensors (variadic inputs/outputs).
class TensorList {
 public:
  TensorList(const Tensor* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  const Tensor& operator[](size_t i) const { return data_[i]; }
  const Tensor* begin() const { return data_; }
  const Tensor* end() const { return data_ + size_; }

 private:
  const Tensor* data_;
  size_t size_;
};

// One validated op call: everything a kernel reads. Built by the SDK from
// hal_op_args_t (copies; valid after the C call returned, so a kernel may
// keep it — by shared_ptr — until its stream runs it). Immutable.
class OpCall {
 public:
  const OpSchema& schema() const { return *schema_; }
  const char* name() const { return schema_->name; }
  sdk::Device& device() const { return *device_; }

  const Tensor& input(size_t i) const { return inputs_.at(i); }
  // nullptr when the optional input I was not given.
  const Tensor* optional_input(size_t i) const {
    return i < inputs_.size() && inputs_[i].defined ? &inputs_[i] : nullptr;
  }
  size_t input_count() const { return inputs_.size(); }
  TensorList inputs() const { return {inputs_.data(), inputs_.size()}; }
  const Tensor& output(size_t i) const { return outputs_.at(i); }
  size_t output_count() const { return outputs_.size(); }
  TensorList outputs() const { return {outputs_.data(), outputs_.size()}; }
  const AttrValue& attr(size_t i) const { return attrs_.at(i); }
  // The dtype the promoted inputs are computed in (first input's dtype when
  // the op promotes nothing).
  hal_dtype_e common_dtype() const { return common_dtype_; }

 private:
  friend struct OpCallBuilder;       // schema-only calls (shape inference)
  friend struct sdk::OpCallBuilder;  // launches and checks (descriptors, buffers)
  const OpSchema* schema_ = nullptr;
  sdk::Device* device_ = nullptr;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<AttrValue> attrs_;
  hal_dtype_e common_dtype_ = HAL_DTYPE_INVALID;
};

}  // namespace hal::common

#endif  // HAL_COMMON_OP_SCHEMA_HPP_
