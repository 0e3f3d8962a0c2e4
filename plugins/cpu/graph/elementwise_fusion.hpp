// CPU plugin: chains of float32 elementwise nodes run as one loop over tiles
// (docs/graph.md, "CPU fused loops"). Op by op, a chain of K elementwise
// nodes makes K passes over memory; as one loop it loads each input tile
// once, runs every node's element function over the tile while it is in L1
// (the same functions the kernels use, so results agree), and writes back
// only the values read outside the chain.
#ifndef HAL_PLUGINS_CPU_GRAPH_ELEMENTWISE_FUSION_HPP_
#define HAL_PLUGINS_CPU_GRAPH_ELEMENTWISE_FUSION_HPP_

#include <string>
#include <vector>

#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

// The most nodes one loop takes; a longer chain is split into loops of this
// many (the registers a tile needs grow with the chain).
constexpr size_t kMaxLoopNodes = 64;

// Whether node N of GRAPH can be part of a fused loop ("" when it can, else
// why not): a float32 unary or binary op with a tile function (the unary
// ops of elementwise_fns.hpp, gelu, add/sub with any alpha, mul, div
// without rounding, maximum, minimum), float32 inputs, one output.
std::string loop_refusal(const sdk::Graph& graph, size_t n);

// The loops of GRAPH over the nodes not TAKEN (those get marked): each a
// connected chain of at least two fusible nodes of one output shape (inputs
// broadcast to it), grown in node order while no node outside the chain
// reads one of its values before its last node, at most kMaxLoopNodes
// nodes. Outputs: its values that are graph outputs or read outside it.
// Each loop's label lists its nodes ("loop[n3 mul, n4 add, n7 relu]"), as
// explain() shows it.
std::vector<sdk::HostGraphFusion> find_elementwise_fusions(const sdk::Graph& graph, std::vector<bool>& taken);

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_GRAPH_ELEMENTWISE_FUSION_HPP_
