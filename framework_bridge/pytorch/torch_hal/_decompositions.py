"""torch_hal's own decompositions: device ops for aten ops that PyTorch has no
decomposition of (or whose decomposition calls the op itself), used by the
fallback (``_fallback._decompose``) before the CPU fallback.

Each entry is keyed ``"name.overload"`` and takes the op's schema arguments.
They run below autograd, on hal tensors, and call only ops the device runs
(catalog rows or further decompositions), so a declined call stays on the
device with the answer PyTorch's own kernel gives.
"""
import contextlib
import math

import torch

aten = torch.ops.aten


# ---- reductions ---------------------------------------------------------------------------


def _var_correction(self, dim=None, *, correction=None, keepdim=False, std=False):
    # A non-integral correction (the catalog's is an integer): the biased
    # variance scaled by N / max(0, N - correction), PyTorch's formula.
    c = 1 if correction is None else correction
    dims = range(self.dim()) if dim is None or len(dim) == 0 else dim
    n = 1
    for d in dims:  # none for a 0-d self
        n *= self.shape[d]
    v = aten.var.correction(self, dim, correction=0, keepdim=keepdim)
    v = v * (n / (n - c) if n - c > 0 else float("inf"))
    return v.sqrt() if std else v


# ---- activations ----------------------------------------------------------------------------


def _shrink_backward(grad_out, self, lambd):
    # hardshrink and softshrink pass the gradient where |self| > lambd.
    return torch.where((self >= -lambd) & (self <= lambd), torch.zeros_like(grad_out), grad_out)


# ---- advanced indexing ------------------------------------------------------------------------


def _min_max(t):
    """(min, max) of non-empty T as Python numbers, in one device-to-host read."""
    return torch.stack([t.min(), t.max()]).tolist()


def _expand_masks(self, indices):
    """PyTorch's rule: a bool (or uint8) index of k dims stands for the k long
    indices of its nonzero elements; its shape must match self's there."""
    out = []
    for i in indices:
        if i is not None:
            i = i.to(self.device)  # CPU index tensors index a device tensor, as on CUDA
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
            lo, hi = _min_max(t)
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


def _flat_bounds(index, n):
    """IndexError (PyTorch's words) unless every INDEX is in [-n, n)."""
    if index.numel():
        lo, hi = _min_max(index)
        if lo < -n or hi >= n:
            raise IndexError(f"out of range: tried to access index {lo if lo < -n else hi} on a tensor of {n} elements.")


def _scatter_add(self, dim, index, src):
    """scatter_add with an empty index (of any integer dtype: gather's backward makes one for an
    empty sample) is self; others are the catalog row's, which declined them."""
    if index.numel() == 0:
        return self.clone()
    return NotImplemented


def _searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, how many boundaries of its row lie below it (left) or at or below it
    (right): a count over a [..., N, M] comparison, bounded like the one-hot reductions. NaN
    (whose place a binary search leaves to its comparisons) goes to the CPU fallback."""
    if side is not None:
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = seq.gather(-1, sorter.to(seq.device))
    values = self if isinstance(self, torch.Tensor) else torch.tensor(self, dtype=seq.dtype, device=seq.device)
    if values.numel() * max(seq.shape[-1], 1) > _ONE_HOT_LIMIT:
        return NotImplemented
    if seq.is_floating_point() or values.is_floating_point():
        if bool(torch.stack([torch.isnan(seq).any(), torch.isnan(values).any()]).any().item()):
            return NotImplemented
    if seq.dim() == 1:
        cmp = (seq <= values.unsqueeze(-1)) if right else (seq < values.unsqueeze(-1))
    else:
        cmp = (seq.unsqueeze(-2) <= values.unsqueeze(-1)) if right else (seq.unsqueeze(-2) < values.unsqueeze(-1))
    return cmp.sum(-1).to(torch.int32 if out_int32 else torch.int64)


def _put(self, index, source, accumulate=False):
    """self.put_: INDEX into self as if it were 1-D (row-major), through index_put."""
    if index.dtype != torch.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {_dtype_name(index.dtype)}")
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_dtype_name(self.dtype)} and source.dtype = {_dtype_name(source.dtype)}")
    _flat_bounds(index, self.numel())
    return _index_put_flat(self, index.reshape(-1), source.reshape(-1), accumulate)


def _index_put_flat(self, positions, values, accumulate=False):
    """self viewed as 1-D (row-major) [POSITIONS] = VALUES, through a contiguous copy written
    back when self is not contiguous; returns self."""
    flat = self.reshape(-1) if self.is_contiguous() else self.contiguous().reshape(-1)
    flat.index_put_((positions,), values, accumulate)
    if not self.is_contiguous():
        self.copy_(flat.reshape(self.shape))
    return self


def _masked_scatter(self, mask, source):
    """self.masked_scatter_: the positions where MASK (broadcast to self) is
    true, in row-major order, take SOURCE's first elements."""
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{_dtype_name(mask.dtype)}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got "
                           f"{_dtype_name(self.dtype)} and {_dtype_name(source.dtype)}")
    positions = torch.nonzero(mask.expand(self.shape).reshape(-1)).reshape(-1)
    if positions.numel() > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return _index_put_flat(self, positions, source.reshape(-1)[: positions.numel()])


