"""Hugging Face ``generate`` memory against a published real-GPU table, held out of every rule.

The Qwen team's speed benchmark for Qwen2.5 (``hf_generate_figures.json``: QwenLM/Qwen3@a912d239
docs/source/benchmark/speed_benchmark.rst, produced by examples/speed-benchmark/
speed_benchmark_transformers.py) ran ``model.generate`` on A100 80GB cards under transformers
4.46 with FlashAttention 2, batch 1, 2,048 new tokens after prompts of 1 / 6,144 / 14,336 /
30,720 tokens, and printed ``torch.cuda.max_memory_allocated`` summed over the GPUs in GiB. Every
row becomes a serving plan (engine ``hf``, the catalogue's Qwen2.5 model, the row's weight
format, context = prompt + 2,048) and is compared with the estimate's allocator-level peak plus
the cuBLAS workspace a real card's allocator counts (``core.runtime.cublas_workspace``; the
fake-tensor measurements the engine's rules were read against see neither the workspace nor
any real kernel's buffers). No constant of the estimator was set on these figures.

The GPTQ-Int8 rows (auto_gptq 0.6.0) are planned in the plan's ``gptq-int8`` under the table's
transformers 4.46, which loads them through AutoGPTQ's cuda-old linear (core.serving.gptq).

Listed, not scored, each with its reason: rows the plan cannot express (a model split by
``device_map='auto'`` over several GPUs is a sum of per-device peaks reached at different moments,
which the plan's even pipeline split does not give), and rows that cannot be the stated recipe:
a row whose figure grows by less than its KV cache alone from one prompt length to the next of
the same model and format (the shorter row holds memory the longer run did not have).

    python benchmarks/realgpu/hf_generate.py            # the table and the summary
    python benchmarks/realgpu/hf_generate.py --check    # exit 1 when a target is missed
    python benchmarks/realgpu/hf_generate.py --markdown # the table for docs/SERVING.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalogue import find_model  # noqa: E402
from core.dtypes import WeightFormat  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.plan import Attention, Engine, Hardware, Inference, Plan, TransformersVersion  # noqa: E402
from core.runtime import cublas_workspace  # noqa: E402
from core.serving.kv import kv_bytes_per_token  # noqa: E402

CORPUS = Path(__file__).with_name("hf_generate_figures.json")
GIB = 2**30
# The allocator-level targets of the real-GPU memory issue (issue 22): median |error| ≤ 4 %,
# each within ±10 %.
TARGET_MEDIAN = 4.0
TARGET_EACH = 10.0
# "NVIDIA A100 80GB" in the source's environment: the SXM and PCIe cards hold the same 80 GB and
# get the same cuBLAS workspace; the figure is memory, not speed.
CARD = "a100-80gb-sxm"
FORMATS: Mapping[str, WeightFormat] = {
    "BF16": WeightFormat.BF16,
    "GPTQ-Int4": WeightFormat.GPTQ_INT4,
    "GPTQ-Int8": WeightFormat.GPTQ_INT8,
    "AWQ": WeightFormat.AWQ_INT4,
}


@dataclass(frozen=True)
class Row:
    record: Mapping[str, Any]
    predicted_gib: float | None  # None: listed, not scored
    reason: str = ""

    @property
    def error(self) -> float:
        assert self.predicted_gib is not None
        return 100.0 * (self.predicted_gib / float(self.record["value"]) - 1.0)


def load(path: Path = CORPUS) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def plan_of(record: Mapping[str, Any]) -> Plan:
    entry = find_model(str(record["catalogue_id"]))
    new = int(record["generate_length"])
    return Plan(
        model=entry.spec,
        model_id=entry.id,
        attention=Attention.FLASH,
        hardware=Hardware(gpu=CARD),
        inference=Inference(
            engine=Engine.HF,
            weight_dtype=FORMATS[str(record["quantization"])],
            concurrent=int(record["batch"]),
            context=int(record["input_length"]) + new,
            new_tokens=new,
            # the table's transformers 4.46.0: its GPTQ-Int8 rows load through AutoGPTQ (core.serving.gptq)
            transformers_version=TransformersVersion.V4_46,
        ),
    )


def predicted_gib(record: Mapping[str, Any]) -> float:
    """What max_memory_allocated shows: the engine's peak and the cuBLAS workspace."""
    served = estimate(plan_of(record)).inference
    return (served.peak_bytes + cublas_workspace(CARD).bytes) / GIB


def _kv_growth_gib(record: Mapping[str, Any], longer: Mapping[str, Any]) -> float:
    model = find_model(str(record["catalogue_id"])).spec
    tokens = int(longer["input_length"]) - int(record["input_length"])
    return tokens * kv_bytes_per_token(model, 2.0) / GIB  # bf16 K and V (the models' torch_dtype)


