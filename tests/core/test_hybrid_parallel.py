"""Hybrid Mamba-2 / Gated DeltaNet models trained on data-parallel ranks (DDP, FSDP2, ZeRO-1 / 2 / 3): each rank runs
the one-GPU step at its micro-batch, core.parallel holds its state, and FSDP wraps each decoder layer, whose size
differs by kind (core.parallel.layout.fsdp_block_units). Splits of the model stay refused with their reason."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.parallel import plan_for_parallel_case
from core import evidence
from core.catalogue import load_models
from core.dtypes import MpDtype
from core.errors import PlanError
from core.estimate import estimate
from core.files.launch import Target, export
from core.files.launch.common import apply_fields
from core.files.launch.fields import TRAINING_FIELDS
from core.files.measurement import plan_for_case
from core.hfconfig import model_from_hf_config
from core.inputs import GradSync
from core.parallel.layout import layout
from core.parallel.state import RankState
from core.params import param_counts
from core.plan import Method, Plan, Strategy, default_plan_on, lora_on, training_refusal
from core.presets import plan_for_model
from core.roles import dtypes_for
from core.training import detailed
from tests.core.test_launch_roundtrip import OWN_READERS, check_unexpressed, differences, read_back, skipped

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "parallel" / "hybrid"
MEASURED = sorted((DATA / "measured").glob("*.json"))


def _doc(case_id: str) -> dict:
    return json.loads((DATA / "measured" / f"{case_id}.json").read_text())


def _error(doc: dict) -> float:
    plan = plan_for_parallel_case(doc["case"], doc["model_config"])
    assert training_refusal(plan) is None
    return (estimate(plan).tensor_peak_bytes / doc["peak_allocated_bytes"] - 1) * 100


def _terms(plan: Plan, phase: str) -> dict[str, float]:
    est = estimate(plan)
    found = next(p for p in est.phases if p.name.startswith(phase))
    return {t.label: t.bytes for b in found.buckets for t in b.terms}


def test_every_catalogue_hybrids_layers_add_up_to_its_count() -> None:
    # core.hybrid's count is transformers 5.25.0's own on the meta device (tests/data/hybrid/meta_counts.json):
    # the layers by kind, the embedding(s) and the final norm add up to it exactly.
    hybrids = [m.spec for m in load_models() if m.spec.recurrent_mixer and m.spec.family != "falcon_h1"]
    assert len(hybrids) >= 8
    for spec in hybrids:
        layers = sum(count * params for count, params in spec.hybrid_layer_params())
        outside = spec.embedding_params() + spec.head_params() + spec.norm_params()
        assert layers + outside == spec.total_params(), spec.name
        assert sum(count for count, _ in spec.hybrid_layer_params()) == spec.num_layers


def _config_order(config: dict) -> str:
    """The layer order as the config states it, one character a layer: Nemotron-H's hybrid_override_pattern as it
    is; layer_types ("mamba" / "linear_attention" M, "attention" / "full_attention" *); Bamba's attn_layer_indices."""
    config = config.get("text_config", config)
    if "hybrid_override_pattern" in config:
        return config["hybrid_override_pattern"]
    if "attn_layer_indices" in config:
        return "".join("*" if i in config["attn_layer_indices"] else "M" for i in range(config["num_hidden_layers"]))
    if "layer_types" not in config:  # Qwen3-Next's: transformers 5.25.0 Qwen3NextConfig's default from the interval
        n, every = config["num_hidden_layers"], config["full_attention_interval"]
        return "".join("*" if (i + 1) % every == 0 else "M" for i in range(n))
    return "".join("*" if kind in ("attention", "full_attention") else "M" for kind in config["layer_types"])


