"""vLLM's "No available memory for the cache blocks" and SGLang's empty token pool, refused at start-up (h95ui).

Where the weights, the profile run's peak and the memory outside torch take all of gpu_memory_utilization × the
card, vLLM raises at start-up, every release modelled: V0 (0.6 - 0.7) ``raise_if_cache_size_invalid`` ("if not
is_attention_free and num_gpu_blocks <= 0"; vllm 0.6.6.post1 wheel vllm/worker/worker.py line 492), V1
``_check_enough_kv_cache_memory`` ("if available_memory <= 0"; vllm 0.8.5 wheel vllm/v1/core/kv_cache_utils.py line
526, vllm 0.19.0 wheel line 625, vllm 0.33.0 wheel vllm/v1/core/kv_cache_planning.py line 56) and 0.34 (vllm 0.34.0
wheel vllm/v1/core/kv_cache_planning.py line 106, with ``_more_kv_cache_memory_hint``'s extensible-cache hint). The
estimate said only "Out of memory ... no request fits": no refusal, nothing in ``start_refusals``. Each test below
failed before (RefusalKind had no NO_CACHE_BLOCKS; SGLang's pool emptied by its own weights had no refusal). SGLang
raises "Not enough memory. Please try to increase --mem-fraction-static." whenever ``max_total_num_tokens <= 0``
(sglang 0.5.23 wheel, sglang/srt/model_executor/pool_configurator.py ``__post_init__``), the weights alone emptying
it too.

Llama 3.1 8B's bf16 weights are 14.96 GiB (the estimate's figure, as vLLM logs it; 8.03 B parameters,
https://huggingface.co/meta-llama/Llama-3.1-8B): more than 0.6 × an RTX 4090's 23.57 GiB, less than the card, so the
weights load and no block is left. Llama 3.1 70B's (141 GB in bf16, https://huggingface.co/meta-llama/Llama-3.1-70B)
do not load on a 24 GB card at all: CUDA runs out while loading, before vLLM's check, and no refusal is said.
"""

from __future__ import annotations

import json

import pytest

from core.advice.diagnosis import diagnose
from core.cli.app import main
from core.estimate import estimate
from core.files.report import build_report, to_markdown
from core.plan import Plan
from core.presets import plan_for_model
from core.serving.engines import VLLM_NO_BLOCKS
from core.serving.vllm_versions import VllmVersion
from core.start_refusal import RefusalKind
from core.verdict import Mode, Verdict

SHARE = 0.6  # a gpu_memory_utilization under the weights' share of a 4090 (14.96 / 23.57 GiB = 0.635, above)


def _on_4090(model: str = "llama-3.1-8b", **inference: object) -> Plan:
    plan = plan_for_model(model).with_hardware(gpu="rtx-4090")
    return plan.with_inference(**{"engine": "vllm", "context": 4096, **inference})


# The sentence's end by release, read in each wheel's vllm/v1/core/kv_cache_utils.py (h97rem): 0.12.0 (commit
# 4fd9d6a85) line 687 ends at "engine."; 0.13.0 (72506c983) line 688 and 0.21.0 (ad7125a43) line 697 add the "See ..."
# sentence; 0.22.0 (0b3ba88f1) line 699 and 0.32.0 (5df63a720) line 1011 put the CPU-backend aside before it.
SEE = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
CPU = " (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
ENDINGS = {
    VllmVersion.V0_6: ".",
    VllmVersion.V0_8: ".",
    VllmVersion.V0_12: ".",
    VllmVersion.V0_13: f".{SEE}",
    VllmVersion.V0_19: f".{SEE}",
    VllmVersion.V0_21: f".{SEE}",
    VllmVersion.V0_22: f"{CPU}.{SEE}",
    VllmVersion.V0_33: f"{CPU}.{SEE}",
}


@pytest.mark.parametrize("version", list(ENDINGS))
def test_no_block_is_vllms_refusal_in_its_words(version: VllmVersion) -> None:
    plan = _on_4090(vllm_version=version, gpu_memory_utilization=SHARE)
    inf = estimate(plan).inference
    assert inf.kv_cache_tokens == 0  # the case: no block
    assert [r.kind for r in inf.refusals] == [RefusalKind.NO_CACHE_BLOCKS]
    assert inf.verdict is Verdict.OOM  # a memory refusal stays the memory's verdict (core.verdict)
    said = inf.would_not_start
    assert said.startswith(f'vLLM {version.value} would not start: "{VLLM_NO_BLOCKS}{ENDINGS[version]}"')
    assert inf.refusal == said and "--gpu-memory-utilization above" in said and " …" not in said


def test_vllm_034_says_its_extensible_caches_hint() -> None:
    inf = estimate(_on_4090(vllm_version=VllmVersion.V0_34, gpu_memory_utilization=SHARE)).inference
    assert [r.kind for r in inf.refusals] == [RefusalKind.NO_CACHE_BLOCKS]
    assert '"No available memory for the cache blocks. The KV cache gets what is left after the model and its ' in (
        inf.would_not_start
    )
    assert "`gpu_memory_utilization`=0.6; increase it" in inf.would_not_start


def test_every_view_of_core_says_it(capsys: pytest.CaptureFixture[str]) -> None:
    plan = _on_4090(gpu_memory_utilization=SHARE)
    words = estimate(plan).inference.would_not_start
    diagnosis = diagnose(plan, Mode.INFERENCE)
    assert diagnosis.outcome.head == "Fails at start-up" and diagnosis.explanation.startswith(words)
    report = to_markdown(build_report([("plan", plan)], mode=Mode.INFERENCE))  # Markdown escapes its backquotes
    assert 'vLLM 0.19 would not start: "No available memory for the cache blocks.' in report
    args = ["estimate", "--mode", "inference", "--model", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "vllm"]
    assert main([*args, "--context", "4096", "--gpu-memory-utilization", str(SHARE), "--json"]) == 0
    served = json.loads(capsys.readouterr().out)["inference"]
    assert [r["kind"] for r in served["start_refusals"]] == ["no-cache-blocks"]
    assert served["would_not_start"] == words


def test_weights_past_the_card_are_cudas_out_of_memory_not_vllms_check() -> None:
    inf = estimate(_on_4090("llama-3.1-70b")).inference
    assert inf.verdict is Verdict.OOM and inf.refusals == ()


def test_a_pool_with_blocks_is_not_this_refusal() -> None:
    inf = estimate(_on_4090()).inference  # 0.9 of the card: about 5 GiB of blocks (tests/core/test_vllm_kv_refusal.py)
    assert inf.kv_cache_tokens > 0 and inf.refusals == ()


def test_sglangs_pool_emptied_by_its_weights_is_refused_too() -> None:
    inf = estimate(_on_4090(engine="sglang", mem_fraction_static=SHARE)).inference
    assert inf.kv_cache_tokens == 0 and [r.kind for r in inf.refusals] == [RefusalKind.EMPTY_POOL]
    assert 'SGLang refuses to start: "Not enough memory. Please try to increase --mem-fraction-static."' in (
        inf.would_not_start
    )
    assert "Its weights" in inf.would_not_start
    assert estimate(_on_4090("llama-3.1-70b", engine="sglang")).inference.refusals == ()  # weights past the card
