"""Inference mode: the window shows serving, and the serving form drives the plan."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from core.breakdown import BucketKey
from core.catalogue import find_model
from core.cli.render import render_serving
from core.plan import (
    CompileCache,
    Engine,
    Hardware,
    OllamaVersion,
    Plan,
    PrefixCaching,
    TransformersVersion,
    VllmVersion,
)
from core.serving.fit import COLD_COMPILE_PEAK, DEFAULT_FIT
from core.serving.text_only import tower_line
from core.serving.vllm_rules import vllm_graph_estimate
from core.verdict import Mode
from gui.format import duration, latency, memory
from gui.main_window import MainWindow


def llama_on_h100(**changes: object) -> Plan:
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="h100-sxm"))
    return plan.with_inference(**changes)


def serve_on_a_4090(window: MainWindow, **changes: object) -> None:
    """Llama 3.1 8B served on an RTX 4090, the Serving tab open."""
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(**changes))
    window.tabs.setCurrentWidget(window.inference_panel)


def test_window_follows_the_mode(window: MainWindow) -> None:
    window.inference_action.trigger()
    assert not window.serving_form.isHidden()
    assert window.method_form.isHidden() and window.workload_form.isHidden()
    assert window.compute_panel.current is window.compute_panel.serving
    window.training_action.trigger()
    assert window.serving_form.isHidden()
    assert not window.method_form.isHidden()
    assert window.compute_panel.current is window.compute_panel.training


def test_engine_choice_edits_the_plan_and_shows_vllm_fields(window: MainWindow) -> None:
    window.inference_action.trigger()
    form = window.serving_form
    assert window.controller.plan.inference.engine is Engine.HF
    assert not form.form.isRowVisible(form.max_num_seqs)
    form.engine.setCurrentIndex(form.engine.findData("vllm"))
    assert window.controller.plan.inference.engine is Engine.VLLM
    assert form.form.isRowVisible(form.max_num_seqs) and form.form.isRowVisible(form.utilisation)
    form.tensor_parallel.setValue(2)
    assert window.controller.plan.inference.tensor_parallel == 2


def test_the_transformers_release_shows_for_hugging_face_generate_only(window: MainWindow) -> None:
    # core.serving.transformers_versions: the release decides how an MoE block runs its experts.
    window.inference_action.trigger()
    form = window.serving_form
    assert form.form.isRowVisible(form.transformers_version)
    assert window.controller.plan.inference.transformers_version is TransformersVersion.V5_25
    form.transformers_version.setCurrentIndex(form.transformers_version.findData("4.51"))
    assert window.controller.plan.inference.transformers_version is TransformersVersion.V4_51
    form.engine.setCurrentIndex(form.engine.findData("vllm"))
    assert not form.form.isRowVisible(form.transformers_version)


def test_vllm_figures_come_from_the_estimate(window: MainWindow) -> None:
    window.show()  # panels fill themselves in while they can be seen
    window.inference_action.trigger()
    window.controller.reset(llama_on_h100(engine="vllm", context=8192, concurrent=32))
    inf = window.controller.estimate.inference
    window.tabs.setCurrentWidget(window.inference_panel)
    assert f"{inf.kv_cache_tokens:,} tokens" in window.inference_panel.values["kv_tokens"].text()
    assert f"{inf.max_concurrency:.2f}×" in window.inference_panel.values["concurrency"].text()
    window.tabs.setCurrentWidget(window.compute_panel)
    speed = window.compute_panel.serving
    assert speed.values["ttft"].text() == latency(inf.ttft_s)
    assert f"{inf.decode_tokens_per_s:,.0f} output tokens/s" in speed.values["total"].text()
    xs, ys = speed.total_curve.getData()
    assert list(xs) == [p.concurrent for p in inf.speed.curve]
    assert list(ys) == pytest.approx([p.total_tokens_per_s for p in inf.speed.curve])
    # The bar is what the verdict judges (issue 26, item 4): the requests running at once.
    plan = window.controller.plan.inference
    assert (
        window.chart.bars()[0].label
        == f"{min(plan.concurrent, inf.max_concurrent):,} × {plan.context:,} tokens at once"
    )
    assert window.chart.bars()[0].total_bytes == inf.total_bytes


def test_llama_cpp_on_the_serving_tab_and_banner(window: MainWindow) -> None:
    # The banner read "at most 1 requests"; llama.cpp's host part has its own row; the Compute
    # tab's time per output token is the queue's latency that tokens/s per request comes from.
    serve_on_a_4090(window, engine="llamacpp", context=8192, gpu_layers=20)
    assert "host RAM not given" in window.inference_panel.values["host"].text()
    assert "at most 1 request of 8,192 tokens at once" in window.verdict.detail.text()
    window.tabs.setCurrentWidget(window.compute_panel)
    speed = window.controller.estimate.inference.speed
    assert window.compute_panel.serving.values["step"].text().startswith(duration(speed.token_latency_s))  # "45 ms"


def test_the_llama_cpp_picker_serves_a_latent_attention_model_and_names_its_cache(window: MainWindow) -> None:
    # Branch h56gguf: llama.cpp (a current build) plans DeepSeek-V2-Lite; its cache is one latent of
    # kv_lora_rank + rope = 512 + 64 per cell and layer, no V (ggml-org/llama.cpp PR #19067).
    window.show()
    window.inference_action.trigger()
    v2_lite = find_model("deepseek-v2-lite").spec
    plan = Plan(model=v2_lite, model_id="deepseek-v2-lite", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan)
    form = window.serving_form
    form.engine.setCurrentIndex(form.engine.findData("llamacpp"))
    assert window.controller.plan.inference.engine is Engine.LLAMACPP
    window.tabs.setCurrentWidget(window.inference_panel)
    assert "K only: the 576-wide latent" in window.inference_panel.formula.text()
    assert window.inference_panel.values["kv_per_token"].text() == "31,104 B"  # 27 layers x 576 x 2 B


def test_the_serving_tab_names_a_macs_runtime_metal_not_cuda(window: MainWindow) -> None:
    # core.serving.llamacpp.device_overhead_bytes: on Apple silicon Metal's device (under 1 MiB, llama.cpp
    # build 4467's M4 log) stands beside the buffers; the row read "CUDA context" whatever the card.
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=8192))
    window.tabs.setCurrentWidget(window.inference_panel)
    panel = window.inference_panel
    label = panel.form.labelForField(panel.values["overhead"])
    assert label.text() == "CUDA context:"
    window.controller.reset(plan.with_hardware(gpu="apple-m2-max-96gb").with_inference(engine="llamacpp", context=8192))
    assert label.text() == "Metal device:" and panel.values["overhead"].text() == "1 MB"


def test_the_ollama_picker_shows_for_llama_cpp_and_ollama_chooses_the_layers(window: MainWindow) -> None:
    # core.serving.ollama: through Ollama the runner gets the layer count of Ollama's own estimate,
    # and the explanation says it (Llama 3.1 8B at 2 × 32,768 cells does not fit a 12 GB card whole).
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    assert not form.form.isRowVisible(form.ollama_version)  # Hugging Face generate: no Ollama
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-3060-12gb"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=32768, concurrent=2))
    assert form.form.isRowVisible(form.ollama_version)
    form.ollama_version.setCurrentIndex(form.ollama_version.findData("0.7"))
    assert window.controller.plan.inference.ollama_version.value == "0.7"
    formula = window.controller.estimate.inference.formula
    assert "Ollama 0.7 (v0.7.0 – v0.9.6) would place" in formula and "of 33 layers on the GPU" in formula


def test_picking_an_ollama_line_brings_its_defaults_as_the_cli_does(window: MainWindow) -> None:
    # One answer everywhere: `--ollama 0.7` (core/cli/plans.py) takes the line's num_ctx (4,096 from
    # v0.6.7, ollama/ollama envconfig), OLLAMA_NUM_PARALLEL as sched.go picks it and flash attention off;
    # the window's picker gives the same plan.
    from core.estimate import gpu_for
    from core.serving.ollama import ollama_defaults

    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=32768, flash_attention=True))
    form.ollama_version.setCurrentIndex(form.ollama_version.findData("0.7"))
    chosen = window.controller.plan
    assert chosen.inference.context == 4096 and not chosen.inference.flash_attention
    before = plan.with_inference(engine="llamacpp", context=32768, flash_attention=True)
    cli = ollama_defaults(before.with_inference(ollama_version="0.7"), gpu_for(before), frozenset())
    assert chosen == cli


def test_the_picker_offers_the_new_layout_lines_and_their_vram_context(window: MainWindow) -> None:
    # core.serving.ollama: from v0.12.11 llm/server.go createLayout places the layers; from v0.15.5
    # server/routes.go sets num_ctx by the GPUs' total memory (an RTX 4090's 24 GB: 32,768) and
    # the llama runner gets flash attention "auto" (v0.13.4): the picker gives the CLI's plan.
    from core.estimate import gpu_for
    from core.serving.ollama import ollama_defaults

    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    labels = [form.ollama_version.itemText(i) for i in range(form.ollama_version.count())]
    assert labels[-4:-1] == ["0.12.11 – 0.13.3", "0.13.4 – 0.15.4", "0.15.5 – 0.24.0"]
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=8192))
    form.ollama_version.setCurrentIndex(form.ollama_version.findData("0.15.5"))
    chosen = window.controller.plan
    assert (chosen.inference.context, chosen.inference.flash_attention) == (32768, True)
    before = plan.with_inference(engine="llamacpp", context=8192)
    assert chosen == ollama_defaults(before.with_inference(ollama_version="0.15.5"), gpu_for(before), frozenset())
    formula = window.controller.estimate.inference.formula
    assert "Ollama 0.15.5 (v0.15.5 – v0.24.0) would place 33 of 33 layers on the GPU" in formula


def test_the_picker_offers_ollama_030_and_llama_cpps_fit(window: MainWindow) -> None:
    # core.serving.llamacpp_fit: from v0.30.0 Ollama starts llama-server without -ngl (llm/llama_server.go,
    # 2c71d8d7) and llama.cpp's fit (common/fit.cpp) picks the layers; Llama 3.1 70B Q4_K_M at 32,768
    # tokens (24 GB: server/routes.go's tier) keeps 36 of 81 layers on an RTX 4090, as the CLI says.
    from core.estimate import gpu_for
    from core.serving.ollama import ollama_defaults

    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    labels = [form.ollama_version.itemText(i) for i in range(form.ollama_version.count())]
    assert labels[-1] == "0.30.0 – 0.32.15"
    plan = Plan(model=find_model("llama-3.1-70b").spec, model_id="llama-3.1-70b", hardware=Hardware(gpu="rtx-4090"))
    before = plan.with_inference(engine="llamacpp", context=8192)
    window.controller.reset(before)
    form.ollama_version.setCurrentIndex(form.ollama_version.findData("0.30"))
    chosen = window.controller.plan
    assert chosen == ollama_defaults(before.with_inference(ollama_version="0.30"), gpu_for(before), frozenset())
    formula = window.controller.estimate.inference.formula
    assert "llama.cpp's fit (common/fit.cpp) would place 36 of 81 layers on the GPU" in formula


def test_llama_cpp_host_ram_is_set_from_the_serving_form(window: MainWindow) -> None:
    # Issue 23: llama.cpp's host part is judged against the host RAM, but its only field was in
    # the Parallelism form, which Inference mode hides: the window could not set it.
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=8192, gpu_layers=20))
    field = window.serving_form.fields["parallel.host_ram_gb"]
    assert field.isVisibleTo(window) and window.parallel_form.isHidden()
    field.setValue(32.0)
    assert window.controller.plan.parallel.host_ram_gb == 32.0
    window.tabs.setCurrentWidget(window.inference_panel)
    assert "host RAM not given" not in window.inference_panel.values["host"].text()
    window.controller.reset(window.controller.plan.with_inference(engine="vllm"))
    assert not field.isVisibleTo(window)  # vLLM keeps nothing on the host


def test_the_serving_form_is_built_when_first_wanted_and_tabbed_to_in_column_order(
    qtbot: object, window: MainWindow
) -> None:
    """Start-up (issue 25) builds no Serving form in Training mode; built later, it shows the
    plan as the others do, and Tab reaches its fields in the column's order, not last."""
    from gui.forms.serving import ServingForm

    window.show()
    assert window.findChildren(ServingForm) == []  # the training window never built it
    plan = window.controller.plan.with_inference(concurrent=7, context=3000)
    window.controller.set_plan(plan)
    window.inference_action.trigger()
    form = window.serving_form
    assert window.findChildren(ServingForm) == [form] and not form.isHidden()
    assert form.concurrent.value() == 7 and form.context.value() == 3000
    # Tab visits the forms' fields in the column's order (each form's fields together).
    column = [window._form_column.itemAt(i).widget() for i in range(window._form_column.count())]
    forms = [w for w in column if w in window.forms]
    visited: list[object] = []
    widget = window.model_form.nextInFocusChain()
    for _ in range(2000):
        stop = bool(widget.focusPolicy() & Qt.FocusPolicy.TabFocus)
        owner = next((f for f in forms if stop and f.isAncestorOf(widget)), None)
        if owner is not None and (not visited or visited[-1] is not owner):
            visited.append(owner)
        widget = widget.nextInFocusChain()
        if widget is window.model_form:
            break
    assert visited == forms
    window.training_action.trigger()
    assert form.isHidden() and window.findChildren(ServingForm) == [form]


