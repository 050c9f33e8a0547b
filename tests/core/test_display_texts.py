"""How figures read wherever they appear (docs/GUI.md, the 2026-12-04 walk at 1280 × 720): one
formatter in core.format per kind of figure, so the window, the command line, reports and the
formula text agree."""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu, find_model
from core.cli.render import render_serving
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.format import duration, grouped, latency, memory
from core.inputs import MP_DTYPE_LABELS
from core.plan import Hardware, MpDtype, Plan
from core.verdict import Mode


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.8404, "840 ms"), (9.9994, "9,999 ms"), (9.9996, "10.0 s"), (12.518874, "12.5 s"), (1234.5, "1,234.5 s")],
)
def test_a_wait_reads_in_seconds_past_ten(seconds: float, text: str) -> None:
    assert latency(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    # h55ux: the Compute & time parts of Llama-2 7B full at 1 × 256 on an A100 read 0.0987 s, 0.000287 s.
    [
        (0.0987, "98.7 ms"),
        (0.000287, "287 µs"),
        (0.0499, "49.9 ms"),
        (2.91, "2.91 s"),
        (0.0, "0 s"),
        (0.0009996, "1 ms"),
        (1234.6, "1,235 s"),
        # the extremes the Compute formula and the collectives' latency wrote in e-notation (docs/GUI.md,
        # 2026-12-07, left 3: "3.92e-05 s", "1e+03 s", "1.07e+03 ms")
        (3.92e-05, "39.2 µs"),
        (1e3, "1,000 s"),
        (1.07, "1.07 s"),
        # below a microsecond in ns, and no exponent however small (.3g wrote "1e-04 µs"); a negative time signed
        (1.2345e-9, "1.23 ns"),
        (1.23e-10, "0.123 ns"),
        (1e-13, "< 0.001 ns"),
        (-0.002, "−2 ms"),
        (float("nan"), "—"),
    ],
)
def test_a_step_part_reads_in_the_unit_of_its_size(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_latency_with_no_finite_value() -> None:
    assert latency(float("inf")) == "—"


def test_time_to_first_token_reads_the_same_in_every_text() -> None:
    # Hugging Face generate, 4 × 8,192-token requests of Llama 3.1 8B on an RTX 4090: the walk's
    # "12,519 ms" (the estimate's own figure, 12.52 s at this commit), now "12.5 s" everywhere.
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    est = estimate(plan.with_inference(engine="hf", context=8192, concurrent=4))
    shown = latency(est.inference.ttft_s)
    assert shown.endswith(" s") and est.inference.ttft_s > 10
    assert f"time to first token {shown}" in render_serving(est)
    assert f"with 4 requests sent together {shown}" in est.inference.speed.formula
    report = to_markdown(build_report([("hf", est.plan)], mode=Mode.INFERENCE))
    assert f"time to first token {shown}" in report
    for text in (render_serving(est), est.inference.speed.formula, report):
        assert "12,519 ms" not in text


def test_a_quoted_memory_size_is_grouped_as_ours_are() -> None:
    # resources/gpus.json: the RTX 4090's nvidia-smi memory.total, "24564 MiB (nvidia-smi)".
    assert grouped(find_gpu("rtx-4090").memory_reported) == "24,564 MiB (nvidia-smi)"
    assert grouped("6144 MiB = 2/3 of 16 GB, torch total 12.88 GB") == "6,144 MiB = 2/3 of 16 GB, torch total 12.88 GB"
    assert grouped("205,822,885,888 bytes") == "205,822,885,888 bytes"


def test_fsdp_as_stored_reads_as_words() -> None:
    # torch.distributed.fsdp.MixedPrecisionPolicy(param_dtype=None): keep the stored dtype.
    assert MP_DTYPE_LABELS[MpDtype.STORED] == "as stored (no cast)"


def test_held_on_the_card_says_what_the_verdict_judges_instead() -> None:
    # vLLM 0.19, 4 × 8,192 tokens of Llama 3.1 8B on an RTX 4090 (the walk's plan): 24.2 GB held
    # (card × gpu_memory_utilization 0.9 + context + CUDA graphs) above 21.2 GB needed at once.
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    vllm = estimate(plan.with_inference(engine="vllm", context=8192, concurrent=4)).inference
    assert vllm.footprint_bytes > vllm.total_bytes
    note = vllm.held_note("GiB")
    assert f"the {memory(vllm.total_bytes, 'GiB')} needed at once" in note and "gpu_memory_utilization" in note
    assert "in GiB as vLLM logs them" in vllm.formula
    hf = estimate(plan.with_inference(engine="hf", context=8192, concurrent=4)).inference
    assert hf.held_note() == ""  # generate holds what it needs: nothing to explain


def test_the_sums_follow_the_unit_picked() -> None:
    """h55ux: with GiB picked the Arithmetic tab read "Weights — 23.3 GiB" above "Weights: 17.1 + 2.10 + … =
    25.0 GB" and "The sum at the peak: … = 33.6 GB" under a banner in GiB (Llama 3.1 70B QLoRA, FSDP over
    2 × RTX 4090): the sums are now written in the unit picked, and in GB exactly as before."""
    from core.plan import Method, Strategy, Workload

    entry = find_model("llama-3.1-70b")
    plan = Plan(
        model=entry.spec,
        model_id=entry.id,
        method=Method.QLORA,
        checkpointing=True,
        workload=Workload(micro_batch=1, seq_len=2048),
        hardware=Hardware(gpu="rtx-4090"),
    ).on_gpus(2, Strategy.FSDP)
    est = estimate(plan)
    assert est.summary_in("GB") == est.summary_formula
    gib = est.summary_in("GiB")
    assert gib.endswith(f"= {est.peak_bytes / 2**30:.1f} GiB at the {est.peak_phase}") and " GB" not in gib
    for bucket in est.buckets:
        if len(bucket.terms) > 1:
            assert bucket.total_line("GB") == bucket.formula.splitlines()[-1]
            line = bucket.total_line("GiB")
            assert line.endswith(f" = {bucket.bytes / 2**30:.1f} GiB") or line.endswith(
                f" = {bucket.bytes / 2**30:.2f} GiB"
            )
    served = est.inference
    assert served.summary_in("GB") == served.summary_formula
    assert served.summary_in("GiB").endswith(" GiB needed at once")
