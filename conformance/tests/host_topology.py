#!/usr/bin/env python3
"""Ranks that disagree on the host topology: two ranks both claim the same host
(HAL_COMM_HOST_ID), but rank 1 runs in its own mount namespace with a private /dev/shm, so it
cannot open the segment rank 0 made for their host. Every rank must fail comm_init within the
timeout with an error that names the disagreement (rank 1) or rank 1's failure (rank 0), and
nothing may be left in /dev/shm.

    host_topology.py HAL_CONFORMANCE PLUGIN

Exit status: 0 passed, 1 failed, 77 skipped (no mount namespaces here: not root)."""

import os
import pathlib
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    runner, plugin = sys.argv[1], sys.argv[2]
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: cannot create a mount namespace ({probe.stderr.strip()}): needs root / CAP_SYS_ADMIN")
        return SKIP
    before = {p.name for p in pathlib.Path("/dev/shm").iterdir()}
    ok = True
    with tempfile.TemporaryDirectory() as store:
        env = dict(os.environ, HAL_COMM_HOST_ID=f"claimed-{os.getpid()}")
        procs = []
        for r in (0, 1):
            cmd = [runner, "--plugin", plugin, "--collectives", "--world", "2", "--collective-rank", str(r),
                   "--collective-store", store, "--collective-scenario", "init_fails",
                   "--collective-fault-timeout-ms", "5000"]
            if r == 1:  # the liar: its own /dev/shm
                cmd = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs none /dev/shm && exec "$@"', "sh"] + cmd
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = []
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                print("FAILED: a rank hung")
                return 1
            print(out, end="")
            outs.append(out)
            if p.returncode != 0:
                print(f"FAILED: rank {r} exited with {p.returncode}")
                ok = False
    if "disagree on the host topology" not in outs[1]:
        print("FAILED: rank 1 does not name the disagreement on the host topology")
        ok = False
    if "rank 1 failed" not in outs[0]:
        print("FAILED: rank 0 does not name rank 1's failure")
        ok = False
    left = {p.name for p in pathlib.Path("/dev/shm").iterdir()} - before
    if any(n.startswith("hal-") for n in left):
        print(f"FAILED: left in /dev/shm: {sorted(left)}")
        ok = False
    print("ranks disagreeing on the host topology:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
