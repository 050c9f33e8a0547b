"""torch.compile's memory effect (stack "compile"): what Inductor's default partitioner,
min_cut_rematerialization_partition (pytorch/pytorch 00c07b93, torch/_functorch/partitioners.py),
leaves saved in a transformer block (core/training/activations.py, the note above COMPILE_NOTE),
and the published figure it is scored on."""

from __future__ import annotations

import json
from pathlib import Path

from core.catalogue import find_model
from core.estimate import estimate
from core.plan import Method, Plan, Preset, Stack
from core.training.activations import COMPILE_NOTE, layer_activations
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "benchmarks" / "realgpu"


def plan(model: str = "llama-3.2-3b", **changes: object) -> Plan:
    base = Plan(model=find_model(model).spec, method=Method.FULL, preset=Preset.PURE_BF16)
    return base.with_workload(micro_batch=2, seq_len=4096).with_changes(**changes)


def block_bytes(p: Plan) -> float:
    return sum(t.bytes for t in layer_activations(p, trainable_block=True).items)


def test_compile_recomputes_the_norms_float32_copies_and_the_gated_activation() -> None:
    eager, compiled = plan(), plan(stack=Stack.COMPILE)
    spec = eager.model
    n, d, i = 2 * 4096, spec.hidden_size, spec.intermediate_size
    # Per RMSNorm (two per LLaMA block): the float32 input (4 B) becomes the bf16 input
    # (2 B), and the bf16 normalised value before the weight multiply is not saved; the
    # gated MLP keeps gate and up, not act(gate) (N·I × 2 B).
    expected = 2 * (n * d * (4 - 2) + n * d * 2) + n * i * 2
    assert block_bytes(eager) - block_bytes(compiled) == expected
    labels = [t.label for t in layer_activations(compiled, trainable_block=True).items]
    assert any(COMPILE_NOTE in label for label in labels)


def test_compile_keeps_every_projection_input_and_attention_tensor() -> None:
    # is_materialized_backwards: a projection's input is read again by its weight-gradient
    # matmul, which nothing fuses into, so the partitioner never recomputes it; nor the
    # flash kernel's output (compute_intensive_ops).
    eager = {t.label: t.bytes for t in layer_activations(plan(), trainable_block=True).items}
    compiled = {t.label: t.bytes for t in layer_activations(plan(stack=Stack.COMPILE), trainable_block=True).items}
    for label, size in eager.items():
        if ("input" in label and "norm" not in label) or label.startswith(("q after", "k, v", "attention output")):
            assert compiled.get(label) == size, label


def test_compile_leaves_layernorm_and_a_frozen_block_as_eager_keeps_them() -> None:
    gpt2 = plan("gpt2")
    assert block_bytes(gpt2.with_changes(stack=Stack.COMPILE)) < block_bytes(gpt2)  # GELU's tanh intermediates
    layer_norm_terms = [
        t
        for t in layer_activations(gpt2.with_changes(stack=Stack.COMPILE), trainable_block=True).items
        if "norm" in t.label
    ]
    assert layer_norm_terms == [t for t in layer_activations(gpt2, trainable_block=True).items if "norm" in t.label]


def test_torchtunes_compile_row_is_now_within_five_percent() -> None:
    # torchtune README (pytorch/torchtune 1814feb, line 120), Llama 3.2 3B full, packed,
    # batch 2 × 4096 on an A100: "+ compile" holds 51.0 GiB active (54.76 GB) against
    # 60.0 GiB (64.42 GB) without. Eager the estimate read +13.5 % here; no constant is fitted
    # on this figure (the partitioner's rules are the whole model).
    mapping = load_script(FOLDER / "mapping.py", "realgpu_mapping_compile")
    figures = json.loads((FOLDER / "memory_figures.json").read_text())["figures"]
    figure = next(f for f in figures if f["id"] == "torchtune-flags-3b-compile")
    mapped = mapping.map_figure(figure)
    assert mapped.plan is not None and mapped.plan.stack is Stack.COMPILE
    est = estimate(mapped.plan)
    assert abs(est.peak_bytes / figure["value_bytes"] - 1) < 0.05
    eager = estimate(mapped.plan.with_changes(stack=Stack.EAGER))
    assert eager.peak_bytes / figure["value_bytes"] - 1 > 0.10
