// HAL runtime: the exception the C++ runtime API throws.
//
// Every runtime call that fails throws hal::Error carrying a hal_status_code_e
// and a message naming the plugin, the call and the offending values. A
// status returned by a plugin is converted (and released) here, so callers
// never own a hal_status_t*. hal::Error is the runtime's own type: the
// plugin SDK's hal::sdk::Error is a different one (it never leaves a plugin:
// the SDK turns it into a status at the ABI).
#ifndef HAL_RUNTIME_ERROR_HPP_
#define HAL_RUNTIME_ERROR_HPP_

#include <stdexcept>
#include <string>

#include "hal/common/status_code.hpp"
#include "hal/status.h"

namespace hal {

// An error with a HAL status code. Thread-safe to throw from any thread.
class Error : public std::runtime_error {
 public:
  Error(hal_status_code_e code, const std::string& message) : std::runtime_error(message), code_(code) {}
  hal_status_code_e code() const noexcept { return code_; }

 private:
  hal_status_code_e code_;
};

// "INVALID_ARGUMENT" etc.; "UNKNOWN" for codes newer than this build.
using common::status_code_name;

// Throws hal::Error for a non-NULL STATUS after releasing it (status->destroy);
// unknown codes become HAL_STATUS_INTERNAL. Returns for NULL.
void throw_if_error(hal_status_t* status);

}  // namespace hal

#endif  // HAL_RUNTIME_ERROR_HPP_
