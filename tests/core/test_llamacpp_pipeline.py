"""llama.cpp's pipeline parallelism: a prompt's micro-batches overlap across the GPUs of a layer split
(core.serving.llamacpp.prompt_pipeline_interval, ggml-org/llama.cpp PR #6017, first in b2413)."""

from __future__ import annotations

import pytest

from core.estimate import estimate
from core.plan import Plan
from core.presets import plan_for_model
from core.serving.llamacpp import (
    PIPELINE_OVERLAP_SHARE,
    PIPELINED_PROMPT_FROM_BUILD,
    SCHED_COPIES,
    llamacpp_buffers,
    prompt_pipeline_interval,
)

UBATCH = 512  # llama-bench's and llama-server's default n_ubatch since PR #6017


def plan_70b(gpus: int, prompt: int, build: int = PIPELINED_PROMPT_FROM_BUILD, **changes: object) -> Plan:
    plan = plan_for_model("llama-3.1-70b").with_hardware(gpu="rtx-4090")
    return plan.with_inference(
        engine="llamacpp",
        gguf_quant="Q4_K_M",
        pipeline_parallel=gpus,
        context=prompt + 1,
        new_tokens=1,
        ubatch=UBATCH,
        llamacpp_build=build,
        **changes,
    )


def ttft_alone(plan: Plan) -> float:
    speed = estimate(plan).inference.speed
    assert speed is not None
    return speed.ttft_alone_s


def test_one_micro_batch_has_nothing_to_overlap() -> None:
    """A 512-token prompt at n_ubatch 512 is one micro-batch: more GPUs do not shorten it. XiongjieDai's
    RTX 4090 rows (aa72e0e, builds 2824-2843, after PR #6017; benchmarks/realgpu/serving_speed.json) show
    it: Llama 3 8B Q4_K_M pp512 at 0.072 / 0.073 / 0.076 s on one / two / four cards."""
    piped = ttft_alone(plan_70b(4, UBATCH))
    before = ttft_alone(plan_70b(4, UBATCH, build=PIPELINED_PROMPT_FROM_BUILD - 1))
    assert piped == pytest.approx(before, rel=1e-12)


def test_later_micro_batches_follow_at_the_busiest_gpus_share() -> None:
    """Eight micro-batches of a 4,096-token prompt over four GPUs: the first crosses every GPU, each later
    one leaves the last GPU after the busiest GPU's share of that time (the rule read from
    ggml_backend_sched_compute_splits, core.serving.llamacpp.PIPELINED_PROMPT_FROM_BUILD's comment), less
    the part of that saving PR #19378's rows show lost (PIPELINE_OVERLAP_SHARE)."""
    prompt = 8 * UBATCH
    plan = plan_70b(4, prompt)
    layers = [len(device) for device in llamacpp_buffers(plan).layout.device_layers]
    # llm_load_tensors splits the 80 layers and the output layer, 81 units, a quarter each by cumulative share
    assert layers == [21, 20, 20, 19]
    interval = 1 - PIPELINE_OVERLAP_SHARE * (1 - max(layers) / sum(layers))
    expected = (UBATCH + (prompt - UBATCH) * interval) / prompt
    before = ttft_alone(plan_70b(4, prompt, build=PIPELINED_PROMPT_FROM_BUILD - 1))
    assert ttft_alone(plan) / before == pytest.approx(expected, rel=1e-9)


def test_the_scheduler_copies_cap_the_micro_batches_in_flight() -> None:
    """On eight GPUs (about 10 layers each) the host waits for the micro-batch SCHED_COPIES (4) before, so at most
    five are in flight: each later one would follow at a fifth of the time through every GPU, not an eighth."""
    plan = plan_70b(8, 8 * UBATCH)
    ideal = 1 / (SCHED_COPIES + 1)
    interval = prompt_pipeline_interval(plan, llamacpp_buffers(plan).layout)
    assert interval == pytest.approx(1 - PIPELINE_OVERLAP_SHARE * (1 - ideal))
    three = plan_70b(3, 8 * UBATCH)  # 80 layers (and the output layer) over three GPUs
    layers = [len(device) for device in llamacpp_buffers(three).layout.device_layers]
    assert max(layers) / 80 > ideal
    interval = prompt_pipeline_interval(three, llamacpp_buffers(three).layout)
    assert interval == pytest.approx(1 - PIPELINE_OVERLAP_SHARE * (1 - max(layers) / 80))


# ggml-org/llama.cpp PR #19378, JohannesGaessler's four RTX 4090s (master of 2026-02-07), the "-sm layer"
# column: llama 8B Q4_0 (pp512, pp2048) t/s at a depth of 0, 32,768 and 65,536 tokens; n_ubatch 512,
# n_batch 2048, so pp512 is one micro-batch and pp2048 four.
PR19378_LAYER_SPLIT = ((12550.97, 18788.11), (5099.65, 7925.21), (3154.69, 4996.19))


def test_the_overlap_share_is_what_pr_19378_measured() -> None:
    """PIPELINE_OVERLAP_SHARE is the median over PR #19378's three pairs of the saving they show against the
    ideal one of four micro-batches over the plan's split of Llama 3.1 8B (9 / 8 / 8 / 7 layers)."""
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    plan = plan.with_inference(engine="llamacpp", gguf_quant="Q4_0", pipeline_parallel=4, context=2049, new_tokens=1)
    layers = [len(device) for device in llamacpp_buffers(plan).layout.device_layers]
    ideal = max(layers) / sum(layers)
    shares = []
    for one, four in PR19378_LAYER_SPLIT:
        measured = (4 * one / four - 1) / 3  # pp2048 = one micro-batch + 3 intervals, in pp512's time
        shares.append((1 - measured) / (1 - ideal))
    assert sorted(shares)[1] == pytest.approx(PIPELINE_OVERLAP_SHARE, abs=0.005)
    alone = prompt_pipeline_interval(plan, llamacpp_buffers(plan).layout)
    rate = 4 / (1 + 3 * alone)  # pp2048's rate over pp512's the rule gives: 1.55
    for one, four in PR19378_LAYER_SPLIT:
        assert rate == pytest.approx(four / one, rel=0.04)  # the three pairs: 1.50, 1.55, 1.58


@pytest.mark.parametrize(
    "changes",
    [
        {"pipeline_parallel": 1},  # one GPU: nothing to pipeline
        {"gpu_layers": 60},  # llama.cpp turns pipeline parallelism off unless every layer is offloaded
        {"llamacpp_backend": "vulkan"},  # ggml-vulkan's events were not read
    ],
)
def test_no_overlap_where_llama_cpp_does_not_pipeline(changes: dict[str, object]) -> None:
    plan = plan_70b(4, 8 * UBATCH).with_inference(**changes)
    assert prompt_pipeline_interval(plan, llamacpp_buffers(plan).layout) == 1.0


def test_the_assumptions_say_the_prompt_overlaps() -> None:
    speed = estimate(plan_70b(4, 8 * UBATCH)).inference.speed
    assert speed is not None and "overlap across the GPUs" in speed.assumptions
    alone = estimate(plan_70b(1, 8 * UBATCH).with_hardware(gpu="h200-sxm")).inference.speed
    assert alone is not None and "pipeline stages do not overlap" in alone.assumptions
