"""Interop of the "hal" device with PyTorch's own APIs: DLPack export/import (torch.from_dlpack,
torch.utils.dlpack, Tensor.__dlpack__), stream waits across devices and plugins, and device-index
errors worded as PyTorch's for CUDA."""
import ctypes
import gc

import pytest
import torch
import torch.utils.dlpack as dlpack

import torch_hal

from subprocess_util import build_dir, run_python


def run_interop_python(code, **env):
    return run_python(code, timeout=600, **env)  # two plugins and a slow producer


kDLCPU, kDLVulkan, kDLExtDev = 1, 7, 12


# ---- DLPack: hal -> capsule -> hal shares the storage ----

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool, torch.complex64]


def _sample(dtype, shape=(4, 6)):
    n = 1
    for s in shape:
        n *= s
    x = torch.arange(n).reshape(shape)
    x = (x % 2).bool() if dtype == torch.bool else x.to(dtype)
    return x.to("hal")


def _exports(x):
    """The ways PyTorch hands a tensor over: legacy capsule, versioned capsule, the protocol."""
    yield "to_dlpack", lambda: dlpack.from_dlpack(dlpack.to_dlpack(x))
    yield "__dlpack__", lambda: torch.from_dlpack(x.__dlpack__())
    yield "__dlpack__(max_version=(1, 0))", lambda: torch.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    yield "torch.from_dlpack(tensor)", lambda: torch.from_dlpack(x)


def _shares(y, x):
    assert y.device == x.device and y.dtype == x.dtype
    assert y.shape == x.shape and y.stride() == x.stride()
    assert y.data_ptr() == x.data_ptr()
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert torch.equal(y.cpu(), x.cpu())


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_dlpack_round_trip_shares_the_storage(dtype):
    x = _sample(dtype)
    assert x.__dlpack_device__() == (kDLExtDev, 0)
    for how, round_trip in _exports(x):
        y = round_trip()
        _shares(y, x)
        # Writes are seen both ways.
        one = torch.ones((), dtype=dtype)
        y[1, 2] = one
        assert x[1, 2].cpu() == one, how
        x[2, 3] = torch.zeros((), dtype=dtype)
        assert y[2, 3].cpu() == torch.zeros((), dtype=dtype), how
        repr(y)  # prints (no failure later either)


def test_dlpack_round_trip_of_strided_views():
    base = torch.arange(60.0).reshape(6, 10).to("hal")
    views = {
        "offset": base[2:],
        "step": base[1:, ::3],
        "transposed": base.t(),
        "column": base[:, 7],
        "expanded": base[3, :1].expand(4, 5),
        "element": base[5, 9],
        "as_strided": base.as_strided((3, 3), (11, 2), 4),
    }
    for name, v in views.items():
        for how, round_trip in _exports(v):
            y = round_trip()
            _shares(y, v)
            assert y.storage_offset() == v.storage_offset(), (name, how)
    y = torch.from_dlpack(base[1:, ::3])
    y.mul_(-1)  # writes land in the base tensor's storage, only where the view is
    expected = torch.arange(60.0).reshape(6, 10)
    expected[1:, ::3] *= -1
    torch.testing.assert_close(base.cpu(), expected)
    z = y + 1  # and the import takes part in ops like any hal tensor
    torch.testing.assert_close(z.cpu(), expected[1:, ::3] + 1)
    # Round trip of an import (hal -> hal -> hal).
    w = torch.from_dlpack(torch.from_dlpack(base.t()))
    _shares(w, base.t())


def test_dlpack_import_keeps_the_owner_alive():
    gc.collect()
    torch.hal.synchronize()
    before = torch.hal.memory_allocated()
    x = torch.arange(1 << 16, dtype=torch.float32).to("hal")
    capsule = dlpack.to_dlpack(x[100:])
    del x
    gc.collect()
    assert torch.hal.memory_allocated() > before  # the capsule holds the storage
    y = dlpack.from_dlpack(capsule)
    del capsule
    gc.collect()
    torch.testing.assert_close(y.cpu(), torch.arange(100, 1 << 16, dtype=torch.float32))
    del y
    gc.collect()
    assert torch.hal.memory_allocated() == before  # freed with the last user


def test_dlpack_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3, device="hal")
    y = torch.from_dlpack(e)
    assert y.device == e.device and y.shape == (0, 3)
    s = torch.tensor(2.5, device="hal")
    y = torch.from_dlpack(s)
    _shares(y, s)


