"""LLaMA-Factory's freeze tuning leaves the output head frozen (branch h97cfg, issue 22).

Read at hiyouga/LLaMA-Factory v0.9.4 (95ac3f2373b82662c1bd855c284d3379e6a763d3) src/llamafactory/model/adapter.py
``_setup_freeze_tuning``: a parameter trains only if its name holds ".{i}." of a trained block (lines 107-114) or a
``freeze_extra_modules`` name (117-124); every other one, ``lm_head`` and the final norm among them, gets
``requires_grad_(False)`` (line 138). v1 the same (ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30
src/llamafactory/v1/plugins/model_plugins/peft.py ``get_freeze_model``, lines 266-285).

The plan's frozen-layers method trains an untied head (core/params.py ``frozen_params``) and no plan setting
freezes it, so the import says so (each test failed before: no note; ``freeze_extra_modules`` and
``freeze_trainable_modules`` were "not understood").
"""

from __future__ import annotations

from pathlib import Path

from core.files.runconfig import load_run_config, loads_run_config
from core.files.runconfig.llamafactory import FROZEN_HEAD

RUNCONFIGS = Path(__file__).parent.parent / "data" / "runconfigs"
HEAD = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\nfinetuning_type: freeze\nbf16: true\n"


def _read(text: str) -> tuple[bool, tuple[str, ...]]:
    run = loads_run_config((HEAD + text).encode(), str(RUNCONFIGS / "a.yaml"))
    return any(n.source == FROZEN_HEAD for n in run.notes), run.unknown


def test_a_freeze_run_says_its_head_is_frozen_where_the_plan_trains_it() -> None:
    noted, unknown = _read("")
    assert noted and unknown == ()


def test_a_head_named_in_freeze_extra_modules_trains_as_the_plan_trains_it() -> None:
    assert _read("freeze_extra_modules: lm_head\n") == (False, ())


def test_other_extra_modules_and_partial_blocks_are_listed() -> None:
    noted, unknown = _read("freeze_extra_modules: embed_tokens\nfreeze_trainable_modules: mlp,self_attn\n")
    assert noted
    assert any(item.startswith("freeze_extra_modules = 'embed_tokens'") for item in unknown)
    assert any(item.startswith("freeze_trainable_modules = 'mlp, self_attn'") for item in unknown)
    assert _read("freeze_trainable_modules: all\n") == (True, ())  # FinetuningArguments' default


def test_a_lora_run_has_no_such_note() -> None:
    run = loads_run_config(HEAD.replace("freeze", "lora").encode(), str(RUNCONFIGS / "a.yaml"))
    assert all(n.source != FROZEN_HEAD for n in run.notes)


def test_the_v1_freeze_example_says_so_too() -> None:
    # examples/v1/train_freeze/train_freeze_sft.yaml at ff6d4d12: peft_config name freeze, no freeze_extra_modules.
    run = load_run_config(RUNCONFIGS / "llamafactory_v1_train_freeze_sft.yaml")
    assert any(n.source == FROZEN_HEAD for n in run.notes)
