"""Memory other processes hold on each GPU (issue 23, "consumer cards"; hardware.held_by_others): each
engine applies it as its own source does (docs/SERVING.md, "Memory other processes hold")."""

from __future__ import annotations

import json
import math

import pytest

from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate, gpu_for
from core.files import planfile
from core.plan import Engine, OllamaVersion, Plan
from core.presets import default_plan, plan_for_model
from core.runtime import CUDA_CONTEXT_BYTES
from core.serving.engines import rank_layout, sglang_fraction, vllm_starting_utilization
from core.serving.llamacpp_fit import llamacpp_fit
from core.serving.ollama import ollama_plan
from core.serving.vllm_rules import vllm_total_memory
from core.units import GiB


def _served(gpu: str, held_gib: float, **inference: object) -> Plan:
    plan = plan_for_model("llama-3.1-8b").with_hardware(gpu=gpu, held_by_others=held_gib * GiB)
    return plan.with_inference(**inference)


# ---- SGLang -------------------------------------------------------------------------------------------
def test_sglang_pool_shrinks_by_the_fraction_of_what_others_hold() -> None:
    # profile_max_num_token: (free at start − held) × mem_fraction_static − weights (sgl-project/sglang
    # 001ccef0 model_runner_kv_cache_mixin.py); both free readings lose what others hold. 1 GiB held on an
    # H100 (the plan's card; 1 GiB: a desktop session's share, any value shows the rule).
    base = _served("h100-sxm", 0.0, engine="sglang", context=4096)
    held = _served("h100-sxm", 1.0, engine="sglang", context=4096)
    layout = rank_layout(base)
    cell = layout.kv_token_layer_bytes * layout.layers
    fraction = sglang_fraction(base.inference, gpu_for(base))
    lost = estimate(base).inference.kv_cache_tokens - estimate(held).inference.kv_cache_tokens
    assert abs(lost - fraction * GiB / cell) <= 1  # tokens round down on each side
    assert "1.00 GiB other processes hold" in estimate(held).inference.formula


def test_sglang_refuses_to_start_when_what_others_hold_empties_its_pool() -> None:
    # profile_max_num_token raises "Not enough memory. Please try to increase --mem-fraction-static." on a
    # pool of no token (sgl-project/sglang 001ccef0). Llama 3.1 8B on an RTX 4090 at SGLang's default
    # fraction holds tokens alone; 3 GiB held (the screenshot's plan, docs/SERVING.md) leave none.
    assert estimate(_served("rtx-4090", 0.0, engine="sglang", context=4096)).inference.refusal == ""
    served = estimate(_served("rtx-4090", 3.0, engine="sglang", context=4096)).inference
    assert served.kv_cache_tokens == 0 and served.refusal.startswith('SGLang refuses to start: "Not enough memory')
    assert "3.00 GiB other processes hold" in served.refusal and served.none_served == served.refusal


# ---- vLLM ---------------------------------------------------------------------------------------------
def test_vllm_v1_refuses_to_start_with_its_own_rule_and_the_utilisation_that_would_start() -> None:
    # vllm/v1/worker/gpu_worker.py init_device (0.9.1 on): free at init < utilisation × total raises
    # "Free memory on device ... is less than desired GPU memory utilization". 3 GiB held on an RTX 4090
    # at vLLM 0.19's default 0.9 (core.serving.vllm_versions).
    plan = _served("rtx-4090", 3.0, engine="vllm", vllm_version="0.19", context=4096)
    served = estimate(plan).inference
    total = vllm_total_memory(gpu_for(plan))
    free = total - CUDA_CONTEXT_BYTES - 3 * GiB
    assert free < 0.9 * total
    would = math.floor(free / total * 1000) / 1000
    assert served.refusal.startswith('vLLM 0.19 refuses to start: "Free memory on device')
    assert f"--gpu-memory-utilization {would:.3f} or less" in served.refusal
    assert served.kv_cache_tokens == 0 and served.max_concurrent == 0 and served.verdict.value == "oom"
    assert served.kv_cache_bytes == 0 and served.peak_bytes == served.weights_bytes + served.activation_bytes
    assert served.formula == served.refusal and served.none_served == served.refusal
    # The figure judged is what vLLM asks for at start: utilisation × total and its CUDA context.
    assert served.total_bytes == pytest.approx(0.9 * total + CUDA_CONTEXT_BYTES)
    assert sum(b.bytes for b in served.buckets) == pytest.approx(served.total_bytes)
    # No pool, so no KV cache in the chart (it showed the 256 blocks the request would have taken).
    kv = next(b for b in served.buckets if b.key.value == "kv_cache")
    assert kv.bytes == 0 and kv.note == "no pool: vLLM does not start"
    # At the utilisation it names, the same card starts, and V1's pool is what it is with nothing held:
    # non-torch memory is the increase over the baseline taken at init (0.10 on).
    started = estimate(plan.with_inference(gpu_memory_utilization=would)).inference
    alone = estimate(plan.with_inference(gpu_memory_utilization=would).with_hardware(held_by_others=0.0)).inference
    assert started.refusal == "" and started.kv_cache_tokens == alone.kv_cache_tokens > 0


