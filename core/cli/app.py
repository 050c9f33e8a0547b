"""``vramplan``: the command line over the same core the GUI uses.

``vramplan estimate ...`` prints an estimate;
``vramplan models``, ``vramplan gpus`` and ``vramplan links`` list the catalogues. Bad input exits with
status 2 and one line on stderr, never a traceback.

A subcommand builds its text and :func:`main` writes it through :func:`write_output`, the
one output guard (no stdout, unencodable characters, terminal control characters, a full
disk); a new subcommand does the same rather than printing.

Past 400 lines because the argument definitions of every estimate option live here, beside
the one function that turns them into a Plan; the newer subcommands are in cli_extra.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final, NoReturn, TextIO

from core import __version__
from core.breakdown import BUCKET_LABELS
from core.catalogue import find_model, load_gpus, load_links, load_models
from core.cli import extra as cli_extra
from core.dtypes import Autocast, Dtype, KvDtype, MpDtype, Quant, WeightFormat
from core.errors import PlanError, PlanFileError, escape_controls, one_line
from core.estimate import VERDICT_LABELS, Estimate, estimate
from core.files.importer import import_model
from core.files.planfile import load as load_plan
from core.files.planfile import save as save_plan
from core.model import ModelSpec
from core.plan import (
    ENGINE_LABELS,
    Accounting,
    Attention,
    CheckpointPolicy,
    Engine,
    LoraSettings,
    Method,
    Offload,
    Optimizer,
    OptimizerImpl,
    PipelineSchedule,
    Plan,
    Precision,
    Preset,
    Strategy,
    preset_matching,
)
from core.units import GB, format_count, format_memory, parse_count


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def _print_message(self, message: str, file: Any = None) -> None:
        # --help and --version: through the same output guard as every subcommand.
        if message:
            write_output(message, sys.stdout if file is None else file)


def _text(value: str) -> str:
    """A file, id or list argument: an empty one is a mistake, never "use the default"."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty value is not allowed")
    return value


def _count(text: str) -> int:
    """A count for --params, --trainable and --tokens: the one parser the window uses too."""
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{one_line(text)!r} {exc}") from None


