"""The ``torchrun`` command that starts the plan's processes: one per GPU, on each node.

Flags read from PyTorch 2.13 ``torch/distributed/run.py``: ``--nnodes``, ``--nproc_per_node``,
``--node_rank``, ``--master_addr``, ``--master_port`` (static rendezvous across nodes) and
``--standalone`` (one node, a local rendezvous). What each process trains is the script's
(and its config's): the command carries the GPU count, and ``PYTORCH_CUDA_ALLOC_CONF`` in front of
it when the plan sets the caching allocator's settings.
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from core.files.launch.common import (
    ENV_SETTINGS,
    GPU_COUNT,
    TRAINING_NAMES,
    Draft,
    Export,
    Target,
    alloc_env,
    command_words,
    header,
    read_alloc_env,
)
from core.plan import Plan

PORT: Final = 29500
SCRIPT_WHY: Final = "the training script's, not torchrun's: pair this with a trainer config export"


def export_torchrun(plan: Plan, command: tuple[str, ...] = ("train.py",)) -> Export:
    draft = Draft(plan)
    par = plan.parallel
    argv = ["torchrun", f"--nnodes={par.nodes}", f"--nproc_per_node={par.gpus_per_node}"]
    lines = [f"torchrun written by VRAM Planner: {par.nodes} node(s) x {par.gpus_per_node} GPU(s)"]
    if par.nodes > 1:
        argv += ["--node_rank=$NODE_RANK", "--master_addr=$MASTER_ADDR", f"--master_port={PORT}"]
        lines.append("Run on every node with NODE_RANK (0 on the first) and MASTER_ADDR (the first node's address).")
    else:
        argv.insert(1, "--standalone")
    written = (*GPU_COUNT, *ENV_SETTINGS)
    draft.outside([n for n in TRAINING_NAMES if n not in written], SCRIPT_WHY)
    words = alloc_env(draft) + argv + [shlex.quote(c) for c in command]
    return draft.finish(Target.TORCHRUN, header(lines) + " ".join(words) + "\n")


def read_torchrun(text: str) -> dict[str, Any]:
    """The GPU count a ``torchrun`` line gives (the inverse of :func:`export_torchrun`)."""
    env, words = read_alloc_env(command_words(text))
    found = dict(w[2:].split("=", 1) for w in words if w.startswith(("--nnodes=", "--nproc_per_node=")))
    return {"parallel.nodes": int(found["nnodes"]), "parallel.gpus_per_node": int(found["nproc_per_node"]), **env}
