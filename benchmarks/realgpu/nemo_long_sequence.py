"""NeMo 24.03's long-sequence table against the time model: a check, not part of the corpus (issue 24).

NVIDIA/NeMo@0aa267117ae5f1ff9f8d8308ed3d1ba1ce939f82 docs/source/performance/performance_long_sequence.md,
"LLAMA2-7B (FP8)": NeMo24.03.01 container, DGX-H100, the "With-CP" columns (TP, PP, DP, CP, TFLOPS / GPU) at 4K to
1024K tokens, one GPU per 1K tokens. Transformer Engine of that period runs context parallel in its own ring with
cuDNN's fused attention on an H100 (NVIDIA/TransformerEngine v1.3 and v1.4 transformer_engine/pytorch/attention.py,
v1.4 L2834 "Select FusedAttention on sm90 and FlashAttention on others for performance", and L2811-2814: context
parallel keeps FusedAttention when its backend is F16_arbitrary_seqlen, the one for bf16 causal attention).

Not recorded in throughput_figures.json: the table gives neither the micro-batch, the global batch nor the activation
recompute, so every row would be "partly assumed" on the setting that moves it most. This script lays the rows out as
the corpus' NeMo 24.07 rows are (micro-batch 1, the accumulation typed below), converts TFLOPS / GPU to tokens/s with
NeMo's Llama formula (the one the 24.07 rows' TFLOPS recompute to: l·h²·(12 + 12g/a + 18f/h + 12s/h) + 6Vh a token,
every key counted) and prints the model's error at the all-source fit under each recompute assumption. It also prints
the published rows' own arithmetic, which needs no model: the three rows at 32,768 local tokens (TP 4, CP 2 / 4 / 8)
and whether one attention rate carries them.

    PYTHONPATH=. python -m benchmarks.realgpu.nemo_long_sequence
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Final

from benchmarks.realgpu import throughput as t

# (sequence K tokens, GPUs, TP, PP, DP, CP, TFLOPS / GPU with CP): the table's rows, as published.
ROWS: Final = (
    (4, 4, 1, 1, 4, 1, 768.0),
    (8, 8, 1, 2, 4, 1, 730.0),
    (16, 16, 2, 1, 8, 1, 660.0),
    (32, 32, 2, 1, 8, 2, 610.0),
    (64, 64, 4, 1, 8, 2, 574.0),
    (128, 128, 4, 1, 8, 4, 555.0),
    (256, 256, 4, 1, 8, 8, 549.0),
    (512, 512, 8, 1, 4, 16, 549.0),
    (1024, 1024, 8, 1, 4, 32, 536.0),
)
# Llama 2 7B (meta-llama/Llama-2-7b-hf config.json): 32 layers, hidden 4,096, 32 heads (no GQA), MLP 11,008, vocab
# 32,000; 6,738,415,616 parameters.
LLAMA2_7B: Final = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008, "vocab": 32000}
LLAMA2_7B_PARAMS: Final = 6738415616
ACCUMULATION: Final = 8  # not in the table; per-step costs only, a few tenths of a point either way


def nemo_flops_per_token(seq: int) -> float:
    """NeMo's Llama formula, every key counted (the corpus' NeMo 24.07 rows recompute to it within 0.1 %)."""
    d = LLAMA2_7B
    h, layers = d["hidden"], d["layers"]
    per_layer = 12 + 12 * d["kv_heads"] / d["heads"] + 18 * d["ffn"] / h + 12 * seq / h
    return layers * h * h * per_layer + 6 * d["vocab"] * h


def record(base: dict[str, Any], row: tuple[int, int, int, int, int, int, float], ckpt: str) -> dict[str, Any]:
    k, gpus, tp, pp, dp, cp, tflops = row
    seq = k * 1024
    out = copy.deepcopy(base)
    out.update(
        id=f"nemo2403-long-llama2-7b-s{seq}-cp{cp}",
        catalogue_id=None,
        model_dims={**LLAMA2_7B, "params": LLAMA2_7B_PARAMS},
        seq_len=seq,
        gpus=gpus,
        nodes=max(1, gpus // 8),
        tp=tp,
        pp=pp,
        vp=None,
        cp=cp,
        dp=dp,
        micro_batch=1,
        grad_accum=ACCUMULATION,
        global_batch=dp * ACCUMULATION,
        global_batch_tokens=dp * ACCUMULATION * seq,
        checkpointing=ckpt,
        metric="tokens_per_s_per_gpu",
        value=tflops * 1e12 / nemo_flops_per_token(seq),
    )
    return out


def model_lines() -> list[str]:
    data = t.load()
    report = t.build(data)
    # The corpus' NeMo 24.07 Llama 3 8B row: the same source, stack, card and precision mapping.
    base = next(r for r in data["figures"] if r["id"] == "nemo2407-pretrain-llama3-8b-8gpu")
    lines = []
    for ckpt in ("none", "full"):
        lines.append(f"recompute {ckpt}: published → predicted TFLOPS / GPU (NeMo's count), error in tokens/s")
        for row in ROWS:
            case = t.case_of(record(base, row, ckpt))
            step = t.predicted_step(t.prepare(case), report.all_sources)
            predicted = case.per_gpu(step)
            published = float(case.record["value"])
            tflops = predicted * nemo_flops_per_token(case.seq) / 1e12
            lines.append(
                f"  {row[0]:>5}K  TP {row[2]} PP {row[3]} DP {row[4]} CP {row[5]:>2}  {row[6]:5.0f} → {tflops:5.0f}"
                f"  {100 * (predicted / published - 1):+6.1f} %"
            )
    return lines


def constant_rate_fit() -> tuple[float, float, float]:
    """The rows at 32,768 local tokens a CP rank (64K / 128K / 256K, TP 4, DP 8), published figures only: one rate for
    attention and one for the rest, set by the CP 2 and CP 8 rows; returns them (TFLOP/s, FLOPs counted without
    recompute, attention's causal half) and the TFLOPS / GPU they give the CP 4 row. Recompute would scale both."""
    rows = [r for r in ROWS if r[0] in (64, 128, 256)]
    h, layers = LLAMA2_7B["hidden"], LLAMA2_7B["layers"]
    # Per token: the attention the kernels run is the causal half of NeMo's every-key 12·s/h term.
    causal = [layers * h * h * 6 * r[0] * 1024 / h for r in rows]
    seconds = [nemo_flops_per_token(r[0] * 1024) / (r[6] * 1e12) for r in rows]  # per token a GPU
    attention = (seconds[2] - seconds[0]) / (causal[2] - causal[0])  # seconds a causal FLOP
    rest = seconds[0] - attention * causal[0]
    middle = nemo_flops_per_token(rows[1][0] * 1024) / (rest + attention * causal[1]) / 1e12
    return 1e-12 / attention, nemo_flops_per_token(0) * 1e-12 / rest, middle


def published_lines() -> list[str]:
    attention, rest, middle = constant_rate_fit()
    return [
        f"attention {attention:.0f} TFLOP/s, the rest {rest:.0f} TFLOP/s (FLOPs counted without recompute,"
        " attention's causal half)",
        f"CP 4 from the CP 2 and CP 8 rows: {middle:.0f} TFLOPS / GPU, published 555",
    ]


def main() -> int:
    print("\n".join(["Published, no model:", *published_lines(), "", *model_lines()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
