// OpenCL plugin: ClDevice's graph entries, beside the graph compiler they
// call (the device itself does not depend on graph/).
#include "../cl_device.hpp"
#include "executable.hpp"
#include "partition.hpp"

namespace hal::opencl {

std::vector<uint32_t> ClDevice::partition_graph(const sdk::Graph& graph) { return partition_fused(*this, graph); }
std::unique_ptr<sdk::Executable> ClDevice::compile_graph(const sdk::Graph& graph) { return compile_fused(*this, graph); }
std::unique_ptr<sdk::Executable> ClDevice::deserialize_graph(const sdk::Graph& graph, const std::vector<uint8_t>& bytes) {
  return deserialize_fused(*this, graph, bytes);
}

}  // namespace hal::opencl
