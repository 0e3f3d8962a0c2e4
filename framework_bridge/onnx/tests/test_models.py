"""Issue 13's acceptance: models exported from PyTorch run through hal.onnx give onnxruntime's outputs.

An MLP, a ResNet-18-shaped CNN, a transformer encoder and a GPT-style decoder (models.py), each exported
at opset 13 (TorchScript exporter) and at the newest opset the dynamo exporter writes, run on the CPU
plugin, on the OpenCL plugin (PoCL) and on both mixed (OpenCL declines conftest.MIXED_DISABLED, the
CPU plugin completes them), compared with onnxruntime's CPUExecutionProvider on the same file.
"""
import numpy as np
import pytest

import hal.onnx
import onnx_models as models
from onnx_testing import assert_close, ort_run

OPSETS = [13, models.NEWEST]
BACKENDS = ["cpu", "opencl", "mixed"]

# Known failures, declared with their reason (strict: a case that starts to
# pass fails the run until it is taken off this list). Issue 13 stays open on them.
KNOWN_FAILURES = {}  # (model name, opset) -> reason


def model_param(name, opset):
    reason = KNOWN_FAILURES.get((name, opset))
    marks = [pytest.mark.xfail(reason=reason, raises=hal.onnx.NotImplemented, strict=True)] if reason else []
    return pytest.param(name, opset, marks=marks, id=f"{name}-{'newest' if opset == models.NEWEST else opset}")


MODEL_PARAMS = [model_param(name, opset) for name in models.NAMES for opset in OPSETS]


def session(path, config, providers=None):
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(config)
    return hal.onnx.InferenceSession(str(path), opts, providers=providers)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,opset", MODEL_PARAMS)
def test_matches_onnxruntime(name, opset, backend, configs, exported, record_property):
    path = exported(name, opset)
    feed = models.inputs(name, batch=2, seq=8)
    sess = session(path, configs[backend])
    got = sess.run(None, feed)
    assert_close(got, ort_run(path, feed), what=f"{name} opset {opset} on {backend}")
    assert np.isfinite(got[0]).all()
    record_property("explain", sess.explain())
    if not models.static_shape(name, opset):  # a second batch size through the same session
        feed = models.inputs(name, batch=3, seq=5, seed=1)
        assert_close(sess.run(["out"], feed), ort_run(path, feed), what=f"{name} opset {opset} batch 3")


@pytest.mark.parametrize("name,opset", MODEL_PARAMS)
def test_op_by_op_with_layouts_matches_onnxruntime(name, opset, configs, exported):
    """ORT_DISABLE_ALL on the CPU plugin: every node op by op, the values between launches laid out as the
    plugin prefers (channels-last around the ResNet's convolutions, relu/add following them), planned
    again for a second batch size; onnxruntime's outputs each time."""
    path = exported(name, opset)
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(configs["cpu"])
    opts.graph_optimization_level = hal.onnx.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = hal.onnx.InferenceSession(str(path), opts)
    assert sess.compile_stats()["groups"] == 0
    for batch, seq, seed in ((2, 8, 0), (3, 5, 1)):
        if batch == 3 and models.static_shape(name, opset):
            break
        feed = models.inputs(name, batch=batch, seq=seq, seed=seed)
        assert_close(sess.run(None, feed), ort_run(path, feed), what=f"{name} opset {opset} op by op, batch {batch}")


@pytest.mark.parametrize("opset", OPSETS)
def test_decoder_sequence_lengths(opset, configs, exported):
    """The decoder at 5 sequence lengths: onnxruntime's outputs each time, compiled once (one shape family:
    the graph is compiled with symbolic batch and sequence dims). On OpenCL, whose graph compiler claims the
    fused groups: the session compiled executables, and the runs compile nothing more in the process."""
    path = exported("decoder", opset)
    sess = session(path, configs["opencl"])
    assert sess.compile_stats()["groups"] >= 1
    before = hal.onnx.compile_counters()["graph_compiles"]
    for seq in (3, 8, 17, 31, 64):
        feed = models.inputs("decoder", batch=2, seq=seq, seed=seq)
        got = sess.run(None, feed)
        assert got[0].shape == (2, seq, 96)
        assert_close(got, ort_run(path, feed), what=f"decoder seq {seq}")
    assert hal.onnx.compile_counters()["graph_compiles"] == before


@pytest.mark.parametrize("name,opset", MODEL_PARAMS)
def test_models_describe_like_onnxruntime(name, opset, exported, configs):
    """get_inputs()/get_outputs(): the names, shapes (dim names for dynamic dims) and types onnxruntime gives."""
    import onnxruntime

    path = exported(name, opset)
    ours = session(path, configs["cpu"], providers=["CPUExecutionProvider"])
    theirs = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for a, b in [(ours.get_inputs(), theirs.get_inputs()), (ours.get_outputs(), theirs.get_outputs())]:
        assert [(x.name, x.shape, x.type) for x in a] == [(x.name, x.shape, x.type) for x in b]
    # hal::onnx::Model::producer() is the producer's name and version ("pytorch 2.15.0").
    assert ours.get_modelmeta().producer_name.split(" ")[0] == theirs.get_modelmeta().producer_name
    assert ours.get_providers() == ["CPUExecutionProvider"]
