"""Ollama in front of llama.cpp: its defaults and its own choice of GPU layers.

Ollama users never type ``-ngl``: the server estimates the model's memory from the GGUF file's
tensor sizes and a per-architecture graph formula, fits as many layers as that estimate allows
into each GPU's free memory and starts its llama.cpp runner with ``--n-gpu-layers`` set to the
count (``--ctx-size`` num_ctx × parallel, ``--batch-size`` num_batch, ``--parallel``,
``--flash-attn`` only with OLLAMA_FLASH_ATTENTION=1, ``--kv-cache-type`` only with it). Read at
ollama/ollama (the tags and commits of :data:`LINES`):

* ``llm/memory.go`` ``EstimateGPULayers``: per layer ``blk.N``'s tensor bytes plus its KV; a
  buffer of one layer (``blk.0`` and its KV) and ``MinimumMemory`` (457 MiB on CUDA and ROCm,
  ``discover/gpu.go`` cudaMinimumMemory; 512 MiB on Metal, ``discover/gpu_darwin.go``) and the
  graph (the larger of its full- and partial-offload sizes) are held back on each GPU; a GPU that
  cannot hold those and two layers is dropped; layers go to the GPUs in turn while
  ``FreeMemory > OLLAMA_GPU_OVERHEAD + used + layer`` (from v0.7.0 the last layer first, before
  it the first); the output layer (``output_norm`` + ``output``, or ``token_embd`` when tied)
  counts as one more layer. ``memory.required.full`` (ollama ps' SIZE) is every allocation plus
  what did not fit; ``memory.required.partial`` (SIZE's GPU part) the allocations.
* ``fs/ggml/ggml.go`` ``GraphSize``: KV per layer ``n_ctx × (key_length + value_length) ×
  head_count_kv × bytes`` (2 for f16, 1 for q8_0, 0.5 for q4_0), the graph by architecture
  (llama, qwen2, gemma/gemma2/gemma3 here; another architecture gets ``GQA × KV / 6``).
* ``server/sched.go``: with OLLAMA_NUM_PARALLEL unset, parallel ``defaultParallel`` (4; 2 from
  v0.6.7) if the model then fits the GPU whole, else 1 (``pickBestFullFitByLibrary``); from
  v0.10.0 OLLAMA_NUM_PARALLEL defaults to 1. ``num_ctx``: ``api/types.go`` DefaultOptions 2048,
  from v0.5.13 ``envconfig`` OLLAMA_CONTEXT_LENGTH (2048; 4096 from v0.6.7).
* ``cmd/cmd.go`` (ollama ps): PROCESSOR "100% GPU", or "c%/g% CPU/GPU" with c the rounded
  share of SIZE not on the GPU.

From v0.12.11 (``llm/memory.go`` removed; read at v0.13.0 ``604e43b2`` and v0.15.5 ``8a4b77f9``,
unchanged to v0.24.0 ``c28ddc0a``) every model goes through ``llm/server.go`` ``createLayout``:

* the llama runner (``llamaServer.Load``) keeps GraphSize's per-layer sizes (``blk.N`` + its KV;
  the output layer as one more entry), takes one layer (``blk.0`` + its KV) off every GPU's free
  memory, and ``buildLayout`` takes ``MinimumMemory`` + OLLAMA_GPU_OVERHEAD + the graph (the larger
  of full and partial, only on a GPU already chosen) off each; ``assignLayers`` packs the layers,
  last first, onto as few GPUs as hold them (``findBestFit``: a binary search on a float32 capacity
  factor that balances the GPUs used; ``greedyFit``), dropping the output layer when not everything
  fits; the loop repeats while more GPUs get used. The runner then gets each GPU's count as its
  tensor split (``runner/llamarunner`` ``TensorSplit``).
* models of the Go engine (``OllamaEngineRequired``: here gemma3, gptoss, qwen3, qwen3moe) are
  placed by the same ``createLayout`` on what the runner measures (``ml/backend/ggml``); here
  llama.cpp's own buffers stand in for that (:mod:`core.serving.llamacpp`), without the blk.0 buffer.

Not modelled: before v0.12.11 several GPUs are given llama.cpp's equal split of the layer count
Ollama chose (Ollama passes its own per-GPU counts as ``--tensor-split``, and first tries the model
on one GPU alone); projectors (vision models); v0.11.5 – v0.12.10 (the Go engine's models on the
new layout, the rest on ``EstimateGPULayers``).

From v0.30.0 Ollama starts upstream llama-server without ``-ngl`` (``llm/llama_server.go``
``startLlamaServer``) and llama.cpp's own fit places the layers (:mod:`core.serving.llamacpp_fit`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Final

from core.catalogue import GpuSpec
from core.dtypes import CacheType, GgufQuant, ggml_row_bytes
from core.model import ModelSpec
from core.plan import UNQUANTISED_CACHE, OllamaVersion, Plan
from core.serving.llamacpp import (
    compute_buffer_bytes,
    context_cells,
    device_overhead_bytes,
    gguf_tensor_bytes,
    kv_bytes_of_layers,
    llamacpp_buffers,
    quantiser,
    tensor_type,
)
from core.serving.llamacpp_fit import FIT_TARGET, llamacpp_fit
from core.units import GiB, MiB

# discover/gpu.go cudaMinimumMemory (and rocmMinimumMemory); discover/gpu_darwin.go metalMinimumMemory.
CUDA_MINIMUM_MEMORY: Final = 457 * MiB
METAL_MINIMUM_MEMORY: Final = 512 * MiB
# api/types.go DefaultOptions: NumBatch 512 in every line read.
NUM_BATCH: Final = 512
# fs/ggml/ggml.go kvCacheBytesPerElement; only these three pass SupportsKVCacheType.
KV_BYTES: Final = {CacheType.F16: 2.0, CacheType.Q8_0: 1.0, CacheType.Q4_0: 0.5}
# convert_hf_to_gguf's architecture for the Hugging Face families whose GGUF name differs.
GGUF_ARCH: Final = {
    "mistral": "llama",
    "mixtral": "llama",
    "gemma3_text": "gemma3",
    "qwen3_moe": "qwen3moe",
    "gpt_oss": "gptoss",
}
# fs/ggml/ggml.go KV.OllamaEngineRequired and GGML.FlashAttention, the catalogue's architectures among
# them: the same four at v0.12.11 (c1149875), v0.13.0, v0.13.4 (89eb7952), v0.15.5 and v0.24.0.
GO_ENGINE: Final = frozenset({"gemma3", "gptoss", "qwen3", "qwen3moe"})
FLASH_BY_MODEL: Final = GO_ENGINE
# server/routes.go (v0.15.5 on): the default num_ctx by the GPUs' total memory (less OLLAMA_GPU_OVERHEAD),
# "slightly lower thresholds (47/23 GiB vs. 48/24 GiB)"; below both 4096.
VRAM_CONTEXT: Final = ((47 * GiB, 262144), (23 * GiB, 32768))


@dataclass(frozen=True)
class OllamaLine:
    """One release line's defaults and placement loop, as read at ``tag`` (``commit``)."""

    tags: str
    tag: str
    commit: str
    num_ctx: int
    parallel_tries: tuple[int, ...]  # OLLAMA_NUM_PARALLEL unset: the first that fits whole
    last_layer_first: bool  # EstimateGPULayers visits blk.N-1 first (v0.7.0 on)
    sliding_kv: bool  # gemma3's sliding layers sized by the window (GraphSize's numParallel, v0.6.4 on)
    layout: bool = False  # llm/server.go createLayout / assignLayers (v0.12.11 on)
    flash_auto: bool = False  # the llama runner gets flash attention "auto" (v0.13.4 on)
    vram_ctx: bool = False  # num_ctx by the GPUs' total memory (v0.15.5 on)
    llama_fit: bool = False  # llama-server started without -ngl: llama.cpp's --fit places the layers (v0.30.0 on)


