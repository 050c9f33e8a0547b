"""The Serving form's release, weight and KV-cache lists offer only what Plan validation takes (issue 23): an entry the
plan's engine release refuses, the rest of the plan as it is, is greyed and its tooltip gives core's reason
(core.plan.refused_choices, the words of core.plan.serving_refusal); the arrow keys pass over it. Before branch
h93form every entry was offered and a refused pick was only then refused (tests/gui/test_serving_refusal.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel

from core.catalogue import find_model
from core.dtypes import KvDtype, WeightFormat
from core.plan import Engine, Plan, SglangVersion, VllmVersion, default_plan_on
from gui.forms.fields import ChoiceField
from gui.main_window import MainWindow


def _greyed(field: ChoiceField) -> dict[str, str]:
    """The field's greyed entries, by value, with their tooltips."""
    entries = field.model()
    assert isinstance(entries, QStandardItemModel)
    greyed = {}
    for index in range(field.count()):
        item = entries.item(index)
        assert item is not None
        if not item.isEnabled():
            greyed[str(field.itemData(index))] = str(field.itemData(index, Qt.ItemDataRole.ToolTipRole))
    return greyed


def _serving(window: MainWindow, plan: Plan) -> None:
    window.show()
    window.inference_action.trigger()
    window.controller.reset(plan)


def _on(model_id: str, **inference: object) -> Plan:
    entry = find_model(model_id)
    return default_plan_on(entry.spec, entry.id).with_inference(**inference)


def test_vllm_0_8_greys_mxfp4_naming_the_first_line_that_loads_it(window: MainWindow) -> None:
    # A 4-bit AWQ plan on vLLM 0.8: 0.6-0.9's --quantization choices lack mxfp4, 0.10's has it (core.inputs
    # VLLM_WEIGHT_LINES, held to resources/engine_flags/vllm_serve.txt by tests/core/test_engine_flag_values.py).
    # NF4 (bitsandbytes, up to 0.27) and every other format load on 0.8: only MXFP4 is greyed.
    _serving(window, _on("llama-3.1-8b", engine=Engine.VLLM, vllm_version=VllmVersion.V0_8,
                         weight_dtype=WeightFormat.AWQ_INT4))
    form = window.serving_form
    greyed = _greyed(form.weights)
    assert list(greyed) == [WeightFormat.MXFP4.value]
    assert greyed[WeightFormat.MXFP4.value].startswith("Not offered: vLLM 0.8 has no MXFP4")
    assert "from vLLM 0.10" in greyed[WeightFormat.MXFP4.value]
    assert form.weights.currentData() == WeightFormat.AWQ_INT4.value  # the plan's own entry, offered
    # vLLM 0.8 keeps 16-bit and fp8 caches; its --kv-cache-dtype has no int8 / int4 / fp8_per_token_head (from 0.20 /
    # 0.25 / 0.20)
    assert list(_greyed(form.kv)) == [KvDtype.INT8.value, KvDtype.INT4.value, KvDtype.FP8_PER_TOKEN_HEAD.value]
    # The next line loads it: the entry comes back.
    window.controller.reset(window.controller.plan.with_inference(vllm_version=VllmVersion.V0_10))
    assert _greyed(form.weights) == {}


def test_nf4_is_greyed_past_vllm_0_27(window: MainWindow) -> None:
    # vLLM 0.28's QuantizationMethods has no bitsandbytes (core.inputs.VLLM_WEIGHT_LINES: NF4 up to 0.27).
    _serving(window, _on("llama-3.1-8b", engine=Engine.VLLM, vllm_version=VllmVersion.V0_28))
    greyed = _greyed(window.serving_form.weights)
    assert list(greyed) == [WeightFormat.NF4.value]
    assert "up to vLLM 0.27" in greyed[WeightFormat.NF4.value]


