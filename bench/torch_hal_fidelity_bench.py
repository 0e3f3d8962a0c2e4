#!/usr/bin/env python3
"""Issue 32's benchmarks: the "hal" device (CPU plugin) against PyTorch CPU, same process, same run.

1. LSTM language-model training step (embedding -> 2-layer LSTM -> linear, SGD), and the same with a
   GRU: hal runs each step as gate projections + the catalog's fused cell ops (lstm_cell, ...);
   PyTorch CPU runs its own unfused CPU path.
2. A small transformer's training step under autocast (bfloat16) with GradScaler, hal vs CPU autocast.
3. F.scaled_dot_product_attention forward + backward: hal through the overrideable fused op (the
   catalog's scaled_dot_product_attention), CPU through PyTorch's own choice (its flash kernel).
4. Per-op overhead of `x + y` on 1-element float32 tensors.

Each figure is the median of several timed rounds after warm-up; ratios are PyTorch CPU time / hal
time (> 1: hal faster). Both sides use the same thread count (torch.set_num_threads, and
OMP_NUM_THREADS for the plugin's OpenMP, set before either starts).

    PYTHONPATH=<build>/python python bench/torch_hal_fidelity_bench.py \\
        --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so [--threads N] [--json out.json]
"""
import argparse
import json
import os
import statistics
import time


def timed(fn, sync, rounds=7, inner=5, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    import torch_hal

    torch_hal.init(plugins=[a.plugin])
    torch.set_num_threads(a.threads)
    hal_sync = torch.hal.synchronize

    def cpu_sync():
        pass

    results = {}

    def compare(name, make_step):
        torch.manual_seed(0)
        t_cpu = timed(make_step("cpu"), cpu_sync)
        torch.manual_seed(0)
        torch_hal.reset_fallback_stats()
        t_hal = timed(make_step("hal"), hal_sync)
        fallbacks = dict(torch_hal.fallback_stats())
        results[name] = {"cpu_ms": t_cpu * 1e3, "hal_ms": t_hal * 1e3, "ratio": t_cpu / t_hal, "fallbacks": fallbacks}
        print(f"{name:48s} cpu {t_cpu * 1e3:9.3f} ms   hal {t_hal * 1e3:9.3f} ms   cpu/hal {t_cpu / t_hal:5.2f}x"
              + (f"   fallbacks {fallbacks}" if fallbacks else ""))

    # 1. recurrent language models
    class RnnLM(nn.Module):
        def __init__(self, kind, vocab=1000, dim=256):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.rnn = getattr(nn, kind)(dim, dim, num_layers=2, batch_first=True)
            self.head = nn.Linear(dim, vocab)

        def forward(self, tokens):
            return self.head(self.rnn(self.embed(tokens))[0])

    def rnn_step(kind):
        def make(device):
            torch.manual_seed(0)
            model = RnnLM(kind).to(device)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            x = torch.randint(0, 1000, (16, 32), device=device)
            y = torch.randint(0, 1000, (16, 32), device=device)

            def step():
                loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
                opt.zero_grad()
                loss.backward()
                opt.step()
            return step
        return make

    compare("LSTM LM train step (B16 T32 H256, 2 layers)", rnn_step("LSTM"))
    compare("GRU LM train step (B16 T32 H256, 2 layers)", rnn_step("GRU"))

    # 2. autocast bf16 transformer step with GradScaler
    def amp_step(device):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        model = nn.Sequential(layer, nn.Linear(256, 10)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler(device)
        x = torch.randn(16, 64, 256, device=device)
        y = torch.randint(0, 10, (16, 64), device=device)

        def step():
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return step

    compare("autocast bf16 transformer step + GradScaler", amp_step)

    # 3. SDPA forward + backward
    def sdpa_step(device):
        torch.manual_seed(0)
        q, k, v = (torch.randn(8, 8, 256, 64, device=device, requires_grad=True) for _ in range(3))

        def step():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.sum().backward()
        return step

    compare("SDPA fwd+bwd causal [8, 8, 256, 64]", sdpa_step)

    # 4. x + y overhead
    def add_step(device):
        x, y = torch.randn(1, device=device), torch.randn(1, device=device)
        return lambda: [x + y for _ in range(100)]

    compare("x + y, 1 element (x100)", add_step)
    results["add_overhead_hal_over_cpu"] = 1 / results["x + y, 1 element (x100)"]["ratio"]
    print(f"x + y overhead: hal / cpu = {results['add_overhead_hal_over_cpu']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
