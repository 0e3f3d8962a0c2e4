"""torch.compile(backend="hal") (issue 15): issue 12's models train under the compiled backend and
match eager CPU at every step; nodes that do not lower run eagerly with a counted reason.

The models and the training loop are framework_bridge/pytorch/examples/train_compare.py's (the same
as test_training.py); here the hal side is torch.compile(model, backend="hal").
"""
import copy
import importlib.util
import pathlib

import pytest
import torch
import torch.nn as nn

import torch_hal
import torch_hal.dynamo

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_compare.py"
_spec = importlib.util.spec_from_file_location("train_compare", EXAMPLE)
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("HAL_COMPILE_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    torch_hal.dynamo.reset_stats()
    yield
    torch._dynamo.reset()


def _train_compiled(name, steps=20, **model_args):
    torch.manual_seed(0)
    ref = tc.MODELS[name](**model_args)
    dev = copy.deepcopy(ref)
    data = tc.batches(name, steps)
    hal_losses = tc.train(torch.compile(dev, backend="hal"), data, "adamw", "hal")
    cpu_losses = tc.train(ref, data, "adamw", "cpu")
    result = dict(model=name, optim="adamw", hal=hal_losses, cpu=cpu_losses,
                  hal_state={k: v.detach().cpu() for k, v in dev.state_dict().items()},
                  cpu_state=dict(ref.state_dict()))
    tc.check(result)  # every step's loss and the final parameters and buffers
    assert sum(hal_losses[-5:]) < sum(hal_losses[:5])  # it really trained
    return result


def test_backend_is_registered_by_name():
    assert "hal" in torch._dynamo.list_backends(exclude_tags=())
    toml = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'hal = "torch_hal.dynamo:compile_backend"' in toml


def test_mlp_trains_compiled_matching_cpu():
    _train_compiled("mlp")
    s = torch_hal.dynamo.stats()
    # A forward and a backward graph, compiled once (20 steps of the same shapes).
    assert s["graphs"] == 2, s
    assert s["segments"] >= 2 and s["lowered_nodes"] >= 10, s
    assert s["hal_compiles"] + s["hal_cache_hits"] == s["segments"]
    # The weights' transposes are read in place by the segments: no eager node at all. Those the
    # backward needs too are returned by the forward's segment: its run is the graph's only step.
    assert s["eager_nodes"] == 0 and s["input_views"] >= 6, s
    forward = [r for r in torch_hal.dynamo.runners() if r.kind == "forward"]
    assert forward and all(len(r.steps) == 1 for r in forward), [r.explain() for r in forward]


def test_cnn_with_batchnorm_trains_compiled_matching_cpu():
    # No dropout (p=0): its masks are drawn on the device, and the CPU replay of test_training.py
    # records them through the eager dispatcher, which a compiled graph does not pass.
    _train_compiled("cnn", p=0.0)
    s = torch_hal.dynamo.stats()
    # Training batch norm (AOTAutograd's functional form, new running stats as results) lowers: the
    # forward and the backward are one segment each, with no eager node; the weight transposes are
    # the segments' inputs read in place.
    assert s["segments"] == 2 and s["lowered_nodes"] >= 20, s
    assert s["eager_nodes"] == 0 and s["input_views"] >= 3, s
    # The running stats (and num_batches_tracked) are written back by the forward's segment.
    assert s["write_backs"] >= 6, s


@pytest.mark.parametrize("grad", [False, True])
def test_cnn_in_eval_mode_lowers_batch_norm_and_matches_eager(grad):
    torch.manual_seed(0)
    ref = tc.MODELS["cnn"](p=0.0)
    x = tc.batches("cnn", 2)[0][0]
    ref(x)  # training mode: running stats that are not the initial zeros and ones
    ref.eval()
    compiled = torch.compile(copy.deepcopy(ref).to("hal"), backend="hal")
    with torch.set_grad_enabled(grad):
        out = compiled(x.to("hal"))
    torch.testing.assert_close(out.detach().cpu(), ref(x).detach(), rtol=1e-5, atol=1e-6)
    s = torch_hal.dynamo.stats()
    assert s["segments"] >= 1 and s["eager_nodes"] == 0, s


def test_decoder_block_trains_compiled_matching_cpu():
    _train_compiled("decoder")
    s = torch_hal.dynamo.stats()
    assert s["segments"] >= 2 and s["lowered_nodes"] >= 20, s
    # The fused attention lowers with its side results (max_q, max_k as ints, the philox seed and
    # offset the backward is handed as tensors), so it does not split the forward graph.
    forward = [r for r in torch_hal.dynamo.runners() if r.kind == "forward"]
    assert forward and all(len(r.segments) == 1 for r in forward), [r.explain() for r in forward]
    assert not any("scaled_dot_product" in str(n.target) for r in forward for n, _ in r.eager)


class _Parts(nn.Module):
    """Slices, selects and splits of intermediate values, a detach (an alias) saved for later, and
    a view: all lowered inside one segment (no eager node) and matching eager CPU."""

    def forward(self, x):
        h = torch.tanh(x) * x
        a, b = h.split([3, 5], dim=-1)
        c, d = torch.split(h, 4, dim=1)
        rot = torch.cat([-b[..., :3], a], dim=-1)          # slices of a split piece, rope-style
        s = h[1:, 1] + h[1:, ::2].sum(1)                    # select, stepped slice
        k = h[:, 2:].detach()                               # detach is an alias in the graph
        whole = h[:, 0:8]                                   # the whole dim: the value itself
        return rot.exp().sum() + (c * d).sum() + s.sum(), (k * k).view(-1), whole * whole


def test_slices_splits_selects_and_aliases_of_segment_values_lower_into_the_segment():
    torch.manual_seed(0)
    x = torch.randn(6, 8)
    compiled = torch.compile(_Parts().to("hal"), backend="hal")
    got = compiled(x.to("hal"))
    for g, want in zip(got, _Parts()(x)):
        torch.testing.assert_close(g.cpu(), want, rtol=1e-5, atol=1e-5)
    s = torch_hal.dynamo.stats()
    assert s["segments"] == 1 and s["eager_nodes"] == 0, s
    # the full-range slice and the detach are the value itself (no node); reshapes alias on the device
    assert s["aliased_nodes"] >= 1, s
    # a second call (all shapes known) reuses the schedule and still matches
    got = compiled((x * 2).to("hal"))
    torch.testing.assert_close(got[0].cpu(), _Parts()(x * 2)[0], rtol=1e-5, atol=1e-5)


class _Branchy(nn.Module):
    """A data-dependent Python branch: Dynamo breaks the graph at the `if`."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.sum() > 0:
            h = h * 2
        else:
            h = h - 1
        return self.b(h)


def _forward_backward(model, x, params):
    out = model(x)
    out.square().sum().backward()
    return out.detach().cpu(), {k: p.grad.detach().cpu() for k, p in params.named_parameters()}


def test_python_numbers_in_tensor_arguments_lower_as_constants_with_eager_promotion():
    # AOTAutograd keeps `x * 2` as mul.Tensor(x, 2): the number is a wrapped scalar, not an eager node
    def f(x, y):
        return torch.relu(x) * 2 + 1, y * 2.5, y + True, x - 0.5

    x, y = torch.randn(5), torch.arange(5, dtype=torch.int32)
    torch._dynamo.reset()
    torch_hal.dynamo.reset_stats()
    got = torch.compile(f, backend="hal")(x.to("hal"), y.to("hal"))
    for g, w in zip(got, f(x, y)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w)
    stats = torch_hal.dynamo.stats()
    assert stats["eager_nodes"] == 0 and stats["segments"] == 1, stats["eager_reasons"]


def test_graph_break_model_compiles_and_matches_eager():
    torch.manual_seed(0)
    ref = _Branchy()
    dev = copy.deepcopy(ref).to("hal")
    x = torch.randn(16, 8)
    out, grads = _forward_backward(torch.compile(dev, backend="hal"), x.to("hal"), dev)
    ref_out, ref_grads = _forward_backward(ref, x, ref)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    for k in ref_grads:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=1e-5, atol=1e-5)
    s = torch_hal.dynamo.stats()
    assert s["graphs"] >= 4, s  # forward and backward on each side of the break


class _WithMatrixExp(nn.Module):
    """torch.linalg.matrix_exp has no catalog op: an eager node (eager "hal" falls back to CPU for it)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)

    def forward(self, x):
        e = torch.linalg.matrix_exp(self.a(x) * 0.1)
        return torch.relu(e) + e.abs().sum()


