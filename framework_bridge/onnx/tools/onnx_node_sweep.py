#!/usr/bin/env python3
"""ONNX's own backend node tests against HAL: per-operator pass rates and the passing set for CI.

The onnx wheel ships the node test CASES (onnx.backend.test.case.node: numpy reference + expect()) but
not their data; generate() writes them in the backend-test layout (<case>/model.onnx,
<case>/test_data_set_0/{input,output}_<i>.pb) into ~/.cache/hal/onnx-node-tests/onnx-<version>/
($HAL_ONNX_NODE_TESTS overrides the root), once per onnx version.

A case is written at its operator's newest opset (expect() stamps since_version), often above HAL's
13..21: such a model is converted with onnx.version_converter to 21 (below 13: to 13) first, and a
case the converter refuses fails with reason "opset". "_expanded" cases (the function body of an
operator, i.e. other operators) are not counted. Outputs are compared as ONNX's backend runner does:
rtol 1e-3, atol 1e-7, NaN equal to NaN, exact for integers and bool.

    python onnx_node_sweep.py                   # every case, writes docs/onnx.md (between the markers)
                                                # and framework_bridge/onnx/tests/node_ci.txt
    python onnx_node_sweep.py --ops Add,Relu    # some operators, prints only
Needs PYTHONPATH=<build>/python (import hal.onnx) and a config whose default device is the CPU plugin
($HAL_CONFIG or --config).
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

MIN_OPSET, MAX_OPSET = 13, 21
REPO = pathlib.Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "onnx.md"
CI_LIST = REPO / "framework_bridge" / "onnx" / "tests" / "node_ci.txt"
BEGIN, END = "<!-- node-test-pass-rates:begin -->", "<!-- node-test-pass-rates:end -->"


def cache_root():
    root = os.environ.get("HAL_ONNX_NODE_TESTS") or os.path.expanduser("~/.cache/hal/onnx-node-tests")
    return pathlib.Path(root) / f"onnx-{onnx.__version__}"


def _default_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _convert(model):
    """MODEL at an opset HAL loads (13..21), or (None, reason)."""
    version = _default_opset(model)
    if version is None or MIN_OPSET <= version <= MAX_OPSET:
        return model, None
    target = MAX_OPSET if version > MAX_OPSET else MIN_OPSET
    try:
        converted = onnx.version_converter.convert_version(model, target)
        onnx.checker.check_model(converted)
        return converted, None
    except Exception as e:  # the converter has no adapter for every operator
        return None, f"opset {version} -> {target}: {str(e).splitlines()[0][:160]}"


def _write_tensor(path, value, name):
    proto = value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(np.asarray(value), name)
    path.write_bytes(proto.SerializeToString())


def generate(root=None):
    """Writes every node case (see the module doc) under ROOT once; returns ROOT."""
    root = pathlib.Path(root) if root else cache_root()
    if (root / "index.json").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=root.parent, prefix=root.name + ".tmp"))
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference implementations' overflow/log(0) warnings
        cases = node.collect_testcases()
    index = {}
    for case in cases:
        if "_expanded" in case.name:
            continue
        graph = case.model.graph
        entry = {"op": graph.node[0].op_type, "domain": graph.node[0].domain, "opset": _default_opset(case.model),
                 "rtol": case.rtol, "atol": case.atol}
        if not all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
            entry["skip"] = "sequence, map or optional values (HAL has tensors only)"
        else:
            model, reason = _convert(case.model)
            if reason:
                entry["skip"] = reason
            else:
                d = tmp / case.name / "test_data_set_0"
                d.mkdir(parents=True)
                (tmp / case.name / "model.onnx").write_bytes(model.SerializeToString())
                inputs, outputs = case.data_sets[0]
                for i, (value, info) in enumerate(zip(inputs, graph.input)):
                    _write_tensor(d / f"input_{i}.pb", value, info.name)
                for i, (value, info) in enumerate(zip(outputs, graph.output)):
                    _write_tensor(d / f"output_{i}.pb", value, info.name)
        index[case.name] = entry
    (tmp / "index.json").write_text(json.dumps(index, indent=0, sort_keys=True))
    try:
        tmp.rename(root)
    except OSError:  # another process generated it first
        shutil.rmtree(tmp)
    return root


def load_index(root=None):
    root = generate(root)
    return root, json.loads((root / "index.json").read_text())


def _read(path):
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, numpy_helper.to_array(t)


def _compare(expected, actual, rtol, atol):
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)
    if actual.dtype != expected.dtype:
        raise AssertionError(f"dtype {actual.dtype}, expected {expected.dtype}")


def run_case(root, name, entry, providers=("cpu",), sess_options=None):
    """Runs case NAME; returns (passed, reason). Reason: the error class and the first line of its message."""
    import hal.onnx

    if "skip" in entry:
        return False, entry["skip"]
    case = root / name
    data = case / "test_data_set_0"
    feeds = dict(_read(p) for p in sorted(data.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1])))
    expected = [_read(p)[1] for p in sorted(data.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))]
    try:
        sess = hal.onnx.InferenceSession(str(case / "model.onnx"), sess_options, providers=list(providers))
        # Feeds by the model's input names (a .pb file's own name may be empty).
        feeds = {i.name: v for i, v in zip(sess.get_inputs(), feeds.values())}
        actual = sess.run(None, feeds)
    except hal.Error as e:
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    try:
        if len(actual) != len(expected):
            raise AssertionError(f"{len(actual)} outputs, expected {len(expected)}")
        for e, a in zip(expected, actual):
            _compare(e, a, entry["rtol"], entry["atol"])
    except AssertionError as e:
        return False, "mismatch: " + " ".join(str(e).split())[:200]
    return True, ""


def _run_op_in_child(root, names, config):
    """Runs NAMES (cases of one operator) in a child process, so a crash costs only that operator's rest."""
    env = dict(os.environ)
    if config:
        env["HAL_CONFIG"] = str(config)
    proc = subprocess.run([sys.executable, __file__, "--child", str(root), *names], env=env,
                          capture_output=True, text=True, timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["name"]] = (r["passed"], r["reason"])
    for n in names:
        if n not in results:
            results[n] = (False, f"crash (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
            break  # the rest after the crashing case were not run
    return results


def sweep(ops=None, config=None):
    root, index = load_index()
    by_op = collections.defaultdict(list)
    for name, entry in sorted(index.items()):
        if not ops or entry["op"] in ops:
            by_op[(entry["domain"], entry["op"])].append(name)
    results = {}
    for (_, op), names in sorted(by_op.items()):
        todo = [n for n in names if "skip" not in index[n]]
        for n in names:
            if "skip" in index[n]:
                results[n] = (False, index[n]["skip"])
        while todo:
            got = _run_op_in_child(root, todo, config)
            results.update(got)
            todo = [n for n in todo if n not in results]
        passed = sum(results[n][0] for n in names)
        print(f"{op:28s} {passed:3d}/{len(names):3d}", flush=True)
    return index, results


def _unsupported(reason):
    """True when REASON says the operator itself is outside what HAL takes: no row in the front end's
    mapping table, no opset in 13..21 to convert the case to, or non-tensor values."""
    return ("operator not supported" in reason or reason.startswith("opset ") or
            "HAL has tensors only" in reason)


def _reasons(names, results):
    c = collections.Counter(results[n][1].split(":")[0] for n in names if not results[n][0])
    return ", ".join(f"{k} {v}" for k, v in c.most_common(3))


def write_outputs(index, results):
    by_op = collections.defaultdict(list)
    for n in results:
        by_op[(index[n]["domain"] or "ai.onnx", index[n]["op"])].append(n)
    rows = ["| operator | cases | passed | rate | failures (kind count) |", "|---|---:|---:|---:|---|"]
    total = passed_total = 0
    for (domain, op), names in sorted(by_op.items(), key=lambda kv: (kv[0][0] != "ai.onnx", kv[0][1])):
        passed = sum(results[n][0] for n in names)
        if not passed and all(_unsupported(results[n][1]) for n in names):
            continue  # not supported: listed below
        total += len(names)
        passed_total += passed
        label = op if domain == "ai.onnx" else f"{domain}.{op}"
        rows.append(f"| {label} | {len(names)} | {passed} | {100 * passed / len(names):.0f} % | "
                    f"{_reasons(names, results)} |")
    unsupported = sorted({op for (d, op), names in by_op.items()
                          if f"| {op if d == 'ai.onnx' else d + '.' + op} |" not in "\n".join(rows)})
    text = "\n".join([
        BEGIN,
        f"Generated by framework_bridge/onnx/tools/onnx_node_sweep.py (onnx {onnx.__version__}, CPU plugin): "
        f"{passed_total} of {total} cases pass for the operators with at least one case HAL runs.",
        "",
        *rows,
        "",
        "Failure kinds: NotImplemented (the front end refuses an attribute, input or dtype: e.g. axes given as a "
        "graph input instead of a constant), InvalidArgument (incl. UNSUPPORTED_DTYPE: a dtype the catalog op "
        "does not take), mismatch (ran, wrong values or dtype), opset (onnx.version_converter cannot bring the "
        "case into 13..21), crash.",
        "",
        f"Operators without a row in the mapping table, or whose cases all need an opset above 21 or "
        f"non-tensor values: "
        f"{', '.join(unsupported)}.",
        END,
    ])
    doc = DOC.read_text()
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc += "\n" + text + "\n"
    DOC.write_text(doc)
    passing = sorted(n for n, (ok, _) in results.items() if ok)
    CI_LIST.write_text("# ONNX backend node tests that pass on the CPU plugin (tools/onnx_node_sweep.py writes this)\n"
                       + "".join(n + "\n" for n in passing))
    print(f"{passed_total}/{total} pass; wrote {DOC} and {CI_LIST} ({len(passing)} cases)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated operator types (default: all); prints only")
    ap.add_argument("--config", help="hal.toml (default: $HAL_CONFIG)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        root, names = pathlib.Path(args.child[0]), args.child[1:]
        index = json.loads((root / "index.json").read_text())
        for n in names:
            ok, reason = run_case(root, n, index[n])
            print(json.dumps({"name": n, "passed": ok, "reason": reason}), flush=True)
        return
    index, results = sweep(set(args.ops.split(",")) if args.ops else None, args.config)
    if args.ops:
        for n, (ok, reason) in sorted(results.items()):
            print(("PASS " if ok else "FAIL ") + n + ("" if ok else "  " + reason))
    else:
        write_outputs(index, results)


if __name__ == "__main__":
    main()
