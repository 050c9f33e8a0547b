"""What the importers say they assume when a file asks for Unsloth (docs/UNSLOTH.md).

LLaMA-Factory's ``use_unsloth`` loads through Unsloth with use_gradient_checkpointing="unsloth"
(hiyouga/LLaMA-Factory@1212919:src/llamafactory/model/model_utils/unsloth.py); axolotl took
``gradient_checkpointing: unsloth`` as ``offload`` (Unsloth's offloaded checkpointer) until c0a0c75
and turns ``offload`` into ``activation_offloading: true`` at 067b021
(src/axolotl/utils/schemas/validation.py). ``use_unsloth`` and ``unsloth`` are read as the plan's Unsloth
settings (the ``unsloth`` switch and the checkpointing policy "unsloth"), ``offload`` as activation
offloading (2026-12-04); the notes say what is still not modelled."""

from __future__ import annotations

from core.catalogue import find_model
from core.files.runconfig import ConfigKind, RunConfig, loads_run_config, plan_from_run
from core.plan import CheckpointPolicy, Plan


def _load(text: str, kind: ConfigKind) -> RunConfig:
    return loads_run_config(text.encode(), "a.yaml", kind)


def _note(run: RunConfig, key: str) -> str:
    found = [n.source for n in run.notes if n.source.startswith(key + ":")]
    assert len(found) == 1, found
    return found[0]


def test_llamafactory_use_unsloth_is_read_as_unsloth_and_its_checkpointing() -> None:
    run = _load(
        "model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nfinetuning_type: lora\n"
        "quantization_bit: 4\nuse_unsloth: true\n",
        ConfigKind.LLAMA_FACTORY,
    )
    note = _note(run, "use_unsloth")
    assert "FastLanguageModel" in note and "padding-free" in note and "docs/UNSLOTH.md" in note
    assert run.settings.unsloth is True and run.settings.checkpointing is True
    assert run.settings.checkpoint_policy == "unsloth" and not run.settings.activation_offload
    plan = plan_from_run(run, Plan(model=find_model("llama-3.1-8b").spec))
    assert plan.unsloth and plan.checkpoint_policy is CheckpointPolicy.UNSLOTH


def test_llamafactory_use_unsloth_without_checkpointing_keeps_it_off() -> None:
    run = _load(
        "model_name_or_path: meta-llama/Llama-3.1-8B\nuse_unsloth: true\ndisable_gradient_checkpointing: true\n",
        ConfigKind.LLAMA_FACTORY,
    )
    assert run.settings.unsloth is True and run.settings.checkpointing is False
    assert run.settings.checkpoint_policy is None


def test_llamafactory_without_use_unsloth_has_no_unsloth_note() -> None:
    run = _load("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\n", ConfigKind.LLAMA_FACTORY)
    assert not any("unsloth" in n.source.lower() for n in run.notes)


def test_axolotl_unsloth_checkpointing_is_read_as_the_unsloth_policy() -> None:
    run = _load("base_model: meta-llama/Llama-3.1-8B\ngradient_checkpointing: unsloth\n", ConfigKind.AXOLOTL)
    note = _note(run, "gradient_checkpointing")
    assert "Unsloth's offloaded checkpointing" in note
    assert "'unsloth' as 'offload'" in note and "c0a0c75" in note and "docs/UNSLOTH.md" in note
    assert run.settings.checkpointing is True and run.settings.checkpoint_policy == "unsloth"
    assert not run.settings.activation_offload and not run.settings.unsloth  # axolotl's own model code


def test_axolotl_offload_checkpointing_note_points_at_activation_offloading() -> None:
    run = _load("base_model: meta-llama/Llama-3.1-8B\ngradient_checkpointing: offload\n", ConfigKind.AXOLOTL)
    note = _note(run, "gradient_checkpointing")
    assert "067b021" in note and "activation_offloading: true" in note
    # axolotl 067b021 utils/schemas/validation.py check_gradient_checkpointing_w_offload:
    # "offload" -> gradient_checkpointing True + activation_offloading True (TRL's offloader).
    assert run.settings.checkpointing is True and run.settings.activation_offload is True
