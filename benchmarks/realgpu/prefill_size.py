"""Why llama-bench's big-model and multi-GPU prompts read slow: the model's size, the GPU count, or the split?

Issue 23 item 4: the cold-prefill rows of benchmarks/realgpu/serving.py (llama-bench pp512) read slow for
Llama 3 70B and multi-GPU layer splits and about right for 8B on one card. Each CUDA row's predicted time is
split into the part the matmul utilisation divides (the products, ``compute_s``: the time at 100 % of the
llama.cpp matmul peak) and the rest (``rest_s``: weight reads, the old builds' dequantisation, the layers'
kernels), by estimating it at two typed utilisations (the prompt is compute-bound, so the time is
``compute_s / u + rest_s``; :func:`split` checks that on a third). A row's implied utilisation is the one that
makes that its logged time. The script prints, as markdown:

- the implied utilisation by card, file type and model (8B-class against 70B), beside the prefill matmuls'
  tile- and wave-quantized share (core.training.gemm_shape, the training time model's rule) for each;
- the same card, model and file on one and on several GPUs: what one more GPU of the layer split costs;
- per card, the fixed cost per layer and the utilisation that would give both its 8B and its 70B F16 times;
- a size rule, ``u = 0.4 × (hidden / 4096) ** alpha`` on the compute part, and the shape rule,
  ``u = base × shape efficiency``, each scored leave one source out (alpha or base set without the scored
  source, as serving.py sets its constants), against today's flat 0.4.

    PYTHONPATH=. .venv/bin/python -m benchmarks.realgpu.prefill_size

The results, and why nothing was adopted: docs/SERVING.md, "Cold prefill by model size and GPU count"."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final

from benchmarks.realgpu import serving as srv
from core.catalogue import GpuSpec, find_gpu
from core.plan import Plan
from core.serving.fit import DEFAULT_FIT
from core.serving.speed import SERVING_UTILISATION
from core.training.gemm_shape import shape_efficiency

LOW, HIGH, CHECK = 0.4, 0.8, 0.2  # the typed utilisations the split is made and checked at
REFERENCE_HIDDEN: Final = 4096  # Llama 2 7B's and Llama 3 8B's width: the size rule's g = 1


@dataclass(frozen=True)
class Split:
    """One cold-prefill row: its logged seconds, the compute part at 100 % utilisation and the rest."""

    case: srv.Case
    record: dict[str, Any]
    plan: Plan
    gpu: GpuSpec
    compute_s: float
    rest_s: float
    linear: bool  # the third utilisation's time agrees with compute_s / u + rest_s (within 0.1 %)

    @property
    def utilisation(self) -> float:
        """The matmul utilisation that makes the prediction the logged time."""
        return self.compute_s / (self.case.logged - self.rest_s)

    @property
    def hidden(self) -> int:
        return self.plan.model.hidden_size

    @property
    def gpus(self) -> int:
        return int(self.record["gpu_count"])

    def predicted(self, utilisation: float) -> float:
        return self.compute_s / utilisation + self.rest_s


def _typed(plan: Plan, utilisation: float) -> Plan:
    return replace(plan, hardware=replace(plan.hardware, utilisation=utilisation))


def split(case: srv.Case, record: dict[str, Any]) -> Split:
    plan = srv._case_plan(case)
    assert plan is not None, case.id
    low, high = (srv._prefill_seconds(_typed(plan, u), DEFAULT_FIT) for u in (LOW, HIGH))
    compute = (low - high) / (1 / LOW - 1 / HIGH)
    rest = low - compute / LOW
    check = srv._prefill_seconds(_typed(plan, CHECK), DEFAULT_FIT)
    linear = abs(check - (compute / CHECK + rest)) <= 1e-3 * check
    return Split(case, record, plan, find_gpu(plan.hardware.gpu), compute, rest, linear)


@cache
def cuda_rows() -> tuple[Split, ...]:
    """The cold-prefill rows run on NVIDIA cards through ggml-cuda (Apple's Metal rows take their own
    utilisation, core.serving.speed.APPLE_MATMUL_UTILISATION; Vulkan's kernels are not cuBLAS)."""
    records = {r["id"]: r for r in srv.speed_corpus()["measurements"]}
    rows = []
    for case in srv.llama_bench_cases():
        if case.table != "ttft":
            continue
        record = records[case.id]
        row = split(case, record)
        if row.gpu.vendor == "nvidia" and "Vulkan" not in record["engine_version"]:
            rows.append(row)
    return tuple(rows)


def prefill_matmuls(plan: Plan) -> list[tuple[int, int]]:
    """(output rows, reduction) of one layer's weight products in llama.cpp's 2024 prompt graph: q, k, v and
    the attention output, the FFN's gate, up and down, each its own ggml_mul_mat (llm_build_llama's wq / wk /
    wv, llm_build_ffn), each over the micro-batch's tokens."""
    model = plan.model
    hidden, q, kv, ffn = model.hidden_size, model.q_width, model.kv_width, model.intermediate_size
    return [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q), (ffn, hidden), (ffn, hidden), (hidden, ffn)]