def _build_parser() -> _Parser:
    parser = _Parser(prog="vramplan", description="Will a training or serving run fit in GPU memory?")
    parser.add_argument("--version", action="version", version=f"vramplan {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    est = sub.add_parser("estimate", help="estimate memory, time and serving needs of a plan")
    src = est.add_argument_group("model (one of)")
    src.add_argument("--model", "-m", type=_text, help="catalogue id, e.g. llama-3.1-8b (see `vramplan models`)")
    src.add_argument("--config", type=_text, metavar="PATH", help="a Hugging Face config.json or model folder")
    src.add_argument("--params", type=_count, metavar="N", help="parameter count as the lesson gives it (6.7e9)")
    src.add_argument("--plan", type=_text, metavar="FILE", help="a saved plan file; other options override it")
    m = est.add_argument_group("method")
    m.add_argument("--method", choices=[e.value for e in Method])
    m.add_argument("--dora", action="store_true", help="same as --method dora (PEFT use_dora=True)")
    m.add_argument("--lora-rank", type=int)
    m.add_argument("--lora-alpha", type=float)
    m.add_argument("--lora-targets", type=_text, help="comma list: q_proj,v_proj or all-linear")
    m.add_argument("--trainable", type=_count, metavar="T", help="lesson mode: trainable parameters as given")
    m.add_argument("--quant", choices=[e.value for e in Quant], help="QLoRA base storage")
    m.add_argument("--frozen-layers", type=int)
    m.add_argument("--precision", choices=[e.value for e in Precision], help="the old one-word setting (a preset)")
    m.add_argument(
        "--preset",
        choices=[e.value for e in Preset if e is not Preset.CUSTOM],
        help="trainer-bf16: model loaded in bf16 + Trainer(bf16=True); fp32-autocast-bf16; pure-bf16; fp16-amp; fp32",
    )
    m.add_argument(
        "--weight-dtype",
        dest="train_weight_dtype",  # --weights (serving) owns weight_dtype
        choices=[e.value for e in Dtype],
        help="storage of trained weights (full FT) and the dtype the model is loaded in",
    )
    m.add_argument("--base-dtype", choices=[e.value for e in Dtype], help="the frozen base of LoRA/DoRA/frozen layers")
    m.add_argument("--adapter-dtype", choices=[e.value for e in Dtype], help="LoRA/DoRA adapters (PEFT: fp32)")
    m.add_argument(
        "--autocast",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.autocast around forward and loss, in the weights' 16-bit dtype (bf16 over float32)",
    )
    m.add_argument("--optimizer", choices=[e.value for e in Optimizer])
    m.add_argument(
        "--optimizer-impl",
        choices=[e.value for e in OptimizerImpl],
        help="fused (HF Trainer default), foreach (torch.optim default on CUDA) or forloop",
    )
    m.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=None)
    m.add_argument(
        "--checkpoint-policy",
        choices=[e.value for e in CheckpointPolicy],
        help="full (every block recomputed), op (torchtitan selective per op) or layer (every Nth block); "
        "turns checkpointing on",
    )
    m.add_argument("--checkpoint-every", type=int, help="layer policy: checkpoint every Nth block (implies layer)")
    m.add_argument("--attention", choices=[e.value for e in Attention])
    m.add_argument("--chunked-loss", action=argparse.BooleanOptionalAction, default=None)
    w = est.add_argument_group("workload")
    w.add_argument("--micro-batch", "-b", type=int)
    w.add_argument("--seq", "-s", type=int, dest="seq_len")
    w.add_argument("--accum", type=int, dest="grad_accum")
    w.add_argument("--tokens", type=_count, help="token budget D for time and cost (default 20M)")
    h = est.add_argument_group("hardware")
    h.add_argument("--gpu", type=_text, help="GPU id (see `vramplan gpus`)")
    h.add_argument("--utilisation", type=float)
    h.add_argument("--headroom", type=float, help="fraction kept free, 0.1 = 10 %%")
    h.add_argument("--peak-tflops", type=float, help="override the card's dense peak TFLOP/s")
    h.add_argument("--price", type=float, help="price per GPU-hour")
    i = est.add_argument_group("serving")
    i.add_argument("--mode", choices=["training", "inference"], default="training", help="which estimate to print")
    i.add_argument("--engine", choices=[e.value for e in Engine], help="hf: transformers generate; vllm: vLLM")
    i.add_argument("--concurrent", type=int, help="requests served at once")
    i.add_argument("--context", type=int, help="tokens per request, prompt + generated (vLLM: max_model_len)")
    i.add_argument("--new-tokens", type=int, help="generated tokens per request (default 256)")
    i.add_argument("--weights", choices=[e.value for e in WeightFormat], dest="weight_dtype", help="weight storage")
    i.add_argument("--kv-dtype", choices=[e.value for e in KvDtype])
    i.add_argument("--replicas", type=int, help="independent copies of the served model")
    i.add_argument("--gpu-memory-utilization", type=float, help="vLLM: fraction of each GPU it may use (0.9)")
    i.add_argument("--max-num-seqs", type=int, help="vLLM: most requests scheduled at once (0: its default)")
    i.add_argument("--max-num-batched-tokens", type=int, help="vLLM: tokens per step (0: its default)")
    i.add_argument("--mem-fraction-static", type=float, help="SGLang: weights + KV pool share (0: its default)")
    par = est.add_argument_group("parallelism (training); --tensor/--pipeline-parallel also serve --mode inference")
    par.add_argument("--nodes", type=int, help="nodes (default 1)")
    par.add_argument("--gpus-per-node", type=int, help="GPUs in each node")
    par.add_argument("--gpus", type=int, dest="gpus_total", metavar="N", help="GPUs on one node (= --gpus-per-node N)")
    par.add_argument("--strategy", choices=[e.value for e in Strategy], help="data-parallel engine (default ddp)")
    par.add_argument("--sharding", choices=["none", "zero1", "zero2", "zero3"], help="old name of --strategy")
    par.add_argument("--tensor-parallel", "--tp", type=int, dest="tensor_parallel", metavar="N")
    par.add_argument("--pipeline-parallel", "--pp", type=int, dest="pipeline_parallel", metavar="N")
    par.add_argument("--context-parallel", "--cp", type=int, dest="context_parallel", metavar="N")
    par.add_argument("--virtual-stages", type=int, help="interleaved pipeline: model chunks per stage")
    par.add_argument("--schedule", choices=[e.value for e in PipelineSchedule], help="pipeline schedule (1f1b)")
    par.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None)
    par.add_argument("--offload", choices=[e.value for e in Offload], help="what moves to host memory")
    par.add_argument("--reshard-after-forward", action=argparse.BooleanOptionalAction, default=None, help="FSDP2")
    par.add_argument(
        "--ddp-bucket-view", action=argparse.BooleanOptionalAction, default=None, help="DDP gradient_as_bucket_view"
    )
    par.add_argument("--fsdp-param-dtype", choices=[e.value for e in MpDtype], help="FSDP2 MixedPrecisionPolicy")
    par.add_argument("--fsdp-reduce-dtype", choices=[e.value for e in MpDtype], help="FSDP2 MixedPrecisionPolicy")
    par.add_argument("--interconnect", type=_text, metavar="LINK", help="link between nodes (see `vramplan links`)")
    par.add_argument("--intra-link", type=_text, metavar="LINK", help="link within a node (default nvlink4)")
    par.add_argument("--host-ram-gb", type=float, help="RAM per node in GB")
    mode = est.add_argument_group("accounting")
    mode.add_argument("--lesson", action="store_true", help="the lesson's accounting (typed activations)")
    mode.add_argument("--activations-gb", type=float, help="lesson mode: activation allowance (default 1.5)")
    out = est.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="machine-readable output, bytes throughout")
    out.add_argument("--gib", action="store_true", help="show GiB instead of decimal GB")
    out.add_argument("--save", type=_text, metavar="FILE", help="also save the plan to FILE")

    models = sub.add_parser("models", help="list the model catalogue")
    models.add_argument("--json", action="store_true")
    gpus = sub.add_parser("gpus", help="list the GPU catalogue")
    gpus.add_argument("--json", action="store_true")
    links = sub.add_parser("links", help="list the interconnect catalogue (for --intra-link and --interconnect)")
    links.add_argument("--json", action="store_true")
    cli_extra.register(sub, est)
    return parser


