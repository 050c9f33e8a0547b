"""flash-attn's fused cross-entropy as a plan setting (``flash_loss``).

llm-foundry's MPT computes its loss with ``flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index=-100)``
unless its model config says ``loss_fn: torch_crossentropy`` (mosaicml/examples 71dd21bd
``examples/llm/src/models/mosaic_gpt/mosaic_gpt.py`` ``ComposerMosaicGPT.__init__``, the commit of the A100 40GB
table, flash-attn 0.2.8; mosaicml/llm-foundry b2a43a147 and 5e85bd62d ``llmfoundry/models/mpt/modeling_mpt.py``
``ComposerMPTCausalLM.__init__``). The kernel (Dao-AILab/flash-attention v0.2.8 ``flash_attn/losses/
cross_entropy.py`` and ``csrc/xentropy/xentropy_kernel.cu``; v2.3.2+ ``flash_attn/ops/triton/cross_entropy.py``)
saves the 16-bit logits with two float32 numbers per row and writes the logits' gradient with
``empty_like(logits)`` (``inplace_backward`` False by default, never set by llm-foundry).

Figures: benchmarks/realgpu/throughput_figures.json, the rows of mosaicml/llm-foundry@4952183
scripts/train/benchmarking/README.md '## A100 40GB with 1600 Gbps node-node interconnect (RoCE)':
78 runs that ran, on cards of 40 GiB."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from core.errors import PlanFileError
from core.estimate import estimate
from core.files import planfile
from core.inputs import input_at
from core.training.activations import loss_memory
from core.verdict import Verdict
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"
MPT_125M = "mosaic-a10040gb-bf16-125m-s2048-g8-mb26"  # |  125m | 2048 | 8 | a100_40gb | ... | 26 | 3 | ...
# MPT-125m, micro-batch 26 × 2,048 tokens: N = 53,248; V = 50,368 (mpt-125m.yaml): N·V = 2,681,995,264.
N = 26 * 2_048
NV = N * 50_368
CARD_40GB = 40 * 2**30  # a100_40gb: 40,960 MiB


def _throughput() -> ModuleType:
    return load_script(FOLDER / "throughput.py", "throughput_benchmark_flash_loss")


def _rows() -> dict[str, dict[str, object]]:
    figures = json.loads((FOLDER / "throughput_figures.json").read_text())["figures"]
    return {f["id"]: f for f in figures if f["source_id"] == "mosaicml-llm-foundry" and f["gpu"] == "a100_40gb"}


def test_the_flash_loss_keeps_the_16_bit_logits_and_forms_their_gradient_in_16_bits() -> None:
    plan = _throughput().case_of(_rows()[MPT_125M]).plan
    assert plan.flash_loss
    flash = loss_memory(plan)
    # Forward: the saved logits (bf16) and the kernel's float32 losses and log-sum-exp, one each per row.
    assert [t.bytes for t in flash.forward] == [NV * 2, 2 * N * 4]
    # Backward: the logits, their gradient (empty_like: bf16) and the kept log-sum-exp.
    assert [t.bytes for t in flash.backward] == [NV * 2, NV * 2, N * 4]
    # aten's cross-entropy (the default): three float32 N·V tensors at the start of the backward.
    aten = loss_memory(plan.with_changes(flash_loss=False))
    assert sum(t.bytes for t in aten.backward) == 3 * NV * 4 == 32_183_943_168


def test_every_mosaicml_a100_40gb_run_peaks_below_its_card_and_none_reads_out_of_memory() -> None:
    """A run that ran held its allocated peak under 40 GiB; with aten's float32 loss 34 of the 78
    plans did not (MPT-350m at 18 × 2,048 up to 55.6 GB, MPT-125m at 26 × 2,048 50.5 GB) and the
    planner called them out of memory. With the reserve the allocator would keep (a fitted fraction of
    the activations, core.runtime.ALLOCATOR_FRAGMENTATION) some still pass the card: borderline."""
    throughput = _throughput()
    rows = _rows()
    assert len(rows) == 78
    over, oom = {}, []
    for rid, row in rows.items():
        plan = throughput.case_of(row).plan
        assert plan.flash_loss
        result = estimate(plan)
        assert result.capacity_bytes == CARD_40GB
        if result.peak_bytes >= CARD_40GB:
            over[rid] = result.peak_bytes
        if result.verdict is Verdict.OOM:
            oom.append(rid)
    assert over == {}
    assert oom == []


def test_the_other_fused_losses_come_first_and_the_flash_loss_before_the_compiled_one() -> None:
    plan = _throughput().case_of(_rows()[MPT_125M]).plan
    flash = loss_memory(plan)
    assert loss_memory(plan.with_changes(compiled_loss=True)) == flash
    assert loss_memory(plan.with_changes(fused_loss=True)) != flash
    matters = input_at("flash_loss").matters
    assert matters(plan) and not matters(plan.with_changes(fused_loss=True))
    assert not input_at("compiled_loss").matters(plan)


@pytest.mark.parametrize("on", [True, False])
def test_the_plan_file_keeps_it_and_an_older_file_reads_as_off(tmp_path: Path, on: bool) -> None:
    plan = _throughput().case_of(_rows()[MPT_125M]).plan.with_changes(flash_loss=on)
    path = tmp_path / "plan.json"
    planfile.save(plan, path)
    assert planfile.load(path).flash_loss is on
    document = json.loads(path.read_text())
    del document["plan"]["flash_loss"]  # a file written before the setting: aten's loss, as then priced
    assert planfile.loads(json.dumps(document)).flash_loss is False


def test_a_flash_loss_that_is_not_a_boolean_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    planfile.save(_throughput().case_of(_rows()[MPT_125M]).plan, path)
    document = json.loads(path.read_text())
    document["plan"]["flash_loss"] = "yes"
    with pytest.raises(PlanFileError, match=r"plan\.flash_loss: 'yes' is not allowed; expected true or false"):
        planfile.loads(json.dumps(document))
