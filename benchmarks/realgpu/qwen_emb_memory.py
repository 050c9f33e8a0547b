"""Qwen's fine-tuning profile: what training the embedding and head adds to LoRA's memory (information only, no target).

QwenLM/Qwen@2df8e8ac README "Profiling of Memory and Speed" gives GPU memory for LoRA and "LoRA (emb)" (PEFT
``modules_to_save`` wte and lm_head, the plan's ``lora.modules_to_save both``) on one A100 80GB at 256 ... 8,192
tokens for Qwen 1.8B / 7B / 14B, under PyTorch 2.0 and CUDA 11.8 with Hugging Face Trainer's ``adamw_torch``
(torch.optim.AdamW, foreach on CUDA). The records are in throughput_figures.json (``co_reported.gpu_memory``) and
each becomes a Plan with throughput.py's ``case_of``. The README does not say which counter it read, so only the
difference between the two methods at the same length is compared: published (emb - plain) against the estimate's
allocated peak (emb - plain), under the plan's default release (2.8+) and under 2.0, whose foreach AdamW keeps two
parameter-sized lists over every trained tensor instead of one (core.training.optimizer ``_foreach_adam_lists``).

Since branch h61torch the step's foreach lists cover the trained copies too (they step in the same
``_multi_tensor_adamw`` call as the adapters); before, the 7B at 256 tokens read 10.24 GiB (2.8+) against 13.6 G
published, and 13.91 GiB with 2.0's two lists over the copies.

    PYTHONPATH=. python -m benchmarks.realgpu.qwen_emb_memory
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.realgpu.throughput import case_of  # noqa: E402
from core.estimate import Estimate, estimate  # noqa: E402
from core.plan import Plan, TorchVersion  # noqa: E402
from core.units import GiB  # noqa: E402

FIGURES = Path(__file__).with_name("throughput_figures.json")
SOURCE = "qwen-finetune-profile"
MODELS = ("1p8b", "7b", "14b")
LENGTHS = (256, 512, 1024, 2048, 4096, 8192)


def _published(record: dict[str, Any]) -> float:
    """The README's figure in its own unit ("G", counter unstated): the leading number of gpu_memory."""
    match = re.match(r"\s*([\d.]+)", str(record["co_reported"]["gpu_memory"]))
    if match is None:
        raise ValueError(f"{record['id']}: no figure in {record['co_reported']['gpu_memory']!r}")
    return float(match[1])


def _peak(plan: Plan, release: TorchVersion) -> float:
    """The allocated peak in GiB under ``release``."""
    est: Estimate = estimate(plan.with_hardware(torch_version=release))
    return est.peak_bytes / GiB


def rows() -> list[tuple[str, int, float, float, float]]:
    figures = {r["id"]: r for r in json.loads(FIGURES.read_text())["figures"] if r["source_id"] == SOURCE}
    out = []
    for model in MODELS:
        for seq in LENGTHS:
            plain_r = figures.get(f"qwen-{model}-lora-a100x1-s{seq}")
            emb_r = figures.get(f"qwen-{model}-lora-emb-a100x1-s{seq}")
            if plain_r is None or emb_r is None:
                continue
            plain, emb = case_of(plain_r).plan, case_of(emb_r).plan
            published = _published(emb_r) - _published(plain_r)
            new = _peak(emb, TorchVersion.V2_8) - _peak(plain, TorchVersion.V2_8)
            old = _peak(emb, TorchVersion.V2_0) - _peak(plain, TorchVersion.V2_0)
            out.append((model.replace("p", "."), seq, published, new, old))
    return out


def main() -> int:
    print("Qwen LoRA (emb) - LoRA, one A100 80GB (QwenLM/Qwen@2df8e8ac README; torch 2.0, foreach AdamW)")
    print(f"{'model':>6} {'tokens':>7} {'published G':>12} {'est 2.8+ GiB':>13} {'est 2.0 GiB':>12}")
    for model, seq, published, new, old in rows():
        print(f"{model.upper():>6} {seq:>7,} {published:>12.1f} {new:>13.2f} {old:>12.2f}")
    print("published: the README's emb - plain in its 'G' (counter not stated); est: the allocated peak's difference")
    print("under the release (the records' is 2.0).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
