"""Where the model and the batch sit on a multi-GPU plan: degrees, pipeline stages, and
how many parameters, layers and micro-batches one rank of each kind holds.

Pure arithmetic on the plan, shared by the memory model (:mod:`core.training.ranks`) and
the communication model (:mod:`core.parallel.comm`). Sources:

- Tensor parallel (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053; megatron/core
  tensor_parallel/layers.py ColumnParallelLinear / RowParallelLinear /
  VocabParallelEmbedding): q/k/v, gate/up split by columns, o/down by rows, embedding and
  output head by vocabulary rows, each ÷ t; norms (and the MoE router) replicated. The
  bias of a row-parallel layer is replicated (added after the all-reduce).
- Pipeline parallel (Megatron-LM commit d98e8a64, megatron/core/transformer/
  transformer_block.py get_num_layers_to_build: L ÷ (pp·v) blocks per model chunk, which
  Megatron requires to divide unless the first / last stage is given its own count;
  torchtitan's splitter gives the remainder to the first chunks, as here). The first stage
  holds the embedding, the last the final norm, the head and the loss. ``parallel.stage_split``
  "compute" deals the blocks as nanotron's build_model does instead, by their compute cost with
  the head's (core.pipeline): fewer blocks on the last stage.
- Micro-batches in flight on a stage at the peak (Narayanan et al. 2021, arXiv:2104.04473
  §2.2; Megatron-LM megatron/core/pipeline_parallel/schedules.py: the warm-up forwards
  num_warmup_microbatches, then one more before the first backward): GPipe holds all m
  micro-batches; 1F1B holds min(pp − i, m) on stage i; interleaved 1F1B holds
  min(2·(pp − i − 1) + (v − 1)·pp + 1, m·v) model-chunk micro-batches (with the default
  microbatch_group_size_per_vp_stage = pp), each 1/v of the stage's blocks, which on the
  first stage is pp·(1 + (pp − 1)/(pp·v)) stages' worth (Korthikanti et al. 2022,
  arXiv:2205.05198 §4.2.3).
- Expert parallel (Megatron-LM d98e8a64, megatron/core/parallel_state.py
  initialize_model_parallel: the experts' grid is expert TP × EP × expert DP × PP over the
  same GPUs, expert TP = TP unless set, in "tp-cp-ep-dp-pp" order; megatron/core/transformer/
  moe/moe_layer.py: each rank builds num_moe_experts ÷ EP local experts): a MoE block's
  expert matrices are ÷ (TP · EP) on a rank, the experts' row-parallel biases ÷ EP; the
  attention, router, norms and a shared expert as without EP. The experts' gradients and
  optimizer state are sharded over the expert-data-parallel group, DP · CP ÷ EP ranks
  (megatron/core/distributed: the expert parameters' own buffers and distributed-optimizer
  instance over the expert-data-parallel group), so a rank's sharded state is the same
  dense ÷ (DP · CP) + experts ÷ EP ÷ (DP · CP ÷ EP) as without EP (Layout.state_shards_of).
- Hybrid sharding, HSDP (PyTorch FSDP2 at pytorch/pytorch 8fc2039d, torch/distributed/fsdp/
  _fully_shard/_fsdp_collectives.py foreach_reduce: the gradients are reduce-scattered over the
  shard group, then the shard is all-reduced over the replicate group, "not `None` iff HSDP";
  pytorch/torchtitan b5bcd76 torchtitan/distributed/parallel_dims.py: meshes ("dp_replicate",
  "fsdp") with fsdp = dp_shard × cp, torchtitan/distributed/fsdp.py: "HSDP when the
  data-parallel mesh carries a replicate axis"): a rank's parameters, gradients and optimizer
  state are ÷ (DP · CP ÷ R), its shard group; each of the R replicas holds the whole state; a
  unit gathered for compute is the same whole unit as under FSDP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Final

from core.catalogue import Generation, generation
from core.dtypes import DTYPE_BYTES, MP_BYTES, Dtype, MpDtype
from core.inputs import megatron_grad_buffer
from core.memo import last_answer
from core.model import ModelSpec
from core.params import param_counts
from core.pipeline import compute_split
from core.plan import (
    Float8,
    FsdpUnits,
    GradSync,
    Method,
    Offload,
    Parallelism,
    PipelineSchedule,
    PipelineSplit,
    Plan,
    Stack,
    Strategy,
)

_MEGATRON: Final = Stack.MEGATRON

__all__ = ["Holding", "Layout", "Stage", "block_params_per_rank", "holding", "layout", "stage_layer_counts"]


@dataclass(frozen=True)
class Stage:
    """One kind of rank: a pipeline stage (every stage with pp = 1 is the whole model)."""

    index: int  # 0-based pipeline stage
    label: str  # "every rank", "stage 1 of 4 (first)", ...
    layers: int  # decoder blocks one rank of this stage holds (all its model chunks)
    first_layer: int  # the stage's lowest block (of its first model chunk)
    embedding: bool  # holds the input embedding
    head: bool  # holds the final norm, the output head and the loss
    in_flight: float  # micro-batches of the whole stage whose activations coexist at the peak
    ranks: int  # how many GPUs are ranks of this kind (dp · tp · cp per stage, × the middle stages)


@dataclass(frozen=True)
class Layout:
    world: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    virtual_stages: int
    sequence_parallel: bool  # the norm/dropout region is split too (only with tp > 1)
    micro_batches: int  # per optimizer step and pipeline (the plan's grad_accum)
    stages: tuple[Stage, ...]  # the distinct kinds of rank: first, middle (the largest), last

    @property
    def model_split(self) -> int:
        """Ranks one copy of the model is spread over: tp · pp · cp."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    engine: bool = False  # one GPU, but a framework holds the state (ZeRO, or offload)
    expert_parallel: int = 1  # the experts of each MoE layer ÷ EP, within the DP × CP ranks
    shard_group: int = 1  # the ranks the state is sharded over (Parallelism.fsdp_shards: DP · CP ÷ HSDP replicas)

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def ranked(self) -> bool:
        """The memory is one rank's as :mod:`core.parallel.state` holds it: more than one
        GPU, or one GPU whose state a framework holds (a ZeRO stage, or offload). A
        single-GPU DDP / FSDP run without offload is the plain run (see ``_layout``)."""
        return self.world > 1 or self.engine

    @property
    def state_shards(self) -> int:
        """Ranks that hold the same parameters and reduce their gradients together: data ×
        context parallel. Context-parallel ranks see different tokens of the same sequences,
        so their gradients are summed and sharded like data-parallel ones (torchtitan commit
        b5bcd76c, torchtitan/distributed/parallel_dims.py: the "fsdp" mesh is dp_shard × cp;
        Megatron-LM's distributed optimizer uses the data-parallel group with CP). Under HSDP
        the state is sharded over one replica's ranks only, DP · CP ÷ R (Parallelism.fsdp_shards)."""
        return self.shard_group

    def state_shards_of(self, share_split: float, share_whole: float) -> float:
        """The ranks a rank's state is sharded over, as one divisor of what it holds.

        ``share_split`` is the rank's share of the parameters with the experts ÷ EP and
        ``share_whole`` without: the dense part is sharded over DP · CP ranks and the rank's
        experts over DP · CP ÷ EP, so the shard is ``share_whole ÷ (DP · CP)`` of the model,
        ``share_split`` ÷ this. Without expert parallelism it is :attr:`state_shards`."""
        if self.expert_parallel == 1 or not share_split:
            return self.state_shards
        return self.state_shards * share_split / share_whole


