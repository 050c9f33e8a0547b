"""LLaMA-Factory's current memory keys (hiyouga/LLaMA-Factory ff6d4d1, read 2026-12-04).

``flash_attn: fa3`` asks for flash_attention_3 (src/llamafactory/model/model_utils/attention.py,
configure_attn_implementation; extras/constants.py AttentionFunction) and was dropped without a word
(``flash_attn`` is understood, its unknown words were not listed); ``use_unsloth_gc`` runs
LLaMA-Factory's copy of Unsloth's older offloaded checkpointer (model_utils/checkpointing.py,
get_unsloth_gradient_checkpointing_func) and was listed as an unknown key."""

from __future__ import annotations

import pytest

from core.catalogue import find_model
from core.files.runconfig import ConfigKind, RunConfig, loads_run_config, plan_from_run
from core.plan import CheckpointPolicy, Plan

HEAD = "model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nfinetuning_type: lora\n"


def _load(text: str) -> RunConfig:
    return loads_run_config((HEAD + text).encode(), "a.yaml", ConfigKind.LLAMA_FACTORY)


@pytest.mark.parametrize(
    ("word", "kernel"), [("fa3", "flash3"), ("fa2", "flash"), ("sdpa", "sdpa"), ("disabled", "eager")]
)
def test_flash_attn_words_pick_the_kernel(word: str, kernel: str) -> None:
    run = _load(f"flash_attn: {word}\n")
    assert run.settings.attention == kernel and not run.unknown


def test_an_unknown_flash_attn_word_is_listed_and_auto_keeps_the_plans() -> None:
    run = _load("flash_attn: fa4\n")
    assert run.settings.attention is None and any(u.startswith("flash_attn = 'fa4'") for u in run.unknown)
    auto = _load("flash_attn: auto\n")
    assert auto.settings.attention is None and not auto.unknown


def test_use_unsloth_gc_is_the_unsloth_policy() -> None:
    run = _load("use_unsloth_gc: true\n")
    assert run.settings.checkpointing is True and run.settings.checkpoint_policy == "unsloth"
    assert not run.settings.unsloth and not run.unknown  # LLaMA-Factory's own copy, not Unsloth's model code
    note = next(n.source for n in run.notes if n.source.startswith("use_unsloth_gc:"))
    assert "docs/UNSLOTH.md" in note
    plan = plan_from_run(run, Plan(model=find_model("llama-3.1-8b").spec))
    assert plan.checkpoint_policy is CheckpointPolicy.UNSLOTH and not plan.unsloth


def test_use_unsloth_gc_without_checkpointing_changes_nothing() -> None:
    # checkpointing.py prepare_model_for_training uses it only when not disable_gradient_checkpointing.
    run = _load("use_unsloth_gc: true\ndisable_gradient_checkpointing: true\n")
    assert run.settings.checkpointing is False and run.settings.checkpoint_policy is None
