#!/usr/bin/env python3
"""Soak (issue 34): long training on "hal" and long ONNX inference, with the fault layer off and then on,
checking that memory, file descriptors and threads stay flat.

Four phases, each in its own child process (layers are chosen when the runtime starts):

- train:        the CNN of framework_bridge/pytorch/examples/train_compare.py (conv, BatchNorm, dropout
                on the device's generator, pooling, linear), SGD on "hal", the digits batches cycled;
- train+faults: the same with HAL_LAYERS=faults failing allocations, launches, copies and syncs at
                --fault-rate (seeded). A step that raises is retried from a CPU snapshot of the
                parameters, buffers and the device's RNG state taken before it (the approach of
                framework_bridge/pytorch/tests/test_layers.py), so the run must end where the fault-free
                run ends: the final parameters' digests are compared;
- onnx:         the ResNet-18-shaped model of framework_bridge/onnx/tests/onnx_models.py through
                hal.onnx, batches 1, 2, 4 in turn, a new InferenceSession every --session-every runs; outputs
                compared with onnxruntime's (computed in the parent) before and after the loop;
- onnx+faults:  the same under the fault layer, a failed run or session build retried.

An error that is not an injected fault fails the phase. Every --every steps the child records the
device allocator's allocated and reserved bytes (torch phases: torch.hal.memory_allocated/_reserved;
hal.onnx has no allocator statistics), RSS, open file descriptors (/proc/self/fd), threads
(/proc/self/task), faults injected so far (lines of HAL_FAULTS_LOG) and errors caught.

Growth check: the first quarter of the samples is warm-up; a metric fails when the maximum of the last
quarter exceeds the maximum of the two middle quarters by more than its tolerance (allocated: 64 KiB;
reserved: 2 MiB, the caching allocator's large granule, since a retried step can briefly hold two steps'
tensors; RSS: 16 MiB, malloc's and Python's caches; fds and threads: none). The RSS slope per 1000 steps
over the last three quarters is printed as well.

    HAL_BUILD_DIR=<build> PYTHONPATH=<build>/python python bench/soak.py [--steps 2000] [--fault-rate 0.001]
        [--seed 1] [--phases train,onnx] [--quick] [--json out.json]

Exits 1 when a metric grows, a phase fails, or a check (digests, onnxruntime) disagrees.
"""
import argparse
import hashlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "framework_bridge" / "pytorch" / "examples"
ONNX_TESTS = REPO / "framework_bridge" / "onnx" / "tests"

MIB = 1 << 20
METRICS = ("allocated", "reserved", "rss", "fds", "threads")
ONNX_BATCHES = (1, 2, 4)


# ---- child side: one phase, sampled ----


def _count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Recorder:
    """Samples the process every EVERY steps; counts the injected-fault errors the phase survives."""

    def __init__(self, every, fault_log, memory=None):
        self.every, self.fault_log, self.memory = every, fault_log, memory
        self.samples, self.errors, self.error_kinds, self.t0 = [], 0, {}, time.perf_counter()

    def caught(self, error):
        """An error the loop will retry: only an injected fault may be one (anything else is re-raised)."""
        message = str(error)
        if not self.fault_log or "injected fault" not in message:
            raise error
        self.errors += 1
        kind = message.split("injected fault '", 1)[1].split(":", 1)[0]
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def retry(self, fn):
        while True:
            try:
                return fn()
            except RuntimeError as e:  # torch.OutOfMemoryError and hal.onnx's errors are ones too
                self.caught(e)

    def step(self, n):
        if n % self.every:
            return
        allocated, reserved = self.memory() if self.memory else (None, None)
        fds, threads = len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))
        faults = _count_lines(self.fault_log) if self.fault_log else 0
        self.samples.append(dict(step=n, seconds=round(time.perf_counter() - self.t0, 3), allocated=allocated,
                                 reserved=reserved, rss=_rss(), fds=fds, threads=threads, faults=faults,
                                 errors=self.errors))


