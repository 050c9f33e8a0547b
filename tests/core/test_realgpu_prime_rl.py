"""prime-rl's nightly benchmark baselines as a held-out source (issue 22 item 6, "validate on evidence you did not
tune on"; docs/REAL_GPU_MEMORY.md, "prime-rl's benchmark baselines, held out (branch h80evid)"): Prime Intellect's
own FSDP2 trainer, loop and fake packed data on RTX A6000, H100, H200 and B200 machines. Held out of every fit; the
SFT rows scored, and the RL rows since branch h82rl (prime-rl's chunked log-prob head is the plan's ``logprob_head``;
docs/REAL_GPU_MEMORY.md, "prime-rl's RL rows, scored").
"""

from __future__ import annotations

from core.dtypes import Dtype
from core.parallel.state import compute_plan
from tests.core.memory_corpus import FOLDER, assert_held_out, assert_rejected_with_why, corpus, recorded_figures
from tests.scripts import load_script

SOURCE = "prime-rl-bench-baselines-2026-01"
COMMIT = "8718eb143d2c5118112d00fab4355f07c2dcbb82"  # PrimeIntellect-ai/prime-rl, 2026-01-19 (#1614)
SFT_IDS = (
    "prime-qwen3-06b-sft-8k-1xa6000",
    "prime-qwen3-06b-sft-8k-1xh100",
    "prime-qwen3-06b-sft-16k-1xh100",
    "prime-qwen3-4b-sft-16k-8xh100",
    "prime-qwen3-4b-sft-16k-8xh200",
    "prime-qwen3-4b-sft-16k-8xb200",
    "prime-qwen3-4b-sft-64k-8xb200",
)
# Every successful dense full-fine-tuning RL row of benchmarks/baselines at COMMIT (rl/train.py, FusedOutputLinear).
RL_IDS = (
    "prime-qwen3-06b-rl-16k-1xa6000",
    "prime-qwen3-06b-rl-64k-1xa6000",
    "prime-qwen3-06b-rl-64k-1xh100-offload",
    "prime-qwen3-06b-rl-16k-1xh100",
    "prime-qwen3-06b-rl-64k-1xh100",
    "prime-qwen3-4b-rl-16k-8xb200",
    "prime-qwen3-4b-rl-16k-8xh100",
    "prime-qwen3-4b-rl-64k-8xh100",
    "prime-qwen3-4b-rl-16k-8xh200",
    "prime-qwen3-4b-rl-64k-8xh200",
)
RL_COUNT = len(RL_IDS)
# The Qwen3-30B-A3B full rows that ran at COMMIT (branch h87memevid; the B200 ones exited 1 with no reading): prime-rl's
# own Qwen3-MoE, models/qwen3_moe/modeling_qwen3_moe.py over models/layers/moe.py (torchtitan's token-choice layer).
MOE_SFT_IDS = ("prime-qwen3-30b-a3b-sft-16k-8xh200",)
MOE_RL_IDS = (
    "prime-qwen3-30b-a3b-rl-16k-8xh100",
    "prime-qwen3-30b-a3b-rl-16k-8xh200",
    "prime-qwen3-30b-a3b-rl-64k-8xh200",
)
MOE_IDS = MOE_SFT_IDS + MOE_RL_IDS
ALL_IDS = SFT_IDS + RL_IDS + MOE_IDS


def _plans() -> dict[str, object]:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_prime_rl_plans")
    return {f["id"]: mapping.map_figure(f).plan for f in corpus()["figures"] if f["source_id"] == SOURCE}


def test_the_baselines_are_recorded_as_published() -> None:
    figures = recorded_figures(SOURCE)
    assert len(figures) == len(ALL_IDS)
    assert set(SFT_IDS) <= {f["id"] for f in figures}
    for figure in figures:
        # sft/train.py at COMMIT: peak_memory = torch.cuda.max_memory_reserved() / 1024**3 after each step, peak
        # stats reset at the step's start; utils.export_benchmark_json writes the mean of steps 2-4 as "gib".
        assert figure["metric"] == "reserved" and figure["unit"] == "GiB", figure["id"]
        assert figure["value_bytes"] == round(figure["value"] * 2**30), figure["id"]
        assert f'"gib": {figure["value"]}' in figure["quote"], figure["id"]
        assert figure["location"]["commit"] == COMMIT, figure["id"]
        # run_single_benchmark.py: --data.batch-size = micro_batches (2) x GPUs, data.micro_batch_size 1.
        assert figure["recipe"]["micro_batch"] == 1 and figure["recipe"]["grad_accum"] == 2, figure["id"]


def test_held_out_sft_and_rl_scored() -> None:
    mine = assert_held_out(SOURCE, "prime-rl", len(ALL_IDS), ALL_IDS, "realgpu_prime_rl")
    assert {m.id for m in mine} == set(ALL_IDS)


