// The reference CPU plugin: every HAL interface implemented on host memory
// and worker threads. Options (hal.toml [plugin.options]):
//   device_count = N   expose N CPU devices (default 1), for multi-device use.
//   input_mode = "mixed" (default): the kernels promote mixed input dtypes
//     themselves; "uniform": every op declines mixed calls, so libhal casts
//     first (how a vendor plugin with one-dtype kernels behaves: used to
//     check and measure the core's promotion on the reference kernels).
//   graph_compile = false: the devices claim no subgraphs (graph_partition
//     takes nothing; every node runs op by op). Default true: they compile
//     the nodes their kernels run into host-graph executables.
//   fused_loops = false: those executables run chains of elementwise nodes
//     one kernel per node (the baseline); default true: as one loop over
//     tiles (graph/elementwise_fusion.hpp).
#include "cpu_device.hpp"
#include "hal/sdk/collectives.hpp"
#include "hal/sdk/ops.hpp"
#include "ops/cpu_ops.hpp"

namespace hal::cpu {

class CpuPlugin final : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_STREAM | HAL_CAPABILITY_COLLECTIVE |
                                         HAL_CAPABILITY_OPERATOR | HAL_CAPABILITY_GRAPH;
  explicit CpuPlugin(const sdk::Options& options) {
    options.require_known({"device_count", "input_mode", "graph_compile", "fused_loops"});
    auto count = options.get_int("device_count", 1, 1, 64);
    std::string mode = options.get("input_mode", "mixed");
    if (mode != "mixed" && mode != "uniform")
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "option input_mode = '", mode, "' must be 'mixed' or 'uniform'");
    std::string graph = options.get("graph_compile", "true");
    if (graph != "true" && graph != "false")
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "option graph_compile = '", graph, "' must be true or false");
    std::string loops = options.get("fused_loops", "true");
    if (loops != "true" && loops != "false")
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "option fused_loops = '", loops, "' must be true or false");
    for (int64_t i = 0; i < count; ++i)
      add_device(std::make_unique<CpuDevice>(ops(), graph == "true", loops == "true"));
    ops().set_default_input_mode(mode == "mixed" ? sdk::InputMode::kMixed : sdk::InputMode::kUniform);
    // The kernels are templates over every type of a class (kNumeric ...),
    // registered with the class's mask: each op keeps what the catalog allows.
    ops().narrow_to_catalog();
    register_all_ops(ops());
  }
};

}  // namespace hal::cpu

HAL_SDK_PLUGIN(hal::cpu::CpuPlugin, "cpu", "HAL project", "0.2.0")
