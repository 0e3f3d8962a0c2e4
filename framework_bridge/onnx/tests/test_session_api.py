"""hal.onnx.InferenceSession's onnxruntime-shaped surface on small hand-built models: dtypes, providers,
options, path vs bytes, and every bad input refused with an exception that names what is wrong."""
import os

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hal
import hal.onnx
from onnx_testing import write_config

OPSET = 17


def add_model(elem_type=TensorProto.FLOAT, shape=("n", 4), op="Add", opset=OPSET):
    """y = x op b, x with a symbolic first dim, b an initializer-free second input."""
    x = helper.make_tensor_value_info("x", elem_type, list(shape))
    b = helper.make_tensor_value_info("b", elem_type, [shape[-1]])
    y = helper.make_tensor_value_info("y", elem_type, list(shape))
    graph = helper.make_graph([helper.make_node(op, ["x", "b"], ["y"], name="the_add")], "g", [x, b], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="hal-test")


@pytest.fixture(scope="module")
def add_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "add.onnx"
    onnx.save(add_model(), path)
    return path


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, hal.Error)  # every hal.onnx error is a hal.Error too
    return str(info.value)


# numpy dtype -> ONNX elem type: the catalog's dtypes that ONNX's Add takes.
DTYPES = {
    np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, ml_dtypes.bfloat16: TensorProto.BFLOAT16,
    np.float64: TensorProto.DOUBLE, np.int8: TensorProto.INT8, np.int16: TensorProto.INT16,
    np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8,
}


@pytest.mark.parametrize("dtype", list(DTYPES), ids=lambda d: np.dtype(d).name)
def test_dtypes_round_trip(dtype, cpu_options):
    sess = hal.onnx.InferenceSession(add_model(DTYPES[dtype]).SerializeToString(), cpu_options)
    x = (np.arange(12).reshape(3, 4) % 7).astype(dtype)
    b = np.array([1, 2, 3, 4]).astype(dtype)
    (y,) = sess.run(None, {"x": x, "b": b})
    assert y.dtype == np.dtype(dtype) and y.shape == (3, 4)
    np.testing.assert_array_equal(y.astype(np.float64), (x.astype(np.float64) + b.astype(np.float64)))
    assert y.flags.writeable and y.flags.c_contiguous


def test_bool(cpu_options):
    sess = hal.onnx.InferenceSession(add_model(TensorProto.BOOL, op="And").SerializeToString(), cpu_options)
    x = np.array([[True, False, True, False]] * 2)
    b = np.array([True, True, False, False])
    (y,) = sess.run(["y"], {"x": x, "b": b})
    np.testing.assert_array_equal(y, x & b)


def test_path_and_bytes_agree(add_path, cpu_options):
    x = np.random.default_rng(0).standard_normal((5, 4), dtype=np.float32)
    b = np.ones(4, np.float32)
    by_path = hal.onnx.InferenceSession(add_path, cpu_options).run(None, {"x": x, "b": b})
    by_bytes = hal.onnx.InferenceSession(add_path.read_bytes(), cpu_options).run(None, {"x": x, "b": b})
    np.testing.assert_array_equal(by_path[0], x + b)
    np.testing.assert_array_equal(by_bytes[0], x + b)


def test_non_contiguous_and_list_feeds(add_path, cpu_options):
    sess = hal.onnx.InferenceSession(str(add_path), cpu_options)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)[:, ::2]  # strided view
    (y,) = sess.run(None, {"x": x, "b": [1.0, 2.0, 3.0, 4.0]})  # a list takes the input's dtype (as in ORT)
    np.testing.assert_array_equal(y, x + np.array([1, 2, 3, 4], np.float32))
    b = np.array([1, 2, 3, 4], ">f4")  # big-endian: converted, not read as little-endian bytes
    (y,) = sess.run(None, {"x": np.ascontiguousarray(x), "b": b})
    np.testing.assert_array_equal(y, x + np.array([1, 2, 3, 4], np.float32))
    (y,) = sess.run(None, {"x": np.float32(2.0) * np.ones((4, 4), np.float32), "b": np.float32(1.0) * np.ones(4, np.float32)})
    assert y.dtype == np.float32 and y.flags.c_contiguous and y.flags.writeable and y.flags.owndata is False
    np.testing.assert_array_equal(y, np.full((4, 4), 3.0, np.float32))


def test_describe(add_path, cpu_options):
    sess = hal.onnx.InferenceSession(str(add_path), cpu_options, providers=["cpu"])
    assert [(i.name, i.shape, i.type) for i in sess.get_inputs()] == [("x", ["n", 4], "tensor(float)"),
                                                                    ("b", [4], "tensor(float)")]
    assert [(o.name, o.shape, o.type) for o in sess.get_outputs()] == [("y", ["n", 4], "tensor(float)")]
    meta = sess.get_modelmeta()
    assert meta.producer_name == "hal-test" and meta.opset == OPSET
    assert sess.get_providers() == ["cpu"]
    assert "cpu" in sess.explain()


