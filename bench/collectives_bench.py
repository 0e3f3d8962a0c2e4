#!/usr/bin/env python3
"""allreduce through torch.distributed: the "hal" backend (hal tensors) against gloo (cpu tensors)
in the same run, at 2 and 4 processes on this machine.

    PYTHONPATH=<build>/python HAL_BUILD_DIR=<build> python bench/collectives_bench.py [--worlds 2,4]

For each size it prints the median time per allreduce of float32 over --reps repetitions (after
warm-up), the bus bandwidth (2 (n-1)/n x bytes / time, NCCL's definition), hal/gloo as a speed ratio
(> 1: hal faster), and the bus bandwidth as a percentage of this machine's memcpy bandwidth (one
process copying 64 MiB, measured first): on one thread, as each rank runs (OMP_NUM_THREADS=1), and on
all. Each rank of an allreduce reads and writes the whole vector at least once, so n ranks move n
times a memcpy's bytes: against a memcpy that has the whole machine's bandwidth to itself, 1/n is the
bound. --ddp also times DistributedDataParallel training
steps (examples/ddp_train.py, 2 processes) on hal against gloo. --two-hosts N (root: network
namespaces) runs 2 x N ranks on two "hosts" (namespaces joined by a veth pair, rank r on host r % 2)
and compares the hal backend's hierarchical transport (shared memory within a host, TCP between the
hosts' leaders) with its flat TCP mesh (HAL_COMM_TRANSPORT=tcp) and with gloo.
Results go in docs/performance.md.
"""

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [8, 4 << 10, 1 << 20, 64 << 20]


