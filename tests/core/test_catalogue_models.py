"""The model catalogue: published configs whose derived counts equal the published counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model, load_models, pending_models
from core.hfconfig import model_from_hf_config
from core.resources import resource_path

ENTRIES: list[dict[str, Any]] = json.loads(resource_path("models.json").read_text("utf-8"))["models"]


def test_catalogue_has_the_models_people_run() -> None:
    assert len(ENTRIES) >= 50
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    assert len(load_models()) == len(ENTRIES), [p.id for p in pending_models()]  # every family is read
    types = {e["config"].get("model_type") for e in ENTRIES}
    assert types >= {"llama", "qwen2", "qwen3", "qwen3_moe", "gemma3", "gemma3_text", "mistral", "mixtral", "phi3"}
    assert types >= {"olmo2", "smollm3", "gpt_oss"}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_every_entry_cites_its_config_and_count(entry: dict[str, Any]) -> None:
    assert entry["config_source"].startswith(f"https://huggingface.co/{entry['hf_repo']}/")
    assert entry["config_source"].endswith("/config.json")
    assert entry["published_params_source"].strip()
    assert entry["published_params"] > 0


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_architecture_count_equals_the_published_count(entry: dict[str, Any]) -> None:
    spec = model_from_hf_config(entry["config"], name=entry["name"])
    # A hybrid recurrent model's count is core.hybrid's exact one (ModelSpec.params_override); any other's is
    # derived from its attention-model fields, with nothing given instead.
    count = spec.total_params() if spec.hybrid is not None else spec.architecture_params()
    assert (spec.params_override is not None) == (spec.hybrid is not None)
    # Image-text checkpoints publish the whole model's count; their language model's stays beside it.
    assert count + spec.vision_params == entry["published_params"]
    assert count == entry.get("published_text_params", entry["published_params"])
    assert bool(spec.vision_params) == ("vision_config" in entry["config"])


@pytest.mark.parametrize("entry", [e for e in ENTRIES if "active_params" in e], ids=lambda e: e["id"])
def test_moe_entries_state_total_and_active(entry: dict[str, Any]) -> None:
    assert entry["active_params_source"].strip()
    assert 0 < entry["active_params"] < entry["published_params"] / 4
    spec = find_model(entry["id"]).spec
    if entry["config"]["model_type"] == "gpt_oss":
        # OpenAI's card counts active parameters without the input embedding table (3.61B).
        assert spec.active_params() - spec.embedding_params() == entry["active_params"]
    else:  # Qwen3-30B-A3B: 8 of 128 experts per token, 3.3B on the card.
        assert spec.active_params() == entry["active_params"]


def test_every_moe_config_states_its_active_count() -> None:
    moe_types = {"mixtral", "qwen3_moe", "qwen2_moe", "gpt_oss"}
    for entry in ENTRIES:
        if entry["config"].get("model_type") in moe_types and entry["id"] != "mixtral-8x7b-v0.1":
            assert "active_params" in entry, entry["id"]
    # Mixtral 8x7B: 46.7 B stored, about 12.9 B used per token (Mistral AI's announcement).
    mixtral = find_model("mixtral-8x7b-v0.1").spec
    assert mixtral.total_params() == 46_702_792_704
    assert round(mixtral.active_params() / 1e9, 1) == 12.9


def test_head_width_that_differs_from_hidden_over_heads() -> None:
    # Mistral Nemo config.json: hidden_size 5120, 32 heads, head_dim 128 (not 160): queries are
    # 4096 wide. Gemma 3 27B: hidden 5376, 32 heads, head_dim 128 (not 168).
    nemo = find_model("mistral-nemo-12b").spec
    assert (nemo.hidden_size, nemo.num_heads, nemo.head_dim, nemo.q_width) == (5120, 32, 128, 4096)
    assert nemo.architecture_params() == 12_247_782_400  # HF safetensors count
    gemma = find_model("gemma-3-27b").spec
    assert (gemma.hidden_size // gemma.num_heads, gemma.head_dim) == (168, 128)


def test_image_text_checkpoints_plan_their_language_model_and_vision_tower() -> None:
    # Gemma 3 4B/12B/27B are image-text models; the planner reads text_config (262,208 tokens) and counts
    # the SigLIP tower + projector from vision_config. transformers 5.25.0, Gemma3ForConditionalGeneration
    # built on the meta device from these configs (resources/models.json, copied from google/gemma-3-*-pt):
    # vision_tower 416,866,032 for every size, multi_modal_projector 1152 × text width + 1152.
    for size, text_width in (("4b", 2560), ("12b", 3840), ("27b", 5376)):
        spec = find_model(f"gemma-3-{size}").spec
        assert spec.vocab_size == 262_208 and spec.tie_embeddings
        assert spec.vision_params == 416_866_032 + 1152 * text_width + 1152
        assert spec.vision_kind == "SigLIP"


def test_an_unknown_family_is_kept_aside_not_offered(tmp_path: Path) -> None:
    # A family the config reader does not know yet stays in the file without breaking the rest.
    unknown = dict(ENTRIES[0], id="future", config=dict(ENTRIES[0]["config"], model_type="future_arch"))
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"format": "vramplan-model-catalogue", "models": [ENTRIES[0], unknown]}), "utf-8")
    assert [m.id for m in load_models(str(path))] == [ENTRIES[0]["id"]]
    pending = pending_models(str(path))
    assert [(p.id, p.model_type) for p in pending] == [("future", "future_arch")]
    assert "unknown architecture" in pending[0].reason


@pytest.mark.parametrize(("model_type", "why"), [("jamba", "recurrent state")])
def test_a_refused_family_is_kept_aside_with_its_reason(tmp_path: Path, model_type: str, why: str) -> None:
    # A family core.hfconfig reads and refuses (a hybrid recurrent one, or one it cannot express exactly) is kept
    # aside like an unknown one, with the reason, instead of failing the whole catalogue.
    refused = dict(ENTRIES[0], id="refused", config=dict(ENTRIES[0]["config"], model_type=model_type))
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"format": "vramplan-model-catalogue", "models": [ENTRIES[0], refused]}), "utf-8")
    assert [m.id for m in load_models(str(path))] == [ENTRIES[0]["id"]]
    pending = pending_models(str(path))
    assert [(p.id, p.model_type) for p in pending] == [("refused", model_type)]
    assert why in pending[0].reason


def test_readme_counts_the_model_entries() -> None:
    readme = (Path(__file__).parents[2] / "docs" / "CATALOGUES.md").read_text("utf-8")
    assert f"`resources/models.json`, {len(ENTRIES)} entries" in readme
    assert "derived count equals the published count exactly for every entry" in readme


def test_models_planned_in_2026_and_the_corpus_gemma_rows_are_offered() -> None:
    # Gemma 1 2B / 7B (google/gemma-2b, google/gemma-7b model pages: safetensors counts 2,506,172,416 and
    # 8,537,680,896; configs as NVIDIA-NeMo/Megatron-Bridge 42fa1d24 tests/unit_tests/models/gemma/
    # test_gemma_bridge.py quotes them): multi-query 2B, 16 KV heads of 256 on the 7B, tied GeGLU models.
    gemma_2b, gemma_7b = find_model("gemma-2b").spec, find_model("gemma-7b").spec
    assert gemma_2b.architecture_params() == 2_506_172_416
    assert (gemma_2b.num_kv_heads, gemma_2b.head_dim, gemma_2b.tie_embeddings) == (1, 256, True)
    assert gemma_7b.architecture_params() == 8_537_680_896
    assert (gemma_7b.num_kv_heads, gemma_7b.head_dim, gemma_7b.q_width) == (16, 256, 4096)
    # Qwen3-235B-A22B model card: "235B in total and 22B activated", 128 experts, 8 activated.
    qwen = find_model("qwen3-235b-a22b")
    assert qwen.spec.architecture_params() == 235_093_634_560
    assert round(qwen.spec.active_params() / 1e9) == 22 and qwen.active_params == qwen.spec.active_params()
    assert (qwen.spec.num_experts, qwen.spec.experts_per_token, qwen.spec.num_layers) == (128, 8, 94)
    # ibm-granite/granite-3.3-8b-instruct model page: 8.17B parameters (tied embeddings, vocabulary 49,159).
    granite = find_model("granite-3.3-8b-instruct").spec
    assert round(granite.architecture_params() / 1e7) == 817 and granite.tie_embeddings
