"""torch.distributed's "hal" backend: every collective against expected values (hal and cpu
tensors, 2 and 3 ranks), gather, scatter, the object collectives, every ReduceOp and
monitored_barrier against the same program on gloo, DDP and FSDP training against single-process
training and against gloo, torch.distributed.checkpoint of an FSDP model, a killed rank, and bad
input. Each test starts real processes (FileStore or torchrun)."""

import contextlib
import os
import pathlib
import subprocess
import sys
import time

import pytest
import torch
from subprocess_util import gloo_teardown_abort, netns

HERE = pathlib.Path(__file__).parent
WORKER = HERE / "distributed_worker.py"
TEARDOWN = HERE / "ddp_teardown.py"
DDP = HERE.parent / "examples" / "ddp_train.py"
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"


def _env():
    env = dict(os.environ)
    env.setdefault("HAL_FALLBACK_WARN", "0")
    env["OMP_NUM_THREADS"] = "1"  # several processes share the 2 cores
    return env


def _shm():
    return {p.name for p in pathlib.Path("/dev/shm").iterdir() if p.name.startswith("hal-")}


def _ranks(scenario, world, tmp_path, timeout=240, env=None, backend="hal", store="store"):
    before = _shm()
    store = tmp_path / store
    procs = [subprocess.Popen([sys.executable, str(WORKER), scenario, str(r), str(world), str(store), backend],
                              env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario}: a rank hung")
        outs.append((p.returncode, out))
    fresh = _shm() - before
    if fresh:  # another job's communicator may be starting: its segment lives for milliseconds
        time.sleep(1)
    assert not (fresh & _shm()), "a /dev/shm segment was left behind"
    return outs


@pytest.mark.parametrize("world", [1, 2, 3])
def test_every_collective_on_hal_and_cpu_tensors(world, tmp_path):
    for rank, (code, out) in enumerate(_ranks("collectives", world, tmp_path)):
        assert code == 0, f"rank {rank}:\n{out}"


def test_every_collective_on_the_opencl_plugin_chosen_by_hal_toml(tmp_path):
    plugin = pathlib.Path(os.environ["HAL_BUILD_DIR"]) / "lib" / "hal" / "plugins" / "libhal_plugin_opencl.so"
    config = tmp_path / "opencl.toml"
    config.write_text(f'discover = false\n\n[[plugin]]\nname = "opencl"\npath = "{plugin}"\n')
    env = dict(_env(), HAL_CONFIG=str(config))
    env.pop("HAL_PLUGIN_PATH", None)
    for rank, (code, out) in enumerate(_ranks("collectives", 2, tmp_path, env=env)):
        assert code == 0, f"rank {rank}:\n{out}"


def test_two_hosts_in_network_namespaces_talk_over_tcp(tmp_path):
    """Two network namespaces joined by a veth pair, one rank in each: the hal backend's
    communicator sees two hosts and runs every collective over its TCP transport (Gloo), in
    processes that also hold libtorch's own copy of Gloo."""
    with contextlib.ExitStack() as stack:
        try:
            hosts = stack.enter_context(netns.two_hosts("td", 79))
        except netns.NamespacesUnavailable as e:
            pytest.skip(str(e))
        store = tmp_path / "store"
        procs = [subprocess.Popen(["ip", "netns", "exec", hosts[r][0], sys.executable, str(WORKER), "collectives",
                                   str(r), "2", str(store)], env=dict(_env(), HAL_SOCKET_IFNAME=hosts[r][1]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
        for r, p in enumerate(procs):
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, f"rank {r}:\n{out}"


def test_a_killed_rank_gives_the_others_an_error_within_the_timeout(tmp_path):
    outs = _ranks("kill", 2, tmp_path)
    assert outs[1][0] == 3, outs[1][1]  # the rank that died
    assert outs[0][0] == 0, outs[0][1]
    assert "error after" in outs[0][1] and "exited" in outs[0][1], outs[0][1]


@pytest.mark.parametrize("world,shared", [(2, "1"), (3, "1"), (2, "0")], ids=["2", "3", "2-unshared"])
def test_large_all_reduce_reads_and_writes_the_peers_buffers_in_place(world, shared, tmp_path):
    """Above 64 KiB an all_reduce reaches the other ranks' memory in place (said at debug level): the
    CPU plugin's buffers of 1 MiB and up mapped, smaller ones (and all with HAL_SHARED_DEVICE_MEMORY=0)
    copied by cross-memory attach; every dtype, op and tensor form of the "large" scenario matches the
    expected values on both."""
    env = dict(_env(), HAL_LOG_LEVEL="debug", HAL_SHARED_DEVICE_MEMORY=shared)
    outs = _ranks("large", world, tmp_path, env=env)
    for rank, (code, out) in enumerate(outs):
        assert code == 0, f"rank {rank}:\n{out}"
        assert "read and write the peers' buffers in place (cross-memory attach)" in out, out
        assert ("maps the peers' shared buffers" in out) == (shared == "1"), out


def test_large_all_reduce_falls_back_to_the_segment_on_every_rank_when_one_rank_cannot_attach(tmp_path):
    """HAL_COMM_CMA=0 on the last rank only: all ranks agree on the segment path (no rank waits for a
    copy that never comes) and the values still match."""
    outs = _ranks("large:cma_off_on_last", 3, tmp_path, env=dict(_env(), HAL_LOG_LEVEL="debug"))
    for rank, (code, out) in enumerate(outs):
        assert code == 0, f"rank {rank}:\n{out}"
        assert "cross-memory attach" not in out, out
        reason = "HAL_COMM_CMA=0" if rank == 2 else "another rank cannot reach its peers' memory"
        assert f"go through the shared segment: {reason}" in out, out


def test_a_rank_killed_during_a_large_all_reduce_gives_the_others_an_error_within_the_timeout(tmp_path):
    outs = _ranks("kill_large", 2, tmp_path)
    assert outs[1][0] == 3, outs[1][1]
    assert outs[0][0] == 0, outs[0][1]
    assert "error after" in outs[0][1], outs[0][1]


def test_mismatched_sizes_and_unsupported_ops_are_errors_not_hangs(tmp_path):
    for rank, (code, out) in enumerate(_ranks("bad", 2, tmp_path)):
        assert code == 0, f"rank {rank}:\n{out}"


@pytest.mark.parametrize("backend", ["hal", "gloo"])
def test_collectives_on_empty_tensors_complete_as_on_gloo(backend, tmp_path):
    """Empty tensors moved nothing but failed on hal ("send is NULL"): see distributed_worker.empty."""
    for rank, (code, out) in enumerate(_ranks("empty", 3, tmp_path, backend=backend)):
        assert code == 0, f"{backend} rank {rank}:\n{out}"


@pytest.mark.parametrize("backend", ["hal", "gloo"])
def test_batch_isend_irecv_with_every_rank_receiving_first_completes_as_on_gloo(backend, tmp_path):
    """Hung until the timeout on hal: see distributed_worker.recv_first."""
    for rank, (code, out) in enumerate(_ranks("recv_first", 3, tmp_path, backend=backend, timeout=120)):
        assert code == 0, f"{backend} rank {rank}:\n{out}"


@pytest.mark.parametrize("backend", ["hal", "gloo"])
def test_a_barrier_past_its_timeout_says_timed_out_as_on_gloo(backend, tmp_path):
    """PyTorch's test_barrier_timeout_* look for " Timed out " (gloo's words; hal's said "timed
    out"): see distributed_worker.barrier_timeout."""
    for rank, (code, out) in enumerate(_ranks("barrier_timeout", 2, tmp_path, backend=backend, timeout=60)):
        assert code == 0, f"{backend} rank {rank}:\n{out}"


def test_every_collective_under_torch_distributed_debug_detail(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL wraps each group in a ProcessGroupWrapper, which asks the
    backend for its sequence number before every collective: every collective failed on hal
    ("Backend hal does not yet support sequence numbers")."""
    env = dict(_env(), TORCH_DISTRIBUTED_DEBUG="DETAIL")
    for rank, (code, out) in enumerate(_ranks("collectives", 2, tmp_path, env=env)):
        assert code == 0, f"rank {rank}:\n{out}"


def _results(scenario, world, tmp_path, backend):
    """The dicts SCENARIO's ranks returned, run on BACKEND (gloo: cpu tensors)."""
    d = tmp_path / backend
    d.mkdir()
    for rank, (code, out) in enumerate(_ranks(scenario, world, d, backend=backend)):
        assert code == 0, f"{backend} rank {rank}:\n{out}"
    return [torch.load(d / f"store.{r}.pt", weights_only=False) for r in range(world)]


def _same(a, b, where):
    """A and B equal, tensors bit for bit with the same dtype."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a} vs {b}"
        assert torch.equal(a, b), f"{where}: {a} vs {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a, key=str) == sorted(b, key=str), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a} vs {b}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


@pytest.mark.parametrize("world", [2, 3])
def test_gather_scatter_objects_bitwise_ops_and_premul_sum_match_gloo(world, tmp_path):
    """gather and scatter (to/from rank 0 and the last rank), all_gather_object,
    broadcast_object_list (default device and device=hal), gather_object, scatter_object_list,
    BAND/BOR/BXOR on every integer dtype gloo has and bool (all_reduce, reduce,
    reduce_scatter_tensor), SUM/PRODUCT/MIN/MAX/AVG, and PREMUL_SUM with a double and a tensor
    factor: the same program on hal tensors and on gloo's cpu tensors gives the same values on
    every rank. The hal run also checks int16/uint16/uint32/uint64 bitwise ops against a
    reference, cpu and non-contiguous tensors, a side stream, and the object collectives on hal
    tensors (a "hal:hal" group)."""
    hal = _results("coverage", world, tmp_path, "hal")
    gloo = _results("coverage", world, tmp_path, "gloo")
    for rank in range(world):
        _same(hal[rank], gloo[rank], f"rank {rank}")
    last = hal[world - 1]
    assert len(last) >= 80 and "gather torch.float32 to 0" in hal[0] and "reduce BXOR torch.int8" in last, sorted(last)
    # Not vacuous: the ops differ where their definitions do.
    for dt in ("torch.int32", "torch.bool"):
        a, o, x = (last[f"all_reduce {op} {dt}"] for op in ("BAND", "BOR", "BXOR"))
        assert not torch.equal(a, o) and not torch.equal(x, o) and not torch.equal(a, x), dt


@pytest.mark.parametrize("world", [2, 3])
def test_all_gather_coalesced_and_sparse_all_reduce_match_gloo(world, tmp_path):
    """Neither existed on hal ("Backend hal does not support allgather_coalesced", "only dense
    tensors"): see distributed_worker.coalesced_sparse. The same values as gloo's, from cpu and hal
    tensors; the hal run also checks the errors of bad input."""
    hal = _results("coalesced_sparse", world, tmp_path, "hal")
    gloo = _results("coalesced_sparse", world, tmp_path, "gloo")
    for rank in range(world):
        assert len(gloo[rank]) == 15 and sorted(hal[rank]) == sorted(list(gloo[rank]) + [
            k + " hal" for k in gloo[rank] if k.startswith("all_gather_coalesced")]), sorted(hal[rank])
        for k in gloo[rank]:
            _same(hal[rank][k], gloo[rank][k], f"rank {rank} {k}")
            if k.startswith("all_gather_coalesced"):
                _same(hal[rank][k + " hal"], gloo[rank][k], f"rank {rank} {k} hal")


def test_ddp_no_sync_gradient_accumulation_matches_gloo(tmp_path):
    """DDP's no_sync gradient accumulation (PyTorch's test_accumulate_gradients_no_sync*, which run
    their body only for gloo, nccl and mpi), plain, with gradient_as_bucket_view and with an
    allreduce comm hook: the worker checks the synced gradients against one process on the whole
    batch; here every step's gradients on hal tensors against gloo's."""
    hal = _results("no_sync", 2, tmp_path, "hal")
    gloo = _results("no_sync", 2, tmp_path, "gloo")
    for rank in range(2):
        assert sorted(hal[rank]) == sorted(gloo[rank]) and len(hal[rank]) == 16, sorted(hal[rank])
        for k in gloo[rank]:
            for a, b in zip(hal[rank][k], gloo[rank][k], strict=True):
                assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), f"rank {rank} {k}: {a} vs {b}"


def test_monitored_barrier_names_the_ranks_that_did_not_reach_it_as_gloo_does(tmp_path):
    """3 ranks, a 1 s timeout: rank 0 names the one late rank (and all late ranks with
    wait_all_ranks) in gloo's words; on hal the others fail at once with rank 0's verdict (checked
    in the worker), and the communicator still works."""
    hal = _results("monitored", 3, tmp_path, "hal")
    gloo = _results("monitored", 3, tmp_path, "gloo")
    assert hal[0] == {"one late": "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1000 ms",
                      "all late": "[Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 1000 ms"}, hal[0]
    assert gloo[0] == hal[0], gloo[0]


def test_a_bad_scatter_list_or_unpicklable_object_fails_at_once_and_the_others_within_the_timeout(tmp_path):
    """3 ranks, a 3 s timeout: the source rank gets the wrong-length (or pickling) error at once
    and issues nothing; the ranks waiting for it get a DistBackendError within the timeout, and no
    rank hangs."""
    start = time.monotonic()
    for rank, (code, out) in enumerate(_ranks("stuck", 3, tmp_path, timeout=60)):
        assert code == 0, f"rank {rank}:\n{out}"
    assert time.monotonic() - start < 45


@pytest.mark.parametrize("api", ["fsdp", "fully_shard"])
def test_dcp_save_and_load_of_an_fsdp_model_on_hal(api, tmp_path):
    """FSDP FULL_SHARD (FullyShardedDataParallel: ShardedTensor state) or FSDP2 (fully_shard:
    DTensor parameters) on hal, 2 ranks: 2 steps equal one process's on the whole batch; saved with
    torch.distributed.checkpoint, trained on, loaded: the saved parameters again. Then 3 fresh
    processes in a fresh process group (resharded) load the checkpoint into a model of other
    initial weights: the saved parameters too."""
    for rank, (code, out) in enumerate(_ranks(f"dcp_save:{api}", 2, tmp_path)):
        assert code == 0, f"save, rank {rank}:\n{out}"
    assert (tmp_path / "checkpoint" / ".metadata").exists()
    for rank, (code, out) in enumerate(_ranks(f"dcp_load:{api}", 3, tmp_path, store="store2")):
        assert code == 0, f"load, rank {rank}:\n{out}"


_ABORTS = ("terminate called", "Fatal Python error", "Aborted", "core dumped", "Segmentation fault")


def test_the_completion_thread_drops_its_works_before_the_interpreter_finalizes(tmp_path):
    """A Work left queued at exit is completed, and its tensor released, while the interpreter can
    still take the tensor's Python object: a thread doing so once it finalizes is ended by Python
    inside a destructor, and the process aborts ("terminate called without an active exception")."""
    outs = _ranks("exit_with_work", 2, tmp_path)
    for rank, (code, out) in enumerate(outs):
        assert code == 0 and not any(a in out for a in _ABORTS), f"rank {rank}:\n{out}"
    assert "rank 0: tensor released, finalizing=False" in outs[0][1], outs[0][1]


def test_the_ddp_example_tears_down_cleanly_again_and_again(tmp_path):
    """examples/ddp_train.py's whole interpreter teardown (atexit, finalization, static destructors)
    at world size 2: 2 runs each of the plain example, without destroy_process_group, with an
    exception out of training, with the process group kept until finalization, and FSDP (Works
    completed by the completion thread). Every rank exits with its code and no abort."""
    variants = {"normal": 0, "nodestroy": 0, "exception": 1, "latepg": 0, "fsdp": 0}
    runs = 2
    r = subprocess.run([sys.executable, str(TEARDOWN), str(tmp_path), str(runs), "2", *variants], env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = 0
    for line in r.stdout.splitlines():
        variant, i, rank, code = line.split()
        out = (tmp_path / f"{variant}.{i}.{rank}").read_text()
        assert int(code) == variants[variant] and not any(a in out for a in _ABORTS), \
            f"{variant} run {i} rank {rank}: exit code {code}\n{out[-3000:]}"
        if variant == "exception":
            assert "an exception in the middle of training" in out, out[-3000:]
        elif rank == "0":
            assert "step 2: loss" in out, out[-3000:]  # the last of ddp_teardown.py's 3 steps
        seen += 1
    assert seen == runs * 2 * len(variants), r.stdout


def _train(tmp_path, name, *args, nproc=None):
    out = tmp_path / f"{name}.pt"
    if nproc:  # --standalone: a local rendezvous on a free port
        cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", str(nproc), str(DDP)]
    else:
        cmd = [sys.executable, str(DDP)]
    r = subprocess.run(cmd + list(args) + ["--out", str(out)], env=_env(), capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and gloo_teardown_abort(args, r.stderr):
        r = subprocess.run(cmd + list(args) + ["--out", str(out)], env=_env(), capture_output=True, text=True,
                           timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return torch.load(out)


def _max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.mark.parametrize("model", ["mlp", "decoder"])
def test_ddp_on_hal_matches_one_process_and_gloo(model, tmp_path):
    hal = _train(tmp_path, "hal", "--backend", "hal", "--model", model, "--steps", "20", nproc=2)
    single = _train(tmp_path, "single", "--single", "--model", model, "--steps", "20")
    gloo = _train(tmp_path, "gloo", "--backend", "gloo", "--model", model, "--steps", "20", nproc=2)
    # Same arithmetic up to the order of the gradient sum (two halves vs one batch).
    assert _max_diff(hal, single) < 1e-5
    assert _max_diff(hal, gloo) < 1e-5


def test_fsdp_full_shard_on_hal_matches_one_process_and_gloo(tmp_path):
    args = ["--model", "decoder", "--steps", "5", "--fsdp"]
    hal = _train(tmp_path, "hal", "--backend", "hal", *args, nproc=2)
    single = _train(tmp_path, "single", "--single", "--model", "decoder", "--steps", "5")
    gloo = _train(tmp_path, "gloo", "--backend", "gloo", *args, nproc=2)
    assert _max_diff(hal, single) < 1e-5
    assert _max_diff(hal, gloo) < 1e-5
