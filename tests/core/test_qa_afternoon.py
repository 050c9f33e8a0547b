"""Defects a user's afternoon with the command line and the config importers found (branch h87qa).

Each test failed before its fix. The ids in them are the catalogues' own (resources/gpus.json,
resources/models.json, resources/links.json); the configs are copied from public repositories,
each named with its commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.catalogue import find_gpu, find_link, find_model
from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.files.importer import import_model
from core.files.runconfig import ConfigKind, load_run_config


@pytest.mark.parametrize(
    ("find", "typed", "offered"),
    [
        # An id with a part left out, or a separator dropped: the catalogue's ids are offered.
        (find_gpu, "a100-80gb", "a100-80gb-sxm"),
        (find_gpu, "a100", "a100-80gb-sxm"),
        (find_gpu, "h100sxm", "h100-sxm"),
        (find_gpu, "4090", "rtx-4090"),
        (find_model, "llama3.1-8b", "llama-3.1-8b"),
        (find_model, "qwen3-30b", "qwen3-30b-a3b"),
        (find_link, "nvlink", "nvlink4"),
    ],
)
def test_a_mistyped_catalogue_id_is_refused_with_the_ids_near_it(find: object, typed: str, offered: str) -> None:
    # Before: "hardware.gpu: 'a100' is not allowed; expected a GPU id from `vramplan gpus` or 'custom'",
    # and nothing to say which of the 106 ids the user meant.
    with pytest.raises(PlanError) as refused:
        find(typed)  # type: ignore[operator]
    message = str(refused.value)
    assert "(closest: " in message
    assert offered in message.split("(closest: ", 1)[1].split(")")[0].split(", ")


def test_a_name_near_nothing_gets_no_suggestion() -> None:
    with pytest.raises(PlanError) as refused:
        find_gpu("zzz")
    assert "closest" not in str(refused.value)
    assert str(refused.value).endswith("expected a GPU id from `vramplan gpus` or 'custom'")


def test_a_pasted_paragraph_is_refused_at_once_and_cut() -> None:
    # 20,000 characters: the look-up reads the first 100, and the message shows the value cut at 80 (core.errors).
    with pytest.raises(PlanError) as refused:
        find_model("llama-3.1-8b " * 1_600)
    assert len(str(refused.value)) < 400


RUNCONFIGS = Path(__file__).parent.parent / "data" / "runconfigs"


@pytest.mark.parametrize("name", ["llamafactory_v1_train_lora_sft.yaml", "llamafactory_v1_train_full_fsdp2.yaml"])
def test_a_llamafactory_v1_config_is_not_estimated_as_another_run(name: str) -> None:
    # hiyouga/LLaMA-Factory ff6d4d1, examples/v1/: `model: Qwen/Qwen3-4B` with `peft_config: {name: lora, r: 16}`.
    # Before: read as axolotl (its micro_batch_size), "model: not named in the file", method full, fp32:
    # Llama 3.1 8B full training in fp32 (129 GB) for a LoRA run on Qwen3-4B. Refused by name on branch h87qa;
    # read since branch h89lf (tests/core/test_runconfig_llamafactory_v1.py has every v1 example).
    run = load_run_config(RUNCONFIGS / name)
    assert run.kind is ConfigKind.LLAMA_FACTORY and run.model_ref is not None and run.model_ref.startswith("Qwen/")


def test_a_llamafactory_v1_config_is_estimated_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--from", str(RUNCONFIGS / "llamafactory_v1_train_lora_sft.yaml")]) == 0
    captured = capsys.readouterr()
    assert "Qwen3 4B" in captured.out and "peft_config.r" in captured.out and "Traceback" not in captured.err


def test_the_llamafactory_configs_of_the_cli_kind_still_read() -> None:
    # hiyouga/LLaMA-Factory e8e6af2, examples/train_lora/llama3_lora_sft.yaml (tests/data/runconfigs/SOURCES.md).
    run = load_run_config(RUNCONFIGS / "llamafactory_llama3_lora_sft.yaml")
    assert run.kind is ConfigKind.LLAMA_FACTORY


def test_a_deepspeed_config_alone_says_what_it_is_and_the_settings_that_match() -> None:
    # hiyouga/LLaMA-Factory e64f558, examples/deepspeed/ds_z3_config.json (SOURCES.md): stage 3 and
    # "gradient_accumulation_steps": "auto", which DeepSpeed takes from the Trainer.
    # Before: read as TrainingArguments and refused with "gradient_accumulation_steps: 'auto' is not allowed".
    with pytest.raises(PlanFileError) as refused:
        load_run_config(RUNCONFIGS / "examples" / "deepspeed" / "ds_z3_config.json")
    message = str(refused.value)
    assert "is a DeepSpeed config (ZeRO stage 3)" in message
    assert message.endswith("the plan settings that match it: --strategy zero3")
    assert "'auto'" not in message


def test_the_deepspeed_config_the_app_exports_is_named_when_read_back(tmp_path: Path) -> None:
    # Before: "bf16: {'enabled': True} is not allowed; expected true or false" for the app's own file.
    out = tmp_path / "ds.json"
    assert main(["export", "-m", "llama-3.1-8b", "--strategy", "zero3", "--gpus", "8", "--micro-batch", "4",
                 "--to", "deepspeed", "--out", str(out)]) == 0  # fmt: skip
    with pytest.raises(PlanFileError) as refused:
        load_run_config(out)
    assert "--strategy zero3 --micro-batch 4 --accum 1" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        # huggingface/trl f2cd577, examples/accelerate_configs/: distributed_type DEEPSPEED, zero_stage 3,
        # num_processes 8; and distributed_type FSDP, fsdp_offload_params false, num_processes 8.
        ("trl_accelerate_deepspeed_zero3.yaml", "--strategy zero3 --gpus 8"),
        ("trl_accelerate_fsdp2.yaml", "--strategy fsdp --gpus 8"),
    ],
)
def test_an_accelerate_config_says_what_it_is_and_the_settings_that_match(name: str, settings: str) -> None:
    # Before: "is not a training config the planner reads (PEFT adapter_config.json, ...)", nothing on what it is.
    with pytest.raises(PlanFileError) as refused:
        load_run_config(RUNCONFIGS / name)
    assert "is an accelerate config" in str(refused.value)
    assert str(refused.value).endswith(f"the plan settings that match it: {settings}")


def test_axolotl_fsdp_words_keep_the_tables_cpu_offload() -> None:
    # axolotl-ai-cloud/axolotl 067b021, examples/llama-3/qlora-fsdp-70b.yaml: `fsdp: [full_shard, auto_wrap]` and
    # `fsdp_config: {fsdp_offload_params: true, fsdp_cpu_ram_efficient_loading: true, ...}`; axolotl strips the
    # prefix (utils/schemas/validation.py) and sets FSDP_OFFLOAD_PARAMS (utils/trainer.py setup_fsdp_envs).
    # Before: the word list was read and the table skipped whole: no offload, no FSDP1 wrap, "not understood: none".
    run = load_run_config(RUNCONFIGS / "axolotl_llama3_qlora_fsdp_70b.yaml")
    assert run.settings.sharding == "fsdp"
    assert run.settings.offload == "params"
    assert run.settings.fsdp1_wrap is True  # no fsdp_version: accelerate's FSDP1
    sources = {f.setting: f.source for f in run.fields}
    assert sources["offload"] == "fsdp_config.fsdp_offload_params"


def test_an_axolotl_preference_run_is_noted_not_dropped() -> None:
    # axolotl-ai-cloud/axolotl 067b021, examples/qwen2/dpo.yaml: `rl: dpo`. Before: "rl" was in the reader's
    # list of keys with no effect on memory, so a DPO run read as a plain supervised step with nothing said.
    run = load_run_config(RUNCONFIGS / "axolotl_qwen2_dpo.yaml")
    notes = [n for n in run.notes if n.source.startswith("rl: ")]
    assert len(notes) == 1 and notes[0].value == "dpo"
    assert "not modelled" in notes[0].source


@pytest.fixture
def own_files(tmp_path: Path) -> dict[str, Path]:
    """A plan, a comparison, Markdown / CSV reports and an axolotl export, each written by the app itself."""
    plan = tmp_path / "p.json"
    assert main(["estimate", "-m", "llama-3.1-8b", "--save", str(plan)]) == 0
    files = {"plan": plan, "comparison": tmp_path / "c.json", "md": tmp_path / "r.md", "csv": tmp_path / "r.csv",
             "ax": tmp_path / "ax.yaml"}  # fmt: skip
    for argv in (
        ["compare", str(plan), str(plan), "--save", str(files["comparison"])],
        ["report", "--md", str(files["md"]), str(plan)],
        ["report", "--csv", str(files["csv"]), str(plan)],
        ["export", "--plan", str(plan), "--to", "axolotl", "--out", str(files["ax"])],
    ):
        assert main(argv) == 0
    return files


@pytest.mark.parametrize(
    ("flag", "which", "says"),
    [
        # Before: "is not valid JSON (Expecting value: line 1 column 1 (char 0))".
        ("--plan", "md", "is a VRAM Planner report, not a plan"),
        ("--plan", "csv", "is a VRAM Planner report, not a plan"),
        ("--plan", "ax", "is a VRAM Planner launch config, not a plan: a training config is read with"),
        # Before: "format: 'vramplan-comparison' is not allowed; expected 'vramplan-plan' (not a VRAM Planner plan)".
        ("--plan", "comparison", "is a VRAM Planner comparison, not a plan: open it as a comparison"),
        # Before: "is not a training config the planner reads (PEFT adapter_config.json, ...)".
        ("--from", "plan", "is a VRAM Planner plan, not a training config: open it as a plan"),
        # Before: "config.model_type: None is not allowed; expected one of gpt2, llama, ..." (38 architectures).
        ("--config", "plan", "is a VRAM Planner plan, not a model's config.json: open it as a plan"),
    ],
)
def test_the_apps_own_file_by_the_wrong_door_names_the_right_one(
    own_files: dict[str, Path], capsys: pytest.CaptureFixture[str], flag: str, which: str, says: str
) -> None:
    capsys.readouterr()
    assert main(["estimate", flag, str(own_files[which])]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_peft_adapter_config_given_as_the_models_config_names_the_right_door(tmp_path: Path) -> None:
    # tests/data/runconfigs/peft_llama3.2_3b_adapter_config.json (SOURCES.md): an adapter_config.json, no model_type.
    # Before: "config.model_type: None is not allowed; expected one of gpt2, llama, ...".
    with pytest.raises(PlanFileError) as refused:
        import_model(RUNCONFIGS / "peft_llama3.2_3b_adapter_config.json")
    assert "is a PEFT adapter_config.json, not a model's config.json" in str(refused.value)


def test_torchtitans_cpu_offload_is_read_back_from_the_apps_own_export(tmp_path: Path) -> None:
    # torchtitan b5bcd76c, torchtitan/config/configs.py: training.enable_cpu_offload, "CPU offloading of
    # parameters, gradients, and optimizer states in FSDP"; the app's torchtitan export writes it.
    # Before: listed as not understood with training.dtype and training.mixed_precision_reduce, and the plan
    # read back kept every parameter on the GPU.
    out = tmp_path / "offload.toml"
    assert main(["export", "-m", "llama-3.2-3b", "--gpus", "4", "--strategy", "fsdp", "--offload", "params",
                 "--to", "torchtitan", "--out", str(out)]) == 0  # fmt: skip
    run = load_run_config(out)
    assert run.settings.offload == "params"
    assert not run.unknown
    assert {n.source.split(":")[0] for n in run.notes} >= {"training.dtype", "training.mixed_precision_reduce"}


def test_a_torchtune_distributed_config_shards_with_fsdp2_and_offloads_as_it_says() -> None:
    # pytorch/torchtune bd2a0fc, recipes/configs/llama3_1/70B_full.yaml: `fsdp_cpu_offload: True`, run by
    # recipes/full_finetune_distributed.py, which shards with FSDP2 (training.shard_model, cpu_offload from the key).
    # Before: the offload was noted as "not modelled" and no sharding was read: on 8 GPUs each held a whole replica.
    run = load_run_config(RUNCONFIGS / "torchtune_llama3_1_70B_full.yaml")
    assert (run.settings.sharding, run.settings.offload) == ("fsdp", "params")
    assert not any(n.source.startswith("fsdp_cpu_offload") for n in run.notes)


def test_a_torchtune_single_device_config_keeps_the_plans_sharding() -> None:
    # tests/data/runconfigs/torchtune_llama3_1_8B_lora_single_device.yaml (SOURCES.md): no fsdp_ key.
    run = load_run_config(RUNCONFIGS / "torchtune_llama3_1_8B_lora_single_device.yaml")
    assert run.settings.sharding is None and run.settings.offload is None


def test_a_hub_id_neither_cached_nor_catalogued_names_the_catalogue_models_near_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "meta-llama/Meta-Llama-3-70B: not in the Hugging Face cache at ...; nor is it a catalogue model
    # (see `vramplan models`)", while the catalogue's llama-3.1-70b has its shapes (resources/models.json).
    # (Meta-Llama-3-8B, the first example here, now has its own catalogue entry, llama-3-8b.)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    assert main(["estimate", "-m", "meta-llama/Meta-Llama-3-70B"]) == 2
    err = capsys.readouterr().err
    assert "nor is it a catalogue model" in err and "closest: llama-3.1-70b" in err
