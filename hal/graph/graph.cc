#include "hal/runtime/graph.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "hal/common/op_schema.hpp"

namespace hal {

// ---- Graph ------------------------------------------------------------------

uint32_t Graph::add_value(const ValueSpec& spec, const std::string& what) {
  if (common::dtype_size(spec.dtype) == 0)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + " has unknown dtype value " + std::to_string(spec.dtype));
  if (spec.shape.size() > HAL_TENSOR_MAX_RANK)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + " has rank " + std::to_string(spec.shape.size()) +
                                                 " > HAL_TENSOR_MAX_RANK (" + std::to_string(HAL_TENSOR_MAX_RANK) + ")");
  values_.push_back(spec);
  producer_.push_back(-1);
  names_.emplace_back();
  constant_.emplace_back();
  return static_cast<uint32_t>(values_.size() - 1);
}

Graph::Value Graph::input(hal_dtype_e dtype, std::vector<int64_t> shape, std::string name) {
  std::string what = "graph input " + std::to_string(inputs_.size());
  if (!name.empty()) what += " ('" + name + "')";
  uint32_t id = add_value(ValueSpec{dtype, std::move(shape)}, what);
  names_[id] = std::move(name);
  inputs_.push_back(id);
  return Value{id};
}

Graph::Value Graph::constant(hal_dtype_e dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes,
                             std::string name) {
  return shared_constant(dtype, std::move(shape), std::make_shared<const std::vector<uint8_t>>(std::move(bytes)),
                         std::move(name));
}

Graph::Value Graph::shared_constant(hal_dtype_e dtype, std::vector<int64_t> shape,
                                    std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name) {
  if (bytes == nullptr) throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::constant: bytes is null");
  std::string what = "constant " + std::to_string(constants_.size());
  if (!name.empty()) what += " ('" + name + "')";
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + " has shape " + common::shape_string(shape.data(), static_cast<int>(shape.size())) +
                                                   " with a symbolic dim; a constant's shape must be concrete");
    numel *= static_cast<uint64_t>(d);
  }
  uint32_t id = add_value(ValueSpec{dtype, shape}, what);
  uint64_t want = numel * common::dtype_size(dtype);
  if (bytes->size() != want) {
    values_.pop_back();
    producer_.pop_back();
    names_.pop_back();
    constant_.pop_back();
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + " of shape " + common::shape_string(shape.data(), static_cast<int>(shape.size())) +
                                                 " and dtype " + common::dtype_name(dtype) + " needs " + std::to_string(want) +
                                                 " bytes but got " + std::to_string(bytes->size()));
  }
  names_[id] = std::move(name);
  constant_[id] = std::move(bytes);
  producer_[id] = -2;  // neither a node's nor a graph input
  constants_.push_back(id);
  return Value{id};
}

const std::vector<uint8_t>* Graph::constant_data(uint32_t id) const {
  return id < constant_.size() ? constant_[id].get() : nullptr;
}

int64_t Graph::symbol(const std::string& name) {
  if (name.empty()) throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::symbol: the name is empty");
  int64_t lowest = 0;
  for (const auto& [sym, n] : symbols_) {
    if (n == name) return sym;
    lowest = std::min(lowest, sym);
  }
  for (const ValueSpec& v : values_)
    for (int64_t d : v.shape) lowest = std::min(lowest, d);
  symbols_.emplace_back(lowest - 1, name);
  return lowest - 1;
}

std::string Graph::symbol_name(int64_t symbol) const {
  for (const auto& [sym, n] : symbols_)
    if (sym == symbol) return n;
  return "s" + std::to_string(-symbol);
}

const std::string& Graph::value_name(uint32_t id) const {
  if (id >= names_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::value_name: value " + std::to_string(id) + " is not a value of this graph");
  return names_[id];
}

void Graph::set_value_name(uint32_t id, std::string name) {
  if (id >= names_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "Graph::set_value_name: value " + std::to_string(id) + " is not a value of this graph");
  names_[id] = std::move(name);
}

std::vector<Graph::Value> Graph::add_node(const std::string& op, const std::vector<Value>& inputs,
                                          const std::vector<Attr>& attrs, const std::vector<ValueSpec>& outputs) {
  const std::string label = "node " + std::to_string(nodes_.size()) + " ('" + op + "')";
  Node node{op, {}, {}, attrs};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].valid() && inputs[i].id >= values_.size())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, label + ": input " + std::to_string(i) + " is value " +
                                                   std::to_string(inputs[i].id) + ", not a value of this graph");
    node.inputs.push_back(inputs[i].id);
  }
  size_t first = values_.size();
  std::vector<Value> out;
  try {
    for (size_t i = 0; i < outputs.size(); ++i) {
      out.push_back(Value{add_value(outputs[i], label + ": output " + std::to_string(i))});
      node.outputs.push_back(out.back().id);
      producer_.back() = static_cast<int64_t>(nodes_.size());
    }
  } catch (...) {
    values_.resize(first);  // leave the graph as it was
    producer_.resize(first);
    names_.resize(first);
    constant_.resize(first);
    throw;
  }
  nodes_.push_back(std::move(node));
  return out;
}

