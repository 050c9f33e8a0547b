"""A DeepSpeed config's own ``optimizer`` section, read by every trainer importer (issue 22, branch h94cfg).

With the section the Trainer builds no optimizer of its own (huggingface/transformers 5.25.0
src/transformers/integrations/deepspeed.py ``deepspeed_optim_sched``: ``DummyOptim``), and DeepSpeed builds the
section's type: deepspeedai/DeepSpeed v0.18.3 deepspeed/runtime/engine.py ``_configure_basic_optimizer`` (lines
1533-1611; v0.18.9 lines 1649-1727 the same). Each test failed before: the importers read ``optim`` and left the
section unread.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.errors import PlanFileError
from core.files.launch import Target, export
from core.files.runconfig import ConfigKind, load_run_config, loads_run_config, plan_from_run
from core.plan import Offload, Optimizer, OptimizerImpl, Strategy
from core.presets import default_plan

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "runconfigs"
TRAINER = {"model_name_or_path": "meta-llama/Llama-3.2-3B", "optim": "adamw_torch_fused", "bf16": True}


def _read(deepspeed: dict[str, Any], **keys: Any) -> Any:
    return loads_run_config(json.dumps({**TRAINER, **keys, "deepspeed": deepspeed}).encode(), "args.json")


def _optimizer_fields(run: Any) -> list[str]:
    return [f.source for f in run.fields if f.setting == "optimizer"]


def test_transformers_own_zero3_config_builds_its_adamw(tmp_path: Path) -> None:
    # transformers 61c7ec94 tests/deepspeed/ds_config_zero3.json: "type": "AdamW", "weight_decay": 3e-7, ZeRO-3 with
    # offload_optimizer and offload_param on the cpu: DeepSpeedCPUAdam in AdamW mode (engine.py lines 1556-1564).
    shutil.copy(FIXTURES / "transformers_ds_config_zero3.json", tmp_path / "ds.json")
    args = tmp_path / "args.yaml"
    args.write_text("model_name_or_path: meta-llama/Llama-3.2-3B\noptim: sgd\nfp16: true\ndeepspeed: ds.json\n")
    run = load_run_config(args)
    assert run.kind is ConfigKind.HF
    assert run.settings.optimizer == "adamw"  # not optim's sgd: the Trainer hands DeepSpeed a DummyOptim
    assert run.settings.weight_decay == pytest.approx(3e-7)
    assert _optimizer_fields(run) == [
        "deepspeed → ds.json: optimizer.type AdamW (DeepSpeed builds DeepSpeedCPUAdam adamw_mode=True)"
    ]
    assert any(n.source.startswith("optim: not used") for n in run.notes)
    plan = plan_from_run(run, default_plan())
    assert plan.optimizer is Optimizer.ADAMW and plan.parallel.strategy is Strategy.ZERO3
    assert plan.parallel.offload is Offload.PARAMS


def test_adam_is_adamw_unless_adam_w_mode_is_false() -> None:
    # engine.py line 1545 pops adam_w_mode (default True, runtime/config.py line 93); line 1548: AdamW when the type is
    # adamw or the mode is on, so "Adam" alone is AdamW.
    offloaded = {"stage": 2, "offload_optimizer": {"device": "cpu"}}
    alone = _read({"zero_optimization": offloaded, "optimizer": {"type": "Adam", "params": {"lr": "auto"}}})
    assert alone.settings.optimizer == "adamw"
    l2 = _read({"zero_optimization": offloaded, "optimizer": {"type": "Adam", "params": {"adam_w_mode": False}}})
    assert l2.settings.optimizer == "adam"
    assert "DeepSpeedCPUAdam adamw_mode=False" in _optimizer_fields(l2)[0]
    assert plan_from_run(l2, default_plan()).optimizer is Optimizer.ADAM


def test_on_the_gpu_it_is_fused_adam_and_torch_adam_is_torch() -> None:
    # Without offload_optimizer (engine.py lines 1565-1572) FusedAdam: one multi-tensor kernel, the plan's fused step,
    # weight_decay 0.0 by default (deepspeed v0.18.3 ops/adam/fused_adam.py). torch_adam (lines 1550-1554):
    # torch.optim.AdamW with the section's params, torch's default step (foreach on CUDA), weight_decay 1e-2
    # (torch 2.13.0 torch/optim/adamw.py).
    fused = _read({"zero_optimization": {"stage": 1}, "optimizer": {"type": "AdamW", "params": {}}}, optim="sgd")
    assert (fused.settings.optimizer, fused.settings.optimizer_impl) == ("adamw", "fused")
    assert fused.settings.weight_decay == 0.0
    torch = _read({"zero_optimization": {"stage": 1}, "optimizer": {"type": "AdamW", "params": {"torch_adam": True}}})
    assert (torch.settings.optimizer, torch.settings.optimizer_impl) == ("adamw", "foreach")
    assert torch.settings.weight_decay == pytest.approx(0.01)
    # "auto" is TrainingArguments' weight_decay (transformers integrations/deepspeed.py trainer_config_process).
    auto = _read(
        {"zero_optimization": {"stage": 1}, "optimizer": {"type": "AdamW", "params": {"weight_decay": "auto"}}},
        weight_decay=0.1,
    )
    assert auto.settings.weight_decay == pytest.approx(0.1)


def test_other_types_deepspeed_builds() -> None:
    # engine.py lines 1574-1579 (Adagrad), 1605-1611 (Lion), the last branch getattr(torch.optim, name) (SGD).
    stage1 = {"stage": 1}
    assert _read({"zero_optimization": stage1, "optimizer": {"type": "Adagrad"}}).settings.optimizer == "adagrad"
    assert _read({"zero_optimization": stage1, "optimizer": {"type": "Lion"}}).settings.optimizer == "lion"
    sgd = _read({"zero_optimization": stage1, "optimizer": {"type": "SGD", "params": {"momentum": 0.9}}})
    assert (sgd.settings.optimizer, sgd.settings.optimizer_impl) == ("sgd-momentum", "foreach")


@pytest.mark.parametrize("kind", ["Lamb", "OneBitAdam", "ZeroOneAdam", "MuAdamW", "Adamax"])
def test_types_the_plan_cannot_express_are_listed(kind: str) -> None:
    # runtime/config.py lines 70-86: DeepSpeed's own names; Adamax is a torch.optim class the plan does not model.
    run = _read({"zero_optimization": {"stage": 1}, "optimizer": {"type": kind}})
    assert any(f"optimizer.type = {kind!r}" in item for item in run.unknown)
    assert run.settings.optimizer == "adamw"  # optim's, listed beside it: the plan keeps a choice it can price


def test_adafactor_beside_a_section_is_one_line() -> None:
    # integrations/deepspeed.py deepspeed_optim_sched raises "--adafactor was passed, but also found `optimizer`".
    with pytest.raises(PlanFileError) as refused:
        _read({"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW"}}, adafactor=True)
    assert "adafactor" in str(refused.value) and "\n" not in str(refused.value)


def test_galore_settings_of_an_unused_optim_are_dropped() -> None:
    run = _read(
        {"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW"}},
        optim="galore_adamw_layerwise",
        optim_target_modules="all-linear",
        optim_args="rank=64",
    )
    assert run.settings.optimizer == "adamw"
    assert run.settings.galore_rank is None and run.settings.optimizer_in_backward is None


def test_axolotl_and_llamafactory_read_the_section() -> None:
    # Both hand `deepspeed` to TrainingArguments (axolotl 067b021 core/builders/causal.py; LLaMA-Factory 0.9.4
    # hparams/training_args.py), so the Trainer's DummyOptim rule is theirs.
    section = {
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
        "optimizer": {"type": "Adam", "params": {"adam_w_mode": False}},
    }
    axolotl = json.dumps({"base_model": "x", "micro_batch_size": 1, "optimizer": "adamw_torch", "deepspeed": section})
    run = loads_run_config(axolotl.encode(), "a.json")
    assert run.kind is ConfigKind.AXOLOTL and run.settings.optimizer == "adam"
    factory = json.dumps({"finetuning_type": "lora", "deepspeed": section})
    run = loads_run_config(factory.encode(), "f.json")
    assert run.kind is ConfigKind.LLAMA_FACTORY and run.settings.optimizer == "adam"


def test_llamafactory_v1_lists_a_section(tmp_path: Path) -> None:
    # v1 passes its own torch optimizer to accelerate (core/base_trainer.py lines 112-116), whose _prepare_deepspeed
    # refuses it beside a section (huggingface/accelerate 16cb6eb8 src/accelerate/accelerator.py line 2246).
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW"}}))
    config = tmp_path / "v1.yaml"
    config.write_text("model: Qwen/Qwen3-0.6B\ndist_config:\n  name: deepspeed\n  config_file: ds.json\n")
    run = load_run_config(config)
    assert any("You cannot specify an optimizer" in item for item in run.unknown)


@pytest.mark.parametrize("target", [Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY])
def test_a_zero_offload_adam_plan_round_trips(target: Target) -> None:
    # core/files/launch/deepspeed.py writes "Adam" with adam_w_mode false under ZeRO-Offload; the trainer exports listed
    # method.optimizer as not expressed (their optim has no Adam) and read back AdamW from optim.
    base = default_plan()
    plan = base.with_changes(
        optimizer=Optimizer.ADAM,
        parallel=replace(base.parallel, strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER, gpus_per_node=2),
    )
    written = export(plan, target)
    assert "method.optimizer" not in {item.field for item in written.unexpressed}
    run = loads_run_config(written.text.encode(), "exported.yaml")
    assert run.settings.optimizer == "adam"
    assert plan_from_run(run, base).optimizer is Optimizer.ADAM
    assert plan_from_run(run, base).optimizer_impl is OptimizerImpl(plan.optimizer_impl)


def test_the_config_alone_names_its_optimizer_among_the_matching_options() -> None:
    # Opened on its own it is refused as a launcher config (core/files/runconfig/launchers.py); the options it now
    # names take the section's AdamW and weight decay (transformers 61c7ec94 tests/deepspeed/ds_config_zero3.json).
    with pytest.raises(PlanFileError) as refused:
        load_run_config(FIXTURES / "transformers_ds_config_zero3.json")
    message = str(refused.value)
    assert "optimizer AdamW" in message
    assert message.endswith("--strategy zero3 --offload params --optimizer adamw --weight-decay 3e-07")


def test_an_unused_optim_the_plan_cannot_price_is_not_listed() -> None:
    # adamw_anyprecision is listed on its own (core/files/runconfig/mapping.py HF_ANYPRECISION_WHY); beside a section
    # the Trainer builds a DummyOptim instead (deepspeed_optim_sched), so nothing of optim's reaches the run.
    section = {"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW"}}
    alone = loads_run_config(json.dumps({"base_model": "x", "optimizer": "adamw_anyprecision"}).encode(), "a.json")
    assert any(item.startswith("optimizer = ") for item in alone.unknown)
    beside = json.dumps({"base_model": "x", "optimizer": "adamw_anyprecision", "deepspeed": section})
    run = loads_run_config(beside.encode(), "a.json")
    assert run.settings.optimizer == "adamw" and run.unknown == ()
