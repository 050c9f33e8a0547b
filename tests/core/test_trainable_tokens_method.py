"""PEFT's trainable-tokens method on its own (branch h61mts2): k chosen rows of the input embedding train, no adapter.

Sources: huggingface/peft 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 src/peft/tuners/trainable_tokens/config.py
(``TrainableTokensConfig``: token_indices, target_modules, init_weights; no modules_to_save), layer.py
(``TrainableTokensLayer``: the float32 ``trainable_tokens_delta`` k × d, the ``trainable_tokens_original`` buffer, the
forward's ``index_copy`` into a merged V × d matrix) and model.py (a tied head wrapped with ``tied_adapter``);
the method comparison's results file huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751
method_comparison/MetaMathQA/results/trainable_tokens--llama-3.2-3B-sos+eos.json ("the results file" below).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.realgpu.mapping import map_figure
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.inputs import ModulesToSave
from core.plan import Method, Optimizer, Plan, Preset, Strategy
from core.presets import default_plan, plan_for_model
from core.roles import dtypes_for
from core.training.extra_trained import extra_elements, extra_weight_terms, merged_head_copy

# Llama 3.2 3B config.json: vocab_size 128,256, hidden_size 3,072, tie_word_embeddings true.
V, D = 128_256, 3_072


def _plan(rows: int = 2) -> Plan:
    plan = plan_for_model("llama-3.2-3b", method=Method.LORA, preset=Preset.TRAINER_BF16)
    return plan.with_method(Method.TRAINABLE_TOKENS).with_lora(trainable_tokens=rows)


def test_the_rows_are_the_method_s_trainable_parameters() -> None:
    plan = _plan()
    # The results file: "num_trainable_params": 6144 = 2 rows × 3,072 (token_indices [128000, 128001]).
    assert estimate(plan).params.trainable == 2 * D == 6_144
    assert extra_elements(plan) == 0  # nothing beside the method's own parameter


def test_the_buffer_and_the_tied_head_s_merged_matrix_are_kept() -> None:
    plan, dt = _plan(), dtypes_for(_plan())
    # The float32 delta (autocast_adapter_dtype, measured in tools/measure/modules_to_save_check.py) is the
    # method's weight; beside it the k × d buffer of the original rows in the same dtype.
    assert [t.bytes for t in extra_weight_terms(plan, dt)] == [2 * D * 4]
    # A tied model: the head's F.linear keeps the merged V × d bf16 matrix until the backward.
    assert [t.bytes for t in merged_head_copy(plan, dt)] == [V * D * 2]
    phases = {p.name: p for p in estimate(plan).phases}
    labels = [t.label for b in phases["backward"].buckets for t in b.terms]
    assert any("merged head matrix" in label for label in labels)


def test_a_switch_starts_from_two_rows_and_drops_the_copies() -> None:
    # TRAINABLE_TOKENS_SWITCH_ROWS: the method comparison's token_indices [128000, 128001].
    lora = default_plan().with_lora(modules_to_save=ModulesToSave.HEAD)
    switched = lora.with_method(Method.TRAINABLE_TOKENS)
    assert switched.lora.trainable_tokens == 2 and switched.lora.modules_to_save is ModulesToSave.NONE
    assert switched.with_method(Method.LORA).lora.trainable_tokens == 2  # back to LoRA: trainable_token_indices
    assert _plan(5).with_method(Method.TRAINABLE_TOKENS).lora.trainable_tokens == 5  # rows set are kept


def test_refusals_say_why() -> None:
    with pytest.raises(PlanError, match="at least one"):
        _plan(0)
    with pytest.raises(PlanError, match="no modules_to_save"):
        _plan().with_lora(modules_to_save=ModulesToSave.HEAD)
    with pytest.raises(PlanError, match="one GPU or DDP"):
        _plan().on_gpus(2, Strategy.FSDP)
    with pytest.raises(PlanError, match="rows of the embedding"):
        _plan(V + 1)
    with pytest.raises(PlanError, match="Adafactor"):
        _plan().with_changes(optimizer=Optimizer.ADAFACTOR)


# The results file's peft_config block.
_CONFIG = {
    "task_type": "CAUSAL_LM", "peft_type": "TRAINABLE_TOKENS", "auto_mapping": None,
    "peft_version": "0.19.2.dev0@UNKNOWN", "base_model_name_or_path": "meta-llama/Llama-3.2-3B", "revision": None,
    "inference_mode": False, "token_indices": [128000, 128001], "target_modules": "model.embed_tokens",
    "init_weights": True,
}  # fmt: skip


def _read(document: dict[str, object]) -> Plan:
    run = loads_run_config(json.dumps(document).encode(), "adapter_config.json")
    assert run.unknown == ()
    return plan_from_run(run, default_plan(), resolve_model(run))


def test_adapter_config_is_read() -> None:
    plan = _read(_CONFIG)
    assert (plan.method, plan.lora.trainable_tokens, estimate(plan).params.trainable) == (
        Method.TRAINABLE_TOKENS,
        2,
        6_144,
    )


def test_adapter_config_refusals() -> None:
    with pytest.raises(PlanFileError, match="target_modules"):
        loads_run_config(json.dumps({**_CONFIG, "target_modules": ["lm_head"]}).encode(), "a.json")
    with pytest.raises(PlanFileError, match="token_indices"):
        loads_run_config(json.dumps({**_CONFIG, "token_indices": []}).encode(), "a.json")


def test_exporters_say_they_write_lora() -> None:
    assert export(_plan(), Target.TRL).cannot("method.kind")


def test_the_method_comparison_row_is_expressed() -> None:
    figures = json.loads(Path("benchmarks/realgpu/memory_figures.json").read_text())
    figure = next(f for f in figures["figures"] if f["id"] == "peft-mc-trainable_tokens--llama-3.2-3B-sos+eos")
    mapped = map_figure(figure)
    assert mapped.expressible and mapped.held_out
    assert mapped.plan is not None
    assert (mapped.plan.method, mapped.plan.lora.trainable_tokens) == (Method.TRAINABLE_TOKENS, 2)