def test_dlpack_record_stream_and_resize_of_an_import():
    x = torch.ones(1000, device="hal")
    y = torch.from_dlpack(x)
    s = torch.hal.Stream()
    y.record_stream(s)  # a shared storage records streams on the owner's buffer
    with pytest.raises(RuntimeError, match="not resizable"):
        y.resize_(2000)  # growing would move the bytes away from the owner's
    assert x.cpu().eq(1).all()


def test_dlpack_cpu_data_onto_hal_is_copied():
    np = pytest.importorskip("numpy")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    # torch.from_dlpack(..., device="hal") copies host memory onto the device (PyTorch's own path).
    t = torch.from_dlpack(a, device="hal")
    assert t.device == torch.device("hal:0")
    torch.testing.assert_close(t.cpu(), torch.from_numpy(a))
    t.add_(1)
    assert a[0, 0] == 0  # a copy
    # Never silently shared: copy=False refuses, naming both DLPack devices (PyTorch's message).
    with pytest.raises(ValueError, match=r"cannot move DLPack tensor from device \(1, 0\) to "
                                         r"\(<DLDeviceType.kDLExtDev: 12>, 0\) without copying"):
        torch.from_dlpack(a, device="hal", copy=False)
    # A hal tensor asked onto "hal" (the current device) is shared, even with copy=False.
    h = torch.arange(4.0).to("hal")
    _shares(torch.from_dlpack(h, device="hal", copy=False), h)
    assert torch.from_dlpack(h, device="hal", copy=True).data_ptr() != h.data_ptr()
    # A capsule of host memory stays a CPU tensor.
    cpu = torch.from_dlpack(torch.arange(4.0).__dlpack__())
    assert cpu.device.type == "cpu"
    # The other way: NumPy reads a hal tensor when asked for a CPU copy, and refuses it otherwise.
    h = torch.arange(4.0).to("hal")
    assert np.from_dlpack(h, device="cpu").tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises((BufferError, RuntimeError, ValueError, TypeError)):
        np.from_dlpack(h)


# ---- DLPack: foreign capsules are refused at import, naming what is wrong ----


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor)))]
_alive = []  # the ctypes memory behind capsules made here (no deleter)


def _capsule(data, shape, strides=None, device_type=kDLExtDev, device_id=0, code=2, bits=32, lanes=1,
             byte_offset=0):
    """A DLPack 0.x capsule as another library would make it (float32 unless CODE/BITS say otherwise)."""
    n = len(shape)
    sh = (ctypes.c_int64 * n)(*shape)
    st = (ctypes.c_int64 * n)(*strides) if strides is not None else None
    m = _DLManagedTensor()
    m.dl_tensor = _DLTensor(data, _DLDevice(device_type, device_id), n, _DLDataType(code, bits, lanes), sh,
                            ctypes.cast(st, ctypes.POINTER(ctypes.c_int64)) if st is not None else None, byte_offset)
    _alive.append((m, sh, st))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None)


def test_foreign_capsule_of_hal_memory_is_shared():
    x = torch.arange(12.0).to("hal")
    # As a library that took the pointer from x and describes part of it: byte_offset honoured.
    y = torch.from_dlpack(_capsule(x.data_ptr(), [2, 3], [1, 4], byte_offset=8))
    assert y.device == x.device and y.storage_offset() == 2
    torch.testing.assert_close(y.cpu(), torch.arange(12.0)[2:].as_strided((2, 3), (1, 4)))


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda x: _capsule(torch.arange(4.0).data_ptr(), [4]), RuntimeError,
         r"data pointer 0x[0-9a-f]+ \(device hal:0\) is not memory of a live hal tensor"),
        (lambda x: _capsule(0x10, [4]), RuntimeError, "is not memory of a live hal tensor"),
        (lambda x: _capsule(x.data_ptr() + 4 * 11, [4], [-1]), RuntimeError,
         r"stride -1 of dimension 0 is negative"),
        (lambda x: _capsule(x.data_ptr(), [4, 4], [4, 1]), RuntimeError,
         r"reaches byte 64 of a hal allocation of 48 bytes"),
        (lambda x: _capsule(x.data_ptr(), [2], byte_offset=2), RuntimeError,
         r"starts at byte 2 of its hal allocation, not a multiple of the Float element size 4"),
        (lambda x: _capsule(x.data_ptr(), [4], device_id=5), torch.AcceleratorError,
         r"hal error: invalid device ordinal(.|\n)*hal:5 does not exist"),
        (lambda x: _capsule(x.data_ptr(), [4], device_id=-1), RuntimeError, r"names hal:-1, which is no device"),
        # dtype errors are PyTorch's own (at::toScalarType), as for a CPU capsule.
        (lambda x: _capsule(x.data_ptr(), [2], lanes=2), BufferError, "lanes != 1"),
        (lambda x: _capsule(x.data_ptr(), [2], code=2, bits=8), BufferError, "Unsupported kFloat bits 8"),
        (lambda x: _capsule(x.data_ptr(), [4], device_type=kDLVulkan), BufferError, "Unsupported device_type: 7"),
    ],
    ids=["host-pointer", "wild-pointer", "negative-stride", "past-the-end", "misaligned", "missing-device",
         "negative-device", "lanes", "float8-bits", "vulkan"],
)
def test_foreign_capsule_errors_name_what_is_wrong(make, error, match):
    x = torch.arange(12.0).to("hal")
    capsule = make(x)
    with pytest.raises(error, match=match):
        torch.from_dlpack(capsule)
    assert torch.equal(x.cpu(), torch.arange(12.0))  # nothing written


