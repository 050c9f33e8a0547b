"""Method: full fine-tuning, LoRA, DoRA, QLoRA or frozen layers, with precision and kernels."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QGridLayout, QWidget

from core.dtypes import AUTOCAST_LABELS, DTYPE_LABELS, Autocast, Dtype, Quant
from core.model import LORA_TARGETS
from core.plan import (
    ATTENTION_LABELS,
    CHECKPOINT_POLICY_LABELS,
    MAX_CHECKPOINT_EVERY,
    MAX_RANK,
    METHOD_LABELS,
    OPTIMIZER_IMPL_LABELS,
    OPTIMIZER_LABELS,
    PRESET_LABELS,
    QUANT_LABELS,
    Attention,
    CheckpointPolicy,
    Method,
    Optimizer,
    OptimizerImpl,
    Plan,
    Preset,
)
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, FloatField, IntField

# The optimizers torch.optim implements three ways (fused, foreach, for-loop).
TORCH_OPTIMIZERS = (Optimizer.ADAMW, Optimizer.ADAM, Optimizer.SGD, Optimizer.SGD_MOMENTUM)

TARGET_TIPS = {
    "q_proj": "query projection",
    "k_proj": "key projection",
    "v_proj": "value projection",
    "o_proj": "attention output projection",
    "gate_proj": "MLP gate projection (gated MLPs only)",
    "up_proj": "MLP up projection",
    "down_proj": "MLP down projection",
}


def _target_setter(name: str) -> Callable[[Plan, bool], Plan]:
    return lambda plan, on: _with_target(plan, name, on)


def _with_target(plan: Plan, target: str, on: bool) -> Plan:
    targets = set(plan.lora.targets)
    if on:
        targets.add(target)
    else:
        targets.discard(target)
    return plan.with_lora(targets=tuple(t for t in LORA_TARGETS if t in targets))


class TargetsField(QWidget):
    """One checkbox per LoRA target module."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("LoRA target modules")
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(2)
        self.boxes: dict[str, QCheckBox] = {}
        for index, name in enumerate(LORA_TARGETS):
            box = QCheckBox(name.removesuffix("_proj"))
            box.setAccessibleName(f"LoRA target {name}")
            box.setToolTip(f"Put an adapter on {name}: the {TARGET_TIPS[name]}.")
            grid.addWidget(box, index // 4, index % 4)
            self.boxes[name] = box


class MethodForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Method", controller, parent)
        self.method = ChoiceField(
            "Method",
            [(label, m.value) for m, label in METHOD_LABELS.items()],
            "Full: every weight trains. LoRA: small adapters train, the base is frozen. "
            "QLoRA: LoRA on a 4- or 8-bit base. Frozen layers: the bottom blocks get no gradients.",
        )
        self.bind("method.kind", "Method", self.method, lambda p, v: p.with_method(Method(v)))
        self.rank = IntField(
            "LoRA rank", 1, MAX_RANK, "", "Rank r of each adapter: r × (in + out) parameters per matrix."
        )
        self.bind("method.lora.rank", "Rank r", self.rank, lambda p, v: p.with_lora(rank=v))
        self.alpha = FloatField(
            "LoRA alpha", 0.01, 1e6, "", "Adapter scaling α (the update is scaled by α / r); no effect on memory."
        )
        self.bind("method.lora.alpha", "Alpha α", self.alpha, lambda p, v: p.with_lora(alpha=v))
        self.targets = TargetsField()
        self.form.addRow("Targets:", self.targets)
        self._targets_label = self.form.labelForField(self.targets)
        for name, box in self.targets.boxes.items():
            self.bind(
                f"method.lora.targets.{name}",
                f"LoRA target {name}",
                box,
                _target_setter(name),
                row=False,
            )
        self.quant = ChoiceField(
            "Base quantisation",
            [(label, q.value) for q, label in QUANT_LABELS.items()],
            "How QLoRA stores the frozen base weights (bitsandbytes): 4-bit NF4/FP4 in blocks of 64, or 8-bit.",
        )
        self.bind("method.quant", "Base storage", self.quant, lambda p, v: p.with_changes(quant=Quant(v)))
        self.double_quant = QCheckBox("Double quantisation")
        self.double_quant.setAccessibleName("Double quantisation")
        self.double_quant.setToolTip(
            "Store the 4-bit block scales in 8 bits (QLoRA paper §3): ≈ 0.37 bits per weight less."
        )
        self.bind(
            "method.double_quant", "Double quantisation", self.double_quant, lambda p, v: p.with_changes(double_quant=v)
        )
        self.frozen = IntField(
            "Frozen layers",
            0,
            10_000,
            "blocks",
            "Bottom transformer blocks (and the embeddings) that get no gradients.",
        )
        self.bind("method.frozen_layers", "Frozen layers", self.frozen, lambda p, v: p.with_changes(frozen_layers=v))
        self.preset = ChoiceField(
            "Precision",
            [(label, v.value) for v, label in PRESET_LABELS.items()],
            "How the run stores and computes: Trainer(bf16=True) on a model loaded in bf16 keeps bf16 weights, "
            "float32 adapters and bf16 autocast; float32 weights + autocast is the classic mixed precision; "
            "custom sets each role.",
        )
        self.bind("method.preset", "Precision", self.preset, lambda p, v: p.with_changes(preset=Preset(v)))
        dtypes = [(label, v.value) for v, label in DTYPE_LABELS.items()]
        self.weight_dtype = ChoiceField(
            "Trained weights", dtypes, "Storage of the weights that train (and of their gradients and optimizer state)."
        )
        self.bind(
            "method.weight_dtype",
            "Trained weights",
            self.weight_dtype,
            lambda p, v: p.with_changes(weight_dtype=Dtype(v)),
        )
        self.base_dtype = ChoiceField(
            "Frozen base", dtypes, "Storage of the frozen base of LoRA, DoRA or frozen layers."
        )
        self.bind("method.base_dtype", "Frozen base", self.base_dtype, lambda p, v: p.with_changes(base_dtype=Dtype(v)))
        self.adapter_dtype = ChoiceField(
            "Adapters", dtypes, "LoRA / DoRA adapter storage: PEFT casts adapters to float32 by default."
        )
        self.bind(
            "method.adapter_dtype", "Adapters", self.adapter_dtype, lambda p, v: p.with_changes(adapter_dtype=Dtype(v))
        )
        self.autocast = ChoiceField(
            "Autocast",
            [(label, v.value) for v, label in AUTOCAST_LABELS.items()],
            "torch.autocast around the forward pass and the loss; fp16 adds a GradScaler.",
        )
        self.bind("method.autocast", "Autocast", self.autocast, lambda p, v: p.with_changes(autocast=Autocast(v)))
        self.optimizer = ChoiceField(
            "Optimizer",
            [(label, v.value) for v, label in OPTIMIZER_LABELS.items()],
            "AdamW keeps two float32 moments per trainable parameter (8 bytes); 8-bit AdamW two bytes; "
            "SGD with momentum one buffer; Adafactor factored moments.",
        )
        self.bind("method.optimizer", "Optimizer", self.optimizer, lambda p, v: p.with_changes(optimizer=Optimizer(v)))
        self.optimizer_impl = ChoiceField(
            "Optimizer implementation",
            [(label, v.value) for v, label in OPTIMIZER_IMPL_LABELS.items()],
            "fused (HF Trainer's adamw_torch_fused) updates in place; foreach (torch.optim's default on CUDA) "
            "makes one more copy of the Adam second moment during the step; for-loop works one tensor at a time.",
        )
        self.bind(
            "method.optimizer_impl",
            "Implementation",
            self.optimizer_impl,
            lambda p, v: p.with_changes(optimizer_impl=OptimizerImpl(v)),
        )
        self.attention = ChoiceField(
            "Attention kernel",
            [(label, v.value) for v, label in ATTENTION_LABELS.items()],
            "Eager attention keeps the batch × heads × seq² score matrix for the backward pass; fused kernels "
            "(SDPA, FlashAttention-2) do not.",
        )
        self.bind("method.attention", "Attention", self.attention, lambda p, v: p.with_changes(attention=Attention(v)))
        self.checkpointing = QCheckBox("Gradient checkpointing")
        self.checkpointing.setAccessibleName("Gradient checkpointing")
        self.checkpointing.setToolTip(
            "Keep only each block's input and recompute the block in the backward pass: far fewer activations, "
            "about a third more compute."
        )
        self.bind(
            "method.checkpointing", "Checkpointing", self.checkpointing, lambda p, v: p.with_changes(checkpointing=v)
        )
        self.checkpoint_policy = ChoiceField(
            "Checkpointing policy",
            [(label, v.value) for v, label in CHECKPOINT_POLICY_LABELS.items()],
            "Full: every block keeps only its input (Hugging Face gradient_checkpointing, torchtitan mode full). "
            "Selective per op: each block also keeps every other matmul output and the attention output "
            "(torchtitan selective_ac_option op). Every Nth block: those blocks are checkpointed, the rest keep "
            "everything (selective_ac_option N).",
        )
        self.bind(
            "method.checkpoint_policy",
            "Policy",
            self.checkpoint_policy,
            lambda p, v: p.with_changes(checkpoint_policy=CheckpointPolicy(v)),
        )
        self.checkpoint_every = IntField(
            "Checkpoint every",
            1,
            MAX_CHECKPOINT_EVERY,
            "blocks",
            "N: the blocks whose number N divides are checkpointed, the others keep their activations.",
        )
        self.bind(
            "method.checkpoint_every",
            "Checkpoint every",
            self.checkpoint_every,
            lambda p, v: p.with_changes(checkpoint_every=v),
        )
        self.chunked = QCheckBox("Chunked cross-entropy loss")
        self.chunked.setAccessibleName("Chunked cross-entropy loss")
        self.chunked.setToolTip("Compute the loss in chunks so the full float32 logits never exist at once.")
        self.bind("method.chunked_loss", "Chunked loss", self.chunked, lambda p, v: p.with_changes(chunked_loss=v))

    def show_plan(self, plan: Plan) -> None:
        self.method.show_value(plan.method.value)
        self.rank.show_value(plan.lora.rank)
        self.alpha.show_value(plan.lora.alpha)
        for name, box in self.targets.boxes.items():
            box.setChecked(name in plan.lora.targets)
            box.setEnabled(name != "gate_proj" or plan.model.gated_mlp)
        self.quant.show_value(plan.quant.value)
        self.double_quant.setChecked(plan.double_quant)
        if self.frozen.maximum() != plan.model.num_layers:
            self.frozen.setMaximum(plan.model.num_layers)
        self.frozen.show_value(plan.frozen_layers)
        self.preset.show_value(plan.preset.value)
        self.weight_dtype.show_value(plan.weight_dtype.value)
        self.base_dtype.show_value(plan.base_dtype.value)
        self.adapter_dtype.show_value(plan.adapter_dtype.value)
        self.autocast.show_value(plan.autocast.value)
        self.optimizer.show_value(plan.optimizer.value)
        self.optimizer_impl.show_value(plan.optimizer_impl.value)
        self.attention.show_value(plan.attention.value)
        self.checkpointing.setChecked(plan.checkpointing)
        self.checkpoint_policy.show_value(plan.checkpoint_policy.value)
        self.checkpoint_every.show_value(plan.checkpoint_every)
        self.chunked.setChecked(plan.chunked_loss)
        adapters = plan.adapter_based
        for key in ("method.lora.rank", "method.lora.alpha"):
            self.set_row_visible(key, adapters)
        self.set_widget_row_visible(self.targets, adapters)
        qlora = plan.method is Method.QLORA
        self.set_row_visible("method.quant", qlora)
        self.set_row_visible("method.double_quant", qlora and plan.quant is not Quant.INT8)
        self.set_row_visible("method.frozen_layers", plan.method is Method.FROZEN)
        custom = plan.preset is Preset.CUSTOM
        self.set_row_visible("method.weight_dtype", custom and plan.method in (Method.FULL, Method.FROZEN))
        self.set_row_visible("method.base_dtype", custom and plan.method in (Method.LORA, Method.DORA, Method.FROZEN))
        self.set_row_visible("method.adapter_dtype", custom and adapters)
        self.set_row_visible("method.autocast", custom)
        self.set_row_visible("method.optimizer_impl", plan.optimizer in TORCH_OPTIMIZERS)
        self.set_row_visible("method.checkpoint_policy", plan.checkpointing)
        layer = plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.LAYER
        self.set_row_visible("method.checkpoint_every", layer)