def test_inference_mode_hides_the_inputs_only_training_reads(window: MainWindow) -> None:
    # A measured training run, its calibration and PyTorch's allocator settings change the
    # training estimate only (core.serving reads none of them: core/inputs.py, training_only).
    hardware = window.hardware_form
    training_only = ("hardware.measured_tokens_per_s", "hardware.calibration", "hardware.alloc_conf")
    assert all(hardware.form.isRowVisible(hardware.fields[path]) for path in training_only)
    window.inference_action.trigger()
    assert not any(hardware.form.isRowVisible(hardware.fields[path]) for path in training_only)
    # Serving reads the utilisation, the headroom and the peak override: they stay.
    for path in ("hardware.utilisation", "hardware.headroom", "hardware.peak_tflops_override"):
        assert hardware.form.isRowVisible(hardware.fields[path])
    window.training_action.trigger()
    assert all(hardware.form.isRowVisible(hardware.fields[path]) for path in training_only)


def test_the_utilisation_says_what_0_means_in_each_mode(window: MainWindow) -> None:
    """Utilisation 0 is modelled for training (core.training.speed) but is the fixed serving
    share for prefill and decode (core.serving.speed.SERVING_UTILISATION). Before, Inference
    mode's field read "modelled" while serving's figures took 40 %."""
    from core.serving.speed import SERVING_UTILISATION, serving_utilisation

    field = window.hardware_form.utilisation
    assert window.controller.plan.hardware.utilisation == 0
    assert field.text() == "modelled"
    window.inference_action.trigger()
    assert serving_utilisation(window.controller.plan) == SERVING_UTILISATION
    # The default card is an A100: Apple's share (core.serving.speed.APPLE_MATMUL_UTILISATION) is
    # named only on an Apple GPU (tests/gui/test_small_screens.py).
    assert field.text() == f"{SERVING_UTILISATION * 100:.0f} % (serving)"
    assert "In Inference mode 0 is 40 % (serving)" in field.toolTip()
    assert field.toolTip() == field.accessibleDescription()
    window.training_action.trigger()
    assert field.text() == "modelled"
    assert "Inference" not in field.toolTip()


