"""A training loop that keeps the model output through the backward (``loop_keeps_output``, issue 22).

Sources: AnswerDotAI/fsdp_qlora e877dda train.py (lines 841-894: ``output = model(input_ids,
labels=..., attention_mask=None)``, ``loss = output.loss``, ``loss.backward()``, the optimizer step,
then ``output = None``; its README pins ``transformers!=4.38.*,!=4.39.*``); transformers 4.37.2
``models/llama/modeling_llama.py`` (``LlamaForCausalLM.forward``: ``logits = logits.float()`` before
the loss, returned as ``CausalLMOutputWithPast(logits=logits)``; 4.46.0 - 5.0.0 return the lm_head's own
logits, ``ForCausalLMLoss`` upcasting a local copy). Llama-2-7B's vocabulary is 32,000
(meta-llama/Llama-2-7b-hf config.json). Figure: benchmarks/realgpu/memory_figures.json
``answerai-4090-7b-lora-cpuoff-bs10`` (batch 10 × 2,048 tokens, published 22.69 GiB reserved)."""

from __future__ import annotations

import pytest

from core.estimate import estimate
from core.plan import Plan, TransformersLoss
from core.training.activations import loss_memory
from tests.core.llama_lora import cli_peak_bytes, lora_plan
from tests.core.memory_corpus import families_planned_with

# Batch 10 × 2,048 tokens × 32,000: N·V = 655,360,000; float32: 2,621,440,000 bytes.
NV = 10 * 2_048 * 32_000


def _plan(keeps: bool, release: TransformersLoss = TransformersLoss.V4_31_TO_4_45) -> Plan:
    return lora_plan(10, loop_keeps_output=keeps, training_transformers=release)


def test_the_kept_output_holds_its_float32_logits_at_the_start_of_the_backward() -> None:
    kept, dropped = loss_memory(_plan(True)), loss_memory(_plan(False))
    assert kept.forward == dropped.forward
    extra = [t for t in kept.backward if t not in dropped.backward]
    assert [t.bytes for t in extra] == [NV * 4] == [2_621_440_000]
    # The backward starts with the log-softmax, its incoming gradient, the logits' gradient and now
    # the output's logits: four float32 N·V tensors.
    assert sum(t.bytes for t in kept.backward) == 4 * NV * 4


def test_from_transformers_4_46_the_kept_output_holds_the_16_bit_logits() -> None:
    for release in (TransformersLoss.V4_46_TO_4_48, TransformersLoss.V5_ON):
        kept, dropped = loss_memory(_plan(True, release)), loss_memory(_plan(False, release))
        assert [t.bytes for t in kept.backward if t not in dropped.backward] == [NV * 2]


def _backward_bytes(plan: Plan) -> float:
    """The backward phase's high point (its four buckets), whichever phase is the step's peak."""
    (phase,) = [p for p in estimate(plan).phases if p.name == "backward"]
    return sum(b.bytes for b in phase.buckets)


def test_the_kept_logits_raise_the_backward_peak_by_their_size() -> None:
    # The kept float32 logits make the backward the step's peak. Without them this plan's backward is
    # within a few MB of its forward (no recomputed block's autocast copies at the backward's start since
    # branch h78remeas), so which of the two is the peak is not this test's question.
    assert estimate(_plan(True)).peak_phase == "backward"
    assert _backward_bytes(_plan(True)) - _backward_bytes(_plan(False)) == NV * 4


def test_the_setting_does_not_apply_where_the_logits_never_exist_whole() -> None:
    for recipe in ({"fused_loss": True}, {"chunked_loss": True}, {"litgpt": True}, {"compiled_loss": True}):
        with_it = _plan(True).with_changes(**recipe)
        assert loss_memory(with_it) == loss_memory(with_it.with_changes(loop_keeps_output=False))


def test_the_command_line_sets_it(capsys: pytest.CaptureFixture[str]) -> None:
    # The newest transformers keep 16-bit logits in the output; 4.31-4.45 keep float32 ones.
    assert cli_peak_bytes(capsys, 10, "--loop-keeps-output") - cli_peak_bytes(capsys, 10) == NV * 2
    old = ("--training-transformers", "4.31-4.45")
    assert cli_peak_bytes(capsys, 10, *old, "--loop-keeps-output") - cli_peak_bytes(capsys, 10, *old) == NV * 4


def test_the_mapping_plans_answerai_automodel_and_prime_rl_records_with_it_and_no_other_family() -> None:
    # Answer.AI by family (mapping.KEEPS_OUTPUT_FAMILIES); NeMo Automodel by its record's ``loop_keeps_output``:
    # NVIDIA-NeMo/Automodel a4518eec nemo_automodel/recipes/llm/train_ft.py ``_forward_backward_step`` binds
    # ``out = model(**batch)`` and calls ``backward()`` in the same scope, so the logits live through the backward.
    # prime-rl likewise: PrimeIntellect-ai/prime-rl 8718eb143 src/prime_rl/trainer/sft/train.py binds
    # ``out = forward(model, ...)`` and its ``del logits`` drops only the local name before ``backward()``.
    planned = families_planned_with("loop_keeps_output", "realgpu_mapping_keeps_output")
    assert planned == {"answerai", "nemo-automodel", "prime-rl"}
