"""Hardware: the card (or a custom one), how many, sharding, utilisation and price."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from core.catalogue import load_gpus
from core.estimate import Estimate
from core.plan import MAX_GPUS, SHARDING_LABELS, Plan, Sharding
from core.units import MiB
from gui.controller import PlanController
from gui.forms.base import PlanForm
from gui.forms.fields import CatalogueField, ChoiceField, FloatField, IntField

CUSTOM = "custom"


class HardwareForm(PlanForm):
    def __init__(self, controller: PlanController, parent: QWidget | None = None) -> None:
        super().__init__("Hardware", controller, parent)
        entries = [(gpu.name, gpu.id) for gpu in load_gpus()] + [("Custom GPU (type memory and speed)", CUSTOM)]
        self.gpu = CatalogueField(
            "GPU", entries, "The card, with the memory its driver reports (not the marketing figure)."
        )
        self.bind("hardware.gpu", "GPU", self.gpu, lambda p, v: p.with_hardware(gpu=v))
        self.card = QLabel()
        self.card.setAccessibleName("GPU summary")
        self.card.setWordWrap(True)
        self.card.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.form.addRow("", self.card)
        self.custom_memory = FloatField(
            "Custom GPU memory", 0.01, 1e6, "GB", "Memory of the custom card in decimal GB, as its driver reports it."
        )
        self.bind(
            "hardware.custom_memory_gb", "Memory", self.custom_memory, lambda p, v: p.with_hardware(custom_memory_gb=v)
        )
        self.custom_tflops = FloatField(
            "Custom GPU speed", 0.01, 1e7, "TFLOP/s", "Dense 16-bit peak of the custom card (no sparsity)."
        )
        self.bind(
            "hardware.custom_tflops", "Peak speed", self.custom_tflops, lambda p, v: p.with_hardware(custom_tflops=v)
        )
        self.count = IntField("GPU count", 1, MAX_GPUS, "", "Data-parallel GPUs; memory is shown per GPU.")
        self.bind("hardware.gpu_count", "GPU count", self.count, lambda p, v: p.with_hardware(gpu_count=v))
        self.sharding = ChoiceField(
            "Sharding",
            [(label, s.value) for s, label in SHARDING_LABELS.items()],
            "What is split across the GPUs (DeepSpeed ZeRO stages, PyTorch FSDP): optimizer state, then gradients, "
            "then the weights themselves.",
        )
        self.bind("hardware.sharding", "Sharding", self.sharding, lambda p, v: p.with_hardware(sharding=Sharding(v)))
        self.utilisation = FloatField(
            "Utilisation",
            0.001,
            1.0,
            "%",
            "Model FLOP utilisation: the share of the card's peak a real run achieves (30-50 % for well-tuned code).",
            decimals=1,
            step=5,
            scale=100,
        )
        self.bind("hardware.utilisation", "Utilisation", self.utilisation, lambda p, v: p.with_hardware(utilisation=v))
        self.headroom = FloatField(
            "Headroom",
            0.0,
            0.9,
            "%",
            "Share of the card kept free for fragmentation and spikes; the lesson advises 10-20 %.",
            decimals=1,
            step=5,
            scale=100,
        )
        self.bind("hardware.headroom", "Headroom", self.headroom, lambda p, v: p.with_hardware(headroom=v))
        self.price = FloatField(
            "Price per GPU-hour", 0.0, 1e6, "per GPU·h", "What one GPU costs per hour, in your currency.", step=0.5
        )
        self.bind(
            "hardware.price_per_gpu_hour", "Price", self.price, lambda p, v: p.with_hardware(price_per_gpu_hour=v)
        )
        self.peak_override = FloatField(
            "Peak TFLOP/s override",
            0.0,
            1e7,
            "TFLOP/s",
            "Dense peak to use instead of the card's datasheet figure for the plan's precision; 0 uses the card's.",
            step=10,
        )
        self.peak_override.setSpecialValueText("card's datasheet")
        self.bind(
            "hardware.peak_tflops_override",
            "Peak override",
            self.peak_override,
            lambda p, v: p.with_hardware(peak_tflops_override=v),
        )

    def show_plan(self, plan: Plan) -> None:
        hw = plan.hardware
        self.gpu.show_value(hw.gpu, hw.gpu)
        self.custom_memory.show_value(hw.custom_memory_gb)
        self.custom_tflops.show_value(hw.custom_tflops)
        self.count.show_value(hw.gpu_count)
        self.sharding.show_value(hw.sharding.value)
        self.utilisation.show_value(hw.utilisation)
        self.headroom.show_value(hw.headroom)
        self.price.show_value(hw.price_per_gpu_hour)
        self.peak_override.show_value(hw.peak_tflops_override)
        custom = hw.gpu == CUSTOM
        self.set_row_visible("hardware.custom_memory_gb", custom)
        self.set_row_visible("hardware.custom_tflops", custom)

    def show_estimate(self, estimate: Estimate) -> None:
        gpu = estimate.gpu
        reported = gpu.memory_reported or f"{gpu.memory_bytes / MiB:,.0f} MiB"
        self.card.setText(f"{reported} · {estimate.compute.peak_tflops:g} TFLOP/s dense at this precision")
