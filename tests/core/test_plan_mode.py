"""A plan file keeps the question it was saved with (branch h56mode): a plan saved in Inference
mode reopened in Training, showing the training verdict (gpt-oss-20b: out of memory) for a
question about serving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cli.app import main
from core.errors import PlanError, PlanFileError
from core.files import comparison as comparison_file
from core.files import planfile
from core.presets import default_plan
from core.verdict import Mode


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_saved_mode_comes_back() -> None:
    text = planfile.dumps(default_plan(), Mode.INFERENCE)
    assert json.loads(text)["mode"] == "inference"
    saved = planfile.loads_saved(text)
    assert saved.mode is Mode.INFERENCE and saved.plan == default_plan()
    assert planfile.loads(text) == default_plan()  # the plan alone, as before


def test_a_file_without_a_mode_opens_in_training_as_it_did() -> None:
    document = planfile.plan_to_dict(default_plan(), Mode.INFERENCE)
    del document["mode"]  # every file written before branch h56mode
    assert planfile.saved_from_dict(document).mode is Mode.TRAINING


@pytest.mark.parametrize("value", ["serving", "", None, 1, ["inference"]])
def test_an_unknown_mode_is_refused_with_the_reason(value: object) -> None:
    document = planfile.plan_to_dict(default_plan(), Mode.INFERENCE)
    document["mode"] = value
    with pytest.raises(PlanError, match="mode: .*expected training or inference.*newer VRAM Planner"):
        planfile.saved_from_dict(document)
    with pytest.raises(PlanFileError, match="mode"):
        planfile.loads(json.dumps(document))


def test_the_command_line_reopens_a_plan_in_its_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "serve.json")
    code, _, _ = _run(capsys, "estimate", "--model", "gpt-oss-20b", "--mode", "inference", "--save", path)
    assert code == 0 and json.loads(Path(path).read_text())["mode"] == "inference"
    code, out, _ = _run(capsys, "estimate", "--plan", path, "--json")
    doc = json.loads(out)
    # The default card (A100 80GB) serves gpt-oss-20b (the served verdict); training it in full is
    # out of memory, the answer the reopened file gave before the fix.
    assert code == 0 and doc["mode"] == "inference" and doc["verdict"] != "oom" and doc["training"]["verdict"] == "oom"
    code, out, _ = _run(capsys, "estimate", "--plan", path, "--mode", "training", "--json")
    assert json.loads(out)["mode"] == "training"  # an explicit --mode wins
    # Saved again without --mode, the file keeps its mode.
    again = str(tmp_path / "again.json")
    assert _run(capsys, "estimate", "--plan", path, "--save", again)[0] == 0
    assert planfile.load_saved(again).mode is Mode.INFERENCE


def test_compare_and_report_follow_the_files_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    served, trained = tmp_path / "served.json", tmp_path / "trained.json"
    planfile.save(default_plan(), served, mode=Mode.INFERENCE)
    planfile.save(default_plan(), trained)
    code, out, _ = _run(capsys, "compare", str(served), str(served), "--json")
    assert code == 0 and json.loads(out)["mode"] == "inference"
    saved = tmp_path / "cmp.json"
    assert _run(capsys, "compare", str(served), "--save", str(saved))[0] == 0
    assert comparison_file.load(saved).mode is Mode.INFERENCE  # a comparison keeps it too
    code, out, err = _run(capsys, "compare", str(served), str(trained))
    assert code == 2 and "saved in different modes (inference, training): give --mode" in err
    code, out, _ = _run(capsys, "compare", str(served), str(trained), "--mode", "training", "--json")
    assert code == 0 and json.loads(out)["mode"] == "training"
    md = tmp_path / "r.md"
    assert _run(capsys, "report", str(served), "--md", str(md))[0] == 0
    assert "| Engine | Hugging Face generate |" in md.read_text()  # the serving inputs (SERVING_INPUT_ROWS)