def _nonzero_static(self, *, size, fill_value=-1):
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got {size}")
    nz = torch.nonzero(self)
    if nz.shape[0] >= size:
        return nz[:size].clone()
    pad = torch.full((size - nz.shape[0], nz.shape[1]), fill_value, dtype=nz.dtype, device=nz.device)
    return torch.cat([nz, pad])


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """beta·self + alpha·Σ_b batch1[b] @ batch2[b] as one addmm over the joined batch."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor" if batch1.dim() != 3 else "batch2 must be a 3D tensor")
    b, n, m = batch1.shape
    p = batch2.shape[2]
    if batch2.shape[0] != b or batch2.shape[1] != m:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{b}, {m}] but got: "
                           f"[{batch2.shape[0]}, {batch2.shape[1]}].")
    left = batch1.permute(1, 0, 2).reshape(n, b * m)
    return torch.addmm(self, left, batch2.reshape(b * m, p), beta=beta, alpha=alpha)


def _angle(self):
    """angle of a real tensor: π below 0 (-inf too), 0 at or above, NaN for NaN."""
    if self.is_complex():
        return NotImplemented
    x = self if self.is_floating_point() else self.to(torch.get_default_dtype())
    return torch.where(torch.isnan(x), x, torch.where(x < 0, torch.full_like(x, math.pi), torch.zeros_like(x)))


def _histc(self, bins=100, min=0, max=0):
    """torch.histc as PyTorch's CPU kernel computes it: bin edges from
    linspace, each element's bin from the linear formula corrected by one
    comparison with its edges (so edge values land as there); out-of-range
    and NaN elements are not counted. Integer inputs count too (as CUDA)."""
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    x = self.reshape(-1)
    dtype = self.dtype if self.is_floating_point() else torch.float32
    lo, hi = float(min), float(max)
    if lo == hi and x.numel():
        lo, hi = (float(v) for v in _min_max(x))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc(): max must be larger than min")
    x = x.to(dtype)
    edges = torch.linspace(lo, hi, bins + 1, dtype=dtype, device=self.device)
    lo_t, hi_t = edges[0], edges[-1]
    inside = (x >= lo_t) & (x <= hi_t)
    pos = ((x - lo_t) * bins / (hi_t - lo_t)).floor().clamp(0, bins - 1).to(torch.int64)
    pos = torch.where(inside, pos, torch.zeros_like(pos))
    below = x < torch.index_select(edges, 0, pos)
    above = (x >= torch.index_select(edges, 0, pos + 1)) & (pos + 1 < bins)
    pos = pos - below.to(torch.int64) + above.to(torch.int64)
    counts = torch.zeros(bins, dtype=self.dtype, device=self.device)
    return counts.index_put_((pos,), inside.to(counts.dtype), accumulate=True)


# One-hot reductions hold a [..., N, M] mask: beyond this many elements the
# call is left to the CPU fallback rather than allocate it.
_ONE_HOT_LIMIT = 1 << 24


def _scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """scatter_reduce (sum, prod, mean, amax, amin) as a reduction over a
    one-hot [..., N, M] mask of INDEX along DIM, then combined with self
    where an index hits (PyTorch's rules: include_self, mean's count, floor
    division for integer means, NaN propagating through amax/amin)."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index.dtype != torch.int64:
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if src.dtype != self.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    if self.dim() == 0:  # a 0-d self: its 1-element view (index and src 0-d or 1-element too)
        r = _scatter_reduce(self.reshape(1), 0, index.reshape(-1), src.reshape(-1), reduce, include_self=include_self)
        return r if r is NotImplemented else r.reshape(())
    dim = dim % self.dim()
    if index.numel() == 0:
        return self.clone()
    m = self.shape[dim]
    if index.numel() * m > _ONE_HOT_LIMIT:
        return NotImplemented
    _flat_bounds_dim(index, m, dim)
    # The part of self and src that index covers (src and self may be larger in other dims).
    region = tuple(slice(0, index.shape[d]) if d != dim else slice(None) for d in range(index.dim()))
    src_part = src[tuple(slice(0, index.shape[d]) for d in range(index.dim()))]
    idx = index.movedim(dim, -1)
    vals = src_part.movedim(dim, -1).unsqueeze(-1)                # [..., N, 1]
    hit = idx.unsqueeze(-1) == torch.arange(m, device=self.device)  # [..., N, M]
    count = hit.sum(-2)                                           # [..., M]
    floating = self.is_floating_point()
    if reduce in ("sum", "mean"):
        acc = torch.where(hit, vals, torch.zeros((), dtype=self.dtype, device=self.device)).sum(-2, dtype=self.dtype)
    elif reduce == "prod":
        acc = torch.where(hit, vals, torch.ones((), dtype=self.dtype, device=self.device)).prod(-2, dtype=self.dtype)
    else:
        info = torch.finfo(self.dtype) if floating else torch.iinfo(self.dtype)
        fill = (-math.inf if reduce == "amax" else math.inf) if floating else (info.min if reduce == "amax" else info.max)
        masked = torch.where(hit, vals, torch.full((), fill, dtype=self.dtype, device=self.device))
        acc = masked.amax(-2) if reduce == "amax" else masked.amin(-2)
    base = self[region].movedim(dim, -1)
    if include_self:
        if reduce in ("sum", "mean"):
            acc = acc + base
        elif reduce == "prod":
            acc = acc * base
        else:
            pair = torch.stack([acc, base])
            acc = pair.amax(0) if reduce == "amax" else pair.amin(0)
    if reduce == "mean":
        n = (count + (1 if include_self else 0)).to(self.dtype).clamp_min(1)
        acc = acc / n if floating else torch.div(acc, n, rounding_mode="floor")
    combined = torch.where(count > 0, acc.to(self.dtype), base)
    out = self.clone()
    out[region] = combined.movedim(-1, dim)
    return out


def _flat_bounds_dim(index, size, dim):
    lo, hi = _min_max(index)
    if lo < -size or hi >= size:
        raise RuntimeError(f"index {lo if lo < -size else hi} is out of bounds for dimension {dim} with size {size}")
    if lo < 0:
        raise RuntimeError(f"index {lo} is out of bounds for dimension {dim} with size {size}")


def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    """index_reduce: scatter_reduce with the 1-D INDEX laid along DIM of source."""
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    dim = dim % max(self.dim(), 1)
    if source.dim() and index.numel() != source.shape[dim]:
        raise IndexError("index_reduce_(): Index should have the same number of elements as dimension "
                         f"{dim} of source")
    shape = [1] * source.dim()
    if source.dim():
        shape[dim] = -1
    return _scatter_reduce(self, dim, index.reshape(shape).expand(source.shape), source, reduce,
                           include_self=include_self)


def _in_place(fn):
    """The in-place form of functional FN: its result copied into self."""

    def in_place(self, *args, **kwargs):
        result = fn(self, *args, **kwargs)
        return result if result is NotImplemented else self.copy_(result)

    return in_place


# ---- scans ---------------------------------------------------------------------------------------


def _scan(x, dim, combine, identity):
    """Inclusive scan of X along DIM by COMBINE in log2(n) doubling steps (Hillis-Steele): step s
    combines each element with the one s places before it (IDENTITY before the start)."""
    n = x.shape[dim]
    s = 1
    while s < n:
        pad_shape = list(x.shape)
        pad_shape[dim] = s
        before = torch.cat([torch.full(pad_shape, identity, dtype=x.dtype, device=x.device),
                            x.narrow(dim, 0, n - s)], dim)
        x = combine(before, x)
        s *= 2
    return x


def _cum_extreme(self, values, indices, dim, largest):
    """_cummax_helper / _cummin_helper: the running max (min), NaN sticking as PyTorch's kernel
    has it, and the index of the last element that set or tied it (or the last NaN)."""
    if self.dim() == 0:
        values.copy_(self)
        indices.zero_()
        return ()  # the helper op returns nothing: it writes VALUES and INDICES
    dim = dim % self.dim()
    if self.shape[dim] == 0:
        return ()  # the helper op returns nothing: it writes VALUES and INDICES
    x = self if self.dtype != torch.bool else self.to(torch.uint8)
    floating = x.is_floating_point()
    info = torch.finfo(x.dtype) if floating else torch.iinfo(x.dtype)
    identity = (-math.inf if largest else math.inf) if floating else (info.min if largest else info.max)
    running = _scan(x, dim, torch.maximum if largest else torch.minimum, identity)
    shape = [1] * x.dim()
    shape[dim] = x.shape[dim]
    position = torch.arange(x.shape[dim], device=x.device).reshape(shape).expand(x.shape)
    record = x == running
    if floating:
        record = record | torch.isnan(x)
    candidate = torch.where(record, position, torch.full_like(position, -1))
    values.copy_(running.to(values.dtype))
    indices.copy_(_scan(candidate, dim, torch.maximum, -1))
    return ()  # the helper op returns nothing: it writes VALUES and INDICES


