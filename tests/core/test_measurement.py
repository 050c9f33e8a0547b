"""Measurement files: read safely, mapped to plans, compared with estimates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import PlanFileError
from core.estimate import estimate
from core.files.measurement import (
    compare,
    estimated_peak,
    load_measurement,
    measured_tensor_level,
    measurement_from_dict,
    plan_for_case,
)
from core.plan import Method, Precision
from core.units import MiB

MEASURED = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"


def test_a_committed_measurement_maps_to_its_plan() -> None:
    path = MEASURED / "llama2-7b-lora-r8-bf16-adamw-sdpa-b4-s1024.json"
    m = load_measurement(path)
    plan = plan_for_case(m.case, json.loads(path.read_text()).get("model_config"))
    assert plan.method is Method.LORA and plan.precision is Precision.BF16
    assert plan.workload.micro_batch == 4 and plan.workload.seq_len == 1024
    assert estimate(plan).params.trainable == 4_194_304  # PEFT's count for r=8 on q, v
    # A fake-tensor run (its backend) took no cuBLAS workspace: it is compared with the tensor peak.
    assert m.backend == "fake-cuda" and not m.on_real_gpu
    c = compare(estimate(plan), m)
    assert c.figure == "tensor peak"
    assert c.error_bytes == pytest.approx(estimate(plan).tensor_peak_bytes - m.peak_allocated_bytes)
    assert abs(c.error_pct) < 4


def test_a_measurement_is_compared_with_the_figure_of_its_backend() -> None:
    # tools/measure's "cuda" backend records the running max of torch.cuda.memory_allocated
    # (tools/measure/runner.py _peak_fields), which holds the cuBLAS workspaces PyTorch takes from
    # the caching allocator (pytorch/pytorch 26a39059 CublasHandlePool.cpp): compared with the
    # allocated peak. A fake-tensor backend runs no cuBLAS: compared with the tensor peak.
    path = MEASURED / "llama2-7b-lora-r8-bf16-adamw-sdpa-b4-s1024.json"
    doc = json.loads(path.read_text())
    est = estimate(plan_for_case(doc["case"], doc.get("model_config")))
    assert est.peak_bytes - est.tensor_peak_bytes == 2 * 32 * MiB  # an H100: sm90's two workspaces
    fake = measurement_from_dict(doc)
    real = measurement_from_dict({**doc, "backend": "cuda"})
    assert real.on_real_gpu and not fake.on_real_gpu
    assert estimated_peak(est, fake) == (est.tensor_peak_bytes, "tensor peak")
    assert estimated_peak(est, real) == (est.peak_bytes, "allocated peak")
    assert compare(est, real).error_bytes == pytest.approx(est.peak_bytes - real.peak_allocated_bytes)
    # The chart levels a run on a card against the peak phase's tensors without its workspaces.
    assert measured_tensor_level(est, fake) == fake.peak_allocated_bytes
    assert measured_tensor_level(est, real) == pytest.approx(real.peak_allocated_bytes - 2 * 32 * MiB)


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
