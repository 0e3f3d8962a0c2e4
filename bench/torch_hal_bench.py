#!/usr/bin/env python3
"""torch_hal ("hal" device on the CPU plugin) against PyTorch CPU, in the same process and run.

1. Eager overhead of `x + y` on 1-element float32 tensors, hal vs CPU, with a breakdown:
   - dispatcher: Python binding + dispatcher down to a PrivateUse1 kernel that only builds a
     TensorImpl (`x.view(-1)` on hal: the bridge's view kernel, no HAL call);
   - core + plugin: the same 1-element add through the low-level `hal` package (`hal.Op` on
     device tensors: libhal's OpRunner, the SDK's checks and the CPU plugin's kernel, plus
     pybind11's argument conversion; an upper bound), and, when the build has it, the same
     launch from C++ (hal_elementwise_bench's BM_LaunchAdd1, run by this script);
   - bridge: the rest of the hal add after the C++ launch figure (output allocation through the
     c10 allocator and the core's caching allocator, shapes and dtypes, descriptors, the table
     lookup); without that figure, after the Python one (a lower bound).
   Reference rows: the add on "meta" (dispatcher + shape computation, no memory), and
   `torch.empty(1)` on hal vs CPU (allocation alone).
2. Training-step throughput of tests/test_training.py's three models (train_compare.py), SGD and
   AdamW, hal (CPU plugin) vs PyTorch CPU with the same thread count (torch.set_num_threads and
   OMP_NUM_THREADS for the plugin's OpenMP, set before either starts).
3. memory_reserved vs peak memory_allocated of the hal device during those loops (when the build's
   torch.hal has memory statistics; otherwise reported as unavailable).

    PYTHONPATH=<build>/python python bench/torch_hal_bench.py --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so \\
        [--threads N] [--json out.json]
"""
import argparse
import gc
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time


def eager_overhead(plugin):
    import torch

    import hal
    from hal import torch_util as tu
    from ops_vs_torch import timeit  # bench/ is this script's directory

    us = 1e6
    x, y = torch.randn(1), torch.randn(1)
    hx, hy = x.to("hal"), y.to("hal")
    mx, my = x.to("meta"), y.to("meta")
    torch.testing.assert_close((hx + hy).cpu(), x + y)

    rt = hal.Runtime(plugins=[plugin])
    dev = rt.device("cpu")
    op = hal.Op(dev, "add")
    lx, ly, lz = tu.to_hal(dev, x), tu.to_hal(dev, y), tu.to_hal(dev, torch.empty(1))
    op([lx, ly], [lz])
    torch.testing.assert_close(tu.to_torch(lz), x + y)

    t = {
        "cpu_add": timeit(lambda: x + y),
        "hal_add": timeit(lambda: hx + hy),
        "meta_add": timeit(lambda: mx + my),
        "hal_view": timeit(lambda: hx.view(-1)),
        "hal_op": timeit(lambda: op([lx, ly], [lz])),
        "pybind_noop": timeit(lambda: op.name),
        "cpu_empty": timeit(lambda: torch.empty(1)),
        "hal_empty": timeit(lambda: torch.empty(1, device="hal")),
    }
    t = {k: v * us for k, v in t.items()}
    return t | {"dispatcher": t["hal_view"], "core_plugin": t["hal_op"], "ratio": t["hal_add"] / t["cpu_add"]}