# llm/server.go createLayout for every model (llm/memory.go deleted at v0.12.11, c1149875); the later
# lines add the llama runner's flash attention "auto" and the VRAM-tiered num_ctx.
_CREATE_LAYOUT: Final = OllamaLine(
    "v0.12.11 – v0.13.3", "v0.13.0", "604e43b28d12677c96675ba368eee20a2bed2c24", 4096, (1,), True, True, layout=True
)
_V0_13_4: Final = "89eb795293f353d575ab52eb9252f73e0269819c"
_V0_15_5: Final = "8a4b77f9daccc2509596753c0cb5564918b4ada0"
LINES: Final = {
    OllamaVersion.V0_5: OllamaLine(
        "v0.5.0 – v0.6.6", "v0.6.0", "aee28501b592e2fe98863212913ffa8fb22e1ca0", 2048, (4, 1), False, False
    ),
    OllamaVersion.V0_6_7: OllamaLine(
        "v0.6.7 – v0.6.8", "v0.6.8", "6a74bba7e7e19bf5f5aeacb039a1537afa3522a5", 4096, (2, 1), False, True
    ),
    OllamaVersion.V0_7: OllamaLine(
        "v0.7.0 – v0.9.6", "v0.9.0", "5f57b0ef4268a6bd9e8043d54c351a608a7e1bca", 4096, (2, 1), True, True
    ),
    OllamaVersion.V0_10: OllamaLine(
        "v0.10.0 – v0.11.4", "v0.11.0", "d552068413d1a3d0af69f23c2abc1e1f698ed234", 4096, (1,), True, True
    ),
    OllamaVersion.V0_12_11: _CREATE_LAYOUT,
    OllamaVersion.V0_13_4: replace(
        _CREATE_LAYOUT, tags="v0.13.4 – v0.15.4", tag="v0.13.4", commit=_V0_13_4, flash_auto=True
    ),
    OllamaVersion.V0_15_5: replace(
        _CREATE_LAYOUT, tags="v0.15.5 – v0.24.0", tag="v0.15.5", commit=_V0_15_5, flash_auto=True, vram_ctx=True
    ),
    # llm/llama_server.go startLlamaServer (v0.30.0, 2c71d8d7; the same flags at v0.32.15, b7871fc0): -c
    # num_ctx × parallel, -np, --flash-attn auto where ml.FlashAttentionSupported, -b/-ub num_batch,
    # --cache-type-k/v OLLAMA_KV_CACHE_TYPE, and no -ngl ("let llama-server auto-detect"); server/routes.go
    # keeps the VRAM-tiered num_ctx, llm/server.go NewLlamaServer the cap at the trained context.
    OllamaVersion.V0_30: replace(
        _CREATE_LAYOUT,
        tags="v0.30.0 – v0.32.15",
        tag="v0.30.0",
        commit="2c71d8d7ca6edbc9bdc1a312f71ce3b079c0fe56",
        flash_auto=True,
        vram_ctx=True,
        llama_fit=True,
    ),
}


