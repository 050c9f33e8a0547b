"""What each PEFT method's step runs beyond the matmul terms, in time (issue 24, items 1–2; core.training.flops.
method_work, core.training.speed.method_features; docs/TRAINING_TIME.md "What each PEFT method costs in time")."""

from __future__ import annotations

import json

import pytest

from benchmarks.realgpu import peft_time
from core.catalogue import find_gpu, find_model
from core.estimate import estimate
from core.params import param_counts
from core.plan import Attention, Method, Plan
from core.presets import default_plan
from core.training.flops import PEFT_METHOD_PASSES, method_work, token_flops
from core.training.speed import LORA_LINEAR_KERNELS, eager_block_kernels, step_work

# The method comparison's run (huggingface/peft 5d602fdb method_comparison/MetaMathQA/results/*.json): Llama 3.2 3B
# in bf16 on one L40S, batch 4 of ~210 tokens (peft_method_time.json derived.tokens_per_sample 209.9), q_proj and
# v_proj at r 32, SDPA, no checkpointing.
M = 4 * 210
D, KV = 3072, 1024  # Llama 3.2 3B's q_proj (3,072 → 3,072) and v_proj (3,072 → 1,024): its config.json
L40S_BANDWIDTH = 864e9  # resources/gpus.json l40s memory_bandwidth_gb_s (NVIDIA L40S datasheet)
L40S_FP32 = 91.6e12  # resources/gpus.json l40s tflops_dense fp32 (NVIDIA L40S datasheet)


def _plan(method: Method) -> Plan:
    plan = default_plan().with_changes(
        model=find_model("llama-3.2-3b").spec,
        model_id="llama-3.2-3b",
        method=method,
        attention=Attention.SDPA,
        checkpointing=False,
    )
    plan = plan.with_hardware(gpu="l40s").with_workload(micro_batch=4, seq_len=210, grad_accum=1)
    return plan.with_lora(rank=32, targets=("q_proj", "v_proj"))


def _features(plan: Plan) -> dict[str, float]:
    return dict(step_work(plan, param_counts(plan), find_gpu("l40s")).features)


def _step(plan: Plan) -> float:
    return estimate(plan).compute.step_seconds


def test_dora_weight_norm_is_a_memory_bound_pass_over_w_every_forward() -> None:
    # huggingface/peft 51c2ff66 src/peft/tuners/lora/dora.py DoraLinearLayer.forward: lora_B(lora_A(eye(in))) and
    # W + scale·ΔW with its row norms every forward, detached; tools/measure/peft_method_cost.py counts, beyond LoRA's
    # path, 26·m·out + 30·in·out + 4·in² bytes forward and 58·m·out backward a target.
    work = method_work(_plan(Method.DORA))
    assert work is not None
    forward = 26 * M * (D + KV) + 30 * (D * D + D * KV) + 4 * 2 * D * D
    assert work.bytes_forward == pytest.approx(forward)
    assert work.bytes_backward == pytest.approx(58 * M * (D + KV))
    # The build's matmuls: 2·in·r·(in + out) a target, forward only (the norm gets no gradient).
    assert work.build_forward == pytest.approx(2 * D * 32 * (D + D) + 2 * D * 32 * (D + KV))
    assert work.build_backward == 0
    features = _features(_plan(Method.DORA))
    # 28 blocks, forward and backward, at the L40S's 864 GB/s.
    assert features["adapter_bytes:eager"] == pytest.approx(28 * (forward + 58 * M * (D + KV)) / L40S_BANDWIDTH)


def test_dora_step_is_slower_than_lora_by_its_terms() -> None:
    lora, dora = _plan(Method.LORA), _plan(Method.DORA)
    assert not any(name.startswith("adapter_") for name in _features(lora))  # LoRA's own step does not move
    assert method_work(lora) is None
    slower = _step(dora) / _step(lora)
    # PEFT's runs: DoRA 706.6 s of steps against LoRA's 585.2 s (peft_method_time.json), 1.21; before this change the
    # model gave 1.000 (its FLOPs are LoRA's). The norm pass alone is 24 ms at the card's bandwidth on 120 ms.
    assert slower > 1.15


