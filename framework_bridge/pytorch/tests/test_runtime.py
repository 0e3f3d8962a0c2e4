"""Runtime integration of the "hal" device: streams, events, torch.accelerator,
memory statistics, pinned host memory, torch.save/torch.load, bad input."""
import copy
import gc
import io

import pytest
import torch

import torch_hal

from subprocess_util import build_dir, run_python


def _settle():
    gc.collect()  # tensors held by reference cycles (e.g. earlier tests' tracebacks)
    torch.hal.synchronize()
    torch.hal.empty_cache()


# ---- streams and events ----


def test_default_and_new_streams():
    default = torch.hal.current_stream()
    assert isinstance(default, torch.Stream) and default.stream_id == 0
    assert default == torch.hal.default_stream() and default.device == torch.device("hal:0")
    s = torch.hal.Stream()
    assert isinstance(s, torch.Stream) and s.device.type == "hal" and s.stream_id != 0
    with torch.hal.stream(s):
        assert torch.hal.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.hal.current_stream() == default
    with s:  # torch.Stream's own context manager goes through the guard
        assert torch.hal.current_stream() == s
    assert torch.hal.current_stream() == default


def test_work_on_a_side_stream_is_ordered_by_events():
    a = torch.ones(512, 512, device="hal")
    s = torch.hal.Stream()
    s.wait_stream(torch.hal.current_stream())
    with torch.hal.stream(s):
        b = a
        for _ in range(30):
            b = b + a  # queued on s
        done = torch.hal.Event()
        done.record(s)
    torch.hal.current_stream().wait_event(done)  # the default stream waits (on the host)
    assert done.query() and s.query()
    torch.testing.assert_close(b.cpu(), torch.full((512, 512), 31.0))
    b.record_stream(s)


def test_host_copies_on_a_side_stream():
    s = torch.hal.Stream()
    a = torch.ones(512, 512, device="hal")
    x = torch.arange(100000.0)
    with torch.hal.stream(s):
        b = a
        for _ in range(16):
            b = b @ a / 512  # keeps s busy (the scalar operand's upload does not wait for s) ...
        h = x.to("hal")  # ... so this copy is queued behind it
        x.fill_(-1.0)  # and the caller may change its tensor at once
        for _ in range(10):
            h = h * 2
        back = h.cpu()  # waits for s
    torch.testing.assert_close(back, torch.arange(100000.0) * 1024)
    torch.hal.current_stream().wait_stream(s)
    torch.testing.assert_close(b.cpu(), torch.ones(512, 512))


