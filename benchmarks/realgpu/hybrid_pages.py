"""vLLM's hybrid page rule against the published figures, end to end through ``estimate()`` (held out).

The records (tests/data/hybrid/vllm_page_figures.json, each with where it was published, the settings and
the widths): vLLM prints "Setting attention block size to N tokens" and "Padding mamba page size by P%" at
start-up for a hybrid recurrent model (core.serving.vllm_hybrid). Each record becomes a plan — the record's
widths on its family's config (tests/data/hybrid/meta_counts.json: transformers 5.25.0's configs), its
release, cache dtypes and context — and the figures are read from the estimate's vLLM formula, in vLLM's
words. No constant is set from them (the rule has none); the target is exact agreement.

    python -m benchmarks.realgpu.hybrid_pages
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalogue import find_model  # noqa: E402
from core.dtypes import KvDtype  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.hfconfig import model_from_hf_config  # noqa: E402
from core.inputs import VllmVersion  # noqa: E402
from core.plan import Plan  # noqa: E402
from core.presets import default_plan  # noqa: E402

DATA: Final = ROOT / "tests" / "data" / "hybrid"
FIGURES: Final = DATA / "vllm_page_figures.json"
META: Final = DATA / "meta_counts.json"
PAGE_WORDS: Final = re.compile(r"attention block size ([\d,]+) tokens, mamba page padded by ([\d.]+)%")


def records() -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = json.loads(FIGURES.read_text("utf-8"))["figures"]
    return figures


def _meta(case: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(META.read_text("utf-8"))["cases"][case]["config"]
    return dict(config)


def plan_for(record: dict[str, Any]) -> Plan:
    """The record as a plan: its widths on its family's config, its release, cache dtypes and context.

    Granite 4.0-H-350m (vLLM 0.11.1 on ROCm): the widths on Granite 4.0-H-Tiny's config (the rest of the config
    does not enter the page rule), 28 Mamba-2 and 4 attention layers, bf16, on a 64 GB card of no catalogue
    family (alignment 16). The Nemotron 3 Nano checkpoint (vLLM 0.19.0, fp8 cache, float32 SSM state): the
    widths on Nemotron-H's class-default config with ``mamba_ssm_cache_dtype`` float32, which 0.13 on reads as
    the command line set it; bf16 weights (the NVFP4 weights do not enter the rule). Granite 4.0-H-Small (the
    vllm-gaudi statement): the catalogue model on vLLM 0.19, bf16. The Qwen3.5 / Qwen3.6 logs: the catalogue entry
    on the 0.17 line (the first that loads them; a 0.16.1 development build is taken as it), the record's tensor
    parallel size, cache dtype and context, the float32 delta-rule state the checkpoint's mamba_ssm_dtype asks for."""
    w = record["widths"]
    base = default_plan().with_hardware(gpu="h100-sxm")
    if isinstance(w, str) and w.startswith("resources/models.json entry "):
        entry, s = find_model(w.split()[-1]), record["settings"]
        kv = KvDtype.FP8 if s["kv_cache_dtype"].startswith("fp8") else KvDtype.BF16
        plan = base.on_model(entry.spec, entry.id)
        return plan.with_inference(
            vllm_version=VllmVersion.V0_17,
            tensor_parallel=s["tensor_parallel_size"],
            kv_dtype=kv,
            context=s["max_model_len"],
        )
    if isinstance(w, str):  # "tests/data/hybrid/meta_counts.json case granite-4.0-h-small": the catalogue entry
        entry = find_model("granite-4.0-h-small")
        return base.on_model(entry.spec, entry.id).with_inference(vllm_version=VllmVersion.V0_19)
    if "mamba_n_heads" in w:  # Granite 4.0-H's spelling
        layers = ["mamba"] * w["mamba_layers"] + ["attention"] * w["attention_layers"]
        config = {
            **_meta("granite-4.0-h-tiny"),
            # hidden 768 in 12 heads of head_dim 64 (the record's widths_source)
            "hidden_size": 12 * w["head_dim"],
            "num_attention_heads": 12,
            "num_key_value_heads": w["num_key_value_heads"],
            "num_hidden_layers": len(layers),
            "layer_types": layers,
            **{k: w[k] for k in ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")},
        }
        model = model_from_hf_config(config, name=record["settings"]["model"])
        plan = base.with_hardware(gpu="custom", custom_memory_gb=64).on_model(model)
        return plan.with_inference(vllm_version=VllmVersion.V0_11, context=record["settings"]["max_model_len"])
    keys = ("num_key_value_heads", "head_dim", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups")
    config = {**_meta("nemotron_h-default"), **{k: w[k] for k in keys}, "conv_kernel": w["conv_kernel"]}
    config["mamba_ssm_cache_dtype"] = record["settings"]["mamba_ssm_cache_dtype"]
    kv = KvDtype.FP8 if record["settings"]["kv_cache_dtype"].startswith("fp8") else KvDtype.BF16
    plan = base.on_model(model_from_hf_config(config, name=record["settings"]["model"]))
    return plan.with_inference(vllm_version=VllmVersion.V0_19, kv_dtype=kv, context=131_072)


@dataclass(frozen=True)
class PageRow:
    id: str
    where: str
    logged: tuple[int, str]  # block size, padding ("" where not printed)
    estimated: tuple[int, str]

    @property
    def exact(self) -> bool:
        block, pad = self.logged
        return self.estimated[0] == block and (not pad or self.estimated[1] == pad)


def page_figures(plan: Plan) -> tuple[int, str]:
    """(block size, padding %) as the estimate's vLLM formula prints them."""
    found = PAGE_WORDS.search(estimate(plan).inference.formula)
    if found is None:
        raise ValueError(f"{plan.model.name}: no hybrid page in the vLLM formula")
    return int(found[1].replace(",", "")), found[2]


def rows() -> list[PageRow]:
    out = []
    for record in records():
        logged = record["logged"]
        out.append(
            PageRow(
                record["id"],
                record["where"],
                (logged["block_size"], logged.get("mamba_padding_pct", "")),
                page_figures(plan_for(record)),
            )
        )
    return out


def report(found: list[PageRow] | None = None) -> str:
    found = rows() if found is None else found
    exact = sum(r.exact for r in found)
    lines = [
        "## vLLM hybrid page rule, end to end through estimate() (held out; target: exact)\n",
        f"{exact} of {len(found)} published figures exact.\n",
        "| record | logged block, padding | estimated | exact |",
        "|---|---|---|---|",
    ]
    for r in found:
        logged = f"{r.logged[0]:,}" + (f", {r.logged[1]} %" if r.logged[1] else "")
        lines.append(f"| {r.id} | {logged} | {r.estimated[0]:,}, {r.estimated[1]} % | {'yes' if r.exact else 'NO'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
