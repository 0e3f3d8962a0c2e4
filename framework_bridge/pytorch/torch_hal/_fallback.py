"""Decomposition before CPU fallback, fallback statistics and explain().

An aten op the plugin cannot run as a catalog op (no table row, the plugin
declined the call, or HAL_FORCE_FALLBACK_OPS) first runs PyTorch's
decomposition of it (``torch._decomp.decomposition_table``), whose ops run on
the device; only an op without one (or one under HAL_FORCE_FALLBACK_OPS) runs
on the CPU through the counted boxed fallback.
"""
from typing import NamedTuple

import torch

from . import _C
from ._decompositions import decomposition

_table = None

# PyTorch decompositions that give a different answer from PyTorch's own kernels: these ops take the
# CPU fallback instead (a right answer over a fast one).
WRONG_DECOMPOSITIONS = {
    # 2.15: a 1-D input with reduction='none' gives shape [1]; the kernels give [] (0-d).
    "multilabel_margin_loss_forward",
    # 2.15: returns (output, logsumexp) in another layout than the kernel's ([B, H, L, E] vs [B, H, L]).
    "_scaled_dot_product_flash_attention_for_cpu",
}
# (grid_sampler_2d_backward is left to the fallback too: the vjp of PyTorch's grid_sampler_2d
# decomposition gives grid gradients up to 8e-5 away from the kernel's in float32.)


def _decompose(name, overload, args):
    """Called by the C++ fallback (holding the GIL): runs aten::NAME.OVERLOAD's
    decomposition on ARGS (the schema's arguments in order); returns
    NotImplemented when there is none, Ellipsis when it declines these ARGS."""
    global _table
    if _table is None:
        from torch._decomp import decomposition_table

        _table = decomposition_table
    if name in WRONG_DECOMPOSITIONS:
        return NotImplemented
    op = getattr(getattr(torch.ops.aten, name), overload or "default")
    fn = decomposition(name, overload or "default", _table)
    if fn is None:
        return NotImplemented
    if torch.Tag.nondeterministic_seeded in op.tags:
        for arg, value in zip(op._schema.arguments, args):
            if isinstance(value, torch.Generator) and value.device.type != "hal":
                # As on CUDA, a generator serves its own device only; the CPU
                # fallback keeps a CPU generator's stream for a hal tensor.
                raise RuntimeError(f"a {value.device.type} generator draws for the CPU fallback")
    positional, keywords = [], {}
    for arg, value in zip(op._schema.arguments, args):
        if arg.kwarg_only:
            keywords[arg.name] = value
        else:
            positional.append(value)
    result = fn(*positional, **keywords)
    # A decomposition returning NotImplemented declines these arguments only (PyTorch's do for
    # some shapes): Ellipsis tells the C++ side not to remember the op as having none.
    return ... if result is NotImplemented else result


_C._set_decomposer(_decompose)


class FallbackStats(dict):
    """Per aten op (``"aten::cumsum.out"``), how many calls ran on the CPU
    fallback. ``.decompositions`` holds, apart, how many calls ran as PyTorch
    decompositions on the device (not CPU fallbacks)."""

    def __init__(self, cpu, decompositions):
        super().__init__(cpu)
        self.decompositions = dict(decompositions)

    def __repr__(self):
        return f"FallbackStats(cpu={dict(self)!r}, decompositions={self.decompositions!r})"


def fallback_stats():
    """CPU fallback counts per aten op, as a dict (``{}`` when everything ran
    on the device); decomposition counts are in its ``.decompositions``."""
    return FallbackStats(_C.fallback_stats(), _C.decomposition_stats())


def reset_fallback_stats():
    """Sets every CPU-fallback and decomposition count back to zero, and forgets
    which ops were found to have no decomposition (they are asked again)."""
    _C.reset_fallback_stats()
    _C._reset_decomposition_stats()


class ExplainEntry(NamedTuple):
    op: str  # aten op and overload, "add.Tensor"
    ran: str  # "catalog op add on plugin cpu (hal:0)", "decomposed into mm, add.Tensor", "CPU fallback: ..."
    depth: int  # 0 for ops fn called; 1 for ops of a decomposition, ...


def explain(fn, *args, print_result=True, **kwargs):
    """Runs ``fn(*args, **kwargs)`` and lists, per aten op that reached the
    "hal" device in call order, which catalog op and plugin ran it, what it
    decomposed into, or why it ran on the CPU fallback. Prints the list unless
    ``print_result=False`` and returns it (a list of ExplainEntry). Ops the
    bridge implements itself (creation, views, copies) are not listed."""
    _C._explain_begin()
    try:
        fn(*args, **kwargs)
    finally:
        raw = _C._explain_end()
    entries = []
    for i, (op, how, depth) in enumerate(raw):
        if how == "decomposed":
            children = []
            for child_op, _, child_depth in raw[i + 1 :]:
                if child_depth <= depth:
                    break
                if child_depth == depth + 1:
                    children.append(child_op)
            how = "decomposed into " + (", ".join(children) if children else "no device op")
        entries.append(ExplainEntry(op, how, depth))
    if print_result:
        for e in entries:
            print(f"{'  ' * e.depth}aten::{e.op}: {e.ran}")
    return entries
