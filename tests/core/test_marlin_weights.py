"""4-bit GPTQ and AWQ weights (and 8-bit GPTQ on Hopper) as vLLM's and SGLang's kernels keep them after
loading (core.serving.gptq.after_loading_delta).

Sources (released wheels, read for this rule): vLLM 0.6.3 / 0.10.2 / 0.19.0 ``gptq_marlin.py`` and the
mixed-precision kernels (``MarlinLinearKernel`` empties qzeros and g_idx; ``MacheteLinearKernel``, first
in ``_POSSIBLE_KERNELS`` and Hopper only, keeps them), 0.33.0 / 0.34.0 ``mixed_precision/marlin.py``
(``marlin_make_empty`` vs ``_retire_unused_zp``), 0.28.0 / 0.31.0 ``auto_gptq.py`` (g_idx registered or not),
0.18.0 / 0.19.0 ``awq_marlin.py`` (``choose_mp_linear_kernel`` from 0.19) and 0.19.0 ``machete.py``
``transform_w_zp`` (AWQ zeros to fp16); SGLang 0.4.6 / 0.4.10 ``layers/quantization`` (vLLM's linear
method, then its own).

The shapes are Qwen2.5-7B's config.json (resources/models.json, Qwen/Qwen2.5-7B) and Qwen3-30B-A3B's
(Qwen/Qwen3-30B-A3B: 48 layers, hidden 2,048, 128 experts of 768)."""

from __future__ import annotations

import math

import pytest

from core.catalogue import find_model
from core.dtypes import WeightFormat, weight_bytes
from core.plan import Attention, Engine, Hardware, Plan
from core.serving.engines import rank_layout
from core.serving.gptq import after_loading_delta, machete_runs
from core.serving.sglang_weights import plan_weights

QWEN7B = find_model("qwen2.5-7b")
QWEN3_MOE = find_model("qwen3-30b-a3b")
D, INTER, LAYERS, Q, KV = 3584, 18944, 28, 28 * 128, 4 * 128  # Qwen2.5-7B config.json
# (in, out) of each quantised linear of a Qwen2 block
LINEARS = [(D, Q), (D, KV), (D, KV), (Q, D), (D, INTER), (D, INTER), (INTER, D)]
GROUP = 128  # the checkpoints' group_size (quantize_config.json / config.json quantization_config)


def _plan(engine: Engine, fmt: WeightFormat, gpu: str = "a100-80gb-sxm", model=QWEN7B, **versions: str) -> Plan:
    base = Plan(model=model.spec, model_id=model.id, attention=Attention.FLASH, hardware=Hardware(gpu=gpu))
    return base.with_inference(engine=engine, weight_dtype=fmt, concurrent=1, context=2049, **versions)


def _stored(plan: Plan) -> float:
    """The checkpoint's bytes as core.dtypes counts them (what the delta is taken from)."""
    spec = plan.model
    return weight_bytes(spec, spec.total_params(), plan.inference.weight_dtype)


def _zero_groups() -> int:
    """Zero points of every quantised matrix: one per group of 128 input rows and output column."""
    return LAYERS * sum(math.ceil(n_in / GROUP) * n_out for n_in, n_out in LINEARS)


def test_vllm_marlin_frees_gptq4_qzeros_on_ampere() -> None:
    """MarlinLinearKernel (0.19.0) sets qzeros to marlin_make_empty_g_idx: int32 [in / 128, out / 8], half a
    byte a zero, gone."""
    plan = _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, vllm_version="0.19")
    assert rank_layout(plan).weights_bytes == pytest.approx(_stored(plan) - _zero_groups() / 2)
    assert not machete_runs(plan)
    # Blackwell and Ada run Marlin too (Machete is Hopper only)
    for gpu in ("b200", "l40s"):
        other = _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, gpu=gpu, vllm_version="0.19")
        assert rank_layout(other).weights_bytes == pytest.approx(_stored(other) - _zero_groups() / 2)


def test_vllm_keeps_gptq4_qzeros_on_hopper_below_sm80_and_from_034() -> None:
    """Hopper: MacheteLinearKernel repacks qweight and scales only. T4: the exllama gptq_gemm reads qzeros.
    0.34.0: Marlin retires qzeros with its data."""
    kept = [
        _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, gpu="h100-80gb-sxm", vllm_version="0.19"),
        _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, gpu="t4", vllm_version="0.19"),
        _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, vllm_version="0.34"),
    ]
    for plan in kept:
        assert rank_layout(plan).weights_bytes == pytest.approx(_stored(plan))
    assert machete_runs(kept[0])
    freed = _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, vllm_version="0.33")
    assert rank_layout(freed).weights_bytes < rank_layout(kept[2]).weights_bytes


def test_sglang_follows_vllms_kernel_until_its_own_marlin() -> None:
    """SGLang 0.4.6 imports vLLM's GPTQMarlinLinearMethod (Machete on Hopper); 0.4.10 has its own, Marlin on
    every sm80+ card."""
    old = _plan(Engine.SGLANG, WeightFormat.GPTQ_INT4, gpu="h100-80gb-sxm", sglang_version="0.4.6")
    new = _plan(Engine.SGLANG, WeightFormat.GPTQ_INT4, gpu="h100-80gb-sxm", sglang_version="0.4.10")
    assert after_loading_delta(old, old.model, old.model.stored_matmul_params()) == 0.0
    assert after_loading_delta(new, new.model, new.model.stored_matmul_params()) == pytest.approx(-_zero_groups() / 2)


