#!/usr/bin/env python3
"""Turns hal_runtime_overhead_bench JSON output into the docs/performance.md table.

  hal_runtime_overhead_bench --benchmark_repetitions=10 \
      --benchmark_out=overhead.json --benchmark_out_format=json ...
  bench/overhead_table.py overhead.json

Uses the median aggregate of each benchmark: wall time in ns per call, plus
the same difference/ratio computed from the calling thread's CPU time.
"""
import json
import sys


def medians(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        out[name] = (b["real_time"] * scale, b["cpu_time"] * scale)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    m = medians(sys.argv[1])
    print("| operation | runtime API (ns) | direct C table (ns) | core overhead (ns) "
          "| overhead, CPU time (ns) |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(m):
        if "/RuntimeApi" not in name:
            continue
        direct = name.replace("/RuntimeApi", "/DirectTable")
        if direct not in m:
            continue
        (a, a_cpu), (d, d_cpu) = m[name], m[direct]
        label = name.replace("/RuntimeApi", "")
        print(f"| {label} | {a:.1f} | {d:.1f} | {a - d:+.1f} | {a_cpu - d_cpu:+.1f} |")
    print()
    print("| allocation + free | caching allocator (ns) | raw plugin (ns) | caching / raw "
          "| caching / raw, CPU time |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(m, key=lambda n: (len(n), n)):
        if not name.startswith("BM_AllocFree/CachingAllocator/"):
            continue
        raw = name.replace("CachingAllocator", "RawPlugin")
        if raw not in m:
            continue
        (c, c_cpu), (r, r_cpu) = m[name], m[raw]
        size = int(name.rsplit("/", 1)[1])
        label = f"{size // 1024} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
        print(f"| {label} | {c:.1f} | {r:.1f} | {c / r:.2f} | {c_cpu / r_cpu:.2f} |")


if __name__ == "__main__":
    main()
