"""Replay of an FSDP1 wrap of a model held on the CPU through the caching allocator's rules.

Checks the closed form of core.parallel.state._fsdp1_wrap_cache (what the wrap leaves cached:
twice the root unit's and twice one block unit's unsharded bytes) against the order in which
torch's FSDP1 allocates and frees while it initialises each unit on rank 0:

- pytorch/pytorch 00743e70, torch/distributed/fsdp/_init_utils.py
  ``_init_param_handle_from_module``: the units are initialised innermost first, the root last;
  ``_move_states_to_device`` copies the unit's own parameters to the GPU one by one
  (``param.data = param.to(device)``); ``_sync_module_params_and_buffers`` broadcasts them
  from rank 0 with ``_sync_params_and_buffers`` in ``PARAM_BROADCAST_BUCKET_SIZE`` (250 MiB)
  buckets, a bucket of several tensors flattened into a new tensor (torch/csrc/distributed/c10d
  ``broadcast_coalesced``: at most two buckets in flight); ``managed_params`` keeps the
  originals referenced until the handle is built and sharded;
- pytorch/pytorch 01caf79, torch/distributed/fsdp/_flat_param.py: ``flatten_tensors`` makes
  the flat parameter with ``torch.cat``; ``shard`` clones this rank's chunk (``_get_shard``)
  and then frees the unsharded storage;
- the allocator's rules as core.allocator holds them (c10/cuda/CUDACachingAllocator.cpp):
  requests rounded to 512 B, small (≤ 1 MiB) and large pools, 2 MiB / 20 MiB / rounded
  segments, best fit, a split when the rest is large enough, merging of free neighbours, and
  nothing given back while memory lasts.

Then a whole step after the wrap (``replay_run``, ``replay_figures``): the wrap, the peak statistics
reset, and two training steps of Answer.AI's loop on rank 0, each stream with its own pool
(``get_free_block`` compares the stream: the wrap and the step's activations share the default
stream's, FSDP1's all-gathers and reduce-scatters have their own):

- AnswerDotAI/fsdp_qlora e877dda train.py: the only ``torch.cuda.empty_cache()`` runs after the
  QLoRA weights are loaded and quantised, before the wrap; ``reset_peak_memory_stats`` before the
  loop; ``output = model(...)`` with the labels, ``loss.backward()``, ``optimizer.step()``,
  ``zero_grad()``, and ``output = None`` only then; each ``LlamaDecoderLayer`` wrapped by
  ``checkpoint_wrapper`` (reentrant for QLoRA, the template command); FSDP1 with
  ``limit_all_gathers=True`` and the default ``BACKWARD_PRE`` prefetch, no mixed precision;
- the step's tensors are the estimator's: a block's saved tensors in the order
  core.training.activations.layer_activations lists them, the loss as ``loss_memory`` holds it
  (transformers' ``logits = logits.float()``, then ``shift_logits = logits[..., :-1, :].contiguous()``,
  the float32 log-softmax and its gradients), bitsandbytes 0.43.0's ``MatMul4Bit`` dequantising each
  4-bit weight to bf16 for its matmul and again for its input gradient; the first forward of a
  block runs under no_grad, each op's output freed once read (transformers' LlamaRMSNorm, LlamaAttention,
  LlamaMLP; PEFT's LoRA ``B(A(dropout(x)))``);
- a card limit (``Card.limit``): when a new segment does not fit, the allocator frees every cached
  segment with no live block, of every stream, and retries (c10/cuda/CUDACachingAllocator.cpp at
  001074d, the stored version: "If the cudaMalloc fails, the allocator will attempt to free one
  cached block of sufficient size that is not split and retry the allocation. If this also fails,
  the allocator will attempt to free all cached blocks that are not split"; the first attempt,
  ``release_available_cached_blocks``, frees only blocks above ``max_split_size``, none by default).
  ``garbage_collection_threshold`` acts only under a set memory fraction (core.allocator), which
  Answer.AI's loop does not set. The records name torch ">= 2.2"; its own copy of the file is not
  stored here.

``--peft`` replays PEFT's FSDP-guide Llama-2-70B QLoRA runs instead (``peft_step_for``: grouped-query
shapes, every linear adapted, the HF Trainer's loop, ``fsdp_offload_params``' staging and shards on the
CPU, accelerate's ``no_sync`` accumulation; docs/REAL_GPU_MEMORY.md, "PEFT's FSDP-guide offload run,
replayed").

Usage: ``python benchmarks/realgpu/fsdp1_wrap_replay.py`` prints the replay for Llama-2-7B
(QLoRA and LoRA, two ranks, Answer.AI's wrapping policy) beside the closed form, then the free
blocks the wrap leaves cached and which of the training step's default-stream tensors each
Answer.AI workload could place in them (``cached_blocks``, ``hosted``: a cached block serves a
request no larger than itself, ``get_free_block``'s best fit; docs/REAL_GPU_MEMORY.md, "The wrap
cache's blocks against the step's tensors"), then the whole-step replay of Answer.AI's Llama-2-7B
rows beside their readings and the estimate (docs/REAL_GPU_MEMORY.md, "A whole step after the FSDP1
wrap, replayed").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT, Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from core.allocator import AllocatorConfig, is_small, round_size, segment_size, splits  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.plan import Method, Offload, Plan  # noqa: E402
from core.training.activations import layer_activations  # noqa: E402

MiB = 1 << 20
BROADCAST_BUCKET_BYTES = 250 * MiB  # PARAM_BROADCAST_BUCKET_SIZE
BROADCASTS_IN_FLIGHT = 2  # broadcast_coalesced's max_in_flight


@dataclass
class _Block:
    size: int
    handle: int = 0  # 0: free


@dataclass
class Allocator:
    """One stream's caching allocator, default settings."""

    config: AllocatorConfig = field(default_factory=AllocatorConfig)
    segments: list[tuple[bool, list[_Block]]] = field(default_factory=list)  # (small pool, blocks)
    reserved: int = 0  # the segments' bytes (memory_reserved)
    allocated: int = 0  # the handed-out blocks' bytes (memory_allocated)
    _next: int = 0
    _segment_of: dict[int, list[_Block]] = field(default_factory=dict)

    def _best(self, size: int, small: bool) -> tuple[int, list[_Block], int] | None:
        """``get_free_block``: the smallest free block of the pool at least ``size`` bytes large."""
        best: tuple[int, list[_Block], int] | None = None
        for pool_small, blocks in self.segments:
            if pool_small != small:
                continue
            for bi, block in enumerate(blocks):
                if not block.handle and block.size >= size and (best is None or block.size < best[0]):
                    best = (block.size, blocks, bi)
        return best

    def new_segment(self, size: int) -> int:
        """The bytes ``cudaMalloc`` would be asked for to serve ``size`` (0: a cached block serves it)."""
        size = round_size(size)
        return 0 if self._best(size, is_small(size)) else segment_size(size)

    def release_free_segments(self) -> int:
        """``release_cached_blocks``: every segment with no live block is given back; returns the bytes."""
        kept = [(small, blocks) for small, blocks in self.segments if len(blocks) > 1 or blocks[0].handle]
        freed = self.reserved - sum(b.size for _, blocks in kept for b in blocks)
        self.segments = kept
        self.reserved -= freed
        return freed

    def malloc(self, size: int) -> int:
        size = round_size(size)
        small = is_small(size)
        best = self._best(size, small)
        if best is None:
            blocks = [_Block(segment_size(size))]
            self.segments.append((small, blocks))
            self.reserved += blocks[0].size
            bi = 0
        else:
            _, blocks, bi = best
        block = blocks[bi]
        if splits(block.size, size, small, self.config):
            blocks.insert(bi + 1, _Block(block.size - size))
            block.size = size
        self._next += 1
        block.handle = self._next
        self.allocated += block.size
        self._segment_of[self._next] = blocks
        return self._next

    def free(self, handle: int) -> None:
        blocks = self._segment_of.pop(handle)
        bi = next(i for i, block in enumerate(blocks) if block.handle == handle)
        block = blocks[bi]
        block.handle = 0
        self.allocated -= block.size
        if bi + 1 < len(blocks) and not blocks[bi + 1].handle:
            block.size += blocks.pop(bi + 1).size
        if bi > 0 and not blocks[bi - 1].handle:
            blocks[bi - 1].size += blocks.pop(bi).size


