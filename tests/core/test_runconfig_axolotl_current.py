"""axolotl's current spellings (v0.10-0.12 schemas): ``bfloat16`` / ``float16`` load the model in
that dtype with no AMP, and FSDP is a ``fsdp_config`` table beside ``fsdp_version``.

Before these were read, an axolotl file for pure bf16 came back as bf16 AMP, and an FSDP2 file
written as axolotl documents it came back as DDP (found by the launch-config round trip)."""

from __future__ import annotations

import pytest

from core.catalogue import find_model
from core.errors import PlanFileError
from core.files.runconfig import ConfigKind, RunSettings, loads_run_config, plan_from_run
from core.plan import Plan


def settings(text: str) -> RunSettings:
    return loads_run_config(
        ("base_model: meta-llama/Llama-3.1-8B\n" + text).encode(), "a.yaml", ConfigKind.AXOLOTL
    ).settings


@pytest.mark.parametrize(
    ("flags", "dtype", "autocast"),
    [
        ("bf16: true\n", "bf16", "bf16"),
        ("bf16: false\nbfloat16: true\n", "bf16", "none"),
        ("bf16: full\n", "bf16", "none"),
        ("bf16: false\nfloat16: true\n", "fp16", "none"),
        ("bf16: false\nfp16: true\n", "fp16", "fp16"),
        ("bf16: false\n", "fp32", "none"),
    ],
)
def test_amp_flags_and_load_dtypes(flags: str, dtype: str, autocast: str) -> None:
    found = settings(flags)
    assert (found.model_dtype, found.autocast) == (dtype, autocast)


def test_fsdp_config_table_with_fsdp_version() -> None:
    found = settings("fsdp_version: 2\nfsdp_config:\n  reshard_after_forward: false\n  offload_params: true\n")
    assert (found.sharding, found.reshard_after_forward, found.offload) == ("fsdp", False, "params")
    legacy = settings("fsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n")
    assert (legacy.sharding, legacy.reshard_after_forward, legacy.offload) == ("fsdp", True, None)
    fsdp1 = settings("fsdp_version: 1\nfsdp_config:\n  sharding_strategy: SHARD_GRAD_OP\n")
    assert (fsdp1.sharding, fsdp1.reshard_after_forward) == ("fsdp", False)


def test_the_word_list_still_wins_when_both_are_given() -> None:
    found = settings("fsdp: [shard_grad_op, auto_wrap]\nfsdp_config:\n  reshard_after_forward: true\n")
    assert (found.sharding, found.reshard_after_forward) == ("fsdp", False)


# axolotl-ai-cloud/axolotl 067b021, utils/schemas/validation.py check_gradient_checkpointing_w_offload:
# "offload_disk" -> gradient_checkpointing True + activation_offloading "disk", which
# core/trainers/mixins/activation_checkpointing.py runs as TRL's streamed offloader (host memory).
# Before 2026-12-04 the reader refused "offload_disk" as an unknown value.
def test_offload_disk_checkpointing_is_read_as_checkpointing_with_activation_offloading() -> None:
    run = loads_run_config(
        b"base_model: meta-llama/Llama-3.1-8B\ngradient_checkpointing: offload_disk\n", "a.yaml", ConfigKind.AXOLOTL
    )
    assert (run.settings.checkpointing, run.settings.activation_offload) == (True, True)
    assert run.settings.checkpoint_policy is None and not run.unknown
    note = next(n.source for n in run.notes if n.source.startswith("gradient_checkpointing:"))
    assert "99187cd" in note and "disk" in note
    plan = plan_from_run(run, Plan(model=find_model("llama-3.1-8b").spec))
    assert plan.checkpointing and plan.activation_offload


# activation_offloading at 067b021 (utils/schemas/config.py): Literal["legacy", "disk", "hidden_states"]
# | bool | None; each word offloads saved tensors to host memory (activation_checkpointing.py
# ActivationOffloadingMixin). Before 2026-12-04 each word was refused as "true or false".
@pytest.mark.parametrize("word", ["legacy", "disk", "hidden_states"])
def test_activation_offloading_words_are_read(word: str) -> None:
    run = loads_run_config(
        f"base_model: meta-llama/Llama-3.1-8B\ngradient_checkpointing: true\nactivation_offloading: {word}\n".encode(),
        "a.yaml",
        ConfigKind.AXOLOTL,
    )
    assert run.settings.activation_offload is True and run.settings.checkpointing is True
    assert any(n.source.startswith("activation_offloading:") for n in run.notes)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("gradient_checkpointing: offload_ssd\n", "gradient_checkpointing"),
        ("activation_offloading: nvme\n", "activation_offloading"),
    ],
)
def test_other_offloading_words_are_refused(text: str, key: str) -> None:
    with pytest.raises(PlanFileError, match=key):
        settings(text)


