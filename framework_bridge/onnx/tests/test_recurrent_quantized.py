"""RNN / GRU / LSTM and the quantization operators against onnxruntime: every direction and layout,
biases and initial states, sequence_lens (bound per run), peepholes, clip, both GRU reset forms, the
activations lists; QuantizeLinear / DequantizeLinear per tensor, per axis and blocked, the dynamic and
integer ops, a QDQ linear model and exported PyTorch RNN models at two batch sizes. Bad inputs raise
errors naming node, operator and what is wrong."""
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import hal
import hal.onnx
from test_opset_versions import check_like_ort, model, vi

F = TensorProto.FLOAT
rng = np.random.default_rng(7)


def rnn_model(op, hidden, dirs, seq, batch, inp, with_b=False, with_init=False, with_lens=False, peep=False,
              layout=0, opset=22, **attrs):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    names = ["X", "W", "R", "B" if with_b else "", "sequence_lens" if with_lens else "",
             "initial_h" if with_init else "", "initial_c" if with_init and op == "LSTM" else "", "P" if peep else ""]
    while names and names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outs, hidden_size=hidden, **attrs)
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    h_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": rng.standard_normal(x_shape).astype(np.float32),
             "W": rng.standard_normal([dirs, gates * hidden, inp]).astype(np.float32) * 0.5,
             "R": rng.standard_normal([dirs, gates * hidden, hidden]).astype(np.float32) * 0.5}
    inputs = [vi("X", F, x_shape), vi("W", F, feeds["W"].shape), vi("R", F, feeds["R"].shape)]
    if with_b:
        feeds["B"] = rng.standard_normal([dirs, 2 * gates * hidden]).astype(np.float32) * 0.3
        inputs.append(vi("B", F, feeds["B"].shape))
    if with_lens:
        feeds["sequence_lens"] = rng.integers(1, seq + 1, size=batch).astype(np.int32)
        inputs.append(vi("sequence_lens", TensorProto.INT32, [batch]))
    if with_init:
        feeds["initial_h"] = rng.standard_normal(h_shape).astype(np.float32)
        inputs.append(vi("initial_h", F, h_shape))
        if op == "LSTM":
            feeds["initial_c"] = rng.standard_normal(h_shape).astype(np.float32)
            inputs.append(vi("initial_c", F, h_shape))
    if peep:
        feeds["P"] = rng.standard_normal([dirs, 3 * hidden]).astype(np.float32) * 0.3
        inputs.append(vi("P", F, feeds["P"].shape))
    data = model([node], inputs, [vi(o, F, None) for o in outs], opset)
    return data, feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("full", [False, True])
def test_recurrent_directions_and_inputs(op, direction, full, cpu_options):
    dirs = 2 if direction == "bidirectional" else 1
    data, feeds = rnn_model(op, 5, dirs, 6, 3, 4, with_b=full, with_init=full, with_lens=full, direction=direction)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_batch_first_layout(op, cpu_options):
    """onnxruntime refuses layout 1: against ONNX's reference implementation."""
    data, feeds = rnn_model(op, 4, 2, 5, 3, 2, with_b=True, with_init=True, layout=1, direction="bidirectional")
    want = ReferenceEvaluator(onnx.load_from_string(data)).run(None, feeds)
    got = hal.onnx.InferenceSession(data, cpu_options).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_reset_forms(lbr, cpu_options):
    data, feeds = rnn_model("GRU", 4, 1, 5, 2, 3, with_b=True, with_init=True, linear_before_reset=lbr)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


def test_lstm_peepholes_clip_coupled_gates_and_activations(cpu_options):
    data, feeds = rnn_model("LSTM", 3, 1, 4, 2, 3, with_b=True, with_init=True, with_lens=True, peep=True, clip=0.7)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)
    data, feeds = rnn_model("LSTM", 3, 1, 4, 2, 3, with_b=True, input_forget=1)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)
    data, feeds = rnn_model("LSTM", 3, 2, 4, 2, 3, with_b=True, direction="bidirectional",
                            activations=["Sigmoid", "Relu", "Tanh", "Sigmoid", "Tanh", "Softsign"])
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)
    data, feeds = rnn_model("RNN", 3, 1, 4, 2, 3, activations=["Relu"], opset=7)
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


