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
# An output outside the tolerance still passes when its error is at most this multiple of PyTorch CPU's
# error in the same dtype (OutputDiff.ok).
CPU_ERROR_FACTOR = 4.0
# Outputs that are not unique, so a reference cannot be compared with: eigenvectors (any phase), singular
# vectors (any sign). By op base name: skipped output indices.
NON_UNIQUE = {"linalg_eig": (1,), "_linalg_eigh": (1,), "linalg_eigh": (1,), "_linalg_svd": (0, 2),
              "linalg_svd": (0, 2)}


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


def _sdpa_backward(grad_out, q, k, v, bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                   dropout_p, is_causal, philox_seed, philox_offset, scale=None):
    """The gradients of softmax(q k^T * scale + bias) v, for the catalog's attention backward, which has
    no CPU kernel (aten::_scaled_dot_product_fused_attention_overrideable_backward)."""
    if dropout_p:
        raise NotImplementedError("no reference for attention with dropout")
    scale = 1.0 / q.shape[-1] ** 0.5 if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if bias is not None and bias.numel():
        s = s + bias
    if is_causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(-1)
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dbias = ds.sum_to_size(bias.shape) if bias is not None and bias.numel() else None
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out, dbias


# Ops the CPU has no kernel for, by base name: the reference computation.
REFERENCES = {"_scaled_dot_product_fused_attention_overrideable_backward": _sdpa_backward}


def reference(func, args, kwargs, widen=True):
    """FUNC on CPU copies of (ARGS, KWARGS), floating tensors widened to float64 (complex to complex128)
    unless not WIDEN (then: PyTorch CPU's answer in the op's own dtypes): (result, the copied args,
    kwargs) — an in-place op's written arguments are among the copies."""
    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().to("cpu", dtype=(_wide(x.dtype) if widen else None) or x.dtype, copy=True)
        if isinstance(x, torch.dtype) and widen:  # dtype=float32 on a widened input would narrow it
            return _wide(x) or x
        if isinstance(x, torch.device) and x.type == "hal":
            return torch.device("cpu")
        return x

    a, k = pytree.tree_map(move, (args, kwargs))
    if isinstance(k.get("device"), str) and k["device"].startswith("hal"):
        k["device"] = "cpu"
    return REFERENCES.get(_ops.names(func)[0], func)(*a, **k), a, k


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
    cpu_max_abs: float = None  # PyTorch CPU's own max abs error in the output's dtype (when not allclose)

    @property
    def ok(self):
        # Outside the tolerance but as accurate as PyTorch's CPU kernel in the same dtype (an
        # ill-conditioned op such as matrix_exp in float32): not the device's fault.
        within_cpu = self.cpu_max_abs is not None and self.max_abs <= CPU_ERROR_FACTOR * self.cpu_max_abs
        return (self.allclose or within_cpu) and not self.nan_inf


def compare(out, ref, tols, func=None, cpu_result=None):
    """OutputDiffs of the tensors of OUT (device) against REF (float64 CPU), in leaf order; FUNC's
    NON_UNIQUE outputs are left out. CPU_RESULT(): PyTorch CPU's result in the op's own dtypes, asked
    for only when an output is outside its tolerance (see OutputDiff.ok)."""
    got = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
    want = [x for x in pytree.tree_leaves(ref) if isinstance(x, torch.Tensor)]
    skip = NON_UNIQUE.get(_ops.names(func)[0], ()) if func is not None else ()
    cpu = None
    diffs = []
    if len(got) != len(want):
        return [OutputDiff(0, "", False, float("inf"), float("inf"), 0, 0,
                           why=f"{len(got)} tensor outputs, reference has {len(want)}")]
    for i, (g, w) in enumerate(zip(got, want)):
        if i in skip:
            continue
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
        close = bool(torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True).all())
        d = OutputDiff(i, name, close, float(err.max()), float(rel.max()), atol, rtol, nan_inf=nan_inf)
        if not close and cpu_result is not None:
            if cpu is None:
                cpu = [x for x in pytree.tree_leaves(cpu_result()) if isinstance(x, torch.Tensor)]
            c = cpu[i].detach().to(dtype=wide)
            if c.shape == w.shape:
                d.cpu_max_abs = float((c - w).abs().masked_fill(both, 0).max())
        diffs.append(d)
    return diffs
