"""torch.autocast("hal") and torch.amp.GradScaler("hal"), checked against what torch.autocast documents
for CUDA (its op lists: matmuls in the autocast dtype, softmax/losses/reductions in float32, the
"promote" ops to the widest input type) and against the same training under CPU autocast."""
import copy

import pytest
import torch
from torch import nn

import torch_hal  # noqa: F401


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_casts_as_the_cuda_op_lists_say(dtype):
    a, b = torch.randn(4, 8, device="hal"), torch.randn(8, 3, device="hal")
    with torch.autocast("hal", dtype=dtype):
        assert torch.is_autocast_enabled("hal") and torch.get_autocast_dtype("hal") == dtype
        mm = a @ b
        assert mm.dtype == dtype  # lower_precision_fp: mm, linear, conv, bmm, addmm ...
        assert nn.functional.linear(a, b.t()).dtype == dtype
        assert torch.softmax(mm, -1).dtype == torch.float32  # fp32: softmax, log_softmax, norms, losses
        assert nn.functional.mse_loss(mm, torch.zeros_like(mm)).dtype == torch.float32
        assert torch.cat([mm, a[:, :3]]).dtype == torch.float32  # promote: the widest input type
        assert (mm + 1).dtype == dtype  # not listed: runs in its inputs' dtype
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            nn.functional.binary_cross_entropy(torch.rand(3, device="hal"), torch.rand(3, device="hal"))
    assert not torch.is_autocast_enabled("hal")
    assert (a @ b).dtype == torch.float32
    torch.testing.assert_close(mm.float(), (a @ b), atol=0.05, rtol=0.05)


def test_autocast_with_an_unsupported_dtype_warns_and_disables_as_pytorch_does():
    assert torch.hal.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    with pytest.warns(UserWarning, match="hal Autocast only supports dtypes of torch.float16, torch.bfloat16"):
        with torch.autocast("hal", dtype=torch.int32):
            assert not torch.is_autocast_enabled("hal")


class TinyTransformer(nn.Module):
    def __init__(self, vocab=40, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_transformer_trains_under_autocast_with_grad_scaler_as_on_cpu(dtype):
    torch.manual_seed(0)
    ref = TinyTransformer()
    dev = copy.deepcopy(ref).to("hal")
    runs = {}
    for name, model, device in (("cpu", ref, "cpu"), ("hal", dev, "hal")):
        torch.manual_seed(1)
        opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        scaler = torch.amp.GradScaler(device)
        losses = []
        tokens = torch.randint(0, 40, (4, 12))
        target = (tokens + 1) % 40  # learnable: the next token id
        for _ in range(20):
            opt.zero_grad()
            with torch.autocast(device, dtype=dtype):
                logits = model(tokens.to(device))
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), target.to(device).flatten())
            assert loss.dtype == torch.float32 and logits.dtype == dtype
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        runs[name] = (torch.tensor(losses), scaler.get_scale())
    # CPU autocast has its own op lists; both compute in DTYPE: agreement within its precision.
    torch.testing.assert_close(runs["hal"][0], runs["cpu"][0], atol=0.05, rtol=0.02)
    assert runs["hal"][0][-1] < runs["hal"][0][0], "it trains"
    assert runs["hal"][1] == runs["cpu"][1], "no step was skipped on one side only"
    for (name, a), b in zip(ref.named_parameters(), dev.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), atol=0.02, rtol=0.05,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_grad_scaler_skips_a_step_with_an_inf_gradient_and_backs_off():
    lin = nn.Linear(3, 1).to("hal")
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("hal", init_scale=1024.0)
    before = lin.weight.detach().cpu().clone()
    with torch.autocast("hal", dtype=torch.float16):
        loss = lin(torch.tensor([[1e30, 0.0, 0.0]], device="hal")).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(lin.weight.detach().cpu(), before), "a step with inf gradients is skipped"
    assert scaler.get_scale() == 512.0


