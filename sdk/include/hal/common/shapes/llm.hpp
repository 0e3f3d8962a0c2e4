// Shape rules of the "llm" group (fused inference operators, paged KV cache;
// layouts in sdk/catalog/ops/llm.toml). They check everything the shapes,
// dtypes and attributes decide; what only the data decides (slots, block
// ids, positions, lengths) the kernels check and report through the stream.
#ifndef HAL_COMMON_SHAPES_LLM_HPP_
#define HAL_COMMON_SHAPES_LLM_HPP_

#include <cmath>
#include <vector>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace llm_detail {

inline const char* in_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

// Throws unless input I has input J's dtype.
inline void same_dtype(const OpCall& call, size_t i, size_t j) {
  const Tensor& a = call.input(i);
  const Tensor& b = call.input(j);
  if (a.dtype != b.dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has dtype ", dtype_name(a.dtype),
         " but '", in_name(call, j), "' has ", dtype_name(b.dtype), " (they must match)");
}

// Throws unless input I has shape SHAPE; WHAT says where SHAPE comes from.
inline void require_shape(const OpCall& call, size_t i, const std::vector<int64_t>& shape, const char* what) {
  const Tensor& t = call.input(i);
  if (t.sizes() != shape)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' has shape ", t.shape_str(),
         " but must be ", shape_string(shape.data(), static_cast<int>(shape.size())), " (", what, ")");
}

// Throws unless input I has rank RANK; LAYOUT names its dims.
inline void require_rank(const OpCall& call, size_t i, int rank, const char* layout) {
  const Tensor& t = call.input(i);
  if (t.rank != rank)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, i), "' must have rank ", rank, " (",
         layout, ") but has shape ", t.shape_str());
}

// Hq query heads over Hk kv heads (query input Q, kv input KV, dim D of both).
inline void check_heads(const OpCall& call, size_t q, size_t kv, int64_t hq, int64_t hk) {
  if (hk <= 0 || hq % hk != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": the ", hq, " query heads of '", in_name(call, q),
         "' are not a multiple of the ", hk, " kv heads of '", in_name(call, kv),
         "' (grouped-query attention needs Hk to divide Hq)");
}

// Attributes scale (float) and sliding_window (int) at SCALE_I, WINDOW_I.
inline void check_attention_attrs(const OpCall& call, size_t scale_i, size_t window_i) {
  double scale = call.attr(scale_i).as_float();
  if (!std::isfinite(scale))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'scale' = ", scale, " must be finite (0 = 1/sqrt(D))");
  int64_t window = call.attr(window_i).as_int();
  if (window < 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'sliding_window' = ", window,
         " must be >= 0 (0 = no window)");
}

// The caches at K, K+1 ([num_blocks, block_size, Hk, D] and [.., Dv]) agree
// with each other and have dtype of input DT_OF. Returns {Hk, D, Dv}.
struct CacheDims {
  int64_t blocks, block_size, hk, d, dv;
};
inline CacheDims check_caches(const OpCall& call, size_t k, size_t dt_of) {
  require_rank(call, k, 4, "[num_blocks, block_size, num_kv_heads, head_dim]");
  require_rank(call, k + 1, 4, "[num_blocks, block_size, num_kv_heads, head_dim]");
  const Tensor& kc = call.input(k);
  const Tensor& vc = call.input(k + 1);
  for (int d = 0; d < 3; ++d)
    if (kc.shape[d] != vc.shape[d])
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, k + 1), "' of shape ", vc.shape_str(),
           " does not match '", in_name(call, k), "' of shape ", kc.shape_str(),
           " in [num_blocks, block_size, num_kv_heads]");
  if (kc.shape[1] <= 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", in_name(call, k), "' of shape ", kc.shape_str(),
         " has block_size 0");
  same_dtype(call, k, dt_of);
  same_dtype(call, k + 1, dt_of);
  return {kc.shape[0], kc.shape[1], kc.shape[2], kc.shape[3], vc.shape[3]};
}

