"""Recurrent networks on "hal": nn.LSTM / GRU / RNN and the *Cell modules against PyTorch CPU.

On an accelerator PyTorch runs each LSTM/GRU time step as two gate projections and one fused
pointwise cell (aten::_thnn_fused_lstm_cell / _thnn_fused_gru_cell and their backwards), which
torch_hal runs as the catalog's rnn ops (lstm_cell, gru_cell, ...). Every test here runs with no
CPU fallback and no decomposition, and compares values and gradients with the same module on CPU
(PyTorch's CPU takes its own unfused path: an independent reference).
"""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_hal


# Decompositions (device ops) a test may use; no test here may use the CPU fallback.
ALLOWED_DECOMPOSITIONS = {"test_packed_sequences": {"aten::index_add.out"}}  # pad_packed_sequence's backward


@pytest.fixture(autouse=True)
def _no_fallback(request):
    torch_hal.reset_fallback_stats()
    yield
    stats = torch_hal.fallback_stats()
    allowed = ALLOWED_DECOMPOSITIONS.get(request.node.originalname, set())
    assert dict(stats) == {}, f"CPU fallbacks: {dict(stats)}"
    assert set(dict(stats.decompositions)) <= allowed, f"decompositions: {dict(stats.decompositions)}"


def _grads(m):
    return {n: p.grad for n, p in m.named_parameters()}


def _check_module(make, x, hx=None, rtol=1e-5, atol=1e-5):
    """Forward and backward of module MAKE() on CPU and on hal from the same weights."""
    torch.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu).to("hal")
    xc = x.clone().requires_grad_(True)
    xd = x.to("hal").requires_grad_(True)
    args_c = (xc,) if hx is None else (xc, hx)
    args_d = (xd,) if hx is None else (xd, tuple(h.to("hal") for h in hx) if isinstance(hx, tuple) else hx.to("hal"))
    oc, od = cpu(*args_c), dev(*args_d)
    flat_c = [t for t in torch.utils._pytree.tree_leaves(oc) if isinstance(t, torch.Tensor)]
    flat_d = [t for t in torch.utils._pytree.tree_leaves(od) if isinstance(t, torch.Tensor)]
    assert len(flat_c) == len(flat_d)
    for a, b in zip(flat_c, flat_d):
        assert b.device.type == "hal"
        torch.testing.assert_close(b.cpu(), a, rtol=rtol, atol=atol)
    torch.manual_seed(1)
    weights = [torch.randn_like(a) for a in flat_c]
    sum((a * w).sum() for a, w in zip(flat_c, weights)).backward()
    sum((b * w.to("hal")).sum() for b, w in zip(flat_d, weights)).backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=rtol, atol=atol)
    gc, gd = _grads(cpu), _grads(dev)
    for n in gc:
        torch.testing.assert_close(gd[n].cpu(), gc[n], rtol=rtol, atol=atol, msg=lambda m: f"grad of {n}: {m}")


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_layers_match_cpu(kind, bidirectional, batch_first):
    x = torch.randn(3, 5, 4) if batch_first else torch.randn(5, 3, 4)
    _check_module(lambda: getattr(nn, kind)(4, 6, num_layers=2, bidirectional=bidirectional,
                                            batch_first=batch_first), x)


def test_lstm_with_projection_initial_state_and_no_bias():
    h0 = torch.randn(2 * 2, 3, 5), torch.randn(2 * 2, 3, 7)
    _check_module(lambda: nn.LSTM(4, 7, num_layers=2, proj_size=5, bidirectional=True, bias=False),
                  torch.randn(6, 3, 4), h0)


def test_gru_with_initial_state_and_unbatched_input():
    _check_module(lambda: nn.GRU(4, 6, num_layers=2), torch.randn(5, 4), torch.randn(2, 6))
    _check_module(lambda: nn.LSTM(4, 6), torch.randn(5, 4))


def test_rnn_relu():
    _check_module(lambda: nn.RNN(4, 6, nonlinearity="relu", num_layers=2), torch.randn(5, 3, 4))


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_match_cpu(kind):
    _check_module(lambda: getattr(nn, kind)(4, 6), torch.randn(3, 4))
    hx = (torch.randn(3, 6), torch.randn(3, 6)) if kind == "LSTMCell" else torch.randn(3, 6)
    _check_module(lambda: getattr(nn, kind)(4, 6, bias=False), torch.randn(3, 4), hx)


