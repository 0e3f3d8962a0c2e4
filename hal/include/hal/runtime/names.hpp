// HAL runtime: printable names for ABI enums (for tools and bridges).
#ifndef HAL_RUNTIME_NAMES_HPP_
#define HAL_RUNTIME_NAMES_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace hal {

// "float32", "bfloat16", ...; "unknown" for values newer than this build.
// Never NULL; static storage.
const char* dtype_name(uint32_t dtype) noexcept;
// Names of the dtypes in a HAL_DTYPE_BIT set, in enum order.
std::vector<std::string> dtype_names(uint64_t dtype_set);
// Names of HAL_CAPABILITY_* bits ("device", "memory", "stream", ...).
std::vector<std::string> capability_names(uint32_t bits);

}  // namespace hal

#endif  // HAL_RUNTIME_NAMES_HPP_
