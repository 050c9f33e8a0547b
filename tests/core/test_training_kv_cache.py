"""The key/value cache a transformers model returns from its training forward (``training_kv_cache``).

Source: huggingface/transformers v4.31.0 (the PyPI wheel) models/llama/modeling_llama.py:
``LlamaAttention.forward`` sets ``past_key_value = (key_states, value_states) if use_cache else None``
after RoPE and before ``repeat_kv`` (which returns its input when n_rep == 1); ``LlamaModel.forward``
collects them in ``next_decoder_cache`` and returns them as ``past_key_values``, turning use_cache off
only ``if self.gradient_checkpointing and self.training``; configuration_llama.py defaults
``use_cache=True``. llama-recipes' PR #165 (2023-09-05) passes use_cache=False under FSDP: "For the
LLaMA-7B run, this saves ~4 GB in activation memory and avoids peak memory from being at the end of the
forward pass". Llama-2-7B: 32 layers, 32 heads of 128 (no grouped-query attention); Llama-3.1-8B: 32
layers, 8 key/value heads of 128.
"""

from __future__ import annotations

import pytest

from core.estimate import estimate
from core.plan import Attention, Method, Plan, Stack
from core.training.activations import kv_cache_terms, loss_memory
from tests.core.llama_lora import cli_peak_bytes, lora_plan
from tests.core.memory_corpus import families_planned_with

# 2 (K and V) × 32 layers × 4 × 2,048 tokens × 4,096 (32 heads × 128) × 2 bytes.
LLAMA2_CACHE = 2 * 32 * 4 * 2_048 * 4_096 * 2


def _plan(model: str = "llama-2-7b", **changes: object) -> Plan:
    return lora_plan(4, model, **{"training_kv_cache": True, **changes})


def test_under_full_checkpointing_every_layers_k_and_v_are_kept_to_the_end_of_the_forward() -> None:
    (term,) = kv_cache_terms(_plan())
    assert term.bytes == LLAMA2_CACHE == 4_294_967_296  # PR #165's "~4 GB"
    with_it, without = loss_memory(_plan()), loss_memory(_plan(training_kv_cache=False))
    assert with_it.forward == (*without.forward, term)
    assert with_it.backward == without.backward and with_it.held == ()  # the loop drops the output first


def test_it_moves_the_peak_to_the_end_of_the_forward_by_its_size() -> None:
    on, off = estimate(_plan()), estimate(_plan(training_kv_cache=False))
    forward_on = next(p for p in on.phases if p.name == "forward + loss")
    forward_off = next(p for p in off.phases if p.name == "forward + loss")
    assert forward_on.allocated_bytes - forward_off.allocated_bytes == LLAMA2_CACHE
    assert on.peak_phase == "forward + loss" and off.peak_phase == "backward"


def test_without_checkpointing_only_repeated_grouped_query_heads_leave_it_extra() -> None:
    # Llama-2-7B: the cached K and V are the tensors the attention saves.
    assert kv_cache_terms(_plan(checkpointing=False)) == ()
    # Llama-3.1-8B: repeat_kv makes the attention's own copies; the cache's 8 heads are extra.
    (term,) = kv_cache_terms(_plan("llama-3.1-8b", checkpointing=False))
    assert term.bytes == 2 * 32 * 4 * 2_048 * (8 * 128) * 2
    # flash-attn takes K and V unrepeated and saves them: nothing extra.
    assert kv_cache_terms(_plan("llama-3.1-8b", checkpointing=False, attention=Attention.FLASH)) == ()


def test_a_loop_that_keeps_the_output_holds_it_through_the_backward_and_the_step() -> None:
    kept = estimate(_plan(loop_keeps_output=True))
    dropped = estimate(_plan(loop_keeps_output=True, training_kv_cache=False))
    label = kv_cache_terms(_plan())[0].label
    for on, off in zip(kept.phases, dropped.phases, strict=True):
        assert on.name == off.name
        assert on.allocated_bytes - off.allocated_bytes == LLAMA2_CACHE, on.name
        assert any(t.label == label for b in on.buckets for t in b.terms), on.name


def test_megatron_and_the_default_have_no_cache() -> None:
    assert kv_cache_terms(_plan(training_kv_cache=False)) == ()
    assert kv_cache_terms(_plan(stack=Stack.MEGATRON, method=Method.FULL)) == ()


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    plain = cli_peak_bytes(capsys, 4, "--checkpointing")
    assert cli_peak_bytes(capsys, 4, "--checkpointing", "--training-kv-cache") > plain


def test_the_mapping_plans_only_the_runs_that_keep_use_cache_with_it() -> None:
    # llama-recipes' FSDP runs, and FlagPerf's DeepSpeed case (FlagOpen/FlagPerf cd568e3c
    # training/benchmarks/llama2_7b/deepspeed/llama2_7b_hf/config.json "use_cache": true, no checkpointing), and NeMo
    # Automodel's GPT-2 run (NVIDIA-NeMo/Automodel a4518eec: the model built from openai-community/gpt2's config,
    # whose use_cache defaults to true; transformers' GPT-2 has as many K/V heads as query heads, so with no
    # checkpointing the cache adds nothing: kv_cache_terms).
    planned = families_planned_with("training_kv_cache", "realgpu_mapping_kv_cache")
    assert planned == {"llama-recipes", "flagperf", "nemo-automodel"}
