"""Tensor operators composed from catalog ops (tensor_ops.cc) against onnxruntime on the same models:
OneHot, the normalizations, LRN, ReverseSequence, TensorScatter, Einsum, Col2Im, MaxUnpool, AffineGrid,
Det and the window functions, beyond the shapes ONNX's node tests use. Bad inputs raise errors naming
node, operator and what is wrong."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import hal
import hal.onnx
from test_opset_versions import check_like_ort, model, vi

F = TensorProto.FLOAT
I64 = TensorProto.INT64
rng = np.random.default_rng(11)


def reference(data, feeds):
    return ReferenceEvaluator(onnx.load_from_string(data)).run(None, feeds)


def const(name, array):
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape, array.flatten())


@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32, np.float32])
def test_one_hot(axis, idx_dtype, cpu_options):
    idx = np.array([[0, 3, -1], [-4, 5, 2]]).astype(idx_dtype)  # -4 wraps to 0; 5 and out of range match nothing
    data = model([helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis)],
                 [vi("i", helper.np_dtype_to_tensor_dtype(idx.dtype), idx.shape)], [vi("y", F, None)], 11,
                 [const("depth", np.array([4.0], np.float32)), const("values", np.array([-1.5, 2.0], np.float32))])
    check_like_ort(data, {"i": idx}, cpu_options)


def test_normalizations(cpu_options):
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    scale, bias = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    data = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)], [vi("x", F, x.shape)],
                 [vi("y", F, None)], 17, [const("s", scale), const("b", bias)])
    check_like_ort(data, {"x": x}, cpu_options, rtol=1e-4, atol=1e-5)
    for opset, n in ((18, 3), (21, 6)):
        gs, gb = scale[:n], bias[:n]
        data = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-4)],
                     [vi("x", F, x.shape)], [vi("y", F, None)], opset, [const("s", gs), const("b", gb)])
        check_like_ort(data, {"x": x}, cpu_options, rtol=1e-4, atol=1e-5)
    for axes in (None, [0, 2, 3], [1], [2, 3]):
        attrs = {} if axes is None else {"axes": axes}
        data = model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)], [vi("x", F, x.shape)],
                     [vi("y", F, None)], 13)
        check_like_ort(data, {"x": x}, cpu_options, rtol=1e-4, atol=1e-5)
    for size in (1, 2, 3, 4, 5):
        data = model([helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.01, beta=0.6, bias=2.0)],
                     [vi("x", F, x.shape)], [vi("y", F, None)], 13)
        if size % 2:
            check_like_ort(data, {"x": x}, cpu_options, rtol=1e-5, atol=1e-6)
        # onnxruntime takes odd sizes only, and ONNX's reference loops over the batch instead of the channels:
        # against the definition's window [c - floor((size-1)/2), c + ceil((size-1)/2)]
        sq = np.zeros_like(x)
        for c in range(x.shape[1]):
            sq[:, c] = (x[:, max(0, c - (size - 1) // 2):c + size // 2 + 1] ** 2).sum(axis=1)
        want = x / (2.0 + 0.01 / size * sq) ** 0.6
        np.testing.assert_allclose(hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": x})[0], want,
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("time_axis", [0, 1])
def test_reverse_sequence_lengths_per_run(time_axis, cpu_options):
    shape = [5, 3, 2] if time_axis == 0 else [3, 5, 2]
    data = model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=1 - time_axis)],
                 [vi("x", F, shape), vi("lens", I64, [3])], [vi("y", F, None)], 10)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = rng.standard_normal(shape).astype(np.float32)
    for lens in ([5, 1, 3], [0, 2, 5]):
        feeds = {"x": x, "lens": np.array(lens, np.int64)}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], want.run(None, feeds)[0])


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode, cpu_options):
    past = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    upd = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    data = model([helper.make_node("TensorScatter", ["past", "upd", "wi"], ["y"], mode=mode)],
                 [vi("past", F, past.shape), vi("upd", F, upd.shape), vi("wi", I64, [2])], [vi("y", F, None)], 24)
    check_like_ort(data, {"past": past, "upd": upd, "wi": np.array([1, 3 if mode == "linear" else 5], np.int64)},
                   cpu_options)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->", [(3, 4)]), ("i,i", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("abc,cd->abd", [(2, 3, 4), (4, 2)]), ("iij->j", [(3, 3, 2)]),
    ("ab,ab->a", [(3, 4), (3, 4)]), ("...i->...", [(2, 3, 4)]), ("ijk", [(2, 3, 4)]), ("kji", [(2, 3, 4)]),
    ("bi,ci->bc", [(3, 4), (5, 4)]), ("ij,ij->ij", [(3, 4), (1, 4)]),
])
def test_einsum(eq, shapes, cpu_options):
    names = [f"x{i}" for i in range(len(shapes))]
    data = model([helper.make_node("Einsum", names, ["y"], equation=eq)], [vi(n, F, s) for n, s in zip(names, shapes)],
                 [vi("y", F, None)], 12)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
    check_like_ort(data, feeds, cpu_options, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("image,block,attrs", [
    ([5, 5], [2, 2], {}), ([6, 7], [3, 2], {"strides": [2, 1], "pads": [1, 0, 1, 1], "dilations": [1, 2]}),
    ([3, 4, 5], [1, 2, 2], {"strides": [1, 2, 1]}),
])
def test_col2im(image, block, attrs, cpu_options):
    nd = len(image)
    st, pads, dil = attrs.get("strides", [1] * nd), attrs.get("pads", [0] * 2 * nd), attrs.get("dilations", [1] * nd)
    blocks = [(image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1) // st[d] + 1 for d in range(nd)]
    x = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(np.float32)
    data = model([helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], **attrs)], [vi("x", F, x.shape)],
                 [vi("y", F, None)], 18, [const("img", np.array(image, np.int64)), const("blk", np.array(block, np.int64))])
    if nd == 2:
        check_like_ort(data, {"x": x}, cpu_options, rtol=1e-5, atol=1e-6)
    else:  # onnxruntime's Col2Im is 2-D only: against ONNX's reference
        np.testing.assert_allclose(hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": x})[0],
                                   reference(data, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_max_unpool_of_onnxruntime_indices(cpu_options):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    pool = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])],
                 [vi("x", F, x.shape)], [vi("y", F, None), vi("i", I64, None)], 12)
    y, i = ort.InferenceSession(pool, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for with_shape in (False, True):
        inputs = ["y", "i"] + (["shape"] if with_shape else [])
        inits = [const("shape", np.array([2, 3, 7, 8], np.int64))] if with_shape else []
        data = model([helper.make_node("MaxUnpool", inputs, ["z"], kernel_shape=[2, 2], strides=[2, 2])],
                     [vi("y", F, y.shape), vi("i", I64, i.shape)], [vi("z", F, None)], 11, inits)
        if not with_shape:
            check_like_ort(data, {"y": y, "i": i}, cpu_options)
        else:  # onnxruntime reads the indices against output_shape; ONNX's node test and reference pad the inferred shape
            np.testing.assert_array_equal(hal.onnx.InferenceSession(data, cpu_options).run(None, {"y": y, "i": i})[0],
                                          reference(data, {"y": y, "i": i})[0])


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 3, 2, 4, 3]])
def test_affine_grid(align, size, cpu_options):
    nd = len(size) - 2
    theta = rng.standard_normal((2, nd, nd + 1)).astype(np.float32)
    data = model([helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)],
                 [vi("theta", F, theta.shape)], [vi("grid", F, None)], 20, [const("size", np.array(size, np.int64))])
    check_like_ort(data, {"theta": theta}, cpu_options, rtol=1e-5, atol=1e-6)


def test_det(cpu_options):
    for shape in ((4, 4), (2, 3, 5, 5), (3, 1, 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        data = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", F, shape)], [vi("y", F, None)], 11)
        check_like_ort(data, {"x": x}, cpu_options, rtol=1e-4, atol=1e-5)
    singular = np.array([[1, 2], [2, 4]], np.float32)
    data = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", F, [2, 2])], [vi("y", F, None)], 11)
    assert hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": singular})[0] == 0


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic, cpu_options):
    for out in (TensorProto.FLOAT, TensorProto.DOUBLE):
        data = model([helper.make_node(op, ["n"], ["w"], periodic=periodic, output_datatype=out)], [vi("n", I64, [])],
                     [vi("w", out, None)], 17)
        for n in (1, 8, 11):
            check_like_ort(data, {"n": np.array(n, np.int64)}, cpu_options, rtol=1e-6, atol=1e-7)


def test_tensor_ops_bad_inputs(cpu_options):
    def load(nodes, inputs, opset, inits=()):
        return hal.onnx.InferenceSession(model(nodes, inputs, [vi("y", F, None)], opset, inits), cpu_options)

    with pytest.raises(hal.Error, match=r"Einsum.*equation 'ij,jk->ik' has 2 terms for 1 inputs"):
        load([helper.make_node("Einsum", ["a"], ["y"], equation="ij,jk->ik")], [vi("a", F, [2, 2])], 12)
    with pytest.raises(hal.Error, match=r"Einsum.*term 'ijk' has 3 labels for an operand of rank 2"):
        load([helper.make_node("Einsum", ["a"], ["y"], equation="ijk->i")], [vi("a", F, [2, 2])], 12)
    with pytest.raises(hal.Error, match=r"OneHot.*values has shape \[3\] \(two elements: off, on\)"):
        load([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], [vi("i", I64, [2])], 11,
             [const("d", np.array(3, np.int64)), const("v", np.zeros(3, np.float32))])
    with pytest.raises(hal.Error, match=r"GroupNormalization.*num_groups 4 does not divide the 6 channels"):
        load([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4)], [vi("x", F, [1, 6, 2])], 21,
             [const("s", np.ones(6, np.float32)), const("b", np.ones(6, np.float32))])
    with pytest.raises(hal.Error, match=r"Col2Im.*input dim 2 is 5; the blocks give 16"):
        load([helper.make_node("Col2Im", ["x", "img", "blk"], ["y"])], [vi("x", F, [1, 4, 5])], 18,
             [const("img", np.array([5, 5], np.int64)), const("blk", np.array([2, 2], np.int64))])
    with pytest.raises(hal.Error, match=r"Det.*input has shape \[2, 3\] \(square matrices"):
        load([helper.make_node("Det", ["x"], ["y"])], [vi("x", F, [2, 3])], 11)
    sess = hal.onnx.InferenceSession(
        model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"])], [vi("x", F, [3, 2]), vi("lens", I64, [2])],
              [vi("y", F, None)], 10), cpu_options)
    with pytest.raises(hal.Error, match=r"ReverseSequence.*sequence_lens holds 4, outside \[0, 3\]"):
        sess.run(None, {"x": np.zeros((3, 2), np.float32), "lens": np.array([1, 4], np.int64)})


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align, cpu_options):
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(np.float32)  # reaches past the borders
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0.25, -0.5]]
    for opset, name in ((16, {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)), (20, mode)):
        data = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode=name, padding_mode=padding,
                                       align_corners=align)],
                     [vi("x", F, x.shape), vi("g", F, grid.shape)], [vi("y", F, None)], opset)
        if mode == "cubic" and padding == "border":
            # The operator's definition (ONNX's reference) moves an out-of-bound location onto the border
            # before taking its 4 taps; onnxruntime (as PyTorch) clamps each tap instead, which differs just
            # outside the image.
            got = hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": x, "g": grid})[0]
            as_20 = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding,
                                            align_corners=align)],
                          [vi("x", F, x.shape), vi("g", F, grid.shape)], [vi("y", F, None)], 20)
            np.testing.assert_allclose(got, reference(as_20, {"x": x, "g": grid})[0], rtol=1e-4, atol=1e-5)
        else:
            check_like_ort(data, {"x": x, "g": grid}, cpu_options, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_volumetric(mode, cpu_options):
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, 2, 3, 4, 3)).astype(np.float32)
    for padding in ("zeros", "border", "reflection"):
        data = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding)],
                     [vi("x", F, x.shape), vi("g", F, grid.shape)], [vi("y", F, None)], 20)
        check_like_ort(data, {"x": x, "g": grid}, cpu_options, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dtype, direction, cpu_options):
    info = np.iinfo(dtype)
    x = np.concatenate([rng.integers(info.min, info.max, 40, dtype=dtype, endpoint=True),
                        np.array([info.min, info.max, 0, 1, info.max // 2 + 1], dtype)])
    width = info.bits
    s = rng.integers(0, width, x.size).astype(dtype)
    if info.min < 0:
        s[:6] = np.array([-1, width, width + 3, width - 1, 0, -5], dtype)
    else:
        s[:3] = np.array([width, width - 1, 0], dtype)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    data = model([helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)],
                 [vi("x", elem, x.shape), vi("s", elem, s.shape)], [vi("y", elem, None)], 28)
    got = hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": x, "s": s})[0]
    np.testing.assert_array_equal(got, reference(data, {"x": x, "s": s})[0])


POOL_3D = [
    {"kernel_shape": [2, 2, 2]}, {"kernel_shape": [3, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 1, 0, 1]},
    {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1], "pads": [0, 1, 0, 1, 1, 1]},
    {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2, 2], "auto_pad": "SAME_UPPER"},
]


@pytest.mark.parametrize("op,attrs", [(op, a) for op in ("MaxPool", "AveragePool", "LpPool") for a in POOL_3D
                                      if not (op == "LpPool" and a.get("ceil_mode"))])  # LpPool refuses ceil_mode
def test_pooling_3d(op, attrs, cpu_options):
    attrs = dict(attrs)
    if op == "AveragePool":
        attrs["count_include_pad"] = 1 if "strides" in attrs and attrs["strides"][0] == 2 else 0
    x = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, x.shape)], [vi("y", F, None)], 19)
    check_like_ort(data, {"x": x}, cpu_options, rtol=1e-5, atol=1e-6)


def test_data_dependent_shapes(cpu_options):
    """NonZero, Compress and Unique: the output size is read while the model runs (staged), per run."""
    data = model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", F, [3, 4])], [vi("y", I64, None)], 13)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    for density in (0.0, 0.3, 0.7, 1.0, 0.3):
        x = (rng.random((3, 4)) < density).astype(np.float32) * rng.standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ort.InferenceSession(
            data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0])
    for axis in (None, 0, 1, -1):
        attrs = {} if axis is None else {"axis": axis}
        data = model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
                     [vi("x", F, [3, 4]), vi("c", TensorProto.BOOL, [3])], [vi("y", F, None)], 11)
        x = rng.standard_normal((3, 4)).astype(np.float32)
        for c in ([True, False, True], [False, False, False], [True, True, True]):
            check_like_ort(data, {"x": x, "c": np.array(c)}, cpu_options)
    for sorted_, axis in ((1, None), (0, None), (1, 0), (0, 1), (1, -1)):
        attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
        data = model([helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], **attrs)], [vi("x", F, [4, 3])],
                     [vi("y", F, None), vi("idx", I64, None), vi("inv", I64, None), vi("cnt", I64, None)], 11)
        x = rng.integers(0, 3, (4, 3)).astype(np.float32)
        x[2] = x[0]
        check_like_ort(data, {"x": x}, cpu_options)


def _counts(sess):
    """Stage translations the session keeps (explain()) and the process's compile calls."""
    kept = [line for line in sess.explain().splitlines() if "stage translations kept" in line]
    c = hal.onnx.compile_counters()
    return kept, c["graph_compiles"] + c["memory_hits"] + c["disk_hits"]


