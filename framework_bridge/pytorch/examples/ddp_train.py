#!/usr/bin/env python3
"""Data-parallel training with torch.distributed on the "hal" backend, in plain PyTorch.

    torchrun --nproc-per-node 2 framework_bridge/pytorch/examples/ddp_train.py \\
        --backend hal --model decoder --steps 20 --out params.pt
    python framework_bridge/pytorch/examples/ddp_train.py --single --model decoder --out single.pt

Each rank trains DistributedDataParallel (or FSDP FULL_SHARD with --fsdp) on its share of every
global batch; --single trains the same model on the whole global batch in one process. With the
same initial weights and data both end at the same parameters (DDP averages the ranks' gradients
of their mean losses, which is the gradient of the global mean). --backend gloo runs the same
script on PyTorch CPU over gloo, for comparison. Rank 0 (or --single) saves the final parameters,
keyed by name, to --out; --time prints the mean step time of the steps after the first.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_compare import MODELS, batches  # noqa: E402


def add_job_arguments(p):
    """The arguments of a data-parallel training job (this example's and elastic_train.py's)."""
    p.add_argument("--backend", default="hal", choices=["hal", "gloo"])
    p.add_argument("--model", default="mlp", choices=["mlp", "decoder"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=32, help="global batch (divided among the ranks)")
    p.add_argument("--timeout", type=float, default=60.0, help="init_process_group timeout, seconds")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_job_arguments(p)
    p.add_argument("--fsdp", action="store_true", help="FSDP FULL_SHARD instead of DDP")
    p.add_argument("--single", action="store_true", help="one process, the whole global batch, no torch.distributed")
    p.add_argument("--device", default=None, help="default: hal for --backend hal and --single, cpu for gloo")
    p.add_argument("--time", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    device = args.device or ("cpu" if args.backend == "gloo" and not args.single else "hal")
    if device.startswith("hal"):
        import torch_hal  # noqa: F401  (registers the device and the "hal" backend)
    rank, world = 0, 1
    if not args.single:
        dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
        rank, world = dist.get_rank(), dist.get_world_size()
    assert args.batch % world == 0, "the global batch must divide among the ranks"

    torch.manual_seed(0)
    model = MODELS[args.model]().to(device)
    if args.fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy

        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device(device),
                     use_orig_params=True)
    elif not args.single:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optim = torch.optim.SGD(model.parameters(), lr=0.1)

    data = batches(args.model, args.steps, batch=args.batch)
    share = args.batch // world if args.model != "decoder" else args.batch // 4 // world
    times = []
    for step, (x, y) in enumerate(data):
        start = time.perf_counter()
        x, y = x[rank * share:(rank + 1) * share].to(device), y.view(len(x), -1)[rank * share:(rank + 1) * share]
        y = y.reshape(-1).to(device)
        optim.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optim.step()
        loss_value = loss.item()  # waits for the step
        times.append(time.perf_counter() - start)
        if rank == 0 and (step == 0 or step == args.steps - 1):
            print(f"step {step}: loss {loss_value:.6f}", flush=True)

    if args.fsdp:
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType

        cfg = FullStateDictConfig(offload_to_cpu=False, rank0_only=False)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            state = model.state_dict()
    else:
        state = (model.module if hasattr(model, "module") else model).state_dict()
    if rank == 0:
        params = {k: v.detach().cpu() for k, v in state.items()}
        if args.out:
            torch.save(params, args.out)
        if args.time and len(times) > 1:
            print(f"mean step time: {1e3 * sum(times[1:]) / len(times[1:]):.3f} ms", flush=True)
    if not args.single:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
