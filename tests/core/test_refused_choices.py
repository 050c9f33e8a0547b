"""core.plan.refused_choices (what the Serving form greys) against Plan validation, entry by entry: an entry is greyed
exactly where picking it is refused, and its reason is the refusal's own words (branch h93form, issue 23)."""

from __future__ import annotations

import pytest

from core.catalogue import find_model
from core.errors import PlanError
from core.inputs import input_at
from core.plan import RELEASE_CHOICES, Engine, default_plan_on, refused_choices

# (model, serving settings): one of each kind the refusals read. gpt-oss's MXFP4 and Llama's AWQ / NF4 weights (the
# release tables core.inputs.VLLM_WEIGHT_LINES and SGLANG_WEIGHT_RELEASES), a hybrid (core.plan.HYBRID_VLLM_LINES and
# its 16-bit / fp8 cache), Llama 4 (vLLM only, from core.inputs.LLAMA4_VLLM_FROM), Gemma 3 served text only (vLLM
# from 0.15: core.inputs.TEXT_ONLY_FROM), a dense model on transformers (nothing refused by release).
CASES = [
    ("gpt-oss-20b", {"engine": "vllm", "weight_dtype": "mxfp4"}),
    ("gpt-oss-20b", {"engine": "sglang", "weight_dtype": "mxfp4"}),
    ("llama-3.1-8b", {"engine": "vllm", "vllm_version": "0.8", "weight_dtype": "awq-int4"}),
    ("llama-3.1-8b", {"engine": "vllm", "vllm_version": "0.27", "weight_dtype": "nf4"}),
    ("llama-3.1-8b", {"engine": "sglang", "sglang_version": "0.4.10"}),
    ("llama-3.1-8b", {"engine": "hf"}),
    ("granite-4.0-h-tiny", {"engine": "vllm"}),
    ("gemma-3-4b", {"engine": "vllm", "text_only": True}),
]


@pytest.mark.parametrize(("model_id", "settings"), CASES)
def test_an_entry_is_greyed_exactly_where_picking_it_is_refused(model_id: str, settings: dict[str, object]) -> None:
    entry = find_model(model_id)
    plan = default_plan_on(entry.spec, entry.id).with_inference(**settings)
    refused = refused_choices(plan.model, plan.inference)
    assert set(refused) == set(RELEASE_CHOICES)
    greyed = 0
    for path in RELEASE_CHOICES:
        for value in input_at(path).enum:
            try:
                plan.with_input(path, value)
            except PlanError as error:
                assert refused[path].get(value.value) == error.reason, (path, value)
                greyed += 1
            else:
                assert value.value not in refused[path], (path, value)
    assert greyed == sum(len(entries) for entries in refused.values())
    if plan.inference.engine is Engine.HF:
        assert greyed == 0  # transformers: no release refuses a weight or KV format through serving_refusal
    else:
        assert greyed > 0


def test_the_answer_is_kept_for_the_same_model_and_settings() -> None:
    # A training edit leaves the plan's model and serving settings the same objects: the Serving form asks again on
    # every estimate, and gets the same answer without working it out again (core.memo.last_answer).
    entry = find_model("llama-3.1-8b")
    plan = default_plan_on(entry.spec, entry.id)
    assert refused_choices(plan.model, plan.inference) is refused_choices(plan.model, plan.inference)
