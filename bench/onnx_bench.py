#!/usr/bin/env python3
"""ONNX models on HAL's CPU plugin vs onnxruntime's CPU provider, same thread count, same process and run.

The four acceptance models (framework_bridge/onnx/tests/onnx_models.py, exported by torch.onnx.export at the
dynamo exporter's newest opset) at batch 1 and 32: the median of REPEATS timed batches of session.run
for each, and the ratio onnxruntime time / HAL time (> 1: HAL faster; issue 13's target is >= 0.8).
Threads: OMP_NUM_THREADS for HAL (set before hal is imported; the CPU plugin's oneDNN/OpenMP pool is
process-wide) and intra_op_num_threads for onnxruntime, both --threads.

--opencl: the same models on the OpenCL plugin (PoCL here), with its graph compiler fusing (the default)
and without (GraphOptimizationLevel.ORT_DISABLE_ALL: every node op by op), the fused/unfused speed-up, and
how many compiled groups and kernels the fused session runs.

Compile time: a fresh process builds the session (load + translate + compile; not the imports),
first with an empty compile cache (cold: $HAL_COMPILE_CACHE_DIR a new folder) and then again with the
cache the first one filled (cached).

    HAL_BUILD_DIR=<build> PYTHONPATH=<build>/python python bench/onnx_bench.py [--threads 2] [--opencl] [--json out.json]
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTS = REPO / "framework_bridge" / "onnx" / "tests"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(TESTS))
    spec.loader.exec_module(module)
    return module


def median_seconds(fn, repeats=7):
    """Median seconds per call of FN over REPEATS batches (each long enough for the clock: autorange)."""
    fn()  # warm up: thread pools, primitive caches, first-run compiles
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return statistics.median(timer.repeat(repeat=repeats, number=number)) / number


_COMPILE_CHILD = """
import sys, time
import hal.onnx
t0 = time.perf_counter()
opts = hal.onnx.SessionOptions(); opts.hal_config = sys.argv[2]
s = hal.onnx.InferenceSession(sys.argv[1], opts)
print(time.perf_counter() - t0)
"""


def compile_seconds(path, config, cache_dir):
    """Seconds a fresh process takes to build a session for PATH (load, translate, compile) with CACHE_DIR."""
    env = dict(os.environ, HAL_COMPILE_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, str(path), str(config)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="mlp,resnet,encoder,decoder,loop",
                    help="loop: a 100-iteration Loop (a tanh recurrence with a scan output), built here")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seq", type=int, default=32, help="sequence length of the encoder and decoder")
    ap.add_argument("--opencl", action="store_true",
                    help="instead: the OpenCL plugin with fusion vs without (no onnxruntime column)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before hal loads the CPU plugin
    import numpy as np
    import onnxruntime

    import hal.onnx

    models = _load("onnx_models")
    testing = _load("onnx_testing")
    work = pathlib.Path(tempfile.mkdtemp(prefix="hal-onnx-bench-"))
    config = testing.write_config(work, "cpu")
    hal_opts = hal.onnx.SessionOptions()
    hal_opts.hal_config = str(config)
    hal_opts.intra_op_num_threads = args.threads
    ort_opts = onnxruntime.SessionOptions()
    ort_opts.intra_op_num_threads = args.threads
    ort_opts.inter_op_num_threads = 1

    if args.opencl:
        rows = opencl_fusion(args, models, testing, work)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
        return

    rows = []
    print(f"threads {args.threads}, onnxruntime {onnxruntime.__version__}, sequence length {args.seq}")
    print(f"{'model':9s} {'batch':>5s} {'HAL ms':>9s} {'ORT ms':>9s} {'ORT/HAL':>8s} "
          f"{'compile cold s':>14s} {'cached s':>9s}")
    for name in args.models.split(","):
        path, models_inputs = model_and_inputs(name, models, work, args.seq)
        cache = work / f"cache-{name}"
        try:
            hal_sess = hal.onnx.InferenceSession(str(path), hal_opts)
        except hal.Error as e:  # a model the front end does not take yet: say why, bench the others
            print(f"{name:9s} not run: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        cold = compile_seconds(path, config, cache)
        cached = compile_seconds(path, config, cache)
        ort_sess = onnxruntime.InferenceSession(str(path), ort_opts, providers=["CPUExecutionProvider"])
        for batch in map(int, args.batches.split(",")):
            feed = models_inputs(batch)
            ref = ort_sess.run(None, feed)[0]
            got = hal_sess.run(None, feed)[0]
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3, err_msg=f"{name} batch {batch}")
            t_hal = median_seconds(lambda: hal_sess.run(None, feed))
            t_ort = median_seconds(lambda: ort_sess.run(None, feed))
            row = dict(model=name, batch=batch, hal_ms=t_hal * 1e3, ort_ms=t_ort * 1e3, ratio=t_ort / t_hal,
                       compile_cold_s=cold, compile_cached_s=cached, threads=args.threads)
            rows.append(row)
            print(f"{name:9s} {batch:5d} {row['hal_ms']:9.3f} {row['ort_ms']:9.3f} {row['ratio']:8.2f} "
                  f"{cold:14.2f} {cached:9.2f}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


def model_and_inputs(name, models, work, seq):
    """The model file NAME names and a function of the batch giving its inputs."""
    import numpy as np

    if name == "loop":
        path = work / "loop100.onnx"
        path.write_bytes(loop_model())
        return path, lambda batch: {"x": np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)}
    return models.export(name, models.NEWEST), lambda batch: models.inputs(name, batch=batch, seq=seq)


def loop_model(iterations=100, width=64):
    """y, trace = Loop(M=ITERATIONS) of h <- tanh(h @ W + x), trace the stacked h (opset 16)."""
    import numpy as np
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    w = np.random.default_rng(0).standard_normal((width, width)).astype(np.float32) / np.sqrt(width)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]), helper.make_node("Add", ["hw", "x"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["h_out"], ["trace_t"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h", f, ["batch", width])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", f, ["batch", width]),
         helper.make_tensor_value_info("trace_t", f, ["batch", width])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y", "trace"], body=body)], "loop",
        [helper.make_tensor_value_info("x", f, ["batch", width])],
        [helper.make_tensor_value_info("y", f, ["batch", width]),
         helper.make_tensor_value_info("trace", f, [iterations, "batch", width])],
        initializer=[helper.make_tensor("M", TensorProto.INT64, [], [iterations]),
                     helper.make_tensor("W", f, [width, width], w.flatten())])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m.SerializeToString()


def opencl_fusion(args, models, testing, work):
    """The OpenCL rows: each model with the plugin's graph compiler (fused) and without (op by op)."""
    import numpy as np
    import onnxruntime

    import hal.onnx

    config = testing.write_config(work, "opencl")
    fused_opts, plain_opts = hal.onnx.SessionOptions(), hal.onnx.SessionOptions()
    for o in (fused_opts, plain_opts):
        o.hal_config = str(config)
    plain_opts.graph_optimization_level = hal.onnx.GraphOptimizationLevel.ORT_DISABLE_ALL
    rows = []
    print(f"OpenCL plugin, onnxruntime {onnxruntime.__version__} for the reference outputs, sequence length {args.seq}")
    print(f"{'model':9s} {'batch':>5s} {'fused ms':>9s} {'op-by-op ms':>11s} {'speed-up':>8s} {'groups':>6s} "
          f"{'kernels':>7s} {'op nodes':>8s} {'nodes op-by-op':>14s}")
    for name in args.models.split(","):
        path, models_inputs = model_and_inputs(name, models, work, args.seq)
        try:
            fused = hal.onnx.InferenceSession(str(path), fused_opts)
            plain = hal.onnx.InferenceSession(str(path), plain_opts)
        except hal.Error as e:
            print(f"{name:9s} not run: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        ort_sess = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        fs, ps = fused.compile_stats(), plain.compile_stats()
        for batch in map(int, args.batches.split(",")):
            feed = models_inputs(batch)
            ref = ort_sess.run(None, feed)[0]
            for sess in (fused, plain):
                np.testing.assert_allclose(sess.run(None, feed)[0], ref, rtol=1e-3, atol=1e-3,
                                           err_msg=f"{name} batch {batch}")
            t_fused = median_seconds(lambda: fused.run(None, feed))
            t_plain = median_seconds(lambda: plain.run(None, feed))
            row = dict(model=name, batch=batch, fused_ms=t_fused * 1e3, op_by_op_ms=t_plain * 1e3,
                       speedup=t_plain / t_fused, groups=fs["groups"], kernels=fs["kernels"],
                       op_nodes=fs["op_nodes"], op_nodes_unfused=ps["op_nodes"])
            rows.append(row)
            print(f"{name:9s} {batch:5d} {row['fused_ms']:9.3f} {row['op_by_op_ms']:11.3f} {row['speedup']:8.2f} "
                  f"{row['groups']:6d} {row['kernels']:7d} {row['op_nodes']:8d} {row['op_nodes_unfused']:14d}",
                  flush=True)
    return rows


if __name__ == "__main__":
    main()
