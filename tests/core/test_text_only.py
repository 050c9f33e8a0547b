"""Image-text checkpoints served text-only, and vLLM's encoder profile run (core.serving.text_only)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model, load_models
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch.vllm import export_vllm, read_vllm, text_only_limits
from core.files.planfile import dumps, loads
from core.hfconfig import model_from_hf_config
from core.inputs import skips_tower, text_only_offered
from core.plan import Engine, Inference, Plan, VllmVersion, serving_refusal
from core.serving.text_only import encoder_profile, skips_vision_tower
from core.serving.vllm_versions import limit_mm_json

_COUNTS = Path(__file__).parents[1] / "data" / "vision" / "meta_counts.json"
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]
# gemma-3-4b-it's SigLIP tower + projector (core/vision.py, checked against transformers 5.25.0's meta count in
# tests/core/test_vision.py).
GEMMA3_4B_TOWER = 419_816_304


def _served(engine: Engine = Engine.VLLM, text_only: bool = True, version: VllmVersion = VllmVersion.V0_19) -> Plan:
    plan = Plan(model=find_model("gemma-3-4b").spec, model_id="gemma-3-4b")
    inf = replace(plan.inference, engine=engine, text_only=text_only, vllm_version=version)
    return replace(plan, inference=inf)


# The first release lines whose model class skips the tower, read in the wheels (core.inputs
# TEXT_ONLY_FROM): PR #22299 in 0.10.1 for llava / mistral3 / qwen2_5_vl, PR #26000's Qwen3-VL in 0.11.0, and
# PR #32605's _mark_tower_model for every family in 0.15.0 (0.14.0's gemma3_mm.py has no check).
@pytest.mark.parametrize(
    ("family", "last_without", "first_with"),
    [
        ("llava", VllmVersion.V0_9, VllmVersion.V0_10),
        ("mistral3", VllmVersion.V0_9, VllmVersion.V0_10),
        ("qwen2_5_vl", VllmVersion.V0_9, VllmVersion.V0_10),
        ("qwen3_vl", VllmVersion.V0_10, VllmVersion.V0_11),
        ("gemma3", VllmVersion.V0_14, VllmVersion.V0_15),
        ("llava_next", VllmVersion.V0_14, VllmVersion.V0_15),
        ("llava_onevision", VllmVersion.V0_14, VllmVersion.V0_15),
    ],
)
def test_the_release_that_skips_each_familys_tower(
    family: str, last_without: VllmVersion, first_with: VllmVersion
) -> None:
    assert not skips_tower(last_without, family)
    assert skips_tower(first_with, family)
    assert skips_tower(VllmVersion.V0_34, family)


def test_text_only_drops_the_tower_from_vllm_weights_and_its_pool_grows() -> None:
    loaded, text = estimate(_served(text_only=False)).inference, estimate(_served()).inference
    # 419,816,304 bf16 parameters the text-only engine never builds.
    assert loaded.weights_bytes - text.weights_bytes == pytest.approx(GEMMA3_4B_TOWER * 2)
    assert text.kv_cache_tokens > loaded.kv_cache_tokens
    assert text.activation_bytes < loaded.activation_bytes  # no dummy images profiled


@pytest.mark.parametrize(
    ("engine", "version", "names"),
    [
        (Engine.VLLM, VllmVersion.V0_14, "vLLM 0.15"),  # gemma3_mm.py builds SigLIP up to 0.14
        (Engine.SGLANG, VllmVersion.V0_19, "SGLang builds the vision tower"),
        (Engine.HF, VllmVersion.V0_19, "AutoModelForCausalLM"),
    ],
)
def test_an_engine_that_loads_the_tower_anyway_refuses_text_only(
    engine: Engine, version: VllmVersion, names: str
) -> None:
    with pytest.raises(PlanError, match="inference.text_only") as refused:
        _served(engine, version=version)  # Plan validation refuses it (core.plan.serving_refusal): no estimate runs
    assert names in str(refused.value)
    assert "vLLM 0.15 or later" in str(refused.value)


def test_the_box_is_offered_exactly_where_a_tick_is_taken() -> None:
    """core.inputs.text_only_offered (the Serving form's row) against Plan validation's answer to a tick
    (core.plan.serving_refusal), for every image-text model of the catalogue and a text model, on every engine and
    vLLM line the model is served on: offered where the tick is taken, never where it is refused. llama.cpp takes a
    tick and changes nothing (no tower from the GGUF), so it is not offered either. Before branch h76sglui the row
    showed on SGLang and transformers (every tick refused) and on vLLM lines before the family's."""
    models = [m for m in load_models() if m.spec.vision_params] + [find_model("llama-3.1-8b")]
    offered = 0
    for entry in models:
        for engine in Engine:
            for version in VllmVersion if engine is Engine.VLLM else [VllmVersion.V0_19]:
                inf = Inference(engine=engine, vllm_version=version)
                if serving_refusal(entry.spec, inf) is not None:
                    continue  # no plan to show (Llama 4 off vLLM, a hybrid on a line that does not load it)
                plan = Plan(model=entry.spec, model_id=entry.id, inference=inf)
                taken = serving_refusal(entry.spec, replace(inf, text_only=True)) is None
                changes = taken and skips_vision_tower(entry.spec, replace(inf, text_only=True))
                assert text_only_offered(plan) is changes, (entry.id, engine, version)
                assert not text_only_offered(plan) or taken
                offered += text_only_offered(plan)
    assert offered  # Gemma 3 on vLLM 0.15 on, Llama 4 from 0.10, Qwen3.5 on its lines


def test_text_only_changes_nothing_for_llamacpp_or_a_text_model() -> None:
    plan = _served(Engine.LLAMACPP)
    assert not skips_vision_tower(plan.model, plan.inference)  # llama.cpp loads a tower only from an mmproj
    text_model = replace(_served(), model=find_model("llama-3.1-8b").spec)
    assert not skips_vision_tower(text_model.model, text_model.inference)


def test_the_encoder_profile_batch_is_the_logged_one() -> None:
    # gemma-3-4b-it on vLLM 0.19.0 (llm-d-incubation/llm-d-planner@d3121e059da8 accuracy/results/v0.19.0/logs/
    # google-gemma-3-4b-it--h100-80gb--tp1pp1dp1--8192.log):
    # "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 32 image items"; the
    # run's max_num_batched_tokens 8192, max_num_seqs 1024, max_model_len 8192.
    plan = _served(text_only=False)
    plan = replace(plan, inference=replace(plan.inference, context=8192))
    model = plan.model
    profile = encoder_profile(model, plan.inference, 8192, 1024, 2.0)
    assert profile.items == 32
    # Kept through the text forward: 32 images of 3 × 896² bf16 pixel values and 32 × 256 embeddings of 2,560.
    assert profile.kept == 32 * 3 * 896 * 896 * 2 + 32 * 256 * 2560 * 2
    # The tower's peak: 32 × 4,096 patches of (2 × 1,152 + 2 × 4,304) bf16 values beside the pixel values.
    assert profile.peak == 32 * 3 * 896 * 896 * 2 + 32 * 4096 * (2 * 1152 + 2 * 4304) * 2
    # Text only, or a release whose runner was not read, profiles no images.
    assert encoder_profile(model, replace(plan.inference, text_only=True), 8192, 1024, 2.0).items == 0
    assert encoder_profile(model, replace(plan.inference, vllm_version=VllmVersion.V0_20), 8192, 1024, 2.0).items == 0


def test_a_dynamic_resolution_tower_has_no_encoder_profile() -> None:
    # Qwen2.5-VL sizes its dummy image from preprocessor_config.json's max_pixels, which is not read.
    spec = model_from_hf_config(META["qwen2_5_vl-7b"]["config"])
    assert spec.vision_family == "qwen2_5_vl" and spec.vision_embeddings == 0
    plan = replace(_served(text_only=False), model=spec)
    assert encoder_profile(spec, plan.inference, 8192, 1024, 2.0).items == 0


def test_the_vllm_command_carries_the_limits_and_reads_back() -> None:
    exported = export_vllm(_served())
    assert "--limit-mm-per-prompt '{\"image\":0}'" in exported.text
    _, fields = read_vllm(exported.text)
    assert fields["inference.text_only"] is True
    assert "--limit-mm-per-prompt" not in export_vllm(_served(text_only=False)).text
    # Qwen-VL towers serve images and video: both limits 0 (0.19.0 qwen2_5_vl.py _mark_tower_model).
    assert limit_mm_json("qwen2_5_vl") == '{"image":0,"video":0}'


@pytest.mark.parametrize(
    ("value", "text_only"),
    [
        ('{"image":0}', True),
        ('{"image":0,"video":{"count":0,"num_frames":8}}', True),  # vLLM 0.19's configurable form
        ('{"image":1}', False),
        ('{"image":0,"video":2}', False),
        ("image=0", False),  # not JSON: vLLM reads no zero limits from it here
        ("{}", False),
        ("", False),
    ],
)
def test_limit_mm_per_prompt_values(value: str, text_only: bool) -> None:
    assert text_only_limits(value) is text_only


def test_plan_files_keep_text_only_and_old_files_load_the_tower() -> None:
    plan = _served()
    assert loads(dumps(plan)).inference.text_only is True
    document = json.loads(dumps(_served(text_only=False)))
    del document["plan"]["inference"]["text_only"]
    assert loads(json.dumps(document)).inference.text_only is False


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["estimate", "--mode", "inference", "-m", "gemma-3-4b", "--engine", "vllm", "--json", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_line_takes_both_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    _, loaded, _ = _cli(capsys)
    for spelling in (["--text-only"], ["--limit-mm-per-prompt", '{"image":0}']):
        code, out, _ = _cli(capsys, *spelling)
        assert code == 0 and out != loaded
        assert out == _cli(capsys, "--text-only")[1]
    # Limits that let images through serve the tower; a contradiction, or a release that loads it, is refused.
    assert _cli(capsys, "--limit-mm-per-prompt", '{"image":1}')[1] == loaded
    code, _, err = _cli(capsys, "--limit-mm-per-prompt", '{"image":0}', "--no-text-only")
    assert code == 2 and "contradicts" in err
    code, _, err = _cli(capsys, "--text-only", "--vllm-version", "0.14")
    assert code == 2 and "vLLM 0.15 or later" in err


def test_the_summary_words_follow_the_serving_rule() -> None:
    """The model summary's words and the serving figures read one rule (skips_vision_tower): text-only on vLLM
    0.19 (every family from 0.15, PR #32605) does not build Gemma 3's tower; llama.cpp never reads it from the
    GGUF; a text model has no words."""
    from core.serving.text_only import tower_serving_words

    gemma = find_model("gemma-3-4b").spec
    inf = Plan(model=gemma, model_id="gemma-3-4b").inference
    vllm = replace(inf, engine=Engine.VLLM, vllm_version=VllmVersion.V0_19)
    assert tower_serving_words(gemma, vllm) == "loaded"
    assert tower_serving_words(gemma, replace(vllm, text_only=True)) == "not loaded: text only"
    assert tower_serving_words(gemma, replace(vllm, engine=Engine.LLAMACPP)).startswith("not loaded: llama.cpp")
    assert tower_serving_words(find_model("llama-3.1-8b").spec, vllm) == ""
