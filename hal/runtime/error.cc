#include "hal/runtime/error.hpp"

#include <string>

namespace hal {

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