def test_modelmeta_like_onnxruntime(cpu_options):
    """get_modelmeta(): producer, versions, names, doc strings and metadata_props as onnxruntime reads them."""
    import onnxruntime

    model = add_model()
    model.producer_version = "9.8.7"
    model.domain = "ai.hal.test"
    model.model_version = 42
    model.doc_string = "adds b to every row of x"
    model.graph.name = "the_graph"
    model.graph.doc_string = "one Add"
    helper.set_model_props(model, {"author": "hal", "license": "MIT"})
    data = model.SerializeToString()
    ours = hal.onnx.InferenceSession(data, cpu_options).get_modelmeta()
    theirs = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).get_modelmeta()
    fields = ["producer_name", "graph_name", "domain", "description", "graph_description", "version",
              "custom_metadata_map"]
    assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}
    assert (ours.version, ours.custom_metadata_map["license"], ours.producer_version) == (42, "MIT", "9.8.7")


def test_session_config_entries_and_provider_options(add_path, tmp_path, monkeypatch):
    """Config entries and provider options reach the graph compiler as compile options (hal::CompileOptions::
    options): the same options reuse the compiled executables, a changed one recompiles (on OpenCL, whose
    graph compiler claims the Add)."""
    monkeypatch.setenv("HAL_COMPILE_CACHE_DIR", str(tmp_path / "cache"))
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(write_config(tmp_path, "opencl"))
    opts.add_session_config_entry("hal.test_entry", "1")
    assert opts.get_session_config_entry("hal.test_entry") == "1"
    first = hal.onnx.InferenceSession(str(add_path), opts)
    stats = first.compile_stats()
    assert (stats["cache"], stats["compiles"], stats["groups"], stats["op_nodes"]) == ("compiled", 1, 1, 0)
    assert stats["devices"][0]["device"] == "opencl:0" and stats["devices"][0]["groups"] == 1
    before = hal.onnx.compile_counters()
    again = hal.onnx.InferenceSession(str(add_path), opts)
    assert (again.compile_stats()["cache"], again.compile_stats()["compiles"]) == ("memory", 0)
    changed = hal.onnx.InferenceSession(str(add_path), opts, providers=[("opencl", {"hal.test_entry": 2})])
    assert (changed.compile_stats()["cache"], changed.compile_stats()["compiles"]) == ("compiled", 1)
    assert hal.onnx.compile_counters()["graph_compiles"] == before["graph_compiles"] + 1
    np.testing.assert_array_equal(changed.run(None, {"x": X, "b": B})[0], X + B)


def test_disable_all_runs_op_by_op(add_path, tmp_path, monkeypatch):
    """GraphOptimizationLevel.ORT_DISABLE_ALL: no plugin compiles a subgraph (no fusion), every node runs op by
    op, with the same results; it is a compile of its own, not the fused session's cached executables."""
    monkeypatch.setenv("HAL_COMPILE_CACHE_DIR", str(tmp_path / "cache"))
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(write_config(tmp_path, "opencl"))
    fused = hal.onnx.InferenceSession(str(add_path), opts)
    assert (fused.compile_stats()["groups"], fused.compile_stats()["op_nodes"]) == (1, 0)
    opts.graph_optimization_level = hal.onnx.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = hal.onnx.InferenceSession(str(add_path), opts)
    stats = plain.compile_stats()
    assert (stats["cache"], stats["groups"], stats["kernels"], stats["op_nodes"]) == ("compiled", 0, 0, 1)
    assert stats["devices"][0]["device"] == "opencl:0" and stats["devices"][0]["op_nodes"] == 1
    np.testing.assert_array_equal(plain.run(None, {"x": X, "b": B})[0], X + B)
    np.testing.assert_array_equal(fused.run(None, {"x": X, "b": B})[0], X + B)