def test_cells_in_lower_precision():
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float64: 1e-12}[dtype]
        _check_module(lambda: nn.LSTMCell(8, 16).to(dtype), torch.randn(4, 8, dtype=dtype), rtol=tol, atol=tol)
        _check_module(lambda: nn.GRUCell(8, 16).to(dtype), torch.randn(4, 8, dtype=dtype), rtol=tol, atol=tol)


def test_the_fused_cells_run_as_catalog_ops():
    """Checked through the dispatcher: torch_hal.explain() records the catalog op of each aten op."""
    lstm, gru = nn.LSTM(4, 6).to("hal"), nn.GRU(4, 6).to("hal")
    x = torch.randn(3, 2, 4, device="hal", requires_grad=True)
    entries = torch_hal.explain(lambda: (lstm(x)[0].sum() + gru(x)[0].sum()).backward(), print_result=False)
    ran = {e.op: e.ran for e in entries}
    for op, catalog in [("_thnn_fused_lstm_cell", "lstm_cell"), ("_thnn_fused_lstm_cell_backward_impl", "lstm_cell_backward"),
                        ("_thnn_fused_gru_cell", "gru_cell"), ("_thnn_fused_gru_cell_backward", "gru_cell_backward")]:
        assert ran[op].startswith(f"catalog op {catalog} on plugin cpu"), (op, ran.get(op))


def test_packed_sequences():
    lengths = torch.tensor([6, 4, 4, 1])
    x = torch.randn(4, 6, 5)

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(5, 3, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, (h, c) = self.lstm(packed)
            padded, out_lengths = pad_packed_sequence(out, batch_first=True)
            assert torch.equal(out_lengths, lengths)
            return padded, h, c

    _check_module(Packed, x)


class LstmLM(nn.Module):
    """Embedding -> 2-layer bidirectional LSTM -> tied-size output projection."""

    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * dim, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


class GruClassifier(nn.Module):
    def __init__(self, features=6, hidden=12, classes=3):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.gru(x)[1][-1])


def _train(model, batches, device, steps=10):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for x, y in batches[:steps]:
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.cpu() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("which", ["lstm_lm", "gru_classifier"])
def test_models_train_10_steps_like_cpu(which):
    torch.manual_seed(0)
    if which == "lstm_lm":
        model = LstmLM()
        tokens = [torch.randint(0, 50, (4, 12)) for _ in range(10)]
        batches = [(t, t.roll(1, 1)) for t in tokens]  # learnable: the previous token
    else:
        model = GruClassifier()
        batches = [(torch.randn(8, 10, 6), torch.randint(0, 3, (8,))) for _ in range(10)]
    initial = copy.deepcopy(model.state_dict())
    hal_losses, hal_state = _train(copy.deepcopy(model), batches, "hal")
    cpu_losses, cpu_state = _train(model, batches, "cpu")
    torch.testing.assert_close(hal_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for k in cpu_state:
        torch.testing.assert_close(hal_state[k], cpu_state[k], rtol=1e-4, atol=1e-5, msg=lambda m: f"{k}: {m}")
        assert not torch.equal(cpu_state[k], initial[k]), f"{k} did not train"
    assert cpu_losses[-1] < cpu_losses[0]


def test_dropout_between_layers_trains_and_eval_matches():
    torch.manual_seed(0)
    cpu = nn.LSTM(4, 6, num_layers=3, dropout=0.5)
    dev = copy.deepcopy(cpu).to("hal")
    x = torch.randn(5, 2, 4)
    out = dev(x.to("hal"))[0]  # train: the dropout masks are the device's own
    out.sum().backward()
    assert torch.isfinite(out.cpu()).all() and all(p.grad is not None for p in dev.parameters())
    cpu.eval(), dev.eval()
    torch.testing.assert_close(dev(x.to("hal"))[0].cpu(), cpu(x)[0], rtol=1e-5, atol=1e-5)


def test_mismatched_hidden_state_is_pytorchs_error():
    """nn.LSTM checks hidden shapes before any step; the same message as on CPU, nothing written."""
    for dev in ("cpu", "hal"):
        lstm = nn.LSTM(4, 6, num_layers=2).to(dev)
        before = {k: v.cpu() for k, v in lstm.state_dict().items()}
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 3, 6\), got \[2, 5, 6\]"):
            lstm(torch.randn(7, 3, 4, device=dev), (torch.zeros(2, 5, 6, device=dev), torch.zeros(2, 3, 6, device=dev)))
        for k, v in lstm.state_dict().items():
            assert torch.equal(v.cpu(), before[k])
    cell = nn.LSTMCell(4, 6).to("hal")
    with pytest.raises(RuntimeError, match="Input batch size 3 doesn't match hidden0 batch size 5"):
        cell(torch.randn(3, 4, device="hal"), (torch.zeros(5, 6, device="hal"), torch.zeros(5, 6, device="hal")))


