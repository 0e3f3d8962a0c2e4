#!/usr/bin/env python3
"""CPU plugin ops vs PyTorch CPU, in the same process and run.

Each benchmark runs the same computation through the HAL (hal.Op on tensors already in
device memory, synchronous launch) and through torch (out= variants, no allocation), takes the
median of REPEATS timed batches, and prints throughput and the ratio HAL/torch (> 1: HAL faster).
Also measured in the same run: this machine's copy bandwidth (torch copy of 256 MiB) and its
nominal float32 peak (cores x clock x 2 FMA pipes x float lanes x 2: 64 FLOP/cycle with AVX-512,
32 with AVX2).

    PYTHONPATH=<build>/python python bench/ops_vs_torch.py --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

import hal
from hal import torch_util as tu


def timeit(fn, min_time=0.3, repeats=7):
    fn()  # warm up (caches, oneDNN primitives, thread pools)
    n, t = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - start
        if t >= min_time / repeats or n > 1 << 20:
            break
        n *= 2
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


class Bench:
    def __init__(self, dev, rounds=1):
        self.dev = dev
        self.rounds = rounds
        self.rows = []

    def compare(self, name, hal_op, hal_in, attrs, torch_fn, torch_in, out_like, work, unit):
        """HAL op HAL_OP on torch inputs HAL_IN vs TORCH_FN(*TORCH_IN, out=...). WORK: flops or bytes per call."""
        dev = self.dev
        hin = [None if x is None else tu.to_hal(dev, x) for x in hal_in]
        hout = [tu.to_hal(dev, o) for o in out_like]
        op = hal.Op(dev, hal_op)
        touts = [torch.empty_like(o) for o in out_like]
        # ROUNDS alternating HAL / torch timings; the ratio is the median of the per-round ratios.
        t_hals, t_torches = [], []
        for _ in range(self.rounds):
            t_hals.append(timeit(lambda: op(hin, hout, attrs)))
            t_torches.append(timeit(lambda: torch_fn(*torch_in, *touts)))
        t_hal, t_torch = statistics.median(t_hals), statistics.median(t_torches)
        ratios = [t / h for h, t in zip(t_hals, t_torches)]
        # Same answer, or the comparison means nothing.
        torch_fn(*torch_in, *touts)
        for h, t in zip(hout, touts):
            torch.testing.assert_close(tu.to_torch(h).float(), t.float(), rtol=2e-3, atol=2e-3)
        row = {"name": name, "hal_s": t_hal, "torch_s": t_torch, "ratio": statistics.median(ratios), "unit": unit,
               "hal_rate": work / t_hal / 1e9, "torch_rate": work / t_torch / 1e9}
        if self.rounds > 1:
            row["round_ratios"] = ratios
        self.rows.append(row)
        spread = f"  (rounds {min(ratios):.2f}-{max(ratios):.2f}x)" if self.rounds > 1 else ""
        print(f"{name:44s} HAL {row['hal_rate']:8.2f} {unit}  torch {row['torch_rate']:8.2f} {unit}  "
              f"HAL/torch {row['ratio']:5.2f}x{spread}", flush=True)
        return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--only", help="substring filter on benchmark names (comma-separated: any of them)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time HAL and torch alternately this many times per benchmark; report medians "
                         "(a shared or busy machine drifts between the two sides of one round)")
    args = ap.parse_args()

    rt = hal.Runtime(plugins=[args.plugin])
    dev = rt.device("cpu")
    b = Bench(dev, max(1, args.rounds))
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')}")

    # Machine figures, same run.
    src = torch.empty(64 << 20, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    t = timeit(lambda: dst.copy_(src), repeats=5)
    bandwidth = 2 * src.numel() * 4 / t / 1e9
    print(f"copy bandwidth (torch, 256 MiB read + write): {bandwidth:.1f} GB/s")
    mhz, avx512 = None, False
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        mhz = float(next(line for line in info.splitlines() if line.startswith("cpu MHz")).split(":")[1])
        avx512 = " avx512f" in info
    except (OSError, StopIteration, ValueError):
        pass
    # 2 FMA pipes x (16 float lanes with AVX-512, else 8) x 2 FLOP.
    per_cycle = 64 if avx512 else 32
    peak = os.cpu_count() * (mhz or 0) * 1e6 * per_cycle / 1e9
    print(f"nominal float32 peak: {peak:.1f} GFLOP/s ({os.cpu_count()} cores x {mhz} MHz x {per_cycle} FLOP/cycle)")

    want = lambda name: args.only is None or any(o in name for o in args.only.split(","))  # noqa: E731
    n = 16 << 20
    a, c = torch.randn(n), torch.randn(n)
    if want("add"):
        b.compare("add 16M float32 (GB/s)", "add", [a, c], {}, lambda x, y, o: torch.add(x, y, out=o), [a, c],
                  [a], 12 * n, "GB/s")
    if want("mul"):
        b.compare("mul 16M float32 (GB/s)", "mul", [a, c], {}, lambda x, y, o: torch.mul(x, y, out=o), [a, c],
                  [a], 12 * n, "GB/s")
    if want("gelu"):
        b.compare("gelu 16M float32 (GB/s)", "gelu", [a], {}, lambda x, o: torch._C._nn.gelu(x, out=o), [a], [a],
                  8 * n, "GB/s")
    if want("matmul"):
        m = torch.randn(1024, 1024)
        k = torch.randn(1024, 1024)
        b.compare("mm 1024x1024x1024 float32 (GFLOP/s)", "mm", [m, k], {}, lambda x, y, o: torch.mm(x, y, out=o),
                  [m, k], [m], 2 * 1024 ** 3, "GFLOP/s")
    if want("conv"):
        # ResNet-50 layer shapes (batch 8): stem, 3x3 of stage 2 and 4, a 1x1 expansion.
        shapes = [("conv1 7x7/2 3->64 @224", 8, 3, 224, 64, 7, 2, 3),
                  ("res2 3x3 64->64 @56", 8, 64, 56, 64, 3, 1, 1),
                  ("res2 1x1 64->256 @56", 8, 64, 56, 256, 1, 1, 0),
                  ("res5 3x3 512->512 @7", 8, 512, 7, 512, 3, 1, 1)]
        for label, nb, cin, hw, cout, ks, st, pad in shapes:
            x = torch.randn(nb, cin, hw, hw)
            w = torch.randn(cout, cin, ks, ks) * 0.05
            y = F.conv2d(x, w, stride=st, padding=pad)
            flops = 2 * y.numel() * cin * ks * ks
            b.compare(f"conv2d {label} (GFLOP/s)", "conv2d", [x, w], {"stride": [st, st], "padding": [pad, pad]},
                      lambda x_, w_, o, st=st, pad=pad: torch.ops.aten.convolution.out(
                          x_, w_, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, out=o), [x, w],
                      [y], flops, "GFLOP/s")
    s = torch.randn(4096, 4096)
    if want("softmax"):
        b.compare("softmax (4096, 4096) dim -1 (GB/s)", "softmax", [s], {"dim": -1},
                  lambda x, o: torch.softmax(x, -1, out=o), [s], [s], 8 * s.numel(), "GB/s")
    if want("layer_norm"):
        g, beta = torch.randn(4096), torch.randn(4096)
        mean = torch.empty(4096, 1)
        b.compare("layer_norm (4096, 4096) (GB/s)", "layer_norm", [s, g, beta], {"normalized_shape": [4096]},
                  lambda x, w, bb, o, m1, r1: torch.ops.aten.native_layer_norm.out(
                      x, [4096], w, bb, 1e-5, out0=o, out1=m1, out2=r1),
                  [s, g, beta], [s, mean, mean.clone()], 8 * s.numel(), "GB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bandwidth_gbs": bandwidth, "peak_gflops": peak, "torch": torch.__version__,
                       "threads": threads, "rows": b.rows}, f, indent=1)


if __name__ == "__main__":
    main()