def _frexp(self):
    """mantissa in [0.5, 1) (sign kept) and int32 exponent with self = mantissa·2^exponent, exact:
    computed in float64 and corrected so the mantissa lands in range; 0, ±inf and NaN give
    (self, 0) as the C library's frexp."""
    if not self.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    a = self.to(torch.float64)
    finite_nonzero = torch.isfinite(a) & (a != 0)
    safe = torch.where(finite_nonzero, a.abs(), torch.ones_like(a))
    e = torch.floor(torch.log2(safe)) + 1
    m = safe / torch.exp2(e)
    e = torch.where(m >= 1, e + 1, torch.where(m < 0.5, e - 1, e))
    m = safe / torch.exp2(e)
    mantissa = torch.where(finite_nonzero, torch.copysign(m, a), a).to(self.dtype)
    exponent = torch.where(finite_nonzero, e, torch.zeros_like(e)).to(torch.int32)
    return mantissa, exponent


# ---- order statistics ----------------------------------------------------------------------------
# From a stable sort (NaN after every number): which index comes back among equal values is not
# specified by PyTorch (its CPU and CUDA kernels differ); the stable sort gives the first.


def _select_sorted(self, dim, keepdim, position_of):
    """Values and indices at sorted position POSITION_OF(sorted values, n) along DIM."""
    if self.dim() == 0:
        return self.clone(), torch.zeros((), dtype=torch.int64, device=self.device)
    dim = dim % self.dim()
    n = self.shape[dim]
    values, indices = torch.sort(self, dim=dim, stable=True)
    pos = position_of(values, n, dim)
    v, i = values.gather(dim, pos), indices.gather(dim, pos)
    return (v, i) if keepdim else (v.squeeze(dim), i.squeeze(dim))


def _nan_count(values, dim):
    if not values.is_floating_point():
        return torch.zeros_like(values.narrow(dim, 0, 1), dtype=torch.int64)
    return torch.isnan(values).sum(dim, keepdim=True)