def worker(backend, rank, world, store, sizes, reps, settle=0):
    import torch
    import torch.distributed as dist

    device = "cpu"
    if backend == "hal":
        import torch_hal  # noqa: F401

        device = "hal"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    out = {}
    # SETTLE untimed 8-byte allreduces first: across network namespaces, the first few dozen operations of
    # a new hal communicator took ~8 ms each here (bench/collectives_model.py wants the steady state).
    for _ in range(settle):
        dist.all_reduce(torch.ones(2, device=device))
    for size in sizes:
        x = torch.ones(max(size // 4, 2), device=device)
        n = reps if size < (16 << 20) else max(3, reps // 10)
        for _ in range(3):
            dist.all_reduce(x)
        times = []
        for _ in range(n):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if device == "hal":
                torch.hal.synchronize()
            times.append(time.perf_counter() - t0)
        # Rank 0's times: an allreduce ends on a rank only once every rank contributed.
        out[size] = statistics.median(times)
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(out), flush=True)


def memcpy_bandwidth(threads=None):
    """Bytes per second of one process copying 64 MiB with THREADS intra-op threads (None: torch's default)."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _memcpy_bandwidth()
    finally:
        torch.set_num_threads(before)


def _memcpy_bandwidth():
    import torch

    src, dst = torch.ones(16 << 20), torch.empty(16 << 20)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return src.numel() * 4 / statistics.median(times)


def run(backend, world, sizes, reps, hosts=None, extra_env=None, settle=0):
    """HOSTS: [(namespace, interface)] rank r runs in hosts[r % len(hosts)]; None: here. SETTLE: see worker()."""
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        procs = []
        for r in range(world):
            env = dict(os.environ, OMP_NUM_THREADS="1", HAL_FALLBACK_WARN="0", **(extra_env or {}))
            cmd = [sys.executable, __file__, "--worker", backend, str(r), str(world), store,
                   ",".join(map(str, sizes)), str(reps), str(settle)]
            if hosts:
                ns, ifname = hosts[r % len(hosts)]
                env.update(HAL_SOCKET_IFNAME=ifname, GLOO_SOCKET_IFNAME=ifname)
                cmd = ["ip", "netns", "exec", ns] + cmd
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
        outs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"{backend} world {world} failed")
        return {int(k): v for k, v in json.loads(outs[0].strip().splitlines()[-1]).items()}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        b, r, w, s, sizes, reps, settle = sys.argv[2:9]
        return worker(b, int(r), int(w), s, [int(x) for x in sizes.split(",")], int(reps), int(settle))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", default="2,4")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--ddp", action="store_true", help="also time DDP training steps, hal vs gloo")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="all-reduce sizes in bytes, comma-separated")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--two-hosts", type=int, metavar="N", help="2 hosts x N ranks in network namespaces (root)")
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.two_hosts:
        return two_hosts(args.two_hosts, sizes, args.reps, args.json)
    rows = []
    copy_bw, copy_all = memcpy_bandwidth(1), memcpy_bandwidth()
    print(f"memcpy bandwidth (one process, 64 MiB): {copy_bw / 1e9:.2f} GB/s on one thread (as each rank runs), "
          f"{copy_all / 1e9:.2f} GB/s on {os.cpu_count()} threads")
    print(f"{'world':>5} {'bytes':>10} {'hal us':>10} {'gloo us':>10} {'hal/gloo':>9} {'hal busbw GB/s':>15} "
          f"{'gloo busbw':>11} {'% memcpy 1t':>12} {'% all':>6}")
    for world in (int(w) for w in args.worlds.split(",")):
        hal = run("hal", world, sizes, args.reps)
        gloo = run("gloo", world, sizes, args.reps)
        for size in sizes:
            factor = 2 * (world - 1) / world * size
            hb, gb = factor / hal[size], factor / gloo[size]
            print(f"{world:>5} {size:>10} {hal[size] * 1e6:>10.1f} {gloo[size] * 1e6:>10.1f} "
                  f"{gloo[size] / hal[size]:>9.2f} {hb / 1e9:>15.2f} {gb / 1e9:>11.2f} {100 * hb / copy_bw:>11.0f}%"
                  f" {100 * hb / copy_all:>5.0f}%")
            rows.append({"world": world, "bytes": size, "hal_s": hal[size], "gloo_s": gloo[size],
                         "ratio": gloo[size] / hal[size], "hal_busbw_gb_s": hb / 1e9, "gloo_busbw_gb_s": gb / 1e9,
                         "memcpy_gb_s": copy_bw / 1e9, "memcpy_all_threads_gb_s": copy_all / 1e9})
    if args.ddp:
        ddp_step_times()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def two_namespaces():
    """Two network namespaces joined by a veth pair (root, conformance/tests/netns.py), removed on exit;
    yields run()'s HOSTS."""
    path = pathlib.Path(__file__).resolve().parents[1] / "conformance" / "tests" / "netns.py"
    spec = importlib.util.spec_from_file_location("hal_netns", path)
    netns = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(netns)
    return _hosts_of(netns.two_hosts("cb", 78))


@contextlib.contextmanager
def _hosts_of(made):
    with made as hosts:
        yield [(ns, ifname) for ns, ifname, _ in hosts]


def two_hosts(per_host, sizes, reps, json_path):
    """2 x PER_HOST ranks in two network namespaces: hal hierarchical, hal flat TCP, gloo."""
    world = 2 * per_host
    with two_namespaces() as hosts:
        hier = run("hal", world, sizes, reps, hosts)
        flat = run("hal", world, sizes, reps, hosts, {"HAL_COMM_TRANSPORT": "tcp"})
        gloo = run("gloo", world, sizes, reps, hosts)
    print(f"2 hosts x {per_host} ranks (network namespaces, veth), allreduce float32, median of rank 0")
    print(f"{'bytes':>10} {'hier us':>10} {'flat tcp us':>12} {'gloo us':>10} {'hier/flat':>10} {'hier/gloo':>10} "
          f"{'hier busbw GB/s':>16}")
    rows = []
    for size in sizes:
        busbw = 2 * (world - 1) / world * size / hier[size]
        print(f"{size:>10} {hier[size] * 1e6:>10.1f} {flat[size] * 1e6:>12.1f} {gloo[size] * 1e6:>10.1f} "
              f"{flat[size] / hier[size]:>10.2f} {gloo[size] / hier[size]:>10.2f} {busbw / 1e9:>16.2f}")
        rows.append({"hosts": 2, "per_host": per_host, "bytes": size, "hier_s": hier[size], "flat_tcp_s": flat[size],
                     "gloo_s": gloo[size]})
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


def ddp_step_times():
    """Mean step time of DDP training (steps 2..40) on 2 processes: hal device + hal backend
    against PyTorch CPU + gloo, the same script and data."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "framework_bridge", "pytorch",
                          "examples", "ddp_train.py")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", HAL_FALLBACK_WARN="0")
    print(f"{'model':>8} {'hal ms':>8} {'gloo ms':>8} {'hal/gloo speed':>15}")
    for model in ("mlp", "decoder"):
        ms = {}
        for backend in ("hal", "gloo"):
            out = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", script, "--backend", backend,
                                  "--model", model, "--steps", "40", "--time"], env=env, capture_output=True,
                                 text=True, check=True).stdout
            ms[backend] = float(out.split("mean step time:")[1].split()[0])
        print(f"{model:>8} {ms['hal']:>8.3f} {ms['gloo']:>8.3f} {ms['gloo'] / ms['hal']:>15.2f}")


if __name__ == "__main__":
    main()
