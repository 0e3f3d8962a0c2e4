"""torch_hal: the HAL as a PyTorch device.

    import torch, torch_hal
    x = torch.randn(3, device="hal") + 1

Importing renames PyTorch's PrivateUse1 backend to "hal", registers the
device module ``torch.hal`` and the generated methods (``x.hal()``,
``x.is_hal``, ``module.hal()``). The HAL runtime starts at first use of the
device: devices hal:0..N-1 are the devices of the plugins hal.toml selects
($HAL_CONFIG, else default discovery); :func:`init` overrides that before
first use.
"""
import atexit as _atexit

import torch

from . import _C
from . import device as _device_module

_BACKEND = "hal"

if torch._C._get_privateuse1_backend_name() != _BACKEND:
    torch.utils.rename_privateuse1_backend(_BACKEND)
    torch._register_device_module(_BACKEND, _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )

from ._fallback import ExplainEntry, FallbackStats, explain, fallback_stats, reset_fallback_stats
from .dynamo import compile_backend

# torch.compile(backend="hal") by name (pip installs also declare it as a torch_dynamo_backends entry point).
try:
    from torch._dynamo import list_backends as _list_backends, register_backend as _register_backend

    if "hal" not in _list_backends(exclude_tags=()):
        _register_backend(compile_backend, name="hal")
except ImportError:  # a torch without Dynamo
    pass

# A backward's last state may still sit in the autograd engine's hal worker threads when the
# script ends; let them drop it while the interpreter can still take it (csrc/module.cc).
_atexit.register(_C._drain_autograd_device_threads)

init = _device_module.init
is_initialized = _device_module.is_initialized


def _autoload():
    """The ``torch.backends`` entry point (pyproject.toml): ``import torch`` imports
    this package when it is pip-installed, which registers the device;
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off."""


__all__ = ["compile_backend", "init", "is_initialized", "fallback_stats", "reset_fallback_stats", "explain", "FallbackStats",
           "ExplainEntry"]
