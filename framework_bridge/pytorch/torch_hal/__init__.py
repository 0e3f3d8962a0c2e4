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
import importlib
import importlib.abc
import importlib.util
import sys

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

from . import _dlpack

_dlpack.install()  # DLPack import/export of hal tensors through PyTorch's API

from ._fallback import ExplainEntry, FallbackStats, explain, fallback_stats, reset_fallback_stats
from . import llm  # torch.ops.hal.<op>: the catalog's fused inference ops
from . import _rnn  # nn.LSTM with whole-sequence projections (aten::lstm on "hal")


def compile_backend(gm, example_inputs, options=None):
    """torch.compile(model, backend="hal"), or backend=torch_hal.compile_backend: see torch_hal.dynamo.
    Imports torch_hal.dynamo (and torch._dynamo) at first use, not with torch_hal."""
    from .dynamo import compile_backend as backend

    return backend(gm, example_inputs, options=options)


def _register_dynamo_backend():
    # Not list_backends(): it imports every Dynamo backend module, which fails while torch._dynamo
    # is still being imported (the hook below runs right after its module body).
    from torch._dynamo.backends.registry import register_backend

    register_backend(compile_backend, name="hal")
    _device_module._rng_state_runs_eagerly(sys.modules["torch._dynamo"])
    from . import _dynamo_device

    _dynamo_device.register()


class _RegisterWhenDynamoImports(importlib.abc.MetaPathFinder):
    """Registers torch.compile's backend "hal" by name once torch._dynamo is imported: importing
    it with torch_hal would add seconds to every `import torch` that autoloads the device (pip
    installs also declare the backend as a torch_dynamo_backends entry point)."""

    def find_spec(self, name, path, target=None):
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            _register_dynamo_backend()

        spec.loader.exec_module = exec_and_register
        return spec


if "torch._dynamo" in sys.modules:
    _register_dynamo_backend()
elif not any(isinstance(f, _RegisterWhenDynamoImports) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenDynamoImports())


def __getattr__(name):
    # torch_hal.dynamo and torch_hal.tools load on first use (both import large parts of torch).
    if name in ("dynamo", "tools"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from . import distributed as _distributed

_distributed.register()


def _at_exit():
    # torch_hal's threads that may still hold Python objects when the script ends drop them while
    # the interpreter can take them: first the hal process groups' completion threads (queued
    # Works, csrc/distributed.cc), then the autograd engine's hal worker threads (a backward's last
    # state, csrc/module.cc), which a Work's completion may still feed.
    _C._shutdown_distributed_backends()
    _C._drain_autograd_device_threads()


_atexit.register(_at_exit)

init = _device_module.init
is_initialized = _device_module.is_initialized


def _autoload():
    """The ``torch.backends`` entry point (pyproject.toml): ``import torch`` imports
    this package when it is pip-installed, which registers the device;
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off."""


__all__ = ["compile_backend", "init", "is_initialized", "fallback_stats", "reset_fallback_stats", "explain", "FallbackStats",
           "ExplainEntry"]
