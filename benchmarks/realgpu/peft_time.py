"""What each PEFT method costs in time against LoRA, predicted vs PEFT's own runs (held out: nothing fitted on them).

huggingface/peft's method comparison (peft_method_time.json: 5d602fdb method_comparison/MetaMathQA/results) trained
every method on the same samples, steps, batch and card (Llama 3.2 3B, one L40S), so the ratio of a method's summed
step time to LoRA rank 32's cancels the variable-length padding that makes their absolute tokens/s not comparable
(throughput_figures.json, source "hf-peft-method-comparison"). Each record's plan is its memory figure's
(memory_figures.json, mapped by benchmarks.realgpu.mapping) at the runs' mean sample length (SEQ_LEN); the predicted
ratio is the estimate's step time over the LoRA r32 plan's. Printed by benchmarks.realgpu.throughput and alone:

    PYTHONPATH=. .venv/bin/python -m benchmarks.realgpu.peft_time
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from benchmarks.realgpu.mapping import map_figure
from core.estimate import estimate

HERE: Final = Path(__file__).parent
CORPUS: Final = HERE / "peft_method_time.json"
MEMORY: Final = HERE / "memory_figures.json"
BASELINE: Final = "peft-time-lora--llama-3.2-3B-rank32"
# The runs' mean tokens a sample (non-padding tokens + EOS over the 20,000 samples of LoRA r32's windows:
# peft_method_time.json derived.tokens_per_sample 209.9, the same in every record): the batch of 4 is padded to its
# longest, and BucketIterator batches samples of like length, so the padded length is taken at the mean.
SEQ_LEN: Final = 210
# The optimizer each run built (5d602fdb method_comparison/MetaMathQA/run.py L282-285, utils.py L285-295, each result's
# train_config): torch.optim.AdamW at torch's default (foreach) with the run's optimizer_kwargs, and clip_grad_norm_
# at grad_norm_clip 1.0 every step. weight_decay 0.1 unless listed here: 0.0 where the run set it, AdamW's own 0.01
# where its optimizer_kwargs set none. Time only (core.training.speed.step_pass_bytes).
GRAD_CLIP: Final = True
WEIGHT_DECAY: Final = 0.1
WEIGHT_DECAY_OF: Final = {
    "peft-time-ia3--llama-3.2-3B-all-attn-5k-lr0.005": 0.0,
    **{
        f"peft-time-{run}": 0.01
        for run in (
            "ia3--llama-3.2-3B-lr_0.001",
            "vera--llama-3.2-3B-default",
            "prompt_tuning--llama-3.2-3B-lr_0.001",
            "prompt_tuning--llama-3.2-3B-sample_vocab-lr_0.001",
            "prefixtuning--llama-3.2-3B-lr_0.001",
            "prefixtuning--llama-3.2-3B-lr_0.005_zero_init",
            "prefixtuning--llama-3.2-3B-tokens50-init_prefix-lr_0.005",
            "full-finetuning--llama-3.2-3B-lr_0.00001",
            "road--llama-3.2-3B-lr_0.001",  # branch h78peft: optimizer_kwargs {"lr": 0.001}
            "shira--llama-3.2-3B-lr_0.0003-random_seed_42",  # {"lr": 0.0003}
        )
    },
}


@dataclass(frozen=True)
class Row:
    id: str
    published: float  # the run's summed step time ÷ LoRA r32's
    predicted: float | None  # the estimate's step time ÷ the LoRA r32 plan's (None: not expressible)
    why: str = ""  # why not expressible

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.published - 1.0


def _step(figure: dict[str, Any], record_id: str) -> tuple[float | None, str]:
    mapped = map_figure(figure)
    if not mapped.expressible or mapped.plan is None:
        return None, "; ".join(mapped.missing) or "no plan"
    decay = WEIGHT_DECAY_OF.get(record_id, WEIGHT_DECAY)
    plan = mapped.plan.with_workload(seq_len=SEQ_LEN).with_changes(grad_clip=GRAD_CLIP, weight_decay=decay)
    return estimate(plan).compute.step_seconds, ""


def rows() -> list[Row]:
    corpus = json.loads(CORPUS.read_text())
    memory = json.loads(MEMORY.read_text())
    figures = {f["id"]: f for f in (memory["figures"] if isinstance(memory, dict) else memory)}
    steps = {r["id"]: _step(figures[r["memory_figure"]], r["id"]) for r in corpus["records"]}
    base = steps[BASELINE][0]
    assert base is not None
    out = []
    for record in corpus["records"]:
        seconds, why = steps[record["id"]]
        ratio = record["derived"]["ratio_to_lora_r32"]
        out.append(Row(record["id"], ratio, None if seconds is None else seconds / base, why))
    return out


def summary(table: list[Row]) -> tuple[int, float, float]:
    """Count, median and worst |error| over the expressible records but the baseline."""
    errors = [abs(r.error) for r in table if r.error is not None and r.id != BASELINE]
    return len(errors), statistics.median(errors), max(errors)


def lines(table: list[Row] | None = None) -> list[str]:
    table = rows() if table is None else table
    n, median, worst = summary(table)
    out = [
        f"PEFT methods' step time ÷ LoRA r32's, predicted vs PEFT's method comparison (held out; Llama 3.2 3B, "
        f"one L40S, 4 × {SEQ_LEN} tokens)",
        "",
        f"{'run':58s} {'published':>9s} {'predicted':>9s} {'error':>7s}",
    ]
    for r in table:
        name = r.id.removeprefix("peft-time-")
        if r.predicted is None:
            out.append(f"{name:58s} {r.published:9.3f} {'—':>9s}          {r.why[:60]}")
        else:
            out.append(f"{name:58s} {r.published:9.3f} {r.predicted:9.3f} {r.error:+7.1%}")
    out.append(f"{'all but the baseline':58s} n {n}, median |error| {median:.1%}, worst {worst:.1%}")
    return out


def main() -> int:
    print("\n".join(lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
