// What the rewriting passes share (decompose, fold_permutes, fuse_patterns):
// nodes appended in place of others, then the replaced ones dropped.
#ifndef HAL_GRAPH_PASSES_REWRITE_HPP_
#define HAL_GRAPH_PASSES_REWRITE_HPP_

#include <vector>

#include "hal/runtime/graph.hpp"

namespace hal::detail {

// Removes the nodes REPLACED marks (nodes appended after REPLACED was sized
// stay), drops the values nothing refers to any more, and sorts the nodes
// topologically again (the appended ones come after their readers).
inline void drop_replaced(Graph& g, std::vector<bool> replaced) {
  replaced.resize(g.nodes().size(), false);
  g.remove_nodes(replaced);
  g.remove_unused_values();
  g.sort_nodes();
}

}  // namespace hal::detail

#endif  // HAL_GRAPH_PASSES_REWRITE_HPP_
