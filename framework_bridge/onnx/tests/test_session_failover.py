"""Device loss under an ONNX session (issue 34): with hal.toml `failover = "cpu"`, a session whose
device is lost mid-session (the faults layer loses the OpenCL plugin's device at a chosen launch)
re-partitions onto the CPU plugin and returns onnxruntime's answers, reporting the failover; without
a failover device the run raises an error naming the lost device."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hal
import hal.onnx
from onnx_testing import _plugin, assert_close, ort_run


def mlp_model():
    """x[n,16] -> MatMul -> Add -> Relu -> MatMul -> Softmax: initializers feed the products directly,
    so compiling folds nothing and every launch is a run's."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [w1, b1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("failover") / "mlp.onnx"
    onnx.save(mlp_model(), path)
    return path


def write_config(directory, faults, failover=True):
    """OpenCL (home) and CPU plugins with the faults layer's SPEC; failover to the CPU plugin."""
    log = directory / "faults.jsonl"
    text = ('discover = false\ndefault_device = "opencl:0"\nfallback_device = "cpu:0"\n'
            + ('failover = "cpu"\n' if failover else "")
            + f'layers = ["faults"]\n\n[layer_options.faults]\nspec = "{faults}"\nlog = "{log}"\n\n'
            f'[[plugin]]\nname = "opencl"\npath = "{_plugin("opencl")}"\n\n'
            f'[[plugin]]\nname = "cpu"\npath = "{_plugin("cpu")}"\n')
    path = directory / "hal.toml"
    path.write_text(text)
    return path, log


def session(config, model_path):
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(config)
    return hal.onnx.InferenceSession(str(model_path), opts, providers=["HALExecutionProvider"])


def launches_per_run(tmp_path, model_path):
    """Device calls one run makes on OpenCL: its compiled groups plus its op-by-op nodes."""
    config, _ = write_config(tmp_path, "launch:nth=999999999;plugin=opencl")
    s = session(config, model_path)
    s.run(None, {"x": np.ones((2, 16), np.float32)})
    st = s.compile_stats()
    (ocl,) = [d for d in st["devices"] if d["device"] == "opencl:0"]
    assert st["devices"][0]["device"] == "opencl:0" and ocl["groups"] + ocl["op_nodes"] > 0, st
    return sum(d["groups"] + d["op_nodes"] for d in st["devices"] if d["device"] == "opencl:0")


def test_device_lost_mid_session_fails_over_to_cpu(tmp_path, model_path):
    probe = tmp_path / "probe"
    probe.mkdir()
    per_run = launches_per_run(probe, model_path)
    # Lost at the first launch of the third run.
    config, log = write_config(tmp_path, f"device_lost:nth={2 * per_run + 1};plugin=opencl")
    s = session(config, model_path)
    rng = np.random.default_rng(1)
    devices = []
    for step in range(6):
        x = rng.standard_normal((3 + step, 16)).astype(np.float32)
        out = s.run(None, {"x": x})
        assert_close(out, ort_run(model_path, {"x": x}), what=f"run {step}")
        devices.append(s.device())
    assert devices == ["opencl:0", "opencl:0"] + ["cpu:0"] * 4
    (failover,) = s.failovers()
    assert "opencl:0 lost" in failover and "failover device cpu:0" in failover, failover
    assert "failover: device opencl:0 lost" in s.explain()
    assert [d["device"] for d in s.compile_stats()["devices"]] == ["cpu:0"]
    injected = [json.loads(line) for line in log.read_text().splitlines()]
    assert [i["kind"] for i in injected] == ["device_lost"]


def test_device_lost_without_failover_raises_naming_the_device(tmp_path, model_path):
    config, _ = write_config(tmp_path, "device_lost:nth=1;plugin=opencl", failover=False)
    s = session(config, model_path)
    x = np.ones((2, 16), np.float32)
    with pytest.raises(hal.onnx.RuntimeException, match="DEVICE_LOST") as info:
        s.run(None, {"x": x})
    with pytest.raises(hal.onnx.RuntimeException) as again:
        s.run(None, {"x": x})
    assert "device opencl:0 was lost" in str(again.value), again.value
    assert "no failover device is configured" in str(again.value), again.value
    assert s.failovers() == [] and s.device() == "opencl:0"
    assert "opencl" in str(info.value)


def test_session_on_a_lost_device_starts_on_the_failover_device(tmp_path, model_path):
    config, _ = write_config(tmp_path, "device_lost:nth=1;plugin=opencl")
    first = session(config, model_path)
    x = np.ones((2, 16), np.float32)
    assert_close(first.run(None, {"x": x}), ort_run(model_path, {"x": x}))  # loses opencl, fails over
    second = session(config, model_path)  # the same runtime: opencl:0 is lost already
    assert second.device() == "cpu:0"
    assert "lost before the session started" in second.failovers()[0]
    assert_close(second.run(None, {"x": x}), ort_run(model_path, {"x": x}))