def test_data_dependent_counts_replan_without_translating(cpu_options):
    """x[x > t] as exporters write it (NonZero, Transpose, GatherND): a new count of true elements binds
    the next stage's symbol; nothing is translated or compiled again (counts 0 and 1 stay concrete)."""
    nodes = [helper.make_node("Greater", ["x", "t"], ["m"]), helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["v"]), helper.make_node("Relu", ["v"], ["r"]),
             helper.make_node("ReduceSum", ["r"], ["total"], keepdims=0),
             helper.make_node("Mul", ["r", "total"], ["y"])]
    data = model(nodes, [vi("x", F, [6, 5]), vi("t", F, [])], [vi("y", F, None), vi("nz", I64, None)], 18)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((6, 5)).astype(np.float32)
    order = np.sort(x.ravel())

    def check(count):
        t = np.array(-np.inf if count == 30 else order[-count - 1], np.float32)
        got, want = sess.run(None, {"x": x, "t": t}), ref.run(None, {"x": x, "t": t})
        assert got[1].shape == (2, count)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)

    for count in (0, 1, 2, 5):
        check(count)
    before = _counts(sess)
    for count in (3, 17, 30, 4, 2, 29, 11):
        check(count)
    assert _counts(sess) == before  # the same translations, no compile() call at all
    for count in (1, 0):
        check(count)


