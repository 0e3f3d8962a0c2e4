"""torch.distributed's "hal" backend across two hosts with several ranks each: two network
namespaces joined by a veth pair, rank r on host r % 2, so the backend's communicator goes
hierarchical (shared memory within a namespace, TCP between them). Every collective against
expected values, and DDP / FSDP under torchrun (two nodes, static rendezvous on the first
namespace's address) against one process and against gloo across the same hosts. Skipped where
namespaces cannot be made (needs root)."""

import os
import pathlib
import subprocess
import sys

import pytest
import torch

HERE = pathlib.Path(__file__).parent
WORKER = HERE / "distributed_worker.py"
DDP = HERE.parent / "examples" / "ddp_train.py"
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"


def _env(**extra):
    env = dict(os.environ)
    env.setdefault("HAL_FALLBACK_WARN", "0")
    env["OMP_NUM_THREADS"] = "1"  # several processes share the 2 cores
    env.pop("HAL_COMM_HOST_ID", None)
    env.pop("HAL_COMM_TRANSPORT", None)
    env.update(extra)
    return env


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def hosts():
    """[(namespace, interface, address)] of two hosts joined by a veth pair."""
    tag = str(os.getpid())
    ns, veth = [f"thA{tag}", f"thB{tag}"], [f"tha{tag}"[:15], f"thb{tag}"[:15]]
    addrs = ["10.231.81.1", "10.231.81.2"]
    made = []
    try:
        for n in ns:
            r = _ip("netns", "add", n)
            if r.returncode != 0:
                pytest.skip(f"cannot create a network namespace here ({r.stderr.strip()}): needs CAP_SYS_ADMIN")
            made.append(n)
        assert _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1]).returncode == 0
        for i in (0, 1):
            for args in (("link", "set", veth[i], "netns", ns[i]),
                         ("-n", ns[i], "addr", "add", f"{addrs[i]}/24", "dev", veth[i]),
                         ("-n", ns[i], "link", "set", veth[i], "up"), ("-n", ns[i], "link", "set", "lo", "up")):
                assert _ip(*args).returncode == 0, args
        yield list(zip(ns, veth, addrs))
    finally:
        for n in made:
            _ip("netns", "del", n)


def test_every_collective_on_two_hosts_with_two_ranks_each(hosts, tmp_path):
    world = 4
    store = tmp_path / "store"
    procs = []
    for r in range(world):
        ns, ifname, _ = hosts[r % 2]
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, str(WORKER), "collectives", str(r),
                                       str(world), str(store)], env=_env(HAL_SOCKET_IFNAME=ifname),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank hung")
        assert p.returncode == 0, f"rank {r}:\n{out}"


def _train_on_two_hosts(hosts, tmp_path, name, port, *args):
    """torchrun on two nodes (one per namespace), 2 processes each; rank 0's parameters."""
    out = tmp_path / f"{name}.pt"
    procs = []
    for node, (ns, ifname, _) in enumerate(hosts):
        cmd = ["ip", "netns", "exec", ns, str(TORCHRUN), "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "2", "--master-addr", hosts[0][2], "--master-port", str(port), str(DDP), *args,
               "--out", str(out)]
        procs.append(subprocess.Popen(cmd, env=_env(HAL_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for node, p in enumerate(procs):
        try:
            log, _ = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{name}: a node hung")
        assert p.returncode == 0, f"{name} node {node}:\n{log[-3000:]}"
    return torch.load(out)


def _single(tmp_path, *args):
    out = tmp_path / "single.pt"
    r = subprocess.run([sys.executable, str(DDP), "--single", *args, "--out", str(out)], env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return torch.load(out)


def _max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_ddp_and_fsdp_across_two_hosts_match_one_process_and_gloo(hosts, tmp_path, mode):
    args = ["--model", "mlp", "--steps", "10"] if mode == "ddp" else ["--model", "decoder", "--steps", "4", "--fsdp"]
    port = 29611 if mode == "ddp" else 29621
    hal = _train_on_two_hosts(hosts, tmp_path, "hal", port, "--backend", "hal", *args)
    gloo = _train_on_two_hosts(hosts, tmp_path, "gloo", port + 1, "--backend", "gloo", *args)
    single = _single(tmp_path, *[a for a in args if a != "--fsdp"])
    # Same arithmetic up to the order of the gradient sum (four quarters vs one batch).
    assert _max_diff(hal, single) < 1e-5
    assert _max_diff(hal, gloo) < 1e-5
