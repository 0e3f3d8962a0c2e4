"""torch.distributed's ``"hal"`` backend.

    dist.init_process_group("hal")                       # or "cpu:gloo,hal:hal"
    dist.all_reduce(torch.ones(4, device="hal"))

The backend runs HAL's collectives (docs/collectives.md) on the current hal
device: hal tensors in place on its current stream, cpu tensors staged
through it. Any store and launcher torch supports bootstraps it (torchrun,
TCPStore, FileStore); ``init_process_group(timeout=...)`` bounds every wait
on a peer, after which every rank gets a DistBackendError instead of a hang.
"""

import torch.distributed as _dist

from . import _C

NAME = "hal"


def _create_backend(store, rank, size, timeout):
    return _C._create_distributed_backend(store, rank, size, timeout.total_seconds())


def register():
    """Registers the backend with torch.distributed (done on ``import torch_hal``)."""
    if not _dist.is_available() or NAME in _dist.Backend.backend_list:
        return
    _dist.Backend.register_backend(NAME, _create_backend, devices=["hal", "cpu"])
