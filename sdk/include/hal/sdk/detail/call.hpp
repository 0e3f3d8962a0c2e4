// HAL C++ SDK, internal: what every C entry shares: the library's plugin
// name and host (set once by the entry point), the exception guard, the
// host log, and small copy helpers.
#ifndef HAL_SDK_DETAIL_CALL_HPP_
#define HAL_SDK_DETAIL_CALL_HPP_

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "hal/plugin.h"
#include "hal/sdk/status.hpp"

namespace hal::sdk::detail {

struct Info {
  const char* name = "plugin";
  const char* version = "";  // hal_plugin_api_t.version
  const hal_host_api_t* host = nullptr;
  // The plugin's kInterfaces: the capabilities every device reports.
  uint32_t interfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;
};
// Written once by the entry point (one thread, before any other entry).
inline Info& info() {
  static Info i;
  return i;
}

inline void copy_string(char* dst, size_t capacity, const std::string& src) {
  size_t n = std::min(capacity - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <class F>
hal_status_t* call(const char* name, F&& f) noexcept {
  return guard(info().name, name, std::forward<F>(f));
}

// Logs through the host (no-op before the entry point ran).
inline void log(hal_log_level_e level, const std::string& message) noexcept {
  const hal_host_api_t* host = info().host;
  if (host != nullptr && HAL_STRUCT_HAS_FIELD(host, hal_host_api_t, log) && host->log != nullptr)
    host->log(host->host_context, level, message.c_str());
}

}  // namespace hal::sdk::detail

namespace hal::sdk {
using detail::log;
}  // namespace hal::sdk

#endif  // HAL_SDK_DETAIL_CALL_HPP_