// An optional alibi_slopes input I: [Hq].
inline void check_alibi(const OpCall& call, size_t i, int64_t hq) {
  if (call.optional_input(i) != nullptr) require_shape(call, i, {hq}, "one slope per query head");
}

}  // namespace llm_detail

// add_rms_norm: input, residual [..., N], weight [N] -> out, residual_out.
inline void add_rms_norm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  const Tensor& x = call.input(0);
  if (x.rank < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'input' must have rank >= 1 ([..., N]) but is 0-d");
  ld::require_shape(call, 1, x.sizes(), "input's shape");
  ld::require_shape(call, 2, {x.shape[x.rank - 1]}, "[N], the last dim of 'input'");
  ld::same_dtype(call, 1, 0);
  ld::same_dtype(call, 2, 0);
  double eps = call.attr(0).as_float();
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'eps' = ", eps, " must be finite and >= 0");
  outputs[0].set_shape(x.sizes());
  outputs[1].set_shape(x.sizes());
}

// apply_rotary_pos_emb: query [..., Hq, D], key [..., Hk, D], cos and sin
// [max_position, R/2], position_ids [...] -> query_out, key_out.
inline void apply_rotary_pos_emb(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  const Tensor& q = call.input(0);
  const Tensor& k = call.input(1);
  if (q.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'query' must have rank >= 2 ([..., Hq, D]) but has shape ",
         q.shape_str());
  ld::same_dtype(call, 1, 0);
  const int64_t d = q.shape[q.rank - 1];
  std::vector<int64_t> lead(q.shape, q.shape + q.rank - 2);
  std::vector<int64_t> kshape = lead;
  kshape.push_back(k.rank == q.rank ? k.shape[k.rank - 2] : 0);
  kshape.push_back(d);
  if (k.rank != q.rank || k.sizes() != kshape)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'key' of shape ", k.shape_str(),
         " must be [..., Hk, D] with the leading dims and D of 'query' of shape ", q.shape_str());
  ld::require_rank(call, 2, 2, "[max_position, rotary_dim / 2]");
  ld::require_shape(call, 3, call.input(2).sizes(), "the shape of 'cos'");
  const int64_t half = call.input(2).shape[1];
  if (2 * half > d)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'cos' of shape ", call.input(2).shape_str(),
         " rotates ", 2 * half, " dims but the heads of 'query' of shape ", q.shape_str(), " have D = ", d);
  ld::require_shape(call, 4, lead, "the leading dims of 'query', one position per token");
  outputs[0].set_shape(q.sizes());
  outputs[1].set_shape(k.sizes());
}

// silu_and_mul: input [..., 2N] -> out [..., N].
inline void silu_and_mul(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& x = call.input(0);
  if (x.rank < 1 || x.shape[x.rank - 1] % 2 != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'input' of shape ", x.shape_str(),
         " must have an even last dim ([..., 2N])");
  std::vector<int64_t> s = x.sizes();
  s.back() /= 2;
  outputs[0].set_shape(s);
}

// fill_kv_cache: key [T, Hk, D], value [T, Hk, Dv], caches, slot_mapping [T].
inline void fill_kv_cache(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::CacheDims c = ld::check_caches(call, 2, 0);
  ld::same_dtype(call, 1, 0);
  const Tensor& k = call.input(0);
  ld::require_rank(call, 0, 3, "[num_tokens, num_kv_heads, head_dim]");
  const int64_t t = k.shape[0];
  ld::require_shape(call, 0, {t, c.hk, c.d}, "[num_tokens, Hk, D] of the key cache");
  ld::require_shape(call, 1, {t, c.hk, c.dv}, "[num_tokens, Hk, Dv] of the value cache");
  ld::require_shape(call, 4, {t}, "one slot per token");
  outputs[0].set_shape(call.input(2).sizes());
  outputs[1].set_shape(call.input(3).sizes());
}

