"""The matmul kernels behind the time model's matmul features (core.training.speed ``Work.kernels``), and the
experiment that combines each kernel's compute and operand traffic otherwise than by adding them
(benchmarks/realgpu/gemm_roofline.py; docs/TRAINING_TIME.md, "A matmul's compute and its traffic").

No figure here is a measurement: each check is an identity of the model (the kernels add up to the features the
step is timed from; the Euler split reproduces the combined time), so no number needs a source.
"""

from __future__ import annotations

import math

import pytest

from benchmarks.realgpu import gemm_roofline
from core.catalogue import find_gpu
from core.params import param_counts
from core.plan import Float8, Hardware, Method, Plan, Workload
from core.presets import plan_for_model
from core.training import efficiency, speed
from core.training.speed import Work, step_work


def _plan(gpu: str, method: Method, **workload: int) -> Plan:
    shape = {"micro_batch": 2, "seq_len": 4096, "grad_accum": 1, "tokens": 10**9} | workload
    return plan_for_model("llama-3.1-8b", method=method, workload=Workload(**shape), hardware=Hardware(gpu=gpu))


PLANS = {
    "full, H100": _plan("h100-sxm", Method.FULL),
    "LoRA, RTX 4090, 1 × 256 tokens": _plan("rtx-4090", Method.LORA, micro_batch=1, seq_len=256),
    "full, float8 rowwise, H100": _plan("h100-sxm", Method.FULL).with_changes(float8=Float8.ROWWISE),
    "full, float8 rowwise_with_gw_hp, H100": _plan("h100-sxm", Method.FULL).with_changes(float8=Float8.ROWWISE_GW_HP),
}


@pytest.fixture(autouse=True)
def _record_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """step_work keeps each matmul kernel only when asked (core.training.speed.RECORD_KERNELS), as the script does."""
    monkeypatch.setattr(speed, "RECORD_KERNELS", True)


def _work(plan: Plan) -> Work:
    return step_work(plan, param_counts(plan), find_gpu(plan.hardware.gpu))


@pytest.mark.parametrize("name", PLANS)
def test_the_kernels_add_up_to_the_matmul_features(name: str) -> None:
    work = _work(PLANS[name])
    compute: dict[str, float] = {}
    for feature, seconds, _ in work.kernels:
        compute[feature] = compute.get(feature, 0.0) + seconds
    for feature, seconds in compute.items():
        assert seconds == pytest.approx(work.features[feature], rel=1e-12), feature
    assert sum(moved for _, _, moved in work.kernels) == pytest.approx(work.features["gemm_bytes"], rel=1e-12)
    # Every matmul feature with time is made of kernels (the float8 plans' 16-bit head among them).
    assert {f for f, s in work.features.items() if f.startswith("gemm:") and s} == set(compute)


@pytest.mark.parametrize("name", PLANS)
@pytest.mark.parametrize("power", [1.0, 1.5, 2.0, math.inf])
def test_the_split_times_each_kernel_at_its_combination(name: str, power: float) -> None:
    work = _work(PLANS[name])

    def k(feature: str) -> float:
        return efficiency.coefficient(feature)

    split = gemm_roofline.roofline_features(work.features, work.kernels, k, power)
    summed = sum(k(f) * s for f, s in work.features.items())
    kernels = [(k(f) * c, k("gemm_bytes") * b) for f, c, b in work.kernels]
    expected = summed - sum(a + b for a, b in kernels) + sum(gemm_roofline.roof(a, b, power) for a, b in kernels)
    assert sum(k(f) * s for f, s in split.items()) == pytest.approx(expected, rel=1e-9)
    if power == 1:
        assert split == dict(work.features)


def test_the_guide_coefficient_is_the_shipped_one_under_the_sum_and_grows_as_the_bytes_hide() -> None:
    for kind in ("16-bit", "fp8-te"):
        assert gemm_roofline.guide_coefficient(kind, 1.0) == efficiency.guide_coefficient(kind)
        values = [gemm_roofline.guide_coefficient(kind, p) for p in (1.0, 1.5, 2.0, 4.0, math.inf)]
        assert values == sorted(values) and values[0] < values[-1]
