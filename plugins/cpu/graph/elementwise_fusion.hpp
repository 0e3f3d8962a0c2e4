// CPU plugin: chains of elementwise nodes run as one loop over tiles
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
// why not): one float32, float16 or bfloat16 output (16-bit chains compute
// in float32 and round what they write), an op with a tile function (the unary ops
// of elementwise_fns.hpp, gelu, add/sub with any alpha, mul, div without
// rounding, maximum, minimum, pow, clamp, lerp, addcmul, addcdiv, where;
// gt/ge/lt/le/eq/ne of float32 operands, a bool output), inputs
// of any of the catalog's ten dtypes (converted to float32 as loaded, as
// the kernels cast them).
std::string loop_refusal(const sdk::Graph& graph, size_t n);

// The fused steps of GRAPH over the nodes not TAKEN (those get marked).
// Chains: fusible nodes of one output shape (inputs broadcast to it); a
// node joins the chains of its operands (merging them) while no node
// outside a chain reads one of its values before that node; at most
// kMaxLoopNodes nodes. Outputs: values that are graph outputs or read
// outside. Steps: chains taken in the order of their last nodes, each
// joining the open step when it reads none of the step's values and
// nothing outside reads a step value before the chain's last node — one
// parallel loop over all its chains' tiles (an optimizer's per-parameter
// updates: one launch). A step of one node is left to its kernel. Labels
// name the nodes ("loop[n3 mul, n4 add, n7 relu]", several chains
// "horizontal[loop[...], loop[...]]"), as explain() shows them.
// Thread-safety: pure; the steps it makes run one call at a time (as
// HostGraphStep promises).
std::vector<sdk::HostGraphFusion> find_elementwise_fusions(const sdk::Graph& graph, std::vector<bool>& taken);

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_GRAPH_ELEMENTWISE_FUSION_HPP_
