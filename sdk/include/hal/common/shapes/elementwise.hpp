// Shape rules of the elementwise groups (unary, binary).
#ifndef HAL_COMMON_SHAPES_ELEMENTWISE_HPP_
#define HAL_COMMON_SHAPES_ELEMENTWISE_HPP_

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

// Every output has the first input's shape.
inline void same(const OpCall& call, std::vector<TensorMeta>& outputs) {
  for (auto& o : outputs) o.set_shape(call.input(0).sizes());
}

// Every input must have the first input's shape; so do the outputs.
inline void same_all(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& first = call.input(0);
  for (size_t i = 1; i < call.input_count(); ++i) {
    const Tensor& t = call.input(i);
    if (t.defined && t.sizes() != first.sizes())
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", call.schema().inputs[i].name, "' has shape ",
           t.shape_str(), " but input '", call.schema().inputs[0].name, "' has shape ", first.shape_str(),
           " (they must match)");
  }
  same(call, outputs);
}

// Outputs have the broadcast shape of all defined inputs.
inline void broadcast(const OpCall& call, std::vector<TensorMeta>& outputs) {
  TensorMeta shape;
  broadcast_shape_into(call, call.inputs(), shape);
  for (auto& o : outputs) {
    o.rank = shape.rank;
    std::copy(shape.shape, shape.shape + shape.rank, o.shape);
  }
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_ELEMENTWISE_HPP_
