"""Dynamo's device interface for "hal" (torch._dynamo.device_interface): what Dynamo and the compile
stack ask a device for (current device, count, streams, synchronize, properties, bf16 support),
answered by torch.hal. Registered when torch._dynamo is imported (torch_hal/__init__.py), which
precedes any import of inductor, as PyTorch asks of out-of-tree backends."""
import torch
from torch._dynamo.device_interface import DeviceInterface, register_interface_for_device

from . import device as _hal


class HalInterface(DeviceInterface):
    device = _hal.device
    Event = _hal.Event
    Stream = _hal.Stream

    class Worker:
        """Properties recorded before Dynamo's workers fork (they do not start the runtime)."""

        @staticmethod
        def set_device(device):
            _hal.set_device(device)

        @staticmethod
        def current_device():
            return _hal.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return _hal.get_device_properties(device)

    current_device = staticmethod(_hal.current_device)
    set_device = staticmethod(_hal.set_device)
    device_count = staticmethod(_hal.device_count)
    is_available = staticmethod(_hal.is_available)
    stream = staticmethod(_hal.stream)
    current_stream = staticmethod(_hal.current_stream)
    set_stream = staticmethod(_hal.set_stream)
    synchronize = staticmethod(_hal.synchronize)
    get_device_properties = staticmethod(_hal.get_device_properties)
    memory_allocated = staticmethod(_hal.memory_allocated)

    @staticmethod
    def exchange_device(device):
        previous = _hal.current_device()
        if device >= 0:
            _hal.set_device(device)
        return previous

    maybe_exchange_device = exchange_device

    @staticmethod
    def get_raw_stream(device_idx):
        return _hal.current_stream(device_idx).stream_id

    @staticmethod
    def is_bf16_supported(including_emulation=False):
        return torch.bfloat16 in torch.accelerator.get_device_capability("hal")["supported_dtypes"]

    @staticmethod
    def get_compute_capability(device=None):
        return ""  # no compute-capability numbering: a plugin says what it can run through the op catalog

    @staticmethod
    def is_triton_capable(device=None):
        return False


def register():
    register_interface_for_device("hal", HalInterface)
