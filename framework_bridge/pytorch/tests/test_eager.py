"""The "hal" device in eager mode, against the same code on CPU."""
import sys

import pytest
import torch

import torch_hal


def test_device_module():
    assert torch.hal.is_available()
    assert torch.hal.device_count() >= 1
    props = torch.hal.get_device_properties(0)
    assert props.plugin == "cpu" and props.total_memory > 0 and props.name
    assert torch.hal.current_device() == 0
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.hal.get_device_properties(torch.hal.device_count())


def test_init_after_first_use_raises():
    torch.empty(1, device="hal")
    with pytest.raises(RuntimeError, match="already started"):
        torch_hal.init(plugins=[])


def test_randn_plus_one_matches_cpu():
    x = torch.randn(3, device="hal")
    assert x.device == torch.device("hal:0") and x.is_hal
    y = x + 1
    assert y.device.type == "hal"
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)


def test_print_and_round_trip():
    c = torch.tensor([1.5, -2.0, 3.25])
    h = c.to("hal")
    assert "device='hal:0'" in repr(h)
    assert "-2.0000" in str(h)
    torch.testing.assert_close(h.cpu(), c)
    torch.testing.assert_close(c.hal().cpu(), c)
    assert h.to(torch.float64).cpu().dtype == torch.float64
    assert h.sum().item() == pytest.approx(2.75)


def test_transposed_view_added():
    a, b = torch.randn(4, 3), torch.randn(3, 4)
    ha, hb = a.to("hal"), b.to("hal")
    r = ha.t() + hb
    torch.testing.assert_close(r.cpu(), a.t() + b)
    torch.testing.assert_close(ha.t().contiguous().cpu(), a.t().contiguous())
    torch.testing.assert_close(ha.t().cpu(), a.t())


def test_in_place_add_on_view():
    base = torch.arange(12.0).reshape(3, 4)
    hbase = base.to("hal")
    view, hview = base[:, 1::2], hbase[:, 1::2]
    hview.add_(torch.ones(3, 2, device="hal"), alpha=2)
    view.add_(torch.ones(3, 2), alpha=2)
    torch.testing.assert_close(hbase.cpu(), base)
    hcol = hbase[:, 0]
    hcol.mul_(10)
    base[:, 0].mul_(10)
    torch.testing.assert_close(hbase.cpu(), base)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a - b,
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: torch.add(a, b, alpha=0.5),
        lambda a, b: -a,
        lambda a, b: torch.relu(a),
        lambda a, b: torch.exp(a),
        lambda a, b: torch.tanh(a),
        lambda a, b: torch.sigmoid(a),
        lambda a, b: a @ b.t(),
        lambda a, b: a.sum(dim=1),
        lambda a, b: a.sum(dim=0, keepdim=True),
        lambda a, b: a + 2.5,
    ],
)
def test_mapped_ops_match_cpu(fn):
    a, b = torch.randn(3, 4), torch.randn(3, 4) + 3
    torch_hal.reset_fallback_stats()
    got = fn(a.to("hal"), b.to("hal"))
    assert got.device.type == "hal"
    assert torch_hal.fallback_stats() == {}
    torch.testing.assert_close(got.cpu(), fn(a, b))


def test_out_argument_resized():
    a = torch.randn(2, 3).to("hal")
    out = torch.empty(0, device="hal")
    torch.add(a, a, out=out)
    assert out.shape == (2, 3)
    torch.testing.assert_close(out.cpu(), a.cpu() * 2)


def test_fallback_is_counted_and_correct():
    x = torch.randn(5)
    torch_hal.reset_fallback_stats()
    got = torch.mode(x.to("hal"))  # no catalog op, no decomposition
    assert got.values.device.type == "hal"
    torch.testing.assert_close(got.values.cpu(), torch.mode(x).values)
    assert torch_hal.fallback_stats() == {"aten::mode": 1}


def test_fallback_preserves_out_and_in_place():
    x = torch.randn(6)
    h = x.to("hal")
    h.clamp_(min=0)
    torch.testing.assert_close(h.cpu(), x.clamp(min=0))
    values = torch.zeros(6, device="hal")
    torch.special.airy_ai(h[:2], out=values[:2])  # CPU fallback with out= into a view
    torch.testing.assert_close(values.cpu(), torch.cat([torch.special.airy_ai(x.clamp(min=0)[:2]), torch.zeros(4)]))


