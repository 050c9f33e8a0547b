"""PEFT's LoHa and LoKr (branch h53lyco): the factors PEFT trains, the whole delta weight each forward keeps,
the plan's settings through the plan file, the command line, adapter_config.json and the exporters.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/loha/layer.py (``create_adapter_parameters``, ``get_delta_weight``,
``Linear._get_delta_activations``, ``HadaWeight``), src/peft/tuners/lokr/layer.py (``update_layer``,
``factorization``, ``make_kron``), src/peft/tuners/loha/config.py and lokr/config.py (defaults).
tools/measure/lycoris_check.py checks the kept tensors on CPU with PEFT's own layers.
"""

from __future__ import annotations

import json

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import lokr_factorization, param_counts
from core.plan import Autocast, LoraSettings, Method, Plan, Preset, Stack, Strategy
from core.presets import default_plan, plan_for_model
from core.training.activations import layer_activations
from core.training.flops import token_flops
from core.training.optimizer import largest_trainable_tensor, trainable_tensors
from tests.core.strategies import LYCORIS

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads x 128, num_hidden_layers


def _plan(method: Method = Method.LOHA, factor: int = -1, **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast,
    # r 32, alpha 64, q_proj and v_proj, micro-batch 4 at 768 tokens (memory_figures.json's rows).
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    lora = LoraSettings(rank=32, alpha=64, targets=("q_proj", "v_proj"), lokr_factor=factor)
    plan = plan_for_model("llama-3.2-3b", method=method, lora=lora, **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)


def test_factorization_is_peft_s() -> None:
    # lokr/layer.py factorization's docstring: (256, -1) -> (16, 16), (128, -1) -> (8, 16), (127, -1) -> (1, 127),
    # (128, 4) -> (4, 32); 3,072 = 48 x 64 nearest the square root.
    assert [lokr_factorization(256), lokr_factorization(128), lokr_factorization(127)] == [(16, 16), (8, 16), (1, 127)]
    assert lokr_factorization(128, 4) == (4, 32) and lokr_factorization(3072) == (48, 64)


def test_trainable_parameters_are_peft_s_count() -> None:
    # loha--llama-3.2-3B-rank32.json: "num_trainable_params": 18350080 = 28 x 2 x 32 x (6,144 + 4,096);
    # four factors per target.
    loha = _plan()
    assert (param_counts(loha).trainable, trainable_tensors(loha)) == (18_350_080, LAYERS * 2 * 4)
    # lokr--llama-3.2-3B-rank32-factor4-lr0.003.json: "num_trainable_params": 2294656: w1 4 x 4 whole, w2 as
    # (b, 32) @ (32, 768) since 32 < 768 / 2 (q: b 768, v: b 256).
    lokr = _plan(Method.LOKR, 4)
    assert (param_counts(lokr).trainable, trainable_tensors(lokr)) == (2_294_656, LAYERS * 2 * 3)
    assert largest_trainable_tensor(lokr) == 768 * 32
    # Rank 400 >= 768 / 2: w2 trains whole (768 x 768 on q, 256 x 768 on v) beside w1 (4 x 4).
    whole = lokr.with_changes(lora=LoraSettings(rank=400, targets=("q_proj", "v_proj"), lokr_factor=4))
    assert param_counts(whole).trainable == LAYERS * (16 + 768 * 768 + 16 + 256 * 768)


def test_each_target_keeps_its_delta_weight_and_input_copy() -> None:
    n = 4 * 768
    loha = {t.label: t.bytes for t in layer_activations(_plan(), False).items}
    # F.linear(x.to(float32), delta): the float32 delta (out x in) and the float32 input copy per target.
    assert loha["LoHa: each target's delta weight, kept by F.linear"] == (D * D + KV * D) * 4
    assert loha["attention norm output, cast per adapter (PEFT / autocast)"] == 2 * n * D * 4
    assert not any(label.startswith("LoRA A") for label in loha)
    lokr = {t.label: t.bytes for t in layer_activations(_plan(Method.LOKR, 4), False).items}
    # torch.kron(w1, w2) keeps w2 = w2_a @ w2_b (b x d): 768 x 768 on q, 256 x 768 on v.
    assert lokr["LoKr: w2 = w2_a @ w2_b, kept by torch.kron"] == (768 * 768 + 256 * 768) * 4
    # Under autocast F.linear keeps 16-bit deltas. LoHa's comes out of HadaWeight's autocast matmuls, so the bf16
    # norm output is read as is, kept once (no per-target copy); LoKr's kron with the float32 w1 is float32, so
    # each target keeps its own 16-bit copy of the input (tools/measure/lycoris_check.py: both to the byte).
    cast = {t.label: t.bytes for t in layer_activations(_plan(autocast=Autocast.BF16), False).items}
    assert cast["LoHa: each target's delta weight, kept by F.linear"] == (D * D + KV * D) * 2
    assert cast["attention norm output"] == n * D * 2
    kron = {t.label: t.bytes for t in layer_activations(_plan(Method.LOKR, 4, autocast=Autocast.BF16), False).items}
    assert kron["attention norm output, cast per adapter (PEFT / autocast)"] == 2 * n * D * 2


def test_autocast_caches_no_copy_of_loha_s_factors() -> None:
    # HadaWeight.forward runs with grad off inside the autograd Function: autocast caches no 16-bit factor.
    labels = {t.label for t in estimate(_plan(autocast=Autocast.BF16)).worst.buckets[0].terms}
    assert "16-bit copies of the adapters (autocast)" not in labels
    lokr = {t.label for t in estimate(_plan(Method.LOKR, 4, autocast=Autocast.BF16)).worst.buckets[0].terms}
    assert "16-bit copies of the adapters (autocast)" in lokr


def test_peak_holds_the_deltas_beyond_lora_s() -> None:
    lora, loha = estimate(_plan(Method.LORA)).worst.peak_bytes, estimate(_plan()).worst.peak_bytes
    # 28 blocks x (3,072² + 1,024 x 3,072) x 4 B of deltas (1.41 GB), less LoRA's kept A outputs (2 x N x 32 x
    # 4 B a block) and its 9.2 M trained parameters' weights, gradients and Adam state (16 B each) beside
    # LoHa's 18.4 M: within 0.1 GB of that.
    deltas = LAYERS * (D * D + KV * D) * 4
    state = (18_350_080 - 9_175_040) * 16 - LAYERS * 2 * 4 * 768 * 32 * 4
    assert abs(loha - lora - deltas - state) < 0.1e9


def test_the_delta_matmul_is_counted_per_token() -> None:
    # F.linear(x, delta): 2 in·out forward, input and weight gradients: 6 in·out a token per target and block.
    terms = {t.label: t.per_token for t in token_flops(_plan()).terms}
    assert terms["LoHa / LoKr delta weights applied"] == 6 * (D * D + D * KV) * LAYERS


# PEFT's layers wrapping each target nn.Linear share one set of refusals (core.plan.Plan._check_lycoris) and one
# switch rule for the head (Plan.with_method): checked here for all six, VeRA's other rules in test_vera.py,
# OFT's in test_oft.py, AdaLoRA's in test_adalora.py, MiSS's in test_miss.py.
WRAPPED = LYCORIS  # tests/core/strategies.py: FourierFT and RoAd (h76peft) too


@pytest.mark.parametrize("method", WRAPPED)
def test_what_is_not_modelled_is_refused(method: Method) -> None:
    with pytest.raises(PlanError, match="one GPU or DDP"):
        _plan(method).with_parallel(strategy=Strategy.FSDP, gpus_per_node=2)
    assert _plan(method).with_parallel(strategy=Strategy.DDP, gpus_per_node=2).world_size == 2
    with pytest.raises(PlanError, match="eager"):
        _plan(method, stack=Stack.COMPILE)
    with pytest.raises(PlanError, match="output head"):
        _plan(method).with_changes(lora=LoraSettings(targets=("q_proj", "lm_head")))
    with pytest.raises(PlanError, match="dense model"):
        plan_for_model("mixtral-8x7b-v0.1", method=method)


@pytest.mark.parametrize("method", WRAPPED)
def test_switching_from_lora_on_the_head_leaves_the_head_out(method: Method) -> None:
    lora = _plan(Method.LORA).with_changes(lora=LoraSettings(targets=("q_proj", "lm_head")))
    assert lora.with_method(method).lora.targets == ("q_proj",)


def test_plan_file_round_trips_and_old_files_read_minus_one() -> None:
    plan = _plan(Method.LOKR, 4)
    assert loads(dumps(plan)) == plan
    document = json.loads(dumps(plan))
    del document["plan"]["lora"]["lokr_factor"]
    assert loads(json.dumps(document)).lora.lokr_factor == -1


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--lora-rank", "32", "--lora-targets", "q_proj,v_proj"]
    assert main([*args, "--method", "loha"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 18_350_080  # the results file's
    assert main([*args, "--method", "lokr", "--lokr-factor", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 2_294_656  # the results file's


def _read(document: dict[str, object]) -> Plan:
    run = loads_run_config(json.dumps(document).encode(), "adapter_config.json")
    assert run.unknown == ()
    return plan_from_run(run, default_plan(), resolve_model(run))


# method_comparison/MetaMathQA/experiments/loha/llama-3.2-3B-rank32/adapter_config.json (peft 51c2ff66), with the
# results file's base_model_name_or_path.
LOHA_CONFIG = {
    "alpha": 64, "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "meta-llama/Llama-3.2-3B",
    "exclude_modules": None, "inference_mode": False, "init_weights": True, "layers_pattern": None,
    "layers_to_transform": None, "module_dropout": 0.0, "modules_to_save": None, "peft_type": "LOHA", "r": 32,
    "rank_dropout": 0.0, "rank_pattern": {}, "revision": None, "target_modules": ["q_proj", "v_proj"],
    "task_type": None, "use_effective_conv2d": False,
}  # fmt: skip


def test_adapter_config_is_read() -> None:
    loha = _read(LOHA_CONFIG)
    assert (loha.method, loha.lora.rank, loha.lora.alpha) == (Method.LOHA, 32, 64)
    assert estimate(loha).params.trainable == 18_350_080
    # experiments/lokr/llama-3.2-3B-rank32-factor4-lr0.003/adapter_config.json: LOHA's keys and these.
    lokr = {**LOHA_CONFIG, "peft_type": "LOKR", "decompose_both": False, "decompose_factor": 4}
    lokr["rank_dropout_scale"] = False
    read = _read(lokr)
    assert (read.method, read.lora.lokr_factor) == (Method.LOKR, 4)
    assert estimate(read).params.trainable == 2_294_656
    with pytest.raises(PlanFileError, match="decompose_both: True"):
        loads_run_config(json.dumps({**lokr, "decompose_both": True}).encode(), "a.json")


def test_exporters_say_they_write_lora() -> None:
    written = export(_plan(Method.LOKR, 4), Target.TRL)
    assert written.cannot("method.kind") and written.cannot("method.lora.lokr_factor")
