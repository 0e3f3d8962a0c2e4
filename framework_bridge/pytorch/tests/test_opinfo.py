"""PyTorch's OpInfos on "hal" vs CPU: the passing set kept in CI.

The OpInfos listed in opinfo_ci.txt (chosen from a full sweep by
tools/opinfo_sweep.py --write-ci-list to cover elementwise, reduction,
view/shape, linalg and nn.functional ops) run every float32 sample on hal
and on CPU, forward and backward, with the sweep's own comparison. An entry
marked "device" must also run without any CPU fallback.
"""
import functools
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import opinfo_sweep  # noqa: E402

ENTRIES = opinfo_sweep.read_ci_list()


@functools.lru_cache(maxsize=1)
def _ops():
    return opinfo_sweep.ops_by_key()


def test_ci_list_covers_every_category():
    cats = {cat for _, cat, _ in ENTRIES}
    assert {"elementwise", "reduction", "view/shape", "linalg", "nn.functional"} <= cats


@pytest.mark.parametrize("key,mode", [(k, m) for k, _, m in ENTRIES], ids=[k for k, _, _ in ENTRIES])
def test_opinfo_matches_cpu(key, mode):
    op = _ops().get(key)
    assert op is not None, f"{key} is not in this torch's op_db: regenerate opinfo_ci.txt"
    res = opinfo_sweep.run_opinfo(op)
    assert res["status"] == "pass", f"{key}: {res['status']}: {res['reason']}"
    assert res["samples_passed"] == res["samples"] > 0
    if mode == "device":
        fell_back = {**res["fallback_forward"], **res["fallback_backward"]}
        assert not fell_back, f"{key} ran aten ops on the CPU fallback: {fell_back}"


def test_comparison_catches_a_wrong_result(monkeypatch):
    """The sweep's check must fail when hal computes something else."""
    import torch

    op = _ops()["abs"]
    real = op.op

    def wrong_on_hal(x, *args, **kwargs):
        out = real(x, *args, **kwargs)
        return out + 1 if out.device.type == "hal" else out

    monkeypatch.setattr(op, "op", wrong_on_hal)
    res = opinfo_sweep.run_opinfo(op, max_samples=2)
    assert res["status"] == "fail" and "forward mismatch" in res["reason"], res
    assert torch.hal.is_available()


def test_a_result_closer_to_float64_than_cpu_passes():
    """cov's sample 24: a gradient that is 0 in exact arithmetic; hal gives 0.0, PyTorch CPU's float32
    1.5e-5 (just over float32's atol). Judged against the float64 result, hal is the accurate one."""
    op = _ops()["cov"]
    res = opinfo_sweep.run_opinfo(op)
    assert res["status"] == "pass", res["reason"]


def test_compile_sweep_passes_a_lowered_op_and_catches_a_wrong_compiled_result(monkeypatch):
    """The --compile sweep (issue 15's OpInfo check): sigmoid's samples lower to a HAL segment and give
    eager's result; when the compiled graph's outputs are off, the sweep reports the mismatch."""
    import torch_hal.dynamo.graph_runner as graph_runner

    op = _ops()["sigmoid"]
    res = opinfo_sweep.run_opinfo_compiled(op, max_samples=2)
    assert res["status"] == "pass" and res["samples_passed"] == res["samples"] == 2, res
    assert res["lowered_nodes"] >= 2, res

    real = graph_runner.GraphRunner.__call__
    monkeypatch.setattr(graph_runner.GraphRunner, "__call__", lambda self, args: [o + 1 for o in real(self, args)])
    res = opinfo_sweep.run_opinfo_compiled(op, max_samples=2)
    assert res["status"] == "fail" and "compiled vs eager mismatch" in res["reason"], res
