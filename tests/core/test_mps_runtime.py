"""PyTorch on an Apple GPU runs its MPS backend, not CUDA: no CUDA context, no cuBLAS workspace,
the MPS allocator's heaps, and the out-of-memory limit that allocator enforces.

Source: pytorch/pytorch aten/src/ATen/mps/MPSAllocator.h at 01f98b3e (default_high_watermark_ratio
= 1.7, kXLargeHeap = 1 GiB, kLargeHeap = 32 MiB, kSmallHeap = 8 MiB, HeapBlock::createHeapBlock) and
MPSAllocator.mm at 57ba4129 (setHighWatermarkRatio: ratio × recommendedMaxWorkingSetSize;
alloc_buffer_block's "MPS backend out of memory (..., max allowed: ...)"); EmptyTensor.cpp at
026a4bff (empty_mps refuses bfloat16 before macOS 14).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from core.breakdown import BucketKey
from core.catalogue import find_gpu
from core.estimate import MPS_BF16_WARNING, estimate
from core.plan import Stack
from core.presets import default_plan
from core.runtime import (
    MPS_HIGH_WATERMARK_RATIO,
    MPS_OPEN_HEAPS_BYTES,
    mps_high_watermark_bytes,
    pytorch_limit_bytes,
)
from core.units import GiB
from core.verdict import Mode

if TYPE_CHECKING:
    from core.plan import Plan


def test_the_high_watermark_is_the_source_s_default() -> None:
    # MPSAllocator.h: default_high_watermark_ratio = 1.7; the open heaps: ½ × (1 GiB + 32 MiB + 8 MiB).
    assert MPS_HIGH_WATERMARK_RATIO == 1.7
    assert MPS_OPEN_HEAPS_BYTES == (1024 + 32 + 8) * 2**20 // 2


# The "max allowed" of the "MPS backend out of memory" messages users pasted, each with its machine and
# its link (benchmarks/realgpu/mps_oom_limits.json); the catalogue's memory_bytes is Metal's working set.
_OOM = json.loads((Path(__file__).parents[2] / "benchmarks/realgpu/mps_oom_limits.json").read_text())["records"]


@pytest.mark.parametrize("record", [r for r in _OOM if r["catalogue_id"]], ids=lambda r: r["id"])
def test_the_limit_against_every_published_max_allowed_on_a_catalogue_machine(record: dict[str, Any]) -> None:
    card = find_gpu(record["catalogue_id"])
    assert card.unified_memory_gb == record["ram_gb"]
    ours = round(mps_high_watermark_bytes(card.memory_bytes) / GiB, 2)
    # "match": 1.7 x the catalogue's working set is the limit PyTorch printed. "mismatch": the machine's
    # macOS gave a larger working set than the catalogue's share (the record's diagnosis), kept visible here.
    assert (ours == record["max_allowed_gib"]) is (record["check"] == "match"), (ours, record)


def test_a_cuda_card_keeps_its_memory_as_the_limit() -> None:
    card = find_gpu("rtx-4090")
    assert pytorch_limit_bytes(card) == card.memory_bytes


@pytest.mark.parametrize("gpu_id", ["apple-m1-16gb", "apple-m2-24gb", "apple-m1-pro-32gb", "apple-m4-max-128gb"])
def test_an_apple_gpu_is_judged_against_the_lower_of_the_mps_limit_and_the_ram(gpu_id: str) -> None:
    # At Metal's default shares (2/3, 3/4) 1.7 x the working set passes the RAM (1.13 x, 1.28 x): the
    # allocator would go on handing out heaps that macOS swaps (mps_oom_limits.json: comfyui-11584 held
    # 180.7 GiB on a 128 GB Mac), so the RAM is what the plan can hold and still run.
    card = find_gpu(gpu_id)
    assert card.unified_memory_gb is not None
    ram = card.unified_memory_gb * GiB
    assert mps_high_watermark_bytes(card.memory_bytes) > ram
    assert pytorch_limit_bytes(card) == ram


def _apple_plan(gpu: str = "apple-m4-max-128gb") -> Plan:
    return default_plan().with_hardware(gpu=gpu)  # Llama 3.1 8B, LoRA, bf16


def test_an_apple_training_plan_has_no_cuda_runtime_and_is_judged_against_the_mps_limit() -> None:
    est = estimate(_apple_plan())
    labels = [t.label for t in est.bucket(BucketKey.OVERHEAD).terms]
    assert not any("CUDA" in label or "cuBLAS" in label for label in labels), labels
    assert any("heaps" in label for label in labels), labels
    assert est.capacity_bytes == pytorch_limit_bytes(find_gpu("apple-m4-max-128gb"))
    assert est.judgement().capacity_bytes == est.capacity_bytes
    # The allocated peak carries no cuBLAS workspace: peak == the tensors' peak. (Megatron-LM, whose
    # Transformer Engine workspaces a CUDA plan counts, is refused on an Apple GPU: core.mac.)
    assert est.peak_bytes == pytest.approx(est.tensor_peak_bytes)
    assert estimate(_apple_plan().with_changes(stack=Stack.COMPILE)).worst.workspace_bytes == 0


def test_the_same_plan_on_a_cuda_card_keeps_the_cuda_runtime() -> None:
    est = estimate(_apple_plan(gpu="a100-80gb-sxm"))
    labels = [t.label for t in est.bucket(BucketKey.OVERHEAD).terms]
    assert any("CUDA context" in label for label in labels)
    assert est.capacity_bytes == find_gpu("a100-80gb-sxm").memory_bytes


def test_a_step_past_the_working_set_but_within_the_limit_is_warned_not_refused() -> None:
    est = estimate(_apple_plan(gpu="apple-m2-24gb").with_workload(seq_len=512))
    card = find_gpu("apple-m2-24gb")
    assert card.memory_bytes < est.total_bytes < est.capacity_bytes  # past 16 GiB, within 24 GiB
    assert any("recommended working set" in w for w in est.warnings_for(Mode.TRAINING))


def test_bfloat16_on_an_apple_gpu_is_warned_about_macos_14() -> None:
    plan = _apple_plan()
    assert MPS_BF16_WARNING in estimate(plan).warnings_for(Mode.TRAINING)
    fp16 = plan.with_changes(precision="fp16")
    assert MPS_BF16_WARNING not in estimate(fp16).warnings_for(Mode.TRAINING)
    assert MPS_BF16_WARNING not in estimate(_apple_plan(gpu="a100-80gb-sxm")).warnings_for(Mode.TRAINING)


def test_generate_on_an_apple_gpu_uses_the_mps_terms_and_limit_llama_cpp_metal_s_working_set() -> None:
    plan = _apple_plan(gpu="apple-m1-16gb").with_inference(engine="hf")
    est = estimate(plan)
    overhead = next(b for b in est.inference.buckets if b.key is BucketKey.OVERHEAD)
    assert [t.bytes for t in overhead.terms] == [MPS_OPEN_HEAPS_BYTES]
    assert est.judgement(Mode.INFERENCE).capacity_bytes == est.capacity_bytes
    llama = estimate(plan.with_inference(engine="llamacpp", gguf_quant="Q4_K_M"))
    assert llama.judgement(Mode.INFERENCE).capacity_bytes == find_gpu("apple-m1-16gb").memory_bytes


def test_an_apple_plan_names_the_mps_driver_as_its_judged_figure_everywhere() -> None:
    # There is no nvidia-smi on a Mac: the figure PyTorch's MPS allocator checks against its high
    # watermark is the Metal driver's (torch.mps.driver_allocated_memory(), MPSAllocator.h at 01f98b3e).
    # The banner, chart, CLI, JSON and comparison all read "nvidia-smi" on Apple plans before.
    from core.advice.compare import compare
    from core.cli.render import estimate_to_json, render_estimate

    mac = estimate(_apple_plan())
    cuda = estimate(_apple_plan().with_hardware(gpu="h100-sxm"))
    assert (mac.judged_figure, cuda.judged_figure) == ("MPS driver", "nvidia-smi")
    assert "Metal" in mac.judged_why and "CUDA context" in cuda.judged_why
    text = render_estimate(mac)
    assert "judged on MPS driver:" in text and "nvidia-smi" not in text
    assert "judged on nvidia-smi:" in render_estimate(cuda)
    assert estimate_to_json(mac)["judged_figure"] == "MPS driver"
    both = compare([("mac", _apple_plan()), ("h100", _apple_plan().with_hardware(gpu="h100-sxm"))])
    assert both.phase_names()[-1] == "MPS driver / nvidia-smi (judged)"
    assert next(r for r in both.rows() if r.key == "total").label == "MPS driver / nvidia-smi (judged)"
    assert compare([("mac", _apple_plan())]).phase_names()[-1] == "MPS driver (judged)"
