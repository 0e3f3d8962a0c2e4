"""Copies of an op's arguments between devices that keep each tensor's layout (sizes, strides, expanded
dims), so a replayed op sees the same memory layout as the captured one, and exact comparison."""
import torch
import torch.utils._pytree as pytree


def _dense(size, stride):
    """Whether no two elements of (size, stride) share memory."""
    dims = sorted((s, n) for n, s in zip(size, stride) if n > 1)
    reach = 1
    for s, n in dims:
        if s < reach:
            return False
        reach = s * n
    return True


def copy_like(t, device, dtype=None):
    """A copy of tensor T on DEVICE (as DTYPE) with T's sizes and strides; expanded (stride-0) dims stay
    expanded. Other self-overlapping layouts (unfold) come back contiguous."""
    expanded = [d for d in range(t.dim()) if t.stride(d) == 0 and t.size(d) > 1]
    base = t
    for d in expanded:
        base = base.narrow(d, 0, 1)
    dtype = dtype or t.dtype
    if _dense(base.size(), base.stride()):
        out = torch.empty_strided(base.size(), base.stride(), dtype=dtype, device=device)
    else:
        out = torch.empty(base.size(), dtype=dtype, device=device)
    out.copy_(base)
    return out.expand(t.size()) if expanded else out


def to_device(tree, device, only_from=None):
    """TREE with every tensor (or every tensor on a device of type ONLY_FROM) copied to DEVICE by
    copy_like; other leaves kept (device= arguments too: a saved call
    keeps saying "hal", place() moves them)."""
    def move(x):
        if isinstance(x, torch.Tensor) and (only_from is None or x.device.type == only_from):
            return copy_like(x, device)
        return x

    return pytree.tree_map(move, tree)


def tensor_devices(tree):
    """The device type of each tensor leaf of TREE, in leaf order."""
    return [x.device.type for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def place(tree, devices, device):
    """TREE (tensors on the CPU) with the tensors whose DEVICES entry is "hal" copied to DEVICE."""
    leaves, spec = pytree.tree_flatten(tree)
    marks = iter(devices)
    out = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            x = copy_like(x, device) if next(marks) == "hal" else x
        elif isinstance(x, torch.device) and x.type == "hal":
            x = torch.device(device)
        out.append(x)
    return pytree.tree_unflatten(out, spec)


class MemoryFormat(str):
    """A torch.memory_format in a saved call (torch.memory_format does not pickle): its name."""


def encode(tree):
    """TREE made picklable for torch.save (memory formats by name); decode() undoes it."""
    return pytree.tree_map(lambda x: MemoryFormat(str(x).split(".")[-1]) if isinstance(x, torch.memory_format)
                           else x, tree)


def decode(tree):
    return pytree.tree_map(lambda x: getattr(torch, x) if isinstance(x, MemoryFormat) else x, tree)


def nbytes(tree):
    return sum(x.untyped_storage().nbytes() for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor))


def same(a, b):
    """Whether two results are identical: same structure, tensors of the same dtype and shape with
    equal values (NaN equals NaN), other leaves equal. Returns (bool, why)."""
    la, sa = pytree.tree_flatten(a)
    lb, sb = pytree.tree_flatten(b)
    if sa != sb:
        return False, f"structure {sa} != {sb}"
    for i, (x, y) in enumerate(zip(la, lb)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False, f"output {i}: tensor vs {type(y).__name__}"
        if not isinstance(x, torch.Tensor):
            if x != y and not (x != x and y != y):
                return False, f"output {i}: {x!r} != {y!r}"
            continue
        if x.dtype != y.dtype or x.shape != y.shape:
            return False, f"output {i}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        x, y = x.cpu(), y.cpu()
        if not torch.equal(x, y):
            differ = x != y
            if x.is_floating_point() or x.is_complex():
                differ &= ~(x.isnan() & y.isnan())
            if differ.any():
                return False, f"output {i}: {int(differ.sum())} of {x.numel()} elements differ"
    return True, ""


def describe(t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "stride": list(t.stride()),
            "device": str(t.device)}
