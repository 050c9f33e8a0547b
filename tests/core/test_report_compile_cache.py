"""The report's and the comparison's serving inputs name vLLM's compile cache (h97rem; the input is h94cold's).

``inference.compile_cache`` moves a vLLM V1 plan's KV pool (a cold start's compile inside the profile run,
core.serving.fit COLD_COMPILE_PEAK), yet two plans that differed only there read alike in the input table. The row is
shown where the input applies (core.inputs' ``matters``: vLLM V1 lines, 0.8 on, with CUDA graphs; --enforce-eager
compiles nothing) and reads "—" for the plans beside them where it does not; a table with no such plan has no row.
Each test failed before (no "compile_cache" row).
"""

from __future__ import annotations

from core.advice.compare import compare
from core.files.report import build_report, to_markdown
from core.plan import Plan
from core.presets import plan_for_model
from core.verdict import Mode


def _served(**inference: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090")
    return plan.with_inference(**{"engine": "vllm", "context": 4096, **inference})


def _row(plans: list[Plan]) -> tuple[object, ...] | None:
    rows = compare([(str(i), p) for i, p in enumerate(plans)], mode=Mode.INFERENCE).rows()
    return next((r.values for r in rows if r.key == "compile_cache"), None)


def test_warm_and_cold_plans_differ_in_the_input_table() -> None:
    values = _row([_served(), _served(compile_cache="cold")])
    assert values == ("warm (a restart)", "cold (first start)")


def test_where_it_does_not_apply_it_reads_a_dash() -> None:
    values = _row([_served(compile_cache="cold"), _served(engine="sglang"), _served(cuda_graphs=False)])
    assert values == ("cold (first start)", "—", "—")  # SGLang; vLLM under --enforce-eager


def test_no_row_without_a_plan_it_applies_to() -> None:
    assert _row([_served(engine="sglang"), _served(vllm_version="0.6")]) is None  # SGLang; vLLM V0


def test_the_report_shows_it() -> None:
    plans = [("warm", _served()), ("cold", _served(compile_cache="cold"))]
    report = to_markdown(build_report(plans, mode=Mode.INFERENCE))
    assert "Compile cache (vLLM)" in report and "cold (first start)" in report
