"""LitGPT's Adapter and Adapter v2 (branch h41adapt): what they train, what they keep, the plan's
settings through the plan file, the command line and the exporters.

Source read: Lightning-AI/litgpt 0f021f3ad8cd8d6fe30b0ef721a7a0e2dac15898 (the commit the resource
tables' adapter rows were published with): lit_gpt/adapter.py (``Config``, ``CausalSelfAttention``,
``adapter_filter``), lit_gpt/adapter_v2.py (``AdapterV2Linear``, ``adapter_filter``), lit_gpt/rmsnorm.py
and finetune/adapter.py, finetune/adapter_v2.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from benchmarks.realgpu.mapping import map_figure
from benchmarks.realgpu.memory import load
from core.breakdown import BucketKey
from core.catalogue import find_model
from core.cli.app import main
from core.dtypes import Quant
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.planfile import dumps, loads
from core.params import litgpt_adapter_tensors, param_counts
from core.plan import LoraSettings, Method, Plan, Preset
from core.presets import plan_for_model
from core.training.activations import layer_activations, outside_blocks


def _llama(method: Method, **kw: object) -> Plan:
    return plan_for_model("llama-2-7b", method=method, preset=Preset.PURE_BF16, **kw)


def test_trainable_counts_are_the_resource_tables() -> None:
    # Lightning-AI/litgpt e567dbe8 tutorials/resource-tables.md lines 81 and 94, Llama 2 7B:
    # "Trainable parameters" 1,229,760 (adapter) and 4,279,744 (adapter_v2). From lit_gpt/adapter.py
    # at 0f021f3: 30 blocks from adapter_start_layer 2, each adapter_wte (10 × 4,096) and
    # gating_factor (32 heads) = 30 × 40,992. adapter_v2.py adds, per block, adapter_bias and
    # adapter_scale on attn (12,288 out), proj (4,096), fc_1, fc_2 (11,008 each) and proj (4,096),
    # norm_1 and norm_2 (4,096 each): 32 × 93,184; then ln_f (4,096) and lm_head's 2 × 32,000.
    assert param_counts(_llama(Method.ADAPTER)).trainable == 1_229_760 == 30 * (10 * 4096 + 32)
    assert param_counts(_llama(Method.ADAPTER_V2)).trainable == 4_279_744 == 1_229_760 + 32 * 93_184 + 4096 + 64_000


def test_layernorm_model_trains_the_norms_biases_too() -> None:
    # StableLM-Alpha 3B as lit-gpt configures it (16 blocks, d 4,096, 32 heads, GPT-NeoX MLP of
    # 16,384, LayerNorm, padded vocabulary 50,688): resource-tables.md (e567dbe8) lines 78 and 91
    # give 573,888 and 2,125,248 trainable parameters.
    spec = replace(
        find_model("llama-2-7b").spec,
        num_layers=16,
        intermediate_size=16_384,
        vocab_size=50_688,
        norm="layernorm",
        gated_mlp=False,
    )
    plan = Plan(model=spec, method=Method.ADAPTER)
    assert param_counts(plan).trainable == 573_888
    assert param_counts(plan.with_method(Method.ADAPTER_V2)).trainable == 2_125_248


def _adapter_terms(plan: Plan) -> dict[str, float]:
    return {
        t.label: t.bytes
        for t in layer_activations(plan, False).items
        if t.label.startswith(("adaption prompt", "Adapter v2"))
    }


def test_prompt_attention_and_v2_scales_keep_their_tensors() -> None:
    plan = _llama(Method.ADAPTER_V2).with_workload(micro_batch=2)  # the prompt's keys have batch 1: math SDPA
    n = plan.workload.micro_batch * plan.workload.seq_len
    share = 30 / 32  # the adapted blocks among the 32 that train
    terms = _adapter_terms(plan)
    assert terms["adaption prompt: attention output kept by the gate × 0.94 (adapted share of the blocks)"] == (
        n * 4096 * 2 * share
    )
    assert terms["adaption prompt: probabilities (math SDPA) × 0.94 (adapted share of the blocks)"] == (
        n * 32 * 10 * 2 * share
    )
    # adapter_scale * (linear(x) + adapter_bias): qkv 12,288 + proj 4,096 + fc_1, fc_2 11,008 + proj 4,096.
    assert terms["Adapter v2: linear outputs + bias, kept by the scales"] == n * 42_496 * 2
    # lit_gpt/rmsnorm.py: (self.weight * x_normed).to(dtype), x_normed float32, kept for the weight's grad.
    assert terms["Adapter v2: trained norms' normalised input (float32)"] == 2 * n * 4096 * 4
    head = {t.label: t.bytes for t in outside_blocks(plan).items if t.label.startswith("Adapter v2")}
    assert head["Adapter v2: logits + bias, kept by the head's scale"] == n * 32_000 * 2
    # A micro-batch of one runs the memory-efficient kernel: its float32 logsumexp, no probabilities.
    one = _adapter_terms(plan.with_workload(micro_batch=1))
    assert not any("math SDPA" in label for label in one)
    assert not _adapter_terms(plan.with_method(Method.LORA))


def test_adapter_v1_blocks_below_the_start_keep_nothing() -> None:
    # finetune/adapter.py: mark_only_adapter_as_trainable; the embedding and blocks 0-1 train nothing
    # and follow no trained tensor, so autograd records nothing there. Adapter v2's norms train.
    assert _llama(Method.ADAPTER).gradless_layers == 2
    assert _llama(Method.ADAPTER, lora=LoraSettings(adapter_start_layer=5)).gradless_layers == 5
    assert _llama(Method.ADAPTER_V2).gradless_layers == 0
    with pytest.raises(PlanError, match="lora.adapter_start_layer"):
        _llama(Method.ADAPTER, lora=LoraSettings(adapter_start_layer=32))


def test_quantised_base_is_qlora_s_storage() -> None:
    bf16 = _llama(Method.ADAPTER)
    nf4 = bf16.with_lora(adapter_quantised=True).with_changes(quant=Quant.NF4, double_quant=False)
    assert nf4.quantised_base and nf4.four_bit_base and not bf16.quantised_base
    qlora = nf4.with_method(Method.QLORA)
    assert param_counts(nf4).frozen_base == param_counts(qlora).frozen_base
    # the base stored as QLoRA stores it on the same quantisation: the same terms, the trained tensors apart
    base = {}
    for p in (nf4, qlora):
        weights = next(b for b in estimate(p).buckets if b.key is BucketKey.WEIGHTS)
        base[p.method] = {
            t.label: t.bytes for t in weights.terms if "adapters" not in t.label and "prompts" not in t.label
        }
    assert base[Method.ADAPTER] == base[Method.QLORA]
    assert sum(base[Method.ADAPTER].values()) < 0.35 * 2 * param_counts(bf16).total


def test_plan_file_round_trips_and_old_files_read_litgpt_s_defaults() -> None:
    plan = _llama(Method.ADAPTER_V2, lora=LoraSettings(adapter_prompt_length=20, adapter_start_layer=4))
    assert loads(dumps(plan)) == plan
    document = json.loads(dumps(_llama(Method.LORA)))
    for key in ("adapter_prompt_length", "adapter_start_layer", "adapter_quantised"):
        del document["plan"]["lora"][key]
    old = loads(json.dumps(document))
    assert old == _llama(Method.LORA)
    assert (old.lora.adapter_prompt_length, old.lora.adapter_start_layer) == (10, 2)


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "--model", "llama-2-7b", "--json", "--method"]
    assert main([*args, "adapter_v2"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 4_279_744
    assert main([*args, "adapter", "--adapter-prompt-length", "20", "--adapter-start-layer", "30"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["trainable"] == 2 * (20 * 4096 + 32)
    assert main([*args, "adapter", "--adapter-start-layer", "32"]) == 2
    assert "adapter_start_layer" in capsys.readouterr().err


def test_exporters_say_they_write_lora() -> None:
    written = export(_llama(Method.ADAPTER), Target.TRL)
    assert written.cannot("method.kind") and written.cannot("method.lora.adapter_prompt_length")


def test_resource_table_rows_map_to_the_methods() -> None:
    rows = {f["id"]: f for f in load() if f["id"].startswith("litgpt-rt-adapter")}
    assert len(rows) == 12
    v1 = map_figure(rows["litgpt-rt-adapter-llama27-nf4-dq"]).plan
    v2 = map_figure(rows["litgpt-rt-adapterv2-llama27-bf16"]).plan
    assert v1 is not None and v2 is not None
    assert (v1.method, v1.quantised_base, v1.double_quant, v1.bnb_legacy) == (Method.ADAPTER, True, True, True)
    assert (v2.method, v2.quantised_base, v2.litgpt) == (Method.ADAPTER_V2, False, True)


def test_the_adapters_tensors_are_counted_per_block_not_listed_one_by_one() -> None:
    # The window's random-edit test reached a 10,000-block model of 4,096 experts (core.inputs LIMITS) under
    # Adapter v2: one list entry per tensor made each estimate build and walk a list of ~250 million sizes.
    # One block's tensors with their block count keep it to a few entries whatever the depth.
    plan = plan_for_model("llama-2-7b", method=Method.ADAPTER_V2, lora=LoraSettings(adapter_start_layer=2))
    groups = litgpt_adapter_tensors(plan)
    deep = litgpt_adapter_tensors(replace(plan, model=replace(plan.model, num_layers=10_000)))
    assert len(deep) == len(groups) < 20
    # The counts are those of the table's run (test above): 4,279,744 trainable on Llama 2 7B.
    assert sum(n * c for n, c in groups) == param_counts(plan).trainable == 4_279_744


def test_a_blocks_experts_are_one_entry_each_not_one_per_expert() -> None:
    # A diagnosis estimates about 500 plans; with one entry per expert tensor a 10,000-block model of
    # 4,096 experts (core.model LIMITS) walked ~25,000 entries in each of ~1,000 calls and its Adapter v2
    # diagnosis took 70 s. One entry per tensor shape with its copy count keeps it a handful.
    plan = plan_for_model("mixtral-8x7b-v0.1", method=Method.ADAPTER_V2)
    wide = replace(plan, model=replace(plan.model, num_experts=4_096))
    assert len(litgpt_adapter_tensors(wide)) == len(litgpt_adapter_tensors(plan)) < 20
    # lit_gpt/adapter_v2.py (Lightning-AI/litgpt 0f021f3): every expert's fc_1, fc_2 (width i) and proj
    # (width d) is an AdapterV2Linear with adapter_bias and adapter_scale of its out_features, and the
    # router ``gate`` one of n_expert outputs: each extra expert adds 2·(2i + d) per block and 2 to the gate.
    model = plan.model
    per_expert = 2 * (2 * model.intermediate_size + model.hidden_size) + 2
    extra = (4_096 - model.num_experts) * per_expert * model.num_layers
    assert param_counts(wide).trainable - param_counts(plan).trainable == extra
