#!/usr/bin/env python3
"""torch.compile(backend="hal") against eager "hal" and against torch.compile() (inductor) on CPU,
in the same process and run (issue 15).

For tests/test_training.py's three models (train_compare.py; the CNN without dropout), AdamW
training steps per second:
  - compiled "hal" vs eager "hal" (same plugin, same thread count): the graph path's gain;
  - compiled "hal" vs inductor on CPU (torch.compile default backend, CPU tensors);
and the compile time per model: cold (empty HAL compile cache, fresh Dynamo) and cached (Dynamo
reset, HAL disk cache warm). Each compiled configuration also runs with the optimizer step compiled
(torch.compile(opt.step), "+step"). Ratios > 1 mean compiled "hal" is faster.

    PYTHONPATH=<build>/python python bench/torch_hal_compile_bench.py \\
        --plugin <build>/lib/hal/plugins/libhal_plugin_cpu.so [--steps 200] [--rounds 5] [--threads N] [--json out.json]
    (--config hal.toml instead of --plugin: e.g. the CPU plugin with fused_loops = "false", the A/B baseline)
"""
import argparse
import copy
import importlib.util
import json
import os
import pathlib
import shutil
import statistics
import tempfile
import time

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "framework_bridge" / "pytorch" / "examples" / "train_compare.py"


def _load_tc():
    spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    return tc


class _Trainer:
    """One model's AdamW training on DEVICE over a fixed set of batches; run(n) times n steps (one
    at the end of the last, as a training loop syncs when it reads the loss) and gives steps/s.
    STEP_BACKEND: the optimizer step compiled too (torch.compile(opt.step, backend=STEP_BACKEND)),
    as PyTorch's compiled-optimizer recipe does."""

    def __init__(self, torch, model, data, device, step_backend=None):
        import torch.nn.functional as F

        self.torch, self.device, self.model = torch, device, model
        opt = torch.optim.AdamW(model.parameters())
        opt_step = torch.compile(opt.step, backend=step_backend) if step_backend else opt.step
        self.batches = [(x.to(device), y.to(device)) for x, y in data]

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt_step()
            return loss
        self.step = step
        self.done = 0
        for x, y in self.batches[:3]:  # compile / warm up
            step(x, y).item()

    def run(self, n):
        t0 = time.perf_counter()
        for _ in range(n):
            x, y = self.batches[self.done % len(self.batches)]
            self.done += 1
            loss = self.step(x, y)
        loss.item()
        return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", help="the CPU plugin .so (only it loads)")
    ap.add_argument("--config", help="a hal.toml instead of --plugin (e.g. to set [plugin.options])")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per round and configuration")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; each configuration's median is reported")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="mlp,cnn,decoder")
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    cache = tempfile.mkdtemp(prefix="hal-compile-bench-")
    os.environ["HAL_COMPILE_CACHE_DIR"] = cache
    import torch

    torch.set_num_threads(a.threads)
    import torch_hal
    import torch_hal.dynamo
    import torch_hal._C as C

    if bool(a.plugin) == bool(a.config):
        ap.error("give --plugin or --config")
    torch_hal.init(plugins=[a.plugin]) if a.plugin else torch_hal.init(config=a.config)
    os.environ.setdefault("HAL_FALLBACK_WARN", "0")
    tc = _load_tc()
    rows = []
    for name in a.models.split(","):
        kw = {"p": 0.0} if name == "cnn" else {}
        torch.manual_seed(0)
        base = tc.MODELS[name](**kw)
        data = tc.batches(name, 30)  # cycled: train_compare makes at most ~50 full batches
        r = {"model": name}
        # Compile time: the first step's extra time over an eager step (forward + backward graphs).
        for kind in ("cold", "cached"):
            torch._dynamo.reset()
            if kind == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            before = C._hal_compile_counters()
            m = torch.compile(copy.deepcopy(base).to("hal").train(), backend="hal")
            x, y = data[0][0].to("hal"), data[0][1].to("hal")
            t0 = time.perf_counter()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            torch.hal.synchronize()
            r[f"compile_s_{kind}"] = time.perf_counter() - t0
            r[f"disk_hits_{kind}"] = C._hal_compile_counters()["disk_hits"] - before["disk_hits"]
        # The three configurations live side by side and run in interleaved rounds, so that a slow
        # moment of the machine hits all of them; each reports its median round.
        torch._dynamo.reset()
        # "_step": the optimizer step compiled as well as the model.
        def hal(step=False):
            return _Trainer(torch, torch.compile(copy.deepcopy(base).to("hal").train(), backend="hal"), data, "hal",
                            "hal" if step else None)

        trainers = {"eager_hal": _Trainer(torch, copy.deepcopy(base).to("hal").train(), data, "hal"),
                    "compiled_hal": hal(), "compiled_hal_step": hal(step=True)}
        try:
            for k, step in (("inductor_cpu", None), ("inductor_cpu_step", "inductor")):
                trainers[k] = _Trainer(torch, torch.compile(copy.deepcopy(base).train()), data, "cpu", step)
        except Exception as e:  # no C++ compiler for inductor: reported, not fatal
            r["inductor_error"] = str(e).splitlines()[0][:200]
        rates = {k: [] for k in trainers}
        for _ in range(a.rounds):
            for k, t in trainers.items():
                rates[k].append(t.run(a.steps))
        for k in ("eager_hal", "compiled_hal", "compiled_hal_step", "inductor_cpu", "inductor_cpu_step"):
            r[k] = statistics.median(rates[k]) if k in rates else None
            r[k + "_rounds"] = [round(x, 1) for x in rates.get(k, [])]
        del trainers
        for suffix in ("", "_step"):
            hal_rate, inductor = r["compiled_hal" + suffix], r["inductor_cpu" + suffix]
            r["vs_eager_hal" + suffix] = hal_rate / r["eager_hal"]
            r["vs_inductor_cpu" + suffix] = hal_rate / inductor if inductor else None
        r["stats"] = torch_hal.dynamo.stats()
        rows.append(r)
        nan = float("nan")
        print(f"{name:8s} steps/s: eager hal {r['eager_hal']:8.1f}  compiled hal {r['compiled_hal']:8.1f} "
              f"(+step {r['compiled_hal_step']:8.1f})  inductor cpu {r['inductor_cpu'] or nan:8.1f} "
              f"(+step {r['inductor_cpu_step'] or nan:8.1f})  | compiled/eager {r['vs_eager_hal']:.2f}x "
              f"(+step {r['vs_eager_hal_step']:.2f}x)  compiled/inductor {r['vs_inductor_cpu'] or nan:.2f}x "
              f"(+step {r['vs_inductor_cpu_step'] or nan:.2f}x)  | compile cold {r['compile_s_cold']:.2f}s "
              f"cached {r['compile_s_cached']:.2f}s")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
