// eliminate_dead_code: a backward walk from the graph outputs.
#include "hal/runtime/graph_passes.hpp"

namespace hal {

size_t eliminate_dead_code(Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<bool> live_value(g.values().size(), false);
  for (uint32_t id : g.outputs()) live_value[id] = true;
  std::vector<bool> dead(nodes.size(), true);
  size_t removed = 0;
  for (size_t n = nodes.size(); n-- > 0;) {  // topological: readers come after producers
    for (uint32_t id : nodes[n].outputs) dead[n] = dead[n] && !live_value[id];
    if (dead[n]) {
      ++removed;
      continue;
    }
    for (uint32_t id : nodes[n].inputs)
      if (id != HAL_GRAPH_NO_VALUE) live_value[id] = true;
  }
  if (removed > 0) g.remove_nodes(dead);
  g.remove_unused_values();
  return removed;
}

}  // namespace hal