def _base_plan(args: argparse.Namespace) -> Plan:
    sources = [s for s in (args.model, args.config, args.params, args.plan) if s is not None]
    if len([s for s in (args.model, args.config, args.params) if s is not None]) > 1:
        raise UsageError("give the model once: --model, --config or --params")
    if args.plan:
        plan = load_plan(args.plan)
    else:
        plan = Plan(model=find_model("llama-2-7b").spec, model_id="llama-2-7b")
    if not sources:
        raise UsageError("say which model: --model ID, --config PATH, --params N or --plan FILE")
    if args.model:
        entry = find_model(args.model)
        plan = plan.on_model(entry.spec, entry.id)
    elif args.config:
        imported = import_model(args.config)
        plan = plan.on_model(imported.spec)
    elif args.params is not None:
        if args.params < 1:
            raise PlanError("--params", args.params, "a positive parameter count")
        # A bare count keeps the shape of the current model (Llama-2-7B unless --plan).
        plan = replace(plan, model=replace(plan.model, name=f"P = {args.params:.4g}", params_override=args.params))
    return plan


def _precision_from_args(plan: Plan, args: argparse.Namespace) -> Plan:
    """--precision or --preset first, then single roles on top; roles that match a named
    preset are called by its name (``--precision bf16 --autocast`` is trainer-bf16)."""
    if args.precision is not None and args.preset is not None:
        raise UsageError("give --precision or --preset, not both")
    if args.precision is not None:
        plan = plan.with_changes(precision=Precision(args.precision))
    if args.preset is not None:
        plan = plan.with_changes(preset=Preset(args.preset))
    roles: dict[str, Any] = {}
    for name, dest in (
        ("weight_dtype", "train_weight_dtype"),
        ("base_dtype", "base_dtype"),
        ("adapter_dtype", "adapter_dtype"),
    ):
        if getattr(args, dest) is not None:
            roles[name] = Dtype(getattr(args, dest))
    if args.train_weight_dtype is not None and args.base_dtype is None:
        roles["base_dtype"] = roles["weight_dtype"]  # the model is loaded in one dtype
    if args.autocast is not None:
        stored = roles.get("weight_dtype", plan.weight_dtype)
        roles["autocast"] = (
            (Autocast.FP16 if stored is Dtype.FP16 else Autocast.BF16) if args.autocast else Autocast.NONE
        )
    if not roles:
        return plan
    plan = plan.with_changes(**roles)
    return plan.with_changes(preset=preset_matching(plan.roles)) if plan.preset is Preset.CUSTOM else plan