def stage_layer_counts(num_layers: int, stages: int, chunks_per_stage: int = 1) -> tuple[int, ...]:
    """Blocks per pipeline stage: L ÷ (stages · chunks) per chunk, the remainder one each to
    the first chunks (chunk c sits on stage c mod stages, as interleaving deals them)."""
    chunks = stages * chunks_per_stage
    base, extra = divmod(num_layers, chunks)
    per_stage = [0] * stages
    for c in range(chunks):
        per_stage[c % stages] += base + (1 if c < extra else 0)
    return tuple(per_stage)


def in_flight(par: Parallelism, stage: int, micro_batches: int) -> float:
    """Micro-batches of a whole stage whose saved activations coexist (see the module doc)."""
    pp, m = par.pipeline_parallel, micro_batches
    if pp == 1:
        return 1.0
    if par.schedule is PipelineSchedule.GPIPE:
        return float(m)
    if par.schedule is PipelineSchedule.ONE_F_ONE_B or par.virtual_stages == 1:
        return float(min(pp - stage, m))
    v = par.virtual_stages
    warmup = 2 * (pp - stage - 1) + (v - 1) * pp
    return min(warmup + 1, m * v) / v


def float8_recipe(float8: Float8, gpu_id: str) -> Float8:
    """The float8 recipe the linears run on the card: Transformer Engine's MXFP8 only where the card
    has block-scaled fp8 GEMMs (Blackwell: TE's MXFP8BlockScaling needs SM100+); on another card TE
    runs it as its per-tensor recipe ("te"). The one home of that rule for the step time
    (core.training.speed) and the cached fp8 weights (core.parallel.state). torchao's MX linears
    have no such fallback: torchtitan's MX converter asserts ``has_cuda_capability(10, 0)``
    ("MXFP8 is only supported on SM100", pytorch/torchtitan 6fc499f6
    torchtitan/components/quantization/mx.py), so elsewhere no fp8 recipe runs (NONE: the step is
    timed at the 16-bit rate and the plan says why, core.training.compute)."""
    if float8 in _MX and generation(gpu_id) is not Generation.BLACKWELL:
        return _MX[float8]
    return float8


