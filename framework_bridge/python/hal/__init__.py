"""HAL from Python: load plugins, keep tensors in device memory, launch catalog ops.

    import hal
    rt = hal.Runtime(plugins=["/path/libhal_plugin_cpu.so"])   # or hal.Runtime() to discover
    dev = rt.device("cpu")
    add = hal.Op(dev, "add")                                    # resolved once
    add([a, b], [out], {"alpha": 2.0})                          # hal.Tensor arguments

A plugin's op may take "uniform" inputs only (one dtype per call): hal.Op then casts the
other inputs first, and hal.op_stats() counts those casts (and fallbacks).

hal.torch_util moves torch tensors in and out (any dtype, incl. bfloat16).
Errors raise hal.Error ("INVALID_ARGUMENT: cpu: op_launch: add: ...").
"""
from ._hal import DtypeAttr, Device, Error, Op, Runtime, Tensor, op_names, op_stats, reset_op_stats  # noqa: F401

__all__ = ["DtypeAttr", "Device", "Error", "Op", "Runtime", "Tensor", "op_names", "op_stats", "reset_op_stats"]