def test_every_catalogue_hybrid_keeps_its_configs_layer_order() -> None:
    # resources/models.json holds each hybrid's published config.json (config_source, the Hub file; the widths as
    # tests/data/hybrid/meta_counts.json records them): its layer_types, hybrid_override_pattern or
    # attn_layer_indices is the order ModelSpec.layer_pattern keeps.
    hybrids = [m for m in load_models() if m.spec.recurrent_mixer]
    assert len(hybrids) >= 9
    for entry in hybrids:
        assert entry.spec.layer_pattern == _config_order(entry.config), entry.id
        assert entry.spec.hybrid is not None and entry.spec.hybrid.pattern == entry.spec.layer_pattern
    # The order is not the counts' (attention first): Qwen3.5 27B's layer_types put attention every fourth layer.
    qwen = next(m.spec for m in hybrids if m.id == "qwen3.5-27b")
    assert qwen.layer_pattern[:4] == "MMM*" and qwen.layer_pattern.count("*") == qwen.attention_layers == 16


def test_a_pattern_that_disagrees_with_the_counts_is_refused_by_name() -> None:
    spec = next(m.spec for m in load_models() if m.id == "bamba-9b")  # 29 Mamba-2 and 3 attention layers
    moved = spec.layer_pattern.replace("*", "M", 1)
    with pytest.raises(PlanError) as err:
        replace(spec, layer_pattern=moved)
    assert err.value.field == "model.layer_pattern" and "3 attention" in str(err.value)
    for bad in (spec.layer_pattern[:-1], spec.layer_pattern[:-1] + "x", spec.layer_pattern[:-1] + "-"):
        with pytest.raises(PlanError) as err:
            replace(spec, layer_pattern=bad)
        assert err.value.field == "model.layer_pattern"
    dense = next(m.spec for m in load_models() if m.id == "gpt2")
    with pytest.raises(PlanError) as err:
        replace(dense, layer_pattern="*" * dense.num_layers)
    assert "without recurrent layers" in str(err.value)


def test_without_the_order_fsdp_keeps_the_largest_unit_twice() -> None:
    # A plan file written before layer_pattern (an edited model: "" after loading) plans as before: the largest unit
    # in flight as the backward starts; with the order, Qwen3.5 27B's last layer (attention, 372,255,232
    # parameters, core.hybrid's count) is.
    plan = plan_for_model("qwen3.5-27b").with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    unknown = plan.with_changes(model=replace(plan.model, layer_pattern=""))
    label = "one block's all-gather output in flight (prefetch)"
    assert _terms(plan, "forward")[label] == 372_255_232 * 4  # the plan's float32 weights, gathered as stored
    assert _terms(unknown, "forward")[label] == 383_273_184 * 4


@pytest.mark.parametrize("case_id", ["hyb-fsdp-granite-full-bf16-w2-b2-s1024", "hyb-fsdp-qwen35-full-bf16-w2-b2-s1024"])
def test_fsdp_units_are_the_layers_by_kind_as_fully_shard_made_them(case_id: str) -> None:
    # The measured run's own fsdp_units (tools.measure.parallel._fsdp_units: each FSDP2 group's global numel):
    # Granite's Mamba-2 layers 1,417,368 and its attention layer 1,182,208; Qwen3.5's attention layer 656,000
    # (gated q_proj) and its Gated DeltaNet layers 527,912.
    doc = _doc(case_id)
    spec = model_from_hf_config(doc["model_config"])
    units = sorted(u["numel"] for u in doc["fsdp_units"] if u["module"] != "<root>")
    expected = sorted(params for count, params in spec.hybrid_layer_params() for _ in range(count))
    assert units == expected
    assert len(set(units)) == 2  # two sizes: a uniform block would be wrong for one kind or the other


def test_measured_ranks_within_the_one_gpu_rules_accuracy() -> None:
    # benchmarks/parallel/hybrid/measured: one rank of 2 or 4 under DDP and FSDP2, fake process group (torch 2.13.0,
    # transformers 5.25.0, peft 0.18.0). Nothing was fitted to them.
    errors = {
        path.stem: _error(json.loads(path.read_text()))
        for path in MEASURED
        if path.stem not in CHECKPOINTED and path.stem not in HELD_OUT
    }
    assert len(errors) == 17
    long = [abs(e) for k, e in errors.items() if k.endswith("s1024")]
    assert statistics.median(long) < 1.0 and max(long) < 1.5
    # At 1 × 256 tokens (one Mamba-2 chunk) the one-GPU rule was 4.5 % over on tiny Granite and the ranks +4.0 %
    # (DDP) and +5.8 % (FSDP2); core.training.mamba's one-chunk views (branch h73short) took them to +0.4 / +0.6 %.
    assert max(abs(e) for e in errors.values()) < 1.5