Graph::Value Graph::add_op(const std::string& op, const std::vector<Value>& inputs, const ValueSpec& output,
                           const std::vector<Attr>& attrs) {
  return add_node(op, inputs, attrs, {output}).at(0);
}

std::vector<Graph::Value> Graph::add_node(const std::string& op, const std::vector<Value>& inputs,
                                          const std::vector<Attr>& attrs, size_t output_count) {
  const size_t n = nodes_.size();
  InferContext ctx;
  ctx.label = "node " + std::to_string(n) + " ('" + op + "')";
  ctx.fresh_symbol = [&](size_t output, size_t dim) {
    return symbol("node" + std::to_string(n) + (output ? "_o" + std::to_string(output) : "") + "_d" +
                  std::to_string(dim));
  };
  ctx.symbol_name = [this](int64_t s) { return symbol_name(s); };
  std::vector<const ValueSpec*> specs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].valid() && inputs[i].id >= values_.size())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, ctx.label + ": input " + std::to_string(i) + " is value " +
                                                   std::to_string(inputs[i].id) + ", not a value of this graph");
    specs.push_back(inputs[i].valid() ? &values_[inputs[i].id] : nullptr);
  }
  std::vector<ValueSpec> outputs;
  try {
    outputs = infer_node(op, specs, attrs, output_count, ctx);
  } catch (const Error& e) {
    std::string in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      in += i ? ", " : "";
      if (!inputs[i].valid()) {
        in += "absent";
        continue;
      }
      const std::string& name = names_[inputs[i].id];
      in += "value " + std::to_string(inputs[i].id) + (name.empty() ? "" : " '" + name + "'") + " " +
            common::dtype_name(values_[inputs[i].id].dtype) + " " + shape_string(values_[inputs[i].id].shape);
    }
    throw Error(e.code(), std::string(e.what()) + " [inputs: " + (in.empty() ? "none" : in) + "]");
  }
  return add_node(op, inputs, attrs, outputs);
}

Graph::Value Graph::add_op(const std::string& op, const std::vector<Value>& inputs, const Attrs& attrs) {
  return add_node(op, inputs, attrs.get(), size_t{0}).at(0);
}

std::string Graph::shape_string(const std::vector<int64_t>& shape) const {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + (shape[i] < 0 ? symbol_name(shape[i]) : std::to_string(shape[i]));
  return out + "]";
}

void Graph::mark_output(Value v, std::string name) {
  if (!v.valid() || v.id >= values_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) + " is not a value of this graph");
  if (producer_[v.id] < 0)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) + " is a " +
                                                 (constant_[v.id] ? "constant" : producer_[v.id] == -1 ? "graph input" : "value no node produces") +
                                                 "; an output must be produced by a node");
  if (std::find(outputs_.begin(), outputs_.end(), v.id) != outputs_.end())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) + " is already an output");
  outputs_.push_back(v.id);
  if (!name.empty()) names_[v.id] = std::move(name);
}

void Graph::set_node_input(size_t node, size_t index, Value v) {
  if (node >= nodes_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "set_node_input: node " + std::to_string(node) + " is out of range (the graph has " +
                                                 std::to_string(nodes_.size()) + " nodes)");
  Node& n = nodes_[node];
  const std::string label = "set_node_input: node " + std::to_string(node) + " ('" + n.op + "')";
  if (index >= n.inputs.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, label + " has " + std::to_string(n.inputs.size()) + " inputs, not " +
                                                 std::to_string(index + 1));
  if (v.valid() && v.id >= values_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, label + ": value " + std::to_string(v.id) + " is not a value of this graph");
  n.inputs[index] = v.id;
}

