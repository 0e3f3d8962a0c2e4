"""Layers (docs/layers.md) under PyTorch: a trace of training steps, training under the validation layer,
and 200 training steps with faults injected into 1 % of allocations and launches, each fault surfacing
once as an error the script catches and retries from a snapshot, ending where an uninterrupted run ends.

Each scenario runs in a fresh process (the layers are chosen when the runtime starts) with a hal.toml that
names the build's CPU plugin and the layers.
"""
import json
import pathlib

import pytest

from subprocess_util import build_dir, run_python

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"

# Trains the MLP of train_compare.py with SGD on "hal" for STEPS steps (argv: config, steps, out.json). A
# step that raises is counted, the parameters are restored from the CPU snapshot taken before it (itself
# retried if a fault hits the restore), and the step runs again. Writes the losses, the errors' messages,
# the final parameters and the allocator's bytes before, during and after.
_TRAIN = """
import gc, json, sys
import torch, torch.nn.functional as F
import torch_hal
sys.path.insert(0, {examples!r})
import train_compare as tc
torch_hal.init(config=sys.argv[1])
steps = int(sys.argv[2])
base = torch.hal.memory_allocated()
torch.manual_seed(0)
model = tc.MLP().to("hal")
opt = torch.optim.SGD(model.parameters(), lr=0.05)
errors, losses = [], []

def retry(fn):
    while True:
        try:
            return fn()
        except RuntimeError as e:  # torch.OutOfMemoryError is one too
            errors.append(str(e))

for x, y in tc.batches("mlp", steps):
    snapshot = {{k: v.cpu() for k, v in model.state_dict().items()}}
    while True:
        try:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x.to("hal")), y.to("hal"))
            loss.backward()
            opt.step()
            losses.append(loss.item())
            break
        except RuntimeError as e:
            errors.append(str(e))
            retry(lambda: model.load_state_dict(snapshot))
final = {{k: v.cpu().tolist() for k, v in model.state_dict().items()}}
during = torch.hal.memory_allocated()
del model, opt, loss, snapshot
gc.collect()
json.dump(dict(losses=losses, errors=errors, final=final, base=base, during=during,
               after=torch.hal.memory_allocated()), open(sys.argv[3], "w"))
"""


def _config(tmp_path, name, layers, options="", caching=True):
    cpu = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    path = tmp_path / f"{name}.toml"
    path.write_text(f"discover = false\ncaching_allocator = {str(caching).lower()}\nlayers = {json.dumps(layers)}\n"
                    f"{options}\n[[plugin]]\npath = \"{cpu}\"\n")
    return path


def _train(tmp_path, name, layers, options="", steps=20, caching=True, **env):
    out = tmp_path / f"{name}.json"
    argv = ["train", str(_config(tmp_path, name, layers, options, caching)), str(steps), str(out)]
    run_python(f"import sys; sys.argv = {argv!r}\n" + _TRAIN.format(examples=str(EXAMPLES)), timeout=600,
               HAL_LAYERS="", **env)
    return json.loads(out.read_text())


def test_trace_of_training_steps_lists_every_launch_with_its_duration(tmp_path):
    trace, counts = tmp_path / "hal-trace.json", tmp_path / "counts.txt"
    counting = build_dir() / "test_fixtures" / "libhal_layer_fixture_counting.so"
    r = _train(tmp_path, "trace", [str(counting), "trace"],
               f'[layer_options.trace]\npath = "{trace}"\n[layer_options.fixture_counting]\ncount_file = "{counts}"\n',
               steps=2)
    assert len(r["losses"]) == 2 and not r["errors"]
    events = json.loads(trace.read_text())["traceEvents"]  # valid JSON: what Perfetto opens
    launches = [e for e in events if e["name"].startswith("op_launch ")]
    # The counting layer (outside the trace layer) saw every launch: the trace lists each one.
    seen = dict(line.split() for line in counts.read_text().splitlines())
    assert len(launches) == int(seen["op_launch"]) > 20
    for e in launches:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 and e["args"]["status"] == "OK"
        assert e["args"]["plugin"] == "cpu" and e["name"] == "op_launch " + e["args"]["op"]
    ops = {e["args"]["op"] for e in launches}
    assert {"linear", "relu"} <= ops or {"addmm", "relu"} <= ops, ops


def test_training_under_the_validation_layer_matches_training_without_it(tmp_path):
    plain = _train(tmp_path, "plain", [])
    checked = _train(tmp_path, "validated", ["validation"])
    assert not checked["errors"]
    assert checked["losses"] == plain["losses"]
    assert checked["final"] == plain["final"]


def test_faults_in_one_percent_of_allocations_and_launches_surface_once_each_and_training_recovers(tmp_path):
    log = tmp_path / "faults.jsonl"
    # Without the caching allocator every tensor's allocation reaches the plugin (and can fail).
    r = _train(tmp_path, "faults", ["faults"],
               f'[layer_options.faults]\nspec = "alloc:rate=0.01;launch:rate=0.01;seed=3"\nlog = "{log}"\n',
               steps=200, caching=False)
    injected = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [i["kind"] for i in injected]
    assert kinds.count("alloc") >= 3 and kinds.count("launch") >= 3, kinds
    # Every injected fault surfaced exactly once, as an error naming it (no other error happened).
    assert len(r["errors"]) == len(injected)
    assert all("injected fault" in m for m in r["errors"]), [m for m in r["errors"] if "injected fault" not in m]
    assert sum("OUT_OF_MEMORY" in m for m in r["errors"]) == kinds.count("alloc")
    # Each failed step was retried: 200 steps ran, and they end where an uninterrupted run ends.
    clean = _train(tmp_path, "clean", [], steps=200, caching=False)
    assert len(r["losses"]) == 200
    assert r["losses"] == clean["losses"]
    assert r["final"] == clean["final"]
    # Memory returns to where the uninterrupted run's returns once the model is gone: the failed steps
    # leaked nothing.
    assert r["during"] > r["base"] and r["after"] == clean["after"] and r["during"] == clean["during"]


@pytest.mark.parametrize("layers, env, expect", [
    (["nonexistent"], {}, "layer 'nonexistent' does not exist"),
    (["faults"], {"HAL_FAULTS": "alloc:rate=often"}, "HAL_FAULTS = 'alloc:rate=often' does not parse"),
])
def test_a_bad_layer_is_a_clear_error_when_the_device_starts(tmp_path, layers, env, expect):
    config = _config(tmp_path, "bad", layers)
    with pytest.raises(AssertionError) as e:
        run_python(f"import torch, torch_hal; torch_hal.init(config={str(config)!r}); torch.ones(1, device='hal')",
                   HAL_LAYERS="", **env)
    assert expect in str(e.value) and "cannot start the HAL runtime" in str(e.value)
