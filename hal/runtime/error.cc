#include "hal/runtime/error.hpp"

#include <string>

namespace hal {

const char* status_code_name(uint32_t code) noexcept {
  static const char* const kNames[] = {
      "OK",           "INVALID_ARGUMENT",    "UNIMPLEMENTED",  "UNSUPPORTED_DTYPE", "OUT_OF_MEMORY",
      "DEVICE_ERROR", "TIMEOUT",             "NOT_FOUND",      "OUT_OF_RANGE",      "FAILED_PRECONDITION",
      "ALREADY_EXISTS", "ABI_MISMATCH",      "INTERNAL"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == HAL_STATUS_CODE_COUNT_);
  return code < HAL_STATUS_CODE_COUNT_ ? kNames[code] : "UNKNOWN";
}

void throw_if_error(hal_status_t* status) {
  if (status == nullptr) return;
  // Copy out before destroy: the message belongs to the status.
  uint32_t raw = status->code;
  std::string message = status->message != nullptr ? status->message : "(no message)";
  status->destroy(status);
  auto code = (raw == HAL_STATUS_OK || raw >= HAL_STATUS_CODE_COUNT_) ? HAL_STATUS_INTERNAL
                                                                        : static_cast<hal_status_code_e>(raw);
  throw Error(code, message);
}

}  // namespace hal