def _median_dim(self, dim, keepdim=False, ignore_nan=False):
    """median / nanmedian along DIM: the lower middle element; median gives NaN (the first NaN's
    index) when the slice has one, nanmedian the middle of the other elements (NaN if all are)."""
    if self.dim() and self.shape[dim] == 0:
        raise IndexError(f"{'nanmedian' if ignore_nan else 'median'}(): Expected reduction dim {dim} to have "
                         "non-zero size.")

    def position(values, n, d):
        nans = _nan_count(values, d)
        if ignore_nan:
            return torch.div((n - nans - 1).clamp_min(0), 2, rounding_mode="floor")
        return torch.where(nans > 0, n - nans, torch.full_like(nans, (n - 1) // 2))

    return _select_sorted(self, dim, keepdim, position)


def _median_all(self, ignore_nan=False):
    if self.numel() == 0:
        return torch.full((), math.nan, dtype=self.dtype, device=self.device)
    return _median_dim(self.reshape(-1), 0, False, ignore_nan)[0]


def _kthvalue(self, k, dim=-1, keepdim=False):
    n = self.shape[dim % self.dim()] if self.dim() else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _select_sorted(self, dim, keepdim, lambda values, n, d: torch.full_like(_nan_count(values, d), k - 1))


# ---- unique ----------------------------------------------------------------------------------------


def _runs(values, order):
    """For VALUES (1-D, in the order runs are taken): the first element of each run of equal
    values (NaN never equals NaN, so each NaN is its own run, as PyTorch), the run id of every
    element, and each run's length."""
    starts = torch.ones(values.numel(), dtype=torch.bool, device=values.device)
    if values.numel() > 1:
        starts[1:] = values[1:] != values[:-1]
    run_id = torch.cumsum(starts.to(torch.int64), 0) - 1
    output = torch.masked_select(values, starts)
    counts = torch.zeros(output.numel(), dtype=torch.int64, device=values.device)
    counts.index_put_((run_id,), torch.ones_like(run_id), accumulate=True)
    inverse = run_id if order is None else torch.empty_like(run_id).index_put_((order,), run_id)
    return output, inverse, counts


def _unique2(self, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique (flattened): sorted unique values as PyTorch CPU returns them whatever
    SORTED says; inverse and counts empty unless asked for."""
    flat = self.reshape(-1)
    values, order = torch.sort(flat, stable=True)
    return _unique_result(self, _runs(values, order), return_inverse, return_counts)


def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        return NotImplemented
    return _unique_result(self, _runs(self.reshape(-1), None), return_inverse, return_counts)


def _unique_result(self, runs, return_inverse, return_counts):
    """(values, inverse in self's shape, counts), the last two empty unless asked for (PyTorch's)."""
    output, inverse, counts = runs
    empty = torch.empty(0, dtype=torch.int64, device=self.device)
    return (output, inverse.reshape(self.shape) if return_inverse else empty, counts if return_counts else empty)


def _dtype_name(dtype):
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool"}.get(dtype, str(dtype))


# ---- orthogonal polynomials: PyTorch's kernels' branches, then a vectorised recurrence ----------
# Each entry: (special cases in the kernel's order, the first two terms, the step, the trigonometric
# form and the n above which the kernel uses it for |t| < 1, where t is x or 2x - 1 (shifted)).
# The recurrence runs to the largest n that needs it; beyond _RECURRENCE_LIMIT steps the call is
# left to the CPU fallback.
_RECURRENCE_LIMIT = 4096


def _poly_recurrence(x, n, first, second, step, upto, limit, divides=False):
    """P_n(x) elementwise for 0 <= n <= UPTO by P_k = STEP(x, P_{k-1}, P_{k-2}, k), in float64.
    PyTorch's loop in a narrower dtype overflows to ±inf once |P_m| exceeds LIMIT (that dtype's
    largest value), and two steps later computes inf - inf: NaN from P_{m+2} on. That is
    reproduced, so an answer differs from PyTorch's only by rounding. A recurrence that DIVIDES
    its step by k overflows when the undivided value k·|P_k| does."""
    p, q = first(x), second(x)
    never = torch.full_like(n, upto + 3)
    overflow_at = torch.where(q.abs() > limit, torch.ones_like(n), never)
    out = torch.where(n == 0, p, q)
    for k in range(2, upto + 1):
        p, q = q, step(x, q, p, k)
        over = (q.abs() * k if divides else q.abs()) > limit
        overflow_at = torch.where(over & (overflow_at == never), torch.full_like(n, k), overflow_at)
        out = torch.where(n == k, q, out)
    return torch.where(n >= overflow_at + 2, torch.full_like(out, math.nan), out)


def _chebyshev_like(kind, shifted):
    """Chebyshev T, U, V, W (and their shifted forms, in t = 2x - 1)."""
    trig_from = {"t": 6, "u": 8, "v": 8, "w": 8}[kind] if not shifted else {"t": 6, "u": 6, "v": 6, "w": 4}[kind]
    one = lambda x: torch.ones_like(x)
    tv = (lambda x: x + x - 1) if shifted else (lambda x: x)
    second = {"t": tv, "u": lambda x: tv(x) + tv(x), "v": lambda x: tv(x) + tv(x) - 1,
              "w": lambda x: tv(x) + tv(x) + 1}[kind]
    step = lambda x, q, p, k: (tv(x) + tv(x)) * q - p

    def trig(x, nf):
        a = torch.acos(tv(x))
        if kind == "t":
            return torch.cos(nf * a)
        if kind == "u":
            s = torch.sin(a)
            return torch.where(s != 0, torch.sin((nf + 1) * a) / s, (nf + 1) * torch.cos((nf + 1) * a) / tv(x))
        if kind == "v":
            return torch.cos((nf + 0.5) * a) / torch.cos(a / 2)
        return torch.sin((nf + 0.5) * a) / torch.sin(a / 2)

    def value(x, n, dtype):
        nf = n.to(x.dtype)
        even = n % 2 == 0
        # At the ends (x = ±1, or x = 1 and 0 shifted): the kernels' closed forms.
        hi, lo = (x == 1, x == 0) if shifted else (x == 1, x == -1)
        ends = {
            "t": (one(x), torch.where(even, 1.0, -1.0).to(x.dtype)),
            "u": (nf + 1, torch.where(even, nf + 1, -(nf + 1))),
            "v": (one(x), torch.where(even, nf + nf + 1, -(nf + nf + 1))),
            "w": (nf + nf + 1, torch.where(even, 1.0, -1.0).to(x.dtype)),
        }[kind]
        trig_mask = (n > trig_from) & (tv(x).abs() < 1)
        # The trigonometric form in the caller's dtype, as the kernel evaluates it (its phase error
        # n·ulp(acos) is part of PyTorch's answer for large n).
        xd = x.to(dtype)
        trig_val = trig(xd, n.to(dtype)).to(x.dtype)
        if kind == "v":  # the kernel's guard: sin(acos(t)/2) == 1 gives the x = -1 value
            trig_val = torch.where(torch.sin(torch.acos(tv(xd)) / 2) != 1, trig_val, ends[1])
        if kind == "w":
            trig_val = torch.where(torch.cos(torch.acos(tv(xd)) / 2) != 1, trig_val,
                                   torch.where(tv(x) > 0, ends[0], ends[1]))
        return [(n < 0, torch.zeros_like(x)), (hi, ends[0]), (lo, ends[1]), (trig_mask, trig_val)], one, second, step, \
            ~((n < 0) | hi | lo | trig_mask)

    return value


def _hermite(physicists):
    def value(x, n, dtype):
        one = lambda t: torch.ones_like(t)
        second = (lambda t: t + t) if physicists else (lambda t: t)
        if physicists:
            step = lambda t, q, p, k: (t + t) * q - (2 * (k - 1)) * p
        else:
            step = lambda t, q, p, k: t * q - (k - 1) * p
        over = n > {torch.float32: 128, torch.float64: 512}.get(dtype, 1024)  # the kernel's per-type limit
        return [(n < 0, torch.zeros_like(x)), (over & (n > 1), torch.full_like(x, math.nan))], one, second, step, \
            ~((n < 0) | (over & (n > 1)))

    return value


def _laguerre(x, n, dtype):
    one = lambda t: torch.ones_like(t)
    step = lambda t, q, p, k: (((2 * (k - 1)) + (1 - t)) * q - (k - 1) * p) / k
    return [(n < 0, torch.zeros_like(x)), (x.abs() == 0, one(x))], one, lambda t: 1 - t, step, \
        ~((n < 0) | (x.abs() == 0))


def _legendre(x, n, dtype):
    one = lambda t: torch.ones_like(t)
    step = lambda t, q, p, k: ((2 * (k - 1) + 1) * t * q - (k - 1) * p) / k
    ends = torch.where(n % 2 == 0, 1.0, -1.0).to(x.dtype)
    return [(n < 0, torch.zeros_like(x)), (x == 1, one(x)), (x == -1, ends)], one, lambda t: t, step, \
        ~((n < 0) | (x.abs() == 1))


def _polynomial(value_of):
    def op(x, n):
        if not isinstance(x, torch.Tensor):
            x = torch.tensor(x, dtype=n.dtype if n.is_floating_point() else torch.get_default_dtype(), device=n.device)
        if not isinstance(n, torch.Tensor):
            n = torch.tensor(n, device=x.device)
        dtype = torch.result_type(x, n)
        if not dtype.is_floating_point:
            dtype = torch.get_default_dtype()
        x, n = torch.broadcast_tensors(x.to(dtype), n)
        n = n.to(torch.int64)  # the kernel's static_cast: toward zero
        # In float64 whatever the dtype: PyTorch's compiled loop contracts a·q - p into one fused
        # multiply-add, which separate float32 ops cannot; float64 keeps the terms that overflow
        # float32 finite (their float32 result rounds to ±inf, where PyTorch may give NaN) and is closer
        # to the true value than either float32 recurrence.
        x = x.to(torch.float64)
        cases, first, second, step, needs_recurrence = value_of(x, n, dtype)
        upto = int(torch.where(needs_recurrence, n, torch.zeros_like(n)).max().item()) if n.numel() else 0
        if upto > _RECURRENCE_LIMIT:
            return NotImplemented
        out = _poly_recurrence(x, n, first, second, step, max(upto, 1), torch.finfo(dtype).max,
                               divides=value_of in (_laguerre, _legendre))
        for mask, val in reversed(cases):  # the kernel's first matching branch wins
            out = torch.where(mask, val, out)
        return out.to(dtype)

    return op


_POLYNOMIALS = {
    "special_chebyshev_polynomial_t": _polynomial(_chebyshev_like("t", False)),
    "special_chebyshev_polynomial_u": _polynomial(_chebyshev_like("u", False)),
    "special_chebyshev_polynomial_v": _polynomial(_chebyshev_like("v", False)),
    "special_chebyshev_polynomial_w": _polynomial(_chebyshev_like("w", False)),
    "special_shifted_chebyshev_polynomial_t": _polynomial(_chebyshev_like("t", True)),
    "special_shifted_chebyshev_polynomial_u": _polynomial(_chebyshev_like("u", True)),
    "special_shifted_chebyshev_polynomial_v": _polynomial(_chebyshev_like("v", True)),
    "special_shifted_chebyshev_polynomial_w": _polynomial(_chebyshev_like("w", True)),
    "special_hermite_polynomial_h": _polynomial(_hermite(True)),
    "special_hermite_polynomial_he": _polynomial(_hermite(False)),
    "special_laguerre_polynomial_l": _polynomial(_laguerre),
    "special_legendre_polynomial_p": _polynomial(_legendre),
}


# ---- linear algebra from the catalog's factorizations (LU, triangular solves) -------------------
# linalg_lu_factor_ex and linalg_solve_triangular are catalog rows; what PyTorch builds on
# them (solves, inverses, determinants, LU unpacking) is composed here as its kernels do,
# including which LU they return (backward formulas read it).


def _lu_permutation(pivots, m):
    """The row order of LAPACK's 1-based PIVOTS [..., k] (row i swapped with
    pivots[i], in order) as indices [..., m]: row r of P^T·A is A's row perm[r]."""
    perm = torch.arange(m, device=pivots.device).expand(*pivots.shape[:-1], m).clone()
    for i in range(pivots.shape[-1]):
        j = (pivots[..., i:i + 1] - 1).long()
        here = perm[..., i:i + 1].clone()
        perm[..., i:i + 1] = perm.gather(-1, j)
        perm.scatter_(-1, j, here)
    return perm


def _permutation_matrix(perm, dtype):
    """P with P[perm[r], r] = 1, so that A = P·L·U."""
    m = perm.shape[-1]
    return (torch.arange(m, device=perm.device).unsqueeze(-1) == perm.unsqueeze(-2)).to(dtype)


def _lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = LU_data.new_empty(0)
    if unpack_data:
        eye = torch.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        L = LU_data[..., :, :k].tril(-1) + eye
        U = LU_data[..., :k, :].triu()
    else:
        L = U = empty
    P = _permutation_matrix(_lu_permutation(LU_pivots, m), LU_data.dtype) if unpack_pivots else empty
    return P, L, U


def _lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    # A = P·L·U. A·X = B: X = U⁻¹·L⁻¹·Pᵀ·B; Aᵀ·X = B: X = P·L⁻ᵀ·U⁻ᵀ·B; X·A = B is
    # Aᵀ·Xᵀ = Bᵀ (real dtypes only: the catalog has no complex).
    if not left:
        return _lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT
    P, L, U = _lu_unpack(LU, pivots)
    if not adjoint:
        y = torch.linalg.solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
        return torch.linalg.solve_triangular(U, y, upper=True)
    y = torch.linalg.solve_triangular(U.mT, B, upper=False)
    return P @ torch.linalg.solve_triangular(L.mT, y, upper=True, unitriangular=True)


def _solve_ex(A, B, *, left=True, check_errors=False):
    # PyTorch's _linalg_solve_ex returns the LU of A itself (its backward
    # solves with it); a vector B is a column (a row when not LEFT).
    vector = B.dim() == 1 or (A.dim() - 1 == B.dim() and B.shape == A.shape[:-1])
    B_ = B.unsqueeze(-1 if left else -2) if vector else B
    LU, pivots, info = aten.linalg_lu_factor_ex.default(A)
    if check_errors:
        aten._linalg_check_errors(info, "torch.linalg.solve_ex", is_matrix=A.dim() == 2)
    result = _lu_solve(LU, pivots, B_, left=left)
    return (result.squeeze(-1 if left else -2) if vector else result), LU, pivots, info


def _inv_ex(A, *, check_errors=False):
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    inverse, _, _, info = _solve_ex(A, eye)
    if check_errors:
        aten._linalg_check_errors(info, "linalg.inv_ex", is_matrix=A.dim() == 2)
    return inverse, info


def _lu_sign(LU, pivots):
    """(the permutation's sign, the diagonal of U)."""
    swaps = (pivots != torch.arange(1, pivots.shape[-1] + 1, device=pivots.device, dtype=pivots.dtype)).sum(-1)
    return 1 - 2 * (swaps % 2).to(LU.dtype), LU.diagonal(dim1=-2, dim2=-1)


def _det_lu(A):
    # As PyTorch's _linalg_det/_linalg_slogdet: a contiguous (real) A is
    # factored transposed (same determinant); their backwards solve with
    # that LU accordingly.
    return aten.linalg_lu_factor_ex.default(A.mT if A.is_contiguous() else A)[:2]


def _det(A):
    LU, pivots = _det_lu(A)
    sign, diag = _lu_sign(LU, pivots)
    return sign * diag.prod(-1), LU, pivots


def _slogdet(A):
    LU, pivots = _det_lu(A)
    sign, diag = _lu_sign(LU, pivots)
    return sign * diag.sign().prod(-1), diag.abs().log().sum(-1), LU, pivots


def _linalg_lu(A, *, pivot=True):
    if not pivot:
        return NotImplemented  # PyTorch's CPU kernel refuses it too (the fallback says so)
    LU, pivots, _ = aten.linalg_lu_factor_ex.default(A)
    return _lu_unpack(LU, pivots)


def _triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    batch = torch.broadcast_shapes(self.shape[:-2], A.shape[:-2])
    coefficient = A.expand(*batch, *A.shape[-2:]).clone()
    solution = torch.linalg.solve_triangular(A.mT if transpose else A, self, upper=upper != transpose,
                                             unitriangular=unitriangular)
    return solution, coefficient


def _cholesky_solve_helper(self, A, upper):
    # A is the factor: L·Lᵀ (or Uᵀ·U) X = self.
    lower = A.mT if upper else A
    y = torch.linalg.solve_triangular(lower, self, upper=False)
    return torch.linalg.solve_triangular(lower.mT, y, upper=True)


def _cholesky_inverse(self, upper=False):
    eye = torch.eye(self.shape[-1], dtype=self.dtype, device=self.device).expand_as(self)
    return _cholesky_solve_helper(eye, self, upper)


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

    # upsample_nearest*_backward(grad_output, output_size, input_size, scales...) -> the forward
    # (input, output_size, scales...).
    def backward(grad_output, output_size, input_size, *scales):
        x = torch.zeros(input_size, dtype=grad_output.dtype, device=grad_output.device)
        return _vjp(_forward_decomposition(forward_op), x, grad_output, output_size, *scales)

    return backward


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


def _adaptive_windows(size, out):
    """Adaptive pooling's windows of a dim of SIZE into OUT cells: window i spans
    [floor(i·size/out), ceil((i+1)·size/out)) (PyTorch's kernels). Returns (starts, ends)."""
    return [(i * size) // out for i in range(out)], [-((-(i + 1) * size) // out) for i in range(out)]


def _adaptive_max_pool(spatial):
    """adaptive_max_pool{2,3}d for any window sizes (PyTorch's decomposition takes only even
    ones): window i of a dim spans [floor(i·I/O), ceil((i+1)·I/O)); every window's elements are
    gathered (padded to the largest window with -inf) and reduced with amax/argmax, whose first
    maximum is the kernel's; the index is flat over the spatial dims."""

    def forward(self, output_size):
        sizes = list(self.shape[-spatial:])
        outs = [int(o) for o in output_size]
        lead = list(self.shape[:-spatial])
        windows = []
        for size, out in zip(sizes, outs):
            start, end = _adaptive_windows(size, out)
            k = max(e - b for b, e in zip(start, end)) if out else 1
            windows.append((start, end, k))
        count = 1
        for o in outs:
            count *= o
        for _, _, k in windows:
            count *= k
        if self.numel() // max(1, self.shape[-spatial:].numel()) * count > _ONE_HOT_LIMIT or min(outs + sizes) == 0:
            return NotImplemented
        # Flat spatial position of every (output cell, window offset), and whether it is inside.
        pos = torch.zeros([1] * (2 * spatial), dtype=torch.int64, device=self.device)
        valid = torch.ones([1] * (2 * spatial), dtype=torch.bool, device=self.device)
        stride = 1
        for d in reversed(range(spatial)):
            start, end, k = windows[d]
            b = torch.tensor(start, device=self.device).unsqueeze(1)
            e = torch.tensor(end, device=self.device).unsqueeze(1)
            p = b + torch.arange(k, device=self.device)
            ok = p < e
            shape = [1] * (2 * spatial)
            shape[d], shape[spatial + d] = len(start), k
            pos = pos + (torch.where(ok, p, b) * stride).reshape(shape)
            valid = valid & ok.reshape(shape)
            stride *= sizes[d]
        pos = pos.expand(outs + [w[2] for w in windows]).reshape(-1)
        valid = valid.expand(outs + [w[2] for w in windows]).reshape(outs + [-1])
        flat = self.reshape(lead + [-1])
        picked = torch.index_select(flat, len(lead), pos).reshape(lead + outs + [-1])
        floor = torch.full((), -math.inf if self.is_floating_point() else torch.iinfo(self.dtype).min,
                           dtype=self.dtype, device=self.device)
        picked = torch.where(valid, picked, floor)
        which = torch.argmax(picked, dim=-1, keepdim=True)
        values = picked.gather(-1, which).squeeze(-1)
        indices = pos.reshape(outs + [-1]).expand(lead + outs + [picked.shape[-1]]).gather(-1, which).squeeze(-1)
        return values, indices

    return forward


def _per_dim(v, spatial, default=()):
    """A pooling or convolution int (list) argument as SPATIAL values: aten takes one value for
    all dims, and an empty list means DEFAULT (pooling's stride: the kernel size)."""
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    v = v or list(default)
    return v * spatial if len(v) == 1 else v


def _window_sum(x, dim, starts, ends, scales):
    """Along DIM: out[o] = scales[o]·Σ x[starts[o]:ends[o]] — the window's elements gathered
    (index_select) and masked with where, not multiplied by a 0/1 matrix: a NaN or inf outside a
    window must not reach it (0·NaN is NaN)."""
    out = len(starts)
    k = max([e - b for b, e in zip(starts, ends)] + [1])
    dev = x.device
    b = torch.tensor(starts, device=dev).unsqueeze(1)
    e = torch.tensor(ends, device=dev).unsqueeze(1)
    pos = b + torch.arange(k, device=dev)
    valid = pos < e
    pos = torch.where(valid, pos, b).clamp(0, max(x.shape[dim] - 1, 0))
    g = x.index_select(dim, pos.reshape(-1)).unflatten(dim, (out, k))
    shape = [1] * g.dim()
    shape[dim], shape[dim + 1] = out, k
    g = torch.where(valid.reshape(shape), g, torch.zeros((), dtype=x.dtype, device=dev))
    scale_shape = [1] * (x.dim())
    scale_shape[dim] = out
    return g.sum(dim + 1) * torch.tensor(scales, dtype=x.dtype, device=dev).reshape(scale_shape)


def _separable(x, windows):
    """Box sums (or averages) over x's last len(WINDOWS) dims, one dim at a time: WINDOWS[d] is
    (starts, ends, scales) of that dim."""
    spatial = len(windows)
    for d, (starts, ends, scales) in enumerate(windows):
        x = _window_sum(x, x.dim() - spatial + d, starts, ends, scales)
    return x


def _adaptive_avg_pool(spatial):
    """_adaptive_avg_pool{2,3}d: window i of a dim spans [floor(i·I/O), ceil((i+1)·I/O)), and a
    box average is the product of the per-dim averages (one gathered window sum per dim)."""

    def forward(self, output_size):
        if not self.is_floating_point():
            return NotImplemented
        mats = []
        for size, out in zip(self.shape[-spatial:], output_size):
            starts, ends = _adaptive_windows(size, int(out))
            mats.append((starts, ends, [1.0 / max(1, e - b) for b, e in zip(starts, ends)]))
        return _separable(self, mats)

    return forward


def _avg_pool(spatial):
    """avg_pool{2,3}d with any padding, ceil_mode, count_include_pad and divisor_override: per dim,
    window o spans [o·stride - pad, min(that + k, I + pad)) clipped to the input (PyTorch's kernel),
    and both of its divisors (the padded window's size, or the clipped one's) are products of per-dim
    sizes, so the pooling is one gathered window sum per dim."""

    def forward(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
        if not self.is_floating_point():
            return NotImplemented

        ks = _per_dim(kernel_size, spatial)
        st = _per_dim(stride, spatial, ks)
        pads = _per_dim(padding, spatial)
        mats = []
        for size, k, s, p in zip(self.shape[-spatial:], ks, st, pads):
            out = (size + 2 * p - (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (out - 1) * s >= size + p:
                out -= 1
            starts, ends, scales = [], [], []
            for o in range(out):
                b = o * s - p
                e = min(b + k, size + p)
                cb, ce = max(b, 0), min(e, size)
                starts.append(cb)
                ends.append(ce)
                scales.append(1.0 if divisor_override else 1.0 / max(1, (e - b) if count_include_pad else (ce - cb)))
            mats.append((starts, ends, scales))
        out = _separable(self, mats)
        return out / divisor_override if divisor_override else out

    return forward


def _pool_backward(forward, spatial):
    """The backward of a pooling decomposition: a linear op, so autograd's
    vector-Jacobian product through it (grad_output, self, forward's args)."""

    def backward(grad_output, self, *args):
        if not args:  # _adaptive_avg_pool*_backward(grad_output, self): the output size is grad's
            args = (list(grad_output.shape[-spatial:]),)
        return _vjp(forward, self, grad_output, *args)

    return backward




def _conv3d(x, weight, stride, padding, dilation, groups):
    """A 3-D convolution (no bias) as kD 2-D ones: kernel slice kd sees the input's depth slices
    kd·dilation + o·stride, folded into the batch (the 2-D convolutions are catalog ops)."""
    n, c = x.shape[:2]
    kd_size = weight.shape[2]
    sd, pd, dd = stride[0], padding[0], dilation[0]
    if pd:
        x = torch.nn.functional.pad(x, (0, 0, 0, 0, pd, pd))
    d_out = (x.shape[2] - dd * (kd_size - 1) - 1) // sd + 1
    out = None
    for kd in range(kd_size):
        start = kd * dd
        xs = x[:, :, start:start + sd * (d_out - 1) + 1:sd].transpose(1, 2).reshape(n * d_out, c, *x.shape[3:])
        y = aten.convolution.default(xs, weight[:, :, kd], None, stride[1:], padding[1:], dilation[1:], False,
                                     [0, 0], groups)
        out = y if out is None else out + y
    return out.reshape(n, d_out, *out.shape[1:]).transpose(1, 2).contiguous()


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """What the catalog's convolution row declines: 3-D convolutions (through 2-D ones) and
    transposed 1-D ones (as transposed 2-D)."""
    spatial = weight.dim() - 2
    if input.dim() != spatial + 2 or not input.is_floating_point():
        return NotImplemented
    stride, padding, dilation, output_padding = (_per_dim(v, spatial) for v in (stride, padding, dilation, output_padding))
    if transposed and spatial == 1:
        return aten.convolution.default(input.unsqueeze(2), weight.unsqueeze(2), bias, [1] + stride, [0] + padding,
                                        [1] + dilation, True, [0] + output_padding, groups).squeeze(2)
    if spatial != 3 or transposed:
        # Transposed 3-D: the adjoint of the decomposed 3-D convolution (autograd through it) gave
        # PyTorch's result but rounded slightly worse than its kernel on one OpInfo sample: the CPU
        # fallback keeps it exact until the catalog has a 3-D transposed convolution.
        return NotImplemented
    out = _conv3d(input, weight, stride, padding, dilation, groups)
    return out if bias is None else out + bias.reshape([1, -1] + [1] * spatial)


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                          output_padding, groups, output_mask):
    spatial = weight.dim() - 2
    if input.dim() != spatial + 2 or not (transposed or spatial == 3):
        return NotImplemented  # the row's (or the fallback's)
    stride, padding, dilation = (_per_dim(v, spatial) for v in (stride, padding, dilation))
    grad_input = grad_weight = grad_bias = None
    if output_mask[2]:
        grad_bias = grad_output.sum([0] + list(range(2, grad_output.dim())))
    if transposed:
        # y = Cᵀx for the convolution C = conv(·, weight): grad_input = C·g, and grad_weight is
        # conv(g, weight)'s weight gradient for the upstream x (⟨g, Cᵀx⟩ = ⟨C g, x⟩). With an
        # output_padding at or above the stride (allowed below the dilation) C·g has positions past
        # x's: Cᵀ never reads them, so they are cut from grad_input and are zeros in x.
        zeros = [0] * spatial
        cg = aten.convolution.default(grad_output, weight, None, stride, padding, dilation, False, zeros, groups)
        crop = tuple(slice(0, n) for n in input.shape[2:])
        if output_mask[0]:
            grad_input = cg[(slice(None), slice(None)) + crop].contiguous()
        if output_mask[1]:
            x = input
            if cg.shape[2:] != input.shape[2:]:
                x = input.new_zeros(cg.shape)
                x[(slice(None), slice(None)) + crop] = input
            if spatial == 3:  # not through aten: this decomposition would be re-entered
                grad_weight = _conv3d_grads(grad_output, x, weight, stride, padding, dilation, groups, False, True)[1]
            else:
                grad_weight = aten.convolution_backward.default(x, grad_output, weight, None, stride, padding,
                                                                dilation, False, zeros, groups,
                                                                [False, True, False])[1]
        return grad_input, grad_weight, grad_bias
    grad_input, grad_weight = _conv3d_grads(input, grad_output, weight, stride, padding, dilation, groups,
                                            output_mask[0], output_mask[1])
    return grad_input, grad_weight, grad_bias


def _conv3d_grads(input, grad_output, weight, stride, padding, dilation, groups, want_input, want_weight):
    """A 3-D convolution's input and weight gradients: autograd through the 2-D convolutions of
    its decomposition (their backwards are the catalog's)."""
    with _autograd_on():
        x = input.detach().requires_grad_(bool(want_input))
        w = weight.detach().requires_grad_(bool(want_weight))
        wants = [t for t in (x, w) if t.requires_grad]
        if not wants:
            return None, None
        grads = list(torch.autograd.grad(_conv3d(x, w, stride, padding, dilation, groups), wants, grad_output))
    return (grads.pop(0) if want_input else None), (grads.pop(0) if want_weight else None)


def _as_list(lengths):
    return lengths.tolist() if isinstance(lengths, torch.Tensor) else list(lengths)


_CTC_LOG_ZERO = -1e30


def _ctc_alpha(log_probs, targets, input_lengths, target_lengths, blank):
    """CTC's forward variables (Graves et al. 2006) on the device, batched over N and over the
    extended label sequence (blanks between and around the targets): T steps of a three-way
    logsumexp. Returns (nll [N], log_alpha [N, T, 2·S+1]); a sequence stops at its input length."""
    T, N, _ = log_probs.shape
    lens = _as_list(target_lengths)
    S = max(lens + [0])
    dev = log_probs.device
    tl = torch.tensor(lens, device=dev)
    if targets.dim() == 1:  # concatenated targets: pad them to [N, S]
        offsets = torch.cumsum(tl, 0) - tl
        idx = (offsets.unsqueeze(1) + torch.arange(S, device=dev)).clamp(0, max(targets.numel() - 1, 0))
        padded = targets.to(dev)[idx] if targets.numel() else torch.zeros(N, S, dtype=torch.long, device=dev)
    else:
        padded = targets[:, :S].to(dev)
    padded = padded.long()
    ext = torch.full((N, 2 * S + 1), blank, dtype=torch.long, device=dev)
    ext[:, 1::2] = padded
    pos = torch.arange(2 * S + 1, device=dev)
    in_seq = pos.unsqueeze(0) < (2 * tl + 1).unsqueeze(1)  # [N, 2S+1]
    # s may come from s-2 when its label is not blank and differs from the one two back.
    skip = torch.zeros_like(in_seq)
    if S > 0:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    # log(0) as a large finite value: a state no path reaches yet stays at it (adding log-probs
    # does not move it), and autograd's logsumexp gradient through it is 0 instead of the NaN an
    # all -inf logsumexp gives (which would spread through 0·NaN into every gradient).
    log_zero = torch.full((), _CTC_LOG_ZERO, dtype=log_probs.dtype, device=dev)
    lp = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, 2 * S + 1))  # [T, N, 2S+1]
    alpha = torch.where(in_seq & (pos < 2).unsqueeze(0), lp[0].clamp(min=_CTC_LOG_ZERO), log_zero)
    il = torch.tensor(_as_list(input_lengths), device=dev)
    alphas = [alpha]
    for t in range(1, T):
        a1 = torch.nn.functional.pad(alpha, (1, 0), value=_CTC_LOG_ZERO)[:, :-1]
        a2 = torch.where(skip, torch.nn.functional.pad(alpha, (2, 0), value=_CTC_LOG_ZERO)[:, :-2], log_zero)
        new = torch.where(in_seq, (torch.logsumexp(torch.stack([alpha, a1, a2]), 0) + lp[t]).clamp(min=_CTC_LOG_ZERO),
                          log_zero)
        alpha = torch.where((t < il).unsqueeze(1), new, alpha)
        alphas.append(alpha)
    last = alpha.gather(1, (2 * tl).unsqueeze(1)).squeeze(1)
    before = torch.where(tl > 0, alpha.gather(1, (2 * tl - 1).clamp(min=0).unsqueeze(1)).squeeze(1), log_zero)
    nll = -torch.logaddexp(last, before)
    inf = torch.full((), math.inf, dtype=log_probs.dtype, device=dev)
    nll = torch.where(nll > -_CTC_LOG_ZERO / 10, inf, nll)  # no path: an infinite loss
    log_alpha = torch.stack(alphas, 1)
    return nll, torch.where(log_alpha < _CTC_LOG_ZERO / 10, -inf, log_alpha)


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    # float32/float64 only, as PyTorch's CPU kernel (its refusal of other dtypes comes from the fallback).
    if log_probs.dim() != 3 or log_probs.dtype not in (torch.float32, torch.float64) or log_probs.shape[0] == 0:
        return NotImplemented
    return _ctc_alpha(log_probs, targets, input_lengths, target_lengths, blank)


def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                       blank, zero_infinity=False):
    """PyTorch's CTC gradient: (exp(lp) - γ)·grad for t below the input length, 0 after it, where
    γ, the labels' posterior occupancy, is minus autograd's gradient of the NLL through the
    forward variables (exp(lp) is the term of its fused log_softmax, which PyTorch's kernels add)."""
    if log_probs.dim() != 3 or log_probs.dtype not in (torch.float32, torch.float64):
        return NotImplemented
    T = log_probs.shape[0]
    with _autograd_on():
        x = log_probs.detach().requires_grad_(True)
        nll, _ = _ctc_alpha(x, targets, input_lengths, target_lengths, blank)
        (minus_gamma,) = torch.autograd.grad(nll, x, grad)
    il = torch.tensor(_as_list(input_lengths), device=log_probs.device)
    live = (torch.arange(T, device=log_probs.device).unsqueeze(1) < il.unsqueeze(0)).unsqueeze(2)  # [T, N, 1]
    out = torch.where(live, log_probs.exp() * grad.reshape(1, -1, 1) + minus_gamma, torch.zeros((), dtype=log_probs.dtype, device=log_probs.device))
    # A sequence with no alignment (infinite loss): its gradient is 0 with zero_infinity, else
    # PyTorch's formula's exp(-inf + inf) = NaN wherever t is below the input length.
    infinite = (neg_log_likelihood == math.inf).reshape(1, -1, 1)
    fill = torch.zeros((), dtype=out.dtype, device=out.device) if zero_infinity else torch.full(
        (), math.nan, dtype=out.dtype, device=out.device)
    return torch.where(infinite & (live | zero_infinity), fill, out)


def _max_pool_backward(spatial):
    """max_pool*_with_indices_backward / adaptive_max_pool*_backward: the
    gradient lands where the forward took its maximum; INDICES are flat over
    the last SPATIAL dims, so one scatter_add per (batch, channel) row."""

    def backward(grad_output, self, *args):
        indices = args[-1]
        lead = list(self.shape[: self.dim() - spatial])
        grad = torch.zeros(lead + [self.shape[self.dim() - spatial:].numel()], dtype=grad_output.dtype,
                           device=grad_output.device)
        grad.scatter_add_(-1, indices.reshape(lead + [-1]), grad_output.reshape(lead + [-1]))
        return grad.reshape(self.shape)

    return backward


def _multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None, reduction=1):
    forward = _forward_decomposition(aten.multi_margin_loss.default)
    return _vjp(lambda x: forward(x, target, p, margin, weight, reduction), self, grad_output)


