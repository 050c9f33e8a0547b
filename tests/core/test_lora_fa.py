"""PEFT's LoRA-FA (huggingface/peft 5d602fdb src/peft/optimizers/lorafa.py, PEFT 0.18.0 alike): create_lorafa_optimizer
freezes every lora_A, and LoraFAOptimizer trains lora_B alone with AdamW on its gradient projected through (A Aᵀ)⁻¹.

What it changes, as the planner counts it: the trainable parameters (lora_B's; lora_A stays stored), their gradients
and AdamW's two moments; the adapters' input, which lora_A's matmul no longer keeps (no dA: autograd saves an input
only for a gradient it computes), measured by tools/measure/lycoris_check.py "lorafa" (torch 2.13.0 CPU, PEFT 0.18.0,
a bf16 q_proj 256 → 256 and v_proj 256 → 64, N = 128 rows, r = 4, float32 adapters): 4,096 B saved (lora_A's two
N × r outputs) against LoRA's 266,240 B (its two float32 input copies beside them); and the step's projected
gradient and denominator, one pair at a time."""

from __future__ import annotations

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import Autocast, Dtype
from core.errors import PlanError
from core.estimate import estimate
from core.params import lora_fa_frozen_elements, param_counts
from core.plan import LoraSettings, Method, Offload, Optimizer, Plan, Preset, Strategy
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.optimizer import optimizer_step_temporary, optimizer_terms

R, N, D = 32, 4 * 768, 3_072  # the method comparison's rank 32, 4 × 768 tokens; Llama 3.2 3B's hidden size
LAYERS, KV = 28, 1_024  # Llama 3.2 3B: 28 blocks, v_proj 3,072 → 1,024 (8 KV heads × 128)


def _plan(optimizer: Optimizer, **changes: object) -> Plan:
    """The PEFT method comparison's LoRA rank 32 on q_proj / v_proj of Llama 3.2 3B: a bf16 base, float32 adapters
    (autocast_adapter_dtype), no autocast, no checkpointing, 4 × 768 tokens (benchmarks/realgpu/memory_figures.json
    peft-mc-lora--llama-3.2-3B-rank32-lorafa)."""
    plan = default_plan().with_changes(
        model=find_model("llama-3.2-3b").spec,
        model_id="llama-3.2-3b",
        method=Method.LORA,
        preset=Preset.CUSTOM,
        weight_dtype=Dtype.BF16,
        base_dtype=Dtype.BF16,
        adapter_dtype=Dtype.FP32,
        autocast=Autocast.NONE,
        checkpointing=False,
        lora=LoraSettings(rank=R, alpha=64, targets=("q_proj", "v_proj")),
        optimizer=optimizer,
    )
    return plan.with_workload(micro_batch=4, seq_len=768, grad_accum=1).with_changes(**changes)


def test_only_lora_b_trains_as_the_method_comparison_counts() -> None:
    # huggingface/peft 51c2ff66 method_comparison/MetaMathQA/results/lora--llama-3.2-3B-rank32-lorafa.json
    # "num_trainable_params": 3670016 (= 28 × 32 × (3,072 + 1,024)); lora--llama-3.2-3B-rank32.json: 9175040.
    lora, fa = param_counts(_plan(Optimizer.ADAMW)), param_counts(_plan(Optimizer.LORA_FA))
    assert lora.trainable == 9_175_040
    assert fa.trainable == 3_670_016
    assert fa.adapter == lora.adapter == 9_175_040  # lora_A is frozen, not gone: stored with the adapters
    assert lora_fa_frozen_elements(_plan(Optimizer.LORA_FA)) == LAYERS * R * (D + D)  # r·in of q_proj and v_proj


def test_the_adapters_keep_no_input_copy() -> None:
    """At the backward's start every block's saved tensors are alive: LoRA-FA's are LoRA's less the two float32
    input copies per block (tools/measure/lycoris_check.py: 266,240 B → 4,096 B, lora_A's outputs alone)."""
    lora, fa = estimate(_plan(Optimizer.ADAMW)), estimate(_plan(Optimizer.LORA_FA))
    assert lora.peak_phase == fa.peak_phase == "backward"
    dropped = lora.bucket(BucketKey.ACTIVATIONS).bytes - fa.bucket(BucketKey.ACTIVATIONS).bytes
    assert dropped == LAYERS * 2 * N * D * 4  # float32 copies of the q_proj / v_proj input, one per adapter
    blocks = [b.bucket(BucketKey.ACTIVATIONS).terms[0] for b in (lora, fa)]
    assert blocks[0].label == blocks[1].label == f"{LAYERS} blocks × saved tensors per block"
    assert blocks[0].bytes - blocks[1].bytes == dropped  # the blocks' tensors alone: lora_A's outputs stay


def test_dropout_leaves_its_mask_alone() -> None:
    """With lora_dropout the input still needs a gradient, so dropout keeps its mask (one byte an element on CUDA,
    the planner's LoRA rule); the dropped tensor reaches only the frozen lora_A, which keeps nothing of it."""
    lora = _plan(Optimizer.LORA_FA)
    dropped = lora.with_changes(lora=LoraSettings(rank=R, alpha=64, dropout=0.1, targets=("q_proj", "v_proj")))
    more = estimate(dropped).bucket(BucketKey.ACTIVATIONS).bytes - estimate(lora).bucket(BucketKey.ACTIVATIONS).bytes
    assert more == LAYERS * 2 * N * D * 1


def test_adamw_moments_of_lora_b_and_the_projected_step() -> None:
    plan = _plan(Optimizer.LORA_FA)
    counts, dt = param_counts(plan), dtypes_for(plan)
    state = optimizer_terms(plan, counts, dt)
    # LoraFAOptimizer: exp_avg_B, exp_avg_sq_B = torch.zeros_like(lora_B), float32 adapters: 8 B an element of B
    assert state[0].bytes == 2 * 3_670_016 * 4
    step = optimizer_step_temporary(plan, counts, dt)
    assert step is not None  # the projected gradient and sqrt(v) of the largest lora_B (q_proj's, 3,072 × 32)
    assert step.bytes == 2 * D * R * 4


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"method": Method.DORA}, "method"),  # DoRA's magnitude breaks the step's pairing by name
        ({"method": Method.LOHA}, "method"),  # no lora_A
        ({"unsloth": True}, "stack"),  # create_lorafa_optimizer takes a PeftModel with PEFT's own layers
    ],
)
def test_refused_outside_pefts_lora(changes: dict[str, object], field: str) -> None:
    with pytest.raises(PlanError) as refused:
        _plan(Optimizer.LORA_FA, **changes)
    assert refused.value.field == field
    assert "LoRA-FA" in str(refused.value)


@pytest.mark.parametrize("strategy", [Strategy.FSDP, Strategy.ZERO2, Strategy.ZERO3])
def test_refused_on_sharded_adapters(strategy: Strategy) -> None:
    with pytest.raises(PlanError, match="LoRA-FA with sharded or offloaded adapters"):
        _plan(Optimizer.LORA_FA).on_gpus(8, strategy)


def test_refused_with_offload() -> None:
    with pytest.raises(PlanError, match="LoRA-FA"):
        _plan(Optimizer.LORA_FA).on_gpus(2, Strategy.DDP).with_parallel(offload=Offload.OPTIMIZER)


def test_ddp_runs_it() -> None:
    assert estimate(_plan(Optimizer.LORA_FA).on_gpus(2, Strategy.DDP)).peak_bytes > 0
