"""transformers by release (issue 23): what Hugging Face generate's host does per decode step, by the
plan's transformers release line (core.serving.transformers_versions, core.serving.hf_generate).
Every rule was read in the released wheel (``pip download transformers==X --no-deps``); the torch
calls are counted from that source (core.serving.hf_generate's constants)."""

from __future__ import annotations

import json

import pytest

from core.catalogue import find_gpu, find_model
from core.errors import PlanError
from core.estimate import estimate
from core.files import planfile
from core.params import param_counts
from core.plan import Attention, Hardware, Plan, TransformersVersion
from core.serving.engines import rank_layout
from core.serving.fit import DEFAULT_FIT, HF_HOST_LAYER
from core.serving.hf_generate import decode_kv_passes, experts_hit, fp8_synchronised, host_layer_ratio, repeats_kv
from core.serving.speed import step_model
from core.serving.transformers_versions import ERAS, MoeLoop, era_of, moe_loop

HOST = DEFAULT_FIT.launch_seconds[HF_HOST_LAYER]  # the dense layer's host time (core.serving.fit)
V = TransformersVersion


def hf_plan(model_id: str = "qwen3-30b-a3b", **changes: object) -> Plan:
    model = find_model(model_id)
    plan = Plan(model=model.spec, model_id=model.id, hardware=Hardware(gpu="h20"))
    settings: dict[str, object] = {"engine": "hf", "context": 2049, "new_tokens": 2048, "concurrent": 1}
    return plan.with_inference(**(settings | changes))


def seconds_per_token(plan: Plan) -> float:
    return 1.0 / estimate(plan).inference.speed.per_request_tokens_per_s


def test_a_default_plan_is_not_charged_the_4_51_loop_over_every_expert() -> None:
    # The defect: with no transformers release in the plan, Qwen3-30B-A3B under generate at batch 1 was
    # charged transformers 4.51.3's loop over all 128 experts of its 48 layers, 13 torch calls each
    # ((77 - 5 + 11 + 128 x 13) / 77 = 22.7 dense layers of host time, 0.79 s a token), which no
    # transformers from 4.53.0 runs.
    loop_4_51 = 48 * HOST * (77 - 5 + 11 + 128 * 13) / 77
    default = seconds_per_token(hf_plan())
    assert default < loop_4_51 / 10
    # The default is the newest line read, 5.25: the experts are one grouped_mm module, 9 router and
    # block calls and 27 of grouped_mm_experts_forward (transformers 5.25.0) where the MLP's 5 were.
    assert hf_plan().inference.transformers_version is V.V5_25
    assert default == pytest.approx(48 * HOST * (77 - 5 + 9 + 27) / 77, rel=0.01)


def test_the_qwen3_table_s_release_keeps_the_loop_over_every_expert() -> None:
    # transformers 4.51.3 Qwen3MoeSparseMoeBlock.forward: for expert_idx in range(self.num_experts); 4.52.4 the same.
    for version in ("4.51", "4.52"):
        assert seconds_per_token(hf_plan(transformers_version=version)) == pytest.approx(
            48 * HOST * (77 - 5 + 11 + 128 * 13) / 77, rel=0.01
        )


def test_from_4_53_the_loop_runs_over_the_experts_hit_top_k_at_batch_1() -> None:
    # 4.53.0 / 4.55.0 / 4.57.6: expert_mask.sum, torch.greater, nonzero and the tensor's iteration (4 calls),
    # then per expert hit the 13 calls of 4.51's pass, the ModuleList index of a tensor (Tensor.__index__)
    # and a squeeze: 15. At one token the experts hit are its top-k: 8 of Qwen3-30B-A3B's 128.
    spec = find_model("qwen3-30b-a3b").spec
    assert experts_hit(spec, 1) == pytest.approx(8)
    ratio = (77 - 5 + 11 + 4 + 8 * 15) / 77
    assert host_layer_ratio(spec, V.V4_53) == pytest.approx(ratio)
    assert seconds_per_token(hf_plan(transformers_version="4.57")) == pytest.approx(48 * HOST * ratio, rel=0.01)


def test_more_experts_are_hit_at_a_larger_batch() -> None:
    # The model stated in core.serving.hf_generate.experts_hit: each token picks top-k distinct experts,
    # independently and uniformly: 128 x (1 - (1 - 8/128) ** 8) = 51.6 experts at 8 tokens.
    spec = find_model("qwen3-30b-a3b").spec
    hit = 128 * (1 - (1 - 8 / 128) ** 8)
    assert experts_hit(spec, 8) == pytest.approx(hit)
    assert experts_hit(spec, 10_000) == pytest.approx(128)
    assert host_layer_ratio(spec, V.V4_53, 8) == pytest.approx((77 - 5 + 11 + 4 + hit * 15) / 77)
    # Under 4.51 every expert's calls run whatever the batch; under 5.x no loop at all.
    assert host_layer_ratio(spec, V.V4_51, 8) == host_layer_ratio(spec, V.V4_51, 1)
    assert host_layer_ratio(spec, V.V5_25, 8) == host_layer_ratio(spec, V.V5_25, 1)
    one = estimate(hf_plan(transformers_version="4.53")).inference.speed
    eight = estimate(hf_plan(transformers_version="4.53", concurrent=8)).inference.speed
    assert 1 / eight.per_request_tokens_per_s > 3 / one.per_request_tokens_per_s  # 51.6 experts' calls, not 8


