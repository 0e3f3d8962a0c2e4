"""HAL launches in torch.profiler: every catalog op the bridge launches is a range named
"hal::<catalog op>" (e.g. "hal::matmul") whose kwinputs (record_shapes=True) carry the plugin and device;
on the default stream (synchronous) the range's duration is the op's device time. The ranges exist only
while a profiler runs. summary() is the hal-info-style table of the top catalog ops of a profile.

    with torch.profiler.profile() as prof:
        train_step()
    torch_hal.tools.profiler.summary(prof)
    prof.export_chrome_trace("trace.json")     # the "hal::" ranges, nested in their aten ops
"""
import sys

PREFIX = "hal::"


def top_ops(prof, top=10):
    """[(catalog op, calls, total ms, mean ms)] of PROF's "hal::" ranges, largest total first."""
    rows = [(e.key[len(PREFIX):], e.count, e.cpu_time_total / 1e3, e.cpu_time_total / 1e3 / e.count)
            for e in prof.key_averages() if e.key.startswith(PREFIX)]
    rows.sort(key=lambda r: -r[2])
    return rows[:top] if top else rows


def summary(prof, top=10, stream=sys.stdout):
    """Prints top_ops(PROF, TOP) with each op's share of the HAL launch time to STREAM (None: silent);
    returns the rows."""
    rows = top_ops(prof, 0)
    if stream is None:
        return rows[:top]
    total = sum(r[2] for r in rows) or 1.0
    print(f"{'catalog op':24s} {'calls':>7s} {'total ms':>10s} {'mean ms':>9s} {'share':>6s}", file=stream)
    for op, calls, tot, mean in rows[:top]:
        print(f"{op:24s} {calls:7d} {tot:10.3f} {mean:9.4f} {100 * tot / total:5.1f}%", file=stream)
    print(f"{sum(r[1] for r in rows)} HAL launches of {len(rows)} catalog ops, {sum(r[2] for r in rows):.3f} ms",
          file=stream)
    return rows[:top]
