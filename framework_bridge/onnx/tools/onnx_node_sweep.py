#!/usr/bin/env python3
"""ONNX's own backend node tests against HAL (and onnxruntime): per-operator pass rates and the passing set for CI.

The onnx wheel ships the node test CASES (onnx.backend.test.case.node: numpy reference + expect()) but
not their data; generate() writes each case's model exactly as written (no opset conversion) with its
inputs and expected outputs (<case>/model.onnx, <case>/data.pkl) into
~/.cache/hal/onnx-node-tests/onnx-<version>-as-written/ ($HAL_ONNX_NODE_TESTS overrides the root), once
per onnx version. Every case counts, "_expanded" ones (the operator's function body) included, and is
attributed to the operator it tests. Outputs are compared as ONNX's backend runner does: the case's rtol
(1e-3) and atol (1e-7), NaN equal to NaN, exact for integers, bool and strings, sequences element by element.

    python onnx_node_sweep.py --ort             # every case on HAL and onnxruntime; writes docs/onnx.md
                                                # (between the markers) and framework_bridge/onnx/tests/node_ci.txt
    python onnx_node_sweep.py --ops Add,Relu    # some operators, prints only
Needs PYTHONPATH=<build>/python (import hal.onnx) and a config whose default device is the CPU plugin
($HAL_CONFIG or --config).
"""
import argparse
import collections
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx

REPO = pathlib.Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "onnx.md"
CI_LIST = REPO / "framework_bridge" / "onnx" / "tests" / "node_ci.txt"
BEGIN, END = "<!-- node-test-pass-rates:begin -->", "<!-- node-test-pass-rates:end -->"
OPS_BEGIN, OPS_END = "<!-- onnx-operators:begin -->", "<!-- onnx-operators:end -->"


DEVICE = "cpu"  # --device: the HAL device the cases run on


def cache_root():
    root = os.environ.get("HAL_ONNX_NODE_TESTS") or os.path.expanduser("~/.cache/hal/onnx-node-tests")
    return pathlib.Path(root) / f"onnx-{onnx.__version__}-as-written"


def _default_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


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
    op_of = {c.name: (c.model.graph.node[0].domain, c.model.graph.node[0].op_type) for c in cases
             if "_expanded" not in c.name}
    index = {}
    for case in cases:
        base = case.name.split("_expanded")[0]
        domain, op = op_of.get(base, (case.model.graph.node[0].domain, case.model.graph.node[0].op_type))
        entry = {"op": op, "domain": domain, "opset": _default_opset(case.model), "rtol": case.rtol,
                 "atol": case.atol, "expanded": "_expanded" in case.name}
        if not case.data_sets:
            entry["skip"] = "the case has no data set"
        else:
            (tmp / case.name).mkdir(parents=True)
            (tmp / case.name / "model.onnx").write_bytes(case.model.SerializeToString())
            inputs, outputs = case.data_sets[0]
            with open(tmp / case.name / "data.pkl", "wb") as f:
                pickle.dump((list(inputs), list(outputs)), f)
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


def _compare(expected, actual, rtol, atol):
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"a sequence of {len(expected)} expected, got {type(actual).__name__}")
        for e, a in zip(expected, actual):
            _compare(e, a, rtol, atol)
        return
    if expected is None or actual is None:
        if expected is not actual:
            raise AssertionError(f"{actual!r}, expected {expected!r}")
        return
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.dtype.itemsize == 2 and expected.dtype.kind in "fV" and actual.dtype == expected.dtype:
        # bfloat16 / float16: the reference rounds every intermediate step to the dtype, so a
        # result computed with float32 intermediates may differ in the last bits.
        try:
            np.testing.assert_allclose(actual.astype(np.float32), expected.astype(np.float32), rtol=rtol, atol=atol,
                                       equal_nan=True)
        except AssertionError:
            ulps = _ulps(actual, expected)
            if ulps <= 2:
                raise AssertionError(f"rounding: within {ulps} units in the last place of {expected.dtype}")
            raise
        return
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)
    if actual.dtype != expected.dtype:
        raise AssertionError(f"dtype {actual.dtype}, expected {expected.dtype}")


