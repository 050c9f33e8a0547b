"""An accelerate config whose ``deepspeed_config.deepspeed_config_file`` names a DeepSpeed JSON (branch h97cfg,
issue 22). Each test failed before: the refusal named only ``distributed_type DEEPSPEED`` and the process count.

Sources (huggingface/accelerate 16cb6eb80dd9aa8b4df1a63ef57863e455d53b83):
- utils/launch.py lines 580-581: the path goes unchanged into ACCELERATE_DEEPSPEED_CONFIG_FILE;
- utils/dataclasses.py lines 1264-1300: DeepSpeedPlugin builds HfDeepSpeedConfig from it and takes the stage and
  offload from the file; lines 1507-1530 (``_deepspeed_config_checks``) raise when the YAML's deepspeed_config also
  sets zero_stage, offload_*_device, gradient_accumulation_steps, gradient_clipping (commands/launch.py line 1388
  lists the section's keys);
- utils/deepspeed.py lines 141-143: ``os.path.exists`` / ``open`` on that string, relative to the launch directory.
The fixtures are accelerate's own examples at that commit, their tree kept (tests/data/runconfigs/SOURCES.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.errors import PlanFileError
from core.files.runconfig import load_run_config

ACCELERATE = Path(__file__).parents[1] / "data" / "runconfigs" / "accelerate"


def _refusal(path: Path) -> str:
    with pytest.raises(PlanFileError) as refused:
        load_run_config(path)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_the_alst_example_reads_the_deepspeed_file_beside_it() -> None:
    # sp-alst.accelerate-config.yml: deepspeed_config_file sp-alst.ds-config.json, num_processes 4; the JSON:
    # zero_optimization.stage 3, gradient_accumulation_steps 1, no offload, no optimizer section.
    message = _refusal(ACCELERATE / "alst_ulysses_sequence_parallelism" / "sp-alst.accelerate-config.yml")
    assert "deepspeed_config_file sp-alst.ds-config.json with ZeRO stage 3" in message
    assert message.endswith("the plan settings that match it: --strategy zero3 --accum 1 --gpus 4")


def test_a_file_outside_the_configs_folder_is_not_followed_and_it_says_so() -> None:
    # config_yaml_templates/deepspeed.yaml names ../deepspeed_config_templates/zero_stage1_config.json, num_processes 2.
    message = _refusal(ACCELERATE / "config_yaml_templates" / "deepspeed.yaml")
    assert "deepspeed_config_file ../deepspeed_config_templates/zero_stage1_config.json not read" in message
    assert "leads out of the config's own folder" in message
    assert "--strategy" not in message
    assert message.endswith("the plan settings that match it: --gpus 2")


def test_the_same_file_copied_beside_it_gives_its_stage_and_optimizer_section(tmp_path: Path) -> None:
    # zero_stage1_config.json: stage 1, optimizer AdamW with torch_adam true (DeepSpeed builds torch.optim.AdamW:
    # deepspeedai/DeepSpeed v0.18.3 runtime/engine.py lines 1550-1554, the plan's foreach step), weight_decay "auto".
    shutil.copy(ACCELERATE / "deepspeed_config_templates" / "zero_stage1_config.json", tmp_path / "ds.json")
    text = (ACCELERATE / "config_yaml_templates" / "deepspeed.yaml").read_text(encoding="utf-8")
    yaml = tmp_path / "deepspeed.yaml"
    yaml.write_text(text.replace("../deepspeed_config_templates/zero_stage1_config.json", "ds.json"), encoding="utf-8")
    message = _refusal(yaml)
    # and gradient_accumulation_steps 1.
    assert "deepspeed_config_file ds.json with ZeRO stage 1, gradient_accumulation_steps 1, optimizer AdamW" in message
    assert message.endswith("--strategy zero1 --accum 1 --optimizer adamw --optimizer-impl foreach --gpus 2")


@pytest.mark.parametrize(
    ("written", "why"),
    [
        (None, "was not found beside the config (accelerate opens it from the directory it is launched in)"),
        (b"{not json", "not read: is not valid JSON"),
        (b"[1, 2]", "not read: it holds no JSON object"),
    ],
)
def test_a_missing_or_unreadable_file_is_one_line(tmp_path: Path, written: bytes | None, why: str) -> None:
    if written is not None:
        (tmp_path / "ds.json").write_bytes(written)
    yaml = tmp_path / "acc.yaml"
    yaml.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 2\n"
        "deepspeed_config:\n  deepspeed_config_file: ds.json\n",
        encoding="utf-8",
    )
    assert why in _refusal(yaml)


def test_an_absolute_path_is_not_followed(tmp_path: Path) -> None:
    # accelerate's own docs write absolute paths (docs/source/usage_guides/deepspeed.md line 197).
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"zero_optimization": {"stage": 2}}), encoding="utf-8")
    yaml = tmp_path / "sub" / "acc.yaml"
    yaml.parent.mkdir()
    yaml.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
        f"deepspeed_config:\n  deepspeed_config_file: {json.dumps(str(target))}\n",
        encoding="utf-8",
    )
    message = _refusal(yaml)
    assert "an absolute path" in message and "zero2" not in message


def test_the_keys_accelerate_refuses_beside_the_file_are_named(tmp_path: Path) -> None:
    # _deepspeed_config_checks raises on zero_stage beside deepspeed_config_file; the file's stage is what would run.
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}}), encoding="utf-8")
    yaml = tmp_path / "acc.yaml"
    yaml.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
        "deepspeed_config:\n  deepspeed_config_file: ds.json\n  zero_stage: 3\n",
        encoding="utf-8",
    )
    message = _refusal(yaml)
    assert "accelerate refuses zero_stage beside deepspeed_config_file" in message
    assert "--strategy zero2" in message and "zero3" not in message
