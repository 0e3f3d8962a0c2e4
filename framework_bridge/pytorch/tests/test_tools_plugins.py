"""torch_hal.tools on other plugins, each in a fresh process whose hal.toml names only that plugin (this
file is also that process's script):

- fixture_wrong_add (hal/testing/fixtures/wrong_add.cc: the CPU plugin with `add` 1000 ulp off): in a
  training step of the decoder block OpAutoCompare finds add (its aten variants: add.Tensor, add_.Tensor,
  _foreach_add_) as the only mismatching op, and bisect_fallback finds add ops as the culprits; with
  HAL_TEST_WRONG_ADD=mutate (add writes its first input) the input-mutation check names add's input 0;
- opencl (PoCL): a captured training step replays exactly, OpTimeMeasure times it, and OpAutoCompare's
  default tolerances pass it.
"""
import argparse
import copy
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_compare.py"


def _train_compare():
    spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    return tc


def _one_step(model, x, y, device):
    """One SGD step of a copy of MODEL on DEVICE: (loss, the updated parameters on the CPU)."""
    m = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = F.cross_entropy(m(x.to(device)), y.to(device))
    loss.backward()
    opt.step()
    return loss.detach().cpu(), {k: v.detach().cpu() for k, v in m.named_parameters()}


def wrong_add():
    from torch_hal import tools

    tc = _train_compare()
    torch.manual_seed(0)
    model = tc.DecoderBlock()
    x, y = tc.token_sequences(1, 8)[0]
    with tools.OpAutoCompare(save_dir=tempfile.mkdtemp(), stream=None) as cmp:
        _one_step(model, x, y, "hal")
    want = _one_step(model, x, y, "cpu")

    def check(got):
        # hal's float32 kernels vs PyTorch CPU: summation order only (~1e-7); add's 1000 ulp are ~1e-4.
        return torch.allclose(got[0], want[0], rtol=1e-5, atol=1e-6) and all(
            torch.allclose(got[1][k], v, rtol=1e-5, atol=1e-6) for k, v in want[1].items())

    culprits = tools.bisect_fallback(lambda: _one_step(model, x, y, "hal"), check)
    return {"plugin": torch.hal.get_device_properties(0).plugin, "compared": len(cmp.comparisons),
            "mismatches": sorted({c.op for c in cmp.mismatches()}), "culprits": culprits,
            "saved": os.listdir(cmp.save_dir)}


def mutate():
    """fixture_wrong_add with HAL_TEST_WRONG_ADD=mutate: add's result is right but it flips a bit of input 0."""
    from torch_hal import tools

    x, y = torch.ones(4, device="hal"), torch.full((4,), 2.0, device="hal")
    with tools.OpAutoCompare(save_dir=tempfile.mkdtemp(), stream=None) as cmp:
        torch.mul(x, y)
        z = x + y
    return {"comparisons": [(c.op, c.mutated, [d.ok for d in c.outputs]) for c in cmp.comparisons],
            "z": z.cpu().tolist()}


def opencl():
    from torch_hal import tools
    from torch_hal.tools import replay

    tc = _train_compare()
    torch.manual_seed(0)
    model = tc.DecoderBlock()
    x, y = tc.token_sequences(1, 8)[0]
    d = tempfile.mkdtemp()
    with tools.OpCapture(d) as cap:
        _one_step(model, x, y, "hal")
    results = replay.replay(d)
    with tools.OpTimeMeasure(csv="", stream=None) as t:
        _one_step(model, x, y, "hal")
    with tools.OpAutoCompare(save_dir=tempfile.mkdtemp(), stream=None) as cmp:
        _one_step(model, x, y, "hal")
    return {"compared": len(cmp.comparisons), "not_ok": [str(c) for c in cmp.comparisons if not c.ok],
            "plugin": torch.hal.get_device_properties(0).plugin, "captured": len(cap.entries),
            "phases": sorted({e["phase"] for e in cap.entries}),
            "different": [(r.op, r.seq, r.why) for r in results if not r.exact],
            "timed": len(t.calls), "total_ms": t.total_ms()}


# ---- the tests (in the pytest process) ----


def _run(tmp_path, plugin, path, mode=None, **env_vars):
    config = tmp_path / f"{plugin}.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\nname = "{plugin}"\npath = "{path}"\n')
    out = tmp_path / "out.json"
    env = dict(os.environ, HAL_CONFIG=str(config), HAL_FALLBACK_WARN="0", **env_vars)
    env.pop("HAL_PLUGIN_PATH", None)
    p = subprocess.run([sys.executable, __file__, mode or plugin, str(out)], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text())


def _build():
    return pathlib.Path(os.environ["HAL_BUILD_DIR"])


def test_autocompare_and_bisect_pinpoint_the_wrong_add(tmp_path):
    path = _build() / "test_fixtures" / "libhal_plugin_fixture_wrong_add.so"
    assert path.exists(), f"{path} was not built (target hal_plugin_fixture_wrong_add)"
    r = _run(tmp_path, "fixture_wrong_add", path)
    from torch_hal.tools._ops import family

    assert r["plugin"] == "fixture_wrong_add" and r["compared"] > 100
    assert r["mismatches"] and {family(op) for op in r["mismatches"]} == {"add"}, r["mismatches"]
    assert "aten.add.Tensor" in r["mismatches"]
    assert r["culprits"] and {family(op) for op in r["culprits"]} == {"add"}, r["culprits"]
    assert sorted(r["saved"])[-1] == "index.json" and "aten.add.Tensor" in r["saved"]


def test_autocompare_catches_an_op_writing_its_input(tmp_path):
    """DIOPI's input-mutation check: the fixture's add writes its first input."""
    path = _build() / "test_fixtures" / "libhal_plugin_fixture_wrong_add.so"
    r = _run(tmp_path, "fixture_wrong_add", path, mode="mutate", HAL_TEST_WRONG_ADD="mutate")
    assert r["comparisons"] == [["aten.mul.Tensor", [], [True]], ["aten.add.Tensor", [0], [True]]]
    assert r["z"] == [3.0] * 4


def test_capture_replay_time_and_autocompare_on_opencl(tmp_path):
    r = _run(tmp_path, "opencl", _build() / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so")
    assert r["plugin"] == "opencl" and r["captured"] > 100
    assert r["phases"] == ["backward", "forward"]
    assert r["different"] == []
    assert r["timed"] > 100 and r["total_ms"] > 0
    assert r["compared"] > 100 and r["not_ok"] == []


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin", choices=["fixture_wrong_add", "mutate", "opencl"])
    ap.add_argument("out")
    a = ap.parse_args()
    import torch_hal  # noqa: F401

    result = {"fixture_wrong_add": wrong_add, "mutate": mutate, "opencl": opencl}[a.plugin]()
    pathlib.Path(a.out).write_text(json.dumps(result))