def test_data_dependent_counts_in_a_row_stay_symbols(cpu_options):
    """A count taken from values whose own size was a count (x[x > t1], then Compress of that by > t2): both
    are symbols, so new counts of either translate nothing once each kind of stage exists."""
    nodes = [helper.make_node("Greater", ["x", "t1"], ["m1"]), helper.make_node("NonZero", ["m1"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["i1"], perm=[1, 0]), helper.make_node("GatherND", ["x", "i1"], ["v"]),
             helper.make_node("Relu", ["v"], ["r"]), helper.make_node("Greater", ["r", "t2"], ["m2"]),
             helper.make_node("Compress", ["r", "m2"], ["c"], axis=0), helper.make_node("Add", ["c", "c"], ["z"])]
    data = model(nodes, [vi("x", F, [8, 8]), vi("t1", F, []), vi("t2", F, [])], [vi("z", F, None), vi("r", F, None)], 18)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    local = np.random.default_rng(5)

    def run(n):
        for _ in range(n):
            feeds = {"x": local.standard_normal((8, 8)).astype(np.float32),
                     "t1": np.array(local.uniform(-1.5, 0.5), np.float32), "t2": np.array(local.uniform(0.2, 1.0), np.float32)}
            for g, w in zip(sess.run(None, feeds), ref.run(None, feeds)):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)

    run(10)
    before = _counts(sess)
    run(30)  # counts of 12..60 and 2..30: new values of both, no new translation
    assert _counts(sess) == before


