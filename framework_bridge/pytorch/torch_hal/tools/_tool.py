"""The part every op tool shares: a TorchDispatchMode that hands each selected aten op touching a "hal"
device to the tool, usable as ``with Tool(): ...`` or ``tool.start() ... tool.stop()``.

A dispatch mode sees every aten op below autograd, forward and backward: the autograd engine carries the
mode stack (thread-local state) to the thread that runs the backward of "hal" tensors, and
torch._C._current_autograd_node() says whether an op runs for a backward node."""
from torch.utils._python_dispatch import TorchDispatchMode

from . import _ops


class _Mode(TorchDispatchMode):
    def __init__(self, tool):
        super().__init__()
        self.tool = tool

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tool = self.tool
        if tool.filter(func) and _ops.touches_hal(args, kwargs):
            return tool.on_op(func, args, kwargs)
        return func(*args, **kwargs)


class OpTool:
    """Base of the tools. Subclasses set NAME (the HAL_<NAME>_LIST variables) and implement on_op(func,
    args, kwargs) -> the op's result (they must call func exactly once, or return what it would).
    Not thread-safe to start/stop from several threads; ops from the autograd thread are handled."""

    NAME = ""

    def __init__(self, ops=None, disable=None):
        self.filter = _ops.OpFilter(self.NAME, ops, disable)
        self._mode = None

    def start(self):
        if self._mode is not None:
            raise RuntimeError(f"{type(self).__name__} is already started")
        self._on_start()
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def stop(self):
        if self._mode is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        mode, self._mode = self._mode, None
        mode.__exit__(None, None, None)
        self._on_stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _on_start(self):
        pass

    def _on_stop(self):
        pass

    def on_op(self, func, args, kwargs):
        raise NotImplementedError
