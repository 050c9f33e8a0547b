"""Precision roles, optimizer implementations, DoRA and the newer architectures (issue 11).

Numbers come from the frameworks' own code and output: torch 2.13 ``torch/optim/adam.py``
(which temporaries each implementation allocates), PEFT 0.21 ``tuners/lora`` (the input
cast, DoRA's magnitude), transformers 5.24 ``modeling_*.py`` and ``model.num_parameters()``
as recorded by tools/measure in ``benchmarks/accuracy/measured/*.json`` ("parameters").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.breakdown import BucketKey, StepPhase
from core.dtypes import Autocast, Dtype
from core.errors import PlanError
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.params import param_counts
from core.plan import PRESET_ROLES, Attention, Method, Optimizer, OptimizerImpl, Plan, Precision, Preset
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training.activations import layer_activations
from core.training.attention import Kernel, sdpa_kernel
from core.training.optimizer import largest_trainable_tensor, optimizer_step_temporary

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "benchmarks" / "accuracy" / "configs"
MEASURED = ROOT / "benchmarks" / "accuracy" / "measured"


def _phase(plan: Plan, kind: StepPhase) -> float:
    return max(p.allocated_bytes for p in estimate(plan).phases if p.kind is kind)


# ---- the plan: presets, roles and the old precision ---------------------------------------


def test_each_preset_is_the_roles_users_know() -> None:
    trainer = PRESET_ROLES[Preset.TRAINER_BF16]
    # transformers 5 loads bf16 checkpoints in bf16; PEFT upcasts adapters; Trainer(bf16=True) autocasts.
    assert (trainer.weight_dtype, trainer.base_dtype, trainer.adapter_dtype, trainer.autocast) == (
        Dtype.BF16,
        Dtype.BF16,
        Dtype.FP32,
        Autocast.BF16,
    )
    assert PRESET_ROLES[Preset.FP16_AMP].autocast is Autocast.FP16
    assert PRESET_ROLES[Preset.PURE_BF16].autocast is Autocast.NONE


def test_changing_one_role_makes_the_plan_custom_and_the_precision_follows() -> None:
    plan = plan_for_model("llama-3.1-8b", preset=Preset.TRAINER_BF16)
    assert plan.precision is Precision.BF16
    custom = plan.with_changes(autocast=Autocast.NONE, adapter_dtype=Dtype.BF16)
    assert custom.preset is Preset.CUSTOM
    back = custom.with_changes(preset=Preset.FP32)
    assert back.roles == PRESET_ROLES[Preset.FP32] and back.precision is Precision.FP32
    assert plan.with_changes(precision=Precision.FP16_MIXED).preset is Preset.FP16_AMP


def test_contradicting_roles_are_refused_naming_the_field() -> None:
    spec = plan_for_model("gpt2").model
    with pytest.raises(PlanError, match=r"^preset: "):
        Plan(model=spec, preset=Preset.FP32, weight_dtype=Dtype.BF16)


def test_precision_is_derived_from_the_roles_never_given() -> None:
    spec = plan_for_model("gpt2").model
    assert Plan(model=spec, preset=Preset.PURE_BF16).precision is Precision.BF16
    assert Plan(model=spec, preset=Preset.CUSTOM, weight_dtype=Dtype.FP16, base_dtype=Dtype.FP16,
                autocast=Autocast.NONE).precision is Precision.FP16  # fmt: skip
    with pytest.raises(TypeError):
        Plan(model=spec, precision=Precision.BF16)  # type: ignore[call-arg]


# ---- storage, gradients and state follow the roles -----------------------------------------


def test_trainer_bf16_full_fine_tuning_keeps_gradients_and_adam_state_in_bf16() -> None:
    """Trainer(bf16=True) does not upcast a model loaded in bf16: torch.optim's state is
    zeros_like(param), so 2 bytes per moment; and no autocast weight copies are made."""
    plan = plan_for_model("llama-3.2-1b", preset=Preset.TRAINER_BF16, optimizer_impl=OptimizerImpl.FUSED)
    step = next(p for p in estimate(plan).phases if p.kind is StepPhase.OPTIMIZER)
    t = param_counts(plan).trainable
    moments = next(term for term in step.bucket(BucketKey.OPTIMIZER).terms if term.label.startswith("Adam moments"))
    assert moments.bytes == 2 * t * 2
    assert step.bucket(BucketKey.GRADIENTS).bytes == t * 2
    assert not any(
        "autocast" in term.label for p in estimate(plan).phases for term in p.bucket(BucketKey.WEIGHTS).terms
    )


def test_autocast_copies_only_of_float32_weights() -> None:
    fp32_base = plan_for_model("llama-3.2-1b", method=Method.LORA, preset=Preset.FP32_AUTOCAST_BF16)
    bf16_base = fp32_base.with_changes(preset=Preset.TRAINER_BF16)
    assert dtypes_for(fp32_base).casts and not dtypes_for(bf16_base).casts
    fwd = {p.kind: p for p in estimate(fp32_base).phases}[StepPhase.FORWARD]
    labels = [t.label for t in fwd.bucket(BucketKey.WEIGHTS).terms]
    assert any("matmul weights (autocast)" in label for label in labels)
    fwd16 = {p.kind: p for p in estimate(bf16_base).phases}[StepPhase.FORWARD]
    assert not any("matmul weights" in t.label for t in fwd16.bucket(BucketKey.WEIGHTS).terms)


def _adapter_input_bytes(plan: Plan) -> float:
    acts = layer_activations(plan, trainable_block=False)
    return sum(t.bytes for t in acts.items if "attention norm output" in t.label)


def test_adapter_input_copies_follow_peft_and_autocast() -> None:
    """LoraLayer.forward casts x to the adapter's dtype (_cast_input_dtype), also under
    autocast, whose matmul then casts it to bf16: float32 adapters keep a float32 copy per
    adapter without autocast, a bf16 copy per adapter with it; bf16 adapters on a bf16 base
    without autocast read the norm output itself, once for all."""
    base = plan_for_model("llama-3.2-1b", method=Method.LORA).with_lora(targets=("q_proj", "k_proj", "v_proj"))
    base = base.with_workload(micro_batch=1, seq_len=1024)
    n_d = 1024 * base.model.hidden_size
    assert _adapter_input_bytes(base.with_changes(preset=Preset.PURE_BF16)) == 3 * n_d * 4
    assert _adapter_input_bytes(base.with_changes(preset=Preset.TRAINER_BF16)) == 3 * n_d * 2
    bf16_adapters = base.with_changes(preset=Preset.PURE_BF16).with_changes(adapter_dtype=Dtype.BF16)
    assert _adapter_input_bytes(bf16_adapters) == n_d * 2


# ---- optimizer implementations (torch 2.13 adam.py / sgd.py) -------------------------------


def test_adam_step_temporaries_per_implementation() -> None:
    plan = plan_for_model("qwen2.5-0.5b", precision=Precision.FP32)
    counts = param_counts(plan)
    dt = dtypes_for(plan)
    foreach = optimizer_step_temporary(plan.with_changes(optimizer_impl=OptimizerImpl.FOREACH), counts, dt)
    forloop = optimizer_step_temporary(plan.with_changes(optimizer_impl=OptimizerImpl.FORLOOP), counts, dt)
    assert foreach is not None and foreach.bytes == counts.trainable * 4  # _foreach_sqrt over every moment
    assert forloop is not None and forloop.bytes == 2 * largest_trainable_tensor(plan) * 4  # sqrt, then the quotient
    assert largest_trainable_tensor(plan) == plan.model.vocab_size * plan.model.hidden_size  # the embedding
    assert optimizer_step_temporary(plan.with_changes(optimizer_impl=OptimizerImpl.FUSED), counts, dt) is None
    for impl in OptimizerImpl:  # SGD updates in place in all three
        sgd = plan.with_changes(optimizer=Optimizer.SGD_MOMENTUM, optimizer_impl=impl)
        assert optimizer_step_temporary(sgd, counts, dt) is None


def test_fused_adamw_moves_a_small_full_fine_tune_peak_to_the_end_of_the_backward() -> None:
    """Without foreach's sqrt(v) copy the step is smaller than the end of the backward, where
    the tied embedding's gradient is summed out of place."""
    plan = plan_for_model("gpt2", precision=Precision.FP32).with_workload(micro_batch=1, seq_len=128)
    peaks = {}
    for impl in (OptimizerImpl.FOREACH, OptimizerImpl.FUSED):
        est = estimate(plan.with_changes(optimizer_impl=impl))
        peaks[impl] = max(est.phases, key=lambda p: p.allocated_bytes).kind
    assert peaks == {OptimizerImpl.FOREACH: StepPhase.OPTIMIZER, OptimizerImpl.FUSED: StepPhase.BACKWARD_END}