def _against_onnxruntime(data, cpu_options, rtol=0.0, atol=0.0):
    """(session, check): check(feeds) runs DATA on HAL and onnxruntime and compares every output (shape,
    dtype, values within RTOL/ATOL; exact by default)."""
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])

    def check(feeds):
        for g, w in zip(sess.run(None, feeds), ref.run(None, feeds)):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)

    return sess, check


def _compress_then_slice(starts, ends, steps=None, rows=8):
    """Compress of x [ROWS, 2] by c, then a Slice of the kept rows."""
    inputs = ["k", "s", "e"] + (["a", "st"] if steps else [])
    inits = [const("s", np.array(starts, np.int64)), const("e", np.array(ends, np.int64))]
    if steps:
        inits += [const("a", np.array([0], np.int64)), const("st", np.array(steps, np.int64))]
    nodes = [helper.make_node("Compress", ["x", "c"], ["k"], axis=0), helper.make_node("Slice", inputs, ["y"])]
    return model(nodes, [vi("x", F, [rows, 2]), vi("c", TensorProto.BOOL, [rows])], [vi("y", F, None)], 18, inits)


@pytest.mark.parametrize("first", [2, 6], ids=["first count 2", "first count 6"])
def test_data_dependent_counts_a_slice_of_the_first_rows_is_guarded(cpu_options, first):
    """Compress then a Slice of the first 3 rows: the translation takes the count read back as a symbol and
    the Slice's bounds against the count it was made with, guarded: [0, 3) is the same three rows for every
    count >= 3, the whole count for every count <= 3. A count outside the guard is another translation (at
    most a few per stage), so every count >= 2 runs on two translations in either order, and each run
    matches onnxruntime (counts 0 and 1 stay concrete)."""
    data = _compress_then_slice([0], [3])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((8, 2)).astype(np.float32)

    def check(count):
        feeds = {"x": x, "c": np.arange(8) < count}
        got, want = sess.run(None, feeds)[0], ref.run(None, feeds)[0]
        assert got.shape == want.shape == (min(count, 3), 2)
        np.testing.assert_array_equal(got, want)

    for count in (first, 8 - first, 0, 1):  # both guarded translations exist, and the concrete ones
        check(count)
    before = _counts(sess)
    for count in (3, 7, 2, 5, 8, 3, 4, 2):
        check(count)
    assert _counts(sess) == before  # the same translations, no compile() call at all