# ---- stream waits across devices and plugins ----




# A producer slow enough to still run when the consumer is queued: a chain of matmuls on a pool stream
# of hal:SRC (each step b = b @ a + 1 with a = 1/N everywhere keeps b constant: the final value is
# STEPS + 1 exactly), then wait_stream / wait_event to a pool stream of hal:DST, which copies and reads.
_PRODUCER = """
import time, torch, torch_hal

def chain(src, dst, n, steps, how):
    a = torch.full((n, n), 1.0 / n, device=f"hal:{src}")
    b = torch.ones(n, n, device=f"hal:{src}")
    s0, s1 = torch.hal.Stream(src), torch.hal.Stream(dst)
    s0.wait_stream(torch.hal.current_stream(src))
    with torch.hal.stream(s0):
        for _ in range(steps):
            b = b @ a + 1
    if how == "wait_stream":
        s1.wait_stream(s0)
    else:
        ev = torch.hal.Event()
        ev.record(s0)
        s1.wait_event(ev)
    with torch.hal.stream(s1):
        c = b.to(f"hal:{dst}") * 2  # reads b (through the host) and computes on hal:DST's stream s1
        done = torch.hal.Event()
        done.record(s1)
    done.synchronize()
    got = c.cpu()
    assert got.eq(2 * (steps + 1)).all(), (src, dst, how, got.unique())
    return s0
"""


def test_stream_waits_across_devices_of_one_plugin(tmp_path):
    config = tmp_path / "hal.toml"
    plugin = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    config.write_text(f'discover = false\n\n[[plugin]]\npath = "{plugin}"\noptions = {{ device_count = 2 }}\n')
    out = run_interop_python(
        _PRODUCER
        + """
assert torch.hal.device_count() == 2
for how in ("wait_stream", "wait_event"):
    s0 = chain(0, 1, 256, 40, how)
    assert s0.query()  # another device's event was waited for on the host: the producer is done
    chain(1, 0, 256, 40, how)
# On one device the wait stays on the device: the host does not block.
a = torch.full((512, 512), 1.0 / 512, device="hal:0")
b = torch.ones(512, 512, device="hal:0")
s0, s1 = torch.hal.Stream(0), torch.hal.Stream(0)
while s1 == s0:
    s1 = torch.hal.Stream(0)
with torch.hal.stream(s0):
    for _ in range(60):
        b = b @ a + 1
s1.wait_stream(s0)
print("device-side:", not s0.query())
with torch.hal.stream(s1):
    c = b * 2
torch.hal.synchronize(0)
assert c.cpu().eq(122).all()
print("ok")
""",
        HAL_CONFIG=str(config),
    )
    assert "ok" in out, out
    assert "device-side: True" in out, out


