// Shape rules of the "nn" group (normalization, softmax and losses).
#ifndef HAL_COMMON_SHAPES_NN_HPP_
#define HAL_COMMON_SHAPES_NN_HPP_

#include <cstring>
#include <string>
#include <vector>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {
namespace nn_detail {

// The attribute NAME of the call (rules run before the typed accessors are
// declared, so they look attributes up by name).
inline const AttrValue& attr(const OpCall& call, const char* name) {
  const OpSchema& s = call.schema();
  for (size_t i = 0; i < s.attr_count; ++i)
    if (std::strcmp(s.attrs[i].name, name) == 0) return call.attr(i);
  fail(HAL_STATUS_INTERNAL, call.name(), ": the catalog has no attribute '", name, "'");
}

inline const char* input_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

inline std::string vec_string(const std::vector<int64_t>& v) {
  return shape_string(v.data(), static_cast<int>(v.size()));
}

// Input I (when given) must have SHAPE; WHAT says why.
inline void require_shape(const OpCall& call, size_t i, const std::vector<int64_t>& shape, const char* what) {
  const Tensor* t = call.optional_input(i);
  if (t != nullptr && t->sizes() != shape)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' has shape ", t->shape_str(),
         " but must be ", vec_string(shape), " (", what, ")");
}

// Input I (when given) must have input REF's dtype.
inline void require_dtype(const OpCall& call, size_t i, size_t ref) {
  const Tensor* t = call.optional_input(i);
  const Tensor& r = call.input(ref);
  if (t != nullptr && t->dtype != r.dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' has dtype ",
         dtype_name(t->dtype), " but input '", input_name(call, ref), "' has ", dtype_name(r.dtype),
         " (they must match)");
}

inline void require_dtypes(const OpCall& call, size_t ref) {
  for (size_t i = 0; i < call.input_count(); ++i)
    if (i != ref && call.schema().inputs[i].dtypes == call.schema().inputs[ref].dtypes) require_dtype(call, i, ref);
}

// Checks normalized_shape against input I's trailing dims; returns the
// first normalized axis.
inline int normalized_axis(const OpCall& call, size_t i) {
  const std::vector<int64_t>& ns = attr(call, "normalized_shape").as_ints();
  const Tensor& in = call.input(i);
  if (ns.empty())
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'normalized_shape' is empty (it must name at least ",
         "one trailing dim of input '", input_name(call, i), "' ", in.shape_str(), ")");
  for (int64_t s : ns)
    if (s < 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'normalized_shape' = ", vec_string(ns),
           " has a negative size ", s);
  int axis = in.rank - static_cast<int>(ns.size());
  if (axis < 0 || !std::equal(ns.begin(), ns.end(), in.shape + axis))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'normalized_shape' = ", vec_string(ns),
         " is not the trailing dims of input '", input_name(call, i), "' of shape ", in.shape_str());
  return axis;
}

// INPUT's shape with the dims from AXIS on set to 1.
inline std::vector<int64_t> stat_shape(const Tensor& input, int axis) {
  std::vector<int64_t> s = input.sizes();
  for (size_t d = static_cast<size_t>(axis); d < s.size(); ++d) s[d] = 1;
  return s;
}

// Channels of an [N, C, *] input I (rank >= 2).
inline int64_t channels(const OpCall& call, size_t i) {
  const Tensor& in = call.input(i);
  if (in.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i),
         "' must be [N, C, *] (rank >= 2) but has shape ", in.shape_str());
  return in.shape[1];
}

inline int64_t checked_groups(const OpCall& call, int64_t channels) {
  int64_t g = attr(call, "num_groups").as_int();
  if (g <= 0 || channels % g != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'num_groups' = ", g,
         " must be positive and divide the ", channels, " channels of input '", input_name(call, 0), "'");
  return g;
}

// Class dim and count of a class-index loss's input I ([C], [N, C, ...]);
// checks target (input I + 1) and weight (I + 2); returns the loss's
// unreduced shape (target's).
inline std::vector<int64_t> class_loss_shape(const OpCall& call, size_t i) {
  const Tensor& in = call.input(i);
  const Tensor& target = call.input(i + 1);
  if (in.rank < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i),
         "' must be [C], [N, C] or [N, C, d1, ...] but is 0-d");
  int cdim = in.rank == 1 ? 0 : 1;
  std::vector<int64_t> expect = in.sizes();
  expect.erase(expect.begin() + cdim);
  if (target.sizes() != expect)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'target' has shape ", target.shape_str(), " but input '",
         input_name(call, i), "' of shape ", in.shape_str(), " needs ", vec_string(expect),
         " (input's shape without the class dim ", cdim, ")");
  require_shape(call, i + 2, {in.shape[cdim]}, "one weight per class");
  require_dtype(call, i + 2, i);
  const AttrValue* ls = nullptr;
  for (size_t k = 0; k < call.schema().attr_count; ++k)
    if (std::strcmp(call.schema().attrs[k].name, "label_smoothing") == 0) ls = &call.attr(k);
  if (ls != nullptr && !(ls->as_float() >= 0.0 && ls->as_float() <= 1.0))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'label_smoothing' = ", ls->as_float(),
         " must be in [0, 1]");
  return expect;
}

