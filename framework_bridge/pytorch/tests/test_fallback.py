"""Decomposition before CPU fallback, HAL_FORCE_FALLBACK_OPS, explain(),
_foreach_* and the default optimizers, plugin errors."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_hal


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                      lambda p: torch.optim.Adam(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)])
def test_default_optimizer_steps_have_no_cpu_fallback(make_opt):
    torch.manual_seed(0)
    ref = _mlp()
    dev = _mlp()
    dev.load_state_dict(ref.state_dict())
    dev.hal()
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    losses = {}
    for name, model, data, target in (("cpu", ref, x, y), ("hal", dev, x.to("hal"), y.to("hal"))):
        opt = make_opt(model.parameters())
        assert opt.defaults.get("foreach") in (None, True) and not opt.defaults.get("fused")
        torch_hal.reset_fallback_stats()
        losses[name] = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data), target)
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
        if name == "hal":
            stats = torch_hal.fallback_stats()
            assert stats == {} and stats.decompositions == {}, stats
    assert losses["hal"] == pytest.approx(losses["cpu"], rel=1e-4, abs=1e-6)
    for p_ref, p_dev in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(p_dev.cpu(), p_ref, rtol=1e-4, atol=1e-5)


def test_foreach_ops_run_on_device():
    xs = [torch.randn(3), torch.randn(2, 2)]
    hs = [x.to("hal") for x in xs]
    torch_hal.reset_fallback_stats()
    torch._foreach_mul_(hs, 2.0)
    torch._foreach_add_(hs, hs, alpha=0.5)
    got = torch._foreach_sqrt(torch._foreach_abs(hs))
    assert torch_hal.fallback_stats() == {}
    for g, x in zip(got, xs):
        assert g.device.type == "hal"
        torch.testing.assert_close(g.cpu(), (x * 2 * 1.5).abs().sqrt())


def test_force_fallback_ops_keeps_results(monkeypatch):
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    ha, hb = a.to("hal"), b.to("hal")
    monkeypatch.setenv("HAL_FORCE_FALLBACK_OPS", "add.*, mm")
    torch_hal.reset_fallback_stats()
    got = ha + hb
    got.add_(1.0)
    view = ha.t()[1:3]
    view.add_(hb.t()[:2])  # in place on a strided view, through the CPU
    prod = ha @ hb.t()
    neg = -ha  # not forced
    stats = torch_hal.fallback_stats()
    assert stats == {"aten::add.Tensor": 1, "aten::add_.Tensor": 2, "aten::mm": 1}, stats
    a_ref = a.clone()
    a_ref.t()[1:3].add_(b.t()[:2])
    torch.testing.assert_close(got.cpu(), a + b + 1)
    torch.testing.assert_close(ha.cpu(), a_ref)
    torch.testing.assert_close(prod.cpu(), a_ref @ b.t())
    torch.testing.assert_close(neg.cpu(), -a_ref)
    monkeypatch.setenv("HAL_FORCE_FALLBACK_OPS", "add(")
    with pytest.raises(RuntimeError, match="HAL_FORCE_FALLBACK_OPS.*not a valid regex"):
        ha + hb


def test_op_without_catalog_op_runs_through_fallback():
    a = torch.randn(5, 5) * 0.3
    torch_hal.reset_fallback_stats()
    e = torch.linalg.matrix_exp(a.to("hal"))
    assert e.device.type == "hal"
    torch.testing.assert_close(e.cpu(), torch.linalg.matrix_exp(a), rtol=1e-5, atol=1e-5)
    assert any("linalg_matrix_exp" in op for op in torch_hal.fallback_stats())


def test_unmapped_op_decomposes_on_device():
    # aten::hardtanh has no catalog row; PyTorch decomposes it into clamp.
    x = torch.randn(4, 3) * 3
    torch_hal.reset_fallback_stats()
    got = torch.nn.functional.hardtanh(x.to("hal"))
    stats = torch_hal.fallback_stats()
    assert stats == {} and stats.decompositions == {"aten::hardtanh": 1}, stats
    torch.testing.assert_close(got.cpu(), torch.nn.functional.hardtanh(x))


def test_decomposition_never_reenters_its_own_op(monkeypatch):
    # A decomposition that calls its own op (PyTorch's references through prims do, in eager
    # mode): the inner call goes to the CPU fallback instead of recursing. airy_ai has no
    # decomposition; one that calls airy_ai is installed for this test.
    from torch_hal import _decompositions

    monkeypatch.setitem(_decompositions.OWN_DECOMPOSITIONS, "special_airy_ai.default",
                        lambda x: torch.special.airy_ai(x))
    x = torch.rand(4, 3) * 5 - 2
    torch_hal.reset_fallback_stats()
    got = torch.special.airy_ai(x.to("hal"))
    stats = torch_hal.fallback_stats()
    assert stats == {"aten::special_airy_ai.out": 1}, stats
    assert stats.decompositions == {"aten::special_airy_ai.out": 1}, stats
    torch.testing.assert_close(got.cpu(), torch.special.airy_ai(x))


def test_explain_lists_catalog_ops_decompositions_and_fallbacks(capsys):
    m, v = torch.randn(4, 3).to("hal"), torch.randn(3).to("hal")

    def fn():
        y = torch.relu(m @ v.unsqueeze(1))
        torch.nn.functional.hardtanh(y)
        torch.mode(y, 0)

    entries = torch_hal.explain(fn)
    printed = capsys.readouterr().out
    ops = {e.op: e for e in entries}
    assert ops["mm"].ran == "catalog op mm on plugin cpu (hal:0)" and ops["mm"].depth == 0
    assert ops["relu"].ran.startswith("catalog op relu on plugin cpu")
    assert ops["hardtanh"].ran == "decomposed into clamp"
    assert ops["clamp"].depth == 1 and ops["clamp"].ran.startswith("catalog op clamp on plugin cpu")
    assert ops["mode"].ran == "CPU fallback: no catalog mapping"
    assert "aten::hardtanh: decomposed into clamp" in printed and "aten::mode: CPU fallback" in printed


def test_plugin_error_names_aten_op_catalog_op_and_plugin():
    weight = torch.randn(4, 2).to("hal")
    bad = torch.tensor([0, 7]).to("hal")  # index 7 of 4 rows: only the kernel can see it
    # An IndexError, as PyTorch's CPU embedding raises for an index out of range.
    with pytest.raises(IndexError, match=r"aten::embedding as catalog op embedding on hal:0 \(plugin cpu.*index 7"):
        torch.nn.functional.embedding(bad, weight)


ACME_SCRIPT = textwrap.dedent(
    """
    import sys, torch, torch_hal
    torch_hal.init(plugins=[sys.argv[1]])
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    ref = lin(x)
    lin.to("hal")
    torch_hal.reset_fallback_stats()
    got = lin(x.to("hal"))
    stats = torch_hal.fallback_stats()
    torch.testing.assert_close(got.cpu(), ref.detach())
    print("PLUGIN", torch.hal.get_device_properties(0).plugin)
    print("CPU", dict(stats))
    print("DECOMPOSED", stats.decompositions)
    """
)


def test_plugin_without_addmm_runs_linear_by_decomposition():
    acme = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "test_fixtures" / "libhal_plugin_acme.so"
    assert acme.exists(), f"{acme} was not built (ninja hal_plugin_acme)"
    env = dict(os.environ, HAL_FALLBACK_WARN="0")
    run = subprocess.run([sys.executable, "-c", ACME_SCRIPT, str(acme)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "PLUGIN acme" in run.stdout
    assert "CPU {}" in run.stdout, run.stdout  # nothing of nn.Linear ran on the CPU
    assert "DECOMPOSED {'aten::addmm': 1}" in run.stdout, run.stdout


def test_tensors_of_more_dims_than_hal_takes():
    """HAL tensors have at most HAL_TENSOR_MAX_RANK (8) dims, PyTorch's 64: a mapped op on more
    declines to the fallback (right answer, counted) and a device copy of more dims (repeat() copies
    through views of twice its input's rank) runs slice by slice on the device."""
    x = torch.randn(1, 2, 1, 2, 1, 2, 1, 2, 3)
    torch_hal.reset_fallback_stats()
    torch.testing.assert_close((x.to("hal") * 2 + 1).cpu(), x * 2 + 1)
    assert "aten::mul.Tensor" in torch_hal.fallback_stats()
    y = torch.randn(2, 3, 1, 4, 5)
    torch_hal.reset_fallback_stats()
    for reps in [(2, 1, 1, 1, 1), (1, 2, 3, 1, 2), (2, 2, 2, 2, 2)]:
        assert torch.equal(y.to("hal").repeat(*reps).cpu(), y.repeat(*reps))
    assert dict(torch_hal.fallback_stats()) == {}
