#!/usr/bin/env python3
"""What a shape HAL learns only while an ONNX model runs costs: re-planning per changed shape, vs onnxruntime.

Three models whose shapes depend on values the model computes (issue 33, "data-dependent shapes"):

  mask     y = relu(x[x > t]) * sum(...)  as exporters write x[mask]: NonZero, Transpose, GatherND. The count of
           true elements is a symbol of the stage after it: a new count binds the symbol, nothing is
           translated or compiled again.
  slice    Compress then a Slice of the first 3 rows: the count is a symbol too, the Slice's bounds taken
           against it guarded (the same rows for every count >= 3).
  reshape  Reshape to a target the model computes (cast from an input): the target's dims >= 2 are symbols
           of the stage after it, so a new target of the same kind binds them.
  topk     TopK of [4, 64] along its last axis, K computed (cast from an input): the first K of the sort are a
           count of rows, a symbol of the stage after it.
  range    Range(0, limit, 1) with limit computed (cast from an input), and
  tile     Tile of [4, 8] by repeats computed: the output's sizes are read back, symbols of the stage after
           it once a second value came.
  unique   Unique of 1024 values (sorted, all four outputs): the count of distinct values is a symbol of the
           stage after it.
  pad      Pad of [16, 16] by pads computed (cast from an input), mode constant, and
  expand   Expand of [8, 1] to a shape computed: as tile.
  fed      Reshape to a target fed as a graph input: the first target gets a translation of its own; once
           others come the model reads the input when it runs, the target's dims symbols.

After a warm-up that compiled the first stage (and, for `mask`, the symbolic one), three passes, each run
back to back: one run at each of 400 (reshape and fed: 11, tile: 34, others: 60) shapes the
session has not seen, the same number of runs at one shape (unique: one count of distinct values, its
input in a new order each run), and onnxruntime on the first pass's feeds. Reported: the mean time per
run of each, and the difference of the first two (the re-planning cost per changed shape).

    HAL_BUILD_DIR=<build> PYTHONPATH=<build>/python python bench/onnx_replan_bench.py [--threads 1] [--json out.json]
"""
import argparse
import json
import os
import time

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)], producer_name="hal-bench")
    m.ir_version = min(m.ir_version, 10)
    return m.SerializeToString()


