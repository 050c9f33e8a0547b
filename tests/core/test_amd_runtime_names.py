"""On an AMD card PyTorch runs its ROCm build: the same caching allocator (HIPified from
c10/cuda/CUDACachingAllocator.cpp), but the context is the HIP runtime's, the collectives are RCCL's
(ROCm/rccl, the NCCL API) and the tool that shows the whole process is amd-smi (AMD SMI's
``amd-smi process`` / ``monitor --vram``). Every view read "nvidia-smi", "CUDA context" and "NCCL"
on an MI300X before.
"""

from __future__ import annotations

from core.breakdown import BucketKey
from core.cli.render import estimate_to_json, render_estimate
from core.estimate import AMD_JUDGED_FIGURE, JUDGED_FIGURE, estimate
from core.plan import Strategy
from core.presets import default_plan
from core.runtime import CUDA_CONTEXT_BYTES, runtime_names
from core.serving.engines import hf_overhead_terms


def test_runtime_names_follow_the_card_s_vendor() -> None:
    # gpus.json: mi300x and rx-7900-xtx are AMD cards (core.catalogue.amd_target: gfx942, gfx1100).
    assert runtime_names("mi300x") == ("HIP context", "RCCL", "amd-smi")
    assert runtime_names("rx-7900-xtx").smi == "amd-smi"
    assert runtime_names("h100-sxm") == ("CUDA context", "NCCL", "nvidia-smi")


def test_an_amd_plan_names_amd_smi_the_hip_context_and_rccl_everywhere() -> None:
    plan = default_plan().with_hardware(gpu="mi300x")
    amd = estimate(plan)
    cuda = estimate(plan.with_hardware(gpu="h100-sxm"))
    assert (amd.judged_figure, cuda.judged_figure) == (AMD_JUDGED_FIGURE, JUDGED_FIGURE)
    assert "HIP context" in amd.judged_why and "RCCL" in amd.judged_why
    text = render_estimate(amd)
    assert "judged on amd-smi:" in text and "+ HIP context, RCCL" in text
    for word in ("nvidia-smi", "CUDA context", "NCCL"):
        assert word not in text.replace("RCCL", "")
    assert estimate_to_json(amd)["judged_figure"] == "amd-smi"
    overhead = amd.bucket(BucketKey.OVERHEAD)
    labels = [t.label for t in overhead.terms]
    assert any(label.startswith("HIP context") for label in labels), labels
    assert "amd-smi shows it all" in overhead.note
    # The figure itself is the CUDA context's (the HIP context is not measured): the same bytes.
    context = next(t for t in overhead.terms if t.label.startswith("HIP context"))
    assert context.bytes == CUDA_CONTEXT_BYTES and "not measured" in context.formula


def test_an_amd_multi_gpu_plan_names_rccl_buffers() -> None:
    plan = default_plan().with_hardware(gpu="mi300x").on_gpus(8, Strategy.DDP)
    overhead = estimate(plan).bucket(BucketKey.OVERHEAD)
    labels = [t.label for t in overhead.terms]
    assert "RCCL buffers" in labels and "NCCL buffers" not in labels, labels


def test_generate_s_context_term_is_the_hip_context_on_an_amd_card() -> None:
    assert hf_overhead_terms("mi300x")[0].label == "HIP context"
    assert hf_overhead_terms("h100-sxm")[0].label == "CUDA context"