def test_the_diagnosis_names_the_refusal_and_offers_the_utilisation_that_starts() -> None:
    from core.advice.diagnosis import diagnose
    from core.advice.remedies import RemedyKind
    from core.verdict import Mode

    plan = _served("rtx-4090", 3.0, engine="vllm", vllm_version="0.19", context=4096)
    found = diagnose(plan, Mode.INFERENCE)
    assert found.explanation == estimate(plan).inference.refusal
    lower = next(r for r in found.remedies if r.kind is RemedyKind.STARTING_UTILIZATION)
    would = vllm_starting_utilization(plan, gpu_for(plan))
    assert lower.fits and would is not None and lower.plan.inference.gpu_memory_utilization == would


def test_vllm_0_8_counts_what_others_hold_as_its_non_torch_memory() -> None:
    # 0.8 - 0.9: non_torch = (total − free) − torch allocated (vllm 0012cf69 gpu_worker.py
    # determine_available_memory; PR #19312), and 0.8 has no start-up check: the pool loses 2 GiB.
    base = estimate(_served("h100-sxm", 0.0, engine="vllm", vllm_version="0.8", context=4096)).inference
    held = estimate(_served("h100-sxm", 2.0, engine="vllm", vllm_version="0.8", context=4096)).inference
    assert held.refusal == ""
    assert held.non_torch_bytes - base.non_torch_bytes == 2 * GiB
    block = base.kv_cache_bytes / (base.kv_cache_tokens / 16)  # 16-token blocks (0.8's block size)
    assert abs((base.kv_cache_bytes - held.kv_cache_bytes) - 2 * GiB) < block


def test_vllm_v0_neither_shrinks_nor_refuses() -> None:
    # V0's memory_profiling measures from a baseline taken at init (PR #10511 / #12126), and V0 has no
    # start-up check: 2 GiB held leave the pool as it was.
    base = estimate(_served("h100-sxm", 0.0, engine="vllm", vllm_version="0.7", context=4096)).inference
    held = estimate(_served("h100-sxm", 2.0, engine="vllm", vllm_version="0.7", context=4096)).inference
    assert held.refusal == "" and held.kv_cache_tokens == base.kv_cache_tokens


# ---- Ollama and llama.cpp ----------------------------------------------------------------------------
@pytest.mark.parametrize("line", [OllamaVersion.V0_5, OllamaVersion.V0_15_5, OllamaVersion.V0_30])
def test_ollama_places_fewer_layers_when_others_hold_memory(line: OllamaVersion) -> None:
    # Ollama fits layers into each GPU's free memory (llm/memory.go, llm/server.go createLayout; from
    # 0.30 llama.cpp's --fit): 6 GiB held of an RTX 3060's 12 GB leave room for fewer than all 33.
    def layers(held: float) -> int:
        plan = _served("rtx-3060-12gb", held, engine="llamacpp", ollama_version=line)
        ran, _ = ollama_plan(plan, gpu_for(plan))
        return ran.inference.gpu_layers

    assert layers(0.0) == 33 and layers(6.0) < 33


