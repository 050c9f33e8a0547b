"""Which optimizers each training stack builds (core.optimizer_stacks, one table): the Plan's check, the command line,
the Megatron-Bridge and torchtitan importers and the DeepSpeed / Megatron-Bridge / transformers exports.

Sources, read for branch h63stack (the table's module docstring quotes the lines):
- NVIDIA/Megatron-LM d98e8a64 megatron/core/optimizer/__init__.py ``_get_megatron_optimizer_based_on_param_groups``:
  'adam' (``decoupled_weight_decay`` True by default: AdamW), 'sgd' (``sgd_momentum`` 0.9), 'lion'; anything else
  raises; ``optimizer_cpu_offload`` (HybridDeviceOptimizer) Adam in AdamW mode or SGD.
- deepspeedai/DeepSpeed edaa7221 runtime/engine.py: ZeRO-Offload builds DeepSpeedCPUAdam / DeepSpeedCPUAdagrad /
  DeepSpeedCPULion from the ds config's optimizer type; a client optimizer raises ZeRORuntimeException (2040-2044).
  huggingface/accelerate 16cb6eb8 utils/deepspeed.py map_pytorch_optim_to_deepspeed swaps any other client optimizer
  for DeepSpeedCPUAdam under offload (AdamW / Adam / Adagrad / bitsandbytes' 32-bit Lion keep their CPU kernel).
  Without offload ZeRO takes any client optimizer and hands it its flat float32 partitions: stages 1-2
  zero/stage_1_and_2.py line 516 ``param_group['params'] = [self.single_partition_of_fp32_groups[i]]``, stage 3
  zero/stage3.py lines 3137-3141 ``_set_fp32_optimizer_param_groups``.
- pytorch/torchtitan b5bcd76c torchtitan/components/optimizer/optimizer.py ``_resolve_optimizer_factory``: Adam,
  AdamW, DistMuon; any other name raises NotImplementedError.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config
from core.inputs import OPTIMIZER_LABELS
from core.optimizer_stacks import BUILT, OptimizerStack, built_labels, optimizer_refusal, optimizer_stack
from core.plan import Method, Offload, Optimizer, OptimizerImpl, Plan, Preset, Stack, Strategy
from core.presets import default_plan

# Refused by checks of their own before the stack's (Plan._check_muon, Plan._check_lora_fa, Plan._check_ao_zero).
OWN_CHECKS = (
    Optimizer.MUON,
    Optimizer.LORA_FA,
    Optimizer.AO_ADAMW_8BIT,
    Optimizer.AO_ADAMW_4BIT,
    Optimizer.AO_ADAMW_FP8,
)
DATA = Path(__file__).resolve().parents[1] / "data" / "runconfigs"
OFFLOADED_BY_DEEPSPEED = {Optimizer.ADAMW, Optimizer.ADAM, Optimizer.ADAGRAD, Optimizer.LION}  # engine.py 2095-2175


def _plan(optimizer: Optimizer, stack: Stack = Stack.EAGER) -> Plan:
    """Llama 3.2 1B full fine-tuning, pure bf16 (no float32 master beside the state), foreach."""
    adam = (Optimizer.ADAMW, Optimizer.ADAM)  # Megatron's is FusedAdam (its export writes fused)
    impl = OptimizerImpl.FUSED if stack is Stack.MEGATRON and optimizer in adam else OptimizerImpl.FOREACH
    return default_plan().with_changes(
        model=find_model("llama-3.2-1b").spec,
        model_id="llama-3.2-1b",
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        optimizer=optimizer,
        optimizer_impl=impl,
        stack=stack,
    )


def _megatron_offloaded(optimizer: Optimizer) -> Plan:
    """The plan on the Megatron stack with its distributed optimizer (ZeRO-1) and its CPU offload, set at once."""
    base = _plan(Optimizer.ADAMW, Stack.MEGATRON)
    par = replace(base.parallel, gpus_per_node=8, strategy=Strategy.ZERO1, offload=Offload.OPTIMIZER)
    impl = OptimizerImpl.FOREACH if optimizer is Optimizer.RMSPROP else base.optimizer_impl
    return base.with_changes(parallel=par, optimizer=optimizer, optimizer_impl=impl)


def _sharded(plan: Plan, strategy: Strategy, offload: Offload = Offload.NONE) -> Plan:
    return plan.with_parallel(gpus_per_node=8, strategy=strategy, offload=offload)


# ---- the Plan's check --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", [o for o in Optimizer if o not in OWN_CHECKS])
def test_megatron_builds_adam_sgd_and_lion_and_refuses_the_rest_with_its_rule(optimizer: Optimizer) -> None:
    """Fails before h63stack: the Megatron stack took any optimizer (Adafactor, bitsandbytes', schedule-free...)
    though Megatron-Core raises "optimizer is not supported" for them."""
    if optimizer in BUILT[OptimizerStack.MEGATRON]:
        assert _plan(optimizer, Stack.MEGATRON).optimizer is optimizer
        return
    with pytest.raises(PlanError) as caught:
        _plan(optimizer, Stack.MEGATRON)
    text = str(caught.value)
    assert caught.value.field == "optimizer" and "Megatron-Core builds OptimizerConfig.optimizer 'adam'" in text
    assert f"It builds {built_labels(OptimizerStack.MEGATRON)}" in text and "DeepSpeed" not in text


def test_megatrons_distributed_optimizer_offload_speaks_megatrons_rule_not_deepspeeds() -> None:
    """Fails before h63stack: ZeRO-1 on the Megatron stack (its distributed optimizer) with its CPU offload refused
    RMSprop in DeepSpeed's words (DeepSpeedCPUAdam) and took Lion and Adam's L2, which HybridDeviceOptimizer does
    not run (it asserts decoupled_weight_decay; Adam or SGD only)."""
    for optimizer in (Optimizer.RMSPROP, Optimizer.LION, Optimizer.ADAM):
        with pytest.raises(PlanError) as caught:
            _megatron_offloaded(optimizer)
        text = str(caught.value)
        assert caught.value.field == "parallel.offload" and "HybridDeviceOptimizer" in text, optimizer
        assert "DeepSpeed" not in text and "It builds AdamW, SGD + momentum, SGD" in text
    for optimizer in (Optimizer.ADAMW, Optimizer.SGD_MOMENTUM, Optimizer.SGD):
        assert _megatron_offloaded(optimizer).parallel.offload is Offload.OPTIMIZER


@pytest.mark.parametrize("strategy", [Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3])
def test_zero_offload_builds_deepspeeds_cpu_adam_adagrad_and_lion_only(strategy: Strategy) -> None:
    """Fails before h63stack: bitsandbytes' 8-bit AdamW, SGD or Adafactor under ZeRO-Offload were planned (DeepSpeed
    raises ZeRORuntimeException for a client optimizer there) and Adagrad was refused (DeepSpeedCPUAdagrad)."""
    for optimizer in OFFLOADED_BY_DEEPSPEED:
        assert _sharded(_plan(optimizer), strategy, Offload.OPTIMIZER).optimizer is optimizer
    for optimizer in (Optimizer.ADAMW_8BIT, Optimizer.SGD_MOMENTUM, Optimizer.ADAFACTOR, Optimizer.LION_8BIT):
        with pytest.raises(PlanError) as caught:
            _sharded(_plan(optimizer), strategy, Offload.OPTIMIZER)
        text = str(caught.value)
        assert caught.value.field == "parallel.offload" and "ZeRORuntimeException" in text, optimizer
        # accelerate (and the HF Trainer) would run DeepSpeedCPUAdam in its place: the chosen state is not planned
        assert "map_pytorch_optim_to_deepspeed" in text
        assert f"It builds {built_labels(OptimizerStack.ZERO_OFFLOAD)}" in text
        assert _sharded(_plan(optimizer), strategy).optimizer is optimizer  # without the offload: ZeRO's client


@pytest.mark.parametrize("strategy", [Strategy.ZERO1, Strategy.ZERO3])
@pytest.mark.parametrize(
    "optimizer", [Optimizer.ADAGRAD, Optimizer.RMSPROP, Optimizer.ADEMAMIX, Optimizer.SCHEDULE_FREE_ADAMW]
)
def test_zero_without_offload_shards_any_client_optimizers_state(optimizer: Optimizer, strategy: Strategy) -> None:
    """ZeRO hands a client optimizer its flat float32 partitions (stage_1_and_2.py line 516; stage3.py lines
    3137-3141), so a torch or bitsandbytes optimizer's state (with ZeRO's float32 master) is one eighth on each of
    8 ranks of what one rank holds, as planned."""
    one = estimate(_plan(optimizer).with_parallel(strategy=strategy)).bucket(BucketKey.OPTIMIZER).bytes
    shard = estimate(_sharded(_plan(optimizer), strategy)).bucket(BucketKey.OPTIMIZER).bytes
    assert one > 0 and shard == pytest.approx(one / 8, rel=0.01)  # padding to 2 × DP elements at most


def test_the_table_is_the_one_rule() -> None:
    assert optimizer_stack(Stack.MEGATRON, Strategy.ZERO1, Offload.NONE) is OptimizerStack.MEGATRON
    assert optimizer_stack(Stack.EAGER, Strategy.ZERO3, Offload.PARAMS) is OptimizerStack.ZERO_OFFLOAD
    assert optimizer_stack(Stack.COMPILE, Strategy.FSDP, Offload.OPTIMIZER) is OptimizerStack.PYTORCH  # FSDP2's own
    assert optimizer_refusal(Optimizer.ADAFACTOR, OptimizerStack.PYTORCH) == ""
    assert OPTIMIZER_LABELS[Optimizer.ADAFACTOR] in optimizer_refusal(Optimizer.ADAFACTOR, OptimizerStack.MEGATRON)


# ---- the command line --------------------------------------------------------------------------------------------
def test_the_command_line_lists_the_table_and_refuses_with_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimizers", "--json"]) == 0
    rows = {row["stack"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["megatron"]["builds"] == ["adamw", "sgd-momentum", "sgd", "adam", "lion"]
    assert set(rows["zero-offload"]["builds"]) == {o.value for o in OFFLOADED_BY_DEEPSPEED}
    assert main(["estimate", "--model", "llama-3.2-1b", "--stack", "megatron", "--optimizer", "adafactor"]) != 0
    assert "Megatron-Core builds" in capsys.readouterr().err


# ---- the importers -----------------------------------------------------------------------------------------------
def _megatron(optimizer: dict[str, object]) -> object:
    document = {"optimizer": optimizer, "train": {"micro_batch_size": 1}}
    return loads_run_config(yaml.safe_dump(document).encode(), "run_config.yaml")


def test_a_megatron_config_with_an_optimizer_megatron_does_not_build_is_refused() -> None:
    """Fails before h63stack: 'adamw' (not a Megatron-Core name: it raises) was listed as not modelled, and
    'lion', Adam's L2 and plain SGD were read as nothing, AdamW and SGD with momentum."""
    with pytest.raises(PlanFileError, match="adam, sgd or lion .Megatron-Core builds"):
        _megatron({"optimizer": "adamw"})
    cases = [
        ({"optimizer": "lion"}, "lion"),
        ({"optimizer": "adam", "decoupled_weight_decay": False}, "adam"),
        ({"optimizer": "adam"}, "adamw"),
        ({"optimizer": "sgd", "sgd_momentum": 0.0}, "sgd"),
        ({"optimizer": "sgd"}, "sgd-momentum"),
    ]
    for section, expected in cases:
        assert _megatron(section).settings.optimizer == expected, section  # type: ignore[attr-defined]
    muon = _megatron({"optimizer": "muon"})
    assert muon.settings.optimizer is None and any("not planned" in u for u in muon.unknown)  # type: ignore[attr-defined]


