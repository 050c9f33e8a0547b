"""PyTorch's CUDA caching allocator: its rules, and the ``PYTORCH_CUDA_ALLOC_CONF`` it reads.

Source followed: pytorch/pytorch at commit 001074d25084fdb87a799823e395a50f5ec044d3,
``c10/cuda/CUDACachingAllocator.cpp`` (the rules), and ``c10/core/AllocatorConfig.cpp`` at
065861fba7598880aa3216822742a1172d0a197c (the settings' parser and its checks):

- every request is rounded up to 512 bytes (``kMinBlockSize``, ``round_size``), or to a
  power-of-two division with ``roundup_power2_divisions``; the rounded size is what
  ``memory_allocated`` counts;
- requests up to 1 MiB (``kSmallSize``) come from the small pool, in 2 MiB segments
  (``kSmallBuffer``); larger ones from the large pool: 1–10 MiB requests take a 20 MiB
  segment (``kLargeBuffer``), 10 MiB and more a segment rounded up to 2 MiB (``kRoundLarge``,
  ``get_allocation_size``);
- a free block is split when the rest is at least 512 bytes (small pool, or any pool with
  expandable segments) or more than 1 MiB (large pool, and only below ``max_split_size``:
  ``should_split``); a freed block merges with free neighbours of its segment;
- a block freed on one stream is reused only on that stream (``get_free_block`` compares the
  stream), so each stream that allocates keeps a cache of its own;
- the cache is never given back while memory lasts: only when ``cudaMalloc`` fails does
  ``malloc`` free cached blocks (oversize ones first, then every unsplit free segment) and
  retry; "the only remaining cached memory is split from a larger block that is partially
  in-use" when it finally reports out of memory;
- ``garbage_collection_threshold`` frees old unsplit cached blocks before ``cudaMalloc``, but
  only when a memory fraction was set (``set_fraction`` in ``malloc``:
  ``torch.cuda.set_per_process_memory_fraction``);
- ``expandable_segments:True`` grows one segment per stream by 2 MiB (small) or 20 MiB
  (large) pages instead of one segment per request, and unmaps free pages when memory runs
  out: the slivers of partly used segments that fragment memory do not form.

This module holds the settings and the size arithmetic the estimator's closed form uses
(:mod:`core.training.device`), and :func:`resident_segment_bytes`, the segments a run of
allocations that are never freed leaves (a model's weights as an engine builds them on the card:
:mod:`core.serving.sglang_weights`). A replay of the measurement tool's allocation traces through
these rules (issue 22, item 2's suggested route) is not built yet: the closed form's one
fitted constant is fitted on published figures instead (benchmarks/realgpu/memory.py).
benchmarks/realgpu/fsdp1_wrap_replay.py replays one case through them, written from the
frameworks' source rather than recorded: an FSDP1 wrap and Answer.AI's training step after it
(docs/REAL_GPU_MEMORY.md, "A whole step after the FSDP1 wrap, replayed").
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from core.errors import PlanError

# c10/cuda/CUDACachingAllocator.cpp constants (commit above).
MIN_BLOCK_BYTES: Final = 512  # kMinBlockSize
SMALL_REQUEST_BYTES: Final = 1 << 20  # kSmallSize: largest request of the small pool
SMALL_SEGMENT_BYTES: Final = 2 << 20  # kSmallBuffer
LARGE_SEGMENT_BYTES: Final = 20 << 20  # kLargeBuffer
MIN_LARGE_ALLOC_BYTES: Final = 10 << 20  # kMinLargeAlloc
ROUND_LARGE_BYTES: Final = 2 << 20  # kRoundLarge
# c10/core/AllocatorConfig.cpp: max_split_size_mb and max_non_split_rounding_mb below
# kLargeBuffer / 1 MiB are refused; roundup_power2_divisions covers 1 MiB to 64 GiB in 16
# power-of-two intervals.
MIN_SPLIT_SIZE_MB: Final = LARGE_SEGMENT_BYTES >> 20
ROUNDUP_INTERVALS: Final = 16
ROUNDUP_START_LOG2: Final = 20  # 1 MiB

ENV_NAME: Final = "PYTORCH_CUDA_ALLOC_CONF"
_FIELD: Final = "hardware.alloc_conf"
_BOOL_KEYS: Final = (
    "expandable_segments",
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_use_background_threads",
)


@dataclass(frozen=True)
class AllocatorConfig:
    """The settings of ``PYTORCH_CUDA_ALLOC_CONF`` that change what the card holds."""

    expandable_segments: bool = False
    max_split_size_mb: int | None = None  # None: no limit (SIZE_MAX)
    garbage_collection_threshold: float | None = None
    roundup_power2_divisions: tuple[int, ...] = ()  # per 1 MiB..64 GiB interval; () = none
    backend: str = "native"
    text: str = ""  # as given

    @property
    def default(self) -> bool:
        return not self.text.strip()

    @property
    def async_backend(self) -> bool:
        """``backend:cudaMallocAsync``: CUDA's own stream-ordered pool, none of these rules."""
        return self.backend == "cudaMallocAsync"