def test_op_without_catalog_op_runs_eagerly_with_a_counted_reason():
    torch.manual_seed(0)
    ref = _WithMatrixExp()
    dev = copy.deepcopy(ref).to("hal")
    x = torch.randn(6, 6)
    with torch.no_grad():
        out = torch.compile(dev, backend="hal")(x.to("hal")).cpu()
        ref_out = ref(x)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
    s = torch_hal.dynamo.stats()
    assert s["lowered_nodes"] >= 2, s
    assert any("no mapping-table row for aten::linalg_matrix_exp" in r for r in s["eager_reasons"]), s


def test_complex_node_runs_eagerly_with_a_counted_reason():
    def f(x):
        c = torch.polar(x, x * 0.5)  # complex64
        return (c * c).abs() + x.exp()

    x = torch.rand(5) + 0.5
    with torch.no_grad():
        out = torch.compile(f, backend="hal")(x.to("hal")).cpu()
    torch.testing.assert_close(out, f(x), rtol=1e-5, atol=1e-5)
    s = torch_hal.dynamo.stats()
    assert s["eager_reasons"].get("complex dtype", 0) >= 1, s
    assert s["lowered_nodes"] >= 1, s


class _SeqModel(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 32), nn.Linear(32, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def test_dynamic_sequence_lengths_compile_once_per_shape_family():
    torch.manual_seed(0)
    ref = _SeqModel()
    dev = copy.deepcopy(ref).to("hal")
    compiled = torch.compile(dev, backend="hal", dynamic=True)
    first = None
    with torch.no_grad():
        for length in (7, 16, 33, 64, 100):
            x = torch.randn(2, length, 16)
            torch.testing.assert_close(compiled(x.to("hal")).cpu(), ref(x), rtol=1e-4, atol=1e-5)
            first = first or torch_hal.dynamo.stats()
    s = torch_hal.dynamo.stats()
    # One FX graph per shape family (Dynamo may specialise the first length, then go symbolic),
    # and the HAL segments of a family are compiled once, not per length.
    assert s["graphs"] <= 2, s
    assert first["hal_compiles"] >= 1 and s["hal_compiles"] <= 2 * first["hal_compiles"], (first, s)
    assert s["segments"] <= 2 * first["segments"], (first, s)
    assert s["lowered_nodes"] >= 5, s


def test_frozen_weights_fold_into_constants_under_no_grad():
    torch.manual_seed(0)
    ref = tc.MLP()
    dev = copy.deepcopy(ref).to("hal").eval()
    x = torch.randn(8, 64)
    compiled = torch.compile(dev, backend="hal", options={"freeze": True})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x.to("hal")).cpu(), ref(x), rtol=1e-5, atol=1e-5)
    s = torch_hal.dynamo.stats()
    assert s["folded_nodes"] >= 3, s  # the three weight transposes, computed once at compile


