"""PEFT IA3 (branch h40peft): the vectors PEFT trains, what their scalings keep, the plan's
setting through the plan file, the command line and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the
version of the method_comparison results), src/peft/tuners/ia3/layer.py (``IA3Layer.update_layer``,
``Linear.forward``) and src/peft/tuners/ia3/config.py (``IA3Config.__post_init__``).
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanError
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.params import param_counts
from core.plan import LoraSettings, Method, Plan, Preset
from core.presets import plan_for_model
from core.training.activations import layer_activations

# PEFT's IA3 default for Llama: TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING["llama"] and
# ..._FEEDFORWARD_MODULES_MAPPING["llama"] (src/peft/utils/constants.py at 51c2ff66).
DEFAULT_TARGETS = ("k_proj", "v_proj", "down_proj")


def _ia3(
    targets: tuple[str, ...] = DEFAULT_TARGETS, feedforward: tuple[str, ...] = ("down_proj",), **kw: object
) -> Plan:
    lora = LoraSettings(targets=targets, ia3_feedforward=feedforward)
    return plan_for_model("llama-3.2-3b", method=Method.IA3, lora=lora, **kw)


def test_trainable_vectors_are_peft_s_count() -> None:
    # method_comparison/MetaMathQA/results/ia3--llama-3.2-3B-default.json (peft 51c2ff66):
    # "num_trainable_params": 286720 for k_proj, v_proj, down_proj (feedforward down_proj):
    # 28 blocks × (1,024 + 1,024 out rows + 8,192 in columns).
    counts = param_counts(_ia3())
    assert (counts.trainable, counts.adapter) == (286_720, 286_720)
    # ia3--llama-3.2-3B-all-attn-5k-lr0.005.json: every projection, feedforward gate, up and
    # down: "num_trainable_params": 630784.
    every = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert param_counts(_ia3(every, ("gate_proj", "up_proj", "down_proj"))).trainable == 630_784


def _terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items if t.label.startswith("IA3")}


def test_scalings_keep_the_raw_outputs_and_the_cast_inputs() -> None:
    # Trainer(bf16=True) on a bf16 model: bf16 matmul outputs, float32 vectors. Linear.forward
    # keeps k's and v's raw outputs (N × 1,024 each, 2 bytes) for the vectors' gradients, and
    # down_proj's input cast to float32 (N × 8,192, 4 bytes).
    plan = _ia3(preset=Preset.TRAINER_BF16)
    n = plan.workload.micro_batch * plan.workload.seq_len
    assert _terms(plan) == {
        "IA3: raw outputs of the output-scaled targets": n * 2 * 1024 * 2,
        "IA3: feedforward inputs in the vectors' dtype": n * 8192 * 4,
    }


def test_feedforward_inputs_in_the_vectors_dtype_are_one_tensor() -> None:
    # float32 vectors on a bf16 model: gate_proj and up_proj each cast the MLP-norm output to
    # float32 and keep their own copy (N × 3,072 × 4 bytes each).
    fp32 = _ia3(("gate_proj", "up_proj"), ("gate_proj", "up_proj"), preset=Preset.PURE_BF16)
    n = fp32.workload.micro_batch * fp32.workload.seq_len
    assert _terms(fp32) == {"IA3: feedforward inputs in the vectors' dtype": 2 * n * 3072 * 4}
    # bf16 vectors: ``x.to(ia3_l.dtype)`` returns x itself, so both keep the one tensor, once.
    bf16 = fp32.with_changes(preset=Preset.CUSTOM, adapter_dtype=Dtype.BF16)
    assert _terms(bf16) == {"IA3: feedforward inputs in the vectors' dtype": n * 3072 * 2}
    assert not _terms(fp32.with_method(Method.LORA))  # LoRA keeps no IA3 term


def test_bad_settings_are_refused() -> None:
    with pytest.raises(PlanError, match="feedforward_modules should be a subset of target_modules"):
        _ia3(("k_proj", "v_proj"), ("down_proj",))
    with pytest.raises(PlanError, match="lora.ia3_feedforward"):
        _ia3(feedforward=("fc9",))
    with pytest.raises(PlanError, match="lora.targets"):
        LoraSettings(targets=())


def test_switching_from_lora_s_default_takes_peft_s_ia3_default() -> None:
    # IA3Config() with no target_modules: PEFT's mapping (DEFAULT_TARGETS above), 286,720 vectors
    # on Llama 3.2 3B (ia3--llama-3.2-3B-default.json, as test_trainable_vectors_are_peft_s_count).
    lora = plan_for_model("llama-3.2-3b", method=Method.LORA)  # q_proj, v_proj: LoRA's default
    ia3 = lora.with_method(Method.IA3)
    assert (ia3.lora.targets, ia3.lora.ia3_feedforward) == (DEFAULT_TARGETS, ("down_proj",))
    assert param_counts(ia3).trainable == 286_720
    assert ia3.with_method(Method.LORA).lora.targets == ("q_proj", "v_proj")  # and back again
    assert ia3.with_input("method", "dora").lora.targets == ("q_proj", "v_proj")  # the window's switch


def test_switching_keeps_chosen_targets() -> None:
    chosen = plan_for_model("llama-3.2-3b", method=Method.LORA).with_lora(targets=("q_proj", "k_proj"))
    ia3 = chosen.with_method(Method.IA3)
    assert (ia3.lora.targets, ia3.lora.ia3_feedforward) == (("q_proj", "k_proj"), ())
    assert param_counts(ia3).trainable == 28 * (3072 + 1024)  # a vector per output row of each
    assert ia3.with_method(Method.LORA).lora.targets == ("q_proj", "k_proj")


def test_plan_file_round_trips_and_old_files_read_peft_s_default() -> None:
    plan = _ia3(("k_proj", "v_proj", "up_proj", "down_proj"), ("up_proj", "down_proj"))
    assert loads(dumps(plan)) == plan
    # A file written before the setting has no ia3_feedforward key: it reads as down_proj.
    document = json.loads(dumps(plan_for_model("llama-3.2-3b", method=Method.LORA)))
    del document["plan"]["lora"]["ia3_feedforward"]
    old = loads(json.dumps(document))
    assert old == plan_for_model("llama-3.2-3b", method=Method.LORA)
    assert old.lora.ia3_feedforward == ("down_proj",)


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--method", "ia3", "--json"]
    assert main([*args, "--lora-targets", "k_proj,v_proj,down_proj"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 286_720
    assert main(args) == 0  # no targets typed: PEFT's IA3 default, as IA3Config() picks
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 286_720
    assert main([*args, "--ia3-feedforward", "down_proj"]) == 0
    capsys.readouterr()
    typed = [*args, "--lora-targets", "q_proj,v_proj", "--ia3-feedforward", "down_proj"]
    assert main(typed) == 2  # typed, and not among the typed targets: refused as PEFT refuses it
    assert "subset of the targets" in capsys.readouterr().err


def test_exporters_say_they_write_lora() -> None:
    written = export(_ia3(), Target.TRL)
    assert written.cannot("method.kind") and written.cannot("method.lora.ia3_feedforward")