def test_unavailable_onnxruntime_provider_is_skipped(add_path, cpu_options):
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = hal.onnx.InferenceSession(str(add_path), cpu_options,
                                         providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


# ---- bad input: refused with the exception class onnxruntime uses and a message naming the culprit ----

@pytest.fixture(scope="module")
def add_session(add_path, cpu_options):
    return hal.onnx.InferenceSession(str(add_path), cpu_options)


X = np.ones((2, 4), np.float32)
B = np.ones(4, np.float32)


def test_bad_feeds(add_session):
    s = add_session
    _raises(hal.onnx.InvalidArgument, "'?z'?", s.run, None, {"x": X, "b": B, "z": B})           # unknown name
    _raises(hal.onnx.InvalidArgument, "'?b'?", s.run, None, {"x": X})                            # missing
    _raises(hal.onnx.InvalidArgument, "'?x'?.*(float64|double)", s.run, None, {"x": X.astype(np.float64), "b": B})
    _raises(hal.onnx.InvalidArgument, "'?x'?.*rank", s.run, None, {"x": np.ones(4, np.float32), "b": B})
    _raises(hal.onnx.InvalidArgument, "'?x'?", s.run, None, {"x": np.ones((2, 5), np.float32), "b": B})  # dim
    _raises(hal.onnx.InvalidArgument, "'?nope'?", s.run, ["nope"], {"x": X, "b": B})              # output name
    _raises(hal.onnx.InvalidArgument, "'x'.*numpy dtype <U1", s.run, None, {"x": np.array(["a"]), "b": B})
    _raises(hal.onnx.InvalidArgument, "input_feed must be a dict", s.run, None, [X, B])
    np.testing.assert_array_equal(s.run(None, {"x": X, "b": B})[0], X + B)  # the session still works


def test_bad_models(tmp_path, add_path, cpu_options):
    _raises(hal.onnx.InvalidArgument, ".", hal.onnx.InferenceSession, b"this is not an onnx model", cpu_options)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(add_path.read_bytes()[:40])
    _raises(hal.onnx.InvalidArgument, ".", hal.onnx.InferenceSession, str(truncated), cpu_options)
    _raises(hal.onnx.NoSuchFile, "missing.onnx", hal.onnx.InferenceSession, str(tmp_path / "missing.onnx"),
            cpu_options)
    old = add_model(opset=6).SerializeToString()  # Add version 6: legacy broadcasting, no row
    _raises(hal.onnx.NotImplemented, "opset 6 uses Add version 6", hal.onnx.InferenceSession, old, cpu_options)
    unsupported = helper.make_model(
        helper.make_graph([helper.make_node("NonMaxSuppression", ["x", "x"], ["y"], name="the_nms")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])]),
        opset_imports=[helper.make_opsetid("", OPSET)])
    msg = _raises(hal.onnx.NotImplemented, "NonMaxSuppression", hal.onnx.InferenceSession,
                  unsupported.SerializeToString(), cpu_options)
    assert "the_nms" in msg


def test_bad_providers_and_options(add_path, cpu_options, monkeypatch):
    _raises(hal.onnx.NoSuchFile, "nosuchplugin", hal.onnx.InferenceSession, str(add_path), cpu_options,
            providers=["nosuchplugin"])
    with pytest.warns(UserWarning):
        _raises(hal.onnx.InvalidArgument, "none of the providers", hal.onnx.InferenceSession, str(add_path),
                cpu_options, providers=["TensorrtExecutionProvider"])
    with pytest.raises(TypeError, match="path or the model's bytes"):
        hal.onnx.InferenceSession(42, cpu_options)
    monkeypatch.setenv("OMP_NUM_THREADS", str(os.cpu_count()))
    opts = hal.onnx.SessionOptions()
    opts.hal_config = cpu_options.hal_config
    opts.intra_op_num_threads = os.cpu_count() + 1
    _raises(hal.onnx.InvalidArgument, "intra_op_num_threads", hal.onnx.InferenceSession, str(add_path), opts)


def test_external_data(tmp_path, cpu_options):
    """Initializers in an external file load by path (relative to the model's folder); from bytes, and
    through a location leaving the folder, they are refused naming the initializer."""
    w = np.arange(4096, dtype=np.float32).reshape(1024, 4)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y],
                              initializer=[onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    assert (tmp_path / "ext.bin").stat().st_size == w.nbytes
    xs = np.ones((1024, 4), np.float32)
    (out,) = hal.onnx.InferenceSession(path, cpu_options).run(None, {"x": xs})
    np.testing.assert_array_equal(out, xs + w)
    _raises(hal.onnx.InvalidArgument, "'w'", hal.onnx.InferenceSession, path.read_bytes(), cpu_options)
    escaping = onnx.load(path, load_external_data=False)
    for entry in escaping.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../ext.bin"
    bad = tmp_path / "sub"
    bad.mkdir()
    onnx.save(escaping, bad / "escaping.onnx")
    _raises(hal.onnx.InvalidArgument, r"\.\./ext\.bin", hal.onnx.InferenceSession, bad / "escaping.onnx",
            cpu_options)


def test_run_from_several_threads(add_session):
    """run() may be called from several threads at once (the GIL is released during the device work)."""
    import concurrent.futures

    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((64, 4), dtype=np.float32), "b": rng.standard_normal(4, dtype=np.float32)}
             for _ in range(16)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda f: add_session.run(None, f)[0], feeds))
    for f, y in zip(feeds, results):
        np.testing.assert_array_equal(y, f["x"] + f["b"])


def test_model_larger_than_the_device_is_out_of_memory(cpu_options):
    """An intermediate no device can hold: OUT_OF_MEMORY naming the size and the device's memory; nothing
    is lost (the next session runs)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1 << 20, 1 << 20])  # 4 TiB of float32
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "g", [x], [y], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    sess = hal.onnx.InferenceSession(model.SerializeToString(), cpu_options)
    _raises(hal.onnx.RuntimeException, r"OUT_OF_MEMORY: .*size 4398046511104 bytes exceeds the device's memory of \d+ bytes",
            sess.run, None, {"x": np.ones(1, np.float32)})
    ok = hal.onnx.InferenceSession(add_model().SerializeToString(), cpu_options)
    got = ok.run(None, {"x": np.ones((2, 4), np.float32), "b": np.ones(4, np.float32)})[0]
    np.testing.assert_array_equal(got, np.full((2, 4), 2, np.float32))