# The MX recipes and what runs instead on a card without block-scaled fp8 GEMMs (float8_recipe).
_MX: Final = {Float8.TE_MXFP8: Float8.TE, Float8.MXFP8: Float8.NONE}


def fsdp_no_sync(par: Parallelism, grad_accum: int) -> bool:
    """Whether an FSDP rank holds its gradients unsharded through the accumulation, reducing them
    only in the last micro-batch's backward (``parallel.grad_sync``; a pipeline does so anyway,
    :func:`fsdp_held_through_step`). The loop's default ("auto") is what accelerate and the HF
    Trainer give: ``Accelerator.accumulate`` enters ``Accelerator.no_sync(model)`` for every
    micro-batch but the last (``contextlib.nullcontext() if self.sync_gradients else
    self.no_sync(m)``; huggingface/accelerate v0.28.0 ``accelerator.py``), which enters FSDP1's
    ``no_sync()``; ``GradientAccumulationPlugin(sync_each_batch=True)`` (v0.28.0 onwards, 60bfdaa9)
    turns it off. An FSDP2 module has no ``no_sync``: accelerate before v1.11.0 finds none and
    reduces every micro-batch (from v1.11.0, ec92b1af, it calls ``set_requires_gradient_sync(False)``:
    "no_sync" says so), as torchtitan does. The plan's FSDP1 is ``parallel.fsdp1_wrap``."""
    if par.strategy is not Strategy.FSDP or grad_accum <= 1 or fsdp_held_through_step(par):
        return False
    if par.grad_sync is GradSync.AUTO:
        return par.fsdp1_wrap
    return par.grad_sync is GradSync.NO_SYNC


def fsdp_held_through_step(par: Parallelism) -> bool:
    """FSDP under pipeline parallel keeps every unit gathered through the step and its gradients
    unsharded until the last micro-batch: torchtitan wraps each unit with
    ``reshard_after_forward=False`` when pipeline parallel is on (pytorch/torchtitan 9dec370,
    ``torchtitan/parallelisms/parallelize_llama.py`` apply_fsdp; b5bcd76
    ``torchtitan/distributed/fsdp.py``: "default" = not pp_enabled), and
    ``torch.distributed.pipelining`` runs every micro-batch's backward but the last with
    ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)``
    (pytorch/pytorch 88fa1e71, ``torch/distributed/pipelining/stage.py``,
    ``_PipelineStageBase.backward_maybe_with_nosync``). The memory (core.parallel.state) and
    the traffic (core.parallel.comm: one gather and one reduce-scatter per step) both read it."""
    return par.strategy is Strategy.FSDP and par.pipeline_parallel > 1


def fsdp_reduce_bytes(par: Parallelism, grad_bytes: float) -> float:
    """Bytes per element FSDP2 reduce-scatters gradients in: ``MixedPrecisionPolicy.reduce_dtype``,
    which falls back to ``param_dtype`` when unset (the MixedPrecisionPolicy docstring in
    torch/distributed/fsdp/_fully_shard/_fsdp_api.py: the reduction then uses the compute dtype),
    and with neither set the gradients' own dtype. The memory (core.parallel.state) and the
    traffic (core.parallel.comm) both read it."""
    for dtype in (par.fsdp_reduce_dtype, par.fsdp_param_dtype):
        if dtype is not MpDtype.STORED:
            return MP_BYTES[dtype]
    return grad_bytes


