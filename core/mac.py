"""What PyTorch and its libraries cannot run on an Apple GPU (the MPS backend): one sentence each.

A plan on an Apple card (core.runtime.runs_mps) that asks for a setting the run would stop on is refused
(:func:`mac_refusal`, a PlanError naming the input, what a Mac allows and the library's reason); what
runs but differs, or a version the planner cannot pin, is a warning (:func:`mac_training_warnings`,
:func:`mac_serving_warning`). A serving engine that does not use the Mac's GPU is a warning, not a
refusal: the plan's training view is still a Mac's. The rules and where they were read (docs/REAL_GPU_MEMORY.md,
"Settings a Mac cannot run", 2026-12-05):

- One GPU per machine, no NCCL. ``torch.mps`` drives the one Metal device macOS exposes and
  ``torch.distributed`` has no NCCL build on macOS (NCCL is a CUDA library): DDP / FSDP / DeepSpeed and
  tensor or pipeline parallel over several Apple GPUs do not exist; several Macs would join over gloo
  with CPU tensors, which the planner does not model.
- bitsandbytes (bitsandbytes-foundation/bitsandbytes, tags read with git): 0.45.x has no backend
  but CUDA; ``bitsandbytes/backends/default/ops.py`` registers pure-PyTorch kernels for every device
  (the "default" key) — the int8 matmul from 0.46.0 (1e54f912), ``quantize_4bit`` / ``dequantize_4bit``
  / ``gemv_4bit`` from 0.47.0 (c0dcdf27), so QLoRA's 4-bit base runs on MPS from 0.47 (the same
  ``MatMul4Bit`` that dequantises the whole weight per layer, as on CUDA). ``optimizer_update_8bit_blockwise``
  is registered for cuda and xpu only up to 0.49.2 (f0e6ca31) and for cpu from 0.50.0 (c5d481be), never
  for MPS: 8-bit Adam stops. Paged optimizers allocate with ``functional.get_paged`` →
  ``lib.cget_managed_ptr`` (CUDA managed memory) at every version read.
- DeepSpeed on the one GPU (a ZeRO stage, ZeRO-Offload): up to edaa7221 (2026-08-22) its MPS accelerator
  was a stub — no communication backend, ``is_bf16_supported`` / ``is_fp16_supported`` False (the engine's
  ``_do_sanity_check`` raises "Type bf16 is not supported on your device."), NotImplementedBuilder for every
  op, so no CPU Adam for ZeRO-Offload. deepspeedai/DeepSpeed PR 8293 (merged 2026-08-22: ZeRO 1-3 on one
  Apple GPU, gloo through CPU copies, bf16 from macOS 14) and PR 8300 (merged 2026-08-23: CPU Adam built with
  clang, so ZeRO-Offload runs) made it run. No release tag was read, so it is a warning, not a refusal.
- flash-attn is a CUDA (or ROCm) extension: transformers' ``_flash_attn_2_can_dispatch`` raises when the
  package is missing. FlashAttention 1 and its Triton kernel alike (Triton has no Metal backend).
- float8: torchao's Float8Linear calls ``torch._scaled_mm`` (CUDA / ROCm kernels) and Transformer Engine
  is CUDA-only; Megatron-LM needs Transformer Engine / Apex and NCCL.
- Liger's fused linear cross-entropy, Unsloth and flash-attn's cross-entropy are Triton / CUDA kernels.
- vLLM picks its platform at start-up (vllm-project/vllm 00e2bbc4, vllm/platforms/__init__.py
  ``cpu_platform_plugin``: ``is_cpu = sys.platform.startswith("darwin")``): on a Mac it is its CPU
  backend, on the CPU and the RAM, never the GPU. SGLang's standard Torch runner has no MPS platform;
  its one way onto a Mac is its MLX backend (SGLANG_USE_MLX=1), with its own runner and memory model
  (sgl-project/sglang PR 36780, 2026-08, open, says so). Neither is the pool this planner models.
  llama.cpp (Metal) and transformers' generate (MPS) run and are modelled.
- Autocast: ``torch.autocast("mps")`` raises "User specified an unsupported autocast device_type" until
  MPS registered it (pytorch/pytorch PR 99272, float16 only, merged 2024-09, after the 2.4 release;
  whether 2.5.0 has it was not pinned); bfloat16 autocast on MPS came with PR 139390 (2024-11, 2.6.0);
  until then a bfloat16 request warns "MPS Autocast only supports dtype of torch.float16" (PR 139192)
  and turns autocast off (torch/amp/autocast_mode.py ``autocast.__init__``). accelerate's bf16 on MPS under torch 2.4
  raises "bf16 mixed precision requires PyTorch >= 1.10 and a supported device"
  (huggingface/accelerate#3064).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from core.dtypes import Autocast
from core.errors import PlanError
from core.inputs import (
    TORCH_VERSION_LABELS,
    Attention,
    Engine,
    Float8,
    Offload,
    Optimizer,
    Stack,
    Strategy,
    TorchVersion,
    torch_before,
)
from core.runtime import runs_mps

if TYPE_CHECKING:
    from core.plan import Plan

# The first bitsandbytes release whose "default" backend quantises to 4 bits on any device (see above).
BNB_4BIT_ON_MPS: Final = "0.47.0"
ON_A_MAC: Final = "on an Apple GPU"
# What a plan on an Apple GPU may ask for (the rest is refused below).
MAC_ATTENTION: Final = [Attention.EAGER, Attention.SDPA]
# bitsandbytes' 8-bit and paged optimizers are refused below; torchao's low-bit AdamW and
# AnyPrecisionAdamW are plain tensor code (torch.compile'd for torchao) and stay.
# Lion 32-bit stays: bitsandbytes 95f9af30 bitsandbytes/backends/default/ops.py registers optimizer_update_32bit
# for the "default" device key (any device), not only CUDA / XPU / CPU; the same for RMSprop and AdEMAMix at 32 bits
# (bitsandbytes 0.50.2 backends/default/ops.py: name2optimizer_id lists "rmsprop" and "ademamix").
_BNB_OPTIMIZERS: Final = (
    Optimizer.ADAMW_8BIT,
    Optimizer.PAGED_ADAMW_8BIT,
    Optimizer.PAGED_ADAMW,
    Optimizer.LION_8BIT,
    Optimizer.PAGED_LION,
    Optimizer.PAGED_LION_8BIT,
    Optimizer.RMSPROP_BNB_8BIT,
    Optimizer.ADEMAMIX_8BIT,
    Optimizer.PAGED_ADEMAMIX,
    Optimizer.PAGED_ADEMAMIX_8BIT,
)
MAC_OPTIMIZERS: Final = [o for o in Optimizer if o not in _BNB_OPTIMIZERS]


def mac_refusal(plan: Plan) -> PlanError | None:
    """The first setting of ``plan`` an Apple GPU cannot run, as the PlanError that refuses it."""
    if not runs_mps(plan.hardware.gpu):
        return None
    for check in (_layout, _fsdp, _serving_layout, _attention, _optimizer, _bitsandbytes, _float8, _megatron):
        error = check(plan)
        if error is not None:
            return error
    return None


def mac_training_warnings(plan: Plan) -> tuple[str, ...]:
    """Sentences about training settings that run on an Apple GPU only under conditions the plan cannot
    name (a library's version, the kernels' own device support); empty elsewhere."""
    if not runs_mps(plan.hardware.gpu):
        return ()
    return tuple(
        text for text in (_qlora(plan), _deepspeed(plan), _kernels(plan), _autocast(plan), _alloc_conf(plan)) if text
    )


def mac_serving_warning(plan: Plan) -> str:
    """The sentence for a serving engine that does not use an Apple GPU, or ""."""
    if not runs_mps(plan.hardware.gpu):
        return ""
    if plan.inference.engine is Engine.VLLM:
        return (
            "vLLM has no Metal backend: on macOS it starts its CPU platform (vllm/platforms cpu_platform_plugin: "
            "darwin), which serves from the CPU and the RAM, so these figures, a GPU's paged pool, are not what a "
            "Mac runs. On a Mac use llama.cpp / Ollama (Metal) or transformers' generate."
        )
    if plan.inference.engine is Engine.SGLANG:
        return (
            "SGLang's standard runner has no MPS platform: on a Mac it runs only through its MLX backend, whose "
            "runner and memory are not the token pool estimated here. On a Mac use llama.cpp / Ollama (Metal) or "
            "transformers' generate."
        )
    return ""


def _layout(plan: Plan) -> PlanError | None:
    par = plan.parallel
    if par.world_size <= 1:
        return None
    field, value = (
        ("parallel.nodes", par.nodes) if par.gpus_per_node == 1 else ("parallel.gpus_per_node", par.gpus_per_node)
    )
    return PlanError(
        field,
        value,
        f"1 {ON_A_MAC}",
        "a Mac has one GPU and PyTorch has no NCCL on macOS: no DDP, FSDP, DeepSpeed, tensor or pipeline parallel",
    )


def _fsdp(plan: Plan) -> PlanError | None:
    """FSDP on the Mac's one GPU. torch 2.13.0's fully_shard takes its device from the mesh's device module,
    ``torch.mps.current_device()``, which torch.mps does not define (torch/distributed/fsdp/_fully_shard/
    _fsdp_init.py ``_get_device_from_mesh``); and its collectives run even on one rank, while gloo, the
    backend torch.distributed gives MPS (distributed_c10d.py ``default_device_backend_map``), takes CPU and
    CUDA tensors only (``Backend.backend_capability``; deepspeedai/DeepSpeed PR 8293: "gloo cannot operate on
    MPS tensors (even at world size 1)"). A one-GPU FSDP plan is estimated as one GPU, so nothing else moves."""
    if plan.parallel.strategy is not Strategy.FSDP:
        return None
    return PlanError(
        "parallel.strategy",
        Strategy.FSDP.value,
        f"ddp (one GPU, no sharding) or a DeepSpeed ZeRO stage {ON_A_MAC}",
        "FSDP's fully_shard needs torch.mps.current_device(), which PyTorch does not have, and gloo, the only "
        "collective backend on a Mac, does not take MPS tensors",
    )


def _serving_layout(plan: Plan) -> PlanError | None:
    inf = plan.inference
    if inf.tensor_parallel > 1:
        return PlanError("inference.tensor_parallel", inf.tensor_parallel, f"1 {ON_A_MAC}", "a Mac has one GPU")
    if inf.pipeline_parallel > 1:
        return PlanError("inference.pipeline_parallel", inf.pipeline_parallel, f"1 {ON_A_MAC}", "a Mac has one GPU")
    return None


def _attention(plan: Plan) -> PlanError | None:
    if plan.attention in MAC_ATTENTION:
        return None
    return PlanError(
        "attention",
        plan.attention.value,
        f"sdpa or eager {ON_A_MAC}",
        "flash-attn (and FlashAttention 1's Triton kernel) is a CUDA / ROCm extension: transformers refuses "
        "flash_attention_2 without it; SDPA on MPS trains through PyTorch's math attention",
    )


def _optimizer(plan: Plan) -> PlanError | None:
    opt = plan.optimizer
    if opt in MAC_OPTIMIZERS:
        return None
    if opt not in (Optimizer.PAGED_ADAMW, Optimizer.PAGED_LION, Optimizer.PAGED_ADEMAMIX):
        why = (
            "bitsandbytes registers optimizer_update_8bit_blockwise for CUDA and XPU (up to 0.49.2) and the CPU "
            "(0.50.0), never for MPS"
        )
    else:
        why = "bitsandbytes' paged optimizers keep their state in CUDA managed memory (get_paged, cget_managed_ptr)"
    return PlanError("optimizer", opt.value, f"a torch.optim optimizer {ON_A_MAC}", why)


def _bitsandbytes(plan: Plan) -> PlanError | None:
    if not plan.quantised_base or not plan.bnb_legacy:
        return None
    return PlanError(
        "bnb_legacy",
        True,
        f"false {ON_A_MAC}",
        f"bitsandbytes before 0.43.2 runs on CUDA only; QLoRA on MPS needs {BNB_4BIT_ON_MPS} or later",
    )


def _float8(plan: Plan) -> PlanError | None:
    if plan.float8 is Float8.NONE:
        return None
    return PlanError(
        "float8",
        plan.float8.value,
        f"none {ON_A_MAC}",
        "float8 training needs float8 matmuls (torch._scaled_mm in torchao, Transformer Engine): CUDA and ROCm only",
    )


def _megatron(plan: Plan) -> PlanError | None:
    if plan.stack is not Stack.MEGATRON:
        return None
    return PlanError(
        "stack",
        plan.stack.value,
        f"eager or compile {ON_A_MAC}",
        "Megatron-LM needs Transformer Engine or Apex and NCCL, which are CUDA / ROCm only",
    )


def _qlora(plan: Plan) -> str:
    if not plan.quantised_base:
        return ""
    return (
        f"QLoRA on a Mac needs bitsandbytes {BNB_4BIT_ON_MPS} or later: its PyTorch fallback (backends/default) "
        "quantises and dequantises on MPS; earlier releases have CUDA kernels only. The memory is counted as "
        "on CUDA (each 4-bit layer dequantises its whole weight for the matmul)."
    )


# The DeepSpeed pull requests that made it run on an Apple GPU (see the module's docstring).
DEEPSPEED_ON_MPS: Final = "deepspeedai/DeepSpeed PR 8293 (merged 2026-08-22)"
DEEPSPEED_OFFLOAD_ON_MPS: Final = "PR 8300 (merged 2026-08-23)"


def _deepspeed(plan: Plan) -> str:
    """DeepSpeed on the Mac's one GPU: it runs only with a build that has the MPS pull requests; ZeRO-Offload's
    "CPU" memory is the same unified RAM the GPU draws from (the host check says whether it holds both)."""
    par = plan.parallel
    if not par.strategy.deepspeed and par.offload is Offload.NONE:
        return ""
    text = (
        f"DeepSpeed on an Apple GPU needs a build with {DEEPSPEED_ON_MPS}: before it, its MPS accelerator "
        'reports no bf16 or fp16 (deepspeed.initialize stops: "Type bf16 is not supported on your device.") '
        "and has no communication backend."
    )
    if par.offload is Offload.NONE:
        return text
    return (
        f"{text} ZeRO-Offload also needs {DEEPSPEED_OFFLOAD_ON_MPS}, which builds its CPU Adam on macOS. The "
        "offloaded state leaves Metal's working set but not the machine: a Mac's CPU and GPU share one RAM."
    )


def _kernels(plan: Plan) -> str:
    names = [
        name
        for name, on in (
            ("Liger's fused linear cross-entropy", plan.fused_loss),
            ("Unsloth", plan.unsloth),
            ("flash-attn's cross-entropy", plan.flash_loss),
        )
        if on
    ]
    if not names:
        return ""
    return (
        f"{' and '.join(names)} run{'s' if len(names) == 1 else ''} Triton / CUDA kernels, which have no Metal "
        "backend: expect it to fail on a Mac (a Cut Cross-Entropy build without Triton is the exception)."
    )


def _autocast(plan: Plan) -> str:
    if plan.autocast is Autocast.NONE:
        return ""
    release = plan.hardware.torch_version
    if torch_before(release, TorchVersion.V2_5_TO_2_7):  # 2.4 and every release before it
        return (
            f"PyTorch {TORCH_VERSION_LABELS[release]} has no autocast for MPS: torch.autocast('mps') raises "
            f"(unsupported device_type) and accelerate refuses {plan.autocast.value} mixed precision on a Mac. "
            "MPS autocast came after 2.4 (float16; bfloat16 from 2.6): choose a newer PyTorch, or 16-bit weights "
            "without autocast."
        )
    if plan.autocast is Autocast.BF16 and plan.hardware.torch_version is TorchVersion.V2_5_TO_2_7:
        return (
            "bfloat16 autocast on MPS needs PyTorch 2.6 or later (pytorch/pytorch PR 139390): under 2.5 "
            "torch.autocast('mps', torch.bfloat16) raises or, with float16-only MPS autocast, warns and turns "
            "itself off, so the step runs in float32, not what is estimated here."
        )
    return ""


def _alloc_conf(plan: Plan) -> str:
    # The variable is read by the CUDA caching allocator only (c10/cuda/CUDAAllocatorConfig); PyTorch's MPS
    # allocator reads its own PYTORCH_MPS_HIGH_WATERMARK_RATIO / PYTORCH_MPS_LOW_WATERMARK_RATIO
    # (aten/src/ATen/mps/MPSAllocator.mm), and the estimate uses its heaps (core.training.device._mps_reserve).
    if not plan.hardware.alloc_conf.strip():
        return ""
    return (
        f"PYTORCH_CUDA_ALLOC_CONF ({plan.hardware.alloc_conf}) has no effect on an Apple GPU: only CUDA's caching "
        "allocator reads it. The MPS allocator's settings are PYTORCH_MPS_HIGH_WATERMARK_RATIO and "
        "PYTORCH_MPS_LOW_WATERMARK_RATIO; the estimate ignores it here."
    )
