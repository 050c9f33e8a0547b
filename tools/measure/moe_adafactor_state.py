"""torch.optim.Adafactor's statistics on the matrices of a tiny mixture of experts' blocks (branch h87moe): full
fine-tuning, one step, then the ``row_var`` / ``col_var`` elements of every block parameter of two or more
dimensions (torch 2.13.0 torch/optim/_adafactor.py lines 100-111: a gradient of 2+ dimensions keeps its last two
dimensions' row and column statistics per leading index; a 1-D one a ``variance`` of its shape, not counted here).
The models are moe_lora_configs' (FAMILIES; DENSE_FIRST's where the family has dense layers), random weights, float32.

    .venv-measure/bin/python tools/measure/moe_adafactor_state.py OUT.json        # transformers 5.25.0
    PYTHONPATH=<transformers 4.57.1> .venv-measure/bin/python tools/measure/moe_adafactor_state.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from tools.measure.moe_lora_configs import COMMON, DENSE_FIRST, FAMILIES

SKIP = ("deepseek_v3",)  # latent attention: the plan's training rules read its decompressed approximation


def measure(family: str) -> dict[str, int]:
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family], **DENSE_FIRST.get(family, {})})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).float()
    optimizer = torch.optim.Adafactor(model.parameters(), lr=1e-3)
    ids = torch.randint(0, COMMON["vocab_size"], (1, 8))
    model(input_ids=ids, labels=ids).loss.backward()
    for p in model.parameters():  # a routed expert no token reached still steps (a frozen buffer-like one does not)
        if p.grad is None and p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer.step()
    names = {p: n for n, p in model.named_parameters()}
    matrices = 0
    for p, state in optimizer.state.items():
        if ".layers." in names[p] and p.dim() >= 2:
            matrices += state["row_var"].numel() + state["col_var"].numel()
    return {"block_matrix_statistics": matrices}


def main(path: str) -> None:
    record = {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "families": {family: measure(family) for family in FAMILIES if family not in SKIP},
    }
    with open(path, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
