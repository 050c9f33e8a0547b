"""The estimate as the command line prints it: text for a person, JSON for a program.

Text shows memory in decimal GB (``--gib``: GiB) as the window does; JSON gives bytes
throughout and is valid JSON always, a non-finite figure written as null with a note.
"""

from __future__ import annotations

import json
import math
from typing import Any

from core.breakdown import BUCKET_LABELS, BucketKey
from core.estimate import (
    MFU_CONVENTION,
    MPS_JUDGED_FIGURE,
    VERDICT_LABELS,
    Estimate,
    Judgement,
    Mode,
    UtilisationSource,
    Verdict,
)
from core.format import counted, duration, hours, latency, money, scientific, tokens_per_s
from core.format import memory as format_memory
from core.inputs import sglang_multimodal_asked
from core.plan import ENGINE_LABELS, Accounting, Engine, Plan, training_refusal
from core.runtime import runtime_names
from core.training.extra_trained import extra_elements


def fmt(n_bytes: float, gib: bool) -> str:
    return format_memory(n_bytes, "GiB" if gib else "GB")


def judgement_to_json(judged: Judgement) -> dict[str, Any]:
    return {
        "verdict": judged.verdict.value,
        # False for a narrow fit: the range's top passes the usable memory (core.verdict).
        "fits_with_margin": judged.fits_with_margin,
        "total_bytes": round(judged.total_bytes),
        "range_bytes": [round(b) for b in judged.range_bytes],
        "capacity_bytes": round(judged.capacity_bytes),
        "usable_bytes": round(judged.usable_bytes),
        "margin_bytes": round(judged.margin_bytes),
        "gpu_verdict": judged.gpu_verdict.value,
        "host_verdict": judged.host_verdict.value if judged.host_verdict is not None else None,
        # the verdict line's words after the margin ("" where the figures tell it): Judgement.after_margin
        "after_margin": judged.after_margin,
    }


def estimate_to_json(est: Estimate, mode: Mode = Mode.TRAINING) -> dict[str, Any]:
    """Every figure, bytes throughout. ``judgement`` and the top-level verdict, total, usable and
    margin are the judged mode's (the training step, or serving); ``training`` keeps the step's."""
    plan = est.plan
    judged = est.judgement(mode)
    # A hybrid recurrent model or Llama 4 is never trained here (core.plan.training_refusal): no training verdict,
    # and why.
    refusal = training_refusal(plan)
    trained = refusal is None
    refused = {} if refusal is None else {"training_refused": refusal}
    return {
        "mode": mode.value,
        "judgement": judgement_to_json(judged),
        "training": judgement_to_json(est.judgement(Mode.TRAINING)) if trained else None,
        **refused,
        "model": plan.model.name,
        "method": plan.method.value,
        "accounting": plan.accounting.value,
        "gpu": est.gpu.id,
        "params": {
            "total": est.params.total,
            "trainable": est.params.trainable,
            "adapter": est.params.adapter,
            "active": est.params.active,
        },
        "buckets_bytes": {b.key.value: round(b.bytes) for b in est.buckets},
        "phases_bytes": {p.name: round(p.allocated_bytes) for p in est.phases},
        "peak_phase": est.peak_phase,
        "peak_bytes": round(est.peak_bytes),
        # Of peak_bytes: the libraries' workspaces (cuBLAS, Transformer Engine) beside the peak phase's tensors.
        "workspace_bytes": round(est.peak_bytes - est.tensor_peak_bytes),
        "reserved_bytes": round(est.reserved_bytes),
        "nvidia_smi_bytes": round(est.total_bytes),
        "judged_figure": est.judged_figure if plan.accounting is Accounting.DETAILED else "peak",
        "range_bytes": [round(b) for b in judged.range_bytes],
        "confidence": _confidence_json(est),
        "overhead_terms": [
            {"label": t.label, "formula": t.formula, "bytes": round(t.bytes)} for t in est.buckets[-1].terms
        ]
        if est.buckets and est.buckets[-1].key.value == "overhead"
        else [],
        "total_bytes": round(judged.total_bytes),
        "capacity_bytes": round(est.capacity_bytes),  # less what other processes hold
        "held_by_others_bytes": round(est.plan.hardware.held_by_others),
        "usable_bytes": round(judged.usable_bytes),
        "verdict": judged.verdict.value,
        "fits_with_margin": judged.fits_with_margin,  # False for a narrow fit (core.verdict)
        "margin_bytes": round(judged.margin_bytes),
        "summary": est.summary_formula,
        # peak_bytes / total_bytes above are the worst rank's; every kind of rank here.
        "ranks": [
            {
                "label": r.label,
                "count": r.count,
                "peak_bytes": round(r.peak_bytes),
                "reserved_bytes": round(r.reserved_bytes),
                "total_bytes": round(r.total_bytes),
                "range_bytes": [round(r.low_bytes), round(r.high_bytes)],
                "verdict": r.verdict.value,
            }
            for r in est.ranks
        ],
        "worst_rank": est.worst_rank,
        "host_bytes": round(est.host.bytes) if est.host else None,
        "host_capacity_bytes": round(est.host.capacity_bytes) if est.host and est.host.verdict else None,
        "compute": compute_to_json(est),
        "inference": inference_to_json(est),
        "notes": list(est.notes),
        "warnings": list(est.warnings_for(mode)),
        "dtype_problem": est.compute.dtype_problem,
    }


