// CPU plugin: CpuDevice's graph entries. A claimed group becomes a
// host-graph executable (hal/sdk/host_graph.hpp) over the plugin's kernels,
// with the oneDNN fusions of fusion.hpp and the fused elementwise loops of
// elementwise_fusion.hpp in place of the nodes they cover.
// Also the layouts libhal lays out op-by-op values in.
#include <cstring>

#include "../cpu_device.hpp"
#include "../ops/fused.hpp"
#include "elementwise_fusion.hpp"
#include "fusion.hpp"
#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

void CpuDevice::op_layouts(const sdk::OpCall& call, sdk::OpLayouts& out) {
  // A channels-last convolution reads and writes channels-last: a chain of
  // them (with the elementwise ops between, which follow their inputs)
  // reorders nothing between launches, as inside a compiled group.
  if (std::strcmp(call.name(), "conv2d") == 0 && call.input(0).dtype == HAL_DTYPE_FLOAT32 &&
      call.input(0).rank == 4 && conv2d_prefers_channels_last(call, false, false))
    out.inputs[0] = out.outputs[0] = {0, 2, 3, 1};
}

std::vector<uint32_t> CpuDevice::partition_graph(const sdk::Graph& graph) {
  if (!graph_compile_) return std::vector<uint32_t>(graph.nodes.size(), 0);
  return sdk::partition_host_graph(ops_, *this, graph);
}

std::unique_ptr<sdk::Executable> CpuDevice::compile_graph(const sdk::Graph& graph) {
  // Matrix products read transposed matrices in place (oneDNN and sgemm take
  // strides): a permute moving only the two matrix dims of their operand
  // (K's transpose) is a view, not a copy. One that moves batch dims (a
  // head split) stays a copy: a batch stride below the matrix's leaves
  // oneDNN only per-matrix products, slower than one batched product of the
  // copy.
  auto reads_strided = [](const sdk::GraphNode& permute, const sdk::GraphNode& reader, size_t i) {
    const std::vector<int64_t>& dims = permute.attrs[0].as_ints();
    const int64_t rank = static_cast<int64_t>(dims.size());
    for (int64_t d = 0; d + 2 < rank; ++d)
      if (dims[static_cast<size_t>(d)] != d && dims[static_cast<size_t>(d)] != d - rank) return false;
    const std::string op = reader.op();
    if (op == "matmul" || op == "mm" || op == "bmm") return i < 2;
    if (op == "linear") return i == 1;
    return (op == "addmm" || op == "baddbmm") && (i == 1 || i == 2);
  };
  std::vector<sdk::HostGraphFusion> fusions = find_fusions(*this, graph);
  if (fused_loops_) {
    std::vector<bool> taken(graph.nodes.size(), false);
    for (const sdk::HostGraphFusion& f : fusions)
      for (size_t n : f.nodes) taken[n] = true;
    for (sdk::HostGraphFusion& f : find_elementwise_fusions(graph, taken)) fusions.push_back(std::move(f));
  }
  return std::make_unique<sdk::HostGraphExecutable>(*this, ops_, graph, std::move(fusions), reads_strided);
}

std::unique_ptr<sdk::Executable> CpuDevice::deserialize_graph(const sdk::Graph& graph,
                                                              const std::vector<uint8_t>& bytes) {
  if (!sdk::HostGraphExecutable::accepts(bytes))
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "not a CPU host-graph executable (", bytes.size(), " bytes)");
  return compile_graph(graph);  // the plan is rebuilt from the graph: nothing to compile
}

}  // namespace hal::cpu
