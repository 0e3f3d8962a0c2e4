"""torch.hal.amp: torch.cuda.amp's interface for the "hal" device.

``torch.hal.amp.autocast(dtype=...)`` is ``torch.autocast("hal", ...)`` and
``torch.hal.amp.GradScaler(...)`` is ``torch.amp.GradScaler("hal", ...)``, so
code written against ``torch.cuda.amp`` changes only the module name.
"""
import torch

from .device import get_amp_supported_dtype

__all__ = ["GradScaler", "autocast", "get_amp_supported_dtype"]


class autocast(torch.amp.autocast):  # noqa: N801 (PyTorch's name)
    """torch.autocast("hal"); float16 by default, as torch.cuda.amp.autocast."""

    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        super().__init__("hal", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler("hal"): its unscale and update ops run on the device."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("hal", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)

