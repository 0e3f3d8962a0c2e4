"""torch_hal on the CPU plugin of the build under test ($HAL_BUILD_DIR, set by .ci/test.sh)."""
import os
import pathlib

import pytest
import torch

import torch_hal


def _cpu_plugin():
    d = os.environ.get("HAL_BUILD_DIR")
    if not d:
        raise RuntimeError("set HAL_BUILD_DIR to the build tree (bash .ci/test.sh does)")
    path = pathlib.Path(d) / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    assert path.exists(), f"{path} was not built"
    return str(path)


# Before first use of the device: only the build's CPU plugin.
if not torch_hal.is_initialized():
    torch_hal.init(plugins=[_cpu_plugin()])


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("HAL_FALLBACK_WARN", "0")