def shape_share(plan: Plan, gpu: GpuSpec, tokens: int) -> float:
    """The FLOP-weighted share of the launched tile slots the prompt's products fill (core.training.gemm_shape
    with the card's SM count; tile quantization only where the catalogue has none)."""
    products = prefill_matmuls(plan)
    flops = sum(rows * k for rows, k in products)
    padded = sum(rows * k / shape_efficiency(rows, tokens, gpu.sm_count) for rows, k in products)
    return flops / padded


def _size(row: Split) -> str:
    return "70B" if row.hidden >= 8192 else "8B"


def _quant(row: Split) -> str:
    return row.plan.inference.gguf_quant.value


def utilisation_table(rows: tuple[Split, ...]) -> str:
    """Per card and file type of XiongjieDai's rows (one build of May 2024, one method): the median implied
    utilisation of the 8B and the 70B rows, their ratio, and the prompt products' shape share of each."""
    groups: dict[tuple[str, str], dict[bool, list[Split]]] = {}
    for row in rows:
        if row.case.source == "xiongjiedai-gpu-benchmarks":
            groups.setdefault((row.gpu.id, _quant(row)), {}).setdefault(row.hidden >= 8192, []).append(row)
    lines = [
        "| card | file | SMs | 8B rows | 8B u | 70B rows (GPUs) | 70B u | 70B u ÷ 8B u | shape 8B | shape 70B |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for (card, quant), by in sorted(groups.items()):
        if not (by.get(True) and by.get(False)):
            continue
        small, big = by[False], by[True]
        u_small = statistics.median(r.utilisation for r in small)
        u_big = statistics.median(r.utilisation for r in big)
        gpus = "/".join(str(r.gpus) for r in sorted(big, key=lambda r: r.gpus))
        lines.append(
            f"| {card} | {quant} | {small[0].gpu.sm_count or '—'} | {len(small)} | {u_small:.3f} | {len(big)} ({gpus}) "
            f"| {u_big:.3f} | {u_big / u_small:.2f} | {shape_share(small[0].plan, small[0].gpu, 512):.3f} "
            f"| {shape_share(big[0].plan, big[0].gpu, 512):.3f} |"
        )
    return "\n".join(lines)


def gpu_count_table(rows: tuple[Split, ...]) -> str:
    """The same card, model and file on several GPU counts: seconds per prompt on each, and the least-squares
    seconds one more GPU of the split adds."""
    groups: dict[tuple[str, str, str], list[Split]] = {}
    for row in rows:
        if row.case.source == "xiongjiedai-gpu-benchmarks":
            groups.setdefault((row.gpu.id, _size(row), _quant(row)), []).append(row)
    lines = [
        "| card | model | file | GPUs: logged s | s per added GPU | of one GPU's time |",
        "|---|---|---|---|---:|---:|",
    ]
    for (card, size, quant), group in sorted(groups.items()):
        counts = {r.gpus for r in group}
        if len(counts) < 2:
            continue
        group = sorted(group, key=lambda r: r.gpus)
        xs, ys = [r.gpus for r in group], [r.case.logged for r in group]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        one = group[0].case.logged
        cells = ", ".join(f"{r.gpus}: {r.case.logged:.3f}" for r in group)
        lines.append(f"| {card} | {size} | {quant} | {cells} | {slope * 1e3:+.1f} ms | {slope / one:+.1%} |")
    return "\n".join(lines)


def layer_cost_table(rows: tuple[Split, ...]) -> str:
    """XiongjieDai's F16 rows, per card: the utilisation and the fixed seconds per layer (beyond what the model
    charges) that together give both its 8B rows' median time (32 layers) and its 70B row's (80 layers)."""
    groups: dict[str, dict[bool, list[Split]]] = {}
    for row in rows:
        if row.case.source == "xiongjiedai-gpu-benchmarks" and _quant(row) == "F16":
            groups.setdefault(row.gpu.id, {}).setdefault(row.hidden >= 8192, []).append(row)
    lines = ["| card | utilisation | fixed ms per layer | of the 8B prompt's time |", "|---|---:|---:|---:|"]
    for card, by in sorted(groups.items()):
        if not (by.get(True) and by.get(False)):
            continue
        small, big = by[False], by[True]
        layers_small, layers_big = small[0].plan.model.num_layers, big[0].plan.model.num_layers
        a = statistics.median(r.case.logged - r.rest_s for r in small)
        b = statistics.median(r.case.logged - r.rest_s for r in big)
        ratio = layers_big / layers_small
        inverse = (b - ratio * a) / (big[0].compute_s - ratio * small[0].compute_s)
        per_layer = (a - small[0].compute_s * inverse) / layers_small
        share = per_layer * layers_small / statistics.median(r.case.logged for r in small)
        lines.append(f"| {card} | {1 / inverse:.3f} | {per_layer * 1e3:.2f} | {share:.0%} |")
    return "\n".join(lines)


# ---- the candidate rules, leave one source out ----------------------------------------------------------------
Rule = Callable[[Split, tuple[Split, ...]], float]  # (row, the rows its constant may be set from) -> utilisation


def flat(row: Split, others: tuple[Split, ...]) -> float:
    """Today: the lesson's 40 % (core.serving.speed.SERVING_UTILISATION) whatever the shape."""
    del row, others
    return SERVING_UTILISATION


def alpha_of(rows: tuple[Split, ...]) -> float:
    """The size exponent the rows imply: the median of log(u / 0.4) / log(hidden / 4096) over those not 4096 wide."""
    implied = [
        math.log(r.utilisation / SERVING_UTILISATION) / math.log(r.hidden / REFERENCE_HIDDEN)
        for r in rows
        if r.hidden != REFERENCE_HIDDEN
    ]
    return statistics.median(implied) if implied else 0.0


def by_size(row: Split, others: tuple[Split, ...]) -> float:
    """0.4 × (hidden / 4096) ** alpha, alpha from the other sources' rows."""
    return SERVING_UTILISATION * (row.hidden / REFERENCE_HIDDEN) ** alpha_of(others)


def by_shape(row: Split, others: tuple[Split, ...]) -> float:
    """base × the prompt products' shape share, base the median of the other sources' u ÷ share."""
    base = statistics.median(r.utilisation / shape_share(r.plan, r.gpu, 512) for r in others)
    return base * shape_share(row.plan, row.gpu, 512)


def by_size_in_sample(row: Split, others: tuple[Split, ...]) -> float:
    """:func:`by_size` with alpha from every row, the scored source's own included (not a held-out score: how
    far the rule could go at best)."""
    del others
    return SERVING_UTILISATION * (row.hidden / REFERENCE_HIDDEN) ** alpha_of(cuda_rows())


RULES: Final[dict[str, Rule]] = {
    "flat 0.4 (today)": flat,
    "by size": by_size,
    "by size, alpha from every row (in sample)": by_size_in_sample,
    "by shape (gemm_shape)": by_shape,
}


def scored(rows: tuple[Split, ...], rule: Rule) -> list[tuple[Split, float]]:
    """Each row's predicted ÷ logged seconds under ``rule``, its constant set without the row's source."""
    out = []
    for row in rows:
        others = tuple(r for r in rows if r.case.source != row.case.source)
        out.append((row, row.predicted(rule(row, others)) / row.case.logged))
    return out


def rules_table(rows: tuple[Split, ...]) -> str:
    lines = [
        "| rule | rows within × 1.5 | median ratio 8B-class | median ratio 70B | worst | outside × 1.5 |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, rule in RULES.items():
        ratios = scored(rows, rule)
        fold = [(r, max(x, 1 / x)) for r, x in ratios]
        worst = max(fold, key=lambda p: p[1])
        outside = ", ".join(f"{r.case.id} × {x:.2f}" for (r, x), (_, f) in zip(ratios, fold, strict=True) if f > 1.5)
        small = statistics.median(x for r, x in ratios if r.hidden < 8192)
        big = statistics.median(x for r, x in ratios if r.hidden >= 8192)
        lines.append(
            f"| {name} | {sum(f <= 1.5 for _, f in fold)} of {len(fold)} | {small:.2f} | {big:.2f} "
            f"| {worst[0].case.id} × {worst[1]:.2f} | {outside or '—'} |"
        )
    return "\n".join(lines)


def report() -> str:
    rows = cuda_rows()
    bent = [r.case.id for r in rows if not r.linear]
    alphas = {s: alpha_of(tuple(r for r in rows if r.case.source != s)) for s in sorted({r.case.source for r in rows})}
    return "\n\n".join(
        [
            f"## Cold prefill on CUDA: {len(rows)} llama-bench rows (not linear in 1 / u: {', '.join(bent) or 'none'})",
            "### Implied matmul utilisation, 8B against 70B (XiongjieDai, May 2024 builds)",
            utilisation_table(rows),
            "### One card, model and file on several GPUs (layer split)",
            gpu_count_table(rows),
            "### A fixed cost per layer that would reconcile 8B and 70B F16 on one card",
            layer_cost_table(rows),
            "### Candidate rules, leave one source out",
            "size exponent set without each source: "
            + ", ".join(f"{s} {a:.3f}" for s, a in alphas.items())
            + f"; every row {alpha_of(rows):.3f}",
            rules_table(rows),
        ]
    )


def main() -> int:
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
