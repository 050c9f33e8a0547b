"""Method: full fine-tuning, LoRA, DoRA, QLoRA or frozen layers, with precision and kernels."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QGridLayout, QWidget

from core.inputs import input_at
from core.model import LORA_TARGETS
from core.plan import Plan
from gui.controller import PlanController
from gui.forms.base import PlanForm

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
        spec = input_at("lora.targets")
        self.setAccessibleName(spec.name)
        self.setToolTip(spec.tooltip)
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
        self.method = self.add_input("method")
        self.rank = self.add_input("lora.rank")
        self.alpha = self.add_input("lora.alpha")
        self.targets = TargetsField()
        self.form.addRow(input_at("lora.targets").label + ":", self.targets)
        for name, box in self.targets.boxes.items():
            self.bind(f"lora.targets.{name}", f"LoRA target {name}", box, _target_setter(name), row=False)
        self.quant = self.add_input("quant")
        self.double_quant = self.add_input("double_quant")
        self.frozen = self.add_input("frozen_layers")
        self.preset = self.add_input("preset")
        self.weight_dtype = self.add_input("weight_dtype")
        self.base_dtype = self.add_input("base_dtype")
        self.adapter_dtype = self.add_input("adapter_dtype")
        self.autocast = self.add_input("autocast")
        self.optimizer = self.add_input("optimizer")
        self.optimizer_impl = self.add_input("optimizer_impl")
        self.attention = self.add_input("attention")
        self.checkpointing = self.add_input("checkpointing")
        self.checkpoint_policy = self.add_input("checkpoint_policy")
        self.checkpoint_every = self.add_input("checkpoint_every")
        self.chunked = self.add_input("chunked_loss")
        self.stack = self.add_input("stack")
        self.float8 = self.add_input("float8")
        self.fused_loss = self.add_input("fused_loss")
        self.compiled_loss = self.add_input("compiled_loss")
        self.flash_loss = self.add_input("flash_loss")
        self.megatron_ce_fusion = self.add_input("megatron_ce_fusion")
        self.moe_grouped_gemm = self.add_input("moe_grouped_gemm")
        self.dropout = self.add_input("lora.dropout")
        self.bnb_legacy = self.add_input("bnb_legacy")
        self.kbit_upcast = self.add_input("kbit_upcast")
        self.litgpt = self.add_input("litgpt")
        self.unsloth = self.add_input("unsloth")
        self.loop_keeps_output = self.add_input("loop_keeps_output")
        self.training_kv_cache = self.add_input("training_kv_cache")
        self.loss_16bit = self.add_input("loss_16bit")
        self.experts_loop = self.add_input("experts_loop")
        self.optimizer_in_backward = self.add_input("optimizer_in_backward")
        self.activation_offload = self.add_input("activation_offload")
        self.grad_clip = self.add_input("grad_clip")

    def shown_key(self, plan: Plan) -> tuple[object, ...]:
        model = plan.model
        return (*super().shown_key(plan), model.num_layers, model.gated_mlp, plan.lora.targets)

    def show_plan(self, plan: Plan) -> None:
        if self.frozen.maximum() != plan.model.num_layers:  # at most the model's blocks
            self.frozen.setMaximum(plan.model.num_layers)
        self.show_inputs(plan)
        for name, box in self.targets.boxes.items():
            box.setChecked(name in plan.lora.targets)
            box.setEnabled(name != "gate_proj" or plan.model.gated_mlp)
        self.set_widget_row_visible(self.targets, input_at("lora.targets").matters(plan))