def test_the_weights_row_is_the_weights_bar_with_what_it_holds_beside_them(window: MainWindow) -> None:
    """A GPTQ model under transformers holds AutoGPTQ's dequantisation buffer with its weights
    (core.serving.engines.exllama_buffer_bytes): the Serving tab's weights row gives the bar's
    figure, not the stored weights alone, and names the buffer (one answer everywhere)."""
    window.show()
    window.inference_action.trigger()
    window.controller.reset(llama_on_h100(engine="hf", context=8192, weight_dtype="gptq-int4"))
    window.tabs.setCurrentWidget(window.inference_panel)
    bar = window.chart.bars()[0]
    row = window.inference_panel.values["weights"].text()
    assert row.startswith(memory(bar.parts["weights"], window.inference_panel.unit) + ", of which ")
    assert "GPTQ dequantisation buffer" in row
    window.controller.reset(llama_on_h100(engine="hf", context=8192))  # bf16: the stored weights alone
    assert window.inference_panel.values["weights"].text() == memory(
        window.controller.estimate.inference.weights_bytes, window.inference_panel.unit
    )


def test_the_throughput_legend_is_off_the_points_and_concurrency_whole(qtbot: Any, window: MainWindow) -> None:
    """Before: the legend was anchored in the plot's view box, over the first points (where
    "per request" is highest), and SGLang's one running request on an RTX 4090 drew a
    concurrency axis from -0.5 to 2.5 with ticks at 0.5, 1.5."""
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.inference_action.trigger()
    plan = llama_on_h100(engine="sglang", context=8192, concurrent=4).with_hardware(gpu="rtx-4090")
    window.controller.reset(plan)
    window.tabs.setCurrentWidget(window.compute_panel)
    qtbot.wait(20)
    plot = window.compute_panel.serving.plot
    item = plot.getPlotItem()
    assert not item.legend.sceneBoundingRect().intersects(item.vb.sceneBoundingRect())
    low, high = item.vb.viewRange()[0]
    assert low >= 0
    ticks = [value for _spacing, values in plot.getAxis("bottom").tickValues(low, high, 300) for value in values]
    assert ticks and all(float(value).is_integer() for value in ticks), ticks


