"""The launch exports as the real tools accepted them, replayed with no tool installed.

tests/data/launch_acceptance.json is what tools/measure/export_check.py recorded: each plan of
tools/measure/export_plans.py exported to each target and handed to the tool's own parser at a pinned release
(versions in each record; docs/CONFIGS.md, "Launch exports checked by the tools' own parsers"). Here every key or
flag an export writes today must be one the tool accepted in that recording, so a key written later fails until the
check is re-run; and the fixes the check led to are pinned on the text.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from core.files.launch import Target, export
from core.files.launch.deepspeed import read_deepspeed
from core.files.runconfig import loads_run_config, plan_from_run
from core.inputs import Float8
from core.plan import Optimizer
from tests.core.test_launch_roundtrip import launch_plans
from tools.measure.export_plans import document, keys_of, named_plans, with_layout

RECORDING = Path(__file__).resolve().parents[1] / "data" / "launch_acceptance.json"
RERUN = (
    "re-run tools/measure/export_check.py with the tool installed (docs/CONFIGS.md, 'Launch exports checked by the "
    "tools' own parsers') and commit tests/data/launch_acceptance.json"
)


def _recording() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDING.read_text())
    return data


def _accepted() -> dict[Target, tuple[set[str], str]]:
    found: dict[Target, set[str]] = defaultdict(set)
    tools: dict[Target, str] = {}
    for record in _recording()["records"]:
        if record["accepted"]:
            target = Target(record["target"])
            found[target].update(record["keys"])
            tools[target] = f"{record['tool']} {record['version']}"
    return {target: (keys, tools[target]) for target, keys in found.items()}


ACCEPTED = _accepted()


def _unchecked(target: Target, text: str) -> set[str]:
    keys, _ = ACCEPTED[target]
    return set(keys_of(target, text)) - keys


def test_the_recording_holds_every_target_a_tool_parser_checks_and_no_refusal() -> None:
    # The eleven targets whose tools' parsers run on CPU (Megatron-Bridge, llama.cpp and Ollama are not checked:
    # docs/CONFIGS.md says why).
    checked = {
        Target.TORCHTITAN,
        Target.TRL,
        Target.ACCELERATE,
        Target.ACCELERATE_LAUNCH,
        Target.DEEPSPEED,
        Target.TORCHRUN,
        Target.AXOLOTL,
        Target.LLAMA_FACTORY,
        Target.TORCHTUNE,
        Target.VLLM,
        Target.SGLANG,
    }
    assert set(ACCEPTED) == checked
    refused = [(r["target"], r["plan"], r["error"]) for r in _recording()["records"] if not r["accepted"]]
    assert refused == [], f"a tool refused these exports: {refused}; fix the exporter, then {RERUN}"


def test_the_newer_checkers_refused_an_unknown_key() -> None:
    # The negative control export_check.py runs for each checker in its CONTROLS: an accepted export with one key
    # added must be refused, or the checker checks nothing. torchtitan 0.2.2 config/manager.py _dict_to_dataclass:
    # "Invalid field names in <class ...Training> data: {'frobnicate'}".
    # deepspeed 0.18.3: DeepSpeedConfig stores optimizer.params unread (runtime/config.py get_optimizer_params), so the
    # check builds the optimizer (export_check.py _deepspeed_optimizer) and DeepSpeedCPUAdam.__init__ refuses the key
    # (ops/adam/cpu_adam.py line 16: no **kwargs).
    controls = {c["target"]: c for c in _recording()["controls"]}
    assert set(controls) >= {Target.TORCHTITAN.value, Target.DEEPSPEED.value}
    for control in controls.values():
        assert control["refused"], f"{control['tool']} {control['version']} accepted {control['added']}: {RERUN}"
        assert control["added"].rsplit(".", 1)[-1] in control["error"]


def test_every_recorded_plan_still_writes_only_accepted_keys() -> None:
    plans = named_plans()
    for record in _recording()["records"]:
        target = Target(record["target"])
        plan, targets = plans[record["plan"]]
        assert target in targets
        new = _unchecked(target, export(plan, target).text)
        assert not new, (
            f"the {target.value} export of plan {record['plan']!r} writes {sorted(new)}, never accepted by "
            f"{ACCEPTED[target][1]} in {RECORDING.name}: {RERUN}"
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(launch_plans())
def test_any_plan_writes_only_keys_the_tools_accepted(plan: Any) -> None:
    for target in ACCEPTED:
        if target in (Target.VLLM, Target.SGLANG):
            continue  # serving exports: the named plans above (launch_plans draws training layouts)
        new = _unchecked(target, export(plan, target).text)
        tool = ACCEPTED[target][1]
        assert not new, f"the {target.value} export writes {sorted(new)}, never accepted by {tool}: {RERUN}"


# ---- the refusals the check found, fixed --------------------------------------------------------------------
def test_axolotl_writes_its_lora_kernels_off_so_dora_is_not_refused() -> None:
    plan, _ = named_plans()["dora-adamw8bit"]
    document = yaml.safe_load(export(plan, Target.AXOLOTL).text)
    # axolotl 0.12.2 utils/schemas/config.py:1076 check_auto_enable_lora_kernels turns the three on when unset (lora,
    # dropout 0); utils/schemas/validation.py:621 check_lora_kernels_dora then refuses them with peft_use_dora.
    assert document["peft_use_dora"] is True
    assert [document[k] for k in ("lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel")] == [False, False, False]
    read = loads_run_config(export(plan, Target.AXOLOTL).text.encode(), "run.yaml")
    assert not {"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel"} & set(read.unknown)


def test_axolotl_says_learning_rate_is_the_users_to_add() -> None:
    plan, _ = named_plans()["lora-attn"]
    # axolotl 0.12.2 utils/schemas/training.py:71 `learning_rate: str | float`, no default: required.
    assert "learning_rate" in export(plan, Target.AXOLOTL).text.splitlines()[0]


def test_axolotl_offloads_activations_only_with_checkpointing() -> None:
    plan, _ = named_plans()["fsdp1-shard-grad-op"]
    assert plan.activation_offload and not plan.checkpointing
    exported = export(plan, Target.AXOLOTL)
    # axolotl 0.12.2 utils/schemas/validation.py:1119 check_activation_offloading_wo_gc: "activation_offloading
    # requires gradient_checkpointing".
    assert yaml.safe_load(exported.text)["activation_offloading"] is False
    assert exported.cannot("method.activation_offload")


def test_llamafactory_writes_bf16_not_pure_bf16_under_zero3() -> None:
    plan, _ = named_plans()["zero3-bf16-master"]
    exported = export(plan, Target.LLAMA_FACTORY)
    document = yaml.safe_load(exported.text)
    # LLaMA-Factory v0.9.4 src/llamafactory/hparams/parser.py:331: "`pure_bf16` is incompatible with DeepSpeed ZeRO-3".
    assert "pure_bf16" not in document and document["bf16"] is True
    # bf16 there is DeepSpeed's bf16 engine, another plan (its bf16 master-weight options count): the pure-bf16
    # setting is listed as not expressed. Found by test_launch_roundtrip's hypothesis run in CI (stop 70).
    assert exported.cannot("method.autocast")
    single, _ = named_plans()["full-adafactor-flash"]  # pure bf16 on one GPU keeps pure_bf16
    assert yaml.safe_load(export(single, Target.LLAMA_FACTORY).text)["pure_bf16"] is True


ZERO_OFFLOAD_ADAM = ("zero1-offload-adam", "zero2-offload-adam", "zero3-offload-adam", "zero3-offload-params-adam")
INLINE_DEEPSPEED = (Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY)


@pytest.mark.parametrize("name", ZERO_OFFLOAD_ADAM)
def test_zero_offload_adam_is_deepspeeds_adam_with_adam_w_mode_off(name: str) -> None:
    plan, _ = named_plans()[name]
    assert plan.optimizer is Optimizer.ADAM
    # deepspeed 0.18.3 runtime/engine.py line 1545 pops adam_w_mode (default True, runtime/config.py line 93) and line
    # 1548 builds AdamW when the type is AdamW *or* adam_w_mode: type "Adam" alone is AdamW. Lines 1556-1564 build
    # DeepSpeedCPUAdam(adamw_mode=False) under offload, Adam's L2 decay (0.16.9: lines 1440-1455, the same rule).
    written = json.loads(export(plan, Target.DEEPSPEED).text)["optimizer"]
    assert written == {"type": "Adam", "params": {"weight_decay": 0.01, "adam_w_mode": False}}  # export_plans: 0.01
    # Inside a trainer's config lr and weight decay are "auto": transformers 5.25.0 integrations/deepspeed.py lines 165
    # and 172 fill them from TrainingArguments; adam_w_mode is passed on as written.
    for target in INLINE_DEEPSPEED:
        inline = document(target, export(plan, target).text)["deepspeed"]["optimizer"]
        assert inline == {"type": "Adam", "params": {"lr": "auto", "weight_decay": "auto", "adam_w_mode": False}}
    # Read back (core/files/launch/deepspeed.py _read_optimizer): Adam, not AdamW.
    assert read_deepspeed(json.loads(export(plan, Target.DEEPSPEED).text))["method.optimizer"] is Optimizer.ADAM


def test_zero_offload_adam_was_built_by_deepspeed_for_every_trainer() -> None:
    # tools/measure/export_check.py _deepspeed_optimizer: the section built by DeepSpeed's own
    # _configure_basic_optimizer (0.18.3 for trl and the standalone file, 0.16.9 under LLaMA-Factory and axolotl).
    records = {(r["plan"], r["target"]): r for r in _recording()["records"]}
    for name in ZERO_OFFLOAD_ADAM:
        for target in (Target.DEEPSPEED, *INLINE_DEEPSPEED):
            record = records[(name, target.value)]
            key = (
                "optimizer.params.adam_w_mode"
                if target is Target.DEEPSPEED
                else "deepspeed.optimizer.params.adam_w_mode"
            )
            assert record["accepted"] and key in record["keys"], (name, target.value)
    adamw, _ = named_plans()["zero3-offload-adamw-decay"]
    section = json.loads(export(adamw, Target.DEEPSPEED).text)["optimizer"]
    # export_plans: weight decay 0.1; AdamW needs no mode (engine.py line 1548).
    assert section == {"type": "AdamW", "params": {"weight_decay": 0.1}}


@pytest.mark.parametrize("target", [Target.TORCHRUN, Target.ACCELERATE_LAUNCH])
def test_multi_node_commands_leave_the_node_rank_to_the_shell(target: Target) -> None:
    plan, _ = named_plans()["fsdp-2node-offload"]
    # torch 2.13.0 torch/distributed/run.py --node-rank is an int: the export's $NODE_RANK / $MACHINE_RANK is the
    # shell's to expand (export_check.py SHELL_VALUES puts in node 0's).
    assert "_RANK" in export(plan, target).text


# ---- torchtitan 0.2.2: what its start-up refused (tools/measure/export_check.py _titan_startup), fixed -----------
def _titan(name: str) -> tuple[dict[str, Any], Any]:
    plan, _ = named_plans()[name]
    exported = export(plan, Target.TORCHTITAN)
    return tomllib.loads(exported.text), exported


def test_torchtitan_writes_tensorwise_float8_without_a_recipe_name() -> None:
    document, exported = _titan("titan-float8-allgather")
    # torchtitan 0.2.2 components/quantization/float8.py:65-69: "using `float8_config.enable_fsdp_float8_all_gather`
    # together with `float8_config.recipe_name` is not supported"; tensorwise is recipe_name unset (:79-95).
    assert document["quantize"]["linear"]["float8"] == {"enable_fsdp_float8_all_gather": True}
    assert not exported.cannot("method.float8") and not exported.cannot("parallel.fsdp_float8_all_gather")
    rowwise, _ = _titan("titan-float8-rowwise")
    assert rowwise["quantize"]["linear"]["float8"] == {"recipe_name": "rowwise"}
    # The importer reads the name unset as tensorwise (core/files/runconfig/torchtitan.py FLOAT8_RECIPES).
    plan, _ = named_plans()["titan-float8-allgather"]
    assert plan_from_run(loads_run_config(exported.text.encode(), "job.toml"), plan).float8 is Float8.TENSORWISE


def test_torchtitan_mxfp8_with_tensor_parallel_leaves_the_model_uncompiled() -> None:
    document, exported = _titan("titan-mxfp8-tp2-compile")
    # torchtitan 0.2.2 components/quantization/mx.py:50-52: "TP not yet supported with torch.compile for mxfp8".
    assert document["compile"] == {"enable": True, "components": ["loss"]}
    assert exported.cannot("method.stack")


def test_torchtitan_async_tp_only_on_the_compiled_model_and_ddp_only_alone() -> None:
    document, exported = _titan("titan-ddp-tp2-async")
    # torchtitan 0.2.2 distributed/tensor_parallel.py:20-23: "Async TP requires 'model' in --compile.components and
    # --compile.enable"; models/llama3/infra/parallelize.py:149-151: "DDP has not supported > 1D parallelism".
    assert document["parallelism"]["enable_async_tensor_parallel"] is False
    parallelism = document["parallelism"]
    assert (parallelism["data_parallel_replicate_degree"], parallelism["data_parallel_shard_degree"]) == (1, -1)
    assert exported.cannot("parallel.tp_overlap") and exported.cannot("parallel.strategy")
    compiled, _ = _titan("tp2-fsdp")  # the compiled model keeps it
    assert compiled["parallelism"]["tensor_parallel_degree"] == 2 and compiled["compile"]["enable"] is True


def test_torchtitan_sequence_length_is_a_multiple_of_tp_times_two_cp() -> None:
    document, exported = _titan("titan-odd-seq-tp2")
    # torchtitan 0.2.2 models/llama3/infra/parallelize.py:69 asserts seq_len % seq_len_divisor == 0, and
    # distributed/parallel_dims.py:372 seq_len_divisor = tp * (cp * 2): 2 × 2 × 1 = 4 here; 1001 → 1000 (below, so the
    # run holds no more than the plan).
    assert document["training"]["seq_len"] == 1000
    assert exported.cannot("workload.seq_len")
    even, _ = _titan("full-1gpu-bf16")
    assert even["training"]["seq_len"] == 2048  # export_plans: Workload(seq_len=2048), a multiple of 2


# ---- Megatron-Bridge: its override path (run_recipe.py → omegaconf_utils.process_config_with_overrides, Hydra's
# struct mode) read at NVIDIA-NeMo/Megatron-Bridge v0.6.0 and run at 067f987d (docs/CONFIGS.md says how far) -------
def _megatron(plan: Any) -> tuple[dict[str, Any], list[str]]:
    text = export(plan, Target.MEGATRON_BRIDGE).text
    launch = next(line[2:] for line in text.splitlines() if line.startswith("# torchrun "))
    return yaml.safe_load(text), launch.split()


def test_megatron_bridge_writes_comm_overlap_whole_and_only_when_on() -> None:
    plan, _ = named_plans()["tp2-pp2-megatron"]
    document, words = _megatron(plan)
    # The recipes leave comm_overlap None (v0.6.0 src/megatron/bridge/recipes/common.py lines 128, 228, 327); with the
    # struct config of omegaconf_utils.py:180 hydra-core 1.3.2 refuses comm_overlap.tp_comm_overlap=false ("Could not
    # override 'comm_overlap.tp_comm_overlap'", run at 067f987d and on hydra alone). Off is None: nothing written.
    assert "comm_overlap" not in document and not any(w.startswith("comm_overlap") for w in words)
    on = with_layout(plan, tp_overlap=True)
    document, words = _megatron(on)
    target = "megatron.bridge.training.comm_overlap.CommOverlapConfig"  # v0.6.0 training/comm_overlap.py:377
    assert document["comm_overlap"] == {"_target_": target, "tp_comm_overlap": True}
    # Hydra's dict syntax, which _apply_overrides instantiates through its _target_ (accepted by hydra-core 1.3.2).
    assert f"comm_overlap={{_target_:{target},tp_comm_overlap:true}}" in " ".join(words).replace("'", "")
    read = loads_run_config(export(on, Target.MEGATRON_BRIDGE).text.encode(), "overrides.yaml")
    assert plan_from_run(read, plan).parallel.tp_overlap and "comm_overlap._target_" not in read.unknown


def test_megatron_bridge_command_leaves_the_adapter_to_the_file() -> None:
    plan, _ = named_plans()["lora-attn"]
    document, words = _megatron(plan)
    # The recipe's PEFT object is callable (v0.6.0 peft/base.py:84 __call__): omegaconf_utils.py:215
    # _is_omegaconf_problematic leaves it out of the struct config, so Hydra refuses peft.dim=16 ("Could not override
    # 'peft.dim'", run at 067f987d). The command runs the recipe's adapter (--mode lora); the file carries the plan's.
    assert not any(word.startswith("peft") for word in words) and words[words.index("--mode") + 1] == "lora"
    assert (document["peft"]["dim"], document["peft"]["alpha"]) == (16, 32)  # export_plans._lora(16): alpha 2 × rank
    assert "--config-file only" in export(plan, Target.MEGATRON_BRIDGE).text.splitlines()[3]