def child_train(args, rec):
    import torch
    import torch.nn.functional as F

    import torch_hal

    sys.path.insert(0, str(EXAMPLES))
    import train_compare as tc

    torch_hal.init(config=args.config)
    rec.memory = lambda: (torch.hal.memory_allocated(), torch.hal.memory_reserved())
    torch.manual_seed(args.seed)
    model = tc.CNN().to("hal")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = tc.batches("cnn", 56)  # the whole digits set (1797 images) in batches of 32, cycled

    def snapshot():
        return {k: v.cpu() for k, v in model.state_dict().items()}, torch.hal.get_rng_state()

    def restore(state):
        model.load_state_dict(state[0])
        torch.hal.set_rng_state(state[1])

    rec.step(0)
    for step in range(1, args.steps + 1):
        x, y = data[step % len(data)]
        state = rec.retry(snapshot)
        while True:
            try:
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x.to("hal")), y.to("hal"))
                loss.backward()
                opt.step()
                value = loss.item()
                break
            except RuntimeError as e:
                rec.caught(e)
                rec.retry(lambda: restore(state))
        rec.step(step)
    digest = hashlib.sha256()
    for k, v in rec.retry(snapshot)[0].items():
        digest.update(k.encode() + v.numpy().tobytes())
    return dict(final_loss=value, digest=digest.hexdigest()[:16])


def onnx_model():
    """(path, feeds) of the ONNX phases: the ResNet-18-shaped model (cached export) at ONNX_BATCHES."""
    sys.path.insert(0, str(ONNX_TESTS))
    import onnx_models

    path = str(onnx_models.export("resnet", onnx_models.NEWEST))
    return path, [onnx_models.inputs("resnet", batch=b, seed=i) for i, b in enumerate(ONNX_BATCHES)]


def write_expected(path):
    """onnxruntime's outputs for the ONNX phases' feeds, saved to PATH. Made here, in the parent: importing
    onnxruntime (1.32) opens its telemetry database (3 descriptors) and starts threads with eventfds now and
    then, which would show up in a child's descriptor and thread counts."""
    from onnx_testing import ort_run

    model, feeds = onnx_model()
    import numpy as np

    np.savez(path, **{f"{i}_{j}": out for i, feed in enumerate(feeds) for j, out in enumerate(ort_run(model, feed))})


def child_onnx(args, rec):
    import numpy as np

    import hal.onnx

    path, feeds = onnx_model()
    saved = np.load(args.expected)
    expected = [[saved[f"{i}_{j}"] for j in range(len(saved.files)) if f"{i}_{j}" in saved.files]
                for i in range(len(feeds))]
    opts = hal.onnx.SessionOptions()
    opts.hal_config = args.config

    def check(session, when):
        for feed, want in zip(feeds, expected):
            got = rec.retry(lambda: session.run(None, feed))
            assert len(got) == len(want)
            for a, e in zip(got, want):  # onnx_testing.assert_close's tolerances
                np.testing.assert_allclose(a, e, rtol=1e-3, atol=1e-4, err_msg=f"resnet {feed_shape(feed)} {when}")

    session = rec.retry(lambda: hal.onnx.InferenceSession(path, opts))
    check(session, "before the loop")
    rec.step(0)
    for step in range(1, args.steps + 1):
        if args.session_every and step % args.session_every == 0:  # building and dropping sessions must not leak
            session = rec.retry(lambda: hal.onnx.InferenceSession(path, opts))
        out = rec.retry(lambda: session.run(None, feeds[step % len(feeds)]))
        rec.step(step)
    check(session, f"after {args.steps} runs")
    return dict(final_sum=float(np.sum(out[0])))


def feed_shape(feed):
    return "x".join(str(d) for d in next(iter(feed.values())).shape)


def child_main(args):
    rec = Recorder(args.every, os.environ.get("HAL_FAULTS_LOG"))
    result = (child_train if args.child == "train" else child_onnx)(args, rec)
    result.update(samples=rec.samples, errors=rec.errors, error_kinds=rec.error_kinds)
    pathlib.Path(args.out).write_text(json.dumps(result))


# ---- parent side: phases, checks, table ----


def fault_spec(rate, seed):
    return ";".join(f"{k}:rate={rate:g}" for k in ("alloc", "launch", "copy", "sync")) + f";seed={seed}"