def compute_to_json(est: Estimate) -> dict[str, Any]:
    """Time, FLOPs, utilisation and MFU (the convention named), and the step's parts."""
    return {
        "flops": est.compute.flops,
        "flops_per_token": est.compute.flops_per_token,
        "hours": est.compute.hours,
        "tokens_per_second": est.compute.tokens_per_second,
        "cost": est.compute.cost,
        "energy_kwh": est.compute.energy_kwh,
        "compute_seconds_per_step": est.compute.compute_seconds_per_step,
        "comm_seconds_per_step": est.compute.comm_seconds_per_step,
        "exposed_comm_seconds_per_step": est.compute.exposed_comm_seconds_per_step,
        "bubble_fraction": est.compute.bubble_fraction,
        "step_seconds": est.compute.step_seconds,
        "optimizer_seconds_per_step": est.compute.optimizer_seconds_per_step,
        "host_step_seconds_per_step": est.compute.host_step_seconds_per_step,
        "host_step_formula": est.compute.host_step_formula,
        "host_step_advice": est.compute.host_step_advice,
        "host_pace": est.compute.host_pace,
        "tokens_per_second_per_gpu": est.compute.tokens_per_second_per_gpu,
        "model_flops_per_token": est.compute.model_flops_per_token,
        "causal_flops_per_token": est.compute.causal_flops_per_token,
        "flop_terms": [
            {"label": t.label, "per_token": t.per_token, "formula": t.formula} for t in est.compute.flop_terms
        ],
        "mfu": est.compute.mfu,
        "causal_mfu": est.compute.causal_mfu,
        "hardware_utilisation": est.compute.hfu,
        "mfu_convention": MFU_CONVENTION,
        "utilisation": est.compute.utilisation,
        "modelled_utilisation": est.compute.modelled_utilisation,
        "utilisation_source": est.compute.utilisation_source.value,
        "calibration_factor": est.compute.calibration_factor,
        "gemm_peak_tflops": est.compute.gemm_peak_tflops,
        "compute_parts": [
            {"label": p.label, "seconds": p.seconds, "formula": p.formula} for p in est.compute.compute_parts
        ],
        "float8_problem": est.compute.float8_problem,
        "comm_terms": [
            {"label": t.label, "formula": t.formula, "bytes": t.bytes, "seconds": t.seconds}
            for t in est.compute.comm_terms
        ],
        "assumptions": list(est.compute.assumptions),
    }