def test_held_on_the_card_says_what_the_verdict_judges(window: MainWindow) -> None:
    # docs/GUI.md, 2026-12-04: vLLM, 4 × 8,192 tokens on an RTX 4090 showed "Held on the card:
    # 24.2 GB" above a "fits" in 23.2 GB usable, with nothing saying which figure was judged.
    serve_on_a_4090(window, engine="vllm", context=8192, concurrent=4)
    window.set_unit("GiB")
    inf = window.controller.estimate.inference
    held = window.inference_panel.values["footprint"].text()
    assert held.startswith(memory(inf.footprint_bytes, "GiB"))
    assert f"the {memory(inf.total_bytes, 'GiB')} needed at once" in held  # in the unit picked
    assert "gpu_memory_utilization" in held


def test_rows_an_engine_has_no_figure_for_are_hidden_and_llama_cpp_names_its_buffers(window: MainWindow) -> None:
    # The Serving tab showed "— (vLLM only)" / "— (llama.cpp only)" rows and a PyTorch allocator
    # peak for llama.cpp, which allocates its model, KV and compute buffers once at load
    # (ggml-org/llama.cpp src/llama-context.cpp: the buffers it prints as "... buffer size").
    serve_on_a_4090(window, engine="llamacpp", context=8192)
    panel = window.inference_panel
    form, v = panel.form, panel.values
    assert form.isRowVisible(v["host"])
    assert not form.isRowVisible(v["non_torch"]) and not form.isRowVisible(v["scheduler"])
    inf = window.controller.estimate.inference
    assert v["apart"].text() == f"Buffers (ggml) it allocates at load: {memory(inf.peak_bytes, panel.unit)}"
    window.controller.reset(window.controller.plan.with_inference(engine="vllm"))
    assert form.isRowVisible(v["non_torch"]) and form.isRowVisible(v["scheduler"])
    assert not form.isRowVisible(v["host"])
    assert v["apart"].text().startswith("KV cache pool vLLM allocates at start-up: ")
    assert "sequences" in v["scheduler"].text()


