"""Fixtures: the CPU plugin of the build under test ($HAL_BUILD_DIR, set by .ci/test.sh)."""
import os
import pathlib

import pytest

import hal


def _build_dir():
    d = os.environ.get("HAL_BUILD_DIR")
    if not d:
        raise RuntimeError("set HAL_BUILD_DIR to the build tree (bash .ci/test.sh does)")
    return pathlib.Path(d)


@pytest.fixture(scope="session")
def cpu_plugin_path():
    path = _build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    assert path.exists(), f"{path} was not built"
    return str(path)


@pytest.fixture(scope="session")
def acme_plugin_path():
    """The vendor guide's worked example (docs/vendor_guide.md): uniform float32 add, mul, relu, mm."""
    path = _build_dir() / "test_fixtures" / "libhal_plugin_acme.so"
    assert path.exists(), f"{path} was not built"
    return str(path)


@pytest.fixture(scope="session")
def cpu(cpu_plugin_path):
    rt = hal.Runtime(plugins=[cpu_plugin_path])
    assert not rt.skipped(), rt.skipped()
    return rt.device("cpu")  # a device keeps its plugin loaded
