"""How a pipeline-parallel run deals the decoder blocks out to its stages, when the split is not even.

``stage_split`` "compute" is nanotron's: ``build_model`` (huggingface/nanotron@c2528430
src/nanotron/models/base.py L190-237) walks the model's pipeline blocks in order — the embedding, the
decoder layers, the final norm, the output head, the float32 cast, the loss — with a compute cost each
from the model's ``get_block_compute_costs`` and 0 for the rest, and gives a block to the current rank,
moving on to the next rank once the running sum exceeds ``total × (rank + 1) / pp``. The costs
(src/nanotron/models/llama.py L913-925; src/nanotron/models/starcoder2.py L1570-1582):

- a decoder layer: ``4 · heads · d_qkv · hidden`` (q, k, v and o as if every head had its own K and V)
  ``+ 3 · ffn · hidden`` for Llama's gated MLP (``2 · ffn · hidden`` for Starcoder2's ungated one);
- the output head (``TensorParallelColumnLinear``): ``vocab · hidden``.

Attention's own matmuls, the norms and the loss are not in the costs, so the stages are balanced in
these units, not in time. Pure arithmetic on the model's widths, read by core.plan (a split that leaves a
stage without a block is refused) and core.parallel.layout (each stage's blocks).
"""

from __future__ import annotations

from core.model import ModelSpec

__all__ = ["compute_split", "compute_split_costs"]


def compute_split_costs(model: ModelSpec) -> tuple[int, int]:
    """nanotron's cost of one decoder layer and of the output head (module doc)."""
    h = model.hidden_size
    mlp = (3 if model.gated_mlp else 2) * model.intermediate_size * h
    return 4 * model.num_heads * model.head_dim * h + mlp, model.vocab_size * h


def compute_split(model: ModelSpec, stages: int) -> tuple[tuple[int, ...], int]:
    """The decoder blocks on each of ``stages`` pipeline ranks and the rank holding the output head, as
    nanotron's ``build_model`` deals them (module doc). A rank can be left without a block."""
    layer, head = compute_split_costs(model)
    # embedding, the decoder layers, final norm, lm_head, the float32 cast, the loss (llama.py L811-993)
    costs = [0, *([layer] * model.num_layers), 0, head, 0, 0]
    total = sum(costs)
    rank, running, ranks = 0, 0, []
    for cost in costs:
        running += cost
        ranks.append(rank)
        # nanotron's float threshold, ``block_cumulative_costs[-1] * ((rank + 1) / pp_size)``
        if running > total * ((rank + 1) / stages):
            rank += 1
    blocks = ranks[1 : 1 + model.num_layers]
    return tuple(blocks.count(r) for r in range(stages)), ranks[model.num_layers + 2]