inline std::vector<int64_t> reduced_shape(const OpCall& call, std::vector<int64_t> unreduced) {
  if (attr(call, "reduction").as_string() == "none") return unreduced;
  return {};
}

// grad_output (input 0) of a loss backward must have the loss's output shape.
inline void check_grad_output(const OpCall& call, const std::vector<int64_t>& loss_shape) {
  require_shape(call, 0, loss_shape, "the loss's output shape for this reduction");
}

// Input I (when given) must broadcast to input REF's shape without growing it.
inline void require_broadcastable_to(const OpCall& call, size_t i, size_t ref) {
  const Tensor* t = call.optional_input(i);
  if (t == nullptr) return;
  const Tensor& r = call.input(ref);
  bool ok = t->rank <= r.rank;
  for (int d = 0; ok && d < t->rank; ++d) {
    int64_t s = t->shape[t->rank - 1 - d], rs = r.shape[r.rank - 1 - d];
    ok = s == rs || s == 1;
  }
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' of shape ", t->shape_str(),
         " does not broadcast to input '", input_name(call, ref), "' of shape ", r.shape_str());
}

inline void pointwise_loss_inputs(const OpCall& call, size_t i) {
  require_shape(call, i + 1, call.input(i).sizes(), "target must have input's shape");
  for (size_t k = i + 2; k < call.input_count(); ++k) require_broadcastable_to(call, k, i);
  require_dtypes(call, 0);
}

}  // namespace nn_detail

// softmax / log_softmax: out has self's shape; dim must be in range.
inline void softmax(const OpCall& call, std::vector<TensorMeta>& outputs) {
  normalize_dim(call, "dim", nn_detail::attr(call, "dim").as_int(), call.input(0).rank);
  outputs[0].set_shape(call.input(0).sizes());
}

// grad_output and output have one shape and dtype; grad_input has it too.
inline void softmax_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  nn_detail::require_shape(call, 1, call.input(0).sizes(), "grad_output's shape");
  nn_detail::require_dtype(call, 1, 0);
  softmax(call, outputs);
}

inline void layer_norm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int axis = nn_detail::normalized_axis(call, 0);
  const std::vector<int64_t>& ns = nn_detail::attr(call, "normalized_shape").as_ints();
  nn_detail::require_shape(call, 1, ns, "normalized_shape");
  nn_detail::require_shape(call, 2, ns, "normalized_shape");
  nn_detail::require_dtypes(call, 0);
  outputs[0].set_shape(call.input(0).sizes());
  for (size_t o = 1; o < outputs.size(); ++o) outputs[o].set_shape(nn_detail::stat_shape(call.input(0), axis));
}

// rms_norm: out, rstd.
inline void rms_norm(const OpCall& call, std::vector<TensorMeta>& outputs) { layer_norm(call, outputs); }

// layer_norm_backward (grad_out, input, mean, rstd, weight?) and
// rms_norm_backward (grad_out, input, rstd, weight?).
inline void layer_norm_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int axis = nn_detail::normalized_axis(call, 1);
  const Tensor& in = call.input(1);
  const std::vector<int64_t>& ns = nn_detail::attr(call, "normalized_shape").as_ints();
  nn_detail::require_shape(call, 0, in.sizes(), "input's shape");
  size_t weight = call.schema().input_count - 1;
  for (size_t i = 2; i < weight; ++i) nn_detail::require_shape(call, i, nn_detail::stat_shape(in, axis), "the forward's statistics");
  nn_detail::require_shape(call, weight, ns, "normalized_shape");
  nn_detail::require_dtypes(call, 1);
  outputs[0].set_shape(in.sizes());
  for (size_t o = 1; o < outputs.size(); ++o) outputs[o].set_shape(ns);
}
inline void rms_norm_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  layer_norm_backward(call, outputs);
}

