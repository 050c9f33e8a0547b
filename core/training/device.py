"""What the card holds beyond the allocated peak: the caching allocator's reserve and the
runtime's own memory, each term with its arithmetic.

Three figures describe one training step on one rank:

- **allocated** (``torch.cuda.max_memory_allocated``): the tensors, phase by phase
  (:mod:`core.training.detailed`), and the libraries' workspaces taken from the caching allocator
  at the first matmul and kept for the process (:func:`allocator_workspaces`);
- **reserved** (``max_memory_reserved``, what the frameworks log as "reserved"): allocated
  plus what the caching allocator keeps in its segments — the rounding of the segments the
  weights were loaded into, the free blocks the activations leave in partly used segments,
  the caches of the communication streams (see :mod:`core.allocator`);
- **nvidia-smi** (what the card has given the process): reserved plus the CUDA context and
  NCCL's buffers, which PyTorch's allocator never sees.

The card runs out of memory when the process cannot get more from it: when the nvidia-smi
figure would pass the card's capacity. That figure is the one judged. Near the limit the
allocator frees its cached blocks and retries before it fails (``malloc`` in
CUDACachingAllocator.cpp), so the lowest the process can hold is the allocated peak plus
the runtime: the bottom of the range the verdict reads (:mod:`core.estimate`).

Every constant is in :mod:`core.runtime`, with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from core.allocator import AllocatorConfig, is_small, parse_alloc_conf
from core.breakdown import Bucket, BucketKey, Phase, Term, make_bucket
from core.catalogue import intra_link_of
from core.dtypes import DTYPE_BYTES
from core.errors import PlanError
from core.format import gb
from core.inputs import torch_before
from core.memo import Once, fills_fields
from core.plan import TE_FLOAT8, Method, PipelineSchedule, Plan, Stack, Strategy, TorchVersion
from core.runtime import (
    ALLOCATOR_FRAGMENTATION,
    CUBLAS_TRAINING_HANDLES,
    CUDA_CONTEXT_BYTES,
    CUDA_RUNTIME_NAMES,
    EXPANDABLE_FRAGMENTATION,
    MPS_LARGE_HEAP_BYTES,
    MPS_OPEN_HEAPS_BYTES,
    MPS_SMALL_HEAP_BYTES,
    MPS_XLARGE_HEAP_BYTES,
    NCCL_CHANNELS_FAST_LINK,
    NCCL_CHANNELS_PCIE,
    NCCL_CONNECTION_BYTES,
    NCCL_CONNECTIONS_PER_CHANNEL,
    NCCL_RING_CONNECTIONS_PER_CHANNEL,
    SEGMENT_ROUNDING_PER_TENSOR_BYTES,
    TE_GROUPED_GEMM_STREAMS,
    RuntimeNames,
    cublas_workspace,
    runs_mps,
    runtime_names,
    te_workspace,
)
from core.training.optimizer import head_adapter_tensor_sizes
from core.units import MiB

__all__ = [
    "NCCL_RUNTIME_CONNECT_TORCH",
    "CardTerms",
    "NcclGroup",
    "allocator_workspaces",
    "card_terms",
    "nccl_bytes",
    "nccl_groups",
    "weight_segments",
    "weight_tensors",
]

_FAST_LINKS = ("nvlink", "xgmi")


@fills_fields
@dataclass(frozen=True)
class CardTerms:
    """Beyond the phases' tensors, itemised: the libraries' workspaces (in the allocated peak),
    reserved − allocated, and nvidia-smi − reserved; ``basis`` is the activations' high point the
    fragmentation term is a fraction of (the benchmark refits that fraction)."""

    reserve: tuple[Term, ...]
    runtime: tuple[Term, ...]
    basis: float
    fragmentation: float
    workspace: tuple[Term, ...] = ()
    wrap_cache: float = 0.0  # of ``reserve``'s terms: what an FSDP1 wrap left cached before the step
    mps: bool = False  # PyTorch's MPS backend on an Apple GPU: its heaps, no CUDA runtime
    # What the context, the collectives and the whole-process figure are called on the card (ROCm's on an
    # AMD card): words of the note only, so not a figure (a leading underscore keeps it out of tests.golden).
    _names: RuntimeNames = CUDA_RUNTIME_NAMES

    @Once  # read three times a breakdown (its summary, its field): summed once
    def workspace_bytes(self) -> float:
        return float(sum(t.bytes for t in self.workspace))

    @property
    def reserve_bytes(self) -> float:
        return float(sum(t.bytes for t in self.reserve))

    @property
    def runtime_bytes(self) -> float:
        return float(sum(t.bytes for t in self.runtime))

    def bucket(self) -> Bucket:
        return make_bucket(BucketKey.OVERHEAD, [*self.workspace, *self.reserve, *self.runtime], note=self._note)

    @property
    def _note(self) -> str:
        if self.mps:
            return (
                "what PyTorch's MPS allocator holds beyond the allocated peak: its heaps' unused room and the "
                "buffers it keeps cached (torch.mps.driver_allocated_memory() shows them); no CUDA context or "
                "cuBLAS workspace. MPSGraph's own allocations outside the allocator are not modelled"
            )
        return (
            "the libraries' workspaces (counted in the allocated peak: max_memory_allocated() shows them), "
            "what the caching allocator reserves beyond the allocated peak, and the runtime's own memory "
            f"({self._names.context}, {self._names.collectives}): {self._names.smi} shows it all"
        )


def allocator_config(plan: Plan) -> AllocatorConfig:
    """The plan's PYTORCH_CUDA_ALLOC_CONF, already checked when the plan was built."""
    try:
        return parse_alloc_conf(plan.hardware.alloc_conf)
    except PlanError:  # pragma: no cover - the Plan refuses it first
        return AllocatorConfig()


