"""DeepSpeed's own model-state estimators (committed output, benchmarks/parallel/
deepspeed_estimates.json, DeepSpeed 0.19.8) against this estimator, term by term.

No DeepSpeed is needed: the file holds what ``estimate_zero{2,3}_model_states_mem_needs_all_cold``
printed (collected with ``.venv-ds/bin/python benchmarks/deepspeed_compare.py --collect``).
The first tests pin down what DeepSpeed's figures are made of (their formulas, read in
deepspeed/runtime/zero/stage_1_and_2.py and stage3.py, reproduce every printed row); the
last ones hold this estimator to the terms both count the same way.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from core.catalogue import find_model
from core.estimate import estimate

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deepspeed_compare", ROOT / "benchmarks" / "deepspeed_compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


DS = _module()
DATA = DS.load()


def test_the_file_is_deepspeeds_own_output() -> None:
    assert DATA["deepspeed_version"] == "0.19.8"
    assert len(DATA["runs"]) == len(DS.MODELS) * len(DS.SETUPS) * 2
    for run in DATA["runs"]:
        assert DS.parse_rows(run["printed"]) == run["rows"]  # rows are the printed text, re-read
        assert len(run["rows"]) == (2 if run["stage"] == 2 else 6)
        # DeepSpeed was fed the catalogue's counts: it prints them back in millions.
        total = find_model(run["model"]).spec.total_params()
        assert run["total_params"] == total and f"{int(total / 1e6)}M total params" in run["printed"]


def test_the_live_estimator_counts_what_the_cold_one_was_given() -> None:
    # _all_live on a real Llama 3.2 1B (transformers, bf16 on the CPU) derives the counts
    # itself; they are the catalogue's total and the embedding as the largest layer.
    live = DATA["live_check"]["printed"]
    total = find_model("llama-3.2-1b").spec.total_params()
    assert f"{int(total / 1e6)}M total params, {int(DS.largest_layer_params('llama-3.2-1b') / 1e6)}M largest" in live


def _deepspeed_formula(run: dict, offload: str, zero_init: bool = True) -> tuple[float, float]:  # type: ignore[type-arg]
    """(per CPU, per GPU) bytes by DeepSpeed's formulas as the module docstring reads them."""
    p, largest = run["total_params"], run["largest_layer_params"]
    nodes, per_node = run["nodes"], run["gpus_per_node"]
    n = nodes * per_node
    if run["stage"] == 2:
        if offload == "none":
            return p * 4 * per_node * 1.5, 2 * p + int(18 * p / n)
        return p * max(4 * n, 16) * 1.5, 2 * p
    layer = 4 * largest
    if offload == "params":
        return p * 18 / nodes * 1.5 if zero_init else p * max(4 * per_node, 18 / nodes) * 1.5, layer
    if offload == "optimizer":
        return p * 16 / nodes * 1.5 if zero_init else p * max(4 * per_node, 16 / nodes) * 1.5, layer + int(2 * p / n)
    return (largest * 4 * per_node * 1.5 if zero_init else p * 4 * per_node * 1.5), layer + int(18 * p / n)


def test_deepspeeds_formulas_reproduce_every_printed_row() -> None:
    for run in DATA["runs"]:
        for row in run["rows"]:
            cpu, gpu = _deepspeed_formula(run, DS._offload(row["options"]), "zero_init=0" not in row["options"])
            # Printed as GiB with two decimals.
            assert row["per_gpu_gib"] == pytest.approx(gpu / GIB, abs=0.006), (run["model"], row)
            assert row["per_cpu_gib"] == pytest.approx(cpu / GIB, abs=0.006), (run["model"], row)


def _rows(stage: int, offload: str) -> list[tuple[dict, dict]]:  # type: ignore[type-arg]
    return [
        (run, row)
        for run in DATA["runs"]
        for row in run["rows"]
        if run["stage"] == stage and DS._offload(row["options"]) == offload and "zero_init=0" not in row["options"]
    ]


def test_zero2_keeps_the_whole_16_bit_model_on_every_gpu_as_deepspeed_does() -> None:
    # DeepSpeed's first ZeRO-2 term, 2·P: the bf16 parameters are not partitioned.
    from core.breakdown import BucketKey

    for run, row in _rows(2, "none"):
        est = estimate(DS.plan_for(run, row["options"]))
        ranks = getattr(est, "ranks", ())
        buckets = ranks[est.worst_rank].buckets if ranks else est.buckets
        weights = sum(b.bytes for b in buckets if b.key is BucketKey.WEIGHTS)
        assert weights == pytest.approx(2 * run["total_params"], rel=1e-9), run["model"]


def test_the_comparison_table_covers_every_training_row() -> None:
    rows = DS.compare(DATA)
    assert len(rows) == sum(len(_rows(s, o)) for s in (2, 3) for o in ("none", "optimizer", "params"))
    text = DS.render(rows, DATA["deepspeed_version"])
    assert "DeepSpeed 0.19.8" in text and all(r.model in text for r in rows)
