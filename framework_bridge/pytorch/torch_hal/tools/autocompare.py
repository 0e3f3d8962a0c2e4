"""OpAutoCompare: every selected op on "hal" re-run on the CPU in float64 from copies of its inputs.

    with torch_hal.tools.OpAutoCompare() as cmp:
        train_step()
    cmp.mismatches()      # [Comparison(op="aten.add.Tensor", seq=.., phase=.., outputs=[OutputDiff...]), ...]

Per op call and output: allclose under the dtype's (atol, rtol) (HAL_AUTOCOMPARE_TOLERANCE_<DTYPE>=
"atol,rtol", defaults in _compare.DEFAULT_TOLERANCES), max abs and max rel difference, NaN/Inf in the
device output where the reference has none, and whether the op wrote an input its schema does not
write (DIOPI's input-mutation check). The inputs of each mismatching call are saved (CaptureWriter
format, HAL_AUTOCOMPARE_SAVE_DIR, default "op_autocompare") for ``python -m torch_hal.tools.replay``.
Random ops and ops with uninitialized outputs are not compared.
"""
import dataclasses
import os
import sys

import torch

from . import _compare, _ops, _tensors
from ._tool import OpTool
from .capture import CaptureWriter, copy_inputs, results_on_cpu


@dataclasses.dataclass
class Comparison:
    op: str
    seq: int
    phase: str
    outputs: list  # OutputDiff per tensor output
    mutated: list  # schema indices of inputs the op wrote without declaring it
    error: str = ""  # the reference run raised (then nothing was compared)

    @property
    def ok(self):
        return not self.error and not self.mutated and all(d.ok for d in self.outputs)

    def __str__(self):
        head = f"{self.op} #{self.seq} ({self.phase})"
        if self.error:
            return f"{head}: not compared: {self.error}"
        parts = [f"out{d.index} {d.dtype} {'ok' if d.ok else 'MISMATCH'} max_abs={d.max_abs:.3g} "
                 f"max_rel={d.max_rel:.3g} (atol={d.atol:g}, rtol={d.rtol:g})" + (" NaN/Inf" if d.nan_inf else "")
                 + (f" {d.why}" if d.why else "") for d in self.outputs]
        if self.mutated:
            parts.append(f"wrote input(s) {self.mutated} it must not write")
        return f"{head}: " + "; ".join(parts)


class OpAutoCompare(OpTool):
    """Compares the selected ops (HAL_OPAUTOCOMPARE_LIST / HAL_OPAUTOCOMPARE_DISABLE_LIST, or ops= /
    disable=) against the CPU in float64. ``comparisons`` holds every Comparison, ``mismatches()`` the
    failing ones, ``not_compared()`` those the CPU could not run; mismatches are printed to STREAM (default stderr; None: silent) as they happen and their
    inputs saved under SAVE_DIR (at most MAX_SAVED_PER_OP calls per op). The constructor raises
    ToolEnvError for a malformed tolerance variable."""

    NAME = "OPAUTOCOMPARE"

    def __init__(self, ops=None, disable=None, save_dir=None, stream=sys.stderr, max_saved_per_op=2):
        super().__init__(ops, disable)
        self.tolerances = _compare.tolerances()
        self.save_dir = save_dir or os.environ.get("HAL_AUTOCOMPARE_SAVE_DIR", "op_autocompare")
        self.stream, self.max_saved_per_op = stream, max_saved_per_op
        self.comparisons, self._saved, self._seq, self._writer = [], {}, 0, None

    def mismatches(self):
        """The compared calls that failed (an output, NaN/Inf, or an input written)."""
        return [c for c in self.comparisons if not c.ok and not c.error]

    def not_compared(self):
        """The calls whose float64 CPU reference raised (an op the CPU has no kernel for)."""
        return [c for c in self.comparisons if c.error]

    def _on_start(self):
        self._writer = None  # created at the first mismatch: a clean run leaves no directory

    def _on_stop(self):
        if self._writer is not None:
            self._writer.close()

    def on_op(self, func, args, kwargs):
        if _ops.is_random(func) or _ops.is_uninitialized(func):
            return func(*args, **kwargs)
        before = copy_inputs(args, kwargs)
        out = func(*args, **kwargs)
        seq, self._seq = self._seq, self._seq + 1
        ph, node = _ops.phase()
        (cpu_args, cpu_kwargs), _ = before
        c = Comparison(_ops.op_id(func), seq, ph, [], [])
        # Arguments the op may write are compared as outputs; the others must be unchanged.
        every_before = _ops.schema_args(func, cpu_args, cpu_kwargs)
        every_after = _ops.schema_args(func, args, kwargs)
        written = _ops.written_args(func)
        c.mutated = [i for i, (x, y) in enumerate(zip(every_before, every_after))
                     if i not in written and isinstance(y, torch.Tensor) and y.device.type == "hal"
                     and not _tensors.same(x, y)[0]]
        try:
            ref, ref_args, ref_kwargs = _compare.reference(func, cpu_args, cpu_kwargs)
        except Exception as e:  # noqa: BLE001 (an op the CPU cannot run in float64: reported, not fatal)
            c.error = f"the float64 CPU reference raised {type(e).__name__}: {str(e).splitlines()[0]}"
        else:
            ref_every = _ops.schema_args(func, ref_args, ref_kwargs)
            c.outputs = _compare.compare((out, [every_after[i] for i in written]),
                                         (ref, [ref_every[i] for i in written]), self.tolerances, func,
                                         lambda: self._cpu_result(func, cpu_args, cpu_kwargs, written))
        self.comparisons.append(c)
        if not c.ok and not c.error:
            if self.stream is not None:
                print(f"OpAutoCompare: {c}", file=self.stream)
            self._save(func, seq, args, kwargs, before, out, ph, node)
        return out

    @staticmethod
    def _cpu_result(func, cpu_args, cpu_kwargs, written):
        out, a, k = _compare.reference(func, cpu_args, cpu_kwargs, widen=False)
        every = _ops.schema_args(func, a, k)
        return out, [every[i] for i in written]

    def _save(self, func, seq, args, kwargs, before, out, ph, node):
        op = _ops.op_id(func)
        if self._saved.get(op, 0) >= self.max_saved_per_op:
            return
        self._saved[op] = self._saved.get(op, 0) + 1
        if self._writer is None:
            self._writer = CaptureWriter(self.save_dir, 0, "OpAutoCompare")
        self._writer.save(func, seq, args, kwargs, before, results_on_cpu(func, args, kwargs, out), ph, node, [])
