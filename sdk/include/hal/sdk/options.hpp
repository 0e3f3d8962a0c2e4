// HAL C++ SDK: a plugin's options (hal.toml [plugin.options]), handed to the
// plugin's constructor. Header-only.
#ifndef HAL_SDK_OPTIONS_HPP_
#define HAL_SDK_OPTIONS_HPP_

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "hal/plugin.h"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

// Key/value options, copied from the C array. The SDK owns the object for
// the duration of the plugin's constructor (copy what you keep). Const
// methods are safe to call from several threads.
class Options {
 public:
  Options() = default;
  // OPTIONS: COUNT entries with non-NULL key and value (copied).
  Options(const hal_option_t* options, size_t count) {
    for (size_t i = 0; i < count; ++i) entries_.emplace_back(options[i].key, options[i].value);
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::string get(const std::string& key, const std::string& fallback) const {
    const std::string* v = find(key);
    return v ? *v : fallback;
  }
  // Integer option; throws INVALID_ARGUMENT naming key and value when the
  // value is not an integer within [min, max].
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    const std::string* v = find(key);
    if (v == nullptr) return fallback;
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0 || parsed < min || parsed > max)
      fail(HAL_STATUS_INVALID_ARGUMENT, "option '", key, "' = '", *v,
           "' is not an integer in [", min, ", ", max, "]");
    return parsed;
  }
  // Throws INVALID_ARGUMENT naming the first key not in KNOWN.
  void require_known(std::initializer_list<const char*> known) const {
    for (const auto& entry : entries_) {
      const std::string& key = entry.first;  // no structured binding: clang can't capture one
      bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; });
      if (!ok) fail(HAL_STATUS_INVALID_ARGUMENT, "unknown option '", key, "' = '", entry.second, "'");
    }
  }

 private:
  const std::string* find(const std::string& key) const {
    for (const auto& kv : entries_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_OPTIONS_HPP_