def test_llamacpps_own_fit_reads_the_free_memory() -> None:
    # common/fit.cpp: each device's use at most free − fit target; free loses what others hold.
    plan = _served("rtx-3060-12gb", 0.0, engine="llamacpp", gpu_layers=-1, ollama_version="none")
    held = plan.with_hardware(held_by_others=6 * GiB)
    assert llamacpp_fit(held, gpu_for(held)).gpu_layers < llamacpp_fit(plan, gpu_for(plan)).gpu_layers


# ---- the verdict's capacity ---------------------------------------------------------------------------
def test_training_and_generate_judge_against_the_card_less_what_others_hold() -> None:
    plan = default_plan()
    held = plan.with_hardware(held_by_others=4 * GiB)
    assert estimate(plan).capacity_bytes - estimate(held).capacity_bytes == 4 * GiB
    hf = held.with_inference(engine=Engine.HF)
    assert estimate(hf).serving_capacity_bytes == estimate(plan).capacity_bytes - 4 * GiB


# ---- the input: file, command line, bad values -------------------------------------------------------
def test_plan_file_round_trip_and_an_older_file_reads_as_nothing_held() -> None:
    plan = default_plan().with_hardware(held_by_others=1.5 * GiB)
    assert planfile.loads(planfile.dumps(plan)) == plan
    doc = json.loads(planfile.dumps(default_plan()))
    del doc["plan"]["hardware"]["held_by_others"]
    assert planfile.plan_from_dict(doc).hardware.held_by_others == 0.0


def test_bad_values_are_refused_with_the_reason() -> None:
    with pytest.raises(PlanError, match=r"hardware\.held_by_others.*bytes from 0"):
        default_plan().with_hardware(held_by_others=-1.0)
    # The command line's "-1" (GiB) read back as "-1073741824.0 is not allowed" alone: the GiB typed is said.
    with pytest.raises(PlanError, match=r"\(-1\.00 GiB\)$"):
        default_plan().with_hardware(held_by_others=-1.0 * GiB)
    # An A100 80GB reports 81,920 MiB (80.00 GiB: resources/gpus.json): 80 GiB held leave nothing.
    with pytest.raises(PlanError, match=r"less than the card's 80\.00 GiB.*leaves the run nothing"):
        default_plan().with_hardware(held_by_others=80 * GiB)
    doc = json.loads(planfile.dumps(default_plan()))
    doc["plan"]["hardware"]["held_by_others"] = 100 * GiB
    with pytest.raises(PlanError, match="held_by_others"):
        planfile.plan_from_dict(doc)


def test_the_command_line_takes_gib_and_json_gives_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--mode", "inference", "--engine", "vllm"]
    assert main([*argv, "--held-by-others", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["held_by_others_bytes"] == 3 * GiB
    assert out["inference"]["refusal"].startswith("vLLM 0.19 refuses to start")


def test_an_engine_that_serves_no_request_queues_none(capsys: pytest.CaptureFixture[str]) -> None:
    # The SGLang refusal above (3 GiB held on an RTX 4090): no request runs, so none "waits in the queue"
    # (the banner read "⚠ 1 request wait in the queue" beside SGLang's refusal), and the command line's
    # verdict says why an out-of-memory total sits under the usable memory.
    served = estimate(_served("rtx-4090", 3.0, engine="sglang", context=4096)).inference
    assert served.max_concurrent == 0 and served.queued == 0
    assert (
        main(
            [
                "estimate",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "rtx-4090",
                "--mode",
                "inference",
                "--engine",
                "sglang",
                "--context",
                "4096",
                "--held-by-others",
                "3",
            ]
        )
        == 0
    )
    verdict = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  Out of memory"))
    assert verdict.endswith("the card holds the total, but no request fits")


def test_the_speed_of_a_plan_that_runs_no_request_says_it_is_hypothetical() -> None:
    # The SGLang refusal above printed "time to first token 870 ms; 1 request decodes at 55 tokens/s" (the words
    # then) with nothing said; a plan that runs its requests says nothing more.
    refused = estimate(_served("rtx-4090", 3.0, engine="sglang", context=4096)).inference
    running = estimate(_served("rtx-4090", 0.0, engine="sglang", context=4096)).inference
    assert refused.speed_note.startswith("No request of this plan runs") and running.speed_note == ""