# The first PyTorch release whose wheels bundle an NCCL with runtime connect (2.22 on, core.runtime
# NCCL_RING_CONNECTIONS_PER_CHANNEL): torch 2.8.0 requires nvidia-nccl-cu12==2.27.3 (pip's resolver output,
# "from torch==2.8.0"), 2.9 2.27.5 (pytorch/pytorch 06b24a9d .ci/docker/ci_commit_pins/nccl-cu12.txt v2.27.5-1).
# 2.5 and 2.6 bundle 2.21.5 (their cu124 wheels' pins), which connects at init; 2.7 bundles 2.26.2, with runtime
# connect, but shares the 2.5-2.7 choice and keeps the full size there (at most half a communicator too much).
NCCL_RUNTIME_CONNECT_TORCH: Final = TorchVersion.V2_8


class NcclGroup(NamedTuple):
    """A process group a rank runs NCCL collectives on, and whether all it carries is scalars (a seed, a barrier,
    a loss, a gradient norm): such a communicator connects its rings alone where NCCL connects at run time."""

    name: str
    scalars: bool = False


def nccl_groups(plan: Plan) -> tuple[NcclGroup, ...]:
    """The process groups one rank of a multi-GPU plan runs NCCL collectives on: each has a communicator of
    its own, with its own buffers (ProcessGroupNCCL creates one per group and device on the group's first
    collective). A group of every rank is the world group; one of a single rank has none.

    - **DeepSpeed** (deepspeedai/DeepSpeed v0.11.1 e9503fe4): the engine reduces (ZeRO-1/2) or reduce-scatters
      (ZeRO-3) the gradients, and ZeRO-1/2 all-gather the updated partitions, on its data-parallel group, a clone
      of the world group without an mpu (utils/groups.py ``_clone_world_group``: ``dist.new_group(ranks=
      range(world_size))``; engine.py lines 1110-1112, stage_1_and_2.py ``dp_process_group``). The world group
      runs ZeRO-3's parameter all-gathers (partition_parameters.py ``Init.__init__``: ``dist.get_world_group()``)
      and, under ZeRO-1/2, the loop's own collectives: HF Trainer all-gathers the loss on it at every logging
      step (trainer.py ``_maybe_log_save_evaluate``: ``self._nested_gather(tr_loss)``, accelerate's ``gather``
      on the default group); the engine's own use of it is at checkpoint saves (engine.py ``dist.barrier()``).
    - **PyTorch's own parallelisms, as torchtitan lays them out** (pytorch/torchtitan 9dec370a and d66b72a6,
      ``ParallelDims.build_mesh``): one mesh dimension per degree above 1, and three flattened meshes, "dp",
      "dp_shard_cp" (FSDP's, or DDP's) and "dp_cp" (the loss all-reduce, train.py ``dist_mean``); torch's
      DeviceMesh gives a mesh of one dimension spanning the world the default group and every other one a
      ``new_group`` of its own, a flattened mesh too (pytorch/pytorch 00131b6b torch/distributed/
      device_mesh.py ``_init_process_groups``, ``create_flatten_mesh``). So FSDP's shard group and the loss
      group are two communicators over the same ranks when they are not the world, HSDP adds the replicate
      group, and TP, CP and PP each their dimension's group (torch's pipelining sends through
      ``batch_isend_irecv``, which takes the group's communicator, not a two-rank one). The world group is
      used on every rank: the seed's broadcast (utils.py ``set_determinism``) and the barrier after the first
      step (``set_pg_timeouts``); under accelerate and HF Trainer, the barriers and the loss gather. FSDP1's
      group is the default one unless given (torch ``_init_process_group_state``), as DDP's is.
    - **Megatron-Core**: :func:`_megatron_groups`.

    The world group carries scalars alone unless a group of every rank is folded into it or ZeRO-3 all-gathers
    on it; the loss all-reduce's group carries the loss alone.
    """
    par = plan.parallel
    world = par.world_size
    if world <= 1:
        return ()
    if plan.stack is Stack.MEGATRON:
        return _megatron_groups(plan)
    groups: list[NcclGroup] = []
    folded = [par.strategy is Strategy.ZERO3]  # whether the world group carries more than scalars

    def add(name: str, size: int, scalars: bool = False) -> None:
        if 1 < size < world:
            groups.append(NcclGroup(name, scalars))
        elif size == world and not scalars:
            folded[0] = True

    if par.strategy.deepspeed:
        if par.data_parallel > 1:  # with tensor or pipeline parallelism, the mpu's data-parallel group instead
            clone = par.tensor_parallel * par.pipeline_parallel == 1
            name = "the engine's data-parallel group" + (" (a clone of the world group)" if clone else "")
            groups.append(NcclGroup(name))
        add("tensor-parallel group", par.tensor_parallel)
        add("pipeline group", par.pipeline_parallel)
        return (NcclGroup("world group", scalars=not folded[0]), *groups)
    data = par.data_parallel * par.context_parallel
    if par.strategy is Strategy.FSDP:
        add("FSDP's shard group", par.fsdp_shards)
        add("HSDP's replicate group", par.dp_replicate)
        add("the loss all-reduce's group (dp × cp)", data, scalars=True)
    else:  # torchtitan runs DDP on a 1-D mesh only (d66b72a6 models/llama3/infra/parallelize.py: "DDP has not
        # supported > 1D parallelism"): its own group, the loss's too
        add("DDP's group", data)
    add("tensor-parallel group", par.tensor_parallel)
    add("context-parallel group", par.context_parallel)
    add("pipeline group", par.pipeline_parallel)
    return (NcclGroup("world group", scalars=not folded[0]), *groups)


