#!/usr/bin/env python3
"""ctest driver for hal-conformance's own tests: runs the binary on a
plugin and checks its exit status, output and reports.

  check_run.py MODE HAL_CONFORMANCE PLUGIN WORKDIR

MODE is one of: wrong_kernel, gap_write, input_mutation, crash, hang, isolate, known_failure,
unexpected_pass, template_add, filter_selects_nothing, worked_example, bad_known_failures, list, full_catalog, claimed,
rerun, uniform_add_declined, uniform_add_through_core, cpu_uniform_through_core.
"""
import csv
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", re.M)


DECLINED_REASON = "mixed input dtypes: the kernel takes uniform inputs; --through-core runs them"
CAST_LINE = re.compile(r"^through the core: (\d+) input casts on the device, (\d+) through the fallback device "
                       r"\((.*)\)$", re.M)


def run(binary, plugin, *args):
    return run_cmd([binary, "--plugin", plugin, *args])


def run_cmd(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print("$", " ".join(cmd), "->", p.returncode)
    print(p.stdout[-6000:])
    print(p.stderr[-3000:], file=sys.stderr)
    return p


def summary(p):
    m = SUMMARY.findall(p.stdout)
    assert len(m) == 1, "expected exactly one summary line 'N passed, N failed, N skipped'"
    return tuple(int(x) for x in m[0])


def main():
    mode, binary, plugin, workdir = sys.argv[1:5]
    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = work / f"{mode}.csv", work / f"{mode}.json"

    if mode == "wrong_kernel":
        p = run(binary, plugin, "--filter", "add", "--failures-csv", str(csv_path), "--report-json", str(json_path))
        assert p.returncode == 1, "a wrong add must fail the run"
        assert re.search(r"^add \[.*\]: \d+ passed, [1-9]\d* failed", p.stdout, re.M), "no failing 'add' line"
        passed, failed, skipped = summary(p)
        # 1000 ulp is outside the float32/float16/bfloat16 tolerances but
        # inside float64's (1e-10 relative): exactly those three fail.
        assert (failed, passed, skipped) == (3, 6, 1), "float32/16/bf16 fail; float64, integers pass; bool refused"
        assert re.search(r"^add \[.*\]: 6 passed, 3 failed, 1 skipped \(\w+: the device refuses it: UNSUPPORTED_DTYPE",
                         p.stdout, re.M)
        # Failing in some registered dtypes only points at the registration.
        assert ("(fails for float32, float16, bfloat16; passes for float64, int8, uint8, int16, int32, int64 "
                "\u2014 is the kernel registered for dtypes it does not handle?)") in p.stdout, p.stdout
        rows = list(csv.DictReader(open(csv_path)))
        bad = [r for r in rows if r["op"] == "add" and r["dtype"] == "float32"]
        assert bad, "no add/float32 row in the failures CSV"
        # 1000 ulp of values in [-4, 4): ~1e-4 absolute, ~1e-4 relative.
        assert all(float(r["max_abs_error"]) > 1e-6 for r in bad if r["layout"]), bad
        assert any(float(r["max_rel_error"]) > 5e-5 for r in bad), bad
        assert all(r["op"] == "add" for r in rows)
        report = json.load(open(json_path))
        status = {t["name"]: t["status"] for t in report["tests"]}
        assert status["op.add.float32"] == "failed" and status["op.add.int32"] == "passed", status
        assert status["op.add.float64"] == "passed" and status["op.add.bool"] == "skipped", status
    elif mode in ("gap_write", "input_mutation", "crash", "hang"):
        env = {"gap_write": "gap", "input_mutation": "mutate", "crash": "crash", "hang": "hang"}[mode]
        os.environ["HAL_TEST_WRONG_ADD"] = env
        p = run(binary, plugin, "--filter", "add", "--dtype", "float32", "--failures-csv", str(csv_path),
                "--timeout", "2")
        assert p.returncode != 0
        if mode == "hang":
            assert p.returncode == 1 and "op.add.float32 hung" in p.stdout
            assert summary(p) == (0, 1, 0)
            rows = list(csv.DictReader(open(csv_path)))
            assert rows and "timed out after 2 s" in rows[0]["message"], rows
        elif mode == "crash":
            assert "the plugin crashed in op.add.float32" in p.stdout
            assert summary(p) == (0, 1, 0)
            rows = list(csv.DictReader(open(csv_path)))
            assert rows and "crashed" in rows[0]["message"], rows
        else:
            _, failed, _ = summary(p)
            assert failed == 1
            rows = list(csv.DictReader(open(csv_path)))
            want = "of the output's buffer was written" if mode == "gap_write" else "input 0 was modified"
            assert rows and all(want in r["message"] for r in rows), rows
    elif mode == "isolate":
        # PLUGIN: the CPU plugin with a relu that segfaults and an mm that hangs. Every float32 test runs,
        # each in a child process; the two are reported and the run goes on to its totals.
        junit = work / "isolate.xml"
        p = run(binary, plugin, "--isolate", "--timeout", "3", "--dtype", "float32", "--report-json",
                str(json_path), "--report-junit", str(junit), "--failures-csv", str(csv_path))
        assert p.returncode == 1, "a crash and a hang fail the run"
        assert re.search(r"^  CRASHED op\.relu\.float32: crashed: SIGSEGV", p.stdout, re.M), p.stdout
        assert re.search(r"^  TIMED OUT op\.mm\.float32: timed out after 3 s", p.stdout, re.M), p.stdout
        assert "1 crashed, 1 timed out (counted as failed)" in p.stdout
        passed, failed, skipped = summary(p)
        assert failed == 2 and passed > 100, (passed, failed, skipped)
        report = json.load(open(json_path))
        status = {t["name"]: t["status"] for t in report["tests"]}
        assert status["op.relu.float32"] == "crashed" and status["op.mm.float32"] == "timed_out", status
        # The tests after each of them ran (in a new child): relu and mm are not the last float32 tests.
        assert all(s in ("passed", "crashed", "timed_out", "skipped") for s in status.values()), status
        assert report["summary"]["crashed"] == 1 and report["summary"]["timed_out"] == 1
        assert report["summary"]["passed"] == passed
        xml = junit.read_text()
        assert 'name="op.relu.float32"' in xml and "crashed: SIGSEGV" in xml
        assert "timed out after 3 s" in xml
        rows = list(csv.DictReader(open(csv_path)))
        assert {r["op"] for r in rows} == {"relu", "mm"}, rows
    elif mode == "known_failure":
        kf = work / "known.toml"
        kf.write_text('[[known_failure]]\ntest = "op.add.*float16"\nreason = "skewed on purpose"\n'
                      '[[known_failure]]\ntest = "op.add.float32"\nreason = "skewed on purpose"\n')
        p = run(binary, plugin, "--filter", "add", "--known-failures", str(kf), "--report-json", str(json_path))
        assert p.returncode == 0, "declared failures must not fail the run"
        _, failed, _ = summary(p)
        assert failed == 0
        assert "3 known failures" in p.stdout
        report = json.load(open(json_path))
        status = {t["name"]: t["status"] for t in report["tests"]}
        for dt in ("float32", "float16", "bfloat16"):
            assert status[f"op.add.{dt}"] == "known_failure", status
        assert status["op.add.float64"] == "passed" and status["op.add.int64"] == "passed"
    elif mode == "unexpected_pass":
        kf = work / "known.toml"
        kf.write_text('[[known_failure]]\ntest = "op.add.float32"\nreason = "believed broken"\n')
        p = run(binary, plugin, "--filter", "add", "--known-failures", str(kf), "--report-json", str(json_path))
        assert p.returncode == 1, "a known failure that passes must fail the run"
        assert "UNEXPECTED PASS op.add.float32" in p.stdout
        _, failed, _ = summary(p)
        assert failed == 1
        report = json.load(open(json_path))
        status = {t["name"]: t["status"] for t in report["tests"]}
        assert status["op.add.float32"] == "unexpected_pass", status
    elif mode == "runtime_sentence":
        # A plugin that reports the operator capability but claims no op:
        # the FAILED line leads with what to change, then what was checked.
        p = run(binary, plugin, "--filter", "runtime.*")
        assert p.returncode != 0
        line = next(l for l in p.stdout.splitlines() if l.strip().startswith("FAILED runtime.device_properties:"))
        assert ("FAILED runtime.device_properties: the plugin declares the operator interface "
                "(HAL_CAPABILITY_OPERATOR in kInterfaces) but implements no op: register at least one kernel, "
                "or drop the capability until you do (check: ") in line, line
    elif mode == "template_add":
        # The template as shipped: its float32 add passes, every other op
        # and dtype is skipped with a reason, nothing fails.
        p = run(binary, plugin, "--report-json", str(json_path), "--coverage-md", str(work / "coverage.md"))
        assert p.returncode == 0
        passed, failed, skipped = summary(p)
        assert failed == 0 and skipped > 0
        report = json.load(open(json_path))
        ops = [t for t in report["tests"] if t["name"].startswith("op.")]
        passed_ops = [t["name"] for t in ops if t["status"] == "passed"]
        assert passed_ops == ["op.add.float32"], passed_ops
        others = [t for t in ops if t["name"] != "op.add.float32"]
        assert others and all(t["status"] == "skipped" and t.get("skip_reason") for t in others), \
            [t for t in others if t["status"] != "skipped" or not t.get("skip_reason")]
        add_refused = [t for t in others if t["name"].startswith("op.add.")]
        assert add_refused and all("UNSUPPORTED_DTYPE" in t["skip_reason"] for t in add_refused), add_refused
        # The summary line names the refused dtypes once, grouped by their
        # (identical) reason, the reason's own dtype written <dtype>.
        add_line = re.search(r"^add \[.*$", p.stdout, re.M).group(0)
        refused = [t["name"].split(".")[-1] for t in add_refused]
        reason = ("the device refuses it: UNSUPPORTED_DTYPE: template: op_check: add: this device does not implement "
                  "dtype <dtype> (it implements float32)")
        assert f"({', '.join(refused)}: {reason})" in add_line, add_line
        assert add_line.count("the device refuses it") == 1, add_line
        assert all(f"dtype {d} " not in add_line for d in refused), add_line
        # Ops the plugin does not implement: one closing count, not a line each;
        # --list-unimplemented names them.
        unimplemented = [t["op"] for t in others if t.get("skip_reason") == "not implemented by the plugin"]
        assert len(unimplemented) > 100, unimplemented
        assert "not implemented by the plugin)" not in p.stdout and not re.search(r"^softmax: ", p.stdout, re.M)
        assert (f"\n{len(unimplemented)} catalog ops not implemented by the plugin: skipped "
                "(--list-unimplemented names them)\n") in p.stdout, p.stdout
        listed = run(binary, plugin, "--list-unimplemented")
        assert listed.returncode == 0
        assert listed.stdout.splitlines()[1:] == unimplemented, listed.stdout
        # Its float32 add is uniform: the mixed-dtype cases are declined, not run.
        add = next(t for t in ops if t["name"] == "op.add.float32")
        assert add.get("declined") and all("uniform inputs" in d["reason"] for d in add["declined"]), add
        rt = [t for t in report["tests"] if t["name"].startswith("runtime.")]
        assert rt and all(t["status"] == "passed" for t in rt), rt
    elif mode == "worked_example":
        # docs/vendor_guide.md's worked example (uniform float32 add, mul,
        # relu, mm, sum, softmax, layer_norm), argv[5] the CPU plugin. As
        # given: those seven pass, the
        # mixed-dtype cases of add and mul are declined with the SDK's
        # reason, every other op test is skipped with a reason, 0 failed.
        # Through the core (the CPU plugin casting: acme has no copy op): the
        # mixed cases pass too.
        want = ["op.add.float32", "op.layer_norm.float32", "op.mm.float32", "op.mul.float32", "op.relu.float32",
                "op.softmax.float32", "op.sum.float32"]
        mixed = {"int32 with float32", "0-d float32 with int32 tensor", "0-d float64 with float32 tensor",
                 "float16 with bfloat16"}
        p = run(binary, plugin, "--report-json", str(json_path))
        assert p.returncode == 0 and summary(p)[1] == 0, "the worked example must pass with 0 failed"
        report = json.load(open(json_path))
        ops = [t for t in report["tests"] if t["name"].startswith("op.")]
        assert sorted(t["name"] for t in ops if t["status"] == "passed") == want, ops
        assert all(t["status"] == "skipped" and t.get("skip_reason") for t in ops if t["name"] not in want), \
            [t for t in ops if t["name"] not in want and (t["status"] != "skipped" or not t.get("skip_reason"))]
        assert all(t["status"] == "passed" for t in report["tests"] if t["name"].startswith("runtime.")), report
        # Declined reporting is the conformance part of issue 11 (merged by
        # the integrator): per test, "declined" lists each case and reason.
        for t in ops:
            declined = t.get("declined", [])
            if t["name"] in ("op.add.float32", "op.mul.float32"):
                assert {d["case"] for d in declined} == mixed, (t["name"], declined)
                assert all("uniform inputs" in d["reason"] for d in declined), declined
            else:
                assert not declined, (t["name"], declined)
        assert report["summary"]["declined_cases"] == 2 * len(mixed), report["summary"]
        p = run(binary, plugin, "--through-core", "--fallback-plugin", sys.argv[5], "--filter", "op.*.float32",
                "--report-json", str(json_path))
        assert p.returncode == 0 and summary(p)[1] == 0, "--through-core must pass the mixed cases"
        report = json.load(open(json_path))
        assert sorted(t["name"] for t in report["tests"] if t["status"] == "passed") == want, report["tests"]
        assert report["summary"]["declined_cases"] == 0, report["summary"]
        assert report["through_core"]["fallback_casts"] > 0, report["through_core"]
    elif mode == "filter_selects_nothing":
        # The template (float32 add only): a filter that selects no test
        # to run is a usage error (exit 2) that says why, never a green
        # "0 passed, 0 failed, 0 skipped".
        def refused(*args):
            p = run(binary, plugin, *args)
            assert p.returncode == 2, f"{args}: exit {p.returncode}, expected 2"
            assert not SUMMARY.search(p.stdout), "nothing may have run"
            return p.stderr
        err = refused("--filter", "op.layernorm.float32")  # a typo
        assert "no test matches --filter 'op.layernorm.float32'; the closest test names: op.layer_norm.float32" \
            in err, err
        err = refused("--filter", "op.softmax.float32")  # an op the plugin does not register
        assert "no test matches --filter 'op.softmax.float32': the plugin does not register softmax" in err, err
        assert "the plugin registers: add" in err, err
        err = refused("--filter", "softmax")
        assert "every test --filter 'softmax' selects is skipped" in err, err
        assert "op.softmax: not implemented by the plugin" in err and "the plugin registers: add" in err, err
        err = refused("--filter", "op.add.bfloat16")  # a dtype the kernel is not registered for
        assert "op.add.bfloat16: the device refuses it: UNSUPPORTED_DTYPE" in err, err
        err = refused("--list", "--filter", "op.addd.*")
        assert "the closest test names: op.add" in err, err
        p = run(binary, plugin, "--filter", "op.add.*")
        assert p.returncode == 0 and summary(p)[0] == 1
        p = run(binary, plugin, "--list", "--filter", "softmax")  # listing skipped tests is fine
        assert p.returncode == 0 and "op.softmax  [skipped: not implemented by the plugin]" in p.stdout
    elif mode == "bad_known_failures":
        kf = work / "bad.toml"
        kf.write_text('[[known_failure]]\ntest = "op.add.float32"\n')
        p = run(binary, plugin, "--known-failures", str(kf))
        assert p.returncode == 2
        assert f"{kf}:1" in p.stderr and "needs a reason" in p.stderr, p.stderr
    elif mode == "list":
        p = run(binary, plugin, "--list", "--filter", "add*")
        assert p.returncode == 0
        assert re.search(r"^op\.add\.float32$", p.stdout, re.M)
        assert re.search(r"^op\.\w+  \[skipped: no conformance suite\]$", p.stdout, re.M) or \
            "no conformance suite" not in p.stdout
        assert "runtime." not in p.stdout
        p = run(binary, plugin, "--list", "--filter", "add*", "--exclude", "op.add.*int*", "--exclude", "op.add.bool")
        assert p.returncode == 0
        assert re.search(r"^op\.add\.float16$", p.stdout, re.M) and "op.add.int32" not in p.stdout
        assert "op.add.uint8" not in p.stdout and "op.add.bool" not in p.stdout
    elif mode == "full_catalog":
        # The reference plugin must pass everything: every op of the catalog,
        # every dtype it allows, no failure and no skip.
        md = work / "cpu.coverage.md"
        p = run(binary, plugin, "--report-json", str(json_path), "--failures-csv", str(csv_path),
                "--report-junit", str(work / "cpu.junit.xml"), "--coverage-md", str(md))
        passed, failed, skipped = summary(p)
        assert p.returncode == 0 and failed == 0, f"{failed} tests failed (see {csv_path})"
        report = json.load(open(json_path))
        skips = [f"{t['name']}: {t.get('skip_reason', '')}" for t in report["tests"] if t["status"] == "skipped"]
        assert skipped == 0 and not skips, "skipped on the reference plugin:\n  " + "\n  ".join(skips)
        assert passed > 500, f"only {passed} tests ran"
    elif mode == "claimed":
        # A plugin that claims part of the catalog: everything it claims
        # passes (argv[6]: its known-failures file, optional), and it claims
        # at least 90 % of the catalog's ops that have a float32 form (those
        # the reference plugin, argv[5], lists in float32), in float32.
        name = pathlib.Path(plugin).stem.replace("libhal_plugin_", "")
        reference = sys.argv[5]
        known = sys.argv[6] if len(sys.argv) > 6 else None
        listing = run(binary, reference, "--list")
        float32_form = {line.split(".")[1] for line in listing.stdout.split()
                        if line.startswith("op.") and line.endswith(".float32")}
        assert len(float32_form) > 100, "the reference plugin lists too few float32 tests"
        md = work / f"{name}.coverage.md"
        args = ["--report-json", str(json_path), "--failures-csv", str(csv_path), "--coverage-md", str(md)]
        if known:
            args += ["--known-failures", known]
        p = run(binary, plugin, *args)
        passed, failed, skipped = summary(p)
        assert p.returncode == 0 and failed == 0, f"{failed} tests failed (see {csv_path})"
        report = json.load(open(json_path))
        ops = {t["op"] for t in report["tests"] if t.get("op")}
        float32_passed = {t["op"] for t in report["tests"]
                          if t.get("dtype") == "float32" and t["status"] == "passed"}
        claimed = {t["op"] for t in report["tests"] if t.get("op") and t["status"] == "passed"}
        ratio = len(float32_passed) / max(1, len(float32_form))
        print(f"{name}: {len(claimed)} of {len(ops)} catalog ops pass in some dtype; "
              f"{len(float32_passed)} of {len(float32_form)} ops with a float32 form pass in float32 "
              f"({100 * ratio:.1f} %)")
        print("not claimed in float32:", ", ".join(sorted(float32_form - float32_passed)) or "none")
        assert ratio >= 0.9, f"only {100 * ratio:.1f} % of the float32 catalog is claimed"
    elif mode == "rerun":
        # Every FAILED line ends with a command that reruns that one case
        # and layout and prints its values.
        p = run(binary, plugin, "--filter", "add", "--dtype", "float32")
        assert p.returncode == 1
        failed = [l for l in p.stdout.splitlines() if l.startswith("  FAILED ") and "more (see" not in l]
        assert failed and all(" -- rerun: " in l for l in failed), failed
        cmd = shlex.split(failed[0].split(" -- rerun: ", 1)[1])
        for word in ("--case", "--layout", "--show-values", "--filter"):
            assert word in cmd, (word, cmd)
        assert cmd[0] == binary and cmd[cmd.index("--plugin") + 1] == plugin, cmd
        assert cmd[cmd.index("--filter") + 1] == "op.add.float32", cmd
        case, layout = cmd[cmd.index("--case") + 1], cmd[cmd.index("--layout") + 1]
        r = run_cmd(cmd)
        assert r.returncode == 1, "the rerun fails as the case did"
        assert summary(r) == (0, 1, 0), "one test, failed"
        headers = [l for l in r.stdout.splitlines() if l.startswith("case '")]
        assert len(headers) == 1, f"the rerun runs exactly one case in one layout: {headers}"
        assert headers[0].startswith(f"case '{case.split('#')[0]}' ({layout}), op.add.float32"), headers
        assert re.search(r"^  input 0: \w+ \[[\d,]*\], strides \[[\d,]*\], byte offset \d+$", r.stdout, re.M)
        assert re.search(r"^  input 1: \w+ \[", r.stdout, re.M)
        assert re.search(r"^  output 0: float32 \[", r.stdout, re.M)
        assert re.search(r"^    \[[\d,]*\] expected \S+, actual \S+   <-- differs$", r.stdout, re.M), \
            "expected and actual values side by side, the wrong ones marked"
        rerun_failed = [l for l in r.stdout.splitlines() if l.startswith("  FAILED ")]
        assert len(rerun_failed) == 1 and rerun_failed[0] == failed[0], (rerun_failed, failed[0])
    elif mode == "uniform_add_declined":
        # Direct mode on a uniform float32 add: its mixed cases are declined
        # with the plugin's reason, not failed; the test still passes.
        junit, md = work / f"{mode}.junit.xml", work / f"{mode}.coverage.md"
        p = run(binary, plugin, "--report-json", str(json_path), "--report-junit", str(junit),
                "--coverage-md", str(md))
        assert p.returncode == 0
        passed, failed, skipped = summary(p)
        assert failed == 0 and skipped > 0
        report = json.load(open(json_path))
        ops = {t["name"]: t for t in report["tests"] if t["name"].startswith("op.")}
        assert [n for n, t in ops.items() if t["status"] == "passed"] == ["op.add.float32"], ops
        declined = ops["op.add.float32"].get("declined", [])
        # The suite's mixed float32 cases: int32 + float32, 0-d float64 + float32, float16 + bfloat16 ...
        assert len(declined) >= 3, declined
        assert all("uniform inputs" in d["reason"] and d["case"] and d["case_selector"] for d in declined), declined
        n = len(declined)
        assert report["summary"]["declined_cases"] == n
        add_line = re.search(r"^add \[.*$", p.stdout, re.M).group(0)
        assert re.search(r": 1 passed, 0 failed, \d+ skipped \(.*\); (\d+) cases declined \(" + re.escape(DECLINED_REASON)
                         + r"\)$", add_line), add_line
        assert f"; {n} cases declined" in add_line, add_line
        assert re.search(rf"^{n} cases declined \({re.escape(DECLINED_REASON)}\)$", p.stdout, re.M)
        shown = re.findall(r"^  DECLINED op\.add\.float32: case '([^']*)': .*uniform inputs", p.stdout, re.M)
        assert shown and shown[0] == declined[0]["case_selector"], shown
        assert "declined: case &apos;" in junit.read_text()
        assert f"pass ({n} declined)" in md.read_text()
        assert "through the core" not in p.stdout
    elif mode == "uniform_add_through_core":
        # Through the core the same plugin passes its mixed cases too: the
        # plugin has no copy op, so every cast goes through the fallback
        # device (the CPU plugin, loaded from libhal's plugin directory).
        p = run(binary, plugin, "--through-core", "--filter", "add", "--report-json", str(json_path))
        assert p.returncode == 0, "mixed cases must pass through the core"
        passed, failed, _ = summary(p)
        assert (passed, failed) == (1, 0)
        assert "declined" not in p.stdout
        report = json.load(open(json_path))
        t = next(t for t in report["tests"] if t["name"] == "op.add.float32")
        assert t["status"] == "passed" and "declined" not in t, t
        assert "through the core (fallback device cpu:0)" in p.stdout.splitlines()[0], p.stdout.splitlines()[0]
        m = CAST_LINE.search(p.stdout)
        assert m, "no 'through the core: N input casts ...' line"
        assert int(m.group(1)) == 0 and int(m.group(2)) > 0 and m.group(3) == "cpu:0", m.group(0)
        assert report["through_core"]["fallback_casts"] == int(m.group(2)), report["through_core"]
    elif mode == "cpu_uniform_through_core":
        # The CPU plugin with every op uniform: direct mode declines the mixed
        # cases; through the core the whole catalog passes as the plain CPU
        # plugin does (every test its --list names), the casts on the device
        # through the CPU plugin's own copy op.
        config = work / "cpu_uniform.toml"
        config.write_text(f'discover = false\n[[plugin]]\npath = "{plugin}"\noptions = {{ input_mode = "uniform" }}\n')
        p = run_cmd([binary, "--config", str(config), "--filter", "add"])
        assert p.returncode == 0 and summary(p)[1] == 0
        assert re.search(r"^\d+ cases declined", p.stdout, re.M), "uniform CPU add declines mixed cases"
        listing = run(binary, plugin, "--list")
        expected = [l for l in listing.stdout.splitlines() if re.match(r"^(op|runtime)\.\S+$", l)]
        p = run_cmd([binary, "--config", str(config), "--through-core", "--report-json", str(json_path),
                     "--failures-csv", str(csv_path)], timeout=900)
        passed, failed, skipped = summary(p)
        assert failed == 0, f"{failed} tests failed through the core (see {csv_path})"
        assert (passed, skipped) == (len(expected), 0), (passed, skipped, len(expected))
        assert "declined" not in p.stdout
        m = CAST_LINE.search(p.stdout)
        assert m and int(m.group(1)) > 0, "the uniform CPU plugin casts with its own copy op"
    else:
        sys.exit(f"unknown mode {mode}")
    print("OK")


if __name__ == "__main__":
    main()