def test_awq_zeros_kept_by_marlin_widened_by_machete() -> None:
    """awq_to_marlin_zero_points repacks to the same int32 [in / 128, out / 8]; from 0.19 AWQ picks its kernel
    with choose_mp_linear_kernel, and Machete's transform_w_zp stores -scale × zero as fp16 [in / 128, out]."""
    for plan in (
        _plan(Engine.VLLM, WeightFormat.AWQ_INT4, vllm_version="0.19"),
        _plan(Engine.VLLM, WeightFormat.AWQ_INT4, gpu="h100-80gb-sxm", vllm_version="0.18"),
        _plan(Engine.SGLANG, WeightFormat.AWQ_INT4, gpu="h100-80gb-sxm"),
        _plan(Engine.HF, WeightFormat.AWQ_INT4, gpu="h100-80gb-sxm"),
    ):
        assert after_loading_delta(plan, plan.model, plan.model.stored_matmul_params()) == 0.0
    hopper = _plan(Engine.VLLM, WeightFormat.AWQ_INT4, gpu="h100-80gb-sxm", vllm_version="0.19")
    assert rank_layout(hopper).weights_bytes == pytest.approx(_stored(hopper) + _zero_groups() * (2 - 0.5))


def test_gptq8_on_hopper_keeps_zeros_and_g_idx_while_registered() -> None:
    """8-bit (uint8b128) is a Machete type too: qzeros (one byte a zero) and g_idx kept; vLLM 0.31 no longer
    registers g_idx."""
    g_idx = LAYERS * sum(n_in * 4 for n_in, _ in LINEARS)
    h100 = _plan(Engine.VLLM, WeightFormat.GPTQ_INT8, gpu="h100-80gb-sxm", vllm_version="0.19")
    assert rank_layout(h100).weights_bytes == pytest.approx(_stored(h100))
    late = _plan(Engine.VLLM, WeightFormat.GPTQ_INT8, gpu="h100-80gb-sxm", vllm_version="0.31")
    assert rank_layout(late).weights_bytes == pytest.approx(_stored(late) - g_idx)
    a100 = _plan(Engine.VLLM, WeightFormat.GPTQ_INT8, vllm_version="0.19")
    assert rank_layout(a100).weights_bytes == pytest.approx(_stored(a100) - g_idx - _zero_groups())


def test_fused_moe_experts_keep_their_zeros() -> None:
    """GPTQMarlinMoEMethod empties w13 / w2 g_idx but never replaces w13_qzeros / w2_qzeros: only the
    attention's zeros go."""
    plan = _plan(Engine.VLLM, WeightFormat.GPTQ_INT4, model=QWEN3_MOE, vllm_version="0.19")
    spec = plan.model
    experts = 48 * 128 * 3 * 2048 * 768  # layers × experts × (gate, up, down) × hidden × expert width
    delta = after_loading_delta(plan, spec, spec.stored_matmul_params())
    assert delta == pytest.approx(-(spec.stored_matmul_params() - experts) / GROUP / 2)
    assert -delta < spec.stored_matmul_params() / GROUP / 2 / 10  # the experts are most of the matrices


def test_transformers_4bit_figures_are_the_checkpoints() -> None:
    for fmt in (WeightFormat.GPTQ_INT4, WeightFormat.AWQ_INT4):
        plan = _plan(Engine.HF, fmt)
        assert after_loading_delta(plan, plan.model, plan.model.stored_matmul_params()) == 0.0


def test_sglangs_replay_of_a_moe_keeps_the_experts_zeros_and_frees_every_g_idx() -> None:
    """SGLang's own Marlin methods (the 0.5.1 wheel's layers/quantization/gptq.py): GPTQMarlinLinearMethod
    empties the attention's qzeros and g_idx, GPTQMarlinMoEMethod the experts' w13_g_idx / w2_g_idx and keeps
    their qzeros. The replay asks core.serving.gptq.gptq_kept, as after_loading_delta does."""
    plan = _plan(Engine.SGLANG, WeightFormat.GPTQ_INT4, model=QWEN3_MOE)
    replay = plan_weights(plan)
    assert replay is not None
    d, q, kv, experts, width, layers = 2048, 32 * 128, 4 * 128, 128, 768, 48  # Qwen3-30B-A3B config.json
    # SGLang's fused qkv_proj (d → q + 2·kv) and o_proj: half a byte a zero, one group of 128 input rows
    zeros = layers * (d // GROUP * (q + 2 * kv) + q // GROUP * d) // 2
    # one int32 a fused linear's input row: qkv, o, and each expert's w13 (d) and w2 (width)
    g_idx = layers * (d + q + experts * (d + width)) * 4
    assert replay.freed == zeros + g_idx
    assert zeros == pytest.approx(-after_loading_delta(plan, plan.model, plan.model.stored_matmul_params()))