def test_gpu_layers_minus_one_reads_auto(window: MainWindow) -> None:
    # core.inputs: "-1: auto, llama.cpp's own fit"; the field showed "-1 layers".
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-70b").spec, model_id="llama-3.1-70b", hardware=Hardware(gpu="rtx-4090"))
    window.controller.reset(plan.with_inference(engine="llamacpp", context=4096, gpu_layers=-1))
    field = window.serving_form.gpu_layers
    assert field.text() == "auto (llama.cpp's fit)"
    field.setValue(40)
    assert window.controller.plan.inference.gpu_layers == 40 and field.text() != "auto (llama.cpp's fit)"


def test_no_request_served_says_why_the_kv_cache_when_the_weights_fit(window: MainWindow) -> None:
    # 4 requests of 131,072 tokens of Llama 3.1 8B Q4_K_M (4.6 GB of weights) on an RTX 4090: the row read
    # "none: the weights alone do not fit".
    serve_on_a_4090(window, engine="llamacpp", context=131072, concurrent=4)
    text = window.inference_panel.values["concurrency"].text()
    assert text.startswith("none: ") and "KV cache" in text and "weights alone" not in text


def test_a_refused_start_reads_no_room_to_spare_and_queues_nothing(window: MainWindow) -> None:
    # SGLang emptied by 3 GiB other processes hold on an RTX 4090 (tests/core/test_held_by_others.py): the
    # banner read "Serving: out of memory · 16.6 GB of 20.3 GB usable — 3.69 GB to spare" and "⚠ 1 request
    # wait in the queue".
    serve_on_a_4090(window, engine="sglang", context=4096)
    window.controller.reset(window.controller.plan.with_hardware(held_by_others=3 * 2**30))
    window.settle_banner()
    assert window.controller.estimate.inference.max_concurrent == 0
    # h94start: the banner said "… to spare on the card, but no request fits" where the command line said "the card
    # holds the total, but no request fits": one sentence from core (Judgement.after_margin), both say it.
    judged = window.controller.estimate.judgement(Mode.INFERENCE)
    assert judged.after_margin == "the card holds the total, but no request fits"
    assert f"to spare; {judged.after_margin}" in window.verdict.headline.text()
    assert "on the card, but" not in window.verdict.headline.text()
    assert "queue" not in window.verdict.detail.text()


def test_one_queued_request_waits(window: MainWindow) -> None:
    # Two requests of 24,000 tokens of Llama 3.1 8B under vLLM on an RTX 4090: its 44,608-token pool serves
    # one, the other waits ("1 request wait" before).
    serve_on_a_4090(window, engine="vllm", context=24_000, concurrent=2)
    window.settle_banner()
    inf = window.controller.estimate.inference
    assert (inf.max_concurrent, inf.queued) == (1, 1)
    assert "⚠ 1 request waits in the queue" in window.verdict.detail.text()


def test_the_verdict_sentence_agrees_with_one_request(window: MainWindow) -> None:
    # h55ux: "1 request of 8,192 tokens need 7.52 GB …" (gpt-oss-20b under Ollama on an 8 GB laptop).
    serve_on_a_4090(window, engine="llamacpp", context=8192, concurrent=1)
    assert window.inference_panel.headline is not None
    text = window.inference_panel.headline.text()
    assert "1 request of 8,192 tokens needs " in text, text
    window.controller.reset(window.controller.plan.with_inference(concurrent=2))
    assert "2 requests of 8,192 tokens need " in window.inference_panel.headline.text()


@pytest.mark.parametrize("engine", ("vllm", "sglang", "hf", "llamacpp"))
def test_the_serving_panel_words_what_is_not_judged_as_the_command_line_does(window: MainWindow, engine: str) -> None:
    """h58left: the Serving panel showed vLLM's "Peak (allocator)" (weights + the whole KV pool + activations, 21.0 GB
    on an L4) beside "Needed at once" (17.5 GB), and its KV cache row the whole pool, while the command line
    (commit 2753058) printed the running requests' blocks and the pool on a line of its own, as what vLLM
    allocates at start-up, not judged. The panel prints the same line, in the same words (core's)."""
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="l4"))
    window.controller.reset(plan.with_inference(engine=engine))
    window.tabs.setCurrentWidget(window.inference_panel)
    panel = window.inference_panel
    est = window.controller.estimate
    inf = est.inference
    labels = [panel.form.itemAt(i).widget().text() for i in range(panel.form.count()) if panel.form.itemAt(i).widget()]
    assert not any("Peak (allocator)" in text for text in labels)
    line = panel.values["apart"].text()
    assert f"  {line}" in render_serving(est).splitlines()  # the command line's own line
    kv = next(b for b in inf.buckets if b.key is BucketKey.KV_CACHE)
    assert panel.values["kv_cache"].text().startswith(memory(kv.bytes, panel.unit))
    if engine in ("vllm", "sglang"):
        assert "(the running requests' blocks)" in panel.values["kv_cache"].text()
        assert memory(inf.kv_cache_bytes, panel.unit) in line and line.endswith("not judged")
    if engine == "vllm":  # (SGLang's pool on an L4 is empty: its static fraction leaves none)
        assert kv.bytes < inf.kv_cache_bytes  # one request's blocks, not the pool