def _functional_overload(packet, out_overload):
    """The overload of PACKET that OUT_OVERLOAD is the out= form of: the one
    without out arguments whose arguments are OUT_OVERLOAD's other ones."""
    want = [a.name for a in out_overload._schema.arguments if not a.is_out]
    for name in packet.overloads():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        if not any(a.is_out for a in args) and [a.name for a in args] == want:
            return name
    return None


def decomposition(name, overload, table):
    """The decomposition of aten::NAME.OVERLOAD: torch_hal's own first, then
    PyTorch's (TABLE); an out= overload without one of its own runs its
    functional overload's and copies the results into its out arguments
    (resized), which it returns. None when there is none."""
    packet = getattr(aten, name)
    op = getattr(packet, overload)
    outs = [a.name for a in op._schema.arguments if a.is_out]
    functional_name = _functional_overload(packet, op) if outs else None
    for source in (OWN_DECOMPOSITIONS, table):
        key = (lambda o: f"{name}.{o}") if source is OWN_DECOMPOSITIONS else (lambda o: getattr(packet, o))
        fn = source.get(key(overload))
        if fn is not None:
            return fn
        functional = source.get(key(functional_name)) if functional_name else None
        if functional is not None:
            return _into_outs(functional, outs)
    return None


def _into_outs(functional, outs):
    def out_variant(*args, **kwargs):
        targets = [kwargs.pop(o) for o in outs]
        results = functional(*args, **kwargs)
        if results is NotImplemented:
            return results
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
    "put_.default": _put,
    "masked_scatter_.default": _masked_scatter,
    "nonzero_static.default": _nonzero_static,
    "addbmm.default": _addbmm,
    "addbmm_.default": _in_place(_addbmm),
    "angle.default": _angle,
    "histc.default": _histc,
    "_cummax_helper.default": lambda self, values, indices, dim: _cum_extreme(self, values, indices, dim, True),
    "_cummin_helper.default": lambda self, values, indices, dim: _cum_extreme(self, values, indices, dim, False),
    "frexp.Tensor": _frexp,
    "_unique2.default": _unique2,
    "_unique.default": lambda self, sorted=True, return_inverse=False: _unique2(self, sorted, return_inverse)[:2],
    "unique_consecutive.default": _unique_consecutive,
    "median.dim": lambda self, dim, keepdim=False: _median_dim(self, dim, keepdim),
    "nanmedian.dim": lambda self, dim, keepdim=False: _median_dim(self, dim, keepdim, ignore_nan=True),
    "median.default": _median_all,
    "nanmedian.default": lambda self: _median_all(self, ignore_nan=True),
    "kthvalue.default": _kthvalue,
    "scatter_add.default": _scatter_add,
    "searchsorted.Tensor": _searchsorted,
    "searchsorted.Scalar": _searchsorted,
    "scatter_reduce.two": _scatter_reduce,
    "scatter_reduce_.two": _in_place(_scatter_reduce),
    "index_reduce.default": _index_reduce,
    "index_reduce_.default": _in_place(_index_reduce),
    "adaptive_max_pool2d.default": _adaptive_max_pool(2),
    "adaptive_max_pool3d.default": _adaptive_max_pool(3),
    "adaptive_max_pool2d_backward.default": _max_pool_backward(2),
    "adaptive_max_pool3d_backward.default": _max_pool_backward(3),
    "max_pool3d_with_indices_backward.default": _max_pool_backward(3),
    "multi_margin_loss_backward.default": _multi_margin_loss_backward,
    "_ctc_loss.default": _ctc_loss,
    "_ctc_loss.Tensor": _ctc_loss,
    "_ctc_loss_backward.default": _ctc_loss_backward,
    "_ctc_loss_backward.Tensor": _ctc_loss_backward,
    "convolution.default": _convolution,
    "convolution_backward.default": _convolution_backward,
    "_adaptive_avg_pool3d.default": _adaptive_avg_pool(3),
    "_adaptive_avg_pool3d_backward.default": _pool_backward(_adaptive_avg_pool(3), 3),
    "avg_pool3d.default": _avg_pool(3),
    "avg_pool3d_backward.default": _pool_backward(_avg_pool(3), 3),
    "avg_pool2d.default": _avg_pool(2),
    "avg_pool2d_backward.default": _pool_backward(_avg_pool(2), 2),
    "lu_unpack.default": _lu_unpack,
    "linalg_lu_solve.default": _lu_solve,
    "_linalg_solve_ex.default": _solve_ex,
    "linalg_inv_ex.default": _inv_ex,
    "_linalg_det.default": _det,
    "_linalg_slogdet.default": _slogdet,
    "linalg_lu.default": _linalg_lu,
    "triangular_solve.default": _triangular_solve,
    "_cholesky_solve_helper.default": _cholesky_solve_helper,
    "cholesky_inverse.default": _cholesky_inverse,
}
for _name in ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
              "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _linear_backward(getattr(aten, _name).default)
for _name in ("upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _upsample_linear_backward(getattr(aten, _name).default)
for _name in ("reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
              "replication_pad3d"):
    OWN_DECOMPOSITIONS[f"{_name}_backward.default"] = _pad_backward(getattr(aten, _name).default)
for _name, _fn in _POLYNOMIALS.items():
    for _overload in ("default", "x_scalar", "n_scalar"):
        OWN_DECOMPOSITIONS[f"{_name}.{_overload}"] = _fn