def test_fused_cell_bad_input_names_the_argument():
    """The aten ops called directly: a wrong shape or a missing bias is a ValueError naming it, outputs untouched."""
    ig, hg = torch.randn(3, 24, device="hal"), torch.randn(3, 24, device="hal")
    with pytest.raises(ValueError, match="lstm_cell.*'cx' has shape \\[3, 5\\] but must be \\[3, 6\\]"):
        torch.ops.aten._thnn_fused_lstm_cell(ig, hg, torch.zeros(3, 5, device="hal"))
    with pytest.raises(ValueError, match="input_bias and hidden_bias must both be given"):
        torch.ops.aten._thnn_fused_lstm_cell(ig, hg, torch.zeros(3, 6, device="hal"), torch.zeros(24, device="hal"))
    with pytest.raises(ValueError, match="'hx' is on cpu but 'input_gates' is on hal:0"):
        torch.ops.aten._thnn_fused_gru_cell(torch.randn(3, 18, device="hal"), torch.randn(3, 18, device="hal"),
                                            torch.zeros(3, 6))


def test_lstm_projects_the_whole_sequence_at_once():
    """nn.LSTM on hal takes torch_hal's aten::lstm kernel (torch_hal/_rnn.py): one input-projection
    GEMM per layer and direction instead of one matmul per step, forward and backward."""
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::lstm.input", "AutogradPrivateUse1")
    T, layers = 9, 2
    lstm = nn.LSTM(4, 6, num_layers=layers).to("hal")
    x = torch.randn(T, 2, 4, device="hal", requires_grad=True)
    with torch.profiler.profile() as prof:
        lstm(x)[0].sum().backward()
    mm = sum(e.count for e in prof.key_averages() if e.key == "hal::mm")  # the catalog launches
    # forward: 1 projection + T hidden matmuls per layer; backward: T + 3 per layer.
    assert mm == layers * (2 * T + 4), mm


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_layers=3, bias=False), dict(num_layers=2, bidirectional=True, batch_first=True),
     dict(num_layers=1, proj_size=3)],  # projections: PyTorch's composite, unchanged
)
def test_lstm_layers_double_precision_exact(kwargs):
    torch.manual_seed(2)
    make = lambda: nn.LSTM(5, 7, **kwargs).double()  # noqa: E731
    dirs = 2 if kwargs.get("bidirectional") else 1
    h = 3 if "proj_size" in kwargs else 7
    hx = (torch.randn(kwargs["num_layers"] * dirs, 4, h, dtype=torch.float64),
          torch.randn(kwargs["num_layers"] * dirs, 4, 7, dtype=torch.float64))
    x = torch.randn(4, 1, 5, dtype=torch.float64) if kwargs.get("batch_first") else torch.randn(1, 4, 5, dtype=torch.float64)
    x = x.expand(4, 6, 5).clone() if kwargs.get("batch_first") else x.expand(6, 4, 5).clone()
    _check_module(make, x, hx, rtol=1e-12, atol=1e-12)


def test_lstm_higher_order_gradients_raise():
    lstm = nn.LSTM(3, 4).to("hal")
    x = torch.randn(5, 2, 3, device="hal", requires_grad=True)
    (g,) = torch.autograd.grad(lstm(x)[0].pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="twice|once_differentiable|double"):
        g.sum().backward()


def test_lstm_under_autocast_runs_in_bfloat16():
    """Under autocast the whole-sequence kernel casts its operands once to the autocast dtype (the
    matmuls and the fused cell are all on autocast's lower-precision list, so PyTorch's per-step
    composite computes in bfloat16 too): bfloat16 outputs, float32 gradients, within bfloat16's
    rounding of the float32 result."""
    torch.manual_seed(3)
    lstm = nn.LSTM(4, 6, num_layers=2).to("hal")
    x = torch.randn(5, 2, 4, device="hal")

    def run(autocast):
        m = copy.deepcopy(lstm)
        with torch.autocast("hal", dtype=torch.bfloat16, enabled=autocast):
            out, (h, c) = m(x)
        assert {out.dtype, h.dtype, c.dtype} == {torch.bfloat16 if autocast else torch.float32}
        out.float().sum().backward()
        return [out.float()] + [p.grad for p in m.parameters()]

    for got, want in zip(run(True), run(False)):
        assert got.dtype == want.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=3e-2, atol=5e-2)
