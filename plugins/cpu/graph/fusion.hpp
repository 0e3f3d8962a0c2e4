// CPU plugin: the node patterns its graph executables run as one oneDNN
// primitive (post-ops), found in a validated graph.
#ifndef HAL_PLUGINS_CPU_GRAPH_FUSION_HPP_
#define HAL_PLUGINS_CPU_GRAPH_FUSION_HPP_

#include <vector>

#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

// The fusions of GRAPH on DEVICE (which outlives the executables made with
// them): float32 conv2d [+ add of a same-shape residual] [+ relu] whose
// intermediate values nothing else reads and whose result is not a graph
// output, as one oneDNN primitive with post-ops (ops/fused.hpp). Reads
// GRAPH.constants (a constant weight is reordered once, not per run).
std::vector<sdk::HostGraphFusion> find_fusions(sdk::Device& device, const sdk::Graph& graph);

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_GRAPH_FUSION_HPP_
