"""tests/core's helper modules (tests/core/memory_corpus.py, tests/core/llama_lora.py) assert for the tests
that call them: pytest rewrites their asserts too, so a failure shows the values, as in a test."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.core.memory_corpus", "tests.core.llama_lora")


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine's Hugging Face cache, where huggingface_hub would look (HF_HUB_CACHE): empty, in tmp_path."""
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    return root