def test_explain_prints_fx_graph_hal_graph_partition_and_eager_nodes(capsys):
    m = _WithMatrixExp().to("hal")
    with torch.no_grad():
        text = torch_hal.dynamo.explain(m, torch.randn(6, 6, device="hal"))
    assert "graph breaks: 0" in text
    assert "torch.ops.aten.linalg_matrix_exp" in text          # the FX graph
    assert "= addmm(" in text and "cpu:0 (home)" in text  # the HAL graph after the pipeline, its partition
    assert "eager node" in text and "no mapping-table row for aten::linalg_matrix_exp" in text
    assert text in capsys.readouterr().out


def test_unknown_backend_option_is_named():
    with pytest.raises(Exception, match="unknown options \\['fuse'\\]"):
        torch.compile(nn.Linear(2, 2).to("hal"), backend="hal", options={"fuse": 1})(torch.randn(1, 2, device="hal"))


_KERNELS_PER_STEP = r'''
import copy, importlib.util, json, sys, torch, torch_hal, torch_hal.dynamo
import torch.nn.functional as F
spec = importlib.util.spec_from_file_location("tc", sys.argv[1])
tc = importlib.util.module_from_spec(spec); spec.loader.exec_module(tc)
torch.manual_seed(0)
ref = tc.DecoderBlock()
x, y = tc.batches("decoder", 3)[0]
plugin = torch_hal._C.get_device_properties(0)["plugin"]
def step(model):
    loss = F.cross_entropy(model(x.to("hal")), y.to("hal"))
    loss.backward()
    return loss.item()
def catalog_runs(entries):
    return sum(1 for e in entries if "decomposed" not in e.ran and "fallback" not in e.ran.lower())
eager_model = copy.deepcopy(ref).to("hal")
step(eager_model)
eager = catalog_runs(torch_hal.explain(step, eager_model, print_result=False))
compiled = torch.compile(copy.deepcopy(ref).to("hal"), backend="hal")
step(compiled)
before = torch_hal.dynamo.stats()["segment_launches"]
entries = torch_hal.explain(step, compiled, print_result=False)
s = torch_hal.dynamo.stats()
parts = [c.stats() for r in torch_hal.dynamo.runners() for _, c, _ in r.segments]
nodes = sum(c.node_count() for r in torch_hal.dynamo.runners() for _, c, _ in r.segments)
print(json.dumps(dict(groups=sum(p["groups"] for p in parts), group_kernels=sum(p["kernels"] for p in parts),
                      op_nodes=sum(p["op_nodes"] for p in parts), segment_nodes=nodes, eager=eager, compiled=catalog_runs(entries) + s["segment_launches"] - before,
                      eager_nodes_runs=catalog_runs(entries), stats=s, plugin=plugin,
                      loss_hal=step(compiled), loss_cpu=F.cross_entropy(ref(x), y).item())))
'''


