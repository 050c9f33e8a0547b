"""What PEFT's LoRA adapts on a mixture of experts under transformers 4.x and 5.x (issue 22, branch h80moe).

Source of every expected count: tests/data/moe_lora/peft_transformers_{4.57.1,5.25.0}.json, written by
tools/measure/moe_lora_targets.py (peft 0.18.0, torch 2.13.0 CPU): each family built at hidden 64, expert MLP 32,
4 experts (top 2; Llama 4 top 1), 2 layers, wrapped with ``LoraConfig(r=8, target_modules=...)``; the figure is
PEFT's own ``print_trainable_parameters`` line. The tiny configs are the tool's (tools/measure/moe_lora_configs.py).
The data's ``dense_first`` rows (branch h83layers) build DeepSeek-V3, GLM-4.5, ERNIE 4.5 and Llama 4 with layer 0 dense
(a gated MLP of DENSE_FFN = 48) and layer 1 MoE, as their real checkpoints' first_k_dense_replace /
moe_layer_start_index / interleave_moe_layer_step make them.

transformers 5 keeps the routed experts as 3-D parameters that no target name reaches; 4.57.1 held them as a
ModuleList of nn.Linear for LINEAR_EXPERTS_4X's families (core.model). A shared expert is adapted in both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from core.catalogue import find_model
from core.cli.app import main as cli_main
from core.files import planfile
from core.files.launch import Target, export
from core.files.planfile import PlanFileError
from core.hfconfig import model_from_hf_config
from core.inputs import input_at
from core.params import param_counts
from core.plan import LoraSettings, Method, Plan, PlanError, TransformersLoss, default_plan_on
from core.training.flops import ADAPTER_GEMMS, block_gemms
from core.training.optimizer import trainable_tensors
from tools.measure.moe_lora_configs import COMMON, DENSE_FFN, DENSE_FIRST, FFN, LAYERS, RANK, D, E
from tools.measure.moe_lora_configs import LORA_FAMILIES as FAMILIES

DATA = Path(__file__).resolve().parents[1] / "data" / "moe_lora"
RELEASES = {
    "4.57.1": (json.loads((DATA / "peft_transformers_4.57.1.json").read_text()), TransformersLoss.V4_49_TO_4_57),
    "5.25.0": (json.loads((DATA / "peft_transformers_5.25.0.json").read_text()), TransformersLoss.V5_ON),
}
MLP = ("gate_proj", "up_proj", "down_proj")
# The plan's target lists and the data's row PEFT was given for the same matrices: Mixtral names its experts' MLP
# w1 / w3 / w2 (the exporters write those, core.files.launch), every other family gate / up / down.
PLAN_TARGETS = {
    "all-linear": ("all-linear",),
    "mlp": MLP,
    "attention+mlp": ("q_proj", "k_proj", "v_proj", "o_proj", *MLP),
    "q_proj,v_proj": ("q_proj", "v_proj"),
}
# Modules PEFT's all-linear (or a latent-attention model's own names) adapts that none of the seven names reaches,
# with their (in, out) at the tiny sizes: a router that is an nn.Linear (hidden → experts), Qwen2-MoE's shared-expert
# gate (hidden → 1), MLA's kv_a_proj_with_mqa (hidden → kv_lora_rank + rope) and kv_b_proj (kv_lora_rank → heads ·
# (nope + v)). Which of them a family's block holds is read from the data's adapted_last_block. The plan's all-linear
# counts the first three (ModelSpec.all_linear_rows); MLA's are named by no plan target (LATENT).
ROUTERS = {
    r"(block_sparse_moe|mlp)\.gate$": (D, E),
    r"(feed_forward|mlp)\.router$": (D, E),  # Llama4Router; Phi-MoE's PhimoeTopKRouter under 5.25.0
    r"router\.layer$": (D, E),  # GraniteMoE under 4.57.1: GraniteMoeTopKGating.layer
    r"shared_expert_gate$": (D, 1),
}
LATENT = {
    r"kv_a_proj_with_mqa$": (D, 16 + 8),
    r"kv_b_proj$": (16, 4 * (8 + 16)),
}
UNNAMED = {**ROUTERS, **LATENT}


def _peft_label(family: str, kind: str) -> str:
    if kind == "mlp":
        return "w1,w2,w3" if family in ("mixtral", "phimoe") else "gate_proj,up_proj,down_proj"
    return {"all-linear": "all-linear", "attention+mlp": "q,k,v,o,gate,up,down"}.get(kind, kind)


def _printed(row: dict[str, Any]) -> int:
    return int(re.search(r"trainable params: ([\d,]+)", row["printed"])[1].replace(",", ""))  # type: ignore[index]


def _unnamed(row: dict[str, Any], modules: dict[str, tuple[int, int]] = UNNAMED) -> int:
    """LoRA parameters on the modules the seven names do not reach (``modules``: UNNAMED, or LATENT for what the plan's
    all-linear leaves out), all layers: a dense_first row's layer 0 as its first block lists them, every other layer
    as the last block does."""
    blocks = [row.get("adapted_first_block", row["adapted_last_block"]), *[row["adapted_last_block"]] * (LAYERS - 1)]
    total = 0
    for names in blocks:
        for name in names:
            for pattern, (fan_in, fan_out) in modules.items():
                if re.search(pattern, name):
                    total += RANK * (fan_in + fan_out)
    return total


def _plan(family: str, release: TransformersLoss, targets: tuple[str, ...], dense_first: bool = False) -> Plan:
    extra = DENSE_FIRST[family] if dense_first else {}
    spec = model_from_hf_config({"model_type": family, **COMMON, **FAMILIES[family], **extra}, name=family)
    lora = LoraSettings(rank=RANK, alpha=16, targets=targets)
    return Plan(model=spec, method=Method.LORA, lora=lora, training_transformers=release)


CASES = [
    pytest.param(release, family, kind, False, id=f"{release}-{family}-{kind}")
    for release in RELEASES
    for family in FAMILIES
    for kind in PLAN_TARGETS
] + [
    pytest.param(release, family, kind, True, id=f"{release}-{family}-dense-first-{kind}")
    for release in RELEASES
    for family in DENSE_FIRST
    for kind in PLAN_TARGETS
]


def test_the_data_is_the_tiny_model_these_configs_build() -> None:
    for data, _ in RELEASES.values():
        tiny = {"hidden": D, "intermediate": FFN, "experts": E, "layers": LAYERS, "rank": RANK}
        assert data["tiny"] == {**tiny, "dense_intermediate": DENSE_FFN}
        assert set(data["families"]) == set(FAMILIES)
        assert set(data["dense_first"]) == set(DENSE_FIRST)
    # The plan reads the dense_first configs as one dense layer and one MoE layer.
    for family in DENSE_FIRST:
        spec = _plan(family, TransformersLoss.V5_ON, ("q_proj",), dense_first=True).model
        assert (spec.first_k_dense_replace, spec.dense_intermediate_size, spec.moe_layers) == (1, DENSE_FFN, 1)


@pytest.mark.parametrize(("release", "family", "kind", "dense_first"), CASES)
def test_the_plan_counts_what_peft_adapts(release: str, family: str, kind: str, dense_first: bool) -> None:
    data, line = RELEASES[release]
    rows = data["dense_first" if dense_first else "families"][family]
    row = rows[_peft_label(family, kind)]
    targets = PLAN_TARGETS[kind]
    if family == "deepseek_v3":  # latent attention: q_proj (no q_lora_rank) and o_proj are its only named matrices
        targets = tuple(t for t in targets if t not in ("k_proj", "v_proj")) or targets
        targets = ("q_proj", "o_proj", *MLP) if kind == "all-linear" else targets
    if family in ("mixtral", "phimoe") and kind == "attention+mlp" and release == "4.57.1":
        # PEFT was given gate_proj / up_proj / down_proj, names Mixtral 4.x and Phi-MoE 4.x lack (their w1 / w3 / w2
        # row is "mlp"): the row is the attention alone, what the plan's attention targets count.
        targets = ("q_proj", "k_proj", "v_proj", "o_proj")
    if "refused" in row:
        with pytest.raises(PlanError, match="lora.targets"):
            _plan(family, line, targets, dense_first)
        return
    plan = _plan(family, line, targets, dense_first)
    # all-linear (every family but DeepSeek-V3, whose plan names its matrices) counts the routers PEFT adapts: PEFT's
    # printed figure itself.
    unnamed = _unnamed(row, LATENT) if "all-linear" in targets else _unnamed(row)
    if family == "granitemoe" and release == "4.57.1" and "all-linear" in targets:
        # GraniteMoE's router is an nn.Linear under 4.57.1 alone while its experts are 3-D in both releases:
        # Plan.linear_experts cannot tell the releases apart, so the plan leaves it out (core.model ROUTER_LINEAR).
        unnamed = _unnamed(row, {r"router\.layer$": (D, E)})
        assert unnamed == RANK * (D + E) * LAYERS
    assert param_counts(plan).adapter == _printed(row) - unnamed
    if "all-linear" in targets and family != "granitemoe":
        assert unnamed == 0


def test_all_linear_counts_the_router_the_seven_names_leave_out() -> None:
    # Mixtral under 4.57.1: 26,688 printed = the seven names' 25,600 (attention 7,168 + 4 experts × 3 × 8 × 96 × 2
    # layers) + the router's (block_sparse_moe.gate, nn.Linear(64, 4)) 8 × (64 + 4) × 2 layers = 1,088.
    row = RELEASES["4.57.1"][0]["families"]["mixtral"]["all-linear"]
    assert (_printed(row), _unnamed(row)) == (26_688, 1_088)
    four = _plan("mixtral", TransformersLoss.V4_49_TO_4_57, ("all-linear",))
    assert param_counts(four).adapter == 26_688
    assert param_counts(_plan("mixtral", TransformersLoss.V4_49_TO_4_57, PLAN_TARGETS["attention+mlp"])).adapter == (
        25_600
    )
    # Under 5.25.0 the same config's all-linear is the attention alone: 7,168 (MixtralTopKRouter is no nn.Linear).
    assert param_counts(_plan("mixtral", TransformersLoss.V5_ON, ("all-linear",))).adapter == 7_168
    # Qwen2-MoE under 5.25.0: the shared-expert gate (nn.Linear(64, 1)) alone, 8 × (64 + 1) × 2 layers = 1,040 beyond
    # the seven names; 12,816 printed.
    qwen2 = RELEASES["5.25.0"][0]["families"]["qwen2_moe"]["all-linear"]
    assert _printed(qwen2) == param_counts(_plan("qwen2_moe", TransformersLoss.V5_ON, ("all-linear",))).adapter
    assert _unnamed(qwen2) == 1_040


def test_a_dense_layer_of_a_moe_model_adapts_its_own_mlp() -> None:
    # tests/data/moe_lora/peft_transformers_5.25.0.json, dense_first deepseek_v3, "gate_proj,up_proj,down_proj":
    # 4,992 printed = layer 0's DeepseekV3MLP of 48, 8 × (64 + 48) × 3 = 2,688, + layer 1's shared expert of 32,
    # 8 × (64 + 32) × 3 = 2,304. The rule before branch h83layers counted both layers as MoE blocks: 2 × 2,304 = 4,608.
    row = RELEASES["5.25.0"][0]["dense_first"]["deepseek_v3"]["gate_proj,up_proj,down_proj"]
    plan = _plan("deepseek_v3", TransformersLoss.V5_ON, MLP, dense_first=True)
    assert _printed(row) == param_counts(plan).adapter == 4_992
    assert plan.model.adapter_blocks() == ((1, False), (1, True))
    # Under 4.57.1 layer 1 adds its 4 routed experts, 4 × 8 × (64 + 32) × 3 = 9,216: 14,208 printed.
    four = RELEASES["4.57.1"][0]["dense_first"]["deepseek_v3"]["gate_proj,up_proj,down_proj"]
    older = plan.with_changes(training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert _printed(four) == param_counts(older).adapter == 14_208


@pytest.mark.parametrize("release", list(RELEASES))
@pytest.mark.parametrize("family", list(DENSE_FIRST))
def test_a_dense_first_models_trained_tensors_and_adapter_flops_follow_the_same_rows(release: str, family: str) -> None:
    # The tensors: PEFT creates a lora_A and a lora_B on every module the data lists for layer 0 (dense) and layer 1
    # (MoE), a routed expert's ("experts.*") once per expert (E = 4), less the modules no plan target names (UNNAMED);
    # the optimizer's count of trained tensors must be that (core.training.optimizer.trainable_tensors).
    data, line = RELEASES[release]
    row = data["dense_first"][family][_peft_label(family, "attention+mlp")]
    targets = ("q_proj", "o_proj", *MLP) if family == "deepseek_v3" else PLAN_TARGETS["attention+mlp"]
    plan = _plan(family, line, targets, dense_first=True)
    named = [
        name
        for block in (row["adapted_first_block"], row["adapted_last_block"])
        for name in block
        if not any(re.search(pattern, name) for pattern in UNNAMED)
    ]
    assert trainable_tensors(plan) == 2 * sum(E if ".experts.*." in name else 1 for name in named)
    # The FLOPs: an adapter matmul's k·n per token, summed over the layers (Gemm.weight × num_layers), is r·(in + out)
    # of every adapted matrix the tokens reach, so under 5.x (no routed expert: every adapter sees every token) the
    # adapters' parameter count, PEFT's printed figure.
    if release == "5.25.0":
        adapters = [g for g in block_gemms(plan) if g.name.endswith(ADAPTER_GEMMS)]
        assert sum(g.weight for g in adapters) * LAYERS == _printed(row) == param_counts(plan).adapter


@pytest.mark.parametrize("release", list(RELEASES))
@pytest.mark.parametrize("family", list(DENSE_FIRST))
@pytest.mark.parametrize("method", [Method.DORA, Method.IA3])
def test_dora_and_ia3_on_a_dense_first_model_train_what_peft_trains(release: str, family: str, method: Method) -> None:
    # tests/data/moe_lora/peft_transformers_*.json "dense_first_methods" (tools/measure/moe_lora_targets.py
    # measure_methods): DoRA r 8 (LoRA's A and B and a magnitude per output row) and IA3 (a vector per target, down_proj
    # scaled on its input) on attention and the MLP (DeepSeek-V3: q_proj, o_proj and the MLP), the parameters and
    # tensors that require a gradient; the plan's adapter count and its optimizer's tensor count.
    data, line = RELEASES[release]
    measured = data["dense_first_methods"][family][method.value]
    targets = ("q_proj", "o_proj", *MLP) if family == "deepseek_v3" else PLAN_TARGETS["attention+mlp"]
    feedforward = ("down_proj",) if method is Method.IA3 else ()
    lora = LoraSettings(rank=RANK, alpha=16, targets=targets, ia3_feedforward=feedforward)
    plan = _plan(family, line, targets, dense_first=True).with_changes(method=method, lora=lora)
    assert (param_counts(plan).adapter, trainable_tensors(plan)) == (measured["parameters"], measured["tensors"])


def test_all_linear_adds_the_nn_linear_router_of_the_moe_layers_only() -> None:
    # huggingface/peft 51c2ff66 src/peft/tuners/tuners_utils.py ``_maybe_include_all_linear_layers`` (lines 1998-2004):
    # all-linear is every nn.Linear / Conv1D module but the output head, so a router that is an nn.Linear is adapted.
    # ERNIE 4.5 dense_first under 4.57.1 (peft_transformers_4.57.1.json): 21,920 printed = the seven names' 21,376 (its
    # q..down row) + Ernie4_5_MoeSparseMoeBlock.gate's 8 × (64 + 4) in the one MoE layer = 544.
    row = RELEASES["4.57.1"][0]["dense_first"]["ernie4_5_moe"]["all-linear"]
    assert "mlp.gate" in row["adapted_last_block"] and "mlp.gate" not in row["adapted_first_block"]
    plan = _plan("ernie4_5_moe", TransformersLoss.V4_49_TO_4_57, ("all-linear",), dense_first=True)
    seven = _plan("ernie4_5_moe", TransformersLoss.V4_49_TO_4_57, PLAN_TARGETS["attention+mlp"], dense_first=True)
    assert (_printed(row), param_counts(plan).adapter, param_counts(seven).adapter) == (21_920, 21_920, 21_376)
    # The router's lora_A and lora_B are two more trained tensors (one MoE layer), and under 5.25.0 Llama 4's router
    # adapter matmuls' k·n over the layers complete PEFT's printed count (12,704, dense_first llama4_text all-linear).
    assert trainable_tensors(plan) == trainable_tensors(seven) + 2
    llama = _plan("llama4_text", TransformersLoss.V5_ON, ("all-linear",), dense_first=True)
    adapters = [g for g in block_gemms(llama) if g.name.endswith(ADAPTER_GEMMS)]
    five = RELEASES["5.25.0"][0]["dense_first"]["llama4_text"]["all-linear"]
    assert sum(g.weight for g in adapters) * LAYERS == _printed(five) == 12_704


def test_catalogue_models_with_dense_layers_count_them_as_dense_mlps() -> None:
    # resources/models.json deepseek-v3 (its config.json: 61 layers, first_k_dense_replace 3, hidden 7,168, dense
    # intermediate 18,432, 256 routed experts and one shared of 2,048, o_proj reads 128 heads × 128): o_proj and the
    # MLP at r 16 under 5.0+: o 61 × 16 × (16,384 + 7,168) = 22,986,752, the shared expert 58 × 3 × 16 × (7,168 +
    # 2,048) = 25,657,344, the dense MLPs 3 × 3 × 16 × (7,168 + 18,432) = 3,686,400: 52,330,496 (h80moe's note (a)
    # worked out the same exact figure; the rule before counted 49,971,200). Under 4.49-4.57 the 58 MoE layers add
    # 256 experts × 3 × 16 × (7,168 + 2,048) each: 6,568,280,064 more.
    v3 = _catalogue_plan("deepseek-v3", ("o_proj", *MLP))
    assert param_counts(v3).adapter == 52_330_496
    older = v3.with_changes(training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert param_counts(older).adapter == 52_330_496 + 6_568_280_064
    # llama-4-maverick-17b-128e (48 layers, interleave_moe_layer_step 2: 24 MoE layers with a shared expert of 8,192,
    # 24 dense ones of intermediate_size_mlp 16,384; hidden 5,120, q 40 × 128, kv 8 × 128), all-linear r 16, either
    # release: attention 48 × 16 × (2 × 10,240 + 2 × 6,144) = 25,165,824, shared 24 × 3 × 16 × 13,312 = 15,335,424,
    # dense 24 × 3 × 16 × 21,504 = 24,772,608: 65,273,856 on the seven names (h80moe's exact figure; before
    # 55,836,672); all-linear adds the 24 MoE layers' routers (Llama4Router, nn.Linear(5,120, 128) in 4.57.1 and
    # 5.25.0): 24 × 16 × (5,120 + 128) = 2,015,232, 67,289,088.
    maverick = find_model("llama-4-maverick-17b-128e").spec
    lora = LoraSettings(rank=16, alpha=32, targets=("all-linear",))
    plan = default_plan_on(maverick).with_changes(method=Method.LORA, lora=lora)
    assert param_counts(plan).adapter == 67_289_088
    seven = plan.with_changes(lora=LoraSettings(rank=16, alpha=32, targets=PLAN_TARGETS["attention+mlp"]))
    assert param_counts(seven).adapter == 65_273_856


# ---- the release input (training_transformers) ---------------------------------------------------------------


def _catalogue_plan(model: str, targets: tuple[str, ...], **changes: Any) -> Plan:
    lora = LoraSettings(rank=16, alpha=32, targets=targets)
    return Plan(model=find_model(model).spec, method=Method.LORA, lora=lora, **changes)


def test_the_default_is_transformers_5_and_an_old_4_49_on_file_reads_as_4_x() -> None:
    assert input_at("training_transformers").default is TransformersLoss.V5_ON
    assert TransformersLoss("5.0+") is TransformersLoss.V5_ON
    # "4.49+" was the one value before the split: such a file was estimated with its routed experts adapted.
    plan = _catalogue_plan("mixtral-8x7b-v0.1", ("q_proj", "v_proj", *MLP))
    document = planfile.plan_to_dict(plan)
    document["plan"]["training_transformers"] = "4.49+"
    assert planfile.loads(json.dumps(document)).training_transformers is TransformersLoss.V4_49_TO_4_57
    document["plan"]["training_transformers"] = "5.0+"
    assert planfile.loads(json.dumps(document)) == plan


def test_a_bad_release_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    document = planfile.plan_to_dict(_catalogue_plan("qwen3-30b-a3b", ("q_proj",)))
    document["plan"]["training_transformers"] = "4.58"
    with pytest.raises(PlanFileError, match="4.49-4.57, 5.0"):
        planfile.loads(json.dumps(document))
    args = ["estimate", "--model", "qwen3-30b-a3b", "--method", "lora", "--training-transformers", "4.58"]
    assert cli_main(args) != 0
    assert "'4.49-4.57', '5.0+'" in capsys.readouterr().err


def test_the_command_line_picks_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3-30B-A3B all-linear r 16 (catalogue: 48 layers, hidden 2,048, 128 experts of 768, q 32 × 128, kv 4 × 128):
    # attention 48 × 16 × (2,048 + 4,096 + 2 × (2,048 + 512) + 4,096 + 2,048) = 13,369,344; under 4.x the experts
    # add 48 × 128 × 3 × 16 × (2,048 + 768) = 830,472,192 and the routers (Qwen3MoeSparseMoeBlock.gate, nn.Linear in
    # 4.57.1) 48 × 16 × (2,048 + 128) = 1,671,168.
    args = ["estimate", "--model", "qwen3-30b-a3b", "--method", "lora", "--lora-rank", "16"]
    args += ["--lora-targets", "all-linear", "--json"]
    adapters = {}
    for release in ("5.0+", "4.49-4.57"):
        assert cli_main([*args, "--training-transformers", release]) == 0
        adapters[release] = json.loads(capsys.readouterr().out)["params"]["adapter"]
    assert adapters == {"5.0+": 13_369_344, "4.49-4.57": 13_369_344 + 830_472_192 + 1_671_168}


def test_the_release_matters_only_where_it_moves_the_adapters_or_the_loss() -> None:
    row = input_at("training_transformers")
    fused = {"fused_loss": True}  # the loss is Liger's: the release does not change it
    assert row.matters(_catalogue_plan("qwen3-30b-a3b", ("q_proj", *MLP), **fused))
    assert not row.matters(_catalogue_plan("qwen3-30b-a3b", ("q_proj", "v_proj"), **fused))
    assert not row.matters(_catalogue_plan("gpt-oss-20b", ("q_proj", *MLP), **fused))  # 3-D in 4.55 on too


# ---- refusal (PEFT: "Target modules {...} not found in the base model") ---------------------------------------


def test_mlp_targets_alone_on_a_5_x_moe_without_a_shared_expert_are_refused_with_the_fix() -> None:
    with pytest.raises(PlanError) as refused:
        _catalogue_plan("qwen3-30b-a3b", MLP)
    text = str(refused.value)
    assert "\n" not in text and "lora.targets" in text
    assert "add attention targets" in text and "transformers 4.49-4.57" in text
    # gpt-oss's experts were 3-D in 4.x as well: no release helps, attention is the fix.
    with pytest.raises(PlanError, match="add attention targets") as gpt_oss:
        _catalogue_plan("gpt-oss-20b", MLP, training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert "4.49-4.57" not in str(gpt_oss.value)
    # Accepted: under 4.x, with a shared expert (ERNIE 4.5), or beside attention.
    _catalogue_plan("qwen3-30b-a3b", MLP, training_transformers=TransformersLoss.V4_49_TO_4_57)
    _catalogue_plan("ernie-4.5-21b-a3b", MLP)
    _catalogue_plan("qwen3-30b-a3b", ("q_proj", *MLP))


# ---- exports: the names PEFT matches under the plan's release ------------------------------------------------


@pytest.mark.parametrize("target", [Target.TRL, Target.AXOLOTL, Target.LLAMA_FACTORY])
def test_mixtral_4_x_exports_its_experts_as_w1_w3_w2(target: Target) -> None:
    # tests/data/moe_lora/peft_transformers_4.57.1.json: Mixtral's "w1,w2,w3" adapts the experts, its
    # "gate_proj,up_proj,down_proj" is refused; under 5.25.0 neither reaches them (attention alone).
    four = _catalogue_plan("mixtral-8x7b-v0.1", ("q_proj", *MLP), training_transformers=TransformersLoss.V4_49_TO_4_57)
    five = _catalogue_plan("mixtral-8x7b-v0.1", ("q_proj", *MLP))
    old, new = export(four, target).text, export(five, target).text
    assert all(name in old for name in ("w1", "w2", "w3")) and "gate_proj" not in old
    assert "gate_proj" in new and "w1" not in new
    # Another family keeps gate / up / down under 4.x: Qwen3-MoE's experts are Qwen3MoeMLP(gate_proj, ...).
    qwen = _catalogue_plan("qwen3-30b-a3b", ("q_proj", *MLP), training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert "gate_proj" in export(qwen, target).text


def test_picking_such_a_model_adds_pefts_default_attention_targets() -> None:
    """A plan on MLP targets alone moved onto a 5.x MoE without a shared expert gets q_proj and v_proj (PEFT's LoRA
    default), as a latent-attention model's missing targets give way to o_proj; under 4.x, or on a model with a shared
    expert, the targets stay."""
    dense = Plan(model=find_model("llama-3.1-8b").spec, method=Method.LORA, lora=LoraSettings(targets=MLP))
    assert dense.on_model(find_model("qwen3-30b-a3b").spec, "qwen3-30b-a3b").lora.targets == (
        "q_proj",
        "v_proj",
        *MLP,
    )
    four = dense.with_changes(training_transformers=TransformersLoss.V4_49_TO_4_57)
    assert four.on_model(find_model("qwen3-30b-a3b").spec, "qwen3-30b-a3b").lora.targets == MLP
    assert dense.on_model(find_model("ernie-4.5-21b-a3b").spec, "ernie-4.5-21b-a3b").lora.targets == MLP


def test_a_litgpt_switch_the_window_hides_does_not_change_which_experts_are_adapted() -> None:
    # The LitGPT switch matters only without Unsloth and a fused loss (core.inputs' "litgpt" row); under Liger's loss
    # the window hides it, so the plan must count the experts as the shown release says (TRL's export of such a plan,
    # read back, found the release row shown on one side only: tests/core/test_launch_roundtrip.py).
    base = _plan("qwen3_moe", TransformersLoss.V5_ON, ("o_proj", "gate_proj"))
    litgpt = base.with_changes(litgpt=True)
    hidden = litgpt.with_changes(fused_loss=True)
    assert litgpt.litgpt_code and litgpt.linear_experts  # LitGPT's own MoE: a ModuleList of linears
    assert not hidden.litgpt_code
    assert hidden.linear_experts is base.linear_experts is False
    assert hidden.release_moves_adapters and base.release_moves_adapters