def test_training_on_a_side_stream_matches_the_default_stream():
    # Forward, dropout, backward (the autograd engine's stream handling) and
    # SGD all queued on a side stream give the default stream's bits.
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(64, 8))
    x, y = torch.randn(16, 32), torch.randn(16, 8)

    def train(stream):
        model = copy.deepcopy(ref).to("hal")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(1)
        losses = []
        with torch.hal.stream(stream):
            xs, ys = x.to("hal"), y.to("hal")
            for _ in range(4):
                opt.zero_grad()
                loss = ((model(xs) - ys) ** 2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        torch.hal.synchronize()
        return losses, [p.detach().cpu() for p in model.parameters()]

    (l0, p0), (l1, p1) = train(None), train(torch.hal.Stream())
    assert l0 == l1 and l0[-1] < l0[0]
    assert all(torch.equal(a, b) for a, b in zip(p0, p1))


def test_event_timing_and_synchronize():
    start, end = torch.hal.Event(enable_timing=True), torch.hal.Event(enable_timing=True)
    x = torch.randn(256, 256, device="hal")
    s = torch.hal.Stream()
    with torch.hal.stream(s):
        start.record()
        for _ in range(5):
            x = x @ x.t() / 256
        end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0
    # Events on the default stream too (its work has completed when recorded).
    e1, e2 = torch.Event(device="hal", enable_timing=True), torch.Event(device="hal", enable_timing=True)
    e1.record()
    torch.randn(64, device="hal").sum().item()
    e2.record()
    e2.synchronize()
    assert e1.elapsed_time(e2) >= 0
    assert isinstance(e1, torch.hal.Event) and not isinstance(torch.Event(device="cpu"), torch.hal.Event)
    with pytest.raises(ValueError, match="recorded"):
        torch.hal.Event(enable_timing=True).elapsed_time(torch.hal.Event(enable_timing=True))


def test_record_stream_keeps_memory_from_reuse_while_the_stream_runs():
    _settle()
    base = torch.hal.memory_allocated()
    a = torch.ones(512, 512, device="hal")
    s = torch.hal.Stream()
    # More work on s each round until s is still running when the freed
    # block's size is asked for again (the point of the check).
    for rounds in (4, 16, 64, 256):
        x = torch.ones(1 << 18, device="hal")
        s.wait_stream(torch.hal.current_stream())
        with torch.hal.stream(s):
            b = a
            for _ in range(rounds):
                b = b @ a / 512
            y = x * 2  # x is used on s
        x.record_stream(s)
        del x
        allocs = torch.hal.memory_stats()["num_device_alloc"]
        z = torch.empty(1 << 18, device="hal")  # x's size, on the default stream
        still_running = not s.query()
        new_blocks = torch.hal.memory_stats()["num_device_alloc"] - allocs
        torch.hal.current_stream().wait_stream(s)
        torch.testing.assert_close(y.cpu(), torch.full((1 << 18,), 2.0))
        del b, y, z
        if still_running:
            break
        # This round's blocks of x's size (x's, z's) must not be in the cache
        # for the next round's z: it could take them legitimately.
        _settle()
    assert still_running, "the stream never outlasted the allocation"
    assert new_blocks == 1, rounds  # x's block was not handed out while s could still read it
    del a
    _settle()
    assert torch.hal.memory_allocated() == base


def test_exception_with_queued_work_neither_hangs_nor_leaks():
    _settle()
    base = torch.hal.memory_allocated()
    s = torch.hal.Stream()
    with pytest.raises(ValueError):
        with torch.hal.stream(s):
            t = torch.randn(1 << 16, device="hal")
            for _ in range(50):
                t = t * 1.0001
            raise ValueError("user code failed with work queued")
    assert torch.hal.current_stream().stream_id == 0  # the context restored the stream
    del t
    _settle()
    assert torch.hal.memory_allocated() == base
    assert s.query()


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("hal")
    assert torch.accelerator.device_count() == torch.hal.device_count()
    torch.accelerator.set_device_index(0)
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(0):
        assert torch.hal.current_device() == 0
    s = torch.Stream(device="hal")
    torch.accelerator.set_stream(s)
    assert torch.accelerator.current_stream() == s
    torch.accelerator.set_stream(torch.hal.default_stream())
    torch.accelerator.synchronize()
    x = torch.empty(1000, device="hal")
    assert torch.accelerator.memory_allocated() >= 4000
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == torch.hal.memory_allocated()
    del x


# ---- memory statistics ----


def test_memory_statistics():
    _settle()
    base = torch.hal.memory_allocated()
    torch.hal.reset_peak_memory_stats()
    assert torch.hal.max_memory_allocated() == base
    x = torch.empty(1 << 20, device="hal")  # 4 MiB
    assert torch.hal.memory_allocated() - base >= 4 << 20
    assert torch.hal.memory_reserved() >= torch.hal.memory_allocated()
    stats = torch.hal.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.hal.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.hal.memory_reserved()
    assert stats["allocation.all.current"] >= 1 and stats["num_device_alloc"] >= 1
    peak = torch.hal.max_memory_allocated()
    del x
    assert torch.hal.memory_allocated() == base
    assert torch.hal.max_memory_allocated() == peak >= base + (4 << 20)
    assert torch.hal.memory_reserved() >= 4 << 20  # cached, not returned yet
    torch.hal.reset_peak_memory_stats()
    assert torch.hal.max_memory_allocated() == base
    cached = torch.hal.memory_reserved()
    torch.hal.empty_cache()
    assert torch.hal.memory_reserved() <= cached - (4 << 20)  # x's cached block went back to the plugin
    free, total = torch.hal.mem_get_info()
    assert 0 < free <= total


# ---- pinned host memory ----


def test_pinned_host_memory():
    p = torch.empty(16, pin_memory=True)
    assert p.is_pinned() and p.device.type == "cpu"
    assert not torch.empty(16).is_pinned()
    c = torch.arange(6.0)
    pc = c.pin_memory()
    assert pc.is_pinned() and not c.is_pinned()
    assert pc[2:].is_pinned()  # a view into the pinned block
    h = pc.to("hal", non_blocking=True)
    torch.testing.assert_close(h.cpu(), c)


# ---- torch.save / torch.load ----


def test_save_and_load():
    c = torch.randn(4, 5)
    h = c.to("hal")
    buf = io.BytesIO()
    torch.save({"t": h, "view": h[1:, ::2], "cpu": c}, buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["t"].device.type == "cpu"
    torch.testing.assert_close(on_cpu["t"], c)
    torch.testing.assert_close(on_cpu["view"], c[1:, ::2])
    buf.seek(0)
    back = torch.load(buf)
    assert back["t"].device == torch.device("hal:0") and back["cpu"].device.type == "cpu"
    torch.testing.assert_close(back["view"].cpu(), c[1:, ::2])
    back["view"].add_(1)  # still a view of back["t"]'s storage
    torch.testing.assert_close(back["t"].cpu()[1:, ::2], c[1:, ::2] + 1)
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(3, 2).state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location="hal")
    assert all(v.device.type == "hal" for v in sd.values())


# ---- bad input ----


def test_missing_device_index_names_the_count():
    n = torch.hal.device_count()
    with pytest.raises(RuntimeError, match=rf"hal:{n} does not exist; there (is 1 device|are {n} devices)"):
        torch.empty(2, device=f"hal:{n}")
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.hal.set_device(n + 5)


def test_mixing_hal_and_cpu_tensors():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device="hal") + torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3) * torch.ones(3, device="hal")




