"""Fixtures: the build under test ($HAL_BUILD_DIR, set by .ci/test.sh), hal.toml files naming its plugins
(onnx_testing.py) and the exported acceptance models (onnx_models.py)."""
import pytest

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
