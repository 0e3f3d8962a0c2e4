// Shape rules of the "transformer" group (attention and positional
// embeddings). Attention attributes by catalog position: is_causal (0),
// scale (1), in the forward and the backward alike.
#ifndef HAL_COMMON_SHAPES_TRANSFORMER_HPP_
#define HAL_COMMON_SHAPES_TRANSFORMER_HPP_

#include <cmath>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace attention_detail {

inline const char* in_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

// Dtype of logsumexp for query dtype DT: float64 stays, others float32.
inline hal_dtype_e lse_dtype(hal_dtype_e dt) { return dt == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// Checks query/key/value (inputs Q, Q+1, Q+2) and the optional mask
// (input MASK) against each other.
inline void check_qkv(const OpCall& call, size_t q_i, size_t mask_i) {
  const std::string op = call.name();
  const Tensor& q = call.input(q_i);
  if (q.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'query' must have rank >= 2 ([..., L, E]) but has shape ",
         q.shape_str());
  const int r = q.rank;
  for (size_t i = q_i + 1; i <= q_i + 2; ++i) {
    const Tensor& t = call.input(i);
    if (t.dtype != q.dtype)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input '", in_name(call, i), "' has dtype ", dtype_name(t.dtype),
           " but 'query' has ", dtype_name(q.dtype), " (they must match)");
    if (t.rank != r)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input '", in_name(call, i), "' of shape ", t.shape_str(),
           " must have the rank of 'query' of shape ", q.shape_str());
    for (int d = 0; d < r - 2; ++d)
      if (t.shape[d] != q.shape[d])
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input '", in_name(call, i), "' of shape ", t.shape_str(),
             " has batch dim ", d, " = ", t.shape[d], " but 'query' of shape ", q.shape_str(), " has ", q.shape[d]);
  }
  const Tensor& k = call.input(q_i + 1);
  const Tensor& v = call.input(q_i + 2);
  if (k.shape[r - 1] != q.shape[r - 1])
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'key' of shape ", k.shape_str(), " has E = ", k.shape[r - 1],
         " but 'query' of shape ", q.shape_str(), " has E = ", q.shape[r - 1]);
  if (v.shape[r - 2] != k.shape[r - 2])
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'value' of shape ", v.shape_str(), " has S = ", v.shape[r - 2],
         " but 'key' of shape ", k.shape_str(), " has S = ", k.shape[r - 2]);
  double scale = call.attr(1).as_float();
  if (!std::isfinite(scale))
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute 'scale' = ", scale, " must be finite (0 = 1/sqrt(E))");
  const Tensor* mask = call.optional_input(mask_i);
  if (mask == nullptr) return;
  if (call.attr(0).as_bool())
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'attn_mask' of shape ", mask->shape_str(),
         " cannot be combined with is_causal = true");
  if (mask->dtype != HAL_DTYPE_BOOL && mask->dtype != q.dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'attn_mask' has dtype ", dtype_name(mask->dtype),
         " but must be bool or the query's dtype ", dtype_name(q.dtype));
  std::vector<int64_t> target = q.sizes();
  target[r - 1] = k.shape[r - 2];
  bool ok = mask->rank <= r;
  for (int d = 0; ok && d < mask->rank; ++d) {
    int64_t s = mask->shape[mask->rank - 1 - d];
    ok = s == 1 || s == target[r - 1 - d];
  }
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": input 'attn_mask' of shape ", mask->shape_str(),
         " does not broadcast to [..., L, S] = ", shape_string(target.data(), r));
}

// Requires input I to have SHAPE and DTYPE.
inline void require(const OpCall& call, size_t i, const std::vector<int64_t>& shape, hal_dtype_e dtype) {
  const Tensor& t = call.input(i);
  if (t.sizes() != shape)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has shape ", t.shape_str(),
         " but must be ", shape_string(shape.data(), static_cast<int>(shape.size())));
  if (t.dtype != dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has dtype ",
         dtype_name(t.dtype), " but must be ", dtype_name(dtype));
}

// [..., L, Ev] and [..., L] of query Q and value V.
inline std::vector<int64_t> out_shape(const Tensor& q, const Tensor& v) {
  std::vector<int64_t> s = q.sizes();
  s.back() = v.shape[v.rank - 1];
  return s;
}
inline std::vector<int64_t> lse_shape(const Tensor& q) {
  std::vector<int64_t> s = q.sizes();
  s.pop_back();
  return s;
}

}  // namespace attention_detail

// scaled_dot_product_attention: out [..., L, Ev], logsumexp [..., L].
inline void attention(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ad = attention_detail;
  ad::check_qkv(call, 0, 3);
  const Tensor& q = call.input(0);
  outputs[0].set_shape(ad::out_shape(q, call.input(2)));
  outputs[1].set_shape(ad::lse_shape(q));
  outputs[1].dtype = ad::lse_dtype(q.dtype);
}

// scaled_dot_product_attention_backward: inputs grad_out, query, key, value,
// out, logsumexp, attn_mask?; the grads have query's, key's, value's shapes.
inline void attention_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ad = attention_detail;
  ad::check_qkv(call, 1, 6);
  const Tensor& q = call.input(1);
  std::vector<int64_t> o = ad::out_shape(q, call.input(3));
  ad::require(call, 0, o, q.dtype);
  ad::require(call, 4, o, q.dtype);
  ad::require(call, 5, ad::lse_shape(q), ad::lse_dtype(q.dtype));
  for (size_t i = 0; i < 3; ++i) outputs[i].set_shape(call.input(i + 1).sizes());
}

// rotary_embedding: x [..., S, D], cos and sin [S, D/2] -> out like x.
inline void rotary(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& x = call.input(0);
  if (x.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'x' must have rank >= 2 ([..., S, D]) but has shape ",
         x.shape_str());
  int64_t s = x.shape[x.rank - 2], d = x.shape[x.rank - 1];
  if (d % 2 != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'x' of shape ", x.shape_str(), " has odd D = ", d,
         " (rotary pairs need an even last dim)");
  for (size_t i = 1; i <= 2; ++i) {
    const Tensor& t = call.input(i);
    if (t.rank != 2 || t.shape[0] != s || t.shape[1] != d / 2)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", call.schema().inputs[i].name, "' has shape ",
           t.shape_str(), " but must be [S, D/2] = [", s, ", ", d / 2, "] for 'x' of shape ", x.shape_str());
  }
  outputs[0].set_shape(x.sizes());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_TRANSFORMER_HPP_
