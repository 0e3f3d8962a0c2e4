"""What opinfo_sweep.py and module_sweep.py share: the common command line, the pool of worker
subprocesses (one key at a time each, with a time limit, so a crash or a hang costs only that key:
the worker is replaced and the sweep goes on), the worker side of its line protocol, and the
report files.

A sweep script runs itself with --worker as the worker: its main() calls worker_main() with its
own run function, and sweep() with the command line that starts such a worker.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import faulthandler
import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import threading
import time
import traceback


def _short(e, limit=300):
    text = f"{type(e).__name__}: {str(e).strip()}"
    first = text.splitlines()[0] if text else ""
    return first[:limit]


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parser(doc, *, select_flag, select_help, jobs, timeout, per, out, max_samples_help, docs, ci_list, repo):
    """The command line both sweeps take (the options the workers and the reports read); a sweep
    adds its own options to it. SELECT_FLAG (--ops, --modules) is the regex that picks the keys."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(select_flag, help=select_help)
    p.add_argument("--jobs", type=int, default=jobs, help=f"worker processes (default {jobs})")
    p.add_argument("--timeout", type=float, default=timeout, help=f"seconds per {per} before it counts as a hang")
    p.add_argument("--out", default=str(out), help="output directory (JSON, markdown, logs)")
    p.add_argument("--config", help="hal.toml for the device (default: $HAL_CONFIG / installed default)")
    p.add_argument("--plugin", action="append", default=[], help="plugin file to load (repeatable; only these load)")
    p.add_argument("--max-samples", type=int, help=max_samples_help)
    p.add_argument("--from-json", help="no sweep: regenerate the reports from this sweep JSON")
    p.add_argument("--write-docs", action="store_true", help=f"rewrite the generated section of {docs.relative_to(repo)}")
    p.add_argument("--write-ci-list", action="store_true", help=f"regenerate {ci_list.relative_to(repo)}")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def worker_command(script, args, *extra):
    """The command line of a worker of SCRIPT for ARGS (EXTRA: the script's own worker options)."""
    cmd = [sys.executable, os.path.abspath(script), "--worker"]
    if args.config:
        cmd += ["--config", args.config]
    for p in args.plugin:
        cmd += ["--plugin", p]
    if args.max_samples is not None:
        cmd += ["--max-samples", str(args.max_samples)]
    return cmd + list(extra)


# --------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------


def init_device(config=None, plugins=()):
    import torch  # noqa: F401
    import torch_hal

    if not torch_hal.is_initialized() and (config or plugins):
        torch_hal.init(config=config, plugins=list(plugins))
    import torch as _t

    _t.empty(1, device="hal")  # starts the runtime: a broken config fails here, once


def worker_main(args, load, run, fields=lambda key: {}):
    """Reads keys from stdin, writes one JSON result line per key: RUN(LOAD()[key]) (LOAD runs
    once, after the device starts). A result that raises becomes status "error" with FIELDS(key)."""
    import warnings

    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # an op's prints must not corrupt the protocol
    warnings.simplefilter("ignore")
    faulthandler.enable()  # a crash leaves its Python stack in the log
    faulthandler.register(signal.SIGUSR1, all_threads=False)  # the parent asks for the stack of a hang
    os.environ["HAL_FALLBACK_WARN"] = "0"
    init_device(args.config, args.plugin)
    items = load()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        t0 = time.monotonic()
        try:
            res = run(items[key])
        except Exception as e:  # noqa: BLE001 - the harness itself must not die
            res = {"key": key, **fields(key), "status": "error", "reason": _short(e),
                   "trace": traceback.format_exc()[-2000:]}
        res["seconds"] = round(time.monotonic() - t0, 3)
        proto.write(json.dumps(res) + "\n")


# --------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------