def launch_add1_cpp(bench):
    """BM_LaunchAdd1's median (µs): a synchronous 1-element add through hal::OpRunner from C++."""
    out = subprocess.run([bench, "--benchmark_filter=BM_LaunchAdd1$", "--benchmark_repetitions=5",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    rows = {b["name"]: b for b in json.loads(out)["benchmarks"]}
    median = rows["BM_LaunchAdd1_median"]
    assert median["time_unit"] == "ns", median
    return median["real_time"] / 1000


def memory_stats_available():
    import torch

    return all(hasattr(torch.hal, f) for f in ("memory_reserved", "max_memory_allocated", "reset_peak_memory_stats",
                                                "empty_cache"))


def training_throughput(steps, warmup, rounds):
    """Per model and optimizer: steps/s on CPU and on hal, ROUNDS alternating rounds of STEPS steps
    each after WARMUP steps (median round), so load changes on the machine hit both sides alike."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "framework_bridge/pytorch/examples"))
    import train_compare as tc

    mem = memory_stats_available()
    rows = []
    for model_name in tc.MODELS:
        data = tc.batches(model_name, warmup + steps)
        for optim in tc.OPTIMIZERS:
            row, loops = {"model": model_name, "optim": optim}, {}
            if mem:  # the previous model's blocks would count as this one's reserve
                gc.collect()
                torch.hal.empty_cache()
            for device in ("cpu", "hal"):
                torch.manual_seed(0)
                model = tc.MODELS[model_name]().to(device).train()
                opt = tc.OPTIMIZERS[optim](model.parameters())
                batches = [(x.to(device), y.to(device)) for x, y in data]

                def loop(batches, model=model, opt=opt):
                    for x, y in batches:
                        opt.zero_grad()
                        loss = F.cross_entropy(model(x), y)
                        loss.backward()
                        opt.step()
                    loss.item()  # waits for the last step

                try:
                    loop(batches[:warmup])
                except (NotImplementedError, RuntimeError) as e:  # an op this build cannot run on hal yet
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                    break
                loops[device] = (loop, batches[warmup:])
            if "error" in row:
                rows.append(row)
                continue
            if mem:
                torch.hal.synchronize()
                torch.hal.reset_peak_memory_stats()
            samples = {"cpu": [], "hal": []}
            for _ in range(rounds):
                for device, (loop, timed) in loops.items():
                    start = time.perf_counter()
                    loop(timed)
                    samples[device].append(len(timed) / (time.perf_counter() - start))
            for device, s in samples.items():
                row[f"{device}_steps_per_s"] = statistics.median(s)
            row["ratio"] = row["hal_steps_per_s"] / row["cpu_steps_per_s"]
            if mem:
                row["peak_allocated"] = torch.hal.max_memory_allocated()
                row["reserved"] = torch.hal.memory_reserved()
                row["reserved_over_peak"] = row["reserved"] / max(row["peak_allocated"], 1)
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", required=True, help="the CPU plugin's .so (the only plugin torch_hal loads)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both sides (default: all cores)")
    ap.add_argument("--steps", type=int, default=10, help="training steps per timed round")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per side (alternating cpu, hal)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--launch-bench", help="hal_elementwise_bench for the C++ launch figure "
                    "(default: <build>/bin/hal_elementwise_bench of the plugin's build, when built)")
    ap.add_argument("--json", help="also write every figure here")
    args = ap.parse_args()

    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the CPU plugin's OpenMP, read when it loads
    os.environ.setdefault("HAL_FALLBACK_WARN", "0")
    import torch

    import torch_hal

    torch.set_num_threads(args.threads)
    torch_hal.init(plugins=[args.plugin])
    props = torch.hal.get_device_properties(0)
    print(f"hal:0 = {props.id} ({props.name}), plugin {props.plugin!r}; torch {torch.__version__}, "
          f"{args.threads} threads on both sides")

    e = eager_overhead(args.plugin)
    launch_bench = args.launch_bench or pathlib.Path(args.plugin).resolve().parents[3] / "bin" / "hal_elementwise_bench"
    if pathlib.Path(launch_bench).exists():
        e["core_plugin_cpp"] = launch_add1_cpp(str(launch_bench))
    # The bridge calls libhal from C++: its share is what is left after the C++ launch; without that
    # figure, after the Python one (which also pays pybind11's conversions, so the share is a lower bound).
    e["bridge"] = e["hal_add"] - e["dispatcher"] - e.get("core_plugin_cpp", e["core_plugin"])
    print("\n1-element x + y, µs per call (median of 7 batches)")
    print(f"  PyTorch CPU                        {e['cpu_add']:7.2f}")
    print(f"  hal (CPU plugin)                   {e['hal_add']:7.2f}   {e['ratio']:.2f}x CPU (target <= 1.5x)")
    print(f"    dispatcher  (hal x.view(-1))     {e['dispatcher']:7.2f}")
    print(f"    bridge      (the rest)           {e['bridge']:7.2f}"
          + ("   (hal add - dispatcher - C++ launch)" if "core_plugin_cpp" in e
             else "   (hal add - dispatcher - Python launch: a lower bound)"))
    cpp = (f"the same launch from C++, BM_LaunchAdd1: {e['core_plugin_cpp']:.2f}" if "core_plugin_cpp" in e
           else "BM_LaunchAdd1 not run: build hal_elementwise_bench")
    print(f"    core+plugin (hal.Op from Python) {e['core_plugin']:7.2f}   "
          f"(pybind11 no-op call {e['pybind_noop']:.2f}; {cpp})")
    print(f"  reference: add on meta             {e['meta_add']:7.2f}")
    print(f"  reference: torch.empty(1) cpu/hal  {e['cpu_empty']:7.2f} / {e['hal_empty']:.2f}")

    fallbacks_before = torch_hal.fallback_stats()
    torch_hal.reset_fallback_stats()
    rows = training_throughput(args.steps, args.warmup, args.rounds)
    fallbacks = torch_hal.fallback_stats()
    print(f"\ntraining steps/s (median of {args.rounds} alternating rounds of {args.steps} steps after "
          f"{args.warmup} warm-up; target hal/cpu >= 0.9x)")
    mem = memory_stats_available()
    print("  model    optim    cpu       hal       hal/cpu"
          + ("   peak alloc   reserved   reserved/peak" if mem else ""))
    for r in rows:
        if "error" in r:
            print(f"  {r['model']:8} {r['optim']:7} not measured: {r['error']}")
            continue
        line = (f"  {r['model']:8} {r['optim']:7} {r['cpu_steps_per_s']:8.1f}  {r['hal_steps_per_s']:8.1f}  "
                f"{r['ratio']:6.2f}x")
        if mem:
            line += f"   {r['peak_allocated']:10d}   {r['reserved']:9d}   {r['reserved_over_peak']:.2f}x"
        print(line)
    if not mem:
        print("  memory_reserved / peak memory_allocated: unavailable "
              "(this build's torch.hal has no memory statistics)")
    print(f"  CPU fallbacks during the training loops: {sum(fallbacks.values())} calls of {len(fallbacks)} aten ops")
    for k, v in sorted(fallbacks.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"    {k}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "eager_us": e, "training": rows, "fallbacks": fallbacks,
                       "fallbacks_eager": fallbacks_before}, f, indent=1)


if __name__ == "__main__":
    main()
