"""Plan-file versions: older files are migrated forward; saving writes the current version.

Also the atomic-write guarantee: a crash at any point of a save leaves the previous file
exactly as it was and no temporary file behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from core.dtypes import Autocast, Dtype
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.plan import (
    PRESET_ROLES,
    Attention,
    Method,
    Optimizer,
    OptimizerImpl,
    Plan,
    Precision,
    Preset,
    SglangVersion,
    Strategy,
)
from core.presets import (
    LESSON_7B_NAME,
    LESSON_GPT2_NAME,
    default_plan,
    lesson_gpt2_plan,
    lesson_plan,
    plan_for_model,
)

V1_EXAMPLE = Path(__file__).resolve().parent.parent / "data" / "plans" / "v1_example.json"


def expected_v1_plan() -> Plan:
    """What tests/data/plans/v1_example.json describes, built by hand."""
    plan = plan_for_model(
        "llama-3.1-8b",
        method=Method.QLORA,
        precision=Precision.BF16_MIXED,
        optimizer=Optimizer.PAGED_ADAMW_8BIT,
        checkpointing=True,
        attention=Attention.FLASH,
        optimizer_impl=OptimizerImpl.FOREACH,  # what every estimate before version 3 assumed
    )
    # The file lists the seven names (how all-linear was written before branch h84alllin): they stay seven names.
    seven = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    plan = plan.with_lora(rank=16, alpha=32.0, targets=seven)
    plan = plan.with_workload(micro_batch=2, seq_len=4096, grad_accum=8, tokens=50_000_000, eval_batch=0)
    # A file without SGLang's release reads as 0.4.0, the table it was estimated with
    # (core.files.planfile.SGLANG_VERSION_OF_OLD_FILES).
    plan = plan.with_inference(sglang_version=SglangVersion.V0_4_0)
    return plan.with_hardware(gpu="rtx-4090", price_per_gpu_hour=0.7).on_gpus(2, Strategy.ZERO2)


def _v1_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(V1_EXAMPLE.read_text(encoding="utf-8"))
    return document


def test_the_example_is_a_genuine_version_1_file() -> None:
    document = _v1_document()
    assert document["version"] == 1
    assert "eval_batch" not in document["plan"]["workload"]


def test_version_1_file_loads_as_the_expected_plan() -> None:
    plan = planfile.load(V1_EXAMPLE)
    assert plan == expected_v1_plan()
    assert plan.workload.eval_batch == 0


def test_saving_a_migrated_plan_writes_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "plan.vramplan.json"
    planfile.save(planfile.load(V1_EXAMPLE), path)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["version"] == planfile.VERSION
    assert document["plan"]["workload"]["eval_batch"] == 0
    assert planfile.load(path) == expected_v1_plan()


def test_every_older_version_has_a_migration() -> None:
    assert planfile.VERSION >= 3
    assert set(planfile.MIGRATIONS) == set(range(1, planfile.VERSION))


def test_migration_steps_one_version_and_keeps_the_input() -> None:
    document = _v1_document()
    before = json.dumps(document, sort_keys=True)
    migrated = planfile.MIGRATIONS[1](document)
    assert migrated["version"] == 2
    assert migrated["plan"]["workload"]["eval_batch"] == 0
    assert json.dumps(document, sort_keys=True) == before  # the caller's document is not mutated


def test_version_1_file_with_eval_batch_already_present_keeps_it() -> None:
    document = _v1_document()
    document["plan"]["workload"]["eval_batch"] = 3
    assert planfile.plan_from_dict(document).workload.eval_batch == 3


def test_current_version_without_eval_batch_is_an_error() -> None:
    """Only version 1 files may omit the key: a current file must carry it."""
    document = planfile.plan_to_dict(expected_v1_plan())
    del document["plan"]["workload"]["eval_batch"]
    with pytest.raises(PlanError, match=r"plan\.workload\.eval_batch.*missing"):
        planfile.plan_from_dict(document)


# ---- version 2 -> 3: precision roles and optimizer implementation -----------------------

# The old one-word precision and the preset + roles it always meant (the reader of version
# 2 files; tools/measure's resolve_knobs reads old accuracy cases the same way).
OLD_PRECISIONS = {
    "fp32": (Preset.FP32, Dtype.FP32, Dtype.FP32, Autocast.NONE),
    "bf16-mixed": (Preset.FP32_AUTOCAST_BF16, Dtype.FP32, Dtype.FP32, Autocast.BF16),
    "fp16-mixed": (Preset.FP16_AMP, Dtype.FP32, Dtype.FP32, Autocast.FP16),
    "bf16": (Preset.PURE_BF16, Dtype.BF16, Dtype.BF16, Autocast.NONE),
    "fp16": (Preset.CUSTOM, Dtype.FP16, Dtype.FP16, Autocast.NONE),
}


def _v2_document(precision: str) -> dict[str, Any]:
    document = planfile.MIGRATIONS[1](_v1_document())
    document["plan"]["precision"] = precision
    return document


@pytest.mark.parametrize("old", sorted(OLD_PRECISIONS))
def test_version_2_precision_becomes_its_preset_exactly(old: str) -> None:
    plan = planfile.plan_from_dict(_v2_document(old))
    preset, weight, base, autocast = OLD_PRECISIONS[old]
    assert (plan.preset, plan.weight_dtype, plan.base_dtype, plan.autocast) == (preset, weight, base, autocast)
    assert plan.adapter_dtype is Dtype.FP32  # PEFT's autocast_adapter_dtype=True, as before
    assert plan.precision is Precision(old)  # lesson mode reads the same word
    assert plan.optimizer_impl is OptimizerImpl.FOREACH
    # The same plan as a version-2-era caller built it: identical, so identical estimates.
    legacy = expected_v1_plan().with_changes(precision=Precision(old))
    assert plan == legacy


def test_version_2_migration_keeps_the_input_and_steps_one_version() -> None:
    document = _v2_document("bf16")
    before = json.dumps(document, sort_keys=True)
    migrated = planfile.MIGRATIONS[2](document)
    assert migrated["version"] == 3
    assert migrated["plan"]["preset"] == "pure-bf16"
    assert json.dumps(document, sort_keys=True) == before


def test_version_2_with_an_unknown_precision_names_the_field() -> None:
    with pytest.raises(PlanError, match=r"plan\.precision"):
        planfile.plan_from_dict(_v2_document("bf17"))


def test_version_3_round_trips_every_preset_and_a_custom_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.vramplan.json"
    for preset in PRESET_ROLES:
        plan = default_plan().with_changes(preset=preset, optimizer_impl=OptimizerImpl.FORLOOP)
        planfile.save(plan, path)
        assert planfile.load(path) == plan
    custom = default_plan().with_changes(base_dtype=Dtype.FP16, adapter_dtype=Dtype.BF16, autocast=Autocast.NONE)
    assert custom.preset is Preset.CUSTOM
    planfile.save(custom, path)
    assert planfile.load(path) == custom


def test_a_current_file_writes_the_derived_precision_and_reads_it_back() -> None:
    plan = default_plan()
    document = planfile.plan_to_dict(plan)
    assert document["plan"]["precision"] == plan.precision.value == "bf16"  # trainer-bf16 stores bf16
    assert planfile.plan_from_dict(document) == plan
    del document["plan"]["precision"]  # derived: a file may leave it out
    assert planfile.plan_from_dict(document) == plan


def test_a_file_giving_only_the_word_reads_as_its_preset() -> None:
    # Default preset and roles with precision "bf16": the word picks pure bf16, as a
    # precision alone always did (Plan(precision=...) before it was derived).
    document = planfile.plan_to_dict(plan_for_model("gpt2"))
    assert document["plan"]["preset"] == "fp32-autocast-bf16"
    document["plan"]["precision"] = "bf16"
    assert planfile.plan_from_dict(document).preset is Preset.PURE_BF16


def test_a_file_whose_precision_contradicts_its_roles_is_refused() -> None:
    document = planfile.plan_to_dict(default_plan())  # trainer-bf16: bf16 weights
    document["plan"]["precision"] = "fp32"
    with pytest.raises(PlanError, match=r"^plan\.precision: 'fp32' .*expected bf16"):
        planfile.plan_from_dict(document)


def test_version_3_file_whose_roles_contradict_its_preset_is_refused() -> None:
    document = planfile.plan_to_dict(default_plan())
    document["plan"]["preset"] = "fp32"  # the roles still say bf16 storage under autocast
    with pytest.raises(PlanError, match=r"^preset: .*custom"):
        planfile.plan_from_dict(document)


@pytest.mark.parametrize("broken", [{"plan": None}, {"plan": {"workload": 5}}, {"plan": {}}])
def test_malformed_version_1_documents_are_reported_not_crashed(broken: dict[str, Any]) -> None:
    document = {"format": planfile.FORMAT, "version": 1, **broken}
    with pytest.raises(PlanError):
        planfile.plan_from_dict(document)


# ---- atomic saves ------------------------------------------------------------------------


def _failing(*args: object, **kwargs: object) -> Any:
    raise OSError(5, "Input/output error")


@pytest.mark.parametrize(
    ("target", "attribute"),
    [(os, "fsync"), (os, "replace"), ("write", "")],
    ids=["fsync", "rename", "write"],
)
def test_crash_mid_save_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object, attribute: str
) -> None:
    path = tmp_path / "plan.vramplan.json"
    planfile.save(default_plan(), path)
    before = path.read_bytes()
    if target == "write":
        real_fdopen = os.fdopen

        def fdopen_that_fails_half_way(fd: int, *args: Any, **kwargs: Any) -> Any:
            handle = real_fdopen(fd, *args, **kwargs)
            real_write = handle.write

            def write(data: bytes) -> int:
                real_write(data[: len(data) // 2])
                handle.flush()
                raise OSError(28, "No space left on device")

            handle.write = write
            return handle

        monkeypatch.setattr(os, "fdopen", fdopen_that_fails_half_way)
    else:
        monkeypatch.setattr(target, attribute, _failing)
    with pytest.raises(PlanFileError, match="cannot be written"):
        planfile.save(default_plan().with_workload(micro_batch=7), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.vramplan.json"]
    assert planfile.load(path) == default_plan()


def test_interrupt_mid_write_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt (not an OSError) still cleans up, and still propagates."""
    path = tmp_path / "notes.txt"
    planfile.atomic_write_text(path, "old\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        planfile.atomic_write_text(path, "new\n", force=True)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_atomic_write_to_a_new_file_that_fails_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _failing)
    with pytest.raises(OSError):
        planfile.atomic_write_text(tmp_path / "fresh.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_save_into_a_missing_folder_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError, match="cannot be written"):
        planfile.save(default_plan(), tmp_path / "absent" / "plan.json")


@pytest.mark.parametrize(
    ("former", "make"),
    [
        ("7B model (lesson, P = 6.7e9)", lambda: lesson_plan(Method.FULL, Precision.BF16)),
        ("GPT-2 small (lesson, P = 124.4e6)", lesson_gpt2_plan),
    ],
)
def test_a_file_naming_a_lesson_model_by_its_former_name_loads_as_that_model(
    tmp_path: Path, former: str, make: Any
) -> None:
    # Until 2026-12 the lesson's models were named "7B model (lesson, P = 6.7e9)" and "GPT-2 small (lesson,
    # P = 124.4e6)" (core/presets.py at de597f18), and plan files hold the model's name. Such a file loads as
    # the lesson's model under today's name, the same plan and the same figures.
    plan = make()
    document = json.loads(planfile.dumps(plan))
    document["plan"]["model"]["name"] = former
    path = tmp_path / "lesson.json"
    path.write_text(json.dumps(document))
    loaded = planfile.load(path)
    assert loaded == plan and loaded.model.name in (LESSON_7B_NAME, LESSON_GPT2_NAME)
    assert estimate(loaded).summary_formula == estimate(plan).summary_formula
    # A model edited since (one layer fewer) keeps the name it was saved with: it is not the lesson's.
    document["plan"]["model"]["num_layers"] -= 1
    path.write_text(json.dumps(document))
    assert planfile.load(path).model.name == former


def test_the_bundled_version_1_file_names_the_lesson_model_as_today() -> None:
    # packaging/selftest_plan.json, a version-1 file the frozen app's self-test opens, names "7B model (lesson,
    # P = 6.7e9)"; gui/selftest.py compares it with lesson_plan(QLORA, BF16), name included.
    path = Path(__file__).resolve().parents[2] / "packaging" / "selftest_plan.json"
    assert json.loads(path.read_text())["plan"]["model"]["name"] == "7B model (lesson, P = 6.7e9)"
    assert planfile.load(path).model == lesson_plan(Method.QLORA, Precision.BF16).model
