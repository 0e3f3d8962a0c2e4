// Shape rules of the "rnn" group (LSTM / GRU cells; formulas and layouts in
// sdk/catalog/ops/rnn.toml): rank-2 [B, k·H] operands of one dtype.
#ifndef HAL_COMMON_SHAPES_RNN_HPP_
#define HAL_COMMON_SHAPES_RNN_HPP_

#include <vector>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace rnn_detail {

inline const char* in_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

// Checks that input I (skipped when absent and OPTIONAL) has shape SHAPE and
// the dtype of input 0; LAYOUT says what SHAPE is.
inline void require(const OpCall& call, size_t i, const std::vector<int64_t>& shape, const char* layout,
                    bool optional = false) {
  const Tensor* t = optional ? call.optional_input(i) : &call.input(i);
  if (t == nullptr) return;
  if (t->sizes() != shape)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has shape ", t->shape_str(),
         " but must be ", shape_string(shape.data(), static_cast<int>(shape.size())), " (", layout, ")");
  const Tensor& first = call.input(0);
  if (t->dtype != first.dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has dtype ", dtype_name(t->dtype),
         " but '", in_name(call, 0), "' has ", dtype_name(first.dtype), " (they must match)");
}

// Input I is [B, GATES·H]: returns {B, H}.
inline std::vector<int64_t> rows_and_hidden(const OpCall& call, size_t i, int64_t gates, const char* layout) {
  const Tensor& t = call.input(i);
  if (t.rank != 2 || t.shape[1] % gates != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has shape ", t.shape_str(),
         " but must be ", layout, " (rank 2, the last dim a multiple of ", gates, ")");
  return {t.shape[0], t.shape[1] / gates};
}

// The optional biases at I and I+1 ([GATES·H]): both or neither.
inline void check_biases(const OpCall& call, size_t i, int64_t gates, int64_t h) {
  const bool a = call.optional_input(i) != nullptr, b = call.optional_input(i + 1) != nullptr;
  if (a != b)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, a ? i : i + 1), "' is given but '",
         in_name(call, a ? i + 1 : i), "' is not (both biases or neither)");
  require(call, i, {gates * h}, gates == 4 ? "[4H]" : "[3H]", true);
  require(call, i + 1, {gates * h}, gates == 4 ? "[4H]" : "[3H]", true);
}

// A cell's forward: gates at 0 and 1 ([B, GATES·H]), state at 2 ([B, H]),
// biases at 3 and 4. Returns {B, H}.
inline std::vector<int64_t> check_cell(const OpCall& call, int64_t gates, const char* layout) {
  const std::vector<int64_t> bh = rows_and_hidden(call, 0, gates, layout);
  require(call, 1, {bh[0], gates * bh[1]}, "the shape of 'input_gates'");
  require(call, 2, bh, "[B, H] of the gates' [B, k·H]");
  check_biases(call, 3, gates, bh[1]);
  return bh;
}

}  // namespace rnn_detail

// lstm_cell: input_gates, hidden_gates [B, 4H], cx [B, H], biases [4H]
// -> hy, cy [B, H], workspace [B, 4H].
inline void lstm_cell(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> bh = rnn_detail::check_cell(call, 4, "[B, 4H]");
  outputs[0].set_shape(bh);
  outputs[1].set_shape(bh);
  outputs[2].set_shape({bh[0], 4 * bh[1]});
}

// lstm_cell_backward: cx, cy [B, H], workspace [B, 4H], grad_hy?, grad_cy?
// [B, H] (at least one) -> grad_gates [B, 4H], grad_cx [B, H].
inline void lstm_cell_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace rd = rnn_detail;
  const std::vector<int64_t> bh = rd::rows_and_hidden(call, 2, 4, "[B, 4H]");
  for (size_t i : {size_t{1}, size_t{2}}) {
    const Tensor& t = call.input(i);
    if (t.dtype != call.input(0).dtype)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", rd::in_name(call, i), "' has dtype ",
           dtype_name(t.dtype), " but 'cx' has ", dtype_name(call.input(0).dtype), " (they must match)");
  }
  for (size_t i = 0; i < 5; ++i)
    if (i != 2) rd::require(call, i, bh, "[B, H] of the workspace's [B, 4H]", i >= 3);
  if (call.optional_input(3) == nullptr && call.optional_input(4) == nullptr)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": neither 'grad_hy' nor 'grad_cy' is given (at least one)");
  outputs[0].set_shape({bh[0], 4 * bh[1]});
  outputs[1].set_shape(bh);
}

// gru_cell: input_gates, hidden_gates [B, 3H], hx [B, H], biases [3H]
// -> hy [B, H], workspace [B, 5H].
inline void gru_cell(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> bh = rnn_detail::check_cell(call, 3, "[B, 3H]");
  outputs[0].set_shape(bh);
  outputs[1].set_shape({bh[0], 5 * bh[1]});
}

// gru_cell_backward: grad_hy [B, H], workspace [B, 5H]
// -> grad_input_gates, grad_hidden_gates [B, 3H], grad_hx [B, H].
inline void gru_cell_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace rd = rnn_detail;
  const std::vector<int64_t> bh = rd::rows_and_hidden(call, 1, 5, "[B, 5H]");
  rd::require(call, 0, bh, "[B, H] of the workspace's [B, 5H]");
  if (call.input(1).dtype != call.input(0).dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'workspace' has dtype ", dtype_name(call.input(1).dtype),
         " but 'grad_hy' has ", dtype_name(call.input(0).dtype), " (they must match)");
  outputs[0].set_shape({bh[0], 3 * bh[1]});
  outputs[1].set_shape({bh[0], 3 * bh[1]});
  outputs[2].set_shape(bh);
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_RNN_HPP_
