"""Training time against published throughput: 372 figures from 12 sources (9 organisations).

Each record of throughput_figures.json becomes a Plan (a catalogue model, or a ModelSpec from
the record's dimensions; the layout as parallel settings; the software stack, float8 recipe,
checkpointing and communication overlap it names), or is listed as not expressible with the
reason. For every expressible figure the script predicts tokens/s per GPU at default settings
(no typed utilisation, no calibration) and compares it with the published one.

Scoring is leave one source out: the efficiency coefficients (core/training/efficiency.py:
the card generations' matmul and attention efficiency, the stacks' elementwise traffic, the
optimizer's) are fitted by weighted least squares on the other families' step times — each
family weighted equally, pulled towards the physical priors — and the held-out family is
scored with them. NVIDIA's three ids are one family (one organisation, one stack); Trainy's
two H200 rows run torchtitan's code and are scored with torchtitan (its stack factor is not
independent of them); torchtune is its own family (different code, team and cards).

Held out (HELD_OUT_SOURCES): InternLM's, VectorLM's, FlagPerf's, Colossal-AI's, nanotron's, Qwen's fine-tuning
profile's, Answer.AI's fsdp_qlora note's, optimum-benchmark's and prime-rl's expressible figures take part in no fit,
neither leave-one-source-out nor the all-source one (efficiency.FITTED); they are scored with the all-source
coefficients and printed on their own ("Held out, never fitted"), outside every other table.

Also printed: the FLOPs per token against each source's own formula (target within 2 %), the
published scaling pairs (predicted vs published ratio of per-GPU speed, within 3 points) — only
the listed pairs that change the GPU count alone (``scaling_difference``); the others are
printed with what else they change.

    python benchmarks/realgpu/throughput.py             # the tables
    python benchmarks/realgpu/throughput.py --check     # exit 1 when a target is missed
    python benchmarks/realgpu/throughput.py --fit       # the all-source fit, as efficiency.FITTED
    python benchmarks/realgpu/throughput.py --markdown  # the tables for docs/TRAINING_TIME.md
    python benchmarks/realgpu/throughput.py --parts tt-202412-8b-cp  # those figures' steps, part by part
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.realgpu import peft_time  # noqa: E402
from core.catalogue import GpuSpec, find_gpu, find_model  # noqa: E402
from core.dtypes import MpDtype  # noqa: E402
from core.errors import PlanError  # noqa: E402
from core.model import ModelSpec  # noqa: E402
from core.parallel.comm import step_communication  # noqa: E402
from core.params import param_counts  # noqa: E402
from core.plan import (  # noqa: E402
    Attention,
    CheckpointPolicy,
    Float8,
    Hardware,
    Method,
    MoeDispatcher,
    MoeLayer,
    Offload,
    OptimizerImpl,
    Parallelism,
    PipelineSchedule,
    PipelineSplit,
    Plan,
    Preset,
    Quant,
    Stack,
    Strategy,
    Workload,
)
from core.training.activations import recomputed_share  # noqa: E402
from core.training.compute import compute_dtype, host_floor_step  # noqa: E402
from core.training.efficiency import FIXED, PRIORS, TIES, coefficient, derived  # noqa: E402
from core.training.flops import token_flops  # noqa: E402
from core.training.host import host_step  # noqa: E402
from core.training.speed import Work, step_work  # noqa: E402

CORPUS = ROOT / "benchmarks" / "realgpu" / "throughput_figures.json"
# Issue 24's targets.
MEDIAN_TARGET = 10.0  # % |error| of tokens/s per GPU, every expressible figure
WORST_SHORT_TARGET = 25.0  # sequence ≤ 8k
WORST_LONG_TARGET = 35.0  # beyond 8k
FLOPS_TARGET = 2.0  # % from each source's own formula
SCALING_TARGET = 3.0  # points
SHORT = 8192

FAMILIES = {
    "torchtitan": "torchtitan (+ Trainy)",
    "trainy-torchtitan-h200": "torchtitan (+ Trainy)",
    # torchao's float8 table: the PyTorch team again, trained with torchtitan on Meta's H100, so it
    # is left out together with torchtitan, not scored on coefficients torchtitan's rows fitted.
    "torchao-float8": "torchtitan (+ Trainy)",
    "torchtune": "torchtune",
    "mosaicml-llm-foundry": "MosaicML",
    "nvidia-nemo-24.07": "NVIDIA",
    "nvidia-megatron-bridge": "NVIDIA",
    "nvidia-megatron-lm-llama-example": "NVIDIA",
    "ibm-fms-fsdp": "IBM",
    "tinyllama": "TinyLlama",
    "ai2-olmo-core": "AI2",
    "bigscience-bloom": "BigScience",
    "hf-peft-method-comparison": "HF PEFT",
    "internlm": "InternLM",
    "vectorlm": "VectorLM",
    "flagperf-paddle": "FlagPerf (PaddlePaddle)",
    "colossalai": "Colossal-AI",
    "nanotron": "Hugging Face nanotron",
    "qwen-finetune-profile": "Qwen (Alibaba)",
    "answerai-fsdp-qlora": "Answer.AI fsdp_qlora",
    "hf-optimum-benchmark-llamas": "HF optimum-benchmark",
    "prime-rl": "Prime Intellect prime-rl",
    "fast-llm": "ServiceNow Fast-LLM",
}
# Sources held out of every fit: no coefficient is ever tuned on them, in the leave-one-source-out
# fits or the all-source one (efficiency.FITTED), and they are scored with the all-source fit.
# They were added after the time model's rules and coefficients were settled, to test it on code,
# people and machines it never saw (docs/TRAINING_TIME.md, "Held-out sources"):
# - InternLM (Shanghai AI Laboratory): its own trainer (hybrid ZeRO-1, flash-attn and apex
#   kernels), InternLM-7B on up to 1024 A100 80GB;
# - VectorLM (Vector Institute): a thin FSDP1 wrapper over Hugging Face models, Llama-3-8B on one
#   to four A100 80GB, full fine-tuning and LoRA;
# - FlagPerf (BAAI) running PaddlePaddle 2.5.1 / PaddleNLP: LLaMA-7B and 13B on one node of 8 A100,
#   ZeRO-1/2 sharding, tensor and pipeline parallel, fp16 O2;
# - Colossal-AI (HPC-AI Tech), its README's benchmark table: Llama-like 7B and 70B on 8 and 16 H200 / B200,
#   its HybridParallelPlugin's ZeRO-2, and ZeRO-1 with tensor and pipeline parallel (added 2026-12-04);
# - nanotron (Hugging Face), its README's benchmark figure: the Ultra-Scale Playbook's best layout per model
#   (1.3B to 80B) and node count (1 to 64 nodes of 8 H100), DP / TP with sequence parallel / PP, ZeRO-0/1 (2026-12-04);
# - Qwen (Alibaba), its v1 README's profiling of finetune.py: Hugging Face Trainer + PEFT LoRA (rank 64, every linear)
#   on one A100-SXM4-80G, Qwen-1.8B / 7B / 14B, sequence 256 to 8192, batch 1 x accumulation 8 (2026-12-05): the
#   one-GPU fine-tuning runs the product's users launch (docs/TRAINING_TIME.md, "Qwen's fine-tuning profile");
# - Answer.AI's fsdp_qlora benchmark note: its own FSDP1 train.py, LoRA and QLoRA (bitsandbytes NF4) of Llama-2 7B,
#   Llama-2 70B, Yi 34B and Mistral 7B on two RTX 4090 and 2 to 8 cloud cards, fixed-length dummy samples (2026-12-05);
# - Hugging Face's optimum-benchmark training-llamas example: Trainer on Llama-2 7B / 13B, full fp16, LoRA r8 and 4-bit
#   bitsandbytes LoRA at 256 tokens, batch 1 to 16, one A100 80GB and one RTX 4090 (2026-12-05);
# - Prime Intellect's prime-rl benchmark baselines: its own FSDP2 SFT trainer (per-layer torch.compile, full
#   checkpointing, fake packed data) on Qwen3-0.6B / 4B / 30B-A3B, one RTX A6000 or H100, eight H100 / H200 / B200
#   (2026-12-07);
# - ServiceNow's Fast-LLM, its quick-start tables and README example: its own ZeRO-1/2 engine and Triton kernels,
#   SmolLM2-135M on 8 V100 / H100, Llama-3.1-8B and Mistral-7B on 32 H100 (2026-12-07).
HELD_OUT_SOURCES: Final = frozenset(
    {
        "internlm",
        "vectorlm",
        "flagperf-paddle",
        "colossalai",
        "nanotron",
        "qwen-finetune-profile",
        "answerai-fsdp-qlora",
        "hf-optimum-benchmark-llamas",
        "prime-rl",
        "fast-llm",
    }
)
# Held-out sources whose FLOPs per token join the check against their own formula (source_flops): prime-rl's
# PerfCounter, read at 8718eb14 (_prime_rl_flops); Fast-LLM's get_tflops, read at f13ec062 (_fast_llm_flops);
# InternLM's get_megatron_flops at c18bec93 (_internlm_flops); Colossal-AI's PerformanceEvaluator at e5fdefa6
# (_colossalai_flops); nanotron's get_flops at c2528430 (_nanotron_flops).
HELD_OUT_FLOPS_CHECKED: Final = frozenset({"prime-rl", "fast-llm", "internlm", "colossalai", "nanotron"})
# The held-out sources that publish tokens/s, samples/s or a step time and no FLOPs, TFLOP/s or MFU (no formula of
# theirs to check ours against): VectorLM (no FLOPs counter anywhere in the repository at 9045f08a), FlagPerf's Paddle
# LLaMA table (samples/s and memory), Qwen's profile (s/it), Answer.AI's note (seconds for 1,024 samples),
# optimum-benchmark's reports (samples/s).
HELD_OUT_TOKENS_ONLY: Final = frozenset(
    {"vectorlm", "flagperf-paddle", "qwen-finetune-profile", "answerai-fsdp-qlora", "hf-optimum-benchmark-llamas"}
)
# The weight of the priors in the fit, against one family's whole weight.
RIDGE = 0.02
# The weight of the ties (efficiency.TIES), in the same units: stronger than the priors.
TIE = 0.2


# ---- records to plans ---------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    record: Mapping[str, Any]
    plan: Plan
    observed_step: float  # seconds per optimizer step the figure implies
    assumptions: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def family(self) -> str:
        return FAMILIES[self.record["source_id"]]

    @property
    def seq(self) -> int:
        return self.plan.workload.seq_len

    @property
    def tokens_per_step(self) -> float:
        return float(self.plan.effective_batch * self.plan.workload.seq_len)

    def per_gpu(self, step: float) -> float:
        return self.tokens_per_step / (step * self.plan.world_size)


class NotExpressible(Exception):
    """A record the plan cannot describe, with the missing capability."""


# ALiBi: BLOOM-176B's README trains with --position-embedding-type alibi (the record's alibi_note);
# so did the Feb-2022 prequel runs: the slurm script of the same day as their logs (10 nodes, TP 8,
# PP 10, MBS 1, GBS 2048, NLAYERS=80, NHIDDEN=14400, NHEADS=96) passes "--position-embedding-type
# alibi" with --checkpoint-activations and ZeRO stage 1 (bigscience-workshop/bigscience@217dc6c,
# 2022-02-17 "a100", train/tr11-200B-ml/tr11-200B-ml.slurm); the one-node 20B rows are that script
# with 8 layers, 32 heads and PP 1 (chronicles-prequel.md '## Best TFLOPs').
PREQUEL = "bigscience-prequel-"
# MPT's norms in every MosaicML table are LPLayerNorm (ModelSpec.low_precision_layernorm): the benchmark
# script sets them for every run it submits, parameters['model']['low_precision_layernorm'] = True
# (mosaicml/examples 71dd21bd examples/llm/throughput/submit_benchmarks.py L270, MosaicGPT's
# layernorm_class, composer 0.13.2's LPLayerNorm) and parameters['model']['norm_type'] =
# 'low_precision_layernorm' (mosaicml/llm-foundry b2a43a147, 5e85bd62d and 495218376
# scripts/train/benchmarking/submit_benchmarks.py L307; norm_1, norm_2 and norm_f of MPTBlock / MPTModel,
# llmfoundry/models/layers/norm.py LPLayerNorm); the Jan-2024 sweep.py calls that script, and its FP8 rows
# change only fc_type.
LOW_PRECISION_NORM_SOURCES: Final = frozenset({"mosaicml-llm-foundry"})
# MPT computes q, k and v with one fused Wqkv linear (ModelSpec.fused_qkv: one d × 3d GEMM, one output
# kept for the backward) in every MosaicML table: MosaicGPT's MultiheadAttention
# ``self.Wqkv = nn.Linear(self.d_model, 3 * self.d_model, device=device)`` and ``qkv = self.Wqkv(x)``
# (mosaicml/examples 71dd21bd examples/llm/src/models/layers/attention.py L267, L307: both A100 tables);
# MPT's GroupedQueryAttention (MultiheadAttention with kv_n_heads = n_heads, the default attn_type)
# ``self.Wqkv = FC_CLASS_REGISTRY[fc_type](self.d_model, self.d_model + 2 * self.kv_n_heads * self.head_dim)``
# and ``qkv = self.Wqkv(x)`` (mosaicml/llm-foundry b2a43a147 llmfoundry/models/layers/attention.py L518, L562:
# the H100 BF16 / FP8 tables; 5e85bd62d L559, L606: the large-scale table; build_fc at 495218376 L423, L474).
# Its MLP is not gated and not fused: mlp_up / mlp_down (71dd21bd examples/llm/src/models/layers/gpt_blocks.py
# L23, L25), MPTMLP up_proj / down_proj (llmfoundry/models/layers/ffn.py b2a43a147 L35, L41; 5e85bd62d L103,
# L109), ffn_type 'mptmlp' by default (configuration_mpt.py b2a43a147 L25, 5e85bd62d L24), which the size
# YAMLs and submit_benchmarks.py keep.
# InternLM's MHA computes q, k and v with one Wqkv too: ``self.Wqkv = ColumnParallelLinear(embed_dim,
# 3 * embed_dim, ..., bias=True)`` (InternLM/InternLM@c18bec93 internlm/model/multi_head_attention.py L79-84).
# nanotron's Llama merges them too, ``self.qkv_proj = TensorParallelColumnLinear(...)`` over q, k and v, and its
# gate and up projections, ``self.gate_up_proj`` (huggingface/nanotron@c2528430 src/nanotron/models/llama.py
# L384, L223).
# Qwen (v1) too: ``self.c_attn = nn.Linear(config.hidden_size, 3 * self.projection_size)`` (with bias) and
# ``mixed_x_layer = self.c_attn(hidden_states)`` (Qwen/Qwen-7B modeling_qwen.py QWenAttention, the Hub's remote code,
# which finetune.py loads with trust_remote_code=True; QwenLM/Qwen@2df8e8ac finetune.py L307-310).
FUSED_QKV_SOURCES: Final = frozenset({"mosaicml-llm-foundry", "internlm", "nanotron", "qwen-finetune-profile"})
FUSED_GATE_UP_SOURCES: Final = frozenset({"nanotron"})


def model_of(record: Mapping[str, Any]) -> tuple[ModelSpec, list[str]]:
    """A catalogue model, or one built from the record's dimensions: a feed-forward of 4·d is
    a GELU MLP (MPT, GPT-3, Nemotron, BLOOM: LayerNorm, and MPT's and BLOOM's tied embeddings,
    MPT's learned positions, BLOOM-176B's ALiBi), any other width a gated SwiGLU (Llama-like,
    RMSNorm)."""
    notes: list[str] = []
    if record.get("catalogue_id"):
        return find_model(record["catalogue_id"]).spec, notes
    dims = record.get("model_dims")
    if not dims:
        raise NotExpressible("no catalogue model and no dimensions")
    d, heads = int(dims["hidden"]), int(dims["heads"])
    # nanotron's 1.3B is SwiGLU with an ffn of exactly 4·d: a record may say so (model_dims.gated).
    gated = bool(dims["gated"]) if "gated" in dims else int(dims["ffn"]) != 4 * d
    name = str(record["model"])
    tied = name.startswith(("MPT", "BLOOM")) or bool(dims.get("tie_embeddings"))
    spec = ModelSpec(
        name=name,
        family="llama" if gated else "gpt",
        vocab_size=int(dims["vocab"]),
        hidden_size=d,
        num_layers=int(dims["layers"]),
        num_heads=heads,
        num_kv_heads=int(dims["kv_heads"]),
        head_dim=d // heads,
        intermediate_size=int(dims["ffn"]),
        gated_mlp=gated,
        tie_embeddings=tied,
        norm="rmsnorm" if gated else "layernorm",
        learned_positions=int(dims.get("learned_pos_emb_rows") or 0),
        alibi=bool(dims.get("alibi")) or str(record["id"]).startswith(PREQUEL),
        low_precision_layernorm=not gated and record["source_id"] in LOW_PRECISION_NORM_SOURCES,
        fused_qkv=record["source_id"] in FUSED_QKV_SOURCES,
        fused_gate_up=gated and record["source_id"] in FUSED_GATE_UP_SOURCES,
        qkv_bias=bool(dims.get("qkv_bias")),
        o_bias=bool(dims.get("o_bias")),
        max_position_embeddings=max(4096, int(record.get("seq_len") or 0)),
    )
    published = dims.get("params")
    if published:
        ours = spec.architecture_params()
        if abs(ours / published - 1) > 0.02:
            notes.append(f"parameters from the dimensions {ours:.4g} vs the record's {published:.4g}")
    return spec, notes


_STRATEGY = {
    "fsdp": Strategy.FSDP,
    "fsdp2": Strategy.FSDP,
    "hsdp": Strategy.FSDP,
    "zero1": Strategy.ZERO1,
    "zero2": Strategy.ZERO2,
    "none": Strategy.DDP,
    None: Strategy.ZERO1,  # NeMo 24.07: Megatron's distributed optimizer (README)
}
_STACK = {
    "torchtitan-eager": Stack.EAGER,
    "torchtitan-compile": Stack.COMPILE,
    "llm-foundry": Stack.EAGER,  # Composer + FSDP1, flash-attn, no torch.compile
    "nemo": Stack.MEGATRON,
    "megatron": Stack.MEGATRON,
    "deepspeed": Stack.MEGATRON,  # Megatron-DeepSpeed: Megatron's fused kernels
    # InternLM (Jul 2023): PyTorch 1.13 eager, no torch.compile. Some chains are fused kernels (apex's
    # MixedFusedRMSNorm, flash-attn's rotary and cross-entropy), the SwiGLU is eager
    # (``self.w3(F.silu(self.w1(x)) * self.w2(x))``, internlm/model/linear.py L175) and so are the
    # residual adds: timed as eager, the stack it mostly is (docs/TRAINING_TIME.md, "Held-out sources").
    "internlm": Stack.EAGER,
    "hf-fsdp1": Stack.EAGER,  # VectorLM: Hugging Face modeling code under FSDP1, no torch.compile
    "paddle": Stack.EAGER,  # FlagPerf: PaddlePaddle 2.5.1 dynamic graph (PaddleNLP's LLaMA), no compiler
    # Colossal-AI 0.5.0: Shardformer over Hugging Face's Llama, no torch.compile; its FusedRMSNorm is the one fused
    # kernel (HybridParallelPlugin(enable_fused_normalization=True), hpcaitech/ColossalAI@e5fdefa6
    # examples/language/llama/benchmark.py): timed as eager, as InternLM's partly fused stack is.
    "colossalai": Stack.EAGER,
    # nanotron: eager PyTorch with some fused kernels (TritonRMSNorm, flash-attn's rotary), its SwiGLU
    # ``self.act(gate_states) * up_states`` eager (huggingface/nanotron@c2528430 models/llama.py L199-201), no compiler.
    "nanotron": Stack.EAGER,
    # Hugging Face Trainer over transformers / remote modeling code and PEFT, no torch.compile (Qwen's finetune.py).
    "hf-trainer": Stack.EAGER,
    # Answer.AI's train.py: Hugging Face modeling code under FSDP1 in its own loop, no torch.compile.
    "answerai-fsdp": Stack.EAGER,
    # prime-rl: ``model.model.layers[layer_id].compile()`` for every decoder layer under --model.compile, the embedding,
    # head and loss eager (PrimeIntellect-ai/prime-rl@8718eb14 src/prime_rl/trainer/model.py apply_compile L400-405).
    "prime-rl": Stack.COMPILE,
}
# Sources that run hand-fused kernels without torch.compile: their elementwise passes are the ones
# each fused kernel makes (read its inputs once, write its outputs once), which is what the compiled
# stack counts (core.training.speed COMPILE_*), not eager PyTorch's op-by-op chains. TinyLlama:
# "fused layernorm. fused swiglu. fused cross entropy loss. fused rotary positional embedding." from
# the FlashAttention repo and xformers (jzhang38/TinyLlama@8148930 README.md; lit_gpt/model.py
# imports flash_attn_func, xformers.ops.SwiGLU and fused_rotary_embedding.apply_rotary_emb_func).
# Fast-LLM: its Triton kernels for the MLP activation, normalization, rotary and cross-entropy
# (ServiceNow/Fast-LLM@f13ec062 fast_llm/functional/triton/*.py, TritonConfig.TRITON_ENABLED True), flash-attn 2, no
# torch.compile (compile_all False).
_FUSED_KERNELS = {"tinyllama": Stack.COMPILE, "fast-llm": Stack.COMPILE}
# LoRA settings the records state in their assumptions (the recipe configs they pin).
_LORA = {
    "torchtune-8b-lora-1x4090": (8, ("q_proj", "v_proj")),
    "torchtune-8b-lora-1xa6000": (8, ("q_proj", "v_proj")),
    "torchtune-8b-qlora-1x4090": (8, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "torchtune-70b-lora-8xa100": (16, ("q_proj", "k_proj", "v_proj")),
    "torchtune-405b-qlora-8xa100": (16, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "torchtune-flags-3b-a100-lora": (64, ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "torchtune-flags-3b-a100-qlora": (64, ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
}
# A source's LoRA settings for all its rows. VectorLM: profiling/configs/lora-benchmark.yaml
# ``lora_peft_config: r: 8, lora_alpha: 32, lora_dropout: 0.1`` with no target_modules, so PEFT's
# default for Llama, q_proj and v_proj (VectorInstitute/vectorlm@9045f08;
# peft TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
# Qwen's finetune.py: ``LoraArguments`` r=64, lora_alpha=16, lora_dropout=0.05, target_modules ["c_attn", "c_proj",
# "w1", "w2"] (QwenLM/Qwen@2df8e8ac finetune.py L53-58): PEFT matches the suffix c_proj in both attn.c_proj and
# mlp.c_proj, so every linear of the block is adapted: q/k/v (fused c_attn), o, the two up projections and the down.
_SOURCE_LORA: Final[dict[str, dict[str, Any]]] = {
    "vectorlm": {"rank": 8, "alpha": 32.0, "dropout": 0.1, "targets": ("q_proj", "v_proj")},
    "qwen-finetune-profile": {
        "rank": 64,
        "alpha": 16.0,
        "dropout": 0.05,
        "targets": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    },
    # Answer.AI's train.py: lora_rank 64, lora_alpha 16, lora_dropout 0.1, lora_target_modules "all" = k, q, v, up,
    # down and gate projections, no o_proj (AnswerDotAI/fsdp_qlora@d7818ec8 train.py L965-968, L1000-1001).
    # optimum-benchmark's training-llamas reports: peft_config r 8, lora_alpha 8, lora_dropout 0, target_modules None,
    # PEFT's default for Llama (q_proj, v_proj) (huggingface/optimum-benchmark@3c753205 artifacts/*/full_report.csv).
    "hf-optimum-benchmark-llamas": {"rank": 8, "alpha": 8.0, "dropout": 0.0, "targets": ("q_proj", "v_proj")},
    "answerai-fsdp-qlora": {
        "rank": 64,
        "alpha": 16.0,
        "dropout": 0.1,
        "targets": ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"),
    },
}
# Plan settings a source's code fixes beyond the record's schema. Qwen's finetune.py: ``optim: str =
# field(default="adamw_torch")`` (QwenLM/Qwen@2df8e8ac finetune.py L42), torch.optim.AdamW, foreach on CUDA in the
# PyTorch 2.0 the README names; Trainer's max_grad_norm 1.0 clips every step; flash-attn 2 ("Flash attention 2 is
# applied", README 'Profiling of Memory and Speed').
_SOURCE_PLAN: Final[dict[str, dict[str, Any]]] = {
    "qwen-finetune-profile": {
        "optimizer_impl": OptimizerImpl.FOREACH,
        "grad_clip": True,
        "attention": Attention.FLASH,
    },
    # Answer.AI's train.py: ``torch.optim.AdamW(..., fused=args["optimizer"]=="fused_adamw")`` with the default
    # "adamw" (fused False: foreach), no clipping by default (AnswerDotAI/fsdp_qlora@d7818ec8 train.py L459-461, L971).
    "answerai-fsdp-qlora": {"optimizer_impl": OptimizerImpl.FOREACH},
    # optimum-benchmark's Trainer runs: adamw_torch (foreach), max_grad_norm 1.0, transformers 4.33 / 4.35's eager
    # LlamaAttention (use_flash_attention_2 False), and BitsAndBytesConfig(load_in_4bit=True, compute float16) with
    # transformers' defaults: bnb_4bit_quant_type "fp4", no double quantisation.
    "hf-optimum-benchmark-llamas": {
        "optimizer_impl": OptimizerImpl.FOREACH,
        "grad_clip": True,
        "attention": Attention.EAGER,
        "quant": Quant.FP4,
        "double_quant": False,
    },
    # prime-rl's SFT trainer: ``AdamW(params, lr, weight_decay=config.weight_decay, betas=...)`` with no fused/foreach
    # argument (foreach on CUDA), weight_decay 0.01, torchtitan's clip_grad_norm_ at max_norm 1.0 every step
    # (PrimeIntellect-ai/prime-rl@8718eb14 src/prime_rl/trainer/optim.py L57-62, trainer/config.py L362-363,
    # sft/train.py L290); transformers' flash_attention_2 / _3 (--model.attn): FLASH, or FLASH3 (case_of) since h81attn.
    "prime-rl": {
        "optimizer_impl": OptimizerImpl.FOREACH,
        "grad_clip": True,
        "weight_decay": 0.01,
        "attention": Attention.FLASH,
    },
    # Fast-LLM: its fused Adam (fast_llm/core/kernels.py fused_adam) after clipping at gradient_norm_clipping 1.0, the
    # clamped coefficient applied to every gradient every step (fast_llm/engine/optimizer/optimizer.py L69-118 at
    # f13ec062); weight_decay 0.1 in the Big and Mistral configs (the Small one's default 0.01 is folded in alike).
    "fast-llm": {"optimizer_impl": OptimizerImpl.FUSED, "grad_clip": True, "weight_decay": 0.1},
}

# The optimizer each fitted source's code ran at the commit its figures cite: the implementation, whether it clips
# and its weight decay (core.training.speed.UNFUSED_PASSES, CLIP_GRAD_PASSES, WEIGHT_DECAY_PASSES; docs/
# TRAINING_TIME.md, "The optimizer each fitted source ran"). torchtitan by the date of the code that ran:
# - Apr 2024 (1ea476e9 train.py L86-98, the A100 rows of docs/performance.md): ``AdamW(..., weight_decay=0.1,
#   foreach=True)``;
# - Aug 2024 (3faaa1a0 torchtitan/optimizer.py L23-31, the 405B rows) and Dec 2024 (9dec370a optimizer.py L132-138,
#   config_manager.py L194-197, the 202412 file's rows): ``fused=job_config.optimizer.fused, foreach=not fused``
#   with ``--optimizer.fused`` off unless given (store_true; the train_configs' [optimizer] do not set it):
#   foreach, weight_decay 0.1;
# - from 6e498855 (2025-02-24, "use Fused AdamW as default", #881) ``implementation = "fused"``: the asyncTP file's
#   code (820504e2 config_manager.py L136-139: weight_decay 0.1, implementation "fused"), Trainy's (e7c0cae9, the
#   same) and torchao's float8 table (torchao 0.10.0+git890e0ac8 of 2025-02-28, added 2025-03-12 in pytorch/ao
#   8c81863b: torchtitan's main after #881).
# Every torchtitan row clips (``training.max_norm`` 1.0, config_manager at each commit; foreach clip_grad_norm_).
# The files (the records' location) whose rows ran foreach code: the 202412 file (added at 820504e2, measured with
# 9dec370a) and docs/performance.md at 3faaa1a0; the asyncTP file (2887250b, measured with 820504e2) ran fused.
_TORCHTITAN_FOREACH_CODE: Final = (
    "820504e20d1149fbf0b98c567af24c4b0433b22d",
    "3faaa1a0dee68ce028400e3dafd1735d152cb4f8",
)
_TORCHTITAN: Final[dict[str, Any]] = {"grad_clip": True, "weight_decay": 0.1}
_SOURCE_OPTIMIZER: Final[dict[str, dict[str, Any]]] = {
    "trainy-torchtitan-h200": {**_TORCHTITAN, "optimizer_impl": OptimizerImpl.FUSED},
    "torchao-float8": {**_TORCHTITAN, "optimizer_impl": OptimizerImpl.FUSED},
    # llm-foundry's MPT yamls (495218376 scripts/train/yamls/pretrain/mpt-*.yaml L60-71, which submit_benchmarks.py
    # runs): ``decoupled_adamw``, weight_decay 0.0, gradient_clipping norm 1.0. Composer's DecoupledAdamW
    # (mosaicml/composer@910223ee composer/optim/decoupled_weight_decay.py L216-264) updates one parameter at a time
    # (mul_, add_, mul_, addcmul_, sqrt, div, add_, addcdiv_: 20 passes against torch's for-loop 18, the two more
    # not counted), and clips through FSDP's clip_grad_norm_ (composer/algorithms/gradient_clipping L44-49).
    "mosaicml-llm-foundry": {"optimizer_impl": OptimizerImpl.FORLOOP, "grad_clip": True, "weight_decay": 0.0},
    # fms-fsdp (4ffb9bdf and ed74fd5d main_training.py L118-119 / L113-114): ``optim.AdamW(..., weight_decay=0.1)``,
    # torch's default foreach; ``model.clip_grad_norm_(cfg.grad_clip_thresh)`` 1.0 (fms_fsdp/config/training.py,
    # utils/train_utils.py L73 / L93).
    "ibm-fms-fsdp": {"optimizer_impl": OptimizerImpl.FOREACH, "grad_clip": True, "weight_decay": 0.1},
    # TinyLlama (8148930f pretrain/tinyllama.py L43-46, L144-145, L229): ``torch.optim.AdamW(..., weight_decay=0.1,
    # foreach=False)``, the for-loop; fabric.clip_gradients max_norm 1.0.
    "tinyllama": {"optimizer_impl": OptimizerImpl.FORLOOP, "grad_clip": True, "weight_decay": 0.1},
    # OLMo-core (c2be557a src/scripts/train/OLMo-*.py L120-153): AdamWConfig(weight_decay=0.1, embeddings 0.0),
    # foreach and fused None (src/olmo_core/optim/__init__.py L99-102: torch's default, foreach over DTensors),
    # GradClipperCallback(max_grad_norm=1.0).
    "ai2-olmo-core": {"optimizer_impl": OptimizerImpl.FOREACH, "grad_clip": True, "weight_decay": 0.1},
    # PEFT's method comparison (5d602fdb method_comparison/MetaMathQA/run.py L282-285, utils.py L285-295,
    # default_training_params.json): torch.optim.AdamW at torch's default (foreach), grad_norm_clip 1.0, the LoRA
    # rows' optimizer_kwargs weight_decay 0.1 (the full fine-tuning row's sets none: AdamW's own 0.01).
    "hf-peft-method-comparison": {"optimizer_impl": OptimizerImpl.FOREACH, "grad_clip": True, "weight_decay": 0.1},
}
# torchtune's recipes (30b8519e, 1814feb1 recipes/configs/llama3_1/*.yaml, llama3_2/*.yaml): torch.optim.AdamW with
# ``fused: True`` (LoRA weight_decay 0.01, folded into the fused kernel) or bitsandbytes' PagedAdamW8bit, no
# clip_grad_norm: the defaults already. BLOOM (39ed8110 train/tr11-176B-ml/tr11-176B-ml.slurm L85-95: --clip-grad 1.0,
# --weight-decay 1e-1) and NVIDIA's Megatron rows (clip_grad 1.0 by default) run a fused Adam that folds the decay in
# (core.training.speed._torch_optim), and their clipping is not torch's: the norm is read every step, the gradients
# scaled only when it exceeds the bound (Megatron's clip_grad_by_total_norm_fp32 and DeepSpeed's
# clip_tensors_by_global_norm: ``if clip_coeff < 1.0``), 1 to 3 passes the plan's grad_clip (always 3) cannot say:
# not mapped. Composer and FSDP's clip_grad_norm_ multiply by the clamped coefficient every step, as torch's does.


def _optimizer_plan(record: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer settings the record's code ran (_SOURCE_OPTIMIZER; torchtitan's by its code's date)."""
    source = record["source_id"]
    if source == "torchtitan":
        foreach = any(record["location"].startswith(f"pytorch/torchtitan@{c}") for c in _TORCHTITAN_FOREACH_CODE)
        return {**_TORCHTITAN, "optimizer_impl": OptimizerImpl.FOREACH if foreach else OptimizerImpl.FUSED}
    settings = dict(_SOURCE_OPTIMIZER.get(source, {}))
    if source == "hf-peft-method-comparison":
        if record["id"].endswith("-lorafa"):  # peft/optimizers/lorafa.py LoraFAOptimizer: one parameter at a time
            settings["optimizer_impl"] = OptimizerImpl.FORLOOP
        if "full-finetuning" in record["id"]:  # optimizer_kwargs {"lr": 1e-05}: torch.optim.AdamW's 0.01
            settings["weight_decay"] = 0.01
    return settings


