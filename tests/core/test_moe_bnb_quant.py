"""Which weights a bitsandbytes base quantises on a mixture of experts under transformers 4.x and 5.x (issue 22,
branch h81qmoe).

Source of every expected count: tests/data/moe_bnb/bnb_transformers_{4.57.1,5.25.0}.json, written by
tools/measure/moe_bnb_quant.py (bitsandbytes 0.50.2 on the CPU, torch 2.13.0 CPU): each family of
tools/measure/moe_lora_configs.py (hidden 64, expert MLP 32, 4 experts, 2 layers) saved in bfloat16 and loaded
back with ``BitsAndBytesConfig(load_in_4bit=True)`` (NF4) or ``load_in_8bit=True``; the figures are the bytes of
each parameter class (a Params4bit holds two weights a byte, an Int8Params one). transformers'
``replace_with_bnb_linear`` swaps nn.Linear only (5.25.0 integrations/bitsandbytes.py), so routed experts held as
3-D parameters stay bfloat16: every family under 5.25.0, gpt-oss and Llama 4 under 4.57.1 too
(core.model.BNB_LINEAR_EXPERTS_4X).
"""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import pytest

from core.advice import remedies
from core.catalogue import find_model
from core.dtypes import Quant
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.inputs import training_transformers_matters
from core.params import bnb_16bit_experts, quantised_block_params
from core.plan import LoraSettings, Method, Plan, TransformersLoss
from core.roles import dtypes_for
from core.training.speed import BNB_DEQUANT_KERNELS, eager_block_kernels
from core.training.storage import weight_terms
from core.units import GB
from tools.measure.moe_lora_configs import COMMON, FAMILIES, FFN, LAYERS, D, E

DATA = Path(__file__).resolve().parents[1] / "data" / "moe_bnb"
RELEASES = {
    "4.57.1": (json.loads((DATA / "bnb_transformers_4.57.1.json").read_text()), TransformersLoss.V4_49_TO_4_57),
    "5.25.0": (json.loads((DATA / "bnb_transformers_5.25.0.json").read_text()), TransformersLoss.V5_ON),
}
# The quantised parameter class, and weights per stored byte (bitsandbytes' Params4bit packs two, Int8Params one).
QUANTS = {"nf4": ("Params4bit:uint8", 2, Quant.NF4), "int8": ("Int8Params:int8", 1, Quant.INT8)}
# What the measured models quantise that the plan leaves out of its matrices (ModelSpec.matmul_params): a router
# that is an nn.Linear under 4.x (hidden → experts, each layer) and Qwen2-MoE's shared-expert gate (hidden → 1).
ROUTER = D * E * LAYERS
SHARED_GATE = D * 1 * LAYERS
UNCOUNTED = {
    ("4.57.1", "mixtral"): ROUTER,
    ("4.57.1", "qwen3_moe"): ROUTER,
    ("4.57.1", "olmoe"): ROUTER,
    ("4.57.1", "ernie4_5_moe"): ROUTER,
    ("4.57.1", "qwen2_moe"): ROUTER + SHARED_GATE,
    ("4.57.1", "llama4_text"): ROUTER,
    ("5.25.0", "qwen2_moe"): SHARED_GATE,
}
# gpt-oss's experts carry biases (gate_up_proj_bias E × 2I, down_proj_bias E × d): unquantised, no matrix.
EXPERT_BIASES = {"gpt_oss": LAYERS * E * (2 * FFN + D)}


def _plan(family: str, release: TransformersLoss, quant: Quant, **changes: object) -> Plan:
    spec = model_from_hf_config({"model_type": family, **COMMON, **FAMILIES[family]}, name=family)
    targets = ("q_proj", "o_proj") if family == "deepseek_v3" else ("q_proj", "v_proj")
    lora = LoraSettings(rank=8, alpha=16, targets=targets)
    return Plan(model=spec, method=Method.QLORA, quant=quant, lora=lora, training_transformers=release, **changes)


CASES = [pytest.param(*case, id="-".join(case)) for case in product(RELEASES, FAMILIES, QUANTS)]


def test_the_data_is_the_tiny_model_these_configs_build() -> None:
    for data, _ in RELEASES.values():
        assert set(data["families"]) == set(FAMILIES)
    assert RELEASES["5.25.0"][0]["transformers"] == "5.25.0"
    assert RELEASES["4.57.1"][0]["transformers"] == "4.57.1"


@pytest.mark.parametrize(("release", "family", "quant"), CASES)
def test_the_plan_quantises_what_bitsandbytes_quantised(release: str, family: str, quant: str) -> None:
    data, line = RELEASES[release]
    kind, per_byte, plan_quant = QUANTS[quant]
    parts = data["families"][family][quant]
    quantised = sum(part["by_kind"].get(kind, 0) * per_byte for part in parts.values())
    experts_16 = parts["routed_experts"]["by_kind"].get("Parameter:bfloat16", 0) // 2  # bfloat16: 2 bytes
    plan = _plan(family, line, plan_quant)
    assert quantised_block_params(plan) == quantised - UNCOUNTED.get((release, family), 0)
    assert bnb_16bit_experts(plan) == experts_16 - (EXPERT_BIASES.get(family, 0) if experts_16 else 0)
    # every expert matrix is one or the other: 4 experts × 3 matrices of 64 × 32, 2 layers
    expert_matrices = LAYERS * E * 3 * D * FFN
    assert bnb_16bit_experts(plan) in (0, expert_matrices)
    assert plan.bnb_16bit_experts == bool(experts_16)