def test_a_torchtitan_config_with_an_optimizer_torchtitan_does_not_build_is_refused() -> None:
    """Fails before h63stack: "SGD" was listed as not modelled; torchtitan raises NotImplementedError for it."""
    text = (DATA / "torchtitan_llama3_8b.toml").read_text()  # torchtitan's own llama3_8b.toml (SOURCES.md)
    assert 'name = "AdamW"' in text
    with pytest.raises(PlanFileError, match="Adam or AdamW .torchtitan builds"):
        loads_run_config(text.replace('name = "AdamW"', 'name = "SGD"', 1).encode(), "job.toml")
    muon = loads_run_config(text.replace('name = "AdamW"', 'name = "DistMuon"', 1).encode(), "job.toml")
    assert any("not planned" in u for u in muon.unknown)


# ---- the exports -------------------------------------------------------------------------------------------------
def test_the_megatron_export_writes_the_optimizer_megatron_builds() -> None:
    def section(plan: Plan) -> dict[str, object]:
        return yaml.safe_load(export(plan, Target.MEGATRON_BRIDGE).text)["optimizer"]

    assert section(_plan(Optimizer.ADAM, Stack.MEGATRON))["decoupled_weight_decay"] is False
    assert section(_plan(Optimizer.SGD, Stack.MEGATRON))["sgd_momentum"] == 0.0
    assert section(_plan(Optimizer.LION, Stack.MEGATRON))["optimizer"] == "lion"
    offloaded = export(_sharded(_plan(Optimizer.LION), Strategy.FSDP, Offload.OPTIMIZER), Target.MEGATRON_BRIDGE)
    assert any("HybridDeviceOptimizer" in u.why for u in offloaded.unexpressed)  # Lion there: not Megatron's