def test_stream_waits_across_plugins(tmp_path):
    cpu = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    opencl = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so"
    if not opencl.exists():
        pytest.skip("the OpenCL plugin was not built")
    config = tmp_path / "hal.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\npath = "{cpu}"\n\n[[plugin]]\npath = "{opencl}"\n')
    out = run_interop_python(
        _PRODUCER
        + """
plugins = [torch.hal.get_device_properties(i).plugin for i in range(torch.hal.device_count())]
if "opencl" not in plugins:
    print("no opencl device:", plugins)
    raise SystemExit(0)
c, o = plugins.index("cpu"), plugins.index("opencl")
for how in ("wait_stream", "wait_event"):
    s0 = chain(c, o, 256, 40, how)  # producer on the CPU plugin, consumer on the OpenCL plugin
    assert s0.query()
    s0 = chain(o, c, 128, 20, how)  # and the other way
    assert s0.query()
# The default stream of another plugin's device waits too (on the host).
ev = torch.hal.Event()
s = torch.hal.Stream(c)
with torch.hal.stream(s):
    x = torch.ones(256, 256, device=f"hal:{c}")
    for _ in range(30):
        x = x @ (torch.ones(256, 256, device=f"hal:{c}") / 256) + 1
    ev.record(s)
torch.hal.default_stream(o).wait_event(ev)
assert ev.query() and x.to(f"hal:{o}").cpu().eq(31).all()
print("ok")
""",
        HAL_CONFIG=str(config),
    )
    if "no opencl device" in out:
        pytest.skip(out.strip())
    assert "ok" in out, out


# ---- device-index errors, worded as PyTorch's for CUDA ----
#
# CUDA: torch.empty(1, device="cuda:5") and torch.cuda.set_device(5) with 2 GPUs raise
# torch.AcceleratorError("CUDA error: invalid device ordinal\nGPU device may be out of range, do you
# have enough GPUs?"); torch.cuda.get_device_properties(5) raises AssertionError("Invalid device id").


def test_missing_device_errors_are_worded_as_cuda_s():
    n = torch.hal.device_count()
    bad = n + 3
    ordinal = (rf"^hal error: invalid device ordinal\nhal device may be out of range, do you have enough hal "
               rf"devices\? \(hal:{bad} does not exist; there (is 1 device|are {n} devices): hal:0..hal:{n - 1}\)")
    with pytest.raises(torch.AcceleratorError, match=ordinal):
        torch.empty(1, device=f"hal:{bad}")
    with pytest.raises(torch.AcceleratorError, match=ordinal):
        torch.ones(2).to(f"hal:{bad}")
    with pytest.raises(torch.AcceleratorError, match=ordinal):
        torch.hal.set_device(bad)
    assert torch.hal.current_device() == 0
    torch.hal.set_device(-1)  # a no-op, as torch.cuda.set_device(-1)
    assert torch.hal.current_device() == 0
    with pytest.raises(AssertionError, match=rf"^Invalid device id: hal:{bad} does not exist"):
        torch.hal.get_device_properties(bad)
    with pytest.raises(RuntimeError, match="Invalid device id"):  # also a RuntimeError
        torch.hal.get_device_properties(f"hal:{bad}")
    with pytest.raises(ValueError, match=r"^Expected a hal device, but got: cpu$"):
        torch.hal.get_device_properties("cpu")
    x = torch.ones(3, device="hal")
    assert x.cpu().sum() == 3  # nothing changed on error


def test_missing_device_errors_with_two_devices(tmp_path):
    config = tmp_path / "hal.toml"
    plugin = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    config.write_text(f'discover = false\n\n[[plugin]]\npath = "{plugin}"\noptions = {{ device_count = 2 }}\n')
    out = run_interop_python(
        """
        import torch, torch_hal
        for f in (lambda: torch.empty(1, device="hal:5"), lambda: torch.hal.set_device(9),
                  lambda: torch.hal.get_device_properties(9)):
            try:
                f()
            except Exception as e:
                print(type(e).__name__ + ":", str(e).replace("\\n", " | "))
        """,
        HAL_CONFIG=str(config),
    )
    lines = out.strip().splitlines()
    assert lines == [
        "AcceleratorError: hal error: invalid device ordinal | hal device may be out of range, do you have enough "
        "hal devices? (hal:5 does not exist; there are 2 devices: hal:0..hal:1)",
        "AcceleratorError: hal error: invalid device ordinal | hal device may be out of range, do you have enough "
        "hal devices? (hal:9 does not exist; there are 2 devices: hal:0..hal:1)",
        "InvalidDeviceIdError: Invalid device id: hal:9 does not exist; there are 2 devices (hal:0..hal:1)",
    ], out
