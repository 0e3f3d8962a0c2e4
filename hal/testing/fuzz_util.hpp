// Helpers shared by the libFuzzer targets (hal/*/fuzz/, built with
// -DHAL_BUILD_FUZZ=ON): the CPU plugin's runtime, and a hard failure that
// libFuzzer records as a crash with its input.
#ifndef HAL_TESTING_FUZZ_UTIL_HPP_
#define HAL_TESTING_FUZZ_UTIL_HPP_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "testing/runtime_util.hpp"

namespace hal::testing {

// A runtime over the CPU plugin ($HAL_FUZZ_CPU_PLUGIN, else the fuzz tree's
// own, HAL_FUZZ_CPU_PLUGIN from CMake; CI points the variable at the test
// tree's plugin, so the fuzz tree need not build its kernels) with
// DEVICES devices and the hal.toml `layers` list LAYERS ("\"validation\"").
// Hermetic: no environment, no scan. Throws hal::Error as Runtime::create.
inline std::shared_ptr<Runtime> fuzz_cpu_runtime(const std::string& layers, int devices) {
  TempDir dir;  // only hal.toml, read by create
  const char* plugin = std::getenv("HAL_FUZZ_CPU_PLUGIN");
  return load_config(dir, "discover = false\nlayers = [" + layers + "]\n[[plugin]]\npath = \"" +
                              std::string(plugin != nullptr ? plugin : HAL_FUZZ_CPU_PLUGIN) +
                              "\"\noptions = { device_count = " +
                              std::to_string(devices) + " }\n");
}

// A broken invariant: prints WHAT and aborts (libFuzzer keeps the input).
[[noreturn]] inline void fuzz_fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

}  // namespace hal::testing

#endif  // HAL_TESTING_FUZZ_UTIL_HPP_
