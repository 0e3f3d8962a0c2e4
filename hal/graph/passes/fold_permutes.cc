// fold_permutes: one forward walk; a permute that undoes the permute
// feeding it, or permutes nothing, is replaced by the value it started from;
// a permute of a permute becomes one permute of the first one's input.
#include <numeric>

#include "hal/runtime/graph_passes.hpp"
#include "rewrite.hpp"

namespace hal {
namespace {

// The "dims" of permute node N, each made non-negative; empty when absent
// or out of range.
std::vector<int64_t> permute_dims(const Graph& g, const Graph::Node& n) {
  const size_t rank = g.values()[n.outputs[0]].shape.size();
  for (const Attr& a : n.attrs) {
    if (a.name() != "dims") continue;
    const hal_attr_t c = a.c_attr();
    if (c.type != HAL_ATTR_TYPE_INTS || c.count != rank) return {};
    std::vector<int64_t> dims(c.value.ints, c.value.ints + c.count);
    for (int64_t& d : dims) {
      if (d < 0) d += static_cast<int64_t>(rank);
      if (d < 0 || d >= static_cast<int64_t>(rank)) return {};
    }
    return dims;
  }
  return {};
}

}  // namespace

size_t fold_permutes(Graph& g) {
  const size_t n = g.nodes().size();
  std::vector<int64_t> producer(g.values().size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) producer[v] = static_cast<int64_t>(i);
  std::vector<bool> is_output(g.values().size(), false);
  for (uint32_t id : g.outputs()) is_output[id] = true;
  std::vector<bool> removed(n, false);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const Graph::Node node = g.nodes()[i];  // a copy: composing appends nodes
    if (node.op != "permute" || node.inputs.size() != 1 || node.outputs.size() != 1) continue;
    const uint32_t out = node.outputs[0];
    if (node.inputs[0] == HAL_GRAPH_NO_VALUE) continue;
    std::vector<int64_t> dims = permute_dims(g, node);
    if (dims.empty() && !g.values()[out].shape.empty()) continue;
    std::vector<int64_t> identity(dims.size());
    std::iota(identity.begin(), identity.end(), 0);
    uint32_t from = node.inputs[0];
    // Through a permute feeding this one: out[d] = from[inner[dims[d]]].
    const Graph::Node* feeding = producer[from] >= 0 ? &g.nodes()[static_cast<size_t>(producer[from])] : nullptr;
    if (feeding != nullptr && feeding->op == "permute" && feeding->inputs.size() == 1 &&
        feeding->inputs[0] != HAL_GRAPH_NO_VALUE) {
      const std::vector<int64_t> inner = permute_dims(g, *feeding);
      if (inner.size() == dims.size()) {
        std::vector<int64_t> composed;
        for (int64_t d : dims) composed.push_back(inner[static_cast<size_t>(d)]);
        const uint32_t source = feeding->inputs[0];
        if (composed == identity) {
          dims = composed;
          from = source;
        } else if (g.values()[source].dtype == g.values()[out].dtype) {
          // One permute of the source instead of two copies: this node is
          // replaced by permute(source, composed) with its output's spec (the
          // first permute stays while something else reads it).
          const Graph::Value moved = g.add_op("permute", {Graph::Value{source}}, g.values()[out],
                                              {Attr::ints("dims", composed)});
          g.replace_uses(Graph::Value{out}, moved);
          producer.resize(g.values().size(), -1);
          producer[moved.id] = static_cast<int64_t>(g.nodes().size() - 1);
          is_output.resize(g.values().size(), false);
          is_output[moved.id] = is_output[out];
          removed[i] = true;
          ++count;
          continue;
        }
      }
    }
    // Only an identity goes, and only where the shapes agree as written (a
    // derived symbol in OUT's shape is not rewritten in its readers).
    if (dims != identity || g.values()[from].shape != g.values()[out].shape ||
        g.values()[from].dtype != g.values()[out].dtype)
      continue;
    // A graph output must stay a node's output, and one value is an output once.
    if (is_output[out] && (producer[from] < 0 || is_output[from])) continue;
    is_output[from] = is_output[from] || is_output[out];
    g.replace_uses(Graph::Value{out}, Graph::Value{from});
    removed[i] = true;
    ++count;
  }
  if (count > 0) detail::drop_replaced(g, std::move(removed));
  return count;
}

}  // namespace hal