def _tokens(text: str) -> list[str]:
    """``AllocatorConfig::lexArgs``: ``,`` ``:`` ``[`` ``]`` are tokens, spaces are dropped."""
    out: list[str] = []
    word = ""
    for ch in text:
        if ch in ",:[]":
            if word:
                out.append(word)
                word = ""
            out.append(ch)
        elif ch != " ":
            word += ch
    if word:
        out.append(word)
    return out


def _refuse(text: str, why: str) -> PlanError:
    return PlanError(_FIELD, text, f"a {ENV_NAME} value PyTorch accepts", why)


def _int(text: str, token: str, what: str) -> int:
    if not token.isdigit():
        raise _refuse(text, f"{what} must be a whole number, got {token!r}")
    return int(token)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def expect(self, char: str) -> None:
        if self.i >= len(self.tokens) or self.tokens[self.i] != char:
            raise _refuse(self.text, f"expected '{char}'")
        self.i += 1

    def value(self, key: str) -> str:
        self.expect(":")
        if self.i >= len(self.tokens) or self.tokens[self.i] in ",:[]":
            raise _refuse(self.text, f"expecting a {key} value")
        self.i += 1
        return self.tokens[self.i - 1]

    def divisions(self) -> tuple[int, ...]:
        """roundup_power2_divisions: one power of two, or ``[256:1,512:2,>:4]`` per interval."""
        self.expect(":")
        if self.i < len(self.tokens) and self.tokens[self.i] == "[":
            self.i += 1
            table = [0] * ROUNDUP_INTERVALS
            first, last = True, 0
            while self.i < len(self.tokens) and self.tokens[self.i] != "]":
                size = self.tokens[self.i]
                self.i += 1
                div = _int(self.text, self.value("roundup_power2_divisions"), "a division")
                if div and not _power_of_two(div):
                    raise _refuse(self.text, "For roundups, the divisons has to be power of 2 or 0 to disable roundup")
                if size == ">":
                    table[last:] = [div] * (ROUNDUP_INTERVALS - last)
                else:
                    interval = _int(self.text, size, "an interval")
                    if not _power_of_two(interval):
                        raise _refuse(self.text, "For roundups, the intervals have to be power of 2")
                    index = min(max(interval.bit_length() - 1, 0), ROUNDUP_INTERVALS - 1)
                    if first:
                        table[:index] = [div] * index
                        first = False
                    table[index] = div
                    last = index
                if self.i < len(self.tokens) and self.tokens[self.i] == ",":
                    self.i += 1
            self.expect("]")
            return tuple(table)
        div = _int(self.text, self.tokens[self.i] if self.i < len(self.tokens) else "", "a division")
        self.i += 1
        if not _power_of_two(div):
            raise _refuse(self.text, "For roundups, the divisons has to be power of 2")
        return (div,) * ROUNDUP_INTERVALS


def parse_alloc_conf(text: str) -> AllocatorConfig:
    """``text`` read as ``AllocatorConfig::parseArgs`` reads it; a value PyTorch refuses is a
    :class:`PlanError` with PyTorch's reason. Keys of pinned host memory are accepted (they
    do not touch the card's memory)."""
    if not isinstance(text, str):
        raise PlanError(_FIELD, text, f"a {ENV_NAME} value (text)")
    return _parse(text)


