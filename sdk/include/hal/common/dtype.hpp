// HAL shared layer (hal::common): dtype helpers over the C ABI's
// hal_dtype_e (sizes, names, classes, PyTorch's type promotion). Pure
// functions: thread-safe, no allocation except the returned strings.
// Header-only.
#ifndef HAL_COMMON_DTYPE_HPP_
#define HAL_COMMON_DTYPE_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "hal/types.h"

namespace hal::common {

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

}  // namespace hal::common

#endif  // HAL_COMMON_DTYPE_HPP_