# ---- DoRA ------------------------------------------------------------------------------------


def test_dora_adds_one_magnitude_per_output_row_and_what_its_forward_keeps() -> None:
    lora = plan_for_model("llama-3.1-8b", method=Method.LORA, preset=Preset.TRAINER_BF16)
    dora = lora.with_changes(method=Method.DORA)
    model = lora.model
    # q_proj (4096 out) and v_proj (1024 out) in 32 layers: PEFT lora_magnitude_vector sizes.
    assert param_counts(dora).trainable - param_counts(lora).trainable == 32 * (4096 + 1024)
    n = lora.workload.micro_batch * lora.workload.seq_len
    extra = layer_activations(dora, False).bytes - layer_activations(lora, False).bytes
    # base and adapter outputs (bf16 under autocast); the identity B·A is built from is freed with each
    # layer's forward (PEFT 0.21.2 dora.py: B·A is read only through .detach()), so no block keeps it
    assert extra == n * (4096 + 1024) * (2 + 2)
    assert model.dora_magnitude_params(("q_proj", "v_proj"), False) == 32 * (4096 + 1024)


# ---- architectures: exact counts against transformers' own ----------------------------------


def _measured_total(case_id: str) -> int:
    doc = json.loads((MEASURED / f"{case_id}.json").read_text())
    return int(doc["parameters"]["total"])


