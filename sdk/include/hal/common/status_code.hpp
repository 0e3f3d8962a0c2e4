// HAL shared layer (hal::common): names of the C ABI's status codes, for
// messages on both sides of the ABI. Header-only.
#ifndef HAL_COMMON_STATUS_CODE_HPP_
#define HAL_COMMON_STATUS_CODE_HPP_

#include <cstdint>

#include "hal/status.h"

namespace hal::common {

// Name of a status code ("INVALID_ARGUMENT"); "UNKNOWN" for codes this
// header does not know. Never NULL; static storage; thread-safe.
inline const char* status_code_name(uint32_t code) noexcept {
  static const char* const kNames[] = {
      "OK",        "INVALID_ARGUMENT", "UNIMPLEMENTED",       "UNSUPPORTED_DTYPE",
      "OUT_OF_MEMORY", "DEVICE_ERROR", "TIMEOUT",             "NOT_FOUND",
      "OUT_OF_RANGE",  "FAILED_PRECONDITION", "ALREADY_EXISTS", "ABI_MISMATCH",
      "INTERNAL",      "MIXED_DTYPES", "ABORTED",             "DEVICE_LOST"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == HAL_STATUS_CODE_COUNT_);
  return code < HAL_STATUS_CODE_COUNT_ ? kNames[code] : "UNKNOWN";
}

}  // namespace hal::common

#endif  // HAL_COMMON_STATUS_CODE_HPP_