def _confidence_json(est: Estimate) -> dict[str, Any] | None:
    c = est.confidence
    if c is None:
        return None
    return {
        "low": c.low,
        "high": c.high,
        "validated": {
            kind: {"figures": e.figures, "sources": e.sources, "p10": e.p10, "p90": e.p90} for kind, e in c.validated
        },
        "thinly_validated": dict(c.thin),
        "never_validated": list(c.unvalidated),
        "text": c.text,
    }


def inference_to_json(est: Estimate) -> dict[str, Any]:
    inf, plan = est.inference, est.plan.inference
    judged = est.judgement(Mode.INFERENCE)
    return {
        "engine": inf.engine.value,
        "weights": plan.weight_dtype.value,
        "kv_dtype": plan.kv_dtype.value,
        "tensor_parallel": plan.tensor_parallel,
        "pipeline_parallel": plan.pipeline_parallel,
        "replicas": plan.replicas,
        # SGLang's --enable-multimodal where it changes the launch (Gemma 3 on SGLang; core.inputs), else False
        "sglang_enable_multimodal": sglang_multimodal_asked(est.plan),
        "gpus": inf.gpus,
        "weights_bytes": round(inf.weights_bytes),
        "kv_cache_bytes": round(inf.kv_cache_bytes),
        "kv_bytes_per_token": inf.kv_bytes_per_token,
        "activation_bytes": round(inf.activation_bytes),
        "non_torch_bytes": round(inf.non_torch_bytes),
        "peak_bytes": round(inf.peak_bytes),
        "total_bytes": round(inf.total_bytes),
        "buckets_bytes": {b.key.value: round(b.bytes) for b in inf.buckets},
        "budget_bytes": round(
            inf.budget_bytes
        ),  # what the engine may take (vLLM: the card; its utilisation is its own headroom)
        "usable_bytes": round(judged.usable_bytes),  # what the verdict is judged against
        "margin_bytes": round(judged.margin_bytes),
        "verdict": judged.verdict.value,
        "fits_with_margin": judged.fits_with_margin,  # False for a narrow fit (core.verdict)
        "after_margin": judged.after_margin,  # the verdict line's words after the margin, as the banner says them
        "queued": inf.queued,
        "kv_cache_tokens": inf.kv_cache_tokens,
        "refusal": inf.refusal,  # the engine's refusal to start in its words ("" where it starts)
        # the first check that refuses, in the engine's words: the context's before the memory's ("" where it starts)
        "would_not_start": inf.would_not_start,
        # every check that refuses, in the engine's order, classified where it is decided (core.start_refusal)
        "start_refusals": [{"kind": r.kind.value, "cause": r.cause, "words": r.words} for r in inf.refusals],
        "max_concurrency": round(inf.max_concurrency, 2),
        "max_concurrent": inf.max_concurrent,
        "max_context": inf.max_context,
        "max_num_seqs": inf.max_num_seqs,
        "max_num_batched_tokens": inf.max_num_batched_tokens,
        "ttft_s": inf.ttft_s,
        "decode_tokens_per_s": inf.decode_tokens_per_s,
        "per_request_tokens_per_s": inf.speed.per_request_tokens_per_s,
        "running_requests": inf.speed.running,
        "speed_curve": [
            {
                "concurrent": p.concurrent,
                "per_request_tokens_per_s": p.per_request_tokens_per_s,
                "total_tokens_per_s": p.total_tokens_per_s,
            }
            for p in inf.speed.curve
        ],
        "formula": inf.formula,
    }


