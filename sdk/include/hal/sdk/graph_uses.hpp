// HAL C++ SDK: who makes and who reads each value of a validated graph —
// the table every fusion pass of a graph compiler starts from.
//
//   const hal::sdk::GraphUses uses(graph);
//   for (size_t r : uses.readers[v]) ...          // nodes reading value V, ascending
//   if (uses.sole_reader(v) == n) ...             // N is V's only reader and V no graph output
//
// Header-only; no type here crosses the C ABI.
#ifndef HAL_SDK_GRAPH_USES_HPP_
#define HAL_SDK_GRAPH_USES_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hal/sdk/graph.hpp"

namespace hal::sdk {

// Per value of a Graph: its producer, its readers and whether it is a graph
// output. Built once (O(nodes + values)); owns its vectors; does not keep
// the graph. Immutable after construction: safe to read from any thread.
struct GraphUses {
  // Per value: the nodes reading it, ascending, once per read (mul(x, x)
  // lists its node twice: it is not x's sole reader in the fusion sense).
  std::vector<std::vector<size_t>> readers;
  // Per value: the node producing it, or -1 (a graph input or constant).
  std::vector<int64_t> producer;
  // Per value: whether it is one of the graph's outputs.
  std::vector<bool> output;

  explicit GraphUses(const Graph& g)
      : readers(g.values.size()), producer(g.values.size(), -1), output(g.values.size(), false) {
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (uint32_t v : g.nodes[n].inputs)
        if (v != kNoValue) readers[v].push_back(n);
      for (uint32_t v : g.nodes[n].outputs) producer[v] = static_cast<int64_t>(n);
    }
    for (uint32_t v : g.outputs) output[v] = true;
  }

  // The node reading V when V is read exactly once and is not a graph
  // output (so a fusion may keep V internal), else -1.
  int64_t sole_reader(uint32_t v) const {
    return !output[v] && readers[v].size() == 1 ? static_cast<int64_t>(readers[v][0]) : -1;
  }
};

}  // namespace hal::sdk

#endif  // HAL_SDK_GRAPH_USES_HPP_
