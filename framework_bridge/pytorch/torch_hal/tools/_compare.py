"""Accuracy of one op call against the CPU in float64: per-dtype tolerances (env), the reference run, and
per-output allclose / max abs / max rel difference / NaN-Inf checks. Shared by OpAutoCompare and replay."""
import dataclasses
import os

import torch
import torch.utils._pytree as pytree

from . import _ops

# (atol, rtol) of a device result against the float64 CPU reference, by the device result's dtype.
# float32 covers the catalog's kernels on the CPU plugin (summation order, fused multiply-add); a
# float32 kernel off by 1000 ulp (1.2e-4 relative) is far outside.
DEFAULT_TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
_EXACT = (0.0, 0.0)


def tolerance_var(dtype):
    return "HAL_AUTOCOMPARE_TOLERANCE_" + str(dtype).replace("torch.", "").upper()


def tolerances():
    """DEFAULT_TOLERANCES overridden by HAL_AUTOCOMPARE_TOLERANCE_<DTYPE>="atol,rtol" (FLOAT32, FLOAT16,
    BFLOAT16, FLOAT64, COMPLEX64, COMPLEX128); a malformed value raises ToolEnvError naming the variable."""
    out = dict(DEFAULT_TOLERANCES)
    for dtype in DEFAULT_TOLERANCES:
        var = tolerance_var(dtype)
        value = os.environ.get(var)
        if value is None:
            continue
        parts = value.split(",")
        try:
            atol, rtol = (float(p) for p in parts) if len(parts) == 2 else (None, None)
        except ValueError:
            atol = rtol = None
        if atol is None or not (atol >= 0 and rtol >= 0):  # also rejects NaN
            raise _ops.env_error(var, value, '"atol,rtol": two non-negative numbers, e.g. "1e-5,1.3e-6"')
        out[dtype] = (atol, rtol)
    return out


def _wide(dtype):
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else None


def reference(func, args, kwargs):
    """FUNC on CPU copies of (ARGS, KWARGS), floating tensors widened to float64 (complex to complex128):
    (result, the copied args, kwargs) — an in-place op's written arguments are among the copies."""
    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().to("cpu", dtype=_wide(x.dtype) or x.dtype, copy=True)
        if isinstance(x, torch.device) and x.type == "hal":
            return torch.device("cpu")
        return x

    a, k = pytree.tree_map(move, (args, kwargs))
    if isinstance(k.get("device"), str) and k["device"].startswith("hal"):
        k["device"] = "cpu"
    return func(*a, **k), a, k


@dataclasses.dataclass
class OutputDiff:
    """One output of one op call against its reference."""
    index: int
    dtype: str
    allclose: bool
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    nan_inf: bool = False  # the device output has NaN/Inf where the reference has none
    why: str = ""

    @property
    def ok(self):
        return self.allclose and not self.nan_inf


def compare(out, ref, tols):
    """OutputDiffs of the tensors of OUT (device) against REF (float64 CPU), in leaf order."""
    got = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
    want = [x for x in pytree.tree_leaves(ref) if isinstance(x, torch.Tensor)]
    diffs = []
    if len(got) != len(want):
        return [OutputDiff(0, "", False, float("inf"), float("inf"), 0, 0,
                           why=f"{len(got)} tensor outputs, reference has {len(want)}")]
    for i, (g, w) in enumerate(zip(got, want)):
        atol, rtol = tols.get(g.dtype, _EXACT)
        name = str(g.dtype).replace("torch.", "")
        if g.shape != w.shape:
            diffs.append(OutputDiff(i, name, False, float("inf"), float("inf"), atol, rtol,
                                    why=f"shape {list(g.shape)} vs reference {list(w.shape)}"))
            continue
        wide = _wide(g.dtype) or torch.float64
        g = g.detach().to("cpu", dtype=wide)
        w = w.detach().to("cpu", dtype=wide)
        if g.numel() == 0:
            diffs.append(OutputDiff(i, name, True, 0.0, 0.0, atol, rtol))
            continue
        bad_g, bad_w = ~torch.isfinite(g), ~torch.isfinite(w)
        nan_inf = bool((bad_g & ~bad_w).any())
        both = bad_g & bad_w
        err = (g - w).abs().masked_fill(both, 0)
        rel = err / w.abs().masked_fill(both, 1).clamp_min(torch.finfo(torch.float64).tiny)
        close = torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        diffs.append(OutputDiff(i, name, bool(close.all()), float(err.max()), float(rel.max()), atol, rtol,
                                nan_inf=nan_inf))
    return diffs
