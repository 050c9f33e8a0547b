"""FSDP1's root unit assembling its flat gradient, measured on the CPU (docs/REAL_GPU_MEMORY.md,
"FSDP1's root unit assembles its gradient"; core.parallel.state._fsdp1_root_assembly).

Runs torch's FSDP1 (gloo, one rank by default, ``WORLD=2`` for two spawned ranks) over a small model:
an embedding and an untied head of 4,096 × 256 (the root unit, with a bias-free LayerNorm) and one
auto-wrapped 256 × 256 block, three micro-batches, the first two under ``no_sync()``. A
TorchDispatchMode counts the bytes of every storage created inside it (weakref finalizers give them
back), and prints each micro-batch's high point and the live bytes after the root's ``cat``, in units
of the root's bytes. Run it with the measuring venv (tools/measure/setup_env.sh: torch 2.13.0 CPU):

    .venv-measure/bin/python tools/measure/fsdp1_root_check.py          # ORIG=0: use_orig_params=False

Read on one rank (torch 2.13.0+cpu): micro-batch 0 peaks at 3.078 roots (parameters 1.031, the views'
gradients and their cat), micro-batches 1 and 2 at 4.078 (the accumulated gradients 1.031 more), each
at ``aten.cat`` right after ``aten.embedding_dense_backward``. On two ranks FSDP1 frees resharded
storages by ``resize_(0)``, which this count does not see: read the steps there, not the levels."""

from __future__ import annotations

import os
import tempfile
import warnings

import torch
import torch.distributed as dist
from live_bytes import LiveBytes  # tools/measure/live_bytes.py: these checks run as scripts from this folder
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

V, H = 4096, 256
ROOT = (2 * V * H + H) * 4  # float32 embedding, head and norm


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(H, H, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.block = nn.Embedding(V, H), Block()
        self.norm, self.head = nn.LayerNorm(H, bias=False), nn.Linear(H, V, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.block(self.emb(ids))))


def main(rank: int = 0, world: int = 1, path: str | None = None) -> None:
    warnings.filterwarnings("ignore")
    dist.init_process_group("gloo", store=dist.FileStore(path or tempfile.mktemp(), world), rank=rank, world_size=world)
    torch.manual_seed(0)
    model = FullyShardedDataParallel(
        Model(),
        auto_wrap_policy=ModuleWrapPolicy({Block}),
        use_orig_params=os.environ.get("ORIG", "1") == "1",
        device_id=torch.device("cpu"),
    )
    ids = torch.randint(0, V, (1, 8))
    tracker = LiveBytes()
    with tracker:
        for k in range(3):
            with model.no_sync() if k < 2 else torch.enable_grad():
                start = len(tracker.log)
                out = model(ids)
                out.float().pow(2).mean().backward()
                del out
            high = max(live for _, live in tracker.log[start:])
            if rank == 0:
                print(f"micro-batch {k} ({'no_sync' if k < 2 else 'sync'}): high point {high / ROOT:.3f} roots")
    if rank == 0:
        print(f"{torch.__version__}, {model.sharding_strategy}: peak {tracker.peak / ROOT:.3f} roots at {tracker.at}")
        for i, (op, live) in enumerate(tracker.log):
            if op in ("aten.cat.default", "aten.embedding_dense_backward.default", "aten.add_.Tensor"):
                print(f"  {i:4d} {op}: {live / ROOT:.3f} roots after")
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(os.environ.get("WORLD", "1"))
    if world == 1:
        main()
    else:
        import torch.multiprocessing as mp

        mp.spawn(main, args=(world, tempfile.mktemp()), nprocs=world)