def run_phase(phase, faults, args, tmp):
    name = phase + ("+faults" if faults else "")
    out, log = tmp / f"{name}.json", tmp / f"{name}.faults.jsonl"
    env = dict(os.environ, HAL_FALLBACK_WARN="0", HAL_LAYERS="faults" if faults else "")
    for var in ("HAL_FAULTS", "HAL_FAULTS_LOG", "HAL_CONFIG"):
        env.pop(var, None)
    if faults:
        env.update(HAL_FAULTS=args.fault_spec or fault_spec(args.fault_rate, args.seed), HAL_FAULTS_LOG=str(log))
    cmd = [sys.executable, __file__, "--child", phase, "--config", str(args.config), "--expected", str(args.expected),
           "--steps", str(args.steps),
           "--every", str(args.every), "--session-every", str(args.session_every), "--seed", str(args.seed),
           "--out", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        return dict(name=name, failed=f"exit {done.returncode}:\n{done.stdout}{done.stderr}"[-4000:],
                    seconds=seconds)
    r = json.loads(out.read_text())
    r.update(name=name, phase=phase, faults=faults, seconds=seconds,
             kinds=_kinds(log) if faults else {})
    return r


def _kinds(log):
    kinds = {}
    if log.exists():
        for line in log.read_text().splitlines():
            k = json.loads(line)["kind"]
            kinds[k] = kinds.get(k, 0) + 1
    return kinds


def growth(samples, metric, tolerance):
    """(ok, figures) for METRIC: the max of the last quarter of SAMPLES against the max of the two middle
    quarters (the first is warm-up). A metric that keeps growing exceeds the middle's max by what it grows
    in a quarter; one that moves within a bound (a cache filling and emptying) does not."""
    values = [s[metric] for s in samples]
    if values[0] is None:
        return True, None
    q = max(1, len(values) // 4)
    middle, last = values[q:len(values) - q] or values[:1], values[-q:]
    base, end = max(middle), max(last)
    tail = samples[q:]
    slope = 0.0
    if len(tail) >= 2:  # least squares, per 1000 steps
        xs, ys = [s["step"] for s in tail], [s[metric] for s in tail]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    fig = dict(start=values[0], base=base, end=end, min=min(values), max=max(values), slope_per_1000=slope,
               tolerance=tolerance, window=(samples[min(q, len(samples) - 1)]["step"],
                                            samples[max(0, len(samples) - q - 1)]["step"],
                                            samples[-q]["step"], samples[-1]["step"]))
    return end - base <= tolerance, fig


def check(results, args):
    tolerances = dict(allocated=args.allocated_tolerance, reserved=args.reserved_tolerance * MIB,
                      rss=args.rss_tolerance * MIB, fds=0, threads=0)
    failures = []
    for r in results:
        if "failed" in r:
            failures.append(f"{r['name']}: the phase failed: {r['failed']}")
            continue
        r["growth"] = {}
        for m in METRICS:
            ok, fig = growth(r["samples"], m, tolerances[m])
            if fig is None:
                continue
            r["growth"][m] = fig
            if not ok:
                a, b, c, d = fig["window"]
                failures.append(f"{r['name']}: {m} grows: max {_fmt(m, fig['end'])} over steps {c}-{d} against "
                                f"{_fmt(m, fig['base'])} over steps {a}-{b} (tolerance {_fmt(m, fig['tolerance'])}; "
                                f"{_fmt(m, fig['slope_per_1000'])} per 1000 steps)")
        if r["faults"] and r["samples"][-1]["faults"] == 0:
            failures.append(f"{r['name']}: no fault was injected (raise --fault-rate or --steps)")
    by = {r["name"]: r for r in results if "failed" not in r}
    if "train" in by and "train+faults" in by and by["train"]["digest"] != by["train+faults"]["digest"]:
        failures.append(f"train+faults ends with parameters {by['train+faults']['digest']}, the fault-free run "
                        f"with {by['train']['digest']}: a retried step did not redo what it had failed")
    return failures


def _fmt(metric, v):
    if v is None:
        return "—"
    if metric in ("allocated", "reserved"):
        return f"{v / 1024:.1f} KiB" if abs(v) < MIB else f"{v / MIB:.2f} MiB"
    if metric == "rss":
        return f"{v / MIB:.1f} MiB"
    return f"{v:g}" if isinstance(v, float) else str(v)


def table(results):
    head = ("| phase | steps | s | ms/step | faults injected | errors retried | allocated | reserved | RSS "
            "| RSS slope per 1000 steps | fds | threads |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in results:
        if "failed" in r:
            lines.append(f"| {r['name']} | failed | {r['seconds']:.0f} |" + " |" * 9)
            continue
        s, g = r["samples"], r["growth"]

        def cell(m):
            if m not in g:
                return "—"
            f = g[m]
            return f"{_fmt(m, f['start'])} → {_fmt(m, f['base'])} → {_fmt(m, f['end'])}"

        last = s[-1]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items()))
        faults = f"{last['faults']} ({kinds})" if r["faults"] else "off"
        ms = 1000 * (last["seconds"] - s[0]["seconds"]) / max(1, last["step"])
        errors = ", ".join(f"{k} {n}" for k, n in sorted(r.get("error_kinds", {}).items()))
        errors = f"{r['errors']} ({errors})" if errors else str(r["errors"])
        lines.append(f"| {r['name']} | {last['step']} | {r['seconds']:.0f} | {ms:.2f} | {faults} | {errors} "
                     f"| {cell('allocated')} | {cell('reserved')} | {cell('rss')} "
                     f"| {g['rss']['slope_per_1000'] / 1024:+.1f} KiB | {cell('fds')} | {cell('threads')} |")
    return "\n".join(lines)


def machine():
    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = "?"
    return dict(cpu=cpu, cores=os.cpu_count(), python=platform.python_version(), commit=rev,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, help="training steps / inferences per phase (default 2000; --quick: 300)")
    ap.add_argument("--every", type=int, help="sample every N steps (default 100; --quick: 25)")
    ap.add_argument("--fault-rate", type=float,
                    help="rate of alloc, launch, copy and sync faults in the fault phases (default 0.001; "
                         "--quick: 0.01)")
    ap.add_argument("--fault-spec", help="a HAL_FAULTS spec instead (docs/layers.md)")
    ap.add_argument("--seed", type=int, default=1, help="the fault layer's and the model's seed")
    ap.add_argument("--phases", default="train,onnx", help="comma-separated: train, onnx")
    ap.add_argument("--no-faults", action="store_true", help="skip the fault phases")
    ap.add_argument("--session-every", type=int, default=100,
                    help="onnx: a new InferenceSession every N runs (0: one session)")
    ap.add_argument("--quick", action="store_true", help="CI: 300 steps sampled every 25, fault rate 0.01")
    ap.add_argument("--allocated-tolerance", type=int, default=64 * 1024,
                    help="bytes allocated device memory may grow (default 64 KiB)")
    ap.add_argument("--reserved-tolerance", type=float, default=2,
                    help="MiB reserved device memory may grow (default 2: the allocator's large granule)")
    ap.add_argument("--rss-tolerance", type=float, default=16, help="MiB RSS may grow (default 16)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per phase")
    ap.add_argument("--json", help="also write the samples and figures here")
    ap.add_argument("--child", choices=("train", "onnx"), help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--expected", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(args)
    for name, default, quick in (("steps", 2000, 300), ("every", 100, 25), ("fault_rate", 0.001, 0.01)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else default)
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - {"train", "onnx"}
    if unknown:
        ap.error(f"unknown phase(s) {sorted(unknown)}: choose from train, onnx")

    sys.path.insert(0, str(ONNX_TESTS))
    from onnx_testing import write_config  # a hal.toml naming the build's CPU plugin ($HAL_BUILD_DIR)

    with tempfile.TemporaryDirectory(prefix="hal-soak-") as tmp:
        tmp = pathlib.Path(tmp)
        args.config = write_config(tmp, "cpu")
        args.expected = tmp / "onnxruntime.npz"
        if "onnx" in phases:
            write_expected(args.expected)
        results = []
        for phase in phases:
            for faults in (False,) if args.no_faults else (False, True):
                r = run_phase(phase, faults, args, tmp)
                print(f"{r['name']}: {'FAILED' if 'failed' in r else 'done'} in {r['seconds']:.0f} s",
                      file=sys.stderr, flush=True)
                results.append(r)
    failures = check(results, args)
    info = machine()
    spec = args.fault_spec or fault_spec(args.fault_rate, args.seed)
    print(f"Soak: {args.steps} steps per phase, sampled every {args.every}; faults: HAL_FAULTS='{spec}'; "
          f"{info['cpu']}, {info['cores']} cores, commit {info['commit']}, {info['date']}\n")
    print("Cells: first sample → max of the middle half → max of the last quarter.\n")
    print(table(results))
    for r in results:
        extra = {k: r[k] for k in ("final_loss", "digest", "final_sum") if k in r}
        if extra:
            print(f"\n{r['name']}: " + ", ".join(f"{k} {v}" for k, v in extra.items()), end="")
    print()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(dict(machine=info, steps=args.steps, every=args.every,
                                                           fault_spec=spec, results=results, failures=failures),
                                                      indent=1))
    if failures:
        print("\nFAIL:\n" + "\n".join("- " + f for f in failures))
        return 1
    print("\nOK: memory, descriptors and threads flat in every phase")
    return 0


if __name__ == "__main__":
    sys.exit(main())
