"""Fixtures: the build under test ($HAL_BUILD_DIR, set by .ci/test.sh), hal.toml files naming its plugins
(onnx_testing.py) and the exported acceptance models (onnx_models.py)."""
import pytest

import hal.onnx

import onnx_models
from onnx_testing import write_config


@pytest.fixture(scope="session")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("configs")
    return {b: write_config(d, b) for b in ("cpu", "opencl", "mixed")}


@pytest.fixture(scope="session")
def exported():
    """exported(name, opset) -> path of the cached export (onnx_models.export)."""
    return onnx_models.export


@pytest.fixture(scope="session")
def cpu_options(configs):
    """Session options for the CPU plugin alone (configs["cpu"])."""
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(configs["cpu"])
    return opts
