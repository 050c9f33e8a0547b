"""A mixture of experts' dense layers and its adapted rows in the readers branch h83layers left behind (issues 22 and
24, branch h87moe): IA3's kept tensors, a PEFT method's own work (flops.method_work), Adafactor's statistics on
LoRA, and the base model's MLP FLOPs of DeepSeek-V3's, GLM-4.5's, ERNIE 4.5's and Llama 4's dense layers.

Sources:
- tests/data/moe_lora/peft_transformers_{4.57.1,5.25.0}.json (tools/measure/moe_lora_targets.py, peft 0.18.0, torch
  2.13.0 CPU): the modules PEFT adapts in the dense layer 0 (``adapted_first_block``) and the MoE layer 1
  (``adapted_last_block``) of the tiny dense_first models (tools/measure/moe_lora_configs.py: hidden 64, experts'
  MLP 32, dense MLP 48, 4 experts top 2, Llama 4 top 1, 2 layers).
- tests/data/moe_flops/flops_transformers_5.25.0.json (tools/measure/moe_dense_flops.py, torch 2.13.0+cpu,
  transformers 5.25.0): torch.utils.flop_counter.FlopCounterMode over one forward of 2 × 16 tokens of the same
  models, per module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.hfconfig import model_from_hf_config
from core.plan import Accounting, LoraSettings, Method, Optimizer, Plan, TransformersLoss
from core.training.activations import layer_activations
from core.training.flops import ADAPTER_GEMMS, block_gemms, method_work
from core.training.optimizer import adafactor_state_elements
from tools.measure.moe_lora_configs import COMMON, DENSE_FFN, DENSE_FIRST, FAMILIES, FFN, LAYERS, D, E, K

DATA = Path(__file__).resolve().parents[1] / "data"
LORA = {
    release: (json.loads((DATA / "moe_lora" / f"peft_transformers_{release}.json").read_text()), line)
    for release, line in (("4.57.1", TransformersLoss.V4_49_TO_4_57), ("5.25.0", TransformersLoss.V5_ON))
}
FLOPS = json.loads((DATA / "moe_flops" / "flops_transformers_5.25.0.json").read_text())
MLP = ("gate_proj", "up_proj", "down_proj")


def _plan(family: str, release: TransformersLoss, method: Method, targets: tuple[str, ...], **lora: object) -> Plan:
    config = {"model_type": family, **COMMON, **FAMILIES[family], **DENSE_FIRST[family]}
    spec = model_from_hf_config(config, name=family)
    settings = LoraSettings(rank=8, alpha=16, targets=targets, **lora)  # type: ignore[arg-type]
    return Plan(model=spec, method=method, lora=settings, training_transformers=release)


def _mlp_modules(family: str, release: str) -> list[tuple[str, int]]:
    """(module, copies) of every MLP module PEFT adapts in layers 0 and 1, from the data's MLP row (a routed expert's
    ``experts.*`` once per expert)."""
    row = LORA[release][0]["dense_first"][family]["gate_proj,up_proj,down_proj"]
    return [
        (name, E if ".experts.*." in name else 1)
        for block in (row["adapted_first_block"], row["adapted_last_block"])
        for name in block
    ]


@pytest.mark.parametrize("release", list(LORA))
@pytest.mark.parametrize("family", list(DENSE_FIRST))
def test_method_work_counts_the_adapted_linears_of_each_kind_of_layer(release: str, family: str) -> None:
    # IA3 on the MLP: 3 + 6 kernels a target (PEFT_METHOD_PASSES) for each module PEFT wraps, a block's mean over the
    # two layers. Under 5.25.0 layer 0's gate / up / down and layer 1's shared expert's: 3 a block; under 4.57.1 layer
    # 1's 4 experts' too: (3 + 15) / 2 = 9. The rule before read the seven names once a block: 3 in both.
    plan = _plan(family, LORA[release][1], Method.IA3, MLP, ia3_feedforward=("down_proj",))
    plan = plan.with_changes(accounting=Accounting.DETAILED)
    modules = _mlp_modules(family, release)
    adapted = sum(copies for _, copies in modules) / LAYERS
    assert adapted == (3 if release == "5.25.0" else 9 if family != "llama4_text" else 3)
    work = method_work(plan)
    assert work is not None
    assert work.kernels == (3 * adapted, 6 * adapted)
    # The forward bytes, 12 per element of the output-scaled targets' m·out: a routed expert's on top-k / experts of
    # the tokens (4.57.1), a shared expert's (32) and the dense layer's (48) on all of them.
    m = plan.workload.micro_batch * plan.workload.seq_len
    # down_proj scales its input (feedforward), whose width is the MLP's as gate's and up's outputs are.
    width = {"experts": FFN * K / E, "shared": FFN, "dense": DENSE_FFN}
    outs = 0.0
    for name, copies in modules:
        kind = "experts" if ".experts.*." in name else "shared" if "shared" in name else "dense"
        outs += copies * width[kind]
    assert work.bytes_forward == pytest.approx(12 * m * outs / LAYERS)


@pytest.mark.parametrize("release", list(LORA))
def test_ia3s_kept_tensors_follow_the_adapted_rows(release: str) -> None:
    # DeepSeek-V3 dense_first, IA3 on the MLP with down_proj scaling its input (PEFT's default feedforward): PEFT's
    # IA3 Linear.forward keeps each output-scaled target's raw output (N·out) and each feedforward target's input
    # (N·in). Layer 0 (DeepseekV3MLP of 48): gate + up 96 out, down 48 in. Layer 1 (the data's adapted_last_block):
    # the shared expert's (32) gate + up 64 out, down 32 in; under 4.57.1 also 4 experts' (32), each on top-2 / 4 of
    # the tokens: 4 × 1/2 × 64 = 128 out and 4 × 1/2 × 32 = 64 in. A block's mean: 5.25.0 80 out, 40 in; 4.57.1 144
    # out, 72 in. The rule before took 4 experts of 32 on every token in both layers: 256 out, 128 in.
    plan = _plan("deepseek_v3", LORA[release][1], Method.IA3, MLP, ia3_feedforward=("down_proj",))
    outs, ins = (80, 40) if release == "5.25.0" else (144, 72)
    block = layer_activations(plan, trainable_block=False)
    terms = {t.label: t.bytes for t in block.items if t.label.startswith("IA3")}
    n = plan.workload.micro_batch * plan.workload.seq_len
    raw = terms["IA3: raw outputs of the output-scaled targets"]
    kept = terms["IA3: feedforward inputs in the vectors' dtype"]
    assert raw / n == pytest.approx(outs * 2)  # bf16 outputs
    assert kept / n / ins in (2.0, 4.0)  # the vectors' dtype: bf16 or float32


@pytest.mark.parametrize("release", list(LORA))
@pytest.mark.parametrize("family", list(DENSE_FIRST))
def test_adafactor_on_lora_keeps_rows_and_columns_of_every_adapted_matrix(release: str, family: str) -> None:
    # torch/optim/_adafactor.py (torch 2.13.0): a 2-D gradient's row and column statistics, rows + columns of each
    # lora_A (r, in) and lora_B (out, r) PEFT creates. The modules: the data's MLP row, layers 0 and 1 (widths:
    # DENSE_FFN in layer 0, FFN for an expert or a shared expert in layer 1).
    plan = _plan(family, LORA[release][1], Method.LORA, MLP).with_changes(optimizer=Optimizer.ADAFACTOR)
    r, expected, magnitudes = 8, 0, 0
    row = LORA[release][0]["dense_first"][family]["gate_proj,up_proj,down_proj"]
    for layer, block in enumerate((row["adapted_first_block"], row["adapted_last_block"])):
        width = DENSE_FFN if layer == 0 else FFN
        for name in block:
            fan_in, fan_out = (width, D) if name.endswith("down_proj") else (D, width)
            copies = E if ".experts.*." in name else 1
            expected += ((fan_in + r) + (r + fan_out)) * copies
            magnitudes += fan_out * copies
    assert adafactor_state_elements(plan) == expected
    # DoRA adds a 1-D magnitude (out) per adapted matrix (PEFT lora_magnitude_vector), which torch's Adafactor keeps
    # whole (torch 2.13.0 torch/optim/_adafactor.py lines 100-111: a ``variance`` of the gradient's shape below 2-D).
    assert adafactor_state_elements(plan.with_changes(method=Method.DORA)) == expected + magnitudes


@pytest.mark.parametrize("family", list(DENSE_FIRST))
def test_the_base_mlp_flops_of_a_dense_first_model_are_what_torch_counts(family: str) -> None:
    # FlopCounterMode's forward FLOPs of layer 0's dense MLP (an MLP of 48: 2 × 32 tokens × 64 × 48 × 3 = 589,824)
    # and layer 1's router and shared expert, with the routed experts run by transformers' eager loop (one F.linear per
    # expert hit: 2 × 32 tokens × top-2 × 64 × 32 × 3 = 786,432). The plan's MLP matmuls (block_gemms: k·n per token
    # and block) × 2 × tokens × layers. Before branch h87moe both layers counted as MoE: 2 × 409,600 + 2 × 786,432.
    measured = FLOPS["eager_experts"][family]
    tokens = FLOPS["tokens"]["batch"] * FLOPS["tokens"]["seq"]
    plan = _plan(family, TransformersLoss.V5_ON, Method.LORA, ("q_proj",))
    gemms = [g for g in block_gemms(plan) if not g.name.endswith(ADAPTER_GEMMS)]

    def flops(names: tuple[str, ...]) -> float:
        return sum(2 * tokens * g.weight * LAYERS for g in gemms if g.name in names)

    dense, moe = measured["layer 0"]["flops"], measured["layer 1"]["flops"]
    assert measured["layer 0"]["module"].endswith("MLP")
    assert flops(("gate|up", "down")) == dense["(whole)"] == 2 * tokens * D * DENSE_FFN * 3
    router = "router" if family == "llama4_text" else "gate"
    shared = "shared_expert" if family == "llama4_text" else "shared_experts"
    assert flops(("router",)) == moe[router]
    assert flops(("shared gate|up", "shared down")) == moe[shared]
    routed = flops(("experts gate|up", "experts down"))
    if family == "llama4_text":
        # Llama4TextExperts (transformers 5.25.0) runs every expert on every token (one bmm over the 4 experts,
        # the tokens' router scores as weights): E / top-k = 4 times the routed work the plan counts.
        assert moe["experts"] == routed * E / 1
    else:
        assert moe["experts"] == routed
    assert moe["(whole)"] == moe[router] + moe[shared] + moe["experts"]
    # transformers' own pick, grouped_mm (torch._grouped_mm), is not counted by torch 2.13.0's FlopCounterMode.
    if family != "llama4_text":
        assert FLOPS["families"][family]["experts_implementation"] == "grouped_mm"
        assert "experts" not in FLOPS["families"][family]["layer 1"]["flops"]


def test_a_dense_layers_kept_mlp_tensors_are_its_own_mlps_in_its_share() -> None:
    # DeepseekV3MLP.forward (transformers 5.25.0): down_proj(act_fn(gate_proj(x)) * up_proj(x)) keeps gate, act(gate)
    # and up (N·48 each) and, the weights training, down's input (N·48), in bf16; layer 0 of the 2: half a block's
    # mean. The experts' tensors hold the other half. Before, both layers kept the experts' tensors alone. The
    # fake-tensor measurements of a tiny DeepSeek-V3 with 1 dense layer of 4 (tests/core/test_latent_attention.py)
    # check the whole.
    plan = _plan("deepseek_v3", TransformersLoss.V5_ON, Method.LORA, ("q_proj",)).with_changes(method=Method.FULL)
    block = layer_activations(plan, trainable_block=True)
    n = plan.workload.micro_batch * plan.workload.seq_len
    dense = {t.label.split(" (dense")[0]: t.bytes for t in block.items if "(dense layers: 1 of 2)" in t.label}
    assert dense == {"gate, act(gate), up": 3 * n * DENSE_FFN * 2 / 2, "down-projection input": n * DENSE_FFN * 2 / 2}
    experts = [t for t in block.items if t.label.startswith("experts") and "(MoE layers: 1 of 2)" in t.label]
    assert experts


@pytest.mark.parametrize("family", list(DENSE_FIRST))
def test_loras_and_doras_kept_tensors_follow_the_adapted_rows_of_each_kind(family: str) -> None:
    # Under 4.57.1, LoRA on the MLP: lora_A's output (N·r) is kept for lora_B on every module PEFT wraps (the data's
    # MLP row, layers 0 and 1), a routed expert's on top-k / experts of the tokens: a block's mean. DeepSeek-V3: layer
    # 0's 3 + layer 1's 4 experts × 3 × 2/4 + 3 shared = 9, (3 + 9) / 2 = 6 (the MoE block's 9 before). DoRA keeps
    # the base and adapter outputs (N·Σout) of every adapted matrix (4 experts each): a block's mean of Σout × copies.
    release, line = "4.57.1", TransformersLoss.V4_49_TO_4_57
    plan = _plan(family, line, Method.LORA, MLP)
    top_k = 1 if family == "llama4_text" else K  # moe_lora_configs: top 2, Llama 4 top 1
    modules = _mlp_modules(family, release)
    passes = sum(copies * (top_k / E if copies > 1 else 1) for _, copies in modules) / LAYERS
    n, r = plan.workload.micro_batch * plan.workload.seq_len, 8
    terms = {t.label: t for t in layer_activations(plan, trainable_block=False).items}
    lora_a = terms["LoRA A outputs (kept for B)"]
    assert lora_a.bytes / (n * r) / passes in (2.0, 4.0)  # the adapter's dtype, bf16 or float32
    dora = _plan(family, line, Method.DORA, MLP)
    outs = 0
    for layer, block in enumerate(("adapted_first_block", "adapted_last_block")):
        row = LORA[release][0]["dense_first"][family]["gate_proj,up_proj,down_proj"]
        for name in row[block]:
            width = DENSE_FFN if layer == 0 else FFN
            outs += (D if name.endswith("down_proj") else width) * (E if ".experts.*." in name else 1)
    kept = {t.label: t for t in layer_activations(dora, trainable_block=False).items}
    term = kept["DoRA: base and adapter outputs kept for the magnitude"]
    assert term.bytes / n / (outs / LAYERS) in (4.0, 6.0, 8.0)  # compute + adapter dtype


ADAFACTOR = {
    release: json.loads((DATA / "moe_adafactor" / f"adafactor_transformers_{release}.json").read_text())
    for release in LORA
}


@pytest.mark.parametrize("release", list(LORA))
@pytest.mark.parametrize("family", list(ADAFACTOR["5.25.0"]["families"]))
def test_full_training_adafactor_keeps_every_experts_statistics(release: str, family: str) -> None:
    # tests/data/moe_adafactor/ (tools/measure/moe_adafactor_state.py, torch 2.13.0+cpu): torch.optim.Adafactor's
    # row_var + col_var elements over the blocks' 2-D and 3-D parameters after one full-training step of the tiny
    # models (dense_first where the family has dense layers). Mixtral under 5.25.0: 2 × (attention 448 + experts
    # 4 × (64 + 64) + 4 × (64 + 32) + router 4 + 64) = 2,824; under 4.57.1 each expert's three nn.Linear,
    # 4 × 3 × (32 + 64): 3,336. The rule before took one expert's three matrices a layer and no router: 1,472.
    line = LORA[release][1]
    config = {"model_type": family, **COMMON, **FAMILIES[family], **DENSE_FIRST.get(family, {})}
    spec = model_from_hf_config(config, name=family)
    plan = Plan(model=spec, method=Method.FULL, optimizer=Optimizer.ADAFACTOR, training_transformers=line)
    d, v = spec.hidden_size, spec.vocab_size
    outside = (v + d) + (0 if spec.tie_embeddings else v + d) + d + spec.num_layers * spec.norms_per_layer * d
    measured = ADAFACTOR[release]["families"][family]["block_matrix_statistics"]
    assert adafactor_state_elements(plan) - outside == measured
