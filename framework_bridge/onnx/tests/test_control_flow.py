"""If, Loop and Scan against onnxruntime: subgraphs translated through the same table, conditions and trip
counts known at load, bound per run (graph inputs) or computed while the model runs (the model runs in
stages: the graph up to the decision runs, the value is read back, the rest is translated for it and cached),
torch.cond exported by torch.onnx.export at two batch sizes, and the bad inputs of issue 33 (an undefined outer
value, a negative trip count, a body changing a loop-carried type, a run-time Reshape whose element count
differs) as errors naming node, operator and what is wrong, the session usable afterwards."""
import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import hal
import hal.onnx
from test_opset_versions import check_like_ort, model, vi

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL
rng = np.random.default_rng(5)


def ort_run(data, feeds):
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def if_model(cond_node=None, opset=19):
    """y = If(cond, then: x * 2 ([2, 3]), else: x summed over dim 1 ([2])) — the branches differ in shape."""
    two = helper.make_tensor("two", F, [], [2.0])
    then_g = branch("then", [helper.make_node("Mul", ["x", "two"], ["t_out"])], [vi("t_out", F, None)])
    axes = helper.make_tensor("ax", I64, [1], [1])
    else_g = branch("else", [helper.make_node("ReduceSum", ["x", "ax"], ["e_out"], keepdims=0)], [vi("e_out", F, None)])
    nodes = ([cond_node] if cond_node else []) + [helper.make_node("If", ["c"], ["y"], then_branch=then_g,
                                                                   else_branch=else_g, name="choose")]
    inputs = [vi("x", F, [2, 3])] + ([] if cond_node else [vi("c", B, [])])
    return model(nodes, inputs, [vi("y", F, None)], opset, [two, axes])


def test_if_on_a_graph_input(cpu_options):
    data = if_model()
    sess = hal.onnx.InferenceSession(data, cpu_options)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        got, want = sess.run(None, feeds)[0], ort_run(data, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_if_on_a_computed_condition_runs_in_stages(cpu_options):
    data = model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  helper.make_node("Greater", ["s", "zero"], ["c"]),
                  helper.make_node("If", ["c"], ["y"], name="choose",
                                   then_branch=branch("then", [helper.make_node("Mul", ["x", "two"], ["t_out"])],
                                                      [vi("t_out", F, None)]),
                                   else_branch=branch("else", [helper.make_node("Neg", ["x"], ["e_out"])],
                                                      [vi("e_out", F, None)]))],
                 [vi("x", F, ["n", 3])], [vi("y", F, None)], 19,
                 [helper.make_tensor("zero", F, [], [0.0]), helper.make_tensor("two", F, [], [2.0])])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    for n, sign in ((2, 1), (2, -1), (5, 1), (5, -1), (2, 1)):
        x = (np.abs(rng.standard_normal((n, 3))) * sign).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ort_run(data, {"x": x})[0], rtol=1e-6)
    text = sess.explain()
    assert "runs in stages" in text and "3 stage translations kept" in text


@pytest.mark.parametrize("batch", [1, 4])
def test_torch_cond_export(batch, cpu_options, tmp_path):
    """torch.cond with a data-dependent predicate, exported by the dynamo exporter (If at opset 20)."""
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda v: self.lin(v).relu(), lambda v: (self.lin(v) * 2).tanh(), (x,))

    net = Net().eval()
    path = tmp_path / "cond.onnx"
    torch.onnx.export(net, (torch.randn(3, 4),), dynamo=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},)).save(str(path))
    sess = hal.onnx.InferenceSession(str(path), cpu_options)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for sign in (1.0, -1.0):
        x = (np.abs(rng.standard_normal((batch, 4))) * sign).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
        with torch.no_grad():
            np.testing.assert_allclose(got, net(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


def counting_body(with_scan=True):
    """carried: acc (float [2]); acc' = acc * 1.5 + i; cond' = sum(acc') < limit; scan out: acc'."""
    nodes = [helper.make_node("Cast", ["i"], ["i_f"], to=F), helper.make_node("Mul", ["acc", "k"], ["m"]),
             helper.make_node("Add", ["m", "i_f"], ["acc_out"]),
             helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
             helper.make_node("Less", ["s", "limit"], ["cond_out"])]
    outs = [vi("cond_out", B, []), vi("acc_out", F, None)]
    if with_scan:
        nodes.append(helper.make_node("Identity", ["acc_out"], ["scan_out"]))
        outs.append(vi("scan_out", F, None))
    return helper.make_graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc", F, [2])], outs,
                             initializer=[helper.make_tensor("k", F, [], [1.5])])


def test_loop_with_a_static_trip_count(cpu_options):
    data = model([helper.make_node("Loop", ["M", "", "a0"], ["a", "trace"], body=counting_body())],
                 [vi("a0", F, [2])], [vi("a", F, None), vi("trace", F, None)], 13,
                 [helper.make_tensor("M", I64, [], [6]), helper.make_tensor("limit", F, [], [1e9])])
    check_like_ort(data, {"a0": np.array([1.0, -2.0], np.float32)}, cpu_options)


def test_loop_trip_count_as_input_and_data_dependent_condition(cpu_options):
    data = model([helper.make_node("Loop", ["M", "c0", "a0"], ["a", "trace"], body=counting_body(), name="while")],
                 [vi("M", I64, []), vi("c0", B, []), vi("a0", F, [2])], [vi("a", F, None), vi("trace", F, None)], 16,
                 [helper.make_tensor("limit", F, [], [40.0])])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    for m, a0 in ((10, [1.0, 2.0]), (3, [1.0, 2.0]), (10, [20.0, 30.0]), (10, [1.0, 2.0])):
        feeds = {"M": np.array(m, np.int64), "c0": np.array(True), "a0": np.array(a0, np.float32)}
        for g, w in zip(sess.run(None, feeds), ort_run(data, feeds)):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_trip_count_computed_from_a_shape(cpu_options):
    """M = the first dim of x (a run-time dim: the value is read while the model runs)."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["acc_out"]),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                             [vi("i", I64, []), vi("cond_in", B, []), vi("acc", F, [])],
                             [vi("cond_out", B, []), vi("acc_out", F, [])],
                             initializer=[helper.make_tensor("one", F, [], [1.0])])
    data = model([helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Gather", ["shape", "zero"], ["M"]),
                  helper.make_node("Loop", ["M", "", "a0"], ["count"], body=body)],
                 [vi("x", F, ["n", 2])], [vi("count", F, None)], 13,
                 [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("a0", F, [], [0.0])])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    for n in (1, 4, 7):
        assert sess.run(None, {"x": np.zeros((n, 2), np.float32)})[0] == n


@pytest.mark.parametrize("directions", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_axes_and_directions(directions, cpu_options):
    """A running sum over axis 1 of x ([2, 5, 3]); the scan output stacked along axis 1 or 0."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y_t"])], "body",
                             [vi("s", F, [2, 3]), vi("x_t", F, [2, 3])], [vi("s_out", F, [2, 3]), vi("y_t", F, [2, 3])])
    data = model([helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                                   scan_input_directions=[directions[0]], scan_output_axes=[-2],
                                   scan_output_directions=[directions[1]])],
                 [vi("s0", F, [2, 3]), vi("x", F, [2, 5, 3])], [vi("s", F, None), vi("y", F, None)], 16)
    check_like_ort(data, {"s0": rng.standard_normal((2, 3)).astype(np.float32),
                          "x": rng.standard_normal((2, 5, 3)).astype(np.float32)}, cpu_options)


