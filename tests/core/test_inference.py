"""KV cache and serving: grouped-query heads, cache dtypes, sliding windows, solvers."""

from __future__ import annotations

from dataclasses import replace

from core.catalogue import find_model
from core.estimate import estimate
from core.plan import Hardware, Inference, Plan
from core.serving.inference import kv_cache_bytes


def test_grouped_query_kv_per_token_llama31_8b() -> None:
    # 2 · 32 layers · 8 KV heads · 128 · 2 bytes = 131,072 bytes per token (Llama-3.1-8B
    # config.json: num_key_value_heads 8, head width 4096/32 = 128).
    est = estimate(Plan(model=find_model("llama-3.1-8b").spec))
    assert est.inference.kv_bytes_per_token == 131_072


def test_kv_dtype_scales_the_cache() -> None:
    plan = Plan(model=find_model("llama-3.1-8b").spec)
    sizes = {}
    for dtype in ("bf16", "fp8", "int4"):
        sizes[dtype] = estimate(plan.with_inference(kv_dtype=dtype)).inference.kv_cache_bytes
    assert sizes["fp8"] * 2 == sizes["bf16"]
    assert sizes["int4"] * 4 == sizes["bf16"]


def test_sliding_window_layers_are_capped() -> None:
    # Gemma-2-2B: 26 layers, every other one attends within 4,096 tokens (config.json
    # sliding_window 4096); at 8,192 tokens the windowed half stores 4,096 positions.
    spec = find_model("gemma-2-2b").spec
    assert spec.sliding_window == 4096 and spec.sliding_window_layers == 13
    per_layer_token = 2 * spec.kv_width * 2
    expected = per_layer_token * (13 * 8192 + 13 * 4096)
    assert kv_cache_bytes(spec, 8192, 1, 2) == expected
    # Below the window every layer stores every token.
    assert kv_cache_bytes(spec, 1000, 1, 2) == per_layer_token * 26 * 1000


def test_largest_batch_and_context_are_exact_boundaries() -> None:
    plan = Plan(
        model=find_model("llama-3.1-8b").spec,
        inference=Inference(context=8192, concurrent=4),
        hardware=Hardware(gpu="l4"),
    )
    est = estimate(plan)
    n = est.inference.max_concurrent
    assert n > 0
    assert estimate(plan.with_inference(concurrent=n)).inference.fits
    assert not estimate(plan.with_inference(concurrent=n + 1)).inference.fits
    c = est.inference.max_context
    assert estimate(plan.with_inference(context=c)).inference.fits
    assert not estimate(plan.with_inference(context=c + 1)).inference.fits


def test_nothing_fits_gives_zero() -> None:
    plan = Plan(model=find_model("llama-3.1-70b").spec, hardware=Hardware(gpu="t4"))
    est = estimate(plan)
    assert est.inference.max_concurrent == 0 and est.inference.max_context == 0


def test_quantised_weights_are_smaller() -> None:
    plan = Plan(model=find_model("llama-3.1-8b").spec)
    bf16 = estimate(plan).inference.weights_bytes
    nf4 = estimate(replace(plan, inference=Inference(weight_dtype="nf4"))).inference.weights_bytes
    assert nf4 < bf16 / 2.5


def test_serving_verdict_and_margin() -> None:
    plan = Plan(model=find_model("llama-3.1-8b").spec, hardware=Hardware(gpu="h100-sxm"))
    inf = estimate(plan).inference
    assert inf.verdict == "fits" and inf.margin_bytes > 0
    crowded = estimate(plan.with_inference(concurrent=4096, context=32768)).inference
    assert crowded.verdict == "oom" and crowded.margin_bytes < 0
