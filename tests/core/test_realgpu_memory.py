"""The estimate against published real-GPU memory figures (benchmarks/realgpu/memory.py), whole:
the benchmark runs in about a second, so CI runs all of it, not a light version.

Issue 22's targets are not all met (docs/REAL_GPU_MEMORY.md says which and why), so this test
does not assert them; ``python benchmarks/realgpu/memory.py --check`` exits 1 while they are
missed. What it holds: every figure is mapped or listed with the capability it lacks, the
scoring is leave-one-source-out, the shipped constant and the evidence table are the
benchmark's own, and no metric gets worse than it was when this test was written (a ratchet:
lower the ceilings when the estimate improves).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from core.runtime import ALLOCATOR_FRAGMENTATION
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"
# Median and worst |error| per metric, percent, leave-one-source-out (measured 2025-12 with the
# estimate of this commit); a regression past them fails. Raised when torch.compile and float8
# became plan settings: 8 allocated and 12 reserved figures joined the scored set (allocated
# 27 -> 35 figures, median 7.7 -> 9.4 %; reserved 32 -> 44, median 12.9 -> 14.5 %, worst 40.4 ->
# 48.7 %, Trainy's two H200 runs at +49 %), and torchtitan's new figures moved the fractions
# fitted without each family (docs/REAL_GPU_MEMORY.md, "torch.compile and float8"). Lowered
# when LitGPT's loop became a plan setting (allocated median 9.4 -> 4.3 %, worst 42.7 -> 21.3 %;
# docs/REAL_GPU_MEMORY.md, "LitGPT's fine-tuning loop"). Reserved lowered when torchtitan's compiled
# loss became a plan setting (median 14.5 -> 11.9 %, worst 48.7 -> 40.4 %); nvidia-smi's median ceiling
# raised 10.0 -> 10.2 then: Trainy's runs now enter the fit and compile under op SAC leaves it, which
# moved the fraction fitted without PEFT's family 0.375 -> 0.245 (median 9.0 -> 10.1 %, worst 22.0 ->
# 27.9 %; docs/REAL_GPU_MEMORY.md, "The cross-entropy under torch.compile"). Allocated lowered when
# torchtune's flag table ran fused AdamW (its 8-bit AdamW row not comparable) and Lightning's float16
# 4-bit head became a rule (35 -> 34 figures, median 4.3 -> 3.8 %, worst 21.3 -> 9.8 %;
# docs/REAL_GPU_MEMORY.md, "Lightning's float16 4-bit weights"). When bitsandbytes' quantisation state
# became whole on every FSDP rank and Answer.AI's records gained the double quantisation their
# Linear4bit ran with: nvidia-smi worst 27.9 -> 19.9 % (ceiling lowered), its median 10.1 -> 10.7 %
# (the fraction fitted without the Hugging Face family moved 0.245 -> 0.305 on Answer.AI's lower
# QLoRA rows), reserved worst 40.4 -> 42.9 % (Answer.AI's after-wrap reading, 0.1 GB less absmax
# estimated); docs/REAL_GPU_MEMORY.md, "bitsandbytes' quantisation state under FSDP". When FSDP2's
# sharded gradients stayed reserved for the reduce-scatter stream (44 figures): reserved median
# 11.9 -> 11.1 %; nvidia-smi worst 19.9 -> 24.0 % (no PEFT-docs estimate moved: the fraction fitted
# without the Hugging Face family fell 0.305 -> 0.215 as torchtitan's figures needed less of it);
# docs/REAL_GPU_MEMORY.md, "FSDP2's gradients stay reserved for their stream". With Llama 3.1 405B,
# TinyLlama 1.1B and Yi 34B in the catalogue and their records scored (reserved 44 -> 52 figures:
# torchtitan's six 405B pipeline rows within ±10 % once pipelined FSDP2 keeps its units gathered and
# its gradients unsharded, Yi 34B's two Answer.AI rows -14 / -27 % like that family's other QLoRA
# rows): reserved median 11.1 -> 10.0 %, nvidia-smi median 10.1 -> 12.3 %, worst 24.0 -> 26.0 % (the
# fraction fitted without the Hugging Face family 0.215 -> 0.170); docs/REAL_GPU_MEMORY.md,
# "Pipelined FSDP2". When an FSDP1 wrap of a model held on the CPU kept its largest units'
# originals and flat parameters reserved (Answer.AI's train.py, low_memory: sync_module_states;
# core.parallel.state._fsdp1_wrap_cache): Answer.AI median 14.2 -> 9.5 %, worst 42.9 -> 20.5 %
# (its after-wrap reading -42.9 -> -11.6 %); reserved median 10.0 -> 9.2 %, worst 42.9 -> 32.1 %
# (axolotl's offloaded gpt-oss row is now the worst); nvidia-smi median 12.3 -> 10.6 %, worst
# 26.0 -> 24.4 % (no PEFT-docs estimate has the wrap: the fraction fitted without the Hugging Face
# family moved with Answer.AI's figures); docs/REAL_GPU_MEMORY.md, "What an FSDP1 wrap leaves".
# When Answer.AI's loop kept its model output's float32 logits through the backward (loop_keeps_output):
# reserved median 9.2 -> 5.5 % (ceiling lowered), worst 32.1 -> 32.5 % (axolotl's offloaded row, read with
# the lower fraction fitted without its family: 0.170 -> 0.105), nvidia-smi median 10.6 -> 12.6 %, worst
# 24.4 -> 26.3 % (the fraction fitted without the Hugging Face family 0.205 -> 0.165: Answer.AI's rows no
# longer ask for more), boundary worst 0.0 -> 3.9 % (Mistral 7B's longest context 24,576 -> 23,607 tokens);
# docs/REAL_GPU_MEMORY.md, "Answer.AI's loop keeps the model output". Reserved median 5.5 -> 5.2 % when a
# predicted reading was capped at what the card can show (memory.py card_limit; Yi 34B's and Mistral 7B's
# longest-context Answer.AI rows +7.8 / +8.2 % -> +1.8 / +4.0 %). When PEFT's FSDP guide was mapped with the
# wrap its accelerate config runs (fsdp_cpu_ram_efficient_loading, sync_module_states: parallel.fsdp1_wrap):
# nvidia-smi 12.6 / 26.3 -> 11.2 / 14.2 % (the 2 × 24 GB CPU-offload run -26.3 -> -11.2 %, its no-offload
# twin -7.8 -> +0.4 %), boundary worst 3.9 -> 0.3 %, reserved 5.2 / 32.4 -> 5.2 / 32.5 % (the fraction
# fitted without axolotl 0.120 -> 0.110). Reserved median raised 5.2 -> 6.5 % when readings within one of the
# step's largest allocations of the card's limit left the fit (memory.py capacity_bound: six Answer.AI rows
# whose batch was raised to fill the card, and torchtitan's 32K-token row): without them the fraction fitted
# without torchtitan fell 0.105 -> 0.040 (Answer.AI's remaining rows and PEFT's method comparison ask for less),
# and torchtitan's 70B 2-D rows read -23.9 / -19.0 % -> -27.9 / -23.3 %; nvidia-smi 11.2 / 14.2 -> 11.0 / 14.0 %.
# When PEFT's method comparison was scored with the empty_cache() its loop runs before every peak step (its
# seven LoRA figures with no fragmentation term, not fitted on; branch h-real 2d846be): reserved 6.5 / 32.3 ->
# 5.6 / 32.1 % (those rows +6.6 ... +17.6 % -> -4.1 ... +4.9 %; the fraction fitted without torchtitan 0.040 ->
# 0.330, so torchtitan's compiled 8B rows read +19 ... +26 %), boundary worst 0.3 -> 4.3 %. When a QLoRA root
# unit gathered its embedding and head in the base dtype (core.parallel.state._unit_bytes; it took the rank's
# average, ≈ 0.5 B): nvidia-smi median 11.0 -> 10.6 %, reserved median 5.6 -> 5.7 %, boundary worst 4.3 -> 5.6 %.
# When parameter CPU offload staged each unit's local shard on a side stream (core.parallel.state
# _offload_staging): reserved worst 32.1 -> 27.0 % (axolotl's offloaded gpt-oss row), boundary worst 5.6 -> 6.6 %.
# When ZeRO-3 kept a checkpointed block gathered through its backward (core.parallel.state._zero3_kept_block):
# nvidia-smi worst 14.0 -> 13.2 % (PEFT's ZeRO-3 runs -12.3 / -14.0 -> -10.6 / -13.2 %), reserved median
# 5.7 -> 5.9 % (the fraction fitted without torchtitan moved with PEFT's rows). When a block compiled under
# per-op SAC kept only the saved outputs its backward reads (core.training.activations.SAC_COMPILED_NOTE) and
# those figures entered the fit: reserved median 5.9 -> 4.1 % (the fraction fitted without torchtitan 0.300 ->
# 0.185, Trainy's runs +10.6 / +8.9 -> +0.4 / -1.4 %), nvidia-smi worst 13.2 -> 13.3 % (the fraction fitted on
# every family 0.170 -> 0.165), boundary worst 6.6 -> 6.3 %. When ZeRO-3 kept bitsandbytes' quantisation state
# whole on every rank (core.parallel.state._zero_stage): nvidia-smi worst 13.3 -> 11.8 % (PEFT's ZeRO-3 QLoRA run).
# When PyTorch's TP kept the all-gathered input of each column-parallel matmul (core.parallel.acts.block_per_rank,
# keeps_gathered_inputs): torchtitan's 70B 2-D rows -19.0 / -13.8 -> -16.1 / -10.8 %; their implied fractions
# fell, so the fraction fitted without huggingface 0.165 -> 0.155 and nvidia-smi worst 11.8 -> 12.1 % (PEFT's
# ZeRO-3 QLoRA run, -11.8 -> -12.1 %); boundary worst 6.3 -> 5.9 %.
# When the cross-entropy under PyTorch's loss_parallel() held its fourth float32 N·V/t tensor
# (core.training.activations._loss_parallel): torchtitan's 70B 2-D rows -16.1 / -10.8 -> -3.2 / +3.0 %;
# their implied fractions rose, so the fraction fitted without Answer.AI 0.160 -> 0.185 and boundary worst
# 5.9 -> 7.8 % (ceiling raised: Answer.AI's 4090 Mistral 7B longest context, 23,129 -> 22,666 tokens of
# 24,576), nvidia-smi worst 12.1 -> 12.0 % (without the Hugging Face family 0.155 -> 0.160).
# When FSDP2's reduce-scatter input left the reduce-scatter stream's cache (torch 2.5-2.8 allocate it on the
# default stream, which takes its block back: core.parallel.state._reduce_stream_cache) and only the outputs
# that stream frees stayed: the fraction fitted on every family 0.165 -> 0.185 and reserved median 4.1 -> 4.0 %,
# nvidia-smi 10.6 / 12.0 -> 10.1 / 11.5 %, but reserved worst 27.0 -> 29.0 % (ceiling raised: axolotl's
# offloaded gpt-oss row, -27.0 -> -29.0 %, lost the 1.65 GB input term for its root's 1.16 GB output), and a
# pipelined stage's peak backward no longer holds an input it never makes there (torchtitan's 405B rows
# -1.6 GB each, the cp8 row -7.1 -> -10.2 %: 46 -> 45 of 52 within ±10 %). Landed as the source reads.
# Megatron-LM's CI golden values joined as a family of their own (benchmarks/realgpu/megatron_ci.py, branch
# h22m): 15 allocated peaks (allocated 35 -> 50 figures, median 3.8 -> 4.4 %, worst 9.8 -> 14.9 %: the small
# CI models' peaks read -13.7 ... +14.9 %, the 7B memory tests -0.9 / -0.7 %) and 15 readings between steps, a
# metric of their own ("resident": median 18.6 %, worst 35.5 %, every one below: the runtime's allocated
# workspaces and what docs/REAL_GPU_MEMORY.md, "Megatron-LM's CI", lists); with Megatron's state as its source
# holds it (core.parallel.state._megatron) — before it the family read 27.0 / 59.6 %. No other figure moved.
# The boundary median rose from 0.0 to 1.8 % when Unsloth's README 70B context figure became
# expressible and scored (-3.5 %, branch h22k): a fourth figure, no earlier one moved.
# The libraries' workspaces taken from the caching allocator became terms of the allocated peak (branch h22w:
# core.training.device.allocator_workspaces, PyTorch's cuBLAS workspace per handle, the forward's and the
# backward's thread, and Transformer Engine's on the Megatron stack): allocated median 4.4 -> 3.6 %, worst
# 14.9 -> 17.0 % (the Megatron CI peaks already above the card, +14.9 -> +17.0 %, rose with every other peak:
# their excess is not these workspaces); resident 18.6 / 35.5 -> 3.8 / 14.3 % (the MoE row's -14.3 % is four
# grouped-GEMM workspaces no plan setting says it runs). The backward thread's workspace is newly counted, so
# reserved / nvidia-smi / boundary move by its 32 MiB: boundary worst 7.8 -> 7.9 %, PEFT's DoRA row +4.9 -> +5.0 %.
# The workspaces took the size each library gives the card's architecture (branch h22x: PyTorch's cuBLAS
# default is 32 MiB on sm90 alone, 8.125 MiB elsewhere; TE's 4 MiB before compute capability 9): every row on
# an A100 / RTX 3090 / 4090 lost 2 x 23.875 MiB. nvidia-smi worst 11.4 -> 11.53 % (ceiling raised: PEFT's
# QLoRA ZeRO-3 row on two A100 40GB, already below its reading, -11.4 -> -11.5 %), reserved 3.9 / 22.2 ->
# 4.0 / 21.6 %, boundary 1.8 / 7.9 -> 1.7 / 7.7 %; allocated (3.6 / 17.0) and resident (3.8 / 14.3) unchanged.
# When transformers 4.55's gpt-oss experts loop became a plan setting (experts_loop, branch h22p: each expert's
# indexed weight copies and unfused activation kept, one whole stacked gate|up gradient scattered in the
# backward), axolotl's FSDP2 gpt-oss rows -21.6 / -18.7 / -3.9 -> -5.8 / -9.5 / +3.3 %: reserved 4.0 / 21.6 ->
# 3.8 / 21.3 % (ceiling lowered; the worst is now Answer.AI's 7B QLoRA row at 2,048 tokens, over the figure).
# When a Megatron MoE rank kept Transformer Engine's grouped-GEMM workspaces (plan setting moe_grouped_gemm) and
# Megatron's global memory buffer (core.parallel.state._megatron_global_buffer), branch h22p: resident 3.2 / 14.3
# -> 2.4 / 5.7 % (the MoE case -14.3 -> -0.4 %; ceiling lowered); the MoE case's peak +8.9 -> +13.3 % (under the
# allocated worst, Megatron's fim-dataset peak +17.0 %).
# Branch h22q: Megatron's core attention keeps 16-bit probabilities (allocated 3.5 / 17.0 -> 2.1 / 9.8 %); an
# FSDP1-wrapped rank's weights are rounded once per unit shard (reserved 4.0 / 21.6 -> 3.9 / 21.5 %), which moved
# the fraction fitted on every family 0.185 -> 0.200 and with it Unsloth's 70B context row -3.5 -> -4.7 %:
# boundary 1.7 / 7.7 -> 2.4 / 7.8 % (ceiling raised; the target, each within +-10 %, still met).
# Both merged (h22p then h22q, December 2026): allocated 2.0 / 9.8 % (met), reserved 3.8 / 16.9 % (48 of 52
# within +-10 %: Answer.AI's 2,048-token QLoRA / LoRA rows +16.9 / +13.5 %, its after-wrap reading -14.6 %, its
# 70B offload row +11.7 %), nvidia-smi 9.8 / 11.4 %, boundary 2.4 / 7.8 %, resident 2.4 / 5.7 %; fraction 0.200.
# Branch h22n: torchao's float8 / MX tables joined, held out of every fit (mapping.HELD_OUT_SOURCES; their nine
# scored rows within +-6 %) and ms-swift's Yi-34B LoRA rows (four, within +-10 %), both held out: reserved 52 -> 65
# figures, median 3.8 -> 3.6 % (ceiling lowered), worst 16.9 % unchanged; no other figure and no fitted fraction
# moved (docs/REAL_GPU_MEMORY.md, "torchao's float8 tables, held out", "ms-swift's Yi-34B LoRA rows, held out").
# 2026-12-04: PyTorch's ring attention backward under CP: torchtitan's 405B CP 8 reserved -10.03 -> -6.7 %
# (61 of 65 within +-10 %), nvidia-smi 9.8 / 11.4 -> 10.1 / 11.5 %; no ceiling changed.
# Branch h35smi: llama-recipes' FSDP figures (Meta's maintainers, 2023) joined, held out of every fit, with the
# plan setting training_kv_cache their use_cache=True runs need: five scored, the 70B rows' peak active / reserved
# -30.6 / -30.1 % (FSDP1's deferred frees, read active and reserved but not allocated: docs/REAL_GPU_MEMORY.md,
# "llama-recipes' FSDP runs, held out"), the 7B LoRA row -11.1 / -16.9 %. Allocated 2.1 / 9.9 -> 2.2 / 30.6 %,
# reserved worst 17.0 -> 30.2 %: new evidence, not a rule that got worse (no earlier figure or fraction moved).
# Branch h35zbs: DeepSpeed's ipg bucket counted whole (reduce_bucket_size, not min(.., T): stage_1_and_2.py
# setup_buckets, stage3.py __init__): PEFT's ZeRO-3 LoRA / QLoRA 70B rows -10.1 / -11.5 -> -7.8 / -9.4 %,
# nvidia-smi 10.1 / 11.5 -> 7.8 / 10.6 %. Ceiling kept: about 1 GB of the LoRA row's move is its float32
# adapters' bucket, which DeepSpeed allocates in bf16 (docs/REAL_GPU_MEMORY.md, "DeepSpeed's ipg bucket").
CEILINGS = {
    # 2.2 → 2.3 (branch h39memsrc, 2026-12-05): NeMo Automodel's GPT-2 pretraining log joined, held out of every fit,
    # at +3.0 % (docs/REAL_GPU_MEMORY.md, "NeMo Automodel's GPT-2 pretraining log, held out"): a 55th figure above the
    # median of the 54 (2.2 %, no earlier figure moved), new evidence, not a rule that got worse.
    # 2.3 → 2.4 → 2.2 (branch h39memsrc, 2026-12-05, second pass): DeepSpeedExamples' held-out ZeRO-3 example joined
    # at −6.2 %, then −0.3 % once ZeRO-3's step counts its flat 16-bit gradient copy (docs/REAL_GPU_MEMORY.md,
    # "DeepSpeedExamples' bf16 master-weight example, held out"); no earlier allocated figure moved.
    # 2.2 → 2.3 (branch h40models, 2026-12-05): litgpt's config-hub Gemma 2B full fine-tuning row (4 A10G, FSDP1,
    # held out of every fit) scored once the catalogue had Gemma 2B, at −14.5 % (docs/REAL_GPU_MEMORY.md, "Catalogue
    # models for the unscored corpus figures"): a 57th figure above the median, no earlier figure moved.
    # 2.2 → 2.3 (branch h40ds, 2026-12-05): the same example's bf16 master-weight row scored once DeepSpeed's
    # bf16_master_weights_and_grads / bf16_optimizer_states became plan settings, its peak at −5.0 %, held out
    # (docs/REAL_GPU_MEMORY.md, "DeepSpeed's bf16 master weights and optimizer states"): a 57th figure above the
    # median, no earlier allocated figure moved.
    # 2.3 → 2.4 (2026-12-05, both branches merged): the two rows above together, 58 figures; no earlier one moved.
    # 2.4 → 3.5 (branch h41par, 2026-12-05): 15 lit-gpt / litgpt rows of StableLM-alpha 3B, Phi-1.5 and Falcon-7B
    # scored once the catalogue had parallel-residual blocks (docs/REAL_GPU_MEMORY.md, "Parallel-residual blocks"):
    # the 2023 resource tables' bf16 LoRA rows at −7.3 … −17.7 %, an under-count that grows with the micro-batch
    # (diagnosed there, not fitted); no earlier figure moved. New evidence, not a rule that got worse.
    # 2.4 → 3.1 (branch h41adapt, 2026-12-05): lit-gpt's resource-table rows for its Adapter and Adapter v2 on
    # Llama 2 7B (bf16, nf4, nf4-dq; held out, no constant fitted) scored once the plan had the methods, at −4.0,
    # +7.7, +7.8 % and −3.7, +4.7, +4.8 % (docs/REAL_GPU_MEMORY.md, "LitGPT's Adapter and Adapter v2"), the same
    # signs and sizes as the source's LoRA rows: six figures above the median of 58, no earlier figure moved.
    # 3.5 / 3.1 → 3.9 (both branches merged, 2026-12-05, lead): the 15 and the 12 rows together, 96 figures with
    # LoRA on the head (h41head); no earlier figure moved.
    # 3.9 → 3.8 with it merged (lead). 2.4 → 2.2 alone (branch h41root, 2026-12-05): FSDP1's root unit
    # assembles its flat gradient at the backward's end
    # (docs/REAL_GPU_MEMORY.md, "FSDP1's root unit assembles its gradient"): litgpt's Gemma 2B row −14.5 → −1.4 %.
    # 3.8 → 3.82 (2026-12-05, lead): the merged median is 3.810 %, which prints as 3.8; the ceiling was its
    # rounded print, not the figure (no figure moved).
    # 3.82 → 2.95 (branch h52qkv, 2026-12-05): lit-gpt / litgpt's multi-head v is a view of the fused q|k|v output,
    # which SDPA keeps whole (docs/REAL_GPU_MEMORY.md, "lit-gpt's fused q|k|v view, settled"; measured by
    # tools/measure/litgpt_qkv_check.py): median 3.81 → 2.95 %, but within ±10 % 88 → 85 (the 2023 NF4 rows of
    # bitsandbytes 0.41.1 move to +8.7 … +15.9 %: recorded there, not fitted).
    "allocated": (2.95, 30.6),
    # 3.7 → 4.1 (2026-12-04): five held-out LLMs-from-scratch figures scored once the plan could express their
    # 16-bit loss (loss_16bit), at +5.5 to +14.3 %: new evidence, not a rule that got worse.
    # 30.2 → 29.2 (branch h85resv, 2026-12-07): the reserved peak is the largest moment of allocated + the
    # reduce-scatter stream's cached gradients, not the cache at the allocated peak: llama-recipes' 70B row −30.1 →
    # −29.1 %.
    "reserved": (4.1, 29.2),
    # 11.6 → 26.7 (branch h36smi2): FlagPerf's nvidia-smi readings (BAAI, 2023-24) joined, held out of every fit:
    # its one-A100 LoRA row +2.3 %, its four DeepSpeed ZeRO-3 full fine-tuning rows (Llama 2 7B on 8 A800 / H800)
    # -17.4 … -26.7 %, a gap about the bf16 model's size that does not grow with the tokens (docs/REAL_GPU_MEMORY.md,
    # "FlagPerf's nvidia-smi readings, held out"): new evidence, not a rule that got worse (no earlier figure or
    # fraction moved).
    "nvidia-smi": (10.2, 26.7),
    "boundary": (2.5, 7.9),
    "resident": (2.5, 5.8),
}


def _benchmark() -> ModuleType:
    return load_script(FOLDER / "memory.py", "realgpu_memory_benchmark")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _benchmark()


@pytest.fixture(scope="module")
def result(bench: ModuleType) -> object:
    return bench.run()


def test_the_corpus_is_the_one_issue_22_asks_for() -> None:
    corpus = json.loads((FOLDER / "memory_figures.json").read_text())
    assert len(corpus["figures"]) >= 80 and len(corpus["sources"]) >= 8
    for figure in corpus["figures"]:
        assert figure["metric"] in ("allocated", "active", "reserved", "nvidia-smi", "boundary", "resident", "unknown")
        assert figure["location"] and figure["quote"] and figure["recipe"]


def test_every_figure_is_expressed_or_says_what_is_missing(result: object) -> None:
    mapped = result.mapped  # type: ignore[attr-defined]
    assert len(mapped) >= 300
    for m in mapped:
        assert m.expressible or m.missing, m.id
        assert m.scored or m.missing or m.unscored, m.id
    scored = result.rows  # type: ignore[attr-defined]
    assert len(scored) >= 60 and len({r.mapped.source for r in scored}) >= 8


def test_each_family_is_scored_with_the_constant_fitted_without_it(bench: ModuleType, result: object) -> None:
    first = [bench.score_one(m, ALLOCATOR_FRAGMENTATION) for m in result.mapped if m.scored and m.metric != "boundary"]  # type: ignore[attr-defined]
    for row in result.rows:  # type: ignore[attr-defined]
        family = row.mapped.family
        expected = bench.fit_fraction(r for r in first if r.mapped.family != family)
        assert expected == result.fitted_without[family]  # type: ignore[attr-defined]
        assert row.fitted == (expected if bench.carries_fragmentation(row.mapped) else 0.0)


def test_a_run_that_empties_the_cache_before_its_peak_step_carries_no_fragmentation(
    bench: ModuleType, result: object
) -> None:
    # PEFT's method comparison (huggingface/peft 51c2ff6, method_comparison/MetaMathQA run.py and
    # utils.py) calls empty_cache() after every tenth step and sorts each 20-step bucket longest
    # first, so every bucket's longest batch runs on an emptied cache (CUDACachingAllocator.cpp at
    # 001074d, release_blocks: every segment with no live tensor goes back). A LoRA run's only
    # tensors made after the first activations, its gradients and AdamW state, are at most
    # 64 × 3,072 × 4 B = 768 KiB each: the small pool (kSmallSize, 1 MiB), never an activation's
    # segment; an IA3 run's largest vector is 8,192 × 4 B = 32 KiB (branch h40peft). So their figures
    # are scored with no fragmentation term, and its full fine-tuning figure (Llama 3.2 3B's
    # 128,256 × 3,072 embedding moments, large pool) with the fitted one.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    peft = [r for r in rows.values() if r.mapped.source == "peft-method-comparison-metamathqa"]
    lora = [r for r in peft if r.mapped.plan.adapter_based and not r.mapped.plan.prompt_learning]
    prompts = [r for r in peft if r.mapped.plan.prompt_learning]
    # 7 LoRA / DoRA, 3 IA3, 1 LN tuning (branch h52pfx), 1 LoHa, 1 LoKr (branch h53lyco), 1 VeRA, 3 prompt tuning,
    # 1 P-tuning (branch h41soft), 3 prefix tuning (branch h52pfx) and full fine-tuning. LoHa's largest factor
    # (3,072 × 32 × 4 B = 384 KiB) and LoKr's (768 × 32 × 4 B) are small-pool like LoRA's; their delta weights
    # (up to 3,072² × 4 B) are made in every forward, as activations are. 1 VeRA (branch h53vera): its vectors are
    # at most 3,072 × 4 B; its shared frozen vera_A, vera_B (256 × 3,072 × 4 B each) are made once at load, before
    # any activation (huggingface/peft 51c2ff66 src/peft/tuners/vera/model.py _init_vera_A_vera_B). 1 OFT (branch
    # h54oft): its weight per target is 32 × 4,560 × 4 B = 570 KiB, its int64 index buffers 4,560 × 8 B each
    # (small-pool); the rotation's blocks (3,072 × 96 × 4 B) are made in every forward, as activations are. 1 AdaLoRA
    # (branch h54ada): lora_A / lora_B at init_r 64 are at most 3,072 × 64 × 4 B = 768 KiB, and so is each of its
    # RankAllocator's copies (tuners/adalora/layer.py update_ipt: zeros_like each trained tensor): small-pool. 1 MiSS
    # (branch h58peft): its miss_block is at most 64 × 3,072 × 4 B = 768 KiB (tuners/miss/layer.py update_layer), and
    # so is each AdamW moment: small-pool; the block sums (N × 64 × 4 B) are made in every forward.
    # 1 LoRA-FA (branch h60opt): lora_B and its two moments, at most 3,072 × 32 × 4 B = 384 KiB each: small-pool.
    # 1 trainable tokens (branch h61mts2): its delta and original rows are 2 × 3,072 × 4 B each (small-pool); the
    # tied head's merged 128,256 × 3,072 matrix is made in every forward, as activations are. 2 FourierFT (branch
    # h76peft): the spectrum is at most 5,000 × 4 B a target (tuners/fourierft/layer.py update_layer), small-pool; the
    # delta weights (up to 3,072² × 4 B) are made in every forward, as LoHa's. 1 RoAd: road_theta and road_alpha at
    # most 3,072 × 4 B each (tuners/road/layer.py update_layer, road_2): small-pool. 1 VB-LoRA (branch h78peft): its
    # logits at most 12 × 4 × 256 × 4 B and its bank 256 × 256 × 4 B = 256 KiB, small-pool; 1 SHiRA: shira_weight at
    # most 32 × 6,144 × 4 B = 768 KiB, small-pool. 1 RandLoRA: q_proj's randlora_gamma is 96 × 3,072 × 4 B = 1.125 MiB,
    # past kSmallSize, so the rule gives its row the fitted term (below). 1 BOFT (branch h80boft): boft_R is 768 × 4 × 4
    # × 4 B = 48 KiB a target (tuners/boft/layer.py update_layer), small-pool; its in × in matrices are made in every
    # forward, as activations are, and its float32 boft_P buffers stay on the host.
    assert (len(lora), len(prompts), len(peft)) == (26, 7, 34)
    # The prompt's 200 × 3,072 × 4 B = 2.4 MB embedding (P-tuning's 3,072² × 4 B linears, prefix tuning's
    # 200 × 28 × 2 × 1,024 × 4 B = 45.9 MB) and their AdamW state are large-pool tensors: the rule gives
    # them the fitted term, as full fine-tuning. LN tuning's norms (3,072 elements each) are small-pool.
    assert all(bench.carries_fragmentation(r.mapped) for r in prompts)
    # LoRA-FA (held out, branch h60opt): published 22.24 GB (results/lora--llama-3.2-3B-rank32-lorafa.json line 86),
    # LoRA's 22.29 GB; the estimate drops the two float32 adapter input copies per block that a frozen lora_A keeps no
    # longer (tools/measure/lycoris_check.py "lorafa", 2-D and 3-D inputs alike), 2.1 GB: -13.1 %. The run's own
    # reserved average (14.37 against 14.40 GB) and 99th percentile (20.08 against 20.12 GB) do not drop either: what
    # keeps them there is not found yet, so the row is scored as it is, not fitted, and left out of the ±5.1 % below.
    fa = rows["peft-mc-lora--llama-3.2-3B-rank32-lorafa"]
    assert fa.mapped.held_out and fa.mapped.plan.optimizer.value == "lora-fa"
    assert -14.0 < fa.error_pct < -12.0, fa.error_pct
    # RandLoRA (held out, branch h78peft): its 28 q_proj gammas, their gradients and AdamW moments (1.125 MiB each, 84
    # of them) are the run's only large-pool tensors made after the first activations, so the rule applies the fitted
    # term (0.18 × the step's 15.1 GB of activations, 2.7 GB): +8.3 %, where the other PEFT rows run -3 to -4 %. The
    # free room those ~100 MB of state can leave is far below the term; a rule for it is not made from this one row.
    rand = rows["peft-mc-randlora--llama-3.2-3B-default"]
    assert rand.mapped.held_out and bench.carries_fragmentation(rand.mapped)
    assert 7.0 < rand.error_pct < 9.5, rand.error_pct
    for row in lora:
        if row is rand:
            continue
        assert not bench.carries_fragmentation(row.mapped) and row.fitted == 0.0
        if row is fa:
            continue
        # the published whole-run reserved peak (accelerator_memory_max) within ±5 % (±5.1 % since the
        # backward thread's cuBLAS workspace is counted: DoRA's row +4.9 -> +5.0 %): it was +16 % to +28 %
        # with the fitted term (docs/REAL_GPU_MEMORY.md).
        assert abs(row.error_pct) <= 5.1, (row.mapped.id, row.error_pct)
    full = rows["peft-mc-full-finetuning--llama-3.2-3B-lr_0.00001"]
    assert bench.carries_fragmentation(full.mapped) and full.fitted == result.fitted_without["huggingface"]  # type: ignore[attr-defined]
    # Other sources do not empty the cache: the fitted term applies to each of their figures.
    assert all(bench.carries_fragmentation(r.mapped) for r in rows.values() if r.mapped.source != peft[0].mapped.source)


def test_a_source_with_some_figures_held_out_says_how_many(
    bench: ModuleType, result: object, capsys: pytest.CaptureFixture[str]
) -> None:
    # The header read the first row alone: PEFT's method comparison, whose AdaLoRA row (held out, branch h54ada)
    # sorts first, was called "held out of every fit" though its LoRA rows set the fitted constant.
    bench.print_tables(result, False, False)
    header = next(line for line in capsys.readouterr().out.splitlines() if "### peft-method-comparison" in line)
    # The held-out methods' rows, 14 of 25: 3 prompt tuning, 1 P-tuning, 3 prefix tuning, 1 LN tuning, 1 LoHa, 1 LoKr,
    # 1 VeRA, 1 OFT, 1 AdaLoRA, 1 MiSS (mapping.HELD_OUT_METHODS); LoRA-FA's (HELD_OUT_OPTIMIZERS, branch h60opt) and
    # trainable tokens' (branch h61mts2); 2 FourierFT and 1 RoAd (branch h76peft); VB-LoRA, RandLoRA, SHiRA (h78peft);
    # BOFT (h80boft).
    assert "held out of every fit" not in header and "23 of 34 figures held out" in header, header


def test_the_shipped_constant_is_the_fit_on_every_family(result: object) -> None:
    assert abs(result.fitted_all - ALLOCATOR_FRAGMENTATION) < 0.0005  # type: ignore[attr-defined]


def test_the_evidence_table_is_the_benchmarks(bench: ModuleType, result: object) -> None:
    assert (ROOT / "core" / "evidence.py").read_text() == bench.evidence_source(result.rows), (  # type: ignore[attr-defined]
        "run python benchmarks/realgpu/memory.py --write-evidence"
    )


def test_no_metric_gets_worse(bench: ModuleType, result: object) -> None:
    summaries = bench.summaries(result.rows)  # type: ignore[attr-defined]
    for metric, (median_ceiling, worst_ceiling) in CEILINGS.items():
        _, median, worst, _ = summaries[metric]
        assert median <= median_ceiling and worst <= worst_ceiling, (metric, median, worst)


def test_a_predicted_reading_never_passes_the_card(result: object) -> None:
    # Yi 34B QLoRA at batch 2 × 2,048 on an RTX 3090 (Answer.AI benchmarks_03_2024.md: 23.05 GiB
    # reserved): the estimate's reserved peak is above what a 24 GiB card holds beside the CUDA context
    # and NCCL's buffers. The caching allocator frees its unused cached segments and retries before it
    # fails (CUDACachingAllocator.cpp malloc: release_cached_blocks), so the reading it is compared with
    # is that limit, not the uncapped figure.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    yi = rows["answerai-3090-yi34b-qlora-bs2"]
    context, nccl = 512 * 2**20, 2 * 2 * (4 * 2**20 + 512 * 1024 + 4_915_200)  # core.runtime, PCIe: 2 channels
    assert yi.limit == 24 * 2**30 - context - nccl
    assert yi.predicted > yi.limit >= yi.measured
    assert yi.error_pct == (yi.limit - yi.measured) / yi.measured * 100


def test_readings_the_card_may_have_bounded_are_scored_but_not_fitted(bench: ModuleType, result: object) -> None:
    # Answer.AI raised its batch sizes to fill its 24 GB cards (benchmarks_03_2024.md at e877dda: "let's
    # scale up the batch size to fill that up a little more"; Yi 34B: "enough room on my 24GB cards for a
    # batch size of 1 or 2 at most"). Within one of the step's largest allocations of what the card can
    # show, a request that does not fit makes the allocator free its cache and retry
    # (CUDACachingAllocator.cpp malloc: release_cached_blocks): such a reading bounds the reserve from
    # below, so the fraction is not fitted on it.
    rows = result.rows  # type: ignore[attr-defined]
    bound = {r.mapped.id for r in rows if r.at_capacity}
    assert bound == {
        "answerai-3090-yi34b-qlora-bs2",
        "answerai-3090-yi34b-qlora-cpuoff-bs4",
        "answerai-4090-7b-lora-cpuoff-bs10",
        "answerai-4090-7b-qlora-cpuoff-bs12",
        "answerai-4090-mistral7b-qlora-cpuoff-bs12",
        "answerai-4090-mistral7b-qlora-cpuoff-ctx24576",
        "torchtitan-2412-8b-cp1-seq32768",
        # ms-swift's Yi-34B-Chat LoRA at 4,096 tokens (Benchmark.md at 4312aeb2: 78.72 GiB on an A100 80GB),
        # within one float32 N·V (4,096 × 64,000 × 4 B) of what the card can show; held out anyway.
        "msswift-yi34b-chat-lora-len4096",
        # universal-llm-trainer's H100 rows (README at 7238a184, held out): Llama 3.1 8B full fine-tuning at 78 GB
        # reserved and Gemma 7B QLoRA at 70 GB, each within one float32 N·V of the 80 GiB card's limit
        # (2 × 8,192 × 128,256 × 4 B = 8.4 GB; 2 × 8,192 × 256,000 × 4 B = 16.8 GB).
        "ult-llama31-8b-full-h100",
        "ult-gemma-7b-qlora-h100",
        # prime-rl's Qwen3-4B SFT at 65,536 tokens on 8 B200s (benchmarks/baselines at 8718eb143, held out):
        # 171.53 GiB reserved, its JSON's "pct" 96.17 of the card's 178.4 GiB, within one float32 N·V
        # (65,536 × 151,936 × 4 B = 39.8 GB) of what the card can show.
        "prime-qwen3-4b-sft-64k-8xb200",
    }
    yi = next(r for r in rows if r.mapped.id == "answerai-3090-yi34b-qlora-bs2")
    # Yi 34B (vocabulary 64,000), batch 2 × 2,048: one float32 N·V tensor is 1,048,576,000 bytes, more
    # than the 0.44 GB the published 23.05 GiB leaves below the card's limit.
    assert bench.largest_request(yi.mapped.plan) == 2 * 2_048 * 64_000 * 4
    assert yi.limit - yi.measured < 2 * 2_048 * 64_000 * 4
    # The 3090's batch-10 QLoRA row (20.97 GiB) leaves 2.67 GB below the limit, more than its float32
    # N·V (10 × 2,048 × 32,000 × 4 B = 2.62 GB): not bound.
    row = next(r for r in rows if r.mapped.id == "answerai-3090-7b-qlora-bs10")
    assert not row.at_capacity and row.limit - row.measured > 10 * 2_048 * 32_000 * 4
    first = [bench.score_one(m, ALLOCATOR_FRAGMENTATION) for m in result.mapped if m.scored and m.metric != "boundary"]  # type: ignore[attr-defined]
    assert bench.fit_fraction(first) == bench.fit_fraction(r for r in first if not r.at_capacity)


def test_compile_under_op_sac_takes_off_what_torchtitans_table_shows(result: object) -> None:
    # torchtitan's Dec 2024 table (benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76c, Tables 1
    # and 3): Llama 3.1 8B, local batch 2 × 8,192, per-op SAC, reserved 82.4 -> 77.0 GiB with
    # torch.compile on 8 GPUs and 67.0 -> 62.0 GiB on 128. The same activations per rank on both
    # layouts, so compile's effect is a per-rank activation term (not the sharded state's): eager op SAC
    # caches every block's down-projection output, the compiled block does not (SAC_COMPILED_NOTE),
    # 31 × 134,217,728 B plus the fragmentation on it. Both rows of a pair are scored with the same
    # fraction, so the estimated gap is the rule's, not the fit's.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    for gpus in (8, 128):
        eager = rows[f"torchtitan-2412-8b-{gpus}gpu-fsdp"]
        compiled = rows[f"torchtitan-2412-8b-{gpus}gpu-fsdp-compile"]
        published = eager.measured - compiled.measured  # 5.80 GB, 5.37 GB
        assert eager.fitted == compiled.fitted
        assert abs((eager.predicted - compiled.predicted) / published - 1) < 0.10, gpus
    # Trainy's two H200 runs (torchtitan e7c0cae, the same recipe measured by other people on other
    # machines, scored with the fraction fitted without them) were +10.6 / +8.9 % without the rule.
    for name in ("trainy-h200-8b-4nodes", "trainy-h200-8b-8nodes"):
        assert abs(rows[name].error_pct) < 3.0, (name, rows[name].error_pct)


def test_torchtitans_70b_2d_rows_hold_loss_parallels_fourth_logits_shard(result: object) -> None:
    # torchtitan's Dec 2024 table (benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76c): Llama 3.1 70B,
    # FSDP 32 x TP 8, local batch 16 x 8,192, full AC, 71.9 GiB reserved (67.6 GiB with async TP). Under
    # loss_parallel() (core.training.activations._loss_parallel) the backward starts with four float32
    # shards of the logits, 131,072 tokens x 128,256 / 8 x 4 B = 8.4 GB each (three before the rule:
    # -16.1 / -10.8 %); each row is scored with the fraction fitted without torchtitan.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    for name in ("torchtitan-2412-70b-2d", "torchtitan-2412-70b-2d-asynctp"):
        assert abs(rows[name].error_pct) < 5.0, (name, rows[name].error_pct)


def test_litgpts_gemma_2b_full_row_runs_fsdp1_no_sync_and_is_scored(result: object) -> None:
    # Lightning-AI/litgpt 00af8b0 config_hub/finetune/README.md: gemma-2b/full.yaml, 4 x A10G, 17.43 GB
    # (max_memory_allocated, litgpt 5895df1 litgpt/finetune/full.py). Its loop runs each accumulating
    # micro-batch under fabric.no_backward_sync, which Lightning 438f29f0 src/lightning/fabric/strategies/fsdp.py
    # (_FSDPBackwardSyncControl) turns into FSDP1's no_sync(): the whole model's gradients stay unsharded
    # (3.03e9 x 2 B ÷ 1, not ÷ 4) until the fourth micro-batch. Scored with the catalogue's Gemma 2B
    # (untied by litgpt: its own lm_head), held out of every fit.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    row = rows["litgpt-hub-gemma-2b-full"]
    plan = row.mapped.plan
    assert plan.model_id == "gemma-2b" and not plan.model.tie_embeddings
    assert plan.parallel.grad_sync.value == "no_sync" and plan.workload.grad_accum == 4
    # -14.5 % until FSDP1's root unit assembled its flat gradient at the backward's end (branch h41root,
    # REAL_GPU_MEMORY.md "FSDP1's root unit assembles its gradient"): -1.4 % (the views' gradients and
    # their cat, 2.10 GB each).
    assert plan.parallel.fsdp1_wrap and -3.0 < row.error_pct < 0.0


def test_llama_recipes_anyprecision_rows_are_scored_held_out_like_their_adamw_twins(result: object) -> None:
    # Branch h57opt: llama-recipes issue #120's 70B pure-bf16 run with fsdp_config.optimizer='anyprecision'
    # (AnyPrecisionAdamW, bf16 moments: llama-cookbook 0e003351 finetuning.py) is expressible. Its bf16 moments are
    # torch AdamW's on bf16 parameters (4 B a parameter), its for-loop temporaries come after the backward's peak:
    # the same estimate as the AdamW run's, and the same published allocated 42 GiB. Held out of every fit
    # (mapping.HELD_OUT_OPTIMIZERS); the active / reserved readings miss as the AdamW run's do (FSDP1's deferred
    # frees, docs/REAL_GPU_MEMORY.md "llama-recipes' FSDP runs, held out").
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    stem = "llamarecipes-i120-70b-full-16xa100-80-"
    for metric in ("allocated", "reserved", "active"):
        row, twin = rows[stem + "anyprecision-" + metric], rows[stem + "adamw-" + metric]
        assert row.mapped.held_out and row.mapped.plan.optimizer.value == "anyprecision-adamw"
        assert row.predicted == pytest.approx(twin.predicted)
    assert -3.0 < rows[stem + "anyprecision-allocated"].error_pct < 0.0  # -2.5 %: 43.98 GB against 45.10 GB


def test_torchtitans_qwen3_32b_one_host_rows_peak_where_the_last_steps_gradients_are_cached(
    bench: ModuleType, result: object
) -> None:
    # pytorch/torchtitan PR #1690 (squash commit's description, the author's step logs; corpus source
    # torchtitan-qwen3-32b-pr-2025-09): Qwen3 32B, FSDP 8 on one 8 × H100 host, full AC, sequence 4,096, "memory:"
    # = reserved_bytes.all.peak: 81.47 GiB at local batch 1, 89.33 GiB at 2, 81.85 GiB at 2 compiled. Scored with
    # the cache at the allocated peak (the backward's end, where every sharded gradient is alive: nothing cached)
    # they read −13.2 / −16.3 / −12.2 %; as the largest moment of allocated + the last step's sharded gradients cached
    # on the reduce-scatter stream (core.training.detailed._gradients_cached), the forward's end (batch 1) or the
    # loss's backward (batch 2), −7.8 / −3.6 / −8.6 % (docs/REAL_GPU_MEMORY.md "The reserved peak over every
    # moment of the step").
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    for name in ("tt1690-qwen3-32b-fsdp8-lbs1", "tt1690-qwen3-32b-fsdp8-lbs2", "tt1690-qwen3-32b-compile-fsdp8-lbs2"):
        row = rows[name]
        assert abs(row.error_pct) < 10.0, (name, row.error_pct)
        worst = bench.estimate(row.mapped.plan).worst
        assert worst.peak_phase == "backward"  # the allocated peak stays the backward's end
        moments = (
            "The reserved peak is at the end of the forward pass",
            "The reserved peak is at the start of the backward",
        )
        assert any(note.startswith(moments) for note in worst.notes), name


def test_a_reading_of_the_first_step_has_no_last_steps_gradients_cached(bench: ModuleType, result: object) -> None:
    # pytorch/torchtitan PR #2679's Qwen3-30B-A3B under FSDP 8 + EP 8 logs "memory:" at step 1 (56.95 GiB, the
    # monitor reset when training starts) and over steps 491-500 (78.57 GiB). Step 1 follows no step, so no sharded
    # gradient sits cached on the reduce-scatter stream (mapping.Mapped.first_step): its reserved figure is scored
    # without that term, the steady-state row with it.
    rows = {r.mapped.id: r for r in result.rows}  # type: ignore[attr-defined]
    first, later = rows["tt2679-qwen3-30b-a3b-hf-ep8-step1"], rows["tt2679-qwen3-30b-a3b-hf-ep8-step500"]
    assert first.mapped.first_step and not later.mapped.first_step
    cache = bench.last_step_cache(bench.estimate(first.mapped.plan).worst)
    assert cache > 0
    assert first.predicted == pytest.approx(later.predicted - cache)
