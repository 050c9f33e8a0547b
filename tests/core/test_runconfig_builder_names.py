"""Model names as torchtune's builders spell them (``qwen2_5_7b_base``) find their catalogue model:
the suffix is dropped whether joined by a hyphen or an underscore, and builders named
otherwise (mistral_7b) through the table of torchtune builders."""

from __future__ import annotations

import pytest

from core.files.runconfig import loads_run_config, name_key, resolve_model


@pytest.mark.parametrize(
    ("builder", "catalogue"),
    [
        ("qwen2_5_7b_base", "qwen2.5-7b"),
        ("qwen3_8b_base", "qwen3-8b"),
        ("qwen3_4b_instruct", "qwen3-4b"),
        ("llama3_3_70b", "llama-3.3-70b-instruct"),
        ("llama3_1_8b", "llama-3.1-8b"),
        ("gemma2_9b", "gemma-2-9b"),
    ],
)
def test_builder_names_match_the_catalogue(builder: str, catalogue: str) -> None:
    assert name_key(builder) == name_key(catalogue)


@pytest.mark.parametrize(
    ("component", "catalogue"),
    [
        ("torchtune.models.mistral.lora_mistral_7b", "mistral-7b-v0.1"),
        ("torchtune.models.phi3.lora_phi3_mini", "phi-3-mini-4k-instruct"),
        ("torchtune.models.phi4.phi4_14b", "phi-4"),
        ("torchtune.models.qwen2_5.lora_qwen2_5_7b_base", "qwen2.5-7b"),
    ],
)
def test_torchtune_builders_resolve_to_their_catalogue_model(component: str, catalogue: str) -> None:
    """Builders whose names are not the catalogue's (mistral_7b, phi3_mini) are found through
    the builders table the torchtune export writes from."""
    text = f"model:\n  _component_: {component}\n  lora_attn_modules: [q_proj]\n  lora_rank: 8\n  lora_alpha: 16\n"
    choice = resolve_model(loads_run_config(text.encode(), "tune.yaml"))
    assert choice is not None and choice.model_id == catalogue
