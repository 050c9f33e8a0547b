"""Settings an Apple GPU cannot run are refused with the library's reason; what runs only under a condition
the plan cannot name is warned about where the other warnings are.

Sources (core.mac and core.training.attention name them in full): bitsandbytes-foundation/bitsandbytes
tags 0.46.0 (1e54f912), 0.47.0 (c0dcdf27), 0.49.2 (f0e6ca31), 0.50.0 (c5d481be):
bitsandbytes/backends/default/ops.py and the register_kernel("bitsandbytes::optimizer_update_8bit_blockwise",
...) devices; vllm-project/vllm 00e2bbc4 vllm/platforms/__init__.py cpu_platform_plugin; pytorch/pytorch
attention.cpp (scaled_dot_product_attention: the MPS kernel only without grad) and
mps/operations/Attention.mm at 00a5f92f; torch.autocast on MPS: pytorch/pytorch PRs #99272 and #139390.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from core.advice.remedies import RemedyKind, _bigger_card, _offload_optimizer, remedies_for
from core.cli.app import main
from core.dtypes import Quant
from core.errors import PlanError
from core.estimate import estimate
from core.plan import Attention, Engine, Float8, Method, Offload, Optimizer, Stack, Strategy, TorchVersion
from core.presets import default_plan
from core.runtime import runs_mps
from core.training.activations import layer_activations
from core.training.attention import Kernel, sdpa_kernel
from core.verdict import Mode

if TYPE_CHECKING:
    from core.plan import Plan

MAC = "apple-m2-ultra-192gb"
CUDA = "a100-80gb-sxm"


def _plan(gpu: str = MAC) -> Plan:
    return default_plan().with_hardware(gpu=gpu)  # Llama 3.1 8B, LoRA, bf16


# (what the plan asks, the input the refusal names, a phrase of its reason)
REFUSED: list[tuple[str, Any, str, str]] = [
    ("two GPUs", lambda p: p.with_parallel(gpus_per_node=2), "parallel.gpus_per_node", "no NCCL"),
    ("two nodes", lambda p: p.with_parallel(nodes=2), "parallel.nodes", "one GPU"),
    ("FSDP on eight", lambda p: p.on_gpus(8), "parallel.gpus_per_node", "FSDP"),
    # torch 2.13.0 torch/distributed/fsdp/_fully_shard/_fsdp_init.py _get_device_from_mesh calls
    # torch.mps.current_device(), which torch/mps/__init__.py does not define.
    ("FSDP on one", lambda p: p.with_layout(strategy=Strategy.FSDP), "parallel.strategy", "current_device"),
    ("flash-attn", lambda p: p.with_changes(attention=Attention.FLASH), "attention", "CUDA / ROCm extension"),
    ("FlashAttention 1", lambda p: p.with_changes(attention=Attention.FLASH1), "attention", "Triton kernel"),
    ("8-bit AdamW", lambda p: p.with_changes(optimizer=Optimizer.ADAMW_8BIT), "optimizer", "never for MPS"),
    ("paged 8-bit AdamW", lambda p: p.with_changes(optimizer=Optimizer.PAGED_ADAMW_8BIT), "optimizer", "never for MPS"),
    ("paged AdamW", lambda p: p.with_changes(optimizer=Optimizer.PAGED_ADAMW), "optimizer", "CUDA managed memory"),
    ("QLoRA, old bitsandbytes", lambda p: p.with_method(Method.QLORA, bnb_legacy=True), "bnb_legacy", "CUDA only"),
    ("float8", lambda p: p.with_changes(float8=Float8.TENSORWISE), "float8", "float8 matmuls"),
    ("Megatron", lambda p: p.with_changes(stack=Stack.MEGATRON), "stack", "Transformer Engine"),
    ("serving over 2 GPUs", lambda p: p.with_inference(tensor_parallel=2), "inference.tensor_parallel", "one GPU"),
    (
        "llama.cpp over 2 GPUs",
        lambda p: p.with_inference(engine=Engine.LLAMACPP, pipeline_parallel=2),
        "inference.pipeline_parallel",
        "one GPU",
    ),
]


@pytest.mark.parametrize(("case", "change", "field", "reason"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_setting_a_mac_cannot_run_is_refused_with_its_reason(case: str, change: Any, field: str, reason: str) -> None:
    with pytest.raises(PlanError) as refused:
        change(_plan())
    assert refused.value.field == field, (case, str(refused.value))
    assert reason in str(refused.value), (case, str(refused.value))
    change(_plan(CUDA))  # the same setting on an A100 is a plan


def test_a_plan_moved_onto_a_mac_with_a_cuda_only_setting_is_refused_too() -> None:
    with pytest.raises(PlanError, match="never for MPS"):
        _plan(CUDA).with_changes(optimizer=Optimizer.ADAMW_8BIT).with_hardware(gpu=MAC)


# (what the plan asks, a phrase of the reason the warning must give)
WARNED: list[tuple[str, Any, str]] = [
    ("QLoRA", lambda p: p.with_method(Method.QLORA, quant=Quant.NF4), "0.47.0"),
    ("Liger", lambda p: p.with_changes(fused_loss=True), "Liger"),
    ("autocast on 2.4", lambda p: p.with_hardware(torch_version=TorchVersion.V2_4), "PyTorch 2.4 has no autocast"),
    ("bf16 autocast on 2.5", lambda p: p.with_hardware(torch_version=TorchVersion.V2_5_TO_2_7), "2.6 or later"),
    # deepspeedai/DeepSpeed PR 8293 (merged 2026-08-22): ZeRO 1-3 on one Apple GPU; before it the MPS accelerator
    # reported no bf16 (engine._do_sanity_check raises), edaa7221 accelerator/mps_accelerator.py.
    ("ZeRO-2", lambda p: p.with_layout(strategy=Strategy.ZERO2), "PR 8293"),
    # PR 8300 (merged 2026-08-23) builds DeepSpeed's CPU Adam on macOS: ZeRO-Offload runs from then on.
    ("ZeRO-Offload", lambda p: p.with_layout(strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER), "PR 8300"),
]


@pytest.mark.parametrize(("case", "change", "reason"), WARNED, ids=[c[0] for c in WARNED])
def test_a_setting_that_runs_on_a_mac_only_if_is_warned_with_its_reason(case: str, change: Any, reason: str) -> None:
    on_mac = estimate(change(_plan())).warnings_for(Mode.TRAINING)
    assert any(reason in text for text in on_mac), (case, on_mac)
    on_cuda = estimate(change(_plan(CUDA))).warnings_for(Mode.TRAINING)
    assert not any(reason in text for text in on_cuda), (case, on_cuda)


def test_the_default_mac_plan_runs_and_is_not_told_otherwise() -> None:
    texts = estimate(_plan()).warnings_for(Mode.TRAINING) + estimate(_plan()).warnings_for(Mode.INFERENCE)
    assert not any("Mac" in text and "cannot" in text for text in texts), texts


@pytest.mark.parametrize(("engine", "reason"), [(Engine.VLLM, "CPU platform"), (Engine.SGLANG, "MLX backend")])
def test_vllm_and_sglang_on_a_mac_are_told_they_do_not_use_its_gpu(engine: Engine, reason: str) -> None:
    on_mac = estimate(_plan().with_inference(engine=engine)).warnings_for(Mode.INFERENCE)
    assert any(reason in text for text in on_mac), on_mac
    on_cuda = estimate(_plan(CUDA).with_inference(engine=engine)).warnings_for(Mode.INFERENCE)
    assert not any(reason in text for text in on_cuda)


@pytest.mark.parametrize("engine", [Engine.HF, Engine.LLAMACPP])
def test_generate_and_llama_cpp_run_on_a_mac(engine: Engine) -> None:
    texts = estimate(_plan().with_inference(engine=engine)).warnings_for(Mode.INFERENCE)
    assert not any("Metal backend" in text or "one GPU" in text for text in texts), texts


def test_sdpa_trains_through_the_math_kernel_on_a_mac_and_keeps_the_probabilities() -> None:
    """Worked example: Llama 3.1 8B (32 heads, head width 128), micro-batch 4, 512 tokens.
    On MPS a step with grad runs _scaled_dot_product_attention_math, whose softmax output autograd keeps:
    B·H·S² × 4 bytes (float32: the math path upcasts 16-bit q, k, v, attention.cpp) per block
    = 4 × 32 × 512² × 4 = 134,217,728 bytes (128 MiB). On an A100 the same plan runs the flash kernel
    and keeps a float32 log-sum-exp per row instead: B·H·S × 4 = 262,144 bytes."""
    mac = _plan().with_workload(micro_batch=4, seq_len=512)
    assert sdpa_kernel(mac) is Kernel.MATH
    terms = {t.label: t.bytes for t in layer_activations(mac, False).items}
    assert terms["math kernel: probabilities (float32)"] == 4 * 32 * 512**2 * 4 == 134_217_728
    cuda = mac.with_hardware(gpu=CUDA)
    assert sdpa_kernel(cuda) is Kernel.FLASH
    cuda_terms = {t.label: t.bytes for t in layer_activations(cuda, False).items}
    assert "math kernel: probabilities (float32)" not in cuda_terms
    assert cuda_terms["softmax log-sum-exp (float32)"] == 4 * 32 * 512 * 4
    # Without checkpointing all 32 blocks keep them: the Mac's peak is ≥ 32 × (128 MiB − 0.25 MiB) higher
    # less the flash kernel's own q, k, v and output (≤ 2 × 16 MiB + 8 MiB a block) and cuBLAS's workspaces.
    whole = {"checkpointing": False}
    gap = estimate(mac.with_changes(**whole)).worst.peak_bytes - estimate(cuda.with_changes(**whole)).worst.peak_bytes
    assert gap > 32 * (134_217_728 - 262_144 - 2 * 16_777_216 - 8_388_608) - 64 * 2**20


def test_eager_attention_on_a_mac_is_still_eager() -> None:
    assert sdpa_kernel(_plan().with_changes(attention=Attention.EAGER)) is Kernel.EAGER


def test_the_command_line_json_carries_the_mac_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--json", "--model", "llama-3.1-8b", "--method", "qlora", "--gpu", MAC]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert any("0.47.0" in text for text in data["warnings"]), data["warnings"]


def test_the_command_line_refuses_a_mac_plan_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--model", "llama-3.1-8b", "--method", "lora", "--gpu", MAC, "--attention", "flash"]
    assert main(argv) != 0
    assert "CUDA / ROCm extension" in capsys.readouterr().err


def test_zero_offload_on_a_mac_is_planned_and_told_it_shares_the_machines_ram() -> None:
    # Before PR 8300 this plan was refused (DeepSpeed edaa7221: NotImplementedBuilder, no CPU Adam); it runs with
    # a build that has it, so it is estimated. Llama 3.1 8B full fine-tuning keeps about 128 GB of float32 master
    # and moments on the host (16 B x 8.03e9 parameters, Meta's model card count) beside the GPU's step: far
    # more than the 16 GB an M1 has in all, which a per-device check would not see.
    plan = (
        _plan("apple-m1-16gb").with_method(Method.FULL).with_layout(strategy=Strategy.ZERO2, offload=Offload.OPTIMIZER)
    )
    est = estimate(plan)
    assert est.host is not None and est.host.bytes > 16 * 2**30
    assert any("share 16 GB of RAM" in text for text in est.warnings_for(Mode.TRAINING))
    # The same plan on a 192 GB M2 Ultra holds both: no such warning.
    roomy = estimate(plan.with_hardware(gpu=MAC)).warnings_for(Mode.TRAINING)
    assert not any("macOS swaps" in text for text in roomy)


def test_the_diagnosis_on_a_mac_never_offers_zero_offload() -> None:
    # Full fine-tuning of Llama 3.1 8B (presets) on a 16 GB M1 does not fit; the Diagnosis offered "Optimizer
    # state on the CPU (DeepSpeed ZeRO-Offload)": on a Mac it moves the state within the same RAM (unified
    # memory), freeing Metal's working set but not the machine, so it is not offered (core.advice.remedies).
    plan = default_plan().with_method(Method.FULL).with_hardware(gpu="apple-m1-16gb")
    assert not estimate(plan).fits
    assert _offload_optimizer(plan.with_hardware(gpu=CUDA)) is not None  # on an A100 it is offered
    kinds = {r.kind for r in remedies_for(plan)}
    assert RemedyKind.OFFLOAD_OPTIMIZER not in kinds


def test_a_bigger_card_for_a_multi_gpu_plan_skips_the_macs_it_cannot_move_to() -> None:
    # Two RTX 3060s cannot hold an 8B LoRA step at 8,192 tokens; the M2 Ultra (192 GB) is larger but one
    # GPU only (core.mac refuses two): the remedy names another card instead of giving up.
    plan = _plan("rtx-3060-12gb").with_parallel(gpus_per_node=2).with_workload(seq_len=8192)
    found = _bigger_card(plan)
    assert found is not None
    assert not runs_mps(found[0].hardware.gpu)
