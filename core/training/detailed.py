"""Detailed accounting: the memory of a real training step, derived from the architecture.

The model follows what PyTorch and a Hugging Face causal-LM implementation allocate:
parameters in the dtype the plan's precision roles store them in (:mod:`core.roles`),
gradients and optimizer state in the dtype of the trainable parameters, the optimizer
implementation's step-time temporaries, the tensors autograd saves for the backward pass
(:mod:`core.training.activations`), and the phase of the step in which they coexist. The step's
peak is the largest phase, never the plain sum of the buckets.

This module holds the phases (forward, backward, optimizer step, overhead) and what each
holds, on one GPU or on one rank of a multi-GPU plan; storage lives in :mod:`core.training.storage`,
the saved tensors in :mod:`core.training.activations`, the attention kernel choice in
:mod:`core.training.attention`, the optimizer's state and step temporaries in :mod:`core.training.optimizer`,
what a rank holds of them in :mod:`core.parallel`.

One concern a little past 400 lines: the phases read one set of parts, and a rank's parts
differ from one GPU's only in the shares and buffers :mod:`core.parallel` gives; keeping
them beside the phases keeps each phase's list of what coexists in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from core.breakdown import PHASE_BYTES, Breakdown, Bucket, BucketKey, LayerActs, Phase, StepPhase, Term, make_bucket
from core.dtypes import MX_BLOCK, NF4_BLOCK, Dtype
from core.format import gb, sci
from core.inputs import torch_ring_rotate
from core.memo import Once, fills_fields
from core.parallel.acts import (
    block_per_rank,
    keeps_gathered_inputs,
    loss_parallel,
    pipeline_buffers,
    ring_attention_backward,
    ring_attention_buffers,
    sequence_region,
    split,
    vocab_region,
)
from core.parallel.layout import Layout, Stage, carved_ends, dispatched_copies, expert_load, fsdp_no_sync, routed_rows
from core.parallel.layout import trainable_layers as stage_trainable_layers
from core.parallel.state import (
    RankState,
    compute_plan,
    rank_copies,
    rank_state,
    root_copy_gradient,
    te_weight_cache,
)
from core.params import ParamCounts, param_counts
from core.plan import CheckpointPolicy, Float8, Method, MoeLayer, Offload, Plan, Stack, Strategy
from core.roles import Dtypes, dtypes_for, runs_grad_scaler
from core.training import gdn
from core.training.activations import (
    GDN_MIXER,
    MAMBA2_MIXER,
    LossMemory,
    core_attention_bytes,
    deltanet_shape,
    dora_forward_transient,
    hybrid_stack,
    layer_activations,
    loss_memory,
    mixer_shape,
    outside_blocks,
    selective_saved,
    unsloth_kernels,
)
from core.training.attention import backward_workspace, kernel_note
from core.training.device import card_terms
from core.training.extra_trained import (
    extra_grad_terms,
    extra_state_terms,
    extra_trained_note,
    extra_weight_terms,
    formed_gradients,
    trained_tensors,
)
from core.training.flops import ADAPTER_GEMMS, block_gemms
from core.training.mamba import MixerShape, kernel_path_backward, torch_path_backward, torch_path_recompute
from core.training.optimizer import (
    PAGED,
    clip_terms,
    optimizer_step_temporary,
    optimizer_terms,
    paged_state_bytes,
)
from core.training.storage import copy_terms, gradient_terms, weight_terms

__all__ = ["dtypes_for", "layer_activations", "loss_memory", "training_breakdown"]


# --- the phases of one step ----------------------------------------------------------
@fills_fields
@dataclass(frozen=True)
class _Parts:
    """What the phases are built from: storage, state and the saved tensors.

    On a multi-GPU plan these are one rank's (see :mod:`core.parallel`): ``state`` holds
    the gradients the backward accumulates into and the framework's buffers by phase.
    """

    weights: list[Term]
    copies: list[Term]
    grads: list[Term]
    optim: list[Term]
    kept: list[Term]  # the blocks' saved tensors (or, with checkpointing, their inputs)
    recomputed: list[Term]
    outside: list[Term]
    block: LayerActs
    layer_grads: Term
    head_grad: list[Term]
    embed_grad: float
    loss: LossMemory
    state: RankState | None = None
    casts: bool = False  # autocast makes 16-bit copies of the weights it reads
    tp: int = 1  # tensor-parallel degree: a rank holds 1/tp of each split matrix
    head: bool = True  # the rank holds the output head (the last pipeline stage)
    # Gradients held unsharded until the end of the backward: FSDP2 reduces the root unit
    # (embedding, norm, head) only once all of its gradients exist, so the head's waits.
    root_grads: list[Term] = field(default_factory=list)

    @property
    def backward_grads(self) -> list[Term]:
        """Gradients the backward accumulates into (the whole set, or this rank's partition)."""
        if self.state is not None and self.state.grads_in_backward is not None:
            return self.state.grads_in_backward
        return self.grads

    def extra(self, what: str) -> list[Term]:
        return list(getattr(self.state, what)) if self.state is not None else []

    # Buckets several phases hold alike, made once per rank's parts and shared (frozen, equal to a bucket
    # made again): the optimizer state (the forward, the backward, an evaluation) and the loss's tensors
    # held to the step's end (the backward's end, the optimizer step).
    @Once
    def optim_bucket(self) -> Bucket:
        return make_bucket(BucketKey.OPTIMIZER, self.optim)

    @Once
    def loss_held_bucket(self) -> Bucket:
        return make_bucket(BucketKey.ACTIVATIONS, self.loss.held)

    def gathered_off_turn(self, otherwise: str) -> list[Term]:
        """What the framework holds gathered away from the forward / backward turn (the backward's end,
        an evaluation forward): ZeRO-3's own term where it differs (RankState.off_turn), else ``otherwise``."""
        if self.state is not None and self.state.off_turn is not None:
            return list(self.state.off_turn)
        if otherwise == "backward" and self.state is not None and self.state.backward_end is not None:
            return list(self.state.backward_end)
        return self.extra(otherwise)


@fills_fields
@dataclass(frozen=True)
class Rank:
    """Which rank of a multi-GPU plan the breakdown is for (None: the plan on one GPU)."""

    layout: Layout
    stage: Stage


@fills_fields
@dataclass(frozen=True)
class _Common:
    """The pieces every rank of a plan starts from: the single-GPU state terms and one
    block's saved tensors, the loss and the layer gradients as the rank computes them."""

    weights: list[Term]
    grads: list[Term]
    optim: list[Term]
    copies: list[Term]
    adt: Dtypes  # the dtypes the ranks compute in (FSDP2 mixed precision may differ from the plan's)
    block: LayerActs  # one block on one rank (÷ TP / CP where they split it)
    sac_saved: LayerActs  # what per-op SAC caches of one block on one rank (empty without it)
    layer_grads: Term
    head_grad: list[Term]
    outside: list[Term]
    loss: LossMemory
    # A hybrid's layers by kind (count, one layer's saved tensors); ``block`` is then the largest kind's.
    stack: tuple[tuple[int, LayerActs], ...] = ()


_LAST_COMMON: tuple[Plan | None, bool, _Common | None] = (None, False, None)


def _carved_head_gradient(plan: Plan, rank: Rank, dt: Dtypes) -> list[Term]:
    """The [final norm, head] unit's sharded gradient as a block runs its backward, where that unit
    is its own (core.parallel.layout.carved_ends): its ``post_backward`` reduce-scatters it once the
    norm's backward is done, before the last block's, so its unsharded gradient is gone by then."""
    lay = rank.layout
    ends = carved_ends(plan, rank.stage, lay.tensor_parallel)
    if ends is None:
        return []
    tail, shards = ends[1] * plan.model.shape_scale, lay.state_shards
    return [
        Term(
            "[final norm, head] sharded gradient (their unit reduced after the head's backward)",
            f"{sci(tail)} × {dt.grad:g} B ÷ {shards:g}",
            tail * dt.grad / shards,
        )
    ]


def _common(plan: Plan, counts: ParamCounts, dt: Dtypes, lay: Layout | None) -> _Common:
    """Computed once per plan: the ranks of a pipeline differ only in what follows (the last
    answer is kept, one tuple replaced whole, as :func:`core.roles.dtypes_for` does)."""
    global _LAST_COMMON
    last_plan, last_split, last = _LAST_COMMON
    if last_plan is plan and last_split == (lay is not None) and last is not None:
        return last
    model = plan.model
    ap = compute_plan(plan)
    adt = dtypes_for(ap) if ap is not plan else dt
    block = layer_activations(ap, trainable_block=plan.method in (Method.FULL, Method.FROZEN))
    n = plan.workload.micro_batch * plan.workload.seq_len
    ca = adt.compute
    i_el = n * model.intermediate_size
    layer_grads = Term("gradients flowing through a block's MLP", f"3 × N·I × {ca:g}", 3 * i_el * ca)
    workspace = backward_workspace(ap, ca)
    if workspace:
        layer_grads = Term(
            "gradients through a block + attention backward workspace",
            f"3 × N·I × {ca:g} + kernel scratch",
            layer_grads.bytes + workspace,
        )
    kernels = unsloth_kernels(plan)
    if kernels:
        layer_grads = _unsloth_layer_grads(plan, kernels, i_el, ca, workspace)
    layer_grads = _with_torchtitan_moe_backward(plan, layer_grads, n)
    head_trains = plan.method is Method.FULL or (plan.method is Method.FROZEN and not model.tie_embeddings)
    vd = model.vocab_size * model.hidden_size
    # The head's gradient as autograd forms it: in the dtype the rank computes the head in
    # (FSDP2 gathers it in MixedPrecisionPolicy.param_dtype; elsewhere the stored dtype).
    head_grad = [Term("output-head gradient", f"V·d × {adt.grad:g}", vd * adt.grad)] if head_trains else []
    op_sac = plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.OP
    sac_saved = selective_saved(ap) if op_sac else LayerActs(())
    outside = outside_blocks(ap)
    if lay is not None:
        gathered = keeps_gathered_inputs(plan)
        block = block_per_rank(block, lay, gathered)
        sac_saved = block_per_rank(sac_saved, lay, gathered)
        outside = block_per_rank(outside, lay, gathered)
        split_by = lay.tensor_parallel * lay.context_parallel
        if split_by > 1:
            layer_grads = Term(
                f"{layer_grads.label} ({_split_why(lay)})",
                f"({layer_grads.formula}) ÷ {split_by}",
                layer_grads.bytes / split_by,
            )
        ring = ring_attention_buffers(n, model.kv_width, model.q_width, model.num_heads, ca, lay)
        if ring:
            layer_grads = Term(
                layer_grads.label + " + ring attention buffers",
                layer_grads.formula + " + K/V chunks + accumulators",
                layer_grads.bytes + sum(t.bytes for t in ring),
            )
        layer_grads = _with_ring_backward(plan, layer_grads, n, ca, lay)
        layer_grads = _with_all_to_all_buffer(plan, layer_grads, ca)
    layer_grads = _with_float8_casts(plan, layer_grads, lay)
    layer_grads = _with_experts_loop_gradient(plan, layer_grads, adt.grad)
    stack: tuple[tuple[int, LayerActs], ...] = ()
    # A hybrid on one GPU or on data-parallel ranks (core.plan.hybrid_training_refusal refuses any split of the
    # model): a rank runs the one-GPU step at its micro-batch, so its layers keep what one GPU's do.
    if model.recurrent_mixer and (lay is None or lay.model_split * lay.expert_parallel == 1):
        stack, block, layer_grads = _hybrid_layers(plan, ap, layer_grads)
    common = _Common(
        # PEFT's modules_to_save copies and trainable tokens beside the adapters (core.training.extra_trained).
        weights=weight_terms(plan, counts, dt) + extra_weight_terms(plan, dt),
        grads=gradient_terms(counts, dt) + extra_grad_terms(plan, dt),
        optim=optimizer_terms(plan, counts, dt) + extra_state_terms(plan, dt),
        copies=copy_terms(plan, counts, dt),
        adt=adt,
        block=block,
        sac_saved=sac_saved,
        layer_grads=layer_grads,
        head_grad=head_grad,
        outside=list(outside.items),
        loss=loss_memory(ap, lay is not None and loss_parallel(plan, lay)),
        stack=stack,
    )
    _LAST_COMMON = (plan, lay is not None, common)
    return common


def _hybrid_layers(
    plan: Plan, ap: Plan, layer_grads: Term
) -> tuple[tuple[tuple[int, LayerActs], ...], LayerActs, Term]:
    """A hybrid's layers by kind, its largest layer (the one a checkpointed backward recomputes) and the
    backward's transient over it: a layer's backward reaches its mixer once the MLP above it is done and its
    tensors are freed."""
    trains = plan.method in (Method.FULL, Method.FROZEN)
    stack = hybrid_stack(ap, trains)
    block = max((acts for _, acts in stack), key=lambda acts: acts.bytes)
    mixer = GDN_MIXER if plan.model.recurrent_mixer == GDN_MIXER else MAMBA2_MIXER
    freed = block.bytes - layer_activations(ap, trains, mixer, False).bytes
    if mixer == GDN_MIXER:
        layer_grads = _attention_after_mlp(ap, layer_grads, block, trains)
    return stack, block, _with_mixer_backward(plan, layer_grads, freed)


def _attention_after_mlp(ap: Plan, layer_grads: Term, block: LayerActs, trains: bool) -> Term:
    """A Qwen3-Next / Qwen3.5 attention layer's backward in two points, not one: its MLP's (the gradients
    through the MLP over every saved tensor of the layer), then its attention kernel's scratch, once the MLP's
    and its norm's saved tensors are freed. transformers 5.25.0 Qwen3_5DecoderLayer / Qwen3NextDecoderLayer
    ``forward``: the MLP and post_attention_layernorm run after the attention, so autograd runs their nodes
    first and frees what they saved before the attention's; the flash backward's softmax_d and dq_accum
    (core.training.attention.backward_workspace) are made when its own node runs. Measured:
    tools/measure on tiny-qwen3.5-apart, 1 × 256 tokens checkpointed (benchmarks/parallel/hybrid/one_gpu),
    the peak inside _scaled_dot_product_flash_attention_backward with the MLP's tensors gone."""
    workspace = backward_workspace(ap, dtypes_for(ap).compute)
    if not workspace:
        return layer_grads
    mlp = layer_grads.bytes - workspace
    freed = block.bytes - layer_activations(ap, trains, mlp=False).bytes
    if workspace - freed <= mlp:
        label = "gradients flowing through a block's MLP (the attention kernel's scratch comes once it is freed)"
        return Term(label, layer_grads.formula.replace(" + kernel scratch", ""), mlp)
    label = "attention backward workspace, less the MLP's freed tensors"
    return Term(label, f"kernel scratch − {gb(freed)} GB", workspace - freed)


def _with_mixer_backward(plan: Plan, layer_grads: Term, freed: float) -> Term:
    """A hybrid's backward transient over its largest layer's saved tensors: the larger of an attention / MLP
    layer's and a Mamba-2 mixer's (core.training.mamba: the torch path's float32 gradients, or mamba_ssm's
    backward buffers), less what the layer's MLP kept (``freed``: its backward has run by then)."""
    ca = dtypes_for(plan).compute
    full = plan.method is Method.FULL
    if plan.model.recurrent_mixer == GDN_MIXER:  # core.training.gdn
        g = deltanet_shape(plan)
        mixer = gdn.kernel_path_backward(g, ca) if plan.mamba_kernels else gdn.torch_path_backward(g, full)
    else:
        m = mixer_shape(plan)
        mixer = kernel_path_backward(m, ca) if plan.mamba_kernels else torch_path_backward(m, full)
        whole_block = plan.checkpoint_policy not in (CheckpointPolicy.OP, CheckpointPolicy.ATTENTION)
        if plan.checkpointing and whole_block and not plan.mamba_kernels:
            mixer = max(mixer, _mamba_recompute(plan, m, ca, full), key=lambda t: t.bytes)
    if mixer.bytes - freed <= layer_grads.bytes:
        return layer_grads
    label = f"{mixer.label}, less the MLP's freed tensors (more than {layer_grads.label})"
    return Term(label, f"{mixer.formula} − {gb(freed)} GB", mixer.bytes - freed)


def _mamba_recompute(plan: Plan, m: MixerShape, ca: float, full: bool) -> Term:
    """A checkpointed Mamba-2 block recomputing its mixer's torch path in the backward: the scan's forward high
    point over the block's saved tensors (core.training.mamba.torch_path_recompute) and the gradient arriving at
    the block's output, which autograd holds until the block's backward takes it (N·d in the residual dtype)."""
    dt = dtypes_for(plan)
    scan = torch_path_recompute(m, ca, dt.autocast, full, dt.mixed)
    arriving = m.b * m.s * plan.model.hidden_size * dt.residual
    return Term(
        f"{scan.label} + the block output's gradient",
        f"{scan.formula} + N·d × {dt.residual:g}",
        scan.bytes + arriving,
    )


def _largest_matrix(plan: Plan) -> int:
    """Elements of the block's largest projection matrix (out × in)."""
    return max(i * o for i, o in plan.model.linear_shapes().values())


def _dequantised(el: float, ca: float) -> float:
    """A 4-bit matrix of ``el`` elements dequantised: the weight in the compute dtype and its
    float32 absmax, one per NF4 block (bitsandbytes' block of :data:`core.dtypes.NF4_BLOCK`)."""
    return el * ca + el / NF4_BLOCK * 4


def _unsloth_layer_grads(plan: Plan, kernels: frozenset[str], i_el: int, ca: float, workspace: float) -> Term:
    """The gradients through a block under Unsloth's LoRA kernels (unslothai/unsloth 015bdef,
    unsloth/kernels/fast_lora.py): LoRA_MLP.backward forms one new N·I tensor (DW, the down
    projection's input gradient), then overwrites DW, e and g in place and writes dX into X's
    storage; under QLoRA each backward matmul dequantises its weight into a fresh out·in
    tensor with its float32 absmax (``fast_dequantize(W.t(), quant)`` without the global
    buffer), freed after use: one at a time, the largest counted. ``workspace``: the attention
    backward's scratch (core.training.attention), as for every plan."""
    mlp = "mlp" in kernels
    grads = i_el * ca if mlp else 3 * i_el * ca
    formula = f"{1 if mlp else 3} × N·I × {ca:g}"
    label = "gradients through a block's MLP" + (" (Unsloth LoRA_MLP: DW, the rest in place)" if mlp else "")
    if plan.quantised_base:
        el = _largest_matrix(plan)
        grads += _dequantised(el, ca)
        formula += f" + largest out·in × {ca:g} + absmax (float32, one per {NF4_BLOCK})"
        label += " + one weight dequantised by the backward"
    if workspace:
        formula += " + kernel scratch"
        label += " + attention backward workspace"
    return Term(label, formula, grads + workspace)


def _unsloth_dequant_buffer(plan: Plan) -> list[Term]:
    """Unsloth's forward dequantises every 4-bit weight into one global buffer per GPU
    (unslothai/unsloth 015bdef, unsloth/kernels/utils.py ``fast_dequantize(...,
    use_global_buffer=True)``: ``WEIGHT_BUFFERS`` in the compute dtype grown to the largest
    out·in, ``ABSMAX_BUFFERS`` in float32), which stays for the whole run."""
    if plan.method is not Method.QLORA or not unsloth_kernels(plan):
        return []
    el = _largest_matrix(plan)
    ca = dtypes_for(plan).compute
    return [
        Term(
            "Unsloth dequantisation buffer (largest 4-bit matrix, persistent)",
            f"{sci(el)} × {ca:g} + {sci(el / NF4_BLOCK)} × 4",
            _dequantised(el, ca),
        )
    ]


def _with_experts_loop_gradient(plan: Plan, layer_grads: Term, grad: float) -> Term:
    """The experts' loop over stacked weights (plan setting ``experts_loop``) when they train: each
    expert's weight gradient reaches the stacked parameter through the indexing's backward, which
    scatters it into a zero tensor of the whole parameter (PyTorch's derivatives.yaml, ``index``:
    ``index_backward(grad.new_zeros_symint(self.sym_sizes(), ...), indices, grad)``), and autograd
    adds each into the gradient accumulated so far (torch/csrc/autograd/input_buffer.cpp
    ``accumulate``, in place once it holds the only reference). So while the next expert's
    gradient is added, a second whole gate|up gradient [E, d, 2I] sits beside the accumulated one,
    which the block's gradients already count (transformers v4.55.0, models/gpt_oss/
    modeling_gpt_oss.py ``GptOssExperts.forward``)."""
    model = plan.model
    if not plan.experts_loop or model.num_experts <= 1 or plan.method not in (Method.FULL, Method.FROZEN):
        return layer_grads
    el = model.num_experts * model.hidden_size * 2 * model.intermediate_size
    return Term(
        layer_grads.label + " + one expert's gradient scattered into the stacked gate|up weight",
        layer_grads.formula + f" + E·d·2I × {grad:g}",
        layer_grads.bytes + el * grad,
    )


def _with_torchtitan_moe_backward(plan: Plan, layer_grads: Term, n: int) -> Term:
    """torchtitan's MoE layer run eager with its experts trained (plan setting ``moe_layer``): the backward's first
    step, the routing weights' multiply, forms float32 gradients of the N·k × d experts' output while the layer's
    saved tensors are all still alive. The scatter-add form (torchtitan before e1f7f318, prime-rl 8718eb14
    models/layers/moe.py: ``(routed_output.to(torch.float32) * scores).to(x.dtype)``) holds three N·k·d float32
    tensors then, the bmm form (torchtitan d021aa9c ``torch.bmm(scores, routed_output_unsorted.float())``) one
    and a bf16 one, beside the scores' N·k float32 gradient. Measured above what was alive as the backward
    started, the same at two widths of d and of I (tools/measure/titan_moe_check.py, tests/data/titan_moe/: 12·d + 4
    and 6·d + 4 B a routed row). Compiled, the fused backward holds no more than a few d a routed row (the same
    files), under the block's gradients already counted. The larger of the two moments."""
    model = plan.model
    if (plan.moe_layer is MoeLayer.TRANSFORMERS or plan.stack is Stack.COMPILE or model.num_experts <= 1
            or plan.experts_loop or plan.method is not Method.FULL):
        return layer_grads
    load = expert_load(plan)  # the busiest expert-parallel rank's share of the routed rows (1.0 balanced)
    rows = n * model.experts_per_token * load
    per = 12 if plan.moe_layer is MoeLayer.TORCHTITAN_SCATTER else 6
    moment = rows * (per * model.hidden_size + 4)
    if moment <= layer_grads.bytes:
        return layer_grads
    nk = routed_rows(load)
    return Term(
        f"torchtitan MoE: the routing weights' float32 gradients (more than {layer_grads.label})",
        f"{nk}·({per}·d + 4)",
        moment,
    )


def _with_ring_backward(plan: Plan, layer_grads: Term, n: int, ca: float, lay: Layout) -> Term:
    """The block backward's transient is the larger of the MLP's gradients (with the forward
    ring's buffers a recompute brings) and PyTorch's ring attention backward (attention's
    backward follows the MLP's; core.parallel.acts.ring_attention_backward, with the K/V its rotate
    method, ``parallel.cp_rotate_method``, holds). Megatron-LM runs
    context parallelism through Transformer Engine's own attention, not this ring."""
    rotate = torch_ring_rotate(plan)  # None: no PyTorch ring
    ring = ring_attention_backward(n, plan.model.q_width, ca, lay, rotate) if rotate is not None else None
    if ring is None or ring.bytes <= layer_grads.bytes:
        return layer_grads
    return Term(f"{ring.label} (more than {layer_grads.label})", ring.formula, ring.bytes)


def _with_all_to_all_buffer(plan: Plan, layer_grads: Term, ca: float) -> Term:
    """Expert parallel: the all-to-all's second copy of a MoE layer's routed tokens. Megatron-Core's
    alltoall dispatcher (NVIDIA/Megatron-LM d98e8a64, megatron/core/transformer/moe/
    token_dispatcher.py) permutes the N·k routed copies by expert, then all-to-alls them into a new
    buffer of the tokens routed to this rank's experts (N·k of them under balanced routing, so the
    experts' saved tensors are as without EP); until the send completes both exist, and the
    combine's all-to-all does the same backwards, in the forward and in the backward. One N·k·d
    buffer in the compute dtype beside the block's other transients (N the rank's tokens: ÷ CP, and
    ÷ TP with sequence parallel, as the dispatcher receives them). The busiest rank receives expert_load
    × N·k copies (the plan's routing imbalance, capped or padded by a capacity factor)."""
    copies = dispatched_copies(plan)
    if not copies:
        return layer_grads
    load = expert_load(plan)
    buffer = copies * load * plan.model.hidden_size * ca
    share = "" if load == 1.0 else f" × {load:.3g}"
    return Term(
        layer_grads.label + " + expert-parallel all-to-all buffer",
        layer_grads.formula + f" + N·k·d{share} × {ca:g}",
        layer_grads.bytes + buffer,
    )


def _with_float8_casts(plan: Plan, layer_grads: Term, lay: Layout | None) -> Term:
    """What float8 linears add to a block's backward. torchao's Float8Linear (pytorch/ao
    36027d8, torchao/float8/float8_linear.py, ``matmul_with_hp_or_float8_args``) saves the
    high-precision input and weight (``ctx.save_for_backward(input_hp, weight_hp_t)``), what
    nn.Linear keeps, and casts in its backward the output gradient twice (for the input and
    the weight gradient), the weight and the input again, one byte per element, alive while
    that linear's backward runs: the largest linear's casts join the block's backward. (torchao
    0.9-0.12 kept each linear's float8 weight from the forward to the backward, and before
    Feb 2025 delayed scaling kept a 16-entry amax history per tensor: d37019636.) Transformer
    Engine's casts are not counted here (its cached fp8 weights under Megatron-Core are a weight term:
    core.parallel.state.te_weight_cache). With
    FSDP2's float8 all-gather the gathered weight is already float8 (``tensor_already_casted_to_fp8``):
    the backward casts no weight.

    torchao's rowwise_with_gw_hp (torchao 0.13.0 torchao/float8/config.py ``from_recipe_name``: the weight
    gradient's casts ``ScalingType.DISABLED``) runs the same autograd function and saves the same tensors;
    its backward casts only the output gradient (rowwise, for the input gradient) and the weight
    (tensorwise): N·out + in·out bytes. torchao's MX linears (torchao 0.13.0
    torchao/prototype/mx_formats/mx_linear.py ``mx_mm``: ``ctx.save_for_backward(input_hp, weight_hp)``)
    save what nn.Linear does too, and their backward holds the output gradient cast along each dim, the
    weight's and the input's dim-1 casts until it returns: the tensorwise recipe's casts, each with one
    E8M0 scale byte per block of MX_BLOCK (1 + 1/32 bytes an element); MX has no float8 all-gather."""
    recipe = plan.float8
    if recipe not in _TORCHAO_FLOAT8:
        return layer_grads
    tp = lay.tensor_parallel if lay is not None else 1
    cp = lay.context_parallel if lay is not None else 1
    tokens = plan.workload.micro_batch * plan.workload.seq_len / cp
    largest = 0.0
    fp8_gathered = (
        lay is not None
        and recipe is Float8.TENSORWISE
        and plan.parallel.fsdp_float8_all_gather
        and plan.parallel.strategy is Strategy.FSDP
    )
    weight_cast = 0 if fp8_gathered else 1
    gw_hp = recipe is Float8.ROWWISE_GW_HP
    per_element = 1.0 + 1.0 / MX_BLOCK if recipe is Float8.MXFP8 else 1.0
    for gemm in block_gemms(plan):
        if gemm.name.endswith(ADAPTER_GEMMS):
            continue
        k = gemm.k / tp if gemm.split == "row" else gemm.k
        n = gemm.n / tp if gemm.split == "column" else gemm.n
        m = tokens * gemm.share
        casts = m * n + k * n if gw_hp else m * k + 2 * m * n + weight_cast * k * n
        largest = max(largest, casts * per_element)
    if gw_hp:
        formula = " + (N·out + in·out) × 1 B"
    elif fp8_gathered:
        formula = " + (N·in + 2·N·out) × 1 B"
    else:
        formula = f" + (N·in + 2·N·out + in·out) × {per_element:.4g} B"
    return Term(
        layer_grads.label + " + float8 casts of the largest linear",
        layer_grads.formula + formula,
        layer_grads.bytes + largest,
    )


# torchao's low-precision linears (their casts: _with_float8_casts; Transformer Engine's are not counted here).
_TORCHAO_FLOAT8: Final = frozenset({Float8.TENSORWISE, Float8.ROWWISE, Float8.ROWWISE_GW_HP, Float8.MXFP8})


def _split_why(lay: Layout) -> str:
    return ", ".join(
        f"÷ {name} {d}" for name, d in (("TP", lay.tensor_parallel), ("CP", lay.context_parallel)) if d > 1
    )


def _parts(plan: Plan, counts: ParamCounts, dt: Dtypes, rank: Rank | None = None) -> _Parts:
    model = plan.model
    c = _common(plan, counts, dt, rank.layout if rank is not None else None)
    weights, grads, optim, copies = c.weights, c.grads, c.optim, c.copies
    adt, block, layer_grads, head_grad, outside, loss = c.adt, c.block, c.layer_grads, c.head_grad, c.outside, c.loss
    state = None
    if rank is not None:
        state = rank_state(
            plan, counts, dt, rank.layout, rank.stage, (weights, grads, optim), _optimizer_at(plan, counts)
        )
        weights, grads, optim = state.weights, state.grads, state.optim
        copies = rank_copies(plan, rank.layout, rank.stage, copies)
    # Activations: every trainable block's saved tensors, or with checkpointing only the
    # block inputs plus one block recomputed at a time in the backward.
    trainable_layers = model.num_layers - plan.gradless_layers
    layers = model.num_layers
    n = plan.workload.micro_batch * plan.workload.seq_len
    nd_divisor, nd_why, in_flight = 1.0, "", 1.0
    if rank is not None:
        trainable_layers, layers = stage_trainable_layers(plan, rank.stage), rank.stage.layers
        nd_divisor, nd_why = sequence_region(rank.layout)
        in_flight = rank.stage.in_flight
    weights = weights + _unsloth_dequant_buffer(plan)
    weights = weights + te_weight_cache(plan, rank.layout if rank else None, rank.stage if rank else None)
    kept, recomputed = _kept_activations(plan, c, layers, trainable_layers, (nd_divisor, nd_why), in_flight)
    if plan.activation_offload:
        kept = _offloaded(plan, c, kept, nd_divisor)
    embed_grad = model.embedding_params() * dt.grad if plan.method is Method.FULL else 0.0
    root_grads: list[Term] = []
    if rank is not None:
        lay, stage = rank.layout, rank.stage
        outside = outside if stage.head else []
        outside = outside + pipeline_buffers(n * model.hidden_size / nd_divisor, adt.residual, lay)
        v_div, v_why = vocab_region(lay)
        if stage.head:
            loss = LossMemory(
                tuple(split(loss.forward, v_div, v_why)),
                tuple(split(loss.backward, v_div, v_why)),
                tuple(split(loss.held, v_div, v_why)),
            )
        else:
            loss = LossMemory((), ())
        tp_why = f"÷ TP {lay.tensor_parallel}" if lay.tensor_parallel > 1 else ""
        head_grad = split(head_grad, lay.tensor_parallel, tp_why) if stage.head else []
        # The "embedding gradient formed last" correction applies where every gradient is
        # held whole (DDP, or no data-parallel sharding) and the stage has the embedding.
        whole = lay.state_shards == 1 or plan.parallel.strategy is Strategy.DDP
        embed_grad = embed_grad / lay.tensor_parallel if whole and stage.embedding else 0.0
        if plan.parallel.strategy is Strategy.FSDP and not whole:
            if not fsdp_no_sync(plan.parallel, plan.workload.grad_accum):  # else among the accumulated ones
                head_grad = head_grad + root_copy_gradient(plan, dt.base)  # PEFT's lm_head copy, in the root unit
            root_grads = head_grad
            if state is not None and state.backward_end is not None:  # carved ends: [norm, head] reduced early
                head_grad, root_grads = _carved_head_gradient(plan, rank, dt) if head_grad else [], []
    return _Parts(
        weights=weights,
        copies=copies,
        grads=grads,
        optim=optim,
        kept=kept,
        recomputed=recomputed,
        outside=outside,
        block=block,
        layer_grads=layer_grads,
        head_grad=head_grad,
        embed_grad=embed_grad,
        loss=loss,
        state=state,
        casts=dt.casts and not plan.quantised_base and (rank is None or bool(copies)),
        tp=rank.layout.tensor_parallel if rank is not None else 1,
        head=rank.stage.head if rank is not None else True,
        root_grads=root_grads,
    )


def _kept_activations(
    plan: Plan, c: _Common, layers: int, trainable_layers: int, region: tuple[float, str], in_flight: float
) -> tuple[list[Term], list[Term]]:
    """The blocks' activations held from the forward to the backward, and what the backward
    recomputes on top of them (one block at a time).

    No checkpointing: every trainable block's saved tensors. Full: each block's input, one
    block recomputed. Per-op SAC (torchtitan): each block's input and the outputs its policy
    saves (see :func:`core.training.activations.selective_saved`), one block's other tensors
    recomputed. Layer SAC with N: the checkpointed blocks' inputs and the other trainable
    blocks' saved tensors; a checkpointed block is recomputed only on top of the blocks
    below it, so it adds to the peak only when it is the topmost block (N divides L).
    """
    model, block, adt = plan.model, c.block, c.adt
    nd_divisor, nd_why = region
    n = plan.workload.micro_batch * plan.workload.seq_len
    flight = f" × {in_flight:g} micro-batches in flight" if in_flight != 1 else ""
    policy = plan.checkpoint_policy if plan.checkpointing else None
    ckpt = plan.checkpointed_blocks(layers)
    if policy is CheckpointPolicy.ATTENTION:
        return _attention_recompute_kept(block, trainable_layers, in_flight, flight)
    whole = trainable_layers if policy is None else 0
    if policy is CheckpointPolicy.LAYER:  # the checkpointed ones counted among the trainable (frozen at the bottom)
        whole = max(0, trainable_layers - ckpt)
    kept: list[Term] = []
    if ckpt and unsloth_offloads(plan):
        kept += _unsloth_offloaded(plan, n * model.hidden_size / nd_divisor * adt.residual * in_flight)
    elif ckpt:
        # Every checkpointed block holds on to its input, frozen blocks included (measured:
        # the non-reentrant checkpoint keeps its arguments even when nothing needs a gradient).
        nd = n * model.hidden_size / nd_divisor
        every = f", one block in {plan.checkpoint_every}" if policy is CheckpointPolicy.LAYER else ""
        formula = f"L × N·d × {adt.residual:g} = {ckpt} × {sci(nd)} × {adt.residual:g}{flight}"
        label = f"block inputs kept by checkpointing{every}" + (f" ({nd_why})" if nd_why else "")
        kept.append(Term(label, formula, ckpt * nd * adt.residual * in_flight))
    if policy is CheckpointPolicy.OP:
        saved = c.sac_saved.bytes
        formula = f"{layers} × {gb(saved)} GB{flight}"
        kept.append(Term("outputs saved by op SAC (matmuls, attention) per block", formula, layers * saved * in_flight))
        recompute = Term(
            "one block recomputed in the backward (less the saved outputs)",
            "Σ of one block's saved tensors − its SAC outputs",
            max(0.0, block.bytes - saved),
        )
        return kept, [recompute]
    if c.stack and policy is None:  # a hybrid: every layer of each kind (core.training.activations.hybrid_stack)
        formula = " + ".join(f"{count} × {gb(acts.bytes)} GB" for count, acts in c.stack)
        total = sum(count * acts.bytes for count, acts in c.stack)
        kept.append(Term("layers × saved tensors per layer, by kind", formula, total))
    elif policy is None or whole:
        formula = f"{whole} × {gb(block.bytes)} GB{flight}"
        kept.append(Term(f"{whole} blocks × saved tensors per block", formula, whole * block.bytes * in_flight))
    top_is_checkpointed = policy is not CheckpointPolicy.LAYER or layers % plan.checkpoint_every == 0
    if ckpt and top_is_checkpointed:
        return kept, [Term("one block recomputed in the backward", "Σ of one block's saved tensors", block.bytes)]
    return kept, []


def _attention_recompute_kept(
    block: LayerActs, trainable_layers: int, in_flight: float, flight: str
) -> tuple[list[Term], list[Term]]:
    """Megatron's selective recompute (core attention only): every trainable block keeps its
    saved tensors but what the core attention keeps between its matmuls, which one block at a
    time recomputes in the backward (Korthikanti et al. 2022, arXiv:2205.05198 §5)."""
    inner = core_attention_bytes(block)
    kept = block.bytes - inner
    formula = f"{trainable_layers} × ({gb(block.bytes)} − {gb(inner)} core attention) GB{flight}"
    terms = [
        Term(
            f"{trainable_layers} blocks × saved tensors but the core attention's",
            formula,
            trainable_layers * kept * in_flight,
        )
    ]
    recomputed = [Term("one block's core attention recomputed in the backward", "scores / log-sum-exp", inner)]
    return terms, recomputed if inner else []


# Unsloth's offloaded checkpointing (use_gradient_checkpointing="unsloth"):
# - below 512 tokens of max_seq_length Unsloth checkpoints plainly (unslothai/unsloth 015bdef,
#   unsloth/models/_utils.py apply_unsloth_gradient_checkpointing: ``max_seq_length < 512``
#   returns True);
UNSLOTH_OFFLOAD_MIN_SEQ: Final = 512
# - a block input goes to pinned host memory only when it has more than 2 MiB of elements' bytes
#   (unslothai/unsloth-zoo ce232d6, unsloth_zoo/gradient_checkpointing.py
#   ``MINIMUM_SIZE = 2 * 1024 * 1024 // n_bytes`` elements, ``new_size > MINIMUM_SIZE``);
UNSLOTH_OFFLOAD_MIN_BYTES: Final = 2 * 1024 * 1024
# - after the first step the last checkpointed block's input stays on the GPU (LAST_GC_INDEX),
#   and the backward reloads each input into a persistent GPU buffer sized to the largest, with
#   a second one (double buffering) when more than DOUBLE_BUFFER_HEADROOM = 512 MiB is free after
#   the first step (UnslothCheckpointFunction.forward). Whether it is free depends on the run;
#   the two buffers are the documented upper bound, which the estimate takes.
UNSLOTH_RELOAD_BUFFERS: Final = 2


def unsloth_offloads(plan: Plan) -> bool:
    """Whether Unsloth's checkpointing offloads the block inputs (else it is plain full
    checkpointing: every block input stays on the GPU)."""
    if not plan.checkpointing or plan.checkpoint_policy is not CheckpointPolicy.UNSLOTH:
        return False
    w = plan.workload
    one = w.micro_batch * w.seq_len * plan.model.hidden_size * dtypes_for(plan).residual
    return w.seq_len >= UNSLOTH_OFFLOAD_MIN_SEQ and one > UNSLOTH_OFFLOAD_MIN_BYTES


def _unsloth_offloaded(plan: Plan, one: float) -> list[Term]:
    """On the GPU under Unsloth's offloaded checkpointing: the last block's input and the reload
    buffers (``one`` is a block input's bytes); the other inputs are in pinned host memory
    (:func:`host_terms`)."""
    res = dtypes_for(plan).residual
    return [
        Term("last block's input, kept on the GPU (Unsloth checkpointing)", f"N·d × {res:g}", one),
        Term(
            "reload buffers of Unsloth checkpointing (double buffering: upper bound)",
            f"{UNSLOTH_RELOAD_BUFFERS} × N·d × {res:g}",
            UNSLOTH_RELOAD_BUFFERS * one,
        ),
    ]


# torchtune OffloadActivations (torchtune/training/_activation_offloading.py, pytorch/torchtune
# bd2a0fc7): max_fwd_stash_size = 5 saved tensors stay on the GPU while their copy to pinned
# host memory runs; the output head's input is never offloaded (a no-op context around it).
OFFLOAD_STASH_TENSORS = 5


def _offloaded(plan: Plan, c: _Common, kept: list[Term], nd_divisor: float) -> list[Term]:
    """The blocks' saved tensors under activation offloading: in host memory, but for the last
    few in flight (each block's input under checkpointing, else a block's tensors at most)."""
    total = sum(t.bytes for t in kept)
    if plan.checkpointing:
        one = plan.workload.micro_batch * plan.workload.seq_len * plan.model.hidden_size / nd_divisor * c.adt.residual
        stash, how = OFFLOAD_STASH_TENSORS * one, f"{OFFLOAD_STASH_TENSORS} block inputs"
    else:
        stash, how = c.block.bytes, "one block's saved tensors (the stash holds 5 tensors)"
    stash = min(total, stash)
    return [
        Term(
            f"saved activations offloaded to host memory ({gb(total)} GB there): the last in flight",
            f"{how} on the GPU",
            stash,
        )
    ]


def _step_in_backward(plan: Plan, parts: _Parts) -> list[Term]:
    """torchtune optimizer_in_bwd (torchtune/training/memory.py register_optim_in_bwd_hooks: a
    post-accumulate-grad hook steps and zeroes each parameter): the gradients alive are those
    of the block being differentiated, each freed once applied."""
    model = plan.model
    per_block = model.layer_params() * model.params_scale / parts.tp
    shards = parts.state.step_share if parts.state is not None else 1.0
    g = dtypes_for(plan).grad
    return [
        Term(
            "one block's gradients (each applied and freed by its hook)",
            f"{sci(per_block)} × {g:g} B",
            per_block * g * shards,
        )
    ]


def _held_gradients(plan: Plan, parts: _Parts) -> Bucket:
    """Gradients alive during the forward: only those accumulated over earlier micro-batches."""
    held = parts.backward_grads if plan.workload.grad_accum > 1 else []
    return make_bucket(BucketKey.GRADIENTS, held + parts.extra("persistent"))


def forward_phase(plan: Plan, parts: _Parts) -> Phase:
    activations = [*parts.kept, *parts.outside, *parts.loss.forward]
    weights = make_bucket(BucketKey.WEIGHTS, parts.weights + parts.copies + parts.extra("forward"))
    end = Phase(
        "forward + loss",
        (weights, _held_gradients(plan, parts), parts.optim_bucket, make_bucket(BucketKey.ACTIVATIONS, activations)),
        "end of the forward pass: every saved activation plus the logits and the loss",
        StepPhase.FORWARD,
    )
    # DoRA's one-layer transient (core.training.activations.dora_forward_transient) in the last adapted layer's
    # forward, the head's when it is adapted: every block's saved tensors beside it, the logits not made yet.
    dora = dora_forward_transient(plan, head=parts.head) if parts.tp == 1 else None
    if dora is None:
        return end
    inside = Phase(
        "forward + loss",
        (
            weights,
            _held_gradients(plan, parts),
            parts.optim_bucket,
            make_bucket(BucketKey.ACTIVATIONS, [*parts.kept, *parts.outside, dora]),
        ),
        "inside the forward: every saved activation plus one DoRA layer's B·A, built from an identity matrix",
        StepPhase.FORWARD,
    )
    return max((end, inside), key=PHASE_BYTES)


@fills_fields
@dataclass(frozen=True)
class _BackwardWeights:
    """The weights bucket as the backward starts and while a block runs its backward, and the
    autocast copy of the first block's weights still held at its end (None: no autocast)."""

    start: Bucket
    in_block: Bucket
    first_block_copy: Term | None


def _backward_weights(plan: Plan, parts: _Parts) -> _BackwardWeights:
    """What of the weights, their autocast copies and the gathered parameters the backward holds."""
    model = plan.model
    gathered = parts.extra("backward")
    if parts.state is not None and parts.state.backward_block is not None:
        in_block = list(parts.state.backward_block)
    else:
        in_block = gathered
    # Under layer SAC most blocks keep their tensors, autocast copies included: as unchecked.
    whole_blocks = plan.checkpoint_policy not in (CheckpointPolicy.LAYER, CheckpointPolicy.ATTENTION)
    recomputes_all = plan.checkpointing and whole_blocks
    # Checkpointed blocks keep nothing from the forward, so their autocast copies die with
    # the autocast cache when the forward ends; only the head's copy stays, and the block
    # being recomputed makes its own.
    held = parts.weights if recomputes_all else parts.weights + parts.copies
    if not parts.casts:
        return _BackwardWeights(
            make_bucket(BucketKey.WEIGHTS, held + gathered), make_bucket(BucketKey.WEIGHTS, held + in_block), None
        )
    per_layer = model.stored_matmul_params() // model.num_layers / parts.tp
    copy = Term("16-bit copies of one block's weights (autocast)", f"{sci(per_layer)} × 2 B", per_layer * 2)
    if recomputes_all:
        # The head's copy lives from the forward (the head is not checkpointed); a block's copies are made by its
        # recompute, so the backward's start, the loss's and the head's backward, has none yet (measured: the
        # checkpointed bf16-autocast frozen-layer step, re-measured with the fixed tool by branch h78remeas).
        vd = model.vocab_size * model.hidden_size / parts.tp if parts.head else 0
        head = Term("16-bit copy of the output head (autocast)", f"V·d × 2 = {sci(vd)} × 2 B", vd * 2)
        recomputed = Term("16-bit copies of the recomputed block", f"{sci(per_layer)} × 2 B", per_layer * 2)
        return _BackwardWeights(
            make_bucket(BucketKey.WEIGHTS, [*parts.weights, head, *gathered]),
            make_bucket(BucketKey.WEIGHTS, [*parts.weights, head, recomputed, *in_block]),
            copy,
        )
    return _BackwardWeights(
        make_bucket(BucketKey.WEIGHTS, held + gathered), make_bucket(BucketKey.WEIGHTS, held + in_block), copy
    )


def backward_phases(plan: Plan, parts: _Parts, dt: Dtypes) -> list[Phase]:
    """Start of the backward, the last block's backward, and its end (first block, embedding)."""
    weights = _backward_weights(plan, parts)
    optim = parts.optim_bucket
    buffers = parts.extra("persistent") + parts.extra("backward_grads")
    held = _held_gradients(plan, parts)
    head_formed = formed_gradients(plan, dt, head=True)  # a modules_to_save head copy's, under accumulation
    start = Phase(
        "backward",
        (
            weights.start,
            make_bucket(BucketKey.GRADIENTS, list(held.terms) + head_formed) if head_formed else held,
            optim,
            make_bucket(BucketKey.ACTIVATIONS, [*parts.kept, *parts.outside, *parts.loss.backward, *parts.loss.held]),
        ),
        "start of the backward pass: activations still held, the loss gradient being formed",
        StepPhase.BACKWARD_START,
    )
    accumulating = plan.workload.grad_accum > 1
    last_block = Phase(
        "backward",
        (
            weights.in_block,
            make_bucket(
                BucketKey.GRADIENTS,
                _step_in_backward(plan, parts) + buffers
                if plan.optimizer_in_backward
                else (parts.backward_grads + parts.root_grads if accumulating else parts.head_grad) + buffers,
            ),
            optim,
            make_bucket(
                BucketKey.ACTIVATIONS,
                parts.kept + parts.outside + parts.recomputed + [parts.layer_grads, *parts.loss.held],
            ),
        ),
        "backward through the last block: its activations (recomputed with checkpointing) and gradients",
        StepPhase.BACKWARD_BLOCK,
    )
    if plan.optimizer_in_backward:
        return [start, last_block]
    # A hybrid's first layer reduces its own gradients by its layer order (core.parallel.state._block_moments).
    end_grads = None if parts.state is None else parts.state.backward_end_grads
    if end_grads is not None:
        buffers = parts.extra("persistent") + list(end_grads)
    first = _first_block_backward(parts, weights.first_block_copy, optim, buffers)
    embedding = _embedding_gradient_formed(plan, parts, dt, optim, buffers)
    ends = (first, embedding, *_root_assembled(plan, parts, optim))
    return [start, last_block, max(ends, key=PHASE_BYTES), *_dora_recomputed(plan, parts, weights, optim, buffers)]


def _dora_recomputed(
    plan: Plan, parts: _Parts, weights: _BackwardWeights, optim: Bucket, buffers: list[Term]
) -> list[Phase]:
    """Full checkpointing recomputes each block's forward in the backward, DoRA's one-layer transient with it
    (core.training.activations.dora_forward_transient): highest at the first block, recomputed last, when every
    other gradient exists and only that block's input is still kept (measured: tools/measure, Llama 3.2 1B
    all-linear DoRA, checkpointed, 1 × 256: step 2's backward peak in layer 0's recompute, with 15 of the 16
    blocks' adapter gradients). Op SAC may save B·A's matmuls (not measured): left out."""
    if not (plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.FULL) or parts.tp != 1:
        return []
    dora = dora_forward_transient(plan, head=False)
    if dora is None or not parts.recomputed:
        return []
    nd = plan.workload.micro_batch * plan.workload.seq_len * plan.model.hidden_size
    res = dtypes_for(plan).residual
    block_input = Term("the first block's input, kept by checkpointing", f"N·d × {res:g}", nd * res)
    return [
        Phase(
            "backward",
            (
                weights.in_block,
                make_bucket(BucketKey.GRADIENTS, [*parts.backward_grads, *buffers]),
                optim,
                make_bucket(BucketKey.ACTIVATIONS, [block_input, *parts.recomputed, dora, *parts.loss.held]),
            ),
            "recomputing the first block in the backward: every other gradient, one DoRA layer's B·A built",
            StepPhase.BACKWARD_BLOCK,
        )
    ]


def _root_assembled(plan: Plan, parts: _Parts, optim: Bucket) -> tuple[Phase, ...]:
    """FSDP1's root unit at the very end of the backward, its flat gradient assembled from its views'
    (core.parallel.state._fsdp1_root_assembly), the root still gathered: beside the gradients the
    backward accumulates into (less the root's shard, not reduced yet), the views' gradients (the
    head's among them: not counted again) and their concatenation. Under no_sync the micro-batches
    that hold the most (every unit's unsharded gradient) reduce nothing: FSDP1's ``_post_backward_hook``
    returns before any reduce-scatter (``if not state._sync_gradients``), so no block's reduction
    buffers are held beside it; the last micro-batch, which reduces, holds the blocks' shards instead,
    less. Empty under FSDP2."""
    assembled = parts.extra("root_assembled")
    if not assembled:
        return ()
    reducing = [] if fsdp_no_sync(plan.parallel, plan.workload.grad_accum) else parts.extra("backward_grads")
    gradients = [*parts.backward_grads, *parts.extra("root_pending"), *assembled]
    gradients += parts.extra("persistent") + reducing
    return (
        Phase(
            "backward",
            (
                make_bucket(BucketKey.WEIGHTS, parts.weights + parts.gathered_off_turn("backward")),
                make_bucket(BucketKey.GRADIENTS, gradients),
                optim,
                parts.loss_held_bucket,
            ),
            "end of the backward pass: FSDP1's root unit assembles its flat gradient (split_with_sizes backward)",
            StepPhase.BACKWARD_END,
        ),
    )


def _first_block_backward(parts: _Parts, copy: Term | None, optim: Bucket, buffers: list[Term]) -> Phase:
    """The end of the backward. While the first trainable block runs its backward every other
    gradient exists and the block's own tensors are still held; the embedding gradient is
    formed last."""
    held = parts.weights + ([copy] if copy else [])
    weights = make_bucket(BucketKey.WEIGHTS, held + parts.gathered_off_turn("backward"))
    first_block = make_bucket(
        BucketKey.ACTIVATIONS,
        [
            Term("the first block's saved tensors", "Σ of one block", parts.block.bytes),
            parts.layer_grads,
            *parts.loss.held,
        ],
    )
    held = [*parts.backward_grads, *parts.root_grads, *parts.extra("root_pending")]
    # Never more than the gradients held: where they live outside whole .grad tensors (DeepSpeed's
    # buckets on one GPU) the embedding's is not among them (the GUI monkey found a negative
    # gradients bucket: ZeRO-3 on one GPU, 40 frozen layers).
    embedding = min(parts.embed_grad, max(0.0, sum(t.bytes for t in held)))
    before_embedding = [
        *held,
        Term("less the embedding gradient, formed last", "−V·d", -embedding),
        *buffers,
    ]
    return Phase(
        "backward",
        (weights, make_bucket(BucketKey.GRADIENTS, before_embedding), optim, first_block),
        "end of the backward pass: every other gradient formed, the first block's tensors still held",
        StepPhase.BACKWARD_END,
    )


def _embedding_gradient_formed(plan: Plan, parts: _Parts, dt: Dtypes, optim: Bucket, buffers: list[Term]) -> Phase:
    """The very end of the backward: the embedding's gradient formed (a tied embedding is also
    the output head, whose gradient already exists: AccumulateGrad adds the two out of place,
    so three V·d gradients coexist for a moment), or under FSDP2 the root unit, resharded,
    reducing its gradients last."""
    model = plan.model
    held = parts.loss_held_bucket
    root_reduce = parts.extra("root_reduce")
    if root_reduce:
        gradients = parts.backward_grads + parts.extra("root_pending") + root_reduce + parts.extra("persistent")
        return Phase(
            "backward",
            (
                make_bucket(BucketKey.WEIGHTS, parts.weights),
                make_bucket(BucketKey.GRADIENTS, gradients),
                optim,
                held,
            ),
            "end of the backward pass: the root unit's gradients reduced"
            if parts.state is None or parts.state.backward_end is None
            else "end of the backward pass: the embedding unit's gradients reduced (its unit is reduced last)",
            StepPhase.BACKWARD_END,
        )
    tied_extra = formed_gradients(plan, dt, head=False)  # a modules_to_save embedding copy's, under accumulation
    if parts.embed_grad and model.tie_embeddings:
        tied_vd = model.vocab_size * model.hidden_size * dt.grad / parts.tp
        tied_extra += [Term("tied embedding: head and embedding gradients summed out of place", "2 × V·d", 2 * tied_vd)]
    return Phase(
        "backward",
        (
            make_bucket(BucketKey.WEIGHTS, parts.weights + parts.gathered_off_turn("backward")),
            make_bucket(BucketKey.GRADIENTS, parts.backward_grads + parts.root_grads + tied_extra + buffers),
            optim,
            held,
        ),
        "end of the backward pass: the embedding gradient formed",
        StepPhase.BACKWARD_END,
    )


def optimizer_phase(plan: Plan, counts: ParamCounts, parts: _Parts, dt: Dtypes) -> Phase:
    if plan.optimizer_in_backward:
        return Phase(
            "optimizer step",
            (
                make_bucket(BucketKey.WEIGHTS, parts.weights),
                make_bucket(BucketKey.GRADIENTS, parts.extra("persistent")),
                make_bucket(BucketKey.OPTIMIZER, parts.optim + parts.extra("step")),
                parts.loss_held_bucket,
            ),
            "no step of its own: each parameter was updated in the backward as its gradient formed",
            StepPhase.OPTIMIZER,
        )
    # The copies PEFT's modules_to_save trains step in the same foreach lists (core.training.optimizer).
    beside = [(t.elements, t.bytes) for t in trained_tensors(plan, dt)]
    temp = optimizer_step_temporary(plan, counts, dt, beside)
    if temp and parts.state is not None:
        temp = (
            Term(temp.label, temp.formula, temp.bytes * parts.state.step_share) if parts.state.step_temporary else None
        )
    return Phase(
        "optimizer step",
        (
            make_bucket(BucketKey.WEIGHTS, parts.weights),
            make_bucket(BucketKey.GRADIENTS, parts.grads + parts.extra("persistent")),
            make_bucket(
                BucketKey.OPTIMIZER, parts.optim + ([temp] if temp else []) + clip_terms(plan) + parts.extra("step")
            ),
            parts.loss_held_bucket,
        ),
        "optimizer step: every gradient, the state, and the step's temporaries",
        StepPhase.OPTIMIZER,
    )


def evaluation_phase(plan: Plan, parts: _Parts, rank: Rank | None) -> Phase:
    """An evaluation forward under ``no_grad`` with the eval batch, between steps: the weights
    and the optimizer state stay; only one block's tensors and the logits with their loss are
    alive at a time, cut per rank as the step's are (TP / CP / the vocabulary split, the loss on
    the last pipeline stage only)."""
    batch = plan.workload.eval_batch or plan.workload.micro_batch
    eval_plan = plan if batch == plan.workload.micro_batch else plan.with_workload(micro_batch=batch)
    ap = compute_plan(eval_plan)
    block = layer_activations(ap, trainable_block=True)
    loss = list(loss_memory(ap, rank is not None and loss_parallel(plan, rank.layout)).forward)
    if rank is not None:
        block = block_per_rank(block, rank.layout, keeps_gathered_inputs(plan))
        v_div, v_why = vocab_region(rank.layout)
        loss = split(loss, v_div, v_why) if rank.stage.head else []
    one_block = Term(f"one block's tensors at a time (batch {batch})", "Σ of one block's tensors", block.bytes)
    return Phase(
        "evaluation forward",
        (
            make_bucket(BucketKey.WEIGHTS, parts.weights + parts.copies + parts.gathered_off_turn("forward")),
            parts.optim_bucket,
            make_bucket(BucketKey.ACTIVATIONS, [one_block, *loss]),
        ),
        "an evaluation forward between steps: the state stays, nothing is kept for a backward",
        StepPhase.EVALUATION,
    )


def _paged_per_gpu(plan: Plan, state: RankState | None) -> float:
    """The paged optimizer state one GPU holds: the rank's share of it, divided as its optimizer-state bucket is
    (RankState.optimizer_share: ÷ DP under FSDP and ZeRO); none when that state is on the host (offload)."""
    if plan.optimizer not in PAGED:
        return 0.0
    whole = paged_state_bytes(plan, param_counts(plan))
    if state is None:
        return whole
    if not state.optim and state.host:  # offloaded: the host bucket holds it, no GPU pages
        return 0.0
    return whole * state.optimizer_share


def _notes(plan: Plan, state: RankState | None) -> tuple[str, ...]:
    notes = []
    paged = _paged_per_gpu(plan, state)
    if paged:
        notes.append(
            f"Paged optimizer: {gb(paged)} GB per GPU of its state lives in CUDA managed memory (bitsandbytes "
            "get_paged: cudaMallocManaged), outside PyTorch's allocator and outside these figures; the driver pages it "
            "to host memory when the card is full, so it slows a tight run rather than stopping it."
        )
    if runs_grad_scaler(plan):
        notes.append(
            "fp16 autocast runs with a GradScaler: it unscales and checks the gradients in place "
            "(torch._amp_foreach_non_finite_check_and_unscale_), no gradient-sized temporary."
        )
        if not plan.adapter_based and plan.weight_dtype is Dtype.FP16:
            notes.append("GradScaler refuses fp16 gradients: keep float32 weights (fp16 AMP) for fp16 autocast.")
    note = kernel_note(plan)
    if note:
        notes.append(note)
    trained = extra_trained_note(plan, dtypes_for(plan))
    if trained:
        notes.append(trained)
    return tuple(notes)


def training_breakdown(plan: Plan, counts: ParamCounts, rank: Rank | None = None) -> Breakdown:
    """The step's phases on one GPU, or on one rank of a multi-GPU plan (``rank``)."""
    dt = dtypes_for(plan)
    parts = _parts(plan, counts, dt, rank)
    sub_phases = backward_phases(plan, parts, dt)
    backward = max(sub_phases, key=PHASE_BYTES)
    phases = (forward_phase(plan, parts), backward, optimizer_phase(plan, counts, parts, dt))
    peak_phase = max(phases, key=PHASE_BYTES)
    peak = peak_phase.allocated_bytes
    gradients_cached, reserved_note = _gradients_cached(parts, (phases[0], *sub_phases, phases[2]), peak_phase)
    notes = _notes(plan, parts.state) + (parts.state.notes if parts.state is not None else ()) + reserved_note
    where = (rank.stage.layers, rank.stage.embedding, rank.stage.head) if rank is not None else None
    cached = parts.extra("stream_cache") + gradients_cached
    card = card_terms(plan, phases, cached, where, parts.extra("wrap_cache"))
    # The libraries' workspaces sit in the allocated peak beside the phase's tensors (none on an Apple GPU).
    workspaces = f" + {gb(card.workspace_bytes)} (workspaces)" if card.workspace_bytes else ""
    summary = (
        " + ".join(gb(b.bytes) for b in peak_phase.buckets)
        + f"{workspaces} = {gb(peak + card.workspace_bytes)} GB at the {peak_phase.name}"
    )
    overhead = card.bucket()
    # The evaluation runs between steps, inside what the steps made the allocator reserve:
    # the step's overhead stays on top of it.
    return Breakdown(
        phases=phases,
        overhead=overhead,
        summary_formula=summary,
        notes=notes,
        _evaluation_of=partial(evaluation_phase, plan, parts, rank),  # only the diagnosis reads it
        evaluation_overhead=overhead,
        reserve_bytes=card.reserve_bytes,
        workspace_bytes=card.workspace_bytes,
        fragmentation_basis=card.basis,
        fragmentation=card.fragmentation,
        wrap_cache_bytes=card.wrap_cache,
    )


# The reserve's term for the last step's sharded gradients the reduce-scatter stream keeps (a label's start).
LAST_STEP_CACHE: Final = "reduce-scatter stream's cache: the last step's sharded gradients"


def _cached_at(parts: _Parts, phase: Phase) -> float:
    """FSDP2's sharded gradients the reduce-scatter stream keeps cached at ``phase``: those not alive there.
    ``foreach_reduce`` allocates the reduce-scatter output, which each sharded gradient is a view of, in the
    reduce-scatter stream ("Since the GPU sharded gradient is allocated in the RS stream", pytorch/pytorch
    8fc2039 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py; the same allocation at 415cc26,
    torch/distributed/_composable/fsdp/, December 2024). The step's zero_grad frees them, and the caching
    allocator gives a freed block back to the stream that allocated it only (c10/cuda/CUDACachingAllocator.cpp
    at 001074d, ``get_free_block`` matches the stream), so the next forward and backward, on the default
    stream, cannot use their segments: wherever they are not alive they are reserved on top of the allocated
    tensors."""
    state = parts.state
    if state is None or not state.grads_on_reduce_stream:
        return 0.0
    return max(0.0, sum(t.bytes for t in state.grads) - phase.bucket(BucketKey.GRADIENTS).bytes)


def _gradients_cached(parts: _Parts, moments: Sequence[Phase], peak: Phase) -> tuple[list[Term], tuple[str, ...]]:
    """What the reduce-scatter stream's cache (:func:`_cached_at`) adds to the reserved peak, and a note when the
    reserved peak is another moment of the step than the allocated one. max_memory_reserved is the largest
    of (allocated + cached) over the step's moments (``moments``: the forward, every sub-phase of the
    backward, the optimizer step), not the cache at the allocated peak: at the backward's end the gradients
    are alive and nothing is cached, but at the loss's backward the last step's sharded gradients sit cached
    beside nearly as many allocated bytes (torchtitan PR #1690's Qwen3 32B on one host, 81.47 GiB reserved:
    docs/REAL_GPU_MEMORY.md "torchtitan's pull-request logs, held out"). The other reserve terms (segment
    rounding, fragmentation of the step's largest activations, the other streams' caches) are the same at
    every moment, so this one term sets which moment it is."""
    at = max(moments, key=lambda p: p.allocated_bytes + _cached_at(parts, p))
    cached = _cached_at(parts, at)
    added = at.allocated_bytes + cached - peak.allocated_bytes
    if added <= 0:
        return [], ()
    sharded = cached + at.bucket(BucketKey.GRADIENTS).bytes
    if at is peak:
        formula = f"{gb(sharded)} GB sharded gradients − {gb(sharded - cached)} GB alive at the {peak.name}"
        return [Term(LAST_STEP_CACHE, formula, cached)], ()
    where, peak_where = _moment(at), _moment(peak)
    formula = (
        f"{gb(cached)} GB cached + {gb(at.allocated_bytes)} GB allocated at the {where} − "
        f"{gb(peak.allocated_bytes)} GB at the allocated peak ({peak_where})"
    )
    label = f"{LAST_STEP_CACHE}, at the reserved peak"
    note = (
        f"The reserved peak is at the {where}, not at the allocated peak ({peak_where}): "
        f"{gb(at.allocated_bytes)} GB allocated + {gb(cached)} GB of the last step's sharded gradients, "
        "which the reduce-scatter stream keeps cached."
    )
    return [Term(label, formula, added)], (note,)


def _moment(phase: Phase) -> str:
    """A phase's moment in a few words: its description up to the colon ("end of the forward pass")."""
    return phase.description.split(":")[0] if phase.description else phase.name


def _optimizer_at(plan: Plan, counts: ParamCounts) -> Callable[[Dtypes], list[Term]]:
    """The single-GPU optimizer state at the dtypes a sharded rank steps in (``dt.grad``): PEFT's trained copies
    (core.training.extra_trained) at that dtype too, as DeepSpeed's flat master partition holds them."""
    return lambda dt: optimizer_terms(plan, counts, dt) + extra_state_terms(plan, dt, at=dt.grad)


def host_terms(plan: Plan, counts: ParamCounts, rank: Rank) -> list[Term]:
    """What one rank keeps in host memory instead of on its GPU (offload)."""
    if plan.parallel.offload is Offload.NONE:
        return _unsloth_host(plan, rank)
    dt = dtypes_for(plan)
    single = (
        weight_terms(plan, counts, dt) + extra_weight_terms(plan, dt),
        gradient_terms(counts, dt) + extra_grad_terms(plan, dt),
        optimizer_terms(plan, counts, dt) + extra_state_terms(plan, dt),
    )
    state = rank_state(plan, counts, dt, rank.layout, rank.stage, single, _optimizer_at(plan, counts))
    return list(state.host) + _unsloth_host(plan, rank)


def _unsloth_host(plan: Plan, rank: Rank) -> list[Term]:
    """The pinned host buffers of Unsloth's checkpointing: one per block (unsloth-zoo ce232d6,
    ``CPU_BUFFERS``, grown to the block input and never shrunk during training; the first step
    offloads every block's input, the last one's included)."""
    if not unsloth_offloads(plan):
        return []
    w, res = plan.workload, dtypes_for(plan).residual
    layers = rank.stage.layers
    one = w.micro_batch * w.seq_len * plan.model.hidden_size * res
    return [Term("block inputs offloaded by Unsloth checkpointing", f"L × N·d × {res:g}", layers * one)]