def test_the_text_only_box_shows_for_image_text_models_and_a_refusal_leaves_the_plan(window: MainWindow) -> None:
    # core.inputs "inference.text_only": an image-text checkpoint's setting (gemma-3-4b carries SigLIP).
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    gemma = Plan(model=find_model("gemma-3-4b").spec, model_id="gemma-3-4b", hardware=Hardware(gpu="h100-sxm"))
    window.controller.reset(gemma.with_inference(engine=Engine.VLLM))
    assert form.form.isRowVisible(form.text_only)
    weights = window.controller.estimate.inference.weights_bytes
    form.text_only.click()
    assert window.controller.plan.inference.text_only
    # 419,816,304 bf16 tower parameters vLLM 0.19 no longer builds (core/vision.py, tests/core/test_vision.py).
    assert weights - window.controller.estimate.inference.weights_bytes == pytest.approx(419_816_304 * 2)
    # SGLang builds the tower whatever the requests hold: the switch is refused and the plan stays on vLLM.
    form.engine.setCurrentIndex(form.engine.findData("sglang"))
    assert window.controller.plan.inference.engine is Engine.VLLM
    window.controller.reset(llama_on_h100(engine=Engine.VLLM))
    assert not form.form.isRowVisible(form.text_only)  # a text model has no tower to leave out


def test_the_model_summary_says_how_the_mode_shown_holds_the_tower(window: MainWindow) -> None:
    """Seen in a render at the merge of h63text: with Text only ticked the model summary still said the tower was
    "(loaded, frozen)", while the Weights bar had dropped it. Training holds it frozen; vLLM text-only does not
    build it; llama.cpp reads a tower only from an mmproj file (core.serving.text_only.tower_serving_words)."""
    window.show()
    gemma = Plan(model=find_model("gemma-3-4b").spec, model_id="gemma-3-4b", hardware=Hardware(gpu="h100-sxm"))
    window.controller.reset(gemma.with_inference(engine=Engine.VLLM, text_only=True))
    summary = window.model_form.summary
    window.training_action.trigger()
    assert "(loaded, frozen)" in summary.text()
    window.inference_action.trigger()
    assert "(not loaded: text only)" in summary.text()
    window.controller.reset(gemma.with_inference(engine=Engine.VLLM))
    assert "(loaded)" in summary.text()
    window.controller.reset(gemma.with_inference(engine=Engine.LLAMACPP))
    assert "not loaded: llama.cpp reads a tower only from a separate mmproj file" in summary.text()


def test_the_model_summary_says_sglang_takes_no_images_of_gemma_3_without_the_flag(window: MainWindow) -> None:
    """Before branch h76sglui the summary said "(loaded)" for Gemma 3 on SGLang at its defaults, true of the tower
    (SGLang builds SigLIP whatever the flag, core.serving.text_only) but silent on what a person serving an image-text
    model needs: SGLang takes no images of it without --enable-multimodal (mm_disabled_models). The summary gives the
    words the command line and the report give (core.serving.text_only.tower_line, tests/core/
    test_one_answer_serving.py)."""
    window.show()
    window.inference_action.trigger()
    gemma = Plan(model=find_model("gemma-3-27b").spec, model_id="gemma-3-27b", hardware=Hardware(gpu="h100-sxm"))
    summary = window.model_form.summary
    for flag, words in (
        (False, "loaded, yet SGLang takes no images without --enable-multimodal"),
        (True, "loaded, images taken (--enable-multimodal)"),
    ):
        plan = gemma.with_inference(engine=Engine.SGLANG, sglang_enable_multimodal=flag)
        window.controller.reset(plan)
        line = tower_line(plan.model, plan.inference)
        assert line.endswith(words)
        # the window's words, after its own count: "+ 423M in its SigLIP vision tower and projector (words)"
        assert f"in its SigLIP vision tower and projector ({words})" in summary.text()


def test_the_cuda_graphs_box_and_the_prefix_caching_list_change_the_pool_at_once(window: MainWindow) -> None:
    """core.inputs "inference.cuda_graphs" (vLLM and SGLang) and "inference.prefix_caching" (vLLM, hybrids): vLLM
    0.21 sets its CUDA-graph estimate aside before the KV cache, --enforce-eager none (core.serving.vllm_versions
    graphs_captured); a Granite 4.0-H request holds two state blocks a recurrent group in 0.28's "align" mode,
    one with prefix caching off (core.serving.vllm_hybrid.state_blocks)."""
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    window.controller.reset(llama_on_h100(engine=Engine.VLLM, vllm_version=VllmVersion.V0_21))
    assert form.form.isRowVisible(form.cuda_graphs)
    assert not form.form.isRowVisible(form.prefix_caching)  # a dense model's pool does not depend on it
    pool = window.controller.estimate.inference.kv_cache_bytes
    # From 0.21 the rule's estimate (core.serving.vllm_rules.vllm_graph_reserve): Llama 3.1 8B's 32 layers at an
    # H100's 1,024 sequences and 8,192 batched tokens.
    graphs = vllm_graph_estimate(32, 1024, 8192, "h100-sxm", VllmVersion.V0_21)
    assert window.controller.estimate.inference.cuda_graph_bytes == pytest.approx(graphs)
    form.cuda_graphs.click()
    assert window.controller.plan.inference.cuda_graphs is False
    assert window.controller.estimate.inference.kv_cache_bytes - pool == pytest.approx(graphs, rel=0.01)
    granite = find_model("granite-4.0-h-tiny")
    window.controller.reset(
        llama_on_h100(engine=Engine.VLLM, vllm_version=VllmVersion.V0_28).on_model(granite.spec, granite.id)
    )
    assert form.form.isRowVisible(form.prefix_caching)
    requests = window.controller.estimate.inference.max_concurrency
    form.prefix_caching.setCurrentIndex(form.prefix_caching.findData(PrefixCaching.OFF))
    assert window.controller.plan.inference.prefix_caching is PrefixCaching.OFF
    assert window.controller.estimate.inference.max_concurrency > requests
    window.controller.reset(llama_on_h100(engine=Engine.LLAMACPP))
    assert not form.form.isRowVisible(form.cuda_graphs)  # llama.cpp's graphs follow its build, not this switch


