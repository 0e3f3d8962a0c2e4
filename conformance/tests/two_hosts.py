#!/usr/bin/env python3
"""Collectives between two hosts on one machine: two network namespaces joined by a veth pair,
one rank in each, running hal-conformance's collective suite over the TCP transport.

    two_hosts.py HAL_CONFORMANCE PLUGIN

Exit status: 0 passed, 1 failed, 77 skipped (namespaces cannot be created here: not root, or no
CAP_NET_ADMIN; the reason is printed)."""

import os
import pathlib
import subprocess
import sys
import tempfile

SKIP = 77


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def main():
    runner, plugin = sys.argv[1], sys.argv[2]
    tag = str(os.getpid())
    ns = [f"halA{tag}", f"halB{tag}"]
    veth = [f"hva{tag}"[:15], f"hvb{tag}"[:15]]
    created = []
    try:
        for n in ns:
            r = sh("ip", "netns", "add", n, check=False)
            if r.returncode != 0:
                print(f"SKIP: cannot create a network namespace ({r.stderr.strip()}): needs root / CAP_SYS_ADMIN")
                return SKIP
            created.append(n)
        sh("ip", "link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for i in (0, 1):
            sh("ip", "link", "set", veth[i], "netns", ns[i])
            sh("ip", "-n", ns[i], "addr", "add", f"10.231.77.{i + 1}/24", "dev", veth[i])
            sh("ip", "-n", ns[i], "link", "set", veth[i], "up")
            sh("ip", "-n", ns[i], "link", "set", "lo", "up")
        before = {p.name for p in pathlib.Path("/dev/shm").iterdir()}
        with tempfile.TemporaryDirectory() as store:
            procs = []
            for r in (0, 1):
                env = dict(os.environ, HAL_SOCKET_IFNAME=veth[r])
                procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns[r], runner, "--plugin", plugin, "--collectives", "--world", "2",
                     "--collective-rank", str(r), "--collective-store", store, "--collective-scenario", "tcp",
                     "--collective-max-bytes", str(16 << 20)],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            ok = True
            for r, p in enumerate(procs):
                try:
                    out, _ = p.communicate(timeout=600)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    print("FAILED: a rank hung")
                    return 1
                print(out, end="")
                ok &= p.returncode == 0
        left = {p.name for p in pathlib.Path("/dev/shm").iterdir()} - before
        if any(n.startswith("hal-") for n in left):
            print(f"FAILED: left in /dev/shm: {sorted(left)}")
            ok = False
        print("two hosts over TCP:", "PASSED" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        for n in created:
            sh("ip", "netns", "del", n, check=False)


if __name__ == "__main__":
    sys.exit(main())
