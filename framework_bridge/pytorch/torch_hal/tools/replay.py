"""Re-runs captured op calls (OpCapture, OpAutoCompare's saved mismatches) offline.

    python -m torch_hal.tools.replay DIR [--acc-check] [--time] [--runs N] [--device hal:1] [--op REGEX]

DIR is a capture (the directory holding index.json) or one call in it (DIR/<op>/<seq>). Each call's
captured inputs are placed on the device with their strides, the op runs, and its result (and the
arguments it writes) must equal the captured ones exactly; random ops and ops with uninitialized
outputs (empty) are compared by shape and dtype only. --acc-check also compares against the CPU in
float64 (OpAutoCompare's tolerances, HAL_AUTOCOMPARE_TOLERANCE_<DTYPE>); --time times RUNS runs with HAL
events. Exits 1 when a call differs. Which plugin runs "hal" is hal.toml's business ($HAL_CONFIG).
"""
import argparse
import dataclasses
import json
import os
import statistics
import sys

import torch

from . import _compare, _ops, _tensors
from .capture import FORMAT, VERSION


class ReplayError(RuntimeError):
    """A capture that cannot be replayed; the message names the file."""


def load_index(root):
    """index.json of the capture at ROOT, checked: ReplayError naming the file when it is missing,
    unreadable, or of another format or version."""
    path = os.path.join(root, "index.json")
    try:
        with open(path) as f:
            index = json.load(f)
    except FileNotFoundError:
        raise ReplayError(f"{path}: no such file (not a capture directory)") from None
    except (OSError, ValueError) as e:
        raise ReplayError(f"{path}: cannot be read: {e}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise ReplayError(f"{path}: not a {FORMAT} index")
    if index.get("version") != VERSION:
        raise ReplayError(f"{path}: capture format version {index.get('version')!r}; this torch_hal reads "
                          f"version {VERSION}")
    return index


def _load(path):
    if not os.path.isfile(path):
        raise ReplayError(f"{path}: no such file (the capture is incomplete)")
    try:
        return _tensors.decode(torch.load(path, weights_only=False))
    except Exception as e:  # noqa: BLE001 (any unpickling failure: name the file)
        raise ReplayError(f"{path}: cannot be loaded: {e}") from None


def _entries(target):
    """(capture root, the entries under TARGET): a whole capture or one call directory in it."""
    target = os.path.abspath(target)
    root = target
    while not os.path.exists(os.path.join(root, "index.json")):
        parent = os.path.dirname(root)
        if parent == root:
            raise ReplayError(f"{os.path.join(target, 'index.json')}: no such file (not a capture directory)")
        root = parent
    entries = load_index(root)["entries"]
    if root != target:
        rel = os.path.relpath(target, root)
        entries = [e for e in entries if e["dir"] == rel or e["dir"].startswith(rel + os.sep)]
        if not entries:
            raise ReplayError(f"{target}: not a call of the capture {root}")
    return root, entries


@dataclasses.dataclass
class Replayed:
    op: str
    seq: int
    phase: str
    exact: bool
    why: str = ""
    acc: list = None  # OutputDiffs against the float64 CPU reference (--acc-check)
    times_ms: list = None  # one per run (--time)

    @property
    def ok(self):
        return self.exact and all(d.ok for d in self.acc or [])


def _run(func, inputs, device):
    args, kwargs = _tensors.place((inputs["args"], inputs["kwargs"]), inputs["devices"], device)
    out = func(*args, **kwargs)
    every = _ops.schema_args(func, args, kwargs)
    return args, kwargs, out, {i: every[i] for i in _ops.written_args(func)}


def _time(func, inputs, device, runs):
    times = []
    for _ in range(runs + 1):  # the first run warms up caches and is not counted
        args, kwargs = _tensors.place((inputs["args"], inputs["kwargs"]), inputs["devices"], device)
        start, end = torch.hal.Event(enable_timing=True), torch.hal.Event(enable_timing=True)
        start.record()
        func(*args, **kwargs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times[1:]


def replay_entry(root, entry, device="hal", acc_check=False, time=False, runs=10):
    """Replays one index entry on DEVICE; a Replayed."""
    func = _ops.resolve(entry["op"])
    path = os.path.join(root, entry["dir"])
    inputs = _load(os.path.join(path, "inputs.pt"))
    results = "grads.pt" if "grads.pt" in entry["files"] else "outputs.pt"
    captured = _load(os.path.join(path, results))
    _, _, out, written = _run(func, inputs, device)
    got = _tensors.to_device((out, written), "cpu", only_from="hal")
    want = (captured["result"], captured["written"])
    if entry["random"] or entry["uninitialized"]:
        meta = lambda t: (t.dtype, t.shape) if isinstance(t, torch.Tensor) else t  # noqa: E731
        exact, why = _tensors.same(torch.utils._pytree.tree_map(meta, got), torch.utils._pytree.tree_map(meta, want))
    else:
        exact, why = _tensors.same(got, want)
    r = Replayed(entry["op"], entry["seq"], entry["phase"], exact, why)
    if acc_check and not (entry["random"] or entry["uninitialized"]):
        ref, _, _ = _compare.reference(func, inputs["args"], inputs["kwargs"])
        r.acc = _compare.compare(out, ref, _compare.tolerances(), func,
                                 lambda: _compare.reference(func, inputs["args"], inputs["kwargs"], widen=False)[0])
    if time:
        r.times_ms = _time(func, inputs, device, runs)
    return r


def replay(target, device="hal", acc_check=False, time=False, runs=10, op=None):
    """Replays every call under TARGET (a capture or one call directory); a list of Replayed.
    OP (a regex) keeps only calls whose op id ("aten.add.Tensor") it matches somewhere."""
    import re

    root, entries = _entries(target)
    if op is not None:
        entries = [e for e in entries if re.search(op, e["op"])]
    with torch.hal.device(torch.device(device)):  # events (--time) record on the current device's stream
        return [replay_entry(root, e, device, acc_check, time, runs) for e in entries]


def _line(r):
    text = f"{r.op:40s} #{r.seq:<5d} {r.phase:8s} {'same' if r.exact else 'DIFFERENT: ' + r.why}"
    for d in r.acc or []:
        text += (f"  out{d.index} {'ok' if d.ok else 'MISMATCH'} max_abs={d.max_abs:.3g} max_rel={d.max_rel:.3g}"
                 + (" NaN/Inf" if d.nan_inf else "") + (f" {d.why}" if d.why else ""))
    if r.times_ms:
        text += f"  {statistics.median(r.times_ms):.4f} ms (median of {len(r.times_ms)})"
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_hal.tools.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="a capture directory (with index.json) or one call directory in it")
    ap.add_argument("--acc-check", action="store_true", help="also compare against the CPU in float64")
    ap.add_argument("--time", action="store_true", help="time each call with HAL events")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per call (default 10)")
    ap.add_argument("--device", default="hal", help='device to replay on (default "hal")')
    ap.add_argument("--op", help="only calls whose op id matches this regex")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    import torch_hal  # noqa: F401  (registers the "hal" device)

    try:
        results = replay(args.dir, args.device, args.acc_check, args.time, args.runs, args.op)
    except ReplayError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in results:
        print(_line(r))
    bad = sum(not r.ok for r in results)
    print(f"{len(results) - bad} of {len(results)} calls replayed {'exactly' if not args.acc_check else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
