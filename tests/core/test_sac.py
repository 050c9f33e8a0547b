"""Selective activation checkpointing (torchtitan's ``op`` and ``layer`` SAC) as a plan option.

The rule is torchtitan's (pytorch/torchtitan commit 1f029641,
torchtitan/distributed/activation_checkpoint.py ``_apply_op_sac`` / ``_apply_layer_sac``,
torchtitan/models/llama3/parallelize.py ``_op_sac_save_list``): the outputs of mm and the
SDPA kernels are saved except every second mm of a block; layer SAC checkpoints the blocks
whose 1-based index is a multiple of N. The measured cases are benchmarks/accuracy/
measured_sac (tools/measure, ``_enable_selective``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from core.advice import remedies
from core.breakdown import BucketKey, StepPhase
from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import DTYPE_BYTES
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.planfile import dumps, loads
from core.files.runconfig import load_run_config, loads_run_config, plan_from_run, resolve_model
from core.parallel.comm import step_communication
from core.params import param_counts
from core.plan import (
    Attention,
    CheckpointPolicy,
    Hardware,
    Method,
    Plan,
    Precision,
    Stack,
    Workload,
    precision_fields,
)
from core.presets import default_plan
from core.training.activations import recomputed_share, selective_saved
from core.training.compute import flops_per_token
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "runconfigs"


def _plan(model: str, b: int = 1, s: int = 2048, **changes: object) -> Plan:
    entry = find_model(model)
    plan = Plan(
        model=entry.spec,
        model_id=entry.id,
        **precision_fields(Precision.BF16),
        attention=Attention.SDPA,
        checkpointing=True,
        workload=Workload(micro_batch=b, seq_len=s),
        hardware=Hardware(gpu="h100-sxm"),
    )
    return plan.with_changes(**changes) if changes else plan


# ---- the saved tensors, against byte counts derived by hand from the rule ----------------


def test_op_sac_saves_every_other_matmul_and_the_flash_output_of_llama_3_2_1b() -> None:
    # Llama 3.2 1B (its config.json): d 2048, 32 heads of 64, 8 KV heads (kv width 512),
    # I 8192, no biases. The block's mms in order: q, k, v, o, gate, up, down; saved are the
    # 1st, 3rd, 5th, 7th: q (N·2048), v (N·512), gate (N·8192), down (N·2048), all bf16;
    # then the flash kernel's output (N·2048 × 2) and its log-sum-exp (B·H·S × 4).
    n = 2 * 4096
    plan = _plan("llama-3.2-1b", b=2, s=4096, checkpoint_policy=CheckpointPolicy.OP)
    expected = n * (2048 + 512 + 8192 + 2048) * 2 + n * 2048 * 2 + 2 * 32 * 4096 * 4
    assert selective_saved(plan).bytes == expected


def test_projections_with_a_bias_run_as_addmm_and_are_not_counted() -> None:
    # Qwen2.5 1.5B has q/k/v biases: those three run as aten.addmm (not in the save list),
    # so the counted mms are o (1st, saved), gate (2nd), up (3rd, saved), down (4th).
    n = 2048
    plan = _plan("qwen2.5-1.5b", checkpoint_policy=CheckpointPolicy.OP)
    mm_outputs = n * (1536 + 8960) * 2
    attention = n * 12 * 128 * 2 + 1 * 12 * 2048 * 4
    assert selective_saved(plan).bytes == mm_outputs + attention


def test_layer_sac_checkpoints_the_blocks_whose_index_n_divides() -> None:
    plan = _plan("llama-3.2-1b", checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=3)
    assert plan.checkpointed_blocks(16) == 5  # blocks 3, 6, 9, 12, 15
    assert replace(plan, checkpointing=False).checkpointed_blocks(16) == 0
    assert plan.with_changes(checkpoint_policy=CheckpointPolicy.OP).checkpointed_blocks(16) == 16


def test_recomputed_work_follows_the_policy() -> None:
    full = _plan("llama-3.2-1b")
    layer = full.with_changes(checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=2)
    op = full.with_changes(checkpoint_policy=CheckpointPolicy.OP)
    assert recomputed_share(full) == 1.0
    assert recomputed_share(layer) == 0.5  # 8 of 16 blocks
    # Recomputed mms k, o, up: 2048·512 + 2048·2048 + 2048·8192 of the block's weights.
    weights = 2048 * (2048 + 512 + 512 + 2048) + 3 * 2048 * 8192
    assert recomputed_share(op) == pytest.approx(2048 * (512 + 2048 + 8192) / weights)
    counts = param_counts(full)
    per_token = [flops_per_token(p, counts)[0] for p in (replace(full, checkpointing=False), op, layer, full)]
    assert per_token == sorted(per_token) and len(set(per_token)) == 4


def test_the_policies_order_the_activation_memory() -> None:
    plan = _plan("llama-3.2-1b", b=2, s=4096)
    peaks = {
        name: estimate(p).peak_bytes
        for name, p in {
            "none": replace(plan, checkpointing=False),
            "layer": plan.with_changes(checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=2),
            "op": plan.with_changes(checkpoint_policy=CheckpointPolicy.OP),
            "full": plan,
        }.items()
    }
    assert peaks["full"] < peaks["op"] < peaks["layer"] < peaks["none"]


def test_the_policy_is_ignored_with_checkpointing_off_and_shows_in_the_arithmetic() -> None:
    off = _plan("llama-3.2-1b", checkpointing=False)
    assert estimate(off.with_changes(checkpoint_policy=CheckpointPolicy.OP)).peak_bytes == estimate(off).peak_bytes
    op = _plan("llama-3.2-1b", checkpoint_policy=CheckpointPolicy.OP)
    forward = next(p for p in estimate(op).phases if p.kind is StepPhase.FORWARD)
    terms = {t.label: t for t in forward.bucket(BucketKey.ACTIVATIONS).terms}
    saved = terms["outputs saved by op SAC (matmuls, attention) per block"]
    assert saved.bytes == 16 * selective_saved(op).bytes and saved.formula.startswith("16 × ")
    assert terms["block inputs kept by checkpointing"].bytes == 16 * 2048 * 2048 * 2  # L × N·d × 2


# ---- the plan, its file -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"checkpoint_every": 5000}, "checkpoint_every"),
        ({"checkpoint_policy": "sometimes"}, "checkpoint_policy"),
    ],
)
def test_bad_values_are_one_line_plan_errors(changes: dict[str, object], field: str) -> None:
    with pytest.raises(PlanError) as info:
        replace(default_plan(), **changes)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"{field}: ") and "\n" not in str(info.value)


def test_a_plan_file_without_the_keys_reads_as_before_and_the_keys_round_trip() -> None:
    plan = default_plan()
    document = json.loads(dumps(plan))
    del document["plan"]["checkpoint_policy"], document["plan"]["checkpoint_every"]
    assert loads(json.dumps(document)) == plan
    layer = plan.with_changes(checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=3)
    assert loads(dumps(layer)) == layer
    document = json.loads(dumps(layer))
    document["plan"]["checkpoint_policy"] = "selective"
    with pytest.raises(PlanFileError, match="checkpoint_policy"):
        loads(json.dumps(document))


# ---- the command line ---------------------------------------------------------------------


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    # 4 × 4096 tokens: the activations, not the optimizer step, make the peak.
    assert (
        main(["estimate", "--model", "llama-3.2-1b", "--precision", "bf16", "-b", "4", "-s", "4096", "--json", *args])
        == 0
    )
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_cli_policy_options_turn_checkpointing_on(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    full = _json(capsys, "--checkpointing")["peak_bytes"]
    path = tmp_path / "op.json"
    op = _json(capsys, "--checkpoint-policy", "op", "--save", str(path))["peak_bytes"]
    saved = loads(path.read_text())
    assert (saved.checkpointing, saved.checkpoint_policy) == (True, CheckpointPolicy.OP)
    assert op == estimate(saved).peak_bytes and op != full
    path = tmp_path / "layer.json"
    _json(capsys, "--checkpoint-every", "4", "--save", str(path))
    saved = loads(path.read_text())
    assert (saved.checkpointing, saved.checkpoint_policy, saved.checkpoint_every) == (True, CheckpointPolicy.LAYER, 4)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--checkpoint-every", "0"), "checkpoint_every"),
        (("--no-checkpointing", "--checkpoint-policy", "op"), "contradicts"),
        (("--checkpoint-policy", "op", "--checkpoint-every", "2"), "applies to --checkpoint-policy layer"),
        (("--checkpoint-policy", "selective"), "invalid choice"),
    ],
)
def test_cli_bad_policy_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragment: str
) -> None:
    code = main(["estimate", "--model", "llama-3.2-1b", *args])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and err.count("\n") == 1


# ---- torchtitan job configs ------------------------------------------------------------------


def test_torchtitan_llama3_8b_config_is_op_sac_under_fsdp() -> None:
    run = load_run_config(DATA / "torchtitan_llama3_8b.toml")
    s = run.settings
    # [training] local_batch_size = 1, seq_len = 8192; [activation_checkpoint] mode =
    # "selective", selective_ac_option = "op"; data_parallel_shard_degree = -1.
    assert (s.micro_batch, s.seq_len, s.optimizer, s.sharding) == (1, 8192, "adamw", "fsdp")
    assert (s.checkpointing, s.checkpoint_policy, s.checkpoint_every) == (True, "op", None)
    assert run.unknown == ()
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert plan.model_id == "llama-3.1-8b"
    assert (plan.checkpointing, plan.checkpoint_policy) == (True, CheckpointPolicy.OP)


def test_torchtitan_full_and_layer_configs() -> None:
    full = load_run_config(DATA / "torchtitan_llama3_70b.toml").settings  # mode = "full"
    assert (full.checkpointing, full.checkpoint_policy) == (True, "full")
    layer = load_run_config(DATA / "torchtitan_llama3_debug_model.toml")  # selective, '2'
    plan = plan_from_run(layer, default_plan(), None)
    assert (plan.checkpoint_policy, plan.checkpoint_every) == (CheckpointPolicy.LAYER, 2)


def test_torchtitan_mode_none_and_the_default_and_a_bad_option() -> None:
    none = loads_run_config(b'[job]\n[activation_checkpoint]\nmode = "none"\n', "t.toml").settings
    assert none.checkpointing is False and none.checkpoint_policy is None
    # No [activation_checkpoint] table: torchtitan's defaults, selective with option "2".
    default = loads_run_config(b'[training]\nseq_len = 4096\n[job]\ndescription = "x"\n', "t.toml").settings
    assert (default.checkpoint_policy, default.checkpoint_every) == ("layer", 2)
    with pytest.raises(PlanFileError, match="selective_ac_option") as info:
        loads_run_config(b'[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "x"\n', "t.toml")
    assert "\n" not in str(info.value)
    with pytest.raises(PlanFileError, match="not valid TOML"):
        loads_run_config(b"[activation_checkpoint\n", "t.toml")


# ---- the measured cases --------------------------------------------------------------------


def _benchmark():  # type: ignore[no-untyped-def]
    return load_script(ROOT / "benchmarks" / "sac_accuracy.py", "sac_benchmark")


def test_every_sac_case_is_measured_held_out_ones_included() -> None:
    bench = _benchmark()
    cases = json.loads((ROOT / "benchmarks" / "accuracy" / "cases_sac.json").read_text())["cases"]
    measured = {r.case_id for r in bench.rows()}
    assert {c["id"] for c in cases} == measured
    assert {c["checkpoint_policy"] for c in cases} == {"op", "layer"}
    assert any(c["id"].startswith(bench.HOLDOUT_PREFIX) for c in cases)


def test_estimate_meets_the_sac_targets_on_the_measured_phase_peaks() -> None:
    bench = _benchmark()
    table = bench.rows()
    median, worst = bench.summary(table)
    worst_rows = sorted(table, key=lambda r: -abs(r.error_pct))[:3]
    report = ", ".join(f"{r.case_id} {r.measured_phase} {r.error_pct:+.2f}%" for r in worst_rows)
    assert median <= bench.MEDIAN_TARGET, report
    assert worst <= bench.WORST_TARGET, report


def test_full_checkpointing_is_offered_in_place_of_a_selective_policy() -> None:
    op = _plan("llama-3.2-1b", b=2, s=4096, checkpoint_policy=CheckpointPolicy.OP)
    changed = remedies._checkpointing(op)
    assert changed is not None
    plan, label = changed
    assert plan.checkpoint_policy is CheckpointPolicy.FULL and "Full" in label
    assert estimate(plan).peak_bytes < estimate(op).peak_bytes
    assert remedies._checkpointing(plan) is None


def test_tensor_parallel_traffic_counts_only_the_recomputed_blocks_again() -> None:
    # Megatron's 4 activation all-reduces per layer and micro-batch, 2 more per recomputed
    # block (core/parallel/comm.py): 64, 80 and 96 for 16 blocks with none, every 2nd, all.
    base = _plan("llama-3.2-1b").on_gpus(2).with_parallel(tensor_parallel=2)

    def tp_bytes(plan: Plan) -> float:
        comm = step_communication(plan, param_counts(plan), 1.0, 1 / 3)  # times do not change the bytes
        return next(t.bytes for t in comm.terms if t.label.startswith("tensor-parallel activation"))

    none = tp_bytes(replace(base, checkpointing=False))
    layer = tp_bytes(base.with_changes(checkpoint_policy=CheckpointPolicy.LAYER, checkpoint_every=2))
    assert (layer / none, tp_bytes(base) / none) == (pytest.approx(80 / 64), pytest.approx(96 / 64))


def test_lora_adapters_add_their_two_matmuls_after_each_base_projection() -> None:
    # PEFT LoraLayer.forward: base, then lora_A, lora_B. With q and v adapted the order is
    # q, qA, qB, k, v, vA, vB, o, gate, up, down: saved q, qB, v, vB, gate, down. The
    # adapters' outputs are in the adapter dtype (PEFT's float32 here, no autocast).
    plan = _plan("llama-3.2-1b", checkpoint_policy=CheckpointPolicy.OP).with_method(Method.LORA)
    plan = plan.with_lora(rank=16, targets=("q_proj", "v_proj"))
    a = DTYPE_BYTES[plan.adapter_dtype]
    n = 2048
    expected = n * (2048 + 512 + 8192 + 2048) * 2 + n * (2048 + 512) * a + n * 2048 * 2 + 32 * 2048 * 4
    assert selective_saved(plan).bytes == expected


# ---- per-op SAC under torch.compile (core.training.activations.SAC_COMPILED_NOTE) -------------


def test_compiled_op_sac_does_not_keep_the_down_projections_output() -> None:
    # Eager op SAC caches every MUST_SAVE output (torch/utils/checkpoint.py
    # _CachingTorchDispatchMode); compiled, Inductor's min-cut partitioner keeps only what the
    # backward reads (torch/_functorch/partitioners.py at c28ba8e5, solve_min_cut /
    # _extract_fwd_bwd_modules). Llama 3.1 8B (config.json: d 4096, 32 heads of 128, kv width
    # 1024, I 14336) as torchtitan's Dec 2024 table ran it, 2 × 8,192 tokens: the 7th mm, w2,
    # feeds only ``out = h + feed_forward(...)``, so N·d × 2 B less per block.
    n = 2 * 8192
    eager = _plan("llama-3.1-8b", b=2, s=8192, checkpoint_policy=CheckpointPolicy.OP)
    compiled = eager.with_changes(stack=Stack.COMPILE)
    q, v, gate, down, attention_out, lse = 4096, 1024, 14336, 4096, 4096, 2 * 32 * 8192 * 4
    assert selective_saved(eager).bytes == n * (q + v + gate + down + attention_out) * 2 + lse
    assert selective_saved(compiled).bytes == n * (q + v + gate + attention_out) * 2 + lse
    assert selective_saved(eager).bytes - selective_saved(compiled).bytes == 134_217_728


@pytest.mark.parametrize("model", ["olmo-2-1b", "gemma-2-2b"])
def test_compiled_op_sac_keeps_an_mlp_output_a_norm_reads(model: str) -> None:
    # OLMo-2 normalises the MLP output before the residual add (post_norm), Gemma-2 has a
    # post-feed-forward norm: the norm's backward reads the down projection's output.
    eager = _plan(model, checkpoint_policy=CheckpointPolicy.OP)
    assert selective_saved(eager.with_changes(stack=Stack.COMPILE)).bytes == selective_saved(eager).bytes


def test_compiled_op_sac_keeps_no_blocks_down_output_in_the_estimate() -> None:
    # 32 blocks × 134,217,728 B kept by eager op SAC, less the one block whose backward recomputes
    # what it did not keep (the recompute term is the block's saved tensors less its SAC outputs).
    eager = _plan("llama-3.1-8b", b=2, s=8192, checkpoint_policy=CheckpointPolicy.OP, stack=Stack.COMPILE)
    eager_sac = replace(eager, stack=Stack.EAGER)
    saved = {p.stack: selective_saved(p).bytes for p in (eager, eager_sac)}
    drop = saved[Stack.EAGER] - saved[Stack.COMPILE]
    activations = {
        p.stack: sum(
            t.bytes
            for t in next(ph for ph in estimate(p).phases if ph.kind is StepPhase.FORWARD)
            .bucket(BucketKey.ACTIVATIONS)
            .terms
            if t.label.startswith("outputs saved by op SAC")
        )
        for p in (eager, eager_sac)
    }
    assert drop == 134_217_728 and activations[Stack.EAGER] - activations[Stack.COMPILE] == 32 * drop
