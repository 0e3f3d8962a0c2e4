"""Elastic recovery on the "hal" backend: torchrun (c10d rendezvous, --max-restarts 1) runs
examples/elastic_train.py; rank 1 kills itself (SIGKILL) before step 7 of 20; torchrun stops the
survivor (its SIGTERM may come before the survivor's collective fails on the dead peer, which
test_distributed.py's killed-rank test covers), restarts the group, and training resumes from the last DCP checkpoint to the parameters of an uninterrupted run. Nothing is
left behind: no /dev/shm segment, no process."""

import os
import pathlib
import socket
import subprocess
import sys

import torch

HERE = pathlib.Path(__file__).parent
SCRIPT = HERE.parent / "examples" / "elastic_train.py"
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _shm():
    return {p.name for p in pathlib.Path("/dev/shm").iterdir() if p.name.startswith("hal-")}


def _run(tmp_path, name, *extra):
    ckpt, out = tmp_path / f"{name}-ckpt", tmp_path / f"{name}.pt"
    env = dict(os.environ, OMP_NUM_THREADS="1", HAL_FALLBACK_WARN="0")
    cmd = [str(TORCHRUN), "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"localhost:{_free_port()}", "--rdzv-id", f"{name}-{os.getpid()}", str(SCRIPT),
           "--checkpoint-dir", str(ckpt), "--steps", "20", "--out", str(out), *extra]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return torch.load(out), r.stdout + r.stderr, ckpt


def test_a_rank_killed_at_step_7_of_20_restarts_and_ends_at_the_uninterrupted_parameters(tmp_path):
    before = _shm()
    whole, _, _ = _run(tmp_path, "whole")
    killed, log, ckpt = _run(tmp_path, "killed", "--kill-rank", "1", "--kill-at-step", "7")
    assert "attempt 0: 2 ranks, starting at step 0" in log, log[-3000:]
    assert "attempt 1: 2 ranks, starting at step 7" in log, log[-3000:]  # resumed from step_7, not from scratch
    assert sorted(whole) == sorted(killed)
    for k in whole:
        assert torch.equal(whole[k], killed[k]), k
    assert not (_shm() - before), "a /dev/shm segment was left behind"
    left = subprocess.run(["pgrep", "-f", str(ckpt)], capture_output=True, text=True).stdout.split()
    assert not left, f"processes left behind: {left}"
