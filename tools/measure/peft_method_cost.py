"""What each PEFT method's adapted linear runs beyond the frozen linear, on CPU: kernels, matmul FLOPs by dtype
and the bytes the other ops read and write (issue 24, items 1–2).

One module holding Llama 3.2 3B's q_proj (3,072 → 3,072) and v_proj (3,072 → 1,024) in bfloat16, wrapped by PEFT
with the method comparison's adapter settings (huggingface/peft 5d602fdb method_comparison/MetaMathQA/results/
*.json ``peft_config``; adapters in float32, PEFT's ``autocast_adapter_dtype`` default), a micro-batch of
``--tokens`` tokens (the comparison's 4 samples of ~210 tokens: 840) whose input needs a gradient (the blocks below
do). Under a ``TorchDispatchMode`` (every op below autograd: what the device runs) it counts, forward and backward:

- ops that launch a kernel (views, empty allocations and detach left out: tools/measure/kernel_count.py's rule);
- matmul FLOPs (mm, addmm, bmm, baddbmm: 2·m·k·n) by dtype, the float32 ones apart;
- bytes the other ops read and write (each tensor argument and output once, as eager PyTorch moves them).

Each method's figures less the frozen linear's (the base matmul and its input gradient). Needs torch, transformers
and peft (not the planner's environment):
    /tmp/torchenv/bin/python tools/measure/peft_method_cost.py [--tokens 840] [--ops]
    /tmp/torchenv/bin/python tools/measure/peft_method_cost.py --bytes --tokens 128 --shape 256 512
    /tmp/torchenv/bin/python tools/measure/peft_method_cost.py --methods adalora --shape 512 512 --tokens 256
(``--shape``: one linear alone, for the byte coefficients; AdaLoRA's rank allocator is counted once a step.) Its
output is quoted in core/training/flops.py (PEFT_METHOD_PASSES, ADALORA_ALLOCATOR_KERNELS) and docs/TRAINING_TIME.md
("What each PEFT method costs in time").
"""

from __future__ import annotations

import argparse
import collections
import math
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

_METHODS = (
    "lora", "dora", "ia3", "loha", "lokr", "vera", "oft", "adalora", "miss", "fourierft", "road", "vblora", "randlora",
    "shira", "boft",
)  # fmt: skip
_NO_KERNEL = {"empty.memory_format", "empty_strided.default", "empty_like.default", "detach.default"}
_MATMULS = {"mm", "addmm", "bmm", "baddbmm"}


@dataclass
class Tally:
    kernels: int = 0
    flops: collections.Counter[str] = field(default_factory=collections.Counter)
    bytes: float = 0.0
    ops: collections.Counter[str] = field(default_factory=collections.Counter)


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.t = Tally()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket.__name__)
        if func.is_view or f"{name}.{func._overloadname}" in _NO_KERNEL:
            return out
        self.t.kernels += 1
        self.t.ops[name] += 1
        if name in _MATMULS:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            batch = a.shape[0] if a.dim() == 3 else 1
            self.t.flops[str(a.dtype).replace("torch.", "")] += 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
            return out
        tensors = [x for x in tree_flatten((args, kwargs, out))[0] if isinstance(x, torch.Tensor)]
        self.t.bytes += sum(x.numel() * x.element_size() for x in tensors)
        return out


class Proj(torch.nn.Module):
    """Llama 3.2 3B's q_proj and v_proj; with ``shape``, one q_proj of (in, out) alone (v_proj none)."""

    def __init__(self, shape: tuple[int, int] | None = None) -> None:
        super().__init__()
        fan_in, fan_out = shape or (3072, 3072)
        self.q_proj = torch.nn.Linear(fan_in, fan_out, bias=False)
        self.v_proj = torch.nn.Linear(fan_in, 1024, bias=False) if shape is None else None

    def forward(self, x: torch.Tensor) -> types.SimpleNamespace:
        # An output with a loss, as a transformers model returns: AdaLoraModel.forward adds its orthogonal
        # regularisation to ``outputs.loss`` (huggingface/peft 51c2ff66 src/peft/tuners/adalora/model.py).
        y = self.q_proj(x).float().sum()
        return types.SimpleNamespace(loss=y if self.v_proj is None else y + self.v_proj(x).float().sum())


