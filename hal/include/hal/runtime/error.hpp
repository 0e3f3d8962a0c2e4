// HAL runtime: the exception the C++ runtime API throws.
//
// Every runtime call that fails throws hal::Error carrying a hal_status_code_e
// and a message naming the plugin, the call and the offending values. A
// status returned by a plugin is converted (and released) here, so callers
// never own a hal_status_t*.
#ifndef HAL_RUNTIME_ERROR_HPP_
#define HAL_RUNTIME_ERROR_HPP_

#include <stdexcept>
#include <string>

#include "hal/status.h"

namespace hal {

class Error : public std::runtime_error {
 public:
  Error(hal_status_code_e code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  hal_status_code_e code() const noexcept { return code_; }

 private:
  hal_status_code_e code_;
};

// "INVALID_ARGUMENT" etc.; "UNKNOWN" for codes newer than this build.
const char* status_code_name(uint32_t code) noexcept;

// Throws hal::Error for a non-NULL STATUS after releasing it (status->destroy);
// unknown codes become HAL_STATUS_INTERNAL. Returns for NULL.
void throw_if_error(hal_status_t* status);

}  // namespace hal

#endif  // HAL_RUNTIME_ERROR_HPP_
