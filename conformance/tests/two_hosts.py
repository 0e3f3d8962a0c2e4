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

import netns

SKIP = 77


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
    try:
        with netns.two_hosts("hal", 77) as hosts:
            ns, veth = [h[0] for h in hosts], [h[1] for h in hosts]
            ok = all([run_scenario(runner, plugin, ns, veth, per_host, s) for s in scenarios])
    except netns.NamespacesUnavailable as e:
        print(f"SKIP: {e}")
        return SKIP
    print("two hosts over TCP:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
