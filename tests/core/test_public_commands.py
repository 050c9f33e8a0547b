"""Thirty launch commands as people posted them (tests/data/launch_commands/public.json: each with the URL of the
README, issue or pull request it was copied from), read by core.files.launch.serve_command.read_command.

Each case pins what its flags set, the words not understood and the one line on why the engine would not start, as
checked by hand against the source; what was read wrong when they were first run is fixed and pinned in
tests/core/test_pasted_commands_leftovers.py (a vllm serve word no flag takes, Windows paths, SGLang's deprecated
switches, DP attention, checkpoint names, a latent-attention model on the window's first plan).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from core.errors import PlanFileError
from core.files.launch.serve_command import read_command
from core.inputs import SglangVersion, VllmVersion

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "launch_commands" / "public.json").read_text(encoding="utf-8")
)["commands"]


def test_thirty_commands_from_public_sources_each_with_its_url() -> None:
    assert len(CASES) == 30
    assert all(case["url"].startswith("https://github.com/") for case in CASES)
    engines = {case["expect"]["engine"] for case in CASES if "expect" in case}
    assert engines == {"vllm", "sglang", "llamacpp"}  # Ollama's are read as llama.cpp with program "ollama"


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['url'].rsplit('/', 3)[-3]}" for i, c in enumerate(CASES)])
def test_a_public_command_reads_as_pinned(case: dict[str, Any]) -> None:
    line = VllmVersion(case["vllm_version"]) if "vllm_version" in case else None
    release = SglangVersion(case["sglang_version"]) if "sglang_version" in case else None
    if "refused" in case:
        with pytest.raises(PlanFileError) as refused:
            read_command(case["command"], vllm_version=line)
        assert refused.value.reason.startswith(case["refused"])
        return
    read = read_command(case["command"], vllm_version=line, sglang_version=release)
    expect = case["expect"]
    assert (read.engine.value, read.program, read.model_ref) == (expect["engine"], expect["program"], expect["model"])
    fields = {k: v.value if isinstance(v, Enum) else v for k, v in read.fields.items() if k in expect["read"]}
    assert fields == expect["read"]
    assert list(read.unknown) == expect["unknown"]
    assert read.stops == expect["stops"]
