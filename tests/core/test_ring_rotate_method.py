"""PyTorch's ring attention's K/V rotate method (``parallel.cp_rotate_method``): torchtitan's
``parallelism.context_parallel_rotate_method``, torch's ``set_rotate_method("allgather" | "alltoall")``.

Counted from pytorch/pytorch f2127dbdb01fc9319ce42b92d60344d19cbd0137
torch/distributed/tensor/experimental/_attention.py: ``_templated_ring_attention_backward`` with
``_AllGatherRotater`` (every rank's K/V gathered once and kept) or ``_AllToAllRotater`` (the chunk
in use, the step's torch.cat sent on through ``permute_tensor`` and the chunk arriving); the float32
dK/dV ring is ``_AllToAllRotater`` under both. Shapes: Llama 3.1 405B (hidden 16384 = 128 query
heads × 128), torchtitan's 405B 4D run (TP 8, CP 8, 262,144 tokens)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from core.breakdown import StepPhase
from core.cli.app import main
from core.errors import PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.acts import ring_attention_backward, ring_kv_elements
from core.parallel.comm import step_communication
from core.parallel.layout import layout
from core.params import param_counts
from core.plan import CpRotate, Plan, Stack, Strategy
from core.presets import default_plan, plan_for_model
from tests.core.planfile_compat import reload_and_without
from tests.core.test_ring_attention_memory import _cp_plan

RUNCONFIGS = Path(__file__).resolve().parents[1] / "data" / "runconfigs"
ELEMENTS_405B_CP8 = 262144 // 8 * 16384 // 8  # the rank's chunk at the query width ÷ TP: 67,108,864


def _405b_cp8() -> Plan:
    plan = replace(_cp_plan(cp=1, seq_len=8192), model=plan_for_model("llama-3.1-405b").model)
    return plan.on_gpus(64, Strategy.FSDP).with_parallel(tensor_parallel=8, context_parallel=8)


# ---- the memory ----------------------------------------------------------------------------
def test_the_405b_cp8_rank_holds_forty_six_bytes_per_element_under_alltoall() -> None:
    # Hand count, bf16 compute (2 bytes), 67,108,864 elements. Float32 as under allgather:
    # grad_query + three (grad_key, grad_value) pairs = 7 × 4 = 28 bytes. Compute dtype: the chunk
    # received at the previous step that key/value view (2), the step's torch.cat sent on (2), the
    # permute's output arriving (2), the kernel's three gradients (3) = 9 × 2 = 18 bytes.
    # 46 × 67,108,864 = 3,087,007,744 (allgather: 70 × = 4,697,620,480; 1,610,612,736 less).
    plan = _405b_cp8()
    term = ring_attention_backward(262144, plan.model.q_width, 2.0, layout(plan), CpRotate.ALLTOALL)
    assert ELEMENTS_405B_CP8 == 67_108_864
    assert term is not None
    assert term.bytes == 3_087_007_744
    assert term.formula.endswith("× 46") and "(6 + 3)" in term.formula
    assert "alltoall" in term.label
    gathered = ring_attention_backward(262144, plan.model.q_width, 2.0, layout(plan))
    assert gathered is not None and gathered.bytes - term.bytes == 24 * ELEMENTS_405B_CP8


def test_the_rotating_chunks_do_not_grow_with_the_cp_degree() -> None:
    assert [ring_kv_elements(cp, CpRotate.ALLGATHER) for cp in (2, 4, 8, 16)] == [6, 10, 18, 34]
    # CP 2: step 0 sends the rank's own K/V (cat + arriving), step 1 only receives.
    assert [ring_kv_elements(cp, CpRotate.ALLTOALL) for cp in (2, 4, 8, 16)] == [4, 6, 6, 6]


def test_the_plans_method_reaches_the_block_backward() -> None:
    # Llama 3.1 8B at CP 8, 262,144 tokens: 32,768 × 4,096 × 46 bytes = 6.2 GB under alltoall,
    # still more than the MLP's 4.4 GB of gradients, so the ring decides the block backward.
    plan = _cp_plan(cp=8).with_parallel(cp_rotate_method=CpRotate.ALLTOALL)
    block = next(p for p in estimate(plan).phases if p.kind is StepPhase.BACKWARD_BLOCK)
    ring = [t for b in block.buckets for t in b.terms if "ring attention backward: rotating K/V" in t.label]
    assert [t.bytes for t in ring] == [pytest.approx(32768 * 4096 * 46)]
    assert estimate(_cp_plan(cp=8)).peak_bytes > estimate(plan).peak_bytes


def test_no_effect_without_pytorchs_ring() -> None:
    for plan in (_cp_plan(cp=1, seq_len=8192), _cp_plan(cp=8, stack=Stack.MEGATRON)):
        other = plan.with_parallel(cp_rotate_method=CpRotate.ALLTOALL)
        assert estimate(other).peak_bytes == estimate(plan).peak_bytes
        assert not input_at("parallel.cp_rotate_method").matters(plan)
    assert input_at("parallel.cp_rotate_method").matters(_cp_plan(cp=2, seq_len=65536))


# ---- the time ------------------------------------------------------------------------------
def _kv_term(plan: Plan) -> object:
    comm = step_communication(plan, param_counts(plan), 100.0, 1 / 3, attention_share=0.4)
    return next(t for t in comm.terms if t.label.startswith("context-parallel K/V"))


def test_alltoall_sends_one_chunk_per_step_hidden_under_that_steps_attention() -> None:
    # 8B, CP 8, full recompute: 3 ring calls per layer (forward, recompute, backward) × 32 layers.
    # allgather: one gather of 2 × 8 chunks per call, hidden under 1/8 of the attention (40 s);
    # alltoall: 7 sends of one 2 × 32,768 × 4,096 × 2-byte chunk per call, under 7/8 of it.
    # Eager: the rotaters' AsyncCollectiveTensor is waited for at its first use, the next step.
    plan = _cp_plan(cp=8, stack=Stack.EAGER)
    gather, ring = _kv_term(plan), _kv_term(plan.with_parallel(cp_rotate_method=CpRotate.ALLTOALL))
    assert gather.label == "context-parallel K/V all-gather"
    assert gather.overlapped and gather.window_seconds == pytest.approx(40.0 / 8)
    assert ring.label == "context-parallel K/V ring (alltoall)"
    assert ring.bytes == pytest.approx(7 * 3 * 32 * 2 * 32768 * 4096 * 2)
    assert ring.overlapped and ring.window_seconds == pytest.approx(40.0 * 7 / 8)
    assert ring.formula.startswith("672 × send of")


def test_under_torch_compile_every_ring_collective_is_waited_for_where_it_is_issued() -> None:
    # torch/distributed/_functional_collectives.py _maybe_wrap_tensor (pytorch/pytorch@fff02e67): while tracing,
    # ``return wait_tensor(self)`` at once; torch/_inductor/config.py (pytorch/pytorch@000091cf)
    # reorder_for_compute_comm_overlap = False, so no pass moves the wait. The same bytes, all of them exposed.
    for method in CpRotate:
        eager = step_communication(
            _cp_plan(cp=8, stack=Stack.EAGER).with_parallel(cp_rotate_method=method),
            param_counts(_cp_plan(cp=8)), 100.0, 1 / 3, attention_share=0.4,
        )
        compiled = step_communication(
            _cp_plan(cp=8).with_parallel(cp_rotate_method=method),
            param_counts(_cp_plan(cp=8)), 100.0, 1 / 3, attention_share=0.4,
        )
        ring = [t for t in compiled.terms if t.label.startswith("context-parallel")]
        hidden = [t for t in eager.terms if t.label.startswith("context-parallel")]
        assert [(t.label, t.bytes, t.seconds) for t in ring] == [(t.label, t.bytes, t.seconds) for t in hidden]
        assert len(ring) == 2 and not any(t.overlapped for t in ring) and all(t.overlapped for t in hidden)
        assert compiled.exposed_seconds >= sum(t.seconds for t in ring) > eager.exposed_seconds
        assert any("under torch.compile" in a and "exposed whole" in a for a in compiled.assumptions)


def test_the_compile_rule_holds_whether_the_cp_mesh_is_the_world_mesh_or_a_fresh_slice_of_it() -> None:
    # torchtitan 9dec370 train.py L270-271 hands context_parallel ``world_mesh["cp"]`` every step. At CP 8 on 8 GPUs
    # (Table 2's last row, FSDP 1) ParallelDims.build_mesh makes a 1-D mesh named ("cp",) and DeviceMesh.__getitem__
    # returns the mesh itself; with TP 8 beside CP 8 (Table 6's 405B) it builds a new sub-mesh every step (torch 2.6.0,
    # pytorch/pytorch@2236df17 torch/distributed/device_mesh.py L709-710 and create_sub_mesh L148-161). The patched
    # SDPA closes over that mesh; dynamo guards it with EQUALS_MATCH (torch/_dynamo/variables/builder.py L937-940 at
    # 2.6.0, L891-894 at 2.5.1, pytorch/pytorch@a8d6afb5) and DeviceMesh.__eq__ compares ranks, shape, device type and
    # names (L643-656), so neither layout recompiles per step: the compiled block, and the rule, are the same for both.
    for plan in (_cp_plan(cp=8), _405b_cp8()):
        assert plan.stack is Stack.COMPILE and plan.parallel.context_parallel == 8
        comm = step_communication(plan, param_counts(plan), 100.0, 1 / 3, attention_share=0.4)
        ring = [t for t in comm.terms if t.label.startswith("context-parallel")]
        assert len(ring) == 2 and not any(t.overlapped or t.unhidden_seconds for t in ring)
        assert any("under torch.compile" in a and "exposed whole" in a for a in comm.assumptions)


# ---- the files, the command line -----------------------------------------------------------
def test_a_plan_file_keeps_the_method_and_an_older_file_reads_allgather(tmp_path: Path) -> None:
    plan = _cp_plan(cp=8).with_parallel(cp_rotate_method=CpRotate.ALLTOALL)
    loaded, older = reload_and_without(plan, tmp_path, "parallel", "cp_rotate_method")
    assert loaded == plan
    assert older == _cp_plan(cp=8)


def test_a_plan_file_with_another_method_is_refused_with_the_accepted_ones(tmp_path: Path) -> None:
    document = planfile.plan_to_dict(_cp_plan(cp=8))
    document["plan"]["parallel"]["cp_rotate_method"] = "ring"
    with pytest.raises(PlanFileError) as refused:
        planfile.loads(json.dumps(document))
    message = str(refused.value)
    assert "plan.parallel.cp_rotate_method: 'ring' is not allowed" in message
    assert "one of allgather, alltoall" in message


def test_the_command_line_sets_it_and_refuses_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    args = ["estimate", "--model", "llama-3.1-8b", "--gpus", "8", "--strategy", "fsdp", "--cp", "8", "-s", "65536"]
    assert main([*args, "--cp-rotate-method", "alltoall", "--save", str(path)]) == 0
    assert planfile.load(path).parallel.cp_rotate_method is CpRotate.ALLTOALL
    capsys.readouterr()
    assert main([*args, "--cp-rotate-method", "ring"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and "'allgather', 'alltoall'" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def _titan(extra: str) -> str:
    text = (RUNCONFIGS / "torchtitan_llama3_8b.toml").read_text()
    return text.replace("[parallelism]\n", f"[parallelism]\n{extra}\n", 1)


def test_torchtitans_toml_key_is_read_and_a_bad_value_refused() -> None:
    run = loads_run_config(_titan('context_parallel_rotate_method = "alltoall"').encode(), "llama3_8b.toml")
    assert run.settings.cp_rotate_method == "alltoall"
    assert [f.source for f in run.fields if f.setting == "cp_rotate_method"] == [
        "parallelism.context_parallel_rotate_method"
    ]
    plan = plan_from_run(run, default_plan(), None)
    assert plan.parallel.cp_rotate_method is CpRotate.ALLTOALL
    plain = loads_run_config(_titan("").encode(), "llama3_8b.toml")
    assert plain.settings.cp_rotate_method is None  # torchtitan's default, allgather: the plan's kept
    with pytest.raises(PlanFileError) as refused:
        loads_run_config(_titan('context_parallel_rotate_method = "ring"').encode(), "llama3_8b.toml")
    assert "parallelism.context_parallel_rotate_method" in str(refused.value)
    assert "allgather or alltoall" in str(refused.value)


def test_torchtitans_export_writes_it_and_the_others_list_it() -> None:
    plan = _cp_plan(cp=8, stack=Stack.EAGER).with_parallel(cp_rotate_method=CpRotate.ALLTOALL)
    titan = export(plan, Target.TORCHTITAN)
    assert 'context_parallel_rotate_method = "alltoall"' in titan.text
    assert "parallel.cp_rotate_method" not in {u.field for u in titan.unexpressed}
    back = plan_from_run(loads_run_config(titan.text.encode(), "run.toml"), default_plan(), None)
    assert back.parallel.cp_rotate_method is CpRotate.ALLTOALL
    assert "parallel.cp_rotate_method" in {u.field for u in export(plan, Target.TORCHTUNE).unexpressed}
    # accelerate 16cb6eb8: parallelism_config_cp_comm_strategy, passed on for CP > 1 (utils/launch.py)
    # into TorchContextParallelConfig, which Accelerator._prepare_cp hands to set_rotate_method.
    for target in (Target.ACCELERATE, Target.ACCELERATE_LAUNCH):
        accelerate = export(plan, target)
        assert "parallelism_config_cp_comm_strategy" in accelerate.text and "alltoall" in accelerate.text
        assert "parallel.cp_rotate_method" not in {u.field for u in accelerate.unexpressed}
    # The default is not listed anywhere.
    assert "parallel.cp_rotate_method" not in {u.field for u in export(_cp_plan(cp=8), Target.TORCHTUNE).unexpressed}


# ---- the diagnosis -------------------------------------------------------------------------
def test_the_diagnosis_offers_the_alltoall_rotation_where_the_ring_backward_is_the_peak() -> None:
    from core.advice import remedies

    # Llama 3.1 8B, FSDP2 on 8 GPUs, CP 8 at 262,144 tokens (torchtitan's Dec 2024 CP row), full
    # checkpointing, a fused linear cross-entropy (no logits): the block's ring backward is the peak.
    plan = replace(
        plan_for_model("llama-3.1-8b").on_gpus(8, Strategy.FSDP).with_parallel(context_parallel=8),
        checkpointing=True,
        fused_loss=True,
    ).with_workload(micro_batch=1, seq_len=262_144)
    before = estimate(plan)
    assert before.peak_phase == "backward"
    found = {r.kind: r for r in remedies.remedies_for(plan)}
    alltoall = found[remedies.RemedyKind.CP_ALLTOALL]
    assert alltoall.plan.parallel.cp_rotate_method is CpRotate.ALLTOALL
    assert alltoall.plan.with_parallel(cp_rotate_method=CpRotate.ALLGATHER) == plan  # nothing else changes
    # Every rank's K/V (2·8 + 2 chunks) against three (3 + 3) in the compute dtype, 2 bytes, at the
    # query width over the rank's 32,768 tokens × 4,096: 12 × 2 B × 134,217,728 elements = 3.22 GB off the
    # allocated peak (and the allocator's reserve on it off the judged total).
    assert before.peak_bytes - estimate(alltoall.plan).peak_bytes == 12 * 2 * 32_768 * 4_096
    assert before.total_bytes - alltoall.total_bytes > 12 * 2 * 32_768 * 4_096
    # Not offered where it is already chosen, at CP 2 (both hold four chunks), or without PyTorch's ring.
    assert remedies._cp_alltoall(alltoall.plan) is None
    assert remedies._cp_alltoall(plan.with_parallel(context_parallel=2)) is None
    assert remedies._cp_alltoall(replace(plan, stack=Stack.MEGATRON)) is None