def _ulps(a, b):
    """The largest distance in representable steps between 16-bit floats A and B (NaN with NaN: 0)."""
    def ordered(x):
        bits = x.view(np.uint16).astype(np.int32)
        return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)
    both_nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
    d = np.abs(ordered(a) - ordered(b))
    return int(np.max(np.where(both_nan, 0, d))) if d.size else 0


def _normalize(value):
    # As ONNX's backend runner does: a case may hold TensorProto objects (the dtypes numpy lacks).
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def _load_case(root, name):
    with open(root / name / "data.pkl", "rb") as f:
        inputs, outputs = pickle.load(f)
    return [_normalize(v) for v in inputs], [_normalize(v) for v in outputs]


def run_case(root, name, entry, providers=("cpu",), sess_options=None):
    """Runs case NAME on HAL; returns (passed, reason). Reason: the error class and the first line of its message."""
    import hal.onnx

    if "skip" in entry:
        return False, entry["skip"]
    inputs, expected = _load_case(root, name)
    try:
        sess = hal.onnx.InferenceSession(str(root / name / "model.onnx"), sess_options, providers=list(providers))
        feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
        actual = sess.run(None, feeds)
    except hal.Error as e:
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return _check(expected, actual, entry)


def run_case_ort(root, name, entry):
    """Runs case NAME on onnxruntime's CPU provider (all graph optimizations, as users run it)."""
    import onnxruntime as ort

    if "skip" in entry:
        return False, entry["skip"]
    inputs, expected = _load_case(root, name)
    try:
        sess = ort.InferenceSession(str(root / name / "model.onnx"), providers=["CPUExecutionProvider"])
        feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
        actual = sess.run(None, feeds)
    except Exception as e:  # onnxruntime raises its own exception classes
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return _check(expected, actual, entry)


def _check(expected, actual, entry):
    try:
        if len(actual) != len(expected):
            raise AssertionError(f"{len(actual)} outputs, expected {len(expected)}")
        for e, a in zip(expected, actual):
            _compare(e, a, entry["rtol"], entry["atol"])
    except AssertionError as e:
        return False, "mismatch: " + " ".join(str(e).split())[:200]
    return True, ""


def _run_op_in_child(root, names, config, engine):
    """Runs NAMES (cases of one operator) on ENGINE ("hal" or "ort") in a child process, so a crash
    costs only that operator's rest."""
    env = dict(os.environ)
    if config:
        env["HAL_CONFIG"] = str(config)
    env["HAL_SWEEP_DEVICE"] = DEVICE
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", engine, str(root), *names], env=env,
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {names[0]: (False, "hang (no result in 600 s)")}
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


def _run_engine(root, index, names, config, engine):
    results = {n: (False, index[n]["skip"]) for n in names if "skip" in index[n]}
    todo = [n for n in names if "skip" not in index[n]]
    while todo:
        results.update(_run_op_in_child(root, todo, config, engine))
        todo = [n for n in todo if n not in results]
    return results


def sweep(ops=None, config=None, ort=False):
    """{case: (passed, reason)} for HAL, and for onnxruntime when ORT (else None)."""
    root, index = load_index()
    by_op = collections.defaultdict(list)
    for name, entry in sorted(index.items()):
        if not ops or entry["op"] in ops:
            by_op[(entry["domain"], entry["op"])].append(name)
    results, ort_results = {}, ({} if ort else None)
    for (_, op), names in sorted(by_op.items()):
        results.update(_run_engine(root, index, names, config, "hal"))
        line = f"{op:28s} hal {sum(results[n][0] for n in names):3d}/{len(names):3d}"
        if ort:
            ort_results.update(_run_engine(root, index, names, config, "ort"))
            line += f"   onnxruntime {sum(ort_results[n][0] for n in names):3d}"
        print(line, flush=True)
    return index, results, ort_results


def _kind(reason):
    """The failure kind: the error class, or the first word (mismatch, crash, hang)."""
    return reason.split(":")[0].split(" (")[0] if reason else ""


def _reasons(names, results):
    c = collections.Counter(_kind(results[n][1]) for n in names if not results[n][0])
    return ", ".join(f"{k} {v}" for k, v in c.most_common(3))


def _replace_block(doc, begin, end, text):
    if begin in doc and end in doc:
        return doc[:doc.index(begin)] + text + doc[doc.index(end) + len(end):]
    return doc + "\n" + text + "\n"