@pytest.mark.parametrize("starts,ends,steps", [([1], [3], None), ([0], [6], [2]), ([2], [5], [2]), ([1], [100], None),
                                               ([-2], [100], None), ([0], [-1], None), ([4], [2], None),
                                               ([3], [3], None)])
def test_data_dependent_counts_sliced_match_onnxruntime(cpu_options, starts, ends, steps):
    """Slices of a count read back, with bounds inside and past it, negative and empty: guarded symbols where
    the bounds allow, else one translation per count; every count matches onnxruntime."""
    _, check = _against_onnxruntime(_compress_then_slice(starts, ends, steps), cpu_options)
    x = rng.standard_normal((8, 2)).astype(np.float32)
    for count in (5, 2, 8, 0, 3, 1, 6, 4, 7, 2, 5):
        check({"x": x, "c": np.arange(8) < count})


def test_reshape_to_a_computed_target_then_a_slice_of_its_dims(cpu_options):
    """A Slice of a view's symbolic dim (a Reshape to a computed target, then its first 2 rows): guarded like
    a count's, so new targets of the same kind translate nothing; each matches onnxruntime."""
    data = _reshape_to_computed([helper.make_node("Slice", ["y", "s", "e"], ["z"])], outputs=[vi("z", F, None)],
                                inits=[const("s", np.array([0], np.int64)), const("e", np.array([2], np.int64))])
    sess, compare = _against_onnxruntime(data, cpu_options)
    x = rng.standard_normal(24).astype(np.float32)

    def check(target):
        compare({"x": x, "shape": np.array(target, np.float32)})

    check([2, 3, 4])
    before = _counts(sess)
    for target in ([3, 2, 4], [4, 3, 2], [6, 2, 2], [2, 6, 2]):
        check(target)
    assert _counts(sess) == before
    check([1, 4, 6])


@pytest.mark.parametrize("axis,largest", [(1, 1), (0, 0), (-1, 0)])
def test_topk_with_a_computed_k_replans_without_translating(cpu_options, axis, largest):
    """TopK whose K the model computes (cast from an input): the first K of the sort are a count of rows read
    back, a symbol of the next stage for K >= 2, so a new K translates nothing; every K matches onnxruntime
    (ties: the lower index first), and a K past the axis is INVALID_ARGUMENT naming the node, with no output."""
    nodes = [helper.make_node("Cast", ["kf"], ["k"], to=TensorProto.INT64),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)]
    data = model(nodes, [vi("x", F, [6, 9]), vi("kf", F, [1])], [vi("v", F, None), vi("i", I64, None)], 18)
    sess, compare = _against_onnxruntime(data, cpu_options)
    x = rng.integers(-3, 4, (6, 9)).astype(np.float32)  # ties
    n = x.shape[axis]

    def check(k):
        compare({"x": x, "kf": np.array([k], np.float32)})

    for k in (3, 0, 1):
        check(k)
    before = _counts(sess)
    for k in (2, n, 5, 4, 2):
        check(k)
    assert _counts(sess) == before  # the same translations, no compile() call at all
    with pytest.raises(RuntimeError, match=rf"INVALID_ARGUMENT: .*node 1 .*TopK.*K is {n + 1} but axis {axis % 2} has {n}"):
        sess.run(None, {"x": x, "kf": np.array([n + 1], np.float32)})
    with pytest.raises(RuntimeError, match=r"INVALID_ARGUMENT: .*node 1 .*TopK.*K is -1"):
        sess.run(None, {"x": x, "kf": np.array([-1], np.float32)})
    check(3)  # and the session goes on


def _cast_then(node, extra_inputs=(), shape_from=(2,), extra_inits=(), out=F):
    """A model whose integer input "k" to NODE is cast from the float input "v" (so computed while it runs)."""
    nodes = [helper.make_node("Cast", ["v"], ["k"], to=TensorProto.INT64), node]
    return model(nodes, [*extra_inputs, vi("v", F, list(shape_from))], [vi("y", out, None)], 18, list(extra_inits))


