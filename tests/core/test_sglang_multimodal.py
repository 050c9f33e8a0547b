"""SGLang's ``--enable-multimodal`` as a serving setting (issue 23 item 2; ``inference.sglang_enable_multimodal``).

Every rule is read in the released wheels (``pip download sglang==X --no-deps``):

* the flag: sglang/srt/server_args.py ``--enable-multimodal`` (store_true, default None) from 0.4.6 (absent from
  0.4.0 - 0.4.5), 0.5.20 - 0.5.23 arg_groups (field_order.py ``enable_multimodal``);
* what it does: configs/model_config.py ``mm_disabled_models`` (Gemma3 / Llama4ForConditionalGeneration from 0.4.6 to
  0.5.23) sets enable_multimodal False for them when the flag is not given, and ``is_multimodal = enable_multimodal
  and is_multimodal_model(...)``; for any other model "nothing will happen" (the flag's help text);
* what a multimodal launch costs: the runner's x 0.90 on any fraction (0.4.5 - 0.4.8 model_runner.py), x 0.90 on
  the default (0.4.9 server_args.py), adjust_mem_fraction_for_vlm (0.4.10 on), no prefill CUDA graphs (0.5.10 on),
  the 100 MiB SGLANG_VLM_CACHE_SIZE_MB out of the token pool (0.5.18 on, mem_cache/kv_cache_configurator.py).

The card is resources/gpus.json's h100-sxm (81,559 MiB, nvidia-smi's total); Gemma 3 27B's vision config (the
catalogue's, from google/gemma-3-27b-pt config.json) has 27 layers of width 1,152.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from core.catalogue import find_gpu, find_model, load_models
from core.cli.app import main
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch.common import apply_fields
from core.files.launch.fields import FIELDS_BY_NAME
from core.files.launch.sglang import export_sglang, read_sglang
from core.files.planfile import load, save
from core.inputs import input_at, sglang_multimodal_opt_in
from core.plan import Engine, Inference, Plan, SglangVersion, serving_refusal
from core.presets import plan_for_model
from core.serving.engines import sglang_free_at_start, sglang_plan_fraction
from core.serving.sglang_versions import is_multimodal, launch_of, vlm_factor
from core.units import MiB

V = SglangVersion
PATH = "inference.sglang_enable_multimodal"
# adjust_mem_fraction_for_vlm (0.4.10 server_args.py; 0.5.23 arg_groups/memory_hook.py) on SigLIP's 27 x 1,152:
# ratio 27 x 1,152² / (24 x 1,024²) = 1.423828125, 0.95 x (1 - 0.1 x 0.423828125) = 0.909736328125.
GEMMA_VLM_FACTOR = 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))


def served(model_id: str = "gemma-3-27b", version: str = "0.5.23", **changes: object) -> Plan:
    plan = plan_for_model(model_id).with_hardware(gpu="h100-sxm")
    return plan.with_inference(engine="sglang", context=4096, sglang_version=version, **changes)


def fraction(plan: Plan) -> float:
    return sglang_plan_fraction(plan, find_gpu(plan.hardware.gpu))


def tokens(plan: Plan) -> int:
    return estimate(plan).inference.kv_cache_tokens


def test_the_flag_makes_gemma_3_multimodal_from_0_4_6() -> None:
    spec = served().model
    for version in (V.V0_4_6, V.V0_4_10, V.V0_5_10, V.V0_5_23):
        assert not is_multimodal(version, spec) and is_multimodal(version, spec, enable_multimodal=True)
    # 0.4.5 has no mm_disabled_models: Gemma 3 is multimodal there at its defaults already.
    assert is_multimodal(V.V0_4_5, spec)
    assert launch_of(served(sglang_enable_multimodal=True), find_gpu("h100-sxm")).multimodal


def test_the_default_fraction_takes_the_reduction_and_loses_the_prefill_graphs() -> None:
    # 0.5.23 on an H100 (chunk 8,192, decode graphs to 256): a text launch reserves 512 + 1.5 x 8,192 + 2 x 256 +
    # 128 + 58 prefill counts x 8 = 13,904 MiB -> round(67,655 / 81,559, 3) = 0.83; multimodal, no prefill graphs
    # ("multimodal model", cuda_graph_hook.py): 13,440 MiB -> round(68,119 / 81,559, 3) = 0.835, x the reduction.
    assert fraction(served()) == round((81_559 - 13_904) / 81_559, 3) == 0.83
    on = served(sglang_enable_multimodal=True)
    assert vlm_factor(V.V0_5_23, launch_of(on, find_gpu("h100-sxm"))) == pytest.approx(GEMMA_VLM_FACTOR)
    assert fraction(on) == pytest.approx(round((81_559 - 13_440) / 81_559, 3) * GEMMA_VLM_FACTOR)
    # 0.5.3 - 0.5.9 capture no prefill graphs at all: the default only takes the reduction (0.83 either way there:
    # 512 + 12,288 + 512 + 128 = 13,440 MiB).
    assert fraction(served(version="0.5.3")) == 0.835
    assert fraction(served(version="0.5.3", sglang_enable_multimodal=True)) == pytest.approx(0.835 * GEMMA_VLM_FACTOR)
    # 0.4.9: "*= 0.90" on the default (0.4.8 - 0.5.2's class reserve: 9.5 + 0.5 GiB below 90 GiB -> 0.874).
    assert fraction(served(version="0.4.9")) == round((81_559 - 10 * 1024) / 81_559, 3) == 0.874
    assert fraction(served(version="0.4.9", sglang_enable_multimodal=True)) == pytest.approx(0.874 * 0.90)


def test_a_given_fraction_is_reduced_only_by_0_4_6_to_0_4_8s_runner() -> None:
    # 0.4.5 - 0.4.8 ModelRunner "self.mem_fraction_static *= 0.90" on any fraction; 0.4.9 on the default only.
    assert fraction(served(version="0.4.8", mem_fraction_static=0.8, sglang_enable_multimodal=True)) == 0.8 * 0.90
    assert fraction(served(version="0.4.9", mem_fraction_static=0.8, sglang_enable_multimodal=True)) == 0.8
    assert fraction(served(version="0.4.8", mem_fraction_static=0.8)) == 0.8


def test_the_pool_shrinks_by_the_reduction_and_the_reserve() -> None:
    # token pool = total x fraction - weights - rope table - mm reserve (engines.sglang_memory; 0.5.23
    # _profile_available_bytes subtracts mm_reservation_gb = SGLANG_VLM_CACHE_SIZE_MB 100 / 1,024). The same weights
    # and rope table on both sides, so the pools differ by total x (0.83 - fraction with the flag) + 100 MiB.
    off, on = served(), served(sglang_enable_multimodal=True)
    total = sglang_free_at_start(off, find_gpu("h100-sxm"))
    est = estimate(off).inference
    cell = est.kv_cache_bytes / est.kv_cache_tokens
    lost = total * (fraction(off) - fraction(on)) + 100 * MiB
    assert tokens(off) - tokens(on) == pytest.approx(lost / cell, abs=1)
    # At a given fraction (not reduced from 0.4.9) only the reserve is lost, and only from 0.5.18 (absent in 0.5.17).
    given = served(mem_fraction_static=0.8)
    assert tokens(given) - tokens(given.with_inference(sglang_enable_multimodal=True)) == pytest.approx(
        100 * MiB / cell, abs=1
    )
    old = given.with_inference(sglang_version="0.5.17")
    assert tokens(old) == tokens(old.with_inference(sglang_enable_multimodal=True))


def test_the_formula_says_what_the_flag_did() -> None:
    text = estimate(served(sglang_enable_multimodal=True)).inference.formula
    assert f"× {GEMMA_VLM_FACTOR:.4g} for a multimodal model (--enable-multimodal)" in text
    assert "no prefill CUDA graphs: a multimodal model" in text
    assert f"multimodal reserve (embedding cache / feature pool) {100 * MiB / 2**30:.2f}" in text
    plain = estimate(served()).inference.formula
    assert "multimodal" not in plain


def test_a_release_without_the_flag_refuses_it() -> None:
    # 0.4.0 - 0.4.5's server_args.py has no --enable-multimodal: argparse would stop the launch.
    plan = served(version="0.4.5")
    with pytest.raises(PlanError) as refused:
        plan.with_inference(sglang_enable_multimodal=True)
    assert refused.value.field == PATH and "0.4.6" in str(refused.value)
    with pytest.raises(PlanError):
        served(version="0.4.0", sglang_enable_multimodal=True)
    refusal = serving_refusal(plan.model, plan.with_inference(sglang_version="0.4.6").inference)
    assert refusal is None


@pytest.mark.parametrize("model_id", ["llama-3.1-8b", "gemma-3-4b"])
def test_elsewhere_the_flag_changes_nothing(model_id: str) -> None:
    # "If the model being served is not multimodal, nothing will happen" (server_args.py help, 0.4.6 - 0.5.23): a text
    # model keeps its figures; off SGLang no engine reads it. Neither shows the box (core.inputs matters).
    text = served(model_id) if model_id != "gemma-3-4b" else served(model_id).with_inference(engine="vllm")
    flagged = text.with_inference(sglang_enable_multimodal=True)
    assert estimate(flagged).inference.kv_cache_tokens == estimate(text).inference.kv_cache_tokens
    assert not input_at(PATH).matters(flagged)
    assert input_at(PATH).matters(served("gemma-3-4b"))
    # A text model on a release without the flag: nothing the launch writes, nothing refused.
    if model_id == "llama-3.1-8b":
        assert served(model_id, version="0.4.5", sglang_enable_multimodal=True).inference.sglang_enable_multimodal


def test_the_box_is_offered_exactly_where_the_flag_changes_the_launch() -> None:
    """core.inputs.sglang_multimodal_opt_in (the Serving form's row, the export's condition) against what SGLang does
    with the flag (is_multimodal with and without it) and Plan validation's answer to a tick, on every release and
    every model of the catalogue SGLang serves: offered only where the tick is taken and makes the launch multimodal.
    Before branch h76sglui the row showed on 0.4.0 - 0.4.5 too, where every tick is refused (no such flag)."""
    models = [m for m in load_models() if m.spec.vision_params] + [find_model("llama-3.1-8b")]
    offered = set()
    for entry in models:
        for version in SglangVersion:
            inf = Inference(engine=Engine.SGLANG, sglang_version=version)
            if serving_refusal(entry.spec, inf) is not None:
                continue  # Llama 4 and the hybrids are planned on vLLM only
            plan = Plan(model=entry.spec, model_id=entry.id, inference=inf)
            taken = serving_refusal(entry.spec, replace(inf, sglang_enable_multimodal=True)) is None
            moves = is_multimodal(version, entry.spec, True) != is_multimodal(version, entry.spec, False)
            assert sglang_multimodal_opt_in(plan) is (taken and moves), (entry.id, version)
            if sglang_multimodal_opt_in(plan):
                offered.add(version)
    assert min(offered, key=list(SglangVersion).index) is SglangVersion.V0_4_6


def test_the_export_writes_the_flag_and_the_importer_reads_it() -> None:
    on = served(sglang_enable_multimodal=True)
    text = export_sglang(on).text
    assert text.rstrip().endswith("--enable-multimodal")
    _, fields = read_sglang(text)
    assert fields[PATH] is True
    back = apply_fields(served(), fields)  # onto the flag off, on the same card
    assert tokens(back) == tokens(on)  # the fraction written is the reduced default; the reserve follows the flag
    field = FIELDS_BY_NAME[PATH]
    assert field.effective(back) is True and field.effective(on) is True
    # With --disable-cuda-graph beside it, both switches come back.
    _, both = read_sglang(export_sglang(on.with_inference(cuda_graphs=False)).text)
    assert both[PATH] is True and both["inference.cuda_graphs"] is False
    # Not written where it does nothing (a text model), nor read where it is absent.
    assert "--enable-multimodal" not in export_sglang(served("llama-3.1-8b", sglang_enable_multimodal=True)).text
    assert read_sglang(export_sglang(served()).text)[1][PATH] is False


def test_a_command_with_the_flag_on_a_release_without_it_is_refused_with_the_reason() -> None:
    # The export never writes the flag where the release lacks it (Plan validation refuses such a plan). A command
    # read back with the flag and a 0.4.5 pip line (edited by hand) keeps the flag, and the plan it makes gets the
    # home's refusal with its reason, not a silent drop of the flag.
    text = export_sglang(served(version="0.4.6", sglang_enable_multimodal=True)).text
    assert "# pip install sglang==0.4.6" in text and text.rstrip().endswith("--enable-multimodal")
    _, fields = read_sglang(text.replace("sglang==0.4.6", "sglang==0.4.5"))
    assert fields[PATH] is True and fields["inference.sglang_version"] is SglangVersion.V0_4_5
    with pytest.raises(PlanError) as refused:
        apply_fields(served(), fields)
    home = serving_refusal(served().model, served(version="0.4.5").inference)
    assert home is None  # the release alone is served: the flag is what is refused
    assert refused.value.field == PATH
    assert "SGLang 0.4.5's server_args.py has no --enable-multimodal: the flag came in 0.4.6" in str(refused.value)
    # Off SGLang's opt-in (a text model) the export leaves the flag out on every release, as it does nothing.
    for version in ("0.4.5", "0.4.6", "0.5.23"):
        assert (
            "--enable-multimodal"
            not in export_sglang(served("llama-3.1-8b", version, sglang_enable_multimodal=True)).text
        )


def test_old_plan_files_load_without_it(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    save(served(sglang_enable_multimodal=True), path)
    data = json.loads(path.read_text("utf-8"))
    assert data["plan"]["inference"]["sglang_enable_multimodal"] is True
    del data["plan"]["inference"]["sglang_enable_multimodal"]
    path.write_text(json.dumps(data), "utf-8")
    assert load(path).inference.sglang_enable_multimodal is False


def test_the_command_line_takes_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("estimate", "--model", "gemma-3-27b", "--gpu", "h100-sxm", "--mode", "inference", "--engine", "sglang")
    assert main([*args, "--context", "4096", "--enable-multimodal", "--json"]) == 0
    served_json = json.loads(capsys.readouterr().out)["inference"]
    assert served_json["sglang_enable_multimodal"] is True
    assert served_json["kv_cache_tokens"] == tokens(served(sglang_enable_multimodal=True))
    assert main([*args, "--context", "4096", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["inference"]["sglang_enable_multimodal"] is False
    assert main([*args, "--sglang-version", "0.4.5", "--enable-multimodal"]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and PATH in err


def test_the_reduction_matches_its_formula_at_every_release() -> None:
    # vlm_factor's three eras on the flag's releases (0.4.6 - 0.4.8 runner, 0.4.9 flat, 0.4.10 on the config rule).
    launch = launch_of(served(sglang_enable_multimodal=True), find_gpu("h100-sxm"))
    for version in list(SglangVersion)[list(SglangVersion).index(V.V0_4_6) :]:
        factor = vlm_factor(version, launch)
        if version in (V.V0_4_6, V.V0_4_7, V.V0_4_8, V.V0_4_9):
            assert factor == 0.90
        else:
            assert math.isclose(factor, GEMMA_VLM_FACTOR)
