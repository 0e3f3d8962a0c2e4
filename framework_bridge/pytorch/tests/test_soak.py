"""The soak of issue 34 (bench/soak.py), short: training on "hal" and ONNX inference, each without and with
the fault layer, memory, descriptors and threads flat, every injected fault survived, and the faulted
training ending where the fault-free one ends. The long run's figures are in docs/performance.md."""
import json
import os
import pathlib
import subprocess
import sys

SOAK = pathlib.Path(__file__).resolve().parents[3] / "bench" / "soak.py"


def test_short_soak_is_flat_with_and_without_faults(tmp_path):
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, str(SOAK), "--quick", "--json", str(out)], capture_output=True,
                          text=True, env=dict(os.environ, HAL_FALLBACK_WARN="0"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert not report["failures"]
    runs = {r["name"]: r for r in report["results"]}
    assert set(runs) == {"train", "train+faults", "onnx", "onnx+faults"}
    for name in ("train+faults", "onnx+faults"):
        assert runs[name]["samples"][-1]["faults"] > 0, name
        assert runs[name]["errors"] > 0, name  # each one surfaced as an error the loop retried
    for name in ("train", "onnx"):
        assert runs[name]["errors"] == 0 and runs[name]["samples"][-1]["faults"] == 0
    assert runs["train+faults"]["digest"] == runs["train"]["digest"]
