"""Model names as torchtune's builders spell them (``qwen2_5_7b_base``) find their catalogue model:
the suffix is dropped whether joined by a hyphen or an underscore."""

from __future__ import annotations

import pytest

from core.files.runconfig import name_key


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
