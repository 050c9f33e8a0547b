"""Three more held-out sources (issue 22, evidence never tuned on): Sebastian Raschka's LLMs-from-scratch
training-speed README (rasbt/LLMs-from-scratch 908dd2f ch05/10_llm-training-speed: GPT-2 124M written by
hand, 'Reserved memory' after each change, A100), torchao's low-bit optimizer README (pytorch/ao 072500ab
torchao/optim/README.md: Llama2-7B full BF16 under torchtune 52d1b838, A100) and AWS's torchtitan test case
(aws-samples/awsome-distributed-training 4f688dd4: Llama 3 8B on 32 H100s); docs/REAL_GPU_MEMORY.md,
"LLMs-from-scratch, torchao's low-bit optimizers and AWS's torchtitan runs, held out".

All are held out of every fit. LLMs-from-scratch's bf16 runs take their cross-entropy on 16-bit logits
with no float32 upcast: the plan's ``loss_16bit`` since 2026-12-04, so its five runs with PyTorch's own
attention, LayerNorm and GELU (changes 7-10 and the DDP run) are scored, held out. Its float32 runs and
changes 5-6 use hand-written attention (and LayerNorm and GELU), torchao's rows run padded Alpaca batches
of unstated length (two of them with torchao's own optimizers), and AWS's runs edited torchtitan's config
without saying their batch: those stay unscored, their estimates still computed here so the findings the
documentation records stay checked.
"""

from __future__ import annotations

from dataclasses import replace

from core.plan import Strategy
from tests.core.memory_corpus import FOLDER, assert_moves_no_fit, assert_recorded, corpus
from tests.scripts import load_script

RASBT = "rasbt-llms-from-scratch-speed-2025-02"
LOWBIT = "torchao-low-bit-optim-2024-09"
AWS = "aws-awsome-distributed-torchtitan-2025-03"
NEW = (RASBT, LOWBIT, AWS)
# The five LLMs-from-scratch runs the plan can express (flash attention, torch's LayerNorm and GELU).
SCORED = (
    "rasbt-gpt2-124m-7-flash-attention",
    "rasbt-gpt2-124m-8-compile",
    "rasbt-gpt2-124m-9-vocab-50304",
    "rasbt-gpt2-124m-10-batch-32",
    "rasbt-gpt2-124m-ddp-4xa100-batch-32",
)


def test_the_two_sources_are_recorded_with_their_figures() -> None:
    data = corpus()
    sources = {s["id"]: s for s in data["sources"]}
    for source in NEW:
        assert_recorded(sources[source])
    figures = [f for f in data["figures"] if f["source_id"] in NEW]
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
        assert m.held_out and m.family in ("rasbt", "torchao-optim", "aws")
        assert m.scored == (m.id in SCORED), m.id
        assert m.scored or m.missing or m.unscored, m.id
        if m.source == RASBT:  # no loss the plan lacks: bf16 runs are loss_16bit, float32 ones the default
            assert not m.missing and m.plan.loss_16bit == (m.figure["recipe"]["weights_dtype"] == "bf16"), m.id
        if m.source == RASBT and not m.scored:  # the hand-written layers are not the plan's
            assert m.unscored.startswith("not comparable: Hand-written"), m.id
    assert sorted(r.mapped.id for r in result.rows if r.mapped.source in NEW) == sorted(SCORED)
    # Held out: scored with the constant fitted on every other family, fitting nothing themselves.
    assert_moves_no_fit(bench, result, NEW)
    assert set(NEW) <= mapping.HELD_OUT_SOURCES


def test_the_hand_written_gpt2_is_planned_as_its_code_builds_it_and_its_estimate_stays_recorded() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_rasbt_plan")
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_rasbt_plan")
    figures = {f["id"]: f for f in corpus()["figures"] if f["source_id"] == RASBT}
    published = {}
    for fid in ("rasbt-gpt2-124m-9-vocab-50304", "rasbt-gpt2-124m-ddp-4xa100-batch-32"):
        figure = figures[fid]
        plan = mapping._plan(figure["recipe"], "rasbt", source=RASBT)
        model = plan.model
        assert (model.vocab_size, model.tie_embeddings, model.qkv_bias) == (50_304, False, False)
        assert (model.family, model.activation) == ("gpt", "gelu")
        assert plan.loss_16bit  # calc_loss_batch: F.cross_entropy on the bf16 model's own logits
        mapped = mapping.map_figure(figure)
        row = bench.score_one(mapped, bench.ALLOCATOR_FRAGMENTATION)
        upcast = bench.score_one(replace(mapped, plan=replace(plan, loss_16bit=False)), bench.ALLOCATOR_FRAGMENTATION)
        published[fid] = (row.measured, row.error_pct, upcast.error_pct, plan.parallel.strategy)
    # The loop's 16-bit loss: three bf16 N·V tensors at the backward's start (2.47 GB at 8,192 tokens x 50,304)
    # where transformers' float32 loss would hold three float32 ones; with the float32 loss the estimate was
    # +54 % / +61 % over the reading (docs/REAL_GPU_MEMORY.md), with the loop's own +14 % / +6 %.
    measured, error, upcast, _ = published["rasbt-gpt2-124m-9-vocab-50304"]
    assert round(measured / 2**30, 4) == 5.8906 and 50.0 < upcast < 70.0 and 10.0 < error < 16.0
    _, error, upcast, strategy = published["rasbt-gpt2-124m-ddp-4xa100-batch-32"]
    assert strategy is Strategy.DDP and 45.0 < upcast < 65.0 and 3.0 < error < 8.0


def test_awss_readings_fit_a_batch_the_config_it_names_does_not_set() -> None:
    # torchtitan's llama3_8b.toml sets batch_size 1 and steps 1000; AWS's log is at step 1,990. The estimate at
    # batch 1 is 42 % under the readings, at batch 2 within 7 % over: the batch that ran is not stated, so the
    # figures stay unscored (docs/REAL_GPU_MEMORY.md).
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_aws")
    bench = load_script(FOLDER / "memory.py", "realgpu_memory_aws")
    errors = {}
    for figure in (f for f in corpus()["figures"] if f["source_id"] == AWS):
        for batch in (1, 2):
            recipe = dict(figure["recipe"], micro_batch=batch)
            mapped = mapping.map_figure(dict(figure, recipe=recipe, not_comparable_reason=None))
            errors[figure["id"], batch] = bench.score_one(mapped, bench.ALLOCATOR_FRAGMENTATION).error_pct
    assert all(-45.0 < e < -38.0 for (_, batch), e in errors.items() if batch == 1), errors
    assert all(0.0 < e < 8.0 for (_, batch), e in errors.items() if batch == 2), errors
