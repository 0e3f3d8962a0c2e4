#!/usr/bin/env python3
"""Greedy generation with a paged KV cache through the HAL, checked against plain PyTorch.

A tiny Llama-style decoder (grouped-query attention, rotary embeddings, RMSNorm, SwiGLU MLP) or its
Mixtral-style variant (a top-2 mixture of SwiGLU experts) with seeded random weights generates
--new-tokens tokens greedily for a batch of prompts of different lengths. The HAL engine runs every
step on the "hal" device (the plugin hal.toml selects) as an inference engine does: prompts are
prefilled in chunks (the first chunk through prefill_attention over packed variable-length
sequences, later ones through paged_prefill_attention over the cache), then all sequences decode
together through paged_decode_attention. Keys and values live in a paged cache managed by a small
block allocator that hands out blocks in shuffled order; the fused ops are torch.ops.hal.* (the op
catalog's llm group), the rest (embedding, linear, argmax) the eager device's catalog ops.

The reference is a straightforward PyTorch implementation on the CPU with the same weights: a
contiguous per-layer cache, rotate_half, repeated kv heads and scaled_dot_product_attention.

    PYTHONPATH=<build>/python python framework_bridge/python/examples/llm_generate.py [--model moe]

Prints both token streams' agreement, the CPU fallbacks taken (there should be none) and decode
tokens/s of both; exits non-zero when the token ids differ or an op fell back to the CPU.
"""
import argparse
import random
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import torch_hal


@dataclass
class Config:
    vocab: int = 512
    hidden: int = 128
    layers: int = 2
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 16
    intermediate: int = 256
    experts: int = 0          # 0: dense MLP; else a top_k mixture of this many experts
    top_k: int = 2
    max_position: int = 512
    rope_theta: float = 10000.0
    eps: float = 1e-6
    block_size: int = 16


def make_weights(cfg, seed=0):
    """Seeded random weights (float32, CPU), scaled so greedy decisions are far from ties."""
    g = torch.Generator().manual_seed(seed)

    def w(*shape, std=0.08):
        return torch.randn(*shape, generator=g) * std

    p = {"embed": w(cfg.vocab, cfg.hidden, std=1.0), "final_norm": 1 + w(cfg.hidden, std=0.1),
         "lm_head": w(cfg.vocab, cfg.hidden, std=0.3)}
    qkv = (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    for i in range(cfg.layers):
        p[f"{i}.attn_norm"] = 1 + w(cfg.hidden, std=0.1)
        p[f"{i}.qkv"] = w(qkv, cfg.hidden)
        p[f"{i}.o"] = w(cfg.hidden, cfg.heads * cfg.head_dim)
        p[f"{i}.mlp_norm"] = 1 + w(cfg.hidden, std=0.1)
        if cfg.experts:
            p[f"{i}.router"] = w(cfg.experts, cfg.hidden, std=0.3)
            p[f"{i}.w13"] = w(cfg.experts, 2 * cfg.intermediate, cfg.hidden)
            p[f"{i}.w2"] = w(cfg.experts, cfg.hidden, cfg.intermediate)
        else:
            p[f"{i}.gate_up"] = w(2 * cfg.intermediate, cfg.hidden)
            p[f"{i}.down"] = w(cfg.hidden, cfg.intermediate)
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = torch.arange(cfg.max_position, dtype=torch.float64)[:, None] * inv[None, :]
    p["cos"], p["sin"] = angles.cos().float(), angles.sin().float()  # [max_position, head_dim / 2]
    return p


def make_prompts(cfg, lengths, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab, (n,), generator=g) for n in lengths]


# ---- the HAL engine: packed tokens, paged KV cache, fused catalog ops ----

class BlockAllocator:
    """Free cache blocks, handed out in a shuffled order (so sequences' blocks are scattered)."""

    def __init__(self, num_blocks, seed=2):
        self.free = list(range(num_blocks))
        random.Random(seed).shuffle(self.free)

    def take(self):
        if not self.free:
            raise RuntimeError("the KV cache is full")
        return self.free.pop()

    def give_back(self, blocks):
        self.free.extend(blocks)


class Sequence:
    def __init__(self, prompt):
        self.prompt = prompt
        self.length = 0       # tokens whose keys/values are in the cache
        self.blocks = []      # block table


