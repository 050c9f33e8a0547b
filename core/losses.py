"""Which code computes the loss: the plan's loss switches read as one choice.

The plan keeps one switch per loss implementation (``fused_loss``, ``chunked_loss``,
``flash_loss``, ``compiled_loss``, ``megatron_ce_fusion``, ``loss_16bit``: its file and
the command line say them so), but only one of them can compute a step's loss:
core.training.activations.loss_memory takes the first that is on, in :data:`LOSS_INPUTS`'s
order. This module is that choice for the window's one "Loss" list and the plan warnings:

- :func:`loss_options`: the choices that make sense for a plan, each listed where its
  input matters (core.inputs: its ``matters`` rule, on the plan with no loss chosen);
- :func:`loss_choice`: the one the estimate counts; :func:`loss_conflicts`: the others a
  plan (a file, the command line) also turned on, which it ignores;
- :func:`with_loss`: a plan with exactly that one switch on and the others off.

Unsloth and LitGPT are training loops that bring their own loss *and* more (LoRA kernels,
a 4-bit head, the previous micro-batch's logits): they stay switches of their own, and
under them the default entry names their loss. The loop that keeps its output through the
backward describes the eager loss's loop, not another kernel: a switch of its own too.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from core.inputs import LOSS_KERNELS, Accounting, MegatronCeFusion, Stack, input_at

if TYPE_CHECKING:
    from core.plan import Plan


class LossChoice(StrEnum):
    DEFAULT = "default"  # no loss switch on: transformers' float32 loss (or the stack's / loop's own)
    LOSS_16BIT = "loss-16bit"
    CHUNKED = "chunked"
    FUSED = "fused"
    COMPILED = "compiled"
    FLASH = "flash"
    LOGPROB_HEAD = "logprob-head"  # prime-rl's RL head: per-token log-probs, no cross-entropy
    MEGATRON_NATIVE = "megatron-native"
    MEGATRON_TE = "megatron-te"


# What each choice sets, in the order loss_memory takes them (the first one on counts): the loss
# kernels (core.inputs.LOSS_KERNELS, which own_loss_code also reads), then the settings of the
# eager loss. Every other input of LOSS_INPUTS goes back to its default (off).
_SETS: Final[dict[LossChoice, tuple[str, Any]]] = {
    **{
        choice: (path, True)
        for choice, path in zip(
            (LossChoice.FUSED, LossChoice.CHUNKED, LossChoice.FLASH, LossChoice.COMPILED, LossChoice.LOGPROB_HEAD),
            LOSS_KERNELS,
            strict=True,
        )
    },
    LossChoice.MEGATRON_NATIVE: ("megatron_ce_fusion", MegatronCeFusion.NATIVE),
    LossChoice.MEGATRON_TE: ("megatron_ce_fusion", MegatronCeFusion.TE),
    LossChoice.LOSS_16BIT: ("loss_16bit", True),
}
# The plan inputs a choice sets, each once, in _SETS's order.
LOSS_INPUTS: Final = tuple(dict.fromkeys(path for path, _ in _SETS.values()))
_OFF: Final[dict[str, Any]] = {path: input_at(path).default for path in LOSS_INPUTS}
# The plan's loss switches read in one C call and compared with their defaults at once: every estimate asks
# (core.checks' loss warning), and a plan almost always has them all off. Fields, never None (the Plan refuses it).
_READ_SWITCHES: Final = operator.attrgetter(*LOSS_INPUTS)
_OFF_VALUES: Final = tuple(_OFF.values())

# The list's order: the default first, then roughly from most kept to least.
_SHOWN_ORDER: Final = (
    LossChoice.DEFAULT,
    LossChoice.LOSS_16BIT,
    LossChoice.MEGATRON_NATIVE,
    LossChoice.MEGATRON_TE,
    LossChoice.COMPILED,
    LossChoice.FLASH,
    LossChoice.CHUNKED,
    LossChoice.LOGPROB_HEAD,
    LossChoice.FUSED,
)

_LABELS: Final = {
    LossChoice.LOSS_16BIT: "Eager cross-entropy (16-bit)",
    LossChoice.CHUNKED: "Chunked cross-entropy",
    LossChoice.FUSED: "Fused linear cross-entropy",
    LossChoice.COMPILED: "torch.compile cross-entropy",
    LossChoice.FLASH: "flash-attn cross-entropy",
    LossChoice.LOGPROB_HEAD: "prime-rl log-prob head (RL)",
    LossChoice.MEGATRON_NATIVE: "Megatron fused (native)",
    LossChoice.MEGATRON_TE: "Megatron fused (TE)",
}

# Each switch's tooltip in the input table says what its loss keeps; Megatron's one input has
# three values, said here one by one (read from source: core.training.activations._megatron_loss).
_TIPS: Final = {
    LossChoice.MEGATRON_NATIVE: (
        "Megatron-Core's --cross-entropy-loss-fusion with its native implementation: the unfused loss's steps "
        "compiled with torch.compile. The forward keeps what the unfused loss keeps (one float32 copy of the "
        "logits shard, turned into the softmax in place); the backward writes its gradient into a new float32 "
        "buffer beside it before copying it back: one float32 logits shard more while it runs."
    ),
    LossChoice.MEGATRON_TE: (
        "Megatron-Core's --cross-entropy-loss-fusion with Transformer Engine's implementation (te, what NVIDIA's "
        "performance scripts set): a Triton kernel writes the gradient into the 16-bit logits in the forward, "
        "kept through the backward: no float32 copy of the logits at all."
    ),
}

ROW_TOOLTIP: Final = (
    "Which code computes the loss. What it keeps of the logits (micro-batch × sequence × vocabulary values, "
    "often the largest tensor of the step) is the loss's memory. One at a time: the plan file and the command "
    "line keep a switch for each (--fused-loss, --chunked-loss, --compiled-loss, --flash-loss, "
    "--megatron-ce-fusion, --loss-16bit, --logprob-head)."
)


@dataclass(frozen=True)
class LossOption:
    """One entry of the Loss list: its choice, the words on it and what it keeps, in words."""

    choice: LossChoice
    label: str
    tooltip: str


def with_loss(plan: Plan, choice: LossChoice) -> Plan:
    """``plan`` with exactly ``choice``'s switch on and the other loss switches off."""
    changes = dict(_OFF)
    if choice is not LossChoice.DEFAULT:
        path, value = _SETS[choice]
        changes[path] = value
    if all(plan.input_value(path) == value for path, value in changes.items()):
        return plan
    return plan.with_changes(**changes)


