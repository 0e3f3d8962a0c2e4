#include "hal/runtime/graph.hpp"

#include <algorithm>
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
  return static_cast<uint32_t>(values_.size() - 1);
}

Graph::Value Graph::input(hal_dtype_e dtype, std::vector<int64_t> shape) {
  uint32_t id = add_value(ValueSpec{dtype, std::move(shape)}, "graph input " + std::to_string(inputs_.size()));
  inputs_.push_back(id);
  return Value{id};
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
    throw;
  }
  nodes_.push_back(std::move(node));
  return out;
}

Graph::Value Graph::add_op(const std::string& op, const std::vector<Value>& inputs, const ValueSpec& output,
                           const std::vector<Attr>& attrs) {
  return add_node(op, inputs, attrs, {output}).at(0);
}

void Graph::mark_output(Value v) {
  if (!v.valid() || v.id >= values_.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) + " is not a value of this graph");
  if (producer_[v.id] < 0)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) +
                                                 " is a graph input; an output must be produced by a node");
  if (std::find(outputs_.begin(), outputs_.end(), v.id) != outputs_.end())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "mark_output: value " + std::to_string(v.id) + " is already an output");
  outputs_.push_back(v.id);
}

}  // namespace hal
