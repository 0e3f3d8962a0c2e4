"""Two "hosts" on one machine: two network namespaces joined by a veth pair, for the collectives'
cross-host tests and benchmarks (conformance/tests/two_hosts.py, the torch.distributed tests in
framework_bridge/pytorch/tests, bench/collectives_bench.py). Needs root (CAP_SYS_ADMIN and
CAP_NET_ADMIN) and iproute2's `ip`. Standard library only: the conformance script runs without the
Python bridge."""

import contextlib
import os
import subprocess


class NamespacesUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, or no CAP_SYS_ADMIN); the message is ip's."""


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@contextlib.contextmanager
def two_hosts(prefix, subnet):
    """Namespaces PREFIX + "A"/"B" (+ this process's id, so concurrent users do not collide), joined
    by a veth pair whose ends are 10.231.SUBNET.1 and .2 (/24), each namespace's loopback up. Yields
    [(namespace, interface, address)] per host; removes the namespaces (and so the pair) on exit.
    Raises NamespacesUnavailable when the first namespace cannot be made, RuntimeError naming the ip
    command and its message when a later step fails (what was made is removed)."""
    tag = str(os.getpid())
    ns = [f"{prefix}A{tag}", f"{prefix}B{tag}"]
    veth = [f"{prefix.lower()}a{tag}"[:15], f"{prefix.lower()}b{tag}"[:15]]  # interface names: 15 bytes
    addrs = [f"10.231.{subnet}.1", f"10.231.{subnet}.2"]
    made = []

    def ip(*args):
        r = _ip(*args)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")

    try:
        for n in ns:
            r = _ip("netns", "add", n)
            if r.returncode != 0:
                if not made:
                    raise NamespacesUnavailable(f"cannot create a network namespace here ({r.stderr.strip()}): "
                                                "needs root / CAP_SYS_ADMIN")
                raise RuntimeError(f"ip netns add {n}: {r.stderr.strip()}")
            made.append(n)
        ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for i in (0, 1):
            ip("link", "set", veth[i], "netns", ns[i])
            ip("-n", ns[i], "addr", "add", f"{addrs[i]}/24", "dev", veth[i])
            ip("-n", ns[i], "link", "set", veth[i], "up")
            ip("-n", ns[i], "link", "set", "lo", "up")
        yield list(zip(ns, veth, addrs))
    finally:
        for n in made:
            _ip("netns", "del", n)