@pytest.fixture(scope="module")
def opencl_decoder_step(tmp_path_factory):
    """The decoder block's forward + backward on the OpenCL plugin (PoCL), compiled and eager, in a
    fresh process whose hal.toml names only that plugin: kernels launched per step each way (eager:
    each mapped aten op is one; compiled: the segments' fused-group kernels and op-by-op nodes plus
    the eager nodes' mapped ops)."""
    import json
    import os
    import subprocess
    import sys

    tmp_path = tmp_path_factory.mktemp("opencl")
    plugin = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so"
    assert plugin.exists(), f"{plugin} was not built"
    config = tmp_path / "opencl.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\nname = "opencl"\npath = "{plugin}"\n')
    # PyTorch's own caches on as well (FX graph and AOTAutograd caches, in their own directory): the
    # HAL cache works alongside them.
    env = dict(os.environ, HAL_CONFIG=str(config), HAL_FALLBACK_WARN="0", HAL_COMPILE_CACHE_DIR=str(tmp_path / "c"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1",
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch-cache"))
    env.pop("HAL_PLUGIN_PATH", None)
    runs = []
    for k in range(3):  # 2nd: the 1st one's executables from the disk cache; 3rd: after corrupting them
        if k == 2:
            for f in (tmp_path / "c").rglob("*"):
                if f.is_file():
                    f.write_bytes(b"not a cache entry" + f.read_bytes()[17:])
        out = subprocess.run([sys.executable, "-c", _KERNELS_PER_STEP, str(EXAMPLE)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


def test_decoder_on_opencl_compiles_with_fused_groups_and_matches_cpu(opencl_decoder_step):
    r = opencl_decoder_step[0]
    assert r["plugin"] == "opencl" and r["stats"]["segments"] >= 2, r
    assert abs(r["loss_hal"] - r["loss_cpu"]) < 1e-4, r
    # Elementwise chains ran as fused groups: fewer kernels than the nodes those segments hold.
    assert r["groups"] >= 1 and r["group_kernels"] + r["op_nodes"] < r["segment_nodes"], r


def test_decoder_on_opencl_launches_fewer_kernels_compiled_than_eager(opencl_decoder_step):
    # Counted, not timed: eager launches one kernel per mapped aten op; compiled, the fused groups'
    # kernels, the op-by-op nodes (reshapes alias their input: no launch) and the eager nodes' ops.
    r = opencl_decoder_step[0]
    assert 0 < r["compiled"] < r["eager"], r
    assert r["stats"]["aliased_reshapes"] > 0 and r["stats"]["aliased_nodes"] > 0, r["stats"]


def test_second_process_compiles_nothing_on_the_hal_side(opencl_decoder_step):
    first, second, _ = (r["stats"]["hal"] for r in opencl_decoder_step)
    assert first["graph_compiles"] > 0, first
    assert second["graph_compiles"] == 0 and second["disk_hits"] > 0, second


def test_corrupt_compile_cache_entries_are_rebuilt(opencl_decoder_step):
    first, _, third = opencl_decoder_step
    assert third["stats"]["hal"]["rebuilt_entries"] > 0, third["stats"]["hal"]
    assert third["stats"]["hal"]["graph_compiles"] == first["stats"]["hal"]["graph_compiles"], third["stats"]["hal"]
    assert third["loss_hal"] == first["loss_hal"]


def test_segment_compile_error_runs_the_nodes_eagerly_and_warns_once(monkeypatch):
    """A segment the HAL compile refuses (simulated here: the CPU plugin compiles every segment)
    runs its nodes op by op eagerly; the message is warned once, the reason counted."""
    def refuse(self, fold=False, output_aliases=()):
        raise RuntimeError("plugin 'x' graph_compile: out of registers (simulated)")

    monkeypatch.setattr(torch_hal._C._SegmentBuilder, "compile", refuse)
    torch.manual_seed(0)
    ref = tc.MLP()
    dev = copy.deepcopy(ref).to("hal")
    x = torch.randn(4, 64)
    with pytest.warns(RuntimeWarning, match="out of registers") as record:
        out = torch.compile(dev, backend="hal")(x.to("hal"))
        out2 = torch.compile(dev, backend="hal")(x.to("hal") * 1)  # same graph again: no second warning
    torch.testing.assert_close(out.detach().cpu(), ref(x).detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out2.detach().cpu(), out.detach().cpu())
    assert sum("out of registers" in str(w.message) for w in record) == 1
    s = torch_hal.dynamo.stats()
    assert s["segments"] == 0 and s["eager_reasons"].get("segment compile failed", 0) >= 5, s


# A representative float32 OpInfo set from opinfo_ci.txt (elementwise, reduction, view/shape, linalg,
# nn.functional): each sample under torch.compile(backend="hal") must give what eager "hal" gives.
_OPINFO_UNDER_COMPILE = ["add", "mul", "div.no_rounding_mode", "exp", "sigmoid", "tanh", "where", "clamp",
                         "sum", "mean", "amax", "softmax", "log_softmax", "cumsum", "matmul", "mm", "bmm",
                         "addmm", "transpose", "permute", "reshape", "cat", "nn.functional.relu",
                         "nn.functional.gelu", "nn.functional.silu", "nn.functional.layer_norm",
                         "nn.functional.linear",
                         # An index list read by a Meta kernel (the runner's plain meta tensors, not
                         # the compiler's FakeTensors: these failed to compile before)
                         "take", "__getitem__", "combinations"]


@pytest.mark.parametrize("key", _OPINFO_UNDER_COMPILE)
def test_opinfo_float32_forward_under_compile_matches_eager(key):
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {(o.name + ("." + o.variant_test_name if o.variant_test_name else "")): o for o in op_db}
    op = ops[key]
    lowered = checked = 0
    for i, sample in enumerate(op.sample_inputs("hal", torch.float32, requires_grad=False)):
        if i == 3:
            break
        torch._dynamo.reset()  # one compile per sample shape (no recompile limit reached)

        def f(x, *args, **kwargs):
            return op.op(x, *args, **kwargs)

        with torch.no_grad():
            expected = f(sample.input, *sample.args, **sample.kwargs)
            before = torch_hal.dynamo.stats()["lowered_nodes"]
            got = torch.compile(f, backend="hal", fullgraph=False)(sample.input, *sample.args, **sample.kwargs)
            lowered += torch_hal.dynamo.stats()["lowered_nodes"] - before
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True,
                                   msg=lambda m: f"{key} sample {i}: {m}")
        checked += 1
    assert checked > 0
    # Views of graph inputs stay eager views (no kernel); indexing by a tensor stays eager (no catalog
    # row for aten::index.Tensor).
    if key not in ("transpose", "permute", "reshape", "take", "__getitem__"):
        assert lowered > 0, f"{key}: no node lowered to a catalog op"  # the compile really went through HAL


def test_input_mutation_is_preserved_in_order():
    def f(x, buf):
        y = x * 2 + buf      # reads buf before the update
        buf.mul_(3)
        return y + buf       # and after it

    x, buf = torch.randn(4), torch.randn(4)
    hx, hbuf = x.to("hal"), buf.to("hal")
    with torch.no_grad():
        got = torch.compile(f, backend="hal")(hx, hbuf)
        expected = f(x, buf)
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(hbuf.cpu(), buf)  # the in-place update reached the caller's tensor
    assert torch_hal.dynamo.stats()["lowered_nodes"] >= 2


def test_rng_state_calls_inside_a_compiled_function_run_eagerly():
    """torch.testing's freeze_rng_state (OpInfo's seeded wrappers) reads and restores the hal
    generator's state inside no_dispatch(); under torch.compile those calls run eagerly (a graph
    break, as torch.cuda's), so the function compiles, computes, and leaves the state as it was."""
    from torch.testing._utils import freeze_rng_state

    def f(x):
        with freeze_rng_state():
            torch.manual_seed(7)
            return torch.sigmoid(x).sum()

    x = torch.randn(5)
    torch.hal.manual_seed(123)
    before = torch.hal.get_rng_state()
    got = torch.compile(f, backend="hal")(x.to("hal"))
    torch.testing.assert_close(got.cpu(), torch.sigmoid(x).sum())
    assert torch.equal(torch.hal.get_rng_state(), before)
    assert torch.hal.get_rng_state.__name__ == "get_rng_state"  # the device module's, wrapped


def test_an_op_whose_pytorch_decomposition_is_wrong_stays_whole():
    """PyTorch's decomposition of _scaled_dot_product_flash_attention_for_cpu returns the attention
    weights where the op returns logsumexp; the "hal" table leaves the op whole, so compiled equals
    eager (which runs it through the CPU fallback)."""
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    q, k, v = torch.randn(2, 2, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    want = op(q, k, v)
    got = torch.compile(lambda q, k, v: op(q, k, v), backend="hal")(q.to("hal"), k.to("hal"), v.to("hal"))
    assert [t.shape for t in got] == [t.shape for t in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


def test_transposes_of_graph_inputs_are_read_in_place_and_still_made_for_other_readers():
    """A transpose of a graph input read by a lowered node is the segment's input, permuted in C++;
    one also read by an eager node and returned (a view of the input, as eagerly) is made too."""
    def f(w, x, b):
        wt = w.t()
        y = torch.relu(x @ wt + b)                      # lowered: reads wt in place
        q = torch.linalg.matrix_exp(wt.transpose(0, 1)[:4] * 0.1)  # eager (no catalog op): a view of wt
        z = torch.sigmoid(b.unsqueeze(0).permute(1, 0))  # a permute of a view: an eager view, then lowered
        return y, wt, q, z

    w, x, b = torch.randn(5, 4), torch.randn(3, 4), torch.randn(5)
    want = f(w, x, b)
    with torch.no_grad():
        got = torch.compile(f, backend="hal")(w.to("hal"), x.to("hal"), b.to("hal"))
    for g, e in zip(got, want):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
    assert got[1]._is_view() and got[1].stride() == (1, 4)  # wt: a transposed view, as eager returns
    assert torch_hal.dynamo.stats()["input_views"] >= 1


_OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True),
    "adam_amsgrad": lambda params: torch.optim.Adam(params, lr=1e-2, amsgrad=True),
}


@pytest.mark.parametrize("optim", sorted(_OPTIMIZERS))
def test_compiled_optimizer_step_lowers_whole_and_matches_eager_cpu(optim):
    """torch.compile(opt.step, backend="hal"): the optimizer's _foreach_ ops decompose per tensor and
    lower, and the updates of the parameters and the optimizer state (input mutations AOTAutograd
    keeps in the graph) are written back by the segment: no eager node; every step matches CPU."""
    torch.manual_seed(0)
    ref = tc.MODELS["mlp"]()
    dev = copy.deepcopy(ref).to("hal")
    opt_ref, opt_dev = _OPTIMIZERS[optim](ref.parameters()), _OPTIMIZERS[optim](dev.parameters())
    step = torch.compile(opt_dev.step, backend="hal")
    for x, y in tc.batches("mlp", 4):
        for model, opt, run, d in ((ref, opt_ref, opt_ref.step, "cpu"), (dev, opt_dev, step, "hal")):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x.to(d)), y.to(d)).backward()
            versions = [p._version for p in model.parameters()]
            run()
            # Updated in place as eager's step does: each parameter's version moves (autograd's
            # check of tensors saved for backward sees it).
            assert all(p._version > v for p, v in zip(model.parameters(), versions)), d
        for a, b in zip(ref.parameters(), dev.parameters()):
            torch.testing.assert_close(b.detach().cpu(), a.detach(), **tc.PARAM_TOL)
    for state_ref, state_dev in zip(opt_ref.state.values(), opt_dev.state.values()):
        for k, v in state_ref.items():
            torch.testing.assert_close(state_dev[k].cpu(), v, **tc.PARAM_TOL, msg=lambda m: f"state {k}: {m}")
    s = torch_hal.dynamo.stats()
    assert s["eager_nodes"] == 0 and s["segments"] >= 1, s
    assert s["write_backs"] >= 2 * len(list(dev.parameters())), s  # at least each parameter and a buffer
    # The updates were written into the parameters and moments by the runs themselves (output
    # aliases, ABI 1.14), not copied in after them.
    runner = torch_hal.dynamo.runners()[-1]
    in_place = sum(compiled.in_place_write_backs() for _, compiled, _ in runner.segments)
    assert in_place >= 2 * len(list(dev.parameters())), in_place


def test_compiled_optimizer_step_updates_parameters_sharing_a_storage_by_copies():
    """Two parameters that are views of one storage: writing one's update into its memory during
    the run could be read through the other's, so the runner copies them in after the run (no
    output alias is used) and every step matches CPU."""
    def params(device):
        torch.manual_seed(0)
        flat = torch.randn(2 * 40).to(device)
        return [torch.nn.Parameter(flat[:40].view(8, 5)), torch.nn.Parameter(flat[40:].view(8, 5))]
    ref, dev = params("cpu"), params("hal")
    assert dev[0].untyped_storage().data_ptr() == dev[1].untyped_storage().data_ptr()
    opt_ref = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1)
    opt_dev = torch.optim.AdamW(dev, lr=1e-2, weight_decay=0.1)
    step = torch.compile(opt_dev.step, backend="hal")
    x = torch.randn(5, 3)
    for _ in range(3):
        for ps, opt, run, d in ((ref, opt_ref, opt_ref.step, "cpu"), (dev, opt_dev, step, "hal")):
            opt.zero_grad()
            ((ps[0] @ x.to(d)).sin().sum() + (ps[1] @ x.to(d)).cos().sum()).backward()
            run()
        for a, b in zip(ref, dev):
            torch.testing.assert_close(b.detach().cpu(), a.detach(), **tc.PARAM_TOL)
    runner = torch_hal.dynamo.runners()[-1]
    assert sum(compiled.in_place_write_backs() for _, compiled, _ in runner.segments) > 0  # the moments


