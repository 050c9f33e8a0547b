"""core.plan.refused_choices (what the Serving form greys) against Plan validation, entry by entry: an entry is greyed
exactly where picking it is refused, and its reason is the refusal's own words (branch h93form, issue 23)."""

from __future__ import annotations

import pytest

from core.catalogue import find_model
from core.errors import PlanError
from core.inputs import input_at
from core.plan import RELEASE_CHOICES, default_plan_on, refused_choices

# (model, serving settings): one of each kind the refusals read. gpt-oss's MXFP4 and Llama's AWQ / NF4 weights (the
# release tables core.inputs.VLLM_WEIGHT_LINES and SGLANG_WEIGHT_RELEASES), a hybrid (core.plan.HYBRID_VLLM_LINES and
# its 16-bit / fp8 cache), Llama 4 (vLLM only, from core.inputs.LLAMA4_VLLM_FROM), Gemma 3 served text only (vLLM
# from 0.15: core.inputs.TEXT_ONLY_FROM), a dense model on transformers (nothing refused at its defaults) and FP8 on
# transformers (integrations/finegrained_fp8.py from the 4.49.0 wheel, not in 4.48.3's: core.plan
# _transformers_fp8_refusal).
CASES = [
    ("gpt-oss-20b", {"engine": "vllm", "weight_dtype": "mxfp4"}),
    ("gpt-oss-20b", {"engine": "sglang", "weight_dtype": "mxfp4"}),
    ("llama-3.1-8b", {"engine": "vllm", "vllm_version": "0.8", "weight_dtype": "awq-int4"}),
    ("llama-3.1-8b", {"engine": "vllm", "vllm_version": "0.27", "weight_dtype": "nf4"}),
    ("llama-3.1-8b", {"engine": "sglang", "sglang_version": "0.4.10"}),
    ("llama-3.1-8b", {"engine": "hf"}),
    ("qwen3-8b", {"engine": "hf", "weight_dtype": "fp8"}),
    ("qwen3-8b", {"engine": "hf", "transformers_version": "4.48"}),
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
    if settings == {"engine": "hf"}:
        # transformers 5.25 with bf16 weights: every weight format and release loads; of the KV formats only vLLM's
        # fp8_per_token_head (from vLLM 0.20, h95fp8h) is refused, a cache generate does not keep
        assert refused["inference.kv_dtype"].keys() == {"fp8_per_token_head"}
        assert greyed == 1
    else:
        assert greyed > 0


def test_the_answer_is_kept_for_the_same_model_and_settings() -> None:
    # A training edit leaves the plan's model and serving settings the same objects: the Serving form asks again on
    # every estimate, and gets the same answer without working it out again (core.memo.last_answer).
    entry = find_model("llama-3.1-8b")
    plan = default_plan_on(entry.spec, entry.id)
    assert refused_choices(plan.model, plan.inference) is refused_choices(plan.model, plan.inference)


def test_fp8_weights_on_transformers_grey_the_releases_before_4_49_and_back() -> None:
    # The fine-grained FP8 linear is in the 4.49.0 wheel and not in 4.48.3's (core.plan._transformers_fp8_refusal):
    # with FP8 weights 4.45 - 4.48 are greyed; on 4.48 the FP8 entry of the weight list is.
    entry = find_model("qwen3-8b")
    fp8 = default_plan_on(entry.spec, entry.id).with_inference(engine="hf", weight_dtype="fp8")
    refused = refused_choices(fp8.model, fp8.inference)
    assert list(refused["inference.transformers_version"]) == ["4.45", "4.46", "4.47", "4.48"]
    assert refused["inference.weight_dtype"] == {}
    old = default_plan_on(entry.spec, entry.id).with_inference(engine="hf", transformers_version="4.48")
    refused = refused_choices(old.model, old.inference)
    assert list(refused["inference.weight_dtype"]) == ["fp8"]
    assert "from 4.49" in refused["inference.weight_dtype"]["fp8"]
