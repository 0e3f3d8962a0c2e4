// HAL shared layer (hal::common): the error the shared code and the plugin
// SDK throw. Used by both the SDK (as hal::sdk::Error, caught at the ABI
// boundary and turned into a status) and the shared shape rules; the core
// runtime has its own hal::Error (hal/runtime/error.hpp). Never crosses the
// C ABI. Header-only.
#ifndef HAL_COMMON_ERROR_HPP_
#define HAL_COMMON_ERROR_HPP_

#include <sstream>
#include <stdexcept>
#include <string>

#include "hal/status.h"

namespace hal::common {

// An error with a HAL status code. Thread-safe to throw from any thread.
class Error : public std::runtime_error {
 public:
  Error(hal_status_code_e code, const std::string& message) : std::runtime_error(message), code_(code) {}
  hal_status_code_e code() const noexcept { return code_; }

 private:
  hal_status_code_e code_;
};

// Throws Error(code, concatenation of parts). Parts are streamed with <<.
template <class... Parts>
[[noreturn]] void fail(hal_status_code_e code, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(code, os.str());
}

}  // namespace hal::common

#endif  // HAL_COMMON_ERROR_HPP_
