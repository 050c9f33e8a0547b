"""Method: full fine-tuning, LoRA, DoRA, QLoRA, IA3, LitGPT's adapters, PEFT's prompt tuning, P-tuning, prefix
tuning, LN tuning, LoHa, LoKr, VeRA, OFT, AdaLoRA, MiSS, trainable tokens, FourierFT, RoAd, VB-LoRA, RandLoRA,
SHiRA and BOFT, or frozen layers, with precision and kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QCheckBox, QGridLayout, QLabel, QWidget

from core.inputs import OPTIMIZER_TOOLTIPS, input_at
from core.losses import (
    LESSON_IGNORES_REASON,
    LOSS_INPUTS,
    ROW_TOOLTIP,
    LossChoice,
    LossOption,
    lesson_ignores,
    loss_choice,
    loss_conflicts,
    loss_options,
)
from core.losses import with_loss as _with_loss
from core.model import ACCEPTED_TARGETS, ALL_LINEAR, HEAD_TARGET, LORA_TARGETS, MIXER_TARGETS, toggled_targets
from core.optimizer_stacks import OptimizerStack, optimizer_refusal, optimizer_stack
from core.plan import Method, Optimizer, Plan, ia3_feedforward_within
from gui import colours
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import ChoiceField, describe

TOOLTIP = Qt.ItemDataRole.ToolTipRole
TARGET_TIPS = {
    "q_proj": "query projection",
    "k_proj": "key projection",
    "v_proj": "value projection",
    "o_proj": "attention output projection",
    "gate_proj": "MLP gate projection (gated MLPs only)",
    "up_proj": "MLP up projection",
    "down_proj": "MLP down projection",
    "in_proj": "Mamba-2 mixer's input projection (hybrid models only)",
    "out_proj": "Mamba-2 mixer's output projection (hybrid models only)",
    HEAD_TARGET: "output head, hidden to vocabulary (LoRA and DoRA; all-linear leaves it out, as PEFT does)",
}
ALL_LINEAR_TIP = (
    "PEFT's all-linear: every linear layer but the output head. On a mixture of experts that is also the router "
    "(and Qwen2-MoE's shared-expert gate) where the transformers release builds it as a linear layer, which the "
    "seven names alone do not reach; the exports write each tool's own all-linear."
)


def _target_setter(name: str) -> Callable[[Plan, bool], Plan]:
    return lambda plan, on: _with_target(plan, name, on)


def _with_target(plan: Plan, target: str, on: bool) -> Plan:
    chosen = toggled_targets(plan.lora.targets, target, on)
    if plan.method is Method.IA3:  # a target left keeps no feedforward scaling (PEFT: a subset)
        return plan.with_lora(targets=chosen, ia3_feedforward=ia3_feedforward_within(plan.lora, chosen))
    return plan.with_lora(targets=chosen)


def _feedforward_setter(name: str) -> Callable[[Plan, bool], Plan]:
    return lambda plan, on: _with_feedforward(plan, name, on)


def _with_feedforward(plan: Plan, target: str, on: bool) -> Plan:
    """IA3: scale ``target``'s input (on) or its output (off)."""
    chosen = set(plan.lora.ia3_feedforward) - {target} | ({target} if on else set())
    return plan.with_lora(ia3_feedforward=tuple(t for t in LORA_TARGETS if t in chosen))