_SIZED = {
    "range": (lambda: _cast_then(helper.make_node("Range", ["s", "k", "d"], ["y"]), shape_from=(),
                                 extra_inits=[const("s", np.array(3, np.int64)), const("d", np.array(2, np.int64))], out=I64),
              lambda v: {"v": np.array(v, np.float32)}, [9, 14, 12, 20, 25, 11, 14], [3, 4, -4]),
    "range float": (lambda: model([helper.make_node("Range", ["s", "l", "d"], ["y"]), ],
                                  [vi("l", F, [])], [vi("y", F, None)], 18,
                                  [const("s", np.array(0.5, np.float32)), const("d", np.array(0.25, np.float32))]),
                    lambda v: {"l": np.array(v, np.float32)}, [], []),
    "tile": (lambda: _cast_then(helper.make_node("Tile", ["x", "k"], ["y"]), [vi("x", F, [2, 3])]),
             lambda v: {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "v": np.array(v, np.float32)},
             [[2, 3], [1, 4], [3, 1], [2, 2], [5, 2], [2, 3]], [[1, 1], [0, 2], [1, 0]]),
    "expand": (lambda: _cast_then(helper.make_node("Expand", ["x", "k"], ["y"]), [vi("x", F, [3, 1])], shape_from=(3,)),
               lambda v: {"x": np.arange(3, dtype=np.float32).reshape(3, 1), "v": np.array(v, np.float32)},
               [[2, 3, 4], [5, 3, 2], [3, 3, 6], [2, 3, 2], [2, 3, 4]], [[1, 1, 1], [2, 1, 0], [1, 3, 1], [4, 1, 5]]),
    "constant of shape": (lambda: _cast_then(helper.make_node("ConstantOfShape", ["k"], ["y"],
                                                              value=helper.make_tensor("c", TensorProto.INT32, [1], [7])), out=TensorProto.INT32),
                          lambda v: {"v": np.array(v, np.float32)}, [[2, 3], [4, 5], [3, 3], [2, 3]], [[0, 4], [1, 1], [1, 6]]),
    "constant of shape bool": (lambda: _cast_then(helper.make_node("ConstantOfShape", ["k"], ["y"],
                                                                   value=helper.make_tensor("c", TensorProto.BOOL, [1], [1])),
                                                  out=TensorProto.BOOL),
                               lambda v: {"v": np.array(v, np.float32)}, [[2, 3], [4, 5], [3, 3]], [[0, 4], [1, 1]]),
    "expand bool": (lambda: _cast_then(helper.make_node("Expand", ["x", "k"], ["y"]), [vi("x", TensorProto.BOOL, [1, 3])],
                                       out=TensorProto.BOOL),
                    lambda v: {"x": np.array([[True, False, True]]), "v": np.array(v, np.float32)},
                    [[2, 3], [4, 3], [5, 3], [3, 3]], [[1, 3], [1, 1]]),
    **{f"pad {mode}": (lambda mode=mode: _cast_then(helper.make_node("Pad", ["x", "k", "c"], ["y"], mode=mode),
                                                  [vi("x", F, [3, 4])], shape_from=(4,),
                                                  extra_inits=[const("c", np.array(1.5, np.float32))]),
                       lambda v: {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "v": np.array(v, np.float32)},
                       [[1, 2, 1, 0], [0, 1, 2, 2], [2, 0, 0, 3], [1, 1, 1, 1], [0, 1, 2, 2]],
                       [[0, 0, 0, 0], [-1, 0, -1, 0], [-2, 0, 0, 0]])
       for mode in ("constant", "edge", "reflect", "wrap")},
}


@pytest.mark.parametrize("name", [n for n in _SIZED if _SIZED[n][2]])
def test_sizes_computed_at_run_time_replan_without_translating(cpu_options, name):
    """Range's limit, Tile's repeats, Expand's and ConstantOfShape's shape computed while the model runs: the first
    value is translated as it is; once another comes, the sizes (>= 2) are symbols of the next stage, so later
    values translate nothing. Sizes 0 and 1 are their own translations. Every value matches onnxruntime."""
    make, feeds, varying, small = _SIZED[name]
    sess, check = _against_onnxruntime(make(), cpu_options)
    for v in varying[:2] + small:
        check(feeds(v))
    before = _counts(sess)
    for v in varying[2:]:
        check(feeds(v))
    assert _counts(sess) == before  # the same translations, no compile() call at all
    for v in small:
        check(feeds(v))


def test_range_of_graph_inputs_matches_onnxruntime(cpu_options):
    """Range whose limit is a float graph input (bound per value): float steps as onnxruntime's."""
    make, feeds, _, _ = _SIZED["range float"]
    _, check = _against_onnxruntime(make(), cpu_options, rtol=1e-6)
    for v in (3.0, 0.5, 2.6, -1.0, 7.1):
        check(feeds(v))


@pytest.mark.parametrize("name,bad,message,good,shape", [
    ("tile", [2, -1], r"Tile.*repeats 'k' has a negative element", [2, 2], (4, 6)),
    ("expand", [2, 4, 4], r"Expand.*broadcast", [2, 3, 3], (2, 3, 3)),
    ("constant of shape", [3, -2], r"ConstantOfShape.*element 1 = -2", [3, 2], (3, 2)),
    ("pad constant", [-2, 0, -2, 0], r"Pad.*pads 'k' remove more than the input has", [1, 1, 1, 1], (5, 6)),
])
def test_sizes_computed_at_run_time_bad_values(cpu_options, name, bad, message, good, shape):
    """A negative Tile repeat, an Expand shape that does not broadcast, a negative ConstantOfShape dim, pads
    removing more than the input has: INVALID_ARGUMENT naming the node, once the sizes are symbols too; the
    session goes on."""
    make, feeds, varying, _ = _SIZED[name]
    sess = hal.onnx.InferenceSession(make(), cpu_options)
    for v in varying[:3]:
        sess.run(None, feeds(v))
    with pytest.raises(RuntimeError, match=r"INVALID_ARGUMENT: .*node 1 .*" + message):
        sess.run(None, feeds(bad))
    assert sess.run(None, feeds(good))[0].shape == shape


