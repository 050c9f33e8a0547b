"""What one data-parallel rank holds of the model state, per framework.

The single-GPU terms of :mod:`core.training.detailed` (weights, gradients, optimizer state) are
first cut to the rank's share of the model (tensor- and pipeline-parallel split, see
:mod:`core.parallel.layout`), then held the way the strategy holds them, with the buffers
the framework adds in the phases it adds them. Sources, read for this model:

- DDP: torch 2.13 ``torch/nn/parallel/distributed.py`` and ``torch/csrc/distributed/c10d/
  reducer.cpp`` (``Reducer::initialize_buckets``: one flat ``at::empty`` per bucket,
  sized to its parameters, in the parameters' dtype, made at construction; with the
  default ``gradient_as_bucket_view=False`` ``param.grad`` stays a tensor of its own and
  ``mark_variable_ready_dense`` copies it into the bucket view, ``finalize_bucket_dense``
  copies the averaged bucket back). So the buckets are a second copy of every trainable
  gradient, alive for the whole run; ``bucket_cap_mb`` (25, first bucket 1 MiB,
  ``dist._DEFAULT_FIRST_BUCKET_BYTES``) sets how many buckets, not their total.
- FSDP2 ``fully_shard``: pytorch/pytorch ``torch/distributed/fsdp/_fully_shard/``
  (commit 010ae4a8, torch 2.13): ``_fsdp_param.py`` keeps the sharded parameter (dim-0
  shard, stored dtype) and its sharded gradient; ``_fsdp_collectives.py``
  ``foreach_all_gather`` allocates one flat all-gather output per unit (the input is a
  view into it) in ``MixedPrecisionPolicy.param_dtype`` when set, and
  ``foreach_all_gather_copy_out`` copies it into the unsharded parameters;
  ``foreach_reduce`` copies the unit's unsharded gradients into one flat reduce-scatter
  input in ``reduce_dtype`` and scatters into a 1/dp output added to the sharded
  gradient; ``_fsdp_param_group.py`` prefetches the next unit in forward and backward
  (one all-gather in flight beside the unit computing). ``_fsdp_state.py`` (commit
  01c9f4fc) ``_lazy_init``: "For the root, do not reshard after forward" (its
  ``post_forward_mesh_info`` is None unless the user set it), so the embedding, final norm
  and head stay gathered from the forward to the end of the backward, and the root's
  ``post_backward`` reshards it, then reduces its gradients, last.
- DeepSpeed ZeRO (deepspeedai/DeepSpeed v0.19.6, commit edaa7221): ``stage_1_and_2.py``
  keeps the 16-bit parameters whole (flattened in place), a float32 master partition
  (``single_partition_of_fp32_groups``: a clone even when the model is float32) and the
  optimizer's float32 state of that partition. Both stages allocate an ipg bucket of
  ``reduce_bucket_size`` elements, whole even when fewer parameters train (LoRA),
  under ``contiguous_gradients`` (on by default), at the first
  gradient hook of a backward (two with ``overlap_comm``, off by default below stage 3,
  ``zero/config.py overlap_comm_valid``). Stage 1 lets ``param.grad`` accumulate whole,
  fills and frees the bucket only at the accumulation boundary (so with accumulation it is
  held from the first micro-batch's backward to the last's) and flattens this rank's
  partition at the step; stage 2 copies each gradient into the bucket during every
  backward, frees it at the backward's end and keeps the reduced partition in
  ``grads_in_partition``; at the step the partition is cast to a float32 gradient.
  ``stage3.py`` partitions the 16-bit parameters too, allocates the ipg bucket (whole
  ``reduce_bucket_size``, capped by nothing, in ``__init__``) and the
  gradient partition (``grad_partitions_flat_buffer``) once at start-up, gathers one
  module at a time with up to ``stage3_prefetch_bucket_size`` elements prefetched
  (bounded by ``stage3_max_live_parameters``), and casts each ``sub_group_size`` (1e9)
  group of the gradient partition to float32 for its step.
  ZeRO with bf16 and the default ``grad_accum_dtype`` runs this code for stage 1 too
  (``engine.py _do_optimizer_sanity_check``), so gradients stay in the model's dtype.
- Offload: FSDP2 ``CPUOffloadPolicy`` keeps sharded parameters, gradients and optimizer
  state on the host (the step runs there); DeepSpeed ``offload_optimizer`` moves the
  float32 master, the state and the float32 gradient partition to pinned host memory,
  and the gradients with them: stage 3 allocates ``grad_partitions_flat_buffer`` on the
  CPU (``stage3.py`` lines 328, 742-746), stage 2 copies each reduced gradient into the
  host partition and never makes ``grads_in_partition`` (``stage_1_and_2.py
  copy_grads_in_partition``), keeping only a largest-parameter staging buffer on the GPU;
  ``offload_param`` (stage 3) moves the 16-bit partitions too. One GPU with a ZeRO stage
  or offload is held the same way (see ``core.parallel.layout._engine_on_one_gpu``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from core.breakdown import Term
from core.catalogue import find_gpu
from core.dtypes import DTYPE_BYTES, ELEMENT_BYTES, MP_BYTES, MX_BLOCK, Dtype, MpDtype, nf4_bytes_per_weight
from core.format import sci
from core.inputs import (
    MoeDispatcher,
    deepspeed_bf16_master,
    deepspeed_bf16_states,
    megatron_dispatcher,
    megatron_grad_buffer,
    torch_before,
    zero_overlap_comm,
)
from core.model import GDN_IN_PROJ, ModelSpec
from core.parallel.layout import (
    Layout,
    Stage,
    UnitOrder,
    block_params_per_rank,
    carved_ends,
    float8_recipe,
    fsdp_block_units,
    fsdp_held_through_step,
    fsdp_no_sync,
    fsdp_reduce_bytes,
    fsdp_unit_order,
    megatron_grad_bytes,
    no_sync_grad_bytes,
    outside_params,
    train_share,
    trainable_layers,
    weight_share,
)
from core.params import (
    ParamCounts,
    modules_to_save_elements,
    muon_elements,
    muon_layers,
    quantised_block_params,
)
from core.plan import TE_FLOAT8, Float8, Method, Offload, Optimizer, Plan, Stack, Strategy, TorchVersion
from core.roles import (
    Dtypes,
    cast_weights_label,
    deepspeed_cast_adapters,
    deepspeed_cast_weights,
    deepspeed_engine_dtype,
    qlora_unquantised_bytes,
    saved_copy_bytes,
    stored_weight_dtype,
)
from core.units import MiB

# The single-GPU optimizer terms at given dtypes (core.training.optimizer.optimizer_terms of
# the plan): a rank under ZeRO re-prices its partition in float32.
OptimizerTerms = Callable[[Dtypes], list[Term]]

# DDP's first bucket: torch.distributed._DEFAULT_FIRST_BUCKET_BYTES (1 MiB, torch 2.13).
DDP_FIRST_BUCKET_BYTES: Final = 1 * MiB
# DeepSpeed keeps its master weights and Adam state in float32 (stage_1_and_2.py
# master_weights_and_grads_dtype, fp32 unless the low-precision option is set).
MASTER_BYTES: Final = 4.0
# DeepSpeed stage 3 steps the optimizer one sub-group at a time (zero/config.py
# sub_group_size, 1e9 elements): one group's float32 gradient exists at once.
ZERO3_SUB_GROUP: Final = 1_000_000_000
# The step's float32 copy of the rank's gradient partition (one sub-group's under stage 3), which DeepSpeed drops
# before step() returns: stage_1_and_2.py step() "Step 4:- get rid of the fp32 gradients"
# (single_partition_of_fp32_groups[i].grad = None) and stage3.py _release_sub_group
# (fp32_partitioned_groups_flat[i].grad = None), microsoft/DeepSpeed 38327e07. Nothing of it is held between steps.
ZERO_STEP_FP32_GRAD: Final = "float32 gradient of the partition (step)"
# Stage 3 builds that float32 copy from a flat 16-bit one: stage3.py _prepare_fp32_grad_for_sub_group runs
# ``self.flatten(self.averaged_gradients[sub_group_id]).to(fp32)``, where ``self.flatten`` is torch's
# _flatten_dense_tensors (a torch.cat of the sub-group's per-parameter gradient partitions, a new tensor in their
# dtype), so both live at once until the float32 one is made (microsoft/DeepSpeed 38327e07). Stage 1 and 2 flatten
# their one contiguous partition (a view, no copy); float32 gradients need no second copy (``.to`` returns self).
ZERO3_STEP_FLAT_GRAD: Final = "flattened 16-bit gradient of the sub-group (step, before its float32 copy)"
# What DeepSpeed's step makes and drops before it returns: nothing of either is held between steps.
ZERO_STEP_TEMPORARIES: Final = (ZERO_STEP_FP32_GRAD, ZERO3_STEP_FLAT_GRAD)
# FSDP2 with a unit per decoder block (torchtitan, accelerate's transformer wrap policy):
# inside a block's backward two are gathered, the one computing and the one prefetched.
GATHERED_UNITS: Final = 2


@dataclass(frozen=True)
class RankState:
    """The model state of one rank, and the buffers its framework adds, by phase."""

    weights: list[Term]
    grads: list[Term]  # the gradients the optimizer step reads (sharded where sharded)
    optim: list[Term]
    grads_in_backward: list[Term] | None = None  # what the backward accumulates into, if not ``grads``
    persistent: list[Term] = field(default_factory=list)  # buffers alive in every phase (gradients bucket)
    forward: list[Term] = field(default_factory=list)  # gathered parameters at the end of the forward (weights)
    backward: list[Term] = field(default_factory=list)  # gathered parameters as the backward starts (weights)
    backward_block: list[Term] | None = None  # gathered while a block runs its backward (None: ``backward``)
    # gathered as the first block runs its backward, where it differs from ``backward`` (None: ``backward``):
    # FSDP2's carved ends (:func:`_carved_gathered`)
    backward_end: list[Term] | None = None
    # ZeRO-3: gathered at the backward's end and in an evaluation forward, where the forward's tail
    # (``forward`` / ``backward``) is not (None: ``backward`` there, ``forward`` in the evaluation)
    off_turn: list[Term] | None = None
    backward_grads: list[Term] = field(default_factory=list)  # reduction buffers in the backward (gradients)
    # the same as the first layer runs its backward, where a hybrid's layer order sets them (None: backward_grads)
    backward_end_grads: list[Term] | None = None
    step: list[Term] = field(default_factory=list)  # extra at the optimizer step (optimizer bucket)
    step_temporary: bool = True  # the torch.optim step temporaries apply (not DeepSpeed's fused step)
    host: list[Term] = field(default_factory=list)  # what the rank keeps in host memory instead
    step_share: float = 1.0  # the rank's fraction of the single-GPU optimizer step (its temporaries)
    # ZeRO's fraction of the single-GPU optimizer state (T ÷ DP, _zero_optimizer_partition), whose fused step has
    # no step_share; None: the step's share (:attr:`optimizer_share`).
    zero_share: float | None = None
    # FSDP2's root unit is reduced last: until then its sharded gradients do not exist
    # (``root_pending``, a negative term) and its unsharded ones wait; at its reduction the
    # rank holds them and the reduce-scatter input, its parameters resharded (``root_reduce``).
    root_pending: list[Term] = field(default_factory=list)
    root_reduce: list[Term] = field(default_factory=list)
    # FSDP1's root unit gets one gradient for its flat parameter, assembled by autograd from its
    # views' gradients at the very end of the backward, the root still gathered (:func:`_fsdp1_root_assembly`).
    root_assembled: list[Term] = field(default_factory=list)
    # What the framework's communication streams keep cached beyond what is allocated at the
    # peak: the caching allocator reuses a block only on the stream that freed it.
    stream_cache: list[Term] = field(default_factory=list)
    # FSDP2 allocates each sharded gradient in the reduce-scatter stream (``foreach_reduce``):
    # freed by the next step's zero_grad, its blocks stay cached for that stream, beside the
    # default stream's next peak (core.training.detailed.training_breakdown).
    grads_on_reduce_stream: bool = False
    # What an FSDP1 wrap from the CPU left cached before the first step (:func:`_fsdp1_wrap_cache`):
    # reserved from the wrap on, whatever the step then does with those blocks.
    wrap_cache: list[Term] = field(default_factory=list)
    notes: tuple[str, ...] = ()

    @property
    def optimizer_share(self) -> float:
        """The rank's fraction of the single-GPU optimizer state, as its optimizer bucket divides it (the share of
        the trainable parameters it holds ÷ the ranks it is sharded over): what a paged optimizer pages per GPU."""
        return self.step_share if self.zero_share is None else self.zero_share


def _scaled(terms: list[Term], share: float, why: str) -> list[Term]:
    if share == 1.0:
        return terms
    return [Term(f"{t.label} ({why})", f"({t.formula}) × {share:.4g}", t.bytes * share) for t in terms]


def _optimizer_share(
    plan: Plan, counts: ParamCounts, stage: Stage, optim: list[Term], t_share: float, why: str
) -> list[Term]:
    """The stage's optimizer state: its share of the trainable parameters', except Muon's (DDP and pipeline stages
    only, Plan._check_muon), whose two groups hold unlike bytes an element: its momentum (one buffer) follows the
    stage's blocks, AdamW's two moments what else trains there (the embedding on the first stage). A stage's share
    of the whole state would give the embedding's stage the blocks' average bytes."""
    if plan.optimizer is not Optimizer.MUON or t_share == 1.0:
        return _scaled(optim, t_share, why)
    muon = min(counts.trainable, muon_elements(plan))
    muon_share = trainable_layers(plan, stage) / max(1, muon_layers(plan))  # every block frozen: no momentum
    rest = counts.trainable - muon
    rest_share = max(0.0, t_share * counts.trainable - muon * muon_share) / rest if rest else 0.0
    shares = {"Muon momentum": muon_share, "AdamW moments of the rest": rest_share}
    out: list[Term] = []
    for term in optim:
        share = next((v for k, v in shares.items() if term.label.startswith(k)), t_share)
        out += _scaled([term], share, why)
    return out


def _sharded(terms: list[Term], dp: float) -> list[Term]:
    return [Term(f"{t.label} ÷ {dp:g} ranks", f"({t.formula}) ÷ {dp:g}", t.bytes / dp) for t in terms]


def _total(terms: list[Term]) -> float:
    return float(sum(t.bytes for t in terms))


def _split_label(lay: Layout, stage: Stage) -> str:
    parts = []
    if lay.tensor_parallel > 1:
        parts.append(f"matrices ÷ TP {lay.tensor_parallel}")
    if lay.pipeline_parallel > 1:
        parts.append(f"{stage.layers} of the blocks")
    if lay.expert_parallel > 1:
        parts.append(f"experts ÷ EP {lay.expert_parallel}")
    return ", ".join(parts)


@dataclass(frozen=True)
class _Rank:
    """One rank's share of the single-GPU state, before its strategy holds it."""

    plan: Plan
    counts: ParamCounts
    dt: Dtypes
    lay: Layout
    stage: Stage
    weights: list[Term]
    grads: list[Term]
    optim: list[Term]
    t_share: float  # the rank's fraction of the trainable parameters
    optimizer_at: OptimizerTerms  # the single-GPU optimizer state at other dtypes
    # Every decoder layer's parameters on the rank where its layers differ (a hybrid: layout.fsdp_block_units);
    # None: the stage's layers times one block.
    blocks: float | None = None
    largest_block: float = 0.0  # the largest decoder-layer unit's parameters, set with ``blocks``
    order: UnitOrder | None = None  # a hybrid's units by layer order (layout.fsdp_unit_order); None: all alike

    def all_blocks(self, block: float) -> float:
        """The stage's decoder layers' parameters: ``blocks`` where they differ, else its layers × ``block``."""
        return self.stage.layers * block if self.blocks is None else self.blocks

    @property
    def trainable(self) -> float:
        return self.counts.trainable * self.t_share

    @property
    def dp(self) -> float:
        """Ranks the trainable state is replicated on, or sharded over (data × context parallel)."""
        return self._shards_of(train_share)

    @property
    def weight_dp(self) -> float:
        """The same divisor for the rank's stored weights (``dp`` for full training)."""
        return self._shards_of(weight_share)

    def _shards_of(self, share: Callable[..., float]) -> float:
        """One divisor of the rank's ``share`` (train_share or weight_share): with expert
        parallel the dense part is sharded over DP · CP and the rank's experts over
        DP · CP ÷ EP (Layout.state_shards_of); without, DP · CP."""
        if self.lay.expert_parallel == 1:
            return self.lay.state_shards
        plan, stage, tp = self.plan, self.stage, self.lay.tensor_parallel
        return self.lay.state_shards_of(share(plan, stage, tp), share(plan, stage, tp, experts_split=False))

    @property
    def copies(self) -> float:
        """Elements of PEFT's modules_to_save copies on the rank (core.params.modules_to_save_elements): whole,
        as Plan._check_modules_to_save allows them only without TP, PP, CP or EP."""
        return float(modules_to_save_elements(self.plan))

    @property
    def copy_bytes(self) -> float:
        """Bytes per element of a modules_to_save copy as stored (core.roles.saved_copy_bytes)."""
        return saved_copy_bytes(self.plan, self.dt.base)

    @property
    def stored_bytes(self) -> float:
        """Average bytes per stored parameter of the model on the rank (quantised bases included); PEFT's
        trained copies, which ``counts.total`` does not count, are left out of it (priced on their own). An
        image-text checkpoint's frozen vision tower (core.training.storage.vision_weight_term) is among the
        weights and its parameters among the stored ones."""
        share = weight_share(self.plan, self.stage, self.lay.tensor_parallel)
        model_bytes = _total(self.weights) - self.copies * self.copy_bytes * share
        return model_bytes / max(1.0, (self.counts.total + self.plan.model.vision_params) * share)


