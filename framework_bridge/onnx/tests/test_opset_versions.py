"""Models as written at any opset up to the newest the pinned onnx knows: the operator version in
effect decides the semantics (Softmax's 2-D coercion before 13, attributes that became inputs), inputs
whose values a node needs at load (a Reshape's target, a Slice's starts, a TopK's K) are bound per run,
and the pads ONNX computes (asymmetric, auto_pad, output_shape) give onnxruntime's answer. Every case is
compared with onnxruntime on the same model; bad inputs raise errors naming node, operator and what."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import hal
import hal.onnx

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, inputs, outputs, opset, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="hal-test")
    m.ir_version = min(m.ir_version, 10)  # onnxruntime 1.32 reads IR <= 10
    return m.SerializeToString()


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def check_like_ort(data, feeds, options, rtol=1e-5, atol=1e-6):
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = hal.onnx.InferenceSession(data, options)
    got = sess.run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return sess


X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("opset", [7, 11, 13, 28])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_coerces_to_2d_before_opset_13(op, axis, opset, cpu_options):
    attrs = {} if axis is None else {"axis": axis}
    data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, [2, 3, 4])], [vi("y", F, None)], opset)
    check_like_ort(data, {"x": X}, cpu_options)


def test_old_attribute_forms(cpu_options):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    # Clip 6: bounds as attributes.
    data = model([helper.make_node("Clip", ["x"], ["y"], min=-3.0, max=5.5)], [vi("x", F, [2, 3, 4])],
                 [vi("y", F, None)], 9)
    check_like_ort(data, {"x": x}, cpu_options)
    # Slice 1: starts/ends/axes as attributes.
    data = model([helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[100, -1], axes=[1, 2])],
                 [vi("x", F, [2, 3, 4])], [vi("y", F, None)], 9)
    check_like_ort(data, {"x": x}, cpu_options)
    # Pad 2: pads and value as attributes.
    data = model([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 2, 0, 0, 1], value=7.0)],
                 [vi("x", F, [2, 3, 4])], [vi("y", F, None)], 10)
    check_like_ort(data, {"x": x}, cpu_options)
    # TopK 1: k as an attribute; ties keep the lower index first.
    ties = np.array([[3, 1, 3, 2, 3]], dtype=np.float32)
    data = model([helper.make_node("TopK", ["x"], ["v", "i"], k=3)], [vi("x", F, [1, 5])],
                 [vi("v", F, None), vi("i", I64, None)], 9)
    sess = check_like_ort(data, {"x": ties}, cpu_options)
    assert sess.run(None, {"x": ties})[1].tolist() == [[0, 2, 4]]
    # Split 2: sizes as an attribute.
    data = model([helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 3])], [vi("x", F, [2, 3, 4])],
                 [vi("a", F, None), vi("b", F, None)], 7)
    check_like_ort(data, {"x": x}, cpu_options)


def test_run_time_values_are_bound_per_run(cpu_options):
    data = model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="dyn_reshape")],
                 [vi("x", F, [2, 6]), vi("shape", I64, [2])], [vi("y", F, None)], 21)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    assert [i.name for i in sess.get_inputs()] == ["x", "shape"]
    for target in ([3, 4], [4, 3], [-1, 2], [3, 4]):
        feeds = {"x": x, "shape": np.array(target, dtype=np.int64)}
        want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_array_equal(sess.run(None, feeds)[0], want)
    # The first target is a translation of its own; once others come, the target is read when the model
    # runs (a view of x in that shape), so [3, 4] and [-1, 2] share one.
    assert "1 translations kept" in sess.explain()
    assert "values with no translation of their own (they varied) are read when it runs" in sess.explain()
    # A target whose element count differs: named at run, nothing returned.
    with pytest.raises(hal.Error, match=r"dyn_reshape.*Reshape.*cannot reshape \[2, 6\] \(12 elements\) to \[5, 2\]"):
        sess.run(None, {"x": x, "shape": np.array([5, 2], dtype=np.int64)})


def test_run_time_slice_and_topk(cpu_options):
    x = np.random.default_rng(1).standard_normal((4, 10)).astype(np.float32)
    data = model([helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])],
                 [vi("x", F, [4, 10]), vi("s", I64, [1]), vi("e", I64, [1]), vi("a", I64, [1]), vi("p", I64, [1])],
                 [vi("y", F, None)], 13)
    for s, e, a, p in ([1, 9, 1, 2], [-1, -100, 1, -3], [0, 2, 0, 1]):
        feeds = {"x": x, "s": np.array([s]), "e": np.array([e]), "a": np.array([a]), "p": np.array([p])}
        check_like_ort(data, feeds, cpu_options)
    data = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0)], [vi("x", F, [4, 10]), vi("k", I64, [1])],
                 [vi("v", F, None), vi("i", I64, None)], 11)
    for k in (1, 4, 10):
        check_like_ort(data, {"x": x, "k": np.array([k])}, cpu_options)


@pytest.mark.parametrize("attrs", [
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
    {"output_shape": [10, 8], "strides": [3, 2]},
    {"pads": [1, 0, 0, 2], "strides": [2, 1]},
    {"output_padding": [1, 1], "strides": [2, 2]},
])
def test_conv_transpose_pads_as_onnx_computes_them(attrs, cpu_options):
    x = np.random.default_rng(2).standard_normal((1, 1, 3, 3)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((1, 2, 3, 3)).astype(np.float32)
    data = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                 [vi("x", F, [1, 1, 3, 3]), vi("w", F, [1, 2, 3, 3])], [vi("y", F, None)], 22)
    check_like_ort(data, {"x": x, "w": w}, cpu_options)


def test_conv_transpose_1d(cpu_options):
    x = np.random.default_rng(4).standard_normal((2, 3, 5)).astype(np.float32)
    w = np.random.default_rng(5).standard_normal((3, 2, 3)).astype(np.float32)
    data = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], pads=[1, 0])],
                 [vi("x", F, [2, 3, 5]), vi("w", F, [3, 2, 3])], [vi("y", F, None)], 11)
    check_like_ort(data, {"x": x, "w": w}, cpu_options)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "count_include_pad": 1},
    {"kernel_shape": [2, 3], "pads": [0, 1, 1, 0]},
])
def test_pooling_pads_the_catalog_does_not_take(op, attrs, cpu_options):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    x = np.random.default_rng(6).standard_normal((1, 2, 5, 6)).astype(np.float32)
    data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, [1, 2, 5, 6])], [vi("y", F, None)], 19)
    check_like_ort(data, {"x": x}, cpu_options)


def test_pooling_1d_and_asymmetric_conv(cpu_options):
    x = np.random.default_rng(7).standard_normal((2, 3, 9)).astype(np.float32)
    for op in ("MaxPool", "AveragePool"):
        data = model([helper.make_node(op, ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1])],
                     [vi("x", F, [2, 3, 9])], [vi("y", F, None)], 13)
        check_like_ort(data, {"x": x}, cpu_options)
    w = np.random.default_rng(8).standard_normal((4, 3, 3)).astype(np.float32)
    data = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[0, 2])], [vi("x", F, [2, 3, 9]), vi("w", F, [4, 3, 3])],
                 [vi("y", F, None)], 11)
    check_like_ort(data, {"x": x, "w": w}, cpu_options)


def test_pow_keeps_the_base_dtype(cpu_options):
    data = model([helper.make_node("Pow", ["x", "y"], ["z"])],
                 [vi("x", TensorProto.INT32, [3]), vi("y", F, [3])], [vi("z", TensorProto.INT32, None)], 15)
    check_like_ort(data, {"x": np.array([2, 3, 5], np.int32), "y": np.array([0.5, 2.0, 1.5], np.float32)}, cpu_options)


def test_opsets_outside_the_table_are_refused_by_node(cpu_options):
    newest = onnx.defs.onnx_opset_version()
    data = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", F, [2])], [vi("y", F, None)], newest + 1)
    with pytest.raises(hal.Error, match=rf"node 0 'r' \(Relu.*opset {newest + 1} is newer than the {newest}.*versions 6\.\.14"):
        hal.onnx.InferenceSession(data, cpu_options)
    # Relu version 1 (before opset 6: consumed_inputs) has no row; Not version 1 (opset 1) has.
    data = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)], 5)
    with pytest.raises(hal.Error, match=r"opset 5 uses Relu version 1; HAL's table maps versions 6\.\.14"):
        hal.onnx.InferenceSession(data, cpu_options)
    data = model([helper.make_node("Not", ["x"], ["y"])], [vi("x", TensorProto.BOOL, [3])],
                 [vi("y", TensorProto.BOOL, None)], 1)
    check_like_ort(data, {"x": np.array([True, False, True])}, cpu_options)


@pytest.mark.parametrize("attrs", [{}, {"reverse": 1}, {"exclusive": 1}, {"reverse": 1, "exclusive": 1}])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_cumsum_keeps_the_dtype_and_takes_reverse_and_exclusive(attrs, dtype, cpu_options):
    elem = {np.float32: F, np.int32: TensorProto.INT32, np.int64: I64}[dtype]
    data = model([helper.make_node("CumSum", ["x", "axis"], ["y"], **attrs)], [vi("x", elem, [3, 4]), vi("axis", I64, [])],
                 [vi("y", elem, None)], 14)
    x = (np.arange(12).reshape(3, 4) * 3 % 7).astype(dtype)
    for axis in (0, 1, -1):
        check_like_ort(data, {"x": x, "axis": np.array(axis, dtype=np.int64)}, cpu_options)


def _attention(inputs, outputs, attrs, opset=24):
    names_in = [n for n, _, _ in inputs]
    return model([helper.make_node("Attention", names_in, [n for n, _ in outputs], **attrs)],
                 [vi(n, e, s) for n, e, s in inputs if n], [vi(n, e, None) for n, e in outputs], opset)


R = np.random.default_rng(9)


def test_attention_4d_causal_with_past_and_qk_output(cpu_options):
    q, k, v = (R.standard_normal((2, 3, 4, 8)).astype(np.float32) for _ in range(3))
    pk, pv = (R.standard_normal((2, 3, 5, 8)).astype(np.float32) for _ in range(2))
    # Mode 2 (scores + bias) is left out: onnxruntime writes -FLT_MAX where the bias masks, the
    # operator's reference (and HAL) -inf; the node tests check it against the reference.
    for mode in (0, 1, 3):
        data = _attention([("q", F, [2, 3, 4, 8]), ("k", F, [2, 3, 4, 8]), ("v", F, [2, 3, 4, 8]), ("", F, None),
                           ("pk", F, [2, 3, 5, 8]), ("pv", F, [2, 3, 5, 8])],
                          [("y", F), ("present_k", F), ("present_v", F), ("qk", F)],
                          {"is_causal": 1, "qk_matmul_output_mode": mode, "softcap": 2.0})
        check_like_ort(data, {"q": q, "k": k, "v": v, "pk": pk, "pv": pv}, cpu_options)


def test_attention_3d_grouped_heads_bool_mask_and_scale(cpu_options):
    q = R.standard_normal((2, 5, 4 * 6)).astype(np.float32)
    k, v = (R.standard_normal((2, 7, 2 * 6)).astype(np.float32) for _ in range(2))
    mask = R.random((5, 7)) > 0.3
    mask[1] = False  # a query row that attends nothing: zeros, not NaN
    data = _attention([("q", F, [2, 5, 24]), ("k", F, [2, 7, 12]), ("v", F, [2, 7, 12]),
                       ("m", TensorProto.BOOL, [5, 7])], [("y", F)], {"q_num_heads": 4, "kv_num_heads": 2, "scale": 0.3})
    sess = check_like_ort(data, {"q": q, "k": k, "v": v, "m": mask}, cpu_options)
    assert not np.isnan(sess.run(None, {"q": q, "k": k, "v": v, "m": mask})[0]).any()


def test_attention_external_cache_lengths_bound_per_run(cpu_options):
    q = R.standard_normal((2, 2, 3, 4)).astype(np.float32)
    k, v = (R.standard_normal((2, 2, 6, 4)).astype(np.float32) for _ in range(2))
    data = _attention([("q", F, [2, 2, 3, 4]), ("k", F, [2, 2, 6, 4]), ("v", F, [2, 2, 6, 4]), ("", F, None),
                       ("", F, None), ("", F, None), ("n", I64, [2])], [("y", F)], {"is_causal": 1})
    for lengths in ([6, 4], [3, 5]):
        check_like_ort(data, {"q": q, "k": k, "v": v, "n": np.array(lengths, np.int64)}, cpu_options)


@pytest.mark.parametrize("op,attrs,opset", [
    ("Softplus", {}, 22), ("Softsign", {}, 22), ("Mish", {}, 22), ("Swish", {"alpha": 0.7}, 24),
    ("ThresholdedRelu", {"alpha": 0.3}, 22), ("Selu", {}, 22), ("Celu", {"alpha": 1.5}, 12),
    ("Shrink", {"lambd": 0.4, "bias": 0.1}, 9), ("Hardmax", {"axis": 1}, 13), ("Hardmax", {"axis": 1}, 11),
    ("LpNormalization", {"p": 1, "axis": 1}, 22), ("LpNormalization", {"axis": 0}, 22),
    ("ArgMax", {"axis": 1, "select_last_index": 1}, 13), ("ArgMin", {"axis": 0, "keepdims": 0, "select_last_index": 1}, 13),
    ("ReduceLogSum", {"keepdims": 0}, 13),
])
def test_composed_operators(op, attrs, opset, cpu_options):
    x = np.round(R.standard_normal((3, 4, 2)), 1).astype(np.float32)
    x[1, 2] = 0.0  # a zero vector for LpNormalization, ties for ArgMax/Hardmax
    x[0, :, 0] = 0.5
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    out = TensorProto.INT64 if op.startswith("Arg") else F
    data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, [3, 4, 2])], [vi("y", out, None)], opset)
    check_like_ort(data, {"x": x}, cpu_options)


def test_normalizations_statistics_and_layout_ops(cpu_options):
    x = R.standard_normal((2, 3, 4, 6)).astype(np.float32)
    w, b = R.standard_normal((4, 6)).astype(np.float32), R.standard_normal((6,)).astype(np.float32)
    data = model([helper.make_node("LayerNormalization", ["x", "w", "b"], ["y", "mean", "inv"], axis=2)],
                 [vi("x", F, [2, 3, 4, 6]), vi("w", F, [4, 6]), vi("b", F, [6])],
                 [vi("y", F, None), vi("mean", F, None), vi("inv", F, None)], 17)
    check_like_ort(data, {"x": x, "w": w, "b": b}, cpu_options, rtol=1e-4, atol=1e-5)
    data = model([helper.make_node("RMSNormalization", ["x", "w"], ["y"], axis=-2, epsilon=1e-3)],
                 [vi("x", F, [2, 3, 4, 6]), vi("w", F, [4, 6])], [vi("y", F, None)], 23)
    check_like_ort(data, {"x": x, "w": w}, cpu_options, rtol=1e-4, atol=1e-5)
    for op, mode in (("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", None)):
        attrs = {"blocksize": 2} | ({"mode": mode} if mode else {})
        y = np.arange(2 * 8 * 4 * 6, dtype=np.float32).reshape(2, 8, 4, 6)
        data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, [2, 8, 4, 6])], [vi("y", F, None)], 13)
        check_like_ort(data, {"x": y}, cpu_options)
    data = model([helper.make_node("EyeLike", ["x"], ["y"], k=-1, dtype=TensorProto.INT32)], [vi("x", F, [3, 5])],
                 [vi("y", TensorProto.INT32, None)], 22)
    check_like_ort(data, {"x": np.zeros((3, 5), np.float32)}, cpu_options)


def test_gathers_scatters_and_class_losses(cpu_options):
    x = R.standard_normal((4, 5)).astype(np.float32)
    idx = np.array([[-1, 0, 2], [1, -5, 4]], np.int64)
    data = model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [vi("x", F, [4, 5]), vi("i", I64, [2, 3])],
                 [vi("y", F, None)], 13)
    check_like_ort(data, {"x": x, "i": idx}, cpu_options)
    gi = np.array([[0, -1], [2, 1], [-2, 0], [3, 3]], np.int64)
    data = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], [vi("x", F, [4, 5]), vi("i", I64, [4, 2])],
                 [vi("y", F, None)], 13)
    check_like_ort(data, {"x": x, "i": gi}, cpu_options)
    si = np.array([[0, 1], [2, 1], [3, 0], [3, 4]], np.int64)  # distinct targets per row
    u = R.standard_normal((4, 2)).astype(np.float32)
    for reduction in ("none", "add"):
        data = model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=reduction)],
                     [vi("x", F, [4, 5]), vi("i", I64, [4, 2]), vi("u", F, [4, 2])], [vi("y", F, None)], 18)
        check_like_ort(data, {"x": x, "i": si, "u": u}, cpu_options)
    scores = R.standard_normal((3, 5, 2)).astype(np.float32)
    labels = np.array([[0, 4], [2, -1], [-1, 1]], np.int64)
    weights = R.random(5).astype(np.float32)
    for reduction in ("none", "sum", "mean"):
        data = model([helper.make_node("SoftmaxCrossEntropyLoss", ["s", "l", "w"], ["loss", "logp"], reduction=reduction,
                                       ignore_index=-1)],
                     [vi("s", F, [3, 5, 2]), vi("l", I64, [3, 2]), vi("w", F, [5])], [vi("loss", F, None), vi("logp", F, None)], 13)
        check_like_ort(data, {"s": scores, "l": labels, "w": weights}, cpu_options, rtol=1e-5, atol=1e-5)
        data = model([helper.make_node("NegativeLogLikelihoodLoss", ["s", "l"], ["loss"], reduction=reduction)],
                     [vi("s", F, [3, 5, 2]), vi("l", I64, [3, 2])], [vi("loss", F, None)], 22)
        check_like_ort(data, {"s": scores, "l": np.abs(labels)}, cpu_options, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [{}, {"reverse": 1}, {"exclusive": 1}, {"reverse": 1, "exclusive": 1}])
def test_cumprod(attrs, cpu_options):
    x = np.round(R.standard_normal((3, 4)), 1).astype(np.float32)
    x[1, 1] = 0.0
    data = model([helper.make_node("CumProd", ["x", "axis"], ["y"], **attrs)], [vi("x", F, [3, 4]), vi("axis", I64, [])],
                 [vi("y", F, None)], 26)
    for axis in (0, -1):
        check_like_ort(data, {"x": x, "axis": np.array(axis, np.int64)}, cpu_options)


def test_center_crop_pad(cpu_options):
    x = R.standard_normal((5, 6, 3)).astype(np.float32)
    for shape, axes in (([3, 9], [0, 1]), ([8, 3], [-3, -2]), ([5, 6, 3], None), ([2, 7, 4], None)):
        attrs = {} if axes is None else {"axes": axes}
        data = model([helper.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)],
                     [vi("x", F, [5, 6, 3]), vi("s", I64, [len(shape)])], [vi("y", F, None)], 18)
        check_like_ort(data, {"x": x, "s": np.array(shape, np.int64)}, cpu_options)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
def test_rotary_embedding(interleaved, rotary_dim, cpu_options):
    b, s, h, d = 2, 3, 2, 8
    half = (rotary_dim or d) // 2
    cos, sin = (R.standard_normal((10, half)).astype(np.float32) for _ in range(2))
    pos = np.array([[0, 1, 2], [5, 7, 9]], np.int64)
    x4 = R.standard_normal((b, h, s, d)).astype(np.float32)
    data = model([helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], interleaved=interleaved,
                                   rotary_embedding_dim=rotary_dim)],
                 [vi("x", F, [b, h, s, d]), vi("c", F, [10, half]), vi("s", F, [10, half]), vi("p", I64, [b, s])],
                 [vi("y", F, None)], 23)
    check_like_ort(data, {"x": x4, "c": cos, "s": sin, "p": pos}, cpu_options)
    x3 = R.standard_normal((b, s, h * d)).astype(np.float32)
    c3, s3 = cos[pos], sin[pos]
    data = model([helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], interleaved=interleaved,
                                   rotary_embedding_dim=rotary_dim, num_heads=h)],
                 [vi("x", F, [b, s, h * d]), vi("c", F, [b, s, half]), vi("s", F, [b, s, half])], [vi("y", F, None)], 23)
    check_like_ort(data, {"x": x3, "c": c3, "s": s3}, cpu_options)


@pytest.mark.parametrize("attrs,scales,sizes", [
    ({"mode": "nearest"}, [1, 1, 2.0, 1.5], None),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, [1, 1, 0.6, 1.7], None),
    ({"mode": "linear"}, [1, 1, 1.5, 0.8], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 2, 7, 3]),
    ({"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}, [1, 1, 2.0, 2.0], None),
    ({"mode": "linear", "antialias": 1}, None, [1, 2, 3, 2]),
    ({"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel"}, None, [1, 2, 9, 3]),
])
def test_resize(attrs, scales, sizes, cpu_options):
    x = R.standard_normal((1, 2, 5, 4)).astype(np.float32)
    inputs = [vi("x", F, [1, 2, 5, 4])]
    names = ["x", ""]
    feeds = {"x": x}
    if scales is not None:
        inputs.append(vi("scales", F, [4]))
        names.append("scales")
        feeds["scales"] = np.array(scales, np.float32)
    else:
        inputs.append(vi("sizes", I64, [4]))
        names += ["", "sizes"]
        feeds["sizes"] = np.array(sizes, np.int64)
    data = model([helper.make_node("Resize", names, ["y"], **attrs)], inputs, [vi("y", F, None)], 19)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


def test_resize_to_one_element_follows_the_operator_definition(cpu_options):
    # pytorch_half_pixel maps an output of size 1 to source coordinate -0.5 (the spec and its reference);
    # onnxruntime 1.32 differs there, so this case is checked against onnx's reference implementation.
    from onnx.reference import ReferenceEvaluator
    x = R.standard_normal((1, 2, 5, 4)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic",
                                            coordinate_transformation_mode="pytorch_half_pixel")], "g",
                          [vi("x", F, [1, 2, 5, 4]), vi("sizes", I64, [4])], [vi("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    feeds = {"x": x, "sizes": np.array([1, 2, 9, 1], np.int64)}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    got = hal.onnx.InferenceSession(m.SerializeToString(), cpu_options).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [3, 3], "p": 3, "strides": [2, 1], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "pads": [0, 1, 2, 0]},
    {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER", "p": 1},
])
def test_lp_pool(attrs, cpu_options):
    x = R.standard_normal((1, 2, 5, 6)).astype(np.float32)
    data = model([helper.make_node("LpPool", ["x"], ["y"], **attrs)], [vi("x", F, [1, 2, 5, 6])], [vi("y", F, None)], 18)
    check_like_ort(data, {"x": x}, cpu_options, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_state,activation", [(False, "none"), (True, "silu")])
def test_causal_conv_with_state(with_state, activation, cpu_options):
    x = R.standard_normal((2, 3, 5)).astype(np.float32)
    w, bias = R.standard_normal((3, 1, 4)).astype(np.float32), R.standard_normal(3).astype(np.float32)
    inputs = [vi("x", F, [2, 3, 5]), vi("w", F, [3, 1, 4]), vi("b", F, [3])]
    feeds = {"x": x, "w": w, "b": bias}
    names = ["x", "w", "b"]
    if with_state:
        inputs.append(vi("s", F, [2, 3, 3]))
        feeds["s"] = R.standard_normal((2, 3, 3)).astype(np.float32)
        names.append("s")
    data = model([helper.make_node("CausalConvWithState", names, ["y", "state"], activation=activation)], inputs,
                 [vi("y", F, None), vi("state", F, None)], 27)
    check_like_ort(data, feeds, cpu_options)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention(rule, cpu_options):
    b, steps, hq, hkv, dk, dv = 2, 3, 4, 2, 3, 5
    q = R.standard_normal((b, steps, hq * dk)).astype(np.float32)
    k = (R.standard_normal((b, steps, hkv * dk)) * 0.5).astype(np.float32)
    v = R.standard_normal((b, steps, hkv * dv)).astype(np.float32)
    inputs = [vi("q", F, [b, steps, hq * dk]), vi("k", F, [b, steps, hkv * dk]), vi("v", F, [b, steps, hkv * dv]),
              vi("past", F, [b, hkv, dk, dv])]
    feeds = {"q": q, "k": k, "v": v, "past": R.standard_normal((b, hkv, dk, dv)).astype(np.float32)}
    names = ["q", "k", "v", "past"]
    if rule in ("gated", "gated_delta"):
        inputs.append(vi("decay", F, [b, steps, hkv]))
        feeds["decay"] = -np.abs(R.standard_normal((b, steps, hkv))).astype(np.float32)
        names.append("decay")
    else:
        names.append("")
    if rule in ("delta", "gated_delta"):
        inputs.append(vi("beta", F, [b, steps, hkv]))
        feeds["beta"] = R.random((b, steps, hkv)).astype(np.float32)
        names.append("beta")
    data = model([helper.make_node("LinearAttention", names, ["y", "state"], update_rule=rule, q_num_heads=hq,
                                   kv_num_heads=hkv)], inputs, [vi("y", F, None), vi("state", F, None)], 27)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


def test_scatter_nd_gather_nd_and_bitwise_not(cpu_options):
    data_x = R.standard_normal((4, 3, 2)).astype(np.float32)
    idx = np.array([[[0, 1], [-1, 2]], [[2, 0], [1, -3]]], np.int64)  # [2, 2, K=2], negative ones wrap
    data = model([helper.make_node("GatherND", ["x", "i"], ["y"])], [vi("x", F, [4, 3, 2]), vi("i", I64, [2, 2, 2])],
                 [vi("y", F, None)], 13)
    check_like_ort(data, {"x": data_x, "i": idx}, cpu_options)
    sidx = np.array([[0, 1], [3, 2], [2, 0]], np.int64)  # distinct rows
    upd = R.standard_normal((3, 2)).astype(np.float32)
    for reduction in ("none", "add"):
        data = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)],
                     [vi("x", F, [4, 3, 2]), vi("i", I64, [3, 2]), vi("u", F, [3, 2])], [vi("y", F, None)], 18)
        check_like_ort(data, {"x": data_x, "i": sidx, "u": upd}, cpu_options)
    for elem, dtype in ((TensorProto.INT32, np.int32), (TensorProto.UINT8, np.uint8)):
        data = model([helper.make_node("BitwiseNot", ["x"], ["y"])], [vi("x", elem, [5])], [vi("y", elem, None)], 18)
        check_like_ort(data, {"x": np.array([0, 1, 7, 100, 2], dtype)}, cpu_options)
