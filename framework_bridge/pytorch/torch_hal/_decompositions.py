"""torch_hal's own decompositions: device ops for aten ops that PyTorch has no
decomposition of (or whose decomposition calls the op itself), used by the
fallback (``_fallback._decompose``) before the CPU fallback.

Each entry is keyed ``"name.overload"`` and takes the op's schema arguments.
They run below autograd, on hal tensors, and call only ops the device runs
(catalog rows or further decompositions), so a declined call stays on the
device with the answer PyTorch's own kernel gives.
"""
import contextlib

import torch

aten = torch.ops.aten


# ---- reductions ---------------------------------------------------------------------------


def _var_correction(self, dim=None, *, correction=None, keepdim=False, std=False):
    # A non-integral correction (the catalog's is an integer): the biased
    # variance scaled by N / max(0, N - correction), PyTorch's formula.
    c = 1 if correction is None else correction
    dims = range(self.dim()) if dim is None or len(dim) == 0 else dim
    n = 1
    for d in dims:
        n *= self.shape[d] if self.dim() else 1
    v = aten.var.correction(self, dim, correction=0, keepdim=keepdim)
    v = v * (n / (n - c) if n - c > 0 else float("inf"))
    return v.sqrt() if std else v


# ---- activations ----------------------------------------------------------------------------


def _shrink_backward(grad_out, self, lambd):
    # hardshrink and softshrink pass the gradient where |self| > lambd.
    return torch.where((self >= -lambd) & (self <= lambd), torch.zeros_like(grad_out), grad_out)


# ---- advanced indexing ------------------------------------------------------------------------


def _expand_masks(self, indices):
    """PyTorch's rule: a bool (or uint8) index of k dims stands for the k long
    indices of its nonzero elements; its shape must match self's there."""
    out = []
    for i in indices:
        if i is None or i.dtype not in (torch.bool, torch.uint8):
            out.append(i)
            continue
        at = len(out)
        for j, s in enumerate(i.shape):
            if at + j >= self.dim() or self.shape[at + j] != s:
                raise IndexError(
                    f"The shape of the mask {list(i.shape)} at index {j} does not match the shape of the "
                    f"indexed tensor {list(self.shape)} at index {at + j}")
        nz = torch.nonzero(i)
        out.extend(nz[:, j] for j in range(i.dim()))
    return out


def _index_tensor(self, indices):
    """self[indices] for any number of index tensors: their broadcast values,
    bounds-checked (IndexError as PyTorch's), combined into one linear index
    over the indexed dims and gathered with index_select."""
    idx = _expand_masks(self, list(indices))
    if len(idx) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()} (got {len(idx)})")
    pos = [d for d, i in enumerate(idx) if i is not None]
    if not pos:
        return self.clone()
    tensors = torch.broadcast_tensors(*[idx[d] for d in pos])
    lin = None
    for d, t in zip(pos, tensors):
        size = self.shape[d]
        if t.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        t = t.long()
        if t.numel():
            lo, hi = torch.stack([t.min(), t.max()]).tolist()
            if lo < -size or hi >= size:
                raise IndexError(f"index {lo if lo < -size else hi} is out of bounds for dimension {d} with size {size}")
        t = torch.where(t < 0, t + size, t)
        lin = t if lin is None else lin * size + t
    # Adjacent indexed dims keep their place; otherwise they go first (PyTorch's rule).
    if pos == list(range(pos[0], pos[-1] + 1)):
        src, start = self, pos[0]
    else:
        src, start = self.permute(pos + [d for d in range(self.dim()) if d not in pos]), 0
    shape, k = list(src.shape), len(pos)
    numel = 1
    for s in shape[start:start + k]:
        numel *= s
    flat = src.reshape(shape[:start] + [numel] + shape[start + k:])
    out = torch.index_select(flat, start, lin.reshape(-1))
    return out.reshape(shape[:start] + list(lin.shape) + shape[start + k:])


def _index_put_impl(self, indices, values, accumulate=False, unsafe=False):
    """index_put_ with bool masks (as their nonzero long indices) or with
    Nones between index tensors (the indexed dims of a permuted view lead, as
    PyTorch's result shape has them): the catalog row then takes the call."""
    idx = _expand_masks(self, list(indices))
    pos = [d for d, i in enumerate(idx) if i is not None]
    if pos and pos != list(range(pos[0], pos[-1] + 1)):
        view = self.permute(pos + [d for d in range(self.dim()) if d not in pos])
        aten._index_put_impl_(view, [idx[d] for d in pos], values, accumulate, unsafe)
    else:
        aten._index_put_impl_(self, idx, values, accumulate, unsafe)
    return self