def render_serving(est: Estimate, gib: bool = False) -> str:
    inf, plan = est.inference, est.plan.inference
    engine = ENGINE_LABELS[inf.engine]
    gpus = f"{est.gpu.name} × {inf.gpus}" + (
        f" (TP {plan.tensor_parallel} · PP {plan.pipeline_parallel} · {plan.replicas} replica(s))"
        if inf.gpus > 1
        else ""
    )
    if inf.engine is Engine.LLAMACPP:
        storage = f"GGUF {plan.gguf_quant.value} · KV {plan.cache_type.value}"
    else:
        storage = f"weights {plan.weight_dtype.value} · KV {plan.kv_dtype.value}"
    from core.serving.text_only import tower_line  # the serving rules, loaded by the serving figures above

    lines = [f"{est.plan.model.name} served by {engine} · {storage} · {gpus}"]
    tower = tower_line(est.plan.model, plan)  # an image-text checkpoint's tower, as the window and the report say it
    lines += [f"  {tower}"] if tower else []
    lines += ["", *_serving_table(est, gib)]
    lines += ["", f"  {inf.formula}", ""]
    if inf.engine is Engine.VLLM:
        lines += [
            f"  GPU KV cache size: {inf.kv_cache_tokens:,} tokens",
            f"  Maximum concurrency for {plan.context:,} tokens per request: {inf.max_concurrency:.2f}x "
            f"(max_num_seqs {inf.max_num_seqs}, max_num_batched_tokens {inf.max_num_batched_tokens:,})",
        ]
    elif inf.engine is Engine.SGLANG:
        lines.append(
            f"  token pool {inf.kv_cache_tokens:,} tokens; {inf.max_concurrency:.2f} requests of "
            f"{plan.context:,} tokens at once"
        )
    lines += [
        "",
        verdict_line(est.judgement(Mode.INFERENCE), est.plan.hardware.headroom, gib),
        f"  {inf.limits_sentence(est.plan)}",
    ]
    if inf.queued and inf.max_concurrent:
        lines.append(
            f"  warning: {inf.queued:,} of {plan.concurrent:,} requests wait in the queue "
            f"({inf.max_concurrent:,} run at once); time to first token grows while they wait"
        )
    speed = inf.speed
    if inf.speed_note:
        lines.append(f"  {inf.speed_note}")
    lines += [
        f"  time to first token {latency(speed.ttft_s)}; {speed.running} "
        f"{'request runs' if speed.running == 1 else 'requests run'}: {speed.rates_sentence}",
        f"  {speed.formula}",
    ]
    lines += [f"  warning: {w}" for w in est.warnings_for(Mode.INFERENCE)]
    return "\n".join(lines)


# The command line's lower-case row names for the serving buckets (core.breakdown.BUCKET_LABELS otherwise).
_SERVING_ROW_LABELS = {
    BucketKey.WEIGHTS: "weights per GPU",
    BucketKey.KV_CACHE: "KV cache",
    BucketKey.ACTIVATIONS: "activations",
    BucketKey.OVERHEAD: "overhead",
}


def _serving_table(est: Estimate, gib: bool) -> list[str]:
    """The parts of the figure the verdict judges, per GPU, and their sum, as the serving chart
    and the report's table give them; then, labelled apart, what is not that figure: the pool a
    pooled engine allocates at start-up, or the allocator peak torch would report."""
    inf = est.inference
    judged = est.judgement(Mode.INFERENCE)
    lines = []
    for bucket in inf.buckets:
        line = f"  {_SERVING_ROW_LABELS.get(bucket.key, bucket.label):<22} {fmt(bucket.bytes, gib):>14}"
        if bucket.key is BucketKey.KV_CACHE:
            held = f"{inf.kv_held}, " if inf.kv_held else ""
            line += f"   ({held}{inf.kv_bytes_per_token:,.0f} B per token per GPU)"
        lines.append(line)
    lines.append(f"  {'needed at once':<22} {fmt(judged.total_bytes, gib):>14}   (the figure the verdict judges)")
    name, value = inf.apart("GiB" if gib else "GB")
    lines.append(f"  {name}: {value}")
    return lines


