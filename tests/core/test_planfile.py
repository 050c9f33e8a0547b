"""The plan file: round trips, clear errors, atomic saves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings

from core.catalogue import load_models
from core.errors import PlanError, PlanFileError
from core.files import planfile
from core.plan import Plan
from core.presets import default_plan, plan_for_model
from tests.core.strategies import plans


@settings(max_examples=300, deadline=None)
@given(plans())
def test_load_of_save_is_identity(plan: Plan) -> None:
    assert planfile.loads(planfile.dumps(plan)) == plan


def test_save_and_load_a_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.vramplan.json"
    planfile.save(default_plan(), path)
    assert planfile.load(path) == default_plan()
    assert json.loads(path.read_text())["version"] == planfile.VERSION


def _document() -> dict:  # type: ignore[type-arg]
    return json.loads(planfile.dumps(default_plan()))


def test_unknown_key_is_named() -> None:
    doc = _document()
    doc["plan"]["workload"]["batchsize"] = 4
    with pytest.raises(PlanError, match=r"plan\.workload\.batchsize.*unknown key"):
        planfile.plan_from_dict(doc)


def test_missing_key_is_named() -> None:
    doc = _document()
    del doc["plan"]["parallel"]["gpus_per_node"]
    with pytest.raises(PlanError, match=r"plan\.parallel\.gpus_per_node.*missing"):
        planfile.plan_from_dict(doc)


def test_a_file_from_before_the_serving_engines_reads_as_vllm_0_19() -> None:
    # Files written before issue 23 have no vLLM release, serving link or llama.cpp settings;
    # they failed to load ("plan.inference.vllm_version ... the key is missing") and must read
    # as the defaults: vLLM 0.19's rules, what this program applied to them.
    doc = _document()
    for key in ("vllm_version", "link", "gguf_quant", "gpu_layers", "cache_type", "flash_attention", "ubatch"):
        del doc["plan"]["inference"][key]
    plan = planfile.plan_from_dict(doc)
    assert plan == default_plan() and plan.inference.vllm_version.value == "0.19"


def test_a_file_from_before_the_llamacpp_build_reads_as_a_current_build() -> None:
    # Files written before llama.cpp's build became an input read as 0, a current build (the
    # rules every earlier release applied: no F16 dequantisation before cuBLAS for prompts).
    doc = _document()
    del doc["plan"]["inference"]["llamacpp_build"]
    plan = planfile.plan_from_dict(doc)
    assert plan == default_plan() and plan.inference.llamacpp_build == 0


def test_a_file_from_before_the_llamacpp_backend_reads_as_the_cards_own() -> None:
    # Files written before the backend became an input read as the card's own (CUDA / Metal),
    # the kernels every earlier release counted; "vulkan" round-trips.
    doc = _document()
    del doc["plan"]["inference"]["llamacpp_backend"]
    plan = planfile.plan_from_dict(doc)
    assert plan == default_plan() and plan.inference.llamacpp_backend.value == "native"
    vulkan = default_plan().with_inference(llamacpp_backend="vulkan")
    assert planfile.plan_from_dict(planfile.plan_to_dict(vulkan)) == vulkan


def test_a_file_from_before_the_vllm_sampler_reads_as_a_pip_install() -> None:
    # Files written before vLLM's sampler became an input read as "auto" (a plain pip install's
    # sampler: core.serving.vllm_rules.sampler_path); "flashinfer" round-trips.
    doc = _document()
    del doc["plan"]["inference"]["vllm_sampler"]
    plan = planfile.plan_from_dict(doc)
    assert plan == default_plan() and plan.inference.vllm_sampler.value == "auto"
    flashinfer = default_plan().with_inference(engine="vllm", vllm_sampler="flashinfer")
    assert planfile.plan_from_dict(planfile.plan_to_dict(flashinfer)) == flashinfer


def test_wrong_type_is_named() -> None:
    doc = _document()
    doc["plan"]["workload"]["micro_batch"] = "four"
    with pytest.raises(PlanError, match=r"plan\.workload\.micro_batch: 'four'.*integer"):
        planfile.plan_from_dict(doc)


def test_out_of_range_value_names_field_value_and_range() -> None:
    doc = _document()
    doc["plan"]["workload"]["seq_len"] = 0
    with pytest.raises(PlanError) as info:
        planfile.plan_from_dict(doc)
    assert info.value.field == "workload.seq_len"
    assert info.value.value == 0
    assert "1 to" in info.value.allowed


def test_bad_enum_lists_the_choices() -> None:
    doc = _document()
    # "lion" until branch h57opt modelled Lion, "galore-adamw" until branch h64galore modelled GaLore
    doc["plan"]["optimizer"] = "apollo-adamw"
    with pytest.raises(PlanError, match="adamw, adamw-8bit"):
        planfile.plan_from_dict(doc)


def test_newer_version_is_refused_clearly() -> None:
    doc = _document()
    doc["version"] = planfile.VERSION + 1
    with pytest.raises(PlanError, match="newer"):
        planfile.plan_from_dict(doc)


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"\xff\xfe\x00garbage", b"[1, 2]", b"NaN", b'{"format": "something-else"}', b"[" * 100_000],
)
def test_malformed_text_gives_a_file_error(raw: bytes) -> None:
    with pytest.raises(PlanFileError):
        planfile.loads(raw, "x.json")


def test_failed_save_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "plan.json"
    planfile.save(default_plan(), path)
    before = path.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(PlanFileError, match="cannot be written"):
        planfile.save(default_plan().with_workload(micro_batch=7), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary left behind


def test_integer_beyond_float_range_is_a_clear_error() -> None:
    # JSON allows 10**400; math.isfinite() overflows on it (found by test_fuzz).
    doc = _document()
    doc["plan"]["hardware"]["utilisation"] = 10**400
    with pytest.raises(PlanError, match=r"plan\.hardware\.utilisation"):
        planfile.plan_from_dict(doc)


def test_an_old_files_transformer_engine_fp8_still_loads_as_delayed_scaling() -> None:
    # "te" was Transformer Engine's one per-tensor recipe; it stays the delayed-scaling one (TE's and
    # Megatron-Core's default recipe), and current scaling is a value of its own ("te-current").
    from core.plan import Float8
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-8b")
    document = json.loads(planfile.dumps(plan))
    document["plan"]["float8"] = "te"
    assert planfile.loads(json.dumps(document)).float8 is Float8.TE
    current = plan.with_changes(float8=Float8.TE_CURRENT)
    assert planfile.loads(planfile.dumps(current)).float8 is Float8.TE_CURRENT


def test_a_catalogue_model_saved_before_its_vision_fields_reads_as_the_catalogue_entry() -> None:
    # Gemma 3 4B's catalogue entry (resources/models.json, its Hub config's vision_config: 27 layers,
    # 1,152 wide) gained vision_config_layers / vision_config_hidden after files were written without them.
    # Such a file means the catalogue model: read it as the entry, so its SGLang fraction and its launch
    # files (the Hub id) are those of a fresh pick.
    entry = next(m for m in load_models() if m.id == "gemma-3-4b")
    document = json.loads(planfile.dumps(Plan(model=entry.spec, model_id=entry.id)))
    for key in ("vision_config_layers", "vision_config_hidden"):
        del document["plan"]["model"][key]
    assert planfile.plan_from_dict(document).model == entry.spec


def test_an_edited_model_missing_new_fields_stays_as_written() -> None:
    # The same file with one stored field changed (a hidden size the entry does not have) is not the
    # catalogue model: the missing fields take their defaults, the edit is kept.
    entry = next(m for m in load_models() if m.id == "gemma-3-4b")
    document = json.loads(planfile.dumps(Plan(model=entry.spec, model_id=entry.id)))
    del document["plan"]["model"]["vision_config_layers"]
    document["plan"]["model"]["hidden_size"] = entry.spec.hidden_size + 128
    model = planfile.plan_from_dict(document).model
    assert model.hidden_size == entry.spec.hidden_size + 128
    assert model.vision_config_layers == 0


def test_a_hybrids_layer_order_round_trips_and_an_older_file_reads_without_it() -> None:
    # Qwen3.5 27B's catalogue entry (resources/models.json, its Hub config's layer_types: three Gated DeltaNet
    # layers to one attention layer) keeps its order in a plan file.
    entry = next(m for m in load_models() if m.id == "qwen3.5-27b")
    document = json.loads(planfile.dumps(plan_for_model(entry.id)))
    assert document["plan"]["model"]["layer_pattern"] == entry.spec.layer_pattern != ""
    assert planfile.plan_from_dict(document).model == entry.spec
    # A file written before the field: the catalogue model's reads as the entry (as any field added since), an
    # edited one as "" (order not known: core.parallel.layout.fsdp_unit_order plans as before it).
    del document["plan"]["model"]["layer_pattern"]
    assert planfile.plan_from_dict(document).model == entry.spec
    document["plan"]["model"]["hidden_size"] = entry.spec.hidden_size + 128
    assert planfile.plan_from_dict(document).model.layer_pattern == ""