APART = [path.stem for path in MEASURED if "qwen35apart" in path.stem and "-bf16-w" in path.stem]
# The ho- cases (branch h74gdnck) were measured after the rule below was written, and are scored apart.
HELD_OUT = [path.stem for path in MEASURED if path.stem.startswith("ho-")]
CHECKPOINTED = [path.stem for path in MEASURED if "-ckpt-" in path.stem and path.stem not in HELD_OUT]


@pytest.mark.parametrize("case_id", [case for case in APART if "-full-" in case])
def test_fsdp_prefetches_the_last_layer_not_the_largest(case_id: str) -> None:
    # benchmarks/accuracy/configs/tiny-qwen3.5-apart.json: layer_types full, linear, full, linear, so its largest
    # units (gated attention, 16 heads) are not neighbours and the last layer is the smaller Gated DeltaNet one.
    doc = _doc(case_id)
    spec = model_from_hf_config(doc["model_config"])
    assert spec.layer_pattern == "*M*M"
    units = [u["numel"] for u in doc["fsdp_units"] if u["module"] != "<root>"]
    assert list(spec.hybrid_unit_params()) == units  # the run's own fsdp_units, in module order
    # Measured at the peak (as the backward starts): one unit's all-gather buffer, the last layer's (527,912
    # bf16 parameters, 2 B each, and the allocator's 512 B rounding); not the largest (1,245,824).
    buffer = doc["breakdown_at_peak"]["all_gather_buffers"]
    assert units[-1] * 2 <= buffer < units[-1] * 2 + 512 < max(units) * 2
    plan = plan_for_parallel_case(doc["case"], doc["model_config"])
    start = _terms(plan, "backward")
    assert start["one block's all-gather output in flight (prefetch)"] == units[-1] * 2
    # A block's backward: the largest two neighbours (an attention unit and a Gated DeltaNet one), not 2 × largest.
    lay = layout(plan)
    state = detailed._parts(plan, param_counts(plan), dtypes_for(plan), detailed.Rank(lay, lay.stages[0])).state
    assert state is not None and state.backward_block is not None
    pair = {t.label: t.bytes for t in state.backward_block}
    assert pair["2 blocks gathered (the one computing + the one prefetched)"] == (units[0] + units[1]) * 2


def test_the_order_moved_only_the_apart_cases() -> None:
    # Before the order was kept, the apart cases were over by the largest unit less the last one (the prefetch as
    # the backward starts): main gave +2.54 % and +4.24 % at 1 × 256 tokens (benchmarks/parallel.py --data
    # benchmarks/parallel/hybrid on branch main, 2026-12-06); with it, within the one-GPU rule's error.
    errors = {case: _error(_doc(case)) for case in APART}
    assert max(abs(e) for e in errors.values()) < 1.5


def test_ddp_adds_its_buckets_to_the_one_gpu_step() -> None:
    # Measured: the DDP rank holds the one-GPU step and a second copy of the gradients (ddp_buckets 12,966,400 B,
    # the 6,483,144 bf16 parameters rounded to 512 B blocks); the estimate adds the same buckets to its one-GPU step.
    doc = _doc("hyb-ddp-granite-full-bf16-w4-b1-s256")
    assert doc["breakdown_at_peak"]["ddp_buckets"] == 12_966_400
    ddp = plan_for_parallel_case(doc["case"], doc["model_config"])
    one = plan_for_case(doc["case"], doc["model_config"])
    added = estimate(ddp).tensor_peak_bytes - estimate(one).tensor_peak_bytes
    assert added == pytest.approx(6_483_144 * 2, rel=1e-9)


