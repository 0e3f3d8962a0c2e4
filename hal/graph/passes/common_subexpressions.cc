// eliminate_common_subexpressions: one forward walk with a table of the
// nodes seen, keyed by op, inputs and attributes.
#include <algorithm>
#include <cstring>
#include <map>
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
  std::map<Key, size_t> seen;  // -> node index
  std::vector<bool> is_output(g.values().size(), false);
  for (uint32_t id : g.outputs()) is_output[id] = true;
  std::vector<bool> merged(g.nodes().size(), false);
  size_t removed = 0;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Graph::Node& node = g.nodes()[n];
    const common::OpSchema* schema = graph_detail::find_op(node.op);
    if (schema == nullptr || std::strcmp(schema->group, "random") == 0) continue;
    if (std::any_of(node.outputs.begin(), node.outputs.end(), [&](uint32_t id) { return is_output[id]; })) continue;
    std::vector<AttrKey> attrs;
    for (const Attr& a : node.attrs) attrs.push_back(attr_key(a));
    std::sort(attrs.begin(), attrs.end());
    auto [it, fresh] = seen.emplace(Key{node.op, node.inputs, node.outputs.size(), std::move(attrs)}, n);
    if (fresh) continue;
    const Graph::Node& first = g.nodes()[it->second];
    bool same_types = true;
    for (size_t o = 0; o < node.outputs.size(); ++o)
      same_types = same_types && g.values()[node.outputs[o]].dtype == g.values()[first.outputs[o]].dtype &&
                   g.values()[node.outputs[o]].shape.size() == g.values()[first.outputs[o]].shape.size();
    if (!same_types) continue;  // declared by hand differently: leave both
    for (size_t o = 0; o < node.outputs.size(); ++o)
      g.replace_uses(Graph::Value{node.outputs[o]}, Graph::Value{first.outputs[o]});
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
