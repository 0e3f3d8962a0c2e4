"""``torch.hal``: the device module of the "hal" device (as torch.cuda is for "cuda")."""
import contextlib
from dataclasses import dataclass

import torch

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
        raise ValueError(f"Expected a hal device, but got: {device}")  # torch.cuda's wording
    return _C.current_device() if device.index is None else device.index


class InvalidDeviceIdError(AssertionError, RuntimeError):
    """What torch.hal.get_device_properties raises for a device that does not
    exist: an AssertionError("Invalid device id ...") as torch.cuda's, and a
    RuntimeError as torch_hal's other device-index errors."""


def current_device():
    return _C.current_device()


def set_device(device):
    """Makes DEVICE current; a negative index is a no-op (as torch.cuda.set_device). A
    missing device raises torch.AcceleratorError ("hal error: invalid device ordinal ...")."""
    index = _index(device)
    if index >= 0:
        _C.set_device(index)


def synchronize(device=None):
    """Waits for the work queued on every stream of the device."""
    _C.synchronize(_index(device))


class device:
    """Context manager that makes DEVICE (index, "hal:i" or torch.device) current."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev = None

    def __enter__(self):
        self.prev = _C.current_device()
        _C.set_device(self.idx)

    def __exit__(self, *exc):
        _C.set_device(self.prev)
        return False


# ---- streams and events ----
#
# A hal stream is a torch.Stream (so torch.accelerator, torch.Stream APIs and
# the autograd engine see the same object): stream id 0 is the device's
# default stream, synchronous (work has completed when the call returns);
# Stream() hands out one of a pool of HAL streams per device, round-robin as
# CUDA's pool does. Work on different streams is ordered only through events
# (wait_stream, wait_event), as on CUDA.


class Stream(torch.Stream):
    """A hal stream: ``torch.hal.Stream(device=None, priority=0)`` (priority is
    accepted and ignored: HAL streams have none)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:  # (stream_id, device_index, device_type): an existing stream
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, torch.device("hal", _index(device)), priority=priority)


def _stream(fields):
    stream_id, device_index, device_type = fields
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


class _EventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "hal"


class Event(metaclass=_EventType):
    """A hal event: ``torch.hal.Event(enable_timing=False)`` makes a torch.Event on
    "hal" (record, wait, query, synchronize, elapsed_time in milliseconds). Not a
    subclass: torch.Event.elapsed_time accepts exact torch.Event objects only."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(device="hal", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None):
    """The calling thread's current stream on the device."""
    return _stream(_C.current_stream(_index(device)))


def default_stream(device=None):
    return _stream(_C.default_stream(_index(device)))


def set_stream(stream):
    """Makes STREAM current on its device for the calling thread."""
    if stream is not None:
        _C.set_stream(stream.stream_id, stream.device_index)


@contextlib.contextmanager
def stream(stream):
    """Makes STREAM current (on its device, which also becomes current) inside
    the ``with`` block; ``None`` is a no-op."""
    if stream is None:
        yield
        return
    with device(stream.device_index):
        prev = _C.set_stream(stream.stream_id, stream.device_index)
        try:
            yield
        finally:
            _C.set_stream(prev[0], prev[1])


# ---- memory statistics (the core caching allocator, via torch.accelerator) ----


def memory_stats(device=None):
    """CUDA-style statistics (``"allocated_bytes.all.current"``, ...) of the
    device's caching allocator."""
    return torch.accelerator.memory_stats(_index(device))


def memory_allocated(device=None):
    """Bytes held by tensors (the allocator's rounded block sizes)."""
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None):
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the plugin (in use and cached)."""
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None):
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None):
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache():
    """Returns every cached (unused) block of every device to its plugin."""
    torch.accelerator.empty_cache()


def mem_get_info(device=None):
    """(free, total) bytes as the plugin reports them."""
    return torch.accelerator.get_memory_info(_index(device))


# ---- random numbers (the catalog's Philox generator) ----


def manual_seed(seed):
    """Seeds the current device's generator (kept until the runtime starts)."""
    _C.manual_seed(_C.current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed):
    """Seeds every device's generator (what torch.manual_seed calls)."""
    _C.manual_seed(-1, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed():
    """Seeds the current device's generator with a non-deterministic number."""
    _C.seed(_C.current_device())


def seed_all():
    s = _C.seed(0)
    for i in range(1, device_count()):
        _C.manual_seed(i, s)


def initial_seed():
    return _C.initial_seed(_C.current_device())


def get_rng_state(device="hal"):
    """The generator state: a 16-byte uint8 CPU tensor (seed, offset)."""
    return _C.get_rng_state(_index(device))  # one builtin: torch.compile runs it eagerly


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state, device="hal"):
    _C.set_rng_state(_index(device), new_state)


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def _rng_state_runs_eagerly(dynamo):
    """Makes the RNG-state functions run eagerly under torch.compile (a graph break), as torch.cuda's
    do: Dynamo skips torch's own files but would trace these, and callers such as torch.testing's
    freeze_rng_state call them inside no_dispatch(), where tracing cannot work. DYNAMO: the
    torch._dynamo module, just imported (torch_hal does not import it itself: seconds)."""
    g = globals()
    for name in ("get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all"):
        if not getattr(g[name], "_torchdynamo_disable", False):
            g[name] = dynamo.disable(g[name], reason="the hal generator's host state")


def get_amp_supported_dtype():
    """The dtypes torch.autocast("hal") computes in: float16 and bfloat16 (a plugin that lacks a kernel in
    one gets the core's casts or the CPU fallback, never a failure)."""
    return [torch.float16, torch.bfloat16]


def get_device_properties(device=None):
    """The properties of DEVICE (default: the current one). A device that does not exist
    raises InvalidDeviceIdError ("Invalid device id", as torch.cuda.get_device_properties)."""
    _lazy_init()  # a runtime that cannot start says why (every skipped plugin)
    index = _index(device)
    count = device_count()
    if index < 0 or index >= count:
        there = "is 1 device" if count == 1 else f"are {count} devices"
        raise InvalidDeviceIdError(f"Invalid device id: hal:{index} does not exist; there {there} "
                                   f"(hal:0..hal:{count - 1})")
    return DeviceProperties(**_C.get_device_properties(index))


def _is_in_bad_fork():
    return False


from . import amp  # noqa: E402  (torch.hal.amp: needs get_amp_supported_dtype above)