def test_fsdp_gathers_the_largest_layer_of_a_large_hybrid() -> None:
    # Qwen3.5-27B (resources/models.json): 48 Gated DeltaNet layers of 383,273,184 parameters, 16 attention ones of
    # 372,255,232 (core.hybrid's counts); a block's backward holds two units gathered, the larger kind's.
    plan = plan_for_model("qwen3.5-27b").with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    assert training_refusal(plan) is None
    backward = _terms(plan, "backward")
    gathered = backward["2 blocks gathered (the one computing + the one prefetched)"]
    assert gathered == 2 * 383_273_184 * 4  # the plan's float32 weights, gathered as stored
    assert backward["one block's unsharded gradients"] == 383_273_184 * 4
    # The root unit is the embedding and head as they are (shape_scale 1), not scaled as a typed P's.
    spec = plan.model
    root = backward["root unit gathered (embedding, final norm, head: not resharded after forward)"]
    assert root == (spec.embedding_params() + spec.head_params() + spec.norm_params()) * 4


def test_no_reshard_gathers_every_layer_once() -> None:
    plan = plan_for_model("granite-4.0-h-small").with_parallel(
        gpus_per_node=8, strategy=Strategy.FSDP, reshard_after_forward=False
    )
    backward = _terms(plan, "backward")
    every = next(v for k, v in backward.items() if k.startswith("all 40 blocks gathered"))
    layers = sum(count * params for count, params in plan.model.hybrid_layer_params())
    assert every == pytest.approx(layers * 4)  # the plan's float32 weights, gathered as stored


@pytest.mark.parametrize("strategy", [Strategy.DDP, Strategy.FSDP, Strategy.ZERO1, Strategy.ZERO2, Strategy.ZERO3])
@pytest.mark.parametrize("model_id", ["granite-4.0-h-small", "qwen3.5-27b", "nemotron-nano-9b-v2"])
def test_data_parallel_layouts_are_estimated(model_id: str, strategy: Strategy) -> None:
    one = plan_for_model(model_id)
    plan = one.with_parallel(gpus_per_node=8, strategy=strategy)
    assert training_refusal(plan) is None
    rank, whole = estimate(plan), estimate(one)
    if strategy is not Strategy.DDP:  # the state sharded over 8 ranks: less than one GPU's
        assert rank.peak_bytes < whole.peak_bytes
    # LoRA on the targets the window's pick gives a hybrid (attention's and the mixer's projections)
    lora = plan.with_method(Method.LORA)
    lora = lora.with_changes(lora=lora_on(lora.model, lora.lora))
    assert lora.method is Method.LORA and training_refusal(lora) is None and estimate(lora).peak_bytes > 0


def test_splits_of_the_model_stay_refused_with_their_reason() -> None:
    granite = plan_for_model("granite-4.0-h-small").with_parallel(gpus_per_node=8)
    qwen = plan_for_model("qwen3.5-27b").with_parallel(gpus_per_node=8)
    # transformers 5.25.0 configuration_granitemoehybrid.py: base_model_tp_plan names self_attn only.
    assert "no entry for the Mamba-2 mixer" in (training_refusal(granite.with_parallel(tensor_parallel=2)) or "")
    # configuration_qwen3_5.py: linear_attn.in_proj_qkv ... "colwise_gather_output".
    assert "colwise_gather_output" in (training_refusal(qwen.with_parallel(tensor_parallel=2)) or "")
    for split in ({"pipeline_parallel": 2}, {"context_parallel": 2}):
        assert "pipeline, context and expert parallel" in (training_refusal(granite.with_parallel(**split)) or "")
    # ZeRO-3 follows the layer order: refused where the plan's model has none (a file written before it).
    unordered = granite.with_changes(model=replace(granite.model, layer_pattern=""))
    assert "layer order" in (training_refusal(unordered.with_parallel(strategy=Strategy.ZERO3)) or "")
    assert training_refusal(granite.with_parallel(strategy=Strategy.ZERO3)) is None
    fsdp1 = granite.with_parallel(strategy=Strategy.FSDP, fsdp1_wrap=True)
    assert "FSDP1" in (training_refusal(fsdp1) or "")


