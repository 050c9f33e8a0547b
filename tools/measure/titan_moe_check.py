"""What torchtitan's token-choice MoE layer keeps for its backward, eager and under torch.compile, measured on small
CPU tensors with the layer's own source (docs/REAL_GPU_MEMORY.md, "torchtitan's MoE layer as it holds memory";
core.training.activations._experts). Branch h88ttmoe, issue 22.

Two copies of the layer are run, each at the commit a corpus row names:

- prime-rl's (PrimeIntellect-ai/prime-rl 8718eb14 ``src/prime_rl/trainer/models/layers/moe.py``, the prime-rl
  Qwen3-30B-A3B rows), whose grouped-mm experts are wrapped by torchtitan a1fdd7e's ``expert_parallel`` (prime-rl's
  uv.lock pin; ``torchtitan/distributed/expert_parallel.py``: generate_permute_indices' padded permutation even on one
  device) and whose scores multiply the sorted experts' output before a scatter-add;
- torchtitan's own (pytorch/torchtitan d021aa9c ``torchtitan/models/moe/moe.py`` with ``utils.py`` and ``kernels.py``,
  the DeepSeek-V3 671B PR #2107 row), which un-sorts the experts' output into a zero N·k × d tensor and applies the
  scores by ``torch.bmm(top_scores, routed_output_unsorted.float())``.

Both as their models build them: ``score_before_experts=False``, softmax routing, no shared expert (prime-rl's Qwen3;
the torchtitan copy is also run with one shared expert, DeepSeek-V3's), bf16 weights and input (FSDP2's bf16 param
dtype). On the CPU two things are swapped, none of them on the autograd path: triton is stubbed and the padded
permutation's indices come from ``fill_indices_cpu`` of the same file inside an opaque custom op (the GPU's triton
kernel is one node of the compiled graph too); ``torch.histc`` on int64, which has no CPU kernel, counts by a
scatter-add of ones (the same counts).

Printed, per layer and mode: the tensors autograd saves (a pack hook: unique storages, weights and the input left
out, itemised by shape), the bytes the forward made and left alive (the profiler's memory timeline, the output taken
off), and the backward's high point above what was alive as it started (the profiler's timeline over ``backward()``;
the weights' bf16 gradients, 3·E·d·I × 2 B, among it), each also divided by the routed rows R = N·k and by d.

    git -C PRIME show 8718eb14:src/prime_rl/trainer/models/layers/moe.py > /tmp/tt/prime_moe.py
    for f in moe utils kernels; do git -C TITAN show d021aa9c:torchtitan/models/moe/$f.py > /tmp/tt/$f.py; done
    git -C TITAN show a1fdd7e:torchtitan/distributed/expert_parallel.py > /tmp/tt/expert_parallel.py
    git -C TITAN show a1fdd7e:torchtitan/experiments/kernels/moe/indices.py > /tmp/tt/indices.py
    .venv-measure/bin/python tools/measure/titan_moe_check.py /tmp/tt [--json OUT] [--shape D I]   # torch 2.13.0 CPU
"""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import torch

N, D, FFN, E, K = 4096, 64, 48, 8, 2  # tokens, hidden, expert width, experts, top-k (bf16 grouped_mm: multiples of 8)


