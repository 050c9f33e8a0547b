"""The plans whose launch exports the tools' own parsers check (tools/measure/export_check.py), and how an
export's keys are read off its text.

Imported by the check (in .venv-measure, with the tools installed) and by the normal suite's replay
(tests/core/test_launch_acceptance.py, no tool installed): nothing here imports a tool.

Each plan names the branch of the exporters it covers: full / LoRA / QLoRA / DoRA, DDP, FSDP (resharding,
offload, the FSDP1 wrap), ZeRO-1/2/3 with and without offload, checkpointing (full, selective), tensor,
pipeline and context parallel, the Megatron and compile stacks, float8, the fused loss, activation offloading
and the optimizers with a name of their own; serving plans: vLLM and SGLang with tensor / pipeline parallel,
replicas, quantised weights and KV cache, and llama.cpp / Ollama.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import yaml

from core.catalogue import find_model
from core.dtypes import Autocast, Dtype, KvDtype, Quant, WeightFormat
from core.files.launch import SERVING_TARGETS, Target, export
from core.inputs import CheckpointPolicy, Float8, GradSync, Stack
from core.plan import (
    Attention,
    Engine,
    Inference,
    LoraSettings,
    Method,
    Offload,
    Optimizer,
    Parallelism,
    Plan,
    Preset,
    Strategy,
    Workload,
)

TRAINING_TARGETS = (
    Target.TRL,
    Target.ACCELERATE,
    Target.ACCELERATE_LAUNCH,
    Target.DEEPSPEED,
    Target.AXOLOTL,
    Target.LLAMA_FACTORY,
    Target.TORCHTUNE,
    Target.TORCHTITAN,
    Target.MEGATRON_BRIDGE,
    Target.TORCHRUN,
)
ENGINE_TARGETS = (Target.VLLM, Target.SGLANG, Target.LLAMA_SERVER, Target.OLLAMA)
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL = (*ATTN, "gate_proj", "up_proj", "down_proj")


def _llama(model: str = "llama-3.1-8b", **changes: Any) -> Plan:
    entry = find_model(model)
    assert entry is not None, model
    return Plan(model=entry.spec, model_id=entry.id, **changes)


def _gpus(n: int, strategy: Strategy, nodes: int = 1, **more: Any) -> Parallelism:
    return Parallelism(nodes=nodes, gpus_per_node=n, strategy=strategy, **more)


def _lora(rank: int = 16, targets: tuple[str, ...] = ATTN, dropout: float = 0.0) -> LoraSettings:
    return LoraSettings(rank=rank, alpha=2.0 * rank, targets=targets, dropout=dropout)


def _training() -> Iterator[tuple[str, Callable[[], Plan]]]:
    work = Workload(micro_batch=4, seq_len=2048, grad_accum=8, tokens=0)
    yield "full-1gpu-bf16", lambda: _llama(preset=Preset.TRAINER_BF16, workload=work)
    yield "full-fp32-autocast-checkpointed", lambda: _llama(preset=Preset.FP32_AUTOCAST_BF16, checkpointing=True)
    yield "full-fp16-amp-sgd", lambda: _llama("llama-3.2-1b", preset=Preset.FP16_AMP, optimizer=Optimizer.SGD_MOMENTUM)
    yield "lora-attn", lambda: _llama(method=Method.LORA, lora=_lora(), preset=Preset.TRAINER_BF16, workload=work)
    yield (
        "lora-all-dropout-clip",
        lambda: _llama(
            method=Method.LORA, lora=_lora(8, ALL, 0.05), grad_clip=True, weight_decay=0.01, preset=Preset.TRAINER_BF16
        ),
    )
    yield (
        "qlora-nf4-checkpointed",
        lambda: _llama(
            method=Method.QLORA, quant=Quant.NF4, lora=_lora(), preset=Preset.TRAINER_BF16, checkpointing=True
        ),
    )
    yield (
        "qlora-int8-paged",
        lambda: _llama(method=Method.QLORA, quant=Quant.INT8, lora=_lora(), optimizer=Optimizer.PAGED_ADAMW_8BIT),
    )
    yield "dora-adamw8bit", lambda: _llama(method=Method.DORA, lora=_lora(), optimizer=Optimizer.ADAMW_8BIT)
    yield (
        "full-adafactor-flash",
        lambda: _llama(
            "llama-3.2-1b", optimizer=Optimizer.ADAFACTOR, preset=Preset.PURE_BF16, attention=Attention.FLASH
        ),
    )
    yield "ddp-2gpu", lambda: _llama("llama-3.2-1b", parallel=_gpus(2, Strategy.DDP), checkpointing=True)
    yield "fsdp-8gpu", lambda: _llama(parallel=_gpus(8, Strategy.FSDP), checkpointing=True)
    yield (
        "fsdp-2node-offload",
        lambda: _llama(
            "llama-3.1-70b", parallel=_gpus(8, Strategy.FSDP, nodes=2, offload=Offload.PARAMS), checkpointing=True
        ),
    )
    yield (
        "fsdp1-shard-grad-op",
        lambda: _llama(
            parallel=_gpus(2, Strategy.FSDP, reshard_after_forward=False, fsdp1_wrap=True), activation_offload=True
        ),
    )
    yield "fsdp-lora", lambda: _llama(method=Method.LORA, lora=_lora(), parallel=_gpus(4, Strategy.FSDP))
    yield "zero1-4gpu", lambda: _llama(parallel=_gpus(4, Strategy.ZERO1))
    yield "zero2-8gpu", lambda: _llama(parallel=_gpus(8, Strategy.ZERO2), checkpointing=True, grad_clip=True)
    yield "zero2-offload-optimizer", lambda: _llama(parallel=_gpus(2, Strategy.ZERO2, offload=Offload.OPTIMIZER))
    yield "zero3-8gpu", lambda: _llama("llama-3.1-70b", parallel=_gpus(8, Strategy.ZERO3), checkpointing=True)
    yield (
        "zero3-offload-params-lora",
        lambda: _llama(method=Method.LORA, lora=_lora(), parallel=_gpus(4, Strategy.ZERO3, offload=Offload.PARAMS)),
    )
    yield (
        "zero3-bf16-master",
        lambda: _llama(
            preset=Preset.PURE_BF16,
            parallel=_gpus(8, Strategy.ZERO3, bf16_master_weights=True, bf16_optimizer_states=True),
        ),
    )
    yield "tp2-fsdp", lambda: _llama(parallel=_gpus(8, Strategy.FSDP, tensor_parallel=2), stack=Stack.COMPILE)
    yield (
        "tp2-pp2-megatron",
        lambda: _llama(
            "llama-3.1-70b",
            stack=Stack.MEGATRON,
            parallel=_gpus(8, Strategy.ZERO1, tensor_parallel=2, pipeline_parallel=2, sequence_parallel=True),
            checkpointing=True,
        ),
    )
    yield (
        "cp2-fsdp-selective",
        lambda: _llama(
            parallel=_gpus(4, Strategy.FSDP, context_parallel=2),
            checkpointing=True,
            checkpoint_policy=CheckpointPolicy.OP,
            stack=Stack.COMPILE,
        ),
    )
    yield (
        "float8-compile-fused-loss",
        lambda: _llama(
            stack=Stack.COMPILE, float8=Float8.TENSORWISE, fused_loss=True, parallel=_gpus(8, Strategy.FSDP)
        ),
    )
    yield (
        "zero3-offload-bf16-master",
        lambda: _llama(
            preset=Preset.TRAINER_BF16,
            parallel=_gpus(8, Strategy.ZERO3, offload=Offload.OPTIMIZER, bf16_master_weights=True),
        ),
    )
    yield (
        "zero2-bf16-master-states",
        lambda: _llama(
            preset=Preset.TRAINER_BF16,
            parallel=_gpus(8, Strategy.ZERO2, bf16_master_weights=True, bf16_optimizer_states=True),
        ),
    )
    yield (
        "fsdp-sync-each-batch",
        lambda: _llama(
            parallel=_gpus(4, Strategy.FSDP, grad_sync=GradSync.EACH), workload=Workload(micro_batch=2, grad_accum=4)
        ),
    )
    yield (
        "pure-fp16-eager-frozen",
        lambda: _llama(
            "llama-3.2-1b",
            method=Method.FROZEN,
            frozen_layers=8,
            preset=Preset.CUSTOM,
            weight_dtype=Dtype.FP16,
            autocast=Autocast.NONE,
            attention=Attention.EAGER,
        ),
    )
    yield "optimizer-in-backward", lambda: _llama("llama-3.2-1b", optimizer_in_backward=True, checkpointing=True)
    yield from _zero_offload()


def _zero_offload() -> Iterator[tuple[str, Callable[[], Plan]]]:
    """ZeRO-Offload's own optimizer section (core/files/launch/deepspeed.py optimizer_section): DeepSpeed steps an
    offloaded optimizer in its CPU kernels, built from ``optimizer.type`` and ``params``; Adam is written with
    ``adam_w_mode: false``. Each stage that offloads (1, 2, 3; 3 with its parameters too) with AdamW and Adam, and
    the two other types it builds there (Adagrad, Lion). ``zero2-offload-optimizer``, ``zero3-offload-params-lora``
    and ``zero3-offload-bf16-master`` above are AdamW on stages 2 and 3."""
    for name, strategy, offload in (
        ("zero1-offload", Strategy.ZERO1, Offload.OPTIMIZER),
        ("zero2-offload", Strategy.ZERO2, Offload.OPTIMIZER),
        ("zero3-offload", Strategy.ZERO3, Offload.OPTIMIZER),
        ("zero3-offload-params", Strategy.ZERO3, Offload.PARAMS),
    ):
        layout = _gpus(4, strategy, offload=offload)
        adam = {"optimizer": Optimizer.ADAM, "weight_decay": 0.01, "parallel": layout, "grad_clip": True}
        yield f"{name}-adam", partial(_llama, "llama-3.2-1b", **adam)
    yield (
        "zero3-offload-adamw-decay",
        lambda: _llama(
            "llama-3.2-1b",
            optimizer=Optimizer.ADAMW,
            weight_decay=0.1,
            parallel=_gpus(4, Strategy.ZERO3, offload=Offload.OPTIMIZER),
        ),
    )
    yield (
        "zero2-offload-adagrad",
        lambda: _llama(
            "llama-3.2-1b", optimizer=Optimizer.ADAGRAD, parallel=_gpus(2, Strategy.ZERO2, offload=Offload.OPTIMIZER)
        ),
    )
    yield (
        "zero3-offload-params-lion-lora",
        lambda: _llama(
            method=Method.LORA,
            lora=_lora(),
            optimizer=Optimizer.LION,
            preset=Preset.TRAINER_BF16,
            parallel=_gpus(4, Strategy.ZERO3, offload=Offload.PARAMS),
        ),
    )


def _torchtitan() -> Iterator[tuple[str, Callable[[], Plan]]]:
    """torchtitan's float8 recipes and the branches its start-up checks refused before branch h91titan
    (torchtitan 0.2.2): tensorwise with FSDP2's float8 all-gather, MX with TP under compile, DDP beside TP with async
    TP, a sequence length TP × 2·CP does not divide."""
    fsdp8 = _gpus(8, Strategy.FSDP)
    yield (
        "titan-float8-allgather",
        lambda: _llama(
            stack=Stack.COMPILE, float8=Float8.TENSORWISE, parallel=replace(fsdp8, fsdp_float8_all_gather=True)
        ),
    )
    yield (
        "titan-mxfp8-tp2-compile",
        lambda: _llama(
            stack=Stack.COMPILE,
            float8=Float8.MXFP8,
            compiled_loss=True,
            parallel=replace(fsdp8, tensor_parallel=2, tp_overlap=True),
        ),
    )
    yield "titan-float8-rowwise", lambda: _llama(stack=Stack.COMPILE, float8=Float8.ROWWISE, parallel=fsdp8)
    yield "titan-ddp-tp2-async", lambda: _llama(parallel=_gpus(8, Strategy.DDP, tensor_parallel=2, tp_overlap=True))
    yield (
        "titan-odd-seq-tp2",
        lambda: _llama(
            parallel=_gpus(8, Strategy.FSDP, tensor_parallel=2), workload=Workload(micro_batch=1, seq_len=1001)
        ),
    )


def _serving() -> Iterator[tuple[str, Callable[[], Plan]]]:
    def served(model: str = "llama-3.1-8b", **inference: Any) -> Plan:
        return _llama(model, inference=Inference(**inference))

    yield "vllm-default", lambda: served(engine=Engine.VLLM)
    yield (
        "vllm-tp2-fp8kv-limits",
        lambda: served(
            engine=Engine.VLLM,
            tensor_parallel=2,
            kv_dtype=KvDtype.FP8,
            context=16384,
            concurrent=32,
            max_num_seqs=64,
            max_num_batched_tokens=8192,
            gpu_memory_utilization=0.85,
        ),
    )
    yield (
        "vllm-awq-pp2-replicas",
        lambda: served(engine=Engine.VLLM, weight_dtype=WeightFormat.AWQ_INT4, pipeline_parallel=2, replicas=2),
    )
    yield "vllm-fp8-eager", lambda: served(engine=Engine.VLLM, weight_dtype=WeightFormat.FP8, cuda_graphs=False)
    yield "vllm-gptq-int8", lambda: served(engine=Engine.VLLM, weight_dtype=WeightFormat.GPTQ_INT8)
    yield "sglang-default", lambda: served(engine=Engine.SGLANG)
    yield (
        "sglang-tp2-fp8kv-fraction",
        lambda: served(
            engine=Engine.SGLANG, tensor_parallel=2, kv_dtype=KvDtype.FP8, mem_fraction_static=0.8, context=32768
        ),
    )
    yield (
        "sglang-pp2-replicas-awq",
        lambda: served(engine=Engine.SGLANG, pipeline_parallel=2, replicas=2, weight_dtype=WeightFormat.AWQ_INT4),
    )
    yield "llamacpp-q4km", lambda: served(engine=Engine.LLAMACPP, gguf_quant="Q4_K_M", gpu_layers=20, cache_type="q8_0")
    yield "ollama", lambda: served(engine=Engine.LLAMACPP, gguf_quant="Q4_K_M", ollama_version="0.30")


def named_plans() -> dict[str, tuple[Plan, tuple[Target, ...]]]:
    """Every plan of the check by name, with the targets it is exported to."""
    found: dict[str, tuple[Plan, tuple[Target, ...]]] = {}
    for name, build in _training():
        found[name] = (build(), TRAINING_TARGETS)
    for name, build in _torchtitan():
        found[name] = (build(), (Target.TORCHTITAN,))
    for name, build in _serving():
        gguf = name.startswith(("llamacpp", "ollama"))
        found[name] = (build(), ENGINE_TARGETS if gguf else (Target.VLLM, Target.SGLANG))
    return found


def body(text: str) -> str:
    """The text without its comment lines (the exporters' headers)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def document(target: Target, text: str) -> Any:
    """An exported file as data, or a command as its words."""
    if target in (Target.TRL, Target.DEEPSPEED):
        return json.loads(text)
    if target is Target.TORCHTITAN:
        return tomllib.loads(text)
    if target in (Target.TORCHRUN, Target.ACCELERATE_LAUNCH) or target in SERVING_TARGETS:
        return shlex.split(body(text))
    return yaml.safe_load(text)


def _paths(data: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                yield from _paths(value, path)
            else:
                yield path
    elif prefix:
        yield prefix


def keys_of(target: Target, text: str) -> frozenset[str]:
    """The keys an export writes: a file's dotted key paths, a command's flags (``--x=1`` as ``--x``), Ollama's
    variables and Modelfile instructions / PARAMETER names."""
    if target is Target.OLLAMA:
        return frozenset(_ollama_keys(text))
    data = document(target, text)
    if isinstance(data, list):
        if target is Target.SGLANG and data[:2] == ["python", "-m"]:
            data = data[3:]  # python's own -m and the module it runs
        return frozenset(word.split("=", 1)[0] for word in data if word.startswith("-") and len(word) > 1)
    return frozenset(_paths(data))


def _ollama_keys(text: str) -> Iterator[str]:
    for line in body(text).splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "PARAMETER" and len(words) > 1:
            yield "PARAMETER " + words[1]
        elif words[0] in ("FROM", "TEMPLATE", "SYSTEM", "ADAPTER", "LICENSE", "MESSAGE"):
            yield words[0]
        for word in words[1:] if words[0] == "export" else words:  # the server's variables before `ollama serve`
            name = word.split("=", 1)[0]
            if "=" not in word or not name.replace("_", "").isupper():
                break
            yield "env:" + name


def exports() -> Iterator[tuple[str, Target, str]]:
    """(plan name, target, exported text) for every plan of the check and its targets."""
    for name, (plan, targets) in named_plans().items():
        for target in targets:
            yield name, target, export(plan, target).text


def with_layout(plan: Plan, **changes: Any) -> Plan:
    return replace(plan, parallel=replace(plan.parallel, **changes))