@pytest.mark.parametrize("target", OWN_READERS)
@pytest.mark.parametrize(
    ("model_id", "strategy"),
    [
        ("granite-4.0-h-small", Strategy.FSDP),
        ("qwen3.5-27b", Strategy.DDP),
        ("nemotron-nano-9b-v2", Strategy.ZERO2),
        ("granite-4.0-h-tiny", Strategy.ZERO3),
    ],
)
def test_hybrid_multi_gpu_plans_round_trip_through_the_launch_configs(
    target: Target, model_id: str, strategy: Strategy
) -> None:
    # Two nodes of 8, LoRA (the window's targets for a hybrid) and the strategy: each export read back by the
    # reader beside it gives the plan's fields again (tests/core/test_launch_roundtrip.py's rule).
    plan = plan_for_model(model_id).with_method(Method.LORA)
    plan = plan.with_changes(lora=lora_on(plan.model, plan.lora)).with_parallel(
        nodes=2, gpus_per_node=8, strategy=strategy
    )
    assert training_refusal(plan) is None
    exported = export(plan, target)
    check_unexpressed(exported)
    back = apply_fields(default_plan_on(plan.model), read_back(target, exported.text))
    skip = skipped(exported, target)
    assert not differences(plan, back, TRAINING_FIELDS, skip), exported.text


def test_fsdp_no_sync_accumulates_every_layers_gradient_once() -> None:
    # set_requires_gradient_sync(False) keeps every unit's unsharded gradient: the layers summed by kind and the
    # root, the model's exact count (Granite 4.0-H Small: 32,207,337,984, resources/models.json's config), not
    # 40 × its largest layer.
    plan = (
        plan_for_model("granite-4.0-h-small")
        .with_workload(grad_accum=4)
        .with_parallel(gpus_per_node=8, strategy=Strategy.FSDP, grad_sync=GradSync.NO_SYNC)
    )
    forward = _terms(plan, "forward")
    held = next(v for k, v in forward.items() if k.startswith("unsharded gradients of all 40 blocks"))
    assert held == 32_207_337_984 * 4  # the plan's float32 gradients, reduced in float32


def _zero3_turn(pattern: list[str], reuse: int) -> float:
    """The elements ZeRO-3 keeps gathered from the forward's end into the backward on one of 2 ranks, for the tiny
    apart Qwen3.5 with ``pattern`` as its layer_types, at ``reuse`` (stage3_max_reuse_distance)."""
    config = json.loads((ROOT / "benchmarks" / "accuracy" / "configs" / "tiny-qwen3.5-apart.json").read_text())
    config["text_config"]["layer_types"] = pattern
    plan = plan_for_model("qwen3.5-9b").on_model(model_from_hf_config(config))
    plan = plan.with_parallel(gpus_per_node=2, strategy=Strategy.ZERO3, zero3_max_reuse_elements=reuse)
    assert training_refusal(plan) is None and not plan.checkpointing
    label = "gathered: the forward's last modules, kept for the backward + the prefetch bucket"
    term = _terms(plan, "forward")[label]
    prefetch = min(plan.parallel.zero3_prefetch_elements, plan.parallel.zero3_max_live_elements)
    return term / 2 - prefetch  # the plan's 16-bit (bf16) weights


def test_zero3_keeps_the_last_layers_modules_by_their_order() -> None:
    # DeepSpeed's rule (core.parallel.state._zero3_forward_tail): from the head back through the forward, each module
    # stays gathered while the elements after it, twice over (forward then backward), are under the reuse distance.
    # tiny-qwen3.5-apart.json: d 256, vocabulary 4,096 (an untied head of 1,048,576), MLP 512 (gate, up, down
    # 131,072 each); attention's o_proj 1,024 x 256 = 262,144 (16 heads of 64); a Gated DeltaNet layer's out_proj
    # 128 x 256 = 32,768 (4 value heads of 32). At R = 2 x (head + MLP) + 1 the module after the last layer's MLP
    # is kept, then the walk stops: which module that is follows the last layer's kind.
    head_and_mlp = 1_048_576 + 3 * 131_072
    reuse = 2 * head_and_mlp + 1
    ends_linear = _zero3_turn(["full_attention", "linear_attention", "full_attention", "linear_attention"], reuse)
    ends_full = _zero3_turn(["linear_attention", "full_attention", "linear_attention", "full_attention"], reuse)
    assert ends_linear == pytest.approx(head_and_mlp + 32_768)  # the Gated DeltaNet layer's out_proj
    assert ends_full == pytest.approx(head_and_mlp + 262_144)  # the attention layer's o_proj


