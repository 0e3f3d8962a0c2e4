#!/usr/bin/env python3
"""Elastic data-parallel training on the "hal" backend: when a rank dies, the survivors'
collectives fail (the backend sees the peer's exit), torchrun restarts the whole group, and
training resumes from the last torch.distributed.checkpoint (DCP) checkpoint, ending at the
parameters an uninterrupted run ends at.

    torchrun --standalone --nproc-per-node 2 --max-restarts 1 \\
        framework_bridge/pytorch/examples/elastic_train.py --checkpoint-dir /tmp/ckpt --steps 20 \\
        --out params.pt [--kill-rank 1 --kill-at-step 7]

Every --checkpoint-every steps the ranks save the model's and the optimizer's state with DCP into
CHECKPOINT_DIR/step_<k>; rank 0 marks a checkpoint complete (step_<k>/DONE) once every rank has
saved it. At start (and at every restart) the newest complete checkpoint is loaded. --kill-rank R
--kill-at-step S makes rank R kill itself (SIGKILL) before step S in the first attempt only
(TORCHELASTIC_RESTART_COUNT 0), as a crashed or preempted process would. Rank 0 saves the final
parameters, keyed by name, to --out.
"""

import argparse
import datetime
import os
import pathlib
import signal
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_train import add_job_arguments  # noqa: E402
from train_compare import MODELS, batches  # noqa: E402


def newest_checkpoint(root):
    """(step, path) of the newest complete checkpoint under ROOT, or (0, None)."""
    done = [(int(p.parent.name.split("_")[1]), p.parent) for p in pathlib.Path(root).glob("step_*/DONE")]
    return max(done) if done else (0, None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(p)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--checkpoint-every", type=int, default=1)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    device = "cpu" if args.backend == "gloo" else "hal"
    if device == "hal":
        import torch_hal  # noqa: F401  (registers the device and the "hal" backend)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(MODELS[args.model]().to(device))
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # momentum: optimizer state to restore

    start, path = newest_checkpoint(args.checkpoint_dir)
    if path is not None:
        # The optimizer's state exists only after a step: make it, then load over it.
        model_state, optim_state = get_state_dict(model, optim)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=str(path))
        set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
    if rank == 0:
        print(f"attempt {attempt}: {world} ranks, starting at step {start}", flush=True)

    data = batches(args.model, args.steps, batch=args.batch)
    share = args.batch // world if args.model != "decoder" else args.batch // 4 // world
    for step, (x, y) in enumerate(data):
        if step < start:
            continue
        if attempt == 0 and rank == args.kill_rank and step == args.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = x[rank * share:(rank + 1) * share].to(device), y.view(len(x), -1)[rank * share:(rank + 1) * share]
        optim.zero_grad()
        loss = F.cross_entropy(model(x), y.reshape(-1).to(device))
        loss.backward()
        optim.step()
        if (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps:
            model_state, optim_state = get_state_dict(model, optim)
            where = pathlib.Path(args.checkpoint_dir) / f"step_{step + 1}"
            dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(where))
            dist.barrier()
            if rank == 0:
                (where / "DONE").touch()

    if rank == 0 and args.out:
        torch.save({k: v.detach().cpu() for k, v in model.module.state_dict().items()}, args.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
