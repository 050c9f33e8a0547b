"""Which serving plans are refused, and why: one answer (core.plan.serving_refusal) whatever asks.

A table of engines and releases × kinds of model (a Mamba-2 hybrid, a Gated DeltaNet hybrid, chunked and sliding
attention, latent attention, a mixture of experts, an image-text checkpoint, a plain dense model), some cells asking
text-only serving or a hybrid's prefix caching (refused by estimate() before branch h72home, by validation since).
For every cell the entry points agree
with the home's answer: Plan validation (what the window's edit and a plan file go through) raises exactly that
PlanError or none; the serving estimate runs where it is none; the command line prints the same words; and
serving_on moves a plan to vLLM only where the engine or its release is the reason and the model is planned on
vLLM only, to a plan the home accepts.
"""

from __future__ import annotations

import html
from dataclasses import replace
from typing import Any

import pytest

from core.catalogue import find_model
from core.cli.app import main
from core.errors import PlanError, one_line
from core.estimate import estimate
from core.files.launch.sglang import export_sglang, read_sglang
from core.files.report import build_report, md_cell, to_html, to_markdown
from core.plan import (
    HYBRID_VLLM_NEWEST,
    Engine,
    KvDtype,
    OllamaVersion,
    PrefixCaching,
    SglangVersion,
    VllmVersion,
    default_plan_on,
    serving_on,
    serving_refusal,
)
from core.serving.text_only import tower_line
from core.verdict import Mode

# Catalogue models, one per kind (resources/models.json).
MODELS = {
    "dense": "qwen2.5-7b",
    "mamba2 hybrid": "granite-4.0-h-tiny",
    "gated deltanet hybrid": "qwen3.5-9b",  # vLLM loads it from 0.17 (core.plan.HYBRID_VLLM_FROM)
    "chunked attention": "llama-4-scout-17b-16e",
    "sliding window": "gemma-2-9b",
    "latent attention": "deepseek-v2-lite",
    "mixture of experts": "qwen3-30b-a3b",
    "image-text": "gemma-3-4b",  # SigLIP beside the language model; vLLM skips it in text-only mode from 0.15
}
# (inference changes, the same as command-line options). The releases are the planner's own lines: 0.7 predates
# Llama 4 (0.8) and every hybrid line (0.11 on); 0.13 is a hybrid line before Qwen3.5's first (0.17); build 5000
# is a llama.cpp build other than a current one; Ollama 0.12.11 a line with its own estimate (before 0.30).
ENGINES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "hf": ({"engine": Engine.HF}, ["--engine", "hf"]),
    "vllm 0.19": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_19},
        ["--engine", "vllm", "--vllm-version", "0.19"],
    ),
    "vllm 0.13": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_13},
        ["--engine", "vllm", "--vllm-version", "0.13"],
    ),
    "vllm 0.7": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_7},
        ["--engine", "vllm", "--vllm-version", "0.7"],
    ),
    # vLLM's int8_per_token_head cache, from 0.20 (core.inputs.VLLM_KV_FROM): no MLA backend keeps it
    "vllm int8 cache": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_20, "kv_dtype": KvDtype.INT8},
        ["--engine", "vllm", "--vllm-version", "0.20", "--kv-dtype", "int8"],
    ),
    "sglang": ({"engine": Engine.SGLANG}, ["--engine", "sglang"]),
    "llama.cpp": ({"engine": Engine.LLAMACPP}, ["--engine", "llamacpp"]),
    "llama.cpp build 5000": (
        {"engine": Engine.LLAMACPP, "llamacpp_build": 5000},
        ["--engine", "llamacpp", "--llamacpp-build", "5000"],
    ),
    "ollama 0.12.11": (
        {"engine": Engine.LLAMACPP, "ollama_version": OllamaVersion("0.12.11")},
        ["--engine", "llamacpp", "--ollama", "0.12.11"],
    ),
    # Text only (core.inputs TEXT_ONLY_FROM): Gemma 3's tower is skipped from 0.15, Llama 4's from 0.10; SGLang and
    # transformers build it whatever the requests hold.
    "vllm 0.14 text only": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_14, "text_only": True},
        ["--engine", "vllm", "--vllm-version", "0.14", "--text-only"],
    ),
    "vllm 0.19 text only": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_19, "text_only": True},
        ["--engine", "vllm", "--vllm-version", "0.19", "--text-only"],
    ),
    "sglang text only": ({"engine": Engine.SGLANG, "text_only": True}, ["--engine", "sglang", "--text-only"]),
    "hf text only": ({"engine": Engine.HF, "text_only": True}, ["--engine", "hf", "--text-only"]),
    # SGLang with vLLM 0.9 named: a model planned on vLLM only moves to 0.9, which skips no Llama 4 tower.
    "sglang text only, vllm 0.9": (
        {"engine": Engine.SGLANG, "vllm_version": VllmVersion.V0_9, "text_only": True},
        ["--engine", "sglang", "--vllm-version", "0.9", "--text-only"],
    ),
    # SGLang's --enable-multimodal (core.inputs SGLANG_ENABLE_MULTIMODAL_FROM): Gemma 3 served with images from 0.4.6;
    # 0.4.5's server_args.py has no such flag. Any other model takes it and ignores it ("nothing will happen").
    "sglang multimodal": (
        {"engine": Engine.SGLANG, "sglang_enable_multimodal": True},
        ["--engine", "sglang", "--enable-multimodal"],
    ),
    "sglang 0.4.5 multimodal": (
        {"engine": Engine.SGLANG, "sglang_version": SglangVersion.V0_4_5, "sglang_enable_multimodal": True},
        ["--engine", "sglang", "--sglang-version", "0.4.5", "--enable-multimodal"],
    ),
    # A hybrid's prefix caching: opt-in from vLLM 0.26 (core.plan.PREFIX_CACHING_OPT_IN_FROM).
    "vllm 0.24 prefix caching": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_24, "prefix_caching": PrefixCaching.ON},
        ["--engine", "vllm", "--vllm-version", "0.24", "--prefix-caching", "on"],
    ),
    "vllm 0.26 prefix caching": (
        {"engine": Engine.VLLM, "vllm_version": VllmVersion.V0_26, "prefix_caching": PrefixCaching.ON},
        ["--engine", "vllm", "--vllm-version", "0.26", "--prefix-caching", "on"],
    ),
    "sglang prefix caching, vllm 0.24": (
        {"engine": Engine.SGLANG, "vllm_version": VllmVersion.V0_24, "prefix_caching": PrefixCaching.ON},
        ["--engine", "sglang", "--vllm-version", "0.24", "--prefix-caching", "on"],
    ),
}
# The refusals serving_on answers with another engine (core.plan._ENGINE_CHOICE): the engine and its release.
ENGINE_CHOICE = {"inference.engine", "inference.vllm_version", "inference.llamacpp_build", "inference.ollama_version"}
CELLS = [(kind, engine) for kind in MODELS for engine in ENGINES]


