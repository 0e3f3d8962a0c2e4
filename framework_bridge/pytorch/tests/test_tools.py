"""torch_hal.tools (issue 14) on the build's CPU plugin: OpCapture + replay, OpAutoCompare, OpTimeMeasure,
OpFallback, OpDtypeCast, the profiler ranges, the filters and the bad inputs, in a 3-step training loop
of the decoder block (examples/train_compare.py) where the issue asks for one."""
import csv
import importlib.util
import itertools
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

import torch_hal
from torch_hal import tools
from torch_hal.tools import replay as replay_mod

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_compare.py"
_spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)


def decoder_loop(steps=3, **model_args):
    """A training loop of the decoder block on hal:0 (SGD) over STEPS batches (then again from the
    first); returns a step function (one step per call, synchronised) and the model."""
    torch.manual_seed(0)
    model = tc.DecoderBlock(**model_args).to("hal")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(x.to("hal"), y.to("hal")) for x, y in tc.token_sequences(steps, 8)]
    it = itertools.cycle(data)

    def step():
        x, y = next(it)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.hal.synchronize()
        return loss

    return step, model


def run_steps(steps=3):
    step, _ = decoder_loop(steps)
    for _ in range(steps):
        step()


# ---- OpCapture and replay ----


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("cap") / "op_capture"
    with tools.OpCapture(d) as cap:
        run_steps(3)
    return d, cap.entries


def test_capture_writes_forward_and_backward_calls_and_index(capture):
    d, entries = capture
    index = json.loads((d / "index.json").read_text())
    assert index["format"] == "torch_hal.op_capture" and index["version"] == 1 and not index["truncated"]
    assert index["entries"] == entries and len(entries) > 100
    phases = {e["phase"] for e in entries}
    assert phases == {"forward", "backward"}
    ops = {(e["op"], e["phase"]) for e in entries}
    # Forward matmuls of the linear layers and their backward, SDPA forward and backward, the optimizer.
    assert ("aten.mm.default", "forward") in ops and ("aten.mm.default", "backward") in ops
    assert any(op.startswith("aten._scaled_dot_product") and ph == "backward" for op, ph in ops)
    assert any(op.startswith("aten._foreach_add_") for op, _ in ops)
    for e in entries:
        files = sorted(p.name for p in (d / e["dir"]).iterdir())
        assert files == sorted(e["files"])
        assert files == (["grads.pt", "inputs.pt"] if e["phase"] == "backward" else ["inputs.pt", "outputs.pt"])
        assert e["dir"] == f"{e['op']}/{e['seq']}"
        assert e["device"] == "hal:0" and e["plugin"] == "cpu"
        assert (e["node"] is None) == (e["phase"] == "forward")
    # A call that creates on the device keeps its device= argument, so its replay creates there too.
    to_hal = next(e for e in entries if e["op"] == "aten._to_copy.default")
    saved = torch.load(d / to_hal["dir"] / "inputs.pt", weights_only=False)
    assert saved["kwargs"]["device"] == torch.device("hal:0") and saved["devices"] == ["cpu"]
    mm = next(e for e in entries if e["op"] == "aten.mm.default" and e["phase"] == "forward")
    assert [i["dtype"] for i in mm["inputs"]] == ["float32", "float32"]
    assert all(len(i["shape"]) == len(i["stride"]) == 2 for i in mm["inputs"])
    assert mm["stack"] and all(frame.startswith(("train_compare.py:", "test_tools.py:")) for frame in mm["stack"])
    assert any(e["node"].startswith("MmBackward") for e in entries if e["phase"] == "backward")


def test_replay_reproduces_every_captured_call_exactly(capture):
    d, entries = capture
    results = replay_mod.replay(d)
    assert len(results) == len(entries)
    bad = [(r.op, r.seq, r.why) for r in results if not r.exact]
    assert bad == []


