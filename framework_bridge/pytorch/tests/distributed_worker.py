"""One rank of test_distributed.py's scenarios: python distributed_worker.py SCENARIO RANK WORLD STORE_FILE.

Exits 0 when every check of the scenario held, printing what failed otherwise."""

import datetime
import os
import sys
import time
import weakref

import torch
import torch.distributed as dist
import torch_hal  # noqa: F401


def check(cond, what):
    if not cond:
        raise AssertionError(what)


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
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.int32, device="hal"), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND was accepted")
    except (RuntimeError, ValueError) as e:
        check("reduce op" in str(e) or "BAND" in str(e) or "not support" in str(e), f"message: {e}")
    # still usable
    x = torch.ones(2, device="hal")
    dist.all_reduce(x)
    check(torch.equal(x.cpu(), torch.full((2,), float(world))), "usable after the errors")


def main():
    scenario, rank, world, store = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    timeout = datetime.timedelta(seconds=5 if scenario == "kill" else 60)
    dist.init_process_group("hal", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timeout)
    try:
        globals()[scenario](rank, world)
    except AssertionError as e:
        print(f"rank {rank}: FAILED: {e}", flush=True)
        os._exit(1)
    if scenario not in ("kill", "exit_with_work"):
        dist.destroy_process_group()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    main()
