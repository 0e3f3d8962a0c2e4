"""torch.Tensor <-> hal.Tensor (host copies), and a one-call op runner for tests and tools."""
import torch

from ._hal import Op, Tensor

DTYPES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.bool: "bool",
}
TORCH_DTYPES = {v: k for k, v in DTYPES.items()}


def to_hal(device, t):
    """A device copy of torch tensor T (contiguous)."""
    t = t.detach().contiguous()
    out = Tensor.empty(device, list(t.shape), DTYPES[t.dtype])
    out.copy_from(t.reshape(-1).view(torch.uint8).numpy())
    return out


def to_torch(t):
    """A torch copy of contiguous hal.Tensor T."""
    dtype = TORCH_DTYPES[t.dtype]
    if t.nbytes == 0:
        return torch.empty(t.shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(t.to_bytes()), dtype=torch.uint8)
    return raw.view(dtype).reshape(t.shape)


_ops = {}


def run(device, name, inputs, outputs, attrs=None):
    """Runs op NAME on DEVICE. INPUTS: torch tensors (None = absent optional input).
    OUTPUTS: torch tensors giving each output's shape and dtype (their values are ignored).
    Returns the outputs as new torch tensors."""
    key = (device.id, name)
    if key not in _ops:
        _ops[key] = Op(device, name)
    hin = [None if x is None else to_hal(device, x) for x in inputs]
    hout = [to_hal(device, o) for o in outputs]
    _ops[key](hin, hout, attrs or {})
    return [to_torch(o) for o in hout]
