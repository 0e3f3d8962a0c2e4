"""Helpers for tests that run torch_hal in a fresh Python process (another hal.toml, other plugins)."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap


def _load_netns():
    """conformance/tests/netns.py (two hosts in network namespaces), shared with the conformance
    script and the collectives benchmark."""
    path = pathlib.Path(__file__).resolve().parents[3] / "conformance" / "tests" / "netns.py"
    spec = importlib.util.spec_from_file_location("hal_netns", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


netns = _load_netns()


def build_dir():
    """The build tree under test ($HAL_BUILD_DIR, set by .ci/test.sh)."""
    return pathlib.Path(os.environ["HAL_BUILD_DIR"])


def run_python(code, timeout=300, **env):
    """Runs CODE (dedented) in a new interpreter with ENV added and fallback warnings off; asserts it
    exits 0 (the message has its stdout and stderr) and returns its stdout."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ, HAL_FALLBACK_WARN="0", **env), timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def gloo_teardown_abort(args, output):
    """Whether a run of the gloo reference (ARGS holds "gloo") failed with the abort PyTorch's
    ProcessGroupGloo at times hits while the group is torn down after the last step (seen in CI;
    pytorch/pytorch#190489 shows the same abort). Such a run is repeated (the comparison needs its
    parameters); a hal run is never retried."""
    return "gloo" in args and "terminate called without an active exception" in output