def no_sync_grad_bytes(par: Parallelism, grad_bytes: float) -> float:
    """Bytes per element of the unsharded gradient an FSDP rank holds under no_sync
    (:func:`fsdp_no_sync`): FSDP1 keeps it in the dtype autograd computed it in, the gathered
    ``MixedPrecision.param_dtype``; FSDP2 upcasts it to its reduce dtype (:func:`fsdp_reduce_bytes`).
    The memory (core.parallel.state) and the accumulation pass's time (core.training.speed) both
    read it."""
    if par.fsdp1_wrap:
        return MP_BYTES.get(par.fsdp_param_dtype, grad_bytes)
    return fsdp_reduce_bytes(par, grad_bytes)


def megatron_grad_bytes(plan: Plan, grad_bytes: float, compute_bytes: float) -> float:
    """Bytes per element of Megatron-Core's gradient buffer, which its DDP reduce-scatters or
    all-reduces in place: ``grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype``
    (NVIDIA/Megatron-LM d98e8a64, megatron/core/distributed/param_and_grad_buffer.py
    ``_ParamAndGradBuffer`` / ``group_params_for_buffers``), where ``param.dtype`` is the 16-bit
    dtype Float16Module casts the model to (the plan's compute dtype). On, or off the Megatron
    stack's DDP / distributed optimizer, the gradients' own dtype, as before. On, the buffer is
    float32 whatever dtype the parameters are stored in: a 16-bit model's (a ``--bf16`` run's
    Float16Module) buffer is 4 B a gradient, not its parameters' 2 B. The memory
    (core.parallel.state) and the traffic (core.parallel.comm) both read it."""
    if not megatron_grad_buffer(plan):
        return grad_bytes
    if plan.parallel.grad_reduce_in_fp32:
        return DTYPE_BYTES[Dtype.FP32]
    return min(grad_bytes, compute_bytes)


def _stage_label(i: int, pp: int) -> str:
    if pp == 1:
        return "every rank"
    where = "first" if i == 0 else "last" if i == pp - 1 else "middle"
    return f"stage {i + 1} of {pp} ({where})"


@lru_cache(maxsize=256)
def _layout(par: Parallelism, num_layers: int, micro_batches: int, split: tuple[int, ...] | None = None) -> Layout:
    """``split``: the blocks on each stage where the plan deals them by compute (core.pipeline), else even."""
    pp = par.pipeline_parallel
    counts = split or stage_layer_counts(num_layers, pp, par.virtual_stages)
    per_stage_ranks = par.world_size // pp
    starts = [sum(counts[:i]) for i in range(pp)]
    every = [
        Stage(
            index=i,
            label=_stage_label(i, pp),
            layers=counts[i],
            first_layer=starts[i],
            embedding=i == 0,
            head=i == pp - 1,
            in_flight=in_flight(par, i, micro_batches),
            ranks=per_stage_ranks,
        )
        for i in range(pp)
    ]
    kinds = [every[0]]
    if pp > 2:
        # Middle stages differ only in blocks and micro-batches in flight: the second stage
        # has the most of both (the remainder goes to early chunks, in-flight falls with i),
        # so it stands for them all.
        label = f"stages 2-{pp - 1} of {pp} (middle)" if pp > 3 else every[1].label
        # Split by compute, a later middle stage can hold one block more than the second: the middle
        # ranks are then taken at the most blocks of any with the second's micro-batches in flight.
        most = max(stage.layers for stage in every[1:-1])
        kinds.append(replace(every[1], label=label, layers=most, ranks=(pp - 2) * per_stage_ranks))
    if pp > 1:
        kinds.append(every[-1])
    return Layout(
        world=par.world_size,
        data_parallel=par.data_parallel,
        tensor_parallel=par.tensor_parallel,
        pipeline_parallel=pp,
        context_parallel=par.context_parallel,
        virtual_stages=par.virtual_stages,
        sequence_parallel=par.sequence_parallel and par.tensor_parallel > 1,
        micro_batches=micro_batches,
        stages=tuple(kinds),
        engine=_engine_on_one_gpu(par),
        expert_parallel=par.expert_parallel,
        shard_group=par.fsdp_shards,
    )


