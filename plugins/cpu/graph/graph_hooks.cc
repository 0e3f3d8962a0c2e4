// CPU plugin: CpuDevice's graph entries. A claimed group becomes a
// host-graph executable (hal/sdk/host_graph.hpp) over the plugin's kernels,
// with the oneDNN fusions of fusion.hpp in place of the nodes they cover.
#include "../cpu_device.hpp"
#include "fusion.hpp"
#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

std::vector<uint32_t> CpuDevice::partition_graph(const sdk::Graph& graph) {
  if (!graph_compile_) return std::vector<uint32_t>(graph.nodes.size(), 0);
  return sdk::partition_host_graph(ops_, *this, graph);
}

std::unique_ptr<sdk::Executable> CpuDevice::compile_graph(const sdk::Graph& graph) {
  return std::make_unique<sdk::HostGraphExecutable>(*this, ops_, graph, find_fusions(*this, graph));
}

std::unique_ptr<sdk::Executable> CpuDevice::deserialize_graph(const sdk::Graph& graph,
                                                              const std::vector<uint8_t>& bytes) {
  if (!sdk::HostGraphExecutable::accepts(bytes))
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "not a CPU host-graph executable (", bytes.size(), " bytes)");
  return compile_graph(graph);  // the plan is rebuilt from the graph: nothing to compile
}

}  // namespace hal::cpu
