"""``vramplan fit`` takes the plan as ``vramplan estimate`` does (h88fix: it took only a plan file): the options of
the one builder (core.cli.parser.add_plan_options), ``--plan FILE``, or the plan file as before; both forms give the
same table. ``fewest-gpus`` already took estimate's options (its parser's parent is estimate's): the same holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cli.app import main

# Llama 3.1 8B LoRA at micro-batch 2: any plan; --max-count 2 keeps the table short (the rows are every catalogue
# card × 1-2).
OPTIONS = ("-m", "llama-3.1-8b", "--method", "lora", "--micro-batch", "2")


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _saved(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    path = str(tmp_path / "plan.json")
    _out(capsys, "estimate", *OPTIONS, "--save", path)
    return path


def test_fit_takes_estimates_options_and_gives_the_plan_files_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _saved(capsys, tmp_path)
    by_file = _out(capsys, "fit", path, "--max-count", "2")
    assert _out(capsys, "fit", *OPTIONS, "--max-count", "2") == by_file
    assert _out(capsys, "fit", "--plan", path, "--max-count", "2") == by_file
    assert "Llama 3.1 8B · lora" in by_file and "micro-batch 2 × " in by_file
    as_json = _out(capsys, "fit", path, "--max-count", "2", "--json")
    assert _out(capsys, "fit", *OPTIONS, "--max-count", "2", "--json") == as_json


def test_fit_options_override_the_plan_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _saved(capsys, tmp_path)
    four = _out(capsys, "fit", path, "--micro-batch", "4", "--max-count", "1")
    assert "micro-batch 4 × " in four
    assert four == _out(capsys, "fit", *OPTIONS[:4], "--micro-batch", "4", "--max-count", "1")


def test_fit_without_a_plan_or_with_two_says_so_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["fit"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    path = _saved(capsys, tmp_path)
    assert main(["fit", path, "--plan", str(tmp_path / "other.json")]) == 2
    assert "give the plan file once" in capsys.readouterr().err


def test_fewest_gpus_gives_the_same_answer_from_options_and_from_the_plan_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _saved(capsys, tmp_path)
    assert _out(capsys, "fewest-gpus", *OPTIONS) == _out(capsys, "fewest-gpus", "--plan", path)