def test_zero3_on_a_hybrid_says_it_was_never_run() -> None:
    # DeepSpeed is not installed here and no published figure covers a hybrid under ZeRO-3: the estimate's range
    # names it as never validated (core.evidence), beside the one-GPU hybrid rules' own kinds.
    plan = plan_for_model("granite-4.0-h-small").with_parallel(gpus_per_node=8, strategy=Strategy.ZERO3)
    confidence = evidence.confidence(plan)
    assert "hybrid:zero3" in confidence.unvalidated
    assert "DeepSpeed ZeRO-3 on a hybrid" in confidence.text
    assert "hybrid:zero3" not in evidence.confidence(plan.with_parallel(strategy=Strategy.ZERO2)).unvalidated


def test_zero3_keeps_a_checkpointed_hybrids_largest_layer() -> None:
    # Under checkpointing ZeRO-3 keeps a block gathered from its recompute to its backward: a hybrid's largest layer,
    # Granite 4.0-H Small's Mamba-2 one (800,941,696 parameters, core.hybrid's count), not an attention block scaled.
    plan = (
        plan_for_model("granite-4.0-h-small")
        .with_parallel(gpus_per_node=8, strategy=Strategy.ZERO3)
        .with_changes(checkpointing=True)
    )
    assert training_refusal(plan) is None
    label = "gathered: a checkpointed block's modules, kept for its backward + the prefetch bucket"
    prefetch = plan.parallel.zero3_prefetch_elements  # 5e7, under the 1e9 live limit beside the block
    assert _terms(plan, "backward")[label] == (800_941_696 + prefetch) * 2  # the plan's bf16 weights


def _block_state(plan: Plan) -> RankState:
    lay = layout(plan)
    state = detailed._parts(plan, param_counts(plan), dtypes_for(plan), detailed.Rank(lay, lay.stages[0])).state
    assert state is not None and state.backward_block is not None
    return state


def _units(doc: dict) -> list[int]:
    return [u["numel"] for u in doc["fsdp_units"] if u["module"] != "<root>"]


@pytest.mark.parametrize(
    "case_id", ["hyb-fsdp-qwen35apart-full-bf16-ckpt-w4-b1-s256", "hyb-fsdp-granite-full-bf16-ckpt-w4-b1-s256"]
)
def test_a_checkpointed_blocks_backward_holds_its_neighbours_by_layer_order(case_id: str) -> None:
    # Checkpointed, 4 ranks at 1 x 256 tokens: the measured peak is inside layer 1's backward (recomputed), after
    # layers 3 and 2 reduced. benchmarks/parallel/hybrid/measured/<case_id>.json at the peak: layer 1's unit
    # gathered (unsharded_parameters less the root's 4,194,816 / 2,097,664 B), layer 0's all-gather output in
    # flight (all_gather_buffers) and layer 2's reduce-scatter input (reduce_scatter_buffers), each in bf16 and
    # rounded up to the allocator's 512 B blocks per tensor.
    doc = _doc(case_id)
    units, peak = _units(doc), doc["breakdown_at_peak"]
    root = next(u["numel"] for u in doc["fsdp_units"] if u["module"] == "<root>") * 2
    assert units[0] * 2 <= peak["all_gather_buffers"] < units[0] * 2 + 512
    assert units[2] * 2 <= peak["reduce_scatter_buffers"] < units[2] * 2 + 512
    assert units[1] * 2 <= peak["unsharded_parameters"] - root < units[1] * 2 + 512 * 16  # one tensor a block each
    # The estimate's heaviest point of a block's backward is the same one: layers 1 and 0 gathered, layer 1's
    # gradients (not formed yet at the measured point: the one-GPU rule's block-sized upper bound), layer 2's input.
    plan = plan_for_parallel_case(doc["case"], doc["model_config"])
    state = _block_state(plan)
    gathered = {t.label: t.bytes for t in state.backward_block}
    assert gathered["2 blocks gathered (the one computing + the one prefetched)"] == (units[1] + units[0]) * 2
    grads = {t.label: t for t in state.backward_grads}
    assert grads["one block's unsharded gradients"].bytes == units[1] * 2
    assert grads["reduce-scatter input (one block)"].bytes == units[2] * 2
    assert "layer 2's" in grads["reduce-scatter input (one block)"].formula
    # Before, each was the largest unit: the largest pair, and the largest unit's gradients and input.
    assert sum(t.bytes for t in state.backward_grads) < 2 * max(units) * 2


