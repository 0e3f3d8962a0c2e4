// Internal: the C view (hal_graph_t) of a set of nodes of a hal::Graph, as
// graph_partition and graph_compile take it, and the values that cross the
// set's boundary.
#ifndef HAL_GRAPH_C_GRAPH_HPP_
#define HAL_GRAPH_C_GRAPH_HPP_

#include <cstdint>
#include <utility>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/graph.hpp"

namespace hal::detail {

// The values crossing the boundary of node set NODES of G (IN_SET: per
// node, whether it is in the set): inputs = values read by the set that no
// node of it produces (graph inputs, constants, other nodes' outputs), in
// order of first use; outputs = values the set produces that a node outside
// it reads or that are graph outputs, in node order.
inline std::pair<std::vector<uint32_t>, std::vector<uint32_t>> boundary(const Graph& g,
                                                                        const std::vector<size_t>& nodes,
                                                                        const std::vector<bool>& in_set) {
  std::vector<bool> inside(g.values().size(), false), seen(g.values().size(), false);
  for (size_t n : nodes)
    for (uint32_t v : g.nodes()[n].outputs) inside[v] = true;
  std::vector<bool> read_outside(g.values().size(), false);
  for (uint32_t v : g.outputs()) read_outside[v] = true;
  for (size_t j = 0; j < g.nodes().size(); ++j)
    if (!in_set[j])
      for (uint32_t v : g.nodes()[j].inputs)
        if (v != HAL_GRAPH_NO_VALUE) read_outside[v] = true;
  std::pair<std::vector<uint32_t>, std::vector<uint32_t>> io;
  for (size_t n : nodes)
    for (uint32_t v : g.nodes()[n].inputs)
      if (v != HAL_GRAPH_NO_VALUE && !inside[v] && !seen[v]) {
        seen[v] = true;
        io.first.push_back(v);
      }
  for (size_t n : nodes)
    for (uint32_t v : g.nodes()[n].outputs)
      if (read_outside[v]) io.second.push_back(v);
  return io;
}

// The C view of the nodes NODES of G as a self-contained graph with INPUTS
// and OUTPUTS (global value ids); values get local ids in order of first
// mention. Valid while G and this object live.
class CGraph {
 public:
  // ALIASES (ABI 1.14 output aliases): (index into OUTPUTS, index into
  // INPUTS) pairs, passed on as hal_graph_output_aliases_t.
  CGraph(const Graph& g, const std::vector<size_t>& nodes, const std::vector<uint32_t>& inputs,
         const std::vector<uint32_t>& outputs, const std::vector<std::pair<size_t, size_t>>& aliases = {})
      : local_(g.values().size(), HAL_GRAPH_NO_VALUE) {
    auto local = [&](uint32_t id) {
      if (id == HAL_GRAPH_NO_VALUE) return id;
      if (local_[id] == HAL_GRAPH_NO_VALUE) {
        local_[id] = static_cast<uint32_t>(values_.size());
        const ValueSpec& v = g.values()[id];
        values_.push_back(hal_graph_value_t{sizeof(hal_graph_value_t), static_cast<uint32_t>(v.dtype),
                                            static_cast<uint32_t>(v.shape.size()),
                                            v.shape.empty() ? nullptr : v.shape.data()});
      }
      return local_[id];
    };
    for (uint32_t id : inputs) inputs_.push_back(local(id));
    ids_.reserve(nodes.size());
    attrs_.reserve(nodes.size());
    for (size_t n : nodes) {
      const Graph::Node& node = g.nodes()[n];
      ids_.emplace_back();
      for (uint32_t id : node.inputs) ids_.back().first.push_back(local(id));
      for (uint32_t id : node.outputs) ids_.back().second.push_back(local(id));
      attrs_.emplace_back();
      for (const Attr& a : node.attrs) attrs_.back().push_back(a.c_attr());
      hal_graph_node_t c{};
      c.struct_size = sizeof(c);
      c.op = node.op.c_str();
      c.inputs = ids_.back().first.data();
      c.input_count = ids_.back().first.size();
      c.outputs = ids_.back().second.data();
      c.output_count = ids_.back().second.size();
      c.attrs = attrs_.back().empty() ? nullptr : attrs_.back().data();
      c.attr_count = attrs_.back().size();
      nodes_.push_back(c);
    }
    for (uint32_t id : outputs) outputs_.push_back(local(id));
    // Constant inputs (ABI 1.7): their bytes, so a plugin may pre-pack them.
    for (size_t i = 0; i < inputs.size(); ++i)
      if (g.is_constant(inputs[i])) {
        const std::vector<uint8_t>& bytes = *g.constant_data(inputs[i]);
        constant_inputs_.push_back(i);
        constant_data_.push_back(bytes.data());
        constant_sizes_.push_back(bytes.size());
      }
    if (!constant_inputs_.empty()) {
      constants_.base.struct_size = sizeof(constants_);
      constants_.base.type = HAL_EXTENSION_TYPE_GRAPH_CONSTANTS;
      constants_.base.next = nullptr;
      constants_.count = constant_inputs_.size();
      constants_.input_indices = constant_inputs_.data();
      constants_.data = constant_data_.data();
      constants_.sizes = constant_sizes_.data();
      graph_.next = &constants_;
    }
    for (const auto& [o, i] : aliases) {
      alias_outputs_.push_back(o);
      alias_inputs_.push_back(i);
    }
    if (!aliases.empty()) {
      aliases_.base.struct_size = sizeof(aliases_);
      aliases_.base.type = HAL_EXTENSION_TYPE_GRAPH_OUTPUT_ALIASES;
      aliases_.base.next = static_cast<const hal_extension_base_t*>(graph_.next);
      aliases_.count = aliases.size();
      aliases_.output_indices = alias_outputs_.data();
      aliases_.input_indices = alias_inputs_.data();
      graph_.next = &aliases_;
    }
    for (const auto& v : values_) value_ptrs_.push_back(&v);
    for (const auto& n : nodes_) node_ptrs_.push_back(&n);
    graph_.struct_size = sizeof(graph_);
    graph_.values = value_ptrs_.data();
    graph_.value_count = value_ptrs_.size();
    graph_.nodes = node_ptrs_.data();
    graph_.node_count = node_ptrs_.size();
    graph_.inputs = inputs_.data();
    graph_.input_count = inputs_.size();
    graph_.outputs = outputs_.data();
    graph_.output_count = outputs_.size();
  }
  CGraph(const CGraph&) = delete;
  const hal_graph_t* get() const { return &graph_; }

 private:
  std::vector<uint32_t> local_;  // global id -> local id
  std::vector<hal_graph_value_t> values_;
  std::vector<std::pair<std::vector<uint32_t>, std::vector<uint32_t>>> ids_;  // per node: inputs, outputs
  std::vector<std::vector<hal_attr_t>> attrs_;
  std::vector<hal_graph_node_t> nodes_;
  std::vector<const hal_graph_value_t*> value_ptrs_;
  std::vector<const hal_graph_node_t*> node_ptrs_;
  std::vector<uint32_t> inputs_, outputs_;
  std::vector<size_t> constant_inputs_;
  std::vector<const void*> constant_data_;
  std::vector<uint64_t> constant_sizes_;
  hal_graph_constants_t constants_{};
  std::vector<size_t> alias_outputs_, alias_inputs_;
  hal_graph_output_aliases_t aliases_{};
  hal_graph_t graph_{};
};

}  // namespace hal::detail

#endif  // HAL_GRAPH_C_GRAPH_HPP_
