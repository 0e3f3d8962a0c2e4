"""OpTimeMeasure: synchronised device time of each selected op on "hal", from HAL events.

    with torch_hal.tools.OpTimeMeasure(csv="op_time.csv") as t:
        train_step()
    # prints the table sorted by total time; t.rows() / op_time.csv: op, phase, calls, total/mean/max ms,
    # input shapes

Each call runs between two events recorded on the current stream of its device and waits for the
second (torch.hal.Event(enable_timing=True), elapsed_time), so the time is the device's, forward and
backward apart. On the default stream (synchronous) that is the launch and the kernel.
"""
import collections
import csv as _csv
import os
import sys

import torch

from . import _ops
from ._tool import OpTool

COLUMNS = ["op", "phase", "calls", "total_ms", "mean_ms", "max_ms", "shapes"]


class OpTimeMeasure(OpTool):
    """Times the selected ops (HAL_OPTIMEMEASURE_LIST / HAL_OPTIMEMEASURE_DISABLE_LIST, or ops= /
    disable=). At stop() prints the table to STREAM (None: silent) and writes CSV (a path; default
    $HAL_OPTIMEMEASURE_CSV, else "op_time_measure.csv"; "" for none). ``calls`` holds (op, phase, ms,
    shapes) per call."""

    NAME = "OPTIMEMEASURE"

    def __init__(self, ops=None, disable=None, csv=None, stream=sys.stdout, max_shapes=3):
        super().__init__(ops, disable)
        self.csv = os.environ.get("HAL_OPTIMEMEASURE_CSV", "op_time_measure.csv") if csv is None else csv
        self.stream, self.max_shapes = stream, max_shapes
        self.calls = []
        self._events = {}  # device index -> (start, end), reused

    def _pair(self, index):
        pair = self._events.get(index)
        if pair is None:
            with torch.hal.device(index):
                pair = (torch.hal.Event(enable_timing=True), torch.hal.Event(enable_timing=True))
            self._events[index] = pair
        return pair

    def on_op(self, func, args, kwargs):
        dev = _ops.hal_device(args, kwargs)
        if dev.index is None:
            dev = torch.device("hal", torch.hal.current_device())
        start, end = self._pair(dev.index)
        stream = torch.hal.current_stream(dev)
        start.record(stream)
        out = func(*args, **kwargs)
        end.record(stream)
        end.synchronize()
        shapes = tuple(tuple(x.shape) for x in _ops.tensors(args, kwargs))
        self.calls.append((_ops.op_id(func), _ops.phase()[0], start.elapsed_time(end), shapes))
        return out

    def rows(self):
        """One dict per (op, phase), sorted by total time (largest first); shapes: the first MAX_SHAPES
        distinct input-shape lists."""
        acc = collections.OrderedDict()
        for op, ph, ms, shapes in self.calls:
            r = acc.setdefault((op, ph), {"op": op, "phase": ph, "calls": 0, "total_ms": 0.0, "max_ms": 0.0,
                                          "shapes": []})
            r["calls"] += 1
            r["total_ms"] += ms
            r["max_ms"] = max(r["max_ms"], ms)
            if shapes not in r["shapes"] and len(r["shapes"]) < self.max_shapes:
                r["shapes"].append(shapes)
        rows = sorted(acc.values(), key=lambda r: -r["total_ms"])
        for r in rows:
            r["mean_ms"] = r["total_ms"] / r["calls"]
            r["shapes"] = "; ".join(" ".join("x".join(map(str, s)) or "scalar" for s in sh) for sh in r["shapes"])
        return rows

    def total_ms(self):
        return sum(ms for _, _, ms, _ in self.calls)

    def _on_stop(self):
        rows = self.rows()
        if self.csv:
            with open(self.csv, "w", newline="") as f:
                w = _csv.DictWriter(f, fieldnames=COLUMNS)
                w.writeheader()
                for r in rows:
                    w.writerow({k: (f"{r[k]:.6f}" if k.endswith("_ms") else r[k]) for k in COLUMNS})
        if self.stream is not None:
            print(f"{'op':36s} {'phase':8s} {'calls':>6s} {'total ms':>10s} {'mean ms':>9s} {'max ms':>9s}  shapes",
                  file=self.stream)
            for r in rows:
                print(f"{r['op']:36s} {r['phase']:8s} {r['calls']:6d} {r['total_ms']:10.4f} {r['mean_ms']:9.4f} "
                      f"{r['max_ms']:9.4f}  {r['shapes']}", file=self.stream)
            print(f"{len(self.calls)} calls, {self.total_ms():.3f} ms", file=self.stream)