def test_replay_cli_one_call_with_acc_check_and_time(capture, tmp_path):
    d, entries = capture
    mm = next(e for e in entries if e["op"] == "aten.mm.default" and e["phase"] == "backward")
    cfg = tmp_path / "cpu.toml"
    plugin = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    cfg.write_text(f'discover = false\n\n[[plugin]]\nname = "cpu"\npath = "{plugin}"\n')
    env = dict(os.environ, HAL_CONFIG=str(cfg))
    p = subprocess.run([sys.executable, "-m", "torch_hal.tools.replay", str(d / mm["dir"]), "--acc-check", "--time",
                        "--runs", "3", "--device", "hal:0"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "1 of 1 calls replayed ok"
    assert lines[0].startswith("aten.mm.default") and "same" in lines[0] and "out0 ok" in lines[0]
    assert "ms (median of 3)" in lines[0]


def test_replay_errors_name_the_file(capture, tmp_path):
    d, entries = capture
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    e = entries[0]
    os.remove(copy / e["dir"] / "inputs.pt")
    with pytest.raises(replay_mod.ReplayError, match=f"{copy / e['dir'] / 'inputs.pt'}: no such file"):
        replay_mod.replay(copy / e["dir"])
    index = json.loads((copy / "index.json").read_text())
    index["version"] = 99
    (copy / "index.json").write_text(json.dumps(index))
    with pytest.raises(replay_mod.ReplayError, match=f"{copy / 'index.json'}: capture format version 99"):
        replay_mod.replay(copy)
    with pytest.raises(replay_mod.ReplayError, match="index.json: no such file"):
        replay_mod.replay(tmp_path / "nothing")
    # The CLI reports it and exits 2.
    assert replay_mod.main([str(copy)]) == 2


def test_capture_directory_not_writable_fails_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cap = tools.OpCapture(blocker / "op_capture")
    with pytest.raises(OSError, match=f"OpCapture: cannot write the capture directory '{blocker / 'op_capture'}'"):
        cap.start()
    x = torch.ones(2, device="hal")
    assert (x + x).cpu().tolist() == [2.0, 2.0]  # no mode was left behind


def test_capture_size_cap_stops_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("HAL_OPCAPTURE_MAX_BYTES", "5000")
    x = torch.randn(16, 16, device="hal")
    with pytest.warns(UserWarning, match="HAL_OPCAPTURE_MAX_BYTES=5000 reached"):
        with tools.OpCapture(tmp_path / "c") as cap:
            for _ in range(10):
                x = x * 2  # 1 KiB in, 1 KiB out per call
    assert 1 <= len(cap.entries) <= 2
    index = json.loads((tmp_path / "c" / "index.json").read_text())
    assert index["truncated"] and index["bytes"] <= 5000
    monkeypatch.setenv("HAL_OPCAPTURE_MAX_BYTES", "lots")
    with pytest.raises(tools.ToolEnvError, match="HAL_OPCAPTURE_MAX_BYTES='lots': expected a non-negative number"):
        tools.OpCapture(tmp_path / "d")


def test_capture_keeps_strides_and_replays_a_noncontiguous_call(tmp_path):
    a = torch.randn(6, 4, device="hal").t()  # (4, 6) with strides (1, 4)
    b = torch.randn(1, 6, device="hal").expand(4, 6)
    with tools.OpCapture(tmp_path, ops="mul") as cap:
        a * b
    (e,) = cap.entries
    assert [i["stride"] for i in e["inputs"]] == [[1, 4], [0, 1]]
    inputs = torch.load(tmp_path / e["dir"] / "inputs.pt")
    assert inputs["args"][0].stride() == (1, 4) and inputs["args"][1].stride() == (0, 1)
    assert inputs["devices"] == ["hal", "hal"]
    (r,) = replay_mod.replay(tmp_path, acc_check=True)
    assert r.ok


def test_backward_ops_are_seen_on_the_autograd_thread():
    """The dispatch mode sees hal's backward ops on the thread that runs them: the calling thread
    (torch_hal's default), or, with PyTorch's device threads, the engine's (the mode travels there)."""
    import threading

    from torch_hal.tools._tool import OpTool

    class Where(OpTool):
        NAME = "WHERE"
        seen = set()

        def on_op(self, func, args, kwargs):
            main = threading.get_ident() == threading.main_thread().ident
            self.seen.add((torch._C._current_autograd_node() is not None, main))
            return func(*args, **kwargs)

    w = torch.randn(4, 4, device="hal", requires_grad=True)
    with Where() as t:
        (w @ w).sum().backward()
    assert t.seen == {(False, True), (True, True)}  # forward and backward on this thread
    Where.seen = set()
    with torch.autograd.set_multithreading_enabled(True), Where() as t:
        (w @ w).sum().backward()
    assert (True, False) in t.seen  # the backward's products on the engine's thread


# ---- filters ----


def _compared(monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with tools.OpAutoCompare(stream=None) as cmp:
        run_steps(1)
    return {c.op for c in cmp.comparisons}


def test_filter_list_selects_only_those_ops(monkeypatch):
    ops = _compared(monkeypatch, HAL_OPAUTOCOMPARE_LIST="mm,add")
    assert {op.split(".")[1] for op in ops} == {"mm", "add"} and "aten.add.Tensor" in ops


def test_filter_disable_list_wins_and_regexes_work(monkeypatch):
    ops = _compared(monkeypatch, HAL_OPAUTOCOMPARE_LIST="_foreach_.*,mm", HAL_OPAUTOCOMPARE_DISABLE_LIST="mm")
    assert ops and all(op.startswith("aten._foreach_") for op in ops)
    ops = _compared(monkeypatch, HAL_OPAUTOCOMPARE_LIST="", HAL_OPAUTOCOMPARE_DISABLE_LIST="aten::.*")
    assert ops == set()


def test_filter_malformed_names_the_variable(monkeypatch):
    monkeypatch.setenv("HAL_OPCAPTURE_LIST", "mm,add(")
    with pytest.raises(tools.ToolEnvError, match=r"HAL_OPCAPTURE_LIST='mm,add\(': expected comma-separated aten op "
                                                 r"names or regexes; 'add\(' is not a valid regex"):
        tools.OpCapture("unused")


# ---- OpAutoCompare ----


def test_autocompare_passes_the_training_loop_on_the_cpu_plugin(tmp_path):
    with tools.OpAutoCompare(save_dir=tmp_path / "saved", stream=None) as cmp:
        run_steps(3)
    assert len(cmp.comparisons) > 100
    assert {c.phase for c in cmp.comparisons} == {"forward", "backward"}
    assert [str(c) for c in cmp.mismatches()] == [] and [str(c) for c in cmp.not_compared()] == []
    # The attention backward has no CPU kernel: _compare.REFERENCES computes it.
    assert any(c.op.startswith("aten._scaled_dot_product_fused_attention_overrideable_backward") and c.outputs
               for c in cmp.comparisons)
    assert not (tmp_path / "saved").exists()  # nothing to save


def test_autocompare_defaults_pass_the_opinfo_ci_list():
    """The default tolerances pass every op the OpInfo CI list runs on the CPU plugin (float32, the first
    three samples of each OpInfo), with nothing the CPU reference cannot run."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
    import opinfo_sweep

    ops = opinfo_sweep.ops_by_key()
    comparisons, ran = [], set()
    for key, _, _ in opinfo_sweep.read_ci_list():
        for sample in list(ops[key].sample_inputs("hal", torch.float32))[:3]:
            with tools.OpAutoCompare(stream=None) as cmp:
                ops[key](sample.input, *sample.args, **sample.kwargs)
            comparisons += [(key, c) for c in cmp.comparisons]
    assert len(comparisons) > 1500 and len({c.op for _, c in comparisons}) > 150
    assert [f"{key}: {c}" for key, c in comparisons if not c.ok] == []


def test_autocompare_tolerance_env(monkeypatch):
    monkeypatch.setenv("HAL_AUTOCOMPARE_TOLERANCE_FLOAT32", "0.5")
    with pytest.raises(tools.ToolEnvError, match=r'HAL_AUTOCOMPARE_TOLERANCE_FLOAT32=\'0.5\': expected "atol,rtol"'):
        tools.OpAutoCompare()
    monkeypatch.setenv("HAL_AUTOCOMPARE_TOLERANCE_FLOAT16", "x,1")
    monkeypatch.setenv("HAL_AUTOCOMPARE_TOLERANCE_FLOAT32", "1,2")
    with pytest.raises(tools.ToolEnvError, match="HAL_AUTOCOMPARE_TOLERANCE_FLOAT16"):
        tools.OpAutoCompare()
    monkeypatch.delenv("HAL_AUTOCOMPARE_TOLERANCE_FLOAT16")
    assert tools.OpAutoCompare().tolerances[torch.float32] == (1.0, 2.0)


def test_autocompare_reports_nan_where_reference_has_none_and_saves_inputs(tmp_path):
    x = torch.tensor([1.0, -1.0, 4.0], device="hal")
    # log(-1) is NaN on both sides: not a finding. A tolerance of 0 makes sqrt's rounding none either.
    with tools.OpAutoCompare(ops="log", save_dir=tmp_path, stream=None) as cmp:
        torch.log(x)
    assert cmp.mismatches() == []
    with tools.OpAutoCompare(ops="div", save_dir=tmp_path, stream=None) as cmp:
        x / torch.zeros(3, device="hal")
    assert cmp.mismatches() == []  # inf on both sides
    assert not (tmp_path / "index.json").exists()


def test_tools_start_stop_and_bisect_on_a_correct_plugin(tmp_path):
    cmp = tools.OpAutoCompare(stream=None)
    with pytest.raises(RuntimeError, match="OpAutoCompare is not started"):
        cmp.stop()
    x = torch.randn(8, device="hal")
    cmp.start()
    with pytest.raises(RuntimeError, match="already started"):
        cmp.start()
    torch.exp(x)
    cmp.stop()
    torch.exp(x)  # not seen
    assert [c.op for c in cmp.comparisons] == ["aten.exp.default"] and cmp.mismatches() == []
    want = torch.exp(x.cpu())
    assert tools.bisect_fallback(lambda: torch.exp(x).cpu(), lambda got: torch.allclose(got, want)) == []


# ---- OpTimeMeasure ----


def test_time_measure_csv_lists_every_op_and_sums_to_the_step_time(tmp_path):
    # A block large enough that the step's time is the ops' (not Python's).
    args = dict(dim=256, heads=4, hidden=1024, vocab=512, max_len=64)
    step, _ = decoder_loop(1, **args)
    step()  # warm up (allocator, op runners)
    called = tools.ops_called(step)
    # Steps with and without the tool alternate, so a change of machine load hits both sides.
    path = tmp_path / "t.csv"
    t = tools.OpTimeMeasure(csv=str(path), stream=None)
    # Each pair's ratio is taken back to back and the median ratio judged, so
    # a burst of load on this shared 2-core machine skews one pair, not the figure.
    ratios = []
    for _ in range(7):
        t0 = time.perf_counter()
        step()
        plain_ms = (time.perf_counter() - t0) * 1e3
        before = t.total_ms()
        t.start()
        step()
        t.stop()  # writes the CSV of every call so far
        ratios.append((t.total_ms() - before) / plain_ms)
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["op", "phase", "calls", "total_ms", "mean_ms", "max_ms", "shapes"]
    assert {r["op"].split(".", 1)[1].removesuffix(".default") for r in rows} == set(called)
    assert {r["phase"] for r in rows} == {"forward", "backward"}
    totals = [float(r["total_ms"]) for r in rows]
    assert totals == sorted(totals, reverse=True)
    # Same magnitude as the step (not a unit slip, not missing ops); the tool
    # synchronises per op, so a loaded machine inflates it: the bound is loose.
    assert 0.5 <= statistics.median(ratios) <= 2.0, ratios
    assert abs(sum(totals) - t.total_ms()) < 1e-3 * len(rows)
    assert sum(int(r["calls"]) for r in rows) == len(t.calls) == 7 * sum(called.values())


# ---- OpFallback ----


def test_fallback_forces_selected_ops_inside_the_block_only():
    torch_hal.reset_fallback_stats()
    a = torch.randn(4, 4, device="hal")
    with tools.OpFallback(ops="mm"):
        with tools.OpFallback(ops="add"):
            a @ a + a
        a @ a + a
    a @ a + a
    stats = torch_hal.fallback_stats()
    assert stats == {"aten::mm": 2, "aten::add.Tensor": 1}
    with tools.OpFallback(ops="add.*", disable="add_.*"):
        (a + a).add_(a)
    assert torch_hal.fallback_stats()["aten::add.Tensor"] == 2 and "aten::add_.Tensor" not in torch_hal.fallback_stats()


def test_fallback_reaches_the_backward_thread():
    torch_hal.reset_fallback_stats()
    w = torch.randn(4, 4, device="hal", requires_grad=True)
    with tools.OpFallback(ops="mm"):
        (w @ w).sum().backward()
    assert torch_hal.fallback_stats()["aten::mm"] == 3  # forward and two in backward


# ---- OpDtypeCast ----


def test_dtype_cast_runs_selected_ops_in_float32():
    a = torch.randn(8, 32, device="hal").half()
    b = torch.randn(32, 8, device="hal").half()
    with tools.OpDtypeCast(ops="mm") as cast:
        c = a @ b
        d = a + a  # not selected
    assert c.dtype == torch.float16 and d.dtype == torch.float16
    assert dict(cast.counts) == {"aten.mm.default": 1}
    want = (a.float() @ b.float()).half()
    assert torch.equal(c.cpu(), want.cpu())
    with pytest.raises(tools.ToolEnvError, match='HAL_OPDTYPECAST_CAST=\'float16-float32\': expected "from->to"'):
        os.environ["HAL_OPDTYPECAST_CAST"] = "float16-float32"
        try:
            tools.OpDtypeCast()
        finally:
            del os.environ["HAL_OPDTYPECAST_CAST"]


# ---- profiler ----


def test_chrome_trace_has_one_range_per_launched_op(tmp_path):
    step, _ = decoder_loop(2)
    step()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        launched = [e for e in torch_hal.explain(step, print_result=False) if e.ran.startswith("catalog op ")]
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    ranges = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("hal::")]
    assert len(ranges) == len(launched) > 50
    assert all(r["args"]["plugin"] == "cpu" and r["args"]["device"] == "hal:0" for r in ranges)
    by_catalog = {}
    for e in launched:
        catalog = e.ran.split()[2]
        by_catalog[catalog] = by_catalog.get(catalog, 0) + 1
    assert {r["name"][5:] for r in ranges} == set(by_catalog)
    rows = tools.profiler.summary(prof, top=5, stream=None)
    assert len(rows) == 5 and sum(r[1] for r in tools.profiler.top_ops(prof, 0)) == len(launched)

