// Graph::verify: the structural checks, then each node against the
// catalog's rules.
#include <algorithm>
#include <set>

#include "graph/catalog.hpp"
#include "hal/runtime/graph.hpp"

namespace hal {
namespace {

constexpr int64_t kNobody = -1, kGraphInput = -2, kConstant = -3;

[[noreturn]] void refuse(const std::string& message) { throw Error(HAL_STATUS_INVALID_ARGUMENT, message); }

}  // namespace

void Graph::verify() const {
  const size_t nv = values_.size();
  auto node_label = [&](size_t n) { return "node " + std::to_string(n) + " ('" + nodes_[n].op + "')"; };
  auto value_label = [&](uint32_t id) {
    return "value " + std::to_string(id) + (names_[id].empty() ? "" : " ('" + names_[id] + "')");
  };
  auto in_range = [&](uint32_t id, const std::string& where) {
    if (id >= nv)
      refuse(where + " is value " + std::to_string(id) + ", out of range (the graph has " + std::to_string(nv) +
             " values)");
  };

  // Who makes each value.
  std::vector<int64_t> producer(nv, kNobody);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    uint32_t id = inputs_[i];
    std::string where = "graph input " + std::to_string(i);
    in_range(id, where);
    if (producer[id] == kGraphInput) refuse(where + " is " + value_label(id) + ", which is already a graph input");
    if (constant_[id]) refuse(where + " is " + value_label(id) + ", which is a constant");
    producer[id] = kGraphInput;
  }
  for (uint32_t id : constants_) {
    in_range(id, "a constant");
    producer[id] = kConstant;
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    if (common::catalog::find_schema(node.op.c_str()) == nullptr) refuse(node_label(n) + ": " + graph_detail::not_in_catalog(node.op));
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] != HAL_GRAPH_NO_VALUE) in_range(node.inputs[i], node_label(n) + ": input " + std::to_string(i));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      uint32_t id = node.outputs[o];
      std::string where = node_label(n) + ": output " + std::to_string(o);
      in_range(id, where);
      if (producer[id] >= 0)
        refuse(where + " is " + value_label(id) + ", already produced by " + node_label(producer[id]) +
               " (a value is produced once)");
      if (producer[id] != kNobody)
        refuse(where + " is " + value_label(id) + ", which is a " +
               (producer[id] == kGraphInput ? "graph input" : "constant"));
      producer[id] = static_cast<int64_t>(n);
    }
  }
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (size_t i = 0; i < nodes_[n].inputs.size(); ++i) {
      uint32_t id = nodes_[n].inputs[i];
      if (id != HAL_GRAPH_NO_VALUE && producer[id] == kNobody)
        refuse(node_label(n) + ": input " + std::to_string(i) + " is " + value_label(id) +
               ", which is neither a graph input, a constant nor produced by a node (a dangling value)");
    }

  // Cycles (Kahn's algorithm over node -> consumer edges), then order.
  std::vector<std::vector<size_t>> consumers(nodes_.size());
  std::vector<size_t> pending(nodes_.size(), 0);
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (uint32_t id : nodes_[n].inputs)
      if (id != HAL_GRAPH_NO_VALUE && producer[id] >= 0) {
        consumers[static_cast<size_t>(producer[id])].push_back(n);
        ++pending[n];
      }
  std::vector<size_t> ready;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (pending[n] == 0) ready.push_back(n);
  size_t done = 0;
  while (!ready.empty()) {
    size_t n = ready.back();
    ready.pop_back();
    ++done;
    for (size_t c : consumers[n])
      if (--pending[c] == 0) ready.push_back(c);
  }
  if (done != nodes_.size()) {
    // Walk back from a node left over along producers still pending until a
    // node repeats: that stretch is a cycle.
    size_t n = static_cast<size_t>(std::find_if(pending.begin(), pending.end(), [](size_t p) { return p > 0; }) -
                                   pending.begin());
    std::vector<size_t> path;
    while (std::find(path.begin(), path.end(), n) == path.end()) {
      path.push_back(n);
      for (uint32_t id : nodes_[n].inputs)
        if (id != HAL_GRAPH_NO_VALUE && producer[id] >= 0 && pending[static_cast<size_t>(producer[id])] > 0) {
          n = static_cast<size_t>(producer[id]);
          break;
        }
    }
    path.erase(path.begin(), std::find(path.begin(), path.end(), n));
    std::reverse(path.begin(), path.end());  // producer before consumer
    std::rotate(path.begin(), std::min_element(path.begin(), path.end()), path.end());
    std::string cycle;
    for (size_t p : path) cycle += node_label(p) + " -> ";
    refuse(node_label(path.front()) + " is on a cycle: " + cycle + node_label(path.front()));
  }
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (size_t i = 0; i < nodes_[n].inputs.size(); ++i) {
      uint32_t id = nodes_[n].inputs[i];
      if (id != HAL_GRAPH_NO_VALUE && producer[id] >= static_cast<int64_t>(n))
        refuse(node_label(n) + ": input " + std::to_string(i) + " is " + value_label(id) + ", produced by the later " +
               node_label(static_cast<size_t>(producer[id])) + " (nodes must be in topological order)");
    }

  for (size_t i = 0; i < outputs_.size(); ++i) {
    uint32_t id = outputs_[i];
    std::string where = "graph output " + std::to_string(i);
    in_range(id, where);
    if (producer[id] < 0) refuse(where + " is " + value_label(id) + ", which no node produces");
    if (std::find(outputs_.begin(), outputs_.begin() + static_cast<std::ptrdiff_t>(i), id) !=
        outputs_.begin() + static_cast<std::ptrdiff_t>(i))
      refuse(where + " is " + value_label(id) + ", which is already a graph output");
  }

  // Each node's declared outputs against the rules. Sizes the rules derive
  // from symbols come back as numbers below every symbol of the graph ("free").
  int64_t lowest = 0;
  for (const ValueSpec& v : values_)
    for (int64_t d : v.shape) lowest = std::min(lowest, d);
  for (const auto& s : symbols_) lowest = std::min(lowest, s.first);
  std::set<int64_t> free;
  InferContext ctx;
  ctx.fresh_symbol = [&](size_t, size_t) {
    free.insert(--lowest);
    return lowest;
  };
  ctx.symbol_name = [this](int64_t s) { return symbol_name(s); };
  std::vector<const ValueSpec*> in;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    ctx.label = node_label(n);
    in.clear();
    for (uint32_t id : node.inputs) in.push_back(id == HAL_GRAPH_NO_VALUE ? nullptr : &values_[id]);
    std::vector<const ValueSpec*> given;
    for (uint32_t id : node.outputs) given.push_back(id < values_.size() ? &values_[id] : nullptr);
    std::vector<ValueSpec> want = infer_node(node.op, in, node.attrs, node.outputs.size(), ctx, given);
    for (size_t o = 0; o < want.size(); ++o) {
      const ValueSpec& have = values_[node.outputs[o]];
      bool ok = have.dtype == want[o].dtype && have.shape.size() == want[o].shape.size();
      for (size_t d = 0; ok && d < have.shape.size(); ++d) {
        int64_t w = want[o].shape[d], h = have.shape[d];
        ok = free.count(w) > 0 || (w >= 0 ? h < 0 || h == w : h < 0);
      }
      if (ok) continue;
      std::string rule = "[";
      for (size_t d = 0; d < want[o].shape.size(); ++d) {
        int64_t w = want[o].shape[d];
        rule += (d ? ", " : "") + (free.count(w) ? std::string("?") : w < 0 ? symbol_name(w) : std::to_string(w));
      }
      refuse(ctx.label + ": output " + std::to_string(o) + " (" + value_label(node.outputs[o]) + ") is declared " +
             common::dtype_name(have.dtype) + " " + shape_string(have.shape) + " but the catalog's rules give " +
             common::dtype_name(want[o].dtype) + " " + rule + "] (? = a size derived from symbols)");
    }
  }
}

}  // namespace hal
