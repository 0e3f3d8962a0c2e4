"""One rank of test_distributed.py's scenarios:

    python distributed_worker.py SCENARIO RANK WORLD STORE_FILE [BACKEND]

BACKEND is "hal" (default; hal tensors) or "gloo" (cpu tensors): the scenarios compared with gloo
run the same program on both. Exits 0 when every check of the scenario held, printing what failed
otherwise; a scenario that returns a dict leaves it in STORE_FILE.RANK.pt for the test to compare."""

import datetime
import os
import pickle
import sys
import time
import weakref

import torch
import torch.distributed as dist
import torch_hal  # noqa: F401

BACKEND = "hal"  # set by main()
DEVICE = "hal"  # "cpu" under gloo


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def same(a, b):
    """A and B equal: tensors bit for bit (dtype and device too), containers element by element."""
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def collectives(rank, world):
    for device in ("hal", "cpu"):
        for dtype in (torch.float32, torch.float16, torch.int64):
            x = torch.full((7,), rank + 1, dtype=dtype, device=device)
            dist.all_reduce(x)
            check(torch.equal(x.cpu(), torch.full((7,), world * (world + 1) // 2, dtype=dtype)), f"all_reduce {device} {dtype}")
        x = torch.full((5,), float(rank + 2), device=device)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        check(torch.equal(x.cpu(), torch.full((5,), float(world + 1))), f"all_reduce max {device}")
        x = torch.full((5,), float(rank + 1), device=device)
        dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
        check(torch.equal(x.cpu(), torch.full((5,), float(torch.arange(1, world + 1).prod()))), "all_reduce product")
        x = torch.full((4,), float(rank), device=device)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        check(torch.allclose(x.cpu(), torch.full((4,), (world - 1) / 2)), "all_reduce avg")
        # async, on a side stream for hal, non-contiguous
        base = torch.arange(12.0, device=device).view(3, 4) * (rank + 1)
        t = base.t()
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        check(torch.equal(t.cpu(), torch.arange(12.0).view(3, 4).t() * (world * (world + 1) // 2)), "non-contiguous")
        check(w.is_completed() and w.is_success(), "work state")
        b = torch.arange(6.0, device=device) + rank
        dist.broadcast(b, src=world - 1)
        check(torch.equal(b.cpu(), torch.arange(6.0) + world - 1), f"broadcast {device}")
        outs = [torch.empty(3, device=device) for _ in range(world)]
        dist.all_gather(outs, torch.full((3,), float(rank), device=device))
        check(all(torch.equal(o.cpu(), torch.full((3,), float(r))) for r, o in enumerate(outs)), "all_gather")
        o = torch.empty(2 * world, device=device)
        dist.all_gather_into_tensor(o, torch.full((2,), float(rank), device=device))
        check(torch.equal(o.cpu(), torch.arange(world).float().repeat_interleave(2)), "all_gather_into_tensor")
        rs = torch.empty(3, device=device)
        dist.reduce_scatter_tensor(rs, torch.arange(3.0 * world, device=device) * (rank + 1))
        want = torch.arange(3.0 * world)[3 * rank:3 * rank + 3] * (world * (world + 1) // 2)
        check(torch.equal(rs.cpu(), want), "reduce_scatter_tensor")
        rs2 = torch.empty(2, device=device)
        dist.reduce_scatter(rs2, [torch.full((2,), float(r + rank), device=device) for r in range(world)])
        check(torch.equal(rs2.cpu(), torch.full((2,), float(world * rank + world * (world - 1) // 2))), "reduce_scatter")
        a = torch.empty(world, device=device)
        dist.all_to_all_single(a, torch.arange(world, dtype=torch.float32, device=device) + 10 * rank)
        check(torch.equal(a.cpu(), torch.arange(world).float() * 10 + rank), "all_to_all_single")
        # unequal splits: rank r sends r + p + 1 rows of 2 to rank p
        send = torch.cat([torch.full((rank + p + 1, 2), float(100 * rank + p), device=device) for p in range(world)])
        recv = torch.empty(sum(p + rank + 1 for p in range(world)), 2, device=device)
        dist.all_to_all_single(recv, send, output_split_sizes=[p + rank + 1 for p in range(world)],
                               input_split_sizes=[rank + p + 1 for p in range(world)])
        want = torch.cat([torch.full((p + rank + 1, 2), float(100 * p + rank)) for p in range(world)])
        check(torch.equal(recv.cpu(), want), "all_to_all_single with splits")
        r = torch.zeros(4, device=device)
        dist.reduce(r.add_(rank + 1), dst=0)
        if rank == 0:
            check(torch.equal(r.cpu(), torch.full((4,), float(world * (world + 1) // 2))), "reduce")
        # a ring of send / recv, batched
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.zeros(5, device=device)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((5,), float(rank), device=device), nxt),
                                       dist.P2POp(dist.irecv, got, prv)])
        for q in reqs:
            q.wait()
        check(torch.equal(got.cpu(), torch.full((5,), float(prv))), "batch_isend_irecv ring")
        if world >= 2:
            if rank == 0:
                dist.send(torch.tensor([42.0], device=device), 1)
            elif rank == 1:
                t = torch.zeros(1, device=device)
                dist.recv(t, 0)
                check(t.item() == 42.0, "send/recv")
        dist.barrier()
    # On a side stream: the work completes through a HAL event.
    s = torch.hal.Stream()
    with torch.hal.stream(s):
        x = torch.ones(1 << 16, device="hal") * (rank + 1)
        w = dist.all_reduce(x, async_op=True)
        fut = w.get_future()
    w.wait()
    check(fut.done() and torch.equal(fut.value()[0].cpu(), torch.full((1 << 16,), float(world * (world + 1) // 2))),
          "async work on a side stream")
    # Subgroups (each has its own communicator).
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    if rank % 2 == 0:
        x = torch.ones(3, device="hal")
        dist.all_reduce(x, group=evens)
        check(torch.equal(x.cpu(), torch.full((3,), float((world + 1) // 2))), "subgroup")


def kill(rank, world):
    x = torch.ones(1024, device="hal")
    dist.all_reduce(x)
    if rank == world - 1:
        os._exit(3)
    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(x)
        raise AssertionError("all_reduce succeeded with a dead rank")
    except dist.DistBackendError as e:
        took = time.monotonic() - start
        print(f"rank {rank}: error after {took:.2f} s: {e}", flush=True)
        check(took < 6.0, f"took {took:.1f} s for a 5 s timeout")


_released = []


def exit_with_work(rank, world):
    """Ends with an all_reduce still queued on a side stream (rank 1 joins it 1.5 s late) and the
    process group alive: rank 0's completion thread drops the Work, and with it the only reference
    to the tensor, at interpreter exit. It must do so before the interpreter finalizes."""
    x = torch.ones(1024, device="hal")
    if rank == 0:
        with torch.hal.stream(torch.hal.Stream()):
            dist.all_reduce(x, async_op=True)
        _released.append(weakref.ref(x, lambda _: print(f"rank 0: tensor released, finalizing={sys.is_finalizing()}",
                                                         flush=True)))
        del x
    else:
        time.sleep(1.5)
        dist.all_reduce(x)


def bad(rank, world):
    try:
        dist.all_reduce(torch.ones(3 if rank == 0 else 4, device="hal"))
        raise AssertionError("mismatched sizes were not reported")
    except dist.DistBackendError as e:
        check("disagree" in str(e), f"message: {e}")
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        try:
            dist.all_reduce(torch.ones(3, dtype=torch.float32, device="hal"), op=op)
            raise AssertionError(f"{op} of float32 was accepted")
        except RuntimeError as e:
            check(f"ReduceOp.{str(op).split('.')[-1]} takes integer and bool tensors, not Float" in str(e),
                  f"message: {e}")
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.int32, device="hal"), op=dist._make_nccl_premul_sum(2.0))
        raise AssertionError("PREMUL_SUM of int32 was accepted")
    except RuntimeError as e:
        check("PREMUL_SUM takes floating-point tensors" in str(e) and "Int" in str(e), f"message: {e}")
    # gather / scatter lists that do not fit, on the root, before anything is issued (so no peer waits)
    x = torch.ones(2, device="hal")
    for bad_list, what in (([torch.empty(2, device="hal")] * (world + 1), f"has {world + 1} tensors, not the world size {world}"),
                           ([torch.empty(3, device="hal")] * world, "gather_list[0] has 3 elements of Float but the input has 2")):
        if rank == 0:
            try:
                dist.gather(x, bad_list, dst=0)
                raise AssertionError("a bad gather list was accepted")
            except RuntimeError as e:
                check(what in str(e) and "gather" in str(e), f"message: {e}")
    if rank == 0:
        try:
            dist.scatter(x, [torch.ones(2, dtype=torch.int64, device="hal")] * world, src=0)
            raise AssertionError("a scatter list of another dtype was accepted")
        except (RuntimeError, ValueError) as e:
            check("dtype" in str(e) or "Long" in str(e), f"message: {e}")
    # still usable
    x = torch.ones(2, device="hal")
    dist.all_reduce(x)
    check(torch.equal(x.cpu(), torch.full((2,), float(world))), "usable after the errors")


def empty(rank, world):
    """Every collective on empty tensors completes on every rank, as on gloo (found by PyTorch's
    own distributed_test.py: DDP of a model whose only parameter is 0-dim broadcasts an empty
    tensor of shape metadata, test_ddp_create_graph); on hal also a mismatch (empty here, not on
    the others) is an error on every rank, and an empty all_reduce on a side stream completes."""
    devices = ("hal", "cpu") if BACKEND == "hal" else ("cpu",)
    for device in devices:
        e = lambda *shape: torch.empty(*shape, device=device)
        dist.broadcast(e(0), 0)
        dist.all_reduce(e(0))
        dist.all_reduce(e(0, 3), op=dist.ReduceOp.MAX)
        dist.reduce(e(0), dst=world - 1)
        outs = [e(0) for _ in range(world)]
        dist.all_gather(outs, e(0))
        dist.all_gather_into_tensor(e(0), e(0))
        dist.reduce_scatter(e(0), [e(0) for _ in range(world)])
        dist.reduce_scatter_tensor(e(0), e(0))
        dist.all_to_all_single(e(0), e(0))
        dist.all_to_all_single(e(0, 2), e(0, 2), output_split_sizes=[0] * world, input_split_sizes=[0] * world)
        if rank == 0:
            dist.send(e(0), world - 1, tag=5)
        elif rank == world - 1:
            dist.recv(e(0), 0, tag=5)
        dist.gather(e(0), [e(0) for _ in range(world)] if rank == 0 else None, dst=0)
        dist.scatter(e(0), [e(0) for _ in range(world)] if rank == 0 else None, src=0)
        p = torch.nn.Parameter(torch.tensor(float(rank), device=device))
        dist._verify_params_across_processes(dist.group.WORLD, [p], None)
        x = torch.full((3,), float(rank + 1), device=device)
        dist.all_reduce(x)
        check(torch.equal(x.cpu(), torch.full((3,), float(world * (world + 1) // 2))), f"usable after empty ones ({device})")
    if BACKEND != "hal":
        return
    try:
        dist.all_reduce(torch.ones(0 if rank == 0 else 3, device="hal"))
        raise AssertionError("an empty all_reduce against a 3-element one was accepted")
    except dist.DistBackendError as e:
        check("disagree" in str(e) and "count 0" in str(e), f"message: {e}")
    with torch.hal.stream(torch.hal.Stream()):
        w = dist.all_reduce(torch.ones(0, device="hal"), async_op=True)
    w.wait()
    x = torch.ones(2, device="hal")
    dist.all_reduce(x)
    check(torch.equal(x.cpu(), torch.full((2,), float(world))), "usable after the mismatch")


def recv_first(rank, world):
    """batch_isend_irecv whose every rank lists its irecvs before its isends (PyTorch's
    test_batch_isend_irecv_gloo): one group (the backend supports coalescing), not an irecv that
    waits for an isend its peer has not issued yet. On hal also through _coalescing_manager, with
    staged receive tensors (cpu, non-contiguous) written back at its end."""
    devices = ("hal", "cpu") if BACKEND == "hal" else ("cpu",)
    for device in devices:
        ops, want = [], {}
        for peer in range(world):
            if peer == rank:
                continue
            got = torch.full((3, 4), -1.0, device=device)
            want[peer] = (got, torch.full((3, 4), float(10 * peer + rank)))
            ops.append(dist.P2POp(dist.irecv, got, peer, tag=peer))
            ops.append(dist.P2POp(dist.isend, torch.full((3, 4), float(10 * rank + peer), device=device), peer, tag=rank))
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        for peer, (got, expected) in want.items():
            check(torch.equal(got.cpu(), expected), f"batch_isend_irecv from {peer} on {device}: {got}")
        if BACKEND != "hal":
            continue
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.full((4, 3), -1.0, device=device).t()  # non-contiguous: staged
        outs = [torch.full((2,), -1.0, device=device) for _ in range(world)]
        with dist._coalescing_manager(device=torch.device(device), async_ops=True) as cm:
            dist.irecv(got, prv)
            dist.isend(torch.full((3, 4), float(rank), device=device), nxt)
        cm.wait()
        check(torch.equal(got.cpu(), torch.full((3, 4), float(prv))), f"_coalescing_manager recv on {device}: {got}")
        with dist._coalescing_manager(device=torch.device(device)):
            dist.all_gather(outs, torch.full((2,), float(rank), device=device))
        check(torch.equal(torch.stack(outs).cpu(), torch.arange(world).float().repeat_interleave(2).view(world, 2)),
              f"all_gather in _coalescing_manager on {device}: {outs}")


def coalesced_sparse(rank, world):
    """all_gather_coalesced (PyTorch's test_all_gather_coalesced_*: "Backend hal does not support
    allgather_coalesced") and the sum of sparse COO tensors (test_sparse_all_reduce_sum: "only dense
    tensors"), as gloo has them: returns every result, to compare with gloo's. On hal also with hal
    tensors, and bad input: an error naming what was wrong, on every rank, no hang."""
    devices = ("hal", "cpu") if BACKEND == "hal" else ("cpu",)
    out = {}
    for device in devices:
        for dtype in (torch.float32, torch.complex64, torch.int64):
            ins = [torch.full((n,) * n, rank * 10 + n, dtype=dtype, device=device) for n in (1, 2, 3)]
            ins.insert(1, torch.ones(0, dtype=dtype, device=device))
            outs = [[torch.full(t.shape, -1, dtype=dtype, device=device) for t in ins] for _ in range(world)]
            dist.all_gather_coalesced(outs, ins)
            for r in range(world):
                for t, want in zip(outs[r], ins):
                    check(t.device == want.device and torch.equal(t.cpu(), torch.full(want.shape, r * 10 + want.dim(), dtype=dtype)),
                          f"all_gather_coalesced {device} {dtype} from {r}: {t}")
            out[f"all_gather_coalesced {dtype}" + ("" if device == "cpu" else " hal")] = [[t.cpu() for t in o] for o in outs]
    # As PyTorch's simple_sparse_reduce_tests: rank r's first sparse index runs over 0..r.
    for sparse_dims, dense_dims in ((1, 0), (2, 0), (3, 0), (1, 1), (1, 2), (2, 3)):
        idx = torch.arange(rank + 1).view(1, rank + 1)
        shape = [world] + [world] * (sparse_dims - 1) + [2] * dense_dims
        idx = torch.cat([idx] + [torch.zeros(1, rank + 1, dtype=torch.long)] * (sparse_dims - 1))
        for dtype in (torch.float32, torch.int64):
            x = torch.sparse_coo_tensor(idx, torch.ones([rank + 1] + [2] * dense_dims, dtype=dtype) * (rank + 1), shape)
            dist.all_reduce(x)
            want = sum(torch.sparse_coo_tensor(torch.cat([torch.arange(r + 1).view(1, r + 1)] +
                                                         [torch.zeros(1, r + 1, dtype=torch.long)] * (sparse_dims - 1)),
                                               torch.ones([r + 1] + [2] * dense_dims, dtype=dtype) * (r + 1),
                                               shape).to_dense() for r in range(world))
            check(x.is_sparse and torch.equal(x.to_dense(), want), f"sparse all_reduce {sparse_dims}/{dense_dims} {dtype}: {x}")
            x = x.coalesce()
            out[f"sparse all_reduce {sparse_dims}/{dense_dims} {dtype}"] = (x.indices(), x.values())
    # One rank contributes nothing.
    x = torch.sparse_coo_tensor(torch.zeros(1, 0 if rank == 0 else 1, dtype=torch.long),
                                torch.ones(0 if rank == 0 else 1), [3])
    dist.all_reduce(x)
    check(torch.equal(x.to_dense(), torch.tensor([world - 1.0, 0, 0])), f"sparse all_reduce, rank 0 empty: {x}")
    if BACKEND != "hal":
        return out
    for bad_call, words in (
            (lambda: dist.all_gather_coalesced([[torch.ones(2)] for _ in range(world)], [torch.ones(2), torch.ones(3)]),
             "output list 0 has 1 tensors, not one per input (2)"),
            (lambda: dist.all_gather_coalesced([[torch.ones(3)] for _ in range(world)], [torch.ones(2)]),
             "output_lists[0][0] has 3 elements"),
            (lambda: dist.all_reduce(torch.sparse_coo_tensor(torch.zeros(1, 1, dtype=torch.long), torch.ones(1), [2 + rank])),
             "rank 1's tensor has sizes [3], sparse_dim 1 but rank 0's has sizes [2], sparse_dim 1"),
            (lambda: dist.all_reduce(torch.sparse_coo_tensor(torch.zeros(1, 1, dtype=torch.long), torch.ones(1), [2]),
                                     op=dist.ReduceOp.MAX),
             "only sums")):
        try:
            bad_call()
            raise AssertionError(f"accepted: {words}")
        except (RuntimeError, ValueError) as e:
            check(words in str(e), f"message without {words!r}: {e}")
    x = torch.ones(2, device="hal")
    dist.all_reduce(x)
    check(torch.equal(x.cpu(), torch.full((2,), float(world))), "usable after the errors")
    return out


def barrier_timeout(rank, world):
    """Only rank 0 enters a barrier of a group with a 1 s timeout: it fails after about 1 s with
    " Timed out " in its message, as on gloo (PyTorch's test_barrier_timeout_* look for it; hal said
    "timed out"). The others wait until rank 0 is done."""
    group = dist.new_group(timeout=datetime.timedelta(seconds=1))
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        start = time.monotonic()
        try:
            dist.barrier(group)
            raise AssertionError("the barrier passed without the other ranks")
        except RuntimeError as e:
            took = time.monotonic() - start
            print(f"rank 0: after {took:.2f} s: {e}", flush=True)
            check(" Timed out " in str(e), f"no ' Timed out ' in: {e}")
            check(0.9 <= took < 10, f"failed after {took:.2f} s for a 1 s timeout")
        store.set("barrier_timeout done", "1")
    else:
        store.wait(["barrier_timeout done"], datetime.timedelta(seconds=30))


def _no_sync_net(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, 10, bias=False), torch.nn.ReLU(), torch.nn.Linear(10, 4, bias=False))


def no_sync(rank, world):
    """DDP gradient accumulation (PyTorch's _test_accumulate_gradients_no_sync, whose body runs
    only for BACKEND == "gloo"): iterations under no_sync keep each rank's local gradient, the next
    synced one averages the sum of both; with tiny buckets, gradient_as_bucket_view, and an
    allreduce comm hook. Returns the gradients after every step, to compare with gloo's, and checks
    the synced ones against one process training on the whole batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    out = {}
    for view in (False, True):
        for hook in (False, True):
            model = _no_sync_net(0)
            ddp = DDP(_no_sync_net(0).to(DEVICE), bucket_cap_mb=0.00001, gradient_as_bucket_view=view)
            if hook:
                def allreduce_hook(state, bucket):
                    return (dist.all_reduce(bucket.buffer() / world, async_op=True).get_future()
                            .then(lambda f: f.value()[0]))
                ddp.register_comm_hook(None, allreduce_hook)
            torch.manual_seed(1)
            inp, target = torch.randn(world * 2, 2), torch.randn(world * 2, 4)
            with torch.no_grad(), ddp.no_sync():
                ddp(inp[:2].to(DEVICE))  # no gradients from this one
            for it in range(4):
                loss = torch.nn.functional.mse_loss(model(inp), target)
                loss.backward()  # the whole batch, accumulated like the DDP model
                mine = slice(rank * 2, rank * 2 + 2)

                def step():
                    out_ = ddp(inp[mine].to(DEVICE))
                    torch.nn.functional.mse_loss(out_, target[mine].to(DEVICE)).backward()
                if it % 2 == 0:
                    with ddp.no_sync():
                        step()
                else:
                    step()
                grads = [p.grad.detach().cpu().clone() for p in ddp.parameters()]
                out[f"view={view} hook={hook} step {it}"] = grads
                for g, ref in zip(grads, (p.grad for p in model.parameters())):
                    if it % 2 == 0:
                        check(not torch.allclose(g, ref), f"step {it}: a no_sync gradient equals the global one")
                    else:
                        check(torch.allclose(g, ref, atol=1e-6), f"step {it} (view={view} hook={hook}): {g} vs {ref}")
                torch.manual_seed(1337 + it)
                perm = torch.randperm(world * 2)
                inp, target = inp[perm], target[perm]
    return out


# ---- issue 35 part 3: the ops the "hal" backend gained, run the same on gloo (cpu tensors) ----

R = dist.ReduceOp
SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)


def pattern(dtype, seed, n, device=None):
    """Values of seed SEED: 7-bit patterns for integers (negative for signed ones), about two
    thirds true for bool (so and, or and xor of 2 or 3 seeds all differ), quarters (exact in every
    float dtype) for floats."""
    i = torch.arange(n)
    bits = (i * 13 + seed * 29 + 7) % 128
    if dtype == torch.bool:
        v = bits % 3 != 0
    elif dtype.is_floating_point:
        v = ((i * 7 + seed * 3) % 5 + 1) / 4
    else:
        v = bits - (64 if dtype in SIGNED else 0)
    return v.to(dtype).to(device or DEVICE)


def _name(op):
    return str(op).split(".")[-1]


def coverage(rank, world):
    """gather, scatter, the object collectives, the bitwise ops and PREMUL_SUM: every result goes
    into the dict the test compares with the same program on gloo (which has no PREMUL_SUM: there it
    is SUM of the premultiplied tensors, as NCCL defines it). On hal it also checks what gloo
    cannot run (int16 and unsigned dtypes against a reference, cpu tensors, a side stream, a group
    whose object collectives run on hal tensors)."""
    out = {}
    last = world - 1
    # Bitwise ops, on every dtype gloo takes; all_reduce, reduce and reduce_scatter.
    for dt in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool):
        for op in (R.BAND, R.BOR, R.BXOR):
            x = pattern(dt, rank, 37)
            dist.all_reduce(x, op=op)
            out[f"all_reduce {_name(op)} {dt}"] = x.cpu()
            x = pattern(dt, rank + 5, 9)
            dist.reduce(x, dst=last, op=op)
            if rank == last:
                out[f"reduce {_name(op)} {dt}"] = x.cpu()
            x = torch.empty(4, dtype=dt, device=DEVICE)
            dist.reduce_scatter_tensor(x, pattern(dt, rank + 9, 4 * world), op=op)
            out[f"reduce_scatter_tensor {_name(op)} {dt}"] = x.cpu()
    # The other ops on a few dtypes, for completeness.
    for dt in (torch.float32, torch.int32, torch.bool):
        for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX):
            x = pattern(dt, rank, 11)
            dist.all_reduce(x, op=op)
            out[f"all_reduce {_name(op)} {dt}"] = x.cpu()
    x = pattern(torch.float32, rank, 11)
    dist.all_reduce(x, op=R.AVG)
    out["all_reduce AVG float32"] = x.cpu()
    # PREMUL_SUM with a double factor and with a tensor factor; all_reduce, reduce, reduce_scatter.
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        for factor in (0.25, torch.tensor([3.0], dtype=dt, device=DEVICE)):
            kind = "tensor" if torch.is_tensor(factor) else "double"
            if BACKEND == "hal":
                op, scale = dist._make_nccl_premul_sum(factor), (lambda t: t)
            else:  # gloo has no PREMUL_SUM: the sum of the premultiplied tensors
                op, scale = R.SUM, (lambda t: t * factor)
            x = scale(pattern(dt, rank, 13))
            dist.all_reduce(x, op=op)
            out[f"all_reduce PREMUL_SUM {kind} {dt}"] = x.cpu()
            x = scale(pattern(dt, rank + 1, 6))
            keep = x.clone()
            dist.reduce(x, dst=0, op=op)
            if rank == 0:
                out[f"reduce PREMUL_SUM {kind} {dt}"] = x.cpu()
            elif BACKEND == "hal":  # as NCCL (gloo's reduce uses the non-roots' tensors as scratch)
                check(torch.equal(x, keep), "reduce PREMUL_SUM changed a non-root's tensor")
            y = torch.empty(3, dtype=dt, device=DEVICE)
            dist.reduce_scatter_tensor(y, scale(pattern(dt, rank + 2, 3 * world)), op=op)
            out[f"reduce_scatter_tensor PREMUL_SUM {kind} {dt}"] = y.cpu()
    # send/recv tags: every rank isends three tagged messages to the next (the first larger than
    # a shared-memory ring), then receives from the previous in another order: tag 3 first, then
    # the two of tag 7, oldest first, as gloo matches by tag.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    sizes, tags = (300_000, 7, 5), (7, 3, 7)
    works = [dist.isend(pattern(torch.float32, 10 * rank + m, n), nxt, tag=t)
             for m, (n, t) in enumerate(zip(sizes, tags))]
    got = [torch.zeros(n, device=DEVICE) for n in sizes]
    works += [dist.irecv(got[m], prv, tag=tags[m]) for m in (1, 0, 2)]
    for w in works:
        w.wait()
    for m, g in enumerate(got):
        check(torch.equal(g.cpu(), pattern(torch.float32, 10 * prv + m, sizes[m]).cpu()),
              f"irecv of message {m} (tag {tags[m]}) got another message's values")
    out["isend/irecv tags out of order"] = [g.cpu() for g in got]
    # Blocking send and recv with the default tag and the largest. (A negative tag gloo refuses,
    # NCCL ignores; hal takes it as a tag: hal_only_checks.)
    for t in (0, 2**31 - 1):
        x = pattern(torch.int64, rank + t % 7, 9)
        if rank == 0:
            dist.send(x, last, tag=t)
        elif rank == last:
            y = torch.zeros(9, dtype=torch.int64, device=DEVICE)
            dist.recv(y, 0, tag=t)
            out[f"send/recv tag {t}"] = y.cpu()
    # gather and scatter, to and from the last rank and rank 0.
    for dt in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
        for root in sorted({0, last}):
            x = pattern(dt, rank, 6).view(2, 3)
            gl = [torch.full((2, 3), 7, dtype=dt, device=DEVICE) for _ in range(world)] if rank == root else None
            dist.gather(x, gl, dst=root)
            if rank == root:
                out[f"gather {dt} to {root}"] = [g.cpu() for g in gl]
            y = torch.zeros(5, dtype=dt, device=DEVICE)
            dist.scatter(y, [pattern(dt, 10 * r + 1, 5) for r in range(world)] if rank == root else None, src=root)
            out[f"scatter {dt} from {root}"] = y.cpu()
    # The object collectives on the default group (cpu tensors: the backend also takes cpu).
    obj = {"rank": rank, "text": "x" * (100 * rank + 1), "tensor": torch.arange(rank + 2), "tuple": (rank, None)}
    got = [None] * world
    dist.all_gather_object(got, obj)
    out["all_gather_object"] = got
    lst = [obj, [rank] * 3, f"from {rank}"] if rank == last else [None] * 3
    dist.broadcast_object_list(lst, src=last)
    out["broadcast_object_list"] = lst
    lst = [{"big": "y" * 5000}, rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0, device=torch.device(DEVICE))
    out["broadcast_object_list device"] = lst
    got = [None] * world if rank == 0 else None
    dist.gather_object(obj, got, dst=0)
    if rank == 0:
        out["gather_object"] = got
    got = [None]
    dist.scatter_object_list(got, [{"to": r, "data": list(range(r))} for r in range(world)] if rank == last else None,
                             src=last)
    out["scatter_object_list"] = got
    if BACKEND == "hal":
        hal_only_checks(rank, world, out)
    return out


def hal_only_checks(rank, world, out):
    """What gloo cannot run, against the coverage results or a reference."""
    last = world - 1
    # all_to_all of tensor lists (gloo has none): rank r sends rank q r + q + 1 float64 values of
    # seed 10 r + q (the last rank's own block is empty). A user's tag-0 message in flight to the
    # next rank is not taken by it.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    pending = dist.isend(pattern(torch.int32, 77 + rank, 4), nxt)
    size = lambda r, q: 0 if r == q == last else r + q + 1  # noqa: E731
    ins = [pattern(torch.float64, 10 * rank + q, size(rank, q)) for q in range(world)]
    outs = [torch.full((size(q, rank),), -1.0, dtype=torch.float64, device=DEVICE) for q in range(world)]
    dist.all_to_all(outs, ins)
    for q in range(world):
        check(torch.equal(outs[q].cpu(), pattern(torch.float64, 10 * q + rank, size(q, rank)).cpu()),
              f"all_to_all: output {q} of rank {rank} is {outs[q]}")
    y = torch.zeros(4, dtype=torch.int32, device=DEVICE)
    dist.recv(y, prv)
    pending.wait()
    check(torch.equal(y.cpu(), pattern(torch.int32, 77 + prv, 4).cpu()), f"tag-0 recv after all_to_all got {y}")
    try:
        dist.all_to_all(outs[:-1], ins)
        check(False, "all_to_all with a short output list ran")
    except RuntimeError as e:
        check("as many input and output tensors as the world size" in str(e), str(e))
    # Negative tags (gloo refuses them): tags like any other, received out of order.
    if rank == 0:
        for t in (-4, -1):
            dist.send(pattern(torch.int64, -t, 9), last, tag=t)
    elif rank == last:
        for t in (-1, -4):
            y = torch.zeros(9, dtype=torch.int64, device=DEVICE)
            dist.recv(y, 0, tag=t)
            check(torch.equal(y.cpu(), pattern(torch.int64, -t, 9).cpu()), f"recv with tag {t} got {y}")
    # int16 and unsigned dtypes (gloo has none of them): against the reduction of every rank's
    # pattern, in int64 (the same bits).
    for dt in (torch.int16, torch.uint16, torch.uint32, torch.uint64):
        for op, fn in ((R.BAND, torch.bitwise_and), (R.BOR, torch.bitwise_or), (R.BXOR, torch.bitwise_xor)):
            x = pattern(dt, rank, 37)
            dist.all_reduce(x, op=op)
            want = pattern(torch.int16 if dt == torch.int16 else torch.uint8, 0, 37, "cpu").to(torch.int64)
            for r in range(1, world):
                want = fn(want, pattern(torch.int16 if dt == torch.int16 else torch.uint8, r, 37, "cpu").to(torch.int64))
            check(torch.equal(x.cpu().to(torch.int64), want), f"all_reduce {_name(op)} {dt}")
    # cpu tensors through the hal backend, and non-contiguous ones, give what hal tensors gave.
    for root in sorted({0, last}):
        x = pattern(torch.float32, rank, 6).view(2, 3).cpu()
        gl = [torch.full((3, 2), 7.0).t() for _ in range(world)] if rank == root else None  # non-contiguous
        dist.gather(x, gl, dst=root)
        if rank == root:
            check(all(torch.equal(a, b) for a, b in zip(gl, out[f"gather {torch.float32} to {root}"])), "gather cpu")
        y = torch.zeros(10).cpu()[::2]  # non-contiguous output
        dist.scatter(y, [pattern(torch.float32, 10 * r + 1, 5, "cpu") for r in range(world)] if rank == root else None,
                     src=root)
        check(torch.equal(y, out[f"scatter {torch.float32} from {root}"]), "scatter cpu")
        x = pattern(torch.int32, rank, 37, "cpu")
        dist.all_reduce(x, op=R.BXOR)
        check(torch.equal(x, out[f"all_reduce BXOR {torch.int32}"]), "all_reduce BXOR cpu")
    # async, on a side stream
    s = torch.hal.Stream()
    with torch.hal.stream(s):
        x = pattern(torch.float32, rank, 6).view(2, 3)
        gl = [torch.empty(2, 3, device="hal") for _ in range(world)] if rank == last else None
        w = dist.gather(x, gl, dst=last, async_op=True)
        y = torch.zeros(5, device="hal")
        w2 = dist.scatter(y, [pattern(torch.float32, 10 * r + 1, 5) for r in range(world)] if rank == last else None,
                          src=last, async_op=True)
        x = pattern(torch.float32, rank, 13)
        w3 = dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.25), async_op=True)
    for w in (w, w2, w3):
        w.wait()
    if rank == last:
        check(all(torch.equal(a.cpu(), b) for a, b in zip(gl, out[f"gather {torch.float32} to {last}"])), "async gather")
    check(torch.equal(y.cpu(), out[f"scatter {torch.float32} from {last}"]), "async scatter")
    check(torch.equal(x.cpu(), out[f"all_reduce PREMUL_SUM double {torch.float32}"]), "async premul")
    # A group whose only device is hal: the object collectives run on hal tensors.
    from torch.distributed.distributed_c10d import _get_object_coll_device
    hal_group = dist.new_group(backend="hal:hal")
    check(_get_object_coll_device(hal_group) == "hal", f"object device {_get_object_coll_device(hal_group)}")
    obj = {"rank": rank, "text": "x" * (100 * rank + 1), "tensor": torch.arange(rank + 2), "tuple": (rank, None)}
    got = [None] * world
    dist.all_gather_object(got, obj, group=hal_group)
    check(same(got, out["all_gather_object"]), f"all_gather_object on hal tensors: {got}")
    got = [None] * world if rank == 0 else None
    dist.gather_object(obj, got, dst=0, group=hal_group)
    if rank == 0:
        check(same(got, out["gather_object"]), f"gather_object on hal tensors: {got}")
    lst = [{"big": "y" * 5000}, rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0, group=hal_group)
    check(same(lst, out["broadcast_object_list device"]), f"broadcast_object_list on hal tensors: {lst}")
    got = [None]
    dist.scatter_object_list(got, [{"to": r, "data": list(range(r))} for r in range(world)] if rank == last else None,
                             src=last, group=hal_group)
    check(same(got, out["scatter_object_list"]), f"scatter_object_list on hal tensors: {got}")


def stuck(rank, world):
    """A wrong-length scatter list, then an object that cannot be pickled, on the source rank
    (timeout 3 s): the source rank gets the error at once and issues nothing; the others, waiting
    for it, fail within the timeout (no hang); so does the source rank's next operation."""
    timeout = 3.0

    def expect_failure(what, body, source_error, source_says):
        start = time.monotonic()
        try:
            body()
            raise AssertionError(f"{what} succeeded")
        except dist.DistBackendError as e:
            took = time.monotonic() - start
            print(f"rank {rank}: {what} failed after {took:.2f} s: {e}", flush=True)
            check(rank != 0, f"rank 0 got a DistBackendError, not its own error: {e}")
            check(took < timeout + 3, f"{what}: took {took:.1f} s for a {timeout} s timeout")
        except source_error as e:
            took = time.monotonic() - start
            print(f"rank {rank}: {what}: {type(e).__name__}: {e}", flush=True)
            check(rank == 0 and source_says in str(e), f"rank {rank}: {what}: {e}")
            check(took < 1.0, f"{what}: the error took {took:.1f} s")
            start = time.monotonic()
            try:
                dist.barrier()
                raise AssertionError(f"a barrier succeeded after the failed {what}")
            except dist.DistBackendError as e:
                took = time.monotonic() - start
                check(took < timeout + 3, f"the barrier after the failed {what} took {took:.1f} s")

    y = torch.zeros(2, device="hal")
    expect_failure("scatter", lambda: dist.scatter(y, [torch.ones(2, device="hal")] * (world + 1) if rank == 0 else None,
                                                   src=0),
                   RuntimeError, f"has {world + 1} tensors, not the world size {world}")
    # A fresh group: an object that cannot be pickled (a lambda). Alone on rank 0 with the default
    # device: the error, and nothing issued (the others are not involved). Then on every rank, with
    # device=hal.
    dist.destroy_process_group()
    dist.init_process_group("hal", init_method=f"file://{STORE}.2", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    pickling = (pickle.PicklingError, AttributeError, TypeError)
    if rank == 0:
        try:
            dist.broadcast_object_list([1, lambda: None], src=0)
            raise AssertionError("a lambda was broadcast")
        except pickling as e:
            check("lambda" in str(e), f"message: {e}")
    dist.barrier()  # nothing was issued: still in step
    expect_failure("broadcast_object_list",
                   lambda: dist.broadcast_object_list([1, lambda: None] if rank == 0 else [None, None], src=0,
                                                      device=torch.device("hal")),
                   pickling, "lambda")


def monitored(rank, world):
    """monitored_barrier with a 1 s timeout: every rank on time; the last rank 2 s late; every rank
    but 0 late with wait_all_ranks. Each failing case has a group of its own (gloo's cannot go on
    after one). Returns rank 0's messages, to compare with gloo's. Under gloo the late ranks do not
    call it at all, and the on-time ones wait for rank 0 until the group's timeout (2 s)."""
    t = datetime.timedelta(seconds=1)
    dist.monitored_barrier(timeout=t)
    dist.monitored_barrier(timeout=t, wait_all_ranks=True)
    groups = [dist.new_group(timeout=datetime.timedelta(seconds=2)) for _ in range(2)]
    out = {}
    for group, (case, late, wait_all) in zip(groups, (("one late", [world - 1], False),
                                                    ("all late", list(range(1, world)), True))):
        if rank in late:
            if BACKEND == "gloo":
                continue
            time.sleep(1.5)
        start = time.monotonic()
        try:
            dist.monitored_barrier(group=group, timeout=t, wait_all_ranks=wait_all)
            raise AssertionError(f"{case}: the monitored barrier passed")
        except RuntimeError as e:
            took = time.monotonic() - start
            msg = str(e).splitlines()[0]
            print(f"rank {rank}: {case}: after {took:.2f} s: {msg}", flush=True)
        if rank == 0:
            out[case] = msg
            check(took < 2.5, f"{case}: rank 0 took {took:.1f} s for a 1 s timeout")
        elif BACKEND == "hal":  # at once with rank 0's verdict, on time or late
            check("rank 0 reports: [Rank 0]: Rank" in msg, f"{case}: rank {rank}: {msg}")
            check(took < 2.5, f"{case}: rank {rank} took {took:.1f} s")
    if BACKEND == "gloo":  # the others stay until rank 0 is done (it fails on a missing rank only while that one lives)
        store = dist.distributed_c10d._get_default_store()
        if rank == 0:
            store.set("monitored done", "1")
        else:
            store.wait(["monitored done"])
        return out
    x = torch.ones(2, device=DEVICE)  # the communicators are untouched
    dist.all_reduce(x)
    dist.all_reduce(x, group=groups[0])
    check(torch.equal(x.cpu(), torch.full((2,), float(world * world))), "all_reduce after the monitored barriers")
    dist.monitored_barrier(group=groups[1], timeout=t)
    return out


# ---- torch.distributed.checkpoint of an FSDP model on hal ----

FSDP_API = "fsdp"  # or "fully_shard" (FSDP2: DTensor parameters); main() sets it from "scenario:api"


def _plain_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def _fsdp_model(seed):
    m = _plain_model(seed).to("hal")
    if FSDP_API == "fully_shard":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("hal", (dist.get_world_size(),))
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(m, mesh=mesh)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy

    return FSDP(m, sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("hal", torch.hal.current_device()),
                use_orig_params=True)


def _full_params(model):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {k: v.detach().cpu().clone() for k, v in sd.items()}


def _train(model, opt, steps, rank, world, first=0, device="hal"):
    for s in range(first, first + steps):
        x = torch.randn(12, 8, generator=torch.Generator().manual_seed(100 + s))[rank::world]
        opt.zero_grad()
        model(x.to(device)).square().mean().backward()
        opt.step()


def _load(model, checkpoint):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    state = {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=checkpoint)
    set_model_state_dict(model, state["model"])


def dcp_save(rank, world):
    """Trains 2 steps, saves with torch.distributed.checkpoint, trains 2 more, loads: the parameters
    are the saved ones again. Rank 0 keeps the saved full parameters for dcp_load."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    checkpoint = os.path.join(os.path.dirname(STORE), "checkpoint")
    model = _fsdp_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    _train(model, opt, 2, rank, world)
    saved = _full_params(model)
    # The same 2 steps in one process on the whole batch (each rank's mean, averaged = the mean).
    one = _plain_model(0)
    one_opt = torch.optim.SGD(one.parameters(), lr=0.5)
    _train(one, one_opt, 2, 0, 1, device="cpu")
    diff = max((saved[k] - v).abs().max().item() for k, v in one.state_dict().items())
    check(diff < 1e-5, f"{FSDP_API}: 2 steps differ from one process by {diff}")
    state = get_model_state_dict(model)
    shards = [v for v in state.values() if torch.is_tensor(v)]
    local = [v.local_shards()[0].tensor if hasattr(v, "local_shards") else v.to_local() if hasattr(v, "to_local") else v
             for v in shards]  # ShardedTensor (FSDP1's), DTensor
    check(shards and all(t.device.type == "hal" for t in local), f"the sharded state is not on hal: {local}")
    dcp.save({"model": state}, checkpoint_id=checkpoint)
    _train(model, opt, 2, rank, world, first=2)
    trained = _full_params(model)
    check(any(not torch.equal(saved[k], trained[k]) for k in saved), "training after the save changed nothing")
    _load(model, checkpoint)
    loaded = _full_params(model)
    check(all(torch.equal(saved[k], loaded[k]) for k in saved),
          f"loaded != saved: {max((saved[k] - loaded[k]).abs().max().item() for k in saved)}")
    _train(model, opt, 1, rank, world)  # and it trains on
    if rank == 0:
        torch.save(saved, checkpoint + ".saved.pt")


def dcp_load(rank, world):
    """Fresh processes and process group (another world size): a model of other initial weights
    loaded from dcp_save's checkpoint has the saved parameters."""
    checkpoint = os.path.join(os.path.dirname(STORE), "checkpoint")
    model = _fsdp_model(1)
    saved = torch.load(checkpoint + ".saved.pt")
    before = _full_params(model)
    check(any(not torch.equal(saved[k], before[k]) for k in saved), "the fresh model already has the saved weights")
    _load(model, checkpoint)
    loaded = _full_params(model)
    check(all(torch.equal(saved[k], loaded[k]) for k in saved), "loaded != saved")


def large(rank, world):
    """all_reduce above the one-step size (64 KiB), which reads and writes the peers' buffers in place
    when they are reachable (cross-memory attach), else goes through the shared segment: sizes just
    past it, past the 128 KiB chunk and uneven across ranks, five dtypes, five ops, in place, a view
    at an offset (the elements before it untouched) and a strided tensor; each against the values
    every rank computes for all."""
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.AVG]
    combine = {dist.ReduceOp.SUM: torch.add, dist.ReduceOp.PRODUCT: torch.mul, dist.ReduceOp.MIN: torch.minimum,
               dist.ReduceOp.MAX: torch.maximum, dist.ReduceOp.AVG: torch.add}
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int8):
        size = torch.empty(0, dtype=dtype).element_size()
        for n in ((64 << 10) // size + 1, (3 << 17) // size + 2 * world + 1, (4 << 20) // size + 3):
            for op in ops:
                if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                    continue
                want = pattern(dtype, 0, n, "cpu")
                for r in range(1, world):
                    want = combine[op](want, pattern(dtype, r, n, "cpu"))
                if op == dist.ReduceOp.AVG:
                    want = (want.double() / world).to(dtype)
                where = f"{_name(op)} {dtype} n={n}"
                x = pattern(dtype, rank, n)
                dist.all_reduce(x, op=op)
                got = x.cpu()
                if op == dist.ReduceOp.AVG:
                    check(torch.allclose(got.double(), want.double(), rtol=1e-2, atol=0), where)
                else:
                    check(torch.equal(got, want), f"{where}: {(got != want).sum()} elements differ")
            # A view at an offset and a strided tensor (SUM).
            want = pattern(dtype, 0, n, "cpu")
            for r in range(1, world):
                want = want + pattern(dtype, r, n, "cpu")
            base = torch.full((n + 5,), 3, dtype=dtype, device=DEVICE)
            base[5:] = pattern(dtype, rank, n)
            view = base[5:]
            dist.all_reduce(view)
            check(torch.equal(view.cpu(), want) and torch.equal(base[:5].cpu(), torch.full((5,), 3, dtype=dtype)),
                  f"a view at an offset, {dtype} n={n}")
            wide = torch.zeros(2 * n, dtype=dtype, device=DEVICE)
            wide[::2] = pattern(dtype, rank, n)
            strided = wide[::2]
            dist.all_reduce(strided)
            check(torch.equal(strided.cpu(), want) and not wide[1::2].cpu().any(), f"strided, {dtype} n={n}")


def kill_large(rank, world):
    """The last rank exits while a 256 MiB all_reduce is under way: the others fail within the timeout."""
    x = torch.ones(64 << 20, device="hal")
    dist.all_reduce(x)
    torch.hal.synchronize()
    if rank == world - 1:
        import threading

        threading.Timer(0.02, lambda: os._exit(3)).start()
    start = time.monotonic()
    try:
        for _ in range(20):
            dist.all_reduce(x)
            torch.hal.synchronize()
        if rank == world - 1:
            time.sleep(10)  # the timer ends this process
        raise AssertionError("all_reduce succeeded with a dead rank")
    except dist.DistBackendError as e:
        took = time.monotonic() - start
        print(f"rank {rank}: error after {took:.2f} s: {e}", flush=True)
        check(took < 6.0, f"took {took:.1f} s for a 5 s timeout")


TIMEOUTS = {"kill": 5, "kill_large": 5, "stuck": 3, "monitored": 4, "barrier_timeout": 10}
NO_DESTROY = ("kill", "kill_large", "exit_with_work")


def main():
    global BACKEND, DEVICE, STORE, FSDP_API
    scenario, rank, world, STORE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    scenario, _, api = scenario.partition(":")
    FSDP_API = api or FSDP_API
    if scenario == "large" and api == "cma_off_on_last" and rank == world - 1:
        os.environ["HAL_COMM_CMA"] = "0"  # read when the communicator is made
    BACKEND = sys.argv[5] if len(sys.argv) > 5 else "hal"
    DEVICE = "hal" if BACKEND == "hal" else "cpu"
    timeout = datetime.timedelta(seconds=TIMEOUTS.get(scenario, 60))
    dist.init_process_group(BACKEND, init_method=f"file://{STORE}", rank=rank, world_size=world, timeout=timeout)
    try:
        result = globals()[scenario](rank, world)
    except AssertionError as e:
        print(f"rank {rank}: FAILED: {e}", flush=True)
        os._exit(1)
    if isinstance(result, dict):
        torch.save(result, f"{STORE}.{rank}.pt")
    if scenario not in NO_DESTROY and not (BACKEND == "gloo" and scenario == "monitored"):
        dist.destroy_process_group()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    main()