@pytest.mark.parametrize(
    ("config", "case_id"),
    [
        ("qwen3-0.6b.json", "qwen3-06b-full-bf16mixed-adamw-sdpa-b4-s1024"),
        ("olmo-2-0425-1b.json", "olmo2-1b-full-trainerbf16-adamw-fused-sdpa-b2-s2048"),
        ("gemma-3-1b-it.json", "gemma3-1b-full-trainerbf16-adamw-fused-sdpa-b2-s2048"),
    ],
)
def test_full_model_counts_equal_transformers(config: str, case_id: str) -> None:
    spec = model_from_hf_config(json.loads((CONFIGS / config).read_text()))
    assert spec.total_params() == _measured_total(case_id)


@pytest.mark.parametrize(
    ("config", "case_id"),
    [
        ("qwen1.5-moe-a2.7b.json", "qwen15moe-a27b-lora-r16-qkvo-trainerbf16-adamw-sdpa-b2-s2048"),
        ("qwen3-30b-a3b.json", "qwen3-30b-a3b-lora-r8-qv-trainerbf16-adamw-sdpa-ckpt-b2-s2048"),
        ("phi-3.5-mini-instruct.json", "phi35-mini-lora-r16-all-trainerbf16-adamw-sdpa-ckpt-b2-s2048"),
    ],
)
def test_adapted_model_counts_equal_transformers_and_peft(config: str, case_id: str) -> None:
    from core.files.measurement import plan_for_case

    doc = json.loads((MEASURED / f"{case_id}.json").read_text())
    plan = plan_for_case(doc["case"], json.loads((CONFIGS / config).read_text()))
    counts = param_counts(plan)
    assert counts.total + counts.adapter == _measured_total(case_id)
    assert counts.trainable == doc["parameters"]["trainable"]