def covered() -> str:
    return ", ".join(v.value for v in LINES)


def line_of(version: OllamaVersion) -> OllamaLine:
    if version not in LINES:
        raise ValueError(f"Ollama {version.value} is not covered; covered: {covered()}")
    return LINES[version]


@dataclass(frozen=True)
class OllamaModel:
    """What EstimateGPULayers reads of the GGUF file, in whole bytes."""

    arch: str
    layers: tuple[int, ...]  # blk.N's tensor bytes
    output: int  # output_norm + output (token_embd when tied)
    embedding: int  # embedding_length
    heads: int
    heads_kv: int
    head_k: int  # attention.key_length (= value_length here)
    vocab: int
    window: int  # attention.sliding_window (0: none)
    ffn: int  # feed_forward_length
    gate_exps: int  # blk.0's ffn_gate_exps bytes (0: not a mixture of experts)


def ollama_model(model: ModelSpec, quant: GgufQuant) -> OllamaModel:
    per_layer, _, output = gguf_tensor_bytes(model, quant)
    gate_exps = 0
    if model.num_experts > 1:
        kind = tensor_type(quantiser(model, quant), "ffn_gate_exps", 0, model.hidden_size)
        gate_exps = int(ggml_row_bytes(kind, model.hidden_size) * model.intermediate_size * model.num_experts)
    return OllamaModel(
        arch=GGUF_ARCH.get(model.family, model.family),
        layers=tuple(int(b) for b in per_layer),
        output=int(output),
        embedding=model.hidden_size,
        heads=model.num_heads,
        heads_kv=model.num_kv_heads,
        head_k=model.head_dim,
        vocab=model.vocab_size,
        window=model.sliding_window or 0,
        ffn=model.intermediate_size,
        gate_exps=gate_exps,
    )


