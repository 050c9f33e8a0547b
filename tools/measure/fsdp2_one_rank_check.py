"""FSDP2 on a one-rank mesh still computes in ``MixedPrecisionPolicy.param_dtype`` (core.parallel.state.compute_plan;
docs/REAL_GPU_MEMORY.md, "prime-rl's RL rows, scored"). Branch h82rl.

prime-rl's trainer shards on every world size (PrimeIntellect-ai/prime-rl 8718eb14 src/prime_rl/trainer/model.py
``setup_model`` -> ``setup_fsdp``: ``fully_shard`` per decoder layer and at the root with
``MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=float32)``), its one-GPU benchmark rows too. Here two
float32 Linear layers are sharded the same way on a one-process gloo mesh and run a float32 input: each layer's output
(the activation the next one saves) is printed with its dtype, and the parameters' own dtype after the step.

    .venv-measure/bin/python tools/measure/fsdp2_one_rank_check.py   # torch 2.13.0 CPU
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    seen: list[str] = []
    for i, layer in enumerate(model):
        layer.register_forward_hook(lambda _m, _i, out, i=i: seen.append(f"layer {i} output {out.dtype}"))
    out = model(torch.randn(4, 16))
    out.float().sum().backward()
    print(f"torch {torch.__version__}; world size {dist.get_world_size()}")
    print("\n".join(seen))
    print(f"parameters stored as {next(model.parameters()).dtype}, gradients {next(model.parameters()).grad.dtype}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
