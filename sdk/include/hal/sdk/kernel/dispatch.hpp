// HAL C++ SDK, kernel helpers: run a generic lambda with the C++ type of a
// dtype.
//
//   dispatch(call.common_dtype(), [&](auto tag) {
//     using T = typename decltype(tag)::type;   // float, Half, int64_t, bool...
//   });
#ifndef HAL_SDK_KERNEL_DISPATCH_HPP_
#define HAL_SDK_KERNEL_DISPATCH_HPP_

#include <cstdint>

#include "hal/sdk/kernel/half.hpp"
#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

template <class T>
struct TypeTag {
  using type = T;
};

// Calls F(TypeTag<T>{}) for DTYPE's type; throws UNSUPPORTED_DTYPE for
// dtypes outside the catalog's ten.
template <class F>
decltype(auto) dispatch(uint32_t dtype, F&& f) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: return f(TypeTag<float>{});
    case HAL_DTYPE_FLOAT64: return f(TypeTag<double>{});
    case HAL_DTYPE_FLOAT16: return f(TypeTag<Half>{});
    case HAL_DTYPE_BFLOAT16: return f(TypeTag<BFloat16>{});
    case HAL_DTYPE_INT8: return f(TypeTag<int8_t>{});
    case HAL_DTYPE_UINT8: return f(TypeTag<uint8_t>{});
    case HAL_DTYPE_INT16: return f(TypeTag<int16_t>{});
    case HAL_DTYPE_INT32: return f(TypeTag<int32_t>{});
    case HAL_DTYPE_INT64: return f(TypeTag<int64_t>{});
    case HAL_DTYPE_BOOL: return f(TypeTag<bool>{});
    default: fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", dtype_name(dtype), " has no kernel type");
  }
}

// Dispatch over floating dtypes only.
template <class F>
decltype(auto) dispatch_float(uint32_t dtype, F&& f) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: return f(TypeTag<float>{});
    case HAL_DTYPE_FLOAT64: return f(TypeTag<double>{});
    case HAL_DTYPE_FLOAT16: return f(TypeTag<Half>{});
    case HAL_DTYPE_BFLOAT16: return f(TypeTag<BFloat16>{});
    default: fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", dtype_name(dtype), " is not floating");
  }
}

template <class T>
constexpr hal_dtype_e dtype_of() {
  if constexpr (std::is_same_v<T, float>) return HAL_DTYPE_FLOAT32;
  else if constexpr (std::is_same_v<T, double>) return HAL_DTYPE_FLOAT64;
  else if constexpr (std::is_same_v<T, Half>) return HAL_DTYPE_FLOAT16;
  else if constexpr (std::is_same_v<T, BFloat16>) return HAL_DTYPE_BFLOAT16;
  else if constexpr (std::is_same_v<T, int8_t>) return HAL_DTYPE_INT8;
  else if constexpr (std::is_same_v<T, uint8_t>) return HAL_DTYPE_UINT8;
  else if constexpr (std::is_same_v<T, int16_t>) return HAL_DTYPE_INT16;
  else if constexpr (std::is_same_v<T, int32_t>) return HAL_DTYPE_INT32;
  else if constexpr (std::is_same_v<T, int64_t>) return HAL_DTYPE_INT64;
  else if constexpr (std::is_same_v<T, bool>) return HAL_DTYPE_BOOL;
  else return HAL_DTYPE_INVALID;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_DISPATCH_HPP_