SERVING_ARGS = (
    "engine",
    "concurrent",
    "context",
    "new_tokens",
    "weight_dtype",
    "kv_dtype",
    "replicas",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "mem_fraction_static",
)


def _checkpoint_policy_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """--checkpoint-policy / --checkpoint-every: either turns checkpointing on, and a
    block interval alone means the layer policy."""
    policy, every = args.checkpoint_policy, args.checkpoint_every
    if policy is None and every is None:
        return {}
    if args.checkpointing is False:
        raise UsageError("--no-checkpointing contradicts --checkpoint-policy / --checkpoint-every")
    if every is not None and policy not in (None, CheckpointPolicy.LAYER.value):
        raise UsageError(f"--checkpoint-every applies to --checkpoint-policy layer, not {policy}")
    changes: dict[str, Any] = {"checkpointing": True}
    changes["checkpoint_policy"] = CheckpointPolicy.LAYER if every is not None else CheckpointPolicy(policy)
    if every is not None:
        changes["checkpoint_every"] = every
    return changes


def plan_from_args(args: argparse.Namespace, base: Plan | None = None) -> Plan:
    plan = _precision_from_args(base if base is not None else _base_plan(args), args)
    changes: dict[str, Any] = {}
    if args.dora:
        if args.method not in (None, Method.DORA.value):
            raise UsageError(f"--dora contradicts --method {args.method}")
        args.method = Method.DORA.value
    for name, enum in (
        ("optimizer", Optimizer),
        ("optimizer_impl", OptimizerImpl),
        ("attention", Attention),
        ("quant", Quant),
    ):
        value = getattr(args, name)
        if value is not None:
            changes[name] = enum(value)
    for name in ("checkpointing", "chunked_loss", "frozen_layers"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    changes.update(_checkpoint_policy_from_args(args))
    lora: dict[str, Any] = {}
    if args.lora_rank is not None:
        lora["rank"] = args.lora_rank
    if args.lora_alpha is not None:
        lora["alpha"] = args.lora_alpha
    if args.lora_targets is not None:
        targets = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
        if not targets:
            raise UsageError("argument --lora-targets: an empty list is not allowed (e.g. q_proj,v_proj or all-linear)")
        lora["targets"] = targets
    if lora:
        changes["lora"] = replace(plan.lora, **lora) if plan.lora else LoraSettings(**lora)
    workload = {
        k: getattr(args, k) for k in ("micro_batch", "seq_len", "grad_accum", "tokens") if getattr(args, k) is not None
    }
    if workload:
        changes["workload"] = replace(plan.workload, **workload)
    hardware: dict[str, Any] = {}
    for key in ("gpu", "utilisation", "headroom"):
        if getattr(args, key) is not None:
            hardware[key] = getattr(args, key)
    if args.peak_tflops is not None:
        hardware["peak_tflops_override"] = args.peak_tflops
    if args.price is not None:
        hardware["price_per_gpu_hour"] = args.price
    if hardware:
        changes["hardware"] = replace(plan.hardware, **hardware)
    inference = {k: getattr(args, k) for k in SERVING_ARGS if getattr(args, k) is not None}
    parallel = _parallel_changes(args)
    if args.mode == "inference":  # the split flags describe the served model
        for key in ("tensor_parallel", "pipeline_parallel"):
            if key in parallel:
                inference[key] = parallel.pop(key)
    if parallel:
        changes["parallel"] = replace(plan.parallel, **parallel)
    if inference:
        changes["inference"] = replace(plan.inference, **inference)
    if args.lesson or args.activations_gb is not None or args.trainable is not None:
        changes["accounting"] = Accounting.LESSON
        lesson: dict[str, Any] = {}
        if args.activations_gb is not None:
            lesson["activations_gb"] = args.activations_gb
        if args.trainable is not None:
            lesson["trainable_override"] = args.trainable
        changes["lesson"] = replace(plan.lesson, **lesson)
    if args.method is not None:
        return plan.with_method(Method(args.method), **changes)
    return replace(plan, **changes)


def _fmt(n_bytes: float, gib: bool) -> str:
    return format_memory(n_bytes, "GiB" if gib else "GB")


def estimate_to_json(est: Estimate) -> dict[str, Any]:
    plan = est.plan
    return {
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
        "total_bytes": round(est.total_bytes),
        "capacity_bytes": round(est.capacity_bytes),
        "usable_bytes": round(est.usable_bytes),
        "verdict": est.verdict.value,
        "margin_bytes": round(est.margin_bytes),
        "summary": est.summary_formula,
        # peak_bytes / total_bytes above are the worst rank's; every kind of rank here.
        "ranks": [
            {
                "label": r.label,
                "count": r.count,
                "peak_bytes": round(r.peak_bytes),
                "total_bytes": round(r.total_bytes),
                "verdict": r.verdict.value,
            }
            for r in est.ranks
        ],
        "worst_rank": est.worst_rank,
        "host_bytes": round(est.host.bytes) if est.host else None,
        "host_capacity_bytes": round(est.host.capacity_bytes) if est.host else None,
        "compute": {
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
            "comm_terms": [
                {"label": t.label, "formula": t.formula, "bytes": t.bytes, "seconds": t.seconds}
                for t in est.compute.comm_terms
            ],
            "assumptions": list(est.compute.assumptions),
        },
        "inference": inference_to_json(est),
        "notes": list(est.notes),
        "warnings": list(est.warnings),
        "dtype_problem": est.compute.dtype_problem,
    }


def inference_to_json(est: Estimate) -> dict[str, Any]:
    inf, plan = est.inference, est.plan.inference
    return {
        "engine": inf.engine.value,
        "weights": plan.weight_dtype.value,
        "kv_dtype": plan.kv_dtype.value,
        "tensor_parallel": plan.tensor_parallel,
        "pipeline_parallel": plan.pipeline_parallel,
        "replicas": plan.replicas,
        "gpus": inf.gpus,
        "weights_bytes": round(inf.weights_bytes),
        "kv_cache_bytes": round(inf.kv_cache_bytes),
        "kv_bytes_per_token": inf.kv_bytes_per_token,
        "activation_bytes": round(inf.activation_bytes),
        "non_torch_bytes": round(inf.non_torch_bytes),
        "peak_bytes": round(inf.peak_bytes),
        "total_bytes": round(inf.total_bytes),
        "budget_bytes": round(inf.budget_bytes),
        "verdict": inf.verdict.value,
        "queued": inf.queued,
        "kv_cache_tokens": inf.kv_cache_tokens,
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
    lines = [
        f"{est.plan.model.name} served by {engine} · weights {plan.weight_dtype.value} · "
        f"KV {plan.kv_dtype.value} · {gpus}",
        "",
        f"  weights per GPU        {_fmt(inf.weights_bytes, gib):>14}",
        f"  KV cache               {_fmt(inf.kv_cache_bytes, gib):>14}   "
        f"({inf.kv_bytes_per_token:,.0f} B per token per GPU)",
        f"  activations            {_fmt(inf.activation_bytes, gib):>14}",
    ]
    if inf.non_torch_bytes:
        lines.append(f"  outside torch          {_fmt(inf.non_torch_bytes, gib):>14}")
    lines += [f"  peak (allocator)       {_fmt(inf.peak_bytes, gib):>14}", "", f"  {inf.formula}", ""]
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
    else:
        lines.append(
            f"  {VERDICT_LABELS[inf.verdict]}: {_fmt(inf.total_bytes, gib)} of {_fmt(inf.budget_bytes, gib)} usable; "
            f"at most {inf.max_concurrent:,} requests of {plan.context:,} tokens, or {inf.max_context:,} tokens each"
        )
    speed = inf.speed
    lines += [
        f"  time to first token {speed.ttft_s * 1e3:,.0f} ms; {speed.running} requests decode at "
        f"{speed.per_request_tokens_per_s:,.0f} tokens/s each, {speed.total_tokens_per_s:,.0f} tokens/s in total",
        f"  {speed.formula}",
    ]
    return "\n".join(lines)


def _finite_json(value: Any, where: str, notes: list[str]) -> Any:
    """``value`` with every infinite or NaN float replaced by null (JSON has no Infinity),
    each replacement named in ``notes``."""
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{where} is {value} (no finite value, e.g. zero throughput); written as null")
        return None
    if isinstance(value, dict):
        return {k: _finite_json(v, f"{where}.{k}" if where else str(k), notes) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_json(v, f"{where}[{i}]", notes) for i, v in enumerate(value)]
    return value


def estimate_json_text(est: Estimate) -> str:
    """``--json`` output: valid JSON (RFC 8259) always, non-finite figures as null with a note."""
    notes: list[str] = []
    data = _finite_json(estimate_to_json(est), "", notes)
    data["notes"] = [*data["notes"], *notes]
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


PARALLEL_ARGS: Final = (
    "nodes",
    "gpus_per_node",
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "virtual_stages",
    "sequence_parallel",
    "reshard_after_forward",
    "ddp_bucket_view",
    "host_ram_gb",
)


def _parallel_changes(args: argparse.Namespace) -> dict[str, Any]:
    parallel: dict[str, Any] = {k: getattr(args, k) for k in PARALLEL_ARGS if getattr(args, k) is not None}
    if args.gpus_total is not None:
        if args.gpus_per_node is not None and args.gpus_per_node != args.gpus_total:
            raise UsageError("--gpus and --gpus-per-node disagree: give one of them")
        parallel["gpus_per_node"] = args.gpus_total
    if args.strategy is not None and args.sharding is not None:
        raise UsageError("--sharding is the old name of --strategy: give one of them")
    if args.sharding is not None:
        parallel["strategy"] = Strategy.DDP if args.sharding == "none" else Strategy(args.sharding)
    if args.strategy is not None:
        parallel["strategy"] = Strategy(args.strategy)
    for key, enum in (
        ("schedule", PipelineSchedule),
        ("offload", Offload),
        ("fsdp_param_dtype", MpDtype),
        ("fsdp_reduce_dtype", MpDtype),
    ):
        if getattr(args, key) is not None:
            parallel[key] = enum(getattr(args, key))
    if args.interconnect is not None:
        parallel["inter_link"] = args.interconnect
    if args.intra_link is not None:
        parallel["intra_link"] = args.intra_link
    if parallel.get("virtual_stages", 1) > 1 and "schedule" not in parallel:
        parallel["schedule"] = PipelineSchedule.INTERLEAVED
    return parallel


def render_estimate(est: Estimate, gib: bool = False) -> str:
    plan = est.plan
    p = est.params
    lines = [
        f"{plan.model.name} · {plan.method.value} · {plan.precision.value} · {plan.optimizer.value} · "
        f"{est.gpu.name} × {plan.world_size}",
        f"parameters {format_count(p.total)} total, {format_count(p.trainable)} trainable ({p.trainable:,})"
        + ("   [lesson accounting]" if plan.accounting is Accounting.LESSON else ""),
        "",
    ]
    peak_label = f"peak ({est.peak_phase})"
    width = max(len(peak_label), *(len(v) for v in BUCKET_LABELS.values()))
    for bucket in est.buckets:
        if plan.accounting is Accounting.LESSON and bucket.bytes == 0 and bucket.key.value == "overhead":
            continue
        lines.append(f"  {bucket.label:<{width}}  {_fmt(bucket.bytes, gib):>14}")
    lines.append(f"  {peak_label:<{width}}  {_fmt(est.peak_bytes, gib):>14}")
    if est.total_bytes != est.peak_bytes:
        lines.append(f"  {'with overhead':<{width}}  {_fmt(est.total_bytes, gib):>14}")
    lines += [
        "",
        f"  {est.summary_formula}",
        f"  {VERDICT_LABELS[est.verdict]}: {_fmt(est.total_bytes, gib)} of {_fmt(est.capacity_bytes, gib)} "
        f"({_fmt(est.usable_bytes, gib)} usable with {plan.hardware.headroom:.0%} headroom), "
        f"margin {_fmt(est.margin_bytes, gib)}",
        *_rank_lines(est, gib),
        "",
        f"  compute  {est.compute.flops:.1e} FLOPs, {est.compute.hours:.1f} h on {plan.world_size} GPU(s) "
        f"at {plan.hardware.utilisation:.0%} of {est.compute.peak_tflops:g} TFLOP/s, "
        f"{est.compute.tokens_per_second:,.0f} tokens/s, cost {est.compute.cost:,.2f}",
        *_step_lines(est),
        f"  serving  {_fmt(est.inference.total_bytes, gib)} for {plan.inference.concurrent} × "
        f"{plan.inference.context:,} tokens (KV cache {_fmt(est.inference.kv_cache_bytes, gib)}, "
        f"{est.inference.kv_bytes_per_token:,.0f} B/token); fits up to {est.inference.max_concurrent:,} requests",
    ]
    if est.compute.dtype_problem:
        lines.append(f"  warning: {est.compute.dtype_problem}")
    lines += [f"  warning: {w}" for w in est.warnings]
    lines += [f"  note: {n}" for n in est.notes]
    return "\n".join(lines)


def _step_lines(est: Estimate) -> list[str]:
    """One line per optimizer step and per collective, when the run exchanges anything."""
    c = est.compute
    if not c.comm_terms and not c.bubble_fraction:
        return []
    lines = [
        f"  step     {c.step_seconds:.3g} s = {c.compute_seconds_per_step:.3g} s compute × "
        f"(1 + {c.bubble_fraction:.3g} bubble) + {c.exposed_comm_seconds_per_step:.3g} s exposed "
        f"of {c.comm_seconds_per_step:.3g} s communication"
    ]
    lines += [f"    {t.label}: {t.seconds:.3g} s ({t.formula})" for t in c.comm_terms]
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
            f"  {mark} {r.label:<{width}}  peak {_fmt(r.peak_bytes, gib):>10}  total {_fmt(r.total_bytes, gib):>10}  "
            f"{VERDICT_LABELS[r.verdict]} ({r.count} GPUs)"
        )
    if est.host is not None:
        h = est.host
        lines.append(
            f"    host per node  {_fmt(h.bytes, gib)} of {_fmt(h.capacity_bytes, gib)} RAM: {VERDICT_LABELS[h.verdict]}"
        )
    return lines


def _list_models(as_json: bool) -> str:
    models = load_models()
    if as_json:
        rows = [{"id": m.id, "name": m.name, "params": m.spec.total_params()} for m in models]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    lines = []
    for m in models:
        spec: ModelSpec = m.spec
        lines.append(
            f"{m.id:<26} {m.name:<32} {format_count(spec.total_params()):>7}  "
            f"L={spec.num_layers:<3} d={spec.hidden_size:<5} heads={spec.num_heads}/{spec.num_kv_heads}\n"
        )
    return "".join(lines)


def _list_gpus(as_json: bool) -> str:
    gpus = load_gpus()
    if as_json:
        rows = [
            {"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes, "tflops_dense": dict(g.tflops_dense)}
            for g in gpus
        ]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    return "".join(
        f"{g.id:<20} {g.name:<28} {g.memory_bytes / 2**20:>8,.0f} MiB  {g.memory_bytes / GB:>6.1f} GB  "
        + (f"bf16 {g.peak_tflops('bf16'):>7g} TFLOP/s" if g.dtype_problem("bf16") is None else "no bf16")
        + "\n"
        for g in gpus
    )


def _list_links(as_json: bool) -> str:
    links = load_links()
    if as_json:
        rows = [
            {
                "id": link.id,
                "name": link.name,
                "kind": link.kind.value,
                "bandwidth_gb_s": link.bandwidth_gb_s,
                "bus_efficiency": link.bus_efficiency,
                "latency_us": link.latency_us,
                "source": link.source,
            }
            for link in links
        ]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    return "".join(
        f"{link.id:<11} {link.kind.value:<6} {link.bandwidth_gb_s:>6g} GB/s per GPU per direction  "
        f"(NCCL reaches {link.bus_efficiency:.0%})  {link.name}\n"
        for link in links
    )


class OutputError(Exception):
    """Standard output could not take the text (a full disk, a closed pipe).

    ``quiet`` for a pipe closed by its reader (``vramplan models | head -1``): as Unix
    tools do, that ends the program without a message.
    """

    def __init__(self, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet


def write_output(text: str, stream: TextIO | None) -> None:
    """The one way anything reaches the terminal: every subcommand's output goes through here.

    - no stream (a windowed Windows build has ``sys.stdout is None``): nothing is written;
    - control and format characters (ESC, BEL, CR, bidi overrides from a model's name) are
      escaped, so nothing read from a file can drive the terminal;
    - a stream that cannot encode a character (an ASCII or Latin-1 locale) gets it as an
      escape instead of a UnicodeEncodeError;
    - a failed write (``> /dev/full``, a closed pipe) raises :class:`OutputError`.
    """
    if stream is None:
        return
    safe = "\n".join(escape_controls(line) for line in text.split("\n"))
    try:
        try:
            stream.write(safe)
        except UnicodeEncodeError:
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is None:
                raise
            reconfigure(errors="backslashreplace")
            stream.write(safe)
        stream.flush()
    except (OSError, ValueError) as exc:  # UnicodeEncodeError is a ValueError; so is a closed file
        _discard_pending(stream)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise OutputError(f"cannot write the output ({one_line(reason)})", isinstance(exc, BrokenPipeError)) from None


def _discard_pending(stream: TextIO) -> None:
    """Point a failed standard output at the null device, so the interpreter's own flush at
    exit does not fail a second time with "Exception ignored" and a traceback."""
    if stream is not sys.__stdout__:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def _say(text: str) -> None:
    """One line on stderr, where there is one and it can take it."""
    with contextlib.suppress(OutputError):
        write_output(text, sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "models":
            text = _list_models(args.json)
        elif args.command == "gpus":
            text = _list_gpus(args.json)
        elif args.command == "links":
            text = _list_links(args.json)
        elif args.command in cli_extra.COMMANDS:
            text = cli_extra.run_command(args)
        elif args.command == "estimate" and args.from_file:
            text = cli_extra.estimate_from(args, plan_from_args)
        elif args.command == "estimate":
            plan = plan_from_args(args)
            result = estimate(plan)
            if args.save is not None:
                save_plan(plan, args.save)
            if args.json:
                text = estimate_json_text(result)
            elif args.mode == "inference":
                text = render_serving(result, gib=args.gib) + "\n"
            else:
                text = render_estimate(result, gib=args.gib) + "\n"
        else:
            write_output(parser.format_help(), sys.stdout)
            return 2
        write_output(text, sys.stdout)
    except (UsageError, PlanError, PlanFileError, cli_extra.ConfigUsageError) as exc:
        _say(f"vramplan: {one_line(str(exc))}\n")
        return 2
    except OutputError as exc:
        if not exc.quiet:
            _say(f"vramplan: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
