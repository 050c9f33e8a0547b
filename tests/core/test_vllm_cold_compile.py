"""vLLM's cold torch.compile inside its memory profile: the plan's compile cache and the warning (issue 23).

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
from core.files.launch.serve_command import read_command
from core.files.launch.vllm import export_vllm, read_vllm
from core.files.planfile import dumps, loads
from core.files.report import build_report, to_markdown
from core.inputs import input_at
from core.plan import CompileCache, Engine, Plan, VllmVersion
from core.presets import plan_for_model
from core.serving.fit import COLD_COMPILE_PEAK, DEFAULT_FIT
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
    # The fitted cold-compile term (core.serving.fit COLD_COMPILE_PEAK, 0.55 GiB: the median of five cold starts,
    # benchmarks/realgpu/serving.py cold_observations) over 36 x 2 x 2 x 128 x 2 bytes a token of Qwen2.5-3B.
    cold = DEFAULT_FIT.vllm_cold_compile_bytes[COLD_COMPILE_PEAK]
    assert cold == pytest.approx(0.55 * 2**30)
    assert f"about {round(cold / 36_864):,} fewer KV tokens" in text  # 16,020
    assert "vLLM 0.29" in text and "planned warm" in text and "warm compile cache does not" in text
    served = estimate(_plan()).inference
    left = int(served.max_concurrent * (served.kv_cache_tokens - cold / 36_864) / served.kv_cache_tokens)
    assert f"then about {left:,} of the {served.max_concurrent:,} requests fit at once" in text
    # Tensor parallel 2 leaves each rank one KV head: twice the tokens in the same bytes (1,024 sequences allowed:
    # at the default 256, the warm pool's 512 requests are capped there and a cold start still runs all 256).
    assert not _cold(_plan(tensor_parallel=2))
    assert f"about {round(cold / 18_432):,} fewer KV tokens" in _cold(_plan(tensor_parallel=2, max_num_seqs=1024))[0]
    assert not any(COLD in w for w in estimate(_plan()).warnings_for(Mode.TRAINING))


def test_a_plan_planned_cold_holds_the_term_and_is_not_warned() -> None:
    # --compile-cache cold: the estimate's pool loses the term itself (its profiled peak holds it, a term of its own
    # in the breakdown), so the sentence that says what a cold start would cost goes.
    warm = _plan()
    cold = warm.with_inference(compile_cache=CompileCache.COLD)
    assert not _cold(cold)
    lost = estimate(warm).inference.kv_cache_bytes - estimate(cold).inference.kv_cache_bytes
    # whole 16-token blocks of 36 layers x 2,048 bytes a layer-token (Qwen2.5-3B: 2 KV heads of 128, bf16)
    assert lost == pytest.approx(DEFAULT_FIT.vllm_cold_compile_bytes[COLD_COMPILE_PEAK], abs=16 * 36_864)
    assert "(with a cold torch.compile's 0.55)" in estimate(cold).inference.formula
    assert "cold torch.compile" not in estimate(warm).inference.formula
    labels = [t.label for b in estimate(cold).inference.buckets for t in b.terms]
    assert "cold torch.compile" in labels and "cold torch.compile" not in [
        t.label for b in estimate(warm).inference.buckets for t in b.terms
    ]


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
    # One request of 2,048 tokens on the same card: a cold start's 16,020 fewer tokens still hold it.
    roomy = _plan().with_inference(concurrent=1)
    assert estimate(roomy).inference.kv_cache_tokens - 16_020 > 2048
    assert not _cold(roomy)


# --- the plan input (inference.compile_cache): plan files, the command line, vllm serve ---------------------------
def test_plan_files_keep_the_compile_cache_and_old_files_plan_warm() -> None:
    cold = _plan().with_inference(compile_cache=CompileCache.COLD)
    assert loads(dumps(cold)).inference.compile_cache is CompileCache.COLD
    document = json.loads(dumps(_plan()))
    del document["plan"]["inference"]["compile_cache"]  # a file written before h94cold
    assert loads(json.dumps(document)).inference.compile_cache is CompileCache.WARM


def test_the_command_line_takes_the_compile_cache(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "qwen2.5-3b", "--gpu", "rtx-4090", "--mode", "inference", "--json"]
    args += ["--engine", "vllm", "--vllm-version", "0.29", "--context", "2048"]
    tokens = {}
    for cache in ("warm", "cold"):
        assert main([*args, "--compile-cache", cache]) == 0
        tokens[cache] = json.loads(capsys.readouterr().out)["inference"]["kv_cache_tokens"]
    # Qwen2.5-3B: 36,864 bytes a token (36 layers x 2 KV heads of 128, bf16): the 0.55 GiB term, to the 16-token block.
    assert tokens["warm"] - tokens["cold"] == pytest.approx(0.55 * 2**30 / 36_864, abs=16)
    assert main([*args, "--compile-cache", "lukewarm"]) != 0
    assert "compile-cache" in capsys.readouterr().err


def test_vllm_serve_writes_and_reads_the_disabled_compile_cache() -> None:
    # vllm/envs.py (every release 0.6.6 - 0.34.0): VLLM_DISABLE_COMPILE_CACHE read as bool(int(value)); set, no
    # compiled artefact is loaded (0.33.0 vllm/compilation/decorators.py), so every start compiles cold.
    cold = _plan().with_inference(compile_cache=CompileCache.COLD)
    text = export_vllm(cold).text
    assert "VLLM_DISABLE_COMPILE_CACHE=1 vllm serve" in text and "cold compile cache" in text
    assert "VLLM_DISABLE_COMPILE_CACHE" not in export_vllm(_plan()).text
    assert read_vllm(text)[1]["inference.compile_cache"] is CompileCache.COLD
    assert read_vllm("VLLM_DISABLE_COMPILE_CACHE=0 vllm serve Qwen/Qwen2.5-3B")[1]["inference.compile_cache"] is (
        CompileCache.WARM
    )
    # Where the cache lives says nothing of whether a start finds it: listed, the plan's setting untouched.
    read = read_command("VLLM_CACHE_ROOT=/data/vllm-cache vllm serve Qwen/Qwen2.5-3B")
    assert "inference.compile_cache" not in read.fields
    assert any("VLLM_CACHE_ROOT" in note.words and "--compile-cache" in note.why for note in read.unexpressed)
    unknown = read_command("VLLM_DISABLE_COMPILE_CACHE=yes vllm serve Qwen/Qwen2.5-3B").unknown
    assert "not an integer" in " ".join(unknown)


def test_the_compile_cache_is_offered_on_v1_with_cuda_graphs_only() -> None:
    offered = input_at("inference.compile_cache").matters
    assert offered(_plan()) and offered(_plan("0.8"))
    assert not offered(_plan("0.7"))  # V0 compiles nothing by default
    assert not offered(_plan().with_inference(cuda_graphs=False))  # --enforce-eager compiles nothing
    assert not offered(_plan().with_inference(engine=Engine.SGLANG))
    # and an unseen cold setting changes nothing there
    eager = _plan().with_inference(cuda_graphs=False)
    assert estimate(eager).inference.kv_cache_tokens == (
        estimate(eager.with_inference(compile_cache=CompileCache.COLD)).inference.kv_cache_tokens
    )
