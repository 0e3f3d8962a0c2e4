// The pipeline's layout adjustment (docs/graph.md, "Layouts"): where the
// plugin running an op-by-op node declares a preferred layout for a tensor
// (op_get_layouts, ABI 1.8), libhal allocates the value between launches
// dense in that dim order instead of row-major, so a chain of channels-last
// convolutions reorders nothing between launches. Layouts depend on the
// plugin that runs each node, so the pass runs after partitioning, per
// concrete input shapes.
#ifndef HAL_GRAPH_LAYOUT_HPP_
#define HAL_GRAPH_LAYOUT_HPP_

#include <functional>
#include <optional>
#include <vector>

#include "hal/common/dim_order.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/runtime/op.hpp"

namespace hal::detail {

// What node N's plugin prefers for N's call when its inputs have
// INPUT_STRIDES (one per input, empty: row-major or absent); nullopt when
// the plugin says nothing.
using AskLayouts =
    std::function<std::optional<OpLayouts>(size_t n, const std::vector<std::vector<int64_t>>& input_strides)>;

struct LayoutPlan {
  std::vector<common::DimOrder> order;  // per value; empty: row-major
  size_t relaid = 0;                    // values that are not row-major
};

// Chooses the layout of the values in CHOOSABLE (per value: libhal
// allocates it and only launches that accept strided tensors read it).
// NODES: the op-by-op nodes whose plugin may be asked, in run order; SHAPES:
// every value's concrete shape. A value takes, in this order of precedence:
//   1. the order its producer prefers for it;
//   2. when the producer has no preference: the order of the producer's
//      first input of the same shape that is not row-major (elementwise
//      ops keep their inputs' layout, as PyTorch's TensorIterator does);
//   3. else the order every consumer that states one prefers for it;
//   4. else row-major.
// Values of rank < 2 stay row-major. Pure apart from ASK.
LayoutPlan plan_layouts(const Graph& g, const std::vector<size_t>& nodes,
                        const std::vector<std::vector<int64_t>>& shapes, const std::vector<bool>& choosable,
                        const AskLayouts& ask);

}  // namespace hal::detail

#endif  // HAL_GRAPH_LAYOUT_HPP_
