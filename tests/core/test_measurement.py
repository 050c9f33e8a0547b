"""Measurement files: read safely, mapped to plans, compared with estimates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import PlanFileError
from core.estimate import estimate
from core.files.measurement import compare, load_measurement, plan_for_case
from core.plan import Method, Precision

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"


def test_a_committed_measurement_maps_to_its_plan() -> None:
    path = MEASURED / "llama2-7b-lora-r8-bf16-adamw-sdpa-b4-s1024.json"
    m = load_measurement(path)
    plan = plan_for_case(m.case, json.loads(path.read_text()).get("model_config"))
    assert plan.method is Method.LORA and plan.precision is Precision.BF16
    assert plan.workload.micro_batch == 4 and plan.workload.seq_len == 1024
    assert estimate(plan).params.trainable == 4_194_304  # PEFT's count for r=8 on q, v
    c = compare(estimate(plan).peak_bytes, m)
    assert c.error_bytes == pytest.approx(estimate(plan).peak_bytes - m.peak_allocated_bytes)
    assert abs(c.error_pct) < 4


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{}",
        b'{"format": "vramplan-measurement"}',
        b'{"format": "vramplan-measurement", "case": {}}',
        b'{"format": "vramplan-measurement", "case": {}, "peak_allocated_bytes": -1}',
        b"\xff\xfe",
        b"[" * 50_000,
    ],
)
def test_bad_measurement_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(content)
    with pytest.raises(PlanFileError):
        load_measurement(path)


def test_peak_beyond_float_range(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"format": "vramplan-measurement", "case": {}, "peak_allocated_bytes": 1' + "0" * 400 + "}")
    with pytest.raises(PlanFileError, match="peak_allocated_bytes"):
        load_measurement(path)