class TargetsField(QWidget):
    """One checkbox per LoRA target module (or, for IA3's feedforward modules, per target)."""

    def __init__(self, parent: QWidget | None = None, path: str = "lora.targets") -> None:
        super().__init__(parent)
        spec = input_at(path)
        self.setAccessibleName(spec.name)
        self.setToolTip(spec.tooltip)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(2)
        self.boxes: dict[str, QCheckBox] = {}
        # The output head is a LoRA / DoRA target only (IA3 on it is refused: core.plan), never scaled as feedforward.
        for index, name in enumerate(ACCEPTED_TARGETS if path == "lora.targets" else LORA_TARGETS):
            box = QCheckBox(name.removesuffix("_proj"))
            if name == ALL_LINEAR:
                box.setAccessibleName(f"LoRA target {name}")
                box.setToolTip(ALL_LINEAR_TIP)
            elif path == "lora.targets":
                box.setAccessibleName(f"LoRA target {name}")
                box.setToolTip(f"Put an adapter on {name}: the {TARGET_TIPS[name]}.")
            else:
                box.setAccessibleName(f"IA3 feedforward {name}")
                box.setToolTip(f"IA3 scales the input of {name} (the {TARGET_TIPS[name]}), not its output.")
            if name == HEAD_TARGET:  # a row of its own, across the columns: it widens none of them
                grid.addWidget(box, 4, 0, 1, 4)
            elif name == ALL_LINEAR:  # likewise, under the names it covers
                grid.addWidget(box, 3, 0, 1, 4)
            elif name in MIXER_TARGETS:  # a hybrid's mixer (shown for one only: show_plan), a row under the rest
                grid.addWidget(box, 2, MIXER_TARGETS.index(name))
            else:
                grid.addWidget(box, index // 4, index % 4)
            self.boxes[name] = box


# The Method form's rows of core.losses.LOSS_GROUP (the loss switches themselves are the Loss row's entries).
LOSS_GROUP_ROWS: Final = ("loss", "training_transformers", "loop_keeps_output", "training_kv_cache")


class LossField(ChoiceField):
    """The one "Loss" list: the loss implementations that make sense for the plan
    (core.losses.loss_options), each entry's tooltip saying what it keeps."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Loss implementation", (), ROW_TOOLTIP, parent)
        self.options: tuple[LossOption, ...] = ()
        # The entry shown chosen again is an edit too: it turns off the other losses a plan file
        # turned on (a changed entry comes through currentIndexChanged as well: the second edit
        # finds the plan already made and adds nothing to undo).
        self.activated.connect(lambda index: self.edited.emit(self.itemData(index)))

    def show_options(self, options: tuple[LossOption, ...], choice: LossChoice) -> None:
        """List ``options`` (rebuilt only when they changed) with ``choice`` current; no signal."""
        if options != self.options:
            with QSignalBlocker(self):
                self.clear()
                for index, option in enumerate(options):
                    self.addItem(option.label, option.choice.value)
                    self.setItemData(index, option.tooltip, Qt.ItemDataRole.ToolTipRole)
            self.options = options
        self.show_value(choice)
        current = next(option for option in options if option.choice is choice)
        tip = f"{ROW_TOOLTIP}\n\nNow: {current.label}. {current.tooltip}"
        if self.toolTip() != tip:
            describe(self, "Loss implementation", tip)


def _set_loss(plan: Plan, value: object) -> Plan:
    """The one loss chosen, every other loss switch off: one edit."""
    return _with_loss(plan, LossChoice(str(value)))


class MethodForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Method", controller, parent)
        self.method = self.add_input("method")
        self.rank = self.add_input("lora.rank")
        self.alpha = self.add_input("lora.alpha")
        self.targets = TargetsField()
        self.form.addRow(input_at("lora.targets").label + ":", self.targets)
        for name, box in self.targets.boxes.items():
            self.bind(f"lora.targets.{name}", f"LoRA target {name}", box, _target_setter(name), row=False)
        self.feedforward = TargetsField(path="lora.ia3_feedforward")
        self.form.addRow(input_at("lora.ia3_feedforward").label + ":", self.feedforward)
        for name, box in self.feedforward.boxes.items():
            setter = _feedforward_setter(name)
            self.bind(f"lora.ia3_feedforward.{name}", f"IA3 feedforward {name}", box, setter, row=False)
        # LitGPT's Adapter / Adapter v2, and the virtual tokens of PEFT's prompt learning
        self.adapter_prompt_length = self.add_input("lora.adapter_prompt_length")
        self.adapter_start_layer = self.add_input("lora.adapter_start_layer")
        self.adapter_quantised = self.add_input("lora.adapter_quantised")
        self.virtual_tokens = self.add_input("lora.virtual_tokens")
        self.lokr_factor = self.add_input("lora.lokr_factor")  # PEFT LoKr's decompose_factor
        self.oft_block_size = self.add_input("lora.oft_block_size")  # PEFT OFT's oft_block_size, BOFT's boft_block_size
        self.road_variant = self.add_input("lora.road_variant")  # PEFT RoAd's variant
        self.modules_to_save = self.add_input("lora.modules_to_save")  # PEFT modules_to_save (branch h60mts)
        self.trainable_tokens = self.add_input("lora.trainable_tokens")  # PEFT trainable_token_indices
        self.quant = self.add_input("quant")
        self.double_quant = self.add_input("double_quant")
        self.bnb_skip_modules = self.add_input("bnb_skip_modules")
        self.frozen = self.add_input("frozen_layers")
        self.preset = self.add_input("preset")
        self.weight_dtype = self.add_input("weight_dtype")
        self.base_dtype = self.add_input("base_dtype")
        self.adapter_dtype = self.add_input("adapter_dtype")
        self.autocast = self.add_input("autocast")
        self.optimizer = self.add_input("optimizer")
        self._offered: OptimizerStack | None = None
        self._show_optimizers(OptimizerStack.PYTORCH)
        self.optimizer_impl = self.add_input("optimizer_impl")
        self.weight_decay = self.add_input("weight_decay")
        self.galore_rank = self.add_input("galore_rank")  # shown with GaLore only (its input's matters)
        self.galore_update_proj_gap = self.add_input("galore_update_proj_gap")
        self.attention = self.add_input("attention")
        self.checkpointing = self.add_input("checkpointing")
        self.checkpoint_policy = self.add_input("checkpoint_policy")
        self.checkpoint_every = self.add_input("checkpoint_every")
        self.stack = self.add_input("stack")
        self.float8 = self.add_input("float8")
        self._add_loss()  # after the software: its entries depend on it (Megatron's own)
        self.training_transformers = self.add_input("training_transformers")
        self.loop_keeps_output = self.add_input("loop_keeps_output")
        self.training_kv_cache = self.add_input("training_kv_cache")
        self.moe_grouped_gemm = self.add_input("moe_grouped_gemm")
        self.dropout = self.add_input("lora.dropout")
        self.bnb_legacy = self.add_input("bnb_legacy")
        self.kbit_upcast = self.add_input("kbit_upcast")
        self.litgpt = self.add_input("litgpt")
        self.unsloth = self.add_input("unsloth")
        self.experts_loop = self.add_input("experts_loop")
        self.moe_layer = self.add_input("moe_layer")
        self.mamba_kernels = self.add_input("mamba_kernels")
        self.optimizer_in_backward = self.add_input("optimizer_in_backward")
        self.activation_offload = self.add_input("activation_offload")
        self.grad_clip = self.add_input("grad_clip")

    def _add_loss(self) -> None:
        """The Loss row (one choice for the plan's loss switches) and, under it, the switches a
        plan file or the command line turned on besides the one counted."""
        self.loss = LossField()
        self.bind("loss", "Loss", self.loss, _set_loss)
        self.loss_conflict = QLabel()
        self.loss_conflict.setObjectName("lossConflict")
        self.loss_conflict.setAccessibleName("Other losses turned on")
        self.loss_conflict.setTextFormat(Qt.TextFormat.PlainText)
        self.loss_conflict.setWordWrap(True)
        self.loss_conflict.setStyleSheet(f"color: {colours.PROBLEM};")  # a note, quieter than the banner's
        self.form.addRow("", self.loss_conflict)
        self.form.setRowVisible(self.loss_conflict, False)

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        model = plan.model
        # The Loss row: its entries and the switches on (the rules read more than the form's inputs).
        losses = (loss_options(plan), tuple(plan.input_value(path) for path in LOSS_INPUTS))
        lora, par = plan.lora, plan.parallel
        # the optimizers offered: the plan's stack, strategy and offload (core.optimizer_stacks)
        built = optimizer_stack(plan.stack, par.strategy, par.offload)
        return (
            *super().shown_key(plan),
            model.num_layers,
            model.gated_mlp,
            lora.targets,
            lora.ia3_feedforward,
            losses,
            built,
            self._lesson_ignored(plan),
        )

    def show_plan(self, plan: Plan) -> None:
        if self.frozen.maximum() != plan.model.num_layers:  # at most the model's blocks
            self.frozen.setMaximum(plan.model.num_layers)
        self.show_inputs(plan)
        for name, box in self.targets.boxes.items():
            box.setChecked(name in plan.lora.targets)
            usable = name != "gate_proj" or plan.model.gated_mlp
            if name == ALL_LINEAR:  # a hybrid's and a latent-attention model's targets are named (core.plan.lora_on)
                usable = not (plan.model.recurrent_mixer or plan.model.latent_attention)
            box.setEnabled(usable and (name != HEAD_TARGET or plan.lora_adapters))
            if name in MIXER_TARGETS:
                box.setVisible(bool(plan.model.recurrent_mixer))  # Mamba-2 or Gated DeltaNet layers
        self.set_widget_row_visible(self.targets, input_at("lora.targets").matters(plan))
        for name, box in self.feedforward.boxes.items():
            box.setChecked(name in plan.lora.ia3_feedforward)
            box.setEnabled(name in plan.lora.targets)
        self.set_widget_row_visible(self.feedforward, input_at("lora.ia3_feedforward").matters(plan))
        self._show_loss(plan)
        self._grey_lesson_ignored(plan)
        self._show_optimizers(optimizer_stack(plan.stack, plan.parallel.strategy, plan.parallel.offload))

    def _lesson_ignored(self, plan: Plan) -> tuple[bool, ...]:
        """Which rows of the loss group the plan's accounting ignores (core.losses.lesson_ignores)."""
        return tuple(lesson_ignores(plan, key) for key in LOSS_GROUP_ROWS)

    def _grey_lesson_ignored(self, plan: Plan) -> None:
        """The loss group's rows under Lesson accounting: greyed, the reason after each one's tooltip (they
        stay in place, so switching the accounting moves no row)."""
        for key, ignored in zip(LOSS_GROUP_ROWS, self._lesson_ignored(plan), strict=True):
            field = self.fields[key]
            if field.property("plainToolTip") is None:  # a check box's tooltip, set without describe()
                field.setProperty("plainToolTip", field.toolTip())
            tip = str(field.property("plainToolTip") or "")
            field.setEnabled(not ignored)
            field.setToolTip(f"{tip}\n\n{LESSON_IGNORES_REASON}" if ignored else tip)
            label = self.labels.get(key)
            if label is not None:
                label.setEnabled(not ignored)
                label.setToolTip(LESSON_IGNORES_REASON if ignored else "")
        self.loss_conflict.setEnabled(not lesson_ignores(plan, "loss"))

    def _show_optimizers(self, stack: OptimizerStack) -> None:
        """Each Optimizer entry's tooltip (its state per parameter and source); an entry the plan's stack does not
        build is greyed, its tooltip saying the stack's rule and what it builds (core.optimizer_stacks)."""
        if stack is self._offered:
            return
        self._offered = stack
        entries = self.optimizer.model()
        assert isinstance(entries, QStandardItemModel)  # QComboBox's own model
        for index in range(self.optimizer.count()):
            optimizer = Optimizer(str(self.optimizer.itemData(index)))
            refusal = optimizer_refusal(optimizer, stack)
            tip = OPTIMIZER_TOOLTIPS.get(optimizer, "")
            self.optimizer.setItemData(index, f"{tip}\n\nNot offered: {refusal}" if refusal else tip, TOOLTIP)
            item = entries.item(index)
            if item is not None:
                item.setEnabled(not refusal)

    def _show_loss(self, plan: Plan) -> None:
        options = loss_options(plan)
        self.loss.show_options(options, loss_choice(plan))
        labels = {option.choice: option.label for option in options}
        others = ", ".join(labels[choice] for choice in loss_conflicts(plan))
        text = f"⚠ Also on, and ignored: {others}. Choosing an entry, this one too, turns the others off."
        text = text if others else ""
        if text != self.loss_conflict.text():
            self.loss_conflict.setText(text)
        self.set_widget_row_visible(self.loss_conflict, bool(text))
