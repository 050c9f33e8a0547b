"""PyTorch 2.14: SDPA's memory-efficient kernel takes grouped-query heads (core.training.attention.efficient_takes_gqa).

pytorch/pytorch PR 191085, in the 2.14.1 wheel (mem_eff_attention/kernel_forward.h and kernel_backward.h
``q_heads_per_kv``; tools/measure/release_check.py: 2.13.0's efficient op refuses grouped-query k / v in its backward,
2.14.1's returns their gradients at the k / v heads). Through 2.13 an ``enable_gqa`` call the flash kernel cannot
take (float32 inputs) ran the math kernel. The rest of what the estimator reads was diffed 2.13.0 → 2.14.1 and
re-measured byte for byte (docs/REAL_GPU_MEMORY.md "PyTorch 2.14 and 2.15, PEFT 0.19-0.21").

Shapes: Llama 3.2 1B's config.json (meta-llama/Llama-3.2-1B: 32 heads of 64, 8 key / value heads, 16 layers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import load_models
from core.cli.app import main
from core.errors import PlanFileError
from core.files.measurement import MEASURED_TORCH, load_measurement, measurement_from_dict, plan_for_case, torch_release
from core.inputs import TORCH_VERSION_LABELS, TorchVersion, flash_misses_gqa, input_at
from core.plan import Plan
from core.presets import plan_for_model
from core.training.activations import layer_activations
from core.training.attention import Kernel, backward_workspace, sdpa_kernel, sdpa_refused

B, S, H, KV, HD = 2, 1024, 32, 8, 64  # Llama 3.2 1B's heads (config.json), a small batch


def _plan(release: TorchVersion, preset: str = "fp32") -> Plan:
    plan = plan_for_model("llama-3.2-1b", preset=preset).with_workload(micro_batch=B, seq_len=S)
    return plan.with_hardware(torch_version=release)


def _labels(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items}


def test_the_newest_range_is_the_default_and_says_what_it_was_checked_through() -> None:
    field = input_at("hardware.torch_version")
    assert field.default is TorchVersion.V2_14 and list(TorchVersion)[-1] is TorchVersion.V2_14
    assert TORCH_VERSION_LABELS[TorchVersion.V2_8] == "2.8 – 2.13"
    assert TORCH_VERSION_LABELS[TorchVersion.V2_14] == "2.14 and later"
    assert "2.15" in field.tooltip  # the rules were read through 2.15; a later release needs a new look
    assert TorchVersion("2.8+") is TorchVersion.V2_8  # the value plan files saved before 2.14's rule


def test_float32_grouped_query_heads_leave_the_math_kernel_from_2_14() -> None:
    old, new = _plan(TorchVersion.V2_8), _plan(TorchVersion.V2_14)
    assert sdpa_kernel(old) is Kernel.MATH and sdpa_kernel(new) is Kernel.EFFICIENT
    before, after = _labels(old), _labels(new)
    assert before["math kernel: probabilities (float32)"] == B * H * S * S * 4
    assert not any(label.startswith("math kernel") for label in after)
    # the kernel keeps k and v at their own 8 heads (no repeat) and a log-sum-exp over ⌈S⌉32 rows
    assert after["k, v"] == 2 * B * S * KV * HD * 4
    assert sum(after.values()) < sum(before.values()) - B * H * S * S * 4 * 0.9


def test_the_2_14_backward_writes_k_and_v_gradients_at_every_query_head() -> None:
    # kernel_backward.h (2.14.1): grad_key_ptr / grad_value_ptr are [Mk, nHq, K], summed per group after the kernel;
    # the rest is the efficient backward's float32 delta [B, H, S].
    new = _plan(TorchVersion.V2_14)
    assert backward_workspace(new, 4.0) == B * H * S * 4 + 2 * B * S * H * HD * 4
    # with as many k / v heads as queries nothing is expanded
    mha = plan_for_model("gpt2", preset="fp32").with_workload(micro_batch=B, seq_len=S)
    gpt2_heads, gpt2_head_dim = 12, 64  # openai-community/gpt2 config.json: n_head 12, n_embd 768
    assert sdpa_kernel(mha) is Kernel.EFFICIENT
    assert backward_workspace(mha, 4.0) == B * gpt2_heads * S * 4
    assert mha.model.num_heads * mha.model.head_dim == gpt2_heads * gpt2_head_dim


def test_sixteen_bit_and_masked_calls_are_the_same_in_both_ranges() -> None:
    for release in (TorchVersion.V2_8, TorchVersion.V2_14):
        assert sdpa_kernel(_plan(release, "pure-bf16")) is Kernel.FLASH
    # Mistral 7B v0.1 (config.json: sliding_window 4096) at 4,096 tokens gets a mask: k and v are repeated first
    masked = plan_for_model("mistral-7b-v0.1", preset="fp32").with_workload(micro_batch=1, seq_len=4096)
    kernels = {sdpa_kernel(masked.with_hardware(torch_version=r)) for r in (TorchVersion.V2_8, TorchVersion.V2_14)}
    assert kernels == {Kernel.EFFICIENT}


@pytest.mark.parametrize("preset", ["fp32", "pure-bf16", "fp32-autocast-bf16"])
def test_the_release_is_shown_exactly_where_it_moves_the_kernel(preset: str) -> None:
    field = input_at("hardware.torch_version")
    for entry in load_models():
        if entry.spec.recurrent_mixer or entry.spec.kv_lora_rank:
            continue  # hybrids and latent attention train on their own attention code
        plan = plan_for_model(entry.id, preset=preset).with_workload(micro_batch=1, seq_len=512)
        if sdpa_refused(plan):
            continue
        moved = sdpa_kernel(plan.with_hardware(torch_version=TorchVersion.V2_8)) is not sdpa_kernel(
            plan.with_hardware(torch_version=TorchVersion.V2_14)
        )
        assert flash_misses_gqa(plan) == moved, entry.id
        if moved:
            assert field.matters(plan), entry.id


def test_measured_cases_are_estimated_under_the_release_they_ran() -> None:
    # Every stored measurement ran torch 2.13.0 (versions.torch) through tools/measure/sdpa.py's 2.8-2.13 choice:
    # Qwen2.5 0.5B in float32 (14 heads over 2 key / value heads, config.json) ran the math kernel there.
    measured = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"
    path = measured / "qwen25-05b-full-fp32-adamw-sdpa-b2-s512.json"
    assert json.loads(path.read_text())["versions"]["torch"] == "2.13.0+cpu"
    measured_doc = load_measurement(path)
    assert measured_doc.torch_version is MEASURED_TORCH is TorchVersion.V2_8
    plan = plan_for_case(measured_doc.case, None, measured_doc.torch_version)
    assert plan.hardware.torch_version is TorchVersion.V2_8
    assert sdpa_kernel(plan) is Kernel.MATH
    # The same case measured under 2.14 (tools/measure/sdpa.py follows the installed release) is estimated under
    # 2.14's rule: the memory-efficient kernel. The release is each file's, not a fixed one.
    doc = json.loads(path.read_text())
    later = measurement_from_dict({**doc, "versions": {**doc["versions"], "torch": "2.14.1+cu130"}})
    assert later.torch_version is TorchVersion.V2_14
    assert sdpa_kernel(plan_for_case(later.case, None, later.torch_version)) is Kernel.EFFICIENT


@pytest.mark.parametrize(
    ("recorded", "release"),
    [
        ("2.13.0+cpu", TorchVersion.V2_8),
        ("2.8.0", TorchVersion.V2_8),
        ("2.7.1+cu126", TorchVersion.V2_5_TO_2_7),
        ("2.4.0", TorchVersion.V2_4),
        ("2.2.2", TorchVersion.V2_1_TO_2_3),
        ("2.0.1", TorchVersion.V2_0),
        ("2.15.0.dev20270101", TorchVersion.V2_14),
        (None, MEASURED_TORCH),  # a file without versions: what every stored measurement ran
    ],
)
def test_a_measurement_reads_the_release_it_recorded(recorded: str | None, release: TorchVersion) -> None:
    versions = {"torch": recorded} if recorded else None
    assert torch_release({"versions": versions}) is release


def test_a_release_that_is_not_one_is_refused_by_name() -> None:
    with pytest.raises(PlanFileError, match="versions.torch"):
        torch_release({"versions": {"torch": "nightly"}}, "x.json")


def test_the_old_spelling_2_8_plus_still_reads_as_the_rules_it_named(capsys: pytest.CaptureFixture[str]) -> None:
    # "2.8+" was the newest range's value until 2.14 split it (this change): a script passing it keeps working, as
    # the plan files that say so do, under the 2.8-2.13 rules it was written against.
    args = ["estimate", "--model", "llama-3.2-1b", "--precision", "fp32", "-b", str(B), "-s", str(S), "--json"]
    figures = {}
    for spelling in ("2.8+", "2.8-2.13", "2.14+"):
        assert main([*args, "--torch-version", spelling]) == 0
        figures[spelling] = json.loads(capsys.readouterr().out)["judgement"]["total_bytes"]
    assert figures["2.8+"] == figures["2.8-2.13"] != figures["2.14+"]
    assert main([*args, "--torch-version", "2.9"]) == 2  # not a range: refused with the choices
    assert "choose from" in capsys.readouterr().err