def test_compiled_optimizer_step_counters_kept_on_the_device_follow_the_cpu_values():
    """The step counters (0-dim CPU tensors) stay on the device between runs and are updated there
    by the run itself (counted as in-place write-backs); the CPU tensors still hold every new value,
    and a value the user sets between steps (a rewound counter, a loaded state) is the one the next
    step reads."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    dev = copy.deepcopy(ref).to("hal")
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=0.1)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=0.1)
    step = torch.compile(opt_dev.step, backend="hal")
    for it in range(6):
        for model in (ref, dev):
            for p in model.parameters():
                p.grad = torch.full_like(p, 0.5 * (it + 1))
        opt_ref.step()
        step()
        for state_ref, state_dev in zip(opt_ref.state.values(), opt_dev.state.values()):
            assert state_dev["step"].device.type == "cpu"
            assert float(state_dev["step"]) == float(state_ref["step"]), it
        if it in (2, 3):  # rewound between steps, twice in a row (the second to the value the device holds)
            for opt in (opt_ref, opt_dev):
                for state in opt.state.values():
                    state["step"].fill_(1.0)
        for a, b in zip(ref.parameters(), dev.parameters()):
            torch.testing.assert_close(b.detach().cpu(), a.detach(), **tc.PARAM_TOL)
    runner = torch_hal.dynamo.runners()[-1]
    in_place = sum(compiled.in_place_write_backs() for _, compiled, _ in runner.segments)
    assert in_place == 6 * 4 * len(list(dev.parameters())), in_place  # parameter, 2 moments, step counter
    assert torch_hal.dynamo.stats()["eager_nodes"] == 0


def test_transient_outputs_are_only_write_back_sources():
    """A compiled step's updates only copied into the parameters are transient (one buffer, not
    returned); naming an output no write-back reads is refused with the index, nothing changed."""
    from torch_hal.dynamo import backend as dynamo_backend

    model = tc.MODELS["mlp"]().to("hal")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = torch.compile(opt.step, backend="hal")
    since = dynamo_backend.next_serial()
    torch.nn.functional.cross_entropy(model(torch.randn(4, 64, device="hal")),
                                      torch.tensor([1, 2, 3, 4], device="hal")).backward()
    step()
    runner = dynamo_backend.runners(since)[-1]
    seg, compiled, outputs = runner.segments[0]
    before = [p.detach().cpu().clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match=f"output {len(outputs) + 3} of a segment is not a write-back's source"):
        compiled.set_transient_outputs([len(outputs) + 3])
    step()  # the refused call changed nothing: the step still updates every parameter
    assert all(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))


def _foreach_arguments(schema):
    """Sample (args, kwargs) for a _foreach_ overload: lists of two tensors (values in (0.1, 0.9):
    every unary op is defined there), scalars, scalar lists; None for an argument of another kind."""
    torch.manual_seed(0)
    tensors = lambda: [torch.rand(3, 2) * 0.8 + 0.1, torch.rand(4) * 0.8 + 0.1]  # noqa: E731
    args, kwargs = [], {}
    for a in schema.arguments:
        kind = str(a.type)
        if kind == "List[Tensor]":
            v = tensors()
        elif kind == "List[number]":
            v = [0.5, 1.5]
        elif kind == "number":
            v = 1.5 if a.name == "self" else 0.75
        elif kind == "Tensor":
            v = torch.tensor(0.7)
        elif a.has_default_value():
            v = a.default_value
        else:
            return None
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    return args, kwargs


def test_foreach_decompositions_compute_what_the_foreach_ops_compute():
    from torch_hal.dynamo.foreach import foreach_decompositions

    table = foreach_decompositions()
    for op in (torch.ops.aten._foreach_addcdiv.Scalar, torch.ops.aten._foreach_lerp.Scalar,
               torch.ops.aten._foreach_pow.ScalarAndTensor, torch.ops.aten._foreach_maximum.Scalar):
        assert op in table, op  # what AdamW, Adam(amsgrad) and clipping use
    assert torch.ops.aten._foreach_addcmul.Tensor not in table  # its scalars are a tensor: left whole
    checked = 0
    for op, decomposition in table.items():
        sample = _foreach_arguments(op._schema)
        assert sample is not None, op
        want, got = op(*sample[0], **sample[1]), decomposition(*sample[0], **sample[1])
        assert len(got) == len(want), op
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=lambda m: f"{op}: {m}")
        checked += 1
    assert checked >= 50
    # Keyword arguments reach the per-element op (alpha is keyword-only in both).
    a, b = [torch.ones(2)], [torch.full((2,), 2.0)]
    torch.testing.assert_close(table[torch.ops.aten._foreach_add.List](a, b, alpha=3)[0], torch.full((2,), 7.0))


def test_cnn_with_dropout_trains_compiled_as_eager_hal_with_running_stats_written_back():
    """The CNN with its dropout (p=0.25): the dropout draws from the hal generator as eagerly (an
    eager node), so compiled and eager "hal" training agree exactly; the dropout splits the forward
    and the running stats, made before it, are written back by the segment that makes them."""
    torch.manual_seed(0)
    ref = tc.MODELS["cnn"]()
    eager, compiled = copy.deepcopy(ref), copy.deepcopy(ref)
    data = tc.batches("cnn", 6)
    torch.hal.manual_seed(5)
    want = tc.train(eager, data, "adamw", "hal")
    torch.hal.manual_seed(5)
    got = tc.train(torch.compile(compiled, backend="hal"), data, "adamw", "hal")
    assert got == want
    for (name, a), b in zip(eager.state_dict().items(), compiled.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu()), name
    s = torch_hal.dynamo.stats()
    assert set(s["eager_reasons"]) == {"no mapping-table row for aten::native_dropout",
                                       "no mapping-table row for aten::native_dropout_backward"}, s
    assert s["write_backs"] >= 6, s


def test_write_back_waits_for_readers_of_the_old_value():
    """A value made before an eager node splits the graph is written back into its input at once
    only when nothing reads the input later; here the old value is read after the split, so the
    copy runs in place at the end (as eagerly), and both results match eager."""
    def early(x, buf):  # nothing reads buf after the split: the first segment writes back
        new = buf + torch.sigmoid(x)
        q = torch.linalg.matrix_exp(new * 0.1)
        buf.copy_(new)
        return q * 2

    def late(x, buf):  # buf's old value is read after the split
        new = buf + torch.sigmoid(x)
        q = torch.linalg.matrix_exp(new * 0.1)
        r = buf * 2 + q.sum()
        buf.copy_(new)
        return r

    for fn, written_back in ((early, 1), (late, 0)):
        torch._dynamo.reset()
        torch_hal.dynamo.reset_stats()
        x, buf = torch.randn(3, 3), torch.randn(3, 3)
        hbuf = buf.to("hal")
        with torch.no_grad():
            got = torch.compile(fn, backend="hal")(x.to("hal"), hbuf)
            want = fn(x, buf)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(hbuf.cpu(), buf)
        assert torch_hal.dynamo.stats()["write_backs"] == written_back, fn.__name__


def test_sparse_tensors_under_compile_run_eagerly_and_match():
    """Dynamo does not trace sparse tensors: a function taking one runs eagerly, and one making one
    breaks the graph there; either way "hal" computes what eager computes and nothing fails."""
    indices, values = torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.tensor([1.0, 2.0, 3.0])
    sparse = torch.sparse_coo_tensor(indices, values, (2, 3)).coalesce()
    dense = torch.randn(2, 3)

    def takes(a, b):
        return torch.relu(a.to_dense() * 2 + b)

    def makes(b):
        return torch.sigmoid(b).to_sparse().to_dense() + 1

    def masks(b, m):
        return b.sparse_mask(m).to_dense() * 3

    for fn, args in ((takes, (sparse, dense)), (makes, (dense,)), (masks, (dense, sparse))):
        got = torch.compile(fn, backend="hal")(*[a.to("hal") for a in args])
        torch.testing.assert_close(got.cpu(), fn(*args), rtol=1e-6, atol=1e-6)
    assert torch_hal.dynamo.stats()["segments"] >= 1  # makes's sigmoid, before the break


def test_dynamo_has_a_device_interface_for_hal():
    from torch._dynamo.device_interface import get_interface_for_device, get_registered_device_interfaces

    iface = get_interface_for_device("hal")
    assert iface is get_interface_for_device(torch.device("hal", 0))
    assert "hal" in dict(get_registered_device_interfaces())
    assert iface.is_available() and iface.device_count() == torch.hal.device_count() >= 1
    assert iface.current_device() == torch.hal.current_device() == 0
    assert iface.exchange_device(0) == 0 and iface.maybe_exchange_device(0) == 0
    with iface.device(0):
        assert iface.current_device() == 0
    stream = iface.current_stream()
    assert stream.device == torch.device("hal", 0) and iface.get_raw_stream(0) == stream.stream_id
    start, end = iface.Event(enable_timing=True), iface.Event(enable_timing=True)
    start.record()
    torch.ones(64, device="hal").sum()
    end.record()
    iface.synchronize()
    assert start.elapsed_time(end) >= 0
    assert iface.get_device_properties().plugin == torch.hal.get_device_properties(0).plugin
    assert iface.Worker.get_device_properties(0).plugin == torch.hal.get_device_properties(0).plugin
    assert iface.is_bf16_supported() and not iface.is_triton_capable()
    assert iface.memory_allocated() == torch.hal.memory_allocated()


def test_compiled_forward_aliases_keep_autograd_saved_tensor_checks():
    """A compiled forward returns its aliases (a relu output saved for backward, a weight's transpose)
    as inductor does, not as autograd views, yet sharing their base's version counter: changing a
    saved weight in place between forward and backward is the error eager gives, an unsaved one is
    not, and gradients match CPU."""
    def f(x, w1, w2):
        return (torch.relu(x @ w1.t()) @ w2.t()).sum()

    compiled = torch.compile(f, backend="hal")
    results = {}
    for dev, fn in (("cpu", f), ("hal", compiled)):
        torch.manual_seed(0)
        x = torch.randn(4, 3).to(dev)
        w1 = torch.randn(5, 3).to(dev).requires_grad_()
        w2 = torch.randn(2, 5).to(dev).requires_grad_()
        fn(x, w1, w2).backward()
        results[dev] = (w1.grad.cpu().clone(), w2.grad.cpu().clone())
        loss = fn(x, w1, w2)
        with torch.no_grad():
            w2.add_(1)  # saved (its transpose feeds the relu output's gradient)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        loss = fn(x, w1, w2)
        with torch.no_grad():
            w1.mul_(2)  # not saved: the backward needs x and the relu output only
        loss.backward()
    for a, b in zip(results["cpu"], results["hal"]):
        torch.testing.assert_close(b, a)
    from torch_hal import _C
    base = torch.randn(3, 4, device="hal")
    alias = _C._alias(base)
    assert alias.data_ptr() == base.data_ptr() and not alias._is_view()
    base.add_(1)
    assert alias._version == base._version  # one counter