// paged_decode_attention: query [B, Hq, D], caches, block_tables [B, M],
// context_lens [B], alibi_slopes? [Hq] -> out [B, Hq, Dv].
inline void paged_decode_attention(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::require_rank(call, 0, 3, "[batch, num_heads, head_dim]");
  const Tensor& q = call.input(0);
  ld::CacheDims c = ld::check_caches(call, 1, 0);
  ld::check_heads(call, 0, 1, q.shape[1], c.hk);
  ld::require_shape(call, 1, {c.blocks, c.block_size, c.hk, q.shape[2]}, "head_dim D of 'query'");
  ld::require_rank(call, 3, 2, "[batch, max_blocks]");
  if (call.input(3).shape[0] != q.shape[0])
    ld::require_shape(call, 3, {q.shape[0], call.input(3).shape[1]}, "one row per sequence of 'query'");
  ld::require_shape(call, 4, {q.shape[0]}, "one length per sequence of 'query'");
  ld::check_alibi(call, 5, q.shape[1]);
  ld::check_attention_attrs(call, 0, 1);
  outputs[0].set_shape({q.shape[0], q.shape[1], c.dv});
}

// paged_prefill_attention: query [T, Hq, D], caches, block_tables [B, M],
// query_start_loc [B+1], context_lens [B], alibi_slopes? -> out [T, Hq, Dv].
inline void paged_prefill_attention(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::require_rank(call, 0, 3, "[num_tokens, num_heads, head_dim]");
  const Tensor& q = call.input(0);
  ld::CacheDims c = ld::check_caches(call, 1, 0);
  ld::check_heads(call, 0, 1, q.shape[1], c.hk);
  ld::require_shape(call, 1, {c.blocks, c.block_size, c.hk, q.shape[2]}, "head_dim D of 'query'");
  ld::require_rank(call, 3, 2, "[batch, max_blocks]");
  const int64_t b = call.input(3).shape[0];
  ld::require_shape(call, 4, {b + 1}, "[batch + 1], batch from 'block_tables'");
  ld::require_shape(call, 5, {b}, "[batch], batch from 'block_tables'");
  ld::check_alibi(call, 6, q.shape[1]);
  ld::check_attention_attrs(call, 0, 2);
  outputs[0].set_shape({q.shape[0], q.shape[1], c.dv});
}