def _engine_on_one_gpu(par: Parallelism) -> bool:
    """Whether a one-GPU run still goes through its framework's state handling.

    DeepSpeed runs its ZeRO optimizer whatever the world size (deepspeedai/DeepSpeed
    v0.19.6, commit edaa7221, ``runtime/engine.py _configure_zero_optimizer``: the stage
    alone picks ``DeepSpeedZeroOptimizer`` / ``DeepSpeedZeroOptimizer_Stage3``; with one
    rank the partition is the whole model), so a ZeRO stage on one GPU keeps the float32
    master, float32 Adam state and its gradient buffers. Offload on one GPU moves the
    optimizer state to the host as on many (ZeRO-Offload, FSDP2 ``CPUOffloadPolicy``, or
    a CPU optimizer beside DDP). DDP without offload on one GPU is the plain run; FSDP2 on
    one rank is also modelled as the plain run: its sharded parameters are the whole
    model, and the per-unit all-gather buffers it still allocates are not modelled."""
    return par.offload is not Offload.NONE or par.strategy.deepspeed


@last_answer  # read several times per estimate: a pure function of the frozen plan (core.memo)
def layout(plan: Plan) -> Layout:
    """The plan's layout (cached: the same Parallelism, depth and accumulation give the same
    layout; and by the plan's identity, which spares hashing its Parallelism on every reading).
    ``layout(plan).stages`` are the distinct kinds of rank; ``holding(plan, stage)`` what one of
    them holds."""
    par = plan.parallel
    split = None
    if par.pipeline_parallel > 1 and par.stage_split is PipelineSplit.COMPUTE:
        split = compute_split(plan.model, par.pipeline_parallel)[0]
    return _layout(par, plan.model.num_layers, plan.workload.grad_accum, split)


# --- parameters per rank -------------------------------------------------------------
def block_params_per_rank(model: ModelSpec, tp: int, ep: int = 1) -> float:
    """One decoder block's parameters on one tensor-parallel rank: the split matrices (and
    the biases of column-parallel ones) ÷ t; norms, per-head q/k norms, the router and
    row-parallel biases replicated. With expert parallel ``ep`` the rank holds E ÷ ep of the
    experts: their matrices ÷ (t · ep), their row-parallel biases ÷ ep."""
    if ep > 1 and model.num_experts > 1:
        on_rank = _experts_per_block(model, tp)
        return block_params_per_rank(model, tp) - on_rank + on_rank / ep
    replicated = model.norms_per_layer * model.norm_params() + model.router_params()
    if model.qk_norm == "head":
        replicated += model.qk_norm_params()
    if model.o_bias:
        replicated += model.hidden_size
    if model.mlp_bias:
        replicated += model.hidden_size * model.num_experts
    if model.shared_expert_size:
        replicated += model.hidden_size  # the shared expert's sigmoid gate (d → 1)
    split = model.layer_params() - replicated
    return replicated + split / tp


def fsdp_block_units(model: ModelSpec, tp: int, ep: int = 1) -> tuple[float, float | None]:
    """(the largest decoder-layer unit FSDP gathers on a rank, every layer's parameters together; None: ``layers``
    times the largest, as on a model whose layers are all alike). A hybrid's layers are of two or three kinds
    (ModelSpec.hybrid_layer_params: a Mamba-2 or Gated DeltaNet layer beside an attention one), each its own unit
    (``_no_split_modules``), so its largest unit is its largest layer and the units add up to its exact count,
    not ``params_scale`` times an attention block (core.plan allows only data parallelism for it: ``tp``, ``ep``
    1). Any other model: :func:`block_params_per_rank` scaled to a typed P."""
    kinds = model.hybrid_layer_params()
    if kinds:
        return float(max(params for _, params in kinds)), float(sum(count * params for count, params in kinds))
    return block_params_per_rank(model, tp, ep) * model.params_scale, None


@dataclass(frozen=True)
class UnitOrder:
    """A hybrid's FSDP units where its layer order is known (ModelSpec.layer_pattern): the decoder layers'
    parameters that meet, by module order.

    torch 2.13.0 ``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``: ``pre_backward`` gathers the
    unit and ``_backward_prefetch`` gathers the one before it in ``post_forward_order`` (``curr_index - 1``),
    so while layer i runs its backward layer i − 1 is gathered beside it. The root's post-forward comes last,
    so as the backward starts the root's ``pre_backward`` prefetches the last layer (measured: one rank's
    all-gather buffer at that peak is the last layer's unit, benchmarks/parallel/hybrid/measured/
    hyb-fsdp-qwen35apart-*); the first layer runs its backward last."""

    first: float  # layer 0's unit: gathered as the backward ends
    pair: float  # the largest two neighbouring units together: what any block's backward holds at most
    last: float  # the last layer's unit: in flight as the forward ends and the backward starts
    units: tuple[float, ...] = ()  # every layer's unit in module order (core.parallel.state._block_moments)