def test_4_52_loops_over_every_expert_for_qwen3_moe_only() -> None:
    # 4.52.4: Qwen3MoeSparseMoeBlock loops range(self.num_experts); MixtralSparseMoeBlock and
    # Qwen2MoeSparseMoeBlock loop over expert_hitted = (...).nonzero(as_tuple=True)[0].tolist(): ints,
    # so no __index__ or squeeze per expert (13 calls), 4 to find them.
    assert moe_loop(V.V4_52, "qwen3_moe") is MoeLoop.EVERY_EXPERT
    assert moe_loop(V.V4_52, "mixtral") is MoeLoop.EXPERTS_HIT_LIST
    mixtral = find_model("mixtral-8x7b-v0.1").spec
    assert host_layer_ratio(mixtral, V.V4_52) == pytest.approx((77 - 5 + 11 + 4 + 2 * 13) / 77)
    assert host_layer_ratio(mixtral, V.V4_51) == pytest.approx((77 - 5 + 11 + 8 * 13) / 77)
    assert host_layer_ratio(find_model("qwen3-8b").spec, V.V4_52) == 1.0  # dense: no MoE block


def test_the_fp8_linear_synchronises_up_to_5_3() -> None:
    # integrations/finegrained_fp8.py FP8Linear.forward: torch.cuda.synchronize() in 4.51.3,
    # torch_accelerator_module.synchronize() in 4.52.4-5.3.0; none in 5.4.0 - 5.25.0.
    assert fp8_synchronised(hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="5.3"))
    assert not fp8_synchronised(hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="5.4"))
    sync = estimate(hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="5.3")).inference.speed
    free = estimate(hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="5.4")).inference.speed
    assert "synchronised" in sync.formula and "synchronised" not in free.formula
    assert "transformers 5.3 host time" in sync.formula and "transformers 5.4 host time" in free.formula
    assert free.per_request_tokens_per_s > sync.per_request_tokens_per_s


def test_every_release_line_has_one_era_and_the_eras_are_in_order() -> None:
    assert [e.name for e in ERAS] == ["4.45-4.51", "4.52", "4.53-4.57", "5.0-5.3", "5.4-5.25"]
    assert all(era_of(v) for v in V)
    assert min(V, key=list(V).index) is V.V4_45 and max(V, key=list(V).index) is V.V5_25
    assert era_of(V.V4_46).moe is MoeLoop.EVERY_EXPERT  # the Qwen2.5 table's 4.46.0


def test_a_release_not_covered_is_refused_with_the_ones_that_are() -> None:
    with pytest.raises(PlanError) as caught:
        hf_plan(transformers_version="4.44")
    text = str(caught.value)
    assert "4.44" in text and "4.45" in text and "5.25" in text


def test_a_plan_file_without_the_release_reads_as_the_default_and_a_bad_one_is_refused() -> None:
    plan = hf_plan(transformers_version="4.51")
    document = json.loads(planfile.dumps(plan))
    assert document["plan"]["inference"]["transformers_version"] == "4.51"
    assert planfile.plan_from_dict(document).inference.transformers_version is V.V4_51
    del document["plan"]["inference"]["transformers_version"]
    assert planfile.plan_from_dict(document).inference.transformers_version is V.V5_25
    document["plan"]["inference"]["transformers_version"] = "4.60"
    with pytest.raises(PlanError, match=r"transformers_version.*4\.45.*5\.25"):
        planfile.plan_from_dict(document)


def test_the_command_line_takes_the_release_and_refuses_one_not_covered(capsys: pytest.CaptureFixture[str]) -> None:
    from core.cli.app import main

    args = ("estimate", "--model", "qwen3-30b-a3b", "--mode", "inference", "--engine", "hf", "--gpu", "h20")
    assert main([*args, "--transformers-version", "4.51"]) == 0
    capsys.readouterr()
    assert main([*args, "--transformers-version", "4.44"]) != 0
    err = capsys.readouterr().err
    assert "'4.44'" in err and "'4.45'" in err and "'5.25'" in err


def test_the_qwen_tables_records_carry_their_release() -> None:
    # benchmarks/realgpu/serving_speed.json engine_version: "transformers 4.46.0 (torch 2.3.1, ...)" (Qwen2.5)
    # and "transformers 4.51.3" (Qwen3): both loop over every expert, so their scores do not move.
    from pathlib import Path

    from tests.scripts import load_script

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu" / "serving.py"
    bench = load_script(script, "realgpu_serving_versions")
    lines = {
        bench.qwen_plan(r).inference.transformers_version
        for source in (bench.QWEN_SOURCE, bench.QWEN3_SOURCE)
        for r in bench.qwen_records(source)
        if r["engine"] == "transformers" and not bench.qwen_not_expressible(r)
    }
    assert lines == {V.V4_46, V.V4_51}


