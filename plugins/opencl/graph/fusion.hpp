// OpenCL plugin: the graph compiler. partition_graph claims chains and trees
// of elementwise nodes (every op ops/elementwise.cc generates from an
// expression, in the dtypes it has expressions for, without data checks)
// whose outputs share one shape, the group's iteration shape, optionally
// closed by one trailing reduction (sum, mean, amax, amin over some or all
// dims) of a value of the group. compile_graph turns a group into ONE OpenCL
// kernel: the nodes' expressions composed inline (ops/elementwise.cc gives
// them), graph inputs broadcast to the iteration shape with runtime strides,
// casts between node dtypes explicit; with a reduction each work-item (or a
// work-group with a local-memory tree, and the last work-group of an output
// combining the partial results) accumulates the chain's values without
// storing them. Sources are specialised on dtypes and structure only (sizes
// and strides are bound at execute), built through the ProgramCache.
//
// HAL_OPENCL_DUMP_DIR=dir writes each generated kernel's source at compile
// to dir/fused_<ops>_<hash>.cl.
#ifndef HAL_PLUGINS_OPENCL_GRAPH_FUSION_HPP_
#define HAL_PLUGINS_OPENCL_GRAPH_FUSION_HPP_

#include <cstdint>
#include <memory>
#include <vector>

#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

class ClDevice;

// A group id per node of GRAPH (0: not claimed); each group convex.
std::vector<uint32_t> partition_fused(const ClDevice& device, const sdk::Graph& graph);

// One executable (one kernel per execute) for GRAPH, a group partition_fused
// formed. Throws UNIMPLEMENTED naming a node it cannot fuse.
std::unique_ptr<sdk::Executable> compile_fused(ClDevice& device, const sdk::Graph& graph);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_GRAPH_FUSION_HPP_
