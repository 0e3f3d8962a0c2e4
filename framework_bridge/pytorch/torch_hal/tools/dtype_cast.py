"""OpDtypeCast: selected ops run in a higher precision and their results are cast back, to test whether
precision explains a divergence.

    with torch_hal.tools.OpDtypeCast(ops="mm,bmm"):        # float16/bfloat16 -> float32 by default
        train_step()
"""
import collections
import functools
import os

import torch
import torch.utils._pytree as pytree

from . import _ops
from ._tool import OpTool

_VAR = "HAL_OPDTYPECAST_CAST"
_DEFAULT = "float16->float32,bfloat16->float32"


def _dtype(name):
    d = getattr(torch, name.strip(), None)
    if not isinstance(d, torch.dtype) or not d.is_floating_point:
        raise ValueError(name)
    return d


def parse_casts(spec, var=_VAR):
    """{from dtype: to dtype} of "float16->float32,bfloat16->float32"; ToolEnvError naming VAR if malformed."""
    out = {}
    for item in spec.split(","):
        if not item.strip():
            continue
        try:
            src, dst = item.split("->")
            out[_dtype(src)] = _dtype(dst)
        except ValueError:
            raise _ops.env_error(var, spec, '"from->to" pairs of floating dtypes, comma-separated, e.g. '
                                            f'"{_DEFAULT}"') from None
    return out


@functools.lru_cache(maxsize=None)
def _castable(func):
    """Functional ops without a dtype argument: an in-place or out= op, or one told its result dtype,
    runs unchanged."""
    return not _ops.written_args(func) and not any(
        isinstance(a.type, torch.OptionalType) and str(a.type.getElementType()) == "ScalarType"
        or str(a.type) == "ScalarType" for a in func._schema.arguments)


class OpDtypeCast(OpTool):
    """Runs the selected ops (HAL_OPDTYPECAST_LIST / HAL_OPDTYPECAST_DISABLE_LIST, or ops= / disable=)
    with their "hal" floating inputs of a FROM dtype cast to its TO dtype (CASTS: {from: to} or
    "from->to,..."; default $HAL_OPDTYPECAST_CAST, else float16->float32 and bfloat16->float32), and
    casts floating results of a TO dtype back to the FROM dtype of the inputs. In-place / out= ops and ops
    with a dtype argument run unchanged. ``counts``: calls cast per op id."""

    NAME = "OPDTYPECAST"

    def __init__(self, ops=None, disable=None, casts=None):
        super().__init__(ops, disable)
        if casts is None:
            casts = os.environ.get(_VAR, _DEFAULT)
        self.casts = parse_casts(casts) if isinstance(casts, str) else dict(casts)
        self.counts = collections.Counter()

    def on_op(self, func, args, kwargs):
        leaves = _ops.tensors(args, kwargs)
        src = next((x.dtype for x in leaves if x.device.type == "hal" and x.dtype in self.casts), None)
        if src is None or not _castable(func):
            return func(*args, **kwargs)
        dst = self.casts[src]

        def up(x):
            return x.to(dst) if isinstance(x, torch.Tensor) and x.dtype == src else x

        def down(x):
            return x.to(src) if isinstance(x, torch.Tensor) and x.dtype == dst else x

        a, k = pytree.tree_map(up, (args, kwargs))
        self.counts[_ops.op_id(func)] += 1
        return pytree.tree_map(down, func(*a, **k))