def test_litgpt_and_unsloths_4_bit_loader_quantise_the_experts() -> None:
    # LitGPT's own MoE (LLaMAMoE.experts, nn.Linear) under Lightning's bitsandbytes plugin; Unsloth's loader packs
    # 3-D experts as Params4bit (unslothai/unsloth-zoo 0d3aba8a temporary_patches/moe_utils_bnb4bit.py), not int8.
    v5 = TransformersLoss.V5_ON
    assert not _plan("qwen3_moe", v5, Quant.NF4, unsloth=True).bnb_16bit_experts
    assert _plan("qwen3_moe", v5, Quant.INT8, unsloth=True).bnb_16bit_experts
    litgpt = _plan("mixtral", v5, Quant.NF4).with_method(Method.ADAPTER_V2)
    assert not litgpt.bnb_16bit_experts


def test_qwen3_30b_a3b_under_5_holds_its_experts_in_bf16() -> None:
    # Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json: hidden 2048, moe_intermediate_size 768, 128 experts, 48 layers):
    # 48 × 128 × 3 × 2048 × 768 = 28,991,029,248 expert weights, 57.98 GB in bf16, where NF4 would hold 15.4 GB.
    v5 = _plan_of("qwen3-30b-a3b", TransformersLoss.V5_ON)
    v4 = _plan_of("qwen3-30b-a3b", TransformersLoss.V4_49_TO_4_57)
    assert bnb_16bit_experts(v5) == 48 * 128 * 3 * 2048 * 768 == 28_991_029_248
    assert bnb_16bit_experts(v4) == 0
    terms = weight_terms(v5, estimate(v5).params, dtypes_for(v5))
    experts = next(t for t in terms if t.label.startswith("routed experts unquantised"))
    assert "5.0+" in experts.label and "nn.Linear only" in experts.label
    assert experts.bytes / GB == pytest.approx(57.98, abs=0.01)
    gained = estimate(v5).peak_bytes - estimate(v4).peak_bytes
    assert gained / GB == pytest.approx(57.98 - 28_991_029_248 * (0.5 + 1 / 64 + 4 / (64 * 256)) / 1e9, rel=0.01)


def test_the_release_row_shows_where_it_moves_the_quantised_experts() -> None:
    assert training_transformers_matters(_plan_of("qwen3-30b-a3b", TransformersLoss.V5_ON))
    # gpt-oss's experts are 3-D in every release: the release moves nothing (q_proj, v_proj targets, its loss the same)
    assert not _plan_of("gpt-oss-20b", TransformersLoss.V5_ON).release_moves_bnb_experts


def _plan_of(model: str, release: TransformersLoss) -> Plan:
    return Plan(model=find_model(model).spec, method=Method.QLORA, training_transformers=release)



def test_the_diagnosis_offers_the_4_x_release_where_it_quantises_the_experts() -> None:
    # Qwen3-30B-A3B QLoRA under 5.0+ on a 24 GB card: the 4.49-4.57 remedy quantises its 29.0e9 expert weights, the
    # estimate of the changed plan is the 4.x plan's own (its weights 57.98 GB → 15.4 GB, above).
    plan = _plan_of("qwen3-30b-a3b", TransformersLoss.V5_ON).with_hardware(gpu="rtx-4090")
    found = {r.kind: r for r in remedies.remedies_for(plan)}[remedies.RemedyKind.EXPERTS_QUANTISED]
    assert found.plan.training_transformers is TransformersLoss.V4_49_TO_4_57
    assert found.estimate.total_bytes == estimate(found.plan).total_bytes < estimate(plan).total_bytes
    # gpt-oss-20b: 3-D experts in 4.55+ too, nothing to offer; a 4.x plan has its experts quantised already.
    gpt_oss = _plan_of("gpt-oss-20b", TransformersLoss.V5_ON).with_hardware(gpu="rtx-4090")
    assert remedies.RemedyKind.EXPERTS_QUANTISED not in {r.kind for r in remedies.remedies_for(gpt_oss)}
    four = _plan_of("qwen3-30b-a3b", TransformersLoss.V4_49_TO_4_57).with_hardware(gpu="rtx-4090")
    assert remedies.RemedyKind.EXPERTS_QUANTISED not in {r.kind for r in remedies.remedies_for(four)}


def test_16_bit_experts_are_not_dequantised_by_the_step() -> None:
    # bitsandbytes' MatMul4Bit dequantises a Linear4bit's weight each pass (core.training.speed BNB_DEQUANT_KERNELS:
    # 3 kernels with double quantisation, 1 without); the 3-D experts are no Linear4bit. Qwen3-30B-A3B's block: q, k,
    # v, o and the experts' gate, up, down under 4.x (7 linears), the attention alone under 5.x (4).
    v5 = _plan_of("qwen3-30b-a3b", TransformersLoss.V5_ON)
    v4 = _plan_of("qwen3-30b-a3b", TransformersLoss.V4_49_TO_4_57)
    per_linear = BNB_DEQUANT_KERNELS[v5.double_quant]
    fewer = [a - b for a, b in zip(eager_block_kernels(v4), eager_block_kernels(v5), strict=True)]
    assert fewer == [3 * per_linear] * 3  # forward, backward, recompute
    assert estimate(v5).compute.hours < estimate(v4).compute.hours