def not_the_recipe(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Rows that grow by less than their KV cache to the next prompt length of the same model,
    format and GPU count: the shorter row held memory the longer run did not."""
    reasons: dict[str, str] = {}
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((str(r["catalogue_id"]), str(r["quantization"]), int(r["gpus"])), []).append(r)
    for rows in groups.values():
        rows.sort(key=lambda r: int(r["input_length"]))
        for short, longer in itertools.pairwise(rows):
            grew = float(longer["value"]) - float(short["value"])
            kv = _kv_growth_gib(short, longer)
            if grew < kv:
                reasons[str(short["id"])] = (
                    f"not the stated recipe: {longer['input_length']:,} tokens read {float(longer['value']):.2f} GiB, "
                    f"{grew:+.2f} on this row's {float(short['value']):.2f}, though the KV cache alone grows by "
                    f"{kv:.2f} GiB"
                )
    return reasons


def build(data: Mapping[str, Any]) -> list[Row]:
    records: list[Mapping[str, Any]] = data["figures"]
    suspect = not_the_recipe(records)
    rows = []
    for r in records:
        if r["quantization"] not in FORMATS:
            rows.append(Row(r, None, f"not expressible: {r['quantization']} is not a weight format of the plan"))
        elif int(r["gpus"]) > 1:
            rows.append(
                Row(
                    r,
                    None,
                    f"not expressible: device_map='auto' over {r['gpus']} GPUs splits the layers by free memory and "
                    "the figure sums per-device peaks reached at different moments",
                )
            )
        elif str(r["id"]) in suspect:
            rows.append(Row(r, None, suspect[str(r["id"])]))
        else:
            rows.append(Row(r, predicted_gib(r)))
    return rows


def summary(rows: Sequence[Row]) -> dict[str, float]:
    errors = [row.error for row in rows if row.predicted_gib is not None]
    return {
        "scored": len(errors),
        "listed": sum(1 for row in rows if row.predicted_gib is None),
        "median": statistics.median(abs(e) for e in errors),
        "worst": max(errors, key=abs),
        "within": sum(1 for e in errors if abs(e) <= TARGET_EACH),
        "signed": statistics.median(errors),
    }


def by_format(rows: Sequence[Row]) -> list[tuple[str, int, float, float]]:
    """(weight format, figures scored, median |error|, worst signed error) per format scored."""
    out = []
    for fmt in FORMATS:
        errors = [r.error for r in rows if r.predicted_gib is not None and r.record["quantization"] == fmt]
        if errors:
            out.append((fmt, len(errors), statistics.median(abs(e) for e in errors), max(errors, key=abs)))
    return out


def failures(rows: Sequence[Row]) -> list[str]:
    s = summary(rows)
    out = []
    if s["median"] > TARGET_MEDIAN:
        out.append(f"median |error| {s['median']:.2f} % > {TARGET_MEDIAN:g} %")
    out += [
        f"{row.record['id']}: {row.error:+.1f} % (±{TARGET_EACH:g} %)"
        for row in rows
        if row.predicted_gib is not None and abs(row.error) > TARGET_EACH
    ]
    return out


def text(rows: Sequence[Row]) -> str:
    s = summary(rows)
    lines = [
        "Hugging Face generate, max_memory_allocated: Qwen2.5 speed benchmark (A100 80GB, transformers 4.46), held out",
        "",
        f"{'figure':34s} {'published':>10s} {'predicted':>10s} {'error':>8s}",
    ]
    for row in rows:
        if row.predicted_gib is not None:
            lines.append(
                f"{row.record['id']:34s} {row.record['value']:10.2f} {row.predicted_gib:10.2f} {row.error:+7.1f}%"
            )
    for fmt, n, median, worst in by_format(rows):
        lines.append(f"  {fmt:10s} n={n:3d}  median |error| {median:5.2f} %  worst {worst:+6.1f} %")
    lines += [
        f"all: {s['scored']:.0f} scored, median |error| {s['median']:.2f} % (target ≤ {TARGET_MEDIAN:g} %), "
        f"worst {s['worst']:+.1f} %, {s['within']:.0f} within ±{TARGET_EACH:g} %, median signed {s['signed']:+.2f} %",
        f"listed, not scored: {s['listed']:.0f}",
    ]
    lines += [f"  {row.record['id']}: {row.reason}" for row in rows if row.predicted_gib is None]
    missed = failures(rows)
    lines.append("targets: " + ("met" if not missed else "MISSED: " + "; ".join(missed)))
    return "\n".join(lines)


def markdown(rows: Sequence[Row]) -> str:
    s = summary(rows)
    lines = [
        "| weight format | figures | median \\|error\\| | worst |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {fmt} | {n} | {median:.2f} % | {worst:+.1f} % |" for fmt, n, median, worst in by_format(rows)]
    lines.append(f"| all | {s['scored']:.0f} | {s['median']:.2f} % | {s['worst']:+.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--markdown", action="store_true", help="the table for docs/SERVING.md")
    args = parser.parse_args(argv)
    rows = build(load())
    print(markdown(rows) if args.markdown else text(rows))
    return 1 if args.check and failures(rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
