#!/usr/bin/env python3
"""The performance report in one command: runs the benchmark suite against its peers in one run
and writes a summary people can read at a glance (issue 36 item 6).

    HAL_BUILD_DIR=<build> PYTHONPATH=<build>/python python bench/report.py [--out docs/performance]
    ... bench/report.py --quick --out /tmp/report      # CI: small sizes, one round (it must not rot)

Measured first, in this process: the machine's peak as it runs, not as its nominal clock says
(float32 GEMM GFLOP/s of torch.mm, the best of a few square sizes, and copy GB/s of a large
torch copy_, read + write). Then each benchmark script as a child process writing JSON:

  kernels      bench/ops_vs_torch.py            HAL ops vs PyTorch CPU (GB/s, GFLOP/s)
  sweep        (here)                           add and mm throughput against size, HAL vs PyTorch
  eager        bench/torch_hal_bench.py         training steps/s on device="hal" vs PyTorch CPU
  compiled     bench/torch_hal_compile_bench.py torch.compile(backend="hal") (+ compiled AdamW step)
                                                vs eager "hal" and vs inductor on CPU
  onnx         bench/onnx_bench.py              hal.onnx vs onnxruntime
  collectives  bench/collectives_bench.py       all_reduce, "hal" backend vs gloo
  llm          bench/llm_bench.py               decode tokens/s and LLM kernels vs PyTorch

OUT gets summary.md (one table: every figure, its peer's, the ratio — > 1 means HAL is faster —
and the fraction of the machine's measured peak where one applies; with the date, machine and
versions), summary.json (the same rows), ratios.svg (every ratio on one axis) and sweep.svg
(throughput against size; the sweep's figures are in summary.json, not the table). A benchmark that fails fails the report (exit 1) after the others ran,
naming it.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def timeit(fn):
    """Median seconds per call of FN (ops_vs_torch's timer, shorter: the report runs many)."""
    from ops_vs_torch import timeit as bench_timeit  # bench/ is this script's directory: on sys.path

    return bench_timeit(fn, min_time=0.05, repeats=5)


def machine_peak(torch, quick):
    """Measured float32 GEMM GFLOP/s (the best of square torch.mm sizes) and copy GB/s (torch copy_,
    read + write): the best over working sets from L2 to beyond the last-level cache (what bounds a
    kernel depends on where its data lives), and the DRAM figure (a working set of 2 GiB) apart."""
    gemm = 0.0
    for n in ((256, 512) if quick else (512, 1024, 2048)):
        a, b = torch.randn(n, n), torch.randn(n, n)
        out = torch.empty(n, n)
        gemm = max(gemm, 2 * n ** 3 / timeit(lambda: torch.mm(a, b, out=out)) / 1e9)
    copy = 0.0
    for elems in ((1 << 20, 4 << 20) if quick else (1 << 20, 4 << 20, 16 << 20, 64 << 20)):
        src = torch.ones(elems)
        dst = torch.empty_like(src)
        copy = max(copy, 2 * src.nbytes / timeit(lambda: dst.copy_(src)) / 1e9)
    src = torch.ones((16 if quick else 256) << 20)  # quick: 64 MiB, not beyond every cache
    dst = torch.empty_like(src)
    dram = 2 * src.nbytes / timeit(lambda: dst.copy_(src)) / 1e9
    return {"gemm_gflops": gemm, "copy_gb_s": copy, "dram_copy_gb_s": dram, "dram_working_set_mib": 2 * src.nbytes >> 20}


def sweep(torch, plugin, quick):
    """add (GB/s) and mm (GFLOP/s) against size, HAL (hal.Op on device memory) vs PyTorch CPU (out=)."""
    import hal
    from hal import torch_util as tu

    rt = hal.Runtime(plugins=[plugin])
    dev = rt.device("cpu")
    rows = []
    add = hal.Op(dev, "add")
    mm = hal.Op(dev, "mm")
    for k in range(12, 21 if quick else 25, 2):
        n = 1 << k
        a, b, o = torch.randn(n), torch.randn(n), torch.empty(n)
        ha, hb, ho = tu.to_hal(dev, a), tu.to_hal(dev, b), tu.to_hal(dev, o)
        t_hal = timeit(lambda: add([ha, hb], [ho], {}))
        t_torch = timeit(lambda: torch.add(a, b, out=o))
        rows.append({"op": "add", "size": n, "unit": "GB/s", "hal": 12 * n / t_hal / 1e9,
                     "torch": 12 * n / t_torch / 1e9})
    for n in ((32, 64, 128) if quick else (32, 64, 128, 256, 512, 1024)):
        a, b, o = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
        ha, hb, ho = tu.to_hal(dev, a), tu.to_hal(dev, b), tu.to_hal(dev, o)
        t_hal = timeit(lambda: mm([ha, hb], [ho], {}))
        t_torch = timeit(lambda: torch.mm(a, b, out=o))
        rows.append({"op": "mm", "size": n, "unit": "GFLOP/s", "hal": 2 * n ** 3 / t_hal / 1e9,
                     "torch": 2 * n ** 3 / t_torch / 1e9})
    return rows


def run_child(name, argv, out_json, env, log):
    """Runs benchmark NAME (ARGV, which writes OUT_JSON); its output goes to LOG. The parsed JSON,
    or None when it failed."""
    t0 = time.perf_counter()
    print(f"[report] {name}: {' '.join(str(a) for a in argv[1:])}", flush=True)
    with open(log, "w") as f:
        p = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    if p.returncode != 0 or not out_json.exists():
        tail = pathlib.Path(log).read_text().strip().splitlines()[-15:]
        print(f"[report] {name} FAILED (exit {p.returncode}); last lines of {log}:\n  " + "\n  ".join(tail))
        return None
    print(f"[report] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(out_json.read_text())


def benchmarks(args, build, plugin):
    """{name: argv} of the child benchmarks (each writes its JSON to the path after --json)."""
    py = sys.executable
    q = args.quick
    t = str(args.threads)
    return {
        "kernels": [py, BENCH / "ops_vs_torch.py", "--plugin", plugin, "--rounds", "1" if q else "3"]
        + (["--only", "add,softmax"] if q else []),
        "eager": [py, BENCH / "torch_hal_bench.py", "--plugin", plugin, "--threads", t]
        + (["--steps", "2", "--rounds", "1", "--warmup", "1"] if q else []),
        "compiled": [py, BENCH / "torch_hal_compile_bench.py", "--plugin", plugin, "--threads", "1"]
        + (["--models", "mlp", "--steps", "5", "--rounds", "1"] if q else ["--steps", "100", "--rounds", "3"]),
        "onnx": [py, BENCH / "onnx_bench.py", "--threads", t] + (["--models", "mlp", "--batches", "1"] if q else []),
        "collectives": [py, BENCH / "collectives_bench.py"]
        + (["--worlds", "2", "--reps", "3", "--sizes", "4096,1048576"] if q else []),
        "llm": [py, BENCH / "llm_bench.py", "--plugin", plugin, "--threads", t]
        + (["--parts", "1", "--sizes", "tiny", "--runs", "1"] if q else []),
    }


def summary_rows(peak, results):
    """One row per figure: area, benchmark, HAL figure, peer figure, unit, ratio (> 1: HAL faster),
    fraction of the machine's measured peak (or None)."""
    rows = []

    def add(area, name, hal, peer, unit, ratio, peak_fraction=None, peer_name=""):
        rows.append({"area": area, "benchmark": name, "hal": hal, "peer": peer, "peer_name": peer_name, "unit": unit,
                     "ratio": ratio, "of_peak": peak_fraction})

    def fraction(rate, unit):
        return rate / peak["gemm_gflops"] if unit == "GFLOP/s" else rate / peak["copy_gb_s"] if unit == "GB/s" else None

    for r in (results.get("kernels") or {}).get("rows", []):
        add("kernels", r["name"], r["hal_rate"], r["torch_rate"], r["unit"], r["ratio"], fraction(r["hal_rate"], r["unit"]),
            "PyTorch CPU")
    for r in (results.get("eager") or {}).get("training", []):
        if "error" not in r:
            add("eager training", f"{r['model']} {r['optim']}", r["hal_steps_per_s"], r["cpu_steps_per_s"], "steps/s",
                r["ratio"], None, "PyTorch CPU")
    for r in results.get("compiled") or []:
        if r.get("compiled_hal_step") and r.get("eager_hal"):
            add("compiled training", f"{r['model']} (+AdamW step) vs eager hal", r["compiled_hal_step"], r["eager_hal"],
                "steps/s", r["compiled_hal_step"] / r["eager_hal"], None, "eager hal")
        if r.get("compiled_hal_step") and r.get("inductor_cpu_step"):
            add("compiled training", f"{r['model']} (+AdamW step) vs inductor", r["compiled_hal_step"],
                r["inductor_cpu_step"], "steps/s", r["compiled_hal_step"] / r["inductor_cpu_step"], None, "inductor CPU")
    for r in results.get("onnx") or []:
        add("onnx", f"{r['model']} batch {r['batch']}", r["hal_ms"], r["ort_ms"], "ms", r["ratio"], None, "onnxruntime")
    for r in results.get("collectives") or []:
        add("collectives", f"all_reduce world {r['world']} {r['bytes']} B", r["hal_s"] * 1e6, r["gloo_s"] * 1e6, "µs",
            r["ratio"], r["hal_busbw_gb_s"] / peak["copy_gb_s"], "gloo")
    for k, r in (results.get("llm") or {}).items():
        if k.startswith("decode_"):
            add("llm", k[len("decode_"):].replace("_", "/") + " decode", r["hal_tok_s"], r["torch_tok_s"], "tokens/s",
                r["ratio"], None, "PyTorch CPU")
        elif isinstance(r, dict) and "hal_gb_s" in r:
            add("llm", f"{k} kernel", r["hal_gb_s"], None, "GB/s", r["torch_ms"] / r["hal_ms"],
                r["hal_gb_s"] / peak["copy_gb_s"], "PyTorch CPU")
    return rows


def write_summary(out, meta, peak, rows, failed):
    def num(x):
        return "–" if x is None else f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"

    lines = [
        "# Performance summary",
        "",
        f"Measured {meta['date']} on {meta['machine']} ({meta['cores']} cores), {meta['threads']} threads unless a "
        f"benchmark says otherwise; torch {meta['torch']}, onnxruntime {meta['onnxruntime']}, Python {meta['python']}; "
        f"HAL at {meta['commit']}. Written by `bench/report.py`{' --quick (small sizes, one round)' if meta['quick'] else ''}; "
        "the detail and its history are in [`docs/performance.md`](../performance.md).",
        "",
        f"**This machine, measured:** float32 GEMM **{peak['gemm_gflops']:.1f} GFLOP/s** (torch.mm, best square size), "
        f"copy **{peak['copy_gb_s']:.1f} GB/s** (torch copy_, read + write, the best working set from 4 MiB up; "
        f"{peak['dram_copy_gb_s']:.1f} GB/s with a {peak['dram_working_set_mib']} MiB working set). \"Of peak\" is a figure's fraction of the one "
        "that bounds it (GFLOP/s of the GEMM figure, GB/s of the copy figure); working sets that stay in the caches "
        "can exceed the copy figure.",
        "",
        "Ratio > 1: HAL is faster than the peer (time ratios are peer time / HAL time).",
        "",
        "![ratios](ratios.svg)",
        "",
        "| area | benchmark | HAL | peer | unit | peer is | ratio | of peak |",
        "|---|---|---:|---:|---|---|---:|---:|",
    ]
    for r in rows:
        of_peak = "" if r["of_peak"] is None else f"{100 * r['of_peak']:.0f} %"
        lines.append(f"| {r['area']} | {r['benchmark']} | {num(r['hal'])} | {num(r['peer'])} | {r['unit']} | "
                     f"{r['peer_name']} | **{r['ratio']:.2f}×** | {of_peak} |")
    if failed:
        lines += ["", "Not measured (failed): " + ", ".join(failed)]
    lines += ["", "![throughput against size](sweep.svg)", ""]
    (out / "summary.md").write_text("\n".join(lines))


def plot(out, rows, sweep_rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: small files, searchable labels
    matplotlib.rcParams["svg.hashsalt"] = "hal"  # stable ids: a re-run changes the file only where figures change
    ratio_rows = rows
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(ratio_rows) + 1.2))
    labels = [f"{r['area']}: {r['benchmark']}" for r in ratio_rows]
    values = [r["ratio"] for r in ratio_rows]
    colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
    ax.barh(range(len(values)), values, color=colors)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("HAL vs peer (> 1: HAL faster), log scale")
    fig.tight_layout()
    fig.savefig(out / "ratios.svg", metadata={"Date": None})
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, op in zip(axes, ("add", "mm")):
        rs = [r for r in sweep_rows if r["op"] == op]
        if not rs:
            continue
        ax.plot([r["size"] for r in rs], [r["hal"] for r in rs], "o-", label="HAL (CPU plugin)")
        ax.plot([r["size"] for r in rs], [r["torch"] for r in rs], "s--", label="PyTorch CPU")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements" if op == "add" else "n (n x n x n)")
        ax.set_ylabel(rs[0]["unit"])
        ax.set_title(f"{op} float32")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "sweep.svg", metadata={"Date": None})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one round (CI)")
    ap.add_argument("--out", help="output directory (default: docs/performance; with --quick a temporary one)")
    ap.add_argument("--build", default=os.environ.get("HAL_BUILD_DIR"), help="the build tree (default $HAL_BUILD_DIR)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--from-json", help="re-render summary.md and the plots from a summary.json (no measuring)")
    ap.add_argument("--only", help="benchmarks to run, comma-separated (kernels, sweep, eager, compiled, onnx, "
                                   "collectives, llm); default all")
    args = ap.parse_args()
    if args.from_json:
        data = json.loads(pathlib.Path(args.from_json).read_text())
        out = pathlib.Path(args.out) if args.out else pathlib.Path(args.from_json).parent
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, data["meta"], data["peak"], data["rows"], data["failed"])
        plot(out, data["rows"], data.get("sweep") or [])
        print(f"[report] re-rendered {out}/summary.md, ratios.svg, sweep.svg from {args.from_json}")
        return 0
    if not args.build:
        ap.error("give --build or set HAL_BUILD_DIR")
    build = pathlib.Path(args.build).resolve()
    plugin = build / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    if not plugin.exists():
        ap.error(f"no CPU plugin at {plugin}: build first")
    out = pathlib.Path(args.out) if args.out else (pathlib.Path(tempfile.mkdtemp(prefix="hal-report-")) if args.quick
                                                    else REPO / "docs" / "performance")
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="hal-report-work-"))
    wanted = set(args.only.split(",")) if args.only else None
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(build / "python"))  # the hal package of this build, for the sweep
    import torch

    torch.set_num_threads(args.threads)
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = "absent"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    model = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or platform.machine())
    meta = {"date": datetime.date.today().isoformat(), "machine": model, "cores": os.cpu_count(),
            "threads": args.threads, "torch": torch.__version__, "onnxruntime": ort_version,
            "python": platform.python_version(), "commit": commit, "quick": args.quick}

    peak = machine_peak(torch, args.quick)
    print(f"[report] machine: GEMM {peak['gemm_gflops']:.1f} GFLOP/s, copy {peak['copy_gb_s']:.1f} GB/s "
          f"(DRAM {peak['dram_copy_gb_s']:.1f} GB/s)", flush=True)
    results, failed = {}, []
    if wanted is None or "sweep" in wanted:
        results["sweep"] = sweep(torch, str(plugin), args.quick)
    env = dict(os.environ, HAL_BUILD_DIR=str(build), HAL_FALLBACK_WARN="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(build / "python"), os.environ.get("PYTHONPATH")])))
    env.pop("HAL_CONFIG", None)
    for name, argv in benchmarks(args, build, str(plugin)).items():
        if wanted is not None and name not in wanted:
            continue
        out_json = work / f"{name}.json"
        got = run_child(name, argv + ["--json", str(out_json)], out_json, env, work / f"{name}.log")
        if got is None:
            failed.append(name)
        else:
            results[name] = got
    rows = summary_rows(peak, results)
    (out / "summary.json").write_text(json.dumps({"meta": meta, "peak": peak, "rows": rows,
                                                  "sweep": results.get("sweep") or [], "failed": failed}, indent=1))
    write_summary(out, meta, peak, rows, failed)
    plot(out, rows, results.get("sweep") or [])
    print(f"[report] wrote {out}/summary.md, summary.json, ratios.svg, sweep.svg ({len(rows)} rows)")
    if failed:
        print(f"[report] FAILED: {', '.join(failed)} (logs in {work})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
