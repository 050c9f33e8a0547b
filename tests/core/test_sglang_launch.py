"""SGLang's default fraction by what the launch is (issue 23): whether the prefill CUDA graphs are captured, their
4,096-token cap for a "llama-2" model path, an MLA model's 1.5 GiB for them, and the multimodal reduction
(core.serving.sglang_versions Launch / prefill_graphs_off / vlm_factor). Every figure is the arithmetic of the
released wheel named beside it (``pip download sglang==X --no-deps``: sglang/srt/server_args.py, from 0.5.19
sglang/srt/arg_groups/memory_hook.py and cuda_graph_hook.py), worked by hand on the card sizes resources/gpus.json
gives (H100 81,559 MiB, H200 143,771, MI300X 196,288, B200 183,359)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import catalogue_entry, find_gpu, find_model, hub_repo_of
from core.estimate import estimate
from core.files.launch.sglang import export_sglang
from core.files.launch.vllm import export_vllm
from core.hfconfig import model_from_hf_config
from core.plan import Plan, SglangVersion
from core.presets import plan_for_model
from core.serving.engines import sglang_flag_fraction, sglang_plan_fraction
from core.serving.sglang_versions import (
    Launch,
    default_fraction,
    is_multimodal,
    launch_of,
    model_path,
    prefill_graph_sizes,
    prefill_graphs_off,
    vlm_factor,
)

_COUNTS = Path(__file__).parents[1] / "data" / "vision" / "meta_counts.json"
# Configs transformers 5.25.0 wrote (tests/data/vision/meta_counts.json, its "source" says how).
META: dict[str, Any] = json.loads(_COUNTS.read_text("utf-8"))["cases"]
H100 = 81_559  # MiB, resources/gpus.json h100-sxm (nvidia-smi's total)


def served(model_id: str = "llama-3.1-8b", gpu: str = "h100-sxm", version: str = "0.5.23", **changes: object) -> Plan:
    plan = plan_for_model(model_id).with_hardware(gpu=gpu)
    return plan.with_inference(engine="sglang", context=4096, sglang_version=version, **changes)


def imported(case: str, version: str = "0.5.23") -> Plan:
    """A plan on an imported image-text model (the meta-count config of ``case``), served on SGLang on an H100."""
    return served(version=version).on_model(model_from_hf_config(META[case]["config"]))


def fraction(plan: Plan) -> float:
    return sglang_plan_fraction(plan, find_gpu(plan.hardware.gpu))


# ---- whether prefill graphs are captured ----------------------------------------------------------------------


def test_an_amd_card_captures_no_prefill_graphs() -> None:
    # 0.5.10 - 0.5.13 _handle_piecewise_cuda_graph "Non-CUDA hardware"; 0.5.14 - 0.5.20 tc_piecewise's
    # "non-CUDA hardware (HIP/NPU/CPU/MPS/XPU)"; 0.5.23 default_prefill_backend() is DISABLED off CUDA.
    # MI300X (196,288 MiB, the "B200, MI300" tier: chunk 16,384, decode graphs to 512):
    # 512 + 1.5 x 16,384 + 2 x 512 + 1 / 8 x 1,024 = 26,240 MiB -> 0.866, no 74 x 8 MiB for prefill graphs.
    for version in ("0.5.10", "0.5.14", "0.5.16", "0.5.23"):
        assert fraction(served(gpu="mi300x", version=version)) == round((196_288 - 26_240) / 196_288, 3) == 0.866
    assert launch_of(served(gpu="mi300x"), find_gpu("mi300x")).amd
    # On an NVIDIA card the same reserve counts them: 74 sizes up to 16,384 (B200: 26,832 MiB -> 0.854).
    assert len(prefill_graph_sizes(16_384)) == 74
    assert fraction(served(gpu="b200")) == 0.854


def test_a_multimodal_model_captures_no_prefill_graphs() -> None:
    # "Multimodal / VLM models" (0.5.10 server_args.py), "multimodal model" in the breakable rules (0.5.15 on):
    # Qwen2.5-VL is on no allowlist. On an H100 the reserve is 0.5.3's 13,440 MiB: round(68,119 / 81,559, 3) = 0.835
    # before the reduction (below), where a text model's is 13,904 MiB (0.83).
    plan = imported("qwen2_5_vl-7b")
    launch = launch_of(plan, find_gpu("h100-sxm"))
    assert launch.multimodal and prefill_graphs_off(SglangVersion.V0_5_23, True, 1, launch) == "a multimodal model"
    assert fraction(plan) == pytest.approx(0.835 * vlm_factor(SglangVersion.V0_5_23, launch))


def test_an_mla_model_reserves_1_5_gib_for_its_prefill_graphs_where_they_run() -> None:
    # "For MLA backend the memory overhead is much higher than expected with fa3": + 1.5 x 1,024 MiB instead of
    # 8 MiB per count (0.5.10 server_args.py, 0.5.23 memory_hook.reserve_for_graph_mb). DeepSeek-V2-Lite on an H100:
    # 512 + 12,288 + 512 + 128 + 1,536 = 14,976 MiB -> 0.816. The breakable default of 0.5.15 - 0.5.17 turns an MLA
    # model's prefill graphs off ("MLA attention"; 0.5.17 "MLA attention (non-DSA)"): 13,440 MiB -> 0.835; 0.5.18's
    # rules have none.
    assert fraction(served("deepseek-v2-lite", version="0.5.10")) == 0.816
    assert fraction(served("deepseek-v2-lite", version="0.5.15")) == 0.835
    assert fraction(served("deepseek-v2-lite", version="0.5.17")) == 0.835
    assert fraction(served("deepseek-v2-lite", version="0.5.18")) == 0.816
    assert fraction(served("deepseek-v2-lite", version="0.5.23")) == 0.816


def test_gemma_3_and_llama_4_are_not_multimodal_at_sglangs_defaults_from_0_4_6() -> None:
    # configs/model_config.py mm_disabled_models (0.4.6 - 0.5.23): enable_multimodal False for
    # Gemma3ForConditionalGeneration and Llama4ForConditionalGeneration unless --enable-multimodal: their default is
    # a text model's (0.83 on an H100 at 0.5.23). Llama 4 is planned on vLLM only (chunked attention).
    plan = served("gemma-3-4b")
    assert not launch_of(plan, find_gpu("h100-sxm")).multimodal
    assert fraction(plan) == fraction(served()) == 0.83
    assert not is_multimodal(SglangVersion.V0_5_23, find_model("llama-4-scout-17b-16e").spec)
    # 0.4.5 lists both in multimodal_model_archs and has no mm_disabled_models: its ModelRunner's "*= 0.90" applies,
    # to the table's 0.88 (TP 1).
    assert fraction(served("gemma-3-4b", version="0.4.5")) == pytest.approx(0.88 * 0.90)
    assert fraction(served("gemma-3-4b", version="0.4.4")) == 0.88  # not yet listed
    # A tower whose family predates the field (an old plan file) is multimodal from 0.5.10 (has_multimodal_subconfig).
    old = replace(plan.model, vision_family="")
    assert is_multimodal(SglangVersion.V0_5_10, old) and not is_multimodal(SglangVersion.V0_5_9, old)


# ---- the llama-2 cap ----------------------------------------------------------------------------------------------


def test_a_llama_2_path_captures_prefill_graphs_to_4096_tokens() -> None:
    # 'if "llama-2" in self.model_path.lower()': min(chunk, 4,096) (0.5.10 server_args.py; 0.5.23 memory_hook.py).
    # H200 (chunk 8,192): 50 sizes to 4,096 instead of 58: 13,904 - 64 = 13,840 MiB -> round(129,931 / 143,771, 3).
    assert len(prefill_graph_sizes(4096)) == 50
    assert fraction(served("llama-2-7b", gpu="h200-sxm")) == round((143_771 - 13_840) / 143_771, 3) == 0.904
    assert fraction(served("llama-3.1-8b", gpu="h200-sxm")) == 0.903
    # Before 0.5.10 there are no prefill graphs to cap.
    assert fraction(served("llama-2-7b", gpu="h200-sxm", version="0.5.9")) == fraction(
        served("llama-3.1-8b", gpu="h200-sxm", version="0.5.9")
    )


def _llama_2_cases() -> dict[str, tuple[Plan, str]]:
    """Llama 2 7B on SGLang on an H200, reached four ways, and the --model-path each launch names."""
    plan = served("llama-2-7b", gpu="h200-sxm")
    edited = replace(plan.model, num_layers=30)
    return {
        # The catalogue pick: its Hub repository (resources/models.json llama-2-7b: meta-llama/Llama-2-7b-hf).
        "catalogue pick": (plan, "meta-llama/Llama-2-7b-hf"),
        # No catalogue id, the catalogue's spec (a plan file or run config that names no id): the same checkpoint.
        "catalogue spec, no id": (replace(plan, model_id=""), "meta-llama/Llama-2-7b-hf"),
        # The id kept, the spec edited (a hand-written plan file): no longer that checkpoint, so its name.
        "catalogue id, edited spec": (replace(plan, model=edited), "Llama 2 7B"),
        # A model read from the Hugging Face cache: its Hub id is its name.
        "cached model": (plan.on_model(plan.model.renamed("someone/llama-2-7b-merged")), "someone/llama-2-7b-merged"),
    }


LLAMA_2_CASES = ("catalogue pick", "catalogue spec, no id", "catalogue id, edited spec", "cached model")


@pytest.mark.parametrize("case", LLAMA_2_CASES)
def test_the_model_path_is_the_one_the_launch_export_writes(case: str) -> None:
    # core.catalogue.hub_repo_of is the one answer: SGLang's llama-2 rule reads the path the export writes, so the
    # --mem-fraction-static written is the estimate's, cap or no cap.
    plan, path = _llama_2_cases()[case]
    assert model_path(plan) == path == (hub_repo_of(plan) or plan.model.name)
    argv = shlex.split(export_sglang(plan).text.splitlines()[-1])  # the command, after the comment lines
    assert argv[argv.index("--model-path") + 1] == path
    assert float(argv[argv.index("--mem-fraction-static") + 1]) == fraction(plan)
    capped = launch_of(plan, find_gpu("h200-sxm")).llama2_path
    assert capped == ("llama-2" in path.lower())
    # 0.904 with the cap, 0.903 without (test_a_llama_2_path_captures_prefill_graphs_to_4096_tokens's figures).
    assert fraction(plan) == (0.904 if capped else 0.903)
    # The export lists the model as not expressed exactly where no catalogue repository was found; every exporter
    # names the same model (vLLM's: "vllm serve MODEL").
    assert export_sglang(plan).cannot("model") == (hub_repo_of(plan) == "")
    assert shlex.split(export_vllm(plan).text.splitlines()[-1])[2] == path


def test_the_catalogue_entry_is_decided_by_the_spec() -> None:
    cases = _llama_2_cases()
    assert catalogue_entry(cases["catalogue spec, no id"][0]) == find_model("llama-2-7b")
    assert catalogue_entry(cases["catalogue id, edited spec"][0]) is None
    assert catalogue_entry(cases["cached model"][0]) is None


# ---- the multimodal reduction -------------------------------------------------------------------------------------


def test_the_multimodal_reduction_by_release() -> None:
    # Qwen2.5-VL is in multimodal_model_archs from 0.4.3. model_executor/model_runner.py: "*= 0.95" in 0.4.3 - 0.4.4,
    # "*= 0.90" in 0.4.5 - 0.4.8, on the table's 0.88 (0.4.3 - 0.4.5) or the card class's 0.874 (0.4.8); 0.4.9
    # server_args.py "*= 0.90"; from 0.4.10 adjust_mem_fraction_for_vlm (0.8965625, below).
    assert fraction(imported("qwen2_5_vl-7b", "0.4.2")) == 0.88
    assert fraction(imported("qwen2_5_vl-7b", "0.4.3")) == pytest.approx(0.88 * 0.95)
    assert fraction(imported("qwen2_5_vl-7b", "0.4.5")) == pytest.approx(0.88 * 0.90)
    assert fraction(imported("qwen2_5_vl-7b", "0.4.8")) == pytest.approx(0.874 * 0.90)
    assert fraction(imported("qwen2_5_vl-7b", "0.4.9")) == pytest.approx(0.874 * 0.90)
    assert fraction(imported("qwen2_5_vl-7b", "0.4.10")) == pytest.approx(0.874 * 0.8965625)
    # LLaVA 1.5 (LlavaForConditionalGeneration, listed from 0.4.7) and its CLIP of 24 layers of 1,024 (the ViT-L/14
    # baseline): 0.95 x clamp(1 - 0.1 x (1 - 1)) = 0.95 from 0.4.10; 0.5.23's reserve without prefill graphs 0.835.
    assert fraction(imported("llava-default", "0.4.6")) == 0.88
    assert fraction(imported("llava-default", "0.4.10")) == pytest.approx(0.874 * 0.95)
    assert fraction(imported("llava-default", "0.5.23")) == pytest.approx(0.835 * 0.95)


def test_the_reduction_reads_the_vision_config_as_sglangs_transformers_answers_it() -> None:
    # Qwen2.5-VL's vision config names its layers "depth": getattr(vision_config, "num_hidden_layers", 24) is 24
    # under the transformers SGLang pins (checked with 5.19.0, 0.5.23's pin); hidden_size 1,280.
    # 1 - 0.1 x (24 x 1,280² / (24 x 1,024²) - 1) = 0.94375; x 0.95 = 0.8965625.
    qwen = launch_of(imported("qwen2_5_vl-7b"), find_gpu("h100-sxm"))
    assert (qwen.vit_layers, qwen.vit_hidden) == (0, 1280)
    assert vlm_factor(SglangVersion.V0_5_23, qwen) == pytest.approx(0.8965625)
    # Qwen3-VL is in multimodal_model_archs from 0.5.3 (absent in 0.5.1's list): no reduction before.
    assert fraction(imported("qwen3_vl-default", "0.5.1")) == 0.874
    # The factor stays within [0.8, 1.05] x 0.95: a tower 20 layers of 4,096 wide is clamped at 0.76.
    assert vlm_factor(SglangVersion.V0_5_23, Launch(multimodal=True, vit_layers=20, vit_hidden=4096)) == 0.95 * 0.8


def test_a_given_fraction_is_reduced_up_to_0_4_8_only() -> None:
    # 0.4.0 - 0.4.8 reduce in ModelRunner.__init__, whatever gave the fraction; 0.4.9 on only when
    # mem_fraction_static is None.
    plan = imported("qwen2_5_vl-7b").with_inference(mem_fraction_static=0.8)
    assert fraction(plan) == 0.8
    assert fraction(plan.with_inference(sglang_version="0.4.8")) == pytest.approx(0.8 * 0.90)
    formula = estimate(plan.with_inference(sglang_version="0.4.8")).inference.formula
    assert "(0.8 given × 0.9 for a multimodal model)" in formula


# ---- the window and the export say the same -----------------------------------------------------------------------


def test_the_formula_says_what_of_the_launch_moved_the_default() -> None:
    vl = estimate(imported("qwen2_5_vl-7b")).inference.formula
    said = "(SGLang 0.5.23's default; no prefill CUDA graphs: a multimodal model; × 0.8966 for a multimodal model)"
    assert said in vl
    llama2 = estimate(served("llama-2-7b")).inference.formula
    assert '(SGLang 0.5.23\'s default; prefill graphs to 4,096 tokens: "llama-2" in the model path)' in llama2
    amd = estimate(served(gpu="mi300x")).inference.formula
    assert "no prefill CUDA graphs: an AMD card (ROCm)" in amd
    # A text model on an NVIDIA card: nothing more said.
    assert "(SGLang 0.5.23's default)" in estimate(served()).inference.formula
    # A llama-2 path on a card whose chunk is 4,096 (A100 40GB): the cap changes nothing, so nothing is said.
    assert "llama-2" not in estimate(served("llama-2-7b", gpu="a100-40gb-sxm")).inference.formula


def test_the_export_writes_the_default_the_server_ends_at() -> None:
    # From 0.4.9 the written fraction is the reduced default (a given fraction is not reduced again); up to 0.4.8 the
    # server reduces any fraction, so the unreduced default is written (0.874 on an H100 at 0.4.8).
    plan = imported("qwen2_5_vl-7b")
    assert f"--mem-fraction-static {fraction(plan)!r}" in export_sglang(plan, "Qwen/Qwen2.5-VL-7B-Instruct").text
    old = plan.with_inference(sglang_version="0.4.8")
    assert sglang_flag_fraction(old, find_gpu("h100-sxm")) == 0.874
    assert "--mem-fraction-static 0.874" in export_sglang(old, "Qwen/Qwen2.5-VL-7B-Instruct").text
    assert fraction(old.with_inference(mem_fraction_static=0.874)) == pytest.approx(fraction(old))


def test_the_default_without_a_launch_is_a_text_models_on_an_nvidia_card() -> None:
    # default_fraction's launch defaults to a text model on an NVIDIA card: the H100's 0.83 at 0.5.23.
    plan = served()
    assert default_fraction(plan.inference, find_gpu("h100-sxm")) == fraction(plan) == 0.83