def operators_table():
    """docs/onnx.md's table of the front end's rows, read from the table itself (hal.onnx._onnx)."""
    from hal.onnx import _onnx

    rows = _onnx.supported_operators()
    lines = [
        OPS_BEGIN,
        f"The front end's mapping table (`framework_bridge/onnx/src/op_table.cc`, {len(rows)} rows, written by "
        "`tools/onnx_node_sweep.py`): one row per ONNX operator and operator-version range, as onnxruntime registers "
        "kernels, the catalog op(s) it becomes, and what the row does not take; default domain only. A model at "
        "any opset up to the newest the pinned onnx knows loads as written: each node takes the row of the "
        "operator version in effect at the model's opset (the opsets below). \"a|b\": the row picks one by the "
        "node's attributes, ranks or dtypes; \"a+b\": the node becomes several catalog ops. \"Known at load\": "
        "an initializer, computable from initializers and static shapes, or a small integer graph input, "
        "whose value the session binds per run (the model is translated once per distinct value).",
        "",
        "| ONNX operator | opsets | catalog op(s) | limits |",
        "|---|---|---|---|",
    ]
    for op, lo, hi, catalog, limits in rows:
        lines.append(f"| {op} | {lo}–{hi} | {catalog or '(resolved at load)'} | {limits or '—'} |")
    lines.append(OPS_END)
    return "\n".join(lines)


