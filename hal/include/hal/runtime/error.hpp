// HAL runtime: the exception the C++ runtime API throws.
//
// Every runtime call that fails throws hal::Error carrying a hal_status_code_e
// and a message naming the plugin, the call and the offending values. A
// status returned by a plugin is converted (and released) here, so callers
// never own a hal_status_t*. hal::Error is the SDK's error type: host and
// plugin code share one exception (it never crosses the ABI itself).
#ifndef HAL_RUNTIME_ERROR_HPP_
#define HAL_RUNTIME_ERROR_HPP_

#include "hal/sdk/status.hpp"

namespace hal {

using Error = sdk::Error;
// "INVALID_ARGUMENT" etc.; "UNKNOWN" for codes newer than this build.
using sdk::status_code_name;

// Throws hal::Error for a non-NULL STATUS after releasing it (status->destroy);
// unknown codes become HAL_STATUS_INTERNAL. Returns for NULL.
void throw_if_error(hal_status_t* status);

}  // namespace hal

#endif  // HAL_RUNTIME_ERROR_HPP_