def test_oft_step_counts_its_rotation_build_and_float32_rotation() -> None:
    # huggingface/peft 51c2ff66 src/peft/tuners/oft/layer.py: 5 Neumann terms, 3 (r, b, b) bmms forward (core.params.
    # oft_neumann_bmms), twice that backward; r 32 blocks of 96 on a 3,072-wide input.
    oft = _plan(Method.OFT).with_lora(oft_block_size=0)  # the run's r 32 blocks (its peft_config)
    work = method_work(oft)
    assert work is not None
    per_target = 3 * 2 * 32 * 96**3
    assert work.build_forward == pytest.approx(2 * per_target)
    assert work.build_backward == pytest.approx(4 * per_target)
    # The rotation (in·b multiply-adds a token, R gets a gradient) runs in float32 with the builds: at the fp32 peak.
    rotation = 2 * M * D * 96 * 3 * 2  # forward, input gradient, weight gradient; two targets
    fp32 = _features(oft)["adapter_fp32:ada"]
    assert fp32 >= 28 * (rotation + 6 * per_target) / L40S_FP32
    # Before: 0.995 of LoRA's step (FLOPs only); PEFT's runs 1.26.
    assert _step(oft) / _step(_plan(Method.LORA)) > 1.1


def test_loha_builds_its_delta_every_micro_batch_and_applies_it_in_float32() -> None:
    # tools/measure/peft_method_cost.py, q_proj + v_proj at 840 tokens: 22.750 GFLOP float32 forward = F.linear(x, ΔW)
    # 2·840·(3,072² + 3,072·1,024) = 21.14 + the two products 4·r·Σin·out = 1.61; backward 47.11 = 42.28 + 12·r·Σin·out.
    loha = _plan(Method.LOHA)
    work = method_work(loha)
    assert work is not None
    inout = D * D + D * KV
    assert work.build_forward == pytest.approx(4 * 32 * inout)
    assert work.build_backward == pytest.approx(12 * 32 * inout)
    flops = {t.label: t.per_token for t in token_flops(loha).terms}
    assert flops["loha: weight builds (float32, once a micro-batch)"] == pytest.approx(28 * 16 * 32 * inout / M)
    # Before: 1.097 of LoRA's step; PEFT's runs 1.63.
    assert _step(loha) / _step(_plan(Method.LORA)) > 1.4


def test_method_kernels_join_the_host_count() -> None:
    # tools/measure/peft_method_cost.py at 512 → 512: DoRA 18 / 19 kernels a target, LoRA's path 6 / 9 (dropout 0):
    # 12 / 10 beyond it, on top of LORA_LINEAR_KERNELS; OFT 17 / 24 a target on the frozen block.
    lora, dora, oft = (eager_block_kernels(_plan(m)) for m in (Method.LORA, Method.DORA, Method.OFT))
    # (the kernel count per target does not depend on OFT's blocks)
    assert PEFT_METHOD_PASSES[Method.DORA].kernels == (12, 10)
    assert dora == (lora[0] + 2 * 12, lora[1] + 2 * 10, lora[2] + 2 * 12)
    lf, lb, lr = LORA_LINEAR_KERNELS
    assert oft == (lora[0] - 2 * lf + 2 * 17, lora[1] - 2 * lb + 2 * 24, lora[2] - 2 * lr + 2 * 17)


def test_methods_without_own_passes_are_unchanged() -> None:
    for method in (Method.LORA, Method.FULL, Method.PREFIX_TUNING, Method.LN_TUNING):
        assert method_work(_plan(method)) is None


def test_published_ratios_are_the_summed_step_times() -> None:
    # peft_method_time.json: each record's ratio is its 20 windows' summed "train time" over LoRA r32's (585.191 s).
    corpus = json.loads(peft_time.CORPUS.read_text())
    records = {r["id"]: r for r in corpus["records"]}
    base = sum(records[peft_time.BASELINE]["train_time_per_window_s"])
    assert base == pytest.approx(585.191, abs=1e-3)
    for record in corpus["records"]:
        assert len(record["train_time_per_window_s"]) == 20
        ratio = sum(record["train_time_per_window_s"]) / base
        assert record["derived"]["ratio_to_lora_r32"] == pytest.approx(ratio, abs=1e-4)