def loss_options(plan: Plan) -> tuple[LossOption, ...]:
    """The choices that make sense for ``plan``: the default, and each switch whose input
    matters once no other loss is chosen (Megatron's fusion on the Megatron stack only, the
    16-bit loss only without autocast, none under Unsloth's or LitGPT's own loss but the
    fused one)."""
    base = with_loss(plan, LossChoice.DEFAULT)
    return tuple(
        LossOption(choice, _label(base, choice), _tooltip(base, choice))
        for choice in _SHOWN_ORDER
        if _listed(base, choice)
    )


def loss_choice(plan: Plan) -> LossChoice:
    """The loss the estimate counts: the first switch on, in loss_memory's order, of those
    :func:`loss_options` lists; the default when none is."""
    chosen = _chosen(plan)
    return chosen[0] if chosen else LossChoice.DEFAULT


def loss_conflicts(plan: Plan) -> tuple[LossChoice, ...]:
    """The other listed switches ``plan`` also turns on (a file or the command line can):
    the estimate ignores them, as :func:`loss_choice`'s loss replaces them."""
    return _chosen(plan)[1:]


def loss_label(plan: Plan, choice: LossChoice) -> str:
    """The words for ``choice`` on ``plan`` (the default's name the loss the plan then runs)."""
    return _label(with_loss(plan, LossChoice.DEFAULT), choice)