def rank_state(
    plan: Plan,
    counts: ParamCounts,
    dt: Dtypes,
    lay: Layout,
    stage: Stage,
    single: tuple[list[Term], list[Term], list[Term]],
    optimizer_at: OptimizerTerms,
) -> RankState:
    """The rank's state from the single-GPU ``(weights, gradients, optimizer)`` terms;
    ``optimizer_at`` gives the optimizer's terms at other dtypes (ZeRO keeps them in float32)."""
    weights, grads, optim = single
    why = _split_label(lay, stage)
    w_share = weight_share(plan, stage, lay.tensor_parallel)
    t_share = train_share(plan, stage, lay.tensor_parallel)
    weights = _scaled(weights, w_share, why)
    grads = _scaled(grads, t_share, why)
    optim = _optimizer_share(plan, counts, stage, optim, t_share, why)
    rank = _Rank(plan, counts, dt, lay, stage, weights, grads, optim, t_share, optimizer_at)
    return _strategy_state(rank)


# Transformer Engine's cached fp8 weights: each linear's fp8 copy and its transpose (Float8Tensor: 1 + 1
# byte an element, TE v2.12 pytorch/tensor/float8_tensor.py Float8Quantizer.make_empty allocates
# data_transpose when the weight is used columnwise, which a training linear asks: module/linear.py
# ``columnwise_usage = is_grad_enabled and inp.requires_grad``); MXFP8 keeps a rowwise and a columnwise
# copy, each with one E8M0 scale a 32-element block (tensor/mxfp8_tensor.py).
TE_WEIGHT_CACHE_BYTES: Final = 2.0
TE_MXFP8_WEIGHT_CACHE_BYTES: Final = 2.0 + 2 / MX_BLOCK


def te_weight_cache(plan: Plan, lay: Layout | None, stage: Stage | None) -> list[Term]:
    """The fp8 weights Transformer Engine keeps from a step's first micro-batch on: under Megatron-Core
    its linears pass ``is_first_microbatch`` (NVIDIA/Megatron-LM d98e8a64 megatron/core/extensions/
    transformer_engine.py ``TELinear.forward``), and TE casts each weight into a workspace it caches in
    the module (TE v2.12 module/linear.py ``get_weight_workspace(cache_name="weight")``; module/base.py
    keeps it in ``_fp8_workspaces``, refreshed in place on each step's first micro-batch): alive in every
    phase (with the weights). None without TE's fp8 linears under Megatron, or on a card without fp8 (the
    plan runs 16-bit). ``lay`` and ``stage`` None: one GPU."""
    if plan.stack is not Stack.MEGATRON or plan.float8 not in TE_FLOAT8:
        return []
    if not find_gpu(plan.hardware.gpu).tflops_dense.get("fp8"):
        return []
    model = plan.model
    tp = lay.tensor_parallel if lay is not None else 1
    ep = lay.expert_parallel if lay is not None and model.num_experts > 1 else 1
    layers = stage.layers if stage is not None else model.num_layers
    d, i = model.hidden_size, model.intermediate_size
    dense = 2 * d * model.q_width + 2 * d * model.kv_width + 3 * d * model.shared_expert_size
    experts = (3 if model.gated_mlp else 2) * d * i * model.num_experts
    elements = layers * (dense / tp + experts / (tp * ep))
    mx = float8_recipe(plan.float8, plan.hardware.gpu) is Float8.TE_MXFP8
    per = TE_MXFP8_WEIGHT_CACHE_BYTES if mx else TE_WEIGHT_CACHE_BYTES
    how = "an MXFP8 rowwise and columnwise copy" if mx else "an fp8 copy and its transpose"
    return [
        Term(
            f"Transformer Engine's cached fp8 weights ({how}, kept for the step: Megatron-Core's is_first_microbatch)",
            f"{sci(elements)} linear weights × {per:.4g} B",
            elements * per,
        )
    ]


def _strategy_state(rank: _Rank) -> RankState:
    plan, lay = rank.plan, rank.lay
    weights, grads, optim, t_share = rank.weights, rank.grads, rank.optim, rank.t_share
    strategy = plan.parallel.strategy
    if megatron_grad_buffer(plan) and strategy is Strategy.DDP:
        return _expert_note(rank, _offloaded(plan, _megatron(rank)))
    if megatron_grad_buffer(plan) and plan.parallel.offload is Offload.NONE:  # CPU offload: as DeepSpeed's, below
        return _expert_note(rank, _megatron(rank))
    if lay.state_shards == 1 and strategy is Strategy.DDP:
        return _offloaded(plan, RankState(weights, grads, optim, step_share=t_share))
    if strategy is Strategy.DDP:
        return _offloaded(plan, replace(_ddp(rank), step_share=t_share))
    if strategy is Strategy.FSDP:
        return _expert_note(rank, replace(_fsdp(rank), step_share=t_share / rank.dp))
    return _expert_note(rank, replace(_zero(_zero_with_copies(rank)), zero_share=t_share / rank.dp))


def _zero_with_copies(rank: _Rank) -> _Rank:
    """PEFT's modules_to_save copies under DeepSpeed ZeRO: trainable parameters like the adapters, so T counts
    them. DeepSpeed holds every trainable parameter of an optimizer group alike (deepspeedai/DeepSpeed edaa7221:
    stage_1_and_2.py flattens each group's ``bit16_groups`` into one tensor, partitions it over the ranks and
    clones a float32 master of this rank's partition; stage3.py partitions each parameter at ``zero.Init`` or
    ``_convert_to_deepspeed_param``): the copies' 16-bit weights whole on every rank below stage 3 (with the
    rank's weights, as the frozen originals), their gradients and master / state in the rank's partition.
    Their single-GPU state terms are re-priced at the master dtype by the ``optimizer_at`` of the plan
    (core.training.detailed._optimizer_at)."""
    if not rank.copies:
        return rank
    counts = replace(rank.counts, trainable=rank.counts.trainable + round(rank.copies))
    return replace(rank, counts=counts)


def _expert_note(rank: _Rank, state: RankState) -> RankState:
    """Why a sharded term of an expert-parallel rank divides by a fraction of ranks."""
    lay = rank.lay
    if lay.expert_parallel == 1:
        return state
    shards, ep = lay.state_shards, lay.expert_parallel
    whole = rank.counts.trainable * train_share(rank.plan, rank.stage, lay.tensor_parallel, experts_split=False)
    note = (
        f"Expert parallel {ep}: each rank holds 1/{ep} of the experts; the dense state is sharded over "
        f"DP × CP = {shards} ranks and the rank's experts over DP × CP ÷ EP = {shards // ep} "
        f"(Megatron-Core's expert-data-parallel group). Both come to the rank's share with every expert "
        f"÷ DP × CP: {sci(whole)} ÷ {shards} = {sci(whole / shards)}, which the formulas write as one divisor "
        f"of the rank's share T = {sci(rank.trainable)}: T ÷ {rank.dp:g}."
    )
    return replace(state, notes=(*state.notes, note))


