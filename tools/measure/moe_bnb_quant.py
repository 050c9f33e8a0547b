"""Which weights bitsandbytes quantises when a mixture of experts is loaded for QLoRA (issue 22, branch h81qmoe):
``replace_with_bnb_linear`` swaps ``type(module) is nn.Linear`` (and Conv1D) for ``bnb.nn.Linear4bit`` /
``Linear8bitLt`` and nothing else (transformers 5.25.0 integrations/bitsandbytes.py; 4.57.1 the same with
``isinstance``), so the routed experts that a release keeps as 3-D ``nn.Parameter`` of one experts module
(MixtralExperts, Qwen3MoeExperts, GptOssExperts, Llama4TextExperts, ...) are loaded as they are, in the model's dtype.

The tool builds each family of tools/measure/moe_lora_configs.py (hidden 64, expert MLP 32, 4 experts, 2 layers) in
bfloat16, saves it, loads it back with ``BitsAndBytesConfig(load_in_4bit=True)`` (NF4, double quant off) and
``load_in_8bit=True`` on the CPU (bitsandbytes' CPU backend quantises as on a GPU) and records, for every parameter
and quantised weight, its dtype and bytes, summed by where it sits: routed experts, the rest of the MLP, attention,
embeddings / head, norms / routers. Needs torch (the CPU build), transformers and bitsandbytes in one environment:

    .venv-measure/bin/python tools/measure/moe_bnb_quant.py OUT.json          # transformers 5.25.0
    PYTHONPATH=<a folder holding transformers 4.57.1> .venv-measure/bin/python tools/measure/moe_bnb_quant.py OUT.json

tests/data/moe_bnb/ holds its output.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import warnings
from pathlib import Path

import bitsandbytes
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from tools.measure.moe_lora_configs import COMMON, FAMILIES  # torch-free, shared with the tests


def _where(name: str) -> str:
    """The part of the model a parameter belongs to."""
    if ".experts." in name and "shared" not in name:
        return "routed_experts"
    if "embed" in name or "lm_head" in name:
        return "embeddings_head"
    if "norm" in name or ".gate.weight" in name or "router" in name or "sinks" in name:
        return "norms_routers"
    if "self_attn" in name:
        return "attention"
    return "mlp_other"


def _tally(model: torch.nn.Module) -> dict[str, dict[str, object]]:
    """Per part of the model: its stored bytes by parameter class and dtype (a Params4bit holds two weights a
    byte, its absmax apart), and the parameters' names and shapes."""
    parts: dict[str, dict[str, object]] = {}
    for name, param in model.named_parameters():
        where = parts.setdefault(_where(name), {"bytes": 0, "by_kind": {}, "shapes": set()})
        size = param.numel() * param.element_size()
        where["bytes"] = int(where["bytes"]) + size  # type: ignore[call-overload]
        kind = f"{type(param).__name__}:{str(param.dtype).removeprefix('torch.')}"
        by_kind: dict[str, int] = where["by_kind"]  # type: ignore[assignment]
        by_kind[kind] = by_kind.get(kind, 0) + size
        where["shapes"].add(f"{name.split('.')[-1]}{list(param.shape)}")  # type: ignore[union-attr]
    return {k: {"bytes": v["bytes"], "by_kind": v["by_kind"], "shapes": sorted(v["shapes"])}  # type: ignore[arg-type]
            for k, v in sorted(parts.items())}


def _modules(model: torch.nn.Module) -> list[str]:
    """The classes of the last block's MLP and its children."""
    seen = []
    for name, module in model.named_modules():
        if ".layers.1.mlp" in name or ".layers.1.feed_forward" in name or ".layers.1.block_sparse_moe" in name:
            entry = f"{name.split('.layers.1.')[1]}: {type(module).__name__}"
            if not any(c.isdigit() for c in entry.split(":")[0].split(".")[-1]):
                seen.append(entry)
    return seen


def measure(family: str, folder: Path) -> dict[str, object]:
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family]})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    path = folder / family
    model.save_pretrained(path)
    out: dict[str, object] = {"bf16": _tally(model)}
    configs = {
        "nf4": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16),
        "int8": BitsAndBytesConfig(load_in_8bit=True),
    }
    for label, quant in configs.items():
        try:
            with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded = AutoModelForCausalLM.from_pretrained(
                    path, quantization_config=quant, dtype=torch.bfloat16, device_map="cpu"
                )
            out[label] = _tally(loaded)
            out[f"{label}_modules"] = _modules(loaded)
        except Exception as error:
            out[label] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return out


def main() -> None:
    result: dict[str, object] = {
        "transformers": transformers.__version__,
        "bitsandbytes": bitsandbytes.__version__,
        "torch": torch.__version__,
        "families": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            try:
                result["families"][family] = measure(family, Path(tmp))  # type: ignore[index]
            except Exception as error:
                result["families"][family] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"  # type: ignore[index]
            print(family, json.dumps(result["families"][family])[:300], file=sys.stderr)  # type: ignore[index]
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