// prefill_attention: query [T, Hq, D], key [T, Hk, D], value [T, Hk, Dv],
// cu_seqlens [B+1], alibi_slopes? -> out [T, Hq, Dv].
inline void prefill_attention(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::require_rank(call, 0, 3, "[num_tokens, num_heads, head_dim]");
  ld::require_rank(call, 1, 3, "[num_tokens, num_kv_heads, head_dim]");
  ld::require_rank(call, 2, 3, "[num_tokens, num_kv_heads, head_dim_v]");
  ld::same_dtype(call, 1, 0);
  ld::same_dtype(call, 2, 0);
  const Tensor& q = call.input(0);
  const Tensor& k = call.input(1);
  const Tensor& v = call.input(2);
  ld::require_shape(call, 1, {q.shape[0], k.shape[1], q.shape[2]}, "[num_tokens, Hk, D] with T and D of 'query'");
  ld::require_shape(call, 2, {q.shape[0], k.shape[1], v.shape[2]}, "[num_tokens, Hk, Dv] with T and Hk of 'key'");
  ld::check_heads(call, 0, 1, q.shape[1], k.shape[1]);
  if (call.input(3).rank != 1 || call.input(3).shape[0] < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'cu_seqlens' must be [batch + 1] (rank 1, at least one "
         "entry) but has shape ", call.input(3).shape_str());
  ld::check_alibi(call, 4, q.shape[1]);
  ld::check_attention_attrs(call, 0, 2);
  outputs[0].set_shape({q.shape[0], q.shape[1], v.shape[2]});
}

// moe_gating_topk_softmax: router_logits [T, E] -> [T, top_k] twice.
inline void moe_gating_topk_softmax(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::require_rank(call, 0, 2, "[num_tokens, num_experts]");
  const Tensor& x = call.input(0);
  int64_t k = call.attr(0).as_int();
  if (k < 1 || k > x.shape[1])
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'top_k' = ", k, " must be in [1, ", x.shape[1],
         "] for 'router_logits' of shape ", x.shape_str(), " (", x.shape[1], " experts)");
  outputs[0].set_shape({x.shape[0], k});
  outputs[1].set_shape({x.shape[0], k});
}

// fused_moe: hidden_states [T, H], gate_up_weights [E, 2I, H], down_weights
// [E, H, I], topk_weights and topk_ids [T, k] -> out [T, H].
inline void fused_moe(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  ld::require_rank(call, 0, 2, "[num_tokens, hidden]");
  ld::require_rank(call, 1, 3, "[num_experts, 2 * intermediate, hidden]");
  ld::require_rank(call, 3, 2, "[num_tokens, top_k]");
  ld::same_dtype(call, 1, 0);
  ld::same_dtype(call, 2, 0);
  const Tensor& x = call.input(0);
  const Tensor& w13 = call.input(1);
  if (w13.shape[2] != x.shape[1] || w13.shape[1] % 2 != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'gate_up_weights' of shape ", w13.shape_str(),
         " must be [E, 2I, H] with H = ", x.shape[1], " of 'hidden_states'");
  const int64_t e = w13.shape[0], i = w13.shape[1] / 2;
  ld::require_shape(call, 2, {e, x.shape[1], i}, "[E, H, I] from 'gate_up_weights' and 'hidden_states'");
  const Tensor& w = call.input(3);
  if (w.shape[0] != x.shape[0])
    ld::require_shape(call, 3, {x.shape[0], w.shape[1]}, "one row per token of 'hidden_states'");
  if (w.shape[1] > e)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'topk_weights' of shape ", w.shape_str(),
         " picks top_k = ", w.shape[1], " experts but 'gate_up_weights' has only ", e);
  ld::require_shape(call, 4, w.sizes(), "the shape of 'topk_weights'");
  outputs[0].set_shape(x.sizes());
}

// dynamic_quant: input [..., K] -> out [..., K] int8, scale [..., 1].
inline void dynamic_quant(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& x = call.input(0);
  if (x.rank < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'input' must have rank >= 1 ([..., K]) but is 0-d");
  std::vector<int64_t> s = x.sizes();
  outputs[0].set_shape(s);
  s.back() = 1;
  outputs[1].set_shape(s);
}

// linear_w8a16: input [..., K], weight [N, K] int8, scale [N] or [N, 1],
// bias? [N] -> out [..., N].
inline void linear_w8a16(const OpCall& call, std::vector<TensorMeta>& outputs) {
  namespace ld = llm_detail;
  const Tensor& x = call.input(0);
  if (x.rank < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'input' must have rank >= 1 ([..., K]) but is 0-d");
  ld::require_rank(call, 1, 2, "[out_features, in_features]");
  const Tensor& w = call.input(1);
  const int64_t n = w.shape[0], k = x.shape[x.rank - 1];
  if (w.shape[1] != k)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'weight' of shape ", w.shape_str(), " has in_features ",
         w.shape[1], " but 'input' of shape ", x.shape_str(), " has K = ", k);
  const Tensor& scale = call.input(2);
  if (!(scale.rank == 1 && scale.shape[0] == n) && !(scale.rank == 2 && scale.shape[0] == n && scale.shape[1] == 1))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'scale' has shape ", scale.shape_str(), " but must be [",
         n, "] or [", n, ", 1] (one per output channel of 'weight')");
  if (call.optional_input(3) != nullptr) {
    ld::require_shape(call, 3, {n}, "one per output channel");
    ld::same_dtype(call, 3, 0);
  }
  std::vector<int64_t> s = x.sizes();
  s.back() = n;
  outputs[0].set_shape(s);
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_LLM_HPP_