def fsdp_unit_order(model: ModelSpec) -> UnitOrder | None:
    """:class:`UnitOrder` of a hybrid whose layers differ and whose order is known
    (ModelSpec.hybrid_unit_params); None: every unit is the largest, as before the order was kept."""
    units = model.hybrid_unit_params()
    if len(units) < 2:
        return None
    pair = max(a + b for a, b in pairwise(units))
    return UnitOrder(float(units[0]), float(pair), float(units[-1]), tuple(float(u) for u in units))


def _experts_per_block(model: ModelSpec, tp: int) -> float:
    """One block's routed experts on a tensor-parallel rank before expert parallel splits
    them: their matrices ÷ t, their row-parallel biases whole."""
    experts = model.num_experts * model.expert_mlp_params()
    expert_bias = model.hidden_size * model.num_experts if model.mlp_bias else 0
    return (experts - expert_bias) / tp + expert_bias


def outside_params(model: ModelSpec, stage: Stage, tp: int) -> float:
    """Embedding (first stage) and final norm + head (last stage) on one rank: the vocabulary
    rows ÷ t. A tied head is the embedding: with pp > 1 the last stage keeps its own copy
    (Megatron's shared embedding weight, synchronised by an all-reduce)."""
    n = 0.0
    if stage.embedding:
        n += model.embedding_params() / tp
    if stage.head:
        n += model.norm_params() + model.vocab_size * model.hidden_size / tp
        if model.tie_embeddings and stage.embedding:
            n -= model.vocab_size * model.hidden_size / tp  # one tensor when both ends share a rank
    return n


def carved_ends(plan: Plan, stage: Stage, tp: int) -> tuple[float, float] | None:
    """(embedding, [final norm, head]) parameters on one rank, each an FSDP2 unit of its own, where
    the plan's layout carves them (``parallel.fsdp_units``, core.inputs.FsdpUnits); None where the
    root unit holds them (core.parallel.state._root_gathered).

    huggingface/accelerate v1.14.0 ``utils/fsdp_utils.py`` ``fsdp2_prepare_model`` (PR #4015): after
    the auto-wrapped blocks, ``fully_shard(input_embed, **fsdp2_kwargs)`` when untied, then
    ``fully_shard([final_norm, output_embed], reshard_after_forward=False)``; torchtitan b5bcd76c
    ``torchtitan/distributed/fsdp.py`` ``apply_fsdp_to_decoder`` the same. The carve changes what is
    held only where the embedding unit is resharded after its forward: a tied embedding joins
    [norm, head] (accelerate: ``tail_embed = input_embed``; torchtitan: one unit of all three), kept
    gathered the whole step as the root was; without resharding after the forward (or under a
    pipeline, which keeps every unit gathered: :func:`fsdp_held_through_step`) it stays gathered too.
    FSDP1 (``parallel.fsdp1_wrap``) has its own wrap."""
    par, model = plan.parallel, plan.model
    if par.fsdp_units is not FsdpUnits.CARVED or par.strategy is not Strategy.FSDP or par.fsdp1_wrap:
        return None
    if model.tie_embeddings or not par.reshard_after_forward or fsdp_held_through_step(par):
        return None
    if not (stage.embedding and stage.head):
        return None
    embedding = model.embedding_params() / tp
    return embedding, outside_params(model, stage, tp) - embedding


def stage_params(model: ModelSpec, stage: Stage, tp: int, ep: int = 1) -> float:
    """Parameters one rank of ``stage`` holds before any data-parallel sharding."""
    return stage.layers * block_params_per_rank(model, tp, ep) + outside_params(model, stage, tp)


def dispatched_copies(plan: Plan) -> float:
    """The routed token copies a rank's MoE layer all-to-alls per micro-batch under expert
    parallel, N·k (N the tokens Megatron-Core's alltoall dispatcher receives: ÷ CP, and ÷ TP with
    sequence parallel; balanced routing); 0 without expert parallel. Times d and the element
    bytes, one all-to-all buffer: the memory (core.training.detailed) and the time
    (core.parallel.comm) both take it from here."""
    par, model = plan.parallel, plan.model
    if par.expert_parallel <= 1 or model.num_experts <= 1:
        return 0.0
    return router_tokens(plan) * model.experts_per_token