# ---- backward ops as the vector-Jacobian product of the forward's decomposition ----------------

@contextlib.contextmanager
def _autograd_on():
    """Decompositions run below autograd (its keys excluded on this thread);
    a backward computed by autograd needs them back for a moment."""
    keys, dk = torch._C.DispatchKeySet, torch._C.DispatchKey
    drop = 0
    for k in (dk.AutogradFunctionality, dk.AutogradOther, dk.ADInplaceOrView):
        drop |= keys(k).raw_repr()
    exclude = torch._C._dispatch_tls_local_exclude_set()
    include = torch._C._dispatch_tls_local_include_set()
    with torch._C._ForceDispatchKeyGuard(include, keys.from_raw_repr(exclude.raw_repr() & ~drop)):
        with torch.enable_grad():
            yield


def _vjp(forward, x, grad, *rest):
    """grad·∂forward(x, *rest)/∂x through the forward's decomposition's device ops."""
    with _autograd_on():
        x = x.detach().requires_grad_(True)
        y = forward(x, *rest)
        (g,) = torch.autograd.grad(y, x, grad)
    return g


def _forward_decomposition(op):
    from torch._decomp import decomposition_table

    return decomposition_table[op]


def _linear_backward(forward_op):
    """The backward of a linear op (upsampling, padding), whose Jacobian does
    not depend on the input: taken at zeros of the input's size."""

    def backward(grad_output, *args):
        *fwd_args, input_size = _split_input_size(forward_op, args)
        x = torch.zeros(input_size, dtype=grad_output.dtype, device=grad_output.device)
        return _vjp(_forward_decomposition(forward_op), x, grad_output, *fwd_args)

    return backward


def _split_input_size(forward_op, args):
    # upsample_*_backward(grad_output, output_size, input_size, scales...) ->
    # forward (input, output_size, scales...) plus input_size last.
    output_size, input_size, *scales = args
    return [output_size, *scales, input_size]


def _upsample_linear_backward(forward_op):
    # upsample_{linear1d,bilinear2d,bicubic2d,trilinear3d}_backward(grad_output,
    # output_size, input_size, align_corners, scales...).
    def backward(grad_output, output_size, input_size, align_corners, *scales):
        x = torch.zeros(input_size, dtype=grad_output.dtype, device=grad_output.device)
        return _vjp(_forward_decomposition(forward_op), x, grad_output, output_size, align_corners, *scales)

    return backward


def _pad_backward(forward_op):
    # {reflection,replication}_pad*d_backward(grad_output, self, padding).
    def backward(grad_output, self, padding):
        return _vjp(_forward_decomposition(forward_op), self, grad_output, padding)

    return backward


def own_decomposition(name, overload):
    """torch_hal's decomposition of aten::NAME.OVERLOAD, or None. An out=
    overload without an entry of its own runs the functional one's and
    copies the results into its out arguments (resized), which it returns."""
    fn = OWN_DECOMPOSITIONS.get(f"{name}.{overload}")
    if fn is not None or overload == "default":
        return fn
    functional = OWN_DECOMPOSITIONS.get(f"{name}.default")
    if functional is None:
        return None
    outs = [a.name for a in getattr(getattr(aten, name), overload)._schema.arguments if a.is_out]
    if not outs:
        return None

    def out_variant(*args, **kwargs):
        targets = [kwargs.pop(o) for o in outs]
        results = functional(*args, **kwargs)
        results = list(results) if isinstance(results, (tuple, list)) else [results]
        for out, r in zip(targets, results):
            if out.shape != r.shape:
                out.resize_(r.shape)
            out.copy_(r)
        return targets[0] if len(targets) == 1 else tuple(targets)

    return out_variant


OWN_DECOMPOSITIONS = {
    "var.correction": _var_correction,
    "std.correction": lambda *a, **k: _var_correction(*a, **k, std=True),
    "hardshrink_backward.default": _shrink_backward,
    "softshrink_backward.default": _shrink_backward,
    "index.Tensor": _index_tensor,
    "_index_put_impl_.default": _index_put_impl,
}
for _name in ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
              "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _linear_backward(getattr(aten, _name).default)
for _name in ("upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _upsample_linear_backward(getattr(aten, _name).default)
for _name in ("reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
              "replication_pad3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _pad_backward(getattr(aten, _name).default)