def test_the_version_list_greys_the_lines_that_cannot_load_the_plans_weights(window: MainWindow) -> None:
    # gpt-oss's MXFP4 weights on vLLM 0.19: 0.6, 0.7, 0.8 and 0.9 do not load them (from 0.10), and say so on the
    # list before a pick; the arrow keys stop at 0.10, the plan is never refused. bf16 weights bring them back.
    _serving(window, _on("gpt-oss-20b", engine=Engine.VLLM, weight_dtype=WeightFormat.MXFP4))
    form = window.serving_form
    greyed = _greyed(form.vllm_version)
    assert list(greyed) == ["0.6", "0.7", "0.8", "0.9"]
    assert all(tip.startswith(f"Not offered: vLLM {line} has no MXFP4") for line, tip in greyed.items())
    assert all(tip.endswith("takes the format from vLLM 0.10") for tip in greyed.values())
    window.controller.reset(window.controller.plan.with_inference(vllm_version=VllmVersion.V0_10))
    form.vllm_version.setFocus()
    edited: list[object] = []
    form.vllm_version.edited.connect(edited.append)
    for key in (Qt.Key.Key_Up, Qt.Key.Key_Home):
        form.vllm_version.keyPressEvent(_key(key))
    assert edited == [] and window.controller.plan.inference.vllm_version is VllmVersion.V0_10
    window.controller.reset(window.controller.plan.with_inference(weight_dtype=WeightFormat.BF16))
    assert _greyed(form.vllm_version) == {}


def test_sglang_before_0_5_1_and_mxfp4_grey_each_other(window: MainWindow) -> None:
    # SGLang's --quantization takes mxfp4 from 0.5.1 (0.4.10's choices lack it; core.inputs.SGLANG_WEIGHT_RELEASES).
    _serving(window, _on("llama-3.1-8b", engine=Engine.SGLANG, sglang_version=SglangVersion.V0_4_10))
    form = window.serving_form
    greyed = _greyed(form.weights)
    assert list(greyed) == [WeightFormat.MXFP4.value] and "from SGLang 0.5.1" in greyed[WeightFormat.MXFP4.value]
    assert _greyed(form.vllm_version) == {}  # the other engine's list is not read
    window.controller.reset(_on("gpt-oss-20b", engine=Engine.SGLANG, weight_dtype=WeightFormat.MXFP4))
    old = [v.value for v in SglangVersion][: list(SglangVersion).index(SglangVersion.V0_5_1)]
    assert list(_greyed(form.sglang_version)) == old  # 0.4.0 - 0.4.10


def test_a_hybrids_kv_list_greys_int8_and_int4_on_vllm(window: MainWindow) -> None:
    # A hybrid's cache on vLLM is planned 16-bit or fp8 on every line, the newest too (core.plan
    # _hybrid_serving_refusal: its page rule was not read for the per-token-head integer caches). Its version list
    # greys the lines before those its hybrid rules were read for (vLLM 0.11 - 0.34: core.plan.HYBRID_VLLM_LINES).
    _serving(window, _on("granite-4.0-h-tiny", engine=Engine.VLLM, vllm_version=VllmVersion.V0_34))
    form = window.serving_form
    greyed = _greyed(form.kv)
    assert list(greyed) == [KvDtype.INT8.value, KvDtype.INT4.value, KvDtype.FP8_PER_TOKEN_HEAD.value]
    assert all("not vLLM's per-token-head ones" in tip for tip in greyed.values())
    assert list(_greyed(form.vllm_version)) == ["0.6", "0.7", "0.8", "0.9", "0.10"]


def _key(key: Qt.Key) -> object:
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QKeyEvent

    return QKeyEvent(QEvent.Type.KeyPress, key, Qt.KeyboardModifier.NoModifier)


def test_transformers_before_4_49_greys_fp8_weights(window: MainWindow) -> None:
    # Hugging Face generate: the fine-grained FP8 linear is in the 4.49.0 wheel, not in 4.48.3's (core.plan
    # _transformers_fp8_refusal). On 4.48 the FP8 entry is greyed; with FP8 weights on 5.25, 4.45 - 4.48 are.
    _serving(window, _on("qwen3-8b", engine=Engine.HF, transformers_version="4.48"))
    form = window.serving_form
    greyed = _greyed(form.weights)
    assert list(greyed) == [WeightFormat.FP8.value] and "from 4.49" in greyed[WeightFormat.FP8.value]
    window.controller.reset(_on("qwen3-8b", engine=Engine.HF, weight_dtype=WeightFormat.FP8))
    assert list(_greyed(form.transformers_version)) == ["4.45", "4.46", "4.47", "4.48"]


