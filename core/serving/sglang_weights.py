"""The weights SGLang leaves behind: each tensor of the rank through PyTorch's caching allocator.

SGLang sizes its token pool from the free device memory after the model loads:
``ModelRunner.profile_max_num_token`` is ``get_available_gpu_memory(...) - total × (1 -
mem_fraction_static)`` (``python/sglang/srt/model_executor/model_runner.py`` in the 0.4.2 and
0.4.3.post4 wheels; ``model_runner_kv_cache_mixin.py`` at sgl-project/sglang@001ccef0 keeps it),
and ``get_available_gpu_memory`` (``sglang/srt/utils.py``) is ``torch.cuda.empty_cache()`` then
``torch.cuda.mem_get_info``. Free memory counts the allocator's segments, not the tensors, and each
parameter is its own request (``DefaultModelLoader.load_model`` builds the model under
``torch.device(cuda)``), so the weights SGLang subtracts are the rank's tensors replayed in
construction order through :func:`core.allocator.resident_segment_bytes`.

Construction order, read from the 0.4.3.post4 wheel (``models/qwen2.py``, ``models/llama.py``,
``models/qwen2_moe.py``; the stored sgl-project/sglang@36ce1f99 ``models/qwen2.py`` keeps it):
the embedding (``VocabParallelEmbedding``: the vocabulary padded to 64 rows,
``DEFAULT_VOCAB_PADDING_SIZE`` in ``layers/vocab_parallel_embedding.py``, split over the ranks);
per layer the attention (fused ``QKVParallelLinear`` and its bias, ``RowParallelLinear`` o, the
rotary table once, in the first layer (``get_rope`` caches it), q/k norms), the MLP (fused
``MergedColumnParallelLinear`` gate_up and down; a MoE block's ``FusedMoE`` stacks ``w13_weight``
and ``w2_weight``, then its ``ReplicatedLinear`` router and any shared expert), then the layer's
norms (``input_layernorm``, ``post_attention_layernorm`` are built after the attention and MLP);
the final norm; the head unless tied (``ParallelLMHead``). A linear layer creates its quantisation
method's tensors (``create_weights``) before its bias.

What the quantised linears keep after loading is not decided here: ``process_weights_after_loading`` of SGLang's
GPTQ Marlin methods (the 0.5.1 wheel's ``layers/quantization/gptq.py``: ``GPTQMarlinLinearMethod`` sets g_idx
and, for a symmetric checkpoint without zero points, qzeros to ``marlin_make_empty_g_idx``; ``GPTQMarlinMoEMethod``
empties ``w13_g_idx`` / ``w2_g_idx`` and leaves the experts' qzeros) is the rule of
:func:`core.serving.gptq.gptq_kept`, which :func:`core.serving.gptq.after_loading_delta` reads too. The replay
counts those tensors as freed (:attr:`SglangWeights.freed`) and leaves their blocks in the segments: the
caching allocator keeps a freed block cached in its segment, and ``empty_cache`` returns only segments left
wholly free (not replayed, nor the Marlin repack's new qweight and scales).

Not subtracted by :func:`core.serving.engines.sglang_memory` yet: wired in, it brings the two
held-out SGLang logs to -1.7 % and +5.8 % (from +6.1 % and +7.6 %), but the one fitted SGLang log
(Qwen3-235B FP8 on four H100s, vLLM issue #21348) then implies 0.35 GiB less tensor-parallel memory
than vLLM's NVSwitch logs, and with llm-d-planner's logs left out that log alone sets the NVSwitch
constant, which moves their Qwen2.5-72B TP 2 logs from +2.0 % to +14.4 % (docs/SERVING.md, "SGLang's
weights are allocator segments: the rule, and why it is not wired in yet"). The gap is not NCCL's
NVLS buffers (none on two GPUs, 128 MiB at TP 4): the engines measure different communicator
memory ("Is the gap NVLS? Read from source: no").

vLLM is not affected: its profile subtracts ``weights_memory`` measured by
``DeviceMemoryProfiler`` (``torch.cuda.max_memory_allocated``, the rounded tensors) and counts as
non-torch only ``mem_get_info``'s used memory less ``torch.cuda.memory_reserved`` (vllm-project/vllm
@a6d5c390 ``vllm/utils/mem_utils.py``, ``MemorySnapshot.measure`` and ``memory_profiling``), so the
segments' slack is in neither term and stays outside its budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from core.allocator import resident_segment_bytes
from core.dtypes import WeightFormat
from core.model import ModelSpec
from core.plan import Plan
from core.serving.gptq import CHECKPOINT_KEPT, GptqKept, gptq_kept

SGLANG_VOCAB_PADDING: Final = 64  # DEFAULT_VOCAB_PADDING_SIZE
# The rotary embedding's cos/sin table is built while the model loads, so it is taken before that
# free memory is read, like the weights: sglang/srt/layers/rotary_embedding.py (sgl-project/sglang
# 00a66ebe136b90479f9ccf9fc4f3d1c08251981c) RotaryEmbedding.__init__ keeps the cache in float32 on
# CUDA ("cache needs to be in FP32 for numerical stability": `if not _is_cuda: cache =
# cache.to(dtype)`), max_position rows of cos | sin (rotary_dim wide), one table per model
# (get_rope's _ROPE_DICT shares it across layers). Releases before sgl-kernel's rope used vLLM's
# RotaryEmbedding, which casts it to the model's dtype (half these bytes): not told apart.
SGLANG_ROPE_CACHE_BYTES: Final = 4  # float32 per cos / sin entry
# Checkpoint formats' tensors as SGLang 0.4.3.post4 creates them (create_weights):
# AWQ (vLLM's AWQLinearMethod): qweight int32 [in, out / 8], qzeros int32 [in / 128, out / 8],
# scales fp16 [in / 128, out]; GPTQ (GPTQLinearMethod): qweight int32 [in / 8, out], g_idx int32
# [in], qzeros, scales as AWQ; 8-bit GPTQ the same four with a quarter of the packing (qweight int32
# [in / 4, out], qzeros int32 [in / 128, out / 4]: pack_factor 32 // 8); FP8 checkpoints
# (layers/quantization/fp8.py Fp8LinearMethod, per-tensor): weight float8 [out, in], weight_scale
# float32, one per fused shard. The Marlin kernels SGLang picks for AWQ / GPTQ on sm80+ repack each
# qweight after loading (process_weights_after_loading: a new tensor of the same size, the old one
# freed): not replayed.
INT4_GROUP: Final = 128
INT32_BYTES: Final = 4
HALF_BYTES: Final = 2
FP8_SCALE_BYTES: Final = 4
# Formats whose tensors are written here; the others (int8, NF4, MXFP4) keep the planner's bytes.
REPLAYED_FORMATS: Final = frozenset(
    {
        WeightFormat.BF16,
        WeightFormat.FP16,
        WeightFormat.FP32,
        WeightFormat.FP8,
        WeightFormat.AWQ_INT4,
        WeightFormat.GPTQ_INT4,
        WeightFormat.GPTQ_INT8,
    }
)


@dataclass(frozen=True)
class SglangWeights:
    """One rank's weights as SGLang's free memory sees them (bytes)."""

    tensors: int  # the parameters as the checkpoint's format stores them
    rope: int  # the float32 rotary table built while loading
    segments: int  # what free device memory loses: the allocator's segments for both
    freed: int = 0  # of the tensors, what the kernel frees after loading (GPTQ's qzeros / g_idx: gptq_kept)

    @property
    def rounding(self) -> int:
        """The caching allocator's slack: segments no tensor fills."""
        return self.segments - self.tensors - self.rope

    @property
    def held(self) -> int:
        """The parameters the rank holds once loaded: the checkpoint's less what the kernel frees."""
        return self.tensors - self.freed