def test_the_checkpointed_cases_moved_by_the_order_alone() -> None:
    # benchmarks/parallel.py --data benchmarks/parallel/hybrid, branch main (cb4b9db5, the largest unit's gradients
    # and input in every block): the checkpointed full fine-tunes at 1 x 256 tokens were +16.60 % (Qwen3.5 apart)
    # and +5.63 % (Granite); by layer order they lose the largest unit less the one the order puts there.
    errors = {case: _error(_doc(case)) for case in CHECKPOINTED}
    assert len(errors) == 8
    assert errors["hyb-fsdp-qwen35apart-full-bf16-ckpt-w4-b1-s256"] < 16.60 - 4.0
    assert errors["hyb-fsdp-granite-full-bf16-ckpt-w4-b1-s256"] < 5.63 - 1.0
    # At 1024 tokens a checkpointed rank is within the one-GPU rule's error.
    long = [abs(e) for k, e in errors.items() if k.endswith("s1024")]
    assert max(long) < 2.0
    assert all(e > 0 for k, e in errors.items() if k.endswith("s256"))  # never under the measured rank


def test_a_gated_attention_layers_kernel_scratch_comes_after_its_mlp() -> None:
    # benchmarks/parallel.py --data benchmarks/parallel/hybrid, branch main (b3607de4): the checkpointed Qwen3.5
    # apart ranks at 4 x 1 x 256 tokens were +11.80 % (full) and +7.09 % (LoRA), the block's backward counting the
    # attention's flash scratch beside the MLP's gradients over the whole recomputed layer. The layer's MLP runs
    # after its attention (transformers 5.25.0 Qwen3_5DecoderLayer), so autograd frees the MLP's tensors first:
    # tools/measure on the one-GPU twin puts the backward's peak inside _scaled_dot_product_flash_attention_backward
    # of layer 0, the MLP's tensors gone (core.training.detailed._attention_after_mlp).
    errors = {case: _error(_doc(case)) for case in CHECKPOINTED}
    assert 0 < errors["hyb-fsdp-qwen35apart-full-bf16-ckpt-w4-b1-s256"] < 5.0
    assert 0 < errors["hyb-fsdp-qwen35apart-lora-bf16-ckpt-w4-b1-s256"] < 2.0
    doc = _doc("hyb-fsdp-qwen35apart-full-bf16-ckpt-w4-b1-s256")
    plan = plan_for_parallel_case(doc["case"], doc["model_config"])
    block = _terms(plan, "backward")
    assert not any("workspace" in label for label in block)
    mlp = next(b for label, b in block.items() if label.startswith("gradients flowing through a block's MLP"))
    n, inter = plan.workload.micro_batch * plan.workload.seq_len, plan.model.intermediate_size
    assert mlp == 3 * n * inter * 2  # the MLP's three N x I bf16 gradients alone
    # The one-GPU twin (benchmarks/parallel/hybrid/one_gpu/measured: 50,233,856 B at step 2's backward) was over by
    # 3.24 MB on main; by about 1.1 MB now: the attention's own weight gradients, counted formed at the MLP's point.
    one = json.loads((DATA / "one_gpu" / "measured" / "one-qwen35apart-full-bf16-ckpt-b1-s256.json").read_text())
    measured = one["phase_peaks"]["step2"]["backward"]
    est = estimate(plan_for_case(one["case"], one["model_config"]))
    backward = max(p.allocated_bytes for p in est.phases if p.name.startswith("backward"))
    assert 0 < backward - measured < 1_500_000
    # A Granite 4.0-H (Mamba-2) hybrid keeps its rule for now (its mixer's backward: core.training.mamba).
    granite = _doc("hyb-fsdp-granite-full-bf16-ckpt-w4-b1-s256")
    terms = _terms(plan_for_parallel_case(granite["case"], granite["model_config"]), "backward")
    assert any("attention backward workspace" in label for label in terms)


