"""torchtitan's MoE layer as it holds memory (plan setting ``moe_layer``; issue 22, branch h88ttmoe).

Sources: pytorch/torchtitan d021aa9c ``torchtitan/models/moe/moe.py`` (``_run_experts_grouped_mm``: ``x.bfloat16()``
and three ``torch._grouped_mm``; ``MoE.forward``: ``routed_output_unsorted[token_indices_experts_sorted] =
routed_output`` and ``torch.bmm(top_scores.reshape(-1, 1, top_k), routed_output_unsorted.float())``; ``utils.py``
``indices_padding_wrapper``: the rows permuted and padded per expert) and PrimeIntellect-ai/prime-rl 8718eb14
``src/prime_rl/trainer/models/layers/moe.py`` (torchtitan's layer before e1f7f318: ``(routed_output.to(torch.float32)
* top_scores_experts_sorted.reshape(-1, 1)).to(x.dtype)`` then ``scatter_add``). The measured saved tensors:
tests/data/titan_moe/saved.json, written by tools/measure/titan_moe_check.py (torch 2.13.0 CPU, N 4,096 tokens,
d 64, I 48, 8 experts, top-2, bf16, each layer's own source, a pack hook on the forward). Shapes planned:
Qwen/Qwen3-30B-A3B config.json (hidden 2,048, moe_intermediate_size 768, 128 experts, 8 per token)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.catalogue import find_model
from core.estimate import estimate
from core.files import planfile
from core.inputs import input_at
from core.plan import Method, MoeLayer, Plan, Precision, Stack, Workload
from core.training.activations import layer_activations

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "titan_moe"
DATA = json.loads((DATA_DIR / "saved.json").read_text())
N, D, FFN = 4_096, 2_048, 768  # tokens planned; Qwen3-30B-A3B's hidden size and expert width
ROWS = N * 8  # routed rows, top-8


def _measured(key: str) -> tuple[int, float, float]:
    """From one measured run's saved tensors: how many I-wide bf16 tensors over the padded rows, the bytes per
    element of the experts' output kept for the scores, and the index bytes per routed row (the sorted scores,
    the argsort's and gather's int64 indices, the padding permutation's int32 ones)."""
    rows, d, i = DATA["N"] * DATA["k"], DATA["d"], DATA["I"]
    wide, out, index = 0, 0.0, 0
    for text, size in DATA[key]["pack_hook_items"]:
        shape = tuple(int(x) for x in text.split(")")[0].strip("(").split(",") if x.strip())
        numel = 1
        for x in shape:
            numel *= x
        if shape == (DATA["N"], DATA["k"]):  # the router's top-k indices, counted with the router
            continue
        if shape[0] > rows and shape[-1] == i:  # the padded rows' gate, up, silu(gate), product
            wide += 1
        elif numel in (rows * d, (rows + 1) * d) and "int" not in text:  # the experts' output for the scores
            out = size / numel
        elif numel in (rows, rows + DATA["E"] * 8) or (shape[0] == rows and shape[-1] == d and "int" in text):
            index += size  # the gather's index is an expand of N·k int64s: its storage is N·k
    return wide, out, round(index / rows)


def _plan(layer: MoeLayer, stack: Stack) -> Plan:
    return Plan(
        model=find_model("qwen3-30b-a3b").spec,
        method=Method.FULL,
        workload=Workload(micro_batch=1, seq_len=N),
        stack=stack,
        moe_layer=layer,
    ).with_changes(precision=Precision.BF16)


def _experts(plan: Plan) -> float:
    return sum(t.bytes for t in layer_activations(plan, trainable_block=True).items if "torchtitan" in t.label)


@pytest.mark.parametrize(
    ("layer", "stack", "key"),
    [
        (MoeLayer.TORCHTITAN_SCATTER, Stack.EAGER, "prime-rl 8718eb14, eager"),
        (MoeLayer.TORCHTITAN_SCATTER, Stack.COMPILE, "prime-rl 8718eb14, compile"),
        (MoeLayer.TORCHTITAN_BMM, Stack.EAGER, "torchtitan d021aa9c, eager"),
        (MoeLayer.TORCHTITAN_BMM, Stack.COMPILE, "torchtitan d021aa9c, compile"),
    ],
)
def test_the_experts_keep_what_the_layers_own_source_kept_on_the_cpu(layer: MoeLayer, stack: Stack, key: str) -> None:
    wide, out, index = _measured(key)
    # eager: gate, up, silu(gate), product (4); compiled, one of them recomputed (3)
    assert wide == (3 if stack is Stack.COMPILE else 4)
    # the float32 copy for the scores' gradient, except the compiled scatter-add form's 16-bit output
    assert out == (2 if (stack is Stack.COMPILE and layer is MoeLayer.TORCHTITAN_SCATTER) else 4)
    assert index == 24
    # Planned at Qwen3-30B-A3B's shapes: the permuted input and the I-wide tensors (bf16), the output, the indices.
    assert _experts(_plan(layer, stack)) == ROWS * ((D + wide * FFN) * 2 + D * out + index)