def test_fp8_weights_under_a_transformers_without_fine_grained_fp8_are_refused() -> None:
    # integrations/finegrained_fp8.py is in the 4.49.0 wheel, not in 4.48.3's.
    with pytest.raises(PlanError) as caught:
        hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="4.48")
    assert "4.49" in str(caught.value)
    assert hf_plan("qwen3-8b", weight_dtype="fp8", transformers_version="4.49").inference.weight_dtype.value == "fp8"
    assert hf_plan("qwen3-8b", weight_dtype="bf16", transformers_version="4.45")  # BF16 loads in every line
    assert list(V)[4] is V.V4_49  # tests/core/strategies.py draws from there


def _kv_plan(model_id: str, attention: Attention, version: str, gpu: str = "a100-80gb-sxm") -> Plan:
    model = find_model(model_id)
    plan = Plan(model=model.spec, model_id=model.id, hardware=Hardware(gpu=gpu), attention=attention)
    return plan.with_inference(engine="hf", context=32768, new_tokens=2048, concurrent=1, transformers_version=version)


def test_dynamic_cache_s_torch_cat_moves_every_layer_s_cache_twice_a_step() -> None:
    # The defect: a Hugging Face decode step was charged one read of the KV cache, where transformers'
    # DynamicCache.update (4.46.0 / 4.51.3 cache_utils.py; 5.25.0 DynamicLayer.update) appends the step's key
    # and value with torch.cat: a new tensor each step, the whole layer's cache read and written again.
    # FlashAttention-2 from 4.48 takes the KV heads as they are: 2 (cat) + 1 (attention's read) passes.
    plan = _kv_plan("llama-3.1-8b", Attention.FLASH, "5.25")
    assert decode_kv_passes(plan) == 3
    counts = param_counts(plan)
    gpu = find_gpu(plan.hardware.gpu)
    layout = rank_layout(plan)
    step = step_model(plan, counts, gpu, layout, DEFAULT_FIT, (0.0, 0.0))
    weights = layout.weights_bytes / step.bandwidth
    cached = 32768 - 2048 + 2048 / 2  # the prompt and half the answer, on average
    kv = layout.kv_token_layer_bytes * layout.layers * cached
    assert step.memory_seconds(1) == pytest.approx(weights + 3 * kv / step.bandwidth)
    # The prompt's forward is not a decode step: its chunk reads the cache once, as before.
    assert step.memory_seconds(1, matvec=False) == pytest.approx(weights + kv / step.bandwidth)
    # Other engines read their paged cache once.
    assert decode_kv_passes(plan.with_inference(engine="vllm")) == 1


def test_qwen2_s_flash_attention_2_repeats_kv_up_to_4_47() -> None:
    # transformers 4.46.0 Qwen2FlashAttention2.forward: key_states = repeat_kv(key_states,
    # self.num_key_value_groups) before flash_attn_func (4.45.0 and 4.47.1 the same; Llama's FA2 class does
    # not): repeat_kv reads the cache once and writes it r times, flash attention reads the r copies.
    # Qwen2.5-7B: 28 query heads over 4 KV heads, r = 7: 2 + 1 + 2 x 7 = 17 passes.
    assert decode_kv_passes(_kv_plan("qwen2.5-7b", Attention.FLASH, "4.46")) == 17
    assert decode_kv_passes(_kv_plan("qwen2.5-7b", Attention.FLASH, "4.47")) == 17
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.FLASH, "4.46")) == 3
    # 4.48.3: Qwen2 runs integrations/flash_attention.py, no repeat_kv.
    assert decode_kv_passes(_kv_plan("qwen2.5-7b", Attention.FLASH, "4.48")) == 3
    assert repeats_kv(_kv_plan("qwen2.5-7b", Attention.FLASH, "4.46"))


def test_sdpa_repeats_kv_to_4_53_and_eager_always() -> None:
    # integrations/sdpa_attention.py: repeat_kv unconditionally in 4.51.3 and 4.53.0; from 4.54.0 only when
    # use_gqa_in_sdpa is false (CUDA, torch >= 2.5, no mask: enable_gqa=True at a lone request's decode step).
    # Llama 3.1 8B: 32 query heads over 8 KV heads, r = 4: 2 + 1 + 2 x 4 = 11.
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.SDPA, "4.51")) == 11
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.SDPA, "4.53")) == 11
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.SDPA, "4.54")) == 3
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.SDPA, "5.25")) == 3
    # eager_attention_forward repeats in every release read (5.25.0 modeling_qwen2.py the same).
    assert decode_kv_passes(_kv_plan("llama-3.1-8b", Attention.EAGER, "5.25")) == 11
    # repeat_kv returns its input when every query head has its own KV head (Llama 2 7B: 32 and 32).
    llama2 = find_model("llama-2-7b").spec
    assert llama2.num_heads == llama2.num_kv_heads
    assert decode_kv_passes(_kv_plan("llama-2-7b", Attention.EAGER, "5.25")) == 3