def _megatron_groups(plan: Plan) -> tuple[NcclGroup, ...]:
    """The groups a Megatron-Core rank runs collectives on (NVIDIA/Megatron-LM d98e8a64). Its
    ``init_process_group`` gets no device_id (megatron/training/initialize.py), so a group has a communicator once
    used, and ``parallel_state.create_group`` makes every group a ``new_group``, one over every rank too: the world
    group (training.py's barriers and start-time all-reduces), the data-parallel group with CP (the DDP buffers'
    reduce, the distributed optimizer's reduce-scatter and all-gather, the loss's all-reduce, training.py), the
    tensor- and context-parallel groups, the gradient norm's group (optimizer/__init__.py: the distributed
    optimizer's instance, every rank, and Megatron FSDP's; else the model-parallel group, TP × PP). Pipeline
    sends run through ``batch_isend_irecv`` on the pipeline group, except under the interleaved schedule, whose
    default ``overlap_p2p_comm`` (``--no-overlap-p2p-communication`` unset; argument_utils.py ``batch_p2p_comm =
    not overlap_p2p_comm``) sends with single ``isend`` / ``irecv`` (p2p_communication.py ``_p2p_ops``), to which
    ProcessGroupNCCL gives a two-rank communicator per peer pair (``pointToPoint``: ``getKeySendRecv``): the
    previous stage's and the next one's. A tied embedding all-reduces its gradient on the embedding group of
    the first and last stage (counted on every rank: the worst is one of them). A mixture of experts reduces the
    experts' gradients on the expert data-parallel group (distributed_data_parallel.py ``intra_expt_dp_group``)
    and dispatches on the expert-parallel group. Not counted: the fp8 amax group, TE's context-parallel sends
    outside ``batch_isend_irecv``, the expert tensor-parallel groups. The world group (barriers, the start time)
    and the gradient norm's group carry scalars alone."""
    par = plan.parallel
    groups = [NcclGroup("world group", scalars=True)]

    def add(name: str, size: int, scalars: bool = False) -> None:
        if size > 1:
            groups.append(NcclGroup(name, scalars))

    add("data-parallel group with CP", par.data_parallel * par.context_parallel)
    add("tensor-parallel group", par.tensor_parallel)
    add("context-parallel group", par.context_parallel)
    if par.pipeline_parallel > 1:
        if par.schedule is PipelineSchedule.INTERLEAVED:
            add("send/recv pair with the previous stage", 2)
            if par.pipeline_parallel > 2:  # of two stages the previous one is the next one: one pair
                add("send/recv pair with the next stage", 2)
        else:
            add("pipeline group", par.pipeline_parallel)
        if plan.model.tie_embeddings:
            add("embedding group (first and last stage)", 2)
    if par.strategy in (Strategy.ZERO1, Strategy.FSDP):  # the distributed optimizer (mapping.py), Megatron FSDP
        add("the distributed optimizer's group (the gradient norm)", par.world_size, scalars=True)
    else:
        add("model-parallel group (the gradient norm)", par.tensor_parallel * par.pipeline_parallel, scalars=True)
    if plan.model.num_experts > 1:
        add("expert data-parallel group", par.data_parallel * par.context_parallel // par.expert_parallel)
        add("expert-parallel group", par.expert_parallel)
    return tuple(groups)


def nccl_bytes(plan: Plan) -> tuple[float, str]:
    """NCCL's own buffers on one GPU of a multi-GPU plan, with the arithmetic: one communicator's buffers for
    each process group the rank runs collectives on (:func:`nccl_groups`); a group carrying scalars alone holds
    its rings' half where the release's NCCL connects at run time (:data:`NCCL_RUNTIME_CONNECT_TORCH`) and the
    plan is on one node (across nodes a one-element all-reduce picks the tree: core.runtime
    NCCL_RING_CONNECTIONS_PER_CHANNEL). RCCL is not read and keeps the full size."""
    groups = nccl_groups(plan)
    if not groups:
        return 0.0, ""
    link = intra_link_of(plan.parallel.intra_link, plan.hardware.gpu)
    fast = any(link.id.startswith(kind) for kind in _FAST_LINKS)
    channels = NCCL_CHANNELS_FAST_LINK if fast else NCCL_CHANNELS_PCIE
    runtime_connect = (
        runtime_names(plan.hardware.gpu).collectives == "NCCL"
        and not torch_before(plan.hardware.torch_version, NCCL_RUNTIME_CONNECT_TORCH)
        and plan.parallel.nodes == 1
    )
    rings = [g.name for g in groups if g.scalars] if runtime_connect else []
    full = [g.name for g in groups if not (runtime_connect and g.scalars)]
    buffers = f"{NCCL_CONNECTION_BYTES / MiB:.2f} MiB (Simple 4 MiB + LL 0.5 MiB + LL128 4.69 MiB)"
    total = (
        channels
        * NCCL_CONNECTION_BYTES
        * (len(full) * NCCL_CONNECTIONS_PER_CHANNEL + len(rings) * NCCL_RING_CONNECTIONS_PER_CHANNEL)
    )
    formula = f"{channels} channels ({link.id}) × {NCCL_CONNECTIONS_PER_CHANNEL} connections × {buffers}"
    if len(groups) > 1:
        formula = f"{len(full)} communicator{'s' * (len(full) != 1)} ({', '.join(full)}) × {formula}"
    if rings:
        formula += (
            f" + {len(rings)} carrying scalars alone ({', '.join(rings)}), their rings only (NCCL's runtime"
            f" connect, PyTorch 2.8+, one node) × {channels} channels × {NCCL_RING_CONNECTIONS_PER_CHANNEL} connection"
            f" × {NCCL_CONNECTION_BYTES / MiB:.2f} MiB"
        )
    return total, formula


def allocator_workspaces(plan: Plan) -> tuple[Term, ...]:
    """The workspaces libraries take from PyTorch's caching allocator at their first matmul and keep
    for the process: max_memory_allocated() counts them from the first step's forward on, and
    between steps (:mod:`core.runtime` for the sources). PyTorch's cuBLAS workspace per handle
    (the forward's thread and autograd's device thread); Transformer Engine's own where the plan
    runs it (the Megatron stack's TE modules, TE's float8 linears), and TE's grouped GEMM's one per compute
    stream where a Megatron MoE plan runs it (``moe_grouped_gemm``). Each at the size its library
    gives the card's architecture (:func:`core.runtime.cublas_workspace`); for a custom card or one
    whose family is not told apart, the larger size, said in the term's label. None on an Apple GPU:
    PyTorch's MPS backend runs its matmuls through MPS / MPSGraph, with no cuBLAS handle pool."""
    if runs_mps(plan.hardware.gpu):
        return ()
    cublas, te = cublas_workspace(plan.hardware.gpu), te_workspace(plan.hardware.gpu)
    terms = [
        Term(
            f"{cublas.library} workspaces (PyTorch: one per handle, the forward's and the backward's thread)"
            + cublas.note,
            f"{CUBLAS_TRAINING_HANDLES} handles × {cublas.label}",
            CUBLAS_TRAINING_HANDLES * cublas.bytes,
        )
    ]
    if plan.stack is Stack.MEGATRON or plan.float8 in TE_FLOAT8:
        terms.append(Term(f"Transformer Engine's cuBLAS workspace (one per process){te.note}", te.label, te.bytes))
    if plan.moe_grouped_gemm and plan.stack is Stack.MEGATRON and plan.model.num_experts > 1:
        terms.append(
            Term(
                f"Transformer Engine's grouped-GEMM workspaces (one per compute stream){te.note}",
                f"{TE_GROUPED_GEMM_STREAMS} streams × {te.label}",
                TE_GROUPED_GEMM_STREAMS * te.bytes,
            )
        )
    return tuple(terms)


def weight_tensors(plan: Plan, layers: int | None = None, embedding: bool = True, head: bool = True) -> int:
    """Parameter tensors of the model (or of ``layers`` blocks and the outside parts a rank holds)."""
    model = plan.model
    blocks = model.num_layers if layers is None else layers
    return model.layer_tensors() * blocks + model.outside_tensors(embedding=embedding, head=head)


def weight_segments(
    plan: Plan, layers: int | None = None, embedding: bool = True, head: bool = True
) -> tuple[int, str]:
    """How many tensors of the large pool a rank's weights are allocated as (each in a segment of its own,
    rounded to 2 MiB), and what they are.

    Every parameter tensor, except after an FSDP1 wrap (``parallel.fsdp1_wrap``): FSDP1 flattens each
    unit's parameters into one flat parameter and keeps this rank's chunk as one tensor (pytorch/pytorch
    01caf79, torch/distributed/fsdp/_flat_param.py ``shard``: ``_get_shard`` clones the chunk), so the
    rank's weights are one tensor per unit: each decoder block, the root (embedding, final norm, head),
    and each LoRA A / B linear the wrapping policy makes a unit of its own (Answer.AI's
    ``get_wrapping_policy``, PEFT's ``fsdp_auto_wrap_policy``) whose chunk is larger than 1 MiB; a smaller
    chunk is served from the small pool's shared 2 MiB segments (c10/cuda/CUDACachingAllocator.cpp
    ``kSmallSize``, :func:`core.allocator.is_small`). A replay of that wrap through the allocator's rules
    (benchmarks/realgpu/fsdp1_wrap_replay.py) leaves 11-80 MiB beyond the shards and the wrap's cache on
    Llama-2-7B, against 291 MiB at one per parameter tensor."""
    par = plan.parallel
    if not (par.fsdp1_wrap and par.strategy is Strategy.FSDP):
        return weight_tensors(plan, layers, embedding, head), "tensors"
    model = plan.model
    blocks = model.num_layers if layers is None else layers
    shards = max(1, par.fsdp_shards)
    adapter = DTYPE_BYTES[plan.adapter_dtype]
    large_adapters = 0.0
    if plan.method is Method.IA3:
        vectors = model.ia3_vectors(plan.lora.targets, plan.lora.ia3_feedforward, plan.linear_experts)
        large_adapters = sum(copies * (not is_small(int(n * adapter / shards))) for n, copies, _ in vectors)
    elif plan.litgpt_adapter:  # one block's prompt and gate, and Adapter v2's vectors
        prompt = model.litgpt_prompt_tensors(plan.lora.adapter_prompt_length, model.num_layers - 1)
        per_block = [(n, 1) for n in prompt]
        per_block += model.litgpt_v2_block_tensors() if plan.method is Method.ADAPTER_V2 else []
        large_adapters = sum(copies * (not is_small(int(n * adapter / shards))) for n, copies in per_block)
    elif plan.adapter_based:  # a block's, the mean over its kinds (an MoE's dense blocks: ModelSpec.adapter_blocks)
        for kind_layers, dense in model.adapter_blocks():
            for fan_in, fan_out, copies in model.adapted_matrices(plan.lora.targets, plan.linear_experts, dense):
                for elements in (plan.lora.rank * fan_in, fan_out * plan.lora.rank):
                    large = copies * (not is_small(int(elements * adapter / shards)))
                    large_adapters += large * kind_layers / model.num_layers
    # The head's lora_A and lora_B (lm_head targeted) are two more such linears, on the rank with the head.
    lora_head = head_adapter_tensor_sizes(plan)[:2] if head else []
    head_units = sum(not is_small(int(elements * adapter / shards)) for elements in lora_head)
    units = round(blocks * (1 + large_adapters)) + (1 if embedding or head else 0) + head_units
    return units, "FSDP1 unit shards"


def card_terms(
    plan: Plan,
    phases: tuple[Phase, ...],
    stream_cache: list[Term],
    where: tuple[int, bool, bool] | None = None,
    wrap_cache: list[Term] | None = None,
) -> CardTerms:
    """The reserve and runtime terms of one rank whose step has ``phases``. ``stream_cache``:
    what the framework's communication streams keep cached (FSDP2's reduce-scatter and
    all-gather pools); ``where``: the rank's blocks and whether it holds the embedding and
    the head (None: the whole model); ``wrap_cache``: what an FSDP1 wrap from the CPU left
    cached before the first step (core.parallel.state._fsdp1_wrap_cache), kept apart in
    :attr:`CardTerms.wrap_cache` so that a reading taken right after the wrap reads it whole."""
    wrap = list(wrap_cache or [])
    layers, embedding, head = where if where is not None else (plan.model.num_layers, True, True)
    basis = max((p.bucket(BucketKey.ACTIVATIONS).bytes for p in phases), default=0.0)
    mps = runs_mps(plan.hardware.gpu)
    if mps:
        reserve, fraction = _mps_reserve(basis)
        runtime: list[Term] = []
    else:
        reserve, fraction = _cuda_reserve(plan, basis, layers, embedding, head)
        names = runtime_names(plan.hardware.gpu)
        runtime = [Term(f"{names.context} (driver, kernels)", _context_formula(names), CUDA_CONTEXT_BYTES)]
    reserve.extend(stream_cache)
    reserve.extend(wrap)
    nccl, formula = nccl_bytes(plan)
    if nccl:
        runtime.append(Term(f"{runtime_names(plan.hardware.gpu).collectives} buffers", formula, nccl))
    return CardTerms(
        tuple(t for t in reserve if t.bytes),
        tuple(runtime),
        basis,
        fraction,
        allocator_workspaces(plan),
        float(sum(t.bytes for t in wrap)),
        mps,
        runtime_names(plan.hardware.gpu),
    )


def _context_formula(names: RuntimeNames) -> str:
    """How the context term is sized: measured for CUDA; on ROCm the CUDA figure stands in."""
    if names.context == "CUDA context":
        return "≈ 512 MiB per process"
    return f"≈ 512 MiB per process (the CUDA context's figure: the {names.context}'s own is not measured here)"


def _fragmentation_term(fraction: float, basis: float, source: str) -> list[Term]:
    if not (basis and fraction):
        return []
    return [
        Term(
            "free blocks the activations leave in partly used segments",
            f"{fraction:g} × {gb(basis)} GB (the step's largest activations; {source})",
            fraction * basis,
        )
    ]


def _cuda_reserve(plan: Plan, basis: float, layers: int, embedding: bool, head: bool) -> tuple[list[Term], float]:
    """The CUDA caching allocator's reserve beyond the allocated peak, and the fragmentation fraction."""
    tensors, what = weight_segments(plan, layers, embedding, head)
    if allocator_config(plan).expandable_segments:
        pages = Term("expandable segments: one growing segment per stream", "20 MiB page per pool", 20 * MiB)
        return [pages, *_fragmentation_term(EXPANDABLE_FRAGMENTATION, basis, "")], EXPANDABLE_FRAGMENTATION
    rounding = Term(
        "segment rounding of the weights (2 MiB segments)",
        f"{tensors:,} {what} × ≈ 1 MiB",
        tensors * SEGMENT_ROUNDING_PER_TENSOR_BYTES,
    )
    fitted = _fragmentation_term(ALLOCATOR_FRAGMENTATION, basis, "fitted on real-GPU figures")
    return [rounding, *fitted], ALLOCATOR_FRAGMENTATION


def _mps_reserve(basis: float) -> tuple[list[Term], float]:
    """PyTorch's MPS allocator's reserve beyond the allocated peak (core.runtime, MPSAllocator.h): the
    heaps the buffers are placed in, of which the last of each size is partly used, and the cached
    buffers the activations leave (a freed buffer is kept whole for reuse, get_free_buffer). No MPS
    figure measures that fraction: CUDA's fitted one stands in for it, and the term says so."""
    heaps = Term(
        "the heaps' unused room (the last 1 GiB, 32 MiB and 8 MiB heap, half used on average)",
        f"½ × ({MPS_XLARGE_HEAP_BYTES // MiB:,} + {MPS_LARGE_HEAP_BYTES // MiB} + {MPS_SMALL_HEAP_BYTES // MiB} MiB)",
        MPS_OPEN_HEAPS_BYTES,
    )
    source = "the CUDA allocator's fitted fraction: no MPS figure measures it"
    return [heaps, *_fragmentation_term(ALLOCATOR_FRAGMENTATION, basis, source)], ALLOCATOR_FRAGMENTATION
