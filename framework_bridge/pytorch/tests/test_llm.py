"""torch.ops.hal.<op> (the catalog's llm group) on the "hal" device against PyTorch formulas written
here, their bad inputs, the CPU fallback, Dynamo graphs, and the paged-KV-cache generation loop
(framework_bridge/python/examples/llm_generate.py) against its PyTorch reference on the CPU and
OpenCL plugins."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_hal

REPO = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "framework_bridge" / "python" / "examples" / "llm_generate.py"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.float16: dict(atol=4e-3, rtol=4e-3),
       torch.bfloat16: dict(atol=3e-2, rtol=3e-2), torch.float64: dict(atol=1e-10, rtol=1e-10)}


def hal(t):
    return None if t is None else t.to("hal")


def close(got, want, dtype):
    torch.testing.assert_close(got.cpu().float(), want.float(), **TOL[dtype])


def gen(seed):
    return torch.Generator().manual_seed(seed)


# ---- a paged cache scenario: 3 sequences, shuffled blocks, tables with unused (garbage) entries ----

class Paged:
    def __init__(self, dtype, lengths=(5, 16, 23), hq=8, hk=2, d=16, block=4, blocks=40, seed=0):
        g = gen(seed)
        self.lengths, self.block, self.hq, self.hk, self.d = list(lengths), block, hq, hk, d
        self.k_cache = torch.randn(blocks, block, hk, d, generator=g).to(dtype)
        self.v_cache = torch.randn(blocks, block, hk, d, generator=g).to(dtype)
        order = torch.randperm(blocks, generator=g).tolist()
        width = max((n + block - 1) // block for n in lengths) + 2
        rows = []
        for n in lengths:
            used = [order.pop() for _ in range((n + block - 1) // block)]
            rows.append(used + [-1, 10 ** 6][: width - len(used)] + [-7] * max(0, width - len(used) - 2))
        self.table = torch.tensor(rows, dtype=torch.int32)
        self.lens = torch.tensor(lengths, dtype=torch.int32)

    def contiguous(self, b):
        """Sequence b's keys and values [len, Hk, D], gathered position by position."""
        n = self.lengths[b]
        blocks = [int(self.table[b, p // self.block]) for p in range(n)]
        k = torch.stack([self.k_cache[blk, p % self.block] for p, blk in zip(range(n), blocks)]) if n else None
        v = torch.stack([self.v_cache[blk, p % self.block] for p, blk in zip(range(n), blocks)]) if n else None
        return k, v


def sdpa(q, k, v, positions, causal=True, window=0, slopes=None, scale=None):
    """q [L, Hq, D] at POSITIONS over k, v [S, Hk, D] with F.scaled_dot_product_attention (float64)."""
    hq, hk = q.shape[1], k.shape[1]
    q64, k64, v64 = (x.double().transpose(0, 1) for x in (q, k, v))
    k64, v64 = k64.repeat_interleave(hq // hk, 0), v64.repeat_interleave(hq // hk, 0)
    j = torch.arange(k.shape[0])[None, :]
    i = positions[:, None]
    mask = torch.zeros(q.shape[0], k.shape[0], dtype=torch.float64)
    if causal:
        mask.masked_fill_(j > i, float("-inf"))
    if window:
        mask.masked_fill_(j <= i - window, float("-inf"))
    mask = mask[None].repeat(hq, 1, 1)
    if slopes is not None:
        mask = mask + slopes.double()[:, None, None] * (j - i)[None].double()
    out = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=scale)
    return out.transpose(0, 1)


# ---- each op against PyTorch formulas ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rms_norm_matches_add_then_rms_norm_and_works_in_place(dtype):
    g = gen(1)
    x, r = torch.randn(5, 96, generator=g).to(dtype), torch.randn(5, 96, generator=g).to(dtype)
    w = torch.randn(96, generator=g).to(dtype)
    s = (x.float() + r.float()).to(dtype)
    want = F.rms_norm(s.float(), (96,), w.float(), 1e-5)
    out, res = torch.ops.hal.add_rms_norm(hal(x), hal(r), hal(w), 1e-5)
    close(out, want, dtype)
    assert torch.equal(res.cpu(), s)
    xh, rh = hal(x), hal(r)
    torch.ops.hal.add_rms_norm.default(xh, rh, hal(w), 1e-5)  # functional: the inputs stay unchanged
    assert torch.equal(xh.cpu(), x) and torch.equal(rh.cpu(), r)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_is_the_fused_catalog_op_with_rstd(dtype):
    x, w = torch.randn(3, 4, 80, generator=gen(12)).to(dtype), torch.randn(80, generator=gen(13)).to(dtype)
    out, rstd = torch.ops.hal.rms_norm(hal(x), hal(w), [80], 1e-5)
    close(out, F.rms_norm(x.double(), (80,), w.double(), 1e-5), dtype)
    close(rstd, torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5), dtype)
    out, _ = torch.ops.hal.rms_norm(hal(x), None, [4, 80])  # no weight, eps = the dtype's machine epsilon
    close(out, F.rms_norm(x.double(), (4, 80), eps=torch.finfo(dtype).eps), dtype)


def complex_rotary(x, cos, sin, interleaved):
    """Rotation as complex multiplication by e^{iθ} (a formula independent of the kernels')."""
    half = cos.shape[-1]
    xr = x[..., :2 * half].double()
    pairs = xr.unflatten(-1, (half, 2)) if interleaved else torch.stack([xr[..., :half], xr[..., half:]], -1)
    z = torch.view_as_complex(pairs.contiguous()) * torch.polar(torch.ones_like(cos.double()), torch.atan2(sin.double(), cos.double()))
    rot = torch.view_as_real(z)
    rot = rot.flatten(-2) if interleaved else torch.cat([rot[..., 0], rot[..., 1]], -1)
    return torch.cat([rot, x[..., 2 * half:].double()], -1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rotary_pos_emb_rotates_strided_views_of_one_projection_in_place(dtype, interleaved):
    g = gen(2)
    t, hq, hk, d, rot = 7, 4, 2, 16, 12  # partial rotary: 12 of 16 dims
    qkv = torch.randn(t, (hq + 2 * hk) * d, generator=g).to(dtype)
    angles = torch.rand(64, rot // 2, generator=g) * 6
    cos, sin = angles.cos(), angles.sin()
    pos = torch.tensor([0, 5, 63, 2, 2, 9, 31])
    qkv_h = hal(qkv)
    q = qkv_h[:, :hq * d].view(t, hq, d)
    k = qkv_h[:, hq * d:(hq + hk) * d].view(t, hk, d)
    torch.ops.hal.apply_rotary_pos_emb(q, k, hal(cos), hal(sin), hal(pos), interleaved)
    c, s = cos[pos][:, None], sin[pos][:, None]
    want_q = complex_rotary(qkv[:, :hq * d].view(t, hq, d), c, s, interleaved)
    want_k = complex_rotary(qkv[:, hq * d:(hq + hk) * d].view(t, hk, d), c, s, interleaved)
    got = qkv_h.cpu()
    close(got[:, :hq * d].view(t, hq, d), want_q, dtype)
    close(got[:, hq * d:(hq + hk) * d].view(t, hk, d), want_k, dtype)
    assert torch.equal(got[:, (hq + hk) * d:], qkv[:, (hq + hk) * d:])  # v untouched


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_is_silu_of_the_first_half_times_the_second(dtype):
    x = torch.randn(3, 5, 64, generator=gen(3)).to(dtype)
    a, b = x.double().chunk(2, -1)
    close(torch.ops.hal.silu_and_mul(hal(x)), F.silu(a) * b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_kv_cache_writes_the_named_slots_in_place_and_skips_padding(dtype):
    p = Paged(dtype)
    g = gen(4)
    k, v = torch.randn(4, p.hk, p.d, generator=g).to(dtype), torch.randn(4, p.hk, p.d, generator=g).to(dtype)
    slots = torch.tensor([17, -1, 3, 159])
    kc, vc = hal(p.k_cache), hal(p.v_cache)
    torch.ops.hal.fill_kv_cache(hal(k), hal(v), kc, vc, hal(slots))
    want_k, want_v = p.k_cache.clone(), p.v_cache.clone()
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            want_k[s // p.block, s % p.block] = k[t]
            want_v[s // p.block, s % p.block] = v[t]
    assert torch.equal(kc.cpu(), want_k) and torch.equal(vc.cpu(), want_v)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hk", [8, 2, 1])  # GQA ratios 1, 4, 8
def test_paged_decode_attention_matches_sdpa_over_the_gathered_context(dtype, hk):
    p = Paged(dtype, lengths=(5, 16, 23, 0), hk=hk)
    q = torch.randn(4, p.hq, p.d, generator=gen(5)).to(dtype)
    got = torch.ops.hal.paged_decode_attention(hal(q), hal(p.k_cache), hal(p.v_cache), hal(p.table), hal(p.lens))
    for b, n in enumerate(p.lengths):
        if n == 0:
            assert torch.count_nonzero(got[b].cpu()) == 0
            continue
        k, v = p.contiguous(b)
        close(got[b:b + 1], sdpa(q[b:b + 1], k, v, torch.tensor([n - 1])), dtype)


def test_paged_decode_attention_alibi_and_sliding_window():
    p = Paged(torch.float32, hk=2)
    q = torch.randn(3, p.hq, p.d, generator=gen(6))
    slopes = torch.tensor([2.0 ** -(i + 1) for i in range(p.hq)])
    got = torch.ops.hal.paged_decode_attention(hal(q), hal(p.k_cache), hal(p.v_cache), hal(p.table), hal(p.lens),
                                               hal(slopes), 0.3, 6)
    for b, n in enumerate(p.lengths):
        k, v = p.contiguous(b)
        close(got[b:b + 1], sdpa(q[b:b + 1], k, v, torch.tensor([n - 1]), window=6, slopes=slopes, scale=0.3),
              torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [True, False])
def test_paged_prefill_attention_new_tokens_attend_to_cached_context(dtype, causal):
    p = Paged(dtype)
    new = [2, 16, 1]  # the last new tokens of each sequence's context
    starts = torch.tensor([0, 2, 18, 19], dtype=torch.int32)
    q = torch.randn(19, p.hq, p.d, generator=gen(7)).to(dtype)
    got = torch.ops.hal.paged_prefill_attention(hal(q), hal(p.k_cache), hal(p.v_cache), hal(p.table), hal(starts),
                                                hal(p.lens), None, 0.0, causal)
    for b, (n, m) in enumerate(zip(p.lengths, new)):
        k, v = p.contiguous(b)
        s = int(starts[b])
        close(got[s:s + m], sdpa(q[s:s + m], k, v, torch.arange(n - m, n), causal=causal), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefill_attention_over_packed_variable_length_sequences(dtype):
    g = gen(8)
    cu = torch.tensor([0, 3, 3, 20, 40], dtype=torch.int32)
    q = torch.randn(40, 8, 16, generator=g).to(dtype)
    k, v = torch.randn(40, 2, 16, generator=g).to(dtype), torch.randn(40, 2, 16, generator=g).to(dtype)
    got = torch.ops.hal.prefill_attention(hal(q), hal(k), hal(v), hal(cu))
    for s, e in zip(cu.tolist(), cu.tolist()[1:]):
        if e > s:
            close(got[s:e], sdpa(q[s:e], k[s:e], v[s:e], torch.arange(e - s)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_moe_gating_topk_softmax_and_fused_moe_match_a_mixtral_block(dtype):
    g = gen(9)
    t, h, inter, e = 6, 32, 48, 4
    x = torch.randn(t, h, generator=g).to(dtype)
    router = torch.randn(e, h, generator=g).to(dtype)
    w13 = (torch.randn(e, 2 * inter, h, generator=g) * 0.2).to(dtype)
    w2 = (torch.randn(e, h, inter, generator=g) * 0.2).to(dtype)
    logits = F.linear(x, router)
    w, ids = torch.ops.hal.moe_gating_topk_softmax(hal(logits), 2, True)
    probs = torch.softmax(logits.double(), -1)
    want_w, want_ids = torch.topk(probs, 2, -1)
    want_w = want_w / want_w.sum(-1, keepdim=True)
    assert torch.equal(ids.cpu(), want_ids) and w.dtype == torch.float32
    close(w, want_w, torch.float32 if dtype == torch.float32 else dtype)
    out = torch.ops.hal.fused_moe(hal(x), hal(w13), hal(w2), w, ids, False)
    want = torch.zeros(t, h, dtype=torch.float64)
    for ti in range(t):
        for j in range(2):
            ex = int(want_ids[ti, j])
            gate, up = (w13[ex].double() @ x[ti].double()).chunk(2)
            want[ti] += want_w[ti, j] * (w2[ex].double() @ (F.silu(gate) * up))
    close(out, want, dtype) if dtype == torch.float32 else torch.testing.assert_close(
        out.cpu().double(), want, atol=6e-2, rtol=6e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_quant_and_linear_w8a16_reproduce_a_float_linear(dtype):
    g = gen(10)
    x, weight = torch.randn(5, 64, generator=g).to(dtype), torch.randn(24, 64, generator=g)
    weight[3] = 0  # an all-zero channel: scale 0
    bias = torch.randn(24, generator=g).to(dtype)
    q, scale = torch.ops.hal.dynamic_quant(hal(weight))
    amax = weight.abs().amax(-1, keepdim=True)
    assert q.dtype == torch.int8 and scale.shape == (24, 1)
    torch.testing.assert_close(scale.cpu(), amax / 127)
    assert int(q[3].abs().max()) == 0 and int(q.abs().max()) == 127
    assert ((q.cpu().float() * scale.cpu()) - weight).abs().max() <= float(amax.max()) / 127
    out = torch.ops.hal.linear_w8a16(hal(x), q, scale, hal(bias))
    want = x.double() @ (q.cpu().double() * scale.cpu().double()).t() + bias.double()
    close(out, want, dtype)


# ---- bad input: clear errors naming the argument, nothing written ----

def test_bad_inputs_raise_naming_the_argument_and_leave_outputs_untouched():
    p = Paged(torch.float32)
    q = hal(torch.randn(3, p.hq, p.d))
    kc, vc = hal(p.k_cache), hal(p.v_cache)
    table, lens = p.table.clone(), hal(p.lens)
    table[1, 0] = 40  # a used entry past the 40 blocks
    with pytest.raises(IndexError, match="block_tables"):
        torch.ops.hal.paged_decode_attention(q, kc, vc, hal(table), lens)
    too_long = p.lens.clone()
    too_long[0] = p.table.shape[1] * p.block + 1
    with pytest.raises(IndexError, match="context_lens"):
        torch.ops.hal.paged_decode_attention(q, kc, vc, hal(p.table), hal(too_long))
    with pytest.raises(ValueError, match="kv heads"):
        torch.ops.hal.paged_decode_attention(hal(torch.randn(3, 6, p.d)), hal(torch.randn(40, 4, 4, p.d)),
                                             hal(torch.randn(40, 4, 4, p.d)), hal(p.table), lens)
    with pytest.raises(ValueError, match="key_cache"):
        torch.ops.hal.paged_decode_attention(q, kc.half(), vc.half(), hal(p.table), lens)
    k = hal(torch.randn(2, p.hk, p.d))
    with pytest.raises(IndexError, match="slot_mapping"):
        torch.ops.hal.fill_kv_cache(k, k, kc, vc, hal(torch.tensor([3, 40 * p.block])))
    assert torch.equal(kc.cpu(), p.k_cache) and torch.equal(vc.cpu(), p.v_cache)  # the valid slot 3 unwritten too
    with pytest.raises(ValueError, match="top_k"):
        torch.ops.hal.moe_gating_topk_softmax(hal(torch.randn(3, 4)), 5)
    with pytest.raises(IndexError, match="position_ids"):
        torch.ops.hal.apply_rotary_pos_emb(q, hal(torch.randn(3, p.hk, p.d)), hal(torch.ones(8, 8)),
                                           hal(torch.zeros(8, 8)), hal(torch.tensor([0, 8, 1])))
    with pytest.raises(ValueError, match="'position_ids' is on cpu"):
        torch.ops.hal.apply_rotary_pos_emb(q, hal(torch.randn(3, p.hk, p.d)), hal(torch.ones(8, 8)),
                                           hal(torch.zeros(8, 8)), torch.tensor([0, 1, 1]))


# ---- the CPU fallback and Dynamo ----

def test_a_forced_fallback_runs_the_cpu_reference_and_is_counted(monkeypatch):
    x = torch.randn(4, 32)
    monkeypatch.setenv("HAL_FORCE_FALLBACK_OPS", "hal::silu_and_mul")
    torch_hal.reset_fallback_stats()
    got = torch.ops.hal.silu_and_mul(hal(x))
    assert got.device.type == "hal"
    assert dict(torch_hal.fallback_stats()) == {"hal::silu_and_mul": 1}
    close(got, F.silu(x[:, :16]) * x[:, 16:], torch.float32)


def test_the_ops_are_single_nodes_of_dynamo_graphs_for_the_hal_backend():
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return torch_hal.compile_backend(gm, example_inputs)

    def mlp_block(x, r, w, up):
        h, r2 = torch.ops.hal.add_rms_norm(x, r, w, 1e-6)
        return torch.ops.hal.silu_and_mul(F.linear(h, up)), r2

    g = gen(11)
    args = [torch.randn(4, 32, generator=g), torch.randn(4, 32, generator=g), torch.randn(32, generator=g),
            torch.randn(64, 32, generator=g)]
    torch._dynamo.reset()
    torch_hal.dynamo.reset_stats()
    got = torch.compile(mlp_block, backend=capture)(*map(hal, args))
    want = mlp_block(*args)
    for a, b in zip(got, want):
        close(a, b, torch.float32)
    targets = [n.target for gm in graphs for n in gm.graph.nodes if n.op == "call_function"]
    for op in (torch.ops.hal.add_rms_norm, torch.ops.hal.silu_and_mul):  # one node each (packet or overload)
        assert sum(t in (op, op.default) for t in targets) == 1, targets
    # ... lowered into the HAL graph as their catalog ops (graph mode), nothing eager but a weight view
    stats = torch_hal.dynamo.stats()
    assert stats["segments"] == 1 and stats["lowered_nodes"] >= 3, stats  # add_rms_norm, the linear, silu_and_mul
    assert set(stats["eager_reasons"]) <= {"view of a graph input (free in eager)"}, stats["eager_reasons"]


def test_in_place_ops_in_a_compiled_function_write_their_arguments():
    def step(k, v, kc, vc, slots, q, cos, sin, pos):
        torch.ops.hal.apply_rotary_pos_emb(q, k, cos, sin, pos)
        torch.ops.hal.fill_kv_cache(k, v, kc, vc, slots)
        return q * 2

    g = gen(14)
    args = [torch.randn(2, 2, 8, generator=g), torch.randn(2, 2, 8, generator=g), torch.zeros(4, 4, 2, 8),
            torch.zeros(4, 4, 2, 8), torch.tensor([5, 9]), torch.randn(2, 4, 8, generator=g),
            torch.rand(16, 4, generator=g), torch.rand(16, 4, generator=g), torch.tensor([1, 3])]
    on_hal = [hal(a) for a in args]
    torch._dynamo.reset()
    got = torch.compile(step, backend="hal")(*on_hal)
    want = step(*args)  # the CPU references, in place on ARGS
    close(got, want, torch.float32)
    for name, h, c in zip(("k", "v", "key_cache", "value_cache", "slots", "q"), on_hal, args):
        torch.testing.assert_close(h.cpu(), c, msg=name)


# ---- the generation loop ----

def load_example():
    spec = importlib.util.spec_from_file_location("llm_generate", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llm_generate"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("model", ["dense", "moe"])
def test_generation_on_the_cpu_plugin_gives_the_reference_tokens_without_fallbacks(model):
    torch_hal.reset_fallback_stats()
    got, want, _, _ = load_example().run(model, (3, 17, 40), 64)
    assert got.shape == (3, 64)
    assert torch.equal(got, want), (got != want).nonzero()[:5]
    assert dict(torch_hal.fallback_stats()) == {}


@pytest.mark.parametrize("model", ["dense", "moe"])
def test_generation_on_the_opencl_plugin_chosen_by_hal_toml(tmp_path, model):
    plugin = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so"
    config = tmp_path / "opencl.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\nname = "opencl"\npath = "{plugin}"\n')
    env = dict(os.environ, HAL_CONFIG=str(config), HAL_FALLBACK_WARN="0")
    p = subprocess.run([sys.executable, str(EXAMPLE), "--model", model], env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "plugin='opencl'" in p.stdout and "token ids identical" in p.stdout and "CPU fallbacks: none" in p.stdout
