"""OpFallback: the selected ops run on the CPU fallback inside a block (a scoped HAL_FORCE_FALLBACK_OPS),
and bisect_fallback: the smallest set of ops whose fallback makes a check pass.

    with torch_hal.tools.OpFallback(ops="mm,add"):
        train_step()          # mm and add (every overload) run on the CPU; counted in fallback_stats()
    culprits = torch_hal.tools.bisect_fallback(step_fn, check_fn)   # e.g. ["add.Tensor"]
"""
import collections
import re

from .. import _C
from ._tool import OpTool
from ._ops import OpFilter, names

_active = []  # regexes of the OpFallback blocks in effect, outermost first


def _apply():
    _C._set_forced_fallback_ops(",".join(_active))


class OpFallback:
    """Forces the selected ops (HAL_OPFALLBACK_LIST / HAL_OPFALLBACK_DISABLE_LIST, or ops= / disable=;
    names without an overload match every overload) to the CPU fallback from start() to stop(), on every
    thread (the autograd thread too), on top of HAL_FORCE_FALLBACK_OPS. Blocks nest. An empty selection
    (no list) forces every op. Not thread-safe to start/stop concurrently."""

    def __init__(self, ops=None, disable=None):
        self.filter = OpFilter("OPFALLBACK", ops, disable)
        self._regex = self.filter.regex() or ".*"
        self._on = False

    def start(self):
        if self._on:
            raise RuntimeError("OpFallback is already started")
        _active.append(self._regex)
        try:
            _apply()
        except Exception:
            _active.pop()
            raise
        self._on = True
        return self

    def stop(self):
        if not self._on:
            raise RuntimeError("OpFallback is not started")
        _active.remove(self._regex)
        self._on = False
        _apply()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _OpRecorder(OpTool):
    """Counts the ops that touch "hal" ("add.Tensor": calls)."""

    NAME = "BISECT"

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def on_op(self, func, args, kwargs):
        self.counts[names(func)[1].removesuffix(".default")] += 1
        return func(*args, **kwargs)


def ops_called(fn, *args, **kwargs):
    """The aten ops ("add.Tensor", "mm") that FN touched "hal" with, and how often (a Counter)."""
    with _OpRecorder() as rec:
        fn(*args, **kwargs)
    return rec.counts


def catalog_ops_called(fn, *args, **kwargs):
    """The aten ops FN ran as catalog ops on "hal" (explain()'s records: also the per-tensor ops inside
    a _foreach_ op), the names OpFallback forces."""
    from .._fallback import explain

    return sorted({e.op for e in explain(fn, *args, print_result=False, **kwargs) if e.ran.startswith("catalog op ")})


def bisect_fallback(step_fn, check_fn, ops=None, verbose=False):
    """The smallest set of ops found whose CPU fallback makes ``check_fn(step_fn())`` true (delta
    debugging: a set from which no single op, and no chunk the search tried, can be removed). STEP_FN
    must compute from the same state on every call (it runs O(n log n) times); OPS: the candidates
    (default: catalog_ops_called(step_fn); ops the CPU fallback cannot run are left out). Returns [] when the check
    passes without fallback; raises RuntimeError when it fails even with every candidate on the CPU."""
    def passes(subset):
        with OpFallback(ops=[_exact(o) for o in subset]) if subset else _Nothing():
            ok = bool(check_fn(step_fn()))
        if verbose:
            print(f"bisect_fallback: {len(subset)} ops on the CPU -> {'pass' if ok else 'fail'}: {sorted(subset)}")
        return ok

    candidates = sorted(ops if ops is not None else catalog_ops_called(step_fn))
    if passes([]):
        return []
    try:
        every = passes(candidates)
    except Exception:  # noqa: BLE001 (an op the CPU has no kernel for: _..._overrideable, ...)
        candidates = [op for op in candidates if _runs_on_cpu(op, step_fn)]
        every = passes(candidates)
    if not every:
        raise RuntimeError(f"bisect_fallback: check_fn fails even with all {len(candidates)} candidate ops on the "
                           f"CPU fallback: {candidates}")
    return sorted(_minimize(candidates, passes))


def _runs_on_cpu(op, step_fn):
    """Whether step_fn runs with OP forced to the CPU fallback (the CPU may have no kernel for it)."""
    try:
        with OpFallback(ops=[_exact(op)]):
            step_fn()
        return True
    except Exception:  # noqa: BLE001
        return False


def _exact(name):
    return re.escape(name)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _minimize(cands, passes):
    """ddmin (Zeller): shrink CANDS (for which passes() holds) by removing chunks, then halving granularity."""
    n = 2
    while len(cands) >= 2:
        size = -(-len(cands) // n)
        chunks = [cands[i:i + size] for i in range(0, len(cands), size)]
        for chunk in chunks:
            if passes(chunk):
                cands, n = chunk, 2
                break
        else:
            for chunk in chunks:
                rest = [c for c in cands if c not in chunk]
                if passes(rest):
                    cands, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(cands):
                    break
                n = min(2 * n, len(cands))
    return cands
