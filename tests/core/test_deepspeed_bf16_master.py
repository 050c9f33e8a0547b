"""DeepSpeed's ``bf16.bf16_master_weights_and_grads`` and ``bf16.bf16_optimizer_states`` as plan settings
(``parallel.bf16_master_weights``, ``parallel.bf16_optimizer_states``; issue 22 item 4).

Source: deepspeedai/DeepSpeed edaa7221 (PR #7700, 39a682d7, first released in v0.18.3 6eb98aaf):
- runtime/precision_config.py ``DeepSpeedBF16Config``: both False by default;
- runtime/config.py ``_do_error_check``: only with ZeRO stage 1, 2 or 3, and "bf16_optimizer_states requires
  bf16_master_weights_and_grads to be enabled";
- runtime/base_optimizer.py ``_configure_master_weights``: a bf16 master with float32 states needs ZeRO-Offload
  with DeepSpeedCPUAdam (stage_1_and_2.py ``_enforce_cpu_offload``, stage3.py ``_enforce_optimizer_offload``), and
  the master dtype (``master_weights_and_grads_dtype``) becomes torch.bfloat16;
- stage_1_and_2.py ``__init__`` clones the 16-bit partition into the master in that dtype; ``step`` makes the
  gradient the optimizer reads with ``flat_grad_partition.to(master dtype)`` — the bf16 tensor itself;
- stage3.py ``_create_fp32_partitions`` clones too (its alias needs ``tensor.device == self.device``, a
  torch.device against the string "cuda:N": never equal), ``_prepare_fp32_grad_for_sub_group`` flattens the
  sub-group's bf16 gradients (a copy) and ``.to(bf16)`` returns that copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from core.breakdown import StepPhase, Term
from core.cli.app import build_parser
from core.cli.plans import plan_from_args
from core.dtypes import Autocast
from core.errors import PlanError
from core.estimate import estimate
from core.files import planfile
from core.files.launch import Target, export
from core.files.launch.deepspeed import read_deepspeed
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import input_at
from core.parallel.state import ZERO3_STEP_FLAT_GRAD, ZERO_STEP_FP32_GRAD
from core.params import param_counts
from core.plan import Offload, Parallelism, Plan, Stack, Strategy
from core.presets import plan_for_model
from tests.core.planfile_compat import reload_and_without

MASTER, STATES = "parallel.bf16_master_weights", "parallel.bf16_optimizer_states"
SUB_GROUP = 1_000_000_000  # stage3 sub_group_size's default (zero/config.py)


def _plan(strategy: Strategy = Strategy.ZERO3, master: bool = False, states: bool = False, **par: object) -> Plan:
    # Llama 3.1 8B trained in full on 8 GPUs, DeepSpeed's bf16 engine (the preset's bf16 autocast).
    plan = plan_for_model("llama-3.1-8b").with_workload(micro_batch=1, seq_len=2048, grad_accum=1)
    plan = plan.on_gpus(8, strategy)
    assert plan.autocast is Autocast.BF16
    return plan.with_parallel(bf16_master_weights=master, bf16_optimizer_states=states, **par)


def _step_terms(plan: Plan) -> dict[str, Term]:
    step = next(ph for ph in estimate(plan).worst.phases if ph.kind is StepPhase.OPTIMIZER)
    return {t.label: t for b in step.buckets for t in b.terms}


@pytest.mark.parametrize("strategy", [Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3])
def test_the_master_and_adams_moments_are_bf16(strategy: Strategy) -> None:
    part = param_counts(_plan(strategy)).trainable / 8
    off, on = _step_terms(_plan(strategy)), _step_terms(_plan(strategy, master=True, states=True))
    assert off["float32 master partition"].bytes == pytest.approx(part * 4)
    assert "float32 master partition" not in on
    master = on["bf16 master partition"]
    assert master.bytes == pytest.approx(part * 2) and "× 2 B" in master.formula
    moments = sum(t.bytes for label, t in on.items() if "moment" in label)
    assert moments == pytest.approx(sum(t.bytes for label, t in off.items() if "moment" in label) / 2)
    assert moments == pytest.approx(part * 2 * 2)  # exp_avg and exp_avg_sq, 2 B each
    # No float32 copy of the gradient partition at the step: ``.to(bfloat16)`` of the bf16 gradient is itself.
    assert ZERO_STEP_FP32_GRAD in off and ZERO_STEP_FP32_GRAD not in on


def test_stage_3_still_flattens_the_sub_groups_bf16_gradients() -> None:
    on = _step_terms(_plan(master=True, states=True))
    assert on[ZERO3_STEP_FLAT_GRAD].bytes == pytest.approx(SUB_GROUP * 2)
    assert ZERO3_STEP_FLAT_GRAD not in _step_terms(_plan(Strategy.ZERO2, master=True, states=True))


def test_the_peak_falls_by_the_bytes_the_source_names() -> None:
    # ZeRO-3, 8 ranks: per parameter of the partition, master 4 -> 2 B and moments 8 -> 4 B; at the step the
    # sub-group's float32 gradient (4 B x 1e9) is gone. The step is this plan's peak both ways.
    off, on = _plan(), _plan(master=True, states=True)
    part = param_counts(off).trainable / 8
    step_off, step_on = (next(p for p in estimate(x).worst.phases if p.kind is StepPhase.OPTIMIZER) for x in (off, on))
    saved = part * (2 + 4) + min(part, SUB_GROUP) * 4
    assert step_off.allocated_bytes - step_on.allocated_bytes == pytest.approx(saved)


def test_offloaded_a_bf16_master_with_float32_states_moves_the_host_not_the_gpu() -> None:
    # ZeRO-3 loads the checkpoint once per node, so the offloaded state is the host's peak.
    off = _plan(offload=Offload.OPTIMIZER)
    master = _plan(master=True, offload=Offload.OPTIMIZER)
    both = _plan(master=True, states=True, offload=Offload.OPTIMIZER)
    assert estimate(master).peak_bytes == estimate(off).peak_bytes
    hosts = [{t.label: t.bytes for t in estimate(p).host.terms} for p in (off, master, both)]
    part = param_counts(off).trainable / 8
    assert hosts[0]["float32 master partition, pinned, × 8 ranks"] == pytest.approx(part * 4 * 8)
    assert hosts[1]["bf16 master partition, pinned, × 8 ranks"] == pytest.approx(part * 2 * 8)
    # CPU Adam's moments: float32 by default, bf16 with bf16_optimizer_states (engine.py: fp32_optimizer_states=False).
    moments = [sum(b for label, b in h.items() if "moment" in label) for h in hosts]
    assert moments == pytest.approx([part * 8 * 8, part * 8 * 8, part * 4 * 8])
    # The host gradient the CPU optimizer steps on, in the master dtype (one 1e9-element sub-group at stage 3).
    assert hosts[1]["bf16 gradient of the partition (master dtype), pinned, × 8 ranks"] == pytest.approx(
        min(part, SUB_GROUP) * 2 * 8
    )


def test_what_deepspeed_refuses_is_refused_with_its_rule() -> None:
    with pytest.raises(PlanError, match="requires bf16_master_weights_and_grads") as states_alone:
        _plan(states=True)
    assert states_alone.value.field == STATES
    with pytest.raises(PlanError, match="ZeRO-Offload with DeepSpeedCPUAdam") as master_alone:
        _plan(master=True)
    assert master_alone.value.field == MASTER
    assert _plan(master=True, offload=Offload.OPTIMIZER).parallel.bf16_master_weights
    # Not DeepSpeed: its keys are not read, nothing is refused or changed.
    fsdp = _plan(Strategy.FSDP, master=True)
    assert estimate(fsdp).peak_bytes == estimate(_plan(Strategy.FSDP)).peak_bytes


def test_it_matters_under_deepspeeds_bf16_engine_only() -> None:
    for name in (MASTER, STATES):
        matters = input_at(name).matters
        assert all(matters(_plan(s)) for s in (Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3))
        assert not matters(_plan(Strategy.FSDP)) and not matters(_plan(Strategy.DDP))
        assert not matters(_plan().with_changes(precision="fp16-mixed"))
        assert not matters(_plan(Strategy.ZERO1).with_changes(stack=Stack.MEGATRON))


def test_the_deepspeed_export_writes_the_keys_and_reads_them_back() -> None:
    out = export(_plan(master=True, states=True), Target.DEEPSPEED)
    section = json.loads(out.text)["bf16"]
    assert section == {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
    assert not {MASTER, STATES} & {u.field for u in out.unexpressed}
    found = read_deepspeed(json.loads(out.text))
    assert found[MASTER] is True and found[STATES] is True
    # Off: the keys are left out, DeepSpeed's default; a file without them reads off.
    assert json.loads(export(_plan(), Target.DEEPSPEED).text)["bf16"] == {"enabled": True}
    assert read_deepspeed({"bf16": {"enabled": True}})[MASTER] is False
    offloaded = json.loads(export(_plan(master=True, offload=Offload.OPTIMIZER), Target.DEEPSPEED).text)["bf16"]
    assert offloaded["bf16_master_weights_and_grads"] is True and offloaded["bf16_optimizer_states"] is False


def test_a_bf16_master_alone_is_not_written_without_the_offload_deepspeed_needs() -> None:
    # ZeRO-2 with parameter offload: the plan moves the optimizer (DeepSpeed offloads parameters only at stage 3), but
    # the DeepSpeed file cannot say so, and without offload_optimizer DeepSpeed refuses a bf16 master with float32
    # states (base_optimizer.py _configure_master_weights): the keys are left out and the setting listed.
    out = export(_plan(Strategy.ZERO2, master=True, offload=Offload.PARAMS), Target.DEEPSPEED)
    assert json.loads(out.text)["bf16"] == {"enabled": True}
    assert MASTER in {u.field for u in out.unexpressed}


def test_a_trainers_deepspeed_config_carries_them_and_other_targets_list_them() -> None:
    out = export(_plan(master=True, states=True), Target.TRL)
    bf16 = yaml.safe_load(out.text)["deepspeed"]["bf16"]
    assert bf16["bf16_master_weights_and_grads"] is True and bf16["bf16_optimizer_states"] is True
    assert not {MASTER, STATES} & {u.field for u in out.unexpressed}
    listed = {u.field: u.why for u in export(_plan(master=True, states=True), Target.ACCELERATE).unexpressed}
    assert MASTER in listed and listed[MASTER].strip()
    assert MASTER not in {u.field for u in export(_plan(), Target.ACCELERATE).unexpressed}


def test_the_run_config_importer_reads_the_bf16_section() -> None:
    out = export(_plan(master=True, states=True), Target.TRL)
    run = loads_run_config(out.text.encode(), "trl.yaml")
    assert run.settings.bf16_master_weights is True and run.settings.bf16_optimizer_states is True
    plan = plan_from_run(run, _plan())
    assert plan.parallel.bf16_master_weights and plan.parallel.bf16_optimizer_states
    plain = loads_run_config(export(_plan(), Target.TRL).text.encode(), "trl.yaml")
    assert plain.settings.bf16_master_weights is None  # not set: the plan's, DeepSpeed's default off


def test_plan_files_keep_them_and_older_files_read_them_off(tmp_path: Path) -> None:
    on = _plan(master=True, offload=Offload.OPTIMIZER)
    loaded, older = reload_and_without(on, tmp_path, "parallel", "bf16_master_weights")
    assert loaded.parallel.bf16_master_weights and not older.parallel.bf16_master_weights
    both = _plan(master=True, states=True)
    path = tmp_path / "both.json"
    planfile.save(both, path)
    assert planfile.load(path) == both
    _, plain = reload_and_without(_plan(), tmp_path, "parallel", "bf16_optimizer_states")
    assert not plain.parallel.bf16_optimizer_states


def test_the_command_line_sets_them() -> None:
    def given(*flags: str) -> tuple[bool, bool]:
        args = build_parser().parse_args(["estimate", "--model", "llama-3.1-8b", "--strategy", "zero3", *flags])
        par = plan_from_args(args).parallel
        return par.bf16_master_weights, par.bf16_optimizer_states

    assert given("--bf16-master-weights", "--bf16-optimizer-states") == (True, True)
    assert given() == (False, False)
    with pytest.raises(PlanError):
        given("--bf16-optimizer-states")


def test_one_option_moves_its_partner_where_deepspeed_takes_only_the_pair() -> None:
    def after(par: Parallelism, name: str, on: bool) -> tuple[bool, bool]:
        moved = par.with_bf16_option(name, on)
        return moved.bf16_master_weights, moved.bf16_optimizer_states

    gpu, host = _plan().parallel, _plan(offload=Offload.OPTIMIZER).parallel
    assert after(gpu, "bf16_master_weights", True) == (True, True)
    assert after(gpu, "bf16_optimizer_states", True) == (True, True)
    both = gpu.with_bf16_option("bf16_master_weights", True)
    assert after(both, "bf16_optimizer_states", False) == (False, False)
    assert after(both, "bf16_master_weights", False) == (False, False)
    assert after(host, "bf16_master_weights", True) == (True, False)
    master = host.with_bf16_option("bf16_master_weights", True)
    assert after(master, "bf16_optimizer_states", True) == (True, True)
    assert after(master.with_bf16_option("bf16_optimizer_states", True), "bf16_optimizer_states", False) == (
        True,
        False,
    )
