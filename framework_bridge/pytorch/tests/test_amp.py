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
