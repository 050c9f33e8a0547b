"""vLLM's cold torch.compile inside its memory profile: the plan-level warning (issue 23).

Every V1 release line compiles the model on its first forward, which is the profile run that sizes
the KV cache (core.serving.vllm_versions.COLD_COMPILE_IN_PROFILE_FROM: read in the wheels 0.8.5 to
0.34.0), so a start whose compile cache is cold charges the compiler's scratch and kernels to the
pool. The figure is the one published pair of starts that differ only in the compile cache.
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.plan import Engine, Plan, VllmVersion
from core.presets import plan_for_model
from core.serving.vllm_versions import COLD_COMPILE_SEEN_GIB, compiles_in_profile
from core.verdict import Mode

COLD = "cold compile cache"


def _plan(version: str = "0.29", **inference: object) -> Plan:
    """As many requests of 2,048 tokens as the warm pool holds at once: a cold start serves fewer."""
    # Qwen2.5-3B, the model of the pair: 36 layers, 2 KV heads of 128 (its config.json, quoted in
    # Tegdam/pickr_ai bench/docs/p0b-engine-verification.md @54ed83a), so 36,864 bf16 KV bytes a token.
    plan = plan_for_model("qwen2.5-3b").with_hardware(gpu="rtx-4090")
    plan = plan.with_inference(engine="vllm", vllm_version=version, context=2048, **inference)
    return plan.with_inference(concurrent=max(1, estimate(plan).inference.max_concurrent))


def _cold(plan: Plan) -> list[str]:
    return [text for text in estimate(plan).warnings_for(Mode.INFERENCE) if COLD in text]


def test_the_figure_is_the_published_pairs_difference() -> None:
    # Tegdam/pickr_ai tests/bench/runner/test_enginelog.py @641ea05, vLLM 0.29.0's own split:
    # cold "2.63 GiB for consumed memory ... 0.67 GiB for peak activation", warm 2.1 and 0.22.
    assert round((2.63 - 2.10) + (0.67 - 0.22), 2) == COLD_COMPILE_SEEN_GIB


def test_a_vllm_v1_plan_is_warned_with_the_tokens_the_cold_compile_can_cost() -> None:
    (text,) = _cold(_plan())
    # 0.98 GiB over 36 x 2 x 2 x 128 x 2 bytes a token: 28,545 tokens of Qwen2.5-3B.
    assert f"about {round(0.98 * 2**30 / 36_864):,} fewer KV tokens" in text  # 28,545
    assert "vLLM 0.29" in text and "warm compile cache does not" in text
    served = estimate(_plan()).inference
    left = int(served.max_concurrent * (served.kv_cache_tokens - 0.98 * 2**30 / 36_864) / served.kv_cache_tokens)
    assert f"then about {left:,} of the {served.max_concurrent:,} requests fit at once" in text
    # Tensor parallel 2 leaves each rank one KV head: twice the tokens in the same bytes.
    assert f"about {round(0.98 * 2**30 / 18_432):,} fewer KV tokens" in _cold(_plan(tensor_parallel=2))[0]
    assert not any(COLD in w for w in estimate(_plan()).warnings_for(Mode.TRAINING))


def test_every_v1_line_compiles_in_the_profile_and_v0_does_not() -> None:
    # V1 (0.8 on) compiles by default (vllm 0.8.5 vllm/config.py: CompilationLevel.PIECEWISE under
    # VLLM_USE_V1); V0's CompilationConfig.level defaults to 0, no compile.
    lines = list(VllmVersion)
    v1 = lines[lines.index(VllmVersion.V0_8) :]
    assert all(compiles_in_profile(line) for line in v1)
    assert not any(compiles_in_profile(line) for line in lines[: lines.index(VllmVersion.V0_8)])
    assert all(_cold(_plan(line.value)) for line in (VllmVersion.V0_8, VllmVersion.V0_19, VllmVersion.V0_34))
    assert not _cold(_plan("0.7")) and not _cold(_plan("0.6"))


@pytest.mark.parametrize("engine", [Engine.SGLANG, Engine.HF, Engine.LLAMACPP])
def test_other_engines_and_a_mac_get_no_cold_compile_warning(engine: Engine) -> None:
    assert not _cold(_plan().with_inference(engine=engine))
    assert not _cold(_plan().with_hardware(gpu="apple-m1-max-64gb"))


def test_the_warning_reaches_the_command_line_and_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "qwen2.5-3b", "--gpu", "rtx-4090", "--mode", "inference"]
    args += ["--engine", "vllm", "--vllm-version", "0.29", "--context", "2048"]
    args += ["--concurrent", str(_plan().inference.concurrent)]  # all the warm pool holds
    assert main(args) == 0
    assert "warning: vLLM 0.29 compiles the model" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert any(COLD in w for w in json.loads(capsys.readouterr().out)["warnings"])
    report = to_markdown(build_report([("p", _plan())], mode=Mode.INFERENCE, generated="2026-12-05T00:00:00Z"))
    assert any(line.startswith("- Note: vLLM 0.29 compiles") for line in report.splitlines())


def test_a_plan_with_room_for_the_cold_start_is_not_warned() -> None:
    # One request of 2,048 tokens on the same card: a cold start's 28,545 fewer tokens still hold it.
    roomy = _plan().with_inference(concurrent=1)
    assert estimate(roomy).inference.kv_cache_tokens - 28_545 > 2048
    assert not _cold(roomy)
