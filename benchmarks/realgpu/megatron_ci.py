"""Megatron-LM's own CI memory readings as records of memory_figures.json (source megatron-lm-ci-golden-values).

Megatron-LM's functional tests record, per test case, what the last rank's allocator held after each
logged iteration: ``tests/functional_tests/test_cases/<model>/<case>/golden_values_dev_dgx_h100.json``
carries "mem-allocated-bytes" (``torch.cuda.memory_stats()["allocated_bytes.all.current"]`` after the
iteration: the state between steps) and "mem-max-allocated-bytes" (``allocated_bytes.all.peak``, the
allocator's peak since the process started: no reset), written by ``training_log`` when
``--log-memory-to-tensorboard`` is set (megatron/training/training.py at d98e8a64, lines 3436-3446) to the
tensorboard writer, which exists on the last rank only (megatron/training/global_vars.py
``_set_tensorboard_writer``: ``args.rank == (args.world_size - 1)``), the last pipeline stage. The recipe is
the case's ``model_config.yaml``; every case runs on one node of 8 GPUs (tests/test_utils/recipes/h100/gpt.yaml
and moe.yaml: ``nodes: 1``, ``gpus: 8``, no product overrides them for the cases read here).

This script reads a local mirror of NVIDIA/Megatron-LM at ``COMMIT`` and rewrites the source's records
in memory_figures.json: two per case read (the peak as metric ``allocated``, the reading between steps as
metric ``resident``), each case considered either recorded or listed in ``SKIPPED`` with its reason.

    python benchmarks/realgpu/megatron_ci.py /path/to/Megatron-LM.git

Megatron's defaults for every argument a case does not give are read from the same commit and written
into each record's assumptions (``DEFAULTS``).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "benchmarks" / "realgpu" / "memory_figures.json"
SOURCE_ID: Final = "megatron-lm-ci-golden-values"
COMMIT: Final = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
REPO: Final = "NVIDIA/Megatron-LM"
CASES_DIR: Final = "tests/functional_tests/test_cases"
GOLDEN: Final = "golden_values_dev_dgx_h100.json"
GPUS: Final = 8  # tests/test_utils/recipes/h100/{gpt,moe}.yaml spec: nodes 1, gpus 8

# Megatron-LM's defaults at COMMIT for what a case leaves out:
# - megatron/core/transformer/transformer_config.py: hidden_dropout 0.1, attention_dropout 0.1,
#   add_bias_linear True, gated_linear_unit False, activation_func F.gelu, normalization "LayerNorm";
#   megatron/core/model_parallel_config.py: sequence_parallel False, gradient_accumulation_fusion False;
# - megatron/training/arguments.py: --position-embedding-type learned_absolute, --make-vocab-size-divisible-by
#   128, ffn_hidden_size = 4 * hidden_size (line 1329), embeddings tied unless
#   --untie-embeddings-and-output-weights, --optimizer adam, --bf16 sets accumulate_allreduce_grads_in_fp32
#   unless --grad-reduce-in-bf16 (lines 1204-1216: the gradient buffer in float32);
# - megatron/training/vocab_utils.py ``calculate_padded_vocab_size``: the vocabulary padded to a multiple of
#   128 × TP; the NullTokenizer's vocabulary is --vocab-size (megatron/core/tokenizers/text/libraries/
#   null_tokenizer.py), GPT2BPETokenizer's the vocab.json of GPT-2, 50,257 entries;
# - --moe-router-topk 2 (megatron/core/transformer/transformer_config.py moe_router_topk);
# - --attention-backend auto: Transformer Engine's flash / fused kernels; ``unfused`` and the local
#   spec's DotProductAttention keep the softmax's probabilities (and their dropout mask), in 16 bits where their
#   fused scale-mask-softmax kernel runs (core.training.attention.megatron_fused_softmax).
DEFAULTS: Final = {
    "--hidden-dropout": 0.1,
    "--attention-dropout": 0.1,
    "--position-embedding-type": "learned_absolute",
    "--normalization": "LayerNorm",
    "--make-vocab-size-divisible-by": 128,
    "--moe-router-topk": 2,
    "--attention-backend": "auto",
}
# --cross-entropy-loss-fusion: Megatron-Core's native fused loss, the default --cross-entropy-fusion-impl
# (megatron/core/model_parallel_config.py cross_entropy_fusion_impl = 'native'); Megatron-LM's arguments
# reject te (megatron/training/arguments.py, lines 1697-1702).
FUSED_CE: Final = (
    "--cross-entropy-loss-fusion: Megatron-Core's native fused cross-entropy (megatron/core/fusions/"
    "fused_cross_entropy.py, its functions compiled by jit_fuser = torch.compile), the default implementation; "
    "Megatron-LM's arguments reject te (megatron/training/arguments.py, lines 1697-1702)."
)
GPT2_BPE_VOCAB: Final = 50257  # openai-community/gpt2 vocab.json (the CI's bpe/vocab.json)
ASSUMED: Final = (
    "Megatron defaults for arguments not given, read at d98e8a64: hidden and attention dropout 0.1, "
    "LayerNorm, biases on the linear layers, GeLU MLP of 4·h, learned absolute positions, no sequence "
    "parallelism, the gradient buffer in float32 (--bf16 without --grad-reduce-in-bf16), FusedAdam "
    "(megatron/core/optimizer/__init__.py), attention backend auto (Transformer Engine's flash / fused "
    "kernels).",
    "8 GPUs on one node (tests/test_utils/recipes/h100/*.yaml spec: nodes 1, gpus 8); the reading is the "
    "last rank's (the tensorboard writer's: megatron/training/global_vars.py), so the last pipeline stage.",
    "Vocabulary padded to a multiple of 128 × TP (megatron/training/vocab_utils.py).",
)

# Cases read and recorded: (model, case, why it is in the set).
READ: Final = (
    ("gpt", "gpt3_7b_tp4_pp1_memory_speed", "TP 4, distributed optimizer, 8K tokens: the CI's memory test"),
    ("gpt", "gpt3_7b_tp1_pp4_memory_speed", "PP 4 interleaved (8 virtual stages), distributed optimizer"),
    ("gpt", "gpt3_mcore_tp1_pp2", "PP 2, Megatron DDP (no distributed optimizer), local spec (unfused attention)"),
    ("gpt", "gpt3_mcore_tp1_pp4", "PP 4, Megatron DDP, local spec"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_vp1", "PP 4 interleaved (3 virtual stages), DDP, TE unfused attention"),
    (
        "gpt",
        "gpt3_mcore_te_tp1_pp4_vp1_dist_optimizer_overlap_grad_reduce_param_gather_overlap_optimizer",
        "PP 4 interleaved, distributed optimizer, TE unfused attention",
    ),
    ("gpt", "gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist", "PP 4 interleaved, DDP, TE flash attention"),
    (
        "gpt",
        "gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_param_gather",
        "PP 4 interleaved, distributed optimizer, TE flash attention",
    ),
    ("gpt", "gpt3_mcore_te_tp1_pp1_dist_optimizer_fim_dataset", "one stage, no TP, distributed optimizer, unfused"),
    (
        "gpt",
        "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather",
        "TP 4, distributed optimizer, unfused attention",
    ),
    ("gpt", "gpt3_mcore_te_tp2_pp2_cp2", "TP 2 × PP 2 × CP 2 with sequence parallelism, DDP"),
    (
        "gpt",
        "gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion",
        "TP 2 × PP 2, DDP, Megatron-Core's native fused cross-entropy (plan setting megatron_ce_fusion)",
    ),
    ("gpt", "gpt3_mcore_te_tp2_pp2_resume_torch_dist", "TP 2 × PP 2, DDP (checkpoint-resume test)"),
    (
        "gpt",
        "gpt3_mcore_te_tp1_pp1_resume_torch_dist_uniform_full_recompute",
        "full recompute of every layer (checkpoint-resume test)",
    ),
    (
        "moe",
        "gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM",
        "MoE: 8 experts, EP 2, TP 2 with sequence parallelism, distributed optimizer",
    ),
    (
        "gpt",
        "gpt3_mcore_te_tp4_pp1_resume_torch_dist_qk_layernorm_test_mode",
        "TP 4, DDP, TE flash attention (checkpoint-resume test)",
    ),
)

# Cases considered and not recorded, with why (families and single cases).
SKIPPED: Final = (
    ("bert/*, t5/*", "encoder-only (BERT) and encoder-decoder (T5) models: the planner models decoder-only ones"),
    ("hybrid/*", "Mamba hybrid models: state-space layers are not modelled"),
    ("mimo/*, multimodal-llava/*", "vision-language models: the vision encoder is not modelled"),
    (
        "mixtral/*, moe/deepseekv3_*",
        "release runs with expert TP 1, MLA or fine-grained MoE settings not read in this pass",
    ),
    ("gpt/gpt_grpo_*, moe/gpt_grpo_*", "GRPO reinforcement learning: generation and inference engines share the card"),
    ("gpt/gpt3_15b_8t_release*", "squared-ReLU MLP (--squared-relu) and LayerNorm-1p: not a plan setting"),
    ("gpt/gpt3_weekly_*_native_fp8_*", "fp8 primary weights (native fp8 parameters): not a plan setting"),
    ("moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_*, moe/*_etp1_ep4", "expert TP 1 beside TP 2: the plan's expert TP is TP"),
    ("moe/gpt3_moe_mcore_te_*_muon*", "the Muon optimizer: not modelled"),
    ("moe/*_fine_grained_offloading", "fine-grained activation offloading: not a plan setting"),
    ("*_cudagraph*", "CUDA graphs keep their own memory pool: not modelled"),
    ("gpt/gpt3_mcore_te_tp2_pp2_mla", "multi-latent attention: not modelled"),
    ("*zp_z3*, *fsdp*", "Megatron-FSDP (ZeRO-3 of its own): not the DDP / distributed optimizer this source checks"),
    ("gpt/gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline", "an uneven pipeline split: not read in this pass"),
    (
        "gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split",
        "the embedding and the loss counted as pipeline layers: not read in this pass",
    ),
    ("*fp16*, gpt/gpt3_mcore_tp4_pp1_resume_torch*", "fp16 with loss scaling: not read in this pass"),
    (
        "other *_resume_*, *_frozen_*, *_nondeterministic*, *_dp_last*, *_calculate_per_token_loss*, *_reshard_*",
        "checkpoint / determinism / rank-order variants of a recorded recipe: the same memory, not recorded twice",
    ),
    (
        "moe/gpt3_mcore_*_4experts2parallel*, moe/gpt3_mcore_te_tp1_pp1_te_4experts_groupedGEMM_op_fuser",
        "MoE variants with CP / local spec / op fuser: not read in this pass",
    ),
    (
        "moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_ddp_average_in_collective",
        "same recipe as the grouped-GEMM case recorded",
    ),
    ("gpt/gpt3_mcore_reruns_resume_check_grads", "rerun-state-machine test (re-runs steps to check gradients)"),
    (
        "gpt/gpt3_mcore_te_tp1_pp4_vp1_*tunable_overlap, *decoupled_lr*",
        "variants of a recorded PP 4 interleaved recipe",
    ),
    ("gpt/gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files", "same recipe as the FIM-dataset case recorded"),
)


# The arguments that decide memory, quoted in each record as the case gives them.
RELEVANT: Final = (
    "--num-layers",
    "--hidden-size",
    "--num-attention-heads",
    "--group-query-attention",
    "--num-query-groups",
    "--ffn-hidden-size",
    "--swiglu",
    "--normalization",
    "--disable-bias-linear",
    "--position-embedding-type",
    "--untie-embeddings-and-output-weights",
    "--vocab-size",
    "--tokenizer-type",
    "--max-position-embeddings",
    "--seq-length",
    "--micro-batch-size",
    "--global-batch-size",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--num-layers-per-virtual-pipeline-stage",
    "--context-parallel-size",
    "--expert-model-parallel-size",
    "--num-experts",
    "--moe-router-topk",
    "--moe-grouped-gemm",
    "--use-distributed-optimizer",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--sequence-parallel",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--transformer-impl",
    "--attention-backend",
    "--hidden-dropout",
    "--attention-dropout",
    "--bf16",
    "--fp16",
    "--grad-reduce-in-bf16",
    "--no-gradient-accumulation-fusion",
    "--cross-entropy-loss-fusion",
    "--fp8-format",
)


def _git(mirror: str, path: str) -> str:
    out = subprocess.run(["git", "--git-dir", mirror, "show", f"{COMMIT}:{path}"], capture_output=True, text=True)
    out.check_returncode()
    return out.stdout


def _last(values: dict[str, Any]) -> tuple[int, float]:
    steps = [(int(k), float(v)) for k, v in values.items() if isinstance(v, (int, float))]
    return max(steps)


def _line(text: str, metric: str, step: int) -> tuple[int, str]:
    """The line (1-based) of ``"<step>": value`` inside ``metric``'s block, and that text."""
    found = re.search(rf'"{re.escape(metric)}"\s*:.*?("{step}"\s*:\s*[-0-9.eE+]+)', text, re.S)
    if found is None:
        raise ValueError(f"{metric} step {step} not found")
    return text.count("\n", 0, found.start(1)) + 1, found.group(1)