def test_compiled_the_scatter_form_keeps_less_than_transformers_and_the_bmm_form_more() -> None:
    # transformers 5 keeps 4I + 2d bf16 a routed row (gate|up, act, output, gathered and down inputs)
    transformers = 4 * FFN + 2 * D
    assert _experts(_plan(MoeLayer.TORCHTITAN_SCATTER, Stack.COMPILE)) / ROWS - 24 == (3 * FFN + 2 * D) * 2
    assert _experts(_plan(MoeLayer.TORCHTITAN_BMM, Stack.COMPILE)) / ROWS - 24 == (3 * FFN + D) * 2 + 4 * D
    assert (3 * FFN + 2 * D) < transformers < (3 * FFN + D) + 2 * D


def test_a_shared_expert_keeps_its_four_tensors_eager_and_three_compiled_with_no_gate() -> None:
    # torchtitan's FeedForward shared expert: (4096, 48) bf16 four times eager, three times compiled (saved.json)
    shapes = {k: [t for t, _ in DATA[f"torchtitan d021aa9c, one shared expert, {k}"]["pack_hook_items"]]
              for k in ("eager", "compile")}
    assert shapes["eager"].count(f"({DATA['N']}, {DATA['I']}) bfloat16") == 4
    assert shapes["compile"].count(f"({DATA['N']}, {DATA['I']}) bfloat16") == 3
    model = find_model("deepseek-v3").spec
    plan = Plan(model=model, method=Method.FULL, workload=Workload(micro_batch=1, seq_len=N),
                moe_layer=MoeLayer.TORCHTITAN_BMM).with_changes(precision=Precision.BF16)
    shared = [t for t in layer_activations(plan, trainable_block=True).items if t.label.startswith("shared expert")]
    # A block's MLP terms are the mean over its layer kinds (h87moe): DeepSeek-V3's first 3 of 61 layers are dense
    # (config.json first_k_dense_replace 3, num_hidden_layers 61), so the shared expert runs in 58 of 61.
    moe_share = (model.num_layers - model.dense_layers) / model.num_layers
    assert model.dense_layers == 3 and model.num_layers == 61
    assert [t.bytes for t in shared] == [pytest.approx(4 * N * model.shared_expert_size * 2 * moe_share)]


def test_it_is_a_plan_setting_for_moe_models_only_and_old_files_read_as_transformers() -> None:
    matters = input_at("moe_layer").matters
    assert matters is not None
    assert matters(_plan(MoeLayer.TORCHTITAN_BMM, Stack.COMPILE))
    assert not matters(Plan(model=find_model("llama-3.1-8b").spec))
    plan = _plan(MoeLayer.TORCHTITAN_SCATTER, Stack.COMPILE)
    assert planfile.loads(planfile.dumps(plan)).moe_layer is MoeLayer.TORCHTITAN_SCATTER
    document = json.loads(planfile.dumps(plan))
    del document["plan"]["moe_layer"]
    assert planfile.loads(json.dumps(document)).moe_layer is MoeLayer.TRANSFORMERS


def _backward_block(plan: Plan) -> float:
    phases = estimate(plan.with_changes(checkpointing=True)).worst.phases
    return next(p.allocated_bytes for p in phases if p.kind.is_backward)


def test_eager_the_routing_weights_multiply_forms_float32_gradients_of_the_experts_output() -> None:
    # Measured above what was alive as the backward started (saved.json and saved-d128-i48.json: the same
    # bytes at I 48 and 96, twice them at d 128): three N·k·d float32 tensors and the scores' N·k float32
    # gradient for the scatter-add form, one float32 and one bf16 N·k·d tensor for the bmm form.
    for name, per in (("saved.json", 12), ("saved-d128-i48.json", 12)):
        data = json.loads((DATA_DIR / name).read_text())
        rows = data["N"] * data["k"]
        assert data["prime-rl 8718eb14, eager"]["backward_high_bytes"] == rows * (per * data["d"] + 4)
        assert data["torchtitan d021aa9c, eager"]["backward_high_bytes"] == rows * (per // 2 * data["d"] + 4)
    # Both forms keep the same tensors eager, so their backward moments differ by that transient alone.
    scatter, bmm = (_backward_block(_plan(layer, Stack.EAGER))
                    for layer in (MoeLayer.TORCHTITAN_SCATTER, MoeLayer.TORCHTITAN_BMM))
    assert scatter - bmm == ROWS * 6 * D
    # Compiled, the fused backward stays under the block's gradients already counted: the compiled forms differ by
    # their kept output alone (the float32 copy against the 16-bit output).
    scatter, bmm = (_backward_block(_plan(layer, Stack.COMPILE))
                    for layer in (MoeLayer.TORCHTITAN_SCATTER, MoeLayer.TORCHTITAN_BMM))
    assert bmm - scatter == ROWS * D * 2
