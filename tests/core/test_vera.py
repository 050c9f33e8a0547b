"""PEFT's VeRA (branch h53vera): the vectors PEFT trains, the shared frozen projections, what each target keeps,
the plan through the plan file, the command line, adapter_config.json and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/vera/layer.py (``update_layer``, ``Linear.forward``),
src/peft/tuners/vera/model.py (``_find_dim``, ``_init_vera_A_vera_B``), src/peft/tuners/vera/config.py (defaults),
src/peft/tuners/tuners_utils.py (``_move_adapter_to_device_of_base_layer``, ``cast_adapter_dtype``).
tools/measure/lycoris_check.py checks the kept tensors on CPU with PEFT's own layers.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import param_counts, vera_projection_elements
from core.plan import Autocast, LoraSettings, Method, Plan, Preset
from core.presets import default_plan, plan_for_model
from core.training.activations import layer_activations
from core.training.flops import token_flops
from core.training.optimizer import largest_trainable_tensor, trainable_tensors

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads x 128, num_hidden_layers
R = 256  # experiments/vera/llama-3.2-3B-default/adapter_config.json: "r": 256
N = 4 * 768  # the corpus row's micro-batch 4 at 768 tokens (memory_figures.json)


def _plan(rank: int = R, **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast,
    # q_proj and v_proj (PEFT's Llama default, target_modules null), micro-batch 4 at 768 tokens.
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    lora = LoraSettings(rank=rank, targets=("q_proj", "v_proj"))
    plan = plan_for_model("llama-3.2-3b", method=Method.VERA, lora=lora, **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)


def _vera_terms(plan: Plan) -> dict[str, float]:
    return {t.label: t.bytes for t in layer_activations(plan, False).items if t.label.startswith("VeRA")}


def test_trainable_vectors_are_peft_s_count() -> None:
    # vera--llama-3.2-3B-default.json: "num_trainable_params": 129024 = 28 x (q: 256 + 3,072, v: 256 + 1,024).
    plan = _plan()
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (129_024, LAYERS * 2 * 2)
    assert largest_trainable_tensor(plan) == D  # q_proj's lambda_b


def test_shared_projections_are_frozen_float32_weights() -> None:
    # _find_dim: the largest (out, in) over the targets is (3,072, 3,072); vera_A (256, 3,072), vera_B (3,072, 256),
    # cast to float32 by cast_adapter_dtype (BufferDict entries too): 6,291,456 B once, not trained.
    plan = _plan()
    assert vera_projection_elements(plan) == R * (D + D)
    weights = {t.label: t.bytes for t in estimate(plan).worst.buckets[0].terms}
    assert weights["VeRA shared vera_A, vera_B (frozen, float32)"] == R * (D + D) * 4
    assert vera_projection_elements(plan.with_method(Method.LORA)) == 0


def test_each_target_keeps_two_products_and_no_input_copy() -> None:
    kept = _vera_terms(_plan())
    # lambda_d * (A x) keeps A x (N x r) and lambda_b * (B .) keeps B's output (N x out), float32; the float32
    # copy of x (_cast_input_dtype to lambda_d's dtype) is read by F.linear with a frozen weight: not kept.
    assert kept == {"VeRA: A·x kept for λ_d": 2 * N * R * 4, "VeRA: B's output kept for λ_b": N * (D + KV) * 4}
    labels = {t.label for t in layer_activations(_plan(), False).items}
    assert not any("attention norm output" in label for label in labels)
    # Under bf16 autocast: both products bf16, and each F.linear keeps its fresh bf16 cast of the frozen slices.
    cast = _vera_terms(_plan(autocast=Autocast.BF16))
    assert cast["VeRA: A·x kept for λ_d"] == 2 * N * R * 2
    assert cast["VeRA: B's output kept for λ_b"] == N * (D + KV) * 2
    slices = "VeRA: 16-bit casts of the sliced vera_A, vera_B (autocast, kept by F.linear)"
    assert cast[slices] == R * ((D + D) + (D + KV)) * 2


def test_the_rule_is_the_cpu_check_s_figure() -> None:
    # tools/measure/lycoris_check.py (torch 2.13.0 CPU, peft 0.18.0): q_proj 256 -> 256, v_proj 256 -> 64, N 128,
    # r 8: 172,032 B kept beyond the outputs without autocast, 99,328 B under bf16 autocast (measured).
    plan = _plan(8).with_workload(micro_batch=1, seq_len=128)
    tiny = replace(plan.model, hidden_size=256, num_heads=4, num_kv_heads=1, head_dim=64)
    plan = plan.with_changes(model=tiny)
    assert sum(_vera_terms(plan).values()) == 172_032
    assert sum(_vera_terms(plan.with_changes(autocast=Autocast.BF16)).values()) == 99_328


def test_autocast_caches_no_copy_of_the_vectors() -> None:
    # The vectors only multiply: autocast casts nothing of them (lycoris_check.py lists no cast of lambda_b, lambda_d).
    labels = {t.label for t in estimate(_plan(autocast=Autocast.BF16)).worst.buckets[0].terms}
    assert "16-bit copies of the adapters (autocast)" not in labels


def test_the_two_small_matmuls_are_counted_without_weight_gradients() -> None:
    # F.linear(x, A) (in -> r) and F.linear(., B) (r -> out): forward and input gradient, no weight gradient
    # (vera_A / vera_B are frozen): 2 x 2 r (in + out) a token per target and block.
    terms = {t.label: t.per_token for t in token_flops(_plan()).terms}
    assert terms["VeRA's shared projections (frozen)"] == 4 * R * ((D + D) + (D + KV)) * LAYERS


# The refusals VeRA shares with LoHa and LoKr, and the head left out on a switch: tests/core/test_lycoris.py.


def test_switching_takes_veras_default_rank_unless_typed(capsys: pytest.CaptureFixture[str]) -> None:
    # VeraConfig's r defaults to 256 and LoraConfig's to 8 (huggingface/peft 51c2ff66 src/peft/tuners/vera/config.py,
    # lora/config.py): picking VeRA in the window from LoRA's default rank gave a rank-8 VeRA no PEFT user gets.
    lora = plan_for_model("llama-3.2-3b", method=Method.LORA)
    assert lora.lora.rank == 8
    vera = lora.with_method(Method.VERA)
    assert vera.lora.rank == 256
    assert vera.with_method(Method.LORA).lora.rank == 8  # and back
    assert lora.with_changes(lora=LoraSettings(rank=16)).with_method(Method.VERA).lora.rank == 16  # not a default
    assert lora.with_method(Method.VERA, typed=frozenset({"lora.rank"})).lora.rank == 8  # typed
    # The command line: --method vera alone is PEFT's VeraConfig() on q_proj, v_proj: the results file's count.
    assert main(["estimate", "--model", "llama-3.2-3b", "--json", "--method", "vera"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 129_024


def test_plan_file_round_trips() -> None:
    plan = _plan()
    assert loads(dumps(plan)) == plan


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--lora-rank", "256", "--lora-targets", "q_proj,v_proj"]
    assert main([*args, "--method", "vera"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 129_024  # the results file's


# method_comparison/MetaMathQA/experiments/vera/llama-3.2-3B-default/adapter_config.json (peft 51c2ff66), with the
# results file's base_model_name_or_path.
VERA_CONFIG = {
    "auto_mapping": None, "base_model_name_or_path": "meta-llama/Llama-3.2-3B", "bias": "none", "d_initial": 0.1,
    "fan_in_fan_out": False, "inference_mode": False, "init_weights": True, "layers_pattern": None,
    "layers_to_transform": None, "modules_to_save": None, "peft_type": "VERA", "projection_prng_key": 0, "r": 256,
    "revision": None, "save_projection": True, "target_modules": None, "task_type": None, "vera_dropout": 0.0,
}  # fmt: skip


def test_adapter_config_is_read() -> None:
    run = loads_run_config(json.dumps(VERA_CONFIG).encode(), "adapter_config.json")
    assert run.unknown == ()
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert (plan.method, plan.lora.rank, plan.lora.targets) == (Method.VERA, 256, ("q_proj", "v_proj"))
    assert estimate(plan).params.trainable == 129_024
    with pytest.raises(PlanFileError, match="vera_dropout: 0.1"):
        loads_run_config(json.dumps({**VERA_CONFIG, "vera_dropout": 0.1}).encode(), "a.json")
    with pytest.raises(PlanFileError, match="bias: 'vera_only'"):
        loads_run_config(json.dumps({**VERA_CONFIG, "bias": "vera_only"}).encode(), "a.json")


def test_exporters_say_they_write_lora() -> None:
    assert export(_plan(), Target.TRL).cannot("method.kind")