class Worker:
    """One worker subprocess running CMD; stderr goes to a log file (its tail explains a crash)."""

    def __init__(self, cmd, log_path, start_timeout):
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), PYTHONUNBUFFERED="1")
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.buf = b""
        hello = self.read_line(start_timeout)
        if not hello or not json.loads(hello).get("ready"):
            tail = self.log_tail()
            self.kill()
            raise RuntimeError(f"worker did not start: {tail}")

    def read_line(self, timeout):
        """The next stdout line; None on timeout; "" at EOF (the worker died)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def run(self, key, timeout):
        self.proc.stdin.write((key + "\n").encode())
        self.proc.stdin.flush()
        return self.read_line(timeout)

    def log_tail(self, n=400):
        if not self.log.closed:
            self.log.flush()
        try:
            text = pathlib.Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-n:]

    def crash_line(self):
        """The fatal-error line of the log (faulthandler's), else its last line."""
        try:
            lines = pathlib.Path(self.log_path).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        fatal = [ln for ln in lines if ln.startswith("Fatal Python error")]
        return (fatal or lines or [""])[-1][:200]

    def hang_site(self):
        """The innermost frames of the last faulthandler dump in the log."""
        try:
            text = pathlib.Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""
        dump = text[max(text.rfind("Stack (most recent call first)"), text.rfind("Current thread")):]
        frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', dump)
        return "stack: " + " <- ".join(f"{pathlib.Path(f).name}:{ln} {fn}" for f, ln, fn in frames[:4])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def _progress(res):
    return f"{res['status']} {res.get('reason', '')[:120]}"


def sweep(keys, args, log_dir, cmd, fields=lambda key: {}, progress=_progress):
    """Runs KEYS over args.jobs workers started with CMD (a timeout or a crash replaces the worker).
    Returns {key: result}; results the parent makes (the worker did not start, timed out or died)
    get FIELDS(key) too. PROGRESS(result) is the rest of a key's progress line on stderr."""
    todo = collections.deque(keys)
    results = {}
    lock = threading.Lock()
    done = [0]

    def job(j):
        worker = None
        while True:
            with lock:
                if not todo:
                    break
                key = todo.popleft()
            try:
                if worker is None:
                    worker = Worker(cmd, log_dir / f"worker{j}.log", start_timeout=max(300, args.timeout))
            except RuntimeError as e:
                res = {"key": key, "status": "error", "reason": str(e)[:400], **fields(key)}
            else:
                t0 = time.monotonic()
                with open(worker.log_path, "ab") as f:
                    f.write(f"\n=== {key}\n".encode())
                try:
                    line = worker.run(key, args.timeout)
                except OSError:  # the worker died before reading the key
                    line = ""
                if line:
                    res = json.loads(line)
                else:
                    alive = line is None
                    if alive:  # where it hangs: faulthandler's stack dump into the log
                        worker.proc.send_signal(signal.SIGUSR1)
                        time.sleep(1.0)
                    tail = worker.crash_line()
                    worker.kill()
                    if alive:
                        res = {"key": key, "status": "timeout",
                               "reason": f"no result within {args.timeout:g} s; {worker.hang_site()}"}
                    else:
                        res = {"key": key, "status": "crash",
                               "reason": f"worker died (exit {worker.proc.returncode}); {worker.hang_site()}; {tail}"}
                    res.update(fields(key), seconds=round(time.monotonic() - t0, 3))
                    worker = None
            with lock:
                results[key] = res
                done[0] += 1
                if not args.quiet:
                    print(f"[{done[0]}/{len(keys)}] {key}: {progress(res)}", file=sys.stderr, flush=True)
        if worker is not None:
            worker.proc.stdin.close()
            worker.proc.wait()
            worker.log.close()

    threads = [threading.Thread(target=job, args=(j,)) for j in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def sweep_data(args, out, all_keys, pattern, what, run_sweep, meta=dict):
    """{"meta", "results"}: read from args.from_json, else the sweep of ALL_KEYS() (those PATTERN
    matches, re.search) by RUN_SWEEP(keys, args, out) with OUT's old worker logs removed; META()
    (called after the sweep) adds to the common meta. Creates OUT."""
    out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        return json.loads(pathlib.Path(args.from_json).read_text())
    import torch

    keys = list(dict.fromkeys(k for k in all_keys() if not pattern or re.search(pattern, k)))
    if not keys:
        raise SystemExit(f"no {what} matches {pattern!r}")
    for f in out.glob("worker*.log"):
        f.unlink()
    t0 = time.monotonic()
    results = run_sweep(keys, args, out)
    return {"meta": {
        "torch": torch.__version__,
        "plugins": [pathlib.Path(x).name for x in args.plugin] or ([args.config] if args.config else []),
        "date": datetime.date.today().isoformat(),
        "seconds": round(time.monotonic() - t0, 1),
        "jobs": args.jobs,
        "timeout": args.timeout,
        "max_samples": args.max_samples,
        **meta(),
    }, "results": results}


# --------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------


def write_reports(data, out, stem, summarize_fn, markdown_fn):
    """Adds the summary to DATA, writes OUT/STEM.json and OUT/STEM.md; returns the markdown."""
    data["summary"] = summarize_fn(data["results"].values())
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1, sort_keys=True))
    md = markdown_fn(data)
    (out / f"{stem}.md").write_text(md)
    return md


def write_docs(md, path, begin, end):
    """Replaces what stands between the markers BEGIN and END in PATH with MD."""
    text = path.read_text()
    b, e = text.find(begin), text.find(end)
    if b < 0 or e < b:
        raise SystemExit(f"{path}: the markers {begin!r} ... {end!r} are missing")
    path.write_text(text[: b + len(begin)] + "\n" + md + text[e:])


def ci_rows(path):
    """The tab-separated columns of each entry (not a comment or blank line) of a CI list."""
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