# --- DDP -----------------------------------------------------------------------------
def _ddp(rank: _Rank) -> RankState:
    plan, dt, trainable = rank.plan, rank.dt, rank.trainable
    cap = plan.parallel.ddp_bucket_mb * MiB
    g = dt.grad
    size = trainable * g
    formula = f"T × {g:g} B = {sci(trainable)} × {g:g} B"
    if len(rank.grads) > 1:
        # PEFT's modules_to_save copies and trainable tokens (core.training.extra_trained, appended after the
        # trainable parameters' one term): their gradients, in their own dtype, are bucketed like any other.
        extra = _total(rank.grads[1:])
        size += extra
        formula += f" + the copies' gradients {extra / 1e9:.2f} GB"
    n_buckets = 1 + max(0, -(-(size - DDP_FIRST_BUCKET_BYTES) // cap)) if size > DDP_FIRST_BUCKET_BYTES else 1
    if plan.parallel.ddp_bucket_view:
        # gradient_as_bucket_view=True: param.grad is a view into its bucket, so the buckets
        # are the gradients, allocated at construction and never freed (zero_grad with
        # set_to_none cannot release a view's storage).
        buckets = Term(f"gradients as views into the DDP buckets ({n_buckets:.0f} flat buffers)", formula, size)
        return RankState(rank.weights, [], rank.optim, grads_in_backward=[], persistent=[buckets])
    buckets = Term(
        f"DDP gradient buckets ({n_buckets:.0f} flat buffers, a second copy of the gradients)", formula, size
    )
    return RankState(rank.weights, rank.grads, rank.optim, persistent=[buckets])


# --- Megatron-Core's DDP and distributed optimizer --------------------------------------
def _megatron(rank: _Rank) -> RankState:
    """A rank under Megatron-Core's DistributedDataParallel, with its Float16 optimizer (DDP) or
    its distributed optimizer (ZeRO-1), as NVIDIA/Megatron-LM d98e8a64 holds them:

    - megatron/core/distributed/param_and_grad_buffer.py ``_ParamAndGradBuffer``: one gradient
      buffer of every trainable element (``grad_data = torch.zeros(numel, dtype=grad_dtype)``,
      ``grad_dtype`` float32 under grad_reduce_in_fp32, else the parameters' dtype:
      :func:`core.parallel.layout.megatron_grad_bytes`), allocated when the model is wrapped and
      never freed; ``param.main_grad`` is a view into it. Under the distributed optimizer the
      16-bit parameters are remapped into a ``param_data`` buffer (``param.data =
      new_param_data``, the old storage deleted): that buffer is the parameters, not a copy.
    - distributed_data_parallel.py ``_make_backward_post_hook``: ``param.main_grad.add_(
      param.grad.data)`` then ``param.grad = None`` (with gradient_accumulation_fusion Transformer
      Engine writes the weight gradient into main_grad itself): the backward accumulates into
      the buffer and holds no whole gradient set of its own.
    - optimizer/optimizer.py ``Float16OptimizerWithFloat16Params`` (DDP): a float32 main copy of
      every 16-bit parameter (``param.detach().clone().float()``) and ``main_param.grad =
      model_param.main_grad.float()`` at the step; optimizer/distrib_optimizer.py: the rank's
      shard of it (``shard_model_param.clone().float()``; ``shard_main_param.grad =
      shard_model_grad.float()``), a float32 parameter's shard a view (``model_param.view(-1)``).
      ``.float()`` of a float32 buffer is the buffer itself; of a 16-bit one a float32 copy, alive
      from the step to the next train_step's ``optimizer.zero_grad()`` (training/training.py).
    - optimizer/__init__.py: Adam is Transformer Engine's or Apex's FusedAdam, one fused kernel
      per tensor list: none of torch.optim's foreach / for-loop temporaries.
    """
    plan, dt, trainable = rank.plan, rank.dt, rank.trainable
    zero = plan.parallel.strategy is Strategy.ZERO1
    dp = rank.dp if zero else 1.0
    shard = f" ÷ {dp:g}" if zero else ""
    b = megatron_grad_bytes(plan, dt.grad, dt.compute)
    fp32 = DTYPE_BYTES[Dtype.FP32]
    if not trainable:
        return RankState(rank.weights, [], [], grads_in_backward=[], step_temporary=False)
    buffer = Term(
        f"Megatron gradient buffer ({b * 8:g}-bit main_grad, allocated at start-up)",
        f"T × {b:g} B = {sci(trainable)} × {b:g} B",
        trainable * b,
    )
    if dt.grad < fp32:
        # 16-bit parameters: a float32 main copy (÷ DP under the distributed optimizer) and the
        # optimizer's state priced at float32, as the main parameters hold it.
        state32 = _scaled(rank.optimizer_at(replace(dt, grad=fp32)), rank.t_share, _split_label(rank.lay, rank.stage))
        master = Term(
            "float32 main parameters" + (" (the rank's shard)" if zero else ""),
            f"T{shard} × 4 B = {sci(trainable)}{shard} × 4 B",
            trainable * fp32 / dp,
        )
        optim = [master, *(_sharded(state32, dp) if zero else state32)]
    else:
        optim = _sharded(rank.optim, dp) if zero else rank.optim  # float32 parameters are their own main ones
    step = []
    if b < fp32:
        what = "float32 copy of the gradients the step reads (main_grad.float())"
        what += ", the rank's shard" if zero else ""
        step = [Term(what, f"T{shard} × 4 B = {sci(trainable)}{shard} × 4 B", trainable * fp32 / dp)]
    return RankState(
        rank.weights,
        step,
        optim,
        grads_in_backward=[],
        persistent=[buffer, *_megatron_global_buffer(rank)],
        step_temporary=False,
        step_share=rank.t_share / dp,
    )


def _megatron_global_buffer(rank: _Rank) -> list[Term]:
    """Megatron-Core's ``GlobalMemoryBuffer`` (NVIDIA/Megatron-LM d98e8a64, megatron/core/utils.py): one
    tensor per (name, dtype), replaced only by a larger request and never freed, so it holds the largest
    tensor its users asked for under the name "mpu", from the first forward to the end of the process:

    - with sequence parallelism, Megatron's own ColumnParallelLinear all-gathers its input into it
      (tensor_parallel/layers.py ``LinearWithGradAccumulationAndAsyncCommunication``:
      ``get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")``): GPTModel's output layer
      on the stage holding the head (the TE spec's other linears gather inside TE), s·b·h;
    - an MoE layer's token dispatcher where the plan runs ``allgather``, Megatron-Core's default
      (parallel.moe_dispatcher; the alltoall and flex dispatchers do not use the buffer)
      (transformer_config.py ``moe_token_dispatcher_type = "allgather"``; transformer/moe/
      token_dispatcher.py ``MoEAllGatherTokenDispatcher.token_dispatch``:
      ``gather_from_sequence_parallel_region(hidden_states, group=self.tp_ep_group,
      use_global_buffer=True)``) gathers the (s/TP)·b tokens of every rank of the TP × EP group: s·b·EP·h.
    """
    plan, lay = rank.plan, rank.lay
    model, w = plan.model, plan.workload
    tokens = w.seq_len // max(1, lay.context_parallel) * w.micro_batch
    tp, ep = lay.tensor_parallel, lay.expert_parallel
    uses: list[tuple[str, float]] = []
    if tp > 1 and lay.sequence_parallel and rank.stage.head:
        uses.append(("the output layer's gathered input, s·b·h", tokens))
    if megatron_dispatcher(plan) is MoeDispatcher.ALLGATHER:
        uses.append((f"the MoE dispatcher's tokens gathered over TP × EP, s·b·{ep}·h", tokens * ep))
    if not uses:
        return []
    what, rows = max(uses, key=lambda u: u[1])
    c = rank.dt.compute
    return [
        Term(
            f'Megatron\'s global memory buffer ("mpu", kept for the process): {what}',
            f"{sci(rows * model.hidden_size)} × {c:g} B",
            rows * model.hidden_size * c,
        )
    ]


# --- FSDP2 ---------------------------------------------------------------------------
def _block_gradients(rank: _Rank, block: float, gather: float, reduce_b: float) -> list[Term]:
    """One block's unsharded gradients and its reduce-scatter input, in the backward. FSDP2
    reduces only the parameters that have a gradient (``_fsdp_param_group.py`` post_backward:
    ``fsdp_params_with_grad``): under LoRA / DoRA / QLoRA the block's adapters, not the frozen
    base, in the adapters' dtype unless the policy casts them."""
    sizes = _block_grad_sizes(rank, block, gather, reduce_b)
    if sizes is None:
        return []
    elements, grad_b, reduce_b, what = sizes
    return [
        Term(what, f"{sci(elements)} × {grad_b:g} B", elements * grad_b),
        Term("reduce-scatter input (one block)", f"{sci(elements)} × {reduce_b:g} B", elements * reduce_b),
    ]


def _block_grad_sizes(
    rank: _Rank, block: float, gather: float, reduce_b: float
) -> tuple[float, float, float, str] | None:
    """(elements, bytes per unsharded gradient, bytes per reduce-scatter input element, what) of one block's
    reduction (:func:`_block_gradients`); None where nothing trains on the rank."""
    plan, stage = rank.plan, rank.stage
    if rank.trainable <= 0:
        return None
    if plan.adapter_based:
        par = plan.parallel
        grad_b, reduce_b = MP_BYTES.get(par.fsdp_param_dtype, rank.dt.grad), fsdp_reduce_bytes(par, rank.dt.grad)
        return rank.trainable / max(1, stage.layers), grad_b, reduce_b, "one block's adapter gradients"
    return block, gather, reduce_b, "one block's unsharded gradients"


@dataclass(frozen=True)
class _Moment:
    """One point of a hybrid's backward, by layer order (:func:`_block_moments`): the decoder-layer units'
    parameters gathered, the gradient elements formed unsharded, the elements of the reduce-scatter input held."""

    layer: int
    post: bool  # at the layer's post_backward (its unit resharded, its reduce-scatter input made), else inside it
    gathered: float
    grads: float
    reduce: float
    reduce_layer: int  # whose reduce-scatter input is held (the layer after ``layer`` inside it; its own at post)


def _block_moments(
    rank: _Rank, per: float, sizes: tuple[float, float, float, str] | None, resharded: bool
) -> tuple[_Moment, _Moment] | None:
    """(the heaviest point of any block's backward, the heaviest of the first layer's) where a hybrid's units
    differ and their order is known (:class:`core.parallel.layout.UnitOrder`); None: every unit is the largest.
    ``per``: bytes per gathered parameter; ``sizes``: :func:`_block_grad_sizes`; ``resharded``: the units are
    gathered one at a time in the backward (else all are, and only the gradients' points differ).

    torch 2.13.0 ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``, the backward running from the
    last layer to the first: ``pre_backward`` of layer i gathers it and prefetches layer i − 1
    (``_backward_prefetch``; layer 0 prefetches nothing); autograd forms layer i's unsharded gradients while the
    reduce-scatter input of layer i + 1 stays in ``comm_ctx.reduce_scatter_states`` (one buffer,
    ``reduce_scatter_max_input_buffers`` = 1 by default; none while the last layer runs, the list being
    cleared at the previous backward's end, ``_fsdp_state.py`` ``_root_post_backward_final_callback``).
    ``post_backward`` of layer i reshards it, pops layer i + 1's input, and ``foreach_reduce``
    (``_fsdp_collectives.py``) allocates layer i's reduce-scatter input and copies the gradients into it
    before freeing them. So inside layer i: units i and i − 1 gathered, i's gradients, i + 1's input; at its
    post_backward: unit i − 1 gathered, i's gradients and i's input. A dense model's alike units give two
    units, one block's gradients and one input, as before."""
    order = rank.order
    if order is None or not order.units or not rank.largest_block:
        return None
    units = order.units
    n = len(units)
    if sizes is None:
        grads: tuple[float, ...] = (0.0,) * n
        grad_b = reduce_b = 0.0
    else:
        elements, grad_b, reduce_b, _ = sizes
        grads = (elements,) * n if rank.plan.adapter_based else units  # adapters: one block's share each
    gather_b = per if resharded else 0.0  # not resharded: every unit stays gathered, whichever point

    def inside(i: int) -> _Moment:
        after = grads[i + 1] if i + 1 < n else 0.0
        return _Moment(i, False, units[i] + (units[i - 1] if i else 0.0), grads[i], after, i + 1)

    def at_post(i: int) -> _Moment:
        return _Moment(i, True, units[i - 1] if i else 0.0, grads[i], grads[i], i)

    def weight(m: _Moment) -> float:
        return m.gathered * gather_b + m.grads * grad_b + m.reduce * reduce_b

    # Equal points: the earlier layer, reached later in the backward, beside more layers' sharded gradients
    # (measured: benchmarks/parallel/hybrid/measured/hyb-fsdp-qwen35apart-full-bf16-ckpt-w4-b1-s256.json).
    points = [m for i in range(n) for m in (inside(i), at_post(i))]
    return max(points, key=weight), max((inside(0), at_post(0)), key=weight)


def _moment_gradients(moment: _Moment, sizes: tuple[float, float, float, str] | None) -> list[Term]:
    """The gradients and the reduce-scatter input held at ``moment`` (:func:`_block_moments`), labelled as
    :func:`_block_gradients` labels a block's, the layers named in the formula."""
    if sizes is None:
        return []
    _, grad_b, reduce_b, what = sizes
    where = f"layer {moment.layer}" + (", at its post_backward" if moment.post else "")
    terms = [Term(what, f"{sci(moment.grads)} × {grad_b:g} B ({where})", moment.grads * grad_b)]
    if moment.reduce:
        whose = f"layer {moment.reduce_layer}'s, held " + (
            "as it reduces" if moment.post else "until this post_backward"
        )
        formula = f"{sci(moment.reduce)} × {reduce_b:g} B ({whose})"
        terms.append(Term("reduce-scatter input (one block)", formula, moment.reduce * reduce_b))
    return terms


def _reduce_stream_cache(
    rank: _Rank, backward_grads: list[Term], units: tuple[float, float], reduce_b: float
) -> list[Term]:
    """What the gradients' reduction leaves cached for a stream other than the default one,
    beside the sharded gradients themselves (core.training.detailed._gradients_cached).

    FSDP2 allocates the reduce-scatter input on the current (default) stream, before it enters
    the reduce-scatter stream, and hands it back; ``post_backward`` keeps it in
    ``comm_ctx.reduce_scatter_state`` until the next unit's ``post_backward`` (or the backward's
    final callback) makes the default stream wait on the reduce-scatter's event and drops it
    (torch 2.5.0 32f585d, 2.6.0 2236df1, 2.7.0 1341794 and 2.8.0 a1cb3cc, the wheels'
    ``_fsdp_collectives.py`` ``foreach_reduce`` and ``_fsdp_param_group.py`` ``post_backward``;
    pytorch/pytorch 8fc2039 the same). A block freed on the stream that allocated it serves that
    stream again (CUDACachingAllocator.cpp ``get_free_block``): the one input alive while a block
    runs its backward is in the allocated peak (:func:`_block_gradients`), and none stays cached
    apart. (torch 2.4.0, e4ee3be, allocated it inside ``torch.cuda.stream(reduce_scatter_stream)``,
    where it did.) ProcessGroupNCCL records no stream on it either: torchtitan 9dec370 sets
    ``TORCH_NCCL_AVOID_RECORD_STREAMS=1`` (torchtitan/utils.py), which PyTorch made the default
    by April 2025 (torchtitan 681c66f drops the setting, quoting "TORCH_NCCL_AVOID_RECORD_STREAMS
    is the default now"); before that a recorded input could not be reused until its
    reduce-scatter finished, and torch 2.4 allocated it on the reduce-scatter stream: the plan's
    release says which (:func:`_release_cache`).

    Only the reduce-scatter output is allocated in the reduce-scatter stream. It stays there as
    the unit's sharded gradients (views of it), unless it is freed mid-backward: cast to the
    sharded parameters' dtype (``_to_dtype_if_needed`` when ``reduce_dtype`` differs), added to
    an earlier micro-batch's gradient (``sharded_param.grad._local_tensor += new_sharded_grad``),
    or copied to the host under ``CPUOffloadPolicy`` ("Since the GPU sharded gradient is
    allocated in the RS stream, we can free it here by not keeping a ref"); or stepped at once
    under an optimizer in the backward: ``foreach_reduce`` runs the sharded parameters'
    ``_post_accumulate_grad_hooks`` (torch 2.5.0 onwards), and torchtune's hook steps and calls
    ``zero_grad()`` (pytorch/torchtune 0331778, torchtune/training/memory.py
    ``register_optim_in_bwd_hooks``). The next unit's output takes that block again, so the
    stream keeps the largest unit's output (and its cast, when that is freed too).

    FSDP1 (``parallel.fsdp1_wrap``) keeps its term as before: its ``_post_backward_hook`` casts
    the flat gradient to the reduce dtype under the post-backward stream and
    ``_get_reduce_scatter_tensors`` pads it there (torch 2.4.0 ``fsdp/_runtime_utils.py``), or
    records that stream on the autograd gradient (``_no_dispatch_record_stream``)."""
    plan, dt = rank.plan, rank.dt
    if plan.parallel.fsdp1_wrap:
        return [
            Term(f"post-backward stream's cache (FSDP1): {t.label}", t.formula, t.bytes) for t in backward_grads[1:]
        ]
    if rank.trainable <= 0:
        return []
    cast = reduce_b != dt.grad
    accumulated = (
        plan.workload.grad_accum > 1
        and not fsdp_held_through_step(plan.parallel)
        and not fsdp_no_sync(plan.parallel, plan.workload.grad_accum)
    )
    offloaded = plan.parallel.offload is Offload.PARAMS
    stepped = plan.optimizer_in_backward
    if not (cast or accumulated or offloaded or stepped):
        return []
    largest, what = _largest_reduce_output(rank, units)
    per = reduce_b + (dt.grad if cast and (accumulated or offloaded or stepped) else 0.0)
    why = (
        "offloaded to the host"
        if offloaded
        else "stepped in the backward"
        if stepped
        else "added to the accumulated gradient"
        if accumulated
        else "cast"
    )
    how = f"({reduce_b:g} + {dt.grad:g}) B" if per != reduce_b else f"{reduce_b:g} B"
    return [
        Term(
            f"reduce-scatter stream's cache: {what} reduce-scatter output ({why}, then freed)",
            f"{sci(largest)} × {how}",
            largest * per,
        )
    ]


def _largest_reduce_output(rank: _Rank, units: tuple[float, float]) -> tuple[float, str]:
    """(elements, which unit) of the largest reduce-scatter output on the rank: one block's adapters,
    the root unit's shard (a full fine-tune whose root is larger), or one block's."""
    block, root = units
    if rank.plan.adapter_based:
        adapters = rank.trainable / max(1, rank.stage.layers)
        if rank.copies > adapters:  # PEFT's modules_to_save copies, reduced with the root unit
            return rank.copies / rank.dp, "the root unit's copies'"
        return adapters / rank.dp, "one block's adapters'"
    if rank.plan.method is Method.FULL and root / rank.lay.state_shards > block / rank.dp:
        return root / rank.lay.state_shards, "the root unit's"
    return block / rank.dp, "one block's"


def _release_cache(rank: _Rank, block_grads: list[Term], pipelined: bool) -> list[Term]:
    """The reduce-scatter inputs the PyTorch release keeps reserved beside the allocated peak
    (``hardware.torch_version``, ``hardware.nccl_avoid_record_streams``); ``block_grads`` is one
    block's gradients and reduce-scatter input (:func:`_block_gradients`).

    - torch 2.4 (wheel 2.4.0, e4ee3be, ``torch/distributed/_composable/fsdp/_fsdp_collectives.py``
      ``foreach_reduce``) allocates the input inside ``with torch.cuda.stream(reduce_scatter_stream)``
      and drops it when the function returns: its block is cached for that stream, which the
      default stream never takes (CUDACachingAllocator.cpp ``get_free_block`` matches the stream).
    - torch 2.5-2.7 (wheels 2.5.0 32f585d ... 2.7.1 e2d141d, ``foreach_reduce``) allocate it on the
      default stream and free it there (:func:`_reduce_stream_cache`): nothing of its own.
    - Before 2.8, unless ``TORCH_NCCL_AVOID_RECORD_STREAMS=1``, ProcessGroupNCCL records its NCCL
      stream on a collective's input (the 2.4.0 and 2.7.1 wheels' ``ProcessGroupNCCL.hpp``:
      ``avoidRecordStreams_ = false`` unless the variable is set, "If set, ProcessGroupNCCL doesn't
      use recordStream calls"). A block freed with a recorded stream is returned only once that
      stream's event has completed (``free`` -> ``insert_events``), and the CPU that runs ahead
      allocates the next block's input first: one more input-sized block (torchtitan 9dec370
      ``docs/composability.md``: "any allocations made from the CPU for future ops cannot reuse
      that memory ... unexpected memory stacking"). Under 2.4 it is the reduce-scatter stream's
      second block; under 2.5-2.7 a default-stream block, free again once the reduce-scatter
      ends, so a pipelined stage, which reduce-scatters only after its peak backwards
      (:func:`_backward_reduction`), does not hold it at its peak.
    - torch 2.8 (wheel 2.8.0, a1cb3cc, ``ProcessGroupNCCL.hpp`` ``TensorShelf``, ``asyncOp``) stashes
      an asynchronous collective's tensors until ``wait()`` instead and runs a synchronous one on
      the current stream; setting the variable only warns ("TORCH_NCCL_AVOID_RECORD_STREAMS is the
      default now", torchtitan 681c66f drops it): nothing either way.

    FSDP1 (``parallel.fsdp1_wrap``) keeps its own post-backward stream term. Before 2.4 there was no FSDP2
    (core.inputs.TorchVersion): the strategy is FSDP1 there, planned as FSDP2 without these terms."""
    plan = rank.plan
    release, recorded = plan.hardware.torch_version, not plan.hardware.nccl_avoid_record_streams
    recording = torch_before(release, TorchVersion.V2_8) and not torch_before(release, TorchVersion.V2_4)
    if plan.parallel.fsdp1_wrap or not recording:
        return []
    inputs = block_grads[1:]
    if not inputs:
        return []
    one = inputs[0]
    if release is TorchVersion.V2_4:
        terms = [
            Term("reduce-scatter stream's cache: reduce-scatter input (one block, torch 2.4)", one.formula, one.bytes)
        ]
        if recorded:
            terms.append(
                Term(
                    "reduce-scatter stream's cache: the previous block's input, held for its reduce-scatter "
                    "(record_stream, torch 2.4)",
                    one.formula,
                    one.bytes,
                )
            )
        return terms
    if pipelined or not recorded:
        return []
    return [
        Term(
            "default stream's cache: the previous block's reduce-scatter input, held until its reduce-scatter "
            "ends (record_stream, torch 2.5-2.7)",
            one.formula,
            one.bytes,
        )
    ]


def _backward_reduction(
    rank: _Rank, units: tuple[float, float], grads: list[Term], reduce_b: float
) -> tuple[list[Term], list[Term] | None]:
    """One block's gradients and reduce-scatter input in the backward (:func:`_block_gradients`)
    and what a pipelined stage accumulates into (:func:`_pipeline_accumulated`). A pipelined
    stage reduces only after its last micro-batch's backward: before, ``post_backward`` finds
    ``reduce_grads`` off and only accumulates (``_fsdp_param_group.py``, torch 2.5.0-2.8.0: "if not
    self.reduce_grads: ... to_accumulated_grad_if_needed(); return"; torch 2.6.0
    ``pipelining/stage.py`` ``backward_maybe_with_nosync`` turns sync off for every backward and
    runs ``post_backward`` after the last), so the backwards that hold the most micro-batches
    make no reduce-scatter input."""
    block, root = units
    accumulated = _pipeline_accumulated(rank, block, root, reduce_b)
    if accumulated is not None:
        return grads[:1], accumulated
    # Under no_sync the last micro-batch's backward still reduce-scatters unit by unit: it holds
    # the block's new gradient and its reduce-scatter input beside the accumulated ones.
    return grads, _no_sync_accumulated(rank, block, root, reduce_b)


def _no_sync_accumulated(rank: _Rank, block: float, root: float, reduce_b: float) -> list[Term] | None:
    """What an FSDP rank's backward accumulates into under no_sync (layout.fsdp_no_sync; None:
    its sharded gradients). Every micro-batch but the last skips the reduce-scatter and keeps the
    whole unsharded gradient, so the last one's forward and backward hold every unit's.

    FSDP1 (pytorch/pytorch 2.x ``torch/distributed/fsdp/_runtime_utils.py``, as the search index holds it:
    ``_post_backward_hook``): ``_post_backward_reshard`` frees the gathered parameters, then ``if not
    state._sync_gradients: ... return`` before any cast to the reduce dtype or reduce-scatter, and
    ``_finalize_params`` "Preserve[s] the gradient accumulation state if not synchronizing gradients:
    `.grad` remains the unsharded gradient from prior `no_sync()` iterations"; autograd adds the next
    micro-batch's gradient into it in place. It stays in the dtype autograd computed it in, the
    gathered (``MixedPrecision.param_dtype``) dtype, on the GPU even under CPU offload
    (``FullyShardedDataParallel.no_sync``: "FSDP will accumulate the full model gradients (instead of
    gradient shards) until the eventual sync ... the gradients will not be offloaded to CPU when
    inside the context manager"). FSDP2 under ``set_requires_gradient_sync(False)`` keeps them the
    same way, upcast to ``reduce_dtype`` (``FSDPParam.to_accumulated_grad_if_needed``, as
    :func:`_pipeline_accumulated`)."""
    plan, stage = rank.plan, rank.stage
    par = plan.parallel
    if not fsdp_no_sync(par, plan.workload.grad_accum) or rank.trainable <= 0:
        return None
    if plan.adapter_based:
        elements, what = rank.trainable, "adapter gradients"
        per = no_sync_grad_bytes(par, rank.dt.grad)
    else:
        elements, what = rank.all_blocks(block) + root, f"gradients of all {stage.layers} blocks and the root unit"
        per = MP_BYTES.get(par.fsdp_param_dtype, rank.stored_bytes) if par.fsdp1_wrap else reduce_b
    how = "FSDP1 no_sync" if par.fsdp1_wrap else "set_requires_gradient_sync(False)"
    terms = [
        Term(
            f"unsharded {what}, accumulated over the micro-batches ({how}: synced at the last)",
            f"{sci(elements)} × {per:g} B",
            elements * per,
        )
    ]
    if plan.adapter_based and rank.copies:  # PEFT's modules_to_save copies, in the root unit
        c, cb = rank.copies, no_sync_grad_bytes(par, copy_gather_bytes(plan, rank.dt.base))
        label = f"unsharded modules_to_save copies' gradients, accumulated ({how})"
        terms.append(Term(label, f"{sci(c)} × {cb:g} B", c * cb))
    return terms


def _pipeline_accumulated(rank: _Rank, block: float, root: float, reduce_b: float) -> list[Term] | None:
    """What a pipelined FSDP2 rank's backward accumulates into (None: its sharded gradients, as
    without a pipeline). Under a pipeline the stage's gradients stay unsharded
    (layout.fsdp_held_through_step), accumulated across micro-batches in the reduce dtype
    (FSDPParam.to_accumulated_grad_if_needed upcasts them to MixedPrecisionPolicy.reduce_dtype),
    until the last micro-batch's backward reduce-scatters them."""
    plan, stage = rank.plan, rank.stage
    if not fsdp_held_through_step(plan.parallel) or plan.workload.grad_accum == 1 or rank.trainable <= 0:
        return None
    if plan.adapter_based:
        elements, what = rank.trainable, "adapter gradients"
    else:
        elements, what = rank.all_blocks(block) + root, f"gradients of all {stage.layers} blocks and the root unit"
    return [
        Term(
            f"unsharded {what}, accumulated over the pipeline's micro-batches (synced at the last)",
            f"{sci(elements)} × {reduce_b:g} B",
            elements * reduce_b,
        )
    ]


def _gathered_block(plan: Plan, lay: Layout, block: float, gather: float) -> tuple[str, float]:
    """One block's all-gather output: its formula and bytes. With torchao's float8 all-gather
    (pytorch/ao 36027d8, torchao/float8/fsdp_utils.py: WeightWithDynamicFloat8CastTensor
    ``fsdp_pre_all_gather`` returns the float8 data, ``fsdp_post_all_gather`` wraps the gathered
    bytes as the float8 weight) the block's Float8Linear weights arrive in one byte per element;
    its norms (and a mixture's experts, not nn.Linear) in the gathered dtype."""
    if not (plan.parallel.fsdp_float8_all_gather and plan.float8 is Float8.TENSORWISE):
        return f"{sci(block)} × {gather:g} B", block * gather
    model = plan.model
    shapes = model.linear_shapes()
    names = ("q_proj", "k_proj", "v_proj", "o_proj") if model.num_experts > 1 else tuple(shapes)
    linears = min(block, sum(shapes[nm][0] * shapes[nm][1] for nm in names) / lay.tensor_parallel * model.params_scale)
    formula = f"{sci(linears)} float8 × 1 B + {sci(block - linears)} × {gather:g} B"
    return formula, linears + (block - linears) * gather


def _bnb_quant_state(rank: _Rank, why: str = "FSDP shards parameters only") -> tuple[_Rank, list[Term]]:
    """bitsandbytes' 4-bit quantisation state, which FSDP neither shards nor offloads: the
    rank without it, and the state as every rank holds it on its GPU. DeepSpeed ZeRO-3 holds
    it the same way (see :func:`_zero_stage`).

    bitsandbytes 0.43.0 (4876324, ``bitsandbytes/nn/modules.py``): ``Params4bit._quantize``
    puts the packed weight in the parameter's data and the ``QuantState`` (the per-64 absmax,
    with double quantisation its 8-bit codes and the per-256 float32 absmax of those) on the
    GPU it quantised on, and keeps it as a plain attribute of the parameter and of its
    ``Linear4bit`` (``self.module.quant_state``); ``Linear4bit.forward`` restores it from the
    module "when the parameter got converted. This happens for example for fsdp". FSDP
    flattens, shards, gathers and offloads parameters' data only (FSDP1 ``FlatParamHandle``,
    FSDP2 ``FSDPParam``), so each rank keeps the whole state, on the GPU even under CPU
    offload, and the all-gather moves only the packed 4-bit data."""
    plan = rank.plan
    if not plan.four_bit_base:
        return rank, []
    per = nf4_bytes_per_weight(plan.double_quant)
    state_per = per - ELEMENT_BYTES["nf4"]
    how = "1/64 + 4/(64·256)" if plan.double_quant else "4/64"
    weights: list[Term] = []
    state: list[Term] = []
    for t in rank.weights:
        if not t.label.startswith(f"{plan.quant.value} block weights"):
            weights.append(t)
            continue
        n = t.bytes / per
        weights.append(Term(t.label, f"{sci(n)} × 0.5 B (packed 4-bit data)", n * ELEMENT_BYTES["nf4"]))
        label = f"{plan.quant.value} quantisation state (absmax), on every rank: {why}"
        state.append(Term(label, f"{sci(n)} × ({how}) B", n * state_per))
    return replace(rank, weights=weights), state


@dataclass(frozen=True)
class _Near:
    """Formula and bytes of the blocks gathered together at each point of the backward: the last layer's unit
    (in flight as the forward ends and the backward starts), the block computing with the one prefetched (the
    largest two neighbours: :class:`core.parallel.layout.UnitOrder`), the first layer's unit (its backward,
    the last), and the largest unit. Where the units are alike (or a hybrid's order is not known), one block,
    two, one."""

    largest: tuple[str, float]
    last: tuple[str, float]
    pair: tuple[str, float]
    first: tuple[str, float]
    pair_label: str = f"{GATHERED_UNITS} blocks gathered (the one computing + the one prefetched)"


def _near(rank: _Rank, one: str, gathered: float, moments: tuple[_Moment, _Moment] | None = None) -> _Near:
    """:class:`_Near` of the rank: ``one`` / ``gathered`` is the largest unit's formula and bytes; a hybrid's
    units in its layer order at the same bytes per parameter (as :func:`_all_units_gathered`): in a block's
    backward and in the first layer's, the units gathered at the heaviest point (:func:`_block_moments`)."""
    order = rank.order
    if order is None or not rank.largest_block:
        times = one if "float8" not in one else f"({one})"
        two = (f"{GATHERED_UNITS} × {times}", GATHERED_UNITS * gathered)
        return _Near((one, gathered), (one, gathered), two, (one, gathered))
    per = gathered / rank.largest_block

    def unit(params: float, what: str) -> tuple[str, float]:
        return f"{sci(params)} × {per:g} B ({what})", params * per

    pair = unit(order.pair, "the largest two neighbouring layers' units")
    last, first = unit(order.last, "the last layer's unit"), unit(order.first, "the first layer's unit")
    if moments is None:
        return _Near((one, gathered), last, pair, first)
    block, end = moments
    if block.post:
        what = f"layer {block.layer - 1}'s unit, prefetched; layer {block.layer}'s resharded at its post_backward"
        label = "one block gathered (the one prefetched)"
    else:
        what, label = f"layers {block.layer} and {block.layer - 1}'s units", _Near.pair_label
        if not block.layer:
            what, label = "layer 0's unit, nothing to prefetch", "one block gathered (the first, running its backward)"
    first_what = "layer 0's unit resharded at its post_backward" if end.post else "the first layer's unit"
    return _Near((one, gathered), last, unit(block.gathered, what), unit(end.gathered, first_what), label)


def _fsdp_gathered(
    plan: Plan, layers: int, root_term: Term, near: _Near, every_b: float | None = None
) -> tuple[list[Term], list[Term], list[Term]]:
    """The gathered parameters at the end of the forward, as the backward starts, and while a
    block runs its backward. Measured (benchmarks/parallel, fake process group): at the end of
    the forward and as the backward starts only the root is gathered and one block's all-gather
    output is in flight (the last block, prefetched for its backward); inside a block's backward
    that block is gathered and the next one's all-gather is in flight. Without resharding after
    the forward, or under a pipeline (layout.fsdp_held_through_step), every block stays gathered: ``every_b``
    bytes where the blocks differ (a hybrid's, :func:`_all_units_gathered`), else ``layers`` × ``gathered``."""
    par = plan.parallel
    piped = fsdp_held_through_step(par)
    in_flight = Term("one block's all-gather output in flight (prefetch)", *near.last)
    if par.reshard_after_forward and not piped:
        computing = Term(near.pair_label, *near.pair)
        return [root_term, in_flight], [root_term, in_flight], [root_term, computing]
    why = "kept through the pipeline's micro-batches" if piped else "reshard_after_forward=False"
    one, gathered = near.largest
    times = one if "float8" not in one else f"({one})"
    every = Term(f"all {layers} blocks gathered ({why})", f"{layers} × {times}", layers * gathered)
    if every_b is not None:
        every = Term(every.label, f"Σ of the {layers} blocks' units", every_b)
    return [root_term, every, in_flight], [root_term, every], [root_term, every]


def _fsdp(rank: _Rank) -> RankState:
    rank, quant_state = _bnb_quant_state(rank)
    plan, dt, lay, stage, dp = rank.plan, rank.dt, rank.lay, rank.stage, rank.dp
    par, model = plan.parallel, plan.model
    gather = MP_BYTES.get(par.fsdp_param_dtype, rank.stored_bytes)
    reduce_b = fsdp_reduce_bytes(par, dt.grad)
    # A hybrid's units differ by layer kind: the largest one gathered, every one summed (fsdp_block_units); its
    # embedding and head are their shapes (ModelSpec.shape_scale: params_scale for any other model).
    block, blocks = fsdp_block_units(model, lay.tensor_parallel, lay.expert_parallel)
    rank = replace(rank, blocks=blocks, largest_block=block, order=fsdp_unit_order(model))
    root = outside_params(model, stage, lay.tensor_parallel) * model.shape_scale
    block_b, root_b = _unit_bytes(rank, block, gather)
    one, gathered = _gathered_block(plan, lay, block, block_b)
    sizes = _block_grad_sizes(rank, block, gather, reduce_b)
    resharded = par.reshard_after_forward and not fsdp_held_through_step(par)
    moments = _block_moments(rank, gathered / block if block else 0.0, sizes, resharded)
    gathered_at, ends = _end_units(rank, root, root_b, (one, gathered), moments)
    forward, backward, backward_block, backward_end = gathered_at
    largest_end = root if ends is None else max(ends)
    block_grads = _block_gradients(rank, block, gather, reduce_b)
    in_block = block_grads if moments is None else _moment_gradients(moments[0], sizes)
    backward_grads, accumulated = _backward_reduction(rank, (block, root), in_block, reduce_b)
    root_pending, root_reduce = _last_reduction(rank, root, ends, gather, reduce_b)
    if rank.copies and plan.workload.grad_accum == 1:
        root_pending, root_reduce = _copies_reduction(rank)
    # FSDP2 gathers on its all-gather stream (_fsdp_param_group.py); the caching allocator keeps a
    # stream's freed blocks for it (CUDACachingAllocator.cpp get_free_block): outside a block's
    # backward the second gathered block stays reserved, beside what the reduction frees there.
    stream_cache = [
        _all_gather_cache(rank, (one, gathered), resharded),
        *_reduce_stream_cache(rank, backward_grads, (block, largest_end), reduce_b),
        *_release_cache(rank, block_grads, pipelined=accumulated is not None and fsdp_held_through_step(par)),
    ]
    state = RankState(
        stream_cache=stream_cache,
        wrap_cache=_fsdp1_wrap_cache(rank, block, root),
        grads_on_reduce_stream=not plan.optimizer_in_backward,  # stepped and freed: _reduce_stream_cache
        root_pending=root_pending,
        root_reduce=root_reduce,
        root_assembled=_fsdp1_root_assembly(rank, root, gather),
        weights=_sharded(rank.weights, rank.weight_dp) + quant_state,
        grads=_sharded(rank.grads, dp),
        grads_in_backward=accumulated,
        optim=_sharded(rank.optim, dp),
        forward=forward,
        backward=backward,
        backward_block=backward_block,
        backward_end=backward_end,
        backward_grads=backward_grads,
        backward_end_grads=None if moments is None else _moment_gradients(moments[1], sizes),
    )
    if par.offload is Offload.NONE:
        return state
    host = (
        state.optim
        if par.offload is Offload.OPTIMIZER
        else _sharded(rank.weights, rank.weight_dp) + state.grads + state.optim
    )
    note = (
        "FSDP2 CPUOffloadPolicy: sharded parameters, gradients and optimizer state live on the host; "
        "the GPU holds the gathered units and the reduction buffers, the optimizer step runs on the CPU."
    )
    if par.offload is Offload.OPTIMIZER:
        return replace(state, optim=[], host=host, step_temporary=False, notes=(_OPTIM_NOTE,))
    staged = stream_cache + _offload_staging(rank, (block, block_b), (largest_end, root_b), gather)
    return replace(
        state,
        weights=quant_state,
        grads=[],
        root_pending=[],  # the sharded gradients are on the host: none for the root's to be missing from
        optim=[],
        host=host,
        step_temporary=False,
        notes=(note,),
        stream_cache=staged,
    )


_Gathered = tuple[list[Term], list[Term], list[Term], list[Term] | None]


def _end_units(
    rank: _Rank, root: float, root_b: float, block: tuple[str, float], moments: tuple[_Moment, _Moment] | None
) -> tuple[_Gathered, tuple[float, float] | None]:
    """What is gathered at the forward's end, as the backward starts, in a block's backward and in the
    first block's (None: as it starts), and the carved ends' parameters (embedding, [norm, head]; None:
    the root unit holds them, core.parallel.layout.carved_ends). ``block``: one block's gathered
    formula and bytes; ``moments``: a hybrid's points by layer order (:func:`_block_moments`). PEFT's
    modules_to_save copies stay planned in the root unit (:func:`_root_gathered`)."""
    plan, lay = rank.plan, rank.lay
    near = _near(rank, *block, moments)
    carved = None if rank.copies else carved_ends(plan, rank.stage, lay.tensor_parallel)
    if carved is None:
        root_term = _root_gathered(rank, root, root_b)
        every_b = _all_units_gathered(rank, block[1])
        forward, backward, in_block = _fsdp_gathered(plan, rank.stage.layers, root_term, near, every_b)
        return (forward, backward, in_block, None), None
    ends = (carved[0] * plan.model.shape_scale, carved[1] * plan.model.shape_scale)
    return _carved_gathered(ends, root_b, near), ends


def _all_gather_cache(rank: _Rank, block: tuple[str, float], resharded: bool) -> Term:
    """What FSDP2's all-gather copy-in stream keeps cached beside the backward's allocation.

    torch 2.13.0 ``_fsdp_collectives.py`` ``foreach_all_gather`` allocates each unit's all-gather output under
    ``all_gather_copy_in_stream`` in the forward and as the backward prefetches (``get_all_gather_streams``);
    in the forward ``wait_for_unshard`` frees the previous unit's output (``comm_ctx.all_gather_state``) only
    after the next one's is allocated, so two neighbouring units' outputs coexist there, and the caching
    allocator keeps the stream's freed blocks for it (CUDACachingAllocator.cpp ``get_free_block``). As the
    backward starts the last layer's output is in flight (allocated): the rest of the pool stays cached. Alike
    units: a second block. A hybrid whose order is known: its largest two neighbours less the last layer's unit
    (:class:`core.parallel.layout.UnitOrder`); not resharded after the forward, a second largest unit as before."""
    one, gathered = block
    order = rank.order
    if order is None or not resharded or not rank.largest_block:
        return Term("all-gather stream's cache: a second block's gathered parameters", one, gathered)
    per = gathered / rank.largest_block
    cached = order.pair - order.last
    return Term(
        "all-gather stream's cache: the largest two neighbouring units' all-gather outputs, less the last "
        "layer's in flight",
        f"({sci(order.pair)} − {sci(order.last)}) × {per:g} B",
        cached * per,
    )


def _all_units_gathered(rank: _Rank, gathered: float) -> float | None:
    """Bytes of every block unit gathered where the units differ (a hybrid's layers: ``rank.blocks``), each at
    the largest unit's bytes per parameter (``gathered`` ÷ its parameters); None where they are alike."""
    if rank.blocks is None or not rank.largest_block:
        return None
    return gathered / rank.largest_block * rank.blocks


def _last_reduction(
    rank: _Rank, root: float, ends: tuple[float, float] | None, gather: float, reduce_b: float
) -> tuple[list[Term], list[Term]]:
    """The unit FSDP2 reduces last, in a full fine-tune without accumulation (else the last micro-batch's
    gradients exist): the root unit, or the carved embedding unit (:func:`_embedding_reduction`). Until
    then its sharded gradients do not exist (a negative term); at its reduction the rank holds its
    unsharded gradients and the reduce-scatter input (_fsdp_param_group.py post_backward: the unit
    reshards, then foreach_reduce copies its gradients into the reduce-scatter input and only then
    frees them)."""
    plan, dt = rank.plan, rank.dt
    if plan.method is not Method.FULL or not root or plan.workload.grad_accum != 1:
        return [], []
    shards = rank.lay.state_shards  # the root holds no experts: sharded over DP × CP
    if ends is not None:
        return _embedding_reduction(ends[0], dt.grad / shards, gather, reduce_b)
    pending = [
        Term("less the root's sharded gradients (reduced last)", f"−root ÷ {shards:g}", -root * dt.grad / shards)
    ]
    reduce = [
        Term("root's unsharded gradients (embedding, head)", f"{sci(root)} × {gather:g} B", root * gather),
        Term("root's reduce-scatter input", f"{sci(root)} × {reduce_b:g} B", root * reduce_b),
    ]
    return pending, reduce


def _carved_gathered(
    ends: tuple[float, float], end_b: float, near: _Near
) -> tuple[list[Term], list[Term], list[Term], list[Term]]:
    """What FSDP2 holds gathered where the embedding and [final norm, head] are units of their own
    (core.parallel.layout.carved_ends): at the end of the forward (the loss), as the backward starts,
    while a block runs its backward, and as the first block runs its backward. ``ends``: the
    embedding's and [norm, head]'s parameters on the rank, gathered at ``end_b`` bytes each.

    pytorch/pytorch torch 2.13 ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``: in the
    forward ``wait_for_unshard`` keeps each unit's all-gather output (``comm_ctx.all_gather_state``)
    until the next unit's copy-out; the last unit gathered in the forward is [norm, head], so its
    output stays beside its unsharded parameters until the root's ``_post_forward``
    (``_fsdp_state.py``: "Free the last all-gather result"), after the loss a Hugging Face model
    computes inside its forward. The embedding was resharded after its own forward. Its pre-backward
    hook is on the head's output, so as the backward starts (the loss's backward) nothing is
    prefetched yet: only [norm, head] is gathered. Its ``post_backward`` reshards it once the norm's
    backward is done, so the blocks' backward holds two blocks alone; the first block's
    ``pre_backward`` prefetches the embedding (``_backward_prefetch``: the previous unit in
    ``post_forward_order``). Measured (tools/measure, fake process group, Llama-3.1-8B on 8 ranks,
    benchmarks/parallel/measured/fsdp-carved-llama31-8b-mp-fused-ckpt-w8-b1-s4096.json): 1,050,681,344 B
    unsharded and as many of all-gather output at the forward's peak, the unsharded alone at the
    backward's."""
    embed, tail = ends
    formula = f"{sci(tail)} × {end_b:g} B"
    tail_term = Term("[final norm, head] unit gathered (not resharded after forward)", formula, tail * end_b)
    tail_output = Term(
        "[final norm, head] unit's all-gather output (kept until the root's post-forward)", formula, tail * end_b
    )
    computing = Term(near.pair_label, *near.pair)
    end = [
        Term("embedding unit gathered (prefetched for its backward)", f"{sci(embed)} × {end_b:g} B", embed * end_b),
        Term("one block gathered (the first, running its backward)", *near.first),
    ]
    return [tail_term, tail_output], [tail_term], [computing], end


def _embedding_reduction(embed: float, shard_b: float, gather: float, reduce_b: float) -> tuple[list[Term], list[Term]]:
    """A carved embedding unit reduced last (as the root unit is otherwise, :func:`_fsdp`): until its
    ``post_backward`` its sharded gradient does not exist (a negative term, ``shard_b`` bytes per element
    of the rank's share) and its unsharded one waits; then the reduce-scatter input is made. The
    [norm, head] unit reduced after the head's backward, long before."""
    pending = [
        Term(
            "less the embedding unit's sharded gradients (reduced last)",
            f"−{sci(embed)} × {shard_b:.4g} B",
            -embed * shard_b,
        )
    ]
    reduce = [
        Term("embedding unit's unsharded gradients", f"{sci(embed)} × {gather:g} B", embed * gather),
        Term("embedding unit's reduce-scatter input", f"{sci(embed)} × {reduce_b:g} B", embed * reduce_b),
    ]
    return pending, reduce


def copy_gather_bytes(plan: Plan, base: float) -> float:
    """Bytes per element FSDP2 gathers a PEFT modules_to_save copy in, and autograd forms its unsharded gradient
    in: ``MixedPrecisionPolicy.param_dtype`` when set, else the copy's stored dtype (core.roles.saved_copy_bytes;
    ``base``: the base's bytes)."""
    return MP_BYTES.get(plan.parallel.fsdp_param_dtype, saved_copy_bytes(plan, base))


def _root_gathered(rank: _Rank, root: float, root_b: float) -> Term:
    """The root unit as FSDP2 gathers it, not resharded after forward (``_fsdp_state.py`` ``_lazy_init``): the
    embedding, final norm and head, and PEFT's modules_to_save copies with them. ``ModulesToSaveWrapper``
    (huggingface/peft 51c2ff66 src/peft/utils/other.py) replaces ``embed_tokens`` / ``lm_head`` in place,
    outside the decoder blocks, and holds the frozen original and the trained copy as submodules: a unit per
    decoder block and one on the root (torchtitan's and accelerate's transformer wrap) put both in the root
    unit, whose one all-gather moves every parameter it holds (``foreach_all_gather``), the original the
    forward never reads too."""
    label = "root unit gathered (embedding, final norm, head: not resharded after forward)"
    if not rank.copies:
        return Term(label, f"{sci(root)} × {root_b:g} B", root * root_b)
    c, cb = rank.copies, copy_gather_bytes(rank.plan, rank.dt.base)
    return Term(
        label.replace("head:", "head, PEFT's modules_to_save copies:"),
        f"{sci(root)} × {root_b:g} B + copies {sci(c)} × {cb:g} B",
        root * root_b + c * cb,
    )


def _copies_reduction(rank: _Rank) -> tuple[list[Term], list[Term]]:
    """PEFT's modules_to_save copies in the root unit, reduced last (as a full fine-tune's root, :func:`_fsdp`):
    until the root's ``post_backward`` their sharded gradients do not exist (a negative term against the rank's
    sharded gradients) and their unsharded ones wait; then ``foreach_reduce`` copies them into the reduce-scatter
    input (``reduce_dtype``) before it frees them."""
    plan, dp = rank.plan, rank.dp
    c, stored = rank.copies, rank.copy_bytes
    gather = copy_gather_bytes(plan, rank.dt.base)
    reduce_b = fsdp_reduce_bytes(plan.parallel, gather)
    pending = [
        Term(
            "less the copies' sharded gradients (root unit, reduced last)",
            f"−{sci(c)} × {stored:g} B ÷ {dp:g}",
            -c * stored / dp,
        )
    ]
    reduce = [
        Term("modules_to_save copies' unsharded gradients (root unit)", f"{sci(c)} × {gather:g} B", c * gather),
        Term("modules_to_save copies' reduce-scatter input", f"{sci(c)} × {reduce_b:g} B", c * reduce_b),
    ]
    return pending, reduce


def root_copy_gradient(plan: Plan, base: float) -> list[Term]:
    """Under FSDP2, the lm_head copy's unsharded gradient (PEFT's modules_to_save): formed at the head's backward
    and held, in the gathered dtype, until the root unit reduces it at the backward's end (:func:`_copies_reduction`);
    empty without a head copy. The embedding copy's forms at the end, in that reduction."""
    if not plan.lora.modules_to_save.head:
        return []
    vd = plan.model.vocab_size * plan.model.hidden_size
    b = copy_gather_bytes(plan, base)
    label = "modules_to_save: the lm_head copy's unsharded gradient (root unit, held until its reduction)"
    return [Term(label, f"V·d × {b:g} B", vd * b)]


def _fsdp1_root_assembly(rank: _Rank, root: float, gather: float) -> list[Term]:
    """What FSDP1's root unit holds while autograd assembles its flat gradient (empty: FSDP2, or
    no trained root). FSDP1 keeps a unit's parameters as views of one flat parameter, cut by
    ``torch.split`` (torch 2.13.0 wheel, git cf30153c, ``torch/distributed/fsdp/_flat_param.py``
    ``FlatParamHandle._get_unflat_views_unaligned`` / ``_get_unflat_views_aligned``:
    ``torch.split(tensor, flat_param._numels[_with_padding], dim=0)`` then ``.view(shape)``), so the
    flat parameter's gradient comes from one SplitWithSizesBackward node. The autograd engine runs a
    node once every output it feeds has sent its gradient: the head's (first in the backward) and
    the final norm's wait in its input buffer until the embedding's, formed last; then
    ``split_with_sizes_backward`` (pytorch/pytorch 002ca671 ``torch/csrc/autograd/FunctionsManual.cpp``:
    zeros for any view without one, ``at::cat(grads_all_defined, dim)``) writes a NEW tensor of the
    whole unit's size while its inputs are alive. Only then does AccumulateGrad steal it as ``.grad``
    or, under ``no_sync`` where ``.grad`` holds the earlier micro-batches' unsharded sum
    (``FlatParamHandle.prepare_gradient_for_backward`` keeps a ``.grad`` of the unsharded size), add
    it in place (``accumulate_grad.h`` ``accumulateGrad``: "Case 2.3: In-place addition"), and only
    after that does ``_post_backward_hook`` reshard the root (never resharded after forward). At
    that moment the rank holds the gathered root, its views' gradients (root-sized) and their
    concatenation (root-sized) beside every gradient it already held. FSDP2 keeps each parameter
    as a leaf of its own (``FSDPParam``): no split, nothing assembled."""
    plan = rank.plan
    if not plan.parallel.fsdp1_wrap or plan.method is not Method.FULL or not root:
        return []
    return [
        Term(
            "FSDP1 root: its views' gradients (embedding, norm, head) waiting for split_with_sizes' backward",
            f"{sci(root)} × {gather:g} B",
            root * gather,
        ),
        Term(
            "FSDP1 root: their concatenation, the flat parameter's new gradient",
            f"{sci(root)} × {gather:g} B",
            root * gather,
        ),
    ]


def _unit_bytes(rank: _Rank, block: float, gather: float) -> tuple[float, float]:
    """Bytes per parameter a block unit and the root unit gather: under a 4-bit QLoRA base, as
    they are stored (:func:`_four_bit_unit_bytes`). Otherwise, and under a mixed-precision policy
    that casts every gathered parameter, both gather ``gather`` bytes (the rank's stored average)."""
    plan = rank.plan
    if not plan.four_bit_base or plan.parallel.fsdp_param_dtype is not MpDtype.STORED or not block:
        return gather, gather
    return _four_bit_unit_bytes(plan, rank.lay, block)


def _four_bit_unit_bytes(plan: Plan, lay: Layout, block: float) -> tuple[float, float]:
    """Bytes per parameter of a block unit (``block`` parameters on the rank) and of the root unit
    as a 4-bit QLoRA model stores them. Only the blocks' projection matrices are 4-bit
    (core.params.quantised_block_params, ÷ TP as the rank's block is): a block holds their packed
    data (the quantisation state apart) and its norms unquantised, the root its embedding and
    head unquantised (core.roles.qlora_unquantised_bytes)."""
    packed = ELEMENT_BYTES["nf4"]
    base = qlora_unquantised_bytes(plan)
    linear = min(block, quantised_block_params(plan) / plan.model.num_layers / lay.tensor_parallel)
    return (linear * packed + (block - linear) * base) / block, base


def _offload_staging(
    rank: _Rank, block_unit: tuple[float, float], root_unit: tuple[float, float], gather: float
) -> list[Term]:
    """Parameter CPU offload copies each unit's local shard to the GPU before its all-gather, on a
    side stream, and the caching allocator keeps the freed copies for that stream.

    FSDP1 (pytorch/pytorch 01caf79, torch/distributed/fsdp/_flat_param.py ``pre_unshard``:
    ``self.flat_param_to(self.device, non_blocking=True)``, "This creates a new tensor distinct from
    any attributes"; ``_all_gather_flat_param``: "``flat_param.data`` (i.e. sharded param) is created
    on the pre-unshard stream", handed to the unshard stream with ``record_stream``) runs
    ``pre_unshard`` under the pre-unshard stream ("allocations and writes for CPU offloading (H2D
    copy) and mixed precision (low precision cast)", ``_runtime_utils.py`` ``_init_streams`` at
    00ae0bc9); with mixed precision ``_use_low_precision_shard`` makes the low-precision shard from
    the copied one there too. The copy is freed when the unit's flat parameter points at the
    gathered one, and ``limit_all_gathers`` lets two all-gathers be in flight, so two block shards
    (or the root's, copied alone at the step's start) are cached. FSDP2 (010ae4a8,
    ``_fully_shard/_fsdp_collectives.py`` ``foreach_all_gather``) makes the same copy
    (``FSDPParam.all_gather_inputs``: ``.to(self.device, non_blocking=True)``) under the all-gather
    copy-in stream and drops it once copied into the all-gather output: one unit's at a time. A
    block cached for one stream is never given to another (CUDACachingAllocator.cpp
    ``get_free_block``), so the default stream's peak does not reuse them."""
    plan = rank.plan
    dp = rank.dp
    (block, block_b), (root, root_b) = block_unit, root_unit
    if dp <= 1 or not block:
        return []
    # Under a mixed-precision policy the shard is copied in its stored dtype and cast to the gathered one.
    stored = rank.stored_bytes
    cast = gather if plan.parallel.fsdp_param_dtype is not MpDtype.STORED and gather != stored else 0.0
    in_flight = 2 if plan.parallel.fsdp1_wrap else 1  # FSDP1's limit_all_gathers; FSDP2 copies one unit at a time
    blocks = in_flight * block * (stored + cast if cast else block_b) / dp
    roots = root * (stored + cast if cast else root_b) / dp
    if roots >= blocks:
        how = f"({stored:g} + {cast:g}) B" if cast else f"{root_b:g} B"
        label = "CPU offload: the root unit's shard copied to the GPU for its all-gather, cached for the copy stream"
        return [Term(label, f"{sci(root)} × {how} ÷ {dp:g}", roots)]
    how = f"({stored:g} + {cast:g}) B" if cast else f"{block_b:g} B"
    label = "CPU offload: the blocks' shards copied to the GPU for their all-gather, cached for the copy stream"
    return [Term(label, f"{in_flight} × {sci(block)} × {how} ÷ {dp:g}", blocks)]


def _fsdp1_wrap_cache(rank: _Rank, block: float, root: float) -> list[Term]:
    """What an FSDP1 wrap of a model held on the CPU (or the meta device) leaves cached.

    torch 2.2's FSDP1 initialises one unit at a time, innermost first and the root last
    (pytorch/pytorch 00743e70, torch/distributed/fsdp/_init_utils.py
    ``_init_param_handle_from_module``): ``_move_states_to_device`` copies the unit's own
    parameters to the GPU (``param_init_fn``'s ``to_empty`` allocates them on the ranks that
    hold the meta copy), ``sync_module_states`` broadcasts them from rank 0 in 250 MiB buckets
    (``PARAM_BROADCAST_BUCKET_SIZE``; a bucket of several tensors is flattened into a new
    tensor), ``FlatParamHandle`` concatenates them into a new unsharded flat parameter
    (``flatten_tensors``: ``torch.cat``) while ``managed_params`` still holds the originals,
    and ``shard`` clones this rank's chunk before it frees the unsharded storage
    (torch/distributed/fsdp/_flat_param.py at 01caf79). The caching allocator keeps every freed
    block (c10/cuda/CUDACachingAllocator.cpp): the next unit of the same shape takes the cached
    originals and flat parameter again and each new shard needs a block of its own, so after
    the wrap one block unit's and the root unit's originals and flat parameter, twice each
    unit's unsharded bytes, stay reserved. A replay of this order through the allocator's
    rules (benchmarks/realgpu/fsdp1_wrap_replay.py) leaves 1,273 MiB (QLoRA) and 1,752 MiB
    (LoRA) cached on rank 0 of two for Llama-2-7B, against 2 × (root + block) = 1,193 and
    1,772 MiB. The wrap runs on the default stream, and FSDP1 gathers on its unshard stream
    (torch/distributed/fsdp/_runtime_utils.py ``_unshard``), whose allocations never take a
    block cached for another stream: the training step's gathered units do not reuse it.
    Answer.AI's train.py resets the peak statistics after the wrap (AnswerDotAI/fsdp_qlora
    e877dda, ``reset_peak_memory_stats``), which keeps the reserved figure; docs/REAL_GPU_MEMORY.md."""
    plan = rank.plan
    if not plan.parallel.fsdp1_wrap:
        return []
    stored = rank.dt.base if plan.adapter_based else rank.dt.param
    root_b = qlora_unquantised_bytes(plan) if plan.quantised_base else stored
    block_b = root_b
    if plan.four_bit_base and block:
        block_b, root_b = _four_bit_unit_bytes(plan, rank.lay, block)
    unit = f"{sci(block)} × {block_b:.4g} B"
    label = "FSDP1 wrap: a block's original tensors and flat parameter, cached"
    terms = [Term(label, f"2 × {unit}", 2 * block * block_b)]
    if root:
        terms.append(
            Term(
                "FSDP1 wrap: the root's original tensors and flat parameter, cached",
                f"2 × {sci(root)} × {root_b:g} B",
                2 * root * root_b,
            )
        )
    return terms


_OPTIM_NOTE: Final = "Optimizer offload: the optimizer state and its step live on the host (CPU Adam)."


# --- DeepSpeed ZeRO -------------------------------------------------------------------
def _zero(rank: _Rank) -> RankState:
    trainable, dp = rank.trainable, rank.dp
    stage = _zero_stage(rank)
    stepped = trainable / dp
    if rank.plan.parallel.strategy is Strategy.ZERO3:
        stepped = min(stepped, ZERO3_SUB_GROUP)
    # With bf16 master gradients (deepspeed_bf16_master) the step's ``.to(master_weights_and_grads_dtype)`` of the
    # bf16 flat gradient returns that tensor itself (stage_1_and_2.py ``step``, stage3.py
    # ``_prepare_fp32_grad_for_sub_group``, deepspeedai/DeepSpeed edaa7221): no float32 copy is made.
    bf16_master = deepspeed_bf16_master(rank.plan)
    step = [Term(ZERO_STEP_FP32_GRAD, f"{sci(stepped)} × 4 B", stepped * 4)] if trainable and not bf16_master else []
    if trainable and bf16_master and rank.plan.parallel.offload is not Offload.NONE:
        # Offloaded, the host gradient the CPU optimizer steps on is its own buffer in the master dtype
        # (stage_1_and_2.py ``initialize_optimizer_states``: ``dtype=self.single_partition_of_fp32_groups[i].dtype``).
        step = [Term("bf16 gradient of the partition (master dtype)", f"{sci(stepped)} × 2 B", stepped * 2)]
    # Offloaded, stage 3 swaps the sub-group in instead (_prepare_sub_group), with no flat copy on the GPU; with
    # float32 gradients ``.to(fp32)`` returns the flat tensor itself, which is then the float32 gradient. Under
    # bf16 master gradients the flat bf16 copy is still made, and is itself the gradient the optimizer steps on.
    g = _zero3_grad_bytes(rank)
    zero3_on_gpu = rank.plan.parallel.strategy is Strategy.ZERO3 and rank.plan.parallel.offload is Offload.NONE
    if trainable and zero3_on_gpu and g < 4:
        step.append(Term(ZERO3_STEP_FLAT_GRAD, f"{sci(stepped)} × {g:g} B", stepped * g))
    state = RankState(
        weights=stage.weights,
        grads=stage.step_grads,
        optim=_zero_optimizer_partition(rank),
        grads_in_backward=stage.grads_in_backward,
        persistent=stage.persistent,
        forward=stage.gathered if stage.turn is None else stage.turn,
        backward=stage.gathered if stage.turn is None else stage.turn,
        backward_block=None if stage.turn is None else stage.gathered,
        off_turn=None if stage.turn is None else stage.gathered,
        backward_grads=stage.backward_grads,
        step=step,
        step_temporary=False,
        notes=_engine_cast_note(rank.plan),
    )
    if rank.plan.parallel.offload is Offload.NONE:
        return state
    return _zero_offloaded(rank, state)


def _engine_cast_note(plan: Plan) -> tuple[str, ...]:
    """What DeepSpeed's bf16 / fp16 engine does to the plan's weights (core.roles.deepspeed_cast_weights)
    and to its float32 adapters (core.roles.deepspeed_cast_adapters)."""
    return _engine_autocast_note(plan) + _engine_weights_note(plan) + _engine_adapters_note(plan)


def _engine_autocast_note(plan: Plan) -> tuple[str, ...]:
    """DeepSpeed's 16-bit engine runs no torch.autocast (core.roles.runs_autocast)."""
    engine = deepspeed_engine_dtype(plan)
    if engine is None:
        return ()
    word = engine.value
    return (
        f"DeepSpeed {word}: no torch.autocast runs (the engine's forward opens none; one opened outside is "
        "refused from v0.17.2 and turned off from v0.17.6 unless its torch_autocast section is set; accelerate "
        f"and the HF Trainer open none under DeepSpeed), so norms and softmax take the model's {word} tensors, "
        "not autocast's float32 copies.",
    )


def _engine_weights_note(plan: Plan) -> tuple[str, ...]:
    cast = deepspeed_cast_weights(plan)
    if cast is None:
        return ()
    word, stored = cast.value, stored_weight_dtype(plan).value
    what = cast_weights_label(plan)
    return (
        f"DeepSpeed {word}: the model's {stored} {what} are {word} on the GPU at every ZeRO stage (the engine "
        f"casts the module; under ZeRO-3 zero.Init creates them in {word}), so the model runs in {word} "
        f"without autocast copies, its gradients are {word}, and "
        + (
            "the optimizer's master partition is bf16 too (bf16_master_weights_and_grads)."
            if deepspeed_bf16_master(plan)
            else "float32 lives only in the optimizer's master partition."
        ),
    )


def _engine_adapters_note(plan: Plan) -> tuple[str, ...]:
    engine = deepspeed_engine_dtype(plan)
    if engine is None or not plan.adapter_based or plan.adapter_dtype is engine:
        return ()
    word = engine.value
    if deepspeed_cast_adapters(plan) is not None:
        return (
            f"DeepSpeed {word}: the engine casts the whole module to {word}, the adapters too, so they, their "
            f"gradients and the reduce bucket are {word}; the optimizer keeps float32 master copies.",
        )
    return (
        f"DeepSpeed ZeRO-3 {word}: a model loaded under zero.Init keeps its {plan.adapter_dtype.value} adapters "
        f"(the engine casts only models not partitioned at load), but their gradient partition and the reduce "
        f"bucket are {word}.",
    )


def _zero_optimizer_partition(rank: _Rank) -> list[Term]:
    """The master copy and the optimizer's state of this rank's partition: float32, or bf16 under DeepSpeed's
    low-precision options (:func:`core.inputs.deepspeed_bf16_master`, :func:`core.inputs.deepspeed_bf16_states`).
    The bf16 master is a copy of its own at every stage: stage_1_and_2.py clones the 16-bit partition
    (``.detach().clone().to(dtype=self.master_weights_and_grads_dtype)``), and stage3.py
    ``_create_fp32_partitions`` aliases the 16-bit partition only when ``tensor.device == self.device``, where
    ``self.device`` is the string ``current_device_name()`` ("cuda:N"), which a torch.device never equals
    (pytorch/pytorch a1ddd070 torch/csrc/Device.cpp ``THPDevice_rc`` returns NotImplemented for a non-device, and
    Python then compares identities), so it clones there too (deepspeedai/DeepSpeed edaa7221 and v0.18.3 6eb98aaf;
    accelerator/cuda_accelerator.py ``current_device_name``: ``'cuda:{}'.format(...)``)."""
    trainable, dp = rank.trainable, rank.dp
    if not trainable:
        return []
    master_b = 2.0 if deepspeed_bf16_master(rank.plan) else MASTER_BYTES
    state_b = 2.0 if deepspeed_bf16_states(rank.plan) else MASTER_BYTES
    states = replace(rank.dt, grad=state_b)
    state = _scaled(rank.optimizer_at(states), rank.t_share, _split_label(rank.lay, rank.stage))
    word = "bf16" if master_b == 2 else "float32"
    formula = f"T ÷ {dp:g} × {master_b:g} B = {sci(trainable)} ÷ {dp:g} × {master_b:g} B"
    master = Term(f"{word} master partition", formula, trainable * master_b / dp)
    return [master, *_sharded(state, dp)]


@dataclass(frozen=True)
class _ZeroStage:
    """How a ZeRO stage holds the 16-bit parameters and the gradients."""

    weights: list[Term]
    step_grads: list[Term]  # the gradients the optimizer step reads
    grads_in_backward: list[Term]  # what the backward accumulates into
    backward_grads: list[Term] = field(default_factory=list)  # reduction buffers in the backward
    persistent: list[Term] = field(default_factory=list)  # allocated at start-up, alive throughout
    gathered: list[Term] = field(default_factory=list)  # ZeRO-3: parameters gathered to compute
    turn: list[Term] | None = None  # ZeRO-3: gathered at the forward's end and the backward's start, if more


def _zero3_grad_bytes(rank: _Rank) -> float:
    """Bytes of a stage-3 gradient element: DeepSpeed's model dtype under bf16/fp16.enabled (below), else the
    trainable parameters' own."""
    engine = deepspeed_engine_dtype(rank.plan)
    return DTYPE_BYTES[engine] if engine is not None else rank.dt.grad


def _zero_stage(rank: _Rank) -> _ZeroStage:
    g, dp, part = rank.dt.grad, rank.dp, rank.trainable / rank.dp
    # Every ipg bucket is reduce_bucket_size elements, however few the trainable parameters:
    # stage_1_and_2.py ``setup_buckets`` and stage3.py ``__init__`` (under ``contiguous_gradients``)
    # allocate ``torch.empty(int(self.reduce_bucket_size), ...)`` (deepspeedai/DeepSpeed edaa7221),
    # capped by nothing (stage 3's ``largest_partitioned_param_numel`` is only printed).
    bucket_el = rank.plan.parallel.zero_bucket_elements
    strategy = rank.plan.parallel.strategy
    if strategy is Strategy.ZERO1:
        flattened = Term(f"{g * 8:g}-bit gradient partition (flattened)", f"T ÷ {dp:g} × {g:g} B", part * g)
        buckets = _zero1_buckets(rank, bucket_el)
        if rank.plan.workload.grad_accum > 1:
            # Allocated in the first micro-batch's backward, freed at the boundary's: held with
            # the whole param.grad through the later micro-batches' forwards too.
            return _ZeroStage(rank.weights, [flattened], [*rank.grads, *buckets])
        return _ZeroStage(rank.weights, [flattened], rank.grads, backward_grads=buckets)
    if strategy is Strategy.ZERO2:
        reduced = [Term("reduced gradient partition (grads_in_partition)", f"T ÷ {dp:g} × {g:g} B", part * g)]
        # No trainable parameter, no gradient hook, no bucket (as for stage 1).
        return _ZeroStage(rank.weights, reduced, reduced, backward_grads=_zero1_buckets(rank, bucket_el))
    # Stage 3: the gradient partition and the bucket are allocated at start-up; the 16-bit
    # parameters are partitioned too and gathered a module at a time, with a prefetch.
    # bitsandbytes' quantisation state is not a parameter's data: transformers quantises each
    # weight on the GPU and, under ZeRO-3, moves only its data to the CPU for DeepSpeed to
    # partition (huggingface/transformers, modeling_utils.py ``_load_state_dict_into_meta_model``,
    # since v4.39: ``type(value)(value.data.to("cpu"), **value.__dict__)``, "For quantized modules
    # with FSDP/DeepSpeed Stage 3, we need to quantize the parameter on the GPU and then cast it
    # to CPU"), and DeepSpeed partitions and gathers ``param.data`` with no case for bitsandbytes
    # (deepspeedai/DeepSpeed edaa7221: neither ``quant_state`` nor ``Params4bit`` appears under
    # deepspeed/). So every rank keeps the whole state on its GPU, as under FSDP.
    rank, quant_state = _bnb_quant_state(rank, "ZeRO-3 partitions parameters' data only")
    # Both in DeepSpeed's model dtype under bf16/fp16.enabled, whatever the trainable parameters'
    # own (float32 adapters of a zero.Init model): stage3.py ``__init__`` allocates
    # ``grad_partitions_flat_buffer`` in ``gradient_accumulation_dtype`` and each ipg bucket in its
    # communication dtype, which engine.py passes as ``get_data_types()``'s grad_accum_dtype (the
    # model dtype by default) and ``communication_data_type`` (the fp16 / bf16 dtype when enabled)
    # (deepspeedai/DeepSpeed edaa7221).
    g = _zero3_grad_bytes(rank)
    persistent = [
        Term("gradient partition (grad_partitions_flat_buffer)", f"T ÷ {dp:g} × {g:g} B", part * g),
        Term("ipg reduce bucket (allocated at start-up)", f"{sci(bucket_el)} × {g:g} B", bucket_el * g),
    ]
    largest = _largest_module(rank.plan, rank.lay, rank.stage) * rank.plan.model.shape_scale
    what = "the largest module"
    kept = _zero3_kept_block(rank)
    if kept > largest:
        largest, what = kept, "a checkpointed block's modules, kept for its backward"
    gathered = _zero3_gathered(rank, largest, what)
    tail = _zero3_forward_tail(rank)
    turn = None
    if tail > largest:
        turn = [_zero3_gathered(rank, tail, "the forward's last modules, kept for the backward")]
    weights = _sharded(rank.weights, rank.weight_dp) + quant_state
    return _ZeroStage(weights, [], [], persistent=persistent, gathered=[gathered], turn=turn)


def _zero3_gathered(rank: _Rank, largest: float, what: str) -> Term:
    """``largest`` gathered elements and the prefetch bucket the coordinator adds, up to
    ``stage3_max_live_parameters`` (partitioned_param_coordinator.py ``fetch_sub_module``:
    ``min(max_n_available_params - n_available_params, prefetch_bucket_sz)``)."""
    par, stored = rank.plan.parallel, rank.stored_bytes
    prefetch = min(par.zero3_prefetch_elements, max(0, par.zero3_max_live_elements - largest))
    return Term(
        f"gathered: {what} + the prefetch bucket",
        f"({sci(largest)} + {sci(prefetch)}) × {stored:g} B",
        (largest + prefetch) * stored,
    )


def _zero3_forward_tail(rank: _Rank) -> float:
    """Elements ZeRO-3 keeps gathered from the forward's end to the backward's start (no checkpointing).

    microsoft/DeepSpeed v0.11.1 (e9503fe4) and v0.14.0 (ce78a632), partitioned_param_coordinator.py
    ``release_sub_module`` / ``__params_to_release``: when a module's forward ends, its parameters stay
    gathered if they occur again in the recorded trace before ``stage3_max_reuse_distance`` (R,
    ``parallel.zero3_max_reuse_elements``, 1e9 by default) elements have been traversed from the next
    module on. Without checkpointing a module's next use is
    its own backward, after the S elements of every later forward module and the same S again in the
    backward (which visits them in reverse first): it is kept when 2·S < R. So the head and the last
    modules of the forward, those followed by fewer than R ÷ 2 elements, are all gathered as the
    backward starts (a Llama 2 7B rank: the head, block 31 and five projections of block 30, 5.0e8
    elements; a model of fewer than R ÷ 2 elements stays gathered whole, embedding too). Each is
    released after its own backward (its next use, the next step's forward, is far),
    so inside the blocks' backward only the module and the prefetch are gathered; an evaluation forward
    records a trace of its own (the coordinator for ``training=False``) in which nothing recurs. Under
    checkpointing the recompute lies between the two uses (``_zero3_kept_block``); not modelled here."""
    plan, stage = rank.plan, rank.stage
    if plan.checkpointing or not stage.head:
        return 0.0
    model, tp, scale = plan.model, rank.lay.tensor_parallel, plan.model.shape_scale
    attention, mlp = _zero3_block_modules(rank)
    order = _zero3_hybrid_modules(model, attention, mlp)
    if order:  # a hybrid: each layer's modules by its kind, from the last layer back
        later = [size for layer in reversed(order) for size in reversed(layer)]
    else:
        later = [*attention, *mlp][::-1] * stage.layers
    forward = [model.vocab_size * model.hidden_size / tp, *later]
    if stage.embedding and not model.tie_embeddings:  # a tied head is the embedding's own weight
        forward.append(model.embedding_params() / tp)
    kept, after = 0.0, 0.0
    for module in forward:  # from the head backwards through the forward
        if 2 * after * scale >= plan.parallel.zero3_max_reuse_elements:
            break
        kept += module
        after += module
    return kept * scale


def _zero3_block_modules(rank: _Rank) -> tuple[list[float], list[float]]:
    """Elements of one block's attention projections and of its MLP on the rank, in forward order: q, k, v, o
    (a Gated DeltaNet hybrid's gated q_proj twice as wide, :func:`_gated_q`); gate, up, down, or the rank's
    experts as one grouped module (as :func:`_largest_module`)."""
    model, tp = rank.plan.model, rank.lay.tensor_parallel
    shapes = model.linear_shapes()
    attention = [shapes[name][0] * shapes[name][1] / tp for name in ("q_proj", "k_proj", "v_proj", "o_proj")]
    attention[0] = _gated_q(model) / tp or attention[0]
    if model.num_experts > 1:
        mlp = [model.num_experts * model.hidden_size * model.intermediate_size * 2 / tp / rank.lay.expert_parallel]
    else:
        names = ("gate_proj", "up_proj", "down_proj")
        mlp = [shapes[name][0] * shapes[name][1] / tp for name in names if name in shapes]
    return attention, mlp


def _zero3_hybrid_modules(model: ModelSpec, attention: list[float], mlp: list[float]) -> list[list[float]]:
    """A hybrid's decoder layers in module order (ModelSpec.layer_pattern), each its modules' elements in forward
    order: an attention layer's projections, a recurrent layer's mixer projections (:func:`_mixer_modules`), then
    the MLP (Granite 4.0-H, Bamba, Qwen3-Next, Qwen3.5: every layer; Nemotron-H: its MLP and MoE layers alone,
    NemotronHBlock holding one of the four). Empty for any other model, or where the order is not known. The
    convolution's and the norms' few weights are left out, as a dense block's norms are.

    transformers 5.25.0's Mamba-2 mixers read ``self.conv1d.weight`` (and, on mamba_ssm's fused path,
    ``self.out_proj.weight``) without calling those modules; DeepSpeed's ``ZeROOrderedDict.__getitem__``
    (deepspeed/runtime/zero/parameter_offload.py, as the code search holds it) gathers such a parameter and
    registers it as an external parameter of the module running, so it joins the mixer's fetch in the same
    place of the trace: the elements in order are the same. Never run here (DeepSpeed is not installed):
    core.evidence names the plan's kind ``hybrid:zero3`` as never validated."""
    if not model.recurrent_mixer or not model.layer_pattern or "P" in model.layer_pattern:  # Falcon-H1: not trained
        return []
    nemotron = model.family == "nemotron_h"
    kinds = {"*": attention, "M": _mixer_modules(model), "-": [], "E": []}
    return [kinds[c] + (mlp if not nemotron or c in "-E" else []) for c in model.layer_pattern]


def _mixer_modules(model: ModelSpec) -> list[float]:
    """Elements of a recurrent layer's projections in forward order (transformers 5.25.0). Mamba-2 (BambaMixer,
    GraniteMoeHybridMambaLayer, NemotronHMamba2Mixer): in_proj d → inner + conv channels + heads, out_proj inner →
    d (ModelSpec.mixer_shapes). Gated DeltaNet: Qwen3-Next's in_proj_qkvz d → conv channels + inner (q, k, v, z)
    and in_proj_ba d → 2 · heads; Qwen3.5's in_proj_qkv d → conv channels, in_proj_z d → inner, in_proj_b and
    in_proj_a d → heads each (core.model.GDN_IN_PROJ's order); then out_proj inner → d."""
    mixer = model.mixer
    assert mixer is not None
    d, inner, conv, heads = model.hidden_size, mixer.inner, mixer.conv_dim, mixer.heads
    if mixer.kind != "gated_deltanet":
        return [float(fi * fo) for fi, fo in model.mixer_shapes().values()]
    widths = {
        "in_proj_qkvz": conv + inner,
        "in_proj_ba": 2 * heads,
        "in_proj_qkv": conv,
        "in_proj_z": inner,
        "in_proj_b": heads,
        "in_proj_a": heads,
    }
    return [float(d * widths[name]) for name in GDN_IN_PROJ[model.family]] + [float(inner * d)]


def _gated_q(model: ModelSpec) -> float:
    """Elements of a Gated DeltaNet hybrid's attention q_proj, whose output is the queries and their gate
    (transformers 5.25.0 Qwen3NextAttention / Qwen3_5Attention: d → 2 · heads · head_dim, as
    ModelSpec.hybrid_layer_params counts it); 0 for any other model."""
    if model.recurrent_mixer != "gated_deltanet":
        return 0.0
    return float(model.hidden_size * 2 * model.q_width)


def _ipg_bucket(rank: _Rank, bucket_el: float) -> Term:
    """The first ipg reduce bucket of ZeRO-1/2 (``buf_0``), in the 16-bit gradient dtype.

    Its full ``reduce_bucket_size``, even for a LoRA run with fewer trainable elements
    (deepspeedai/DeepSpeed edaa7221, stage_1_and_2.py ``setup_buckets``:
    ``torch.empty(int(self.reduce_bucket_size), dtype=self.dtype, ...)``)."""
    g = rank.dt.grad
    return Term("ipg reduce bucket", f"{sci(bucket_el)} × {g:g} B", bucket_el * g)


def _zero1_buckets(rank: _Rank, bucket_el: float) -> list[Term]:
    """The ipg bucket(s) DeepSpeed ZeRO-1 allocates in the backward, though it reduces only at the step.

    deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/stage_1_and_2.py: ``__init__`` registers the
    gradient hooks (``create_gradient_handling_hooks``) when ``partition_gradients or overlap_comm or
    use_grad_accum_attribute or contiguous_gradients``, so under stage 1 too; each hook runs
    ``process_gradients``, whose ``setup_buckets`` (when not ``ready_for_gradients``) allocates ``buf_0``:
    ``torch.empty(reduce_bucket_size, dtype=self.dtype)``, the 16-bit dtype, and ``buf_1`` with
    ``overlap_comm`` (:func:`_overlap_bucket`). Stage 1 copies gradients into it
    (``reduce_independent_p_g_buckets_and_remove_grads``, through
    ``reduce_ready_partitions_and_remove_grads``) only when ``is_gradient_accumulation_boundary()``,
    and frees it only there: ``_release_ipg_buffers`` runs from ``independent_gradient_partition_epilogue``,
    which stage 1 reaches through ``reduce_gradients``, called by engine.py ``allreduce_gradients`` at the
    boundary only. So the bucket the first micro-batch's first hook allocates is held, with
    ``ready_for_gradients`` still set, until the boundary's backward ends.

    ``contiguous_gradients`` is not a plan setting: this is DeepSpeed's default (True, zero/config.py;
    ``cpu_offload`` forces it on), as the DeepSpeed export writes it. Without it no bucket is allocated."""
    if not rank.trainable:
        return []
    return [_ipg_bucket(rank, bucket_el), *_overlap_bucket(rank, bucket_el)]


def _overlap_bucket(rank: _Rank, bucket_el: float) -> list[Term]:
    """The second ipg bucket DeepSpeed ZeRO-1/2 allocates with ``overlap_comm`` (parallel.zero_overlap_comm).

    deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/zero/stage_1_and_2.py ``setup_buckets``, run by
    the first gradient hook of each backward: ``buf_0`` of ``reduce_bucket_size`` elements in the
    16-bit dtype under ``contiguous_gradients`` (on by default), and "Use double buffers to avoid data
    access conflict when overlap_comm is enabled": ``buf_1``, the same size, so one bucket fills while
    the other reduces on ``reduction_stream``; both freed after the backward
    (``_release_ipg_buffers``). Only ``buf_1`` is overlap_comm's own. (The "4.5x the bucket sizes"
    of DeepSpeed's docs predates these buffers: nothing else is allocated for the overlap.)"""
    if not zero_overlap_comm(rank.plan) or not rank.trainable:
        return []
    g = rank.dt.grad
    return [Term("second ipg reduce bucket (overlap_comm)", f"{sci(bucket_el)} × {g:g} B", bucket_el * g)]


def _zero3_kept_block(rank: _Rank) -> float:
    """Elements of one decoder block ZeRO-3 keeps gathered through a checkpointed block's backward.

    DeepSpeed gathers a module's own parameters when it runs and, on release, keeps those that are
    used again within ``stage3_max_reuse_distance`` elements of the recorded trace
    (partitioned_param_coordinator.py at edaa7221, ``__params_to_release``: "if we see any of the
    candidate parameters to be released reoccur while doing this, remove them from the set of
    parameters to release"). Under activation checkpointing a block's modules run in its recomputed
    forward and again, in reverse, in its backward: each is used again within the rest of the block,
    less than the default 1e9 elements for a block that size, so the block stays gathered between the
    two, capped by ``stage3_max_live_parameters`` (the coordinator fetches no more than that)."""
    plan = rank.plan
    if not plan.checkpointing or not rank.stage.layers:
        return 0.0
    units = plan.model.hybrid_layer_params()  # a hybrid: its largest layer (core.plan allows it no TP / EP)
    block = (
        float(max(params for _, params in units))
        if units
        else block_params_per_rank(plan.model, rank.lay.tensor_parallel, rank.lay.expert_parallel)
        * plan.model.params_scale
    )
    if block > plan.parallel.zero3_max_reuse_elements:
        return 0.0
    return float(min(block, plan.parallel.zero3_max_live_elements))


def _zero_offloaded(rank: _Rank, state: RankState) -> RankState:
    """ZeRO-Offload / ZeRO-Infinity: what moves to the host, and the GPU buffers it leaves behind."""
    plan, trainable, dp, g = rank.plan, rank.trainable, rank.dp, rank.dt.grad
    par = plan.parallel
    strategy = par.strategy
    host = [*state.optim, *state.step]
    if strategy is Strategy.ZERO3:
        # stage3.py (v0.19.6, edaa7221) line 328: ``self.device`` is the CPU when the optimizer
        # is offloaded, and lines 742-746 allocate ``grad_partitions_flat_buffer`` there
        # (pinned): the gradient partition leaves the GPU; only the ipg bucket stays.
        partition, bucket = state.persistent
        host.insert(0, replace(partition, label=partition.label + ", pinned"))
        state = replace(state, persistent=[bucket])
    if par.offload is Offload.PARAMS and strategy is Strategy.ZERO3:
        # offload_param moves the partitions (parameters' data); the quantisation state stays (_zero_stage).
        on_gpu = [t for t in state.weights if "quantisation state" in t.label]
        host = [*(t for t in state.weights if t not in on_gpu), *host]
        note = "ZeRO-Infinity offload_param: 16-bit partitions, float32 master and state on the host."
        return replace(state, weights=on_gpu, optim=[], step=[], host=host, notes=(*state.notes, note))
    if strategy is Strategy.ZERO2 and trainable:
        # stage_1_and_2.py (v0.19.6, edaa7221) ``copy_grads_in_partition``: with cpu_offload
        # each reduced gradient is copied straight into the float32 host partition
        # (``async_inplace_copy_grad_to_fp32_buffer_from_gpu``) and ``grads_in_partition``
        # is never allocated; the GPU keeps ``temp_grad_buffer_for_gpu_offload`` (lines
        # 591-593: ``largest_param_numel`` elements in the 16-bit dtype) for the
        # accumulation round trip, made at start-up.
        largest = min(_largest_module(plan, rank.lay, rank.stage) * plan.model.shape_scale, trainable)
        temp = Term("16-bit gradient staging buffer (largest parameter)", f"{sci(largest)} × {g:g} B", largest * g)
        state = replace(state, grads=[], grads_in_backward=[], persistent=[temp])
    # stage_1_and_2.py keeps a 16-bit copy of the partition on the host to stage the updated
    # parameters back (param_buffer_of_bit16_for_cpu_offload_groups).
    if strategy is not Strategy.ZERO3 and trainable:
        host.append(Term("16-bit partition staging buffer", f"T ÷ {dp:g} × 2 B", trainable / dp * 2))
    notes = [
        *state.notes,
        _offload_note(plan),
    ]
    if par.offload is Offload.PARAMS:
        notes.append("DeepSpeed offloads parameters only at stage 3 (offload_param): stages 1-2 move the optimizer.")
    return replace(state, optim=[], step=[], host=host, notes=tuple(notes))


def _offload_note(plan: Plan) -> str:
    if not deepspeed_bf16_master(plan):
        return "ZeRO-Offload: float32 master, optimizer state and float32 gradients on the host (DeepSpeedCPUAdam)."
    states = "bf16" if deepspeed_bf16_states(plan) else "float32"
    return f"ZeRO-Offload: bf16 master and gradients and {states} optimizer state on the host (DeepSpeedCPUAdam)."


def _largest_module(plan: Plan, lay: Layout, stage: Stage) -> float:
    """Elements of the largest module ZeRO-3 gathers on this rank (a projection, or the
    embedding / head on the first / last stage)."""
    model, tp = plan.model, lay.tensor_parallel
    shapes = model.linear_shapes()
    linear = max(fi * fo for fi, fo in shapes.values()) / tp
    if model.num_experts > 1:  # the rank's experts (÷ EP) as one grouped module
        linear = model.num_experts * model.hidden_size * model.intermediate_size * 2 / tp / lay.expert_parallel
    vocab = model.vocab_size * model.hidden_size / tp if stage.embedding or stage.head else 0.0
    return max(linear, _gated_q(model) / tp, _largest_mixer_matrix(model), vocab)


def _largest_mixer_matrix(model: ModelSpec) -> float:
    """Elements of a hybrid's largest recurrent-mixer matrix (0 for any other model): a Mamba-2 mixer's in_proj
    (ModelSpec.mixer_shapes), or a Gated DeltaNet layer's largest input projection (transformers 5.25.0:
    Qwen3-Next's in_proj_qkvz, d → 2·Hk·dk + 2·H·dv; Qwen3.5's in_proj_qkv, d → 2·Hk·dk + H·dv)."""
    if model.recurrent_mixer == "gated_deltanet":
        keys = 2 * model.recurrent_groups * model.recurrent_state
        # in_proj_qkvz (Qwen3-Next) carries the gate z beside v; in_proj_qkv (Qwen3.5) does not: GDN_IN_PROJ
        values = model.recurrent_inner * (2 if "in_proj_qkvz" in GDN_IN_PROJ.get(model.family, ()) else 1)
        return float(model.hidden_size * (keys + values))
    return float(max((fi * fo for fi, fo in model.mixer_shapes().values()), default=0))


# --- offload without sharding ------------------------------------------------------------
def _offloaded(plan: Plan, state: RankState) -> RankState:
    """DDP (or one GPU) with offload: the optimizer state and its step move to the host;
    parameters cannot leave a replica that computes with them."""
    if plan.parallel.offload is Offload.NONE:
        return state
    notes = [_OPTIM_NOTE]
    if plan.parallel.offload is Offload.PARAMS:
        notes.append("Parameter offload needs a sharded strategy (FSDP or ZeRO-3): only the optimizer state moves.")
    return replace(state, optim=[], host=state.optim, step_temporary=False, notes=tuple(notes))


def rank_copies(plan: Plan, lay: Layout, stage: Stage, copies: list[Term]) -> list[Term]:
    """Autocast's 16-bit copies of the weights a rank computes with: its share of them;
    none when FSDP2 already gathers the parameters in 16 bits (MixedPrecisionPolicy)."""
    par = plan.parallel
    if par.strategy is Strategy.FSDP and lay.state_shards > 1 and MP_BYTES.get(par.fsdp_param_dtype, 4.0) == 2.0:
        return []
    return _scaled(copies, weight_share(plan, stage, lay.tensor_parallel), _split_label(lay, stage))


_MP_DTYPE: Final = {MpDtype.FP32: Dtype.FP32, MpDtype.BF16: Dtype.BF16, MpDtype.FP16: Dtype.FP16}


def compute_plan(plan: Plan) -> Plan:
    """The plan as the rank computes it. FSDP2's ``MixedPrecisionPolicy(param_dtype=...)``
    gathers every parameter in that dtype, so the forward runs in it whatever dtype the
    sharded parameters are stored in (``_fsdp_param.py``: the unsharded parameter is
    created in ``param_dtype``): activations, logits and their copies follow it.

    On one GPU too: ``fully_shard`` on a one-rank mesh still gathers (copies) each unit's
    parameters in ``param_dtype`` (measured: tools/measure/fsdp2_one_rank_check.py), and a trainer that
    shards on every world size runs so (PrimeIntellect-ai/prime-rl 8718eb14 trainer/model.py
    ``setup_model`` calls ``setup_fsdp`` whatever the world size). Where the plan names no param dtype
    (``stored``, the default) nothing changes."""
    par = plan.parallel
    if par.strategy is not Strategy.FSDP or par.fsdp_param_dtype is MpDtype.STORED:
        return plan
    dtype = _MP_DTYPE[par.fsdp_param_dtype]
    if plan.quantised_base:
        return plan
    changes = {"weight_dtype": dtype, "base_dtype": dtype, "adapter_dtype": dtype}
    if all(getattr(plan, k) is v for k, v in changes.items()):
        return plan
    return plan.with_changes(**changes)
