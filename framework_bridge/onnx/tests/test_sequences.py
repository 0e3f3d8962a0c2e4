"""Sequences against onnxruntime: SequenceConstruct / Empty / Insert / Erase / At / Length, SplitToSequence,
ConcatFromSequence, SequenceMap, sequences through If and Loop, sequence graph inputs fed as lists (the
translation kept per element count and shapes) and sequence outputs returned as lists. Bad input: a position
out of range is an error naming node, operator, the position and the length."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import hal
import hal.onnx
from test_opset_versions import model, vi

F = TensorProto.FLOAT
I64 = TensorProto.INT64
rng = np.random.default_rng(9)


def seq_vi(name, elem=F, shape=None):
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def same(got, want):
    assert type(got) is type(want) or (isinstance(got, list) and isinstance(want, list))
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def check(data, feeds, options):
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = hal.onnx.InferenceSession(data, options).run(None, feeds)
    same(got, want)


def test_construct_insert_erase_at_length(cpu_options):
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "b", "minus_one"], ["s2"]),   # before the last
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),
             helper.make_node("SequenceAt", ["s3", "minus_one"], ["last"]),
             helper.make_node("SequenceLength", ["s3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["joined"], axis=0),
             helper.make_node("ConcatFromSequence", ["s3"], ["stacked"], axis=-1, new_axis=1)]
    data = model(nodes, [vi(x, F, [2, 3]) for x in "abc"],
                 [seq_vi("s3"), vi("last", F, None), vi("n", I64, None), vi("joined", F, None), vi("stacked", F, None)],
                 13, [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("minus_one", I64, [], [-1])])
    check(data, {x: rng.standard_normal((2, 3)).astype(np.float32) for x in "abc"}, cpu_options)


@pytest.mark.parametrize("split,attrs", [(None, {"axis": 1}), (None, {"axis": 1, "keepdims": 0}),
                                         (np.array(2, np.int64), {"axis": 1}), (np.array([1, 4], np.int64), {"axis": 1}),
                                         (np.array([2, 0, 1], np.int64), {"axis": 0})])
def test_split_to_sequence(split, attrs, cpu_options):
    inputs = ["x"] + (["split"] if split is not None else [])
    inits = [helper.make_tensor("split", I64, split.shape, split.flatten())] if split is not None else []
    data = model([helper.make_node("SplitToSequence", inputs, ["s"], **attrs)], [vi("x", F, [3, 5])], [seq_vi("s")], 13,
                 inits)
    check(data, {"x": rng.standard_normal((3, 5)).astype(np.float32)}, cpu_options)


def test_sequence_inputs_and_outputs(cpu_options):
    """A sequence input fed as a list (any length, any element shapes); SequenceMap over it."""
    body = helper.make_graph([helper.make_node("Mul", ["e", "k"], ["y"]), helper.make_node("Shape", ["e"], ["shape"])],
                             "body", [vi("e", F, None), vi("k", F, [])], [vi("y", F, None), vi("shape", I64, None)])
    data = model([helper.make_node("SequenceMap", ["xs", "k"], ["ys", "shapes"], body=body),
                  helper.make_node("SequenceLength", ["xs"], ["n"])],
                 [seq_vi("xs", F, ["N"]), vi("k", F, [])], [seq_vi("ys"), seq_vi("shapes", I64), vi("n", I64, None)], 17)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    assert sess.get_inputs()[0].type == "seq(tensor(float))"
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for lengths in ([3, 5], [4], [3, 5], [2, 2, 7]):
        feeds = {"xs": [rng.standard_normal(n).astype(np.float32) for n in lengths], "k": np.array(1.5, np.float32)}
        same(sess.run(None, feeds), want.run(None, feeds))
    assert sess.run(["n"], {"xs": [np.ones(2, np.float32)], "k": np.array(1.0, np.float32)})[0] == 1


def test_empty_sequences(cpu_options):
    data = model([helper.make_node("SequenceEmpty", [], ["s"], dtype=F),
                  helper.make_node("SequenceInsert", ["s", "x"], ["s1"]),
                  helper.make_node("SequenceLength", ["s"], ["n0"])],
                 [vi("x", F, [2])], [seq_vi("s"), seq_vi("s1"), vi("n0", I64, None)], 13)
    got = hal.onnx.InferenceSession(data, cpu_options).run(None, {"x": np.ones(2, np.float32)})
    assert got[0] == [] and len(got[1]) == 1 and got[2] == 0
    ident = model([helper.make_node("SequenceLength", ["xs"], ["n"])], [seq_vi("xs", F, [2])], [vi("n", I64, None)], 13)
    assert hal.onnx.InferenceSession(ident, cpu_options).run(None, {"xs": []})[0] == 0


def test_sequences_through_loop_and_if(cpu_options):
    """A Loop appending to a sequence (loop-carried), an If returning a sequence."""
    body = helper.make_graph([helper.make_node("Cast", ["i"], ["f"], to=F),
                              helper.make_node("Mul", ["x", "f"], ["xi"]),
                              helper.make_node("SequenceInsert", ["acc", "xi"], ["acc_out"]),
                              helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [vi("i", I64, []), vi("c", TensorProto.BOOL, []), seq_vi("acc")],
                             [vi("c_out", TensorProto.BOOL, []), seq_vi("acc_out")])
    then_g = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["t"], axis=0)], "then", [], [seq_vi("t")])
    else_g = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["e"])], "else", [], [seq_vi("e")])
    data = model([helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
                  helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body),
                  helper.make_node("If", ["flag"], ["picked"], then_branch=then_g, else_branch=else_g)],
                 [vi("x", F, [3]), vi("flag", TensorProto.BOOL, [])], [seq_vi("s"), seq_vi("picked")], 13,
                 [helper.make_tensor("M", I64, [], [4])])
    for flag in (True, False):
        check(data, {"x": rng.standard_normal(3).astype(np.float32), "flag": np.array(flag)}, cpu_options)


def test_sequence_bad_inputs(cpu_options):
    data = model([helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
                  helper.make_node("SequenceAt", ["s", "p"], ["y"], name="pick")],
                 [vi("a", F, [2]), vi("p", I64, [])], [vi("y", F, None)], 13)
    sess = hal.onnx.InferenceSession(data, cpu_options)
    with pytest.raises(hal.Error, match=r"node 1 'pick' \(SequenceAt.*position 2 is out of range for a sequence of 2 "
                                        r"\(valid: -2\.\.1\)"):
        sess.run(None, {"a": np.ones(2, np.float32), "p": np.array(2, np.int64)})
    np.testing.assert_array_equal(sess.run(None, {"a": np.ones(2, np.float32), "p": np.array(-1, np.int64)})[0],
                                  np.ones(2, np.float32))
    seq_in = model([helper.make_node("SequenceLength", ["xs"], ["n"])], [seq_vi("xs", F, [2])], [vi("n", I64, None)], 13)
    sess = hal.onnx.InferenceSession(seq_in, cpu_options)
    with pytest.raises(hal.Error, match=r"input 'xs' is a sequence: feed a list of arrays"):
        sess.run(None, {"xs": np.ones(2, np.float32)})
    with pytest.raises(hal.Error, match=r"element 1 of sequence input 'xs' has dtype int64 but the model expects float32"):
        sess.run(None, {"xs": [np.ones(2, np.float32), np.ones(2, np.int64)]})
    with pytest.raises(hal.Error, match=r"element 0 of sequence input 'xs' has dim 0 of 3; the model declares 2"):
        sess.run(None, {"xs": [np.ones(3, np.float32)]})


def test_optionals(cpu_options):
    """Optional values built in the model, and an optional graph input fed as a tensor or None."""
    data = model([helper.make_node("Optional", ["x"], ["o"]), helper.make_node("OptionalHasElement", ["o"], ["has"]),
                  helper.make_node("OptionalGetElement", ["o"], ["y"]),
                  helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(F, [2])),
                  helper.make_node("OptionalHasElement", ["none"], ["has_none"])],
                 [vi("x", F, [2])], [vi("has", TensorProto.BOOL, None), vi("y", F, None),
                                     vi("has_none", TensorProto.BOOL, None)], 18)
    check(data, {"x": np.array([1.0, 2.0], np.float32)}, cpu_options)
    opt_in = model([helper.make_node("OptionalHasElement", ["o"], ["has"])],
                   [helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))],
                   [vi("has", TensorProto.BOOL, None)], 18)
    sess = hal.onnx.InferenceSession(opt_in, cpu_options)
    assert sess.get_inputs()[0].type == "optional(tensor(float))"
    assert sess.run(None, {"o": np.ones(2, np.float32)})[0]
    assert not sess.run(None, {"o": None})[0]
    with pytest.raises(hal.Error, match=r"optional input 'o' has dtype int64 but the model expects float32"):
        sess.run(None, {"o": np.ones(2, np.int64)})
