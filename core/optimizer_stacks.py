"""Which optimizers each training stack builds: one table, read by the Plan's checks, the command line, the
window's optimizer row, the config importers and the launch exports.

A plan's stack, for its optimizer, is one of four (:func:`optimizer_stack`):

- **PyTorch** (HF Trainer / accelerate, PEFT, torchtune's ``_component_``, torchtitan; one GPU, DDP, FSDP2 — its
  CPUOffloadPolicy steps the plan's own torch optimizer on the host — and DeepSpeed ZeRO without offload): any
  optimizer the plan models. ZeRO takes a client optimizer of any class (deepspeedai/DeepSpeed edaa7221
  deepspeed/runtime/engine.py ``_configure_optimizer``; ``zero_allow_untested_optimizer`` for one outside
  zero/utils.py ZERO_SUPPORTED_OPTIMIZERS, engine.py line 1988, which transformers sets when the Trainer builds it)
  and hands it its flat float32 partitions as the parameters, so any torch optimizer's state is sharded with them:
  stages 1-2 ``param_group['params'] = [self.single_partition_of_fp32_groups[i]]`` (zero/stage_1_and_2.py line 516),
  stage 3 ``_set_fp32_optimizer_param_groups`` (zero/stage3.py lines 3137-3141).
- **DeepSpeed ZeRO-Offload** (a ZeRO stage with ``offload_optimizer``): the step runs on the host in DeepSpeed's own
  CPU kernels, built from the ds config's ``optimizer.type`` (engine.py ``_configure_basic_optimizer``, lines
  2095-2175: Adam / AdamW -> DeepSpeedCPUAdam, ``adam_w_mode`` false for Adam's L2; Adagrad -> DeepSpeedCPUAdagrad;
  Lion -> DeepSpeedCPULion). A client optimizer other than DeepSpeedCPUAdam / DeepSpeedCPULion raises
  ZeRORuntimeException ("You are using ZeRO-Offload with a client provided optimizer", engine.py lines 2040-2044)
  unless ``zero_force_ds_cpu_optimizer`` is false, which runs a GPU optimizer's code on host tensors: not modelled.
  accelerate, and the HF Trainer through it, swaps the client optimizer before DeepSpeed sees it
  (huggingface/accelerate 16cb6eb8 accelerator.py ``_prepare_deepspeed`` -> utils/deepspeed.py
  ``map_pytorch_optim_to_deepspeed``): torch AdamW / Adam -> DeepSpeedCPUAdam, torch Adagrad -> DeepSpeedCPUAdagrad,
  bitsandbytes' 32-bit Lion -> DeepSpeedCPULion, and any other -> DeepSpeedCPUAdam, Adam's state in place of the
  one chosen: the same four, the rest refused.
- **Megatron-LM / NeMo** (``stack`` megatron): ``OptimizerConfig.optimizer`` (NVIDIA/Megatron-LM d98e8a64
  megatron/core/optimizer/__init__.py ``_get_megatron_optimizer_based_on_param_groups``, lines 546-627): 'adam'
  (TE / Apex FusedAdam; ``decoupled_weight_decay`` True by default, optimizer_config.py line 250: AdamW; False:
  Adam's L2), 'sgd' (``sgd_momentum`` 0.9 by default, line 256; 0 keeps no buffer) and 'lion' (emerging_optimizers'
  Lion, one ``exp_avg``); anything else raises "optimizer is not supported". Its Muon and the other emerging
  optimizers (``_get_megatron_emerging_optimizer``) are Megatron's own: not planned (Plan._check_muon).
- GaLore AdamW (galore-torch, transformers' galore_adamw) is the PyTorch stack's only, and there on one GPU or DDP:
  ZeRO hands the optimizer flat partitions and FSDP shards, where GaLore's projector needs each whole 2-D gradient
  (galore_projector.py reads ``shape[0]`` / ``shape[1]`` and runs torch.linalg.svd on it), so the Plan refuses it
  there with that reason (Plan._check_galore); ZeRO-Offload and Megatron build their own optimizers (below).
- **Megatron's CPU offload** (``optimizer_cpu_offload``, HybridDeviceOptimizer, same file lines 503-544): Adam
  (asserting ``decoupled_weight_decay``: AdamW only) or SGD, a CPU and a GPU class each; no Lion.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from core.inputs import OPTIMIZER_LABELS, Offload, Optimizer, Stack, Strategy


class OptimizerStack(StrEnum):
    """The software that builds the optimizer (see the module docstring for each one's rule)."""

    PYTORCH = "pytorch"
    ZERO_OFFLOAD = "zero-offload"
    MEGATRON = "megatron"
    MEGATRON_OFFLOAD = "megatron-offload"


STACK_NAMES: Final = {
    OptimizerStack.PYTORCH: "PyTorch (HF Trainer, torchtune, torchtitan; DDP, FSDP2, ZeRO without offload)",
    OptimizerStack.ZERO_OFFLOAD: "DeepSpeed ZeRO-Offload",
    OptimizerStack.MEGATRON: "Megatron-LM / NeMo",
    OptimizerStack.MEGATRON_OFFLOAD: "Megatron-LM's optimizer CPU offload",
}

# Each stack's own rule, as its source says it (the module docstring gives the lines).
STACK_RULES: Final = {
    OptimizerStack.PYTORCH: "any torch optimizer the trainer builds",
    OptimizerStack.ZERO_OFFLOAD: (
        "DeepSpeed steps an offloaded optimizer in its own CPU kernels, DeepSpeedCPUAdam / DeepSpeedCPUAdagrad / "
        "DeepSpeedCPULion from the ds config's optimizer type; a client optimizer raises ZeRORuntimeException "
        "(deepspeedai/DeepSpeed edaa7221 runtime/engine.py _configure_optimizer), and accelerate / the HF Trainer "
        "swap any other for DeepSpeedCPUAdam (accelerate utils/deepspeed.py map_pytorch_optim_to_deepspeed)"
    ),
    OptimizerStack.MEGATRON: (
        "Megatron-Core builds OptimizerConfig.optimizer 'adam' (AdamW, or Adam with decoupled_weight_decay false), "
        "'sgd' or 'lion' (NVIDIA/Megatron-LM d98e8a64 megatron/core/optimizer/__init__.py); its Muon is not planned"
    ),
    OptimizerStack.MEGATRON_OFFLOAD: (
        "Megatron-Core's optimizer_cpu_offload (HybridDeviceOptimizer) runs Adam in AdamW mode or SGD "
        "(NVIDIA/Megatron-LM d98e8a64 megatron/core/optimizer/__init__.py)"
    ),
}

_ANY: Final = frozenset(Optimizer)
BUILT: Final[dict[OptimizerStack, frozenset[Optimizer]]] = {
    OptimizerStack.PYTORCH: _ANY,
    # Lion is the plan's 32-bit Lion: DeepSpeedCPULion keeps the same one float32 exp_avg (ops/lion/cpu_lion.py).
    OptimizerStack.ZERO_OFFLOAD: frozenset({Optimizer.ADAMW, Optimizer.ADAM, Optimizer.ADAGRAD, Optimizer.LION}),
    OptimizerStack.MEGATRON: frozenset(
        {Optimizer.ADAMW, Optimizer.ADAM, Optimizer.SGD_MOMENTUM, Optimizer.SGD, Optimizer.LION}
    ),
    OptimizerStack.MEGATRON_OFFLOAD: frozenset({Optimizer.ADAMW, Optimizer.SGD_MOMENTUM, Optimizer.SGD}),
}

# The name each stack's own config gives a built optimizer (DeepSpeed's optimizer.type, Megatron's
# OptimizerConfig.optimizer), for the importers and the launch exports.
DEEPSPEED_TYPES: Final = {
    Optimizer.ADAMW: "AdamW",
    Optimizer.ADAM: "Adam",  # with "adam_w_mode": false (engine.py line 2100: Adam alone means AdamW)
    Optimizer.ADAGRAD: "Adagrad",
    Optimizer.LION: "Lion",
}
# torchtitan's own names (pytorch/torchtitan b5bcd76c torchtitan/components/optimizer/optimizer.py
# ``_resolve_optimizer_factory``: Adam, AdamW, DistMuon; any other raises NotImplementedError "Optimizer {name} not
# added."). A torchtitan run is the PyTorch stack to the plan; its importer and export keep to these.
TORCHTITAN_NAMES: Final = {Optimizer.ADAMW: "AdamW", Optimizer.ADAM: "Adam"}
TORCHTITAN_RULE: Final = (
    "torchtitan builds [optimizer] name Adam, AdamW or DistMuon (pytorch/torchtitan b5bcd76c "
    "torchtitan/components/optimizer/optimizer.py _resolve_optimizer_factory); its DistMuon is not planned"
)
MEGATRON_NAMES: Final = {
    Optimizer.ADAMW: "adam",
    Optimizer.ADAM: "adam",  # with decoupled_weight_decay false
    Optimizer.SGD_MOMENTUM: "sgd",
    Optimizer.SGD: "sgd",  # with sgd_momentum 0
    Optimizer.LION: "lion",
}


def optimizer_stack(stack: Stack, strategy: Strategy, offload: Offload) -> OptimizerStack:
    """The stack that builds a plan's optimizer: Megatron on its own stack (ZeRO-1 there is its distributed
    optimizer), DeepSpeed's CPU kernels under ZeRO-Offload, else PyTorch."""
    if stack is Stack.MEGATRON:
        return OptimizerStack.MEGATRON if offload is Offload.NONE else OptimizerStack.MEGATRON_OFFLOAD
    if strategy.deepspeed and offload is not Offload.NONE:
        return OptimizerStack.ZERO_OFFLOAD
    return OptimizerStack.PYTORCH


def built(stack: OptimizerStack) -> tuple[Optimizer, ...]:
    """The optimizers ``stack`` builds, in the input table's order."""
    return tuple(o for o in Optimizer if o in BUILT[stack])


def built_labels(stack: OptimizerStack) -> str:
    return ", ".join(OPTIMIZER_LABELS[o] for o in built(stack))


def optimizer_refusal(optimizer: Optimizer, stack: OptimizerStack) -> str:
    """Why ``stack`` does not build ``optimizer``, naming its rule and what it builds; "" where it does."""
    if optimizer in BUILT[stack]:
        return ""
    return (
        f"{STACK_NAMES[stack]} does not build {OPTIMIZER_LABELS[optimizer]}: {STACK_RULES[stack]}. "
        f"It builds {built_labels(stack)}"
    )
