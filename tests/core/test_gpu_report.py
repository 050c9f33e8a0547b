"""tools/measure/gpu_report.py: the real-GPU check's allocated and reserved errors, case by case.

No GPU here: a committed fake-CUDA measurement (benchmarks/accuracy/measured, the measuring
tool's own output) stands in for a card's, with a reserved peak written into it, so the
report's arithmetic and its card matching are checked against core's own estimate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from core.estimate import estimate
from core.files.measurement import load_measurement, plan_for_case
from tools.measure import gpu_report

CASE = "qwen25-05b-full-fp32-adamw-sdpa-b2-s512"
FAKE = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"


def _card_run(tmp_path: Path, reserved_share: float) -> tuple[Path, dict[str, Any]]:
    """The fake-CUDA measurement of CASE as if a card had measured it, reserving ``reserved_share``
    more than it allocated."""
    folder = tmp_path / "accuracy"
    folder.mkdir()
    doc = json.loads((FAKE / f"{CASE}.json").read_text())
    doc["backend"] = "cuda"
    doc["peak_reserved_bytes"] = int(doc["peak_allocated_bytes"] * (1 + reserved_share))
    (folder / f"{CASE}.json").write_text(json.dumps(doc))
    return folder, doc


def test_each_case_reports_allocated_and_reserved_errors_against_the_estimate(tmp_path: Path) -> None:
    folder, doc = _card_run(tmp_path, 0.10)
    [row] = gpu_report.rows(folder, "h100-sxm")
    measured = load_measurement(FAKE / f"{CASE}.json")
    est = estimate(plan_for_case(measured.case, doc.get("model_config")).with_hardware(gpu="h100-sxm"))
    assert row.allocated == doc["peak_allocated_bytes"] and row.fake == doc["peak_allocated_bytes"]
    assert row.estimated == est.peak_bytes and row.estimated_reserved == est.worst.reserved_bytes
    assert row.reserved_error_pct == pytest.approx((est.worst.reserved_bytes / doc["peak_reserved_bytes"] - 1) * 100)
    assert row.allocated_error_pct == pytest.approx((est.peak_bytes / doc["peak_allocated_bytes"] - 1) * 100)
    text = gpu_report.render([row])
    assert CASE in text and f"{row.reserved_error_pct:+.1f} %" in text


def test_a_run_without_a_reserved_figure_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "accuracy"
    folder.mkdir()
    shutil.copy(FAKE / f"{CASE}.json", folder)  # fake CUDA: peak_reserved_bytes is null
    [row] = gpu_report.rows(folder)
    assert row.reserved is None and row.reserved_error_pct is None
    assert "—" in gpu_report.render([row])


def test_the_card_is_matched_from_what_nvidia_smi_prints() -> None:
    # nvidia-smi --query-gpu=name,memory.total on an H100 SXM: "NVIDIA H100 80GB HBM3, 81559"
    assert gpu_report.card("NVIDIA H100 80GB HBM3", 81559) == "h100-sxm"
    assert gpu_report.card("NVIDIA Imaginary 9000", 12288) is None
    assert gpu_report.card(None, None) is None


def test_bad_input_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_report.main([str(tmp_path)]) == 1
    assert "no measurement" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{not json")
    assert gpu_report.main([str(tmp_path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
