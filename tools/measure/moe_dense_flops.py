"""The forward FLOPs of each layer's MLP on the tiny mixture-of-experts models whose real checkpoints hold dense
layers beside their MoE ones (issue 24, branch h87moe): DeepSeek-V3, GLM-4.5 (Glm4Moe), ERNIE 4.5 (Ernie4_5_Moe) and
Llama 4, built as moe_lora_configs.DENSE_FIRST makes them (layer 0 dense, an MLP of DENSE_FFN = 48; layer 1 MoE, 4
experts of 32, top 2, Llama 4 top 1). Counted by PyTorch's own ``torch.utils.flop_counter.FlopCounterMode`` over one
forward of B × S tokens (float32, random weights, seed 0), per module: each layer's MLP (``mlp`` /
``feed_forward``) and, inside an MoE layer, its parts (router, experts, shared expert) as the module tree names them.
``families``: transformers' own pick of experts implementation (``grouped_mm``: torch._grouped_mm, which torch
2.13.0's counter has no formula for, so the routed experts read 0 there); ``eager_experts``: the same models with
``experts_implementation="eager"``, the loop of one ``F.linear`` per expert hit, which it counts. Llama 4's experts
(Llama4TextExperts) are one bmm over every expert and every token in either.

    .venv-measure/bin/python tools/measure/moe_dense_flops.py tests/data/moe_flops/flops_transformers_5.25.0.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from tools.measure.moe_lora_configs import COMMON, DENSE_FFN, DENSE_FIRST, FAMILIES, FFN, LAYERS, D, E

BATCH, SEQ = 2, 16


def measure(family: str, experts: str | None = None) -> dict[str, object]:
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family], **DENSE_FIRST[family]})
    torch.manual_seed(0)
    kwargs = {"experts_implementation": experts} if experts else {}
    model = AutoModelForCausalLM.from_config(config, **kwargs).float().eval()
    ids = torch.randint(0, COMMON["vocab_size"], (BATCH, SEQ))
    counter = FlopCounterMode(display=False, depth=None)
    with torch.no_grad(), counter:
        model(input_ids=ids)
    flops = counter.get_flop_counts()
    mlp = "feed_forward" if family == "llama4_text" else "mlp"
    out: dict[str, object] = {"experts_implementation": model.config._experts_implementation}
    out["total"] = counter.get_total_flops()
    for layer in range(LAYERS):
        suffix = f"layers.{layer}.{mlp}"
        path = next(name for name, _ in model.named_modules() if name.endswith(suffix))
        parts = {
            name.split(suffix, 1)[1].lstrip(".") or "(whole)": sum(ops.values())
            for name, ops in flops.items()
            if name.endswith(suffix) or f"{suffix}." in name
        }
        out[f"layer {layer}"] = {"module": type(model.get_submodule(path)).__name__, "flops": parts}
    return out


def main(path: str) -> None:
    record = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "tiny": {"hidden": D, "intermediate": FFN, "experts": E, "layers": LAYERS, "dense_intermediate": DENSE_FFN},
        "tokens": {"batch": BATCH, "seq": SEQ},
        "counter": "torch.utils.flop_counter.FlopCounterMode, one forward under no_grad, float32",
        "families": {family: measure(family) for family in DENSE_FIRST},
        "eager_experts": {family: measure(family, "eager") for family in DENSE_FIRST},
    }
    with open(path, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
