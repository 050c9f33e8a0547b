"""Training a Gated DeltaNet hybrid (Qwen3-Next, Qwen3.5 / 3.6): what a layer keeps on each path transformers 5.25.0
runs (core.training.gdn), the gated attention beside it, the whole step against fake-tensor measurements, the LoRA
targets and what stays refused."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from core.estimate import estimate
from core.files.launch import Target, export
from core.files.measurement import plan_for_case
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.hfconfig import model_from_hf_config
from core.hybrid import GATED_DELTANET, RecurrentMixer
from core.plan import LoraSettings, Method, Plan, lora_on, training_refusal
from core.presets import plan_for_model
from core.training.gdn import DeltaNetShape, gated_attention_terms, kernel_path_terms, torch_path_terms
from tests.core.test_hybrid_training import step_error

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "accuracy" / "measured_hybrid"
CONFIGS = ROOT / "benchmarks" / "accuracy" / "configs"
# benchmarks/accuracy/configs/tiny-qwen3.5.json's (and tiny-qwen3-next.json's) layer: 4 value heads of 32, 2 key
# heads of 32, kernel 4.
# RecurrentMixer: value heads, value dim, key dim (state), key heads (groups), kernel, value width.
_LAYER = RecurrentMixer(GATED_DELTANET, 4, 32, 32, 2, 4, 4 * 32)
TINY = DeltaNetShape(2, 1024, _LAYER)
ODD = DeltaNetShape(1, 1000, _LAYER)  # the scan pads 1,000 positions to 1,024
ONE = DeltaNetShape(1, 64, _LAYER)  # one chunk: its loop reads only the zero initial state
SHORT = DeltaNetShape(2, 50, _LAYER)  # one chunk, 50 positions padded to 64


def _saved(m: DeltaNetShape, autocast: bool, trainable: bool) -> float:
    return sum(t.bytes for t in torch_path_terms(m, 2.0, autocast, trainable))


@pytest.mark.parametrize(
    ("layer", "autocast", "trainable", "counted"),
    [
        # `python tools/measure/gdn_saved.py tiny-qwen3.5 [--frozen]` (torch 2.13.0 CPU, transformers 5.25.0, fake
        # CUDA): the saved storages less the layer's input (the block norm's output, 1,048,576 B, kept only when
        # the weights train), out_proj's input (524,288 B bf16, when they train; both counted by the block's
        # readers rule) and the float32 weights' 16-bit casts under autocast (in_proj_qkv 131,072, in_proj_z
        # 65,536, in_proj_b / _a 2,048 each, conv1d 2,048, out_proj 65,536 B).
        (TINY, False, True, 30_727_712 - 1_048_576 - 524_288),
        (TINY, True, True, 30_406_176 - 1_048_576 - 524_288 - 268_288),
        (TINY, False, False, 28_597_776),
        (TINY, True, False, 28_276_240 - 268_288),
        # `... tiny-qwen3.5 --batch 1 --seq 1000`: input 512,000 B, out_proj input 256,000 B.
        (ODD, False, True, 15_247_072 - 512_000 - 256_000),
        (ODD, True, True, 15_214_304 - 512_000 - 256_000 - 268_288),
        # `... --batch 1 --seq 64` and `--batch 2 --seq 50 [--frozen]` (branch h73short): input 32,768 and 51,200 B,
        # out_proj input 16,384 and 25,600 B. Before the one-chunk rule the float32 sums were Np·H·dk × 4 over
        # (32,768 and 65,536 B: the decayed q no chunk reads).
        (ONE, False, True, 932_912 - 32_768 - 16_384),
        (ONE, True, True, 1_184_816 - 32_768 - 16_384 - 268_288),
        (SHORT, False, True, 1_723_040 - 51_200 - 25_600),
        (SHORT, True, True, 1_951_392 - 51_200 - 25_600 - 268_288),
        (SHORT, False, False, 1_619_024),
    ],
)
def test_the_torch_path_keeps_what_autograd_saves(
    layer: DeltaNetShape, autocast: bool, trainable: bool, counted: int
) -> None:
    assert _saved(layer, autocast, trainable) == counted


def test_the_gated_attention_keeps_its_norms_and_gate() -> None:
    # `python tools/measure/gdn_saved.py tiny-qwen3.5 --attention`: 13,845,016 B saved, less the rotary cos / sin
    # (131,072 B, made once for all layers) and the RNG state (24 B): 13,713,920 B, of which the plain attention
    # rules count the input, q after RoPE, k, v, the log-sum-exp and the kernel's output (4,227,072 B).
    # 4 heads and 2 KV heads of 64 (tiny-qwen3.5.json), B·S 2,048.
    extra = sum(t.bytes for t in gated_attention_terms(2048, 4, 2, 64, 2.0, True, True))
    assert extra == 13_713_920 - 4_227_072


def test_the_kernel_path_keeps_far_less() -> None:
    # ChunkGatedDeltaRuleFunction keeps q, k (the key heads), v, g, beta and A (core.training.gdn): on the tiny
    # layer at B·S 2,048: conv input N·256 + q, k, v N·256 (bf16), 1/‖q‖, 1/‖k‖ 2 · N·2 (float32), g N·4 (float32),
    # beta N·4, A N·4·64 (bf16), softplus and A_log 2 · (N·4 + 4) (float32), the gated norm as on the torch path.
    n = 2048
    kept = sum(t.bytes for t in kernel_path_terms(TINY, 2.0, False, True))
    norm = 3 * n * 128 * 4 + n * 4 * 4 + 2 * n * 128 * 2
    assert kept == 2 * n * 256 * 2 + 2 * n * 2 * 4 + n * 4 * 4 + n * 4 * 2 + n * 4 * 64 * 2 + 2 * (n * 4 + 4) * 4 + norm
    assert kept * 3 < _saved(TINY, False, True)


def test_the_step_matches_the_fake_tensor_measurements() -> None:
    # benchmarks/accuracy/cases_hybrid.json's hyb-qwen35-* and hyb-qwen3next-* cases measured with
    # `python -m tools.measure` (torch 2.13.0 CPU, transformers 5.25.0, peft 0.18.0, fake CUDA): full and LoRA,
    # bf16, with and without checkpointing, B·S 2 × 1,024 and 1 × 2,048; branch h73short's 14 more at 1 × 64 (one
    # chunk), 1 × 100, 1 × 256 and 1 × 300 (median 0.17 %, worst 1.87 % over all 26 at that commit; the held-out
    # ones: tests/core/test_hybrid_training.py). The two checkpointed LoRA steps re-measured without torch's
    # ModTracker retention (branch h76memtr: -1.87 / -1.77 % -> -0.14 / -0.08 %): median 0.14 %, worst 0.60 %.
    # Figures in docs/REAL_GPU_MEMORY.md.
    paths = sorted(MEASURED.glob("hyb-qwen*.json"))
    errors = [abs(step_error(path)) for path in paths]
    assert len(errors) == 26
    assert statistics.median(errors) < 0.5
    assert max(errors) < 1.0


def test_lora_counts_the_adapters_peft_makes() -> None:
    # The measured LoRA steps' trainable parameters (PEFT's own count in each file's "parameters": rank 16 on
    # the targets the case names, real module names).
    for path in sorted(MEASURED.glob("hyb-qwen*-lora-*.json")):
        doc = json.loads(path.read_text())
        plan = plan_for_case(doc["case"], doc["model_config"])
        assert "in_proj" in plan.lora.targets
        assert estimate(plan).params.trainable == doc["parameters"]["trainable"], path.name


def _qwen35_lora() -> Plan:
    plan = plan_for_model("qwen3.5-9b")
    return replace(plan, method=Method.LORA, lora=lora_on(plan.model, plan.lora))


def test_picking_the_model_adds_the_mixer_targets_and_keeps_a_dense_mlp() -> None:
    plan = plan_for_model("qwen3.5-9b")
    lora = LoraSettings(targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    on = lora_on(plan.model, lora)
    assert on.targets == (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "in_proj",
        "out_proj",
    )
    assert training_refusal(replace(plan, method=Method.LORA, lora=on)) is None
    moe = plan_for_model("qwen3.5-35b-a3b")
    assert lora_on(moe.model, lora).targets == ("q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "out_proj")


def test_what_is_not_modelled_stays_refused() -> None:
    for model in ("qwen3.5-9b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b-instruct"):
        assert training_refusal(plan_for_model(model)) is None
    lora = _qwen35_lora()
    attention_only = replace(lora, lora=replace(lora.lora, targets=("q_proj", "v_proj")))
    assert "with in_proj among them" in (training_refusal(attention_only) or "")
    moe = plan_for_model("qwen3.5-35b-a3b")
    moe_mlp = replace(moe, method=Method.LORA, lora=LoraSettings(targets=("q_proj", "in_proj", "gate_proj")))
    assert "with in_proj among them" in (training_refusal(moe_mlp) or "")
    assert "use_cache" in (training_refusal(lora.with_changes(training_kv_cache=True)) or "")
    assert "not modelled" in (training_refusal(replace(lora, method=Method.QLORA)) or "")


@pytest.mark.parametrize("target", [Target.LLAMA_FACTORY, Target.AXOLOTL, Target.TRL])
def test_the_exports_name_the_input_projections_and_read_back(target: Target) -> None:
    plan = _qwen35_lora()
    exported = export(plan, target)
    # transformers 5.25.0 Qwen3_5GatedDeltaNet's module names, which PEFT matches.
    for name in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"):
        assert name in exported.text
    run = loads_run_config(exported.text.encode(), f"plan{exported.suffix}")
    choice = resolve_model(run)
    back = plan_from_run(run, plan_for_model("qwen3-8b"), choice)
    assert back.lora.targets == plan.lora.targets


def test_the_vision_tower_stays_frozen_under_lora() -> None:
    # Qwen3.5 is image-text (core.vision): a LoRA on the decoder leaves the tower's weights frozen and untrained.
    plan = _qwen35_lora()
    assert plan.model.vision_params > 0
    assert estimate(plan).params.trainable == plan.model.lora_params(
        plan.lora.rank, plan.lora.targets, plan.linear_experts
    )


def test_the_tiny_configs_count_as_transformers_builds_them() -> None:
    # AutoModelForCausalLM.from_config on each (torch 2.13.0, transformers 5.25.0): 4,337,144 and 6,705,656
    # parameters, the measured files' "parameters.total".
    counts = {"tiny-qwen3.5": 4_337_144, "tiny-qwen3-next": 6_705_656}
    for name, total in counts.items():
        spec = model_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text()))
        assert spec.params_override == total