def _args(config: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **config.get("MODEL_ARGS", {})}


def _vocab(args: dict[str, Any], tp: int) -> tuple[int, int]:
    raw = int(args["--vocab-size"]) if args.get("--tokenizer-type") == "NullTokenizer" else GPT2_BPE_VOCAB
    multiple = int(args["--make-vocab-size-divisible-by"]) * tp
    return raw, math.ceil(raw / multiple) * multiple


def _attention(args: dict[str, Any]) -> str:
    if args.get("--transformer-impl") == "local" or args["--attention-backend"] in ("unfused", "local"):
        return "eager"
    return "flash"


def _recipe(model: str, case: str, args: dict[str, Any]) -> dict[str, Any]:
    tp = int(args.get("--tensor-model-parallel-size", 1))
    pp = int(args.get("--pipeline-model-parallel-size", 1))
    cp = int(args.get("--context-parallel-size", 1))
    ep = int(args.get("--expert-model-parallel-size", 1))
    layers = int(args["--num-layers"])
    per_virtual = args.get("--num-layers-per-virtual-pipeline-stage")
    vp = layers // pp // int(per_virtual) if per_virtual else 1
    dp = GPUS // (tp * pp * cp)
    mbs, gbs = int(args["--micro-batch-size"]), int(args["--global-batch-size"])
    hidden, heads = int(args["--hidden-size"]), int(args["--num-attention-heads"])
    raw, padded = _vocab(args, tp)
    swiglu = bool(args.get("--swiglu"))
    ffn = int(args.get("--ffn-hidden-size") or 4 * hidden)
    experts = int(args.get("--num-experts") or 1)
    granularity = args.get("--recompute-granularity")
    return {
        "model": f"Megatron-LM CI {model}/{case} (GPTModel from dimensions)",
        "catalogue_id": None,
        "model_dims": {
            "layers": layers,
            "hidden": hidden,
            "heads": heads,
            "kv_heads": int(args["--num-query-groups"]) if args.get("--group-query-attention") else heads,
            "ffn": ffn,
            "vocab": raw,
            "padded_vocab": padded,
            "max_positions": int(args.get("--max-position-embeddings") or args["--seq-length"]),
            "position_embedding": args["--position-embedding-type"],
            "normalization": args["--normalization"],
            "swiglu": swiglu,
            "bias_linear": not args.get("--disable-bias-linear"),
            "untied": bool(args.get("--untie-embeddings-and-output-weights")),
            "hidden_dropout": float(args["--hidden-dropout"]),
            "attention_dropout": float(args["--attention-dropout"]),
            "num_experts": experts,
            "router_topk": int(args["--moe-router-topk"]) if experts > 1 else 1,
        },
        "method": "full",
        "lora": None,
        "quant": None,
        "double_quant": None,
        "weights_dtype": "bf16",
        "autocast": "none",
        "adapter_dtype": None,
        "optimizer": "adamw",
        "optimizer_impl": "fused",
        "micro_batch": mbs,
        "seq_len": int(args["--seq-length"]),
        "grad_accum": gbs // (mbs * dp),
        "packing": True,
        "padding": None,
        "checkpointing": {"full": "full", "selective": "selective"}.get(str(granularity), "none"),
        "attention": _attention(args),
        "compile": False,
        "float8": bool(args.get("--fp8-format")),
        "optimizer_in_backward": False,
        "activation_offload": False,
        "cpu_offload": "none",
        "fused_ce_or_liger": bool(args.get("--cross-entropy-loss-fusion")),
        "moe_grouped_gemm": bool(args.get("--moe-grouped-gemm")),
        # Megatron-Core's default when the case does not pass it (transformer_config.py at d98e8a64:
        # moe_token_dispatcher_type = "allgather").
        "moe_token_dispatcher": str(args.get("--moe-token-dispatcher-type", "allgather")) if experts > 1 else None,
        "prepare_model_for_kbit_training": False,
        "parallel": {
            "strategy": "megatron-distopt" if args.get("--use-distributed-optimizer") else "megatron-ddp",
            "gpus": GPUS,
            "nodes": 1,
            "tp": tp,
            "pp": pp,
            "cp": cp,
            "ep": ep,
            "vp": vp,
            "sequence_parallel": bool(args.get("--sequence-parallel")),
            "grad_reduce_in_fp32": not args.get("--grad-reduce-in-bf16"),
        },
        "gpu": "NVIDIA H100 80GB HBM3 (dgx_h100)",
        "gpu_catalogue_id": "h100-sxm",
        "framework": f"Megatron-LM {COMMIT[:8]} (Megatron-Core, pretrain_gpt.py)",
        "versions": {"megatron-lm": COMMIT[:8]},
    }