def test_qk_norm_placement_per_family() -> None:
    qwen3 = model_from_hf_config(json.loads((CONFIGS / "qwen3-0.6b.json").read_text()))
    olmo2 = model_from_hf_config(json.loads((CONFIGS / "olmo-2-0425-1b.json").read_text()))
    moe = model_from_hf_config(json.loads((CONFIGS / "qwen1.5-moe-a2.7b.json").read_text()))
    assert (qwen3.qk_norm, qwen3.qk_norm_params()) == ("head", 2 * 128)  # Qwen3RMSNorm(head_dim) twice
    assert (olmo2.qk_norm, olmo2.post_norm, olmo2.qk_norm_params()) == ("projection", True, 2 * 2048)
    assert (moe.num_experts, moe.experts_per_token, moe.shared_expert_size) == (60, 4, 5632)


def test_gemma2_sdpa_runs_eager_and_says_so() -> None:
    """transformers 5: Gemma2PreTrainedModel._supports_sdpa = False (soft-capping)."""
    plan = plan_for_model("gemma-2-2b", attention=Attention.SDPA, preset=Preset.TRAINER_BF16)
    assert sdpa_kernel(plan) is Kernel.EAGER
    assert estimate(plan).peak_bytes == estimate(plan.with_changes(attention=Attention.EAGER)).peak_bytes
    assert any("SDPA" in note and "soft-capped" in note for note in estimate(plan).notes)
    assert sdpa_kernel(plan.with_changes(attention=Attention.FLASH)) is Kernel.FLASH


# Published hyperparameters (the models' config.json on the Hugging Face hub) and total
# counts: gpt-oss-20b 20,914,757,184 and gpt-oss-120b 116,829,156,672 (OpenAI's model card
# rounds them to 20.91B and 116.83B; the same totals come out of transformers 5.24
# AutoModelForCausalLM.from_config on the meta device), SmolLM3-3B 3,075,098,624
# (transformers 5.24, same method).
GPT_OSS_20B = {
    "model_type": "gpt_oss",
    "num_hidden_layers": 24,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "head_dim": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "tie_word_embeddings": False,
}
GPT_OSS_120B = {**GPT_OSS_20B, "num_hidden_layers": 36, "num_local_experts": 128}
GPT_OSS_120B["layer_types"] = ["sliding_attention", "full_attention"] * 18
SMOLLM3_3B = {
    "model_type": "smollm3",
    "vocab_size": 128256,
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "tie_word_embeddings": True,
}


@pytest.mark.parametrize(
    ("config", "total"),
    [(GPT_OSS_20B, 20_914_757_184), (GPT_OSS_120B, 116_829_156_672), (SMOLLM3_3B, 3_075_098_624)],
)
def test_gpt_oss_and_smollm3_counts_equal_the_published_totals(config: dict[str, object], total: int) -> None:
    assert model_from_hf_config(config).total_params() == total


