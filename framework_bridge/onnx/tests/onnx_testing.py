"""Shared by the ONNX tests and bench/onnx_bench.py: hal.toml files naming the build's plugins, and
onnxruntime's outputs as the reference."""
import os
import pathlib

import numpy as np
import onnxruntime


def _plugin(name):
    d = os.environ.get("HAL_BUILD_DIR")
    if not d:
        raise RuntimeError("set HAL_BUILD_DIR to the build tree (bash .ci/test.sh does)")
    path = pathlib.Path(d) / "lib" / "hal" / "plugins" / f"libhal_plugin_{name}.so"
    assert path.exists(), f"{path} was not built"
    return path


# OpenCL ops the "mixed" config declines, so the CPU plugin (the fallback device) completes them: matrix
# products and normalisations run on the CPU, the elementwise chains around them on OpenCL.
MIXED_DISABLED = ["matmul", "mm", "linear", "addmm", "layer_norm", "conv2d"]


def write_config(directory, backend):
    """A hal.toml in DIRECTORY for BACKEND: "cpu", "opencl" (PoCL), or "mixed" (OpenCL first, declining
    MIXED_DISABLED; the CPU plugin is the fallback device). Returns its path."""
    cpu = f'[[plugin]]\nname = "cpu"\npath = "{_plugin("cpu")}"\n'
    opencl = f'[[plugin]]\nname = "opencl"\npath = "{_plugin("opencl")}"\n'
    if backend == "cpu":
        text = f'discover = false\ndefault_device = "cpu:0"\nfallback_device = "cpu:0"\n\n{cpu}'
    elif backend == "opencl":
        text = f'discover = false\ndefault_device = "opencl:0"\nfallback_device = "opencl:0"\n\n{opencl}'
    elif backend == "mixed":
        disabled = ", ".join(f'"{op}"' for op in MIXED_DISABLED)
        text = (f'discover = false\ndefault_device = "opencl:0"\nfallback_device = "cpu:0"\n\n'
                f'{opencl}disabled_ops = [{disabled}]\n\n{cpu}')
    else:
        raise KeyError(backend)
    path = pathlib.Path(directory) / f"{backend}.toml"
    path.write_text(text)
    return path


def ort_run(path, feed):
    """onnxruntime's outputs (CPUExecutionProvider) of the model at PATH for FEED."""
    sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def assert_close(actual, expected, rtol=1e-3, atol=1e-4, what=""):
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape and a.dtype == e.dtype, f"{what} output {i}: {a.dtype}{a.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")
