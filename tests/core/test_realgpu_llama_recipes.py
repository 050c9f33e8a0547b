"""llama-recipes' FSDP readings as a held-out source (issue 22; docs/REAL_GPU_MEMORY.md, "llama-recipes' FSDP
runs and the K/V cache a training forward returns, held out"): PRs #41 and #165 and issues #100 and #120 of
meta-llama/llama-recipes (now llama-cookbook), posted by its maintainers in July-September 2023. Held out of every
fit: eight figures scored, the rest listed with what the plan lacks or why the recipe is unknown.
"""

from __future__ import annotations

from tests.core.memory_corpus import FOLDER, assert_held_out, corpus, recorded_figures
from tests.scripts import load_script

SOURCE = "llama-recipes-fsdp-2023"
SCORED = (
    "llamarecipes-pr41-7b-lora-4xa100-40-final-active",
    "llamarecipes-pr41-7b-lora-4xa100-40-final-reserved",
    "llamarecipes-i120-70b-full-16xa100-80-adamw-allocated",
    "llamarecipes-i120-70b-full-16xa100-80-adamw-reserved",
    "llamarecipes-i120-70b-full-16xa100-80-adamw-active",
    # AnyPrecisionAdamW (bf16 moments, llama-cookbook 0e003351 finetuning.py) became a plan optimizer (core.inputs
    # Optimizer.ANYPRECISION_ADAMW): issue #120's three readings of that run are scored, still held out.
    "llamarecipes-i120-70b-full-16xa100-80-anyprecision-allocated",
    "llamarecipes-i120-70b-full-16xa100-80-anyprecision-reserved",
    "llamarecipes-i120-70b-full-16xa100-80-anyprecision-active",
)


def test_the_source_and_its_figures_are_recorded() -> None:
    figures = recorded_figures(SOURCE)
    assert len(figures) == 16
    for figure in figures:
        assert figure["quote"] and figure["location"]["url"] and figure["assumptions"], figure["id"]
        assert figure["recipe"]["use_cache"] is True, figure["id"]  # every run predates llama-recipes' PR #165
    # The issue answers quote llama-recipes' own printout, int(x / 2**30): whole GiB.
    assert all(f["unit"] == "GiB" and f["value"] == int(f["value"]) for f in figures if "-i1" in f["id"])


def test_it_is_held_out_and_moves_no_fit() -> None:
    for m in assert_held_out(SOURCE, "llama-recipes", 16, SCORED, "realgpu_llama_recipes"):
        if m.plan is not None:
            assert m.plan.training_kv_cache and not m.plan.parallel.fsdp1_wrap, m.id


def test_the_missing_capabilities_are_named() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_llama_recipes_missing")
    missing = {f["id"]: mapping.map_figure(f).missing for f in corpus()["figures"] if f["source_id"] == SOURCE}
    kept = [i for i, why in missing.items() if any("previous step's output" in w for w in why)]
    assert sorted(kept) == sorted(i for i in missing if "output-kept" in i)
    assert sum(any("limit_all_gathers" in w for w in why) for why in missing.values()) == 2
    # AnyPrecisionAdamW is expressible now: no figure of this source lacks it.
    assert not any(any("anyprecision" in w for w in why) for why in missing.values())