def router_tokens(plan: Plan) -> float:
    """N, the tokens one rank's MoE router sees per micro-batch: ÷ CP, and ÷ TP with sequence parallel
    (what Megatron-Core's token dispatcher receives, ``routing_map.size(0)``)."""
    par = plan.parallel
    tokens = plan.workload.micro_batch * plan.workload.seq_len / par.context_parallel
    return tokens / par.tensor_parallel if par.sequence_parallel else tokens


def expert_capacity(copies: float, experts: int, factor: float) -> int:
    """Megatron-Core's capacity of one expert for a rank's ``copies`` = N·k routed copies (NVIDIA/Megatron-LM
    d98e8a64 megatron/core/transformer/moe/moe_utils.py ``get_capacity``: ``math.ceil((num_tokens / num_experts)
    * capacity_factor)``, called by token_dispatcher.py ``preprocess`` with ``num_tokens = routing_map.size(0) *
    moe_router_topk``); DeepSpeed-MoE's ``_capacity`` is the same ceil (deepspeedai/DeepSpeed edaa7221
    deepspeed/moe/sharded_moe.py)."""
    return math.ceil((copies / experts) * factor)


def capacity_padded(plan: Plan) -> bool:
    """Whether every expert's input is padded to its capacity (``parallel.pad_to_capacity``, Megatron's
    ``moe_pad_expert_input_to_capacity``: the dispatcher's ``drop_and_pad``): a Megatron MoE with a capacity factor."""
    par = plan.parallel
    return par.pad_to_capacity and par.capacity_factor > 0 and plan.model.num_experts > 1 and plan.stack is _MEGATRON


def expert_load(plan: Plan) -> float:
    """The busiest expert-parallel rank's routed token copies ÷ the mean over the EP ranks: what that rank's
    experts compute, receive in the all-to-all and keep for the backward, against balanced routing (1.0). The
    step waits for it.

    - Routing (``parallel.expert_imbalance``, under EP > 1): the plan's figure, at most EP (one rank holding
      every copy). Under EP 1 every rank runs every expert on its own tokens: 1.
    - Dropping (``parallel.capacity_factor`` on the Megatron stack; torchtitan and transformers are dropless):
      each expert takes at most C = :func:`expert_capacity` of each source rank's N·k copies, so a rank's
      E ÷ EP experts take at most E·C from the EP sources, E·C ÷ (N·k) = ~factor times the mean N·k.
    - Padding (``parallel.pad_to_capacity``): every expert's input is C rows from each source
      (token_dispatcher.py ``preprocess``: ``num_out_tokens = capacity * num_experts``), so every rank holds
      E·C ÷ (N·k) times the mean whatever the routing, under EP 1 too."""
    par, model = plan.parallel, plan.model
    if model.num_experts <= 1:
        return 1.0
    load = min(par.expert_imbalance, float(par.expert_parallel)) if par.expert_parallel > 1 else 1.0
    if par.capacity_factor <= 0 or plan.stack is not _MEGATRON:
        return load
    copies = router_tokens(plan) * model.experts_per_token
    capped = expert_capacity(copies, model.num_experts, par.capacity_factor) * model.num_experts / copies
    return capped if capacity_padded(plan) else min(load, capped)


def routed_rows(load: float) -> str:
    """How a formula names the routed rows the busiest rank's experts hold (:func:`expert_load`): "N·k" balanced,
    "1.3 × N·k" at a load of 1.3."""
    return "N·k" if load == 1.0 else f"{load:.4g} × N·k"


def received_tokens(tokens: float, experts: int, k: int, ep: int) -> float:
    """Distinct tokens a rank receives when each of the EP ranks' ``tokens`` goes once to every
    rank holding one of its k experts (DeepEP's dispatch), the k drawn uniformly without repeats:
    what Megatron-Core's moe_router_force_load_balancing draws (NVIDIA/Megatron-LM 55ac7082:
    router.py applies apply_random_logits, moe_utils.py RandomSTE's ``logits.clone().normal_()``,
    before the top-k), the balanced routing
    the plan assumes. A token misses a rank's E ÷ EP experts with probability C(E − E/EP, k) ÷ C(E, k)."""
    local = experts // ep
    miss = math.comb(experts - local, k) / math.comb(experts, k) if experts - local >= k else 0.0
    return tokens * ep * (1.0 - miss)