def mask_model(n):
    nodes = [h.make_node("Greater", ["x", "t"], ["m"]), h.make_node("NonZero", ["m"], ["nz"]),
             h.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]), h.make_node("GatherND", ["x", "idx"], ["v"]),
             h.make_node("Relu", ["v"], ["r"]), h.make_node("ReduceSum", ["r"], ["s"], keepdims=0),
             h.make_node("Mul", ["r", "s"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [n]), h.make_tensor_value_info("t", T.FLOAT, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def slice_model(n):
    nodes = [h.make_node("Greater", ["x", "t"], ["c"]), h.make_node("Compress", ["x", "c"], ["k"], axis=0),
             h.make_node("Slice", ["k", "s", "e"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "s"), numpy_helper.from_array(np.array([3], np.int64), "e")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [n]), h.make_tensor_value_info("t", T.FLOAT, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def reshape_model(n):
    nodes = [h.make_node("Cast", ["shape"], ["target"], to=T.INT64), h.make_node("Reshape", ["x", "target"], ["r"]),
             h.make_node("Relu", ["r"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [n]), h.make_tensor_value_info("shape", T.FLOAT, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def topk_model(rows, cols):
    nodes = [h.make_node("Cast", ["kf"], ["k"], to=T.INT64), h.make_node("TopK", ["x", "k"], ["v", "i"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [rows, cols]), h.make_tensor_value_info("kf", T.FLOAT, [1])],
                  [h.make_tensor_value_info("v", T.FLOAT, None), h.make_tensor_value_info("i", T.INT64, None)])


def range_model():
    nodes = [h.make_node("Cast", ["lf"], ["l"], to=T.INT64), h.make_node("Range", ["s", "l", "d"], ["r"]),
             h.make_node("Cast", ["r"], ["y"], to=T.FLOAT)]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "s"), numpy_helper.from_array(np.array(1, np.int64), "d")]
    return _model(nodes, [h.make_tensor_value_info("lf", T.FLOAT, [])], [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def tile_model():
    nodes = [h.make_node("Cast", ["rf"], ["r"], to=T.INT64), h.make_node("Tile", ["x", "r"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 8]), h.make_tensor_value_info("rf", T.FLOAT, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def fed_reshape_model(n):
    nodes = [h.make_node("Reshape", ["x", "shape"], ["r"]), h.make_node("Relu", ["r"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [n]), h.make_tensor_value_info("shape", T.INT64, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def pad_model():
    nodes = [h.make_node("Cast", ["pf"], ["p"], to=T.INT64), h.make_node("Pad", ["x", "p"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [16, 16]), h.make_tensor_value_info("pf", T.FLOAT, [4])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def expand_model():
    nodes = [h.make_node("Cast", ["sf"], ["s"], to=T.INT64), h.make_node("Expand", ["x", "s"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [8, 1]), h.make_tensor_value_info("sf", T.FLOAT, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)])


def unique_model(n):
    return _model([h.make_node("Unique", ["x"], ["y", "i", "inv", "c"])], [h.make_tensor_value_info("x", T.FLOAT, [n])],
                  [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("i", T.INT64, None),
                   h.make_tensor_value_info("inv", T.INT64, None), h.make_tensor_value_info("c", T.INT64, None)])


N = 4096


def threshold_feeds(x, count):
    order = np.sort(x)
    return {"x": x, "t": np.array(order[-count - 1], np.float32)}


def cases(rng):
    x = rng.standard_normal(N).astype(np.float32)
    counts = list(rng.permutation(np.arange(100, N - 1))[:400])
    yield "mask", mask_model(N), [threshold_feeds(x, 50), threshold_feeds(x, 60)], [threshold_feeds(x, c) for c in counts]
    yield "slice", slice_model(N), [threshold_feeds(x, 50), threshold_feeds(x, 60)], [threshold_feeds(x, c) for c in counts]
    sides = [2 ** k for k in range(1, 12)]
    shape = lambda a: {"x": x, "shape": np.array([a, N // a], np.float32)}  # noqa: E731
    yield "reshape", reshape_model(N), [shape(1)], [shape(a) for a in sides]
    m = rng.standard_normal((4, 64)).astype(np.float32)
    k = lambda n: {"x": m, "kf": np.array([n], np.float32)}  # noqa: E731
    yield "topk", topk_model(4, 64), [k(3), k(4)], [k(n) for n in rng.permutation(np.arange(5, 65))]
    limit = lambda n: {"lf": np.array(n, np.float32)}  # noqa: E731
    yield "range", range_model(), [limit(2), limit(3)], [limit(n) for n in rng.permutation(np.arange(4, 64))]
    reps = lambda n: {"x": m[:, :8].copy(), "rf": np.array([n % 6 + 1, n // 6 + 1], np.float32)}  # noqa: E731
    yield "tile", tile_model(), [reps(0), reps(1)], [reps(n) for n in rng.permutation(np.arange(2, 36))]
    values = lambda n: {"x": rng.integers(0, n, 1024).astype(np.float32)}  # noqa: E731
    fresh = [values(n) for n in rng.permutation(np.arange(100, 400))[:60]]
    # The same count of distinct values each run, in a new order (sorting new data costs more than sorting
    # the same data again: that is not re-planning).
    same = [{"x": rng.permutation(fresh[0]["x"])} for _ in fresh]
    yield "unique", unique_model(1024), [values(50), values(60)], fresh, same
    sq = rng.standard_normal((16, 16)).astype(np.float32)
    pads = lambda n: {"x": sq, "pf": np.array([n % 4, n // 4 % 4, n // 16, 1], np.float32)}  # noqa: E731
    yield "pad", pad_model(), [pads(0), pads(1)], [pads(n) for n in rng.permutation(np.arange(2, 62))]
    col = rng.standard_normal((8, 1)).astype(np.float32)
    wide = lambda n: {"x": col, "sf": np.array([8, n], np.float32)}  # noqa: E731
    yield "expand", expand_model(), [wide(2), wide(3)], [wide(n) for n in rng.permutation(np.arange(4, 64))]
    fed = lambda a: {"x": x, "shape": np.array([a, N // a], np.int64)}  # noqa: E731
    yield "fed", fed_reshape_model(N), [fed(1), fed(N)], [fed(a) for a in sides]


def one(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import onnxruntime as ort

    import hal.onnx

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    rows = []
    for name, data, warm, fresh, *same in cases(np.random.default_rng(3)):
        same = same[0] if same else [fresh[0]] * len(fresh)
        sess = hal.onnx.InferenceSession(data)
        ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        for f in warm:
            sess.run(None, f)
            ref.run(None, f)
        # Each pass runs its feeds back to back (nothing else in between to cool the caches).
        t0 = time.perf_counter()
        for f in fresh:  # every run at a shape this session has not seen
            sess.run(None, f)
        new = (time.perf_counter() - t0) / len(fresh)
        t0 = time.perf_counter()
        for f in same:  # the same shape every run
            sess.run(None, f)
        seen = (time.perf_counter() - t0) / len(fresh)
        t0 = time.perf_counter()
        for f in fresh:
            ref.run(None, f)
        peer = (time.perf_counter() - t0) / len(fresh)
        for f in fresh:
            got, want = sess.run(None, f)[0], ref.run(None, f)[0]
            assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5), name
        row = {"model": name, "new_us": new * 1e6, "seen_us": seen * 1e6, "ort_us": peer * 1e6}
        row["replan_us"] = row["new_us"] - row["seen_us"]
        rows.append(row)
        print(f"{name:8s} new shape {row['new_us']:8.1f} us   seen shape {row['seen_us']:7.1f} us   "
              f"re-plan {row['replan_us']:7.1f} us   onnxruntime {row['ort_us']:7.1f} us", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
