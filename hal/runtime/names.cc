#include "hal/runtime/names.hpp"

#include "hal/hal.h"

namespace hal {

const char* dtype_name(uint32_t dtype) noexcept {
  static const char* const kNames[] = {"invalid", "float32", "float16", "bfloat16", "float64", "int8",
                                       "uint8",   "int16",   "int32",   "int64",    "bool",    "uint16",
                                       "uint32",  "uint64",  "complex64", "complex128"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == HAL_DTYPE_COUNT_);
  return dtype < HAL_DTYPE_COUNT_ ? kNames[dtype] : "unknown";
}

std::vector<std::string> dtype_names(uint64_t set) {
  std::vector<std::string> out;
  for (uint32_t d = 1; d < 64; ++d)
    if (set & HAL_DTYPE_BIT(d)) out.emplace_back(dtype_name(d));
  return out;
}

std::vector<std::string> capability_names(uint32_t bits) {
  static const char* const kNames[] = {"device", "memory", "stream", "collective", "operator", "graph"};
  std::vector<std::string> out;
  for (uint32_t i = 0; i < 32; ++i)
    if (bits & (1u << i)) out.emplace_back(i < 6 ? kNames[i] : "bit" + std::to_string(i));
  return out;
}

}  // namespace hal
