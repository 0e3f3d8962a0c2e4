"""The hal generator (Philox seed + offset) and the random ops on the catalog's Philox ops."""
import json
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_hal

RANDOM_ATEN_OPS = ("uniform_", "normal_", "bernoulli", "native_dropout")


def _philox_block(seed, counter):
    """Philox4x32-10 of counter (lo32, hi32, 0, 0) under key (lo32, hi32) of seed:
    sdk/catalog/ops/random.toml's stream, written again here independently."""
    m = 0xFFFFFFFF
    c = [counter & m, (counter >> 32) & m, 0, 0]
    k0, k1 = seed & m, (seed >> 32) & m
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & m, p1 & m, ((p0 >> 32) ^ c[3] ^ k1) & m, p0 & m]
        k0, k1 = (k0 + 0x9E3779B9) & m, (k1 + 0xBB67AE85) & m
    return c


def _uniform_f32(seed, offset, n):
    words = [w for b in range((n + 3) // 4) for w in _philox_block(seed, offset + b)]
    return torch.tensor([(w >> 8) * 2.0**-24 for w in words[:n]], dtype=torch.float32)


def _no_random_fallback():
    stats = torch_hal.fallback_stats()
    return not any(name in op for op in stats for name in RANDOM_ATEN_OPS)


def test_rand_is_the_catalog_philox_stream_and_advances_the_offset():
    torch.hal.manual_seed(1234)
    torch_hal.reset_fallback_stats()
    first = torch.rand(10, device="hal")
    second = torch.rand(3, device="hal")
    assert _no_random_fallback()
    torch.testing.assert_close(first.cpu(), _uniform_f32(1234, 0, 10), rtol=0, atol=0)
    # 10 words used 3 blocks: the next call starts at block 3.
    torch.testing.assert_close(second.cpu(), _uniform_f32(1234, 3, 3), rtol=0, atol=0)
    state = torch.hal.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 1234
    assert int.from_bytes(bytes(state[8:].tolist()), "little") == 4


def test_manual_seed_state_and_generators():
    torch.manual_seed(7)  # reaches torch.hal.manual_seed_all
    assert torch.hal.initial_seed() == 7
    a = torch.randn(50, device="hal")
    torch.manual_seed(7)
    torch.testing.assert_close(torch.randn(50, device="hal").cpu(), a.cpu(), rtol=0, atol=0)

    state = torch.hal.get_rng_state()
    b = torch.rand(4, 5, device="hal")
    torch.hal.set_rng_state(state)
    torch.testing.assert_close(torch.rand(4, 5, device="hal").cpu(), b.cpu(), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.hal.set_rng_state(torch.zeros(3, dtype=torch.uint8))

    g = torch.Generator(device="hal")
    assert g.device.type == "hal"
    g.manual_seed(99)
    x = torch.rand(8, device="hal", generator=g)
    g.manual_seed(99)
    torch.testing.assert_close(torch.rand(8, device="hal", generator=g).cpu(), x.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(x.cpu(), _uniform_f32(99, 0, 8), rtol=0, atol=0)

    with torch.random.fork_rng(device_type="hal"):
        torch.rand(3, device="hal")
    after_fork = torch.hal.get_rng_state()
    torch.rand(3, device="hal")
    assert not torch.equal(after_fork, torch.hal.get_rng_state())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_distributions(dtype):
    torch.hal.manual_seed(3)
    torch_hal.reset_fallback_stats()
    u = torch.empty(20000, device="hal", dtype=dtype).uniform_(-2, 3).cpu().double()
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    z = torch.empty(20000, device="hal", dtype=dtype).normal_(1.5, 2.0).cpu().double()
    assert abs(z.mean() - 1.5) < 0.06 and abs(z.std() - 2.0) < 0.06
    t = torch.empty(100, 60, device="hal", dtype=dtype).t()  # strided output
    t.normal_()
    assert torch.isfinite(t.cpu()).all() and t.cpu().std() > 0.5
    assert _no_random_fallback()
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device="hal", dtype=dtype).normal_(0, -1)
    with pytest.raises(RuntimeError, match="from=3 > to=1"):
        torch.empty(3, device="hal", dtype=dtype).uniform_(3, 1)


def test_bernoulli():
    torch.hal.manual_seed(5)
    torch_hal.reset_fallback_stats()
    b = torch.empty(20000, device="hal").bernoulli_(0.3).cpu()
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean().item() - 0.3) < 0.02
    probs = torch.tensor([0.0, 1.0, 0.0, 1.0], device="hal")
    torch.testing.assert_close(torch.bernoulli(probs).cpu(), probs.cpu())
    row = torch.zeros(3, 4, device="hal").bernoulli_(probs)  # p broadcast over rows
    torch.testing.assert_close(row.cpu(), probs.cpu().expand(3, 4))
    flags = torch.empty(1000, device="hal", dtype=torch.bool).bernoulli_(0.5).cpu()
    assert flags.dtype == torch.bool and 350 < flags.sum().item() < 650
    assert _no_random_fallback()
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.empty(3, device="hal").bernoulli_(1.5)


def test_dropout_forward_backward_on_device():
    torch.hal.manual_seed(11)
    torch_hal.reset_fallback_stats()
    x = torch.randn(64, 32).to("hal").requires_grad_()
    y = torch.nn.functional.dropout(x, p=0.25, training=True)
    y.sum().backward()
    assert _no_random_fallback()
    xc, yc, gc = x.detach().cpu(), y.detach().cpu(), x.grad.cpu()
    kept = yc != 0
    assert 0.65 < kept.float().mean().item() < 0.85
    torch.testing.assert_close(yc[kept], xc[kept] / 0.75)
    torch.testing.assert_close(gc, kept.float() / 0.75)
    same = torch.nn.functional.dropout(x, p=0.25, training=False)
    torch.testing.assert_close(same.detach().cpu(), xc)
    torch.hal.manual_seed(11)
    x2 = torch.randn(64, 32).to("hal")  # consumes nothing on hal: CPU randn
    torch.testing.assert_close(torch.nn.functional.dropout(x2, 0.25).cpu() != 0, kept)


def _randint_reference(seed, offset, low, high, n):
    """random_.from's mapping (csrc/random.cc) over the catalog's float64 uniform."""
    words = [w for b in range((2 * n + 3) // 4) for w in _philox_block(seed, offset + b)]
    scale = math.nextafter(float(high - low), 0.0)
    return [low + math.floor(scale * ((((words[2 * i] << 32) | words[2 * i + 1]) >> 11) * 2.0**-53)) for i in range(n)]


def test_randint_and_random_on_device():
    torch.hal.manual_seed(21)
    torch_hal.reset_fallback_stats()
    r = torch.randint(-3, 9, (500,), device="hal")
    assert r.dtype == torch.int64 and _no_random_fallback()
    values = r.cpu()
    assert values.tolist() == _randint_reference(21, 0, -3, 9, 500)
    assert values.min() == -3 and values.max() == 8 and len(values.unique()) == 12
    small = torch.empty(300, dtype=torch.uint8, device="hal").random_().cpu()
    assert small.max() > 200 and len(small.unique()) > 100
    flags = torch.empty(300, dtype=torch.bool, device="hal").random_().cpu()
    assert 100 < flags.sum().item() < 200
    halves = torch.empty(300, dtype=torch.float16, device="hal").random_(5).cpu()
    assert set(halves.unique().tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    assert _no_random_fallback()
    with pytest.raises(RuntimeError, match="from=4 >= to=4"):
        torch.empty(3, dtype=torch.int32, device="hal").random_(4, 4)
    # Wider than 2^32 values: the CPU generator, through the counted fallback.
    wide = torch.empty(100, dtype=torch.int64, device="hal").random_()
    assert wide.cpu().min() >= 0 and torch_hal.fallback_stats().get("aten::random_") == 1


_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch, torch_hal
    torch_hal.init(plugins=[sys.argv[1]])
    torch.manual_seed(2024)  # before the runtime starts: applied when it does
    assert not torch_hal.is_initialized()
    x = torch.linspace(-1, 1, 999).reshape(27, 37).to("hal")
    out, mask = torch.native_dropout(x, 0.4, True)
    u = torch.rand(101, device="hal")
    z = torch.randn(101, device="hal", dtype=torch.float64)
    print(json.dumps({"plugin": torch.hal.get_device_properties(0).plugin, "mask": mask.cpu().flatten().tolist(),
                      "out": out.cpu().flatten().tolist(), "u": u.cpu().tolist(), "z": z.cpu().tolist(),
                      "fallbacks": torch_hal.fallback_stats()}))
    """
)


def _plugin(name):
    return pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / f"libhal_plugin_{name}.so"


def _run(plugin):
    env = dict(os.environ, HAL_FALLBACK_WARN="0")
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(plugin)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_same_seed_same_numbers_on_cpu_and_opencl_plugins():
    if not _plugin("opencl").exists():
        pytest.skip("the OpenCL plugin was not built")
    cpu, cl = _run(_plugin("cpu")), _run(_plugin("opencl"))
    assert (cpu["plugin"], cl["plugin"]) == ("cpu", "opencl")
    assert cpu["mask"] == cl["mask"] and 0.5 < sum(cpu["mask"]) / len(cpu["mask"]) < 0.7
    assert cpu["u"] == cl["u"]  # bit for bit (exact in float32)
    # The dropout of 999 elements used 250 blocks before rand started.
    assert cpu["u"] == _uniform_f32(2024, 250, 101).tolist()
    torch.testing.assert_close(torch.tensor(cl["out"]), torch.tensor(cpu["out"]))
    torch.testing.assert_close(torch.tensor(cl["z"]), torch.tensor(cpu["z"]), rtol=1e-6, atol=1e-6)
    for stats in (cpu["fallbacks"], cl["fallbacks"]):
        assert not any(name in op for op in stats for name in RANDOM_ATEN_OPS), stats
