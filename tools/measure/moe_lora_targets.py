"""What PEFT's LoRA adapts on tiny mixture-of-experts models, for each target choice the plan offers
(issue 22, branch h79moe): transformers 5 keeps the routed experts as 3-D parameters of one experts module
(``gate_up_proj`` / ``down_proj`` of all experts), which ``target_modules`` cannot name, where 4.x (Mixtral,
Qwen2/3-MoE, OLMoE, DeepSeek, GLM-4 MoE, ERNIE 4.5) held a ModuleList of nn.Linear experts. The tool builds each
model at a few small dimensions, wraps it with ``LoraConfig(r=8, target_modules=...)`` and records PEFT's own
``print_trainable_parameters`` line and the modules of the last block that got an adapter (expert indices
folded to ``*``), or PEFT's refusal when no module matches.

Needs torch (the CPU build), peft and a transformers release in one environment, e.g.

    /tmp/torchenv/bin/python tools/measure/moe_lora_targets.py OUT.json          # transformers 5.25.0
    PYTHONPATH=<a folder holding transformers 4.57.1> /tmp/torchenv/bin/python \
        tools/measure/moe_lora_targets.py OUT.json

tests/data/moe_lora/ holds its output under transformers 5.25.0 and 4.57.1 (peft 0.18.0, torch 2.13.0 CPU). Its
``dense_first`` rows (branch h83layers) build DeepSeek-V3, GLM-4.5, ERNIE 4.5 and Llama 4 with a dense layer 0 and an
MoE layer 1 (moe_lora_configs.DENSE_FIRST) and list the first block's adapted modules as well as the last one's;
``dense_first_methods`` counts DoRA's and IA3's trained parameters and tensors on the same models.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import peft
import torch
import transformers
from peft import IA3Config, LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from tools.measure.moe_lora_configs import (  # torch-free, shared with the tests
    COMMON,
    DENSE_FFN,
    DENSE_FIRST,
    FAMILIES,
    LAYERS,
    RANK,
)

# The plan's target choices (core.model normalise_lora_targets: all-linear, the MLP's names and Mixtral's w1/w2/w3).
TARGETS: dict[str, str | list[str]] = {
    "all-linear": "all-linear",
    "gate_proj,up_proj,down_proj": ["gate_proj", "up_proj", "down_proj"],
    "w1,w2,w3": ["w1", "w2", "w3"],
    "q,k,v,o,gate,up,down": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "q_proj,v_proj": ["q_proj", "v_proj"],
}


def _adapted(model: torch.nn.Module, layer: int = LAYERS - 1) -> list[str]:
    """One block's modules that hold a lora_A (the last block's unless told), expert indices folded."""
    last = f"layers.{layer}."
    names = set()
    for name, _ in model.named_parameters():
        if ".lora_A." in name and last in name:
            names.add(re.sub(r"\.experts\.\d+\.", ".experts.*.", name.split(last)[1].split(".lora_A.")[0]))
    return sorted(names)


def measure(family: str, dense_first: bool = False) -> dict[str, object]:
    extra = DENSE_FIRST[family] if dense_first else {}
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family], **extra})
    out: dict[str, object] = {}
    for label, targets in TARGETS.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config)
        try:
            wrapped = get_peft_model(model, LoraConfig(r=RANK, lora_alpha=16, target_modules=targets))
        except ValueError as error:  # PEFT: "Target modules {...} not found in the base model"
            out[label] = {"refused": re.sub(r"\{.*?\}", "{...}", str(error).split(". ")[0])}
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            wrapped.print_trainable_parameters()
        row: dict[str, object] = {"printed": printed.getvalue().strip(), "adapted_last_block": _adapted(wrapped)}
        if dense_first:
            row["adapted_first_block"] = _adapted(wrapped, 0)
        out[label] = row
    return out


# DoRA's magnitudes and IA3's vectors on the dense_first models (branch h83layers): the plan's attention and MLP (a
# latent-attention model's q_proj, o_proj and MLP), IA3 with down_proj as its feedforward module.
METHOD_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def measure_methods(family: str) -> dict[str, object]:
    """Trainable parameters and tensors of DoRA (r 8) and IA3 on a dense_first model: what requires_grad."""
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family], **DENSE_FIRST[family]})
    targets = [t for t in METHOD_TARGETS if family != "deepseek_v3" or t not in ("k_proj", "v_proj")]
    configs = {
        "dora": LoraConfig(r=RANK, lora_alpha=16, target_modules=targets, use_dora=True),
        "ia3": IA3Config(target_modules=targets, feedforward_modules=["down_proj"]),
    }
    out: dict[str, object] = {}
    for label, peft_config in configs.items():
        torch.manual_seed(0)
        wrapped = get_peft_model(AutoModelForCausalLM.from_config(config), peft_config)
        trained = [p for p in wrapped.parameters() if p.requires_grad]
        out[label] = {"parameters": sum(p.numel() for p in trained), "tensors": len(trained)}
    return out


def main(path: str) -> None:
    record = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "tiny": {
            "hidden": COMMON["hidden_size"],
            "intermediate": COMMON["intermediate_size"],
            "experts": 4,
            "layers": LAYERS,
            "rank": RANK,
            "dense_intermediate": DENSE_FFN,
        },
        "families": {family: measure(family) for family in FAMILIES},
        "dense_first": {family: measure(family, dense_first=True) for family in DENSE_FIRST},
        "dense_first_methods": {family: measure_methods(family) for family in DENSE_FIRST},
    }
    with open(path, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
