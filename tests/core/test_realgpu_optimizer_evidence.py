"""Held-out evidence for the optimizers branch h57opt added (torchao's low-bit AdamW, AnyPrecisionAdamW, bitsandbytes'
Lion, torch.optim.Muon), searched for in branch h58aoev (docs/REAL_GPU_MEMORY.md, "Held-out evidence for the new
optimizers"): what torchao's own README table says once the library versions it ran are read, and every candidate
found and left out, with why."""

from __future__ import annotations

import json

import pytest

from core.catalogue import find_model
from core.estimate import estimate
from core.params import param_counts
from core.plan import Method, Optimizer, OptimizerImpl, Plan, Preset
from core.presets import default_plan
from core.training.optimizer import AO_LOW_BIT, OPT8_BLOCK
from tests.core.memory_corpus import FOLDER, corpus
from tests.scripts import load_script

GIB = 2**30
TORCHAO = "torchao-low-bit-optim-2024-09"
# pytorch/ao 072500ab torchao/optim/README.md, "Fine-tune Llama2-7B on Alpaca" (torchtune 52d1b838, full BF16, one
# A100), "Peak memory allocated (GB)": torchtune's peak_memory_alloc, max_memory_allocated / 1024**3, printed to 0.1.
PUBLISHED = {"adamw": 51.6, "bnb8": 39.3, "ao8": 39.1, "ao4": 33.2}
ROUNDING = 0.1  # each reading rounded to 0.1 GiB, so a difference of two is known to ±0.1 GiB
# The block the README's 8-bit runs quantised with: torchao's AdamW8bit defaulted to block_size=2048 until
# pytorch/ao 728d6290 (#927, 2024-09-24, "Change 8-bit and FP8 optim block size from 2048 to 256 to match new bnb
# v0.44"), after the README's table (PR #812, 1e7f132e, 2024-09-05: torchao/prototype/low_bit_optim/adam.py
# AdamW8bit ``block_size=2048``); bitsandbytes 0.43.3 (2024-07-30, the release before 0.44.0 of 2024-09-23) kept one
# absmax per 2,048 elements (bitsandbytes/optim/optimizer.py init_state ``blocks = n // 2048``).
THEN_BLOCK = 2048


def _plan(optimizer: Optimizer) -> Plan:
    """Llama 2 7B, pure bf16 ("full BF16"), fused AdamW's implementation, one A100 80GB: the table's runs differ only
    by the optimizer, so the batch and length (unknown: padded alpaca) are the same in each and cancel."""
    plan = default_plan().with_changes(
        model=find_model("llama-2-7b").spec,
        model_id="llama-2-7b",
        method=Method.FULL,
        preset=Preset.PURE_BF16,
        optimizer=optimizer,
        optimizer_impl=OptimizerImpl.FUSED,
        weight_decay=0.0,
    )
    return plan.with_workload(micro_batch=1, seq_len=2048, grad_accum=1).with_hardware(gpu="a100-80gb-sxm")


def _peak(optimizer: Optimizer) -> float:
    return float(estimate(_plan(optimizer)).peak_bytes)


def test_the_readmes_8bit_rows_are_the_state_rule_at_the_block_of_their_versions() -> None:
    adamw, ao8, ao4 = _peak(Optimizer.ADAMW), _peak(Optimizer.AO_ADAMW_8BIT), _peak(Optimizer.AO_ADAMW_4BIT)
    trainable = param_counts(_plan(Optimizer.AO_ADAMW_8BIT)).trainable
    assert trainable == 6_738_415_616  # Llama 2 7B: every tensor trained, none under 4,096 elements
    code, block, _ = AO_LOW_BIT[Optimizer.AO_ADAMW_8BIT]
    assert (code, block) == (1, 256)  # today's AdamW8bit (pytorch/ao 36027d82), the plan's rule
    # Two moments, one float32 scale per block each: blocks of 2,048 hold 0.171 GiB less than blocks of 256.
    then_minus_now = 2 * trainable * 4 * (1 / THEN_BLOCK - 1 / block)
    assert then_minus_now / GIB == pytest.approx(-0.1716, abs=1e-4)
    # Against today's blocks the differences miss by more than the rounding (12.35 vs 12.5 GiB, 6.08 vs 5.9 GiB) ...
    assert abs((adamw - ao8) / GIB - (PUBLISHED["adamw"] - PUBLISHED["ao8"])) > ROUNDING
    assert abs((ao8 - ao4) / GIB - (PUBLISHED["ao8"] - PUBLISHED["ao4"])) > ROUNDING
    # ... and at the run's blocks of 2,048 both are within it: 12.53 vs 12.5 GiB (+0.2 %), 5.91 vs 5.9 GiB (+0.1 %).
    ao8_then = ao8 + then_minus_now
    assert (adamw - ao8_then) / GIB == pytest.approx(PUBLISHED["adamw"] - PUBLISHED["ao8"], abs=ROUNDING / 2)
    assert (ao8_then - ao4) / GIB == pytest.approx(PUBLISHED["ao8"] - PUBLISHED["ao4"], abs=ROUNDING / 2)


def test_bitsandbytes_and_torchao_8bit_hold_the_same_state_at_the_same_block() -> None:
    # Both 8-bit AdamWs keep uint8 codes and one float32 absmax per block for every Llama 2 7B tensor (none under
    # 4,096 elements): the estimate puts them 0.6 MB apart (torchao's two 1 KiB qmaps a tensor), then as now.
    assert AO_LOW_BIT[Optimizer.AO_ADAMW_8BIT][1] == OPT8_BLOCK
    assert abs(_peak(Optimizer.ADAMW_8BIT) - _peak(Optimizer.AO_ADAMW_8BIT)) < 2**20
    # The README has bnb 8-bit 0.2 GiB above ao 8-bit (0.1 to 0.3 GiB after rounding): not explained by the state
    # rule at either version; left open (docs/REAL_GPU_MEMORY.md), no constant moved for it.
    assert PUBLISHED["bnb8"] - PUBLISHED["ao8"] == pytest.approx(0.2)


def test_the_readmes_rows_stay_held_out_and_unscored() -> None:
    mapping = load_script(FOLDER / "mapping.py", "realgpu_optimizer_evidence_mapping")
    rows = [mapping.map_figure(f) for f in corpus()["figures"] if f["source_id"] == TORCHAO]
    assert sorted(m.figure["value"] for m in rows) == sorted(PUBLISHED.values())
    for m in rows:
        assert m.held_out and m.expressible and not m.scored, m.id
        assert "padded" in m.figure["not_comparable_reason"], m.id


def test_the_candidates_left_out_say_why() -> None:
    # Found in this pass and not usable: each is in the corpus' "rejected" list with the reason, never dropped.
    rejected = corpus()["rejected"]
    for name in (
        "deepspeedai/DeepSpeed blogs/muon-optimizer/README.md at 09018d55",
        "tnguyen21/camelid logs/development/fsdp_muon_adamw.txt",
        "lucidrains/lion-pytorch issue #22",
        "pytorch/ao issue #1499",
        "pytorch/torchtitan PR #1417",
        "ml-explore/mlx PR #1914",
    ):
        (entry,) = [r for r in rejected if r["where"].startswith(name)]
        assert len(entry["why"]) > 100, name
    throughput = json.loads((FOLDER / "throughput_figures.json").read_text())["rejected"]
    (toks,) = [r for r in throughput if r["where"].startswith("pytorch/ao@36027d82")]
    assert "padding included" in toks["why"]