def test_a_plan_set_in_training_mode_is_greyed_once_inference_shows(window: MainWindow) -> None:
    # The hidden form skips the lists in Training mode (refused_choices costs ~0.5 ms a serving change); switching to
    # Inference redraws them for the plan that arrived meanwhile: gpt-oss MXFP4 greys vLLM 0.6 - 0.9 (from 0.10).
    window.show()
    form = window.serving_form
    window.controller.reset(_on("gpt-oss-20b", engine=Engine.VLLM, weight_dtype=WeightFormat.MXFP4))
    window.inference_action.trigger()
    assert list(_greyed(form.vllm_version)) == ["0.6", "0.7", "0.8", "0.9"]


def test_vllm_kv_list_offers_int8_from_0_20_and_int4_from_0_25(window: MainWindow) -> None:
    # vLLM's --kv-cache-dtype takes int8_per_token_head from 0.20 and int4_per_token_head from 0.25
    # (resources/engine_flags/vllm_serve.txt: "--kv-cache-dtype=int8_per_token_head 0.20-0.34",
    # "--kv-cache-dtype=int4_per_token_head 0.25-0.34"; core.inputs.VLLM_KV_FROM), fp8_per_token_head from 0.20
    # ("--kv-cache-dtype=fp8_per_token_head 0.20-0.34").
    _serving(window, _on("llama-3.1-8b", engine=Engine.VLLM, vllm_version=VllmVersion.V0_19))
    form = window.serving_form
    greyed = _greyed(form.kv)
    assert list(greyed) == [KvDtype.INT8.value, KvDtype.INT4.value, KvDtype.FP8_PER_TOKEN_HEAD.value]
    assert greyed[KvDtype.INT8.value].startswith("Not offered: vLLM 0.19's --kv-cache-dtype has no int8_per_token_head")
    window.controller.reset(window.controller.plan.with_inference(vllm_version=VllmVersion.V0_20))
    assert list(_greyed(form.kv)) == [KvDtype.INT4.value]
    window.controller.reset(window.controller.plan.with_inference(vllm_version=VllmVersion.V0_25))
    assert _greyed(form.kv) == {}
    # an int4 plan greys the lines before 0.25 on its version list, each naming the line that takes it
    window.controller.reset(window.controller.plan.with_inference(kv_dtype=KvDtype.INT4))
    greyed = _greyed(form.vllm_version)
    assert list(greyed) == [v.value for v in VllmVersion][: list(VllmVersion).index(VllmVersion.V0_25)]
    assert all("int4_per_token_head (int4) from 0.25" in tip for tip in greyed.values())


def test_sglang_and_a_latent_model_grey_the_integer_kv_formats(window: MainWindow) -> None:
    # SGLang's --kv-cache-dtype holds no integer format in any release (sglang_server.txt, 0.4.0 - 0.5.23); vLLM's
    # MLA backends keep no int8_per_token_head (only TRITON_ATTN's supported_kv_cache_dtypes names it, 0.34.0).
    _serving(window, _on("llama-3.1-8b", engine=Engine.SGLANG))
    form = window.serving_form
    greyed = _greyed(form.kv)
    assert list(greyed) == [KvDtype.INT8.value, KvDtype.INT4.value, KvDtype.FP8_PER_TOKEN_HEAD.value]
    assert all("takes no integer format" in greyed[k.value] for k in (KvDtype.INT8, KvDtype.INT4))
    assert "takes no per-token-head format" in greyed[KvDtype.FP8_PER_TOKEN_HEAD.value]
    window.controller.reset(_on("deepseek-v2-lite", engine=Engine.VLLM, vllm_version=VllmVersion.V0_34))
    greyed = _greyed(form.kv)
    assert list(greyed) == [KvDtype.INT8.value, KvDtype.INT4.value, KvDtype.FP8_PER_TOKEN_HEAD.value]
    assert all("MLA attention backends" in tip for tip in greyed.values())
