// HAL C++ SDK: errors on the plugin side of the ABI.
//
// Plugin code throws hal::sdk::Error (or lets std::bad_alloc escape); the
// SDK's table wrappers catch everything at the ABI boundary and turn it into
// a hal_status_t* whose message names the plugin and the call. Header-only.
#ifndef HAL_SDK_STATUS_HPP_
#define HAL_SDK_STATUS_HPP_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "hal/common/error.hpp"
#include "hal/common/status_code.hpp"
#include "hal/status.h"

namespace hal::sdk {

// The error plugin code throws (hal/common/error.hpp): an exception with a
// HAL status code; fail(code, parts...) throws one. The shared shape rules
// throw the same type, so one catch at the boundary sees them all.
using common::Error;
using common::fail;
// "INVALID_ARGUMENT" etc.; "UNKNOWN" for codes newer than this build.
using common::status_code_name;

namespace detail {
// One allocation holding the struct and its message; freed by its own
// destroy, so the status is released by the allocator that made it.
struct OwnedStatus {
  hal_status_t status;
  char message[1];
};
inline void destroy_owned_status(hal_status_t* status) {
  std::free(reinterpret_cast<OwnedStatus*>(status));
}
}  // namespace detail

// Creates a status the caller owns (release with status->destroy(status)).
// Returns a static out-of-memory status if allocation fails, so an error is
// never lost; its destroy is a no-op.
inline hal_status_t* make_status(hal_status_code_e code,
                                 const std::string& message) noexcept {
  const size_t bytes = offsetof(detail::OwnedStatus, message) + message.size() + 1;
  auto* owned = static_cast<detail::OwnedStatus*>(std::malloc(bytes));
  if (owned == nullptr) {
    static hal_status_t oom{sizeof(hal_status_t), HAL_STATUS_OUT_OF_MEMORY,
                            "out of memory while reporting an error",
                            [](hal_status_t*) {}};
    return &oom;
  }
  std::memcpy(owned->message, message.c_str(), message.size() + 1);
  owned->status.struct_size = sizeof(hal_status_t);
  owned->status.code = code;
  owned->status.message = owned->message;
  owned->status.destroy = &detail::destroy_owned_status;
  return &owned->status;
}

// Runs FN and converts any exception into a status whose message starts
// with "<plugin>: <call>: ". Returns NULL on success. Never throws.
template <class Fn>
hal_status_t* guard(const char* plugin, const char* call, Fn&& fn) noexcept {
  auto prefixed = [&](const char* what) {
    std::string m;
    try {
      m = std::string(plugin) + ": " + call + ": " + what;
    } catch (...) {
      return std::string();
    }
    return m;
  };
  try {
    std::forward<Fn>(fn)();
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), prefixed(e.what()));
  } catch (const std::bad_alloc&) {
    return make_status(HAL_STATUS_OUT_OF_MEMORY, prefixed("out of host memory"));
  } catch (const std::exception& e) {
    return make_status(HAL_STATUS_INTERNAL, prefixed(e.what()));
  } catch (...) {
    return make_status(HAL_STATUS_INTERNAL, prefixed("unknown exception"));
  }
}

}  // namespace hal::sdk

#endif  // HAL_SDK_STATUS_HPP_
