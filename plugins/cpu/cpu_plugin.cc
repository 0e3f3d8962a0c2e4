// The reference CPU plugin: every HAL interface implemented on host memory
// and worker threads. Options (hal.toml [plugin.options]):
//   device_count = N   expose N CPU devices (default 1), for multi-device use.
#include "cpu_device.hpp"
#include "hal/sdk/ops.hpp"
#include "ops/cpu_ops.hpp"

namespace hal::cpu {

class CpuPlugin final : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_STREAM |
                                         HAL_CAPABILITY_OPERATOR;
  explicit CpuPlugin(const sdk::Options& options) {
    options.require_known({"device_count"});
    auto count = options.get_int("device_count", 1, 1, 64);
    for (int64_t i = 0; i < count; ++i) add_device(std::make_unique<CpuDevice>());
    register_all_ops(ops());
  }
};

}  // namespace hal::cpu

HAL_SDK_PLUGIN(hal::cpu::CpuPlugin, "cpu", "HAL project", "0.1.0")