@lru_cache(maxsize=64)
def _parse(text: str) -> AllocatorConfig:
    p = _Parser(text)
    fields: dict[str, object] = {}
    while p.i < len(p.tokens):
        key = p.tokens[p.i]
        p.i += 1
        if key == "max_split_size_mb" or key == "max_non_split_rounding_mb":
            mb = _int(text, p.value(key), key)
            if mb < MIN_SPLIT_SIZE_MB:
                raise _refuse(text, f"CachingAllocator option {key} too small, must be >= {MIN_SPLIT_SIZE_MB}")
            if key == "max_split_size_mb":
                fields["max_split_size_mb"] = mb
        elif key == "garbage_collection_threshold":
            raw = p.value(key)
            try:
                threshold = float(raw)
            except ValueError:
                raise _refuse(text, f"garbage_collection_threshold must be a number, got {raw!r}") from None
            if not 0.0 < threshold < 1.0:
                raise _refuse(text, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
            fields["garbage_collection_threshold"] = threshold
        elif key == "roundup_power2_divisions":
            fields["roundup_power2_divisions"] = p.divisions()
        elif key == "backend":
            backend = p.value(key)
            if backend not in ("native", "cudaMallocAsync"):
                raise _refuse(text, "Unknown allocator backend, options are native and cudaMallocAsync")
            fields["backend"] = backend
        elif key in _BOOL_KEYS or key == "release_lock_on_hipmalloc":
            flag = p.value(key)
            if flag not in ("True", "False"):
                raise _refuse(text, f"Expected a single True/False argument for {key}")
            if key == "expandable_segments":
                fields["expandable_segments"] = flag == "True"
        elif key == "pinned_num_register_threads":
            threads = _int(text, p.value(key), key)
            if not _power_of_two(threads):
                raise _refuse(text, "Number of register threads has to be power of 2")
        else:
            raise _refuse(text, f"Unrecognized CachingAllocator option: {key}")
        if p.i < len(p.tokens):
            p.expect(",")
    return AllocatorConfig(text=text, **fields)  # type: ignore[arg-type]


def round_size(size: int, divisions: int = 0) -> int:
    """``round_size``: the bytes a request of ``size`` takes (what memory_allocated counts)."""
    if size < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    if divisions > 1 and size > MIN_BLOCK_BYTES * divisions:
        floor = 1 << (size.bit_length() - 1)
        if floor == size:
            return size
        step = floor // divisions
        return -(-size // step) * step
    return -(-size // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def divisions_for(config: AllocatorConfig, size: int) -> int:
    """``roundup_power2_divisions(size)``: the divisions of the interval ``size`` falls in."""
    if not config.roundup_power2_divisions:
        return 0
    index = min(max(size.bit_length() - 1 - ROUNDUP_START_LOG2, 0), ROUNDUP_INTERVALS - 1)
    return config.roundup_power2_divisions[index]


def segment_size(size: int) -> int:
    """``get_allocation_size``: the segment cudaMalloc'd for a (rounded) request that no cached
    block holds."""
    if size <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def is_small(size: int) -> bool:
    return size <= SMALL_REQUEST_BYTES


def splits(block_size: int, request: int, small_pool: bool, config: AllocatorConfig) -> bool:
    """``should_split``: whether a free block of ``block_size`` is cut for ``request``."""
    remaining = block_size - request
    if small_pool or config.expandable_segments:
        return remaining >= MIN_BLOCK_BYTES
    limit = config.max_split_size_mb << 20 if config.max_split_size_mb is not None else None
    return (limit is None or request < limit) and remaining > SMALL_REQUEST_BYTES


def fits_free_block(block_size: int, request: int, config: AllocatorConfig) -> bool:
    """``get_free_block``'s oversize rules: below ``max_split_size`` a request never takes an
    oversize block; at or above it, only one less than 20 MiB larger."""
    if config.max_split_size_mb is None:
        return block_size >= request
    limit = config.max_split_size_mb << 20
    if request < limit and block_size >= limit:
        return False
    if request >= limit and block_size >= request + LARGE_SEGMENT_BYTES:
        return False
    return block_size >= request


def resident_segment_bytes(requests: Iterable[int], config: AllocatorConfig | None = None) -> int:
    """Bytes of the segments ``cudaMalloc`` holds after ``requests`` are allocated in order and
    none is freed (a model's parameters as it builds them on the card): each request rounded
    (``round_size``), placed in the smallest cached free block that takes it (``get_free_block``:
    best fit, ``fits_free_block``), else in a new segment (``segment_size``), and the block cut
    when ``splits`` says so; the small and large pools keep apart. What ``torch.cuda.mem_get_info``
    loses, which ``memory_allocated`` (the rounded requests) does not show: the rest of each
    1-10 MiB request's 20 MiB segment that later requests do not fill, the < 2 MiB tail of a
    large one and the < 1 MiB slack never split off. Expandable segments are not replayed (the
    default ``PYTORCH_CUDA_ALLOC_CONF`` is)."""
    config = config or AllocatorConfig()
    held = 0
    free: dict[bool, list[int]] = {True: [], False: []}  # per pool, sorted
    for nbytes in requests:
        size = round_size(nbytes)
        small = is_small(size)
        pool = free[small]
        i = bisect_left(pool, size)
        while i < len(pool) and not fits_free_block(pool[i], size, config):
            i += 1
        if i < len(pool):
            block = pool.pop(i)
        else:
            block = SMALL_SEGMENT_BYTES if small else segment_size(size)
            held += block
        if splits(block, size, small, config):
            insort(pool, block - size)
    return held
