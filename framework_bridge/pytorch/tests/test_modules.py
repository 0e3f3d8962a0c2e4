"""Modules moved to "hal" behave as on CUDA: Module.to keeps every Parameter object (tied
weights stay tied, optimizers made before the move keep working), `p.data = hal_tensor` works, and
lazy modules materialise on the device. PyTorch decides this with _has_compatible_shallow_copy_type,
which torch_hal answers for hal tensors (csrc/kernels.cc); CPU-only code keeps PyTorch's answer.
"""
import copy

import pytest
import torch
from torch import nn

import torch_hal  # noqa: F401  (the "hal" device)


class TiedLM(nn.Module):
    """A language model whose output projection shares the embedding's weight."""

    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.hidden(self.embed(tokens))))


def test_tied_weights_stay_tied_and_train_as_on_cpu():
    torch.manual_seed(0)
    ref = TiedLM()
    dev = copy.deepcopy(ref)
    params_before = list(dev.parameters())
    dev.to("hal")
    assert len(list(dev.parameters())) == len(params_before) == 3
    assert all(a is b for a, b in zip(dev.parameters(), params_before)), "Module.to keeps the Parameter objects"
    assert dev.head.weight is dev.embed.weight and dev.embed.weight.device.type == "hal"
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.5)
    for step in range(10):
        tokens = torch.randint(0, 50, (4, 7))
        target = torch.randint(0, 50, (4, 7))
        losses = []
        for model, opt, device in ((ref, opt_ref, "cpu"), (dev, opt_dev, "hal")):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(tokens.to(device)).flatten(0, 1), target.to(device).flatten())
            loss.backward()
            opt.step()
            losses.append(loss.detach().cpu())
        torch.testing.assert_close(losses[1], losses[0], msg=f"step {step}")
    for (name, a), b in zip(ref.named_parameters(), dev.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), msg=name)
    assert dev.head.weight is dev.embed.weight
    # And back: the same objects again, on the CPU.
    dev.cpu()
    assert all(a is b for a, b in zip(dev.parameters(), params_before))
    assert dev.embed.weight.device.type == "cpu" and dev.head.weight is dev.embed.weight


def test_an_optimizer_made_before_the_move_updates_the_moved_parameters():
    torch.manual_seed(1)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("hal")
    before = model.weight.detach().cpu().clone()
    model(torch.randn(5, 3, device="hal")).sum().backward()
    opt.step()
    assert model.weight.device.type == "hal"
    assert not torch.equal(model.weight.detach().cpu(), before), "the optimizer holds the moved parameter"


def test_parameter_data_assignment_works_and_buffers_move_as_on_cuda():
    bn = nn.BatchNorm1d(4)
    mean = bn.running_mean
    p = nn.Parameter(torch.randn(3))
    p.data = torch.ones(3, device="hal")  # was "incompatible tensor type"
    assert p.device.type == "hal" and isinstance(p, nn.Parameter)
    torch.testing.assert_close(p.detach().cpu(), torch.ones(3))
    p.data = torch.zeros(2)  # and back to a CPU tensor
    assert p.device.type == "cpu" and p.shape == (2,)
    bn.to("hal")  # buffers are replaced, as on CUDA (Module._apply assigns fn(buf))
    assert bn.running_mean.device.type == "hal" and mean.device.type == "cpu"


def test_gradients_move_with_their_parameters():
    model = nn.Linear(2, 2)
    model(torch.randn(3, 2)).sum().backward()
    grad = model.weight.grad.clone()
    model.to("hal")
    assert model.weight.grad.device.type == "hal"
    torch.testing.assert_close(model.weight.grad.cpu(), grad)


@pytest.mark.parametrize("make, shape", [(lambda: nn.LazyLinear(5), (4, 3)),
                                         (lambda: nn.LazyConv2d(4, 3), (2, 3, 8, 8))])
def test_lazy_modules_materialise_on_the_device(make, shape):
    torch.manual_seed(2)
    ref = make()
    dev = copy.deepcopy(ref).to("hal")
    x = torch.randn(*shape)
    torch.manual_seed(3)
    want = ref(x)
    torch.manual_seed(3)
    got = dev(x.to("hal"))
    assert dev.weight.device.type == "hal" and dev.weight.shape == ref.weight.shape
    assert got.shape == want.shape


def test_cpu_only_code_keeps_pytorchs_answer():
    cpu, other = torch.randn(2), torch.randn(3)
    assert torch._has_compatible_shallow_copy_type(cpu, other)
    assert not torch._has_compatible_shallow_copy_type(cpu, torch.randn(2).to_sparse())
    hal = torch.randn(2, device="hal")
    assert torch._has_compatible_shallow_copy_type(cpu, hal) and torch._has_compatible_shallow_copy_type(hal, cpu)
    assert not torch._has_compatible_shallow_copy_type(hal, torch.randn(2).to_sparse())
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        nn.Parameter(torch.randn(2)).data = torch.randn(2).to_sparse()


def test_accelerator_device_capability_lists_the_devices_dtypes():
    cap = torch.accelerator.get_device_capability("hal")
    dtypes = cap["supported_dtypes"]
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
               torch.int32, torch.int64, torch.bool):
        assert dt in dtypes, dt
    # Only dtypes with a HAL dtype (hal/types.h): no quantized or float8 types.
    assert torch.qint8 not in dtypes and torch.float8_e4m3fn not in dtypes and torch.float8_e5m2 not in dtypes
    assert torch.accelerator.get_device_capability(torch.device("hal", 0)) == cap
    with pytest.raises(RuntimeError, match="invalid device index 7"):
        torch.accelerator.get_device_capability("hal:7")


def test_profiler_device_times_are_true_elapsed_times():
    import time

    x = torch.randn(128, 128, device="hal")
    x @ x  # warm up
    start = time.perf_counter()
    with torch.autograd.profiler.profile(use_device="hal") as prof:
        for _ in range(3):
            x @ x
        torch.hal.synchronize()
    wall_us = (time.perf_counter() - start) * 1e6
    events = [e for e in prof.function_events if e.name == "aten::mm"]
    assert len(events) == 3
    for e in events:
        assert 0 <= e.cpu_time_total <= wall_us and 0 < e.device_time_total <= wall_us, (e.cpu_time_total,
                                                                                           e.device_time_total)