def test_no_loadable_plugin_fails_at_first_use_naming_each(tmp_path):
    config = tmp_path / "hal.toml"
    config.write_text(
        'search_paths = []\ndiscover = false\n\n[[plugin]]\npath = "missing/libhal_plugin_gone.so"\n\n'
        '[[plugin]]\nname = "nowhere"\n'
    )
    out = run_python(
        """
        import torch, torch_hal  # importing does not start the runtime
        torch.manual_seed(1)  # nor does seeding (kept for the start)
        assert not torch_hal.is_initialized()
        assert torch.hal.device_count() == 0 and not torch.hal.is_available()
        try:
            torch.ones(1, device="hal")
        except RuntimeError as e:
            print(e)
        else:
            raise SystemExit("no error")
        """,
        HAL_CONFIG=str(config),
    )
    assert "no HAL device is available" in out
    assert "libhal_plugin_gone.so" in out and "nowhere" in out


def test_out_of_memory_names_sizes_and_recovers():
    acme = build_dir() / "test_fixtures" / "libhal_plugin_acme.so"
    out = run_python(
        f"""
        import torch, torch_hal
        torch_hal.init(plugins=[{str(acme)!r}])
        big = 600 << 20
        a = torch.empty(big, dtype=torch.uint8, device="hal")
        try:
            torch.empty(big, dtype=torch.uint8, device="hal")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        else:
            raise SystemExit("no OOM")
        used = torch.hal.memory_allocated()
        del a
        b = torch.empty(big, dtype=torch.uint8, device="hal")  # fits again once a is freed
        print("after:", torch.hal.memory_allocated() == used, torch.hal.memory_stats()["num_ooms"])
        """
    )
    assert f"tried to allocate {600 << 20} bytes" in out and "bytes free" in out
    assert "after: True 1" in out


def test_two_devices(tmp_path):
    config = tmp_path / "hal.toml"
    plugin = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so"
    config.write_text(f'discover = false\n\n[[plugin]]\npath = "{plugin}"\noptions = {{ device_count = 2 }}\n')
    out = run_python(
        """
        import threading, torch, torch_hal
        assert torch.hal.device_count() == 2 and torch.accelerator.device_count() == 2
        try:
            torch.empty(1, device="hal:7")
        except RuntimeError as e:
            assert "hal:7 does not exist; there are 2 devices" in str(e), e
        # Streams: per device and per thread.
        s0, s1 = torch.hal.Stream(0), torch.hal.Stream(1)
        assert s1.device == torch.device("hal:1")
        with torch.hal.stream(s1):
            assert torch.hal.current_device() == 1 and torch.hal.current_stream(1) == s1
            assert torch.hal.current_stream(0).stream_id == 0
            seen = []
            t = threading.Thread(target=lambda: seen.append(torch.hal.current_stream(1).stream_id))
            t.start(); t.join()
            assert seen == [0], seen  # another thread has its own current stream
            y = torch.ones(1000, device="hal:1") * 3
        assert torch.hal.current_device() == 0
        torch.hal.synchronize(1)
        assert y.device == torch.device("hal:1") and y.sum().item() == 3000
        # Memory statistics per device.
        before0 = torch.hal.memory_allocated(0)
        z = torch.empty(1 << 20, device="hal:1")
        assert torch.hal.memory_allocated(0) == before0 and torch.hal.memory_allocated(1) >= 4 << 20
        # Generators per device: seeded together, drawn apart.
        torch.manual_seed(3)
        a0, a1 = torch.rand(5, device="hal:0"), torch.rand(5, device="hal:1")
        assert torch.equal(a0.cpu(), a1.cpu())  # same seed, same offset
        torch.rand(5, device="hal:0")
        offset = lambda i: int.from_bytes(bytes(torch.hal.get_rng_state(i)[8:].tolist()), "little")
        assert (offset(0), offset(1)) == (4, 2)  # 5 words = 2 Philox blocks per call
        torch.testing.assert_close(y.to("hal:0").cpu(), torch.full((1000,), 3.0))  # across devices
        print("ok")
        """,
        HAL_CONFIG=str(config),
    )
    assert out.strip() == "ok"


