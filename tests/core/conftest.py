"""tests/core's helper modules (tests/core/memory_corpus.py, tests/core/llama_lora.py) assert for the tests
that call them: pytest rewrites their asserts too, so a failure shows the values, as in a test."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.core.memory_corpus", "tests.core.llama_lora")
