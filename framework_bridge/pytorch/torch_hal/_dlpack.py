"""DLPack for "hal" tensors through PyTorch's own API (torch.from_dlpack,
torch.utils.dlpack.to_dlpack/from_dlpack, Tensor.__dlpack__/__dlpack_device__).

PyTorch exports a PrivateUse1 tensor as a kDLExtDev capsule whose data pointer
is the tensor's address: for hal, a token inside the storage's allocation
(csrc/backend.hpp). Two places need torch_hal:

* Import: PyTorch's at::fromDLPack wraps that address in a storage torch_hal
  cannot map to its Buffer (the tensor fails at first use). Every Python
  import goes through torch._C._from_dlpack, so torch_hal wraps it: a
  kDLExtDev capsule becomes a hal tensor sharing the exporting tensor's
  storage (csrc/module.cc, tensor_sharing in csrc/storage.cc), any other
  capsule goes to PyTorch as before.
* Tensor.__dlpack_device__ compares device.type with "privateuse1", which a
  renamed backend never has (pytorch/pytorch#195815), and raises "Unknown
  device type hal for Dlpack"; torch_hal answers (kDLExtDev, index) for hal
  tensors and leaves every other tensor to PyTorch.
* torch.from_dlpack(x, device="hal") converts the index-less device with
  torch._C._torchDeviceToDLDevice, which gives device id 255 (index -1 as
  unsigned char), so a hal tensor on hal:0 looked like it lived elsewhere
  (a needless copy, or copy=False refused); torch_hal resolves "hal" to the
  current device there, and names the device type (kDLExtDev) in the tuple.
"""
import torch
from torch.overrides import handle_torch_function, has_torch_function_unary
from torch.utils.dlpack import DLDeviceType

from . import _C


def install():
    torch_from_dlpack = torch._C._from_dlpack
    if getattr(torch_from_dlpack, "_torch_hal", False):
        return

    def _from_dlpack(capsule):
        t = _C._from_dlpack(capsule)
        return torch_from_dlpack(capsule) if t is None else t

    _from_dlpack._torch_hal = True
    _from_dlpack.__doc__ = torch_from_dlpack.__doc__
    torch._C._from_dlpack = _from_dlpack

    torch_to_dl_device = torch._C._torchDeviceToDLDevice

    def _torchDeviceToDLDevice(device):
        if isinstance(device, torch.device) and device.type == "hal":
            index = _C.current_device() if device.index is None else device.index
            return (DLDeviceType.kDLExtDev, torch_to_dl_device(torch.device("hal", index))[1])
        return torch_to_dl_device(device)

    torch._C._torchDeviceToDLDevice = _torchDeviceToDLDevice

    torch_dlpack_device = torch.Tensor.__dlpack_device__

    def __dlpack_device__(self):
        if has_torch_function_unary(self):
            return handle_torch_function(torch.Tensor.__dlpack_device__, (self,), self)
        device = self.device
        if device.type == "hal":
            return (DLDeviceType.kDLExtDev, device.index if device.index is not None else 0)
        return torch_dlpack_device(self)

    __dlpack_device__.__doc__ = torch_dlpack_device.__doc__
    torch.Tensor.__dlpack_device__ = __dlpack_device__
    # torch.utils.dlpack.ReadOnlyTensorWrapper lets the protocol methods it knew through.
    wrapper = getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)
    allowed = getattr(wrapper, "_DLPACK_ALLOWED", None)
    if isinstance(allowed, frozenset):
        wrapper._DLPACK_ALLOWED = allowed | {__dlpack_device__}
