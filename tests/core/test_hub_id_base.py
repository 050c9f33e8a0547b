"""A Hub id whose repository the catalogue lacks finds the entry of the base its name is built on (h88fix: a user's
Qwen/Qwen3-30B-A3B-Instruct-2507, TinyLlama/TinyLlama-1.1B-Chat-v1.0 and meta-llama/Meta-Llama-3-8B-Instruct found
nothing). Each fine-tune below names its base on its model page (https://huggingface.co/<id>, the "finetuned from" /
base-model line) and keeps its matrices; a size, a version or an expert count never goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.catalogue import find_model
from core.files.model_source import model_named
from core.hub_names import catalogue_model_of_name

# (Hub id, catalogue id); the model page https://huggingface.co/<Hub id> names the base.
FINE_TUNES = (
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),  # base: Qwen/Qwen3-30B-A3B
    ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"),
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b"),
    ("Qwen/Qwen3-8B-Base", "qwen3-8b"),  # the pretrained checkpoint of Qwen/Qwen3-8B
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"),  # base: TinyLlama-1.1B-intermediate-step-1431k-3T
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),  # base: meta-llama/Meta-Llama-3-8B
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # the repository's name before its 2024 rename
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
    ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
    ("google/gemma-3-1b-it", "gemma-3-1b"),  # base: google/gemma-3-1b-pt
    ("google/gemma-3-27b-it", "gemma-3-27b"),
    ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("google/gemma-7b-it", "gemma-7b"),
    ("google/gemma-2b-it", "gemma-2b"),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b-v0.1"),  # base: mistralai/Mistral-7B-v0.1
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),  # a March 2025 release of DeepSeek-V3's architecture
)


@pytest.mark.parametrize(("hub_id", "catalogue_id"), FINE_TUNES, ids=[h for h, _ in FINE_TUNES])
def test_a_fine_tunes_hub_id_finds_its_bases_entry(hub_id: str, catalogue_id: str) -> None:
    found = catalogue_model_of_name(hub_id)
    assert found is not None and found.entry.id == catalogue_id
    entry, how = found.entry, found.how
    assert hub_id in how and entry.hf_repo in how  # the notes say which entry was used and why


def test_the_catalogues_own_repository_needs_no_words() -> None:
    found = catalogue_model_of_name("Qwen/Qwen3-30B-A3B")
    assert found is not None and (found.entry, found.how) == (find_model("qwen3-30b-a3b"), "")


@pytest.mark.parametrize(
    "hub_id",
    [
        "mistralai/Mistral-7B-Instruct-v0.3",  # v0.3 widened the vocabulary to 32,768 (its model page): not v0.1
        "Qwen/Qwen3-31B-Instruct",  # no such size in the catalogue: never the 30B-A3B or the 32B
        "meta-llama/Llama-3.1-8B-Instruct-extra",  # a word the rule does not know
        "someone/Qwen3-30B-A3B-Instruct-2507",  # another organisation's upload: its files may be anything
    ],
)
def test_no_base_across_sizes_versions_or_organisations(hub_id: str) -> None:
    assert catalogue_model_of_name(hub_id) is None


def test_the_model_a_hub_id_names_says_which_entry_was_used(tmp_path: Path) -> None:
    named = model_named("Qwen/Qwen3-30B-A3B-Instruct-2507", cache=tmp_path)  # an empty cache: the catalogue answers
    assert named.model_id == "qwen3-30b-a3b" and named.spec == find_model("qwen3-30b-a3b").spec
    assert "the catalogue's qwen3-30b-a3b" in named.note and "Qwen/Qwen3-30B-A3B's fine-tune" in named.note