class HalEngine:
    def __init__(self, cfg, weights, device="hal", num_blocks=None, prefill_chunk=16):
        self.cfg, self.dev, self.chunk = cfg, torch.device(device), prefill_chunk
        self.w = {k: v.to(self.dev) for k, v in weights.items()}
        self.num_blocks = num_blocks or 4 * 1024 // cfg.block_size
        shape = (self.num_blocks, cfg.block_size, cfg.kv_heads, cfg.head_dim)
        self.k_cache = [torch.zeros(shape, device=self.dev) for _ in range(cfg.layers)]
        self.v_cache = [torch.zeros(shape, device=self.dev) for _ in range(cfg.layers)]
        self.alloc = BlockAllocator(self.num_blocks)

    # -- host-side bookkeeping (block tables, slots, positions), uploaded once per step --

    def _reserve(self, seq, new_tokens):
        bs = self.cfg.block_size
        while len(seq.blocks) * bs < seq.length + new_tokens:
            seq.blocks.append(self.alloc.take())

    def _slots(self, seq, start, count):
        bs = self.cfg.block_size
        return [seq.blocks[p // bs] * bs + p % bs for p in range(start, start + count)]

    def _table(self, seqs):
        width = max(len(s.blocks) for s in seqs)
        # Unused entries are -1: the ops read only the blocks a context length covers.
        return [b for s in seqs for b in s.blocks + [-1] * (width - len(s.blocks))], width

    def _upload(self, *lists):
        """The step's integer inputs (lists) in one host-to-device copy: int64 views of one tensor."""
        packed = torch.tensor([v for values in lists for v in values]).to(self.dev)
        views, at = [], 0
        for values in lists:
            views.append(packed[at:at + len(values)])
            at += len(values)
        return views

    # -- the model --

    def _layers(self, x, positions, slots, attend):
        cfg, w = self.cfg, self.w
        t = x.shape[0]
        qd, kd = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        residual = x
        h, _ = torch.ops.hal.rms_norm(x, w["0.attn_norm"], [cfg.hidden], cfg.eps)
        for i in range(cfg.layers):
            if i > 0:
                h, residual = torch.ops.hal.add_rms_norm(m, residual, w[f"{i}.attn_norm"], cfg.eps)
            qkv = F.linear(h, w[f"{i}.qkv"])
            q = qkv[:, :qd].view(t, cfg.heads, cfg.head_dim)            # strided views of the projection
            k = qkv[:, qd:qd + kd].view(t, cfg.kv_heads, cfg.head_dim)
            v = qkv[:, qd + kd:].view(t, cfg.kv_heads, cfg.head_dim)
            torch.ops.hal.apply_rotary_pos_emb(q, k, w["cos"], w["sin"], positions)
            torch.ops.hal.fill_kv_cache(k, v, self.k_cache[i], self.v_cache[i], slots)
            a = attend(q, k, v, self.k_cache[i], self.v_cache[i])
            o = F.linear(a.view(t, qd), w[f"{i}.o"])
            h, residual = torch.ops.hal.add_rms_norm(o, residual, w[f"{i}.mlp_norm"], cfg.eps)
            if cfg.experts:
                logits = F.linear(h, w[f"{i}.router"])
                tw, ids = torch.ops.hal.moe_gating_topk_softmax(logits, cfg.top_k, True)
                m = torch.ops.hal.fused_moe(h, w[f"{i}.w13"], w[f"{i}.w2"], tw, ids, False)
            else:
                m = F.linear(torch.ops.hal.silu_and_mul(F.linear(h, w[f"{i}.gate_up"])), w[f"{i}.down"])
        h, _ = torch.ops.hal.add_rms_norm(m, residual, w["final_norm"], cfg.eps)
        return h

    def _logits_last(self, h, last_rows):
        return F.linear(h.index_select(0, last_rows), self.w["lm_head"])

    def prefill(self, seqs):
        """Prompts in chunks of self.chunk tokens; returns each sequence's first generated token."""
        first = [None] * len(seqs)
        while True:
            active = [(i, s) for i, s in enumerate(seqs) if s.length < len(s.prompt)]
            if not active:
                break
            fresh = all(s.length == 0 for _, s in active)
            ids, pos, slots, starts, lens, last = [], [], [], [0], [], []
            for _, s in active:
                n = min(self.chunk, len(s.prompt) - s.length)
                self._reserve(s, n)
                ids += s.prompt[s.length:s.length + n].tolist()
                pos += list(range(s.length, s.length + n))
                slots += self._slots(s, s.length, n)
                starts.append(starts[-1] + n)
                lens.append(s.length + n)
                last.append(starts[-1] - 1)
            table, width = self._table([s for _, s in active])
            ids_t, pos_t, slots_t, starts_t, lens_t, last_t, table = self._upload(ids, pos, slots, starts, lens, last,
                                                                                 table)
            table = table.view(len(active), width)

            def attend(q, k, v, kc, vc):
                if fresh:  # nothing cached before this chunk: attention over the packed chunk itself
                    return torch.ops.hal.prefill_attention(q, k, v, starts_t)
                return torch.ops.hal.paged_prefill_attention(q, kc, vc, table, starts_t, lens_t)

            h = self._layers(F.embedding(ids_t, self.w["embed"]), pos_t, slots_t, attend)
            nxt = self._logits_last(h, last_t).argmax(-1)
            for j, (i, s) in enumerate(active):
                s.length = lens[j]
                if s.length == len(s.prompt):
                    first[i] = nxt[j:j + 1]
        return torch.cat(first)

    def decode_step(self, seqs, tokens):
        """One token per sequence (TOKENS on the device, the previous step's output)."""
        pos, slots = [], []
        for s in seqs:
            self._reserve(s, 1)
            pos.append(s.length)
            slots += self._slots(s, s.length, 1)
            s.length += 1
        table, width = self._table(seqs)
        pos_t, slots_t, lens_t, table = self._upload(pos, slots, [s.length for s in seqs], table)
        table = table.view(len(seqs), width)

        def attend(q, k, v, kc, vc):
            return torch.ops.hal.paged_decode_attention(q, kc, vc, table, lens_t)

        h = self._layers(F.embedding(tokens, self.w["embed"]), pos_t, slots_t, attend)
        return F.linear(h, self.w["lm_head"]).argmax(-1)

    def generate(self, prompts, new_tokens, timings=None):
        seqs = [Sequence(p) for p in prompts]
        with torch.inference_mode():
            tok = self.prefill(seqs)
            out = [tok]
            torch.hal.synchronize()
            t0 = time.perf_counter()
            for _ in range(new_tokens - 1):
                tok = self.decode_step(seqs, tok)
                out.append(tok)
            result = torch.stack(out, 1).cpu()
            if timings is not None:
                timings.append(time.perf_counter() - t0)
        for s in seqs:
            self.alloc.give_back(s.blocks)
        return result


# ---- the reference: plain PyTorch on the CPU, contiguous cache, SDPA ----

def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat([-b, a], -1)


class Reference:
    def __init__(self, cfg, weights):
        self.cfg, self.w = cfg, weights

    def rms_norm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * weight

    def mlp(self, i, h):
        cfg, w = self.cfg, self.w
        if not cfg.experts:
            g, u = F.linear(h, w[f"{i}.gate_up"]).chunk(2, -1)
            return F.linear(F.silu(g) * u, w[f"{i}.down"])
        flat = h.reshape(-1, cfg.hidden)
        probs = torch.softmax(F.linear(flat, w[f"{i}.router"]), -1)
        weight, chosen = torch.topk(probs, cfg.top_k, -1)
        weight = weight / weight.sum(-1, keepdim=True)
        out = torch.zeros_like(flat)
        for e in range(cfg.experts):
            tok, j = (chosen == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            g, u = F.linear(flat[tok], w[f"{i}.w13"][e]).chunk(2, -1)
            out.index_add_(0, tok, F.linear(F.silu(g) * u, w[f"{i}.w2"][e]) * weight[tok, j, None])
        return out.view_as(h)

    def forward(self, ids, pos, cache, mask):
        """ids, pos [B, L]; cache: per layer [k, v] of [B, Hk, S, D] (written at pos); mask [B, 1, L, S]."""
        cfg, w = self.cfg, self.w
        b, n = ids.shape
        x = F.embedding(ids, w["embed"])
        cos, sin = w["cos"][pos].repeat(1, 1, 2)[:, None], w["sin"][pos].repeat(1, 1, 2)[:, None]
        rows = torch.arange(b)[:, None]
        for i in range(cfg.layers):
            h = self.rms_norm(x, w[f"{i}.attn_norm"])
            q, k, v = F.linear(h, w[f"{i}.qkv"]).split(
                [cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim], -1)
            q = q.view(b, n, cfg.heads, cfg.head_dim).transpose(1, 2)
            k = k.view(b, n, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
            v = v.view(b, n, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            kc, vc = cache[i]
            kc[rows, :, pos] = k.transpose(1, 2)
            vc[rows, :, pos] = v.transpose(1, 2)
            rep = cfg.heads // cfg.kv_heads
            a = F.scaled_dot_product_attention(q, kc.repeat_interleave(rep, 1), vc.repeat_interleave(rep, 1),
                                               attn_mask=mask)
            x = x + F.linear(a.transpose(1, 2).reshape(b, n, -1), w[f"{i}.o"])
            x = x + self.mlp(i, self.rms_norm(x, w[f"{i}.mlp_norm"]))
        return F.linear(self.rms_norm(x, w["final_norm"]), w["lm_head"])

    def generate(self, prompts, new_tokens, timings=None):
        cfg = self.cfg
        b, cap = len(prompts), max(len(p) for p in prompts) + new_tokens
        with torch.inference_mode():
            cache = [[torch.zeros(b, cfg.kv_heads, cap, cfg.head_dim) for _ in range(2)] for _ in range(cfg.layers)]
            lens = torch.tensor([len(p) for p in prompts])
            tok = torch.empty(b, dtype=torch.long)
            for s, p in enumerate(prompts):  # prefill each prompt into its row of the cache
                n = len(p)
                one = [[c[s:s + 1] for c in layer] for layer in cache]
                causal = torch.ones(n, cap, dtype=torch.bool).tril()[None, None]
                logits = self.forward(p[None], torch.arange(n)[None], one, causal)
                tok[s] = logits[0, -1].argmax()
            out = [tok]
            t0 = time.perf_counter()
            for _ in range(new_tokens - 1):
                pos = lens[:, None]
                mask = (torch.arange(cap)[None, :] <= pos)[:, None, None, :]
                tok = self.forward(tok[:, None], pos, cache, mask)[:, -1].argmax(-1)
                lens = lens + 1
                out.append(tok)
            if timings is not None:
                timings.append(time.perf_counter() - t0)
        return torch.stack(out, 1)


def run(model="dense", lengths=(3, 17, 40), new_tokens=64, seed=0):
    """Both implementations on the same weights and prompts: (hal_tokens, ref_tokens, hal_s, ref_s)."""
    cfg = Config(experts=4 if model == "moe" else 0)
    weights = make_weights(cfg, seed)
    prompts = make_prompts(cfg, lengths, seed + 1)
    engine, ref = HalEngine(cfg, weights), Reference(cfg, weights)
    engine.generate(prompts, 4)  # warm-up: first-call costs (kernel set-up, allocator) stay out of the timing
    ref.generate(prompts, 4)
    hal_t, ref_t = [], []
    got = engine.generate(prompts, new_tokens, hal_t)
    want = ref.generate(prompts, new_tokens, ref_t)
    return got, want, hal_t[0], ref_t[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["dense", "moe"], default="dense")
    ap.add_argument("--lengths", type=int, nargs="+", default=[3, 17, 40], help="prompt lengths")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch_hal.reset_fallback_stats()
    got, want, hal_s, ref_s = run(args.model, args.lengths, args.new_tokens, args.seed)
    fallbacks = dict(torch_hal.fallback_stats())
    props = torch.hal.get_device_properties(0)
    steps = args.new_tokens - 1
    print(f"model {args.model}, prompts {args.lengths}, {args.new_tokens} new tokens on hal:0 ({props})")
    print(f"decode tokens/s (one run after a warm-up; bench/llm_bench.py measures): hal "
          f"{len(args.lengths) * steps / hal_s:.1f}, PyTorch reference {len(args.lengths) * steps / ref_s:.1f}")
    print(f"CPU fallbacks: {fallbacks or 'none'}")
    same = torch.equal(got, want)
    for i, n in enumerate(args.lengths):
        print(f"  prompt of {n}: {'identical' if torch.equal(got[i], want[i]) else 'DIFFERENT'} "
              f"{got[i][:12].tolist()}...")
    if not same:
        diff = (got != want).nonzero()
        print(f"token ids differ first at (prompt, step) {diff[0].tolist()}", file=sys.stderr)
        return 1
    if fallbacks:
        print("some ops ran on the CPU fallback", file=sys.stderr)
        return 1
    print("token ids identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