def _chosen(plan: Plan) -> tuple[LossChoice, ...]:
    if _READ_SWITCHES(plan) == _OFF_VALUES:
        return ()
    base = with_loss(plan, LossChoice.DEFAULT)
    return tuple(
        choice for choice in _SETS if plan.input_value(_SETS[choice][0]) == _SETS[choice][1] and _listed(base, choice)
    )


def _listed(base: Plan, choice: LossChoice) -> bool:
    return choice is LossChoice.DEFAULT or input_at(_SETS[choice][0]).matters(base)


def _label(base: Plan, choice: LossChoice) -> str:
    if choice is not LossChoice.DEFAULT:
        return _LABELS[choice]
    if base.unsloth:
        return "Unsloth's own (fused, chunked)"
    if base.litgpt:
        return "LitGPT's own (chunked, 16-bit)"
    if base.stack is Stack.MEGATRON:
        return "Megatron unfused (float32)"
    return "Eager cross-entropy (float32)"


def _tooltip(base: Plan, choice: LossChoice) -> str:
    if choice in _TIPS:
        return _TIPS[choice]
    if choice is not LossChoice.DEFAULT:
        return input_at(_SETS[choice][0]).tooltip
    if base.unsloth:
        return "Unsloth's FastLanguageModel computes the loss. " + input_at("unsloth").tooltip
    if base.litgpt:
        return "LitGPT's fine-tuning script computes the loss. " + input_at("litgpt").tooltip
    if base.stack is Stack.MEGATRON:
        return (
            "Megatron-Core's vocabulary-parallel cross-entropy, unfused (no --cross-entropy-loss-fusion): it keeps "
            "one float32 copy of the logits shard, turned into the softmax in place."
        )
    return (
        "The loss as transformers' models compute it (the HF Trainer, torchtune's and torchtitan's eager loss): "
        "the forward keeps the logits, their float32 upcast and the float32 log-softmax; the backward holds "
        "the log-softmax, the gradient flowing into it and the logits' gradient: three float32 copies of the "
        "logits. transformers before 4.49 also copy the float32 logits shifted by one token (the "
        '"transformers" setting).'
    )


# ---- the loss group under the lesson's accounting --------------------------------------------------------
# What the loss and the loop keep of the forward's outputs is counted in the detailed accounting's activations
# (core.training.activations.loss_memory, kv_cache_terms); the lesson's activations are the typed allowance, so
# under Lesson accounting none of these inputs moves a figure (tests/core/test_losses.py walks every value). The
# transformers release is in the group for its loss only: on a mixture of experts it also decides what an
# adapter reaches, which the lesson's trainable count reads (Plan.release_moves_adapters), and whether a
# bitsandbytes base's experts are dequantised each step, which the step's time reads (Plan.release_moves_bnb_experts;
# the lesson's memory, P × the base's bytes, does not).
LOSS_GROUP: Final = ("loss", *LOSS_INPUTS, "loop_keeps_output", "training_kv_cache", "training_transformers")
LESSON_IGNORES_REASON: Final = (
    "Counted by Detailed accounting only: the Lesson's activations are the allowance you type, so the loss and "
    "what the loop keeps of the forward's outputs change none of its figures."
)


def lesson_ignores(plan: Plan, path: str) -> bool:
    """Whether the input at ``path`` (one of :data:`LOSS_GROUP`) changes no figure of ``plan`` because the plan
    is under Lesson accounting: the window greys its row with :data:`LESSON_IGNORES_REASON`."""
    if plan.accounting is not Accounting.LESSON or path not in LOSS_GROUP:
        return False
    return path != "training_transformers" or not (plan.release_moves_adapters or plan.release_moves_bnb_experts)
