// eliminate_common_subexpressions: one forward walk with a table of the
// nodes seen, keyed by op, inputs and attributes.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "graph/catalog.hpp"
#include "hal/runtime/graph_passes.hpp"

namespace hal {
namespace {

// An attribute as comparable data: (name, type, ints, floats, string).
using AttrKey = std::tuple<std::string, uint32_t, std::vector<int64_t>, std::vector<double>, std::string>;

AttrKey attr_key(const Attr& attr) {
  hal_attr_t a = attr.c_attr();
  AttrKey k{attr.name(), a.type, {}, {}, {}};
  switch (a.type) {
    case HAL_ATTR_TYPE_FLOAT: std::get<3>(k) = {a.value.f}; break;
    case HAL_ATTR_TYPE_STRING: std::get<4>(k) = a.value.s; break;
    case HAL_ATTR_TYPE_INTS: std::get<2>(k).assign(a.value.ints, a.value.ints + a.count); break;
    case HAL_ATTR_TYPE_FLOATS: std::get<3>(k).assign(a.value.floats, a.value.floats + a.count); break;
    default: std::get<2>(k) = {a.value.i}; break;
  }
  return k;
}

}  // namespace

size_t eliminate_common_subexpressions(Graph& g) {
  using Key = std::tuple<std::string, std::vector<uint32_t>, size_t, std::vector<AttrKey>>;
  std::map<Key, std::vector<size_t>> seen;  // -> node indices
  std::vector<bool> is_output(g.values().size(), false);
  for (uint32_t id : g.outputs()) is_output[id] = true;
  // Symbols the graph inputs bind; others derive from a node's inputs and
  // attributes (two merged nodes' "node7_d0" and "node9_d0" are the same size).
  std::set<int64_t> input_symbols;
  for (uint32_t id : g.inputs())
    for (int64_t d : g.values()[id].shape)
      if (d < 0) input_symbols.insert(d);
  auto derived = [&](int64_t d) { return d < 0 && input_symbols.count(d) == 0; };
  std::vector<bool> merged(g.nodes().size(), false);
  size_t removed = 0;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Graph::Node& node = g.nodes()[n];
    const common::OpSchema* schema = common::catalog::find_schema(node.op.c_str());
    if (schema == nullptr || std::strcmp(schema->group, "random") == 0) continue;
    if (std::any_of(node.outputs.begin(), node.outputs.end(), [&](uint32_t id) { return is_output[id]; })) continue;
    std::vector<AttrKey> attrs;
    for (const Attr& a : node.attrs) attrs.push_back(attr_key(a));
    std::sort(attrs.begin(), attrs.end());
    // Earlier nodes with this key: the first whose outputs have the same specs.
    std::vector<size_t>& earlier = seen[Key{node.op, node.inputs, node.outputs.size(), std::move(attrs)}];
    auto same_specs = [&](size_t other) {
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const ValueSpec &a = g.values()[node.outputs[o]], &b = g.values()[g.nodes()[other].outputs[o]];
        if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
        for (size_t d = 0; d < a.shape.size(); ++d)
          if (a.shape[d] != b.shape[d] && !(derived(a.shape[d]) && derived(b.shape[d]))) return false;
      }
      return true;
    };
    auto match = std::find_if(earlier.begin(), earlier.end(), same_specs);
    if (match == earlier.end()) {  // new, or e.g. a copy to another declared target
      earlier.push_back(n);
      continue;
    }
    for (size_t o = 0; o < node.outputs.size(); ++o)
      g.replace_uses(Graph::Value{node.outputs[o]}, Graph::Value{g.nodes()[*match].outputs[o]});
    merged[n] = true;
    ++removed;
  }
  if (removed > 0) {
    g.remove_nodes(merged);
    g.remove_unused_values();
  }
  return removed;
}

}  // namespace hal
