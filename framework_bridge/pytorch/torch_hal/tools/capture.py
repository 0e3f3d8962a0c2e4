"""OpCapture: each selected op's inputs, outputs and, in backward, gradients saved for offline replay.

    with torch_hal.tools.OpCapture("op_capture"):
        loss = model(x).sum(); loss.backward()

writes ``op_capture/<op>/<seq>/inputs.pt`` (arguments, tensors copied to the CPU with their strides),
``outputs.pt`` for a forward op or ``grads.pt`` for an op run by a backward node (its results are
gradients), and ``op_capture/index.json`` (``CaptureWriter.FORMAT``, ``VERSION``): per call the op,
sequence number, phase, autograd node, shapes / dtypes / strides / devices of inputs and outputs, plugin,
and a summary of the Python call stack. ``python -m torch_hal.tools.replay op_capture`` re-runs them.
"""
import json
import os
import tempfile
import traceback
import warnings

import torch

from . import _ops, _tensors
from ._tool import OpTool

FORMAT = "torch_hal.op_capture"
VERSION = 1
_MAX_BYTES_VAR = "HAL_OPCAPTURE_MAX_BYTES"


def _plugin(device):
    try:
        return torch.hal.get_device_properties(device.index or 0).plugin
    except Exception:  # noqa: BLE001 (a device the runtime does not know: the capture still records it)
        return None


def _stack_summary(limit=3):
    """The innermost LIMIT frames outside torch and torch_hal: where the user's code called the op."""
    frames = [f for f in traceback.extract_stack()
              if f"{os.sep}torch{os.sep}" not in f.filename and f"{os.sep}torch_hal{os.sep}" not in f.filename]
    return [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames[-limit:]]


class CaptureWriter:
    """Writes op calls under ROOT and keeps index.json's entries; MAX_BYTES caps the bytes written
    (0 = no cap): the call that would pass it is dropped, with one warning, and so are all later ones.
    Raises OSError naming ROOT when ROOT cannot be created or written."""

    def __init__(self, root, max_bytes=0, who="OpCapture"):
        self.root, self.max_bytes, self.who = os.fspath(root), max_bytes, who
        try:
            os.makedirs(self.root, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.root):
                pass
        except OSError as e:
            raise OSError(e.errno, f"{who}: cannot write the capture directory {self.root!r}: {e.strerror}") from e
        self.entries, self.written, self.full = [], 0, False

    def save(self, func, seq, args, kwargs, before, out, phase, node, stack):
        """Saves one call of FUNC on (ARGS, KWARGS): BEFORE = copy_inputs() taken before the op ran;
        OUT = (its result, {index: written argument}) on the CPU. Returns the index entry, or None when
        the cap stopped the capture."""
        if self.full:
            return None
        size = _tensors.nbytes(before) + _tensors.nbytes(out)
        if self.max_bytes and self.written + size > self.max_bytes:
            self.full = True
            warnings.warn(f"{self.who}: {_MAX_BYTES_VAR}={self.max_bytes} reached after {self.written} bytes; "
                          f"{_ops.op_id(func)} #{seq} and later calls are not captured", stacklevel=2)
            return None
        rel = os.path.join(_ops.op_id(func), str(seq))
        path = os.path.join(self.root, rel)
        os.makedirs(path, exist_ok=True)
        results = "grads" if phase == "backward" else "outputs"
        (cpu_args, cpu_kwargs), devices = before
        torch.save(_tensors.encode({"args": cpu_args, "kwargs": cpu_kwargs, "devices": devices}),
                   os.path.join(path, "inputs.pt"))
        torch.save(_tensors.encode({"result": out[0], "written": out[1]}), os.path.join(path, f"{results}.pt"))
        self.written += size
        hal = _ops.hal_device(args, kwargs)
        entry = {
            "op": _ops.op_id(func), "seq": seq, "dir": rel, "phase": phase, "node": node,
            "files": ["inputs.pt", f"{results}.pt"],
            "inputs": [_tensors.describe(x) for x in _ops.tensors(args, kwargs)],
            "outputs": [_tensors.describe(x) for x in torch.utils._pytree.tree_leaves(out)
                        if isinstance(x, torch.Tensor)],
            "device": str(hal) if hal is not None else None,
            "plugin": _plugin(hal) if hal is not None else None,
            "random": _ops.is_random(func), "uninitialized": _ops.is_uninitialized(func),
            "stack": stack,
        }
        self.entries.append(entry)
        return entry

    def close(self):
        index = {"format": FORMAT, "version": VERSION, "torch": torch.__version__, "bytes": self.written,
                 "truncated": self.full, "entries": self.entries}
        with open(os.path.join(self.root, "index.json"), "w") as f:
            json.dump(index, f, indent=1)


def max_bytes_from_env():
    value = os.environ.get(_MAX_BYTES_VAR, "")
    if not value.strip():
        return 0
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise _ops.env_error(_MAX_BYTES_VAR, value, "a non-negative number of bytes (0 = no cap)")
    return n


def copy_inputs(args, kwargs):
    """((args, kwargs) with every tensor copied to the CPU (layout kept; CPU tensors too, since the op may
    write them), each tensor's device type): what CaptureWriter.save takes as BEFORE."""
    return _tensors.to_device((args, kwargs), "cpu"), _tensors.tensor_devices((args, kwargs))


def results_on_cpu(func, args, kwargs, out):
    """(OUT, {schema index: argument the op wrote}) with hal tensors copied to the CPU."""
    every = _ops.schema_args(func, args, kwargs)
    written = {i: every[i] for i in _ops.written_args(func)}
    return _tensors.to_device((out, written), "cpu", only_from="hal")


class OpCapture(OpTool):
    """Saves the selected ops (HAL_OPCAPTURE_LIST / HAL_OPCAPTURE_DISABLE_LIST, or ops= / disable=) that
    touch a "hal" device under DIR (default "op_capture"); index.json is written at stop().
    start() raises OSError naming DIR when it cannot be written, before any op runs. ``entries`` holds the
    index entries. Costs a device-to-host copy of every argument and result of every captured op."""

    NAME = "OPCAPTURE"

    def __init__(self, dir="op_capture", ops=None, disable=None, max_bytes=None):
        super().__init__(ops, disable)
        self.dir = dir
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        self.writer = None
        self._seq = 0

    @property
    def entries(self):
        return self.writer.entries if self.writer else []

    def _on_start(self):
        self.writer = CaptureWriter(self.dir, self.max_bytes)

    def _on_stop(self):
        self.writer.close()

    def on_op(self, func, args, kwargs):
        if self.writer.full:
            return func(*args, **kwargs)
        before = copy_inputs(args, kwargs)
        out = func(*args, **kwargs)
        seq, self._seq = self._seq, self._seq + 1
        ph, node = _ops.phase()
        self.writer.save(func, seq, args, kwargs, before, results_on_cpu(func, args, kwargs, out), ph, node,
                         _stack_summary() if ph == "forward" else [])
        return out
