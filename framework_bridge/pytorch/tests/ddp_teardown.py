"""The DDP example's interpreter teardown, many times: python ddp_teardown.py OUT_DIR RUNS WORLD VARIANT...

Imports torch, torch_hal and the example once, then per run and variant forks WORLD ranks (before
the HAL runtime or any thread starts); each rank runs examples/ddp_train.py's main() and leaves
through the whole interpreter teardown (atexit handlers, finalization, static destructors), as a
fresh process would. Rank r of run i writes its output to OUT_DIR/<variant>.<i>.<r>; prints one line
"<variant> <i> <r> <exit code>" per rank. Variants:

    normal      the example as it is
    nodestroy   destroy_process_group() skipped
    exception   an exception out of the second optimizer step (exit code 1)
    latepg      no destroy_process_group(), the process group referenced until finalization
    fsdp        FSDP FULL_SHARD (its collectives run on side streams, so Works complete on the
                backend's completion thread)
"""

import builtins
import os
import sys

import torch
import torch._dynamo  # noqa: F401  (DDP imports it at construction; once here, not in every rank)
import torch.distributed as dist
import torch_hal  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import ddp_train  # noqa: E402
from train_compare import batches  # noqa: E402

STEPS = 3


def rank_main(variant, store, rank, world):
    init = dist.init_process_group

    def init_from_store(backend, **kwargs):
        init(backend, init_method=f"file://{store}", rank=rank, world_size=world, **kwargs)
        if variant == "latepg":
            builtins._hal_teardown_group = dist.group.WORLD  # dropped only with builtins, late in finalization
    dist.init_process_group = init_from_store
    if variant in ("nodestroy", "exception", "latepg"):
        dist.destroy_process_group = lambda group=None: None
    if variant == "exception":
        step = torch.optim.SGD.step
        calls = [0]

        def failing_step(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == 2:
                raise RuntimeError("ddp_teardown: an exception in the middle of training")
            return step(self, *args, **kwargs)
        torch.optim.SGD.step = failing_step
    args = ["--steps", str(STEPS), "--batch", "24"]
    if variant == "fsdp":
        args += ["--model", "decoder", "--fsdp"]
    ddp_train.main(args)


def main():
    out, runs, world, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    batches("mlp", 1, batch=24)  # imports the data's packages once
    for i in range(runs):
        for variant in variants:
            store = os.path.join(out, f"store.{variant}.{i}")
            pids = []
            for r in range(world):
                pid = os.fork()
                if pid == 0:
                    fd = os.open(os.path.join(out, f"{variant}.{i}.{r}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.dup2(fd, 1)
                    os.dup2(fd, 2)
                    rank_main(variant, store, r, world)
                    sys.exit(0)  # up through main(): the interpreter's own teardown
                pids.append(pid)
            for r, pid in enumerate(pids):
                _, status = os.waitpid(pid, 0)
                print(variant, i, r, os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    main()