def graph_size(
    m: OllamaModel, context: int, parallel: int, cache: CacheType, line: OllamaLine
) -> tuple[list[int], int, int]:
    """GraphSize: (each layer's KV bytes, partial-offload graph, full-offload graph)."""
    batch = min(context, NUM_BATCH)
    e, h, hkv, vocab, eh = m.embedding, m.heads, m.heads_kv, m.vocab, m.embedding // max(1, m.heads)
    kv = [int(context * 2 * m.head_k * hkv * KV_BYTES[cache])] * len(m.layers)
    full = partial = 0
    if m.arch == "llama":
        full = max(4 * batch * (1 + 4 * e + context * (1 + h)), 4 * batch * (e + vocab))
        partial = 4 * batch * e + max(
            4 * batch * (1 + e + max(context, e)) + e * e * 9 // 16 + 4 * context * (batch * h + eh * hkv),
            4 * batch * (e + vocab) + e * vocab * 105 // 128,
        )
        if m.gate_exps:  # "mixtral 8x22b": the experts in one tensor
            partial = max(
                3 * m.gate_exps + 4 * batch * (2 * m.ffn + hkv + e + context + eh * hkv),
                4 * (context * batch * h + context * eh * hkv + batch * 1024 + eh * hkv * batch),
            )
    elif m.arch in ("gemma", "gemma2", "gemma3"):
        k = m.head_k
        full = max(4 * batch * (e + vocab), 4 * batch * (2 + context + context * h + 2 * e + 2 * k * h))
        partial = max(
            4 * e * batch + e * vocab * 105 // 128 + 4 * vocab * batch,
            4 * batch * (2 * e + 1 + 2 * k * h + context + context * h) + 4 * k * context * 8 + e * k * h * 9 // 16,
        )
        if m.arch == "gemma3" and line.sliding_kv:  # every 6th layer global, the rest the window
            window = parallel * m.window + batch
            kv = [
                c if (i + 1) % 6 == 0 else int(window * 2 * m.head_k * hkv * KV_BYTES[cache]) for i, c in enumerate(kv)
            ]
    elif m.arch == "qwen2":
        full = max(4 * batch * (e + vocab), 4 * batch * (1 + 2 * e + context + context * h))
        partial = max(
            4 * batch * (e + vocab) + e * vocab * 105 // 128,
            4 * (batch * (1 + 2 * e + context * (1 + h)) + e * (1 + context)),
        )
    if partial == 0:
        partial = (h // max(1, hkv)) * sum(kv) // 6
    return kv, partial, full or partial


@dataclass(frozen=True)
class OllamaEstimate:
    """EstimateGPULayers' result: its log's ``offload`` line."""

    layers: int  # layers.offload (the output layer counts as one)
    layers_model: int  # block_count + 1
    split: tuple[int, ...]  # layers on each GPU
    allocations: tuple[int, ...]  # memory.required.allocations
    kv: int  # memory.required.kv
    graph_full: int
    graph_partial: int
    weights_repeating: int
    weights_output: int
    full: int  # memory.required.full: ollama ps SIZE
    partial: int  # memory.required.partial: SIZE's GPU part
    free: int = 0  # memory.available, all the GPUs together

    @property
    def processor(self) -> str:
        """ollama ps' PROCESSOR column (cmd/cmd.go)."""
        if self.partial == 0 or self.layers == 0:
            return "100% CPU"
        if self.partial >= self.full:
            return "100% GPU"
        cpu = round((self.full - self.partial) / self.full * 100)
        return f"{cpu}%/{100 - cpu}% CPU/GPU"


@dataclass(frozen=True)
class Card:
    """One GPU as Ollama's discovery sees it."""

    free: int
    minimum: int = CUDA_MINIMUM_MEMORY
    metal: bool = False


def _place(
    sizes: list[tuple[int, int]], cards: list[Card], held: int, alloc: list[int], counts: list[int], room: list[int]
) -> int:
    """Layers to GPUs in turn (gpusWithSpace[i % j]); a GPU without room leaves the list. The
    layers not placed: their bytes."""
    overflow = 0
    for i, size in sizes:
        for j in range(len(room), 0, -1):
            g = room[i % j]
            if cards[g].free > alloc[g] + held + size:
                alloc[g] += size
                counts[g] += 1
                break
            room.pop(i % j)
        if not room:
            overflow += size
    return overflow


def estimate_gpu_layers(
    m: OllamaModel,
    cards: list[Card],
    line: OllamaLine,
    *,
    context: int,
    parallel: int,
    cache: CacheType = CacheType.F16,
    num_gpu: int = -1,
    overhead: int = 0,
) -> OllamaEstimate:
    """EstimateGPULayers for ``context`` cells (num_ctx × parallel) over ``cards``."""
    kv, partial, full = graph_size(m, context, parallel, cache, line)
    if cards and cards[0].metal:
        partial = full
    elif len(cards) > 1:
        full = partial
    graph = max(partial, full)
    buffer = (m.layers[0] if m.layers else 0) + kv[0]
    alloc, counts = [0] * len(cards), [0] * len(cards)
    room = []
    for g, card in enumerate(cards):
        if card.free >= overhead + graph + card.minimum + 2 * buffer:
            room.append(g)
            alloc[g] = card.minimum + buffer
    n = len(m.layers)
    order = range(n - 1, -1, -1) if line.last_layer_first else range(n)
    wanted = [(i, m.layers[i] + kv[i]) for i in order]
    capped = wanted if num_gpu < 0 else wanted[:num_gpu]
    overflow = sum(size for _, size in wanted[len(capped) :])
    overflow += _place(capped, cards, graph + overhead, alloc, counts, room)
    placed = sum(counts)
    if not line.last_layer_first:  # before v0.7.0: the layers left over, each at the last layer's size
        overflow = (n - placed) * wanted[-1][1] if wanted else 0
    if num_gpu < 0 or placed < num_gpu:
        for j in range(len(room), 0, -1):
            g = room[placed % j]
            if cards[g].free > overhead + alloc[g] + graph + m.output:
                alloc[g] += m.output
                counts[g] += 1
                placed += 1
                break
    fully = placed >= n + 1
    if not fully:
        overflow += m.output
    for g in range(len(cards)):
        if counts[g] > 0:
            alloc[g] += full if fully else partial
    on_gpu = sum(alloc)
    return _result(m, cards, counts, alloc, kv, (partial, full), on_gpu + overflow, on_gpu if placed else 0)


def _result(
    m: OllamaModel,
    cards: list[Card],
    counts: list[int],
    alloc: list[int],
    kv: list[int],
    graphs: tuple[int, int],
    full: int,
    partial: int,
) -> OllamaEstimate:
    """The estimate as its log prints it: ``graphs`` (partial, full); ``full`` SIZE, ``partial`` its GPU part."""
    return OllamaEstimate(
        layers=sum(counts),
        layers_model=len(m.layers) + 1,
        split=tuple(counts),
        allocations=tuple(alloc),
        kv=sum(kv),
        graph_full=graphs[1],
        graph_partial=graphs[0],
        weights_repeating=sum(m.layers),
        weights_output=m.output,
        full=full,
        partial=partial,
        free=sum(card.free for card in cards),
    )


# ---- v0.12.11 on: llm/server.go createLayout ---------------------------------------------------
def _gpus_split(split: tuple[int, ...]) -> str:
    """ "GPU", or "GPUs (GPU 0: 5, GPU 1: 5)" naming each GPU that holds layers."""
    if len(split) <= 1:
        return "GPU"
    return f"GPUs ({', '.join(f'GPU {g}: {n}' for g, n in enumerate(split) if n)})"


def _f32(x: float) -> float:
    """Go's float32 rounding (findBestFit's capacity factor and greedyFit's free space)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


_EPSILON: Final = _f32(1e-6)
Assignment = list[tuple[int, list[int]]]  # ml.GPULayersList: (a GPU's position, its layers)


def _count(assignment: Assignment) -> int:
    return sum(len(layers) for _, layers in assignment)


def greedy_fit(layers: list[int], free: list[int], capacity: float, requested: int) -> Assignment:
    """greedyFit: the last layer first onto the last GPU, spilling to the one before it."""
    device = len(free) - 1
    # Built from the top down (GPUs and layers in reverse: an append, not Go's prepend, which in a
    # Python list costs O(layers) per layer) and turned round once at the end.
    backwards: Assignment = [(device, [])]
    space = int(_f32(_f32(free[device]) * capacity))
    for i in range(len(layers) - 1, -1, -1):
        if 0 <= requested <= len(layers) - 1 - i:
            break
        while layers[i] > space:
            device -= 1
            if device < 0:
                return [(gpu, placed[::-1]) for gpu, placed in reversed(backwards)]
            backwards.append((device, []))
            space = int(_f32(_f32(free[device]) * capacity))
        backwards[-1][1].append(i)
        space -= layers[i]
    return [(gpu, placed[::-1]) for gpu, placed in reversed(backwards)]


def find_best_fit(layers: list[int], free: list[int], requested: int, force: bool) -> Assignment:
    """findBestFit: the smallest capacity factor that still places as many layers (it balances the GPUs).

    Its bisection runs greedyFit some thirty times for each GPU count tried, and the window asks again
    at every edit: the answer is kept per input (a pure function of them)."""
    found = _best_fit(tuple(layers), tuple(free), requested, force)
    return [(device, list(placed)) for device, placed in found]


@lru_cache(maxsize=512)
def _best_fit(
    layers: tuple[int, ...], free: tuple[int, ...], requested: int, force: bool
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    best = _search_best_fit(list(layers), list(free), requested, force)
    return tuple((device, tuple(placed)) for device, placed in best)


def _search_best_fit(layers: list[int], free: list[int], requested: int, force: bool) -> Assignment:
    high, low = (1000.0 if requested >= 0 and force else 1.0), 0.0
    best = greedy_fit(layers, free, high, requested)
    target = _count(best)
    if target == 0:
        # Nothing placed at the highest factor: every lower one places nothing either and walks the same
        # GPUs, so the bisection could only return this layout again (it cost O(GPUs²) per GPU count).
        return best
    while _f32(high - low) > _EPSILON:
        mid = _f32(_f32(low + high) / 2)
        if mid in (low, high):
            # Past a factor of about 16 two neighbouring float32 values lie more than 1e-6 apart, so
            # Go's loop (v0.13.0 llm/server.go findBestFit, ``for high-low > 1e-6``) would never end:
            # a num_gpu far beyond the card. The fit at ``high`` is the answer it keeps.
            break
        got = greedy_fit(layers, free, mid, requested)
        if _count(got) == target:
            high, best = mid, got
        else:
            low = mid
    return best


def assign_layers(layers: list[int], free: list[int], requested: int, last_used: int) -> Assignment:
    """assignLayers: as few GPUs as hold everything; failing that, everything but the output layer."""
    got: Assignment = []
    for _ in range(2):
        requested = min(len(layers), requested)
        for i in range(last_used, len(free)):
            got = find_best_fit(layers, free[: i + 1], requested, i == len(free) - 1)
            if _count(got) in (len(layers), requested):
                break
        if _count(got) == len(layers):
            return got
        layers = layers[:-1]
    return got


def create_layout(
    layers: list[int], cards: list[Card], graph: int, *, buffer: int, num_gpu: int, overhead: int = 0
) -> Assignment:
    """llamaServer.Load's loop over createLayout (buildLayout): ``buffer`` off every GPU; each pass
    takes MinimumMemory + overhead + the graph of a GPU already used off its free memory, sorted
    largest first, and assigns again while the layout uses more GPUs. Positions are card indices."""
    free = [max(0, card.free - buffer) for card in cards]
    order = sorted(range(len(cards)), key=lambda g: -free[g])
    graphs = [0] * len(cards)
    placed: Assignment = []
    while True:
        previous = placed
        avail = [max(0, free[g] - cards[g].minimum - overhead - graphs[g]) for g in order]
        last_used = max((i for i, g in enumerate(order) if graphs[g]), default=0)
        placed = [(order[i], layer) for i, layer in assign_layers(layers, avail, num_gpu, last_used)]
        if len(placed) <= len(previous):
            return placed
        for g, _ in placed:
            graphs[g] = graph


LayoutSizes = tuple[list[int], int, int, int, list[int], int]


def _layout_sizes(plan: Plan, m: OllamaModel, cards: list[Card], line: OllamaLine, slots: int) -> LayoutSizes:
    """Each entry createLayout places (blk.N with its KV, then the output layer), the per-GPU
    buffer, the partial- and full-offload graphs, the KV and the weights kept on the host."""
    inf = plan.inference
    if m.arch not in GO_ENGINE:  # the llama runner: GraphSize's estimate, one layer held back
        kv, partial, full = graph_size(m, inf.context * slots, slots, kv_type(plan), line)
        if cards and cards[0].metal:
            partial = full
        buffer = (m.layers[0] + kv[0]) if m.layers else 0
        return [w + k for w, k in zip(m.layers, kv, strict=True)] + [m.output], buffer, partial, full, kv, 0
    # The Go engine measures its buffers: llama.cpp's own stand in for them.
    ran = replace(plan, inference=replace(inf, concurrent=slots, cache_type=kv_type(plan)))
    cells = context_cells(ran)
    kv = [int(kv_bytes_of_layers(ran, (i,), cells)) for i in range(len(m.layers))]
    split = len(cards) > 1
    full = int(compute_buffer_bytes(ran, cells, output=True, split=split))
    partial = int(compute_buffer_bytes(ran, cells, output=False, split=split))
    embedding = int(gguf_tensor_bytes(plan.model, inf.gguf_quant)[1])
    return [w + k for w, k in zip(m.layers, kv, strict=True)] + [m.output], 0, partial, full, kv, embedding


def layout_gpu_layers(plan: Plan, cards: list[Card], line: OllamaLine, slots: int, num_gpu: int) -> OllamaEstimate:
    """Ollama's layout from v0.12.11 (module docstring): its layer count, split and reported memory."""
    m = ollama_model(plan.model, plan.inference.gguf_quant)
    sizes, buffer, partial, full, kv, host = _layout_sizes(plan, m, cards, line, slots)
    placed = create_layout(sizes, cards, max(partial, full), buffer=buffer, num_gpu=num_gpu)
    count = _count(placed)
    graph = full if count >= len(sizes) else partial
    alloc, split = [0] * len(cards), [0] * len(cards)
    for g, layers in placed:
        alloc[g] += sum(sizes[i] for i in layers) + graph
        split[g] += len(layers)
    on_gpu = sum(alloc) + (host if count >= len(sizes) else 0)
    total = sum(sizes) + graph * len(placed) + host
    return _result(m, cards, split, alloc, kv, (partial, full), total, on_gpu if count else 0)


# ---- v0.30.0 on: llama-server's own fit ------------------------------------------------------
def fit_gpu_layers(plan: Plan, gpu: GpuSpec, cards: list[Card], slots: int, num_gpu: int) -> OllamaEstimate:
    """llama-server's ``--fit`` (core.serving.llamacpp_fit) at Ollama's -c and -np, or the ``num_gpu``
    it passes as -ngl (then llama.cpp's own split); ollama ps reads the buffer sizes llama-server
    prints (llm/llama_server.go memoryParsingWriter: memTotal every buffer, memGPU the GPUs')."""
    inf = plan.inference
    ran = replace(plan, inference=replace(inf, concurrent=slots, cache_type=kv_type(plan)))
    split: tuple[int, ...] = ()
    if num_gpu < 0:
        fit = llamacpp_fit(ran, gpu)  # not for an MoE model: core.plan refuses it (_check_llamacpp_fit)
        ran = replace(ran, inference=replace(ran.inference, gpu_layers=fit.gpu_layers))
        split = fit.split if inf.pipeline_parallel > 1 else ()
    else:
        ran = replace(ran, inference=replace(ran.inference, gpu_layers=num_gpu))
    buffers = llamacpp_buffers(ran, overhead=0.0, split=split)
    counts = [len(layers) for layers in buffers.layout.device_layers]
    if buffers.layout.output_device >= 0:
        counts[buffers.layout.output_device] += 1
    alloc = [int(b) for b in buffers.device_totals]
    kv = [int(sum(buffers.device_kv) + buffers.host_kv)]
    graph = int(max(buffers.device_compute, default=0.0))
    m = ollama_model(plan.model, inf.gguf_quant)
    return _result(m, cards, counts, alloc, kv, (graph, graph), sum(alloc) + int(buffers.host_bytes), sum(alloc))


# ---- a plan run through Ollama ---------------------------------------------------------------
def free_memory(gpu: GpuSpec) -> int:
    """What Ollama's discovery reads as free on an idle card: the total less the CUDA context
    its own process holds (core.runtime.CUDA_CONTEXT_BYTES); on Apple silicon Metal's working set
    less what the device holds before any buffer (core.serving.llamacpp.device_overhead_bytes)."""
    return int(gpu.memory_bytes - device_overhead_bytes(gpu)[1])


def _cards(plan: Plan, gpu: GpuSpec) -> list[Card]:
    """Each GPU as discovery reads it: an idle card's free memory (:func:`free_memory`) less what other
    processes hold (``hardware.held_by_others``). The ``FreeMemory`` that ``EstimateGPULayers`` and
    ``createLayout`` fill (module docstring) is the driver's free figure when the model is scheduled, so
    memory others hold leaves room for fewer layers."""
    metal = gpu.vendor == "apple"
    free = max(0, free_memory(gpu) - int(plan.hardware.held_by_others))
    card = Card(free, METAL_MINIMUM_MEMORY if metal else CUDA_MINIMUM_MEMORY, metal)
    return [card] * plan.inference.pipeline_parallel


def kv_type(plan: Plan) -> CacheType:
    """The cache type Ollama passes: OLLAMA_KV_CACHE_TYPE only with flash attention, and only f16, q8_0, q4_0."""
    inf = plan.inference
    return inf.cache_type if inf.flash_attention and inf.cache_type in KV_BYTES else CacheType.F16


def ollama_estimate(plan: Plan, gpu: GpuSpec, parallel: int | None = None) -> OllamaEstimate:
    inf = plan.inference
    line = line_of(inf.ollama_version)
    slots = inf.concurrent if parallel is None else parallel
    num_gpu = -1 if inf.gpu_layers > plan.model.num_layers else inf.gpu_layers
    if line.llama_fit:
        return fit_gpu_layers(plan, gpu, _cards(plan, gpu), slots, num_gpu)
    if line.layout:
        return layout_gpu_layers(plan, _cards(plan, gpu), line, slots, num_gpu)
    return estimate_gpu_layers(
        ollama_model(plan.model, inf.gguf_quant),
        _cards(plan, gpu),
        line,
        context=inf.context * slots,
        parallel=slots,
        cache=kv_type(plan),
        num_gpu=num_gpu,
    )


def auto_parallel(plan: Plan, gpu: GpuSpec) -> int:
    """OLLAMA_NUM_PARALLEL unset: the first of the line's tries at which the model fits whole
    (sched.go pickBestFullFitByLibrary; PredictServerFit: every layer and the output), else 1."""
    line = line_of(plan.inference.ollama_version)
    for slots in line.parallel_tries:
        estimate = ollama_estimate(plan, gpu, slots)
        if estimate.layers >= estimate.layers_model:
            return slots
    return 1


def default_num_ctx(plan: Plan, gpu: GpuSpec, line: OllamaLine) -> int:
    """num_ctx when the request gives none: the line's OLLAMA_CONTEXT_LENGTH default, from v0.15.5 by
    the GPUs' total memory (server/routes.go); from v0.12.11 at most the model's trained context
    (llm/server.go NewLlamaServer: "requested context size too large for model")."""
    context = line.num_ctx
    if line.vram_ctx:
        total = gpu.memory_bytes * plan.inference.pipeline_parallel
        context = next((ctx for floor, ctx in VRAM_CONTEXT if total >= floor), line.num_ctx)
    return min(context, plan.model.max_position_embeddings) if line.layout else context


def default_flash(plan: Plan, line: OllamaLine) -> bool:
    """OLLAMA_FLASH_ATTENTION unset: off; from v0.12.11 on for the models GGML.FlashAttention lists,
    from v0.13.4 the llama runner's "auto" (llama.cpp turns it on where the GPU runs it)."""
    if not line.layout:
        return False
    arch = GGUF_ARCH.get(plan.model.family, plan.model.family)
    return arch in FLASH_BY_MODEL or (line.flash_auto and arch not in GO_ENGINE)


def ollama_defaults(plan: Plan, gpu: GpuSpec, given: frozenset[str]) -> Plan:
    """The plan with the Ollama line's defaults for what was not ``given`` (attribute paths):
    num_ctx, OLLAMA_NUM_PARALLEL (chosen as the scheduler does) and flash attention off."""
    inf = plan.inference
    if inf.ollama_version is OllamaVersion.NONE:
        return plan
    line = line_of(inf.ollama_version)
    context = inf.context if "inference.context" in given else default_num_ctx(plan, gpu, line)
    # A quantised cache type given asks for OLLAMA_FLASH_ATTENTION=1, so it stays.
    quantised = inf.cache_type not in UNQUANTISED_CACHE
    flash = inf.flash_attention if "inference.flash_attention" in given or quantised else default_flash(plan, line)
    plan = replace(plan, inference=replace(inf, context=context, flash_attention=flash))
    if "inference.concurrent" not in given:
        plan = replace(plan, inference=replace(plan.inference, concurrent=auto_parallel(plan, gpu)))
    return plan


@dataclass(frozen=True)
class OllamaDecision:
    version: OllamaVersion
    estimate: OllamaEstimate

    @property
    def tensor_split(self) -> tuple[int, ...]:
        """The per-GPU layer counts the runner gets as its tensor split (from v0.12.11; before, the
        planner keeps llama.cpp's equal split)."""
        split = self.estimate.split
        return split if LINES[self.version].layout and len(split) > 1 else ()

    @property
    def sentence(self) -> str:
        e, line = self.estimate, LINES[self.version]
        if line.llama_fit:
            return self._fit_sentence
        if line.layout:
            return self._layout_sentence
        return (
            f"Ollama {self.version.value} ({line.tags}) would place {e.layers} of {e.layers_model} layers on the "
            f"GPU: its estimate is {e.weights_repeating / max(1, e.layers_model - 1) / MiB:,.1f} MiB of weights a "
            f"layer on average, KV {e.kv / MiB:,.1f} MiB in all and a graph of "
            f"{max(e.graph_full, e.graph_partial) / MiB:,.1f} MiB, in {e.free / GiB:.1f} GiB free; "
            f"ollama ps: SIZE {e.full / GiB:.1f} GiB, PROCESSOR {e.processor}."
        )

    @property
    def _fit_sentence(self) -> str:
        e, line = self.estimate, LINES[self.version]
        return (
            f"Ollama {self.version.value} ({line.tags}) starts llama-server without -ngl: llama.cpp's fit "
            f"(common/fit.cpp) would place {e.layers} of {e.layers_model} layers on the "
            f"{_gpus_split(e.split)}, leaving at least {FIT_TARGET / MiB:,.0f} MiB free on "
            f"each (--fit-target) at the context Ollama passes (-c, not lowered); ollama ps: SIZE "
            f"{e.full / GiB:.1f} GiB, PROCESSOR {e.processor}."
        )

    @property
    def _layout_sentence(self) -> str:
        e, line = self.estimate, LINES[self.version]
        graph = e.graph_full if e.layers >= e.layers_model else e.graph_partial
        return (
            f"Ollama {self.version.value} ({line.tags}) would place {e.layers} of {e.layers_model} layers on the "
            f"{_gpus_split(e.split)}: its layout counts "
            f"{e.weights_repeating / max(1, e.layers_model - 1) / MiB:,.1f} MiB of weights a layer on average, "
            f"KV {e.kv / MiB:,.1f} MiB in all and a compute graph of {graph / MiB:,.1f} MiB on each GPU used, "
            f"in {e.free / GiB:.1f} GiB free; ollama ps: SIZE {e.full / GiB:.1f} GiB, PROCESSOR {e.processor}."
        )


def ollama_plan(plan: Plan, gpu: GpuSpec) -> tuple[Plan, OllamaDecision | None]:
    """The plan as Ollama starts its runner: -ngl its estimate's layer count, the cache type it
    passes; unchanged without Ollama."""
    inf = plan.inference
    if inf.ollama_version is OllamaVersion.NONE:
        return plan, None
    estimate = ollama_estimate(plan, gpu)
    ran = replace(plan, inference=replace(inf, gpu_layers=estimate.layers, cache_type=kv_type(plan)))
    return ran, OllamaDecision(inf.ollama_version, estimate)