def test_range_computed_with_delta_0(cpu_options):
    """A computed Range delta of 0: INVALID_ARGUMENT naming the node, after other deltas made it symbolic."""
    data = model([helper.make_node("Cast", ["v"], ["k"], to=TensorProto.FLOAT),
                  helper.make_node("Range", ["s", "l", "k"], ["y"])],
                 [vi("s", F, []), vi("l", F, []), vi("v", TensorProto.INT64, [])], [vi("y", F, None)], 18)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ok = {"s": np.array(0, np.float32), "l": np.array(5, np.float32), "v": np.array(2, np.int64)}
    sess.run(None, ok)
    sess.run(None, ok | {"v": np.array(1, np.int64)})
    with pytest.raises(RuntimeError, match=r"INVALID_ARGUMENT: .*node 1 .*Range.*delta 0"):
        sess.run(None, ok | {"v": np.array(0, np.int64)})
    assert sess.run(None, ok)[0].shape == (3,)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_on_the_device_replans_without_translating(cpu_options, sorted_):
    """Unique without an axis runs on the device: its count of distinct values is a symbol of the next stage,
    so new input values (other counts) translate nothing; every output matches onnxruntime, ties, one group
    and all-distinct inputs included."""
    data = model([helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], sorted=sorted_)], [vi("x", F, [3, 4])],
                 [vi("y", F, None), vi("idx", I64, None), vi("inv", I64, None), vi("cnt", I64, None)], 11)
    sess, check = _against_onnxruntime(data, cpu_options)
    local = np.random.default_rng(11)
    check({"x": local.integers(0, 5, (3, 4)).astype(np.float32)})
    check({"x": np.full((3, 4), 2.5, np.float32)})  # one group: its own translation
    before = _counts(sess)
    for high in (3, 7, 12, 2, 100, 5):
        check({"x": local.integers(0, high, (3, 4)).astype(np.float32)})
    check({"x": np.arange(12, dtype=np.float32)[::-1].reshape(3, 4).copy()})
    assert _counts(sess) == before
    check({"x": np.full((3, 4), -1.0, np.float32)})


_FED = {
    "reshape": (model([helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
                      [vi("x", F, [24]), vi("shape", I64, [3])], [vi("y", F, None)], 18),
                lambda v: {"x": np.linspace(-1, 1, 24, dtype=np.float32), "shape": np.array(v, np.int64)},
                [[2, 3, 4], [4, 3, 2], [3, 2, 4], [2, 2, 6], [6, -1, 2], [3, 4, 2]]),
    "range": (model([helper.make_node("Range", ["s", "l", "d"], ["y"])], [vi("l", I64, [])], [vi("y", I64, None)], 18,
                    [const("s", np.array(1, np.int64)), const("d", np.array(3, np.int64))]),
              lambda v: {"l": np.array(v, np.int64)}, [10, 20, 14, 31, 8, 12]),
    "tile": (model([helper.make_node("Tile", ["x", "r"], ["y"])], [vi("x", F, [2, 3]), vi("r", I64, [2])],
                   [vi("y", F, None)], 18),
             lambda v: {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "r": np.array(v, np.int64)},
             [[2, 3], [3, 2], [2, 2], [4, 5], [2, 3]]),
    "topk": (model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", F, [3, 9]), vi("k", I64, [1])],
                   [vi("v", F, None), vi("i", I64, None)], 18),
             lambda v: {"x": np.tile(np.arange(9, dtype=np.float32) % 4, (3, 1)), "k": np.array([v], np.int64)},
             [3, 5, 2, 9, 4]),
}


@pytest.mark.parametrize("name", list(_FED))
def test_values_fed_as_inputs_replan_once_they_vary(cpu_options, name):
    """A Reshape target, a Range limit, Tile repeats, a TopK K fed as graph inputs: the first value is a
    translation bound to it (one graph, as fast as a model without the input); once a second value comes,
    the model reads those inputs when it runs, so their sizes are symbols and later values translate
    nothing; a value seen first stays on its bound translation. Every run matches onnxruntime."""
    data, feeds, values = _FED[name]
    sess, check = _against_onnxruntime(data, cpu_options)
    for v in values[:3]:
        check(feeds(v))
    before = _counts(sess)
    for v in values[3:] + values[:1]:
        check(feeds(v))
    assert _counts(sess)[1] == before[1]  # no compile() call at all


def _reshape_to_computed(extra_nodes=(), out="y", outputs=None, inits=()):
    """x [24] reshaped to a target cast from the float input "shape" [3] (so computed on the device and
    read back), then relu and EXTRA_NODES."""
    nodes = [helper.make_node("Cast", ["shape"], ["target"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "target"], ["r"]), helper.make_node("Relu", ["r"], ["y"]), *extra_nodes]
    return model(nodes, [vi("x", F, [24]), vi("shape", F, [3])], outputs or [vi(out, F, None)], 18, list(inits))


