"""Vision towers of image-text checkpoints: counted from config.json, held as frozen weights."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.dtypes import Quant
from core.errors import PlanError
from core.estimate import estimate
from core.hfconfig import model_from_hf_config
from core.plan import Engine, Method
from core.presets import default_plan
from core.roles import dtypes_for
from core.training.storage import vision_weight_term

# Counts from huggingface/transformers 5.25.0 with the models built on the meta device (the recipe and the
# configs in tests/data/vision/meta_counts.json, its "source").
_COUNTS = Path(__file__).parents[1] / "data" / "vision" / "meta_counts.json"
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]


@pytest.mark.parametrize("case", sorted(META))
def test_tower_and_projector_equal_the_library_count(case: str) -> None:
    entry = META[case]
    spec = model_from_hf_config(entry["config"])
    assert spec.vision_params == entry["tower"]
    assert spec.vision_linear_params == entry["linear"]


@pytest.mark.parametrize("case", sorted(c for c in META if c != "mistral3-default"))
def test_the_language_model_is_the_rest_of_the_library_count(case: str) -> None:
    # Qwen2.5-VL's and Qwen3-VL's text models are read as Qwen2 and Qwen3 (core.vision.TEXT_MODEL_TYPES):
    # the library's language model has exactly the parameters the planner derives for them.
    # (Mistral3Config's defaults tie the head at the top level while text_config does not: a default of the
    # config class, not of the checkpoints, whose published counts have an untied head; see below.)
    entry = META[case]
    spec = model_from_hf_config(entry["config"])
    assert spec.architecture_params() == entry["text"]
    assert spec.checkpoint_params() == entry["whole"]


def test_qwen2_5_vl_7b_equals_its_published_count() -> None:
    # Qwen/Qwen2.5-VL-7B-Instruct's model page: 8,292,166,656 parameters (BF16 safetensors); its text part
    # is Qwen2.5-7B's 7,615,616,512 (Qwen/Qwen2.5-7B model page).
    spec = model_from_hf_config(META["qwen2_5_vl-7b"]["config"])
    assert spec.family == "qwen2"
    assert spec.architecture_params() == 7_615_616_512
    assert spec.checkpoint_params() == 8_292_166_656


def test_qwen2_5_vl_flat_layout_reads_the_top_level_as_its_text_model() -> None:
    # Qwen/Qwen2.5-VL-*'s config.json (transformers 4.49) keeps the text fields beside vision_config, with
    # no text_config; transformers 5 nests them. Both read the same.
    nested = META["qwen2_5_vl-7b"]["config"]
    flat = {**nested["text_config"], "model_type": "qwen2_5_vl", "vision_config": nested["vision_config"]}
    flat.pop("text_config", None)
    assert model_from_hf_config(flat) == model_from_hf_config(nested)


def test_mistral_small_3_1_tower_equals_its_published_count() -> None:
    # mistralai/Mistral-Small-3.1-24B-Base-2503's model page: 24,011,361,280 parameters; the text model is
    # Mistral-Small-24B-Base-2501's 23,572,403,200. The tower (Pixtral, Mistral3Config's defaults, which are
    # that checkpoint's vision_config) + projector: 438,958,080 (transformers 5.25.0, meta device).
    assert META["mistral3-default"]["tower"] == 438_958_080
    assert 23_572_403_200 + model_from_hf_config(META["mistral3-default"]["config"]).vision_params == 24_011_361_280


def test_an_unknown_tower_is_refused_with_the_reason() -> None:
    config = {**META["gemma3-default"]["config"], "model_type": "paligemma"}
    with pytest.raises(PlanError, match="refused, not dropped") as caught:
        model_from_hf_config(config)
    assert caught.value.field == "config.model_type"
    other = {**META["gemma3-default"]["config"]}
    other["vision_config"] = {**other["vision_config"], "model_type": "clip_vision_model"}
    with pytest.raises(PlanError, match="config.vision_config.model_type"):
        model_from_hf_config(other)
    with pytest.raises(PlanError, match="config.vision_config"):
        model_from_hf_config({**META["gemma3-default"]["config"], "vision_config": [1]})
    with pytest.raises(PlanError, match="config.vision_config.hidden_size"):
        bad = {**META["gemma3-default"]["config"]}
        bad["vision_config"] = {**bad["vision_config"], "hidden_size": -3}
        model_from_hf_config(bad)


def test_a_wrapper_without_vision_config_is_its_language_model() -> None:
    text = find_model("llama-3.1-8b").config
    spec = model_from_hf_config({"model_type": "llava", "text_config": text})
    assert spec.vision_params == 0 and spec.architecture_params() == 8_030_261_248  # index.json ÷ 2 (bf16)


def _plan(method: Method = Method.LORA) -> Any:
    plan = default_plan()
    return replace(plan, model=find_model("gemma-3-4b").spec, method=method)


def test_training_holds_the_frozen_tower_in_the_base_dtype() -> None:
    plan = _plan()
    tower = find_model("gemma-3-4b").spec.vision_params  # 419,816,304 (transformers 5.25.0, above)
    text_only = replace(plan, model=replace(plan.model, vision_params=0, vision_linear_params=0))
    with_tower = {b.key: b.bytes for b in estimate(plan).buckets}
    text = {b.key: b.bytes for b in estimate(text_only).buckets}
    assert with_tower[BucketKey.WEIGHTS] - text[BucketKey.WEIGHTS] == pytest.approx(tower * 2)  # bf16 base, 2 B
    # Frozen: no gradient or optimizer state for it.
    assert with_tower[BucketKey.GRADIENTS] == text[BucketKey.GRADIENTS]
    assert with_tower[BucketKey.OPTIMIZER] == text[BucketKey.OPTIMIZER]


def test_qlora_quantises_the_tower_linears_only() -> None:
    plan = replace(_plan(Method.QLORA), quant=Quant.NF4)
    spec = plan.model
    term = vision_weight_term(plan, dtypes_for(plan))
    # SigLIP's nn.Linear weights: 27 layers × (4·1152² + 2·1152·4304) = 411,070,464 (transformers 5.25.0,
    # meta device); everything else (patch conv, positions, norms, biases, Gemma 3's projection Parameter)
    # stays unquantised, as bitsandbytes' replace_with_bnb_linear leaves it.
    assert spec.vision_linear_params == 27 * (4 * 1152**2 + 2 * 1152 * 4304) == 411_070_464
    assert term.bytes < spec.vision_params * 2 / 3
    assert term.bytes > spec.vision_linear_params * 0.5


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.SGLANG, Engine.HF])
def test_serving_loads_the_tower(engine: Engine) -> None:
    plan = _plan()
    plan = replace(plan, inference=replace(plan.inference, engine=engine))
    text_only = replace(plan, model=replace(plan.model, vision_params=0, vision_linear_params=0))
    served, text = estimate(plan).inference, estimate(text_only).inference
    assert served is not None and text is not None
    # 419,816,304 bf16 parameters: 0.84 GB more weights, and the pool shrinks by as much.
    assert served.weights_bytes - text.weights_bytes == pytest.approx(419_816_304 * 2)
    assert served.kv_cache_tokens <= text.kv_cache_tokens
    # A text token's decode step does not read the tower.
    assert served.decode_tokens_per_s == pytest.approx(text.decode_tokens_per_s, rel=1e-9)


def test_a_text_model_type_that_is_no_string_is_refused() -> None:
    # Found by tests/core/test_fuzz.py: the text_config route looked a list up in TEXT_MODEL_TYPES (TypeError).
    with pytest.raises(PlanError, match="config.model_type"):
        model_from_hf_config({"model_type": "gemma3", "text_config": {"model_type": []}})


def test_fsdp_shards_the_tower_and_gathers_language_model_units_only() -> None:
    # Under FSDP on 4 GPUs the tower is sharded as every weight is (a quarter on the rank), and the gathered
    # units are sized from the stored bytes per parameter, which count the tower's parameters beside its
    # bytes (core.parallel.state stored_bytes; before, the tower's bytes inflated every gathered block).
    from core.plan import Strategy

    growth = {}
    for strategy in (Strategy.DDP, Strategy.FSDP):
        plan = _plan(Method.FULL).with_parallel(strategy=strategy, gpus_per_node=4)
        text_only = replace(plan, model=replace(plan.model, vision_params=0, vision_linear_params=0))
        growth[strategy] = estimate(plan).peak_bytes - estimate(text_only).peak_bytes
    ddp = _plan(Method.FULL).with_parallel(strategy=Strategy.DDP, gpus_per_node=4)
    assert growth[Strategy.DDP] == pytest.approx(vision_weight_term(ddp, dtypes_for(ddp)).bytes)
    assert growth[Strategy.FSDP] == pytest.approx(growth[Strategy.DDP] / 4)
