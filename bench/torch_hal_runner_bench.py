"""The per-call cost of a small compiled segment: torch.compile(backend="hal") against inductor.

A chain of six elementwise ops, f(x, y) = tanh(relu((x + y) * 2 - y) * x), compiled under no_grad
(an inference graph: Dynamo's guards, AOTAutograd's wrapper, then the backend's runner) on "hal"
and, with inductor, on CPU tensors; eager for both as the baseline. At 16 elements a call is all
overhead (guards, wrappers, the runner); at 64x64 a little work too. Ratio > 1: "hal" costs more.

Then an optimizer step: train_compare.py's MLP with AdamW, its gradients made once, and
torch.compile(opt.step) called again and again (a segment of 30 inputs and 24 write-backs on "hal":
parameters, both moments, the CPU step counters), against inductor's compiled step and eager steps.
And the same over 2.1M parameters (two 1024x1024 linears): a step bound by memory, where writing
the updates into the parameters and moments in place (output aliases) saves a pass over them.

    PYTHONPATH=<build>/python python bench/torch_hal_runner_bench.py \\
        --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so [--calls 20000] [--rounds 5] [--json out.json]
"""
import argparse
import json
import os
import pathlib
import statistics
import time


def f(x, y):
    return ((x + y) * 2.0).relu().sub(y).mul(x).tanh()


def per_call_us(fn, args, calls):
    for _ in range(min(calls, 500) if calls > 50 else 3):
        fn(*args)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True, help="the CPU plugin .so (only it loads)")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5, help="rounds; the median is reported")
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    import torch_hal

    torch_hal.init(plugins=[a.plugin])
    rows = []
    for shape in ((16,), (64, 64)):
        fns = {}
        for key, dev, backend in (("compiled_hal", "hal", "hal"), ("inductor_cpu", "cpu", "inductor"),
                                  ("eager_hal", "hal", None), ("eager_cpu", "cpu", None)):
            args = (torch.randn(*shape, device=dev), torch.randn(*shape, device=dev))
            fns[key] = (torch.compile(f, backend=backend) if backend else f, args)
        times = {k: [] for k in fns}
        with torch.no_grad():
            for _ in range(a.rounds):
                for k, (fn, args) in fns.items():
                    times[k].append(per_call_us(fn, args, a.calls))
        r = {"shape": list(shape), **{k + "_us": statistics.median(v) for k, v in times.items()}}
        r["hal_over_inductor"] = r["compiled_hal_us"] / r["inductor_cpu_us"]
        rows.append(r)
        print(f"{'x'.join(map(str, shape)):6s} us/call: compiled hal {r['compiled_hal_us']:6.2f}  inductor "
              f"{r['inductor_cpu_us']:6.2f}  eager hal {r['eager_hal_us']:6.2f}  eager cpu {r['eager_cpu_us']:6.2f}"
              f"  | hal/inductor {r['hal_over_inductor']:.2f}x")
    rows.append(optimizer_step_row(torch, a, "mlp", max(1, a.calls // 4)))
    rows.append(optimizer_step_row(torch, a, "wide", max(5, a.calls // 1000)))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


def optimizer_step_row(torch, a, kind, calls):
    """AdamW's step on KIND: "mlp" (train_compare.py's, 2.9k parameters) or "wide" (two 1024x1024
    linears, 2.1M), CALLS calls a round."""
    import importlib.util

    example = pathlib.Path(__file__).resolve().parents[1] / "framework_bridge" / "pytorch" / "examples" / "train_compare.py"
    spec = importlib.util.spec_from_file_location("train_compare", example)
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    steps = {}
    for key, dev, backend in (("compiled_hal", "hal", "hal"), ("inductor_cpu", "cpu", "inductor"),
                              ("eager_hal", "hal", None), ("eager_cpu", "cpu", None)):
        torch.manual_seed(0)
        if kind == "mlp":
            model = tc.MODELS["mlp"]().to(dev)
            x, y = torch.randn(32, 64, device=dev), torch.randint(0, 10, (32,), device=dev)
        else:
            model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024)).to(dev)
            x, y = torch.randn(8, 1024, device=dev), torch.randint(0, 10, (8,), device=dev)
        opt = torch.optim.AdamW(model.parameters())
        torch.nn.functional.cross_entropy(model(x), y).backward()
        steps[key] = (torch.compile(opt.step, backend=backend) if backend else opt.step, ())
    times = {k: [] for k in steps}
    for _ in range(a.rounds):
        for k, (fn, args) in steps.items():
            times[k].append(per_call_us(fn, args, calls))
    r = {"shape": f"{kind} AdamW step", **{k + "_us": statistics.median(v) for k, v in times.items()}}
    r["hal_over_inductor"] = r["compiled_hal_us"] / r["inductor_cpu_us"]
    label = "the MLP" if kind == "mlp" else "2.1M parameters"
    print(f"AdamW step of {label}, us/call: compiled hal {r['compiled_hal_us']:6.2f}  inductor {r['inductor_cpu_us']:6.2f}"
          f"  eager hal {r['eager_hal_us']:6.2f}  eager cpu {r['eager_cpu_us']:6.2f}  | hal/inductor "
          f"{r['hal_over_inductor']:.2f}x")
    return r


if __name__ == "__main__":
    main()