def records(mirror: str) -> list[dict[str, Any]]:
    out = []
    for model, case, why in READ:
        folder = f"{CASES_DIR}/{model}/{case}"
        args = _args({"MODEL_ARGS": yaml.safe_load(_git(mirror, f"{folder}/model_config.yaml"))["MODEL_ARGS"]})
        text = _git(mirror, f"{folder}/{GOLDEN}")
        golden = json.loads(text)
        recipe = _recipe(model, case, args)
        config = yaml.safe_load(_git(mirror, f"{folder}/model_config.yaml"))["MODEL_ARGS"]
        given = [f"{k} {config[k]}" for k in config if k in RELEVANT]
        for metric, key, scope in (
            (
                "allocated",
                "mem-max-allocated-bytes",
                "allocated_bytes.all.peak of the last rank since the process started (no reset), at the last "
                "logged iteration",
            ),
            (
                "resident",
                "mem-allocated-bytes",
                "allocated_bytes.all.current of the last rank after the last logged iteration (its optimizer "
                "step done): the state held between steps",
            ),
        ):
            step, value = _last(golden[key]["values"])
            line, quote = _line(text, key, step)
            out.append(
                {
                    "id": f"megatron-ci-{case}-{'peak' if metric == 'allocated' else 'between-steps'}",
                    "source_id": SOURCE_ID,
                    "metric": metric,
                    "scope": scope,
                    "value": value,
                    "unit": "B",
                    "value_bytes": value,
                    "recipe": recipe,
                    "confidence": "partly-assumed",
                    "assumptions": [
                        f"Why this case: {why}.",
                        *ASSUMED,
                        f"Arguments the case gives: {', '.join(given)}.",
                        *([FUSED_CE] if args.get("--cross-entropy-loss-fusion") else []),
                    ],
                    "not_comparable_reason": None,
                    "quote": f'"{key}": {{ ... {quote} }}',
                    "location": {
                        "repo": REPO,
                        "path": f"{folder}/{GOLDEN}",
                        "commit": COMMIT,
                        "url": f"https://github.com/{REPO}/blob/{COMMIT}/{folder}/{GOLDEN}#L{line}",
                        "line": line,
                    },
                }
            )
    return out


