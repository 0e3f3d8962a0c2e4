"""torch.ops.hal.<op>: fused operators for large-model inference (the op catalog's "llm" group).

    import torch, torch_hal
    out, rstd = torch.ops.hal.rms_norm(x, weight, [hidden], 1e-6)           # the catalog's rms_norm, fused
    out, residual = torch.ops.hal.add_rms_norm(x, residual, weight, 1e-6)
    torch.ops.hal.apply_rotary_pos_emb(q, k, cos, sin, positions)          # in place on q and k
    torch.ops.hal.fill_kv_cache(k, v, key_cache, value_cache, slot_mapping)  # in place on the caches
    out = torch.ops.hal.paged_decode_attention(q, key_cache, value_cache, block_tables, context_lens)

Layouts and formulas are the catalog's (docs/ops.md, group llm): packed tokens, a paged cache
[num_blocks, block_size, num_kv_heads, head_dim], block tables [batch, max_blocks]. On the "hal"
device each op is its catalog op on the tensors' plugin (csrc/llm_ops.cc); a plugin without it runs
the CPU implementation below through the CPU fallback (counted in torch_hal.fallback_stats()). The
CPU implementations are plain PyTorch formulas, the reference the plugins are checked against; the
fake kernels give Dynamo the output shapes, so each op is one node in a torch.compile graph.

Bad input raises: shapes, dtypes and head counts as ValueError (naming the argument), and on the
hal device what only the data decides (a block id, slot, position or length out of range) as
IndexError, with nothing written.
"""
import torch
import torch.nn.functional as F

from . import _C  # noqa: F401  (defines the hal:: schemas)

OPS = ("rms_norm", "add_rms_norm", "apply_rotary_pos_emb", "silu_and_mul", "fill_kv_cache", "paged_decode_attention",
       "paged_prefill_attention", "prefill_attention", "moe_gating_topk_softmax", "fused_moe", "dynamic_quant",
       "linear_w8a16")


def _acc(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


def _index_check(name, arg, values, lo, hi):
    """IndexError naming ARG when an entry of VALUES is outside [lo, hi) (CPU side of the data checks)."""
    if values.numel() == 0:
        return
    bad = (values < lo) | (values >= hi)
    if bool(bad.any()):
        pos = int(bad.flatten().nonzero()[0])
        raise IndexError(f"torch.ops.hal.{name}: '{arg}' entry {int(values.flatten()[pos])} at position {pos} "
                         f"is out of range [{lo}, {hi})")


# ---- CPU reference implementations ----

def _rms_norm(input, weight, normalized_shape, eps=-1.0):
    acc = _acc(input.dtype)
    dims = tuple(range(input.dim() - len(normalized_shape), input.dim()))
    _check(list(input.shape[input.dim() - len(normalized_shape):]) == list(normalized_shape),
           f"torch.ops.hal.rms_norm: 'input' of shape {list(input.shape)} does not end in normalized_shape "
           f"{list(normalized_shape)}")
    x = input.to(acc)
    rstd = torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + (torch.finfo(input.dtype).eps if eps < 0 else eps))
    out = x * rstd
    if weight is not None:
        out = out * weight.to(acc)
    return out.to(input.dtype), rstd.to(input.dtype)


def _add_rms_norm(input, residual, weight, eps=1e-6):
    _check(input.shape == residual.shape, f"torch.ops.hal.add_rms_norm: 'residual' has shape "
           f"{list(residual.shape)} but 'input' has {list(input.shape)}")
    acc = _acc(input.dtype)
    s = (input.to(acc) + residual.to(acc)).to(input.dtype)
    x = s.to(acc)
    out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.to(acc)
    return out.to(input.dtype), s


def _rotate_(x, cos, sin, position_ids, interleaved):
    half = cos.shape[1]
    acc = _acc(x.dtype)
    c = cos.to(acc)[position_ids].unsqueeze(-2)
    s = sin.to(acc)[position_ids].unsqueeze(-2)
    xr = x[..., :2 * half].to(acc)
    a, b = (xr[..., 0::2], xr[..., 1::2]) if interleaved else (xr[..., :half], xr[..., half:])
    oa, ob = a * c - b * s, b * c + a * s
    out = torch.stack([oa, ob], -1).flatten(-2) if interleaved else torch.cat([oa, ob], -1)
    x[..., :2 * half].copy_(out)


def _apply_rotary_pos_emb(query, key, cos, sin, position_ids, interleaved=False):
    _index_check("apply_rotary_pos_emb", "position_ids", position_ids, 0, cos.shape[0])
    _rotate_(query, cos, sin, position_ids.long(), interleaved)
    _rotate_(key, cos, sin, position_ids.long(), interleaved)


def _silu_and_mul(input):
    _check(input.shape[-1] % 2 == 0, f"torch.ops.hal.silu_and_mul: 'input' of shape {list(input.shape)} "
           "must have an even last dim")
    n = input.shape[-1] // 2
    acc = _acc(input.dtype)
    return (F.silu(input[..., :n].to(acc)) * input[..., n:].to(acc)).to(input.dtype)


