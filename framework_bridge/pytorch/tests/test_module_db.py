"""PyTorch's ModuleInfo database on "hal" vs CPU: the passing set kept in CI.

The modules listed in module_ci.txt (chosen from a full sweep by
tools/module_sweep.py --write-ci-list) run every float32 sample input, in train
and (where they differ) eval mode: a deep copy of the CPU module moved with
.to("hal") (Parameter objects kept), forward, buffers, input and parameter
gradients compared with CPU by the sweep's own code. An entry marked "device"
must also run without any CPU fallback.
"""
import functools
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import module_sweep  # noqa: E402

ENTRIES = module_sweep.read_ci_list()


@functools.lru_cache(maxsize=1)
def _infos():
    return module_sweep.modules_by_key()


def test_ci_list_is_not_empty_and_covers_the_main_families():
    fams = {fam for _, fam, _ in ENTRIES}
    assert {"linear", "conv", "pooling", "normalization", "activation", "loss"} <= fams, fams


@pytest.mark.parametrize("key,mode", [(k, m) for k, _, m in ENTRIES], ids=[k for k, _, _ in ENTRIES])
def test_module_matches_cpu(key, mode):
    info = _infos().get(key)
    assert info is not None, f"{key} is not in this torch's module_db: regenerate module_ci.txt"
    res = module_sweep.run_module(info)
    assert res["status"] == "pass", f"{key}: {res['status']}: {res['reason']}"
    assert res["samples_passed"] == res["samples"] > 0
    if mode == "device":
        fell_back = module_sweep.fallback_ops(res)
        assert not fell_back, f"{key} ran aten ops on the CPU fallback: {fell_back}"


def test_comparison_catches_a_wrong_result(monkeypatch):
    """The sweep's check must fail when the module on hal computes something else."""
    import torch

    info = _infos()["nn.Linear"]
    real = torch.nn.Linear.forward

    def wrong_on_hal(self, input):  # the samples pass input= by keyword too
        out = real(self, input)
        return out * 1.01 if out.device.type == "hal" else out

    monkeypatch.setattr(torch.nn.Linear, "forward", wrong_on_hal)
    res = module_sweep.run_module(info, max_samples=1)
    assert res["status"] == "fail" and "forward mismatch" in res["reason"], res


def test_comparison_catches_a_wrong_gradient(monkeypatch):
    """... and when only a parameter gradient differs."""
    import torch

    class ScaleGradOnHal(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            ctx.hal = w.device.type == "hal"
            return w.view_as(w)

        @staticmethod
        def backward(ctx, g):
            return g * 2 if ctx.hal else g

    info = _infos()["nn.Linear"]
    monkeypatch.setattr(torch.nn.Linear, "forward",
                        lambda self, input: torch.nn.functional.linear(input, ScaleGradOnHal.apply(self.weight),
                                                                      self.bias))
    res = module_sweep.run_module(info, max_samples=1)
    assert res["status"] == "fail" and "backward (parameter grads) mismatch" in res["reason"], res


def test_parameter_identity_is_checked(monkeypatch):
    """A .to() that replaces the Parameter objects fails the module."""
    import torch

    monkeypatch.setattr(torch.__future__, "get_overwrite_module_params_on_conversion", lambda: True)
    res = module_sweep.run_module(_infos()["nn.Linear"], max_samples=1)
    assert res["status"] == "fail" and "identity" in res["reason"], res


def test_module_info_skips_for_every_device_are_honoured():
    """KLDivLoss's ModuleInfo skips TestModule.test_cpu_gpu_parity on every device."""
    res = module_sweep.run_module(_infos()["nn.KLDivLoss"])
    assert res["status"] == "skip" and "ModuleInfo skips" in res["reason"], res
