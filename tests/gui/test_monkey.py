"""A seeded monkey: two thousand random edits, junk typing included, across every input.

``EDITS`` field edits (typing, junk included, then Enter, Tab, Escape or a click away;
choices; arrow keys; check boxes), mixed with undo/redo, training/inference, lesson mode,
units and the dimensions fold. After every action: no exception escaped into Qt, the
controller's plan is a valid plan whose Estimate is current, the chart's bar heights (read
back as tests/gui/test_chart.py does) are the Estimate's, and every input the user is not
typing in shows the plan. A failure names the seed, the action and the last ten actions;
``MONKEY_SEED``, ``MONKEY_EDITS`` and ``MONKEY_FULL_CHECK_EVERY`` rerun or widen it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QCheckBox, QComboBox, QLineEdit, QWidget

from core.files import planfile
from core.inputs import INPUTS
from core.losses import loss_choice
from core.plan import Method, Plan, training_refusal
from core.units import GB, GiB
from core.verdict import Mode
from gui.chart.geometry import inference_bars, training_bars
from gui.forms.fields import (
    CatalogueField,
    ChoiceField,
    CountField,
    FloatField,
    IntField,
    SettingField,
    is_marked_invalid,
)
from gui.forms.model import LATENT_DIMENSIONS
from gui.main_window import MainWindow
from tests.gui.test_chart import heights

SEED = int(os.environ.get("MONKEY_SEED", "20240611"))
# The rows only one method shows, by that method's value: reached after the walk when it missed them.
METHOD_ROWS = {"lokr": "lora.lokr_factor", "oft": "lora.oft_block_size", "road": "lora.road_variant"}
# The optimizer rows GaLore alone shows (branch h64galore): reached with full fine-tuning and GaLore picked.
GALORE_ROWS = ("galore_rank", "galore_update_proj_gap")
# The Model form's rows a latent-attention model alone shows (gui.forms.model.LATENT_DIMENSIONS, branch h55mla).
LATENT_ROWS = tuple(f"model.{name}" for name, _label, _tip in LATENT_DIMENSIONS)
# The rows Megatron-Core's gradient buffer alone shows (the Megatron stack under DDP or ZeRO-1, with accumulation):
# since the optimizer-per-stack table (core.optimizer_stacks) a walk that holds an optimizer Megatron does not build
# (bitsandbytes 8-bit, Adafactor, ...) cannot switch to that stack, and a seed's path may never get there.
MEGATRON_ROWS = ("parallel.grad_accum_fusion", "parallel.grad_reduce_in_fp32")
# The Serving form's row an image-text checkpoint on a vLLM line that skips its tower alone shows (core.inputs
# text_only_offered, inference.text_only's ``matters``; branch h76sglui: not on SGLang, transformers or older lines).
VISION_ROWS = ("inference.text_only",)
# The Serving form's row Gemma 3 on SGLang 0.4.6 on alone shows (inference.sglang_enable_multimodal's ``matters``).
SGLANG_MM_ROWS = ("inference.sglang_enable_multimodal",)
# The Serving form's row a mixture of experts under llama-server alone shows (inference.cpu_moe_layers' ``matters``).
# The host bandwidth field after it: shown once weights live in host RAM (--n-cpu-moe or fewer GPU layers).
CPU_MOE_ROWS = ("inference.cpu_moe_layers", "inference.host_bandwidth_gb_s")
# The rows a hybrid alone shows (branches h66htrain, h68gdn): its mixer's LoRA targets and the kernels switch.
HYBRID_ROWS = ("lora.targets.in_proj", "lora.targets.out_proj", "mamba_kernels")
# The Serving form's prefix-caching row, shown for a hybrid model on vLLM alone.
HYBRID_SERVING_ROWS = ("inference.prefix_caching",)
# About 40 edits per input of the one table, so that each is reached: a fixed 2,000 stopped
# reaching the frozen-layers field (shown only for that method) once the table grew to 84, and
# 30 per input missed FSDP2's float8 all-gather (shown only for FSDP with float8 linears); 40
# missed the serving link (shown only for a multi-GPU vLLM plan) once the attention kernel
# gained a fourth choice (flash1) and the seeded path changed; 45 missed it again once the serving
# form gained llama.cpp's build number (the seeded path changed once more); 50 missed FSDP2's float8
# all-gather again once the Method form gained loop_keeps_output (55 too); 60 missed the serving
# link once the vLLM version choice gained 0.29-0.34 (a choice gets turns by its entry count); 65 and 70
# missed the 16-bit cross-entropy switch (shown only for pure bf16 with no other loss code: the
# pick_precision action was added for it) and, as the path moved, FSDP2's float8 all-gather and the CP
# rotation; 80 reached every input until 2026-12-06, when modules_to_save, trainable tokens, LoRA-FA and the
# PyTorch 2.0 / 2.1-2.3 releases moved the path and it missed the CP rotation, then the MoE dispatcher; 90 reaches
# every input.
EDITS = int(os.environ.get("MONKEY_EDITS", str(90 * len(INPUTS))))
FULL_CHECK_EVERY = int(os.environ.get("MONKEY_FULL_CHECK_EVERY", "1"))

# Text a person (or a cat) might type: numbers in every spelling the fields accept, numbers
# no field accepts, words, and characters from outside ASCII.
JUNK = (
    "",
    " ",
    "-",
    "+",
    ".",
    ",",
    "e",
    "0",
    "-1",
    "1",
    "7",
    "64",
    "4096",
    "0.5",
    "99.9",
    "100",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    "-1e400",
    "1e-400",
    "1e308",
    "9" * 40,
    "2147483648",
    "4294967296",
    "20M",
    "20m",
    "1.5B",
    "1.5 B",
    "6.7e9",
    "6,700,000,000",
    "4,194,304",
    "10P",
    "1e16",
    "1e17",
    "0x10",
    "1_000",
    "1\u202f000",
    "１２",
    "½",
    "٣",
    "Ⅻ",
    "🙂",
    "ß",
    "é",
    "llama",
    "Llama 3.1 8B",
    "qwen",
    "custom",
    "H100",
    "--5",
    "5%",
    "5 %",
    "1,2,3",
    "1e",
    "e9",
)
ALPHABET = "0123456789.,-+eEkKmMbBgGtTpP %_ xyzαβ中🙂\u202f"


def junk(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(JUNK)
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14)))


def type_keys(qtbot: Any, widget: QWidget, text: str) -> None:
    """Type ``text`` key by key. QTest only knows ASCII keys (it aborts on others), so any
    other character arrives as a key event that carries just its text, as an input method sends."""
    for char in text:
        if char.isascii():
            qtbot.keyClicks(widget, char)
            continue
        for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            QApplication.sendEvent(widget, QKeyEvent(kind, 0, Qt.KeyboardModifier.NoModifier, char))


def close_popups() -> None:
    while (popup := QApplication.activePopupWidget()) is not None:
        popup.close()


@contextmanager
def captured_exceptions() -> Iterator[list[BaseException]]:
    """Every exception that reaches sys.excepthook (PySide6 sends slot exceptions there)."""
    seen: list[BaseException] = []
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        seen.append(value)

    sys.excepthook = hook
    try:
        yield seen
    finally:
        sys.excepthook = previous


# ---- invariants ----------------------------------------------------------------------
def check_plan(window: MainWindow) -> None:
    controller = window.controller
    plan = controller.plan
    assert isinstance(plan, Plan)
    assert controller.estimate.plan is plan
    # Every field still passes the core's validation, and the plan survives its file format.
    assert dataclasses.replace(plan) == plan
    assert planfile.loads(planfile.dumps(plan)) == plan
    assert math.isfinite(controller.estimate.total_bytes) and controller.estimate.total_bytes > 0
    assert all(bucket.bytes >= 0 for bucket in controller.estimate.buckets)


def chart_heights(window: MainWindow, key: str) -> list[float]:
    return heights(window.chart, key)  # read back exactly as the chart's own tests do


def check_chart(window: MainWindow) -> None:
    """The bars read back from the chart's items are the Estimate's bytes (test_chart.py's way)."""
    estimate = window.controller.estimate
    chart = window.chart
    scale = GiB if chart.unit == "GiB" else GB
    if chart.mode == "training" and training_refusal(estimate.plan) is not None:
        # A hybrid recurrent model's or Llama 4's training step is not estimated: no bars, "Not estimated"
        # (core.plan.training_refusal)
        assert chart.bars() == [] and window.verdict.badge.text().endswith("Not estimated")
        expected = []
    elif chart.mode == "training":
        expected = training_bars(estimate, window.measurement)
        if len(estimate.phases) > 1:
            for index, phase in enumerate(estimate.phases):
                assert expected[index].label == phase.name
                for bucket in phase.buckets:
                    assert chart_heights(window, bucket.key.value)[index] == pytest.approx(bucket.bytes / scale)
        peak = len(estimate.phases) if len(estimate.phases) > 1 else 0
        for bucket in estimate.buckets:
            assert chart_heights(window, bucket.key.value)[peak] == pytest.approx(bucket.bytes / scale)
        assert chart.bars()[peak].total_bytes == estimate.total_bytes
    else:
        expected = inference_bars(estimate, window.measurement)
        inf = estimate.inference
        drawn = {b.key.value: b.bytes for b in inf.buckets}  # the judged figure's parts (issue 26, item 4)
        for key in ("weights", "kv_cache", "activations", "overhead"):
            assert chart_heights(window, key)[0] == pytest.approx(drawn.get(key, 0.0) / scale)
        assert chart.bars()[0].total_bytes == inf.total_bytes == estimate.judgement(Mode.INFERENCE).total_bytes
    assert [bar.label for bar in chart.bars()] == [bar.label for bar in expected]
    judged = estimate.judgement(Mode.INFERENCE if chart.mode == "inference" else Mode.TRAINING)
    assert chart.capacity_line.value() == pytest.approx(judged.capacity_bytes / scale)  # the verdict's, per mode


def shown_text(spin: QAbstractSpinBox) -> str:
    """What a spin box shows for its value when nobody is typing in it."""
    assert isinstance(spin, (IntField, FloatField))
    if spin.specialValueText() and spin.value() == spin.minimum():
        return spin.specialValueText()
    return spin.prefix() + spin.textFromValue(spin.value()) + spin.suffix()


def check_forms(window: MainWindow) -> None:
    """Every input that is not being typed in shows the plan; bad text is not left behind."""
    plan = window.controller.plan
    expected = expected_values(window, plan)
    for key, widget in all_fields(window).items():
        if widget.hasFocus():
            continue  # being typed: bad text may stand (marked) until the user leaves the box
        want = expected[key]
        if isinstance(widget, (QAbstractSpinBox, CountField, CatalogueField)):
            assert not is_marked_invalid(widget), f"{key} is still marked after the user left it"
        if isinstance(widget, FloatField):
            assert widget.model_value() == pytest.approx(want, rel=1e-6, abs=10 ** -widget.decimals()), key
            assert widget.lineEdit().text() == shown_text(widget), key
        elif isinstance(widget, IntField):
            assert widget.value() == want, key
            assert widget.lineEdit().text() == shown_text(widget), key
        elif isinstance(widget, CatalogueField):
            index = widget.findData(want)
            shown = widget.itemText(index) if index >= 0 else (plan.model.name if key == "model" else want)
            assert widget.currentText() == shown, key
            assert widget.currentIndex() == index, key
        elif isinstance(widget, QCheckBox):
            assert widget.isChecked() == want, key
        elif isinstance(widget, SettingField):
            assert widget.text() == want, key
        else:
            assert widget.value() == want, key  # type: ignore[attr-defined]


def expected_values(window: MainWindow, plan: Plan) -> dict[str, Any]:
    m, w, h, inf = plan.model, plan.workload, plan.hardware, plan.inference
    values: dict[str, Any] = {
        "model": plan.model_id,
        "method": plan.method.value,
        "lora.rank": plan.lora.rank,
        "lora.alpha": plan.lora.alpha,
        "lora.virtual_tokens": plan.lora.virtual_tokens,  # prompt tuning / P-tuning (branch h41soft)
        "lora.lokr_factor": plan.lora.lokr_factor,  # LoKr decompose_factor (branch h53lyco)
        "lora.oft_block_size": plan.lora.oft_block_size,  # OFT oft_block_size (branch h54oft)
        "lora.road_variant": plan.lora.road_variant.value,  # RoAd variant (branch h76peft)
        "lora.modules_to_save": plan.lora.modules_to_save.value,  # PEFT modules_to_save (branch h60mts)
        "lora.trainable_tokens": plan.lora.trainable_tokens,  # PEFT trainable_token_indices (branch h60mts)
        "quant": plan.quant.value,
        "double_quant": plan.double_quant,
        "bnb_skip_modules": plan.bnb_skip_modules,
        "frozen_layers": plan.frozen_layers,
        "preset": plan.preset.value,
        "weight_dtype": plan.weight_dtype.value,
        "base_dtype": plan.base_dtype.value,
        "adapter_dtype": plan.adapter_dtype.value,
        "autocast": plan.autocast.value,
        "optimizer_impl": plan.optimizer_impl.value,
        "optimizer": plan.optimizer.value,
        "weight_decay": plan.weight_decay,  # torch's foreach / for-loop decay pass (branch h55tt)
        "galore_rank": plan.galore_rank,  # GaLore's optim_args (branch h64galore)
        "galore_update_proj_gap": plan.galore_update_proj_gap,
        "attention": plan.attention.value,
        "checkpointing": plan.checkpointing,
        "checkpoint_policy": plan.checkpoint_policy.value,
        "checkpoint_every": plan.checkpoint_every,
        "stack": plan.stack.value,
        "float8": plan.float8.value,
        "grad_clip": plan.grad_clip,
        "optimizer_in_backward": plan.optimizer_in_backward,
        "activation_offload": plan.activation_offload,
        "bnb_legacy": plan.bnb_legacy,
        "kbit_upcast": plan.kbit_upcast,
        "litgpt": plan.litgpt,
        "loss": loss_choice(plan).value,  # the one Loss list for the loss switches
        "loop_keeps_output": plan.loop_keeps_output,
        "training_kv_cache": plan.training_kv_cache,
        "training_transformers": plan.training_transformers.value,
        "experts_loop": plan.experts_loop,
        "moe_layer": plan.moe_layer.value,  # whose MoE layer runs (branch h88ttmoe)
        "mamba_kernels": plan.mamba_kernels,
        "moe_grouped_gemm": plan.moe_grouped_gemm,
        "unsloth": plan.unsloth,
        "lora.dropout": plan.lora.dropout,
        # LitGPT's adapters (branch h41adapt)
        "lora.adapter_prompt_length": plan.lora.adapter_prompt_length,
        "lora.adapter_start_layer": plan.lora.adapter_start_layer,
        "lora.adapter_quantised": plan.lora.adapter_quantised,
        "hardware.alloc_conf": h.alloc_conf,
        "workload.micro_batch": w.micro_batch,
        "workload.seq_len": w.seq_len,
        "workload.grad_accum": w.grad_accum,
        "workload.tokens": w.tokens,
        "workload.eval_batch": w.eval_batch,
        "hardware.gpu": h.gpu,
        "hardware.custom_memory_gb": h.custom_memory_gb,
        "hardware.custom_tflops": h.custom_tflops,
        "hardware.custom_bandwidth_gb_s": h.custom_bandwidth_gb_s,
        "hardware.utilisation": h.utilisation,
        "hardware.headroom": h.headroom,
        "hardware.price_per_gpu_hour": h.price_per_gpu_hour,
        "hardware.peak_tflops_override": h.peak_tflops_override,
        "hardware.measured_tokens_per_s": h.measured_tokens_per_s,
        "hardware.measured_step_s": h.measured_step_s,
        "hardware.calibration": h.calibration,
        "hardware.torch_version": h.torch_version.value,
        "hardware.nccl_avoid_record_streams": h.nccl_avoid_record_streams,
        "hardware.held_by_others": h.held_by_others,  # memory other processes hold (branch h54held)
        "hardware.platform": h.platform.value,  # the OS CUDA runs under (branch h92wsl)
        "inference.weight_dtype": inf.weight_dtype,
        "inference.kv_dtype": inf.kv_dtype,
        "inference.concurrent": inf.concurrent,
        "inference.context": inf.context,
        "inference.engine": inf.engine,
        "inference.new_tokens": inf.new_tokens,
        "inference.tensor_parallel": inf.tensor_parallel,
        "inference.pipeline_parallel": inf.pipeline_parallel,
        "inference.replicas": inf.replicas,
        "inference.gpu_memory_utilization": inf.gpu_memory_utilization,
        "inference.max_num_seqs": inf.max_num_seqs,
        "inference.max_num_batched_tokens": inf.max_num_batched_tokens,
        "inference.mem_fraction_static": inf.mem_fraction_static,
        "inference.vllm_version": inf.vllm_version,
        "inference.vllm_sampler": inf.vllm_sampler,
        "inference.text_only": inf.text_only,
        "inference.sglang_enable_multimodal": inf.sglang_enable_multimodal,
        "inference.cuda_graphs": inf.cuda_graphs,
        "inference.prefix_caching": inf.prefix_caching,
        "inference.compile_cache": inf.compile_cache,
        "inference.sglang_version": inf.sglang_version,
        "inference.transformers_version": inf.transformers_version,
        "inference.link": inf.link,
        "inference.gguf_quant": inf.gguf_quant,
        "inference.ollama_version": inf.ollama_version,
        "inference.gpu_layers": inf.gpu_layers,
        "inference.cpu_moe_layers": inf.cpu_moe_layers,
        "inference.host_bandwidth_gb_s": inf.host_bandwidth_gb_s,
        "inference.cache_type": inf.cache_type,
        "inference.flash_attention": inf.flash_attention,
        "inference.ubatch": inf.ubatch,
        "inference.llamacpp_build": inf.llamacpp_build,
        "inference.llamacpp_backend": inf.llamacpp_backend,
        "inference.long_context": inf.long_context,  # a context past the model's limit allowed (branch h89ctx)
        "accounting": plan.accounting.value,
        "lesson.activations_gb": plan.lesson.activations_gb,
        "lesson.trainable_override": plan.lesson.trainable_override,
        "model.params_override": m.params_override or 0,
        "model.tie_embeddings": m.tie_embeddings,
        "model.gated_mlp": m.gated_mlp,
    }
    par = plan.parallel
    for name in (
        "nodes",
        "gpus_per_node",
        "tensor_parallel",
        "pipeline_parallel",
        "context_parallel",
        "expert_parallel",
        "dp_replicate",
    ):
        values[f"parallel.{name}"] = getattr(par, name)
    for name in (
        "virtual_stages",
        "host_ram_gb",
        "host_memory_gbs",
        "host_threads_per_rank",
        "intra_link",
        "inter_link",
        "ddp_bucket_mb",
    ):
        values[f"parallel.{name}"] = getattr(par, name)
    zero = ("zero_bucket_elements", "zero3_prefetch_elements", "zero3_max_live_elements", "zero3_max_reuse_elements")
    for name in zero:
        values[f"parallel.{name}"] = getattr(par, name)
    for name in ("sequence_parallel", "reshard_after_forward", "ddp_bucket_view", "tp_overlap"):
        values[f"parallel.{name}"] = getattr(par, name)
    for name in ("fsdp_float8_all_gather", "fsdp1_wrap", "grad_reduce_in_fp32", "grad_accum_fusion"):
        values[f"parallel.{name}"] = getattr(par, name)
    # The busiest EP rank's share and Megatron's capacity factor and padding (branch h87route).
    for name in ("expert_imbalance", "capacity_factor", "pad_to_capacity"):
        values[f"parallel.{name}"] = getattr(par, name)
    values["parallel.zero_overlap_comm"] = par.zero_overlap_comm
    values["parallel.zero3_overlap_comm"] = par.zero3_overlap_comm
    values["parallel.bf16_master_weights"] = par.bf16_master_weights
    values["parallel.bf16_optimizer_states"] = par.bf16_optimizer_states
    for name in (
        "strategy",
        "schedule",
        "stage_split",
        "offload",
        "fsdp_param_dtype",
        "fsdp_reduce_dtype",
        "moe_dispatcher",
        "cp_rotate_method",
        "grad_sync",
        "fsdp_units",
    ):
        values[f"parallel.{name}"] = getattr(par, name).value
    for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size"):
        values[f"model.{name}"] = getattr(m, name)
    for name in ("vocab_size", "num_experts", "experts_per_token"):
        values[f"model.{name}"] = getattr(m, name)
    # Multi-head latent attention's fields (shown for such a model only; branch h55mla).
    for name in ("kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "q_lora_rank"):
        values[f"model.{name}"] = getattr(m, name)
    for name in ("first_k_dense_replace", "dense_intermediate_size"):
        values[f"model.{name}"] = getattr(m, name)
    for target in window.method_form.targets.boxes:
        values[f"lora.targets.{target}"] = target in plan.lora.targets
    for target in window.method_form.feedforward.boxes:  # IA3's feedforward modules (branch h40peft)
        values[f"lora.ia3_feedforward.{target}"] = target in plan.lora.ia3_feedforward
    return values


def all_fields(window: MainWindow) -> dict[str, QWidget]:
    fields: dict[str, QWidget] = {}
    for form in window.forms:
        fields.update(form.fields)
    return fields


# ---- the monkey ----------------------------------------------------------------------
class Monkey:
    def __init__(self, qtbot: Any, window: MainWindow, rng: random.Random) -> None:
        self.qtbot = qtbot
        self.window = window
        self.rng = rng
        self.fields = all_fields(window)
        self.done: Counter[str] = Counter()
        self.chosen: Counter[tuple[str, int]] = Counter()
        self.seen: Counter[str] = Counter()  # edit_field calls that found the field on screen
        self.picks = 0
        self.field_edits = 0
        self.log: list[str] = []

    # Each action returns a short description for the failure message.
    def pick_action(self) -> Callable[[], str]:
        close_popups()  # the user's next click or shortcut lands outside the popup
        roll = self.rng.random()
        if roll < 0.06:
            return self.undo_redo
        if roll < 0.09:
            return self.toggle_mode
        if roll < 0.11:
            return self.toggle_lesson
        if roll < 0.12:
            return self.toggle_unit
        if roll < 0.14:
            return self.toggle_dimensions
        if roll < 0.17:
            return self.spread_over_gpus
        if roll < 0.18:
            return self.pick_precision
        if roll < 0.19:
            return self.pick_method
        return self.edit_field

    def visible_fields(self) -> list[tuple[str, QWidget]]:
        return [
            (key, widget)
            for key, widget in self.fields.items()
            if widget.isVisibleTo(self.window) and widget.isEnabled()
        ]

    def edit_field(self) -> str:
        # Rarely reached fields (shown only for a custom GPU, QLoRA, ...) are favoured, so
        # that every input gets edits.
        choices = self.visible_fields()
        # A field seldom on screen (QLoRA's, a custom preset's, FSDP's) is favoured while it is.
        self.picks += 1
        for key, _ in choices:
            self.seen[key] += 1
        # A choice of n entries needs n visits to show each one's rows: it gets n times the turns.
        weights = [
            self.picks
            * (w.count() if isinstance(w, ChoiceField) else 1)
            / ((1 + self.done[key]) * (1 + self.seen[key]))
            for key, w in choices
        ]
        key, widget = self.rng.choices(choices, weights)[0]
        return self.edit(key, widget)

    def edit(self, key: str, widget: QWidget) -> str:
        """One edit of the field ``key`` as its kind of widget takes one."""
        self.done[key] += 1
        self.field_edits += 1
        if isinstance(widget, CatalogueField):
            return f"{key}: " + self.edit_catalogue(widget)
        if isinstance(widget, ChoiceField):
            return f"{key}: " + self.edit_choice(widget)
        if isinstance(widget, QCheckBox):
            self.rng.choice((widget.click, lambda: self.qtbot.keyClick(widget, Qt.Key.Key_Space)))()
            return f"{key}: toggled"
        if isinstance(widget, QAbstractSpinBox):
            return f"{key}: " + self.edit_spin(widget)
        if isinstance(widget, CountField):
            return f"{key}: " + self.type_text(widget, widget)
        if isinstance(widget, SettingField):
            return f"{key}: " + self.type_setting(widget)
        raise AssertionError(f"no monkey for {key}: {type(widget).__name__}")

    def type_text(self, widget: QWidget, line: QLineEdit) -> str:
        text = junk(self.rng) if self.rng.random() < 0.7 else str(self.rng.randint(0, 10 ** self.rng.randint(1, 12)))
        widget.setFocus()
        if self.rng.random() < 0.8:
            line.selectAll()
        else:
            line.end(False)
        type_keys(self.qtbot, line, text)
        return f"typed {text!r} then " + self.finish(widget, line)

    def type_setting(self, line: SettingField) -> str:
        """PYTORCH_CUDA_ALLOC_CONF: a setting PyTorch takes, one it refuses, or junk."""
        settings = ("expandable_segments:True", "max_split_size_mb:512", "max_split_size_mb:4", "", junk(self.rng))
        text = self.rng.choice(settings)
        line.setFocus()
        line.selectAll()
        type_keys(self.qtbot, line, text)
        return f"typed {text!r} then " + self.finish(line, line)

    def finish(self, widget: QWidget, line: QWidget) -> str:
        how = self.rng.choice(("enter", "tab", "focus-out", "escape", "stay", "backspace"))
        # QTest hands keys straight to a widget; the platform hands them to an open popup (the
        # completer's list), which acts on Enter, Tab and Escape itself.
        target = QApplication.activePopupWidget() or line
        if how == "enter":
            self.qtbot.keyClick(target, Qt.Key.Key_Return)
        elif how == "tab":
            self.qtbot.keyClick(target, Qt.Key.Key_Tab)
        elif how == "focus-out":
            self.click_elsewhere()
        elif how == "escape":
            self.qtbot.keyClick(target, Qt.Key.Key_Escape)
        elif how == "backspace":
            self.qtbot.keyClick(target, Qt.Key.Key_Backspace)
        return how

    def click_elsewhere(self) -> None:
        """A click outside closes any open popup first (that click goes nowhere), then moves focus."""
        close_popups()
        self.window.chart.setFocus(Qt.FocusReason.MouseFocusReason)

    def edit_spin(self, spin: QAbstractSpinBox) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return self.type_text(spin, spin.lineEdit())
        if roll < 0.75:
            assert isinstance(spin, (IntField, FloatField))
            low, high = spin.minimum(), spin.maximum()
            if isinstance(spin, IntField):
                value: float = self.rng.choice((low, high, self.rng.randint(int(low), int(min(high, low + 4096)))))
            else:
                value = self.rng.choice((low, high, self.rng.uniform(low, high), self.rng.uniform(low, low + 10)))
            spin.setFocus()  # as the wheel or the arrow buttons give it
            spin.setValue(value)  # type: ignore[arg-type]
            return f"set {value!r}"
        key = self.rng.choice((Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown))
        spin.setFocus()
        for _ in range(self.rng.randint(1, 3)):
            self.qtbot.keyClick(spin, key)
        return f"stepped {key.name}"

    def edit_choice(self, combo: QComboBox) -> str:
        if self.rng.random() < 0.5:
            # An entry chosen least so far, as fields are favoured: the rows one entry shows
            # (QLoRA's base storage, FSDP's knobs) get their turn.
            counts = [self.chosen[(combo.objectName(), i)] for i in range(combo.count())]
            index = self.rng.choice([i for i, n in enumerate(counts) if n == min(counts)])
            self.chosen[(combo.objectName(), index)] += 1
            combo.setCurrentIndex(index)
            return f"chose {combo.itemText(index)!r}"
        key = self.rng.choice((Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_Home, Qt.Key.Key_End))
        combo.setFocus()
        self.qtbot.keyClick(combo, key)
        return f"pressed {key.name}"

    def edit_catalogue(self, picker: CatalogueField) -> str:
        roll = self.rng.random()
        if roll < 0.35:
            index = self.rng.randrange(picker.count())
            custom = picker.findData("custom")
            # One entry of many, and the only one that shows two more fields: favoured until chosen.
            if custom >= 0 and self.rng.random() < (0.25 if self.chosen[("custom", custom)] else 0.6):
                index = custom
                self.chosen[("custom", custom)] += 1
            picker.setCurrentIndex(index)
            picker.activated.emit(index)
            return f"chose {picker.itemText(index)!r}"
        if roll < 0.55:
            name = picker.itemText(self.rng.randrange(picker.count()))
            if self.rng.random() < 0.5:
                name = name.lower()
            picker.setFocus()
            picker.lineEdit().selectAll()
            type_keys(self.qtbot, picker.lineEdit(), name)
            self.qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
            return f"typed the name {name!r} + Enter"
        if roll < 0.65:
            picker.setFocus()
            self.qtbot.keyClick(picker, self.rng.choice((Qt.Key.Key_Up, Qt.Key.Key_Down)))
            return "arrow key"
        return self.type_text(picker, picker.lineEdit())

    def undo_redo(self) -> str:
        window = self.window
        if self.rng.random() < 0.7:
            action = self.rng.choice((window.undo_action, window.redo_action))
            action.trigger()
            self.done["undo/redo"] += 1
            return f"{action.text()!r}"
        key = self.rng.choice(("undo", "redo"))
        self.window.chart.setFocus(Qt.FocusReason.MouseFocusReason)
        sequence = window.undo_action.shortcut() if key == "undo" else window.redo_action.shortcut()
        combo = sequence[0]
        self.qtbot.keyClick(window.chart, combo.key(), combo.keyboardModifiers())
        self.done["undo/redo"] += 1
        return f"{key} shortcut"

    def toggle_mode(self) -> str:
        action = self.rng.choice((self.window.training_action, self.window.inference_action))
        action.trigger()
        self.done["mode"] += 1
        return f"mode {action.text()!r}"

    def toggle_lesson(self) -> str:
        self.window.lesson_action.trigger()
        self.done["lesson"] += 1
        return "lesson toggled"

    def toggle_unit(self) -> str:
        self.rng.choice(list(self.window.unit_actions.values())).trigger()
        self.done["unit"] += 1
        return "unit"

    def toggle_dimensions(self) -> str:
        """One of the forms' disclosures: the model's dimensions, the frameworks' advanced knobs."""
        if self.rng.random() < 0.5:
            self.window.model_form.dims_toggle.click()
            self.done["dimensions"] += 1
            return "dimensions shown/hidden"
        self.window.parallel_form.advanced.click()
        self.done["advanced"] += 1
        return "advanced parallel settings shown/hidden"

    def pick_precision(self) -> str:
        """A precision set-up picked from the Method form's list, as a user starting a run does: random
        typing seldom lands on pure bf16 with no other loss code, the one set-up that shows the 16-bit
        cross-entropy switch (core.inputs.loss_16bit_matters)."""
        form = self.window.method_form
        if not form.preset.isVisibleTo(self.window) or not form.preset.isEnabled():
            return "precision (not shown)"
        index = self.rng.randrange(form.preset.count())
        form.preset.setCurrentIndex(index)
        self.done["precision"] += 1
        if self.rng.random() < 0.5:  # and their own loop: the default loss, no framework's own
            for box in (form.litgpt, form.unsloth):
                if box.isVisibleTo(self.window) and box.isEnabled() and box.isChecked():
                    box.setChecked(False)
            form.loss.setCurrentIndex(0)  # the default entry comes first
            return f"precision {form.preset.itemText(index)!r}, losses off"
        return f"precision {form.preset.itemText(index)!r}"

    def pick_method(self) -> str:
        """A method picked from the Method form's list, as a user trying another one does, then one
        field edit: random edits seldom land on the few entries that show rows of their own (the
        virtual tokens of prompt tuning, P-tuning and prefix tuning), which PEFT's methods show only on
        one GPU or DDP with PyTorch's own loop. Half the time the user first goes back to that."""
        combo = self.window.method_form.method
        if not combo.isVisibleTo(self.window) or not combo.isEnabled():
            return "method (not shown)"
        if self.rng.random() < 0.5:
            self.plain_single_gpu()
        index = self.rng.randrange(combo.count())
        combo.setCurrentIndex(index)
        self.done["method"] += 1
        return f"method {combo.itemText(index)!r}, then {self.edit_field()}"

    def reach_method_rows(self) -> list[str]:
        """The rows one method alone shows (LoKr's factor, branch h53lyco) that the walk missed: File → New (the
        default plan, which LoKr accepts: one GPU, eager PyTorch, a dense model), that method picked and the row
        edited once, as a user trying the method does. Run after the walk, so the walk's own path (and the rare
        rows it reaches) is the seed's alone. File → New keeps the window's chart mode, and the walk may end in
        Inference mode, which hides the Method form (MainWindow.set_chart_mode): Training is chosen first, as a user
        trying a training method does (a walk changed by AdaLoRA's entry in the Method list, branch h54ada, ended
        there and missed the row)."""
        done = []
        combo = self.window.method_form.method
        for method, key in METHOD_ROWS.items():
            if self.done[key]:
                continue
            if not self.window.training_action.isChecked():
                self.window.training_action.trigger()
                done.append("mode 'Training' (the Method form shows)")
            self.window.new_action.trigger()
            combo.setCurrentIndex(combo.findData(method))
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(f"method {method!r}, then {self.edit(key, widget)}")
        return done

    def reach_galore_rows(self) -> list[str]:
        """GaLore's rank and update gap (shown with GaLore only, which full or frozen training alone takes): File → New
        in Training mode, method 'full', optimizer 'galore-adamw', and each row the walk missed edited once."""
        done = []
        form = self.window.method_form
        for key in [key for key in GALORE_ROWS if not self.done[key]]:
            if self.window.controller.plan.optimizer.value != "galore-adamw":
                if not self.window.training_action.isChecked():
                    self.window.training_action.trigger()
                self.window.new_action.trigger()
                form.method.setCurrentIndex(form.method.findData("full"))
                form.optimizer.setCurrentIndex(form.optimizer.findData("galore-adamw"))
                done.append("File → New, method 'full', optimizer 'galore-adamw'")
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def reach_latent_rows(self) -> list[str]:
        """The rows a multi-head latent attention model alone shows (branch h55mla) that the walk missed: File →
        New, DeepSeek-V2-Lite picked, the architecture dimensions unfolded, and each row edited once (the model
        picked again whenever an edit made it another kind)."""
        done = []
        form = self.window.model_form
        for key in [key for key in LATENT_ROWS if not self.done[key]]:
            if not self.window.controller.plan.model.latent_attention:
                done.append(self.new_plan_on("deepseek-v2-lite"))
            if not form.dims_toggle.isChecked():
                form.dims_toggle.setChecked(True)
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def reach_hybrid_rows(self) -> list[str]:
        """The rows a hybrid alone shows that the walk missed: Training mode, File → New, Granite 4.0 H-Tiny picked,
        LoRA chosen (its targets row), each row edited once (the model picked again whenever an edit moved off it);
        then vLLM's prefix-caching row in Inference mode on the same model. The stop-68 merges moved the seeded walk
        off all four, and the reaches before this one end in Inference mode, which hides the training rows."""
        done = []
        for key in [key for key in HYBRID_ROWS if not self.done[key]]:
            if self.window.inference_action.isChecked():  # the walk's reaches before this one may end in Inference
                self.window.training_action.trigger()
                done.append("mode 'Training'")
            plan = self.window.controller.plan
            if not plan.model.recurrent_mixer:
                done.append(self.new_plan_on("granite-4.0-h-tiny"))
            if self.window.controller.plan.method is not Method.LORA:
                self.window.controller.set_plan(dataclasses.replace(self.window.controller.plan, method=Method.LORA))
                done.append("method LoRA")
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        for key in [key for key in HYBRID_SERVING_ROWS if not self.done[key]]:
            if not self.window.inference_action.isChecked():
                self.window.inference_action.trigger()
                done.append("mode 'Inference'")
            if not self.window.controller.plan.model.recurrent_mixer:
                done.append(self.new_plan_on("granite-4.0-h-tiny"))
            done += self._choose((("engine", "vllm"),))
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def new_plan_on(self, model_id: str) -> str:
        """File → New, then the catalogue model picked from the Model form's list."""
        picker = self.window.model_form.picker
        self.window.new_action.trigger()
        index = picker.findData(model_id)
        picker.setCurrentIndex(index)
        picker.activated.emit(index)  # as a click on the entry applies it
        return f"File → New, model {model_id!r}"

    def reach_moe_layer_row(self) -> list[str]:
        """The Method form's MoE layer (whose layer runs the experts: transformers' or torchtitan's, branch h88ttmoe),
        shown for full fine-tuning of a mixture of experts off the Megatron stack, if the walk missed it: Training mode,
        File → New on Qwen3-30B-A3B (eager PyTorch, the default stack), method 'full' and the row edited once."""
        key = "moe_layer"
        if self.done[key]:
            return []
        done = []
        if not self.window.training_action.isChecked():
            self.window.training_action.trigger()
            done.append("mode 'Training' (the Method form shows)")
        done.append(self.new_plan_on("qwen3-30b-a3b"))
        method = self.window.method_form.method
        method.setCurrentIndex(method.findData("full"))
        done.append("method 'full'")
        widget = self.fields[key]
        if widget.isVisibleTo(self.window) and widget.isEnabled():
            done.append(self.edit(key, widget))
        return done

    def reach_vision_rows(self) -> list[str]:
        """The Serving form's text-only box, shown for an image-text checkpoint on a vLLM line that skips its tower
        alone, if the walk missed it: Gemma 3 4B on vLLM at its default line, 0.19 (a seed's path may hold no
        image-text model in Inference mode: the five hybrid entries, branch h65hyb, moved this seed's path off the
        one that did)."""
        return self._reach_gemma_rows(VISION_ROWS, (("engine", "vllm"), ("vllm_version", "0.19")))

    def reach_sglang_mm_rows(self) -> list[str]:
        """The Serving form's --enable-multimodal box, shown for Gemma 3 on SGLang 0.4.6 on alone, if the walk missed
        it: Gemma 3 4B on SGLang at its default release, 0.5.23."""
        return self._reach_gemma_rows(SGLANG_MM_ROWS, (("engine", "sglang"), ("sglang_version", "0.5.23")))

    def _reach_gemma_rows(self, rows: tuple[str, ...], choices: tuple[tuple[str, str], ...]) -> list[str]:
        """Inference mode, File → New with Gemma 3 4B picked (unless the plan's model is a Gemma 3 already), the
        Serving form's lists set to ``choices`` (attribute, value) and each of ``rows`` edited once. Where the walk's
        last plan still hides the row (its card or layout takes no such engine line: the merged stop-67 tree's path
        ended so), File → New on Gemma 3 4B starts from the default card and the lists are set again."""
        done: list[str] = []
        for key in [key for key in rows if not self.done[key]]:
            if not self.window.inference_action.isChecked():
                self.window.inference_action.trigger()
                done.append("mode 'Inference'")
            if self.window.controller.plan.model.vision_family != "gemma3":
                done.append(self.new_plan_on("gemma-3-4b"))
            widget = self.fields[key]
            done += self._choose(choices)
            if not (widget.isVisibleTo(self.window) and widget.isEnabled()):
                done.append(self.new_plan_on("gemma-3-4b"))
                done += self._choose(choices)
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def _choose(self, choices: tuple[tuple[str, str], ...]) -> list[str]:
        """The Serving form's lists set to ``choices`` (attribute, value)."""
        done: list[str] = []
        form = self.window.serving_form
        for name, value in choices:
            combo = getattr(form, name)
            if combo.currentData() != value:
                combo.setCurrentIndex(combo.findData(value))
                done.append(f"{name} {value!r}")
        return done

    def reach_cpu_moe_rows(self) -> list[str]:
        """The Serving form's experts-in-RAM field (llama.cpp's --n-cpu-moe), shown for a mixture of experts under
        llama-server alone, if the walk missed it: Inference mode, File → New, Qwen3 30B-A3B picked, llama.cpp
        chosen as the engine (no Ollama line) and the field edited once."""
        done: list[str] = []
        for key in [key for key in CPU_MOE_ROWS if not self.done[key]]:
            if not self.window.inference_action.isChecked():
                self.window.inference_action.trigger()
                done.append("mode 'Inference'")
            if self.window.controller.plan.model.num_experts <= 1:
                done.append(self.new_plan_on("qwen3-30b-a3b"))
            form = self.window.serving_form
            for name, value in (("engine", "llamacpp"), ("ollama_version", "none")):
                combo = getattr(form, name)
                if combo.currentData() != value and combo.findData(value) >= 0:
                    combo.setCurrentIndex(combo.findData(value))
                    done.append(f"{name} {value!r}")
            widget = self.fields[key]
            plan = self.window.controller.plan
            if key == "inference.host_bandwidth_gb_s" and not widget.isVisibleTo(self.window):
                # the edit above may have left no expert in RAM: every layer's, as --cpu-moe
                self.window.controller.set_plan(plan.with_inference(cpu_moe_layers=plan.model.num_layers))
                done.append("--cpu-moe")
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def type_committed(self, entries: tuple[tuple[Any, str], ...]) -> None:
        """Each field's text typed over what it holds and committed with Enter, as a user types a layout."""
        for field, text in entries:
            field.setFocus()
            field.lineEdit().selectAll()
            type_keys(self.qtbot, field.lineEdit(), text)
            self.qtbot.keyClick(field.lineEdit(), Qt.Key.Key_Return)

    def edit_advanced_rows(self, keys: list[str], done: list[str]) -> list[str]:
        """The Parallelism form's advanced settings shown, then each of ``keys`` edited once where it shows."""
        form = self.window.parallel_form
        if not form.advanced.isChecked():
            form.advanced.click()
            done.append("advanced parallel settings shown")
        for key in keys:
            widget = self.fields[key]
            if widget.isVisibleTo(self.window) and widget.isEnabled():
                done.append(self.edit(key, widget))
        return done

    def new_megatron_moe(self) -> Any:
        """Training mode, File → New, Qwen3-30B-A3B picked and the Megatron stack: a mixture of experts where Megatron's
        MoE rows can show. Returns the Parallelism form."""
        window = self.window
        if not window.training_action.isChecked():
            window.training_action.trigger()
        window.new_action.trigger()
        picker = window.model_form.picker
        index = picker.findData("qwen3-30b-a3b")
        picker.setCurrentIndex(index)
        picker.activated.emit(index)  # as a click on the entry applies it
        stack = window.method_form.stack
        stack.setCurrentIndex(stack.findData("megatron"))
        return window.parallel_form

    def reach_expert_load_rows(self) -> list[str]:
        """The expert load, capacity factor and padding rows (branch h87route: a mixture of experts under EP > 1; the
        factor and padding on the Megatron stack, the padding once a factor is set) when the walk missed them: File →
        New, Qwen3-30B-A3B picked, the Megatron stack, 8 GPUs, EP 8 and a capacity factor of 1.25 typed, then each row
        edited once, the padding first (an edit of the factor to 0 hides it)."""
        keys = [
            key
            for key in ("parallel.pad_to_capacity", "parallel.expert_imbalance", "parallel.capacity_factor")
            if not self.done[key]
        ]
        if not keys:
            return []
        form = self.new_megatron_moe()
        self.type_committed(((form.gpus_per_node, "8"), (form.expert_parallel, "8"), (form.capacity_factor, "1.25")))
        done = ["File → New, model 'qwen3-30b-a3b', stack 'megatron', 8 GPUs, EP 8, capacity factor 1.25"]
        return self.edit_advanced_rows(keys, done)

    def reach_cp_rotate_row(self) -> list[str]:
        """The CP rotation's row (PyTorch's ring attention: context parallel above 1 outside Megatron), if the walk
        missed it: Training mode, File → New, 8 GPUs and CP 2 typed, the advanced parallel settings shown and the row
        edited once. The seeded path moves with each new input: after the Serving form's experts-in-RAM field
        (branch h71cpumoe) a walk that ran after the other GUI tests no longer reached a CP layout."""
        key = "parallel.cp_rotate_method"
        if self.done[key]:
            return []
        window = self.window
        if not window.training_action.isChecked():
            window.training_action.trigger()
        window.new_action.trigger()
        form = window.parallel_form
        self.type_committed(((form.gpus_per_node, "8"), (form.context_parallel, "2")))
        return self.edit_advanced_rows([key], ["File → New, 8 GPUs, CP 2"])  # the rotation is an advanced knob

    def reach_megatron_rows(self) -> list[str]:
        """The Megatron gradient-buffer rows the walk missed: Training mode, File → New (the default plan: AdamW,
        which Megatron-Core builds; DDP on one GPU), the Megatron stack picked, 4 accumulation steps typed, and each
        row edited once, as a user moving a plan onto Megatron does."""
        done: list[str] = []
        missed = [key for key in MEGATRON_ROWS if not self.done[key]]
        if not missed:
            return done
        if not self.window.training_action.isChecked():
            self.window.training_action.trigger()
            done.append("mode 'Training'")
        self.window.new_action.trigger()
        stack = self.window.method_form.stack
        stack.setCurrentIndex(stack.findData("megatron"))
        self.type_committed(((self.window.workload_form.grad_accum, "4"),))
        done.append("File → New, stack 'megatron', 4 accumulation steps")
        # the fusion row is one of the advanced knobs, which a seed's walk may end with hidden (branch h65hyb)
        return self.edit_advanced_rows(missed, done)

    def reach_moe_dispatcher(self) -> list[str]:
        """Megatron's MoE rows (the token dispatcher: a mixture of experts on the Megatron stack, TP × EP > 1; the
        grouped GEMM box: any mixture of experts on it) when the walk missed them, as the seeded path did once FSDP2's
        unit layout joined the Parallelism form (branch h65fsdp) and again once four Qwen3.5 / Qwen3.6 entries joined
        the catalogue (branch h66q35, the walk ending with the advanced knobs hidden): File → New, Qwen3-30B-A3B
        picked, the Megatron stack, 8 GPUs and TP 2 typed, the advanced knobs shown, each row edited once."""
        keys = [key for key in ("parallel.moe_dispatcher", "moe_grouped_gemm") if not self.done[key]]
        if not keys:
            return []
        form = self.new_megatron_moe()
        self.type_committed(((form.gpus_per_node, "8"), (form.tensor_parallel, "2")))
        # the dispatcher is one of the advanced knobs
        return self.edit_advanced_rows(keys, ["File → New, model 'qwen3-30b-a3b', stack 'megatron', 8 GPUs, TP 2"])

    def plain_single_gpu(self) -> None:
        """One GPU, DDP, PyTorch's own loop: TP, PP and CP typed back to 1, the framework boxes off."""
        form = self.window.parallel_form
        fields = (form.tensor_parallel, form.pipeline_parallel, form.context_parallel, form.nodes, form.gpus_per_node)
        for field in fields:
            if field.isVisibleTo(self.window) and field.isEnabled():
                field.setFocus()
                field.lineEdit().selectAll()
                type_keys(self.qtbot, field.lineEdit(), "1")
                self.qtbot.keyClick(field.lineEdit(), Qt.Key.Key_Return)
        for combo, value in ((form.strategy, "ddp"), (self.window.method_form.stack, "eager")):
            found = [i for i in range(combo.count()) if combo.itemData(i) == value]
            if found and combo.isEnabled():
                combo.setCurrentIndex(found[0])
        method = self.window.method_form
        for box in (method.litgpt, method.unsloth):
            if box.isVisibleTo(self.window) and box.isEnabled() and box.isChecked():
                box.setChecked(False)

    def spread_over_gpus(self) -> str:
        """What a user planning a multi-GPU run types: nodes, GPUs per node, TP / PP / CP degrees and a
        strategy, each committed with Enter (random typing seldom makes a layout that shows the
        rows for tensor parallel, FSDP or ZeRO, or the CP rotation's: a CP layout was added when the
        Method form gained training_kv_cache and the seeded path stopped reaching it at 80 to 100 edits
        per input)."""
        form = self.window.parallel_form
        layouts = ((1, 1, 1, 1, 1), (1, 8, 2, 1, 1), (2, 8, 4, 2, 1), (4, 8, 8, 1, 1), (2, 4, 1, 2, 1), (1, 8, 2, 1, 2))
        nodes, gpus, tp, pp, cp = self.rng.choice(layouts)
        degrees = ((form.tensor_parallel, 1), (form.pipeline_parallel, 1), (form.context_parallel, 1))
        layout = ((form.nodes, nodes), (form.gpus_per_node, gpus), (form.tensor_parallel, tp))
        for field, value in (*degrees, *layout, (form.pipeline_parallel, pp), (form.context_parallel, cp)):
            field.setFocus()
            field.lineEdit().selectAll()
            type_keys(self.qtbot, field.lineEdit(), str(value))
            self.qtbot.keyClick(field.lineEdit(), Qt.Key.Key_Return)
        # Serving splits the model over its own tensor-parallel degree (the Serving form's, shown in
        # Inference mode): typed too, so the rows only a split shows (its GPU link) get their turns.
        serving = self.window.serving_form
        if serving.isVisibleTo(self.window) and serving.tensor_parallel.isEnabled():
            serving.tensor_parallel.setFocus()
            serving.tensor_parallel.lineEdit().selectAll()
            type_keys(self.qtbot, serving.tensor_parallel.lineEdit(), str(tp))
            self.qtbot.keyClick(serving.tensor_parallel.lineEdit(), Qt.Key.Key_Return)
        strategy = self.rng.randrange(form.strategy.count())
        form.strategy.setCurrentIndex(strategy)
        if pp > 1:
            form.schedule.setCurrentIndex(self.rng.randrange(form.schedule.count()))
        self.done["layout"] += 1
        return f"layout {nodes} × {gpus}, TP {tp}, PP {pp}, CP {cp}, {form.strategy.itemText(strategy)!r}"


def test_monkey(qtbot: Any, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    # Focus and focus-out (which revert bad text) only happen in the active window.
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow)
    rng = random.Random(SEED)
    monkey = Monkey(qtbot, window, rng)
    started = time.perf_counter()
    plans = {window.controller.plan}
    number = 0
    with captured_exceptions() as escaped:
        while monkey.field_edits < EDITS:
            number += 1
            what = monkey.pick_action()()
            plans.add(window.controller.plan)
            monkey.log.append(what)
            where = f"seed {SEED}, edit {number}: {what}"
            assert not escaped, f"{where} raised {escaped[0]!r}"
            assert window.isActiveWindow(), f"{where}: the window lost activation; focus checks would be void"
            try:
                check_plan(window)
                if number % FULL_CHECK_EVERY == 0:
                    check_chart(window)
                    check_forms(window)
            except AssertionError as error:
                plan = planfile.dumps(window.controller.plan)
                raise AssertionError(f"{where}; last edits {monkey.log[-10:]}; plan {plan}") from error
        close_popups()
        for what in monkey.reach_method_rows():
            monkey.log.append(what)
            assert not escaped, f"seed {SEED}, after the walk: {what} raised {escaped[0]!r}"
            check_plan(window)
        for what in monkey.reach_megatron_rows():
            monkey.log.append(what)
            assert not escaped, f"seed {SEED}, after the walk: {what} raised {escaped[0]!r}"
            check_plan(window)
        for what in [
            *monkey.reach_latent_rows(),
            *monkey.reach_galore_rows(),
            *monkey.reach_moe_dispatcher(),
            *monkey.reach_expert_load_rows(),
            *monkey.reach_vision_rows(),
            *monkey.reach_sglang_mm_rows(),
            *monkey.reach_cpu_moe_rows(),
            *monkey.reach_moe_layer_row(),
            *monkey.reach_cp_rotate_row(),
            *monkey.reach_hybrid_rows(),
        ]:
            monkey.log.append(what)
            assert not escaped, f"seed {SEED}, after the walk: {what} raised {escaped[0]!r}"
            check_plan(window)
        close_popups()
        window.chart.setFocus()
        check_chart(window)
        check_forms(window)
    elapsed = time.perf_counter() - started
    untouched = set(monkey.fields) - set(monkey.done)
    assert not untouched, f"the monkey never reached {sorted(untouched)}"
    # Not a monkey that only ever typed junk: most edits made a new plan.
    assert len(plans) > EDITS // 4, f"only {len(plans)} distinct plans"
    print(f"monkey: {monkey.field_edits} field edits in {number} actions, {len(plans)} plans, {elapsed:.1f} s")


# ---- what the monkey found -----------------------------------------------------------
def test_bad_count_confirmed_with_enter_is_reverted_on_leaving(qtbot: Any, window: MainWindow) -> None:
    """Qt 6 emits QLineEdit.editingFinished on focus-out only if the text changed since the
    last emission: text refused on Enter stayed in the box, marked, after the user left."""
    window.show()
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow)
    tokens = window.workload_form.tokens
    tokens.setFocus()
    tokens.selectAll()
    qtbot.keyClicks(tokens, "lots")
    qtbot.keyClick(tokens, Qt.Key.Key_Return)
    assert is_marked_invalid(tokens)
    window.workload_form.micro_batch.setFocus()
    assert not is_marked_invalid(tokens)
    assert tokens.value() == window.controller.plan.workload.tokens


@pytest.mark.parametrize("confirm", [False, True])
def test_picker_text_never_chosen_is_reverted_on_leaving(qtbot: Any, window: MainWindow, confirm: bool) -> None:
    """Typed text that names no model stayed in the picker after the user left it, as if
    it were the plan's model."""
    window.show()
    window.windowHandle().requestActivate()
    qtbot.waitUntil(window.isActiveWindow)
    picker = window.model_form.picker
    shown = picker.currentText()
    picker.setFocus()
    picker.lineEdit().selectAll()
    qtbot.keyClicks(picker.lineEdit(), "GPT-9000")
    if confirm:
        qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    close_popups()
    window.workload_form.micro_batch.setFocus()
    assert picker.currentText() == shown
    assert not is_marked_invalid(picker)
    assert picker.value() == window.controller.plan.model_id


def test_qlora_with_a_tiny_typed_parameter_count_has_no_negative_memory() -> None:
    """The monkey's first find (a core bug): P typed below the parts QLoRA keeps in 16 bits
    made the weights bucket negative."""
    from dataclasses import replace

    from core.estimate import estimate
    from core.plan import Method
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-8b", method=Method.QLORA)
    plan = plan.with_changes(model=replace(plan.model, params_override=33))
    assert all(bucket.bytes >= 0 for bucket in estimate(plan).buckets)