def _batch(record: Mapping[str, Any], dp: int, notes: list[str]) -> tuple[int, int]:
    """Micro-batch and accumulation: as published, or from the global batch."""
    micro, accum, global_batch = record.get("micro_batch"), record.get("grad_accum"), record.get("global_batch")
    if micro is None:
        micro = 1
        notes.append("micro-batch 1 (pipeline micro-batches of one sequence: torchtitan's default)")
    if accum is None:
        accum = max(1, int(global_batch) // (micro * dp)) if global_batch else 1
        notes.append(f"accumulation {accum} = global batch ÷ (micro-batch × data parallel)")
    elif global_batch and int(micro) * int(accum) * dp != int(global_batch):
        # The quoted global batch is the source's; a record's accumulation is our arithmetic on it
        # (mbridge-25.11 H100 gpt-oss-120b: GBS 512, MBS 4, PP 4 on 64 GPUs is DP 16 and 8
        # micro-batches; the record's 2 divided by the 64 GPUs, not the data-parallel degree).
        stated, accum = accum, max(1, int(global_batch) // (int(micro) * dp))
        notes.append(f"accumulation {accum} = global batch ÷ (micro-batch × data parallel), not the record's {stated}")
    return int(micro), int(accum)


def _checkpointing(record: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    kind = record.get("checkpointing")
    if kind is None:
        notes.append("checkpointing not stated: none assumed (NeMo's performance recipes for these models)")
        return {"checkpointing": False}
    if kind == "none":
        return {"checkpointing": False}
    if kind == "full":
        return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.FULL}
    if kind == "op-sac":
        return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.OP}
    notes.append("layer SAC every 2nd block assumed (k not stated)")
    return {"checkpointing": True, "checkpoint_policy": CheckpointPolicy.LAYER, "checkpoint_every": 2}


# The sources that train float8 with torchao's Float8Linear (torchtitan's float8 converter): the
# recipe is in the row's id (pytorch/ao@36027d82 benchmarks/float8/training/llama3.sh L34-39).
TORCHAO_FLOAT8_SOURCES: Final = frozenset({"torchtitan", "trainy-torchtitan-h200", "torchao-float8"})


def _float8(record: Mapping[str, Any]) -> Float8:
    if record.get("precision") != "fp8":
        return Float8.NONE
    if record["source_id"] in TORCHAO_FLOAT8_SOURCES:
        if "rowwise-gw-hp" in record["id"]:  # torchao's rowwise_with_gw_hp
            return Float8.ROWWISE_GW_HP
        return Float8.ROWWISE if "rowwise" in record["id"] else Float8.TENSORWISE
    # NeMo / Megatron (Transformer Engine), llm-foundry amp_fp8 (Transformer Engine); Megatron-Bridge's
    # tables name the MXFP8 recipe in their precision column ("MXFP8", "FP8-MX"; "FP8-CS (FP8-MX)"
    # gives the per-tensor current-scaling figure first, the one scored, MXFP8's in parentheses).
    if any(a in MXFP8_COLUMNS for a in record.get("assumptions") or ()):
        return Float8.TE_MXFP8
    # Transformer Engine's per-tensor recipe each source ran. Megatron-Bridge's performance scripts
    # run per-tensor fp8 as current scaling: "fp8_cs" → bf16_with_fp8_current_scaling_mixed
    # (NVIDIA-NeMo/Megatron-Bridge v0.2.0 .. v0.5.0 scripts/performance/utils/precision.py
    # get_precision_config; the tables' "FP8-CS", the configs' *_FP8_CS_* names); 25.09's rows are
    # inferred so (their records say why). NeMo 24.07 (fp8_amax_history_len 1024), Megatron-LM's
    # Llama example (Megatron-Core's TransformerConfig.fp8_recipe default "delayed") and llm-foundry's
    # amp_fp8 (Composer: TE's DelayedScaling) run delayed scaling.
    if record["source_id"] == "nvidia-megatron-bridge":
        return Float8.TE_CURRENT
    return Float8.TE


MXFP8_COLUMNS: Final = ("precision column: MXFP8", "precision column: FP8-MX")


# llm-foundry's benchmark runs: submit_benchmarks.py's --attn_impl defaults to triton (MPT's
# flash_attn_triton.py, built with triton-pre-mlir; setup.py pins flash-attn 1.0.9) in every
# table of 2023 (mosaicml/llm-foundry@b2a43a147); the Jan-2024 large-scale table's sweep.py
# passes --attn_impl flash (FlashAttention-2) for 1b, 3b, 7b and 70b and triton for 13b and 30b
# (mosaicml/llm-foundry@5e85bd62d scripts/train/benchmarking/sweep.py).
MOSAIC_FLASH2_LARGE_SCALE = ("-1b-", "-3b-", "-7b-", "-70b-")


def _attention(record: Mapping[str, Any]) -> Attention:
    source = record["source_id"]
    if source == "internlm":
        # third_party/flash-attention at d2f4324f (InternLM/InternLM@c18bec93), flash-attn 1.0.x: the
        # FlashAttention-2 release came after (Jul 17 2023), and the submodule moved to it later.
        return Attention.FLASH1
    if source == "fast-llm":
        # use_flash_attention yes (flash-attn 2) but on the V100 row ("FlashAttention was disabled"): torch attention.
        return Attention.EAGER if record.get("gpu_catalogue_id", "").startswith("v100") else Attention.FLASH
    if source == "bigscience-bloom":
        return Attention.EAGER  # 2022: Megatron-DeepSpeed's fused scale-mask-softmax, no flash attention
    if source == "mosaicml-llm-foundry":
        large_scale = "Large Scale" in str(record.get("location", ""))
        flash2 = large_scale and any(size in record["id"] for size in MOSAIC_FLASH2_LARGE_SCALE)
        return Attention.SDPA if flash2 else Attention.FLASH1
    return Attention.SDPA


# The sources whose loss is flash-attn's fused cross-entropy (the plan's ``flash_loss``): every MosaicML
# table. MPT's ComposerMPTCausalLM (ComposerMosaicGPT before the rename) builds
# flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index=-100) unless the model config sets
# ``loss_fn: torch_crossentropy`` (om_model_config.get('loss_fn', 'fused_crossentropy')): mosaicml/examples
# 71dd21bd examples/llm/src/models/mosaic_gpt/mosaic_gpt.py (the A100 40GB table's commit, flash-attn 0.2.8),
# mosaicml/llm-foundry b2a43a147 and 5e85bd62d llmfoundry/models/mpt/modeling_mpt.py (the later tables).
# Only the CPU and testing YAMLs set torch_crossentropy; the benchmark scripts (submit_benchmarks.py)
# build on the size YAMLs (125m ... 70b), which name no loss_fn.
# InternLM too: train.py builds ``FlashGPTLMLoss(parallel_output=True, ...)``, whose loss_fn is flash-attn's
# CrossEntropyLoss (InternLM/InternLM@c18bec93 train.py L385, internlm/model/loss.py L27-32).
FLASH_LOSS_SOURCES: Final = frozenset({"mosaicml-llm-foundry", "internlm"})


def _modules_to_save(record: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen's "LoRA (emb)" rows: finetune.py's ``modules_to_save = ["wte", "lm_head"]`` for a base (not Chat)
    model (QwenLM/Qwen@2df8e8ac finetune.py L331-334): PEFT trains full copies of both (the plan's
    lora.modules_to_save since branch h60mts; the source is held out, so the rows are scored, never fitted)."""
    if record["source_id"] == "qwen-finetune-profile" and "-lora-emb-" in record["id"]:
        from core.inputs import ModulesToSave

        return {"modules_to_save": ModulesToSave.BOTH}
    return {}


def _method(record: Mapping[str, Any]) -> dict[str, Any]:
    task = record.get("task")
    if task in ("lora", "qlora"):
        from core.plan import LoraSettings

        method = Method.QLORA if task == "qlora" else Method.LORA
        if record["source_id"] in _SOURCE_LORA:
            lora = LoraSettings(**_SOURCE_LORA[record["source_id"]], **_modules_to_save(record))
            return {"method": method, "lora": lora}
        rank, targets = _LORA.get(record["id"], (16, ("q_proj", "k_proj", "v_proj")))
        return {"method": method, "lora": LoraSettings(rank=rank, targets=targets)}
    return {"method": Method.FULL}


def _parallel(record: Mapping[str, Any], gpus: int, notes: list[str]) -> Parallelism:
    per_node = min(8, gpus)
    vp = record.get("vp") or 1
    sharding = record.get("sharding")
    inter = "ib-hdr200" if str(record.get("gpu_catalogue_id", "")).startswith("a100") else "ib-ndr400"
    if record["source_id"] == "bigscience-bloom":
        inter = "opa-100-4-per-node"  # Jean Zay's A100 nodes: 4 Omni-Path links per 8 GPUs (jz/hpc-specs.md)
    if record["source_id"] == "internlm":
        # "Inter-machine bandwidth | 4 * 100Gb RoCE" per 8-GPU node (doc/en/train_performance.md): 400 Gb/s
        # a node, 6.25 GB/s a GPU, the per-GPU rate (and 14 us hop) of the 4 × 100 Gb/s link above.
        inter = "opa-100-4-per-node"
    overlap = record.get("async_tp_or_overlap")
    if overlap is None and record.get("stack") == "deepspeed":
        # Megatron-DeepSpeed (BigScience, 2022) predates Megatron's tensor-parallel overlap
        # (--tp-comm-overlap, Transformer Engine's userbuffers, Megatron-Core 2023): every
        # tensor-parallel all-reduce waits.
        overlap = False
    # ... and sequence parallelism (Korthikanti et al., arXiv:2205.05198, May 2022, after the
    # Feb-2022 prequel logs and BLOOM's launch in March): the norms and dropouts run on every
    # tensor-parallel rank whole, and each stage sends its whole activation on.
    # PaddleNLP's LLaMA as FlagPerf ran it: sequence_parallel False (its config _base.py; no row sets it).
    # Colossal-AI's benchmark.py: enable_sequence_parallelism=args.sp > 1, and the table's layouts have no sp.
    sequence_parallel = record.get("stack") not in ("deepspeed", "paddle", "colossalai")
    if overlap is None and _STACK.get(record.get("stack") or "") is Stack.MEGATRON:
        overlap = True
        notes.append("tensor-parallel overlap on (NeMo's performance recipes)")
    offload = Offload.PARAMS if any("cpu_offload=True" in a for a in record.get("assumptions", ())) else Offload.NONE
    strategy, reshard = _STRATEGY[sharding], True
    if sharding == "zero2" and record["source_id"] == "mosaicml-llm-foundry":
        # FSDP1's SHARD_GRAD_OP (the table's Sharding Strategy column) is not DeepSpeed's ZeRO-2:
        # it "unshards before the forward, does not reshard them after the forward, and only
        # reshards them after the backward" (torch/distributed/fsdp/api.py, ShardingStrategy,
        # torch 2.1-2.2 as llm-foundry pinned them), its gathers and reduce-scatters prefetched
        # beside the compute: FSDP without resharding after the forward (FSDP2's
        # reshard_after_forward=False).
        strategy, reshard = Strategy.FSDP, False
    replicas = 1
    if sharding == "hsdp":
        # IBM fms-fsdp (foundation-model-stack/fms-fsdp@4ffb9bd main_training.py, fms_fsdp/utils/
        # train_utils.py get_policies) wraps with FSDP1 ShardingStrategy.HYBRID_SHARD and passes no
        # process group or device mesh, so FSDP1 shards within each node and replicates across
        # nodes (torch/distributed/fsdp/_init_utils.py: "we shard across intra-node", the
        # inter-node group "to allreduce across"): one replica per node.
        replicas = max(1, gpus // per_node)
        notes.append(f"HSDP: FSDP1's default hybrid groups, sharded within a node of {per_node}, {replicas} replicas")
    return Parallelism(
        offload=offload,
        nodes=max(1, gpus // per_node),
        gpus_per_node=per_node,
        strategy=strategy,
        reshard_after_forward=reshard,
        tensor_parallel=int(record.get("tp") or 1),
        pipeline_parallel=int(record.get("pp") or 1),
        context_parallel=int(record.get("cp") or 1),
        expert_parallel=int(record.get("ep") or 1),  # the table's EP column (Megatron's expert_model_parallel_size)
        dp_replicate=replicas,
        schedule=PipelineSchedule.INTERLEAVED if vp > 1 else PipelineSchedule.ONE_F_ONE_B,
        virtual_stages=int(vp),
        tp_overlap=bool(overlap),
        sequence_parallel=sequence_parallel,
        inter_link=inter,
        fsdp_param_dtype=_param_dtype(record),
        fsdp_reduce_dtype=_reduce_dtype(record),
        grad_reduce_in_fp32=_grad_reduce_in_fp32(record),
        grad_accum_fusion=_grad_accum_fusion(record),
        moe_dispatcher=_moe_dispatcher(record),
        zero_overlap_comm=_zero_overlap_comm(record),
        zero_bucket_elements=_zero_bucket_elements(record),
        stage_split=_stage_split(record),
    )


def _stage_split(record: Mapping[str, Any]) -> PipelineSplit:
    """How the source deals the blocks to its pipeline stages: nanotron's build_model by their compute cost
    (huggingface/nanotron@c2528430 src/nanotron/models/base.py L190-237, core.pipeline); the others evenly,
    Megatron-LM's and torchtitan's split (core.parallel.layout), not read here for the other sources."""
    return PipelineSplit.COMPUTE if record["source_id"] == "nanotron" else PipelineSplit.EVEN


def _zero_bucket_elements(record: Mapping[str, Any]) -> int:
    """The elements each ZeRO-1/2 gradient reduction carries, as the source's code buckets them (DeepSpeed's
    reduce_bucket_size, the plan's default, for the rest):
    - Colossal-AI's HybridParallelPlugin: ``reduce_bucket_size=zero_bucket_size_in_m * 1024 * 1024`` elements,
      ``zero_bucket_size_in_m: int = 12`` (hpcaitech/ColossalAI@e5fdefa6 hybrid_parallel_plugin.py L1030, L1244);
    - nanotron: its ZeRO-1 reduce-scatters in the DDP comm hook, one call per DDP bucket, ``bucket_cap_mb=
      config.model.ddp_bucket_cap_mb`` = 25 (MiB; huggingface/nanotron@c2528430 trainer.py L851, config.py L222,
      examples/config_tiny_llama_bench.yaml) of float32 accumulated gradients (accumulate_grad_in_fp32)."""
    if record["source_id"] == "colossalai":
        return 12 * 1024 * 1024
    if record["source_id"] == "nanotron":
        return 25 * 1024 * 1024 // 4
    if record["source_id"] == "fast-llm":
        # One stage a reduction, layers_per_stage 1.0: one block's gradients (ServiceNow/Fast-LLM@f13ec062
        # fast_llm/engine/multi_stage/config.py MultiStageConfig.layers_per_stage, schedule.py _setup_reduce_steps).
        return int(find_model(str(record["catalogue_id"])).spec.layer_params())
    return int(Parallelism().zero_bucket_elements)


def _zero_overlap_comm(record: dict[str, Any]) -> bool:
    """DeepSpeed's ``overlap_comm`` as a source's ZeRO-1 ran it. InternLM's HybridZeroOptimizer with
    ``zero_overlap_communication=True`` (InternLM/InternLM@c18bec93 configs/7B_sft.py) hooks each
    parameter's AccumulateGrad, fills buckets of ``reduce_bucket_size`` and reduces each full one on
    ``self._comm_stream`` during the backward, the rest at the step (internlm/solver/optimizer/
    hybrid_zero_optim.py ``_attach_reduction_hook``, ``_reduce_grads_stored_in_bucket``, ``step``),
    in the last micro-batch only (internlm/core/no_pipeline_scheduler.py sets ``skip_grad_reduce``
    for the others): what DeepSpeed ZeRO-1 does with ``overlap_comm`` (deepspeed/runtime/zero/
    stage_1_and_2.py ``reduce_ready_partitions_and_remove_grads``). BigScience's Megatron-DeepSpeed
    runs are timed on the Megatron stack, where the setting does not apply. Colossal-AI's HybridParallelPlugin
    passes ``overlap_communication=True`` (its default) to its LowLevelZeroOptimizer, which reduces each full
    bucket on a side stream during the backward (hpcaitech/ColossalAI@e5fdefa6
    colossalai/booster/plugin/hybrid_parallel_plugin.py L1033, L1244-1248; colossalai/zero/low_level/
    low_level_optim.py ``_attach_reduction_hook``) — without a pipeline only: ``execute_pipeline`` runs the whole
    schedule under ``optimizer.no_sync()`` and reduces every gradient after it, ``optimizer.sync_dp_grads()`` →
    ``_sync_grad`` (hybrid_parallel_plugin.py L1403-1431, low_level_optim.py L722-734), with no backward left
    to hide under."""
    if record["source_id"] == "colossalai":
        return int(record.get("pp") or 1) == 1
    # nanotron's ZeRO-1: its DDP comm hook reduce-scatters the fp32-accumulated gradients bucket by bucket in the last
    # micro-batch's backward, ``get_fp32_accum_hook(reduce_scatter=optimizer.inherit_from(ZeroDistributedOptimizer))``
    # (huggingface/nanotron@c2528430 src/nanotron/helpers.py L432-434).
    # Fast-LLM reduce-scatters each stage's gradients on its data stream after the stage's last backward step, beside
    # the rest of the backward (ServiceNow/Fast-LLM@f13ec062 fast_llm/engine/schedule/runner.py _reduce L449-458).
    return record["source_id"] in ("internlm", "nanotron", "fast-llm")


# The token dispatcher of each Megatron-Bridge MoE row whose release's recipe sets a flex backend
# (apply_flex_dispatcher_backend: moe_token_dispatcher_type "flex"); the rest ran "alltoall", the
# providers' default (NVIDIA-NeMo/Megatron-Bridge v0.2.0 src/megatron/bridge/models/qwen/
# qwen_provider.py; docs/TRAINING_TIME.md, "The Megatron-Bridge MoE rows", has each tag's line):
# - 26.02.01 B200 Qwen3: v0.3.1 (9c9dd8489) scripts/performance/configs/qwen/
#   qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1 (which the B200 FP8
#   configs alias) moe_flex_dispatcher_backend="hybridep"; the same, and H100_FP8_CS_V1's, at v0.4.0
#   and v0.4.2 (26.04, 26.04.01) and v0.5.0 (26.06);
# - 26.04 B200 gpt-oss: v0.4.0 (0fbfe7d3e) gpt_oss/gpt_oss_workload_base_configs.py
#   GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 moe_flex_dispatcher_backend="hybridep" (v0.4.2, 26.04.01,
#   drops it: alltoall).
# 26.02's H100 Qwen3 row (DeepEP, which its container lacks) and the rows whose table states another
# layout than their tag (26.02.01 H100 Qwen3 among them) are not comparable: each record's
# not_comparable_reason (docs/TRAINING_TIME.md, "The Megatron-Bridge MoE rows that are not comparable").
_FLEX_ROWS: Final = {
    "mbridge-26.02.01-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4": MoeDispatcher.HYBRIDEP,
    "mbridge-26.04-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4": MoeDispatcher.HYBRIDEP,
    "mbridge-26.04-pretrain-h100-qwen3_30b_a3b-fp8-16gpu-tp1pp1cp1-mbs1": MoeDispatcher.HYBRIDEP,
    "mbridge-26.04.01-pretrain-b200-qwen3_30b_a3b-mxfp8-8gpu-tp1pp1cp1-mbs4": MoeDispatcher.HYBRIDEP,
    "mbridge-26.04.01-pretrain-h100-qwen3_30b_a3b-fp8-16gpu-tp1pp1cp1-mbs1": MoeDispatcher.HYBRIDEP,
    "mbridge-26.06-pretrain-h100-qwen3_30b_a3b-fp8-16gpu-tp1pp1cp1-mbs1": MoeDispatcher.HYBRIDEP,
    "mbridge-26.04-pretrain-b200-gptoss120b-bf16-64gpu-tp1pp1cp1-mbs4": MoeDispatcher.HYBRIDEP,
}


def _moe_dispatcher(record: Mapping[str, Any]) -> MoeDispatcher:
    """The MoE token dispatcher the record's recipe ran (_FLEX_ROWS), else alltoall."""
    return _FLEX_ROWS.get(str(record["id"]), MoeDispatcher.ALLTOALL)


def _preset(record: Mapping[str, Any]) -> Preset:
    """The precision each source trained in. torchtune's recipes build the model in the config's
    ``dtype`` (``with training.set_default_dtype(self._dtype), torch.device("meta")``), with no
    autocast and no FSDP ``MixedPrecisionPolicy``: ``dtype: bf16`` (every row here) is pure bf16,
    parameters, gradients and AdamW's moments alike (pytorch/torchtune@015b39c
    recipes/full_finetune_distributed.py ``_setup_model``; the same in the single-device and LoRA
    recipes). The others: autocast over float32 masters (fp16 with a loss scaler where stated)."""
    if record["source_id"] == "qwen-finetune-profile":
        # finetune.py loads without torch_dtype and Qwen's remote code casts the model to bf16 on a bf16 card
        # (config.bf16 set when none of bf16 / fp16 / fp32 is); --bf16 True adds the Trainer's autocast.
        return Preset.TRAINER_BF16
    if record["source_id"] == "hf-optimum-benchmark-llamas":
        # torch_dtype float16 with no autocast and no fp16 flag: the fp16 weights train as they are (pure 16-bit),
        # planned as pure bf16, whose tensor-core rates and bytes are the same on the A100 and the RTX 4090.
        return Preset.PURE_BF16
    if record["source_id"] in ("torchtune", "vectorlm", "answerai-fsdp-qlora"):
        # Answer.AI: --precision bf16 loads the model in bf16 with no MixedPrecision policy (train.py L528-531).
        # VectorLM: ``model = model.bfloat16()`` before FSDP and AdamW over those parameters
        # (VectorInstitute/vectorlm@9045f08 profiling/benchmark.py), as torchtune's recipes do.
        return Preset.PURE_BF16
    return Preset.FP16_AMP if record.get("precision") == "fp16" else Preset.FP32_AUTOCAST_BF16


def _param_dtype(record: Mapping[str, Any]) -> MpDtype:
    """The dtype FSDP gathers parameters in (bf16 where none is read). TinyLlama ran Lightning
    2.1.2 (jzhang38/TinyLlama@8148930 requirements.txt) at its default "bf16-mixed"
    (lit_gpt/utils.py get_default_supported_precision), whose FSDP policy keeps float32
    parameters under autocast (Lightning-AI/pytorch-lightning 2.1.2
    src/lightning/fabric/plugins/precision/fsdp.py mixed_precision_config: param_dtype float32)."""
    return MpDtype.FP32 if record["source_id"] == "tinyllama" else MpDtype.BF16


def _reduce_dtype(record: Mapping[str, Any]) -> MpDtype:
    """The dtype each source's FSDP reduce-scatters gradients in (float32 where none is read):
    - IBM fms-fsdp: ``get_policies`` picks ``bfSixteen`` on bf16-capable cards
      (foundation-model-stack/fms-fsdp@4ffb9bd fms_fsdp/utils/train_utils.py), whose
      ``reduce_dtype`` is ``torch.bfloat16`` (fms_fsdp/policies/mixed_precision.py);
    - MosaicML's table, MP Mode column: composer's ``get_mixed_precision`` reduces in float32
      under DEFAULT and in the run's precision under PURE (mosaicml/composer v0.17.0
      composer/trainer/mosaic_fsdp_utils.py; unchanged at 640518880
      composer/distributed/mosaic_parallelism.py);
    - TinyLlama: Lightning 2.1.2's "bf16-mixed" FSDP policy reduces in bf16 (see _param_dtype);
    - torchtune: no ``MixedPrecisionPolicy``, so FSDP2 reduces in the bf16 parameters' dtype (_preset)."""
    if record["source_id"] in ("ibm-fms-fsdp", "tinyllama", "torchtune", "vectorlm", "answerai-fsdp-qlora"):
        # VectorLM: MixedPrecision(param_dtype, buffer_dtype, reduce_dtype all torch.bfloat16)
        # (VectorInstitute/vectorlm@9045f08 vectorlm/utils/model_utils.py L212-215).
        return MpDtype.BF16
    if (record.get("co_reported") or {}).get("mp_mode") == "PURE":
        return MpDtype.FP16 if record.get("precision") == "fp16" else MpDtype.BF16
    return MpDtype.FP32


def _grad_reduce_in_fp32(record: Mapping[str, Any]) -> bool:
    """Megatron-Core's gradient buffer dtype (``grad_reduce_in_fp32``) each NVIDIA release ran:
    - Megatron-Bridge's archive (25.09 ... 26.06.01): every performance config of the models here
      sets ``cfg.ddp.grad_reduce_in_fp32 = False`` and ``cfg.mixed_precision.grad_reduce_in_fp32 =
      False`` (NVIDIA-NeMo/Megatron-Bridge at the records' tags, scripts/performance/configs: v0.2.0
      llama3/llama3_llm_pretrain.py set_llama3_common_configs, llama3_llm_finetune.py,
      llama31/llama31_llm_pretrain.py, qwen3/qwen3_llm_pretrain.py, gpt_oss/gpt_oss_llm_pretrain.py;
      the same in llama/, qwen/, gpt_oss/ at v0.3.0, v0.3.1, v0.4.0, v0.4.2, v0.5.0, v0.5.1; 25.09's
      v0.1.0rc3 YAML, llama3_8b / llama3_70b / llama31_405b / qwen3_30b_a3b_llm_pretrain.yaml:
      ``grad_reduce_in_fp32: false``);
    - Megatron-LM's Llama example (bd32927 examples/llama/train_llama3_8b_h100_fp8.sh passes
      ``--bf16 --grad-reduce-in-bf16``; its README: "This configuration follows those defined in
      NeMo Framework's performance scripts", taken for its 70B and 405B rows too);
    - NeMo 24.07 (NeMo 1 YAML, not read here): float32, as before;
    - BigScience's Feb-2022 prequel runs: 16-bit. The chronicle of the same runs says the BF16
      optimizer "that was just written to accumulate gradients in fp32" came only after them (its
      02-28 "Rebalancing layers": "this is compared to fp16 which grad accumulates in fp16";
      bigscience-workshop/bigscience@39ed811 train/tr11-176B-ml/chronicles-prequel.md), so the
      02-17 fp16 and bf16 rows held their gradients in the model's dtype; BLOOM-176B ran that BF16
      optimizer (deepspeed/runtime/bf16_optimizer.py ``fp32_groups_gradients``): float32."""
    if str(record["id"]).startswith(PREQUEL):
        return False
    if record["source_id"] == "internlm":
        # HybridZeroOptimizer reduces the model's bf16 gradients in their dtype, ``reduce_tensor(tensor=flat,
        # dtype=self.dtype, ...)``, and casts to float32 only after (InternLM/InternLM@c18bec93
        # internlm/solver/optimizer/hybrid_zero_optim.py L412, L580).
        return False
    return record["source_id"] not in ("nvidia-megatron-bridge", "nvidia-megatron-lm-llama-example")


def _grad_accum_fusion(record: Mapping[str, Any]) -> bool:
    """Megatron's gradient accumulation fusion (the weight-gradient GEMM adds into main_grad; on
    unless --no-gradient-accumulation-fusion, NVIDIA/Megatron-LM d98e8a64 megatron/training/
    arguments.py; NeMo's and Megatron-Bridge's recipes keep it). BigScience ran Megatron-DeepSpeed,
    which has no such fusion (bigscience-workshop/Megatron-DeepSpeed@541b967: no
    fused_weight_gradient_mlp_cuda; under --deepspeed the engine owns the gradients) and whose
    DeepSpeed adds each micro-batch's gradients in a pass of its own."""
    return record["source_id"] != "bigscience-bloom"


def case_of(record: Mapping[str, Any]) -> Case:
    """The record as a Plan and the step time it implies (NotExpressible when it cannot be)."""
    if record.get("not_comparable_reason"):
        raise NotExpressible(f"not comparable: {record['not_comparable_reason']}")
    spec, notes = model_of(record)
    gpus = record.get("gpus")
    if gpus is None:
        gpus = 8
        notes.append("GPU count not stated: one node of 8")
    gpus = int(gpus)
    par = _parallel(record, gpus, notes)
    micro, accum = _batch(record, par.data_parallel, notes)
    stack = _STACK.get(record.get("stack") or "", Stack.COMPILE if record.get("compile") else Stack.EAGER)
    stack = _FUSED_KERNELS.get(record["source_id"], stack)
    preset = _preset(record)
    seq = int(record["seq_len"])
    try:
        plan = Plan(
            model=spec,
            preset=preset,
            workload=Workload(micro_batch=micro, seq_len=seq, grad_accum=accum, tokens=10**9),
            hardware=Hardware(gpu=str(record["gpu_catalogue_id"])),
            parallel=par,
            stack=stack,
            float8=_float8(record),
            attention=_attention(record),
            flash_loss=record["source_id"] in FLASH_LOSS_SOURCES,
            **_method(record),
            **_checkpointing(record, notes),
        )
        plan = replace(plan, **_optimizer_plan(record), **_SOURCE_PLAN.get(record["source_id"], {}))
        if record["source_id"] == "prime-rl" and "flash_attention_3" in record["location"]:
            plan = replace(plan, attention=Attention.FLASH3)  # transformers' flash_attention_3 (flash-attn 3.0.0b1)
        if record["source_id"] == "prime-rl" and spec.num_experts > 1:
            # prime-rl's own Qwen3-MoE: torchtitan's scatter-add MoE layer (src/prime_rl/trainer/models/layers/moe.py
            # at 8718eb14), as the memory corpus plans it (benchmarks/realgpu/mapping.py).
            plan = replace(plan, moe_layer=MoeLayer.TORCHTITAN_SCATTER)
    except PlanError as error:
        raise NotExpressible(f"the layout is refused: {error}") from None
    if record["metric"] == "step_time_s":
        observed = float(record["value"])
    elif record["metric"] == "tokens_per_s_total":
        observed = plan.effective_batch * seq / float(record["value"])
    elif record["metric"] == "samples_per_s_total":  # Colossal-AI's table: samples of seq tokens, all GPUs
        observed = plan.effective_batch / float(record["value"])
    elif record["metric"] == "mfu_percent":  # nanotron: the source's model FLOPs a token over the peak it names
        peak = float(record["mfu_peak_tflops"]) * 1e12
        per_gpu = float(record["value"]) / 100 * peak / float(record["source_flops_per_token"])
        observed = plan.effective_batch * seq / (per_gpu * plan.world_size)
    else:
        observed = plan.effective_batch * seq / (float(record["value"]) * plan.world_size)
    return Case(record, plan, observed, tuple(notes))


# ---- the model's step time, for any coefficients -----------------------------------------
@dataclass
class Prepared:
    """A case with its work (everything the coefficients do not change) computed once."""

    case: Case
    work: Work
    # (compute seconds, attention's share of them) -> (exposed but the overlapped TP traffic and
    # the DP contention, plus the host optimizer step of an offloaded plan; bubble, overlapped TP
    # traffic, overlapped DP traffic)
    comm: Callable[[float, float], tuple[float, float, float, float]]


# Meta's Grand Teton H100 (torchtitan's H100 rows): HBM2e at 2.4 TB/s, "custom to Meta's H100
# variant" (torchao/testing/training/roofline_utils.py, pytorch/ao 36027d8; the Dec-2024 file
# itself: "96GB HBM2e with 2.4 TB/sec peak memory bandwidth").
META_H100_BANDWIDTH_GB_S = 2400.0
# Its compute peak is not the SXM card's: the same card runs at "the default 500W power limit"
# (pytorch/torchtitan@820504e benchmarks/llama3_h100_202412_torchtitan.md, Hardware) and "the
# actual peak TFLOPs number is between SXM and NVL, and we don't know its exact value" (its
# footnote 2; docs/performance.md at 3faaa1a, footnote 1, says the same of the 95 GB card of its
# 405B rows). With only the interval known, the card is timed at its middle, per dtype, from the
# catalogue's two datasheet cards (h100-sxm 989.4, h100-nvl 835.5 dense bf16 TFLOP/s: 912.5).
# Not fitted: the interval's ends are printed in docs/TRAINING_TIME.md with the scores they give.
META_H100_PEAK_BETWEEN: Final = ("h100-sxm", "h100-nvl")
# The sources whose H100 is that card: torchtitan's tables, and torchao's float8 training table,
# run by the same PyTorch team with torchtitan (pytorch/ao@36027d82
# docs/source/workflows/training.md L56-63; benchmarks/float8/training/llama3.sh L56).
META_H100_SOURCES: Final = frozenset({"torchtitan", "torchao-float8"})


def meta_h100(gpu: GpuSpec) -> GpuSpec:
    """Meta's Grand Teton H100: its bandwidth, and its peak at the middle of the quoted interval."""
    high, low = (find_gpu(name) for name in META_H100_PEAK_BETWEEN)
    peaks: dict[str, float | None] = {}
    for dtype, top in high.tflops_dense.items():
        bottom = low.tflops_dense.get(dtype)
        peaks[dtype] = None if top is None or bottom is None else (top + bottom) / 2
    return replace(gpu, memory_bandwidth_gb_s=META_H100_BANDWIDTH_GB_S, tflops_dense=peaks)


def card_of(case: Case) -> GpuSpec:
    gpu = find_gpu(case.plan.hardware.gpu)
    if case.record["source_id"] in META_H100_SOURCES and gpu.id == "h100-sxm":
        return meta_h100(gpu)
    return gpu


def prepare(case: Case) -> Prepared:
    plan = case.plan
    counts = param_counts(plan)
    work = step_work(plan, counts, card_of(case))
    host = host_step(plan, counts)  # an offloaded plan's CPU optimizer step: waited for whole, not fitted
    host_seconds = host.seconds if host else 0.0

    def comm(compute: float, attention_share: float) -> tuple[float, float, float, float]:
        result = step_communication(plan, counts, compute, work.forward_share, 0.0, 0.0, attention_share)
        tp = sum(t.seconds for t in result.terms if t.overlapped and t.label.startswith("tensor-parallel"))
        dp = sum(t.seconds - t.unhidden_seconds for t in result.terms if t.overlapped and t.data_parallel)
        return result.exposed_seconds + host_seconds, result.bubble_fraction, tp, dp

    return Prepared(case, work, comm)


def _compute(p: Prepared, table: Mapping[str, float]) -> float:
    return sum(s * coefficient(n, table) for n, s in p.work.features.items() if n != "optimizer")


def _comm(p: Prepared, table: Mapping[str, float]) -> tuple[float, float, float, float]:
    """The step's communication with the compute, and attention's share of it, at ``table``."""
    compute = _compute(p, table)
    attention = sum(s * coefficient(n, table) for n, s in p.work.features.items() if n.startswith("attention:"))
    return p.comm(compute, attention / compute if compute else 0.0)


def predicted_step(p: Prepared, table: Mapping[str, float]) -> float:
    features = p.work.features
    # The optimizer step no faster than the host issues its kernels (core.training.compute._timing).
    optimizer = max(features.get("optimizer", 0.0) * coefficient("optimizer", table), p.work.optimizer_host_seconds)
    compute = _compute(p, table)
    exposed, bubble, tp, dp = _comm(p, table)
    device = (
        compute * (1 + bubble)
        + optimizer
        + exposed
        + tp * coefficient("tp_overlap", table)
        + dp * coefficient("dp_contention", table)
    )
    # No faster than the host issues the MoE layers (core.training.compute.host_floor_step; the
    # host optimizer step of an offloaded plan is inside ``exposed``, and no MoE plan offloads).
    return max(device, host_floor_step(p.work, bubble, optimizer))


# ---- the rule before issue 24, for the before/after line ----------------------------------
# main at 311d2af (core/training/compute.py): FLOPs per token 4·P + 2·T (6·P in full training,
# Kaplan et al. 2020), + 2·P × the recomputed share, no attention or logits term; one typed 40 %
# utilisation of the card's dense peak at the compute dtype (no float8 rate). Its communication
# is today's model with every tensor-parallel transfer counted whole (no overlap then): the one
# difference from that commit's step is FSDP under pipeline parallel, gathered once per step here.
BEFORE_UTILISATION = 0.40  # core/inputs.py at 311d2af: hardware.utilisation's default


def before_step(case: Case) -> float:
    """Seconds per optimizer step the pre-issue-24 rule predicts for ``case``."""
    plan = replace(case.plan, float8=Float8.NONE, parallel=replace(case.plan.parallel, tp_overlap=False))
    counts = param_counts(plan)
    active = counts.active
    trainable = min(counts.trainable, active) if plan.method is not Method.FULL else active
    per_token = 4.0 * active + 2.0 * trainable + 2.0 * active * recomputed_share(plan)
    peak = card_of(case).peak_tflops(compute_dtype(plan)) * 1e12
    compute = per_token * case.tokens_per_step / (peak * BEFORE_UTILISATION * plan.world_size)
    comm = step_communication(plan, counts, compute, 2.0 * active / per_token)
    return compute * (1 + comm.bubble_fraction) + comm.exposed_seconds


# ---- the fit ------------------------------------------------------------------------------
def bounds(name: str) -> tuple[float, float]:
    """What a coefficient may be: no matmul or attention faster than the peak, no stack moving
    less than a tenth of eager's bytes, no optimizer faster than the bandwidth; the fixed ones
    (efficiency.FIXED) at their priors."""
    if name in FIXED:
        return PRIORS[name], PRIORS[name]
    if name.startswith(("gemm:", "attention:")):
        return 1.0, 6.0
    if name.startswith("elementwise:"):
        return 0.1, 4.0
    if name == "gemm_bytes":
        return 0.25, 4.0
    if name == "tp_overlap":
        return 0.05, 1.0
    if name == "dp_contention":
        return 0.0, 1.0
    return 1.0, 6.0


def _bounded_minimum(ata: list[list[float]], atb: list[float], names: list[str], start: list[float]) -> list[float]:
    """Minimise ½·cᵀAc − bᵀc within each coefficient's bounds (coordinate descent: the
    problem is small and convex)."""
    c = start[:]
    for _ in range(400):
        moved = 0.0
        for i, name in enumerate(names):
            if ata[i][i] <= 0:
                continue
            rest = sum(ata[i][j] * c[j] for j in range(len(c)) if j != i)
            low, high = bounds(name)
            value = min(high, max(low, (atb[i] - rest) / ata[i][i]))
            moved = max(moved, abs(value - c[i]))
            c[i] = value
        if moved < 1e-9:
            break
    return c


def fitted_on(case: Case) -> bool:
    """Whether a figure takes part in the fits. Expert-parallel rows (Megatron-Bridge's MoE
    tables) are scored, not fitted: their step holds costs the model does not time yet (the
    alltoall dispatcher's permutes and its host synchronisations per layer, see
    docs/TRAINING_TIME.md), which a fit would move into the dense coefficients every plan uses.
    They are NVIDIA's, so their own leave-one-source-out score is the same either way.
    HSDP rows (IBM fms-fsdp's four 7B rows, planned since ``parallel.dp_replicate``) are scored,
    not yet fitted on: fitting them would move efficiency.FITTED, so every plan's time, in the
    change that adds the input (plans without HSDP stay exactly as they were); a refit can take
    them in. Their own leave-one-source-out score does not depend on it (IBM's coefficients are
    fitted on the other sources)."""
    return (case.record.get("ep") or 1) == 1 and case.plan.parallel.dp_replicate == 1


def held_out(case: Case) -> bool:
    """Whether a figure's source is held out of every fit (HELD_OUT_SOURCES)."""
    return case.record["source_id"] in HELD_OUT_SOURCES


def fit(prepared: Sequence[Prepared], iterations: int = 6) -> dict[str, float]:
    """Coefficients minimising Σ weight × (predicted/observed − 1)² + ridge towards the priors,
    each family's records sharing one unit of weight. The communication's exposed part and
    the bubble depend on the compute; they are held from the previous iteration. Only the
    figures :func:`fitted_on` keeps are fitted, and never those of the HELD_OUT_SOURCES."""
    prepared = [p for p in prepared if fitted_on(p.case) and not held_out(p.case)]
    names = sorted({n for p in prepared for n in p.work.features if derived(n) is None} | set(PRIORS))
    index = {n: i for i, n in enumerate(names)}
    families: dict[str, int] = {}
    for p in prepared:
        families[p.case.family] = families.get(p.case.family, 0) + 1
    table = dict(PRIORS)
    for _ in range(iterations):
        ata = [[0.0] * len(names) for _ in names]
        atb = [0.0] * len(names)
        for p in prepared:
            w = 1.0 / families[p.case.family]
            exposed, bubble, tp, dp = _comm(p, table)
            row = [0.0] * len(names)
            for name, seconds in p.work.features.items():
                tie = derived(name)  # a fixed multiple of another coefficient: that one's column
                name, ratio = tie if tie is not None else (name, 1.0)
                key = name if name in index else name.replace(":other", ":ampere")
                row[index[key]] += ratio * seconds * (1.0 if name == "optimizer" else 1 + bubble)
            row[index["tp_overlap"]] += tp
            row[index["dp_contention"]] += dp
            target = p.case.observed_step - exposed
            scale = 1.0 / p.case.observed_step
            for i, x in enumerate(row):
                if not x:
                    continue
                atb[i] += w * x * scale * target * scale
                for j, y in enumerate(row):
                    if y:
                        ata[i][j] += w * x * y * scale * scale
        for name, i in index.items():  # the ridge: each coefficient pulled towards its prior
            prior = PRIORS.get(name, 1.0)
            ata[i][i] += RIDGE / prior**2
            atb[i] += RIDGE / prior
        for name, other, ratio in TIES:  # and each tied one towards its kin: (c − ratio·c_kin)²
            if name in index and other in index:
                i, j = index[name], index[other]
                k = TIE / PRIORS[name] ** 2
                ata[i][i] += k
                ata[j][j] += k * ratio * ratio
                ata[i][j] -= k * ratio
                ata[j][i] -= k * ratio
        start = [table.get(n, PRIORS.get(n, 1.0)) for n in names]
        table = dict(zip(names, _bounded_minimum(ata, atb, names, start), strict=True))
    return table


# ---- scoring -----------------------------------------------------------------------------
@dataclass
class Scored:
    case: Case
    predicted: float  # tokens/s per GPU
    published: float

    @property
    def error(self) -> float:
        return 100.0 * (self.predicted / self.published - 1)


def loso(prepared: Sequence[Prepared]) -> tuple[list[Scored], dict[str, dict[str, float]]]:
    """Every family scored with coefficients fitted on the others."""
    scored: list[Scored] = []
    tables: dict[str, dict[str, float]] = {}
    for family in sorted({p.case.family for p in prepared}):
        table = fit([p for p in prepared if p.case.family != family])
        tables[family] = table
        for p in prepared:
            if p.case.family == family:
                step = predicted_step(p, table)
                scored.append(Scored(p.case, p.case.per_gpu(step), p.case.per_gpu(p.case.observed_step)))
    return scored, tables


def summary(rows: Sequence[Scored]) -> dict[str, float]:
    errors = [abs(r.error) for r in rows]
    short = [abs(r.error) for r in rows if r.case.seq <= SHORT]
    long = [abs(r.error) for r in rows if r.case.seq > SHORT]
    return {
        "n": len(rows),
        "median": statistics.median(errors) if errors else math.nan,
        "worst_short": max(short, default=0.0),
        "worst_long": max(long, default=0.0),
        "median_signed": statistics.median([r.error for r in rows]) if rows else math.nan,
    }


# ---- FLOPs per token against the sources' own formulas ------------------------------------
def source_flops(case: Case) -> tuple[float, float] | None:
    """(our count under the source's convention, the source's formula), per token.

    Ours is the Megatron / Narayanan count (:attr:`TokenFlops.model`): 6 × the matmul weights
    a token meets (the head's included) + 12·l·s·H·hd. The 6·N sources put every parameter
    in N (llm-foundry, lit-gpt, fms-fsdp, torchtitan before Aug 2024) or all but the input
    embedding (torchtitan since, OLMo-core): ours takes their N in place of its matmul
    weights — the same architecture count, so the check is the attention term and our
    parameter count against theirs."""
    record = case.record
    derived = record.get("derived") or {}
    source = record["source_id"]
    if source.startswith("nvidia") or source == "bigscience-bloom":
        return _megatron_flops(case)
    if source == "prime-rl":
        return _prime_rl_flops(case)
    if source == "fast-llm":
        return _fast_llm_flops(case)
    if source == "internlm":
        return _internlm_flops(case)
    if source == "colossalai":
        return _colossalai_flops(case)
    if source == "nanotron":
        return _nanotron_flops(case)
    published = derived.get("source_formula_flops_per_token") or derived.get(
        "source_formula_flops_per_token_all_params"
    )
    dims = record.get("model_dims") or {}
    if published is None and source in ("ibm-fms-fsdp", "tinyllama") and dims.get("params"):
        # Their formula with their parameter count: 6·N + 12·l·d·s (nanoGPT / PaLM; lit-gpt).
        published = 6.0 * dims["params"] + 12.0 * dims["layers"] * dims["hidden"] * record["seq_len"]
    if published is None:
        return None
    plan = case.plan
    model = plan.model
    ours = token_flops(replace(plan, method=Method.FULL, checkpointing=False)).model
    matmul = model.matmul_params() + model.vocab_size * model.hidden_size
    all_params = source in ("mosaicml-llm-foundry", "ibm-fms-fsdp", "tinyllama") or (
        "source_formula_flops_per_token_all_params" in derived
    )
    n = model.architecture_params() - (0 if all_params else model.vocab_size * model.hidden_size)
    ours += 6.0 * (n - matmul)
    return ours, float(published)


def _prime_rl_flops(case: Case) -> tuple[float, float]:
    """prime-rl's PerfCounter (PrimeIntellect-ai/prime-rl@8718eb14 src/prime_rl/trainer/perf.py L81-175): 6 × the
    matmul weights a token meets (q, k, v, o, the MLP or the top-k experts and the router, the head's V·d even when
    tied) + 12·l·h·(d // h)·s. Its attention term takes the head width as hidden ÷ heads, not the config's head_dim
    (Qwen3: 128 where hidden ÷ heads is 64 or 80), so ours is put in its convention, 12·l·s·d for our 12·l·s·H·hd:
    the check is the matmul count; the attention term it leaves out is in docs/TRAINING_TIME.md."""
    plan, model = case.plan, case.plan.model
    ours = token_flops(replace(plan, method=Method.FULL, checkpointing=False)).model
    width = model.num_heads * model.head_dim
    ours -= 12.0 * model.num_layers * plan.workload.seq_len * (width - model.hidden_size)
    return ours, float(case.record["derived"]["source_formula_flops_per_token"])


def _fast_llm_flops(case: Case) -> tuple[float, float]:
    """Fast-LLM's get_tflops (ServiceNow/Fast-LLM@f13ec062 fast_llm/models/gpt/trainer.py L26-70), per token: 6 × the
    blocks' matmul weights + 6·d·V for the head (tied or not) + 6·l·H·hd·s, the causal half ("Ignore masked values
    (s**2/2)"), or with a window 12·l·H·hd·w·(1 − w/2s): ours is the causal count (:attr:`TokenFlops.model_causal`)."""
    ours = token_flops(replace(case.plan, method=Method.FULL, checkpointing=False)).model_causal
    return ours, float(case.record["derived"]["source_formula_flops_per_token"])


def _once_more_forward(case: Case, model_count: float) -> float:
    """``model_count`` (a full-training Megatron count, the head's 6·V·d in it) with the blocks' and the
    attention's share × 4/3 when the record recomputes every block: Megatron's paper's checkpoint factor 4 for 3
    (Narayanan et al. 2021, eq. 3), as InternLM's and Colossal-AI's TFLOPS take it; the head is not recomputed."""
    if case.record["checkpointing"] != "full":
        return model_count
    head = 6.0 * case.plan.model.vocab_size * case.plan.model.hidden_size
    return model_count + (model_count - head) / 3


def _internlm_flops(case: Case) -> tuple[float, float]:
    """InternLM's get_megatron_flops (InternLM/InternLM@c18bec93 internlm/utils/common.py L218-248, its arguments
    train.py L340-350), per token: (4 with model.checkpoint, else 3) × l·((8 + 4 · 3/2 · mlp_ratio)·h² + 4·s·h)
    + 6·h·V — the Megatron count of an MHA, SwiGLU model (full attention, the head untied and counted once) with the
    blocks counted once more under the checkpoint. Ours: :attr:`TokenFlops.model`, its blocks × 4/3 on the
    recomputing rows (:func:`_once_more_forward`). Not mapped, and what is left (+0.4 to +0.5 %): the formula's MLP
    is mlp_ratio 8/3 × h unrounded (10,922.7 for the 7B), the model's FeedForward int(8/3 · h) rounded up to a
    multiple of 256 (11,008: internlm/model/linear.py L143), which ours counts."""
    ours = token_flops(replace(case.plan, method=Method.FULL, checkpointing=False)).model
    return _once_more_forward(case, ours), float(case.record["derived"]["source_formula_flops_per_token"])


def _colossalai_flops(case: Case) -> tuple[float, float]:
    """Colossal-AI's PerformanceEvaluator.on_step_end (hpcaitech/ColossalAI@e5fdefa6
    examples/language/performance_evaluator.py L149-164; benchmark.py L327-335 passes num_hidden_layers, hidden_size,
    vocab_size and --grad_checkpoint), per token: 24 · (3 + g) · l·h² · (1 + s/(6h) + V/(16·l·h)) — Megatron's paper's
    GPT formula, which reads no head count, kv heads or MLP width: every block 12·h² of matmul weights (MHA, an
    ungated 4·h MLP). So ours is counted on that architecture (the model with kv heads = heads, head width h / heads
    and an ungated MLP of 4·h), the blocks × 4/3 with -g (every table row: :func:`_once_more_forward`); with g = 3 the
    formula would also scale the head to 4.5·V·h, which no row runs. On the real Llama 2 architecture ours reads
    1.004 (7B: SwiGLU 11,008 for 4·h) and 1.058 (70B: GQA 8 of 64 and SwiGLU 28,672 are 12.75·h², not 12): the
    table's TFLOPS/GPU undercounts the 70B's own FLOPs by that much."""
    model = case.plan.model
    assumed = replace(
        model,
        num_kv_heads=model.num_heads,
        head_dim=model.hidden_size // model.num_heads,
        gated_mlp=False,
        fused_gate_up=False,
        intermediate_size=4 * model.hidden_size,
        params_override=None,
        active_params_override=None,
    )
    plan = replace(case.plan, model=assumed, method=Method.FULL, checkpointing=False)
    ours = _once_more_forward(case, token_flops(plan).model)
    return ours, float(case.record["derived"]["source_formula_flops_per_token"])


def _nanotron_flops(case: Case) -> tuple[float, float]:
    """nanotron's get_flops (huggingface/nanotron@c2528430 src/nanotron/models/llama.py L1100-1168, called by
    get_flops_per_sec L927-948 with the config's layers, hidden, heads, kv heads, vocab and intermediate size), per
    token: 3 × (l·(2·h·(q + 2·kv)·hd + 2·q·hd·h + 4·q·hd·s + 6·h·f) + 2·h·V), hd = hidden // heads: the Megatron count
    of a SwiGLU model with full attention and the head counted once, tied or not, no recompute. Ours:
    :attr:`TokenFlops.model` (every nanotron row's model has heads × head_dim = hidden, where the two head widths
    agree). The records hold it as source_formula_flops_per_token, or _all_params on the tied rows (it is the same
    formula: nanotron's tied head is one V·h matrix)."""
    derived = case.record["derived"]
    theirs = derived.get("source_formula_flops_per_token") or derived["source_formula_flops_per_token_all_params"]
    ours = token_flops(replace(case.plan, method=Method.FULL, checkpointing=False)).model
    return ours, float(theirs)


def _megatron_flops(case: Case) -> tuple[float, float] | None:
    """Megatron's per-token formula, as the source computes it: l·h²·(12 + 12·g/a + 18·f/h
    (SwiGLU; 12·f/h plain) + 12·s/h (6·s/h causal)) + 6·V·h; BigScience's HFU: × 4/3 with
    the recompute and without the logits' weight gradient (its V/(16·l·h))."""
    plan, model = case.plan, case.plan.model
    record = case.record
    layers, h, s, v = model.num_layers, model.hidden_size, plan.workload.seq_len, model.vocab_size
    g, a, f = model.num_kv_heads, model.num_heads, model.intermediate_size
    source = record["source_id"]
    causal = source == "nvidia-megatron-bridge"
    if model.num_experts > 1 and causal:
        return _megatron_bridge_moe_flops(case)
    mlp = (18.0 if model.gated_mlp else 12.0) * f / h
    attention = (6.0 if causal else 12.0) * s / h
    theirs = layers * h * h * (12 + 12 * g / a + mlp + attention) + 6 * v * h
    flops = token_flops(replace(plan, method=Method.FULL, checkpointing=False))
    ours = flops.model_causal if causal else flops.model
    if source == "bigscience-bloom":
        if "prequel" in record["id"]:
            theirs = 8 * 12 * layers * h * h  # the Feb-2022 logs: no attention, no logits
            ours = 8 / 6 * _blocks_only(plan)  # the block matmuls' 6·W, × 8/6 with the recompute
        else:
            theirs = 8 * 12 * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
            ours = 8 / 6 * (flops.model - 6 * v * h) + 6 * v * h * 8 / 6 * 0.75
    return ours, theirs


def _megatron_bridge_moe_flops(case: Case) -> tuple[float, float]:
    """Megatron-Bridge's count for a mixture of experts (NVIDIA-NeMo/Megatron-Bridge 067f987d,
    src/megatron/bridge/training/utils/flop_utils.py num_floating_point_operations, GQA branch),
    per token: 6·l·(h·(q + 2·kv) + q·h + q·c) for the attention, c the causal context (s/2, or
    W − W(W−1)/(2s) on the sliding-window layers: gpt-oss's window_size = (sliding_window − 1, 0)
    on every other layer, gpt_oss_bridge.py), + 6·h·l·3·(f_moe·top-k + f_shared) for the gated
    experts (the router not counted) + 6·h·V for the logits."""
    plan, model = case.plan, case.plan.model
    layers, h, s, v = model.num_layers, model.hidden_size, plan.workload.seq_len, model.vocab_size
    q, kv = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    projections = h * (q + 2 * kv) + q * h
    windowed = model.sliding_window_layers if model.sliding_window and model.sliding_window < s else 0
    window = model.sliding_window or 0
    context = (layers - windowed) * q * s / 2 + windowed * q * (window - window * (window - 1) / (2 * s))
    attention = 6 * (layers * projections + 2 * context)
    ups = 3 if model.gated_mlp else 2
    mlp = 6 * h * layers * ups * (model.intermediate_size * model.experts_per_token + model.shared_expert_size)
    theirs = attention + mlp + 6 * h * v
    ours = token_flops(replace(plan, method=Method.FULL, checkpointing=False)).model_causal
    return ours, theirs


def _blocks_only(plan: Plan) -> float:
    flops = token_flops(replace(plan, method=Method.FULL, checkpointing=False))
    terms = {t.label: t.per_token for t in flops.terms}
    return terms["block matmuls"]


# ---- scaling pairs --------------------------------------------------------------------------
def _differences(a: Any, b: Any, ignore: frozenset[str] = frozenset(), prefix: str = "") -> list[str]:
    """The fields (nested dataclasses walked into) where ``a`` and ``b`` differ, but those in
    ``ignore`` (dotted paths)."""
    if not (is_dataclass(a) and is_dataclass(b)) or type(a) is not type(b):
        return [] if a == b else [f"{prefix.rstrip('.') or 'value'} {a} vs {b}"]
    out: list[str] = []
    for f in fields(a):
        path = f"{prefix}{f.name}"
        if path not in ignore:
            out += _differences(getattr(a, f.name), getattr(b, f.name), ignore, f"{path}.")
    return out


# What a scaling pair may change: the GPU count (nodes × GPUs per node) and, with the global
# batch kept, the accumulation (checked in scaling_difference).
_SCALING_MOVES = frozenset({"parallel.nodes", "parallel.gpus_per_node", "workload.grad_accum"})


def scaling_difference(a: Case, b: Case) -> str | None:
    """Why two figures are not a scaling pair between GPU counts, or None when they are.

    The rule: a pair runs the same plan on another number of GPUs — same source, model, card,
    precision, sequence, micro-batch, checkpointing, stack and every parallel degree but the
    data-parallel one, which is what the GPU count moves. Gradient accumulation may differ only
    as the global batch is kept (accumulation × data parallel the same: the per-GPU work of a
    micro-batch is unchanged). A pair that also changes the micro-batch (MosaicML's tables pick
    the largest that fits each GPU count) compares two plans, not two GPU counts."""
    if a.record["source_id"] != b.record["source_id"]:
        return f"different sources ({a.record['source_id']} vs {b.record['source_id']})"
    pa, pb = a.plan, b.plan
    if pa.world_size == pb.world_size:
        return "the same GPU count"
    accum_a, accum_b = pa.workload.grad_accum, pb.workload.grad_accum
    dp_a, dp_b = pa.parallel.data_parallel, pb.parallel.data_parallel
    if accum_a != accum_b and accum_a * dp_a != accum_b * dp_b:
        return (
            f"gradient accumulation {accum_a} vs {accum_b} with global batch "
            f"{pa.effective_batch} vs {pb.effective_batch} (neither kept)"
        )
    differences = _differences(pa, pb, _SCALING_MOVES)
    return "; ".join(differences) if differences else None


def unlisted_pairs(data: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """The corpus's ``unlisted_pairs``: listed pairs of one plan on two GPU counts whose published
    figures cannot both be that plan's (a smaller run slower per GPU than larger runs of the same
    sweep line, which no communication cost can make), each with the arithmetic that shows it."""
    return {(u["pair"][0], u["pair"][1]): str(u["why"]) for u in data.get("unlisted_pairs", ())}


def scaling_pairs(
    listed: Sequence[Sequence[str]],
    by_id: Mapping[str, Scored],
    unlisted: Mapping[tuple[str, str], str] | None = None,
) -> tuple[list[tuple[str, str, float, float]], list[tuple[str, str, str]]]:
    """The listed pairs that are scaling pairs (a, b, published ratio, predicted ratio of the
    per-GPU speed of b over a), and those that are not (a, b, why): they change more than the
    GPU count, or they are ``unlisted`` (:func:`unlisted_pairs`)."""
    pairs: list[tuple[str, str, float, float]] = []
    refused: list[tuple[str, str, str]] = []
    for a, b in listed:
        if a not in by_id or b not in by_id:
            continue
        pa, pb = by_id[a], by_id[b]
        why = scaling_difference(pa.case, pb.case)
        if why is None and unlisted and (a, b) in unlisted:
            why = f"unlisted, the published figures cannot both be the plan's: {unlisted[(a, b)]}"
        if why:
            refused.append((a, b, why))
        else:
            pairs.append((a, b, pb.published / pa.published, pb.predicted / pa.predicted))
    return pairs, refused


# ---- report -------------------------------------------------------------------------------
def load(path: Path = CORPUS) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass
class Report:
    scored: list[Scored]
    skipped: list[tuple[str, str, str]]  # id, source, why
    flops: dict[str, list[float]]  # source -> ratios
    pairs: list[tuple[str, str, float, float]]  # a, b, published ratio, predicted ratio
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    all_sources: dict[str, float] = field(default_factory=dict)
    before: list[Scored] = field(default_factory=list)  # the figures it could plan (no EP), the rule before issue 24
    not_pairs: list[tuple[str, str, str]] = field(default_factory=list)  # listed pairs that are not, and why
    held_out: list[Scored] = field(default_factory=list)  # HELD_OUT_SOURCES, scored with the all-source fit


def build(data: Mapping[str, Any]) -> Report:
    cases: list[Case] = []
    skipped: list[tuple[str, str, str]] = []
    for record in data["figures"]:
        try:
            cases.append(case_of(record))
        except NotExpressible as why:
            skipped.append((record["id"], record["source_id"], str(why)))
    # The held-out sources take no part in the leave-one-source-out table (fit leaves them out too).
    held = [prepare(c) for c in cases if held_out(c)]
    cases = [c for c in cases if not held_out(c)]
    prepared = [prepare(c) for c in cases]
    scored, tables = loso(prepared)
    all_sources = fit(prepared)
    kept = [
        Scored(p.case, p.case.per_gpu(predicted_step(p, all_sources)), p.case.per_gpu(p.case.observed_step))
        for p in held
    ]
    flops: dict[str, list[float]] = {}
    # The held-out sources whose FLOPs formula is read into source_flops in its own convention join the check.
    for c in [*cases, *(p.case for p in held if p.case.record["source_id"] in HELD_OUT_FLOPS_CHECKED)]:
        pair = source_flops(c)
        if pair:
            flops.setdefault(c.record["source_id"], []).append(pair[0] / pair[1])
    pairs, not_pairs = scaling_pairs(data["scaling_pairs"], {s.case.id: s for s in scored}, unlisted_pairs(data))
    # The rule before issue 24 could not plan expert parallel or HSDP: its line covers the other figures.
    before = [Scored(c, c.per_gpu(before_step(c)), c.per_gpu(c.observed_step)) for c in cases if fitted_on(c)]
    return Report(scored, skipped, flops, pairs, tables, all_sources, before, not_pairs, kept)


# The rows both renderings show, built once: text() and markdown() only lay them out.
Summary = dict[str, float]


def family_summaries(report: Report) -> list[tuple[str, Summary]]:
    """Each family's leave-one-source-out summary, then all of them (named "all")."""
    families = sorted({r.case.family for r in report.scored})
    rows = [(family, summary([r for r in report.scored if r.case.family == family])) for family in families]
    return [*rows, ("all", summary(report.scored))]


def held_out_summaries(report: Report) -> list[tuple[str, Summary]]:
    """Each HELD_OUT_SOURCE's summary (scored with the all-source fit), then all of them, last;
    empty when there are none."""
    if not report.held_out:
        return []
    rows = []
    for source in sorted(HELD_OUT_SOURCES):
        mine = [r for r in report.held_out if r.case.record["source_id"] == source]
        if mine:
            rows.append((FAMILIES[source], summary(mine)))
    return [*rows, ("held out", summary(report.held_out))]


def rule_summaries(report: Report) -> list[Summary]:
    """The rule before issue 24 (the figures it could plan: no EP, no HSDP), today's rule on the same
    figures, and today's on all of them."""
    same = {r.case.id for r in report.before}
    return [summary(rows) for rows in (report.before, [r for r in report.scored if r.case.id in same], report.scored)]


def worst(rows: Sequence[Scored], n: int) -> list[Scored]:
    """The ``n`` figures of ``rows`` with the largest |error|."""
    return sorted(rows, key=lambda r: -abs(r.error))[:n]


def skipped_reasons(report: Report, width: int | None = None) -> list[tuple[str, int]]:
    """What could not be expressed, "source: why" (why cut to ``width`` characters), and how often."""
    reasons: dict[str, int] = {}
    for _, source, why in report.skipped:
        key = f"{source}: {why[:width]}"
        reasons[key] = reasons.get(key, 0) + 1
    return sorted(reasons.items())


def failures(report: Report) -> list[str]:
    s = summary(report.scored)
    out = []
    if s["median"] > MEDIAN_TARGET:
        out.append(f"median |error| {s['median']:.1f} % > {MEDIAN_TARGET:g} %")
    if s["worst_short"] > WORST_SHORT_TARGET:
        out.append(f"worst |error| ≤ 8k {s['worst_short']:.1f} % > {WORST_SHORT_TARGET:g} %")
    if s["worst_long"] > WORST_LONG_TARGET:
        out.append(f"worst |error| beyond 8k {s['worst_long']:.1f} % > {WORST_LONG_TARGET:g} %")
    for source, ratios in report.flops.items():
        worst = max(abs(r - 1) for r in ratios) * 100
        if worst > FLOPS_TARGET:
            out.append(f"FLOPs per token of {source}: {worst:.2f} % from its formula")
    for a, b, published, predicted in report.pairs:
        if abs(predicted - published) * 100 > SCALING_TARGET:
            out.append(f"scaling {a} → {b}: {100 * abs(predicted - published):.1f} points")
    return out


def _text_row(name: str, s: Summary) -> str:
    return (
        f"{name:<24} {s['n']:>4} {s['median']:>7.1f}% {s['worst_short']:>8.1f}% {s['worst_long']:>8.1f}% "
        f"{s['median_signed']:>+7.1f}%"
    )


def _text_figure(r: Scored) -> str:
    return f"  {r.case.id:<58} {r.published:>9,.0f} published {r.predicted:>9,.0f} predicted {r.error:+6.1f}%"


def before_after(report: Report) -> list[str]:
    """Median and worst |error| of tokens/s per GPU, the rule before issue 24 and today's."""
    names = ("before (6·P / 8·P, 40 %)", "after, the same figures", "after, with EP and HSDP rows")
    return [
        f"  {name:<30} n={s['n']:<4} median {s['median']:5.1f} %   worst ≤ 8k {s['worst_short']:6.1f} %   "
        f"worst > 8k {s['worst_long']:6.1f} %   median signed {s['median_signed']:+6.1f} %"
        for name, s in zip(names, rule_summaries(report), strict=True)
    ]


def held_out_lines(report: Report) -> list[str]:
    """The HELD_OUT_SOURCES' figures, each source and all, scored with the all-source fit; and each figure."""
    rows = held_out_summaries(report)
    if not rows:
        return []
    rows[-1] = ("held out, never fitted", rows[-1][1])
    lines = ["", "Held out, never fitted (scored with the all-source fit):"]
    lines += [_text_row(name, s) for name, s in rows]
    lines += [_text_figure(r) for r in sorted(report.held_out, key=lambda r: r.case.id)]
    return lines


def text(report: Report) -> str:
    lines = ["Training throughput, predicted at default settings vs published (leave one source out)", ""]
    lines.append(f"{'family':<24} {'n':>4} {'median':>8} {'worst≤8k':>9} {'worst>8k':>9} {'signed':>8}")
    lines += [_text_row(name, s) for name, s in family_summaries(report)]
    lines += held_out_lines(report)
    lines += ["", "Tokens/s per GPU |error|, before vs after:", *before_after(report)]
    lines += ["", "Worst ten:", *(_text_figure(r) for r in worst(report.scored, 10))]
    lines += ["", "FLOPs per token ÷ the source's own formula:"]
    for source, ratios in sorted(report.flops.items()):
        lines.append(f"  {source:<34} n={len(ratios):<4} {min(ratios):.4f} … {max(ratios):.4f}")
    lines += ["", "Scaling pairs (per-GPU speed of the larger run ÷ the smaller):"]
    worst_pair = max((abs(p - q) * 100 for _, _, p, q in report.pairs), default=0.0)
    lines.append(f"  {len(report.pairs)} pairs, worst {worst_pair:.1f} points")
    lines.append(
        f"  {len(report.not_pairs)} listed pairs are not scaling pairs "
        "(they change more than the GPU count, or are unlisted):"
    )
    lines += [f"    {a} → {b}: {why}" for a, b, why in report.not_pairs]
    lines += ["", f"Not expressible or not comparable: {len(report.skipped)}"]
    lines += [f"  {n:>3} × {why}" for why, n in skipped_reasons(report, 90)]
    return "\n".join(lines)


_MD_SUMMARY_HEAD = "| figures | median \\|error\\| | worst ≤ 8k | worst > 8k | median signed |"


def _md_row(name: str, s: Summary, bold: bool = False) -> str:
    """A summary's Markdown row; ``bold``: the total's, its name and |error| figures in bold."""
    b = "**" if bold else ""
    return (
        f"| {b}{name}{b} | {s['n']} | {b}{s['median']:.1f} %{b} | {b}{s['worst_short']:.1f} %{b} | "
        f"{b}{s['worst_long']:.1f} %{b} | {s['median_signed']:+.1f} % |"
    )


def held_out_markdown(report: Report) -> list[str]:
    """The held-out sources' table for docs/TRAINING_TIME.md (empty when there are none)."""
    rows = held_out_summaries(report)
    if not rows:
        return []
    out = ["", f"| held out, never fitted (all-source fit) {_MD_SUMMARY_HEAD}", "|---|---:|---:|---:|---:|---:|"]
    out += [_md_row(name, s) for name, s in rows[:-1]]
    return [*out, _md_row("held out, all", rows[-1][1], bold=True)]


def markdown(report: Report) -> str:
    """The tables of docs/TRAINING_TIME.md."""
    families = family_summaries(report)
    out = [f"| family (left out) {_MD_SUMMARY_HEAD}", "|---|---:|---:|---:|---:|---:|"]
    out += [_md_row(name, s) for name, s in families[:-1]]
    out.append(_md_row("all", families[-1][1], bold=True))
    out += held_out_markdown(report)
    out += ["", f"| rule {_MD_SUMMARY_HEAD}", "|---|---:|---:|---:|---:|---:|"]
    names = (
        "before issue 24 (6·P / 8·P, 40 %)",
        "today (leave one source out), the same figures",
        "today, with the expert-parallel figures",
    )
    out += [_md_row(name, s) for name, s in zip(names, rule_summaries(report), strict=True)]
    out += ["", "| worst figures | published | predicted | error |", "|---|---:|---:|---:|"]
    for r in worst(report.scored, 15):
        out.append(f"| {r.case.id} | {r.published:,.0f} | {r.predicted:,.0f} | {r.error:+.1f} % |")
    out += ["", "| source | figures | ours ÷ its formula |", "|---|---:|---|"]
    for source, ratios in sorted(report.flops.items()):
        out.append(f"| {source} | {len(ratios)} | {min(ratios):.4f} … {max(ratios):.4f} |")
    out += ["", "| scaling pair | published | predicted | points |", "|---|---:|---:|---:|"]
    for a, b, published, predicted in sorted(report.pairs, key=lambda p: -abs(p[3] - p[2])):
        out.append(f"| {a} → {b} | {published:.3f} | {predicted:.3f} | {100 * (predicted - published):+.1f} |")
    out += ["", "| listed pair, not a scaling pair | what else changes |", "|---|---|"]
    out += [f"| {a} → {b} | {why} |" for a, b, why in report.not_pairs]
    out += ["", "| not expressed | figures |", "|---|---:|"]
    out += [f"| {why} | {n} |" for why, n in skipped_reasons(report)]
    return "\n".join(out)


def parts_lines(report: Report, pattern: str) -> list[str]:
    """The figures whose id contains ``pattern``, each with its step taken apart at the coefficients it is scored
    with (its family left out; a held-out figure's the all-source fit): every timed part, the pipeline bubble, the
    exposed and the overlapped communication, beside the step the published figure implies. The arithmetic the
    notes on a missed row start from (docs/TRAINING_TIME.md)."""
    rows = [(r, report.tables[r.case.family]) for r in report.scored if pattern in r.case.id]
    rows += [(r, report.all_sources) for r in report.held_out if pattern in r.case.id]
    out: list[str] = []
    for row, table in rows:
        p = prepare(row.case)
        step = predicted_step(p, table)
        exposed, bubble, tp, dp = _comm(p, table)
        out.append(
            f"{row.case.id}: published {row.published:,.1f}, predicted {row.predicted:,.1f} tokens/s per GPU "
            f"({row.error:+.1f} %); step {row.case.observed_step:.2f} s published, {step:.2f} s predicted"
        )
        parts = {n: s * coefficient(n, table) for n, s in p.work.features.items()}
        for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
            if seconds > 0:
                out.append(f"    {name:<40} {seconds:9.3f} s")
        out.append(f"    {'pipeline bubble (× the compute)':<40} {bubble:9.3f}")
        out.append(f"    {'exposed communication, host step':<40} {exposed:9.3f} s")
        out.append(f"    {'overlapped TP traffic (× tp_overlap)':<40} {tp:9.3f} s")
        out.append(f"    {'overlapped DP traffic (× dp_contention)':<40} {dp:9.3f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target of issue 24 is missed")
    parser.add_argument("--fit", action="store_true", help="print the all-source fit (efficiency.FITTED)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--parts", metavar="ID", help="print the step of every figure whose id contains ID, by part")
    args = parser.parse_args(argv)
    report = build(load())
    if args.parts is not None:
        lines = parts_lines(report, args.parts)
        if not lines:
            print(f"no scored figure's id contains {args.parts!r}", file=sys.stderr)
            return 2
        print("\n".join(lines))
        return 0
    if args.fit:
        print("FITTED = {")
        for name, value in sorted(report.all_sources.items()):
            print(f'    "{name}": {value:.4f},')
        print("}")
        return 0
    print(markdown(report) if args.markdown else text(report))
    if not args.markdown:  # each PEFT method's time against LoRA's, held out (benchmarks.realgpu.peft_time)
        print("\n" + "\n".join(peft_time.lines()))
    missed = failures(report)
    if missed:
        print("\nTargets missed:\n  " + "\n  ".join(missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