def test_grad_scaler_ops_run_on_the_device_as_on_cpu():
    """_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_: same results as PyTorch's CPU
    kernels, for finite grads, an inf, a NaN, growth after growth_interval clean steps, and a growth
    that would overflow; no CPU fallback."""
    torch_hal.reset_fallback_stats()
    cases = [[torch.randn(5, 3), torch.randn(7)], [torch.randn(4), torch.tensor([1.0, float("inf")])],
             [torch.tensor([float("nan"), 2.0]), torch.randn(3, 3)], [torch.empty(0), torch.randn(2)]]
    for grads in cases:
        results = {}
        for device in ("cpu", "hal"):
            g = [t.clone().to(device) for t in grads]
            found = torch.zeros(1, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(g, found, torch.full((1,), 0.25, device=device))
            results[device] = ([t.cpu() for t in g], found.cpu())
        for a, b in zip(results["hal"][0], results["cpu"][0]):
            torch.testing.assert_close(a, b, equal_nan=True)
        assert torch.equal(results["hal"][1], results["cpu"][1])
    for scale0, tracker0, found0, interval in [(1024.0, 0, 0.0, 3), (1024.0, 2, 0.0, 3), (1024.0, 2, 1.0, 3),
                                               (3e38, 0, 0.0, 1), (8.0, 5, 0.0, 2000)]:
        results = {}
        for device in ("cpu", "hal"):
            scale = torch.full((1,), scale0, device=device)
            tracker = torch.full((1,), tracker0, dtype=torch.int32, device=device)
            torch._amp_update_scale_(scale, tracker, torch.full((1,), found0, device=device), 2.0, 0.5, interval)
            results[device] = (scale.cpu(), tracker.cpu())
        assert torch.equal(results["hal"][0], results["cpu"][0]), (scale0, tracker0, found0, results)
        assert torch.equal(results["hal"][1], results["cpu"][1]), (scale0, tracker0, found0, results)
    assert dict(torch_hal.fallback_stats()) == {}
    with pytest.raises(RuntimeError, match="growth_tracker must be a Int tensor"):
        torch._amp_update_scale_(torch.ones(1, device="hal"), torch.zeros(1, device="hal"),
                                 torch.zeros(1, device="hal"), 2.0, 0.5, 10)


def test_torch_hal_amp_is_torch_cuda_amps_interface():
    assert torch.get_autocast_dtype("hal") == torch.float16  # the default, as CUDA's
    with torch.hal.amp.autocast():
        assert torch.is_autocast_enabled("hal") and torch.get_autocast_dtype("hal") == torch.float16
        assert (torch.ones(2, 2, device="hal") @ torch.ones(2, 2, device="hal")).dtype == torch.float16
    with torch.hal.amp.autocast(dtype=torch.bfloat16):
        assert torch.get_autocast_dtype("hal") == torch.bfloat16
    assert not torch.is_autocast_enabled("hal")
    scaler = torch.hal.amp.GradScaler(init_scale=8.0)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "hal" and scaler.get_scale() == 8.0
    assert torch.hal.amp.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]


def test_autocast_inside_torch_compile_gives_eagers_dtypes_and_values():
    torch.manual_seed(4)
    lin = nn.Linear(8, 4).to("hal")

    def f(x):
        with torch.autocast("hal", dtype=torch.bfloat16):
            y = lin(x)
            return y, torch.softmax(y, -1)

    x = torch.randn(3, 8, device="hal")
    want_y, want_s = f(x)
    got_y, got_s = torch.compile(f, backend="hal")(x)
    assert (got_y.dtype, got_s.dtype) == (want_y.dtype, want_s.dtype) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(got_y, want_y)
    torch.testing.assert_close(got_s, want_s, atol=1e-2, rtol=1e-2)


def test_autocast_training_step_under_torch_compile_lowers_the_backward_casts():
    """AOTAutograd's backward graph casts with _to_copy(..., device=hal:0): lowered like the forward's
    (before: its Meta run made a hal tensor from meta data and the casts ran eagerly)."""
    import torch_hal.dynamo as hal_dynamo

    torch.manual_seed(5)
    lin = nn.Linear(8, 4).to("hal")
    x = torch.randn(2, 8, device="hal")

    def loss(x):
        with torch.autocast("hal", dtype=torch.bfloat16):
            return lin(x).float().square().sum()

    loss(x).backward()
    want = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    torch._dynamo.reset()
    hal_dynamo.reset_stats()
    torch.compile(loss, backend="hal")(x).backward()
    stats = hal_dynamo.stats()
    assert all("meta tensor" not in reason for reason in stats["eager_reasons"]), stats["eager_reasons"]
    for got, w in zip((p.grad for p in lin.parameters()), want):
        torch.testing.assert_close(got, w, atol=2e-2, rtol=2e-2)
