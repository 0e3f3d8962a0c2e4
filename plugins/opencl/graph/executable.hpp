// OpenCL plugin, graph compiler (3 of 3): the executable of a fused group —
// one kernel per execute, its sizes and strides bound then (symbolic dims
// resolved from the tensors, the catalog's shape rules checked).
//
// HAL_OPENCL_DUMP_DIR=dir writes each generated kernel's source at compile
// to dir/fused_<ops>_<hash>.cl.
#ifndef HAL_PLUGINS_OPENCL_GRAPH_EXECUTABLE_HPP_
#define HAL_PLUGINS_OPENCL_GRAPH_EXECUTABLE_HPP_

#include <memory>
#include <vector>

#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

class ClDevice;

// One executable (one kernel per execute) for GRAPH, a group partition_fused
// formed, on DEVICE (which must outlive it). Builds the kernel now. Throws
// UNIMPLEMENTED naming a node it cannot fuse. Called by
// ClDevice::compile_graph (graph/graph_hooks.cc).
std::unique_ptr<sdk::Executable> compile_fused(ClDevice& device, const sdk::Graph& graph);

// The executable compile_fused made for GRAPH, rebuilt from what its
// serialize() wrote (the plan: kernel source, operands, checks; ABI 1.5).
// The kernel is built (or found in the program cache), nothing is planned.
// Throws INVALID_ARGUMENT for bytes that are truncated, of another format
// version, for another device, or that do not fit GRAPH.
std::unique_ptr<sdk::Executable> deserialize_fused(ClDevice& device, const sdk::Graph& graph,
                                                   const std::vector<uint8_t>& bytes);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_GRAPH_EXECUTABLE_HPP_
