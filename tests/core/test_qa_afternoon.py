"""Defects a user's afternoon with the command line and the config importers found (branch h87qa).

Each test failed before its fix. The ids in them are the catalogues' own (resources/gpus.json,
resources/models.json, resources/links.json); the configs are copied from public repositories,
each named with its commit.
"""

from __future__ import annotations

import pytest

from core.catalogue import find_gpu, find_link, find_model
from core.errors import PlanError


@pytest.mark.parametrize(
    ("find", "typed", "offered"),
    [
        # An id with a part left out, or a separator dropped: the catalogue's ids are offered.
        (find_gpu, "a100-80gb", "a100-80gb-sxm"),
        (find_gpu, "a100", "a100-80gb-sxm"),
        (find_gpu, "h100sxm", "h100-sxm"),
        (find_gpu, "4090", "rtx-4090"),
        (find_model, "llama3.1-8b", "llama-3.1-8b"),
        (find_model, "qwen3-30b", "qwen3-30b-a3b"),
        (find_link, "nvlink", "nvlink4"),
    ],
)
def test_a_mistyped_catalogue_id_is_refused_with_the_ids_near_it(find: object, typed: str, offered: str) -> None:
    # Before: "hardware.gpu: 'a100' is not allowed; expected a GPU id from `vramplan gpus` or 'custom'",
    # and nothing to say which of the 106 ids the user meant.
    with pytest.raises(PlanError) as refused:
        find(typed)  # type: ignore[operator]
    message = str(refused.value)
    assert "(closest: " in message
    assert offered in message.split("(closest: ", 1)[1].split(")")[0].split(", ")


def test_a_name_near_nothing_gets_no_suggestion() -> None:
    with pytest.raises(PlanError) as refused:
        find_gpu("zzz")
    assert "closest" not in str(refused.value)
    assert str(refused.value).endswith("expected a GPU id from `vramplan gpus` or 'custom'")


def test_a_pasted_paragraph_is_refused_at_once_and_cut() -> None:
    # 20,000 characters: the look-up reads the first 100, and the message shows the value cut at 80 (core.errors).
    with pytest.raises(PlanError) as refused:
        find_model("llama-3.1-8b " * 1_600)
    assert len(str(refused.value)) < 400