def _fill_kv_cache(key, value, key_cache, value_cache, slot_mapping):
    nb, bs = key_cache.shape[0], key_cache.shape[1]
    slots = slot_mapping.long()
    valid = slots != -1
    _index_check("fill_kv_cache", "slot_mapping", slots[valid], 0, nb * bs)
    slots = slots[valid]
    key_cache[slots // bs, slots % bs] = key[valid].to(key_cache.dtype)
    value_cache[slots // bs, slots % bs] = value[valid].to(value_cache.dtype)


def _gather_context(cache, table, length, block_size):
    """Positions [0, length) of one sequence from a paged cache: [length, Hk, D]."""
    blocks = (length + block_size - 1) // block_size
    _index_check("paged attention", "block_tables", table[:blocks], 0, cache.shape[0])
    return cache[table[:blocks].long()].flatten(0, 1)[:length]


def _attend(q, k, v, q_pos, scale, causal, window, slopes):
    """q [L, Hq, D] at positions q_pos [L] attends to k, v [S, Hk, D|Dv] at positions 0..S-1."""
    acc = _acc(q.dtype)
    hq, hk = q.shape[1], k.shape[1]
    k = k.to(acc).repeat_interleave(hq // hk, dim=1)
    v = v.to(acc).repeat_interleave(hq // hk, dim=1)
    s = torch.einsum("lhd,shd->hls", q.to(acc), k) * scale
    j = torch.arange(k.shape[0]).view(1, 1, -1)
    i = q_pos.view(1, -1, 1)
    if slopes is not None:
        s = s + slopes.to(acc).view(-1, 1, 1) * (j - i).to(acc)
    allowed = torch.ones_like(s, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if window > 0:
        allowed &= j > i - window
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)  # a row with nothing to attend is 0
    return torch.einsum("hls,shd->lhd", p, v).to(q.dtype)


def _scale(scale, d):
    return scale if scale != 0 else 1.0 / d ** 0.5


def _paged_decode_attention(query, key_cache, value_cache, block_tables, context_lens, alibi_slopes=None,
                            scale=0.0, sliding_window=0):
    bs = key_cache.shape[1]
    out = query.new_zeros(query.shape[0], query.shape[1], value_cache.shape[3])
    _index_check("paged_decode_attention", "context_lens", context_lens, 0, block_tables.shape[1] * bs + 1)
    for b in range(query.shape[0]):
        n = int(context_lens[b])
        if n == 0:
            continue
        k = _gather_context(key_cache, block_tables[b], n, bs)
        v = _gather_context(value_cache, block_tables[b], n, bs)
        out[b] = _attend(query[b:b + 1], k, v, torch.tensor([n - 1]), _scale(scale, query.shape[2]), True,
                         sliding_window, alibi_slopes)[0]
    return out


def _paged_prefill_attention(query, key_cache, value_cache, block_tables, query_start_loc, context_lens,
                             alibi_slopes=None, scale=0.0, causal=True, sliding_window=0):
    bs = key_cache.shape[1]
    out = query.new_zeros(query.shape[0], query.shape[1], value_cache.shape[3])
    _index_check("paged_prefill_attention", "context_lens", context_lens, 0, block_tables.shape[1] * bs + 1)
    for b in range(block_tables.shape[0]):
        s, e, n = int(query_start_loc[b]), int(query_start_loc[b + 1]), int(context_lens[b])
        if e - s > n:
            raise IndexError(f"torch.ops.hal.paged_prefill_attention: sequence {b} has {e - s} new tokens "
                             f"('query_start_loc') but 'context_lens' {n}")
        if e == s or n == 0:
            continue
        k = _gather_context(key_cache, block_tables[b], n, bs)
        v = _gather_context(value_cache, block_tables[b], n, bs)
        pos = torch.arange(n - (e - s), n)
        out[s:e] = _attend(query[s:e], k, v, pos, _scale(scale, query.shape[2]), causal, sliding_window,
                           alibi_slopes)
    return out


def _prefill_attention(query, key, value, cu_seqlens, alibi_slopes=None, scale=0.0, causal=True,
                       sliding_window=0):
    out = query.new_zeros(query.shape[0], query.shape[1], value.shape[2])
    cu = [int(x) for x in cu_seqlens]
    if cu[0] != 0 or cu[-1] != query.shape[0] or any(b < a for a, b in zip(cu, cu[1:])):
        raise IndexError(f"torch.ops.hal.prefill_attention: 'cu_seqlens' {cu} must start at 0, not decrease "
                         f"and end at {query.shape[0]}")
    for s, e in zip(cu, cu[1:]):
        if e > s:
            out[s:e] = _attend(query[s:e], key[s:e], value[s:e], torch.arange(e - s), _scale(scale, query.shape[2]),
                               causal, sliding_window, alibi_slopes)
    return out


def _moe_gating_topk_softmax(router_logits, top_k, renormalize=False):
    _check(1 <= top_k <= router_logits.shape[-1], f"torch.ops.hal.moe_gating_topk_softmax: 'top_k' = {top_k} "
           f"must be in [1, {router_logits.shape[-1]}]")
    p = torch.softmax(router_logits.to(_acc(router_logits.dtype)), -1)
    w, ids = torch.sort(p, -1, descending=True, stable=True)
    w, ids = w[:, :top_k], ids[:, :top_k]
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w.float(), ids


def _fused_moe(hidden_states, gate_up_weights, down_weights, topk_weights, topk_ids, renormalize=False):
    acc = _acc(hidden_states.dtype)
    e_count, inter = gate_up_weights.shape[0], gate_up_weights.shape[1] // 2
    _index_check("fused_moe", "topk_ids", topk_ids, 0, e_count)
    w = topk_weights.to(acc)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    out = torch.zeros(hidden_states.shape, dtype=acc)
    for e in topk_ids.unique().tolist():
        tok, j = (topk_ids == e).nonzero(as_tuple=True)
        gu = F.linear(hidden_states[tok], gate_up_weights[e])
        h = (F.silu(gu[:, :inter].to(acc)) * gu[:, inter:].to(acc)).to(hidden_states.dtype)
        y = F.linear(h, down_weights[e]).to(acc)
        out.index_add_(0, tok, y * w[tok, j].unsqueeze(-1))
    return out.to(hidden_states.dtype)


def _dynamic_quant(input):
    x = input.to(_acc(input.dtype))
    scale = (x.abs().amax(-1, keepdim=True) / 127).float()
    q = torch.where(scale > 0, torch.round(x / scale.to(x.dtype)), torch.zeros_like(x)).clamp(-127, 127)
    return q.to(torch.int8), scale


def _linear_w8a16(input, weight, scale, bias=None):
    acc = _acc(input.dtype)
    out = (input.to(acc) @ weight.to(acc).t()) * scale.reshape(-1).to(acc)
    if bias is not None:
        out = out + bias.to(acc)
    return out.to(input.dtype)


# ---- fake (meta) kernels: output shapes for Dynamo / FakeTensor ----

def _fake_rms_norm(input, weight, normalized_shape, eps=-1.0):
    rstd = [1 if d >= input.dim() - len(normalized_shape) else s for d, s in enumerate(input.shape)]
    return torch.empty_like(input), input.new_empty(rstd)


def _fake_add_rms_norm(input, residual, weight, eps=1e-6):
    return torch.empty_like(input), torch.empty_like(input)


def _fake_none(*args, **kwargs):
    return None


def _fake_silu_and_mul(input):
    return input.new_empty(*input.shape[:-1], input.shape[-1] // 2)


def _fake_decode(query, key_cache, value_cache, *args, **kwargs):
    return query.new_empty(query.shape[0], query.shape[1], value_cache.shape[3])


def _fake_prefill(query, key, value, *args, **kwargs):
    return query.new_empty(query.shape[0], query.shape[1], value.shape[-1])


def _fake_gating(router_logits, top_k, renormalize=False):
    t = router_logits.shape[0]
    return (router_logits.new_empty(t, top_k, dtype=torch.float32),
            router_logits.new_empty(t, top_k, dtype=torch.int64))


def _fake_fused_moe(hidden_states, *args, **kwargs):
    return torch.empty_like(hidden_states)


def _fake_dynamic_quant(input):
    return (input.new_empty(input.shape, dtype=torch.int8),
            input.new_empty(*input.shape[:-1], 1, dtype=torch.float32))


def _fake_linear_w8a16(input, weight, scale, bias=None):
    return input.new_empty(*input.shape[:-1], weight.shape[0])


_IMPLS = {
    "rms_norm": (_rms_norm, _fake_rms_norm),
    "add_rms_norm": (_add_rms_norm, _fake_add_rms_norm),
    "apply_rotary_pos_emb": (_apply_rotary_pos_emb, _fake_none),
    "silu_and_mul": (_silu_and_mul, _fake_silu_and_mul),
    "fill_kv_cache": (_fill_kv_cache, _fake_none),
    "paged_decode_attention": (_paged_decode_attention, _fake_decode),
    "paged_prefill_attention": (_paged_prefill_attention, _fake_decode),
    "prefill_attention": (_prefill_attention, _fake_prefill),
    "moe_gating_topk_softmax": (_moe_gating_topk_softmax, _fake_gating),
    "fused_moe": (_fused_moe, _fake_fused_moe),
    "dynamic_quant": (_dynamic_quant, _fake_dynamic_quant),
    "linear_w8a16": (_linear_w8a16, _fake_linear_w8a16),
}

_LIB = torch.library.Library("hal", "IMPL")  # noqa: the registrations live as long as the module
for _name, (_cpu, _fake) in _IMPLS.items():
    _LIB.impl(_name, _cpu, "CPU")
    torch.library.register_fake(f"hal::{_name}", _fake, lib=_LIB)

reference = {name: impl for name, (impl, _) in _IMPLS.items()}
"""The CPU implementations by op name (plain PyTorch formulas), for tests and comparisons."""
