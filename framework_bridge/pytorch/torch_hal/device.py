"""``torch.hal``: the device module of the "hal" device (as torch.cuda is for "cuda")."""
from dataclasses import dataclass

from . import _C


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.hal.get_device_properties(i) returns."""

    plugin: str  # the HAL plugin that owns the device ("cpu", "opencl", ...)
    id: str  # the runtime's device id ("cpu:0")
    name: str
    vendor: str
    total_memory: int  # bytes
    compute_units: int


def init(config=None, plugins=None):
    """Chooses the plugins before first use: CONFIG is a hal.toml path, PLUGINS a
    list of plugin files (only these load). Raises RuntimeError once the device
    has been used."""
    _C._init(None if config is None else str(config), [str(p) for p in (plugins or [])])


def is_initialized():
    """Whether the HAL runtime behind the device has started."""
    return _C.is_initialized()


def _lazy_init():
    _C._start()


def device_count():
    """Number of hal devices (0 when no plugin could be loaded; using the
    device then raises an error naming every skipped plugin)."""
    return _C.device_count()


def is_available():
    return device_count() > 0


def _index(device):
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    import torch

    device = torch.device(device)
    if device.type != "hal":
        raise ValueError(f"expected a hal device, got {device}")
    return _C.current_device() if device.index is None else device.index


def current_device():
    return _C.current_device()


def set_device(device):
    _C.set_device(_index(device))


def synchronize(device=None):
    """Waits for the device's queued work (launches are synchronous for now)."""
    _C.synchronize(_index(device))


def get_device_properties(device=None):
    return DeviceProperties(**_C.get_device_properties(_index(device)))


def _is_in_bad_fork():
    return False