def _cell(kind: str, engine: str) -> tuple[Any, Any, PlanError | None]:
    model = find_model(MODELS[kind])
    changes, _ = ENGINES[engine]
    inference = replace(default_plan_on(model.spec, model.id).inference, **changes)
    return model, inference, serving_refusal(model.spec, inference)


@pytest.mark.parametrize(("kind", "engine"), CELLS)
def test_plan_validation_and_the_serving_estimate_give_the_homes_answer(kind: str, engine: str) -> None:
    model, inference, refusal = _cell(kind, engine)
    base = default_plan_on(model.spec, model.id)
    if refusal is None:
        plan = base.with_inference(**ENGINES[engine][0])
        assert plan.inference == inference
        assert estimate(plan).inference.total_bytes > 0  # the serving estimate runs
        return
    with pytest.raises(PlanError) as info:
        base.with_inference(**ENGINES[engine][0])
    assert (info.value.field, str(info.value)) == (refusal.field, str(refusal))


@pytest.mark.parametrize(("kind", "engine"), CELLS)
def test_the_command_line_gives_the_homes_answer(kind: str, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    model, _, refusal = _cell(kind, engine)
    code = main(["estimate", "--mode", "inference", "--model", model.id, *ENGINES[engine][1]])
    out, err = capsys.readouterr()
    if refusal is None:
        assert code == 0 and err == "" and out
    else:
        assert (code, err) == (2, f"vramplan: {one_line(str(refusal))}\n")


@pytest.mark.parametrize(("kind", "engine"), CELLS)
def test_serving_on_moves_only_what_the_home_refuses_for_its_engine(kind: str, engine: str) -> None:
    model, inference, refusal = _cell(kind, engine)
    moved = serving_on(model.spec, inference)
    vllm_only = model.spec.hybrid is not None or model.spec.chunked_attention
    if refusal is None or refusal.field not in ENGINE_CHOICE or not vllm_only:
        assert moved is inference
        return
    assert moved.engine is Engine.VLLM and serving_refusal(model.spec, moved) is None
    assert replace(moved, engine=inference.engine, vllm_version=inference.vllm_version) == replace(
        inference, llamacpp_build=moved.llamacpp_build, ollama_version=moved.ollama_version
    )


def test_the_table_holds_refusals_of_every_kind_it_names() -> None:
    # The table is worth its cells: each kind planned on some engines only meets a refusal, each field the home
    # decides is exercised, and every kind is served somewhere.
    refused = {(kind, engine): _cell(kind, engine)[2] for kind, engine in CELLS}
    for kind in ("mamba2 hybrid", "gated deltanet hybrid", "chunked attention", "latent attention", "image-text"):
        assert any(refused[kind, engine] is not None for engine in ENGINES), kind
    for kind in MODELS:
        assert any(refused[kind, engine] is None for engine in ENGINES), kind
    fields = {error.field for error in refused.values() if error is not None}
    assert fields == ENGINE_CHOICE | {
        "inference.kv_dtype",
        "inference.text_only",
        "inference.prefix_caching",
        "inference.sglang_enable_multimodal",
    }
    assert all(
        refused[kind, engine] is None
        for kind in ("dense", "sliding window", "mixture of experts")
        for engine in ENGINES
    )


# The messages the estimate raised before branch h72home (core/serving/text_only.py skips_vision_tower and
# core/serving/vllm_hybrid.py prefix_caching_refusal at ab64306a), now Plan validation's, word for word; the SGLang
# reason reworded on branch h73sglvlm (a --language-model-only shipped in 0.5.18, for other architectures: core.plan).
FORMER_ESTIMATE_REFUSALS = {
    ("image-text", "vllm 0.14 text only"): (
        "inference.text_only: True is not allowed; expected vLLM 0.15 or later for gemma3 (vLLM 0.14 builds gemma3's "
        "vision tower whatever --limit-mm-per-prompt says)"
    ),
    ("image-text", "sglang text only"): (
        "inference.text_only: True is not allowed; expected vLLM 0.15 or later (any image-text family) (SGLang builds "
        "the vision tower: its --language-model-only (0.5.18 on) takes none of these families, sgl-project/sglang PR "
        "#28497 is not merged)"
    ),
    ("image-text", "hf text only"): (
        "inference.text_only: True is not allowed; expected vLLM 0.15 or later (any image-text family) (transformers "
        "5.25's AutoModelForCausalLM builds the whole image-text model (Gemma 3) or refuses it (Qwen-VL))"
    ),
    ("mamba2 hybrid", "vllm 0.24 prefix caching"): (
        "inference.prefix_caching: 'on' is not allowed; expected engine default or off, or vLLM 0.26 or later "
        "(vLLM 0.24 does not support prefix caching for hybrid models)"
    ),
}


@pytest.mark.parametrize(("kind", "engine"), list(FORMER_ESTIMATE_REFUSALS))
def test_what_the_estimate_refused_validation_refuses_with_the_same_words(kind: str, engine: str) -> None:
    model, inference, refusal = _cell(kind, engine)
    assert refusal is not None and str(refusal) == FORMER_ESTIMATE_REFUSALS[kind, engine]
    with pytest.raises(PlanError) as info:
        replace(default_plan_on(model.spec, model.id), inference=inference)
    assert str(info.value) == FORMER_ESTIMATE_REFUSALS[kind, engine]


def test_serving_on_takes_the_later_line_where_the_plans_own_refuses_the_rest() -> None:
    # Llama 4 asked text only on SGLang with vLLM 0.9 named: 0.9 loads Llama 4 (from 0.8) but builds its tower
    # (skipped from 0.10), so the plan moves to the default line (0.19), which does both.
    model, inference, _ = _cell("chunked attention", "sglang text only, vllm 0.9")
    assert serving_on(model.spec, inference).vllm_version is VllmVersion.V0_19
    # A hybrid asked prefix caching with vLLM 0.24 named: 0.24 serves Granite 4.0-H without it, so the newest line.
    model, inference, _ = _cell("mamba2 hybrid", "sglang prefix caching, vllm 0.24")
    assert serving_on(model.spec, inference).vllm_version is HYBRID_VLLM_NEWEST
    # Without the setting the line the plan names is kept, as before.
    assert serving_on(model.spec, replace(inference, prefix_caching=PrefixCaching.DEFAULT)).vllm_version is (
        VllmVersion.V0_24
    )


def test_picking_a_model_drops_a_setting_the_last_model_kept_hidden() -> None:
    # Text only and prefix caching are shown only for image-text and hybrid models (core/inputs.py matters=): a
    # text model keeps a text-only tick unseen, a dense model an "on" prefix caching. Picking a model that refuses
    # the unseen setting on the plan's engine (the refusals of FORMER_ESTIMATE_REFUSALS) drops it to its default,
    # as a split the new model cannot take, rather than refuse the pick naming a field the form does not show.
    dense = find_model(MODELS["dense"])
    image_text, hybrid = find_model(MODELS["image-text"]), find_model(MODELS["mamba2 hybrid"])
    base = default_plan_on(dense.spec, dense.id)
    hidden_tick = replace(base, inference=replace(base.inference, engine=Engine.SGLANG, text_only=True))
    picked = hidden_tick.on_model(image_text.spec, image_text.id)
    assert picked.model == image_text.spec and picked.inference.engine is Engine.SGLANG
    assert picked.inference.text_only is False
    hidden_on = replace(
        base,
        inference=replace(
            base.inference, engine=Engine.VLLM, vllm_version=VllmVersion.V0_24, prefix_caching=PrefixCaching.ON
        ),
    )
    picked = hidden_on.on_model(hybrid.spec, hybrid.id)
    assert picked.model == hybrid.spec and picked.inference.prefix_caching is PrefixCaching.DEFAULT
    assert picked.inference.vllm_version is VllmVersion.V0_24  # the line the plan names, which serves it without
    # SGLang's --enable-multimodal, unseen for a text model on 0.4.5, which Gemma 3 refuses there (no such flag).
    hidden_mm = replace(
        base,
        inference=replace(
            base.inference, engine=Engine.SGLANG, sglang_version=SglangVersion.V0_4_5, sglang_enable_multimodal=True
        ),
    )
    picked = hidden_mm.on_model(image_text.spec, image_text.id)
    assert picked.model == image_text.spec and picked.inference.sglang_enable_multimodal is False


# Every engine of the table that serves the image-text model (Gemma 3 4B's SigLIP): SGLang at its default (no
# --enable-multimodal) among them, which serves it as a text model yet builds the tower.
TOWER_CELLS = [engine for engine in ENGINES if _cell("image-text", engine)[2] is None]


@pytest.mark.parametrize("engine", TOWER_CELLS)
def test_the_command_line_and_the_report_say_the_towers_words(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The vision tower, and whether images are taken, in the words of core.serving.text_only.tower_line, which the
    window's model summary gives after its count (tests/gui/test_serving.py): before branch h76sglui the command line
    said nothing of the tower and the report only "language model + vision tower" in the weights' arithmetic, while
    the window said "(loaded)" for SGLang, which takes no images of Gemma 3 without --enable-multimodal."""
    model = find_model(MODELS["image-text"])
    plan = default_plan_on(model.spec, model.id).with_inference(**ENGINES[engine][0])
    line = tower_line(plan.model, plan.inference)
    assert line.startswith("SigLIP vision tower and projector (")
    assert main(["estimate", "--mode", "inference", "--model", model.id, *ENGINES[engine][1]]) == 0
    assert f"\n  {line}\n" in capsys.readouterr().out
    report = build_report([("plan", plan)], mode=Mode.INFERENCE)
    assert f"\n{md_cell(line)}\n" in to_markdown(report)
    assert f"<p>{html.escape(line)}</p>" in to_html(report)
    sglang = plan.inference.engine is Engine.SGLANG
    no_images = sglang and not plan.inference.sglang_enable_multimodal
    if no_images:
        assert line.endswith("loaded, yet SGLang takes no images without --enable-multimodal")
    elif sglang:
        assert line.endswith("loaded, images taken (--enable-multimodal)")
    assert "takes no images" not in line or sglang
    # The SGLang launch command's header says it too where the launch takes no images (and reads back without it).
    command = export_sglang(plan).text
    assert (f"# {line}\n" in command) is no_images
    assert read_sglang(command)[1]["inference.sglang_enable_multimodal"] is plan.inference.sglang_enable_multimodal