SOURCE: Final = {
    "id": SOURCE_ID,
    "title": "Megatron-LM functional tests' golden values (H100): memory per test case",
    "kind": "framework-ci",
    "authors_or_org": "NVIDIA Megatron-LM (Megatron-Core) team",
    "url_or_repo": REPO,
    "commit_or_date": f"{COMMIT} (2026-08-22)",
    "independence_note": "NVIDIA's own CI on DGX H100 nodes with Megatron-Core, Transformer Engine and Apex: "
    "a framework, code and machines none of the other sources use.",
    "how_metric_was_determined": "megatron/training/training.py training_log (d98e8a64, lines 3436-3446): with "
    "--log-memory-to-tensorboard, torch.cuda.memory_stats()'s allocated_bytes.all.current ('mem-allocated-bytes') "
    "and allocated_bytes.all.peak ('mem-max-allocated-bytes') after each logged iteration, on the last rank "
    "(the tensorboard writer's); the peak is never reset, so it is the run's. The golden values file keeps "
    "every logged iteration; the last one is recorded.",
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    corpus = json.loads(CORPUS.read_text())
    corpus["sources"] = [s for s in corpus["sources"] if s["id"] != SOURCE_ID] + [SOURCE]
    corpus["figures"] = [f for f in corpus["figures"] if f["source_id"] != SOURCE_ID] + records(argv[0])
    CORPUS.write_text(json.dumps(corpus, indent=1))
    print(f"wrote {len(READ) * 2} records of {len(READ)} cases; {len(SKIPPED)} groups listed as not recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
