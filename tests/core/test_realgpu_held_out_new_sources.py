"""Three more held-out sources (issue 22, evidence never tuned on): Sebastian Raschka's LLMs-from-scratch
training-speed README (rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed: GPT-2 124M written by
hand, 'Reserved memory' after each change, A100), torchao's low-bit optimizer README (pytorch/ao 072500ab
torchao/optim/README.md: Llama2-7B full BF16 under torchtune 52d1b838, A100) and AWS's torchtitan test case
(aws-samples/awsome-distributed-training 4f688dd4: Llama 3 8B on 32 H100s); docs/REAL_GPU_MEMORY.md,
"LLMs-from-scratch, torchao's low-bit optimizers and AWS's torchtitan runs, held out".

All are held out of every fit. None has a figure the plan can score: LLMs-from-scratch's bf16 runs take
their cross-entropy on 16-bit logits with no float32 upcast (a loss the plan has no setting for), its float32
runs use hand-written attention, LayerNorm and GELU, torchao's rows run padded Alpaca batches of unstated
length (two of them with torchao's own optimizers), and AWS's runs edited torchtitan's config without saying
their batch. Their estimates are still computed here, with the plan the app would be given, so the findings
the documentation records stay checked.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from core.plan import Strategy
from tests.scripts import load_script

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "realgpu"
RASBT = "rasbt-llms-from-scratch-speed-2025-02"
LOWBIT = "torchao-low-bit-optim-2024-09"
AWS = "aws-awsome-distributed-torchtitan-2025-03"
NEW = (RASBT, LOWBIT, AWS)
LOSS = "cross-entropy on 16-bit logits with no float32 upcast (a hand-written loop's F.cross_entropy)"


def _corpus() -> dict:  # type: ignore[type-arg]
    return json.loads((FOLDER / "memory_figures.json").read_text())  # type: ignore[no-any-return]


def test_the_two_sources_are_recorded_with_their_figures() -> None:
    corpus = _corpus()
    sources = {s["id"]: s for s in corpus["sources"]}
    for source in NEW:
        record = sources[source]
        for key in ("kind", "authors_or_org", "url_or_repo", "commit_or_date", "independence_note"):
            assert record[key], (source, key)
        assert record["how_metric_was_determined"]
    figures = [f for f in corpus["figures"] if f["source_id"] in NEW]
    assert [len([f for f in figures if f["source_id"] == s]) for s in NEW] == [12, 4, 2]
    for figure in figures:
        assert figure["quote"] and figure["location"]["commit"] and figure["assumptions"]


def test_they_are_held_out_listed_with_why_and_move_no_fit() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_rasbt")
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_rasbt")
    result = bench.run()
    mine = [m for m in result.mapped if m.source in NEW]
    assert len(mine) == 18
    for m in mine:
        assert m.held_out and m.family in ("rasbt", "torchao-optim", "aws") and not m.scored
        assert m.missing or m.unscored, m.id
    for m in mine:
        if m.source == RASBT and m.figure["recipe"]["weights_dtype"] == "bf16":
            assert m.missing == (LOSS,), m.id
        elif m.source == RASBT:  # float32: the default loss is this loop's, the hand-written layers are not the plan's
            assert not m.missing and m.unscored.startswith("not comparable: Hand-written layers"), m.id
    assert not any(r.mapped.source in NEW for r in result.rows)
    others = bench.run([m.figure for m in result.mapped if m.source not in NEW])
    assert others.fitted_all == result.fitted_all and others.fitted_without == {
        k: v for k, v in result.fitted_without.items() if k in others.fitted_without
    }
    assert bench.summaries(others.rows) == bench.summaries(result.rows)
    assert set(NEW) <= mapping.HELD_OUT_SOURCES


def test_the_hand_written_gpt2_is_planned_as_its_code_builds_it_and_its_estimate_stays_recorded() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_rasbt_plan")
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_rasbt_plan")
    figures = {f["id"]: f for f in _corpus()["figures"] if f["source_id"] == RASBT}
    published = {}
    for fid in ("rasbt-gpt2-124m-9-vocab-50304", "rasbt-gpt2-124m-ddp-4xa100-batch-32"):
        figure = figures[fid]
        plan = mapping._plan(figure["recipe"], "rasbt", source=RASBT)
        model = plan.model
        assert (model.vocab_size, model.tie_embeddings, model.qkv_bias) == (50_304, False, False)
        assert (model.family, model.activation) == ("gpt", "gelu")
        mapped = replace(mapping.map_figure(figure), plan=plan, missing=())
        row = bench.score_one(mapped, bench.ALLOCATOR_FRAGMENTATION)
        published[fid] = (row.measured, row.error_pct, plan.parallel.strategy)
    # With transformers' float32 loss in place of the loop's bf16 one the estimate is +54 % / +61 % over
    # (docs/REAL_GPU_MEMORY.md: three float32 N·V tensors at the backward's start where the loop holds
    # three bf16 ones, 2.47 GB at 8,192 tokens x 50,304).
    measured, error, _ = published["rasbt-gpt2-124m-9-vocab-50304"]
    assert round(measured / 2**30, 4) == 5.8906 and 50.0 < error < 70.0
    _, error, strategy = published["rasbt-gpt2-124m-ddp-4xa100-batch-32"]
    assert strategy is Strategy.DDP and 45.0 < error < 65.0


def test_awss_readings_fit_a_batch_the_config_it_names_does_not_set() -> None:
    # torchtitan's llama3_8b.toml sets batch_size 1 and steps 1000; AWS's log is at step 1,990. The estimate at
    # batch 1 is 42 % under the readings, at batch 2 within 7 % over: the batch that ran is not stated, so the
    # figures stay unscored (docs/REAL_GPU_MEMORY.md).
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_aws")
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_aws")
    errors = {}
    for figure in (f for f in _corpus()["figures"] if f["source_id"] == AWS):
        for batch in (1, 2):
            recipe = dict(figure["recipe"], micro_batch=batch)
            mapped = mapping.map_figure(dict(figure, recipe=recipe, not_comparable_reason=None))
            errors[figure["id"], batch] = bench.score_one(mapped, bench.ALLOCATOR_FRAGMENTATION).error_pct
    assert all(-45.0 < e < -38.0 for (_, batch), e in errors.items() if batch == 1), errors
    assert all(0.0 < e < 8.0 for (_, batch), e in errors.items() if batch == 2), errors
