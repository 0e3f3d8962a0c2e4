"""Op tools for bringing up a chip: find the op that is wrong, slow or missing inside a training loop.

Each tool is a context manager with start()/stop(), sees every aten op that touches a "hal" device,
forward and backward, and is filtered by HAL_<TOOL>_LIST / HAL_<TOOL>_DISABLE_LIST (comma-separated op
names or full-match regexes; the disable list wins):

- OpCapture: saves each op's inputs, outputs / gradients and an index.json (replay: replay.py)
- OpAutoCompare: each op against the CPU in float64, input-mutation and NaN/Inf checks
- OpTimeMeasure: synchronised device time per op from HAL events, table and CSV
- OpFallback: selected ops forced to the CPU fallback; bisect_fallback finds the culprits
- OpDtypeCast: selected ops run in a higher precision
- profiler: "hal::<catalog op>" ranges in torch.profiler traces; summary()

Importing this package installs nothing: an inactive tool costs nothing.
"""
from ._ops import ToolEnvError
from .autocompare import Comparison, OpAutoCompare
from .capture import OpCapture
from .dtype_cast import OpDtypeCast
from .fallback import OpFallback, bisect_fallback, ops_called
from .time_measure import OpTimeMeasure
from . import profiler

__all__ = ["OpCapture", "OpAutoCompare", "Comparison", "OpTimeMeasure", "OpFallback", "bisect_fallback",
           "ops_called", "OpDtypeCast", "ToolEnvError", "profiler"]