def _experts_split(plan: Plan) -> int:
    """The expert-parallel degree that applies: EP on a mixture of experts, else 1."""
    ep = plan.parallel.expert_parallel
    return ep if plan.model.num_experts > 1 else 1


def weight_share(plan: Plan, stage: Stage, tp: int, *, experts_split: bool = True) -> float:
    """The rank's fraction of the whole model's parameters (1 on a single GPU); with
    ``experts_split`` off, as if the experts were not split by EP (for the sharded state)."""
    ep = _experts_split(plan) if experts_split else 1
    if tp == 1 and plan.parallel.pipeline_parallel == 1 and ep == 1:
        return 1.0
    model = plan.model
    return stage_params(model, stage, tp, ep) / model.architecture_params()


def trainable_layers(plan: Plan, stage: Stage) -> int:
    """Blocks of the stage whose own weights (or adapters) train."""
    if not plan.gradless_layers:
        return stage.layers
    end = stage.first_layer + stage.layers
    return max(0, end - max(stage.first_layer, plan.gradless_layers))


def train_share(plan: Plan, stage: Stage, tp: int, *, experts_split: bool = True) -> float:
    """The rank's fraction of the trainable parameters (1 on a single GPU); ``experts_split``
    as in :func:`weight_share`. Adapters are taken as on every rank (not split by EP)."""
    ep = _experts_split(plan) if experts_split else 1
    if tp == 1 and plan.parallel.pipeline_parallel == 1 and (ep == 1 or plan.adapter_based):
        return 1.0
    model = plan.model
    if plan.method is Method.FULL:
        return weight_share(plan, stage, tp, experts_split=experts_split)
    if plan.adapter_based:  # adapters sit on every block, split with the matrix they adapt
        return stage.layers / model.num_layers / tp
    block = block_params_per_rank(model, tp, ep)
    head = model.head_params() / tp + model.norm_params() if stage.head else 0.0
    whole = _frozen_plan_trainable(plan)
    return (trainable_layers(plan, stage) * block + head) / whole if whole else 0.0


def _frozen_plan_trainable(plan: Plan) -> float:
    """A plan with frozen blocks: the parameters that train (its last blocks, final norm and head)."""
    model = plan.model
    layers = model.num_layers - plan.frozen_layers
    return layers * model.layer_params() + model.head_params() + model.norm_params()


def expert_shares(plan: Plan, stage: Stage, tp: int) -> tuple[float, float]:
    """The rank's routed experts under expert parallel, as fractions of the whole model's
    parameters and of the trainable ones — the part of :func:`weight_share` and
    :func:`train_share` that Megatron-Core reduces and shards over the expert-data-parallel
    group, not over DP · CP (see the module's notes); (0, 0) without expert parallel.
    Adapters are not split by EP (:func:`train_share`): an adapter plan's experts train nothing."""
    ep = _experts_split(plan)
    if ep == 1:
        return 0.0, 0.0
    model = plan.model
    block = _experts_per_block(model, tp) / ep
    weights = stage.layers * block / model.architecture_params()
    if plan.method is Method.FULL:
        return weights, weights
    if plan.adapter_based:
        return weights, 0.0
    whole = _frozen_plan_trainable(plan)
    return weights, (trainable_layers(plan, stage) * block / whole if whole else 0.0)


@dataclass(frozen=True)
class Holding:
    """Parameters one rank of a stage computes with (the TP/PP split, before any
    data-parallel sharding): what the collectives of :mod:`core.parallel.comm` move."""

    params: float  # every parameter of the rank's share of the model
    trainable: float  # of which get gradients (the all-reduce / reduce-scatter volume)
    block: float  # one decoder block on the rank: an FSDP2 unit, what one all-gather moves
    root: float  # embedding (first stage), final norm and head (last stage) on the rank


def holding(plan: Plan, stage: Stage) -> Holding:
    """What one rank of ``stage`` holds, in parameters (× bytes per element for bytes)."""
    model, tp = plan.model, plan.parallel.tensor_parallel
    counts = param_counts(plan)
    scale = model.params_scale
    return Holding(
        params=counts.total * weight_share(plan, stage, tp),
        trainable=counts.trainable * train_share(plan, stage, tp),
        block=block_params_per_rank(model, tp, _experts_split(plan)) * scale,
        root=outside_params(model, stage, tp) * scale,
    )