def test_reshape_to_a_computed_target_replans_without_translating(cpu_options):
    """Reshape to a target the model computes: the next stage views x's bytes in that shape, its dims >= 2
    symbols, so a new target of the same rank (and the same dims below 2) binds them: nothing is translated or
    compiled again. -1 and 0 resolve against x's shape when the model runs; a target whose element count
    differs is INVALID_ARGUMENT naming the node, with no output."""
    data = _reshape_to_computed([helper.make_node("ReduceSum", ["y", "axes"], ["s"], keepdims=1),
                                 helper.make_node("Mul", ["y", "s"], ["z"])], outputs=[vi("z", F, None)],
                                inits=[const("axes", np.array([2], np.int64))])
    sess, compare = _against_onnxruntime(data, cpu_options, rtol=1e-5, atol=1e-6)
    x = rng.standard_normal(24).astype(np.float32)

    def check(target):
        compare({"x": x, "shape": np.array(target, np.float32)})

    for target in ([2, 3, 4], [1, 4, 6], [4, 6, 1]):
        check(target)
    before = _counts(sess)
    for target in ([3, 2, 4], [2, 2, 6], [6, 2, 2], [-1, 3, 2], [3, -1, 2], [2, 12, 1]):
        check(target)
    assert _counts(sess) == before  # the same translations, no compile() call at all
    for target in ([1, 24, 1], [24, 1, 1]):  # other dims below 2: their own translations, still right
        check(target)
    with pytest.raises(RuntimeError, match=r"INVALID_ARGUMENT: Reshape's target shape \('target'\) \(node 1 .*cannot "
                                           r"reshape \[24\] \(24 elements\) to \[5, 2, 2\]"):
        sess.run(None, {"x": x, "shape": np.array([5, 2, 2], np.float32)})
    with pytest.raises(RuntimeError, match="dim 1 is 0 \\(copy\\) but the input has rank 1"):
        sess.run(None, {"x": x, "shape": np.array([2, 0, -1], np.float32)})
    with pytest.raises(RuntimeError, match="two dims are -1"):
        sess.run(None, {"x": x, "shape": np.array([-1, -1, 2], np.float32)})
    check([4, 3, 2])  # and the session goes on


def test_reshape_to_a_computed_target_then_an_operator_needing_its_dims(cpu_options):
    """After the reshape, a MatMul with a [4, 5] weight needs the last dim to be 4: with symbols the rules
    cannot know it, so the session falls back to concrete targets for this model (remembered), and matches
    onnxruntime; a target that breaks the MatMul is its error, naming the node."""
    w = rng.standard_normal((4, 5)).astype(np.float32)
    data = _reshape_to_computed([helper.make_node("MatMul", ["y", "w"], ["z"])], outputs=[vi("z", F, None)],
                                inits=[const("w", w)])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = rng.standard_normal(24).astype(np.float32)
    for target in ([2, 3, 4], [3, 2, 4], [6, 1, 4], [1, 6, 4]):
        feeds = {"x": x, "shape": np.array(target, np.float32)}
        got, want = sess.run(None, feeds)[0], ref.run(None, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="INVALID_ARGUMENT"):
        sess.run(None, {"x": x, "shape": np.array([2, 4, 3], np.float32)})


def test_grid_sample_volumetric_on_opencl(configs):
    """On the OpenCL plugin alone, the volumetric linear GridSample's graph splits into groups the plugin
    compiles and op-by-op nodes that feed each other both ways (a group not connected inside): the core
    splits such groups until they order (compile refused it before: "the groups cannot be ordered")."""
    opts = hal.onnx.SessionOptions()
    opts.hal_config = str(configs["opencl"])
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, 2, 3, 4, 3)).astype(np.float32)
    for align in (0, 1):
        data = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode="linear", align_corners=align)],
                     [vi("x", F, x.shape), vi("g", F, grid.shape)], [vi("y", F, None)], 20)
        check_like_ort(data, {"x": x, "g": grid}, opts, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("AveragePool", {"kernel_shape": [3, 2], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "dilations": [2, 1], "strides": [2, 1], "pads": [1, 0, 2, 1],
                     "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                     "ceil_mode": 1, "count_include_pad": 0}),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 2], "strides": [1, 2, 1]}),
    ("LpPool", {"kernel_shape": [2, 3], "dilations": [2, 2], "p": 3}),
])
def test_dilated_pooling(op, attrs, cpu_options):
    rank = len(attrs["kernel_shape"])
    shape = [2, 3, 7, 8] if rank == 2 else [1, 2, 6, 5, 7]
    x = rng.standard_normal(shape).astype(np.float32)
    data = model([helper.make_node(op, ["x"], ["y"], **attrs)], [vi("x", F, shape)], [vi("y", F, None)], 19)
    check_like_ort(data, {"x": x}, cpu_options, rtol=1e-5, atol=1e-5)
