"""ONNX's backend node tests that passed the last full sweep (node_ci.txt, written by
tools/onnx_node_sweep.py) must keep passing on the CPU plugin. The cases are generated once per onnx
version into ~/.cache/hal/onnx-node-tests (a few seconds)."""
import importlib.util
import pathlib

import pytest

import hal.onnx

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("onnx_node_sweep", HERE.parent / "tools" / "onnx_node_sweep.py")
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

CASES = [line.strip() for line in (HERE / "node_ci.txt").read_text().splitlines()
         if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def node_tests():
    return sweep.load_index()


def test_ci_set_is_not_empty():
    assert len(CASES) >= 100, f"node_ci.txt lists {len(CASES)} cases; rerun tools/onnx_node_sweep.py"


@pytest.mark.parametrize("case", CASES)
def test_node_case(case, node_tests, cpu_options):
    root, index = node_tests
    assert case in index, f"{case} is not a node test of onnx {sweep.onnx.__version__}: rerun the sweep"
    passed, reason = sweep.run_case(root, case, index[case], providers=("cpu",), sess_options=cpu_options)
    assert passed, reason