inline void group_norm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int64_t c = nn_detail::channels(call, 0);
  int64_t g = nn_detail::checked_groups(call, c);
  nn_detail::require_shape(call, 1, {c}, "one per channel");
  nn_detail::require_shape(call, 2, {c}, "one per channel");
  nn_detail::require_dtypes(call, 0);
  outputs[0].set_shape(call.input(0).sizes());
  outputs[1].set_shape({call.input(0).shape[0], g});
  outputs[2].set_shape({call.input(0).shape[0], g});
}

// (grad_out, input, mean, rstd, weight?)
inline void group_norm_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int64_t c = nn_detail::channels(call, 1);
  int64_t g = nn_detail::checked_groups(call, c);
  const Tensor& in = call.input(1);
  nn_detail::require_shape(call, 0, in.sizes(), "input's shape");
  nn_detail::require_shape(call, 2, {in.shape[0], g}, "[N, num_groups]");
  nn_detail::require_shape(call, 3, {in.shape[0], g}, "[N, num_groups]");
  nn_detail::require_shape(call, 4, {c}, "one per channel");
  nn_detail::require_dtypes(call, 1);
  outputs[0].set_shape(in.sizes());
  outputs[1].set_shape({c});
  outputs[2].set_shape({c});
}

// (input, weight?, bias?, running_mean?, running_var?) -> out, save_mean,
// save_invstd, running_mean_out, running_var_out.
inline void batch_norm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int64_t c = nn_detail::channels(call, 0);
  const Tensor& in = call.input(0);
  for (size_t i = 1; i < 5; ++i) nn_detail::require_shape(call, i, {c}, "one per channel");
  nn_detail::require_dtypes(call, 0);
  bool training = nn_detail::attr(call, "training").as_bool();
  bool has_rm = call.optional_input(3) != nullptr, has_rv = call.optional_input(4) != nullptr;
  if (has_rm != has_rv)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": give both 'running_mean' and 'running_var' or neither (got ",
         has_rm ? "running_mean" : "running_var", " only)");
  if (!training && !has_rm)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": 'running_mean' and 'running_var' are required when training is false");
  if (training && in.numel() / std::max<int64_t>(c, 1) == 1 && c > 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": expected more than 1 value per channel when training, got input '",
         nn_detail::input_name(call, 0), "' of shape ", in.shape_str());
  outputs[0].set_shape(in.sizes());
  outputs[1].set_shape({training ? c : 0});
  outputs[2].set_shape({training ? c : 0});
  outputs[3].set_shape({has_rm ? c : 0});
  outputs[4].set_shape({has_rm ? c : 0});
}

// (grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?)
inline void batch_norm_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int64_t c = nn_detail::channels(call, 1);
  const Tensor& in = call.input(1);
  nn_detail::require_shape(call, 0, in.sizes(), "input's shape");
  for (size_t i = 2; i < 7; ++i) nn_detail::require_shape(call, i, {c}, "one per channel");
  nn_detail::require_dtypes(call, 1);
  bool training = nn_detail::attr(call, "training").as_bool();
  size_t a = training ? 5 : 3, b = training ? 6 : 4;
  if (call.optional_input(a) == nullptr || call.optional_input(b) == nullptr)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": inputs '", nn_detail::input_name(call, a), "' and '",
         nn_detail::input_name(call, b), "' are required when training is ", training ? "true" : "false");
  outputs[0].set_shape(in.sizes());
  outputs[1].set_shape({c});
  outputs[2].set_shape({c});
}

// cross_entropy / nll_loss: (input, target, weight?).
inline void class_loss(const OpCall& call, std::vector<TensorMeta>& outputs) {
  outputs[0].set_shape(nn_detail::reduced_shape(call, nn_detail::class_loss_shape(call, 0)));
}

// (grad_output, input, target, weight?) -> grad_input.
inline void class_loss_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  nn_detail::check_grad_output(call, nn_detail::reduced_shape(call, nn_detail::class_loss_shape(call, 1)));
  nn_detail::require_dtype(call, 0, 1);
  outputs[0].set_shape(call.input(1).sizes());
}

// mse_loss / binary_cross_entropy_with_logits: (input, target, weight?, pos_weight?).
inline void pointwise_loss(const OpCall& call, std::vector<TensorMeta>& outputs) {
  nn_detail::pointwise_loss_inputs(call, 0);
  outputs[0].set_shape(nn_detail::reduced_shape(call, call.input(0).sizes()));
}

// (grad_output, input, target, ...) -> grad_input.
inline void pointwise_loss_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  nn_detail::pointwise_loss_inputs(call, 1);
  nn_detail::check_grad_output(call, nn_detail::reduced_shape(call, call.input(1).sizes()));
  outputs[0].set_shape(call.input(1).sizes());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_NN_HPP_
