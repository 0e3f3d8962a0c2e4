"""Issue 12's three models trained on "hal" against the same training on PyTorch CPU.

An MLP, a CNN with BatchNorm, dropout and pooling, and a Llama-style decoder block each train 20
steps with SGD and with AdamW (default settings) on hal:0 (this process: the build's CPU plugin,
conftest.py) and on CPU from the same initial weights and batches; every step's loss and the final
parameters and buffers must agree. The models and the loop are framework_bridge/pytorch/examples/
train_compare.py, which the main job runs too; dropout masks are recorded on hal and replayed on CPU.

Then the same script runs in fresh processes whose only difference is $HAL_CONFIG: a hal.toml
naming the CPU plugin, and one naming the OpenCL plugin (PoCL) — the MLP and the decoder block.
Fallback and decomposition counts are recorded (pytest's record_property), not asserted: which
ops fall back is the mapping table's business.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_compare.py"
_spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)


@pytest.mark.parametrize("optim", ["sgd", "adamw"])
@pytest.mark.parametrize("model", ["mlp", "cnn", "decoder"])
def test_training_matches_cpu(model, optim, record_property):
    r = tc.run(model, optim, steps=20)
    record_property("fallbacks", r["fallbacks"])
    record_property("decompositions", r["decompositions"])
    assert r["device"] == "hal:0"
    # Every forward, backward and optimizer op ran on the device (no CPU fallback, no decomposition).
    assert r["fallbacks"] == {} and r["decompositions"] == {}
    assert len(r["hal"]) == len(r["cpu"]) == 20
    tc.check(r)
    # The runs really trained (a loop that changed nothing would also "agree").
    assert sum(r["hal"][-5:]) < sum(r["hal"][:5])
    torch.manual_seed(0)  # run()'s seed: the initial weights again
    initial = tc.MODELS[model]().state_dict()
    for name in dict(tc.MODELS[model]().named_parameters()):
        assert not torch.equal(initial[name], r["cpu_state"][name]), f"{name} did not change"
    assert r["dropout_masks"] == (20 if model == "cnn" else 0)


def test_dropout_masks_replay_exactly():
    """The CPU replay gives input * mask / (1 - p) with the mask the hal run drew."""
    torch.manual_seed(1)
    drop = torch.nn.Dropout(0.5)
    masks = tc.DropoutMasks()
    masks.record(drop)
    x = torch.randn(64, 8) + 5  # no zeros: the mask is visible in the output
    y_hal = drop(x.to("hal")).cpu()
    ref = torch.nn.Dropout(0.5)
    masks.replay(ref)
    y_cpu = ref(x)
    assert len(masks.masks) == 1 and 0 < masks.masks[0].sum() < x.numel()
    torch.testing.assert_close(y_cpu, y_hal)
    torch.testing.assert_close(y_hal != 0, masks.masks[0])


def _plugin(name):
    path = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / f"libhal_plugin_{name}.so"
    assert path.exists(), f"{path} was not built"
    return path


def _start_by_config(tmp_path, plugin):
    """Starts train_compare.py in a fresh process whose hal.toml names only PLUGIN."""
    config = tmp_path / f"{plugin}.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\nname = "{plugin}"\npath = "{_plugin(plugin)}"\n')
    report = tmp_path / f"{plugin}.json"
    env = dict(os.environ, HAL_CONFIG=str(config), HAL_FALLBACK_WARN="0")
    env.pop("HAL_PLUGIN_PATH", None)
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--models", "mlp,decoder", "--optims", "sgd,adamw",
         "--expect-plugin", plugin, "--json", str(report)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, config, report


def _report(started, plugin):
    proc, config, report = started
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"HAL_CONFIG={config} ({plugin}):\n{out}"
    return json.loads(report.read_text())


def test_same_script_on_cpu_and_opencl_plugins_by_config(tmp_path, record_property):
    started = {p: _start_by_config(tmp_path, p) for p in ("cpu", "opencl")}  # both at once
    by_plugin = {p: _report(s, p) for p, s in started.items()}
    for plugin, runs in by_plugin.items():
        assert [(r["model"], r["optim"]) for r in runs] == [
            ("mlp", "sgd"), ("mlp", "adamw"), ("decoder", "sgd"), ("decoder", "adamw")]
        assert all(r["plugin"] == plugin for r in runs)
        record_property(f"fallbacks_{plugin}", {f"{r['model']}/{r['optim']}": (r["fallbacks"], r["decompositions"])
                                                for r in runs})
    # Each run was checked against CPU in its process (exit code 0); the two plugins' curves agree too,
    # and both start from the same CPU reference.
    for on_cpu, on_opencl in zip(by_plugin["cpu"], by_plugin["opencl"]):
        assert on_cpu["cpu"] == on_opencl["cpu"]
        torch.testing.assert_close(torch.tensor(on_opencl["hal"]), torch.tensor(on_cpu["hal"]), **tc.LOSS_TOL)