def write_outputs(index, results, ort_results):
    by_op = collections.defaultdict(list)
    for n in results:
        by_op[(index[n]["domain"] or "ai.onnx", index[n]["op"])].append(n)
    header = "| operator | cases | HAL | onnxruntime | HAL's failures (kind count) |"
    rows = [header, "|---|---:|---:|---:|---|"]
    hal_total = sum(ok for ok, _ in results.values())
    ort_total = sum(ok for ok, _ in ort_results.values()) if ort_results else None
    hal_ops = ort_ops = 0
    for (domain, op), names in sorted(by_op.items(), key=lambda kv: (kv[0][0] != "ai.onnx", kv[0][1])):
        passed = sum(results[n][0] for n in names)
        ort_passed = sum(ort_results[n][0] for n in names) if ort_results else None
        hal_ops += passed > 0
        ort_ops += bool(ort_passed)
        label = op if domain == "ai.onnx" else f"{domain}.{op}"
        rows.append(f"| {label} | {len(names)} | {passed} | {'' if ort_passed is None else ort_passed} | "
                    f"{_reasons(names, results)} |")
    # A 16-bit float case within 2 units in the last place of the reference (which rounds every
    # step) is rounding, a documented tolerance; any other mismatch is a wrong answer.
    shared = sorted(n for n, (ok, reason) in results.items() if not ok and reason.startswith("mismatch: rounding"))
    wrong = sorted(n for n, (ok, reason) in results.items()
                   if not ok and reason.startswith("mismatch") and n not in shared)
    summary = (f"Generated by framework_bridge/onnx/tools/onnx_node_sweep.py (onnx {onnx.__version__}, every case "
               f"as written, CPU plugin): **HAL passes {hal_total} of {len(results)} cases and {hal_ops} of "
               f"{len(by_op)} operator types**")
    if ort_results is not None:
        import onnxruntime
        summary += (f"; onnxruntime {onnxruntime.__version__} (CPU provider) on the same cases in the same run: "
                    f"**{ort_total} cases, {ort_ops} operator types**")
    summary += (f". An operator type counts when at least one of its cases passes. Wrong answers (ran, "
                f"mismatched): {len(wrong)}" + (f" ({', '.join(wrong)})" if wrong else "")
                + f". Counted as failures but within the documented tolerance — bfloat16/float16 results within 2 "
                f"units in the last place of the numpy reference, which rounds every intermediate step (HAL keeps "
                f"float32 intermediates): {len(shared)}" + (f" ({', '.join(shared)})" if shared else "") + ".")
    text = "\n".join([
        BEGIN,
        summary,
        "",
        *rows,
        "",
        "Failure kinds: NotImplemented (the front end refuses an operator, attribute, input or dtype), "
        "InvalidArgument (incl. UNSUPPORTED_DTYPE: a dtype the catalog op does not take), mismatch (ran, "
        "wrong values or dtype), crash, hang; onnxruntime's own failures are its exceptions or mismatches.",
        END,
    ])
    doc = _replace_block(DOC.read_text(), BEGIN, END, text)
    DOC.write_text(_replace_block(doc, OPS_BEGIN, OPS_END, operators_table()))
    passing = sorted(n for n, (ok, _) in results.items() if ok)
    CI_LIST.write_text("# ONNX backend node tests that pass on the CPU plugin (tools/onnx_node_sweep.py writes this)\n"
                       + "".join(n + "\n" for n in passing))
    print(f"HAL {hal_total}/{len(results)} ({hal_ops} op types)"
          + ("" if ort_results is None else f", onnxruntime {ort_total} ({ort_ops} op types)")
          + f"; {len(wrong)} wrong answers; wrote {DOC} and {CI_LIST}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated operator types (default: all); prints only")
    ap.add_argument("--config", help="hal.toml (default: $HAL_CONFIG)")
    ap.add_argument("--ort", action="store_true", help="run onnxruntime on the same cases (a column in the docs)")
    ap.add_argument("--device", default="cpu",
                    help="the HAL device the cases run on (default cpu; another writes only its own summary to the docs)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if args.child:
        engine, root, names = args.child[0], pathlib.Path(args.child[1]), args.child[2:]
        index = json.loads((root / "index.json").read_text())
        for n in names:
            device = os.environ.get("HAL_SWEEP_DEVICE", "cpu")
            ok, reason = (run_case(root, n, index[n], providers=(device,)) if engine == "hal"
                          else run_case_ort(root, n, index[n]))
            print(json.dumps({"name": n, "passed": ok, "reason": reason}), flush=True)
        return
    index, results, ort_results = sweep(set(args.ops.split(",")) if args.ops else None, args.config, args.ort)
    if args.ops:
        for n, (ok, reason) in sorted(results.items()):
            extra = "" if ort_results is None else ("   [ort PASS]" if ort_results[n][0] else "   [ort FAIL]")
            print(("PASS " if ok else "FAIL ") + n + ("" if ok else "  " + reason) + extra)
    elif args.device != "cpu":
        write_device_summary(index, results, args.device)
    else:
        write_outputs(index, results, ort_results)


def write_device_summary(index, results, device):
    """One paragraph in docs/onnx.md for a device other than the CPU plugin's: its pass count, its
    wrong answers, and its refusals by kind (dtypes its plugin lacks are refusals, not failures)."""
    ops = collections.defaultdict(list)
    for n in results:
        ops[(index[n]["domain"], index[n]["op"])].append(n)
    passed = sum(ok for ok, _ in results.values())
    op_types = sum(any(results[n][0] for n in names) for names in ops.values())
    shared = [n for n, (ok, r) in results.items() if not ok and r.startswith("mismatch: rounding")]
    wrong = sorted(n for n, (ok, r) in results.items() if not ok and r.startswith("mismatch") and n not in shared)
    kinds = collections.Counter(_kind(r) for ok, r in results.values() if not ok)
    # Failures other than refusals (a device error, a crash, a hang): named, with their first line.
    other = sorted(f"{n} ({r[:120]})" for n, (ok, r) in results.items()
                   if not ok and _kind(r) not in ("NotImplemented", "InvalidArgument", "mismatch", "the case has no data set"))
    begin, end = f"<!-- node-test-pass-rates-{device}:begin -->", f"<!-- node-test-pass-rates-{device}:end -->"
    text = "\n".join([
        begin,
        f"On device `{device}` (`onnx_node_sweep.py --device {device}`, the same cases as written, onnx "
        f"{onnx.__version__}): **{passed} of {len(results)} cases and {op_types} operator types pass**; wrong "
        f"answers: {len(wrong)}" + (f" ({', '.join(wrong)})" if wrong else "")
        + f"; within the 16-bit rounding tolerance: {len(shared)}; the rest are refusals and failures by kind: "
        + ", ".join(f"{k} {v}" for k, v in kinds.most_common()) + "."
        + (f" Device errors, crashes and hangs: {'; '.join(other)}." if other else ""),
        end,
    ])
    DOC.write_text(_replace_block(DOC.read_text(), begin, end, text))
    print(f"{device}: {passed}/{len(results)} ({op_types} op types); {len(wrong)} wrong answers; wrote {DOC}")


if __name__ == "__main__":
    main()