void Graph::replace_uses(Value from, Value to) {
  if (!from.valid() || !to.valid() || from.id >= values_.size() || to.id >= values_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "replace_uses: value " + std::to_string(from.id) + " or " +
                                                 std::to_string(to.id) + " is not a value of this graph");
  bool is_output = std::find(outputs_.begin(), outputs_.end(), from.id) != outputs_.end();
  if (is_output && producer_[to.id] < 0)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "replace_uses: value " + std::to_string(from.id) +
                                                 " is a graph output and value " + std::to_string(to.id) +
                                                 " is not produced by a node");
  for (Node& n : nodes_)
    std::replace(n.inputs.begin(), n.inputs.end(), from.id, to.id);
  std::replace(outputs_.begin(), outputs_.end(), from.id, to.id);
  if (is_output && names_[to.id].empty()) names_[to.id] = names_[from.id];  // front ends find outputs by name
}

void Graph::remove_nodes(const std::vector<bool>& remove) {
  if (remove.size() != nodes_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "remove_nodes: got " + std::to_string(remove.size()) +
                                                 " flags for " + std::to_string(nodes_.size()) + " nodes");
  std::vector<Node> kept;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (uint32_t id : nodes_[n].outputs) producer_[id] = remove[n] ? -3 : static_cast<int64_t>(kept.size());
    if (!remove[n]) kept.push_back(std::move(nodes_[n]));
  }
  nodes_ = std::move(kept);
}

size_t Graph::remove_unused_values() {
  const size_t nv = values_.size();
  std::vector<bool> used(nv, false);
  auto mark = [&](uint32_t id) {
    if (id < nv) used[id] = true;
  };
  for (uint32_t id : inputs_) mark(id);
  for (uint32_t id : outputs_) mark(id);
  for (const Node& n : nodes_) {
    for (uint32_t id : n.inputs) mark(id);
    for (uint32_t id : n.outputs) mark(id);
  }
  std::vector<uint32_t> remap(nv, HAL_GRAPH_NO_VALUE);
  size_t kept = 0;
  for (size_t id = 0; id < nv; ++id) {
    if (!used[id]) continue;
    remap[id] = static_cast<uint32_t>(kept);
    if (kept != id) {  // a self-move would empty the value
      values_[kept] = std::move(values_[id]);
      names_[kept] = std::move(names_[id]);
      constant_[kept] = std::move(constant_[id]);
      producer_[kept] = producer_[id];
    }
    ++kept;
  }
  values_.resize(kept);
  names_.resize(kept);
  constant_.resize(kept);
  producer_.resize(kept);
  auto renumber = [&](std::vector<uint32_t>& ids) {
    for (uint32_t& id : ids)
      if (id != HAL_GRAPH_NO_VALUE) id = remap[id];
  };
  renumber(inputs_);
  renumber(outputs_);
  for (Node& n : nodes_) {
    renumber(n.inputs);
    renumber(n.outputs);
  }
  std::vector<uint32_t> constants;
  for (uint32_t id : constants_)
    if (remap[id] != HAL_GRAPH_NO_VALUE) constants.push_back(remap[id]);
  constants_ = std::move(constants);
  return nv - kept;
}

void Graph::sort_nodes() {
  const size_t nn = nodes_.size();
  std::vector<std::vector<size_t>> consumers(nn);
  std::vector<size_t> pending(nn, 0);
  for (size_t n = 0; n < nn; ++n)
    for (uint32_t id : nodes_[n].inputs)
      if (id != HAL_GRAPH_NO_VALUE && id < producer_.size() && producer_[id] >= 0) {
        consumers[static_cast<size_t>(producer_[id])].push_back(n);
        ++pending[n];
      }
  // Kahn's algorithm taking the lowest ready index first: stable.
  std::set<size_t> ready;
  for (size_t n = 0; n < nn; ++n)
    if (pending[n] == 0) ready.insert(n);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (size_t c : consumers[n])
      if (--pending[c] == 0) ready.insert(c);
  }
  if (order.size() != nn) {
    verify();  // names the cycle
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "sort_nodes: the nodes have a cycle");
  }
  std::vector<Node> sorted;
  sorted.reserve(nn);
  for (size_t n : order) {
    for (uint32_t id : nodes_[n].outputs) producer_[id] = static_cast<int64_t>(sorted.size());
    sorted.push_back(std::move(nodes_[n]));
  }
  nodes_ = std::move(sorted);
}

}  // namespace hal