def test_the_held_out_checkpointed_short_cases() -> None:
    # Four checkpointed FSDP2 ranks chosen before they were measured (branch h74gdnck; tools.measure, torch 2.13.0
    # CPU fake-CUDA, transformers 5.25.0, peft 0.18.0): 2 ranks at 1 x 256 and 4 at 1 x 512 (Qwen3.5 apart), tiny
    # Qwen3-Next, LoRA on the plain tiny Qwen3.5. Branch main (b3607de4) gave +6.74, +9.00, +3.96 and +0.43 %.
    errors = {case: _error(_doc(case)) for case in HELD_OUT}
    assert len(errors) == 4
    assert max(abs(e) for e in errors.values()) < 3.0


def test_the_first_layer_reduces_its_own_gradients_at_its_post_backward() -> None:
    # tiny-qwen3.5-apart (layers full, linear, full, linear: 1,245,824 / 527,912 parameters, the measured
    # fsdp_units) with float32 reduction: inside layer 0 it holds 1,245,824 x (2 + 2) B gathered and as gradients
    # beside layer 1's 527,912 x 4 B input; at its post_backward its unit is resharded and its own input made,
    # 1,245,824 x (2 + 4) B, more: the order and the dtypes pick the point (core.parallel.state._block_moments).
    doc = _doc("hyb-fsdp-qwen35apart-full-bf16-w2-b2-s1024")
    plan = plan_for_parallel_case(doc["case"], doc["model_config"])
    units = _units(doc)
    fp32 = plan.with_parallel(fsdp_reduce_dtype=MpDtype.FP32)
    state = _block_state(fp32)
    assert state.backward_end_grads is not None
    end = [t.bytes for t in state.backward_end_grads]
    assert end == [units[0] * 2, units[0] * 4]
    # bf16 reduction: inside layer 0 is the heavier point, layer 1's input beside layer 0's gradients.
    end = [t.bytes for t in (_block_state(plan).backward_end_grads or [])]
    assert end == [units[0] * 2, units[1] * 2]


def test_the_all_gather_streams_cache_is_the_largest_neighbours_less_the_last_layer() -> None:
    # Qwen3.5-27B (resources/models.json): layer_types put attention (372,255,232 parameters, core.hybrid's count)
    # every fourth layer, the last among them, beside Gated DeltaNet ones (383,273,184). The forward keeps two
    # neighbours' all-gather outputs on the copy-in stream (two Gated DeltaNet layers); as the backward starts the
    # last layer's is in flight, the rest cached: (2 x 383,273,184 - 372,255,232) x 4 B (float32 weights).
    plan = plan_for_model("qwen3.5-27b").with_parallel(gpus_per_node=8, strategy=Strategy.FSDP)
    state = _block_state(plan)
    cache = next(t for t in state.stream_cache if t.label.startswith("all-gather stream's cache"))
    assert cache.bytes == (2 * 383_273_184 - 372_255_232) * 4
    # Without the order (a plan file written before it): a second largest unit, as before.
    unknown = plan.with_changes(model=replace(plan.model, layer_pattern=""))
    cache = next(t for t in _block_state(unknown).stream_cache if t.label.startswith("all-gather stream's cache"))
    assert cache.bytes == 383_273_184 * 4
