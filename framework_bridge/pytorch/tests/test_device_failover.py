"""Device loss under PyTorch (issue 34): the faults layer loses the OpenCL plugin's device at a chosen
launch. Eager code on the lost device raises an error naming it and the hal.toml failover device to move
to, while the other devices keep working; a torch.compile(backend="hal") segment whose partition used the
lost device (the home device working) is compiled again on the devices left and gives the same answer.

Each scenario runs in a fresh process (layers are chosen when the runtime starts)."""
import pathlib

from subprocess_util import build_dir, run_python


def _plugin(name):
    return build_dir() / "lib" / "hal" / "plugins" / f"libhal_plugin_{name}.so"


def _twin():
    path = build_dir() / "test_fixtures" / "libhal_plugin_fixture_cpu_twin.so"
    assert path.exists(), f"{path}: the CPU plugin under another name (a test fixture) was not built"
    return path


def _config(tmp_path, text):
    path = pathlib.Path(tmp_path) / "hal.toml"
    path.write_text("discover = false\n" + text)
    return path


def test_eager_raises_naming_the_lost_device_and_the_failover_device(tmp_path):
    config = _config(tmp_path, f"""failover = "cpu"
layers = ["faults"]
[layer_options.faults]
spec = "device_lost:nth=3;plugin=opencl"
[[plugin]]
path = "{_plugin('opencl')}"
[[plugin]]
path = "{_plugin('cpu')}"
""")
    out = run_python(f"""
        import torch, torch_hal
        torch_hal.init(config={str(config)!r})
        try:
            x = torch.arange(8, dtype=torch.float32, device="hal:0")   # opencl:0; launch 1
            for _ in range(5):
                x = x * 3                                              # the third launch loses opencl:0
            raise SystemExit("no error from the lost device")
        except RuntimeError as e:
            first = str(e)
        try:
            torch.ones(4, device="hal:0")                          # refused by the core: no plugin call
            raise SystemExit("new work on the lost device was accepted")
        except RuntimeError as e:
            refused = str(e)
        z = (torch.arange(8, dtype=torch.float32, device="hal:1") * 2 + 1).cpu()   # cpu:0 still works
        assert torch.equal(z, torch.arange(8, dtype=torch.float32) * 2 + 1), z
        print("FIRST", first)
        print("REFUSED", refused)
    """, HAL_LAYERS="")
    first = out.split("FIRST ", 1)[1].split("\nREFUSED ", 1)[0]
    refused = out.split("REFUSED ", 1)[1]
    for msg in (first, refused):
        assert "DEVICE_LOST" in msg or "was lost" in msg, msg
        assert "hal:0 (opencl:0) is lost" in msg, msg
        assert 'move the model and its tensors to hal:1 (cpu:0, the hal.toml failover device), e.g. model.to("hal:1")' \
            in msg, msg
    assert "device opencl:0 was lost (" in refused, refused


def test_compiled_segment_repartitions_when_a_device_it_uses_is_lost(tmp_path):
    # hal:0 is the CPU plugin with relu disabled, so each compiled segment runs relu on the next device,
    # opencl:0; losing it at its third launch leaves the twin (the CPU kernels under another name).
    config = _config(tmp_path, f"""layers = ["faults"]
[layer_options.faults]
spec = "device_lost:nth=3;plugin=opencl"
[[plugin]]
path = "{_plugin('cpu')}"
disabled_ops = ["relu"]
[[plugin]]
path = "{_plugin('opencl')}"
[[plugin]]
path = "{_twin()}"
""")
    out = run_python(f"""
        import torch, torch_hal
        torch_hal.init(config={str(config)!r})
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        compiled = torch.compile(model.to("hal:0"), backend="hal")
        reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        reference.load_state_dict({{k: v.cpu() for k, v in model.state_dict().items()}})
        from torch_hal.dynamo import backend
        with torch.no_grad():
            for step in range(6):
                x = torch.randn(5, 16)
                torch.testing.assert_close(compiled(x.to("hal:0")).cpu(), reference(x), rtol=1e-4, atol=1e-5)
        text = "\\n".join(r.explain() for r in backend.runners())
        print("EXPLAIN", text)
    """, HAL_LAYERS="")
    assert "failover: device opencl:0 lost: re-partitioned onto cpu:0, fixture_cpu_twin:0" in out, out