def _module(name: str, source: str | None = None, package: str | None = None, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__package__ = package if package is not None else name.rpartition(".")[0]
    module.__dict__.update(attrs)
    sys.modules[name] = module
    if source is not None:
        exec(compile(source, name, "exec"), module.__dict__)
    return module


def _with_stub_triton(name: str, source: str) -> types.ModuleType:
    """Execute a file that imports triton with a stand-in triton, removed again at once (dynamo and inductor look
    triton up for themselves)."""
    import torch._dynamo  # noqa: F401  (before the stand-in exists)

    language = _module("triton.language", constexpr=int)
    _module("triton", jit=lambda f: f, language=language, cdiv=lambda a, b: -(-a // b))
    try:
        return _module(name, source)
    finally:
        del sys.modules["triton"], sys.modules["triton.language"]


def _opaque_fill(fill_cpu: Any) -> Any:
    """The permutation's index fill as one opaque op (the GPU runs a triton kernel there, under no_grad)."""

    @torch.library.custom_op("vramplan_measure::fill_indices", mutates_args=())
    def fill(
        tokens: torch.Tensor, start: torch.Tensor, offsets: torch.Tensor, per_rank: int, ranks: int, max_len: int
    ) -> torch.Tensor:
        return fill_cpu(tokens, start, offsets, per_rank, ranks, max_len)

    @fill.register_fake
    def _(tokens: torch.Tensor, start: torch.Tensor, offsets: torch.Tensor, per_rank: int, ranks: int, max_len: int):
        return tokens.new_empty((max_len,), dtype=torch.int32)

    return fill


def _histc(original: Any) -> Any:
    def histc(x: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
        if x.dtype.is_floating_point:
            return original(x, bins=bins, min=min, max=max)
        return torch.zeros(bins, dtype=x.dtype).scatter_add_(0, x.long(), torch.ones_like(x, dtype=x.dtype))

    return histc


def load(folder: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """prime-rl's moe.py (with torchtitan a1fdd7e's expert_parallel) and torchtitan d021aa9c's moe package."""
    torch.histc = _histc(torch.histc)  # type: ignore[assignment]
    read = lambda name: (folder / name).read_text()
    for name in ("torchtitan", "torchtitan.tools", "torchtitan.distributed", "torchtitan.experiments",
                 "torchtitan.experiments.kernels", "torchtitan.experiments.kernels.moe", "torchtitan.models",
                 "torchtitan.models.moe"):
        _module(name, package=name)
    import logging

    _module("torchtitan.tools.logging", logger=logging.getLogger("torchtitan"))
    _module("torchtitan.tools.utils", _round_up=lambda x, y: math.ceil(x / y) * y)
    indices = _with_stub_triton("torchtitan.experiments.kernels.moe.indices", read("indices.py"))
    kernels = _with_stub_triton("torchtitan.models.moe.kernels", read("kernels.py"))
    fill = _opaque_fill(kernels.fill_indices_cpu)
    indices.fill_indices_wrapper = fill
    kernels.fill_indices_wrapper = fill
    _module("torchtitan.distributed.expert_parallel", read("expert_parallel.py"))
    _module("torchtitan.models.moe.utils", read("utils.py"))
    titan = _module("torchtitan.models.moe.moe", read("moe.py"))
    prime = _module("prime_rl_moe", read("prime_moe.py"), package="")
    return prime, titan


def build(module: types.ModuleType, shared: int) -> torch.nn.Module:
    torch.manual_seed(0)
    args = module.MoEArgs(num_experts=E, num_shared_experts=shared, score_func="softmax", route_norm=False,
                          score_before_experts=False, top_k=K, use_grouped_mm=True, load_balance_coeff=1e-3)
    layer = module.MoE(args, dim=D, hidden_dim=FFN)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return layer.to(torch.bfloat16).train()


def _profiled() -> Any:
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                                  record_shapes=True, with_stack=True)


def _timeline(prof: Any) -> tuple[list[int], int]:
    """The bytes of the tensors the profiler saw during its window (every category) after each allocation or free,
    and how many of them were alive before it (saved tensors, weights, the output and its gradient)."""
    from torch.profiler._memory_profiler import Action, MemoryProfileTimeline

    timeline = MemoryProfileTimeline(prof._memory_profile())
    _, sizes = timeline._coalesce_timeline("cpu")
    before = sum(size for _, action, _, size in timeline.timeline if action is Action.PREEXISTING)
    return [sum(s) for s in sizes], before


def measure(layer: torch.nn.Module, compiled: bool) -> dict[str, Any]:
    run = torch.compile(layer) if compiled else layer
    x = torch.randn(1, N, D, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(1, N, D, dtype=torch.bfloat16)
    for _ in range(2):  # warm-up: compile, the optimiser-free gradients allocated once
        run(x).backward(grad)
    layer.zero_grad(set_to_none=True)
    x.grad = None
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()} | {x.untyped_storage().data_ptr()}
    items: dict[int, tuple[int, str]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            items.setdefault(s.data_ptr(), (s.nbytes(), f"{tuple(t.shape)} {str(t.dtype)[6:]}"))
        return t

    with _profiled() as fwd, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run(x)
    out_bytes = out.untyped_storage().nbytes()
    values, before = _timeline(fwd)
    kept = values[-1] - before - out_bytes  # what the forward made and left alive, its output taken off
    with _profiled() as bwd:
        out.backward(grad)
    values, before = _timeline(bwd)
    high = max(values) - before  # above what was alive as the backward started (the saved set among it)
    weight_grads = sum(p.numel() * p.element_size() for p in layer.parameters())
    rows = N * K
    return {
        "kept_bytes": kept,
        "kept_per_routed_row_over_d": round(kept / rows / D, 3),
        "pack_hook_bytes": sum(b for b, _ in items.values()),
        "pack_hook_items": sorted((v[1], v[0]) for v in items.values()),
        "backward_high_bytes": high,
        "backward_high_less_weight_grads_per_routed_row_over_d": round((high - weight_grads) / rows / D, 3),
        "backward_high_note": "the backward's high point above what was alive at its start (saved tensors, weights, "
                              "input, output and its gradient), the weights' bf16 gradients included",
        "weight_grad_bytes": weight_grads,
    }


def main() -> None:
    global D, FFN
    folder = Path(sys.argv[1])
    if "--shape" in sys.argv:  # --shape D I: other widths, to tell the d- and I-sized terms apart
        at = sys.argv.index("--shape")
        D, FFN = int(sys.argv[at + 1]), int(sys.argv[at + 2])
    prime, titan = load(folder)
    result: dict[str, Any] = {
        "format": "vramplan-titan-moe-saved",
        "tool": "tools/measure/titan_moe_check.py",
        "versions": {"torch": torch.__version__, "prime-rl": "8718eb143d2c5118112d00fab4355f07c2dcbb82",
                     "torchtitan": "d021aa9ca06ca8466c601983f66ac227d59ba19f",
                     "torchtitan (prime-rl's uv.lock pin, expert_parallel.py and indices.py)": "a1fdd7e"},
        "N": N, "d": D, "I": FFN, "E": E, "k": K, "dtype": "bf16",
        "padded_rows": "N·k + E·8 (generate_permute_indices)",
    }
    for name, module, shared in (("prime-rl 8718eb14", prime, 0), ("torchtitan d021aa9c", titan, 0),
                                 ("torchtitan d021aa9c, one shared expert", titan, 1)):
        for compiled in (False, True):
            torch._dynamo.reset()
            key = f"{name}, {'compile' if compiled else 'eager'}"
            result[key] = measure(build(module, shared), compiled)
            r = result[key]
            print(f"{key}: kept {r['kept_bytes']:,} B = {r['kept_per_routed_row_over_d']} d B a routed row; "
                  f"pack hook {r['pack_hook_bytes']:,} B; backward high {r['backward_high_bytes']:,} B "
                  f"({r['backward_high_less_weight_grads_per_routed_row_over_d']} d B a routed row "
                  "beside the weights' gradients)")
            for shape, size in r["pack_hook_items"]:
                print(f"    {shape}: {size:,} B")
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