def test_activation_offloading_false_stays_off() -> None:
    assert not settings("activation_offloading: false\n").activation_offload


# attn_implementation is axolotl's canonical attention field at 067b021 (utils/schemas/enums.py
# CANONICAL_ATTN_IMPLS; the boolean flags are its deprecated spellings, LEGACY_ATTN_FLAG_TO_IMPL).
# Before 2026-12-04 it was listed as an unknown key in 189 of the 213 examples there.
@pytest.mark.parametrize(
    ("value", "kernel"),
    [
        ("flash_attention_2", "flash"),
        # FlashAttention-3 is its own kernel since branch h81attn (Attention.FLASH3, Hopper only).
        ("flash_attention_3", "flash3"),
        ("kernels-community/flash-attn3", "flash3"),
        ("sdpa", "sdpa"),
        ("flex_attention", "sdpa"),
        ("xformers", "sdpa"),
        ("eager", "eager"),
    ],
)
def test_attn_implementation_picks_the_attention_kernel(value: str, kernel: str) -> None:
    run = loads_run_config(
        f"base_model: meta-llama/Llama-3.1-8B\nattn_implementation: {value}\n".encode(), "a.yaml", ConfigKind.AXOLOTL
    )
    assert run.settings.attention == kernel and not run.unknown


def test_an_attention_backend_not_modelled_is_listed() -> None:
    run = loads_run_config(
        b"base_model: meta-llama/Llama-3.1-8B\nattn_implementation: sage\n", "a.yaml", ConfigKind.AXOLOTL
    )
    assert run.settings.attention is None and any(u.startswith("attn_implementation = 'sage'") for u in run.unknown)


# axolotl 067b021 core/builders/base.py _configure_gradient_checkpointing and loaders/model.py
# _apply_activation_checkpointing: on an adapter run, offloading other than hidden_states replaces the
# recompute (since 277d524). The plan keeps checkpointing and the note says so.
@pytest.mark.parametrize(
    ("text", "noted"),
    [
        ("adapter: lora\ngradient_checkpointing: offload\n", True),
        ("adapter: qlora\nload_in_4bit: true\ngradient_checkpointing: true\nactivation_offloading: true\n", True),
        ("adapter: lora\ngradient_checkpointing: true\nactivation_offloading: hidden_states\n", False),
        ("gradient_checkpointing: offload\n", False),
    ],
)
def test_offloading_on_an_adapter_run_notes_the_skipped_recompute(text: str, noted: bool) -> None:
    run = loads_run_config(("base_model: meta-llama/Llama-3.1-8B\n" + text).encode(), "a.yaml", ConfigKind.AXOLOTL)
    assert run.settings.checkpointing is True and run.settings.activation_offload is True
    assert any(n.source.startswith("adapter:") and "277d524" in n.source for n in run.notes) is noted


# axolotl 067b021 utils/schemas/fsdp.py FSDPConfig.activation_checkpointing and
# monkeypatch/accelerate/fsdp2.py fsdp2_prepare_model (apply_activation_checkpointing per decoder
# block). Before 2026-12-04 it was skipped with the rest of fsdp_config: checkpointing stayed unread.
@pytest.mark.parametrize("key", ["activation_checkpointing", "fsdp_activation_checkpointing"])
def test_fsdp_activation_checkpointing_turns_checkpointing_on(key: str) -> None:
    found = settings(f"gradient_checkpointing: false\nfsdp_version: 2\nfsdp_config:\n  {key}: true\n")
    assert found.checkpointing is True and found.sharding == "fsdp"
    assert settings(f"fsdp_version: 2\nfsdp_config:\n  {key}: false\n").checkpointing is None


# axolotl 067b021 utils/schemas/config.py: torch_compile: Literal["auto"] | bool; check_torch_compile_auto
# makes "auto" true on torch >= 2.5.1. Before 2026-12-04 "auto" was refused as "true or false".
def test_torch_compile_auto_is_compile() -> None:
    assert settings("torch_compile: auto\n").stack == "compile"
    assert settings("torch_compile: false\n").stack is None


# axolotl 067b021 integrations/cut_cross_entropy/args.py: cut_cross_entropy defaults to True once the
# plugin is listed (examples/qwen3/32b-qlora.yaml lists the plugin alone). Before 2026-12-04 the plugin
# was only noted and the loss stayed the plan's.
def test_the_cut_cross_entropy_plugin_alone_turns_the_fused_loss_on() -> None:
    plugin = "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\nbf16: true\n"
    assert settings(plugin).fused_loss is True
    assert settings(plugin + "cut_cross_entropy: false\n").fused_loss is None
    assert settings("plugins:\n  - axolotl.integrations.liger.LigerPlugin\n").fused_loss is None
