"""The detailed estimate against the committed measured peaks (benchmarks/accuracy/measured).

The measurements come from tools/measure: two real training steps of Hugging Face models
under PyTorch's FakeTensorMode on a fake CUDA device, peak allocated bytes as the caching
allocator's MemTracker counts them. Targets from issue 11, over every case old and new:
median |error| ≤ 1.0 %, worst ≤ 3 %. Nothing in the estimator is fitted per case.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.files.measurement import load_measurement
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "benchmarks" / "accuracy" / "measured"
CASES = ROOT / "benchmarks" / "accuracy" / "cases.json"
HOLDOUT = ROOT / "benchmarks" / "accuracy" / "cases_holdout.json"


def _benchmark():  # type: ignore[no-untyped-def]
    return load_script(ROOT / "benchmarks" / "accuracy.py", "accuracy_benchmark")


def test_every_case_has_a_committed_measurement() -> None:
    cases = json.loads(CASES.read_text())["cases"]
    assert len(cases) >= 25
    held_out = json.loads(HOLDOUT.read_text())["cases"]
    measured = {load_measurement(p).case_id for p in MEASURED.glob("*.json")}
    assert {c["id"] for c in cases + held_out} <= measured


def test_suite_covers_the_families_methods_and_precisions() -> None:
    cases = json.loads(CASES.read_text())["cases"]
    models = {c["model"].split("-")[0] for c in cases}
    assert {"gpt2", "llama", "mistral", "qwen2.5", "gemma"} <= models
    assert {c["method"] for c in cases} >= {"full", "lora", "frozen"}
    assert {c["precision"] for c in cases} >= {"fp32", "bf16-mixed", "bf16"}
    assert {c["attention"] for c in cases} >= {"eager", "sdpa"}
    assert {c["checkpointing"] for c in cases} == {True, False}


def test_detailed_estimate_meets_the_accuracy_targets() -> None:
    bench = _benchmark()
    table = bench.rows(MEASURED)
    median, worst = bench.summary(table)
    report = ", ".join(f"{r.case_id} {r.error_pct:+.2f}%" for r in sorted(table, key=lambda r: -abs(r.error_pct))[:3])
    assert median <= bench.MEDIAN_TARGET, f"median {median:.2f} %; worst cases: {report}"
    assert worst <= bench.WORST_TARGET, f"worst {worst:.2f} %; worst cases: {report}"


def test_no_measured_step_keeps_anything_past_its_end() -> None:
    # What the fixed measuring tool gives (tools.measure.runner.StepModTracker; selfcheck part 4: tracked = untracked
    # per phase): step 2's forward peak is step 1's plus the Adam moments step 1's optimizer made. Under torch's
    # stock ModTracker the checkpointed LoRA / frozen-layer files broke this by 1-4 × B·S·d, one FSDP2 LoRA rank too
    # (re-measured by branch h78remeas). A GradScaler's scale and growth tracker (torch/amp/grad_scaler.py
    # ``_lazy_init_scale_growth_tracker``, made in step 1, 512 B each after the allocator's rounding) are the only
    # other survivors.
    benchmarks = ROOT / "benchmarks"
    for folder in (MEASURED, benchmarks / "accuracy" / "measured_sac", benchmarks / "parallel" / "measured"):
        for path in sorted(folder.glob("*.json")):
            doc = json.loads(path.read_text())
            case = doc["case"]
            if case["optimizer"] not in ("adam", "adamw"):
                continue
            scaler = case.get("grad_scaler", case["precision"] == "fp16-mixed")
            peaks, moments = doc["phase_peaks"], doc["breakdown_at_peak"]["optimizer_state"]
            kept = peaks["step2"]["forward"] - peaks["step1"]["forward"] - moments
            assert kept == (2 * 512 if scaler else 0), (path.name, kept)