def _config(method: str) -> Any:
    import peft

    qv = ["q_proj", "v_proj"]
    return {
        "lora": lambda: peft.LoraConfig(r=32, lora_alpha=64, target_modules=qv),
        "dora": lambda: peft.LoraConfig(r=32, lora_alpha=64, target_modules=qv, use_dora=True),
        "ia3": lambda: peft.IA3Config(target_modules=qv, feedforward_modules=[]),
        "loha": lambda: peft.LoHaConfig(r=32, alpha=64, target_modules=qv),
        "lokr": lambda: peft.LoKrConfig(r=32, alpha=64, decompose_factor=4, target_modules=qv),
        "vera": lambda: peft.VeraConfig(r=256, target_modules=qv),
        "oft": lambda: peft.OFTConfig(r=32, oft_block_size=0, target_modules=qv, use_cayley_neumann=True),
        "adalora": lambda: peft.AdaLoraConfig(init_r=64, target_r=32, lora_alpha=8, target_modules=qv, total_step=5000),
        # miss--llama-3.2-3B-default (51c2ff66 results): MissConfig's r 64, init_weights True.
        "miss": lambda: peft.MissConfig(r=64, target_modules=qv),
        # Branch h78peft, the 51c2ff66 results' peft_config: fourierft--llama-3.2-3B-default (n_frequency 1000,
        # scaling 150), road--llama-3.2-3B-lr_0.001 (variant road_2), vblora--llama-3.2-3B-default (r 4, 256 vectors
        # of 256, top 2), randlora--llama-3.2-3B-default (r 32, randlora_alpha 640), shira--llama-3.2-3B-lr_0.0003-
        # random_seed_42 (r 32, random mask).
        "fourierft": lambda: peft.FourierFTConfig(n_frequency=1000, scaling=150.0, target_modules=qv),
        "road": lambda: peft.RoadConfig(variant="road_2", target_modules=qv),
        "vblora": lambda: peft.VBLoRAConfig(r=4, num_vectors=256, vector_length=256, topk=2, target_modules=qv),
        "randlora": lambda: peft.RandLoraConfig(r=32, randlora_alpha=640, target_modules=qv),
        "shira": lambda: peft.ShiraConfig(r=32, random_seed=42, target_modules=qv),
        # Branch h80boft, boft--llama-3.2-3B-default's peft_config (huggingface/peft 51c2ff66): blocks of 4, one
        # butterfly factor, no dropout; PEFT's torch.block_diag path (_FBD_CUDA, set in measure: no CUDA extension).
        "boft": lambda: peft.BOFTConfig(boft_block_size=4, boft_n_butterfly_factor=1, target_modules=qv),
    }[method]()


def measure(
    method: str, tokens: int, shape: tuple[int, int] | None = None, step: list[Tally] | None = None
) -> tuple[Tally, Tally]:
    """(forward, backward) of one micro-batch; with ``step``, AdaLoRA's ``update_and_allocate`` at step 1,000 (its
    budget-masking phase: tinit 200, tfinal 500 of 5,000) appended to it."""
    torch.manual_seed(0)
    module: torch.nn.Module = Proj(shape).to(torch.bfloat16)
    module.requires_grad_(False)
    if method != "frozen":
        import peft
        import peft.tuners.boft.layer as boft_layer

        # BOFT's fbd_cuda extension is built with nvcc at its first layer (layer.py ``get_fbd_cuda``); here, as
        # where it fails to build, PEFT takes its torch.block_diag path (False: the failed build's cached answer).
        boft_layer._FBD_CUDA = False

        module = peft.get_peft_model(module, _config(method))
        module.train()
    x = torch.randn(tokens, shape[0] if shape else 3072, dtype=torch.bfloat16, requires_grad=True)
    # The tuner's own forward (LoraModel, AdaLoraModel…), as PeftModelForCausalLM calls it: AdaLoRA's adds its
    # orthogonal regularisation there (a PeftModel without a task type would call the base model directly).
    run = module.base_model if method != "frozen" else module
    with Count() as fwd:
        y = run(x).loss
    with Count() as bwd:
        y.backward()
    if step is not None and method == "adalora":
        with Count() as allocate:
            module.base_model.update_and_allocate(1000)
        step.append(allocate.t)
    return fwd.t, bwd.t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=840)
    parser.add_argument("--ops", action="store_true", help="list each method's extra ops")
    parser.add_argument("--bytes", action="store_true", help="the other ops' bytes exact, not in MB")
    parser.add_argument("--methods", nargs="+", default=list(_METHODS), choices=_METHODS, help="the methods to run")
    parser.add_argument("--shape", type=int, nargs=2, metavar=("IN", "OUT"), help="one linear of IN -> OUT alone")
    args = parser.parse_args(argv)
    shape = tuple(args.shape) if args.shape else None
    what = f"one linear {shape[0]} -> {shape[1]}" if shape else "one q_proj (3072 -> 3072) + v_proj (3072 -> 1024)"
    print(f"torch {torch.__version__}; {what}, {args.tokens} tokens")
    base_f, base_b = measure("frozen", args.tokens, shape)
    unit, digits = (1.0, 0) if args.bytes else (1e6, 1)
    other = "other bytes" if args.bytes else "other MB"
    print(
        "method   | kernels fwd / bwd | fp32 matmul GFLOP fwd / bwd | 16-bit matmul GFLOP fwd / bwd | "
        f"{other} fwd / bwd"
    )
    step: list[Tally] = []
    for method in args.methods:
        f, b = measure(method, args.tokens, shape, step)
        row = [
            f"{f.kernels - base_f.kernels} / {b.kernels - base_b.kernels}",
            f"{f.flops['float32'] / 1e9:.3f} / {b.flops['float32'] / 1e9:.3f}",
            f"{(f.flops['bfloat16'] - base_f.flops['bfloat16']) / 1e9:.3f} / "
            f"{(b.flops['bfloat16'] - base_b.flops['bfloat16']) / 1e9:.3f}",
            f"{(f.bytes - base_f.bytes) / unit:.{digits}f} / {(b.bytes - base_b.bytes) / unit:.{digits}f}",
        ]
        print(f"{method:8s} | " + " | ".join(row))
        if args.ops:
            extra_f = f.ops - base_f.ops
            extra_b = b.ops - base_b.ops
            print(f"    forward: {dict(extra_f)}\n    backward: {dict(extra_b)}")
    for allocate in step:
        print(f"adalora update_and_allocate (a step): {allocate.kernels} ops {dict(allocate.ops)}")
    assert math.isfinite(base_f.bytes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
