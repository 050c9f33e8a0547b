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
  nothing given back.

Usage: ``python benchmarks/realgpu/fsdp1_wrap_replay.py`` prints the replay for Llama-2-7B
(QLoRA and LoRA, two ranks, Answer.AI's wrapping policy) beside the closed form, then the free
blocks the wrap leaves cached and which of the training step's default-stream tensors each
Answer.AI workload could place in them (``cached_blocks``, ``hosted``: a cached block serves a
request no larger than itself, ``get_free_block``'s best fit; docs/REAL_GPU_MEMORY.md, "The wrap
cache's blocks against the step's tensors").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.allocator import AllocatorConfig, is_small, round_size, segment_size, splits  # noqa: E402

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
    _next: int = 0

    def malloc(self, size: int) -> int:
        size = round_size(size)
        small = is_small(size)
        best: tuple[int, int, int] | None = None
        for si, (pool_small, blocks) in enumerate(self.segments):
            if pool_small != small:
                continue
            for bi, block in enumerate(blocks):
                if not block.handle and block.size >= size and (best is None or block.size < best[0]):
                    best = (block.size, si, bi)
        if best is None:
            self.segments.append((small, [_Block(segment_size(size))]))
            si, bi = len(self.segments) - 1, 0
        else:
            _, si, bi = best
        blocks = self.segments[si][1]
        block = blocks[bi]
        if splits(block.size, size, small, self.config):
            blocks.insert(bi + 1, _Block(block.size - size))
            block.size = size
        self._next += 1
        block.handle = self._next
        return self._next

    def free(self, handle: int) -> None:
        for _, blocks in self.segments:
            for bi, block in enumerate(blocks):
                if block.handle != handle:
                    continue
                block.handle = 0
                if bi + 1 < len(blocks) and not blocks[bi + 1].handle:
                    block.size += blocks.pop(bi + 1).size
                if bi > 0 and not blocks[bi - 1].handle:
                    blocks[bi - 1].size += blocks.pop(bi).size
                return
        raise KeyError(handle)

    @property
    def reserved(self) -> int:
        return sum(b.size for _, blocks in self.segments for b in blocks)

    @property
    def allocated(self) -> int:
        return sum(b.size for _, blocks in self.segments for b in blocks if b.handle)


def wrap_unit(alloc: Allocator, params: list[int], world: int) -> int:
    """One FSDP1 unit initialised on rank 0 (its own parameters' bytes, in order); returns the
    handle of this rank's shard."""
    originals = [alloc.malloc(p) for p in params]
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
    return shard


@dataclass(frozen=True)
class Shape:
    hidden: int = 4096
    ffn: int = 11008
    layers: int = 32
    vocab: int = 32000
    rank: int = 64
    targets: tuple[str, ...] = ("q", "k", "v", "up", "down", "gate")


def replay_llama(shape: Shape, quantised: bool, world: int = 2) -> Allocator:
    """Answer.AI's policy (AnswerDotAI/fsdp_qlora e877dda, train.py get_wrapping_policy): each
    LoRA A / B linear is a unit, each decoder layer is a unit, the root holds the embedding,
    the final norm and the head (bf16). QLoRA's base weights are NF4 packed two to a byte."""
    h, f = shape.hidden, shape.ffn
    linears = {"q": (h, h), "k": (h, h), "v": (h, h), "o": (h, h), "gate": (h, f), "up": (h, f), "down": (f, h)}
    per_weight = 0.5 if quantised else 2.0
    alloc = Allocator()
    for _ in range(shape.layers):
        block: list[int] = []
        for name, (n_in, n_out) in linears.items():
            if name in shape.targets:
                wrap_unit(alloc, [shape.rank * n_in * 2], world)
                wrap_unit(alloc, [n_out * shape.rank * 2], world)
            block.append(int(n_in * n_out * per_weight))
        block += [h * 2, h * 2]
        wrap_unit(alloc, block, world)
    wrap_unit(alloc, [shape.vocab * h * 2, h * 2, shape.vocab * h * 2], world)
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


def main() -> int:
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
