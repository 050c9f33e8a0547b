"""Golden figures: every number ``estimate()`` and ``diagnose()`` give, for a fixed set of plans.

A restructuring of ``core`` must not change a single figure. This module projects an
:class:`Estimate` (and a diagnosis) onto plain data — dataclass fields by name, enums by
name, floats by ``repr`` — so the projection does not depend on which module a class lives
in, and keeps SHA-256 digests per plan in
``tests/data/golden/digests.json`` (the estimate, and the diagnosis in each mode).
``tests/core/test_golden.py`` recomputes them; ``--dump`` writes every field in full, to diff
two commits when one differs.

The plans: every case of the measured suites (training, per-rank, SAC, serving) and the
generated plans stored in ``tests/data/golden/plans.jsonl`` (stored, not regenerated, so a
new Hypothesis or a new random module cannot change them).

    python -m tests.golden --update        # rewrite the digests (a figure changed on purpose: say why in the commit)
    python -m tests.golden --dump DIR      # write each plan's projection as JSON, to diff two commits
    python -m tests.golden --generate      # draw the generated plans again (only when the plan format changes)
    python -m tests.golden --compare OLD NEW   # what moved between two dumps (keys only NEW has are listed apart)
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import gzip
import hashlib
import json
import random
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden"
PLANS = GOLDEN / "plans.jsonl.gz"
DIGESTS = GOLDEN / "digests.json"
GENERATED = 500
# Diagnosis runs dozens of estimates per plan: golden for the suites and every 10th generated plan.
DIAGNOSE_EVERY = 10


# Figures a class once stored as fields and now derives (by class name): projected as before,
# so the move from a field to a property shows as no change.
DERIVED: dict[str, tuple[str, ...]] = {
    "Estimate": ("verdict", "usable_bytes", "margin_bytes", "inference"),  # inference: read lazily since 2026-12
    "Compute": ("formula",),  # written when first read since 2026-12 (h65perf)
    "ComputePart": ("formula",),  # written when first read since 2026-12 (h65perf)
    "FlopTerm": ("formula",),  # written when first read since 2026-12 (h65perf)
    "RankMemory": ("evaluation", "evaluation_bytes"),  # worked out when first read since 2026-12 (h74speed)
    # speed: worked out when first read since 2026-12; refusal, context_refusal: the engine's words, read from the
    # classified start-up refusals since 2026-12 (h94start)
    "InferenceEstimate": ("speed", "refusal", "context_refusal"),
}
# Fields added since the digests were first written, projected only where they hold something: a plan without them
# digests as before (h94start: an engine that starts has no start-up refusal; one that refuses pins its kinds).
ADDED_WHEN_SET: dict[str, tuple[str, ...]] = {
    "InferenceEstimate": ("refusals",),
    "Remedy": ("refused",),
}


def project(value: Any) -> Any:
    """Plain, module-independent data for ``value``; raises TypeError on a type it does not know."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # A leading underscore: how a derived figure is made (a function), not a figure.
        added = ADDED_WHEN_SET.get(type(value).__name__, ())
        out = {
            f.name: project(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name[0] != "_" and not (f.name in added and not getattr(value, f.name))
        }
        out.update({name: project(getattr(value, name)) for name in DERIVED.get(type(value).__name__, ())})
        return out
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple | list):
        return [project(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((project(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(project(k)): project(v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))}
    raise TypeError(f"no golden projection for {type(value).__name__}")


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=True).encode()).hexdigest()[:24]


def _suite_plans() -> Iterator[tuple[str, Any]]:
    """(id, plan) for every case of the measured suites, read the way their benchmarks read them."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import accuracy, parallel, sac_accuracy, serving
    from core.files.measurement import load_measurement, plan_for_case

    for folder, prefix in ((accuracy.MEASURED, "accuracy"), (sac_accuracy.MEASURED, "sac")):
        for path in sorted(folder.glob("*.json")):
            m = load_measurement(path)
            config = json.loads(path.read_text()).get("model_config")
            yield f"{prefix}/{path.stem}", plan_for_case(m.case, config, m.torch_version)
    cases = json.loads((parallel.DATA / "cases.json").read_text())["cases"]
    for case in cases:
        config_path = case.get("config")
        config = json.loads((ROOT / config_path).read_text()) if config_path else None
        yield f"parallel/{case['id']}", parallel.plan_for_parallel_case(case, config)
    for path in sorted(serving.MEASURED.glob("*.json")):
        yield f"serving-hf/{path.stem}", serving.hf_plan(json.loads(path.read_text()))
    for entry in json.loads(serving.VLLM_LOGS.read_text())["entries"]:
        yield f"serving-vllm/{entry['id']}", serving.vllm_plan(entry)


def _stored_plans() -> Iterator[tuple[str, Any]]:
    from core.errors import PlanError
    from core.files.planfile import plan_from_dict

    for line in gzip.decompress(PLANS.read_bytes()).decode().splitlines():
        record = json.loads(line)
        try:
            yield record["id"], plan_from_dict(record["plan"])
        except PlanError as exc:  # a stored plan a later rule refuses: the refusal is its figure
            yield record["id"], exc


# Command lines whose printed output is golden too (the CLI is rebuilt from the input table;
# its answers must not move). Paths are relative to the repository root.
CLI_RUNS: tuple[tuple[str, ...], ...] = (
    ("estimate",),
    ("estimate", "--model", "llama-3.1-8b"),
    ("estimate", "--json"),
    ("estimate", "--gib", "--model", "llama-3.1-8b", "--method", "lora", "--gpu", "rtx-4090"),
    ("estimate", "--json", "--model", "llama-3.1-8b", "--method", "qlora", "--quant", "nf4", "--gpu", "rtx-3090"),
    (
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--method",
        "lora",
        "--base-dtype",
        "bf16",
        "--weight-dtype",
        "fp32",
        "--no-autocast",
        "--gpu",
        "h100-sxm",
    ),
    (
        "estimate",
        "--json",
        "--model",
        "llama-3.1-70b",
        "--gpus",
        "16",
        "--strategy",
        "fsdp",
        "--tensor-parallel",
        "2",
        "--checkpointing",
        "--micro-batch",
        "2",
        "--seq",
        "8192",
        "--gpu",
        "h100-sxm",
    ),
    (
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--strategy",
        "zero3",
        "--offload",
        "optimizer",
        "--host-ram-gb",
        "32",
    ),
    (
        "estimate",
        "--json",
        "--model",
        "qwen2.5-7b",
        "--pipeline-parallel",
        "2",
        "--gpus",
        "4",
        "--schedule",
        "interleaved",
        "--virtual-stages",
        "2",
    ),
    ("estimate", "--model", "llama-3.1-8b", "--checkpoint-policy", "op", "--gpus", "8", "--strategy", "fsdp"),
    ("estimate", "--json", "--model", "llama-3.1-8b", "--checkpoint-policy", "layer", "--checkpoint-every", "2"),
    ("estimate", "--lesson", "--params", "6.7e9", "--precision", "bf16"),
    (
        "estimate",
        "--lesson",
        "--params",
        "6.7e9",
        "--method",
        "qlora",
        "--trainable",
        "16777216",
        "--gpu",
        "rtx-3060-12gb",
    ),
    (
        "estimate",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--concurrent",
        "32",
        "--context",
        "8192",
        "--gpu",
        "h100-sxm",
    ),
    (
        "estimate",
        "--json",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-70b",
        "--engine",
        "vllm",
        "--tensor-parallel",
        "4",
        "--weights",
        "awq-int4",
        "--kv-dtype",
        "fp8",
        "--gpu",
        "a100-80gb-sxm",
    ),
    ("estimate", "--mode", "inference", "--model", "qwen3-8b", "--engine", "sglang", "--concurrent", "8"),
    ("estimate", "--json", "--mode", "inference", "--model", "gemma-3-1b", "--engine", "hf", "--concurrent", "4"),
    ("estimate", "--plan", "tests/data/plans/v3_zero3_8gpu.json"),
    ("estimate", "--json", "--plan", "tests/data/plans/v1_example.json"),
    ("estimate", "--json", "--model", "llama-3.1-8b", "--from", "tests/data/runconfigs/axolotl_llama3_qlora.yml"),
    ("estimate", "--from", "tests/data/runconfigs/torchtune_llama3_1_8B_lora_single_device.yaml"),
    ("estimate", "--json", "--from", "tests/data/runconfigs/torchtitan_llama3_8b.toml"),
    ("estimate", "--model", "llama-3.1-8b", "--from", "tests/data/runconfigs/llamafactory_llama3_lora_sft_ds3.yaml"),
    ("models",),
    ("gpus",),
    ("links",),
    ("fit", "--json", "tests/data/plans/v3_zero3_8gpu.json"),
    ("fit", "--max-count", "2", "tests/data/plans/v1_example.json"),
    ("fewest-gpus", "--json", "--model", "llama-3.1-70b"),
    ("fewest-gpus", "--model", "llama-3.1-8b", "--seq", "32768"),
    # Inputs the generated plans predate (their format is older than these settings): software
    # stack, float8 linears, TP overlap, allocator settings, calibration from a measured run,
    # bitsandbytes' legacy path, llama.cpp and a vLLM version with a PCIe tensor-parallel link.
    (
        "estimate",
        "--json",
        "--model",
        "llama-3.1-8b",
        "--gpus",
        "8",
        "--strategy",
        "fsdp",
        "--stack",
        "compile",
        "--float8",
        "tensorwise",
        "--fsdp-float8-all-gather",
        "--checkpoint-policy",
        "op",
        "--seq",
        "8192",
        "--gpu",
        "h100-sxm",
    ),
    (
        "estimate",
        "--model",
        "llama-3.1-70b",
        "--gpus",
        "64",
        "--strategy",
        "fsdp",
        "--tensor-parallel",
        "8",
        "--tp-overlap",
        "--stack",
        "megatron",
        "--float8",
        "te",
        "--seq",
        "4096",
        "--gpu",
        "h100-sxm",
        "--alloc-conf",
        "expandable_segments:True",
    ),
    (
        "estimate",
        "--json",
        "--model",
        "llama-3.1-8b",
        "--float8",
        "rowwise",
        "--stack",
        "compile",
        "--gpus",
        "8",
        "--strategy",
        "fsdp",
        "--pipeline-parallel",
        "2",
        "--gpu",
        "h100-sxm",
        "--measured-step-s",
        "3.0",
    ),
    (
        "estimate",
        "--json",
        "--model",
        "llama-3.1-8b",
        "--method",
        "qlora",
        "--quant",
        "nf4",
        "--bnb-legacy",
        "--kbit-upcast",
        "--gpu",
        "rtx-3090",
        "--measured-tokens-per-s",
        "900",
    ),
    (
        "estimate",
        "--model",
        "llama-3.2-3b",
        "--optimizer-in-backward",
        "--activation-offload",
        "--fused-loss",
        "--grad-clip",
    ),
    (
        "estimate",
        "--json",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "llamacpp",
        "--gguf",
        "Q4_K_M",
        "--gpu-layers",
        "20",
        "--cache-type",
        "q8_0",
        "--flash-attention",
        "--context",
        "16384",
        "--gpu",
        "rtx-3060-12gb",
    ),
    (
        "estimate",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-70b",
        "--engine",
        "vllm",
        "--vllm-version",
        "0.8",
        "--tensor-parallel",
        "2",
        "--serving-link",
        "pcie4-x16",
        "--gpu",
        "a100-80gb-pcie",
        "--concurrent",
        "64",
    ),
    # Apple silicon: Metal's device beside the buffers, and the prompt's Metal mat-mat kernels
    # (core.serving.speed METAL_*: K-quant blocks dequantised per 32-token tile).
    (
        "estimate",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "llamacpp",
        "--gguf",
        "Q4_K_M",
        "--gpu-layers",
        "999",
        "--context",
        "8192",
        "--gpu",
        "apple-m2-max-96gb",
    ),
    (
        # Ollama in front of llama.cpp (branch h38ollama): its num_ctx, parallel and layer placement.
        "estimate",
        "--json",
        "--mode",
        "inference",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "llamacpp",
        "--ollama",
        "0.7",
        "--context",
        "32768",
        "--gpu",
        "rtx-3060-12gb",
    ),
    # Ollama's layout from v0.12.11 (branch h39ollama): num_ctx by VRAM (2 × 24 GB: 262,144 capped at the
    # model's 131,072), flash attention "auto", Llama 3.1 70B spread over two cards by createLayout.
    tuple(
        shlex.split(
            "estimate --json --mode inference --model llama-3.1-70b --engine llamacpp --ollama 0.15.5 "
            "--pipeline-parallel 2 --gpu rtx-4090"
        )
    ),
    # Ollama 0.30 on (branch h39ollama): llama-server without -ngl, llama.cpp's own fit (common/fit.cpp) keeps
    # 1 GiB free and fills the back of Llama 3.1 70B onto one RTX 4090; the rest stays in host memory.
    tuple(
        shlex.split(
            "estimate --json --mode inference --model llama-3.1-70b --engine llamacpp --ollama 0.30 --gpu rtx-4090"
        )
    ),
    # PEFT IA3 (branch h40peft): PEFT's Llama default, k_proj and v_proj scaled on their outputs, down_proj
    # on its float32-cast input, on the method comparison's L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method ia3 --lora-targets k_proj,v_proj,down_proj "
            "--preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # LoRA on the output head (branch h41head): LitGPT's Gemma 2B config hub recipe (lora_head: true, r 8,
    # dropout 0.1, micro-batch 2 × 512), and torchtune's Mistral 7B recipe with apply_lora_to_output: True.
    tuple(
        shlex.split(
            "estimate --json --model gemma-2b --method lora --lora-rank 8 --lora-alpha 16 --lora-dropout 0.1 "
            "--lora-targets all-linear,lm_head --micro-batch 2 --seq 512"
        )
    ),
    ("estimate", "--json", "--from", "tests/data/runconfigs/torchtune_mistral_7B_lora_single_device.yaml"),
    # LitGPT's Adapter and Adapter v2 (branch h41adapt), as the lit-gpt resource tables ran them on Llama 2 7B:
    # bf16-true, one A100 40GB, the longest Alpaca sample; v2 on an NF4 base with PagedAdamW.
    tuple(
        shlex.split(
            "estimate --json --model llama-2-7b --method adapter --preset pure-bf16 --micro-batch 1 --seq 1304 "
            "--gpu a100-40gb-sxm"
        )
    ),
    tuple(
        shlex.split(
            "estimate --json --model llama-2-7b --method adapter_v2 --adapter-quantised --quant nf4 --no-double-quant "
            "--preset pure-bf16 --optimizer paged-adamw --micro-batch 1 --seq 1304 --gpu a100-40gb-sxm"
        )
    ),
    # PEFT prompt tuning and P-tuning (branch h41soft): the method comparison's settings (200 and 20
    # virtual tokens) on its L40S; the model runs on 968 and 788 positions.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method prompt-tuning --virtual-tokens 200 "
            "--preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method p-tuning --virtual-tokens 20 "
            "--preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT prefix tuning and LN tuning (branch h52pfx): the method comparison's settings (200 virtual keys and
    # values per layer; every norm) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method prefix-tuning --virtual-tokens 200 "
            "--preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method ln-tuning "
            "--preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT LoHa and LoKr (branch h53lyco): the method comparison's settings (r 32, alpha 64, q_proj and v_proj;
    # LoKr's decompose_factor 4) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method loha --lora-rank 32 --lora-alpha 64 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method lokr --lokr-factor 4 --lora-rank 32 --lora-alpha 64 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT VeRA (branch h53vera): the method comparison's settings (r 256, q_proj and v_proj) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method vera --lora-rank 256 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT OFT (branch h54oft): the method comparison's settings (r 32 blocks, q_proj and v_proj) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method oft --oft-block-size 0 --lora-rank 32 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT AdaLoRA (branch h54ada): the method comparison's settings (init_r 64, alpha 8, q_proj and v_proj) on its
    # L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method adalora --lora-rank 64 --lora-alpha 8 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # The optimizers branch h57opt added, one run each (the drawn plans keep the optimizers they were drawn from):
    # torchao's low-bit AdamW on the torchao README's Llama 2 7B pure-bf16 full fine-tuning, llama-recipes'
    # AnyPrecisionAdamW with a weight decay on its 70B over 16 A100s, bitsandbytes' Lion on Llama 3.1 8B.
    *(
        tuple(
            shlex.split(
                f"estimate --json --model llama-2-7b --method full --preset pure-bf16 --optimizer {optimizer} "
                "--micro-batch 2 --seq 1024 --checkpointing --gpu a100-80gb-sxm"
            )
        )
        for optimizer in ("ao-adamw-8bit", "ao-adamw-4bit", "ao-adamw-fp8")
    ),
    *(
        tuple(
            shlex.split(
                f"estimate --json --model llama-2-70b --method full --preset pure-bf16 --optimizer {optimizer} "
                "--weight-decay 0.1 --micro-batch 1 --seq 2048 --checkpointing --gpus 16 --strategy fsdp "
                "--gpu a100-80gb-sxm"
            )
        )
        for optimizer in ("anyprecision-adamw", "anyprecision-adamw-kahan")
    ),
    *(
        tuple(shlex.split(f"estimate --json --model llama-3.1-8b --method full --optimizer {optimizer} --gpu h100-sxm"))
        for optimizer in ("lion", "lion-8bit", "paged-lion", "paged-lion-8bit")
    ),
    # torch.optim.Muon on the blocks' matrices, AdamW on the rest (branch h57opt)
    tuple(shlex.split("estimate --json --model llama-3.2-1b --method full --optimizer muon --gpus 2 --gpu h100-sxm")),
    # PEFT MiSS (branch h58peft): the method comparison's default (r 64, q_proj and v_proj) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method miss --lora-rank 64 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # Hybrid recurrent models (branches h66htrain, h66v20, h66lhyb, h68hflops): a Mamba-2 hybrid's training memory
    # and time (the mixers' own matmuls and scans), vLLM's hybrid pages and prefill, llama.cpp's RS buffer. None of
    # the stored plans is a hybrid.
    tuple(shlex.split("estimate --json --model granite-4.0-h-tiny --method lora --gpu h100-sxm")),
    tuple(shlex.split("estimate --json --model bamba-9b --method full --micro-batch 1 --seq 2048 --gpu h100-sxm")),
    tuple(
        shlex.split(
            "estimate --json --mode inference --model granite-4.0-h-small --engine vllm --vllm-version 0.34 "
            "--gpu h100-sxm"
        )
    ),
    tuple(shlex.split("estimate --json --mode inference --model qwen3.5-9b --engine vllm --gpu a100-80gb-sxm")),
    tuple(
        shlex.split(
            "estimate --json --mode inference --model nemotron-nano-9b-v2 --engine llamacpp --gguf Q4_K_M "
            "--gpu rtx-4090"
        )
    ),
    # Hybrids on data-parallel ranks (branch h71hybdp): FSDP2's largest-layer gather, DDP's buckets.
    tuple(shlex.split("estimate --json --model qwen3.5-27b --method full --gpus 8 --strategy fsdp --gpu h100-sxm")),
    tuple(
        shlex.split("estimate --json --model granite-4.0-h-small --method lora --gpus 2 --strategy ddp --gpu h100-sxm")
    ),
    # SGLang's default fraction by launch (branch h71sglpf): the llama-2 4,096-token prefill cap, an MLA model's
    # prefill graph reserve (0.5.23) and its switch-off (0.5.16), an AMD card, a multimodal model's reduction (0.4.5).
    tuple(shlex.split("estimate --json --mode inference --model llama-2-7b --engine sglang --gpu h200-sxm")),
    *(
        tuple(
            shlex.split(
                f"estimate --json --mode inference --model deepseek-v2-lite --engine sglang --sglang-version {line} "
                "--gpu h100-sxm"
            )
        )
        for line in ("0.5.16", "0.5.23")
    ),
    tuple(shlex.split("estimate --json --mode inference --model llama-3.1-8b --engine sglang --gpu mi300x")),
    tuple(
        shlex.split(
            "estimate --json --mode inference --model gemma-3-4b --engine sglang --sglang-version 0.4.5 --gpu h100-sxm"
        )
    ),
    # ZeRO-3 on a hybrid (branch h72hyb3): the modules kept from the forward's end read in the layer order.
    tuple(
        shlex.split("estimate --json --model granite-4.0-h-tiny --method full --gpus 8 --strategy zero3 --gpu h100-sxm")
    ),
    # PEFT FourierFT and RoAd (branch h76peft): the method comparison's n_frequency 5000 and road_2 runs on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method fourierft --lora-rank 5000 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method road --road-variant road_2 "
            "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # PEFT VB-LoRA, RandLoRA and SHiRA (branch h78peft): the method comparison's default runs on its L40S.
    *(
        tuple(
            shlex.split(
                f"estimate --json --model llama-3.2-3b --method {method} --lora-rank {rank} "
                "--lora-targets q_proj,v_proj --preset trainer-bf16 --micro-batch 4 --seq 768 --gpu l40s"
            )
        )
        for method, rank in (("vblora", 4), ("randlora", 32), ("shira", 32))
    ),
    # PEFT BOFT (branch h80boft): the method comparison's default run (blocks of 4) on its L40S.
    tuple(
        shlex.split(
            "estimate --json --model llama-3.2-3b --method boft --lora-targets q_proj,v_proj --preset trainer-bf16 "
            "--micro-batch 4 --seq 768 --gpu l40s"
        )
    ),
    # Lesson accounting on a MoE QLoRA (branch h85lesson): under transformers 5 bitsandbytes leaves Qwen3-30B-A3B's
    # 3-D routed experts in bf16 (tests/data/moe_bnb/bnb_transformers_5.25.0.json), so the weights are
    # (P − E) × b_w + E × 2 B ("0.77 + 58.0 + 0.05 + 1.5 = 60.3 GB"), not P × 0.5 B. The stored lesson plans on MoE
    # models (gen/plan-050 frozen, gen/plan-365 LoRA) load 16-bit bases: P × b_w, no split.
    tuple(
        shlex.split(
            "estimate --json --lesson --model qwen3-30b-a3b --method qlora --quant nf4 --training-transformers 5.0+ "
            "--gpu h100-sxm"
        )
    ),
)


def cli_outputs() -> Iterator[tuple[str, str]]:
    """(id, what the command printed) for each of :data:`CLI_RUNS`, run from the repository root."""
    import contextlib
    import io
    import os

    from core.cli.app import main as cli_main

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        for index, argv in enumerate(CLI_RUNS):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli_main(list(argv))
                except SystemExit as exc:
                    code = exc.code
            yield f"cli/{index:02d}-{argv[0]}", f"exit {code}\n{out.getvalue()}\n--stderr--\n{err.getvalue()}"
    finally:
        os.chdir(here)


def golden_plans() -> list[tuple[str, Any]]:
    return [*_suite_plans(), *_stored_plans()]


def _diagnosed(plan_id: str) -> bool:
    if not plan_id.startswith("gen/"):
        return True
    return int(plan_id.rsplit("-", 1)[1]) % DIAGNOSE_EVERY == 0


def figures(plan_id: str, plan: Any) -> dict[str, Any]:
    """The projection of everything the estimator says of ``plan``, by top-level field."""
    from core.advice.diagnosis import diagnose
    from core.estimate import estimate
    from core.verdict import Mode

    if isinstance(plan, Exception):  # a stored plan the Plan now refuses (_stored_plans)
        return {"refused": f"{type(plan).__name__}: {plan}"}
    est = project(estimate(plan))
    est.pop("plan")  # the input, not a figure
    out = {f"estimate.{k}": v for k, v in est.items()}
    if _diagnosed(plan_id):
        for mode in Mode:
            try:
                diag = project(diagnose(plan, mode))
            except Exception as exc:  # a defect is a figure too: its fix changes the golden on purpose
                out[f"diagnosis.{mode.name}"] = f"{type(exc).__name__}: {exc}"
                continue
            diag.pop("estimate")  # the same estimate as above
            out.update({f"diagnosis.{mode.name}.{k}": v for k, v in diag.items()})
    return out


def digests(plans: list[tuple[str, Any]], on_plan: Callable[[str, dict[str, Any]], None] | None = None) -> dict:
    out: dict[str, dict[str, str]] = {}
    for plan_id, plan in plans:
        data = figures(plan_id, plan)
        if on_plan is not None:
            on_plan(plan_id, data)
        groups: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            groups.setdefault(".".join(key.split(".")[:2]) if key.startswith("diagnosis") else "estimate", {})[key] = (
                value
            )
        out[plan_id] = {group: digest(values) for group, values in groups.items()}
    return out


# --- the generated plans ------------------------------------------------------------------
def _choice(rng: random.Random, options: list[Any]) -> Any:
    return options[rng.randrange(len(options))]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# The methods the drawn plans were drawn from (IA3 and LitGPT's adapters came later: their plans are CLI_RUNS').
_DRAWN_METHODS = ["full", "lora", "qlora", "frozen", "dora"]
# The optimizers the drawn plans were drawn from (torchao's low-bit AdamW, AnyPrecisionAdamW and Lion came later, branch
# h57opt: their plans are CLI_RUNS').
_DRAWN_OPTIMIZERS = [
    "adamw",
    "adamw-8bit",
    "paged-adamw",
    "paged-adamw-8bit",
    "sgd-momentum",
    "sgd",
    "adafactor",
    "adam",
]


def _draw(rng: random.Random) -> Any:
    """One plan as people configure them: a catalogue model and card, a method and precision
    preset, a workload and a parallel layout; the Plan's own validation rejects the rest."""
    from core.catalogue import load_gpus, load_models
    from core.dtypes import KvDtype, Quant, WeightFormat
    from core.plan import (
        Accounting,
        Attention,
        CheckpointPolicy,
        Engine,
        Hardware,
        Inference,
        LoraSettings,
        Method,
        Offload,
        Optimizer,
        OptimizerImpl,
        Parallelism,
        Plan,
        Preset,
        Strategy,
        Workload,
    )

    model = _choice(rng, load_models())
    spec = model.spec
    gpn = _choice(rng, [1, 1, 2, 4, 8])
    nodes = _choice(rng, [1, 1, 1, 2, 4])
    world = gpn * nodes
    tp = _choice(rng, [d for d in _divisors(gpn) if spec.num_heads % d == 0])
    pp = _choice(rng, [d for d in _divisors(world // tp) if d <= spec.num_layers])
    cp = _choice(rng, _divisors(world // (tp * pp)))
    method = Method(_choice(rng, _DRAWN_METHODS))
    serving_tp = _choice(rng, [d for d in (1, 2, 4, 8) if spec.num_heads % d == 0])
    plan = Plan(
        model=spec,
        model_id=model.id,
        method=method,
        lora=LoraSettings(
            rank=_choice(rng, [4, 8, 16, 64]),
            alpha=16.0,
            targets=_choice(
                rng,
                [("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")],
            ),
        ),
        quant=_choice(rng, list(Quant)),
        double_quant=rng.random() < 0.5,
        frozen_layers=rng.randrange(1, spec.num_layers + 1) if method is Method.FROZEN else 0,
        optimizer=_choice(rng, [Optimizer(o) for o in _DRAWN_OPTIMIZERS]),
        checkpointing=rng.random() < 0.5,
        checkpoint_policy=_choice(rng, list(CheckpointPolicy)),
        checkpoint_every=_choice(rng, [1, 2, 3]),
        attention=_choice(rng, [a for a in Attention if a is not Attention.FLASH1]),  # the drawn plans as before flash1
        chunked_loss=rng.random() < 0.2,
        workload=Workload(
            micro_batch=_choice(rng, [1, 2, 4, 8, 16]),
            seq_len=_choice(rng, [256, 512, 1024, 2048, 4096, 8192, 32768]),
            grad_accum=_choice(rng, [1, 4, 16]),
            tokens=_choice(rng, [10**7, 10**9, 10**11]),
            eval_batch=_choice(rng, [0, 0, 8]),
        ),
        hardware=Hardware(
            gpu=_choice(rng, [g.id for g in load_gpus()]),
            utilisation=_choice(rng, [0.3, 0.4, 0.5]),
            headroom=_choice(rng, [0.0, 0.1, 0.2]),
        ),
        parallel=Parallelism(
            nodes=nodes,
            gpus_per_node=gpn,
            strategy=_choice(rng, list(Strategy)),
            tensor_parallel=tp,
            pipeline_parallel=pp,
            context_parallel=cp,
            offload=_choice(rng, [Offload.NONE, Offload.NONE, *Offload]),
        ),
        inference=Inference(
            weight_dtype=_choice(rng, list(WeightFormat)),
            kv_dtype=_choice(rng, [k for k in KvDtype if k is not KvDtype.FP8_PER_TOKEN_HEAD]),  # as before it
            concurrent=_choice(rng, [1, 8, 64]),
            context=_choice(rng, [2048, 8192, 32768]),
            engine=_choice(rng, list(Engine)),
            new_tokens=_choice(rng, [64, 256]),
            tensor_parallel=serving_tp,
        ),
        accounting=Accounting.LESSON if rng.random() < 0.1 else Accounting.DETAILED,
    )
    plan = plan.with_changes(preset=_choice(rng, [p for p in Preset if p is not Preset.CUSTOM]))
    return plan.with_changes(optimizer_impl=_choice(rng, list(OptimizerImpl)))


def generate(count: int = GENERATED, seed: int = 2026) -> list[dict[str, Any]]:
    from core.errors import PlanError
    from core.files.planfile import plan_to_dict

    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    while len(records) < count:
        try:
            plan = _draw(rng)
        except PlanError:
            continue
        records.append({"id": f"gen/plan-{len(records):03d}", "plan": plan_to_dict(plan)})
    return records


def _differences(old: Any, new: Any, where: str, out: list[str], added: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            if key not in old:
                added.append(f"{where}.{key}")
            elif key not in new:
                out.append(f"{where}.{key}: removed")
            else:
                _differences(old[key], new[key], f"{where}.{key}", out, added)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _differences(a, b, f"{where}[{i}]", out, added)
    elif old != new:
        out.append(f"{where}: {str(old)[:120]!r} -> {str(new)[:120]!r}")


def compare_dumps(old_dir: Path, new_dir: Path) -> tuple[list[str], list[str]]:
    """(what changed in keys both dumps have, keys only the new dump has), over every plan."""
    changed: list[str] = []
    added: list[str] = []
    for old_path in sorted(old_dir.rglob("*.json")):
        name = str(old_path.relative_to(old_dir))
        new_path = new_dir / name
        if not new_path.exists():
            changed.append(f"{name}: missing")
            continue
        _differences(json.loads(old_path.read_text()), json.loads(new_path.read_text()), name, changed, added)
    return changed, added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the digests")
    parser.add_argument("--dump", metavar="DIR", help="write each plan's projection as JSON")
    parser.add_argument("--generate", action="store_true", help="draw the generated plans again")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="list what moved between two dumps")
    args = parser.parse_args(argv)
    if args.compare:
        changed, added = compare_dumps(Path(args.compare[0]), Path(args.compare[1]))
        print("\n".join(changed) or "nothing moved")
        kinds = sorted({a.split("/", 1)[-1].split(".", 1)[-1] for a in added})
        print(f"{len(added)} keys only in the new dump: {', '.join(kinds[:30])}")
        return 1 if changed else 0
    GOLDEN.mkdir(parents=True, exist_ok=True)
    if args.generate:
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in generate())
        PLANS.write_bytes(gzip.compress(text.encode(), mtime=0))
    plans = golden_plans()
    dump_dir = Path(args.dump) if args.dump else None

    def write(plan_id: str, data: dict[str, Any]) -> None:
        if dump_dir is not None:
            target = dump_dir / f"{plan_id}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(data, sort_keys=True, indent=1))

    table = digests(plans, write)
    for cli_id, text in cli_outputs():
        write(cli_id, {"output": text})
        table[cli_id] = {"output": digest(text)}
    if args.update or args.generate:
        DIGESTS.write_text(json.dumps(table, sort_keys=True, indent=0) + "\n")
    print(f"{len(table)} plans, {sum(len(v) for v in table.values())} digests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
