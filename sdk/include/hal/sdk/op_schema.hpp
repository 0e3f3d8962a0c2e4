// HAL C++ SDK: the types an op call is made of — the catalog's schema types
// (filled by the generated hal/sdk/op_catalog.hpp), dtype helpers, and the
// validated, owned view of one call (OpCall) that kernels read.
// Header-only; no type here crosses the C ABI.
#ifndef HAL_SDK_OP_SCHEMA_HPP_
#define HAL_SDK_OP_SCHEMA_HPP_

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

class Buffer;
class Device;
class OpCall;

// ---- dtypes -----------------------------------------------------------------

inline size_t dtype_size(uint32_t dtype) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_INT32: case HAL_DTYPE_UINT32: return 4;
    case HAL_DTYPE_FLOAT16: case HAL_DTYPE_BFLOAT16: case HAL_DTYPE_INT16: case HAL_DTYPE_UINT16: return 2;
    case HAL_DTYPE_FLOAT64: case HAL_DTYPE_INT64: case HAL_DTYPE_UINT64: case HAL_DTYPE_COMPLEX64: return 8;
    case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_BOOL: return 1;
    case HAL_DTYPE_COMPLEX128: return 16;
    default: return 0;
  }
}

inline const char* dtype_name(uint32_t dtype) {
  static const char* const names[] = {"invalid", "float32", "float16", "bfloat16", "float64",
                                      "int8",    "uint8",   "int16",   "int32",    "int64",
                                      "bool",    "uint16",  "uint32",  "uint64",   "complex64",
                                      "complex128"};
  return dtype < HAL_DTYPE_COUNT_ ? names[dtype] : "unknown";
}

inline bool is_floating(uint32_t d) {
  return d == HAL_DTYPE_FLOAT32 || d == HAL_DTYPE_FLOAT16 || d == HAL_DTYPE_BFLOAT16 ||
         d == HAL_DTYPE_FLOAT64;
}
inline bool is_integral(uint32_t d) { return !is_floating(d) && d != HAL_DTYPE_BOOL; }

// "float32, int64" for a dtype mask.
inline std::string dtype_mask_names(uint64_t mask) {
  std::string out;
  for (uint32_t d = 1; d < HAL_DTYPE_COUNT_; ++d)
    if (mask & HAL_DTYPE_BIT(d)) out += (out.empty() ? "" : ", ") + std::string(dtype_name(d));
  return out.empty() ? "none" : out;
}

// PyTorch's promote_types for the catalog's dtypes: bool < integers <
// floating; float16 with bfloat16 gives float32; uint8 with int8 gives int16.
inline hal_dtype_e promote_types(uint32_t a, uint32_t b) {
  if (a == b) return static_cast<hal_dtype_e>(a);
  if (a == HAL_DTYPE_BOOL) return static_cast<hal_dtype_e>(b);
  if (b == HAL_DTYPE_BOOL) return static_cast<hal_dtype_e>(a);
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (a == HAL_DTYPE_FLOAT64 || b == HAL_DTYPE_FLOAT64) return HAL_DTYPE_FLOAT64;
    return HAL_DTYPE_FLOAT32;  // {f16, bf16, f32} mixed
  }
  if (fa) return static_cast<hal_dtype_e>(a);
  if (fb) return static_cast<hal_dtype_e>(b);
  auto rank = [](uint32_t d) {  // signed integer width; uint8 sits below int16
    switch (d) {
      case HAL_DTYPE_INT8: return 1;
      case HAL_DTYPE_UINT8: return 2;
      case HAL_DTYPE_INT16: return 3;
      case HAL_DTYPE_INT32: return 4;
      default: return 5;
    }
  };
  if ((a == HAL_DTYPE_UINT8 && b == HAL_DTYPE_INT8) || (a == HAL_DTYPE_INT8 && b == HAL_DTYPE_UINT8))
    return HAL_DTYPE_INT16;
  return static_cast<hal_dtype_e>(rank(a) >= rank(b) ? a : b);
}

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
};

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
  Buffer* buffer = nullptr;
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
  // STRIDES = contiguous_strides(): this descriptor now describes a dense
  // row-major tensor of its shape (DATA / BUFFER are not touched).
  void set_contiguous_strides() {
    std::array<int64_t, HAL_TENSOR_MAX_RANK> s = contiguous_strides();
    std::copy(s.begin(), s.end(), strides);
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
  Device& device() const { return *device_; }

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
  friend struct OpCallBuilder;
  const OpSchema* schema_ = nullptr;
  Device* device_ = nullptr;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  std::vector<AttrValue> attrs_;
  hal_dtype_e common_dtype_ = HAL_DTYPE_INVALID;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_OP_SCHEMA_HPP_
