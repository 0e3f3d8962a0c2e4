#!/usr/bin/env python3
"""LLM inference through the HAL (CPU plugin, torch.ops.hal) against PyTorch CPU, in the same run.

1. Decode tokens/s of framework_bridge/python/examples/llm_generate.py: the HAL engine (paged KV
   cache, fused catalog ops on the "hal" device) vs its PyTorch reference (contiguous cache, SDPA),
   the same weights and prompts, runs alternated, medians. Two sizes: the example's tiny model and
   a "small" one (hidden 1024, 4 layers, 16 heads of 64 over 4 kv heads, a batch of 8 prompts).
2. Memory-bound kernels as effective GB/s against the machine's copy bandwidth measured the same
   way (torch.Tensor.copy_ on 256 MiB, bytes read + written / time):
   - paged_decode_attention (B 8, Hq 32, Hk 8, D 128, context 2048, blocks of 16, float32):
     the K and V bytes the contexts cover / time;
   - add_rms_norm [4096, 4096] float32: 2 reads + 2 writes; rms_norm (torch.ops.hal.rms_norm): 1 + 1;
   - silu_and_mul [4096, 8192] -> [4096, 4096] float32: 1 read + 1 half-size write.
   Each with PyTorch CPU's time for the same result in plain ops, for reference.
3. One call of each attention op at the example model's decode / prefill sizes (µs, median), where
   fixed per-call costs (thread wake-ups, scratch) dominate.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=<build>/python python bench/llm_bench.py \\
        --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so [--threads N] [--json out.json] \\
        [--parts 2,3] [--rows rms_norm,silu_and_mul]
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
MiB = 1 << 20


def timed(fn, sync, reps):
    fn()
    sync()
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best.append(time.perf_counter() - t0)
    return statistics.median(best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", required=True, help="the CPU plugin .so")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3, help="alternated generation runs per side")
    ap.add_argument("--json")
    ap.add_argument("--parts", default="1,2,3", help="parts to run, comma-separated (1 generation, 2 kernels GB/s, 3 tiny calls)")
    ap.add_argument("--rows", help="part 2: only these kernels, comma-separated")
    ap.add_argument("--sizes", default="tiny,small", help="part 1: model sizes, comma-separated (tiny, small)")
    args = ap.parse_args()
    parts = {int(p) for p in args.parts.split(",")}
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    import torch.nn.functional as F

    import torch_hal

    torch.set_num_threads(args.threads)
    torch_hal.init(plugins=[args.plugin])
    spec = importlib.util.spec_from_file_location("llm_generate", REPO / "framework_bridge/python/examples/llm_generate.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules["llm_generate"] = gen
    spec.loader.exec_module(gen)
    sync = torch.hal.synchronize
    results = {"threads": args.threads}
    print(f"{args.threads} threads on both sides; torch {torch.__version__}")

    if 1 in parts:
        generation(args, torch, gen, results)
    if 2 in parts:
        kernels(torch, F, sync, results, set(args.rows.split(",")) if args.rows else None)
    if 3 in parts:
        tiny_calls(torch, sync, results)
    print(f"\nCPU fallbacks: {dict(torch_hal.fallback_stats()) or 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)



def generation(args, torch, gen, results):
    sizes = {
        "tiny": (gen.Config(), (3, 17, 40), 64),
        "small": (gen.Config(vocab=4096, hidden=1024, layers=4, heads=16, kv_heads=4, head_dim=64,
                             intermediate=2816, max_position=1024), (3, 17, 40, 64, 100, 128, 7, 250), 64),
    }
    print("\ndecode tokens/s (median of alternated runs)")
    print(f"{'model':14} {'hal':>10} {'PyTorch':>10} {'ratio':>7}  tokens identical")
    for model in ("dense", "moe"):
        for size, (cfg, lengths, new) in sizes.items():
            if size not in args.sizes.split(","):
                continue
            if model == "moe":
                cfg = gen.Config(**{**cfg.__dict__, "experts": 8, "intermediate": cfg.intermediate // 2})
            weights = gen.make_weights(cfg)
            prompts = gen.make_prompts(cfg, lengths)
            engine = gen.HalEngine(cfg, weights, num_blocks=(sum(lengths) + len(lengths) * new) // cfg.block_size
                                   + 4 * len(lengths))
            ref = gen.Reference(cfg, weights)
            hal_t, ref_t = [], []
            same = True
            for _ in range(args.runs):
                got = engine.generate(prompts, new, hal_t)
                want = ref.generate(prompts, new, ref_t)
                same = same and torch.equal(got, want)
            tokens = len(lengths) * (new - 1)
            h, r = tokens / statistics.median(hal_t), tokens / statistics.median(ref_t)
            name = f"{model}/{size}"
            print(f"{name:14} {h:10.1f} {r:10.1f} {h / r:6.2f}x  {same}")
            results[f"decode_{model}_{size}"] = {"hal_tok_s": h, "torch_tok_s": r, "ratio": h / r, "identical": same}


def kernels(torch, F, sync, results, wanted):
    src = torch.randn(64 * MiB)  # 256 MiB
    dst = torch.empty_like(src)
    copy_s = timed(lambda: dst.copy_(src), lambda: None, 7)
    bw = 2 * src.nbytes / copy_s / 1e9
    del src, dst
    print(f"\ncopy bandwidth (torch copy_ of 256 MiB, read + write): {bw:.1f} GB/s")
    results["copy_gb_s"] = bw
    print(f"{'kernel':26} {'hal GB/s':>9} {'of copy':>8} {'PyTorch ms':>11} {'hal ms':>8}")

    def row(name, nbytes, hal_fn, torch_fn):
        if wanted and name not in wanted:
            return
        h = timed(hal_fn, sync, 9)
        t = timed(torch_fn, lambda: None, 5)
        gbs = nbytes / h / 1e9
        print(f"{name:26} {gbs:9.1f} {gbs / bw:7.0%} {t * 1e3:11.2f} {h * 1e3:8.2f}")
        results[name] = {"hal_gb_s": gbs, "fraction_of_copy": gbs / bw, "hal_ms": h * 1e3, "torch_ms": t * 1e3}

    with torch.inference_mode():
        b, hq, hk, d, ctx, bs = 8, 32, 8, 128, 2048, 16
        nblocks = b * ctx // bs
        kc, vc = torch.randn(nblocks, bs, hk, d), torch.randn(nblocks, bs, hk, d)
        table = torch.randperm(nblocks).view(b, ctx // bs).int()
        lens = torch.full((b,), ctx, dtype=torch.int32)
        q = torch.randn(b, hq, d)
        hq_, kc_, vc_, table_, lens_ = (x.to("hal") for x in (q, kc, vc, table, lens))
        k_dense = kc[table.long()].flatten(1, 2).transpose(1, 2)  # [B, Hk, S, D] for the PyTorch side
        v_dense = vc[table.long()].flatten(1, 2).transpose(1, 2)
        row("paged_decode_attention", 2 * kc.nbytes,
            lambda: torch.ops.hal.paged_decode_attention(hq_, kc_, vc_, table_, lens_),
            lambda: F.scaled_dot_product_attention(q[:, :, None], k_dense, v_dense, enable_gqa=True))
        del kc_, vc_, k_dense, v_dense

        x, r, w = torch.randn(4096, 4096), torch.randn(4096, 4096), torch.randn(4096)
        x_, r_, w_ = x.to("hal"), r.to("hal"), w.to("hal")
        row("add_rms_norm", 4 * x.nbytes, lambda: torch.ops.hal.add_rms_norm(x_, r_, w_, 1e-6),
            lambda: F.rms_norm(x + r, (4096,), w, 1e-6))
        row("rms_norm", 2 * x.nbytes, lambda: torch.ops.hal.rms_norm(x_, w_, [4096], 1e-6),
            lambda: F.rms_norm(x, (4096,), w, 1e-6))
        del x_, r_
        g = torch.randn(4096, 8192)
        g_ = g.to("hal")
        row("silu_and_mul", g.nbytes * 3 // 2, lambda: torch.ops.hal.silu_and_mul(g_),
            lambda: F.silu(g[:, :4096]) * g[:, 4096:])


def tiny_calls(torch, sync, results):
    """Latency of one call at decode-step sizes of the tiny model, where fixed costs dominate."""
    print("\ntiny calls (the example model's sizes: 3 sequences, 8 query heads over 2 kv heads, D 16)")
    print(f"{'kernel':26} {'hal us':>8}")
    reps = 200
    with torch.inference_mode():
        b, hq, hk, d, bs, lens = 3, 8, 2, 16, 16, [60, 57, 63]
        mb = 4
        nblocks = b * mb
        kc, vc = torch.randn(nblocks, bs, hk, d), torch.randn(nblocks, bs, hk, d)
        table = torch.arange(nblocks, dtype=torch.int32).view(b, mb)
        ctx = torch.tensor(lens, dtype=torch.int32)
        q = torch.randn(b, hq, d)
        chunk = torch.randn(sum(lens), hq, d)
        kp, vp = torch.randn(sum(lens), hk, d), torch.randn(sum(lens), hk, d)
        cu = torch.tensor([0, lens[0], lens[0] + lens[1], sum(lens)], dtype=torch.int32)
        qs = torch.tensor([0, 5, 10, 15], dtype=torch.int32)
        pq = torch.randn(15, hq, d)
        h = {k: v.to("hal") for k, v in dict(q=q, kc=kc, vc=vc, table=table, ctx=ctx, chunk=chunk, kp=kp, vp=vp,
                                              cu=cu, qs=qs, pq=pq).items()}
        cases = {
            "paged_decode_attention": lambda: torch.ops.hal.paged_decode_attention(h["q"], h["kc"], h["vc"], h["table"],
                                                                                   h["ctx"]),
            "paged_prefill_attention": lambda: torch.ops.hal.paged_prefill_attention(h["pq"], h["kc"], h["vc"],
                                                                                     h["table"], h["qs"], h["ctx"]),
            "prefill_attention": lambda: torch.ops.hal.prefill_attention(h["chunk"], h["kp"], h["vp"], h["cu"]),
        }
        for name, fn in cases.items():
            t = timed(fn, sync, reps)
            print(f"{name:26} {t * 1e6:8.1f}")
            results[f"tiny_{name}"] = {"hal_us": t * 1e6}


if __name__ == "__main__":
    main()
