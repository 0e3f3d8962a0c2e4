#!/usr/bin/env python3
"""Collectives between two hosts on one machine: two network namespaces joined by a veth pair,
RANKS_PER_HOST ranks in each (rank r on host r % 2, so hosts interleave ranks), running
hal-conformance's collective scenarios. One rank per host: the flat TCP transport; more: the
hierarchical one (shared memory within a namespace, TCP between them).

    two_hosts.py HAL_CONFORMANCE PLUGIN [RANKS_PER_HOST [SCENARIO ...]]

SCENARIO defaults to tcp (the suite, checking that TCP is in use); mismatch, abort, kill and
kill_leader run the fault scenarios across the hosts (kill: the last rank exits mid-job;
kill_leader: rank 1, host 1's leader, does; the others must fail within the timeout). Each rank prints the transport it used
and how it reaches each peer (shm within its host, tcp to the other; checked).

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


def run_scenario(runner, plugin, ns, veth, per_host, scenario):
    world = 2 * per_host
    before = {p.name for p in pathlib.Path("/dev/shm").iterdir()}
    with tempfile.TemporaryDirectory() as store:
        procs = []
        for r in range(world):
            host = r % 2
            env = dict(os.environ, HAL_SOCKET_IFNAME=veth[host])
            env.pop("HAL_COMM_HOST_ID", None)
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns[host], runner, "--plugin", plugin, "--collectives", "--world", str(world),
                 "--collective-rank", str(r), "--collective-store", store, "--collective-scenario", scenario,
                 "--collective-max-bytes", str(16 << 20), "--collective-fault-timeout-ms", "5000"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        ok = True
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                print(f"FAILED: {scenario}: a rank hung")
                return False
            print(out, end="")
            # Each rank names how it reaches each peer: shm on its own host (r % 2), tcp to the other.
            want = ", ".join(f"{q} " + ("self" if q == r else "shm" if q % 2 == r % 2 else "tcp") for q in range(world))
            if scenario == "tcp" and f"rank {r}: transport " in out and f"; peers: {want}" not in out:
                print(f"FAILED: {scenario}: rank {r} does not report peers '{want}'")
                ok = False
            expected = 3 if (scenario == "kill" and r == world - 1) or (scenario == "kill_leader" and r == 1) else 0
            if p.returncode != expected:
                print(f"FAILED: {scenario}: rank {r} exited with {p.returncode} (expected {expected})")
                ok = False
    left = {p.name for p in pathlib.Path("/dev/shm").iterdir()} - before
    if any(n.startswith("hal-") for n in left):
        print(f"FAILED: {scenario}: left in /dev/shm: {sorted(left)}")
        ok = False
    print(f"two hosts x {per_host} ranks, {scenario}:", "PASSED" if ok else "FAILED")
    return ok


def main():
    runner, plugin = sys.argv[1], sys.argv[2]
    per_host = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    scenarios = sys.argv[4:] or ["tcp"]
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
        ok = all([run_scenario(runner, plugin, ns, veth, per_host, s) for s in scenarios])
        print("two hosts over TCP:", "PASSED" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        for n in created:
            sh("ip", "netns", "del", n, check=False)


if __name__ == "__main__":
    sys.exit(main())