def test_the_ratio_table_scores_every_record() -> None:
    table = peft_time.rows()
    # 22 records, and MiSS's default run (branch h58peft: miss--llama-3.2-3B-default's train times at 5d602fdb), and
    # LoRA-FA's (branch h60opt: lora--llama-3.2-3B-rank32-lorafa's train times at 5d602fdb, optimizer_type "lora-fa");
    # FourierFT's two, RoAd's, VB-LoRA's, RandLoRA's, SHiRA's and BOFT's (branch h78peft, the same results files),
    # BOFT's expressible since branch h80boft: every record is scored.
    assert len(table) == 31
    assert [r.id for r in table if r.predicted is None] == []
    n, median, worst = peft_time.summary(table)
    assert n == 30 and median <= worst


def test_lora_fa_is_scored_and_its_step_misses_the_syncs() -> None:
    """LoRA-FA's summed step time is 1.325 × LoRA r32's (775.515 s against 585.191 s over the same 5,000 steps,
    peft_method_time.json). The estimate adds its step's 18 ops a (lora_A, lora_B) pair, 56 pairs, and drops dA and
    lora_A's state: 1.122, -15.3 %. What it likely leaves out: each pair's ``torch.eye(r).to(A.device)`` copies from
    pageable host memory, before which CUDA syncs the stream (CUDA runtime API, "API synchronization behavior":
    memcpy from pageable host memory), so the host waits for the GPU 56 times a step and its launches stop hiding
    behind the GPU's work (pinv's cuSOLVER SVD may add more): not modelled (core.training.speed.LORA_FA_STEP_OPS)."""
    rows = {r.id: r for r in peft_time.rows()}
    row = rows["peft-time-lora--llama-3.2-3B-rank32-lorafa"]
    assert row.published == pytest.approx(1.3252, abs=1e-4)
    assert row.predicted is not None and row.error is not None and -0.16 < row.error < -0.14


def test_adalora_rank_allocator_runs_once_an_optimizer_step() -> None:
    # huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py RankAllocator.update_and_allocate, once a step after
    # the optimizer (method_comparison run.py calls it every step): tools/measure/peft_method_cost.py counts 42 ops a
    # target; its orthogonal regularisation (adalora/model.py AdaLoraModel.forward) 10 / 16 a target a micro-batch.
    plan = _plan(Method.ADALORA).with_lora(rank=64)
    one = step_work(plan, param_counts(plan), find_gpu("l40s"))
    two = plan.with_workload(grad_accum=2)
    accumulated = step_work(two, param_counts(two), find_gpu("l40s"))
    allocator = 42 * 2 * 28  # 2 targets a block, 28 blocks
    per_micro = one.host_kernels - allocator
    assert accumulated.host_kernels == pytest.approx(2 * per_micro + allocator)
    frozen = eager_block_kernels(_plan(Method.LORA))
    lf, lb, _ = LORA_LINEAR_KERNELS
    assert eager_block_kernels(plan)[:2] == (frozen[0] - 2 * lf + 2 * 18, frozen[1] - 2 * lb + 2 * 28)


def test_the_arithmetic_shows_each_method_part_with_its_source() -> None:
    # The Compute & time arithmetic (window and --json's compute_parts): the method's parts name what it runs and
    # where that was read and counted; LoRA shows none.
    parts = {p.label: p.formula for p in estimate(_plan(Method.DORA)).compute.compute_parts}
    bytes_part = next(f for label, f in parts.items() if "memory-bound passes" in label)
    assert "DoRA's weight norm" in bytes_part and "huggingface/peft 51c2ff66" in bytes_part
    assert "peft_method_cost.py" in bytes_part
    lora = estimate(_plan(Method.LORA)).compute.compute_parts
    assert not any("PEFT method" in p.label for p in lora)