def verdict_line(judged: Judgement, headroom: float, gib: bool) -> str:
    """The verdict with its figures, as the window's banner gives it; says when the host decides."""
    line = (
        f"  {judged.label}: {fmt(judged.total_bytes, gib)} of {fmt(judged.capacity_bytes, gib)} "
        f"({fmt(judged.usable_bytes, gib)} usable with {headroom:.0%} headroom), margin {fmt(judged.margin_bytes, gib)}"
    )
    low, high = judged.range_bytes
    if high > low:
        line += f"; range {fmt(low, gib)} – {fmt(high, gib)}"
    if judged.verdict is Verdict.BORDERLINE:
        line += f": the card's {fmt(judged.capacity_bytes, gib)} lies within it, the run may or may not fit"
    if judged.fits_narrowly:  # core.verdict's words for a narrow fit
        line += f": it {judged.narrow_words('GiB' if gib else 'GB')}"
    if judged.after_margin:  # the host's RAM, a pool that serves no request, an engine that would not start
        line += f"; {judged.after_margin}"
    return line


def finite_json(value: Any, where: str, notes: list[str]) -> Any:
    """``value`` with every infinite or NaN float replaced by null (JSON has no Infinity),
    each replacement named in ``notes``."""
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{where} is {value} (no finite value, e.g. zero throughput); written as null")
        return None
    if isinstance(value, dict):
        return {k: finite_json(v, f"{where}.{k}" if where else str(k), notes) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_json(v, f"{where}[{i}]", notes) for i, v in enumerate(value)]
    return value


def estimate_json_text(est: Estimate, mode: Mode = Mode.TRAINING) -> str:
    """``--json`` output: valid JSON (RFC 8259) always, non-finite figures as null with a note."""
    notes: list[str] = []
    data = finite_json(estimate_to_json(est, mode), "", notes)
    data["notes"] = [*data["notes"], *notes]
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def _beside_adapters(plan: Plan) -> str:
    """What PEFT's print_trainable_parameters adds to the adapters: the modules_to_save copies and token rows
    (core.training.extra_trained), "" where none train."""
    extra = extra_elements(plan)
    return f" + {scientific(extra)} trained beside them ({extra:,}: modules_to_save / token rows)" if extra else ""


def _workload_line(plan: Plan) -> list[str]:
    """The batch the figures are for (the command line's defaults are not the window's first start: say them);
    none in lesson accounting, whose activations are typed."""
    if plan.accounting is Accounting.LESSON:
        return []
    w = plan.workload
    ckpt = f"checkpointing {plan.checkpoint_policy.value}" if plan.checkpointing else "no checkpointing"
    return [
        f"workload micro-batch {w.micro_batch:,} × {w.seq_len:,} tokens, gradient accumulation {w.grad_accum:,}; {ckpt}"
    ]


def _vision_words(plan: Plan) -> str:
    """An image-text checkpoint's frozen vision tower, beside the language model's count."""
    model = plan.model
    if not model.vision_params:
        return ""
    tower = scientific(model.vision_params)
    return f"; + {model.vision_kind or 'vision'} tower and projector {tower} (frozen, in Weights)"


