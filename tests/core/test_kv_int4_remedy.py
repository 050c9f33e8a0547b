"""The serving remedy of vLLM's int4_per_token_head cache (issue 23, branch h95fp8h): offered on vLLM 0.25 on where
the model's attention keeps it, never with fp8.

The facts: vllm 0.25.1 ``vllm/config/cache.py`` CacheDType lists "int4_per_token_head" (0.24.0's does not); its page
holds head_size // 2 bytes a head and side plus a float32 scale (``vllm/v1/kv_cache_interface.py``
AttentionSpec.page_size_bytes); only TRITON_ATTN keeps it, no MLA backend, and its Hadamard rotation asserts a
power-of-2 head (``vllm/v1/attention/ops/int4_per_token_head.py``).

The models: meta-llama/Llama-3.1-8B config.json (num_hidden_layers 32, num_key_value_heads 8, head_dim 128,
max_position_embeddings 131072); microsoft/Phi-3.5-mini-instruct (head 3072 / 32 = 96); deepseek-ai/DeepSeek-V2-Lite
(kv_lora_rank 512: latent attention). The card: the RTX 4090's 24 GB (resources/gpus.json).
"""

from __future__ import annotations

import dataclasses

from core.advice.diagnosis import diagnose
from core.advice.remedies import RemedyKind
from core.dtypes import KvDtype
from core.estimate import estimate
from core.plan import Engine, Plan, VllmVersion
from core.presets import plan_for_model
from core.verdict import Mode


def _one_long_request(version: VllmVersion, model: str = "meta-llama/Llama-3.1-8B", context: int = 131072) -> Plan:
    plan = plan_for_model(model).with_inference(engine=Engine.VLLM, vllm_version=version, concurrent=1, context=context)
    return plan.with_changes(hardware=dataclasses.replace(plan.hardware, gpu="rtx-4090"))


def _remedies(plan: Plan) -> dict[RemedyKind, object]:
    return {r.kind: r for r in diagnose(plan, Mode.INFERENCE).remedies}


def test_a_full_context_request_that_bf16_and_fp8_cannot_start_fits_in_int4_on_0_25() -> None:
    # 131,072 tokens x 32 layers x 2 x 8 heads: 16 GiB in bf16, 8 GiB in fp8, 4.25 GiB in int4 (64 B + a 4 B scale a
    # head and side) beside 16 GB of bf16 weights on a 24 GB card
    plan = _one_long_request(VllmVersion.V0_25)
    assert not estimate(plan).judgement(Mode.INFERENCE).fits
    found = _remedies(plan)
    int4 = found[RemedyKind.KV_INT4]
    assert int4.plan.inference.kv_dtype is KvDtype.INT4 and int4.judgement.fits  # type: ignore[attr-defined]
    assert "int4_per_token_head" in int4.title  # type: ignore[attr-defined]
    served = estimate(int4.plan).inference  # type: ignore[attr-defined]
    assert served is not None and served.kv_bytes_per_token == 32 * 2 * 8 * (128 // 2 + 4)
    assert not found[RemedyKind.KV_FP8].judgement.fits  # type: ignore[attr-defined]


def test_not_offered_where_vllm_would_not_keep_it() -> None:
    assert RemedyKind.KV_INT4 not in _remedies(_one_long_request(VllmVersion.V0_24))  # before int4_per_token_head
    # a head of 96 (no Hadamard rotation) and latent attention (no MLA backend keeps it), each on 0.34, each a plan
    # that does not fit, whose other remedies are listed
    for model, context in (("microsoft/Phi-3.5-mini-instruct", 131072), ("deepseek-ai/DeepSeek-V2-Lite", 32768)):
        found = _remedies(_one_long_request(VllmVersion.V0_34, model, context))
        assert RemedyKind.KV_FP8 in found and RemedyKind.KV_INT4 not in found, model


def test_never_combined_with_the_fp8_cache() -> None:
    combination = diagnose(_one_long_request(VllmVersion.V0_25), Mode.INFERENCE).combination
    kinds = {r.kind for r in combination.remedies} if combination is not None else set()
    assert not {RemedyKind.KV_FP8, RemedyKind.KV_INT4} <= kinds