# The kinds of tensor a replayed rank holds that the after-loading rule may free (core.serving.gptq.GptqKept):
# an ordinary linear's qzeros, a fused MoE's experts' (kept by every Marlin MoE method), and any g_idx.
QZEROS: Final = "qzeros"
EXPERT_QZEROS: Final = "expert qzeros"
G_IDX: Final = "g_idx"
OTHER: Final = ""


def _linear_parts(
    fmt: WeightFormat, n_in: int, n_out: int, shards: int = 1, bias: bool = False, expert: bool = False
) -> list[tuple[str, int]]:
    """(kind, bytes) of one linear layer's tensors on the rank (``n_in`` × ``n_out`` already split), in order;
    ``expert``: one expert's slice of a fused MoE stack."""
    groups = math.ceil(n_in / INT4_GROUP)
    zeros = EXPERT_QZEROS if expert else QZEROS
    out: list[tuple[str, int]]
    if fmt is WeightFormat.AWQ_INT4:  # Marlin repacks AWQ's zero points, the same bytes: never freed
        out = [(OTHER, n_in * n_out // 2), (OTHER, groups * n_out // 2), (OTHER, groups * n_out * HALF_BYTES)]
    elif fmt is WeightFormat.GPTQ_INT4:
        out = [(OTHER, n_in * n_out // 2), (G_IDX, n_in * INT32_BYTES), (zeros, groups * n_out // 2)]
        out.append((OTHER, groups * n_out * HALF_BYTES))
    elif fmt is WeightFormat.GPTQ_INT8:
        out = [(OTHER, n_in * n_out), (G_IDX, n_in * INT32_BYTES), (zeros, groups * n_out)]
        out.append((OTHER, groups * n_out * HALF_BYTES))
    elif fmt is WeightFormat.FP8:
        out = [(OTHER, n_in * n_out), (OTHER, shards * FP8_SCALE_BYTES)]
    else:
        out = [(OTHER, n_in * n_out * _element(fmt))]
    return out + ([(OTHER, n_out * _element(fmt))] if bias else [])


def _linear(fmt: WeightFormat, n_in: int, n_out: int, shards: int = 1, bias: bool = False) -> list[int]:
    """Tensors of one linear layer on the rank (``n_in`` × ``n_out`` already split), in order."""
    return [nbytes for _, nbytes in _linear_parts(fmt, n_in, n_out, shards, bias)]


def _freed(kind: str, kept: GptqKept) -> bool:
    """Whether a tensor of ``kind`` is freed after loading under ``kept``."""
    return (kind == QZEROS and not kept.qzeros) or (kind == G_IDX and not kept.g_idx)


def _element(fmt: WeightFormat) -> int:
    """Bytes of an unquantised tensor (embeddings, norms, biases, routers) under ``fmt``."""
    return 4 if fmt is WeightFormat.FP32 else HALF_BYTES


def _experts(model: ModelSpec, fmt: WeightFormat, tp: int) -> list[tuple[str, int]]:
    """FusedMoE's stacks (w13 then w2, every expert's slice of the rank), the router, a shared expert."""
    e, d, i = model.num_experts, model.hidden_size, model.intermediate_size // tp
    gate_up = [(kind, e * t) for kind, t in _linear_parts(fmt, d, 2 * i, shards=2, expert=True)]
    down = [(kind, e * t) for kind, t in _linear_parts(fmt, i, d, expert=True)]
    out = gate_up + down + [(OTHER, e * d * _element(fmt))]  # ReplicatedLinear router, unquantised
    if model.shared_expert_size:
        shared = model.shared_expert_size // tp
        out += _linear_parts(fmt, d, 2 * shared, shards=2) + _linear_parts(fmt, shared, d)
        out.append((OTHER, d * _element(fmt)))
    return out


def _layer(model: ModelSpec, fmt: WeightFormat, tp: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(attention up to the rotary table, the rest of the layer) of one decoder layer on the rank."""
    d, hd, el = model.hidden_size, model.head_dim, _element(fmt)
    q = model.num_heads // tp * hd
    kv = max(1, model.num_kv_heads // tp) * hd  # replicated once tp exceeds the KV heads
    attn = _linear_parts(fmt, d, q + 2 * kv, shards=3, bias=model.qkv_bias)
    attn += _linear_parts(fmt, q, d, bias=model.o_bias)
    rest: list[int] = []
    if model.qk_norm == "head":
        rest += [hd * el, hd * el]
    elif model.qk_norm in ("projection", "per_head"):
        rest += [q * el, kv * el]
    if model.attention_sinks:
        rest.append(model.num_heads // tp * el)
    parts = [(OTHER, nbytes) for nbytes in rest]
    if model.num_experts > 1:
        parts += _experts(model, fmt, tp)
    else:
        i = model.intermediate_size // tp
        up = 2 * i if model.gated_mlp else i
        parts += _linear_parts(fmt, d, up, shards=2 if model.gated_mlp else 1, bias=model.mlp_bias)
        parts += _linear_parts(fmt, i, d, bias=model.mlp_bias)
    norm = [(OTHER, d * el)] * (2 if model.norm == "layernorm" else 1)
    return attn, parts + norm * model.norms_per_layer


def rank_parts(model: ModelSpec, fmt: WeightFormat, tp: int, layers: int) -> list[tuple[str, int]]:
    """(kind, bytes) of each tensor of one rank in SGLang's construction order (see :func:`rank_tensors`); the
    kind says which the after-loading rule may free (QZEROS, EXPERT_QZEROS, G_IDX, else OTHER)."""
    d, el = model.hidden_size, _element(fmt)
    rows = math.ceil(math.ceil(model.vocab_size / SGLANG_VOCAB_PADDING) * SGLANG_VOCAB_PADDING / tp)
    out = [(OTHER, rows * d * el)] + ([(OTHER, model.learned_positions * d * el)] if model.learned_positions else [])
    attn, rest = _layer(model, fmt, tp)
    for index in range(layers):
        out += attn
        if index == 0 and rope_bytes(model):
            out.append((OTHER, rope_bytes(model)))
        out += rest
    if layers == model.num_layers:
        out += [(OTHER, d * el)] * (2 if model.norm == "layernorm" else 1)
        out += [] if model.tie_embeddings else [(OTHER, rows * d * el)]
    return out


def rank_tensors(model: ModelSpec, fmt: WeightFormat, tp: int, layers: int) -> list[int]:
    """Bytes of each tensor of one rank in SGLang's construction order, the rotary table in its
    place (after the first layer's attention projections): the embedding, ``layers`` layers, and
    with every layer on the rank (no pipeline) the final norm and an untied head."""
    return [nbytes for _, nbytes in rank_parts(model, fmt, tp, layers)]


def rope_bytes(model: ModelSpec) -> int:
    """SGLang's float32 cos/sin table: positions × head width; none without rotary embeddings."""
    if model.alibi or model.learned_positions:
        return 0
    return model.max_position_embeddings * model.head_dim * SGLANG_ROPE_CACHE_BYTES


@lru_cache(maxsize=128)
def sglang_weights(
    model: ModelSpec, fmt: WeightFormat, tp: int, pp: int, kept: GptqKept = CHECKPOINT_KEPT
) -> SglangWeights | None:
    """The rank that decides (the first stage, which holds the embedding), or None where the
    tensors are not known: a format not in REPLAYED_FORMATS, or a parameter count given instead of
    derived (``params_override``: the shapes do not give the tensors). ``kept``: what the kernel keeps
    of GPTQ's qzeros / g_idx after loading (:func:`core.serving.gptq.gptq_kept`; :func:`plan_weights`
    asks it of a plan). Kept per model, format, layout and rule: a replay allocates every tensor of
    the rank once (about 10 per layer)."""
    if fmt not in REPLAYED_FORMATS or model.params_override:
        return None
    parts = rank_parts(model, fmt, tp, math.ceil(model.num_layers / pp))
    tensors = [nbytes for _, nbytes in parts]
    rope = rope_bytes(model)
    freed = sum(nbytes for kind, nbytes in parts if _freed(kind, kept))
    return SglangWeights(tensors=sum(tensors) - rope, rope=rope, segments=resident_segment_bytes(tensors), freed=freed)


def plan_weights(plan: Plan) -> SglangWeights | None:
    """:func:`sglang_weights` of the plan's model, weight format and split, with what its engine's kernel keeps
    after loading (:func:`core.serving.gptq.gptq_kept`)."""
    inf = plan.inference
    return sglang_weights(plan.model, inf.weight_dtype, inf.tensor_parallel, inf.pipeline_parallel, gptq_kept(plan))
