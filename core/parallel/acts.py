"""Activations of one rank under tensor, context and pipeline parallelism.

The single-GPU terms of :mod:`core.training.activations` are split the way Megatron-LM splits the
work (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", arXiv:2205.05198, Table 2): inside the tensor-parallel regions (attention per
head, the MLP per column, the vocabulary-parallel logits and loss) every tensor is ÷ t;
the norms, the inputs of the column-parallel matmuls and the dropout masks are replicated
unless sequence parallelism splits them along the sequence (÷ t as well). Per layer that
is sbh(10 + 24/t + 5as/(ht)) without and sbh/t·(34 + 5as/h) with sequence parallelism,
for their GPT with 16-bit activations.

Context parallelism splits the sequence: every activation ÷ cp (torchtitan / Megatron
load-balanced chunks); ring attention adds the K/V chunks in flight between neighbours
(torch ``torch/distributed/tensor/experimental/_attention.py`` ring exchange: the chunk
being used and the one being received, for keys and values) and a float32 output
accumulator with its log-sum-exp while it merges the partial results. Its backward holds more
(:func:`ring_attention_backward`): float32 gradient accumulators that travel round the ring,
and the keys and values of every rank at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.breakdown import LayerActs, Term
from core.format import sci
from core.inputs import CpRotate
from core.parallel.layout import Layout
from core.plan import Plan, Stack

__all__ = [
    "block_per_rank",
    "keeps_gathered_inputs",
    "loss_parallel",
    "pipeline_buffers",
    "ring_attention_backward",
    "ring_attention_buffers",
    "ring_kv_elements",
    "sequence_region",
    "split",
    "vocab_region",
]


def split(terms: Sequence[Term], divisor: float, why: str) -> list[Term]:
    """Each term ÷ ``divisor`` (1 leaves them as they are), in a new list: the caller's is never
    the one it gave (which may be a cached answer's)."""
    if divisor == 1:
        return list(terms)
    return [Term(f"{t.label} ({why})", f"({t.formula}) ÷ {divisor:g}", t.bytes / divisor) for t in terms]


def _why(lay: Layout, tp_split: bool) -> str:
    parts = []
    if tp_split and lay.tensor_parallel > 1:
        parts.append(f"÷ TP {lay.tensor_parallel}")
    if lay.context_parallel > 1:
        parts.append(f"÷ CP {lay.context_parallel}")
    return ", ".join(parts)


def block_per_rank(block: LayerActs, lay: Layout, keeps_gathered: bool = False) -> LayerActs:
    """One block's saved tensors on one rank: items inside the TP regions ÷ t, the
    replicated ones ÷ t only with sequence parallelism; everything ÷ cp.

    ``keeps_gathered``: the inputs of the column-parallel matmuls stay whole on every TP rank
    even with sequence parallelism. PyTorch's DTensor TP (torchtitan 9dec370,
    torchtitan/parallelisms/parallelize_llama.py ``apply_tp``) all-gathers the sequence shard
    in ``PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate())``
    before ``attention`` and ``feed_forward``; the ColwiseParallel wq/wk/wv and w1/w3 then
    run a plain matmul on that replicated tensor, which autograd keeps for the weight
    gradient. Megatron-LM keeps the shard instead and gathers it again in the backward
    (NVIDIA/Megatron-LM 000c4ac2, megatron/core/tensor_parallel/layers.py
    ``LinearWithGradAccumulationAndAsyncCommunication.forward``: ``ctx.save_for_backward(input,
    weight)`` of the un-gathered input when ``sequence_parallel``).
    """
    tp, cp = lay.tensor_parallel, lay.context_parallel
    if tp == 1 and cp == 1:
        return block
    whole = set(block.gathered) if keeps_gathered else set()
    items = []
    for i, t in enumerate(block.items):
        tp_split = (i not in block.replicated or lay.sequence_parallel) and i not in whole
        divisor = (tp if tp_split else 1) * cp
        why = _why(lay, tp_split)
        if i in whole and lay.sequence_parallel:
            why = ", ".join(w for w in ("all-gathered: the whole sequence on every TP rank", why) if w)
        items.extend(split([t], divisor, why) if divisor > 1 else [_relabel(t, why)])
    return LayerActs(tuple(items), block.replicated, block.gathered)


def keeps_gathered_inputs(plan: Plan) -> bool:
    """Whether the column-parallel matmuls keep their all-gathered input (PyTorch's DTensor
    TP: eager or compiled, as torchtitan runs it) rather than the sequence shard (Megatron-LM).

    Compiled plans are taken to keep it as well: the gathered tensor is the ``mm``'s own
    input, and dropping it would mean running the all-gather again in the backward (an
    assumption, not read from inductor's partitioner; the corpus's compiled 70B/405B rows
    run full activation checkpointing, where it holds for the recomputed block either way).
    Per-op SAC's saved items carry no ``gathered`` marks, so they are unchanged.
    """
    return plan.stack is not Stack.MEGATRON


def loss_parallel(plan: Plan, lay: Layout) -> bool:
    """Whether the rank computes the cross-entropy of its vocabulary shard under PyTorch's
    ``loss_parallel()``: torchtitan enters it whenever TP > 1 (pytorch/torchtitan 9dec370,
    ``parallel_dims.loss_parallel_enabled``: ``self.tp > 1 and self.enable_loss_parallel``, on unless
    ``--training.disable_loss_parallel``), with the head's output left sharded on the vocabulary.
    Megatron-LM has its own vocabulary-parallel cross-entropy (not this one)."""
    return lay.tensor_parallel > 1 and plan.stack is not Stack.MEGATRON


def _relabel(t: Term, why: str) -> Term:
    return Term(f"{t.label} ({why})", t.formula, t.bytes) if why else t


def sequence_region(lay: Layout) -> tuple[float, str]:
    """Divisor and reason for tensors of the residual stream (norm inputs, block inputs)."""
    divisor = (lay.tensor_parallel if lay.sequence_parallel else 1) * lay.context_parallel
    return divisor, _why(lay, lay.sequence_parallel)


def vocab_region(lay: Layout) -> tuple[float, str]:
    """Divisor and reason for the logits and the loss (vocabulary-parallel, and ÷ cp)."""
    return lay.tensor_parallel * lay.context_parallel, _why(lay, True)


def ring_attention_buffers(tokens: int, kv_width: int, q_width: int, heads: int, ca: float, lay: Layout) -> list[Term]:
    """K/V chunks in flight and the merge accumulators of ring attention (cp > 1)."""
    cp = lay.context_parallel
    if cp == 1:
        return []
    chunk = tokens / cp
    kv = 2 * 2 * chunk * kv_width / lay.tensor_parallel
    acc = chunk * (q_width / lay.tensor_parallel) * 4 + chunk * heads / lay.tensor_parallel * 4
    return [
        Term(
            "ring attention: K, V chunks used + received", f"2 × 2 × N/{cp}·kv × {ca:g} = {sci(kv)} × {ca:g}", kv * ca
        ),
        Term("ring attention: float32 output + log-sum-exp accumulators", f"N/{cp}·(q + H) × 4", acc),
    ]


# PyTorch's ring attention backward (pytorch/pytorch f2127dbd, torch/distributed/tensor/
# experimental/_attention.py, _templated_ring_attention_backward; torchtitan's context_parallel
# runs it), per element of the rank's chunk of the sequence at the attention's width (torchtitan's
# Llama repeats K/V to every query head before SDPA, so K/V are as wide as Q):
# - keys and values (ring_kv_elements): the default rotater (_cp_options.rotate_method, ALL_GATHER:
#   set_rotate_method's docstring) all-gathers the rank's torch.cat([key, value]) once and keeps
#   the gathered buffer for the whole loop: 2 × cp elements in the compute dtype, plus the
#   iteration's own torch.cat (next_kv) of 2; the all-to-all rotater holds three chunks instead;
# - grad_query, a float32 accumulator (accum_dtype = float32 under the default convert_to_f32);
# - grad_key / grad_value: float32, carried round the ring by an all-to-all rotater — the pair
#   received (next_buffer), the pair re-concatenated after adding this step's part
#   (next_grad_kv), and the permute's output buffer for the next rank: 3 × 2 float32 elements;
# - the SDPA backward's own outputs for this step (grad_query_, grad_key_, grad_value_) in the
#   compute dtype, alive until the next step replaces them: 3.
RING_BACKWARD_FLOAT32 = 1 + 3 * 2  # grad_query, and three copies of the (grad_key, grad_value) pair
RING_BACKWARD_KERNEL = 3  # the kernel's three gradients
RING_BACKWARD_COMPUTE = 2 + RING_BACKWARD_KERNEL  # allgather: the step's torch.cat of K/V, and the kernel's


def ring_kv_elements(cp: int, rotate: CpRotate) -> int:
    """Keys and values a ring attention backward step holds beside its own chunk (the layer's
    inputs, counted with the saved activations), in elements of the rank's chunk at the attention
    width, compute dtype (pytorch/pytorch f2127dbdb01fc9319ce42b92d60344d19cbd0137,
    torch/distributed/tensor/experimental/_attention.py, _templated_ring_attention_backward's
    kv_rotater = _create_rotater(group, 2), the rotater ``set_rotate_method`` chose).

    - allgather (_AllGatherRotater): ``exchange_buffers`` all-gathers the first torch.cat([key,
      value]) into ``_aggregated_buffer``, kept for the loop (``next_buffer`` returns a chunk of it):
      2 × cp, plus the step's own torch.cat (``next_kv``, alive until the next step's): 2.
    - alltoall (_AllToAllRotater): ``exchange_buffers`` passes the step's torch.cat (2, held by
      ``next_kv``) to ``ft_c.permute_tensor`` towards rank + 1, whose output (``_buffer``, 2) is
      received while the step's kernel runs; key and value are views into the chunk received at the
      previous step (``buffer = kv_rotater.next_buffer()``, 2): 6 at every step that both receives
      and sends (1 to cp − 2). At CP 2 only step 0 sends, from the rank's own K/V, and step 1 only
      receives: 4."""
    if rotate is CpRotate.ALLTOALL:
        return 3 * 2 if cp > 2 else 2 * 2
    return 2 * cp + 2


def ring_attention_backward(
    tokens: int, q_width: int, ca: float, lay: Layout, rotate: CpRotate = CpRotate.ALLGATHER
) -> Term | None:
    """What PyTorch's ring attention holds inside an attention backward (cp > 1): the keys and
    values of its rotater (:func:`ring_kv_elements`), the float32 gradient accumulators and the
    kernel's outputs (comment above). Attention's backward runs after the MLP's, so this competes
    with the MLP's gradients for the block backward's peak rather than adding to them."""
    cp = lay.context_parallel
    if cp == 1:
        return None
    elements = tokens / cp * q_width / lay.tensor_parallel
    kv = ring_kv_elements(cp, rotate)
    per_element = RING_BACKWARD_FLOAT32 * 4 + (kv + RING_BACKWARD_KERNEL) * ca
    if rotate is CpRotate.ALLTOALL:
        what, kv_text = "rotating K/V chunks (alltoall)", f"{kv} + {RING_BACKWARD_KERNEL}"
    else:
        what, kv_text = "gathered K/V", f"{2 * cp} + {RING_BACKWARD_COMPUTE}"
    return Term(
        f"ring attention backward: {what}, float32 gradient accumulators, kernel outputs",
        f"N/{cp}·q/{lay.tensor_parallel} × ({RING_BACKWARD_FLOAT32} × 4 + ({kv_text})"
        f" × {ca:g}) = {sci(elements)} × {per_element:g}",
        elements * per_element,
    )


def pipeline_buffers(stage_tokens_width: float, res: float, lay: Layout) -> list[Term]:
    """A pipeline rank's receive buffers: the activation coming in and the gradient coming
    back, one micro-batch's residual stream each (Megatron p2p_communication.py allocates
    both with ``torch.empty`` per exchange)."""
    if lay.pipeline_parallel == 1:
        return []
    return [
        Term(
            "pipeline receive buffers (activation in, gradient back)",
            f"2 × N·d × {res:g}",
            2 * stage_tokens_width * res,
        )
    ]