def test_streams_events_pinned_and_save_on_the_opencl_plugin():
    plugin = build_dir() / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so"
    if not plugin.exists():
        pytest.skip("the OpenCL plugin was not built")
    out = run_python(
        f"""
        import io, torch, torch_hal
        torch_hal.init(plugins=[{str(plugin)!r}])
        assert torch.hal.get_device_properties(0).plugin == "opencl"
        a = torch.ones(256, 256, device="hal")
        s = torch.hal.Stream()
        s.wait_stream(torch.hal.current_stream())
        start, end = torch.hal.Event(enable_timing=True), torch.hal.Event(enable_timing=True)
        with torch.hal.stream(s):
            start.record()
            b = a
            for _ in range(30):
                b = b + a
            end.record()
            on_host = b.cpu()  # waits for s
        torch.hal.current_stream().wait_event(end)
        assert on_host.eq(31).all() and b.sum().item() == 31 * 256 * 256
        assert start.elapsed_time(end) >= 0
        b.record_stream(s)
        del b
        pinned = torch.arange(5.0).pin_memory()
        assert pinned.is_pinned() and torch.equal(pinned.to("hal").cpu(), torch.arange(5.0))
        buf = io.BytesIO()
        torch.save(a[::2], buf)
        buf.seek(0)
        loaded = torch.load(buf)
        assert loaded.device.type == "hal" and loaded.shape == (128, 256) and loaded.cpu().eq(1).all()
        del a, loaded
        torch.hal.synchronize()
        torch.hal.empty_cache()
        assert torch.hal.memory_allocated() == 0 == torch.hal.memory_reserved()
        assert torch_hal.fallback_stats() == {{}}, torch_hal.fallback_stats()
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_checkpoints_keep_the_device_index_and_map_location_moves_them(tmp_path):
    # Two devices of the CPU plugin; a checkpoint saved on hal:1 loads on hal:1, map_location moves
    # it, and one from a device this machine lacks gets PyTorch's error until map_location fixes it.
    config = tmp_path / "hal.toml"
    config.write_text(f'discover = false\n[[plugin]]\npath = "{build_dir() / "lib/hal/plugins/libhal_plugin_cpu.so"}"\n'
                      'options = { device_count = 2 }\n')
    out = run_python(
        """
        import io, torch, torch_hal
        m = torch.nn.Linear(2, 2).to("hal:1")
        buf = io.BytesIO()
        torch.save(m.state_dict(), buf)
        raw = buf.getvalue()
        print("same:", torch.load(io.BytesIO(raw))["weight"].device)
        print("cpu:", torch.load(io.BytesIO(raw), map_location="cpu")["weight"].device)
        print("moved:", torch.load(io.BytesIO(raw), map_location={"hal:1": "hal:0"})["weight"].device)
        sd = torch.load(io.BytesIO(raw))
        assert torch.equal(sd["weight"].cpu(), m.weight.detach().cpu())
        missing = raw.replace(b"hal:1", b"hal:3")  # as saved on a machine with four devices
        try:
            torch.load(io.BytesIO(missing))
        except RuntimeError as e:
            print("error:", e)
        print("fixed:", torch.load(io.BytesIO(missing), map_location="hal:0")["weight"].device)
        """,
        HAL_CONFIG=str(config),
    )
    assert "same: hal:1" in out and "cpu: cpu" in out and "moved: hal:0" in out, out
    assert ("error: Attempting to deserialize object on HAL device 3 but torch.hal.device_count() is 2. Please use "
            "torch.load with map_location to map your storages to an existing device.") in out, out
    assert "fixed: hal:0" in out, out
