"""PEFT's AdaLoRA (branch h54ada): the tensors PEFT trains at init_r, what each target keeps, the RankAllocator's
copies, the FLOPs, the plan through the plan file, the command line, adapter_config.json and the exporters. The
refusals and the head rule it shares with LoHa, LoKr and VeRA are in test_lycoris.py.

Source read: huggingface/peft 51c2ff666b142d004c12609c9686cf17ca055751 (PEFT 0.19.2.dev0, the version of the
method_comparison results): src/peft/tuners/adalora/layer.py (``AdaLoraLayer.update_layer``, ``SVDLinear.forward``,
``RankAllocator.update_ipt``), model.py (``_create_and_replace``, ``forward``, ``update_and_allocate``), config.py.
tools/measure/lycoris_check.py checks the kept tensors and the RankAllocator's on CPU with PEFT's own layers.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.cli.app import main
from core.dtypes import Dtype
from core.errors import PlanError, PlanFileError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.files.runconfig import loads_run_config, plan_from_run, resolve_model
from core.params import param_counts
from core.plan import (
    ADALORA_DEFAULT_RANK,
    VERA_DEFAULT_RANK,
    Autocast,
    LoraSettings,
    Method,
    Offload,
    Plan,
    Preset,
)
from core.presets import default_plan, plan_for_model
from core.roles import dtypes_for
from core.training.activations import layer_activations
from core.training.flops import token_flops
from core.training.optimizer import largest_trainable_tensor, rank_allocator_terms, trainable_tensors

D, KV, LAYERS = 3072, 1024, 28  # Llama-3.2-3B config.json: hidden_size, 8 kv heads x 128, num_hidden_layers
R = 64  # experiments/adalora/llama-3.2-3B-rank32/adapter_config.json: "init_r": 64
N = 4 * 768  # the corpus row's micro-batch 4 at 768 tokens (memory_figures.json)
TRAINED = 18_353_664  # adalora--llama-3.2-3B-rank32.json: "num_trainable_params"


def _plan(rank: int = R, **kw: object) -> Plan:
    # The method comparison's recipe: bf16 model, float32 adapters (autocast_adapter_dtype), no autocast,
    # q_proj and v_proj (PEFT's Llama default, target_modules null), micro-batch 4 at 768 tokens.
    kw.setdefault("preset", Preset.CUSTOM)
    kw.setdefault("base_dtype", Dtype.BF16)
    kw.setdefault("adapter_dtype", Dtype.FP32)
    kw.setdefault("autocast", Autocast.NONE)
    lora = LoraSettings(rank=rank, alpha=8, targets=("q_proj", "v_proj"))
    plan = plan_for_model("llama-3.2-3b", method=Method.ADALORA, lora=lora, **kw)
    return plan.with_workload(micro_batch=4, seq_len=768)


def _kept(plan: Plan) -> dict[str, float]:
    """AdaLoRA's own terms and the input copies the targets keep (LoRA's rule)."""
    return {
        t.label: t.bytes
        for t in layer_activations(plan, False).items
        if t.label.startswith("AdaLoRA") or "cast per adapter" in t.label
    }


def test_trained_tensors_are_peft_s_count() -> None:
    # 28 x (q: 64·3,072 + 64 + 3,072·64, v: 64·3,072 + 64 + 1,024·64) = the results file's num_trainable_params:
    # lora_A, lora_E and lora_B at init_r (ranknum is a parameter with requires_grad False, not counted).
    plan = _plan()
    assert (param_counts(plan).trainable, trainable_tensors(plan)) == (TRAINED, LAYERS * 2 * 3)
    assert largest_trainable_tensor(plan) == R * D  # q_proj's lora_A and lora_B


def test_the_rank_allocator_keeps_three_copies_of_every_trained_element() -> None:
    # update_ipt: ipt, exp_avg_ipt, exp_avg_unc = torch.zeros_like(p) for lora_A, lora_E, lora_B (float32 here).
    (term,) = rank_allocator_terms(_plan(), param_counts(_plan()), dtypes_for(_plan()))
    assert term.bytes == 3 * TRAINED * 4
    state = {t.label: t.bytes for t in estimate(_plan()).worst.buckets[2].terms}
    # beside AdamW's two moments (and fused Adam's step counters: the plan's default implementation)
    assert (state["Adam moments m, v"], state[term.label]) == (2 * TRAINED * 4, 3 * TRAINED * 4)
    assert rank_allocator_terms(_plan().with_method(Method.LORA), param_counts(_plan()), dtypes_for(_plan())) == []


def test_each_target_keeps_lora_s_tensors_and_the_product_a_e() -> None:
    # x's float32 copy (N x in), x·(A·E)ᵀ (N x r), (A·E)ᵀ (r x in), ranknum + 1e-5 (one float32) per target.
    kept = _kept(_plan())
    assert kept == {
        "attention norm output, cast per adapter (PEFT / autocast)": 2 * N * D * 4,
        "AdaLoRA: x·(A·E)ᵀ kept for lora_B": 2 * N * R * 4,
        "AdaLoRA: (A·E)ᵀ kept by its matmul": R * (D + D) * 4,
        "AdaLoRA: ranknum + 1e-5 kept by the division": 2 * 4,
    }
    # Under bf16 autocast: bf16 casts of x and (A·E)ᵀ, the product in bf16, and the bf16 cast of lora_B.T.
    cast = _kept(_plan(autocast=Autocast.BF16))
    assert cast["AdaLoRA: (A·E)ᵀ kept by its matmul"] == R * (D + D) * 2
    assert cast["AdaLoRA: 16-bit cast of lora_B.T (autocast, kept by the matmul)"] == R * (D + KV) * 2


def test_the_rule_is_the_cpu_check_s_figure() -> None:
    # tools/measure/lycoris_check.py (torch 2.13.0 CPU, peft 0.18.0): q_proj 256 -> 256, v_proj 256 -> 64, N 128,
    # init_r 4: 274,440 B kept beyond the outputs without autocast, 139,784 B under bf16 autocast (measured).
    plan = _plan(4).with_workload(micro_batch=1, seq_len=128)
    tiny = replace(plan.model, hidden_size=256, num_heads=4, num_kv_heads=1, head_dim=64)
    plan = plan.with_changes(model=tiny)
    assert sum(_kept(plan).values()) == 274_440
    assert sum(_kept(plan.with_changes(autocast=Autocast.BF16)).values()) == 139_784
    # The RankAllocator after update_and_allocate(0): 40,032 B = 3 x 3,336 trained elements x 4 B a block.
    (term,) = rank_allocator_terms(plan, param_counts(plan), dtypes_for(plan))
    assert term.bytes == 40_032 * tiny.num_layers


def test_dropout_keeps_lora_s_dropped_copy_and_mask() -> None:
    # lycoris_check.py with lora_dropout 0.1: the dropped float32 copy and the mask replace the input copy
    # (on CUDA a bool mask, LoRA's rule: 4 + 1 B an element; the CPU's float32 mask measures 2 x N·in x 3 B more).
    plan = _plan().with_lora(dropout=0.1)
    assert _kept(plan)["attention norm output, cast per adapter (PEFT / autocast)"] == 2 * N * D * 5


def test_autocast_caches_no_copy_of_the_adapters() -> None:
    # (A * E).T is a product and lora_B.T a view: no leaf, so autocast's cache holds none (lycoris_check.py).
    labels = {t.label for t in estimate(_plan(autocast=Autocast.BF16)).worst.buckets[0].terms}
    assert "16-bit copies of the adapters (autocast)" not in labels


def test_flops_are_lora_s_at_init_r_and_the_e_scaling() -> None:
    # LoRA's two trained matmuls: 2 r (in + out) forward, twice that backward, a token per target and block.
    terms = {t.label: t.per_token for t in token_flops(_plan()).terms}
    assert terms["AdaLoRA's A and B (LoRA's matmuls at init_r)"] == 6 * R * ((D + D) + (D + KV)) * LAYERS
    # A·E once a micro-batch (3 r·in with its gradients) over N tokens, and 4 out a token for the scaling.
    assert terms["AdaLoRA: A·E and the output's scaling (elementwise)"] == pytest.approx(
        (3 * R * (D + D) / N + 4 * (D + KV)) * LAYERS
    )


def test_a_switch_takes_adalora_config_s_init_r_unless_typed() -> None:
    # AdaLoraConfig.init_r defaults to 12; LoRA's r to 8, VeRA's to 256.
    lora = plan_for_model("llama-3.2-3b")
    assert lora.with_method(Method.ADALORA).lora.rank == ADALORA_DEFAULT_RANK == 12
    assert lora.with_method(Method.ADALORA).with_method(Method.LORA).lora.rank == 8
    assert lora.with_method(Method.VERA).with_method(Method.ADALORA).lora.rank == ADALORA_DEFAULT_RANK
    assert lora.with_method(Method.ADALORA).with_method(Method.VERA).lora.rank == VERA_DEFAULT_RANK
    assert lora.with_method(Method.ADALORA, typed=frozenset({"lora.rank"})).lora.rank == 8


def test_an_offloaded_optimizer_is_refused() -> None:
    # update_ipt's zeros_like(p) copies stay on the GPU: the planner moves the optimizer's state whole.
    with pytest.raises(PlanError, match="RankAllocator"):
        _plan().with_parallel(offload=Offload.OPTIMIZER)


def test_plan_file_round_trips() -> None:
    plan = _plan()
    assert loads(dumps(plan)) == plan


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-3.2-3b", "--json", "--lora-rank", "64", "--lora-targets", "q_proj,v_proj"]
    assert main([*args, "--method", "adalora"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == TRAINED  # the results file's


# method_comparison/MetaMathQA/experiments/adalora/llama-3.2-3B-rank32/adapter_config.json (peft 51c2ff66), with
# the results file's base_model_name_or_path.
ADALORA_CONFIG = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "meta-llama/Llama-3.2-3B", "beta1": 0.85,
    "beta2": 0.85, "bias": "none", "corda_config": None, "deltaT": 1, "eva_config": None, "exclude_modules": None,
    "fan_in_fan_out": False, "inference_mode": False, "init_lora_weights": True, "init_r": 64,
    "layer_replication": None, "layers_pattern": None, "layers_to_transform": None, "loftq_config": {},
    "lora_alpha": 8, "lora_bias": False, "lora_dropout": 0.0, "megatron_config": None,
    "megatron_core": "megatron.core", "modules_to_save": None, "orth_reg_weight": 0.5, "peft_type": "ADALORA", "r": 8,
    "rank_pattern": None, "revision": None, "target_modules": None, "target_r": 32, "task_type": None, "tfinal": 500,
    "tinit": 200, "total_step": 5000, "use_dora": False, "use_rslora": False,
}  # fmt: skip


def test_adapter_config_is_read() -> None:
    run = loads_run_config(json.dumps(ADALORA_CONFIG).encode(), "adapter_config.json")
    assert run.unknown == ()
    plan = plan_from_run(run, default_plan(), resolve_model(run))
    assert (plan.method, plan.lora.rank, plan.lora.alpha) == (Method.ADALORA, 64, 8)  # init_r, not r
    assert plan.lora.targets == ("q_proj", "v_proj")
    assert estimate(plan).params.trainable == TRAINED
    del_init = {k: v for k, v in ADALORA_CONFIG.items() if k != "init_r"}
    assert plan_from_run(loads_run_config(json.dumps(del_init).encode(), "a.json"), default_plan()).lora.rank == 12


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"total_step": None}, "total_step: None"),  # AdaLoraConfig: "AdaLoRA does not work when total_step is None"
        ({"tinit": 4500}, "tinit: 4500"),  # tinit >= total_step - tfinal: no budgeting phase (AdaLoraConfig)
        ({"use_dora": True}, "use_dora: True"),  # AdaLoraConfig: "ADALORA does not support DoRA"
        ({"loftq_config": {"loftq_bits": 4}}, "loftq_config"),  # AdaLoraConfig: "does not support LOFTQ"
        ({"rank_pattern": {"q_proj.lora_E": [True, False]}}, "rank_pattern"),  # per-target ranks: one rank here
        ({"bias": "lora_only"}, "bias: 'lora_only'"),  # trained biases are not modelled
    ],
)
def test_what_the_plan_cannot_state_is_refused(change: dict[str, object], refusal: str) -> None:
    with pytest.raises(PlanFileError, match=refusal):
        loads_run_config(json.dumps({**ADALORA_CONFIG, **change}).encode(), "a.json")


def test_exporters_say_they_write_lora() -> None:
    assert export(_plan(), Target.TRL).cannot("method.kind")