def test_the_plans_are_the_recipes_the_code_reads() -> None:
    plans = _plans()
    for fid in SFT_IDS + MOE_SFT_IDS:
        plan = plans[fid]
        assert plan is not None, fid
        # model.py setup_model: AC freq 1 (checkpoint_wrapper on every layer), --model.compile, FSDP2 with fp32
        # sharded weights and bf16 compute; sft/train.py keeps ``out`` (the float32 logits) through backward().
        assert plan.checkpointing and plan.stack.value == "compile", fid  # type: ignore[attr-defined]
        assert plan.loop_keeps_output and plan.parallel.strategy.value == "fsdp", fid  # type: ignore[attr-defined]


def test_the_rl_plans_run_the_log_prob_head_in_bf16() -> None:
    plans = _plans()
    for fid in RL_IDS + MOE_RL_IDS:
        plan = plans[fid]
        assert plan is not None, fid
        # rl/config.py auto_setup_fused_lm_head_chunk_size: impl "auto" -> FusedOutputLinear, 2,048 columns.
        assert plan.logprob_head and plan.checkpointing, fid  # type: ignore[attr-defined]
        # model.py setup_model calls setup_fsdp on every world size: MixedPrecisionPolicy(param_dtype=bf16) on the
        # one-GPU rows too, so their activations are bf16 (core.parallel.state.compute_plan).
        assert compute_plan(plan).weight_dtype is Dtype.BF16, fid  # type: ignore[arg-type]


def test_every_figure_is_within_ten_percent() -> None:
    bench = load_script(FOLDER / "memory.py", "realgpu_prime_rl_target")
    rows = {r.mapped.id: r for r in bench.run().rows}
    # memory.py on 2026-12-07 (branch h80evid): SFT -5.3 ... +6.0 %, median 5.3 %; the reserved target asks each
    # within 10 %. Without the kept output (loop_keeps_output) the seven read -8.5 ... -15.5 %. Branch h82rl: the
    # one-GPU rows computed in bf16 (FSDP2's param dtype on a one-rank mesh), SFT -7.7 ... +3.9 %; RL -5.0 ... +9.9 %
    # (with the one-GPU rows in float32, as before, the five 0.6B RL rows read +14 ... +50 %).
    # Branch h87memevid: the Qwen3-30B-A3B rows -2.4 % (SFT, 16,384), -0.3 % (RL, 16,384, H100 and H200), -9.0 % (RL,
    # 65,536), with no rule changed for them.
    for fid in ALL_IDS:
        assert abs(rows[fid].error_pct) <= 10.0, (fid, rows[fid].error_pct)


def test_the_moe_rows_are_qwen3_30b_a3b_under_fsdp2() -> None:
    plans = _plans()
    for fid in MOE_IDS:
        plan = plans[fid]
        assert plan is not None, fid
        # The catalogue's Qwen/Qwen3-30B-A3B config.json: 128 experts, 8 a token, experts of 768, an untied head; the
        # 2507 release keeps those shapes. Every rank holds all 128 experts (EP 1: the baselines' "ep1").
        model = plan.model  # type: ignore[attr-defined]
        assert plan.model_id == "qwen3-30b-a3b" and model.num_experts == 128, fid  # type: ignore[attr-defined]
        assert model.experts_per_token == 8 and not model.tie_embeddings, fid
        # grouped-mm experts (models/layers/moe.py _run_experts_grouped_mm), not transformers 4.55's gpt-oss loop.
        assert not plan.experts_loop and plan.parallel.strategy.value == "fsdp", fid  # type: ignore[attr-defined]
        assert plan.parallel.world_size == 8 and plan.parallel.expert_parallel == 1, fid  # type: ignore[attr-defined]


def test_the_candidates_left_out_say_why() -> None:
    # Found in this pass and not usable (docs/REAL_GPU_MEMORY.md, "prime-rl's benchmark baselines, held out").
    assert_rejected_with_why(
        "PrimeIntellect-ai/prime-rl benchmarks/baselines at 8718eb14",
        "philschmid/deep-learning-pytorch-huggingface",
        "deepspeedai/DeepSpeed PR #8148",
        "huggingface/peft PR #3157",
        "NVIDIA-NeMo/Megatron-Bridge skills",
        "sagarsrc/lora-experiments",
    )


def test_the_moe_candidates_left_out_say_why() -> None:
    # Branch h87memevid searched for real-GPU memory figures of MoE fine-tuning with their whole recipe
    # (docs/REAL_GPU_MEMORY.md, "MoE fine-tuning evidence (branch h87memevid)"): these were found and are not usable.
    assert_rejected_with_why(
        "Hugging Face blog 'Accelerating Transformers Fine-Tuning with NVIDIA NeMo AutoModel'",
        "NVIDIA/TransformerEngine docs/examples/te_mixtral",
        "yanring/Megatron-MoE-ModelZoo",
        "huggingface/trl PR #6869",
        "lm-sys/FastChat issue #1251",
        "hiyouga/LlamaFactory README news of 2023-12-12",
    )