def test_sequence_lens_change_per_run(cpu_options):
    data, feeds = rnn_model("GRU", 4, 2, 5, 3, 2, with_lens=True, direction="bidirectional")
    sess = hal.onnx.InferenceSession(data, cpu_options)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for lens in ([5, 1, 3], [2, 2, 2], [5, 5, 5]):
        feeds["sequence_lens"] = np.array(lens, np.int32)
        for g, w in zip(sess.run(None, feeds), want.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("exporter_opset", [14, 17])
def test_exported_pytorch_rnn_at_two_batch_sizes(kind, exporter_opset, cpu_options):
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 8)
            self.rnn = getattr(torch.nn, kind)(8, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(32, 50)

        def forward(self, tokens):
            out, _ = self.rnn(self.emb(tokens))
            return self.head(out)

    net = Net().eval()
    buf = io.BytesIO()
    tokens = torch.randint(0, 50, (2, 7))
    torch.onnx.export(net, (tokens,), buf, dynamo=False, opset_version=exporter_opset, input_names=["tokens"],
                      output_names=["logits"], dynamic_axes={"tokens": {0: "batch"}})
    sess = None
    for batch in (1, 4):
        feeds = {"tokens": np.random.default_rng(batch).integers(0, 50, (batch, 7)).astype(np.int64)}
        sess = check_like_ort(buf.getvalue(), feeds, cpu_options, rtol=1e-4, atol=1e-5)
        with torch.no_grad():
            np.testing.assert_allclose(sess.run(None, feeds)[0], net(torch.from_numpy(feeds["tokens"])).numpy(),
                                       rtol=1e-4, atol=1e-5)


def test_recurrent_bad_inputs(cpu_options):
    data, feeds = rnn_model("LSTM", 3, 1, 4, 2, 3)
    bad = model([helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=3)],
                [vi("X", F, [4, 2, 3]), vi("W", F, [1, 12, 5]), vi("R", F, [1, 12, 3])], [vi("Y", F, None)], 22)
    with pytest.raises(hal.Error, match=r"LSTM.*W has shape \[1, 12, 5\]; expected \[1, 12, 3\]"):
        hal.onnx.InferenceSession(bad, cpu_options)
    bad = model([helper.make_node("GRU", ["X", "W", "R"], ["Y"], hidden_size=3, direction="sideways")],
                [vi("X", F, [4, 2, 3]), vi("W", F, [1, 9, 3]), vi("R", F, [1, 9, 3])], [vi("Y", F, None)], 22)
    with pytest.raises(hal.Error, match=r"GRU.*direction 'sideways'"):
        hal.onnx.InferenceSession(bad, cpu_options)
    data, feeds = rnn_model("RNN", 3, 1, 4, 2, 3, with_lens=True)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    feeds["sequence_lens"] = np.array([2, 9], np.int32)
    with pytest.raises(hal.Error, match=r"RNN.*sequence_lens holds 9, outside \[0, 4\]"):
        sess.run(None, feeds)
    feeds["sequence_lens"] = np.array([2, 3], np.int32)
    sess.run(None, feeds)  # the session stays usable


# ---- quantization ----

