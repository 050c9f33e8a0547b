"""Everyday single-GPU fine-tuning recipes as held-out sources (issue 22 item 6, "validate on evidence you did not
tune on"; docs/REAL_GPU_MEMORY.md, "Everyday fine-tuning sources, held out"): one developer's own trainer over
transformers and PEFT on an H100
(ljm565/universal-llm-trainer) and one person's HF Trainer + PEFT notebook on a Colab T4
(bharathbattu/LoRA-vs-Full-Fine-Tuning). Both held out of every fit; every figure scored.
"""

from __future__ import annotations

from tests.core.memory_corpus import FOLDER, assert_held_out, corpus, recorded_figures
from tests.scripts import load_script

ULT = "ljm565-universal-llm-trainer-2025-03"
ULT_COMMIT = "7238a184efb031e90f1650508ed8c2cb783b9bf3"  # ljm565/universal-llm-trainer, 2025-03-24
ULT_IDS = (
    "ult-llama31-8b-full-h100",
    "ult-llama31-8b-lora-h100",
    "ult-llama31-8b-qlora-h100",
    "ult-llama2-13b-lora-h100",
    "ult-llama2-13b-qlora-h100",
    "ult-gemma-7b-lora-h100",
    "ult-gemma-7b-qlora-h100",
    "ult-phi3-mini-full-h100",
    "ult-phi3-mini-lora-h100",
    "ult-phi3-mini-qlora-h100",
)
BB = "bharathbattu-lora-vs-fft-t4-2026-03"
BB_COMMIT = "87b196a7f5f6dfd4e7b70c9af266d4d3422826e2"  # bharathbattu/LoRA-vs-Full-Fine-Tuning, 2026-03-03
BB_IDS = ("bb-qwen2-05b-full-t4", "bb-qwen2-05b-lora-r8-t4", "bb-qwen2-05b-lora-r64-t4", "bb-qwen2-05b-qlora-r8-t4")


def _plans(source: str, module_name: str) -> dict[str, object]:
    mapping = load_script(FOLDER / "mapping.py", module_name)
    return {f["id"]: mapping.map_figure(f).plan for f in corpus()["figures"] if f["source_id"] == source}


def test_the_trainer_table_is_recorded_as_published() -> None:
    figures = recorded_figures(ULT)
    assert sorted(f["id"] for f in figures) == sorted(ULT_IDS)
    for figure in figures:
        # The trainer prints torch.cuda.memory_reserved() / 1E9 'G' (src/trainer/trainer.py at ULT_COMMIT): reserved,
        # decimal GB, although the README's table says "GiB" (Llama 3.1 8B's bf16 weights print as 16, not 15).
        assert figure["metric"] == "reserved" and figure["unit"] == "GB", figure["id"]
        assert figure["value_bytes"] == round(figure["value"] * 1e9), figure["id"]
        assert f"| {figure['value']:g} GiB (" in figure["quote"], figure["id"]
        assert figure["location"]["commit"] == ULT_COMMIT and figure["recipe"]["seq_len"] == 8192, figure["id"]


def test_the_notebook_chart_is_recorded_as_published() -> None:
    figures = recorded_figures(BB)
    assert sorted(f["id"] for f in figures) == sorted(BB_IDS)
    for figure in figures:
        # run_experiment() reads torch.cuda.max_memory_allocated() / (1024 ** 3) (LoRA_vs_Full_Fine_Tuning.ipynb
        # cell 5 at BB_COMMIT): allocated, GiB; the README gives the chart's bars as "~10.2", "~2.6" ...
        assert figure["metric"] == "allocated" and figure["unit"] == "GiB", figure["id"]
        assert figure["value_bytes"] == round(figure["value"] * 2**30), figure["id"]
        assert f"| ~{figure['value']:g} |" in figure["quote"], figure["id"]
        assert figure["location"]["commit"] == BB_COMMIT and figure["recipe"]["seq_len"] == 256, figure["id"]


def test_both_are_held_out_and_move_no_fit() -> None:
    assert_held_out(ULT, "universal-llm-trainer", len(ULT_IDS), ULT_IDS, "realgpu_everyday_ult")
    assert_held_out(BB, "bharathbattu", len(BB_IDS), BB_IDS, "realgpu_everyday_bb")


def test_the_plans_are_the_recipes_the_code_reads() -> None:
    ult = _plans(ULT, "realgpu_everyday_ult_plans")
    for fid in ULT_IDS:
        plan = ult[fid]
        assert plan is not None, fid
        # src/models/*.py: nn.CrossEntropyLoss on output.logits in their own dtype, no autocast (amp_training False);
        # every config: batch_size 2, max_length 8192, HF gradient checkpointing.
        assert plan.loss_16bit and plan.checkpointing and plan.workload.micro_batch == 2, fid  # type: ignore[attr-defined]
        # src/trainer/build.py calls peft's prepare_model_for_kbit_training on the 4-bit (bit: 4) configs only.
        assert plan.kbit_upcast == fid.endswith("qlora-h100"), fid  # type: ignore[attr-defined]
    bb = _plans(BB, "realgpu_everyday_bb_plans")
    full, qlora = bb["bb-qwen2-05b-full-t4"], bb["bb-qwen2-05b-qlora-r8-t4"]
    # Cell 5: FPFT loads float32 with fp16=True (autocast); the QLoRA run calls prepare_model_for_kbit_training,
    # which turns on gradient checkpointing; the LoRA runs do not checkpoint (TrainingArguments' default).
    assert full is not None and full.autocast.value == "fp16" and not full.checkpointing  # type: ignore[attr-defined]
    assert qlora is not None and qlora.kbit_upcast and qlora.checkpointing  # type: ignore[attr-defined]
    assert all(not bb[fid].checkpointing for fid in BB_IDS[1:3])  # type: ignore[attr-defined]


def test_every_new_figure_is_within_ten_percent() -> None:
    bench = load_script(FOLDER / "memory.py", "realgpu_everyday_target")
    rows = {r.mapped.id: r for r in bench.run().rows}
    # memory.py on 2026-12-05 (branch h54memev): the H100 table's ten figures at -8.0 … +8.9 % (median 4.4 %),
    # the T4 notebook's four at -9.5 … +1.0 % (median 5.5 %); the allocated and reserved targets ask each within 10 %.
    for fid in (*ULT_IDS, *BB_IDS):
        assert abs(rows[fid].error_pct) <= 10.0, (fid, rows[fid].error_pct)


def test_the_candidates_left_out_say_why() -> None:
    # Found in this pass and not usable (docs/REAL_GPU_MEMORY.md, "Everyday fine-tuning sources, held out"): each is
    # in memory_figures.json "rejected" with the reason, never silently dropped.
    rejected = corpus()["rejected"]
    for name in (
        "ljm565/universal-llm-trainer README.md at 7238a184",
        "ai-learner-1429/peft-examples NOTES.md",
        "huggingface/trl issue #4968",
    ):
        (entry,) = [r for r in rejected if r["where"].startswith(name)]
        assert len(entry["why"]) > 100, name