def test_the_compile_cache_list_plans_a_cold_start(window: MainWindow) -> None:
    """core.inputs "inference.compile_cache": vLLM V1 with CUDA graphs on; cold takes the fitted cold-compile term
    (core.serving.fit COLD_COMPILE_PEAK, 0.55 GiB) from the pool, and the warm plan's warning goes."""
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    window.controller.reset(llama_on_h100(engine=Engine.VLLM, vllm_version=VllmVersion.V0_30))
    assert form.form.isRowVisible(form.compile_cache)
    assert "Cold: the first start" in form.compile_cache.toolTip()
    assert form.compile_cache.currentData() == CompileCache.WARM
    pool = window.controller.estimate.inference.kv_cache_bytes
    form.compile_cache.setCurrentIndex(form.compile_cache.findData(CompileCache.COLD))
    assert window.controller.plan.inference.compile_cache is CompileCache.COLD
    lost = pool - window.controller.estimate.inference.kv_cache_bytes
    # whole 16-token blocks of Llama 3.1 8B's 128 KiB a token
    assert lost == pytest.approx(DEFAULT_FIT.vllm_cold_compile_bytes[COLD_COMPILE_PEAK], abs=16 * 131_072)
    form.compile_cache.grab().save("/tmp/h94cold-compile-cache.png")
    form.grab().save("/tmp/h94cold-serving-form.png")
    form.cuda_graphs.click()  # --enforce-eager compiles nothing: the list goes
    assert not form.form.isRowVisible(form.compile_cache)
    window.controller.reset(llama_on_h100(engine=Engine.VLLM, vllm_version=VllmVersion.V0_7))
    assert not form.form.isRowVisible(form.compile_cache)  # V0 compiles nothing by default


def test_the_experts_in_ram_field_shows_for_a_moe_on_llama_server_and_moves_the_weights(window: MainWindow) -> None:
    # core.inputs "inference.cpu_moe_layers": llama.cpp's --n-cpu-moe, a mixture of experts under llama-server only.
    window.show()
    window.inference_action.trigger()
    form = window.serving_form
    qwen = Plan(model=find_model("qwen3-30b-a3b").spec, model_id="qwen3-30b-a3b", hardware=Hardware(gpu="rtx-4060"))
    window.controller.reset(qwen.with_inference(engine=Engine.LLAMACPP, context=8192))
    assert form.form.isRowVisible(form.cpu_moe_layers)
    weights = window.controller.estimate.inference.weights_bytes
    form.cpu_moe_layers.setValue(2)
    assert window.controller.plan.inference.cpu_moe_layers == 2
    # Layers 0 and 1's ffn_up / gate / down _exps of the Q4_K_M file (tests/core/test_llamacpp_cpu_moe.py: layer 0's
    # 391,643,136 bytes, the same in layer 1) leave the GPU's model buffer.
    assert weights - window.controller.estimate.inference.weights_bytes == pytest.approx(2 * 391_643_136)
    window.controller.reset(qwen.with_inference(engine=Engine.LLAMACPP, ollama_version=OllamaVersion.V0_12_11))
    assert not form.form.isRowVisible(form.cpu_moe_layers)  # Ollama has no such option
    window.controller.reset(llama_on_h100(engine=Engine.LLAMACPP))
    assert not form.form.isRowVisible(form.cpu_moe_layers)  # a dense model has no routed experts


def test_the_serving_tab_names_vllms_context_row_as_the_context_not_non_torch_memory(window: MainWindow) -> None:
    # vLLM's overhead bucket holds its non-torch memory (core/serving/engines.py _vllm_started: Term("non-torch
    # memory", ...)), shown on its own "Outside torch" row; the row below shows the process's CUDA context
    # (InferenceEstimate.overhead_bytes) but was named after the bucket's term: "non-torch memory: 0.54 GB"
    # under "Outside torch: 0.31 GB", two names for one thing with two figures.
    serve_on_a_4090(window, engine="vllm", context=8192)
    panel = window.inference_panel
    label = panel.form.labelForField(panel.values["overhead"])
    assert label.text() == "CUDA context:"
    assert panel.form.labelForField(panel.values["non_torch"]).text() == "Outside torch:"
    # SGLang's bucket names nothing: on an AMD card the row is ROCm's (core.runtime.ROCM_RUNTIME_NAMES).
    plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="mi300x"))
    window.controller.reset(plan.with_inference(engine="sglang", context=8192))
    assert label.text() == "HIP context:"