def test_gpt_oss_active_parameters_match_the_model_card() -> None:
    """OpenAI's card gives 3.61B (20b) and 5.13B (120b) active parameters per token, counting
    the unembedding but not the embedding table (201,088 × 2,880)."""
    for config, active in ((GPT_OSS_20B, 3.61e9), (GPT_OSS_120B, 5.13e9)):
        spec = model_from_hf_config(config)
        assert (spec.active_params() - spec.vocab_size * spec.hidden_size) / 1e9 == pytest.approx(
            active / 1e9, abs=0.005
        )
        assert (spec.sliding_window, spec.sliding_window_layers) == (128, spec.num_layers // 2)


def test_moe_experts_compute_in_the_stored_dtype_because_autocast_skips_grouped_mm() -> None:
    """transformers' _grouped_mm casts the input to the weights' dtype ("grouped_mm ... are
    not autocast-enabled"): float32 experts under bf16 autocast keep float32 intermediates."""
    moe = model_from_hf_config(json.loads((CONFIGS / "qwen1.5-moe-a2.7b.json").read_text()))
    base = Plan(model=moe, method=Method.LORA).with_workload(micro_batch=1, seq_len=512)

    def experts(plan: Plan) -> float:
        return sum(t.bytes for t in layer_activations(plan, False).items if t.label.startswith("experts:"))

    fp32 = experts(base.with_changes(preset=Preset.FP32_AUTOCAST_BF16))
    bf16 = experts(base.with_changes(preset=Preset.TRAINER_BF16))
    assert fp32 == 2 * bf16
    pairs = 512 * moe.experts_per_token
    assert bf16 == pairs * (3 * moe.intermediate_size + moe.hidden_size) * 2  # gate|up, act(gate); output


def test_an_o_proj_adapter_keeps_its_own_cast_of_the_attention_output() -> None:
    """Either way one bf16 copy more: in eager attention the frozen o_proj keeps nothing, so
    the adapter's cast is the only copy of the attention output; a fused kernel keeps its
    output anyway and the adapter's cast (PEFT to float32, autocast back to bf16) comes on top."""
    base = plan_for_model("llama-3.2-1b", method=Method.LORA, preset=Preset.TRAINER_BF16).with_workload(
        micro_batch=1, seq_len=256
    )
    with_o, without = base.with_lora(targets=("q_proj", "o_proj")), base.with_lora(targets=("q_proj",))
    q_el = 256 * base.model.q_width
    lora_a = 256 * base.lora.rank * 2  # o_proj's own rank-r intermediate, bf16 under autocast
    for attention in (Attention.EAGER, Attention.SDPA):
        a = layer_activations(with_o.with_changes(attention=attention), False).bytes
        b = layer_activations(without.with_changes(attention=attention), False).bytes
        assert a - b == q_el * 2 + lora_a


@pytest.mark.parametrize(
    ("fused", "foreach"),
    [
        (
            "qwen25-05b-full-trainerbf16-adamw-fused-sdpa-b4-s1024",
            "qwen25-05b-full-bf16w-autocastbf16-adamw-sdpa-b4-s1024",
        ),
        ("gpt2-full-fp32-adamw-fused-sdpa-b4-s512", "gpt2-full-fp32-adamw-sdpa-b4-s512"),
        ("llama32-1b-full-bf16mixed-adamw-fused-sdpa-b2-s1024", "llama32-1b-full-bf16mixed-adamw-sdpa-b2-s1024"),
        ("qwen25-05b-full-fp16amp-adamw-sdpa-b4-s1024", "qwen25-05b-full-bf16mixed-adamw-sdpa-b4-s1024"),
    ],
)
def test_one_element_gpu_state_to_the_byte(fused: str, foreach: str) -> None:
    """Where the step is not the peak, fused AdamW differs from foreach only by its GPU step
    counters (one 512-byte block per parameter tensor: 290 for Qwen2.5-0.5B, 148 for GPT-2,
    146 for Llama-3.2-1B), and fp16 AMP from bf16 autocast by the GradScaler's three
    (measured twins in benchmarks/accuracy/measured)."""
    from core.files.measurement import plan_for_case

    docs = [json.loads((MEASURED / f"{case}.json").read_text()) for case in (fused, foreach)]
    measured = docs[0]["peak_allocated_bytes"] - docs[1]["peak_allocated_bytes"]
    estimated = [estimate(plan_for_case(d["case"], d.get("model_config"))).peak_bytes for d in docs]
    assert estimated[0] - estimated[1] == measured