def wrap_unit(
    alloc: Allocator, params: list[int], world: int, buffers: Sequence[int] = (), offload: bool = False
) -> int:
    """One FSDP1 unit initialised on rank 0 (its own parameters' bytes, in order); returns the
    handle of this rank's shard (0 once offloaded). ``buffers``: the unit's buffers, moved after its
    parameters (``_move_states_to_device``) and never flattened: they stay allocated. ``offload``:
    ``CPUOffload(offload_params=True)``, under which ``_init_param_handle_from_params`` moves the
    new shard to the CPU once sharded (``handle.flat_param_to(cpu_device)``), freeing its GPU block."""
    originals = [alloc.malloc(p) for p in params]
    for b in buffers:
        alloc.malloc(b)
    buckets: list[list[int]] = [[]]
    for p in params:
        if sum(buckets[-1]) >= BROADCAST_BUCKET_BYTES:
            buckets.append([])
        buckets[-1].append(p)
    in_flight: list[int] = []
    for bucket in buckets:
        if len(in_flight) >= BROADCASTS_IN_FLIGHT:
            alloc.free(in_flight.pop(0))
        if len(bucket) > 1:  # one tensor is broadcast in place (a view)
            in_flight.append(alloc.malloc(sum(bucket)))
    for h in in_flight:
        alloc.free(h)
    total = sum(params)
    total += -total % (2 * world)  # padded to divide by the world size (2-byte elements)
    flat = alloc.malloc(total)
    shard = alloc.malloc(total // world)
    alloc.free(flat)
    for h in originals:
        alloc.free(h)
    if offload:
        alloc.free(shard)
        return 0
    return shard


@dataclass(frozen=True)
class Shape:
    hidden: int = 4096
    ffn: int = 11008
    layers: int = 32
    vocab: int = 32000
    rank: int = 64
    targets: tuple[str, ...] = ("q", "k", "v", "up", "down", "gate")
    kv: int = 0  # the k / v projections' width under grouped-query attention (0: hidden)

    @property
    def kv_width(self) -> int:
        return self.kv or self.hidden

    def linears(self) -> dict[str, tuple[int, int]]:
        h, f, kv = self.hidden, self.ffn, self.kv_width
        return {"q": (h, h), "k": (h, kv), "v": (h, kv), "o": (h, h), "gate": (h, f), "up": (h, f), "down": (f, h)}


def rotary_caches(shape: Shape, quantised: bool) -> list[int]:
    """transformers 4.37's ``LlamaRotaryEmbedding`` (one per ``LlamaAttention``) registers ``inv_freq``
    and, built in ``__init__`` by ``_set_cos_sin_cache(seq_len=max_position_embeddings,
    dtype=torch.get_default_dtype())``, the non-persistent buffers ``cos_cached`` and ``sin_cached``
    (max_position_embeddings × head_dim). Answer.AI's QLoRA path builds the model with
    ``from_config(cfg)`` under ``init_empty_weights()`` (buffers stay real, float32, on the CPU) and
    never casts it; its LoRA path ``model.to(dtype=torch_dtype)`` makes them bf16 (AnswerDotAI/fsdp_qlora
    e877dda train.py). Llama-2-7B: 4,096 × 128."""
    dtype = 4 if quantised else 2
    head = shape.hidden // 32  # Llama-2-7B: 32 heads of 128
    return [4096 * head * dtype, 4096 * head * dtype, head // 2 * 4]


def quant_state(n_in: int, n_out: int) -> dict[str, int]:
    """What bitsandbytes 0.43.0 allocates on the GPU to quantise one weight with double quantisation
    (bitsandbytes-foundation/bitsandbytes 4876324 ``functional.quantize_4bit``): a float32 absmax per 64
    weights (freed once quantised: ``del absmax``), the NF4 code (``get_4bit_type``: 16 floats), the
    absmax's mean (``offset``) and ``quantize_blockwise``'s uint8 codes (one per 64 weights) and float32
    absmax (one per 256 blocks); ``QuantState.to`` moves the last three and ``state2.code`` (the dynamic
    map, 256 floats) and leaves ``code`` where it is."""
    blocks = -(-n_in * n_out // 64)
    return {
        "absmax fp32": blocks * 4,
        "code": 16 * 4,
        "offset": 4,
        "absmax codes": blocks,
        "absmax2": -(-blocks // 256) * 4,
        "state2 code": 256 * 4,
    }


_MOVED_STATE = ("absmax codes", "offset", "absmax2", "state2 code")
LOADING_WORKERS = (1, 8, 52)
# Answer.AI's reading after the QLoRA wrap, rank 0: 3.72 GiB (benchmarks_03_2024.md at e877dda;
# memory_figures.json answerai-3090-7b-qlora-after-wrap, value_bytes).
AFTER_WRAP_READING = 3_994_319_585


def replay_qlora_loading(alloc: Allocator, shape: Shape, workers: int) -> None:
    """Answer.AI's QLoRA loading on rank 0 (AnswerDotAI/fsdp_qlora e877dda train.py ``load_and_quantize``,
    ``workers`` threads at a time, replayed as groups that each step together): each weight is copied to
    the GPU in bf16, quantised (:func:`quant_state`; the packed output ``(n + 1) // 4`` bf16 elements) and
    moved to the CPU, its quantisation state left on the GPU; then ``torch.cuda.empty_cache()``. PEFT then
    moves the state to the CPU as well: peft v0.9.0 / v0.10.0 ``LoraLayer.update_layer`` calls
    ``self.to(weight.device, dtype=weight.dtype)`` on the whole layer, its base ``Linear4bit`` included, and
    ``Params4bit.to`` calls ``self.quant_state.to(device)`` (bitsandbytes 4876324 ``nn/modules.py``);
    rank 0's weights are on the CPU (train.py's ``setup_quantized_meta_for_peft`` guards the other ranks
    only). Its blocks stay cached: nothing empties the cache again before the wrap."""
    weights = [dims for _ in range(shape.layers) for dims in shape.linears().values()]
    moved: list[int] = []
    for g in range(0, len(weights), workers):
        group = weights[g : g + workers]
        live = [[alloc.malloc(n_in * n_out * 2)] for n_in, n_out in group]
        for handles, (n_in, n_out) in zip(live, group, strict=True):
            handles.append(alloc.malloc(quant_state(n_in, n_out)["absmax fp32"]))
        for handles, (n_in, n_out) in zip(live, group, strict=True):
            handles.append(alloc.malloc((n_in * n_out + 1) // 4 * 2))
        for n_in, n_out in group:
            state = quant_state(n_in, n_out)
            alloc.malloc(state["code"])
            moved += [alloc.malloc(state[k]) for k in ("offset", "absmax codes", "absmax2")]
        for handles in live:
            for h in handles:
                alloc.free(h)
    alloc.release_free_segments()
    for h in moved:
        alloc.free(h)


def replay_llama(
    shape: Shape,
    quantised: bool,
    world: int = 2,
    rotary: bool = False,
    offload: bool = False,
    loading_workers: int = 0,
) -> Allocator:
    """Answer.AI's policy (AnswerDotAI/fsdp_qlora e877dda, train.py get_wrapping_policy): each
    LoRA A / B linear is a unit, each decoder layer is a unit, the root holds the embedding,
    the final norm and the head (bf16). QLoRA's base weights are NF4 packed two to a byte.
    ``rotary``: each decoder layer also moves transformers 4.37's rotary caches (:func:`rotary_caches`);
    ``offload``: each unit's shard goes to the CPU once made (:func:`wrap_unit`); ``loading_workers``
    (QLoRA, 0: left out): the loading and its quantisation state first (:func:`replay_qlora_loading`),
    each decoder layer's ``_move_states_to_device`` then moving its weights' state back to the GPU
    (``Params4bit.to``: ``quant_state.to(device)`` before the data)."""
    h = shape.hidden
    linears = shape.linears()
    per_weight = 0.5 if quantised else 2.0
    alloc = Allocator()
    states = quantised and loading_workers > 0
    if states:
        replay_qlora_loading(alloc, shape, loading_workers)
    for _ in range(shape.layers):
        block: list[int] = []
        for name, (n_in, n_out) in linears.items():
            if name in shape.targets:
                wrap_unit(alloc, [shape.rank * n_in * 2], world, offload=offload)
                wrap_unit(alloc, [n_out * shape.rank * 2], world, offload=offload)
            block.append(int(n_in * n_out * per_weight))
        if states:
            for n_in, n_out in linears.values():
                state = quant_state(n_in, n_out)
                for k in _MOVED_STATE:
                    alloc.malloc(state[k])
        block += [h * 2, h * 2]
        wrap_unit(alloc, block, world, rotary_caches(shape, quantised) if rotary else (), offload)
    wrap_unit(alloc, [shape.vocab * h * 2, h * 2, shape.vocab * h * 2], world, offload=offload)
    return alloc


def closed_form(shape: Shape, quantised: bool) -> float:
    """2 × (one block's own bytes + the root's bytes), as core.parallel.state has it."""
    h, f = shape.hidden, shape.ffn
    block = (4 * h * h + 3 * h * f) * (0.5 if quantised else 2.0) + 2 * h * 2.0  # the norms stay bf16
    root = (2 * shape.vocab * h + h) * 2.0
    return 2 * (block + root)


def cached_blocks(alloc: Allocator) -> list[int]:
    """The free blocks of the large pool after the replay, largest first: what a later request
    of the same stream can take without a new segment."""
    free = [b.size for small, blocks in alloc.segments if not small for b in blocks if not b.handle]
    return sorted(free, reverse=True)


# The step's default-stream tensors of one Answer.AI workload (Llama-2-7B, bf16 activations):
# a hidden-size activation (N·H·2 B), an MLP activation (N·I·2 B) and transformers 4.37's float32
# logits (N·V·4 B, ``logits.float()`` in LlamaForCausalLM.forward), N = batch × sequence.
WORKLOADS: tuple[tuple[int, int], ...] = ((1, 512), (1, 2048), (4, 2048), (6, 2048), (10, 2048))


def step_tensors(shape: Shape, batch: int, seq: int) -> dict[str, int]:
    n = batch * seq
    return {"hidden": n * shape.hidden * 2, "mlp": n * shape.ffn * 2, "logits fp32": n * shape.vocab * 4}


def hosted(blocks: list[int], request: int) -> int:
    """Bytes of cached blocks at least as large as ``request`` (each could serve it)."""
    return sum(b for b in blocks if b >= round_size(request))


# --- One training step after the wrap ---------------------------------------------------------
# The caching allocator keeps a pool per stream (get_free_block compares the stream); the wrap ran on
# the default stream, so the step's default-stream requests may take its cached blocks, while FSDP1's
# all-gathers (the unshard stream, _runtime_utils.py ``_unshard``) and its reduce-scatters (the
# post-backward stream) cache blocks of their own.
DEFAULT, UNSHARD, POST_BACKWARD, PRE_UNSHARD = "default", "unshard", "post-backward", "pre-unshard"


@dataclass
class Card:
    """The caching allocator of one GPU: one :class:`Allocator` per stream, and the peaks."""

    streams: dict[str, Allocator] = field(default_factory=dict)
    where: dict[int, tuple[str, int]] = field(default_factory=dict)
    peak_allocated: int = 0
    peak_reserved: int = 0
    limit: float = float("inf")  # what cudaMalloc can still give the process (the card less the runtime)
    released: int = 0  # bytes release_cached_blocks gave back
    out_of_memory: bool = False
    stream_peaks: dict[str, int] = field(default_factory=dict)  # each stream's allocated peak
    _next: int = 0

    def malloc(self, stream: str, size: int) -> int:
        pool = self.streams.setdefault(stream, Allocator())
        segment = pool.new_segment(size)
        if segment and self.reserved + segment > self.limit:
            # c10/cuda/CUDACachingAllocator.cpp ``malloc``: when cudaMalloc fails, free the cached
            # segments of every stream (``release_cached_blocks``) and retry.
            self.released += sum(a.release_free_segments() for a in self.streams.values())
            if self.reserved + segment > self.limit:
                self.out_of_memory = True
        handle = pool.malloc(size)
        self.stream_peaks[stream] = max(self.stream_peaks.get(stream, 0), pool.allocated)
        self._next += 1
        self.where[self._next] = (stream, handle)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return self._next

    def free(self, handle: int) -> None:
        stream, own = self.where.pop(handle)
        self.streams[stream].free(own)

    @property
    def reserved(self) -> int:
        return sum(a.reserved for a in self.streams.values())

    @property
    def allocated(self) -> int:
        return sum(a.allocated for a in self.streams.values())

    def reset_peaks(self) -> None:
        """``torch.cuda.reset_peak_memory_stats``: the peaks restart from what is held now."""
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved
        self.stream_peaks = {name: pool.allocated for name, pool in self.streams.items()}


@dataclass(frozen=True)
class Step:
    """One training step's sizes (bytes) on rank 0 of ``world``: Answer.AI's loop by default."""

    batch: int
    seq: int
    quantised: bool
    saved: tuple[tuple[str, int], ...]  # one recomputed block's saved tensors, in the estimator's order
    shape: Shape = field(default_factory=Shape)
    world: int = 2
    keeps_output: bool = True  # Answer.AI's loop keeps ``output`` (the float32 logits) through the backward
    offload: bool = False  # CPUOffload(offload_params=True): shards on the CPU, staged on the pre-unshard stream
    accumulation: int = 1  # micro-batches per optimizer step, all but the last under FSDP1's no_sync

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    @property
    def hidden(self) -> int:
        return self.tokens * self.shape.hidden * 2

    @property
    def mlp(self) -> int:
        return self.tokens * self.shape.ffn * 2

    def linears(self) -> list[tuple[str, int, int]]:
        return [(name, i, o) for name, (i, o) in self.shape.linears().items()]

    def block_flat(self) -> int:
        per_weight = 0.5 if self.quantised else 2.0
        own = sum(int(i * o * per_weight) for _, i, o in self.linears()) + 2 * self.shape.hidden * 2
        return own + -own % (2 * self.world)

    def root_flat(self) -> int:
        own = (2 * self.shape.vocab * self.shape.hidden + self.shape.hidden) * 2
        return own + -own % (2 * self.world)

    def adapters(self) -> list[int]:
        """Each LoRA A / B unit's unsharded flat parameter (bytes), in a block's order."""
        r = self.shape.rank
        return [n for name, i, o in self.linears() if name in self.shape.targets for n in (r * i * 2, o * r * 2)]


def _linear(card: Card, step: Step, n_in: int, n_out: int, out: int) -> int:
    """A projection's output; a 4-bit one dequantises its weight to bf16 first and frees it after the
    matmul (bitsandbytes 0.43.0 ``MatMul4Bit.forward``: ``F.dequantize_4bit(B, quant_state)``)."""
    weight = card.malloc(DEFAULT, n_in * n_out * 2) if step.quantised else 0
    handle = card.malloc(DEFAULT, out)
    if weight:
        card.free(weight)
    return handle


def _block_forward(card: Card, step: Step, x: int) -> int:
    """One checkpointed block's first forward (reentrant checkpointing runs it under no_grad, so each
    op's output lives until the next op has read it); returns the block's output, which the next
    checkpoint keeps as its input. transformers' LlamaRMSNorm: float32 input, squared, normalised,
    cast back, times the weight; LlamaAttention: q/k/v, RoPE, SDPA, o; LlamaMLP: down(act(gate) * up);
    a PEFT LoRA projection adds B(A(dropout(x)))."""
    n, h, f, r = step.tokens, step.shape.hidden * 2, step.mlp // step.tokens, step.shape.rank

    def norm(inp: int) -> int:
        f32 = card.malloc(DEFAULT, n * h * 2)
        sq = card.malloc(DEFAULT, n * h * 2)
        card.free(sq)
        normed = card.malloc(DEFAULT, n * h * 2)
        card.free(f32)
        cast = card.malloc(DEFAULT, n * h)
        card.free(normed)
        out = card.malloc(DEFAULT, n * h)
        card.free(cast)
        return out

    def project(name: str, n_in: int, n_out: int, inp_bytes: int) -> int:
        out = _linear(card, step, n_in, n_out, n * n_out * 2)
        if name not in step.shape.targets:
            return out
        drop = card.malloc(DEFAULT, inp_bytes)
        a = card.malloc(DEFAULT, n * r * 2)
        card.free(drop)
        b = card.malloc(DEFAULT, n * n_out * 2)
        card.free(a)
        total = card.malloc(DEFAULT, n * n_out * 2)
        card.free(b)
        card.free(out)
        return total

    hd, fd, kv = step.shape.hidden, step.shape.ffn, step.shape.kv_width
    normed = norm(x)
    q, k, v = (project(name, hd, width, n * h) for name, width in (("q", hd), ("k", kv), ("v", kv)))
    card.free(normed)
    q_rot = card.malloc(DEFAULT, n * h)
    card.free(q)
    k_rot = card.malloc(DEFAULT, n * kv * 2)
    card.free(k)
    attn = card.malloc(DEFAULT, n * h)
    for t in (q_rot, k_rot, v):
        card.free(t)
    o = project("o", hd, hd, n * h)
    card.free(attn)
    resid = card.malloc(DEFAULT, n * h)
    card.free(o)
    normed = norm(resid)
    gate = project("gate", hd, fd, n * h)
    up = project("up", hd, fd, n * h)
    card.free(normed)
    act = card.malloc(DEFAULT, n * f)
    card.free(gate)
    prod = card.malloc(DEFAULT, n * f)
    card.free(act)
    card.free(up)
    down = project("down", fd, hd, n * f)
    card.free(prod)
    out = card.malloc(DEFAULT, n * h)
    card.free(resid)
    card.free(down)
    return out


def _block_backward(
    card: Card,
    step: Step,
    grad_out: int,
    sharded: list[int],
    kept_grads: dict[tuple[int, int], int] | None = None,
    layer: int = 0,
    sync: bool = True,
) -> int:
    """One block's backward under reentrant checkpointing: the block runs again with grad, keeping
    its saved tensors (the estimator's list, in its order: core.training.activations.layer_activations;
    a 4-bit projection dequantises its weight again on the way), then autograd walks it back: the
    MLP's three N·I gradients (down's input, then act's two: gate and up), the MLP's saved tensors
    freed, the attention's gradients, the rest freed, the LoRA units' gradients reduce-scattered on
    the post-backward stream (FSDP1 ``_post_backward_hook``: the sharded gradient is allocated there and
    kept as the flat parameter's ``.grad``, appended to ``sharded``; freed at once under CPU offload, whose
    ``_offload_grad`` copies it to the pinned ``_cpu_grad``); returns the block input's gradient.
    ``kept_grads``: under FSDP1's ``no_sync`` (a micro-batch that is not the last of its step) the
    ``_post_backward_hook`` returns before the reduce-scatter, and each LoRA unit's unsharded gradient
    stays the flat parameter's ``.grad`` on the default stream, keyed by (layer, unit), until the last
    micro-batch's backward adds into it and reduce-scatters it; ``None``: every micro-batch syncs."""
    n, h = step.tokens, step.shape.hidden * 2
    dequantise = list(step.linears()) if step.quantised else []
    saved: list[tuple[str, int]] = []
    for label, size in step.saved:
        if dequantise and size >= n * h // 2 and not label.startswith(("attention norm", "MLP norm")):
            _, i, o = dequantise.pop(0)
            card.free(card.malloc(DEFAULT, i * o * 2))
        saved.append((label, card.malloc(DEFAULT, size)))
    weights = {name: (i, o) for name, i, o in step.linears()}

    def dequantised(name: str) -> None:
        if step.quantised:
            i, o = weights[name]
            card.free(card.malloc(DEFAULT, i * o * 2))

    mlp_share = next((k for k, (label, _) in enumerate(saved) if label.startswith("MLP norm")), len(saved))
    dequantised("down")
    g_prod = card.malloc(DEFAULT, step.mlp)
    g_gate, g_up = card.malloc(DEFAULT, step.mlp), card.malloc(DEFAULT, step.mlp)
    card.free(g_prod)
    dequantised("gate")
    dequantised("up")
    g_mlp = card.malloc(DEFAULT, n * h)
    card.free(g_gate)
    card.free(g_up)
    for _, t in reversed(saved[mlp_share:]):
        card.free(t)
    g_resid = card.malloc(DEFAULT, n * h)
    card.free(g_mlp)
    for name in ("o", "v", "k", "q"):
        dequantised(name)
    g_attn = card.malloc(DEFAULT, n * h)
    for _, t in reversed(saved[:mlp_share]):
        card.free(t)
    grad_in = card.malloc(DEFAULT, n * h)
    for t in (g_attn, g_resid, grad_out):
        card.free(t)
    for u, unit in enumerate(step.adapters()):  # the unsharded gradient, reduce-scattered into this rank's shard
        held = kept_grads.pop((layer, u), 0) if kept_grads is not None else 0
        g = card.malloc(DEFAULT, unit)
        if held:  # accumulated into the gradient no_sync kept
            card.free(g)
            g = held
        if kept_grads is not None and not sync:
            kept_grads[(layer, u)] = g
            continue
        shard = card.malloc(POST_BACKWARD, unit // step.world)  # the flat parameter's .grad
        if step.offload:
            card.free(shard)
        else:
            sharded.append(shard)
        card.free(g)
    return grad_in


def _gather(card: Card, step: Step, size: int) -> int:
    """FSDP1's all-gather of one unit (``_runtime_utils.py`` ``_unshard``) into its unsharded flat
    parameter on the unshard stream; under CPU offload ``pre_unshard`` first copies the local shard to
    the GPU on the pre-unshard stream (``flat_param_to(self.device, non_blocking=True)``, "This creates
    a new tensor distinct from any attributes"), freed once the flat parameter points at the gathered one."""
    staged = card.malloc(PRE_UNSHARD, size // step.world) if step.offload else 0
    gathered = card.malloc(UNSHARD, size)
    if staged:
        card.free(staged)
    return gathered


def replay_step(card: Card, step: Step, state: list[int]) -> None:
    """One optimizer step of ``step.accumulation`` micro-batches on rank 0: Answer.AI's loop
    (AnswerDotAI/fsdp_qlora e877dda train.py: ``output = model(...)``, ``loss.backward()``,
    ``optimizer.step()``, ``zero_grad()``, ``output = None`` after the step) or, ``keeps_output`` off,
    the HF Trainer's (transformers ``Trainer.compute_loss`` returns the loss alone, so the model output
    goes before the backward). ``state``: the optimizer's state, made at the first step and kept
    (torch.optim.AdamW: two moments per flat parameter shard; on the CPU under CPU offload)."""
    kept_grads: dict[tuple[int, int], int] | None = {} if step.accumulation > 1 else None
    sharded: list[int] = []
    logits = 0
    for micro in range(step.accumulation):
        logits = _micro_batch(card, step, sharded, kept_grads, micro == step.accumulation - 1)
    if not state and not step.offload:  # AdamW's two moments per flat parameter shard, made at the first step
        state.extend(
            card.malloc(DEFAULT, unit // step.world) for _ in range(2) for unit in step.adapters() * step.shape.layers
        )
    for t in sharded:  # zero_grad(set_to_none=True)
        card.free(t)
    if logits:
        card.free(logits)  # output = None


def _micro_batch(
    card: Card, step: Step, sharded: list[int], kept_grads: dict[tuple[int, int], int] | None, sync: bool
) -> int:
    """One micro-batch's forward and backward (``sync``: the last of its step, which reduce-scatters);
    returns the kept output's logits (0: none kept)."""
    n, h, v = step.tokens, step.shape.hidden * 2, step.shape.vocab * 4
    rows = step.batch * (step.seq - 1)  # transformers' shifted logits
    root = _gather(card, step, step.root_flat())  # FSDP1's root is not resharded after its forward
    x = card.malloc(DEFAULT, n * h)  # the embedding's output: the first checkpoint's input
    kept = [x]
    for _ in range(step.shape.layers):
        block = _gather(card, step, step.block_flat())
        for unit in step.adapters():
            card.free(_gather(card, step, unit))
        x = _block_forward(card, step, x)
        kept.append(x)
        card.free(block)
    norm_in = card.malloc(DEFAULT, n * h * 2)  # the final norm keeps its float32 input
    hidden = card.malloc(DEFAULT, n * h)
    logits16 = card.malloc(DEFAULT, n * v // 2)
    logits = card.malloc(DEFAULT, n * v)  # logits.float(), kept by ``output`` through the backward
    card.free(logits16)
    shifted = card.malloc(DEFAULT, rows * v)  # logits[..., :-1, :].contiguous()
    log_softmax = card.malloc(DEFAULT, rows * v)
    card.free(shifted)
    if not step.keeps_output:
        card.free(logits)
        logits = 0
    # backward: nll_loss's gradient, log_softmax's, the slice's (zeros of the logits' shape), the cast's
    g_nll = card.malloc(DEFAULT, rows * v)
    g_ls = card.malloc(DEFAULT, rows * v)
    card.free(g_nll)
    card.free(log_softmax)
    g_logits = card.malloc(DEFAULT, n * v)
    card.free(g_ls)
    g16 = card.malloc(DEFAULT, n * v // 2)
    card.free(g_logits)
    g = card.malloc(DEFAULT, n * h)  # the head's input gradient (the head is frozen)
    card.free(g16)
    card.free(hidden)
    g_norm = card.malloc(DEFAULT, n * h)
    card.free(g)
    card.free(norm_in)
    g = g_norm
    kept.pop()  # the last block's output: the final norm's input, freed with it
    card.free(x)
    prefetched: int | None = None
    for i in reversed(range(step.shape.layers)):
        block = prefetched if prefetched is not None else _gather(card, step, step.block_flat())
        prefetched = _gather(card, step, step.block_flat()) if i else None  # BACKWARD_PRE, limit_all_gathers
        for unit in step.adapters():
            card.free(_gather(card, step, unit))
        g = _block_backward(card, step, g, sharded, kept_grads, i, sync)
        card.free(kept.pop())
        card.free(block)
    card.free(g)
    card.free(root)
    return logits


def replay_run(step: Step, steps: int = 2, limit: float = float("inf"), wrap: bool = True) -> tuple[Card, int]:
    """The wrap, the peak statistics reset, then ``steps`` training steps on a card that lets the
    allocator reserve at most ``limit`` bytes; returns the card and what it reserved right after the
    wrap. ``wrap=False``: the same unit shards, allocated as if nothing had been cached before them
    (the step's own reserve, for comparison)."""
    wrapped = replay_llama(step.shape, step.quantised, step.world, offload=step.offload)
    default = wrapped
    if not wrap:
        default = Allocator()
        for _, blocks in wrapped.segments:
            for block in blocks:
                if block.handle:
                    default.malloc(block.size)
    card = Card(limit=limit)
    card.streams[DEFAULT] = default
    after_wrap = card.reserved
    card.reset_peaks()
    state: list[int] = []
    for _ in range(steps):
        replay_step(card, step, state)
    return card, after_wrap


# Answer.AI's Llama-2-7B rows on 2 × RTX 3090 (benchmarks/realgpu/memory_figures.json, max_memory_reserved
# on rank 0 over epoch 0; AnswerDotAI/fsdp_qlora e877dda benchmarks_03_2024.md).
ANSWERAI_ROWS: tuple[str, ...] = (
    "answerai-3090-7b-qlora-ctx512",
    "answerai-3090-7b-qlora-ctx2048",
    "answerai-3090-7b-qlora-bs4",
    "answerai-3090-7b-qlora-bs10",
    "answerai-3090-7b-lora-ctx512",
    "answerai-3090-7b-lora-ctx2048",
    "answerai-3090-7b-lora-bs4",
    "answerai-3090-7b-lora-bs6",
)


@dataclass(frozen=True)
class StepReplay:
    """One figure's whole-step replay beside the estimate (bytes)."""

    figure: str
    published: float
    reserved: int  # the replay's reserved peak, the wrap's cache in place
    own: int  # the same step on the same shards with nothing cached before it
    allocated: int  # the replay's allocated peak
    after_wrap: int
    wrap_cached: int  # what the wrap leaves cached (its reserved less its shards)
    free_at_peak: int  # the default stream's reserved less its allocated peak
    estimate_reserved: float
    estimate_allocated: float
    basis: float  # the estimate's step's largest activations
    wrap_term: float  # the estimate's FSDP1 wrap terms
    at_limit: bool  # the replay met the card's limit and released cached segments

    @property
    def wrap_adds(self) -> int:
        """What the wrap's cache adds to the step's reserved peak in the replay."""
        return self.reserved - self.own


def step_for(plan: Plan) -> Step:
    """The :class:`Step` of a mapped Answer.AI plan (Llama-2-7B, FSDP1 on two ranks)."""
    saved = tuple((t.label, int(t.bytes)) for t in layer_activations(plan, True).items if t.bytes)
    return Step(plan.workload.micro_batch, plan.workload.seq_len, plan.method is Method.QLORA, saved)


# PEFT's FSDP-guide QLoRA runs (huggingface/peft 6008f272 docs/source/accelerate/fsdp.md, nvidia-smi per
# GPU): Llama-2-70B on two GPUs, HF Trainer under accelerate, micro-batch 2 × 2,048 with accumulation 2.
PEFT_ROWS: tuple[str, ...] = (
    "peftdocs-llama2-70b-qlora-fsdp-cpuoffload-2x24",
    "peftdocs-llama2-70b-qlora-fsdp-nooffload",
)


def peft_step_for(plan: Plan) -> Step:
    """The :class:`Step` of a mapped PEFT FSDP-guide plan: Llama-2-70B's grouped-query shapes, PEFT's
    LoRA on every linear (each A / B linear a unit of its own: peft ``fsdp_auto_wrap_policy``), the HF
    Trainer's loop (the output dropped before the backward), ``fsdp_offload_params`` as mapped, and
    accelerate's ``no_sync`` on every micro-batch but the last (``Accelerator.accumulate``)."""
    m = plan.model
    names = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up"}
    targets = tuple(names.get(t, "down") for t in plan.lora.targets)
    shape = Shape(
        m.hidden_size,
        m.intermediate_size,
        m.num_layers,
        m.vocab_size,
        plan.lora.rank,
        targets,
        m.num_kv_heads * m.head_dim,
    )
    saved = tuple((t.label, int(t.bytes)) for t in layer_activations(plan, True).items if t.bytes)
    return Step(
        plan.workload.micro_batch,
        plan.workload.seq_len,
        plan.method is Method.QLORA,
        saved,
        shape,
        plan.parallel.data_parallel,
        keeps_output=False,
        offload=plan.parallel.offload is not Offload.NONE,
        accumulation=plan.workload.grad_accum,
    )


def replay_figures(ids: Sequence[str] = ANSWERAI_ROWS) -> list[StepReplay]:
    """Each figure of ``ids`` replayed (the wrap, then two steps) and estimated."""
    from memory import card_limit, load, map_figure  # benchmarks/realgpu/memory.py

    out = []
    for figure in load():
        if figure["id"] not in ids:
            continue
        plan = map_figure(figure).plan
        assert plan is not None
        est = estimate(plan)
        limit = card_limit(est, "reserved")
        step = peft_step_for(plan) if figure["id"] in PEFT_ROWS else step_for(plan)
        card, after_wrap = replay_run(step, limit=limit)
        own, _ = replay_run(step, limit=limit, wrap=False)
        wrapped = replay_llama(step.shape, step.quantised, step.world, offload=step.offload)
        wrap_term = sum(t.bytes for b in est.worst.buckets for t in b.terms if t.label.startswith("FSDP1 wrap"))
        out.append(
            StepReplay(
                figure["id"],
                float(figure["value_bytes"]),
                card.peak_reserved,
                own.peak_reserved,
                card.peak_allocated,
                after_wrap,
                wrapped.reserved - wrapped.allocated,
                card.streams[DEFAULT].reserved - card.stream_peaks[DEFAULT],
                est.worst.reserved_bytes,
                est.peak_bytes,
                est.worst.fragmentation_basis,
                wrap_term,
                card.released > 0,
            )
        )
    return sorted(out, key=lambda r: ids.index(r.figure))


def print_peft_rows() -> None:
    """PEFT's FSDP-guide rows replayed (about a minute each: 80 layers); docs/REAL_GPU_MEMORY.md,
    "PEFT's FSDP-guide offload run, replayed (branch h27res)"."""
    print("PEFT's FSDP-guide Llama-2-70B QLoRA runs, the wrap then two optimizer steps, rank 0 of 2, MiB")
    print("(nvidia-smi published: the replay leaves out the CUDA context, NCCL and the quantisation state):")
    for r in replay_figures(PEFT_ROWS):
        print(
            f"  {r.figure:48} published {r.published / MiB:7,.0f}  replay {r.reserved / MiB:7,.0f}  "
            f"own {r.own / MiB:7,.0f}  wrap adds {r.wrap_adds / MiB:+6,.0f} of {r.wrap_cached / MiB:6,.0f} cached  "
            f"allocated {r.allocated / MiB:7,.0f} (estimate {r.estimate_allocated / MiB:7,.0f})  "
            f"estimate's wrap term {r.wrap_term / MiB:6,.0f}"
        )


def main(argv: Sequence[str] = ()) -> int:
    if "--peft" in argv:
        print_peft_rows()
        return 0
    shape = Shape()
    for quantised in (True, False):
        alloc = replay_llama(shape, quantised)
        cached = alloc.reserved - alloc.allocated
        print(
            f"Llama-2-7B {'QLoRA' if quantised else 'LoRA '} rank 0 of 2 after the wrap: "
            f"allocated {alloc.allocated / MiB:,.0f} MiB, reserved {alloc.reserved / MiB:,.0f} MiB, "
            f"cached {cached / MiB:,.0f} MiB; closed form {closed_form(shape, quantised) / MiB:,.0f} MiB"
        )
        blocks = cached_blocks(alloc)
        print("  free large blocks (MiB): " + ", ".join(f"{b / MiB:,.1f}" for b in blocks if b >= 2 * MiB))
        for batch, seq in WORKLOADS:
            parts = [
                f"{name} {size / MiB:,.0f} MiB fits {hosted(blocks, size) / MiB:,.0f}"
                for name, size in step_tensors(shape, batch, seq).items()
            ]
            print(f"  batch {batch:>2} × {seq:,}: " + "; ".join(parts))
        rotary = replay_llama(shape, quantised, rotary=True)
        print(
            "  with transformers 4.37's rotary caches moved with each layer: "
            f"allocated {rotary.allocated / MiB:,.0f} MiB, "
            f"reserved {rotary.reserved / MiB:,.0f} MiB ({(rotary.reserved - alloc.reserved) / MiB:+,.0f})"
        )
        if quantised:  # train.py's n_loading_workers on a 3090: min(CPUs ÷ GPUs, 52)
            for workers in LOADING_WORKERS:
                loaded = replay_llama(shape, quantised, rotary=True, loading_workers=workers)
                print(
                    f"  and the loading's quantisation state ({workers} threads, moved to the CPU by PEFT and back "
                    f"by the wrap): allocated {loaded.allocated / MiB:,.0f} MiB, reserved "
                    f"{loaded.reserved / MiB:,.0f} MiB ({(loaded.reserved - rotary.reserved) / MiB:+,.0f}); "
                    f"read: {AFTER_WRAP_READING / MiB:,.0f} MiB"
                )
    print()
    print("The wrap, then two training steps (Answer.AI's loop), rank 0 of 2, MiB; 'own': the same step with")
    print("nothing cached before it; 'free': the default stream's reserved less its allocated peak; the")
    print("estimate's basis (its step's largest activations), wrap term and reserved figure (fraction 0.2):")
    print(
        f"  {'figure':32} {'published':>9} {'replay':>7} {'error':>7} {'own':>7} {'wrap adds':>9} "
        f"{'alloc':>6} {'est alloc':>9} {'free':>6} {'free/basis':>10} {'est wrap':>8} {'estimate':>8}"
    )
    for r in replay_figures():
        err = (r.reserved - r.published) / r.published * 100
        print(
            f"  {r.figure:32} {r.published / MiB:9,.0f} {r.reserved / MiB:7,.0f} {err:+6.1f}% {r.own / MiB:7,.0f} "
            f"{r.wrap_adds / MiB:+9,.0f} {r.allocated / MiB:6,.0f} {r.estimate_allocated / MiB:9,.0f} "
            f"{r.free_at_peak / MiB:6,.0f} {r.free_at_peak / r.basis:10.2f} {r.wrap_term / MiB:8,.0f} "
            f"{r.estimate_reserved / MiB:8,.0f}{'  (at the card limit)' if r.at_limit else ''}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