def test_vllms_scheduler_fields_are_named_in_words(window: MainWindow) -> None:
    # The Serving form named one field by vLLM's argument, "max_num_seqs:", beside "Batched tokens:" for
    # max_num_batched_tokens; the Serving tab's Scheduler row reads "256 sequences, 2,048 tokens per step"
    # (vLLM vllm/config/scheduler.py: max_num_seqs, the most sequences in one iteration).
    serve_on_a_4090(window, engine="vllm", context=8192)
    labels = window.serving_form.labels
    assert labels["inference.max_num_seqs"].text() == "Sequences per step:"
    assert "max_num_seqs" in window.serving_form.max_num_seqs.toolTip()  # vLLM's own name stays findable
    from core.inputs import INPUTS

    # No input is labelled with its own attribute name (a field path instead of words).
    assert [i.path for i in INPUTS if "_" in i.label and i.label == i.path.rsplit(".", 1)[-1]] == []


@pytest.mark.parametrize("engine", ["hf", "vllm", "sglang", "llamacpp"])
def test_every_engine_s_rates_say_per_request_or_in_total_as_the_cli_does(window: MainWindow, engine: str) -> None:
    # docs/GUI.md, 2026-12-07 (left 3): SGLang with one request on an RTX 4090 read "Per request: 53 tokens/s"
    # over "In total: 38 tokens/s", with no word on why the total is lower. Both rows now carry the words of the
    # CLI's speed line (`vramplan estimate --mode inference`: ServingSpeed.rates_sentence), for every engine.
    from core.cli.render import render_serving
    from core.format import TOTAL_RATE_BASIS

    serve_on_a_4090(window, engine=engine, context=4096, concurrent=1)
    window.tabs.setCurrentWidget(window.compute_panel)
    speed = window.controller.estimate.inference.speed
    rows = window.compute_panel.serving.values
    each = f"{speed.per_request_tokens_per_s:,.0f} tokens/s each while decoding"
    total = f"{speed.total_tokens_per_s:,.0f} output tokens/s"
    assert rows["per_request"].text() == each
    assert rows["total"].text() == f"<b>{total}</b> ({TOTAL_RATE_BASIS})"
    cli = render_serving(window.controller.estimate)
    assert f"{each}, {total} in total ({TOTAL_RATE_BASIS})" in cli


def test_the_serving_tab_s_rows_read_as_the_banner_and_the_other_rows(window: MainWindow) -> None:
    # The window review (h83ux): HF generate's Concurrency row read "at most 6 × 4,096 tokens" under a banner
    # saying "at most 6 requests of 4,096 tokens at once", and KV per token "131,072 bytes" where every other
    # row and the command line write bytes through core.format.memory ("131,072 B", "0.54 GB").
    serve_on_a_4090(window, engine="hf", context=4096, concurrent=1)
    inf = window.controller.estimate.inference
    rows = window.inference_panel.values
    assert inf.max_concurrent > 1
    assert rows["concurrency"].text() == f"at most {inf.max_concurrent:,} requests of 4,096 tokens at once"
    assert rows["concurrency"].text()[len("at most ") :] in window.verdict.detail.text()
    assert rows["kv_per_token"].text() == memory(inf.kv_bytes_per_token) == f"{inf.kv_bytes_per_token:,.0f} B"


def test_the_banner_and_the_longest_context_row_name_the_models_limit(window: MainWindow) -> None:
    # Llama 2 7B reads 4,096 positions (its config.json's max_position_embeddings); served 1 × 4,096 tokens the
    # banner said "... or 4,096 tokens each at 1 request". It now says the words the command line and the report
    # say (InferenceEstimate.limits_sentence; tests/core/test_serving.py checks those two).
    window.show()
    window.inference_action.trigger()
    plan = Plan(model=find_model("llama-2-7b").spec, model_id="llama-2-7b").with_inference(engine=Engine.HF)
    window.controller.reset(plan)
    window.settle_banner()
    inf = window.controller.estimate.inference
    detail = window.verdict.detail.text()
    assert inf.limits_sentence(plan) in detail and "(the model's limit) at once" in detail
    assert "tokens each" not in detail
    window.tabs.setCurrentWidget(window.inference_panel)
    assert window.inference_panel.values["max_context"].text() == "4,096 tokens (the model's limit)"
    # On a 24 GB card with 32 requests of 4,096 tokens the memory sets it: no such words.
    window.controller.reset(plan.with_input("hardware.gpu", "rtx-4090").with_inference(concurrent=32))
    window.settle_banner()
    assert "tokens each at 32 requests" in window.verdict.detail.text()
    assert "model's limit" not in window.verdict.detail.text()
    assert "model's limit" not in window.inference_panel.values["max_context"].text()