def q_model(op, x, scale, zp=None, opset=21, **attrs):
    names = ["x", "s"] + (["zp"] if zp is not None else [])
    inits = [helper.make_tensor("s", helper.np_dtype_to_tensor_dtype(scale.dtype), scale.shape, scale.flatten())]
    if zp is not None:
        inits.append(helper.make_tensor("zp", helper.np_dtype_to_tensor_dtype(zp.dtype), zp.shape, zp.flatten()))
    node = helper.make_node(op, names, ["y"], **attrs)
    if op == "DequantizeLinear":
        out = helper.np_dtype_to_tensor_dtype(scale.dtype)
    else:
        out = helper.np_dtype_to_tensor_dtype(zp.dtype) if zp is not None else attrs.get("output_dtype", TensorProto.UINT8)
    return model([node], [vi("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)], [vi("y", out, None)],
                 opset, inits)


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.int16])
@pytest.mark.parametrize("form", ["tensor", "axis", "blocked"])
def test_quantize_dequantize_like_onnxruntime(zp_dtype, form, cpu_options):
    x = (rng.standard_normal((2, 6, 4)) * 40).astype(np.float32)
    x[0, 0, :3] = [0.5, 1.5, -2.5]  # ties round to even
    attrs = {"axis": 1}
    if form == "tensor":
        scale, zp = np.array(0.7, np.float32), np.array(3, zp_dtype)
    elif form == "axis":
        scale, zp = rng.uniform(0.2, 2, 6).astype(np.float32), np.arange(6).astype(zp_dtype)
    else:
        scale, zp = rng.uniform(0.2, 2, (2, 2, 4)).astype(np.float32), np.ones((2, 2, 4), zp_dtype)
        attrs["block_size"] = 4  # the last block of 6 is partial
    data = q_model("QuantizeLinear", x, scale, zp, **attrs)
    check_like_ort(data, {"x": x}, cpu_options)
    q = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    check_like_ort(q_model("DequantizeLinear", q, scale, zp, **attrs), {"x": q}, cpu_options)


def test_quantize_without_zero_point_and_int32_input(cpu_options):
    x = (rng.standard_normal((3, 5)) * 300).astype(np.float32)
    check_like_ort(q_model("QuantizeLinear", x, np.array(2.0, np.float32), opset=13), {"x": x}, cpu_options)
    xi = rng.integers(-1000, 1000, (3, 5)).astype(np.int32)
    check_like_ort(q_model("DequantizeLinear", xi, np.array(0.25, np.float32), opset=13), {"x": xi}, cpu_options)


def test_dynamic_and_integer_ops(cpu_options):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    data = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [vi("x", F, [3, 4])],
                 [vi("y", TensorProto.UINT8, None), vi("s", F, None), vi("z", TensorProto.UINT8, None)], 11)
    check_like_ort(data, {"x": x}, cpu_options)
    a = rng.integers(0, 255, (2, 3, 5)).astype(np.uint8)
    b = rng.integers(-128, 127, (5, 4)).astype(np.int8)
    data = model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                 [vi("a", TensorProto.UINT8, a.shape), vi("b", TensorProto.INT8, b.shape)], [vi("y", TensorProto.INT32, None)],
                 10, [helper.make_tensor("az", TensorProto.UINT8, [], [12]),
                      helper.make_tensor("bz", TensorProto.INT8, [4], [1, -2, 3, 0])])
    # Against the exact product: onnxruntime's u8 x s8 kernel saturates its 16-bit pair sums (AVX2 without
    # VNNI) and differs from ONNX's reference here.
    got = hal.onnx.InferenceSession(data, cpu_options).run(None, {"a": a, "b": b})[0]
    exact = (a.astype(np.int64) - 12) @ (b.astype(np.int64) - np.array([1, -2, 3, 0]))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(got, ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"a": a, "b": b})[0])
    x = rng.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
    data = model([helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 0, 1, 2])],
                 [vi("x", TensorProto.UINT8, x.shape), vi("w", TensorProto.UINT8, w.shape)],
                 [vi("y", TensorProto.INT32, None)], 10, [helper.make_tensor("xz", TensorProto.UINT8, [], [100])])
    check_like_ort(data, {"x": x, "w": w}, cpu_options)