def test_mixing_devices_raises():
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(2, 2, device="hal") @ torch.ones(2, 2)


def test_mlp_forward_backward_sgd_matches_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    dev.load_state_dict(ref.state_dict())
    dev.hal()
    x, target = torch.randn(5, 8), torch.randn(5, 4)
    for model, data, y in ((ref, x, target), (dev, x.to("hal"), target.to("hal"))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = ((model(data) - y) ** 2).mean()
            loss.backward()
            opt.step()
        model.final_loss = loss.item()
    assert dev.final_loss == pytest.approx(ref.final_loss, rel=1e-4, abs=1e-5)
    for p_ref, p_dev in zip(ref.parameters(), dev.parameters()):
        assert p_dev.device.type == "hal"
        torch.testing.assert_close(p_dev.cpu(), p_ref, rtol=1e-4, atol=1e-5)


def test_copy_the_device_declines_goes_through_the_host_with_strides():
    # The CPU plugin's copy has no complex dtypes: transposed views still copy
    # (through the host, counted), in both directions, without recursing.
    a = torch.randn(2, 3)
    h = a.to("hal")
    torch_hal.reset_fallback_stats()
    torch.testing.assert_close(h.to(torch.complex64).t().cpu(), a.to(torch.complex64).t())
    out = torch.zeros(3, 2, dtype=torch.complex64, device="hal")
    out.t().copy_(h.to(torch.complex64))
    torch.testing.assert_close(out.cpu().t(), a.to(torch.complex64))
    assert torch_hal.fallback_stats().get("aten::copy_", 0) >= 1
    # A dtype HAL lacks entirely (ComplexHalf) also round-trips.
    assert torch.equal(h.chalf().cpu().to(torch.complex64), a.chalf().to(torch.complex64))


def test_lazy_conj_and_neg_bits_copy_exactly():
    # fft results and x.conj() carry PyTorch's lazy conj/neg bits; copies in and
    # out of the device apply them (used to recurse forever through clone).
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    c = torch.complex(a, b)
    h = c.to("hal")
    assert torch.equal(torch.complex(a.to("hal"), b.to("hal")).cpu(), c)
    torch.testing.assert_close(torch.fft.ifft(a.to("hal")).cpu(), torch.fft.ifft(a))
    assert torch.equal(h.conj().cpu(), c.conj())
    assert torch.equal(h.conj().imag.cpu(), c.conj().imag)  # a neg bit on a real view
    d = torch.empty_like(h)
    d.copy_(h.conj())
    assert torch.equal(d.cpu(), c.conj())
    e = torch.zeros_like(h)
    e.conj().copy_(c)  # writing through a conjugate view
    assert torch.equal(e.cpu(), c.conj())


def test_views_with_backend_kernels_stay_views():
    x = torch.arange(10.0)
    h = x.to("hal")
    u = h.unfold(0, 3, 2)
    assert u._base is h and torch.equal(u.cpu(), x.unfold(0, 3, 2))
    c = torch.complex(x, -x).to("hal")
    r = torch.view_as_real(c)
    assert r._base is c and torch.equal(r.cpu(), torch.view_as_real(torch.complex(x, -x)))
    assert torch.view_as_complex(r)._base is c


def test_copy_between_overlapping_views_of_one_storage():
    # nn.functional.pad(mode="circular") copies between partly overlapping views.
    y = torch.arange(18.0).reshape(3, 6)
    h = y.to("hal")
    h[:, 0:2].copy_(h[:, 1:3])
    y[:, 0:2].copy_(y[:, 1:3].clone())
    assert torch.equal(h.cpu(), y)
    x = torch.arange(10.0)
    hx = x.to("hal")
    hx[2:8].copy_(hx[0:6])
    x[2:8] = x[0:6].clone()
    assert torch.equal(hx.cpu(), x)
    p = torch.randn(1, 2, 5)
    torch.testing.assert_close(torch.nn.functional.pad(p.to("hal"), (2, 2), mode="circular").cpu(),
                               torch.nn.functional.pad(p, (2, 2), mode="circular"))


def test_scalar_operands_reused_across_calls_keep_their_values_and_dtypes():
    # Scalar operands' device copies are kept per (device, stream, dtype,
    # value) and dropped when full or by empty_cache: a reused copy must
    # never stand for another value, dtype or stream.
    x = torch.arange(4, dtype=torch.float32)
    h = x.to("hal")
    hd = x.double().to("hal")
    step = torch.tensor(3.0)  # a 0-dim CPU tensor operand, as AdamW's step
    for _ in range(2):
        torch.testing.assert_close((h * 0.5).cpu(), x * 0.5)
        torch.testing.assert_close((hd * 0.5).cpu(), x.double() * 0.5)
        torch.testing.assert_close((h * 1).cpu(), x * 1)
        torch.testing.assert_close((h / step).cpu(), x / step)
        torch.testing.assert_close((hd / step).cpu(), x.double() / step)
    s = torch.hal.Stream()
    with torch.hal.stream(s):
        y = h * 0.5
    torch.hal.current_stream().wait_stream(s)
    torch.testing.assert_close(y.cpu(), x * 0.5)
    # More distinct values than the cache holds: each stays right.
    for i in range(1500):
        v = 1.0 + i / 1024
        assert (h + v)[1].item() == pytest.approx(1.0 + v)
    base = torch.hal.memory_allocated()
    torch.hal.synchronize()
    torch.hal.empty_cache()
    assert torch.hal.memory_allocated() < base  # the kept copies were freed
    torch.testing.assert_close((h * 0.5).cpu(), x * 0.5)


def test_elementwise_entries_borrow_their_operands_without_changing_their_counts(monkeypatch):
    # Elementwise overloads take their tensors by borrow (no reference-count change, so no GIL
    # round trip per operand): after calls through the kernel, in place and not, the forced CPU
    # fallback and an out-of-place alias, each operand is referenced exactly as before, an
    # in-place op returns its self, and the values are right.
    x, y = torch.randn(5, device="hal"), torch.randn(5, device="hal")
    cx, cy = x.cpu(), y.cpu()
    counts = (sys.getrefcount(x), sys.getrefcount(y), x._use_count(), y._use_count())
    for _ in range(50):
        z = x + y * 2
        assert x.add_(y, alpha=0.5) is x
        assert x.mul_(0.5) is x
        z = torch.relu(x) - y
    for _ in range(50):
        cz = cx + cy * 2
        cx.add_(cy, alpha=0.5).mul_(0.5)
        cz = torch.relu(cx) - cy
    torch.testing.assert_close(x.cpu(), cx)
    torch.testing.assert_close(z.cpu(), cz)
    monkeypatch.setenv("HAL_FORCE_FALLBACK_OPS", "add.*,add_.*")
    monkeypatch.setenv("HAL_FALLBACK_WARN", "0")
    assert x.add_(y) is x
    z = x + y
    monkeypatch.delenv("HAL_FORCE_FALLBACK_OPS")
    cx.add_(cy)
    torch.testing.assert_close(x.cpu(), cx)
    torch.testing.assert_close(z.cpu(), cx + cy)
    assert x.add_(x) is x  # the output is the input: the exact alias add allows
    torch.testing.assert_close(x.cpu(), cx * 2)
    assert (sys.getrefcount(x), sys.getrefcount(y), x._use_count(), y._use_count()) == counts


def test_storage_clone_finds_its_allocation_among_freed_ones():
    # Storage.clone copies by address (the allocator's copy_data looks the addresses up in
    # the live-allocation registry): after most neighbours were freed, and the registry
    # compacted, it still finds the right bytes.
    keep = [torch.full((100,), float(i), device="hal") for i in range(300)]
    del keep[::2]
    del keep[::3]
    for t in (keep[0], keep[17], keep[-1]):
        s = t.untyped_storage().clone()
        assert s.device == t.device
        assert torch.equal(torch.empty(0, device="hal").set_(s).cpu(), t.cpu())