def render_estimate(est: Estimate, gib: bool = False) -> str:
    plan = est.plan
    p = est.params
    # The preset's word (--preset) or the custom roles, as ``fit`` prints them: the coarse plan.precision
    # read "bf16" for both Trainer(bf16=True) and pure bf16.
    lines = [
        f"{plan.model.name} · {plan.method.value} · {plan.precision_word} · {plan.optimizer.value} · "
        f"{est.gpu.name} × {plan.world_size}",
        f"parameters {scientific(p.total)} total, {scientific(p.trainable)} trainable ({p.trainable:,})"
        + _beside_adapters(plan)
        + _vision_words(plan)
        + ("   [lesson accounting]" if plan.accounting is Accounting.LESSON else ""),
        *_workload_line(plan),
        "",
    ]
    peak_label = f"peak ({est.peak_phase})"
    width = max(len(peak_label), *(len(v) for v in BUCKET_LABELS.values()))
    for bucket in est.buckets:
        if plan.accounting is Accounting.LESSON and bucket.bytes == 0 and bucket.key.value == "overhead":
            continue
        lines.append(f"  {bucket.label:<{width}}  {fmt(bucket.bytes, gib):>14}")
    lines.append(f"  {peak_label:<{width}}  {fmt(est.peak_bytes, gib):>14}")
    lines += _card_lines(est, gib)
    lines += [
        "",
        f"  {est.summary_formula}",
        verdict_line(est.judgement(Mode.TRAINING), plan.hardware.headroom, gib),
        *_rank_lines(est, gib),
        "",
        f"  compute  {scientific(est.compute.flops)} FLOPs, {hours(est.compute.hours)} "
        f"on {counted(plan.world_size, 'GPU')} "
        f"at {_utilisation_text(est)}, "
        f"{tokens_per_s(est.compute.tokens_per_second)}, cost {money(est.compute.cost, est.compute.currency)}"
        + (f" ({est.compute.price_source})" if not math.isfinite(est.compute.cost) else ""),
        _mfu_line(est),
        *([f"  host     {est.compute.host_pace}"] if est.compute.host_pace else []),
        *([f"  fixed    {est.compute.fixed_step}"] if est.compute.fixed_step else []),
        *([f"  note     {est.compute.attention_note}"] if est.compute.attention_note else []),
        *_step_lines(est),
        f"  serving  {fmt(est.inference.total_bytes, gib)} for {plan.inference.concurrent} × "
        f"{plan.inference.context:,} tokens (KV cache {fmt(est.inference.kv_cache_bytes, gib)}, "
        f"{est.inference.kv_bytes_per_token:,.0f} B/token); "
        + est.inference.limits_sentence(plan),
    ]
    if est.compute.dtype_problem:
        lines.append(f"  warning: {est.compute.dtype_problem}")
    if est.compute.float8_problem:
        lines.append(f"  warning: {est.compute.float8_problem}")
    lines += [f"  warning: {w}" for w in est.warnings_for(Mode.TRAINING)]
    lines += [f"  note: {n}" for n in est.notes]
    return "\n".join(lines)


def _utilisation_text(est: Estimate) -> str:
    """The compute's utilisation and where it comes from, e.g. "39 % of 989.4 TFLOP/s (modelled)"."""
    c = est.compute
    source = {
        UtilisationSource.MODELLED: "modelled",
        UtilisationSource.TYPED: f"typed; modelled {c.modelled_utilisation:.0%}",
        UtilisationSource.CALIBRATED: f"calibrated × {c.calibration_factor:.3g}; modelled {c.modelled_utilisation:.0%}",
        UtilisationSource.MEASURED: f"from your run; modelled {c.modelled_utilisation:.0%}",
    }[c.utilisation_source]
    return f"{c.utilisation:.0%} of {c.gemm_peak_tflops:g} TFLOP/s ({source})"


def _mfu_line(est: Estimate) -> str:
    """MFU as torchtitan and Megatron-LM log it, the hardware's, and the FLOPs per token of both attention counts."""
    c = est.compute
    return (
        f"  MFU      {c.mfu_text} — at {tokens_per_s(c.tokens_per_second_per_gpu)} per GPU (torchtitan: "
        f"{scientific(c.model_flops_per_token)} FLOPs per token, every query against every key, no recompute; "
        f"Megatron-LM's causal count {scientific(c.causal_flops_per_token)}; the kernels run "
        f"{scientific(c.flops_per_token)})"
    )


