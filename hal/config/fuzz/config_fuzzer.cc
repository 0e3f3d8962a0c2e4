// libFuzzer target: Config::parse over arbitrary bytes as hal.toml text.
// A ConfigError is a clean refusal; any other exception, a crash, hang,
// leak or sanitizer report is a bug. Built only with -DHAL_BUILD_FUZZ=ON and
// clang (see CMakeLists.txt); the seed corpus is fuzz/corpus/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hal/runtime/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // An absolute source: relative paths resolve against /etc/hal, not the
    // fuzzer's working directory.
    hal::Config c = hal::Config::parse(text, "/etc/hal/hal.toml");
    for (const hal::PluginSpec& p : c.plugins) (void)(p.name.size() + p.path.size() + p.options.size());
  } catch (const hal::ConfigError&) {
  }
  return 0;
}