def test_control_flow_bad_inputs(cpu_options):
    # A subgraph reading an outer value that does not exist: at load, naming the branch and the node.
    bad_branch = branch("then", [helper.make_node("Mul", ["x", "nowhere"], ["t_out"], name="uses_missing")],
                        [vi("t_out", F, None)])
    data = model([helper.make_node("If", ["c"], ["y"], then_branch=bad_branch, else_branch=bad_branch, name="pick")],
                 [vi("x", F, [2]), vi("c", B, [])], [vi("y", F, None)], 19)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    with pytest.raises(hal.Error, match=r"then_branch of node 0 'pick' \(If.*node 0 'uses_missing' \(Mul.*reads 'nowhere'"):
        sess.run(None, {"x": np.ones(2, np.float32), "c": np.array(True)})
    # A negative trip count (given at run time).
    data = model([helper.make_node("Loop", ["M", "", "a0"], ["a"], body=counting_body(False), name="neg")],
                 [vi("M", I64, []), vi("a0", F, [2])], [vi("a", F, None)], 13, [helper.make_tensor("limit", F, [], [9.0])])
    sess = hal.onnx.InferenceSession(data, cpu_options)
    with pytest.raises(hal.Error, match=r"node 0 'neg' \(Loop.*the trip count M is negative \(-2\)"):
        sess.run(None, {"M": np.array(-2, np.int64), "a0": np.ones(2, np.float32)})
    np.testing.assert_allclose(sess.run(None, {"M": np.array(2, np.int64), "a0": np.ones(2, np.float32)})[0],
                               ort_run(data, {"M": np.array(2, np.int64), "a0": np.ones(2, np.float32)})[0])
    # A body that changes a loop-carried value's type.
    body = helper.make_graph([helper.make_node("Cast", ["acc"], ["acc_out"], to=I64),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                             [vi("i", I64, []), vi("cond_in", B, []), vi("acc", F, [2])],
                             [vi("cond_out", B, []), vi("acc_out", I64, None)])
    data = model([helper.make_node("Loop", ["M", "", "a0"], ["a"], body=body, name="retype")], [vi("a0", F, [2])],
                 [vi("a", F, None)], 13, [helper.make_tensor("M", I64, [], [3])])
    with pytest.raises(hal.Error, match=r"node 0 'retype' \(Loop.*changes loop-carried value 0 \('a0'\) from float32 to int64"):
        hal.onnx.InferenceSession(data, cpu_options)
    # A Reshape to a shape computed while the model runs, whose element count differs.
    data = model([helper.make_node("Cast", ["f"], ["t"], to=I64), helper.make_node("Reshape", ["x", "t"], ["y"], name="rs")],
                 [vi("x", F, [2, 3]), vi("f", F, [2])], [vi("y", F, None)], 19)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(hal.Error, match=r"node 1 'rs' \(Reshape.*\[2, 3\].*\[5, 2\]"):
        sess.run(None, {"x": x, "f": np.array([5, 2], np.float32)})
    got = sess.run(None, {"x": x, "f": np.array([3, 2], np.float32)})[0]
    np.testing.assert_array_equal(got, x.reshape(3, 2))
