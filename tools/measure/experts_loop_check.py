"""Check, on the CPU, what transformers 4.55's gpt-oss experts loop keeps and forms (plan setting
``experts_loop``; core.training.activations._experts_loop, core.training.detailed
._with_experts_loop_gradient). No dispatch mode is used: one changes what autograd does (a
TorchDispatchMode makes ``index_backward`` and the gradient accumulation out of place).

Needs torch (the local CPU build) and transformers==4.55.0 in one environment, and kernels==0.9.0 for the
last check (axolotl ca796fb's pin), e.g.

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0 transformers==4.55.0 kernels==0.9.0
    /tmp/tv/bin/python tools/measure/experts_loop_check.py

Prints, for a small GptOssMLP in training mode (bf16), the bytes the forward saves for the backward
(unique storages, through a pack hook) beside the estimate's rule, with the experts trained and
frozen, the ops the backward runs on a whole stacked gate|up shape [E, d, 2I] (profiler), and which
forward GptOssMLP keeps when kernels' kernelize runs on a model held on the CPU, as transformers 4.55.0's
``from_pretrained(use_kernels=True)`` does under axolotl's FSDP (no device_map).
"""

from __future__ import annotations

import collections

import torch
import transformers
from torch.profiler import ProfilerActivity, profile
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP

D, FFN, E, K, N, W = 96, 80, 8, 2, 1_000, 2  # small, with d != the expert width so the terms can be told apart


def _mlp(trained: bool) -> GptOssMLP:
    torch.manual_seed(0)
    config = GptOssConfig(hidden_size=D, intermediate_size=FFN, num_local_experts=E, num_experts_per_tok=K)
    mlp = GptOssMLP(config).to(torch.bfloat16)
    for p in mlp.parameters():
        torch.nn.init.normal_(p, std=0.02)
        p.requires_grad_(trained)
    return mlp.train()


def saved_bytes(trained: bool) -> tuple[int, int]:
    """The forward's saved bytes (unique storages) and the rule's: weight copies + routed rows + the rest."""
    mlp = _mlp(trained)
    x = torch.randn(1, N, D, dtype=torch.bfloat16, requires_grad=True)
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        saved.setdefault(s.data_ptr(), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        mlp(x)
    copies = E * (D * 2 * FFN + FFN * D) * W
    per_row = 7 * FFN + 3 * D if trained else 6 * FFN + 2 * D
    # The router's input x (kept when its weight trains), its bf16 scores, the routing-weight slices and
    # the index tensors: not the loop's.
    rest = (N * D * W if trained else 0) + N * E * W + N * K * (W + 8 + 8)
    return sum(saved.values()), copies + N * K * per_row * W + rest


def backward_ops() -> dict[str, int]:
    """The ops the backward runs with a whole stacked gate|up shape among their inputs."""
    mlp = _mlp(True)
    x = torch.randn(1, N, D, dtype=torch.bfloat16, requires_grad=True)
    out, _ = mlp(x)
    full = [E, D, 2 * FFN]
    ops: collections.Counter[str] = collections.Counter()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out.sum().backward()
    for event in prof.events():
        if any(list(s) == full for s in (event.input_shapes or []) if s):
            ops[event.name] += 1
    return dict(ops)


def kernelized_on_the_cpu() -> str:
    """The forward a GptOssMLP has after ``kernelize(model, device=Device(type=model.device.type))``."""
    from kernels import Device, kernelize
    from transformers import GptOssForCausalLM
    from transformers.models.gpt_oss import modeling_gpt_oss

    config = GptOssConfig(
        hidden_size=64,
        intermediate_size=64,
        num_local_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=128,
    )
    model = GptOssForCausalLM(config)
    kernelize(model, device=Device(type=model.device.type))
    forward = model.model.layers[0].mlp.forward.__func__
    own = forward is modeling_gpt_oss.GptOssMLP.forward
    return f"{forward.__module__}.{forward.__qualname__} (transformers' own: {own})"


def main() -> None:
    print("torch", torch.__version__, "transformers", transformers.__version__)
    for trained in (True, False):
        measured, rule = saved_bytes(trained)
        error = (rule - measured) / measured
        print(f"experts trained={trained}: saved {measured:,} B, the rule {rule:,} B ({error:+.1%})")
    print("backward ops on [E, d, 2I]:", backward_ops())
    try:
        print("GptOssMLP.forward after kernelize on a CPU-held model:", kernelized_on_the_cpu())
    except ImportError:
        print("kernels not installed: the kernelize check skipped")


if __name__ == "__main__":
    main()
