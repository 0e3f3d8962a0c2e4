#!/usr/bin/env python3
"""Overhead of torch_hal.tools (issue 14) on a training step of the decoder block on "hal".

1. Tools imported but inactive: fresh processes (ROUNDS pairs, alternating) time the step, then either
   import torch_hal.tools or not, and time it again; the ratio is the median second/first time of the
   importing processes over that of the others (which cancels warm-up and process-to-process noise).
2. Each tool active (OpCapture, OpAutoCompare, OpTimeMeasure, OpFallback of one op, OpDtypeCast, a
   torch.profiler profile): median step time with the tool / without, in one process.

The step: examples/train_compare.py's DecoderBlock (dim 32, 4 heads, batch 8 x 16 tokens), SGD,
synchronised (torch.hal.synchronize) at the end of each step.

    PYTHONPATH=<build>/python HAL_CONFIG=<hal.toml naming the CPU plugin> \\
        python bench/torch_hal_tools_bench.py [--steps 20] [--rounds 5] [--json out.json]
"""
import argparse
import importlib.util
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "framework_bridge" / "pytorch" / "examples" / "train_compare.py"


def make_step():
    import torch
    import torch.nn.functional as F

    spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    torch.manual_seed(0)
    model = tc.DecoderBlock().to("hal")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = (t.to("hal") for t in tc.token_sequences(1, 8)[0])

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        torch.hal.synchronize()

    return step


def step_ms(step, steps):
    """Median of STEPS timed steps (ms), after 3 warm-up steps."""
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def child(import_tools, steps):
    import torch_hal  # noqa: F401

    step = make_step()
    before = step_ms(step, steps)
    if import_tools:
        import torch_hal.tools  # noqa: F401
    print(json.dumps([before, step_ms(step, steps)]))


def inactive(steps, rounds):
    runs = {False: [], True: []}
    for _ in range(rounds):
        for flag in (False, True):
            out = subprocess.run([sys.executable, __file__, "--child", str(int(flag)), "--steps", str(steps)],
                                 capture_output=True, text=True, check=True).stdout
            runs[flag].append(json.loads(out.splitlines()[-1]))
    ratio = {flag: statistics.median(b / a for a, b in r) for flag, r in runs.items()}
    return {"runs": {str(k): v for k, v in runs.items()}, "step_ms": statistics.median(a for a, _ in runs[True] + runs[False]),
            "with_ms": statistics.median(b for _, b in runs[True]), "ratio": ratio[True] / ratio[False]}


def active(steps, rounds):
    import torch
    import torch_hal.tools as tools

    step = make_step()
    tmp = tempfile.mkdtemp()
    tools_by_name = {
        "OpCapture": lambda: tools.OpCapture(tmp + "/cap"),
        "OpAutoCompare": lambda: tools.OpAutoCompare(save_dir=tmp + "/cmp", stream=None),
        "OpTimeMeasure": lambda: tools.OpTimeMeasure(csv="", stream=None),
        "OpFallback(mm)": lambda: tools.OpFallback(ops="mm"),
        "OpDtypeCast": lambda: tools.OpDtypeCast(),
        "torch.profiler": lambda: torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]),
    }
    out = {}
    for name, make in tools_by_name.items():
        base, tool = [], []
        for _ in range(rounds):
            base.append(step_ms(step, steps))
            with make():
                # OpCapture writes every call: fewer steps keep the disk use small.
                tool.append(step_ms(step, max(2, steps // 5) if name == "OpCapture" else steps))
        b, t = statistics.median(base), statistics.median(tool)
        out[name] = {"step_ms": b, "with_tool_ms": t, "ratio": t / b}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--child", type=int, choices=[0, 1], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        return child(bool(a.child), a.steps)
    r = {"inactive": inactive(a.steps, a.rounds)}
    import torch_hal  # noqa: F401

    r["active"] = active(a.steps, a.rounds)
    i = r["inactive"]
    print(f"tools imported, inactive: step {i['step_ms']:.3f} ms, {i['with_ms']:.3f} ms after the import -> "
          f"{i['ratio']:.3f}x against processes without it (target < 1.02x)")
    print(f"{'tool':18s} {'step ms':>9s} {'with tool':>10s} {'ratio':>7s}")
    for name, v in r["active"].items():
        print(f"{name:18s} {v['step_ms']:9.3f} {v['with_tool_ms']:10.3f} {v['ratio']:6.2f}x")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