def test_the_deepspeed_exports_name_deepspeeds_cpu_optimizer_under_offload() -> None:
    """Fails before h63stack: the file had no optimizer section, so the trainer's client optimizer met ZeRO-Offload
    and DeepSpeed raised ZeRORuntimeException (engine.py lines 2040-2044)."""
    plan = _sharded(_plan(Optimizer.ADAGRAD), Strategy.ZERO2, Offload.OPTIMIZER)
    standalone = json.loads(export(plan, Target.DEEPSPEED).text)
    assert standalone["optimizer"] == {"type": "Adagrad", "params": {"weight_decay": 0.0}}
    adam = json.loads(export(_sharded(_plan(Optimizer.ADAM), Strategy.ZERO3, Offload.OPTIMIZER), Target.DEEPSPEED).text)
    assert adam["optimizer"]["params"]["adam_w_mode"] is False  # engine.py line 2100: "Adam" alone is AdamW
    inline = json.loads(export(plan, Target.TRL).text)["deepspeed"]
    assert inline["optimizer"] == {"type": "Adagrad", "params": {"lr": "auto", "weight_decay": "auto"}}
    client = json.loads(export(_sharded(_plan(Optimizer.ADAGRAD), Strategy.ZERO2), Target.DEEPSPEED).text)
    assert "optimizer" not in client  # without offload the trainer's own optimizer is ZeRO's client


def test_the_torchtitan_export_names_torchtitans_rule() -> None:
    exported = export(_plan(Optimizer.LION), Target.TORCHTITAN)
    assert tomllib.loads(exported.text)["optimizer"]["name"] == "AdamW"
    assert any("_resolve_optimizer_factory" in u.why for u in exported.unexpressed)