def _card_lines(est: Estimate, gib: bool) -> list[str]:
    """The three figures of the card (detailed accounting): allocated, reserved, nvidia-smi,
    which one is judged and why, and how sure it is."""
    if est.plan.accounting is Accounting.LESSON:
        if est.total_bytes != est.peak_bytes:
            return [f"  {'with overhead':<14}  {fmt(est.total_bytes, gib):>14}"]
        return []
    low, high = est.range_bytes
    lines = [
        "",
        f"  allocated   {fmt(est.peak_bytes, gib):>12}   max_memory_allocated",
        f"  reserved    {fmt(est.reserved_bytes, gib):>12}   max_memory_reserved: + the caching allocator's segments",
        f"  {_judged_line(est)}{fmt(est.total_bytes, gib):>12}   {_judged_adds(est)}; judged (range "
        f"{fmt(low, gib)} – {fmt(high, gib)})",
        f"  judged on {est.judged_figure}: {est.judged_why}",
    ]
    if est.confidence is not None and est.confidence.text:
        lines.append(f"  how sure: {est.confidence.text}")
    return lines


def _judged_line(est: Estimate) -> str:
    """The judged figure's name padded to the column of "allocated" and "reserved"."""
    return f"{est.judged_figure:<10}  "


def _judged_adds(est: Estimate) -> str:
    """What the judged figure holds beyond max_memory_reserved, as the runtime has it."""
    if est.judged_figure == MPS_JUDGED_FIGURE:
        return "+ the MPS heaps' room"
    names = runtime_names(est.gpu.id)
    return f"+ {names.context}, {names.collectives}"


def _step_lines(est: Estimate) -> list[str]:
    """One line per optimizer step and per collective, when the run exchanges anything."""
    c = est.compute
    if not c.comm_terms and not c.bubble_fraction:
        return []
    lines = [
        f"  step     {duration(c.step_seconds)} = {duration(c.compute_seconds_per_step)} compute × "
        f"(1 + {c.bubble_fraction:.3g} bubble) + {duration(c.exposed_comm_seconds_per_step)} exposed "
        f"of {duration(c.comm_seconds_per_step)} communication"
        + (
            f" + {duration(c.host_step_seconds_per_step)} optimizer step on the host"
            if c.host_step_seconds_per_step
            else ""
        )
    ]
    lines += [f"    {t.label}: {duration(t.seconds)} ({t.formula})" for t in c.comm_terms]
    if c.host_step_seconds_per_step:
        lines.append(
            f"    optimizer step on the host (CPU): {duration(c.host_step_seconds_per_step)} ({c.host_step_formula})"
        )
        if c.host_step_advice:
            lines.append(f"      {c.host_step_advice}")
    return lines


def _rank_lines(est: Estimate, gib: bool) -> list[str]:
    """One line per kind of rank and the host line, for a plan on more than one GPU."""
    plan = est.plan
    if plan.world_size == 1:
        return []
    par = plan.parallel
    lines = [
        "",
        f"  {plan.world_size} GPUs ({par.nodes} × {par.gpus_per_node}): {par.strategy.value}, {par.split}",
    ]
    width = max(len(r.label) for r in est.ranks)
    for i, r in enumerate(est.ranks):
        mark = "*" if i == est.worst_rank and len(est.ranks) > 1 else " "
        lines.append(
            f"  {mark} {r.label:<{width}}  peak {fmt(r.peak_bytes, gib):>10}  total {fmt(r.total_bytes, gib):>10}  "
            f"{VERDICT_LABELS[r.verdict]} ({r.count} GPUs)"
        )
    if est.host is not None:
        h = est.host
        if h.verdict is None:
            lines.append(f"    host per node  {fmt(h.bytes, gib)} needed (--host-ram-gb not given: not judged)")
        else:
            ram = f"{fmt(h.bytes, gib)} of {fmt(h.capacity_bytes, gib)} RAM"
            lines.append(f"    host per node  {ram}: {VERDICT_LABELS[h.verdict]}")
    return lines


def json_text(data: Any) -> str:
    """Valid JSON always: a non-finite figure (no throughput on a card without the dtype) is null."""
    return json.dumps(finite_json(data, "", []), indent=2, allow_nan=False) + "\n"