@pytest.mark.parametrize("batch", [1, 8])
def test_qdq_linear_model_at_two_batch_sizes(batch, cpu_options):
    """A QDQ model as onnxruntime's quantizer writes it: activations quantized and dequantized, int8 weights
    dequantized per output channel, MatMul + Add + Relu in float between, the output re-quantized."""
    w = rng.integers(-127, 127, (16, 8)).astype(np.int8)
    w_scale = rng.uniform(0.005, 0.02, 8).astype(np.float32)
    inits = [helper.make_tensor("w", TensorProto.INT8, w.shape, w.flatten()),
             helper.make_tensor("w_s", F, [8], w_scale), helper.make_tensor("w_z", TensorProto.INT8, [8], [0] * 8),
             helper.make_tensor("x_s", F, [], [0.02]), helper.make_tensor("x_z", TensorProto.UINT8, [], [128]),
             helper.make_tensor("bias", F, [8], rng.standard_normal(8).astype(np.float32)),
             helper.make_tensor("y_s", F, [], [0.05]), helper.make_tensor("y_z", TensorProto.UINT8, [], [0])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["pre"]),
             helper.make_node("Relu", ["pre"], ["act"]),
             helper.make_node("QuantizeLinear", ["act", "y_s", "y_z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"])]
    data = model(nodes, [vi("x", F, ["batch", 16])], [vi("y", F, None)], 21, inits)
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    # onnxruntime's default optimizations fuse the QDQ pattern into its int8 kernels, whose u8 x s8 pair sums
    # saturate (see above) and move some outputs by several steps; its unoptimized run is the model's
    # semantics, as is ONNX's reference.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got, ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})[0], rtol=0,
                               atol=1e-6)


def test_quantize_bad_inputs(cpu_options):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(hal.Error, match=r"QuantizeLinear.*the scale has 2 elements; the input's axis 1 has 3"):
        hal.onnx.InferenceSession(q_model("QuantizeLinear", x, np.ones(2, np.float32), np.zeros(2, np.uint8)), cpu_options)
    with pytest.raises(hal.Error, match=r"QuantizeLinear.*does not block input shape \[2, 3\] by 2 along axis 1"):
        hal.onnx.InferenceSession(q_model("QuantizeLinear", x, np.ones((2, 3), np.float32), block_size=2, axis=1),
                                  cpu_options)
    with pytest.raises(hal.Error, match=r"QuantizeLinear.*output_dtype int8 differs from the zero point's dtype uint8"):
        hal.onnx.InferenceSession(q_model("QuantizeLinear", x, np.array(1, np.float32), np.array(0, np.uint8),
                                          output_dtype=TensorProto.INT8), cpu_options)
    with pytest.raises(hal.Error, match=r"QuantizeLinear.*uint16.*no uint16 arithmetic"):
        hal.onnx.InferenceSession(q_model("QuantizeLinear", x, np.array(1, np.float32), np.array(0, np.uint16)),
                                  cpu_options)
    xi = np.ones((2, 3), np.int8)
    with pytest.raises(hal.Error, match=r"DequantizeLinear.*zero point's dtype uint8 differs from x's int8"):
        hal.onnx.InferenceSession(q_model("DequantizeLinear", xi, np.array(1, np.float32), np.array(0, np.uint8)),
                                  cpu_options)


class _Batches:
    """A calibration data reader for onnxruntime's quantizer."""

    def __init__(self, name, batches):
        self.name, self.batches = name, list(batches)

    def get_next(self):
        return {self.name: self.batches.pop()} if self.batches else None


@pytest.mark.parametrize("reduce_range", [True, False])
def test_onnxruntime_quantized_qdq_model_at_two_batch_sizes(reduce_range, cpu_options, tmp_path):
    """A PyTorch MLP exported, then quantized by onnxruntime's own quantizer (static, QDQ, per-channel int8
    weights, uint8 activations): what a user of onnxruntime.quantization runs."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    fp32 = tmp_path / "mlp.onnx"
    torch.onnx.export(net, (torch.randn(2, 16),), str(fp32), dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}})
    qdq = tmp_path / "mlp_qdq.onnx"
    calib = [np.random.default_rng(i).standard_normal((4, 16)).astype(np.float32) for i in range(8)]
    quantize_static(str(fp32), str(qdq), _Batches("x", calib), quant_format=QuantFormat.QDQ, per_channel=True,
                    weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8, reduce_range=reduce_range)
    ops = {n.op_type for n in onnx.load(str(qdq)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    sess = hal.onnx.InferenceSession(str(qdq), cpu_options)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(qdq), so, providers=["CPUExecutionProvider"])
    fused = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"])
    for batch in (1, 16):
        x = np.random.default_rng(100 + batch).standard_normal((batch, 16)).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, plain.run(None, {"x": x})[0], rtol=1e-6, atol=1e-6)
        if reduce_range:  # 7-bit weights: onnxruntime's fused int8 kernels do not saturate, all three agree
            np.testing.assert_allclose(got, fused.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
