"""llama.cpp (``llama-server``, and Ollama's runner built on it): memory as it prints it.

At start-up llama.cpp prints one buffer per backend: the model's tensors (``CUDA0 model
buffer size``, the rest ``CPU``), the KV cache (``CUDA0 KV buffer size``) and the compute
buffer the graph allocator reserves for the worst batch (``CUDA0 compute buffer size``).
Each is modelled from the source:

* **Tensors.** A GGUF file's type (Q4_K_M, IQ4_XS, ...) is a default ggml type and a mix:
  ``llama_tensor_get_type`` (ggml-org/llama.cpp commit 8784689f, ``src/llama-quant.cpp``)
  gives the output matrix Q6_K, half the layers' attention-V and FFN-down matrices Q6_K in
  Q4_K_M (``use_more_bits``), and so on; a row whose length is not a multiple of the type's
  block falls back to another type. Bytes are ``ggml_row_size``: whole blocks of
  :data:`core.dtypes.GGML_BLOCKS`. Norms, biases and the MoE router stay float32. IQ types
  are assumed made with an importance matrix (llama-quantize asks for one), the others without.
* **Where they live.** ``-ngl N`` puts the last N repeating layers on the GPUs and, when N
  exceeds the layer count, the output layer too; the token embeddings always stay in host
  memory. With several GPUs (``-sm layer``, the plan's pipeline stages) layer ``i`` of the
  ``a`` offloaded goes to the first GPU whose cumulative share exceeds ``i / a``
  (``llm_load_tensors``), the output layer to the last.
* **KV cache.** ``n_ctx`` cells (the context of every slot together, padded to 256 with flash
  attention, else 32) × (K + V) rows of the KV width in the cache type, on the device of each
  layer; a sliding-window layer keeps ``min(n_ctx, pad(window × slots + n_ubatch))`` cells
  (``llama_kv_cache_unified_iswa``). A multi-head latent attention model (``deepseek2``) caches one
  latent of kv_lora_rank + rope as K and no V in a current build (:func:`core.serving.kv.llamacpp_cache_widths`).
* **Compute buffer.** The graph of one ``n_ubatch`` forward at a full cache, its largest
  moment: without flash attention the float32 scores ``n_kv × n_ubatch × heads`` with the mask
  and four hidden-state tensors; with it the FFN's two float32 intermediates; on the output
  device the float32 logits of ``n_ubatch`` rows (llama-server from b9460: one a slot,
  :func:`output_rows`); with several GPUs the scheduler's four copies of each split's inputs
  (``pipeline parallelism enabled (n_copies=4)``). This is the
  ggml graph's arithmetic, checked on the printed buffers of four sources (benchmarks/realgpu).
  The attention mask grows with ``n_ctx``: a graph input, kept in the host's compute buffer and copied
  to each GPU; before b9410 flash attention cast a float32 mask to float16 on the GPU, both live at the
  cast (:data:`FA_MASK_F16_FROM_BUILD`, :func:`host_input_bytes`).
* **Hybrid recurrent models** (Granite 4.0-H, Bamba, Nemotron-H, Falcon-H1, Qwen3-Next, Qwen3.5 / 3.6): their KV
  cache holds the attention layers only, an RS buffer holds each recurrent layer's float32 states, one cell a slot,
  and their tensors and graph have their own shapes (:mod:`core.serving.llamacpp_hybrid`).
* **Overhead.** Each GPU holds its CUDA context (:data:`core.runtime.CUDA_CONTEXT_BYTES`); on Apple
  silicon Metal's device holds next to nothing before the first buffer (:data:`METAL_DEVICE_BYTES`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from core.breakdown import BucketKey, Term, make_bucket
from core.catalogue import GpuSpec
from core.dtypes import (
    CACHE_GGML,
    ELEMENT_BYTES,
    GGML_BLOCKS,
    GGUF_FLOAT,
    CacheType,
    GgmlType,
    GgufQuant,
    LlamaCppBackend,
    ggml_row_bytes,
)
from core.format import gb
from core.hybrid import MIXER_NAMES
from core.inputs import OllamaVersion
from core.model import ModelSpec
from core.plan import Engine, Plan
from core.runtime import CUDA_CONTEXT_BYTES, card_left_bytes
from core.serving.engines import MAX_CONTEXT, EngineMemory
from core.serving.kv import llamacpp_cache_widths
from core.serving.llamacpp_hybrid import (
    has_attention,
    hybrid_float32_params,
    hybrid_layer_matrices,
    quant_position,
    recurrent_graph_bytes,
    rs_bytes_of_layers,
)
from core.solve import largest_fitting
from core.units import GB, MiB
from core.verdict import Verdict, judge

# ggml's scheduler keeps this many copies of each split's inputs with pipeline parallelism
# (GGML_SCHED_MAX_COPIES, ggml/include/ggml-backend.h; the logs print "n_copies=4").
SCHED_COPIES: Final = 4
# The attention mask's token dimension is padded to GGML_KQ_MASK_PAD (32) tokens.
KQ_MASK_PAD: Final = 32
# Hidden-state tensors (float32, n_ubatch × n_embd) live at the attention's widest moment: the
# layer's input, its normed copy, Q and the split input. Four reproduce Llama 3 8B's 560 MiB at
# n_ctx 8192 (512 + 16 + 32), Mistral 7B's 164 and 2,144 MiB at 2,048 and 32,768 and Command-R's
# 672 MiB with two GPUs (benchmarks/realgpu/engine_logs.json).
HIDDEN_LIVE: Final = 4
# llama_kv_cache's padding of n_ctx: 256 cells with flash attention, else 32.
KV_PAD_FA: Final = 256
KV_PAD: Final = 32
# The attention mask is a graph input (``attn_inp_kq_mask``): ggml_backend_sched puts every input on the last
# backend, the CPU (``ggml_backend_sched_backend_id_from_cur``, "graph input", ggml/src/ggml-backend.cpp), so it
# sits in the host's compute buffer and a copy of it in each GPU's. Before ggml-org/llama.cpp PR #23764
# ("llama: use f16 mask for FA to save VRAM", first in release b9410) the input was float32 even with flash
# attention, and the graph cast it to float16 (``self_kq_mask_cnv = ggml_cast(..., GGML_TYPE_F16)``) on the GPU
# that runs the first attention layer: the float32 copy and its float16 cast are both live at the cast. From
# b9410 (and in a current build, 0) the input is float16 under flash attention, with no cast. The release: the
# b9410 notes as https://theneuralfeed.com/article/b9410/shOQqTty retells them ("uses f16 (float16) masks for Flash
# Attention"); the current source: llama-cpp-python 0.3.36's vendored llama.cpp (0c1e5709, src/llama-graph.cpp
# build_attn_inp_kq_mask: "flash attention requires an f16 mask").
FA_MASK_F16_FROM_BUILD: Final = 9410
# ggml-org/llama.cpp PR #18898 ("graph : utilize ggml_build_forward_select() to avoid reallocations", on top of
# PR #18550, release b7774) keeps both of build_inp_embd's inputs in the graph: the token ids' get_rows and an
# unused float32 ``inp_embd`` of n_embd x n_ubatch, both in the host's compute buffer (b7774's notes on
# sourceforge.net/projects/llama-cpp.mirror/files/b7774 list #18550). Its own build number was not read: the
# builds from b7775 are counted with the second hidden state.
EMBD_INPUT_FROM_BUILD: Final = 7775
# ggml-org/llama.cpp PR #23861 ("llama: limit max outputs of `llama_context`", merged 2026-06-01, first in release
# b9460: https://theneuralfeed.com/article/b9460/TnZYvF0d retells b9460's notes, "implemented in PR #23861") adds
# llama_context_params.n_outputs_max (0: n_batch) and sched_reserve reserves the prompt graph for
# min(n_ubatch, n_outputs_max) output rows, where it reserved n_ubatch before (issue #23527). llama-server sets it
# (tools/server/server-context.cpp load_model: server_output_limits -> common_speculative_get_output_limits) to
# min(n_batch, n_parallel x (1 + n_draft)): one row a slot without speculative decoding. Read in the sdist of
# llama-cpp-python 0.3.36, vendor/llama.cpp (src/llama-context.cpp sched_reserve's n_outputs_pp). Only the server
# (and the speculative examples) set it: llama-bench, llama-completion and llama-perplexity keep the default
# (n_batch: every row); llama-cli of these builds runs llama-server in-process (tools/cli/cli-server.h).
SERVER_OUTPUTS_FROM_BUILD: Final = 9460
# Ollama's lines that start llama-server at a build with PR #23861: LLAMA_CPP_VERSION is b9479 - b10488 from v0.30.1
# to v0.32.15 (ollama/ollama tags). v0.30.0 itself bundles b9452 and reserves every row: the line takes its later
# releases' rule. The lines before v0.30 run Ollama's own runners on older vendored builds (every row).
OLLAMA_SERVER_OUTPUTS: Final = frozenset({OllamaVersion.V0_30})


# ---- the GGUF mix: llama_tensor_get_type ------------------------------------------------------
_DEFAULT_TYPE: Final = {
    GgufQuant.F32: GgmlType.F32,
    GgufQuant.F16: GgmlType.F16,
    GgufQuant.BF16: GgmlType.BF16,
    GgufQuant.Q8_0: GgmlType.Q8_0,
    GgufQuant.Q6_K: GgmlType.Q6_K,
    GgufQuant.Q5_K_M: GgmlType.Q5_K,
    GgufQuant.Q5_K_S: GgmlType.Q5_K,
    GgufQuant.Q5_1: GgmlType.Q5_1,
    GgufQuant.Q5_0: GgmlType.Q5_0,
    GgufQuant.Q4_K_M: GgmlType.Q4_K,
    GgufQuant.Q4_K_S: GgmlType.Q4_K,
    GgufQuant.Q4_1: GgmlType.Q4_1,
    GgufQuant.Q4_0: GgmlType.Q4_0,
    GgufQuant.IQ4_XS: GgmlType.IQ4_XS,
    GgufQuant.IQ4_NL: GgmlType.IQ4_NL,
    GgufQuant.Q3_K_L: GgmlType.Q3_K,
    GgufQuant.Q3_K_M: GgmlType.Q3_K,
    GgufQuant.Q3_K_S: GgmlType.Q3_K,
    GgufQuant.IQ3_M: GgmlType.IQ3_S,
    GgufQuant.IQ3_S: GgmlType.IQ3_S,
    GgufQuant.IQ3_XS: GgmlType.IQ3_S,
    GgufQuant.IQ3_XXS: GgmlType.IQ3_XXS,
    GgufQuant.Q2_K: GgmlType.Q2_K,
    GgufQuant.Q2_K_S: GgmlType.Q2_K,
    GgufQuant.IQ2_M: GgmlType.IQ2_S,
    GgufQuant.IQ2_S: GgmlType.IQ2_XS,
    GgufQuant.IQ2_XS: GgmlType.IQ2_XS,
    GgufQuant.IQ2_XXS: GgmlType.IQ2_XXS,
    GgufQuant.IQ1_M: GgmlType.IQ1_M,
    GgufQuant.IQ1_S: GgmlType.IQ1_S,
    GgufQuant.MXFP4_MOE: GgmlType.MXFP4,
}
_LOW_IQ: Final = frozenset(
    {GgufQuant.IQ2_XXS, GgufQuant.IQ2_XS, GgufQuant.IQ1_S, GgufQuant.IQ2_S, GgufQuant.IQ2_M, GgufQuant.IQ1_M}
)
_IQ2_SM: Final = (GgufQuant.IQ2_S, GgufQuant.IQ2_M)
# llama_tensor_get_type's fallback when a row is not whole blocks of the chosen type.
_FALLBACK: Final = {
    GgmlType.Q2_K: GgmlType.IQ4_NL,
    GgmlType.Q3_K: GgmlType.IQ4_NL,
    GgmlType.IQ2_XXS: GgmlType.IQ4_NL,
    GgmlType.IQ2_XS: GgmlType.IQ4_NL,
    GgmlType.IQ2_S: GgmlType.IQ4_NL,
    GgmlType.IQ3_XXS: GgmlType.IQ4_NL,
    GgmlType.IQ3_S: GgmlType.IQ4_NL,
    GgmlType.IQ1_S: GgmlType.IQ4_NL,
    GgmlType.IQ1_M: GgmlType.IQ4_NL,
    GgmlType.IQ4_XS: GgmlType.IQ4_NL,
    GgmlType.Q4_K: GgmlType.Q5_0,
    GgmlType.Q5_K: GgmlType.Q5_1,
    GgmlType.Q6_K: GgmlType.Q8_0,
}


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


@dataclass(frozen=True)
class Quantiser:
    """What llama_tensor_get_type reads of the model (quantize_state_impl)."""

    quant: GgufQuant
    n_layer: int
    n_gqa: int
    n_expert: int
    is_70b: bool  # LLM_TYPE_70B: a Llama-architecture model of 80 layers with grouped KV heads
    hybrid: ModelSpec | None = None  # a hybrid recurrent model: its counters run over some layers only

    @property
    def imatrix(self) -> bool:
        return self.quant.value.startswith("IQ")

    def position(self, kind: str, layer: int) -> tuple[int, int]:
        """(index, count) of the counter llama_tensor_get_type reads for a ``kind`` tensor of ``layer``: the
        layer and n_layer, or a hybrid's (core.serving.llamacpp_hybrid.quant_position)."""
        if self.hybrid is None:
            return layer, self.n_layer
        return quant_position(self.hybrid, kind, layer)


def quantiser(model: ModelSpec, quant: GgufQuant) -> Quantiser:
    return Quantiser(
        quant=quant,
        n_layer=model.num_layers,
        n_gqa=model.num_heads // model.num_kv_heads,
        n_expert=model.num_experts,
        is_70b=model.family.startswith("llama") and model.num_layers == 80 and model.num_kv_heads < model.num_heads,
        hybrid=model if model.hybrid is not None else None,
    )


def _output_type(q: Quantiser, row: int) -> GgmlType:
    base = _DEFAULT_TYPE[q.quant]
    if q.quant is GgufQuant.MXFP4_MOE or row % GGML_BLOCKS[base][0]:
        return GgmlType.Q8_0
    if q.quant in _LOW_IQ or q.quant is GgufQuant.IQ3_XXS:
        return GgmlType.Q5_K
    return base if base is GgmlType.Q8_0 else GgmlType.Q6_K


def _embedding_type(q: Quantiser) -> GgmlType:
    if q.quant in (GgufQuant.IQ2_XXS, GgufQuant.IQ2_XS, GgufQuant.IQ1_S, GgufQuant.IQ1_M):
        return GgmlType.Q2_K
    if q.quant in (*_IQ2_SM, GgufQuant.IQ3_XXS):
        return GgmlType.IQ3_S
    return _DEFAULT_TYPE[q.quant]


def _low_iq_type(q: Quantiser, kind: str, layer: int, base: GgmlType) -> GgmlType:
    """The IQ1 / IQ2 branch of llama_tensor_get_type."""
    better = GgmlType.IQ3_S if q.quant in _IQ2_SM else GgmlType.Q2_K
    if kind == "attn_v":
        return GgmlType.Q4_K if q.n_gqa >= 4 or q.n_expert >= 4 else better
    if kind == "attn_k" and q.n_expert == 8:
        return GgmlType.Q4_K
    if kind == "ffn_down":
        return better if layer < q.n_layer // 8 else base
    if kind == "attn_output":
        if q.n_expert == 8:
            return GgmlType.Q5_K
        if q.quant in (GgufQuant.IQ1_S, GgufQuant.IQ1_M):
            return GgmlType.IQ2_XXS
        return GgmlType.IQ3_S if q.quant in _IQ2_SM else base
    return base


def _attn_v_type(q: Quantiser, layer: int, base: GgmlType) -> GgmlType:
    layer, n_layer = q.position("attn_v", layer)  # i_attention_wv, n_attention_wv
    f, gqa4 = q.quant, q.n_gqa >= 4
    kind = base
    if f is GgufQuant.Q2_K:
        kind = GgmlType.Q4_K if gqa4 else GgmlType.Q3_K
    elif f is GgufQuant.Q2_K_S and gqa4:
        kind = GgmlType.Q4_K
    elif f is GgufQuant.IQ3_XXS:
        kind = GgmlType.Q4_K if gqa4 else (GgmlType.IQ3_XXS if q.imatrix else GgmlType.IQ3_S)
    elif (f in (GgufQuant.IQ3_XS, GgufQuant.IQ3_S) and gqa4) or f is GgufQuant.IQ3_M:
        kind = GgmlType.Q4_K
    elif f is GgufQuant.Q3_K_M:
        kind = GgmlType.Q5_K if layer < 2 else GgmlType.Q4_K
    elif f is GgufQuant.Q3_K_L or (f in (GgufQuant.IQ4_NL, GgufQuant.IQ4_XS) and gqa4):
        kind = GgmlType.Q5_K
    elif f in (GgufQuant.Q4_K_M, GgufQuant.Q5_K_M) and use_more_bits(layer, n_layer):
        kind = GgmlType.Q6_K
    elif f is GgufQuant.Q4_K_S and layer < 4:
        kind = GgmlType.Q5_K
    if q.is_70b and kind in (GgmlType.Q3_K, GgmlType.Q4_K):
        kind = GgmlType.Q5_K
    return GgmlType.Q8_0 if q.n_expert == 8 else kind


def _ffn_down_type(q: Quantiser, layer: int, base: GgmlType) -> GgmlType:
    layer, n = q.position("ffn_down", layer)
    f = q.quant
    if f is GgufQuant.Q2_K:
        return GgmlType.Q3_K
    if f is GgufQuant.Q2_K_S:
        return GgmlType.Q4_K if layer < n // 8 else base
    if f is GgufQuant.IQ3_XXS and not q.imatrix:
        return GgmlType.Q4_K if layer < n // 8 else GgmlType.Q3_K
    if f is GgufQuant.Q3_K_M:
        return GgmlType.Q5_K if layer < n // 16 else GgmlType.Q4_K
    if f is GgufQuant.IQ3_M and (layer < n // 8 or (q.n_expert == 8 and use_more_bits(layer, n))):
        return GgmlType.Q4_K
    if f is GgufQuant.Q3_K_L:
        return GgmlType.Q5_K
    if f in (GgufQuant.Q4_K_M, GgufQuant.Q5_K_M):
        return GgmlType.Q6_K if use_more_bits(layer, n) else base
    if f in (GgufQuant.IQ4_NL, GgufQuant.IQ4_XS) and layer < n // 8 and not q.imatrix:
        return GgmlType.Q5_K
    if f is GgufQuant.Q4_K_S and layer < n // 8:
        return GgmlType.Q5_K
    return base


_ATTN_OUTPUT_EIGHT: Final = frozenset(
    {GgufQuant.Q2_K, GgufQuant.IQ3_XS, GgufQuant.IQ3_XXS, GgufQuant.Q3_K_S, GgufQuant.Q3_K_M, GgufQuant.IQ4_NL}
    | {GgufQuant.Q4_K_S, GgufQuant.Q4_K_M, GgufQuant.IQ3_S, GgufQuant.IQ3_M, GgufQuant.IQ4_XS}
)
_ATTN_OUTPUT: Final = {
    GgufQuant.Q2_K: GgmlType.Q3_K,
    GgufQuant.IQ3_XXS: GgmlType.IQ3_S,
    GgufQuant.Q3_K_M: GgmlType.Q4_K,
    GgufQuant.Q3_K_L: GgmlType.Q5_K,
    GgufQuant.IQ3_M: GgmlType.Q4_K,
}
_ATTN_QKV: Final = {
    GgufQuant.Q3_K_M: GgmlType.Q4_K,
    GgufQuant.Q3_K_L: GgmlType.Q4_K,
    GgufQuant.IQ3_M: GgmlType.Q4_K,
    GgufQuant.Q4_K_M: GgmlType.Q5_K,
    GgufQuant.Q5_K_M: GgmlType.Q6_K,
}


def _mixed_type(q: Quantiser, kind: str, layer: int) -> GgmlType:
    """llama_tensor_get_type for a tensor of a repeating layer."""
    base = _DEFAULT_TYPE[q.quant]
    if q.quant is GgufQuant.MXFP4_MOE:
        return GgmlType.MXFP4 if kind.endswith("_exps") else GgmlType.Q8_0
    plain = kind.removesuffix("_exps")
    if plain == "attn_qkv" and q.hybrid is not None:
        # 007dbbf3's category_is_attn_v takes ATTENTION_QKV into the attn_v branch first (its own attn_qkv branch
        # comes later and is not reached): a qwen35 linear-attention layer's attn_qkv is typed as an attn_v.
        plain = "attn_v"
    if q.quant in _LOW_IQ:
        return _low_iq_type(q, plain, layer, base)
    if plain == "attn_v":
        return _attn_v_type(q, layer, base)
    if plain == "ffn_down":
        return _ffn_down_type(q, layer, base)
    if plain == "attn_k":
        if q.n_expert == 8:
            return GgmlType.Q8_0
        return {GgufQuant.IQ3_XS: GgmlType.IQ3_XXS, GgufQuant.IQ3_XXS: GgmlType.IQ2_S}.get(q.quant, base)
    if plain == "attn_q":
        return {GgufQuant.IQ3_XS: GgmlType.IQ3_XXS, GgufQuant.IQ3_XXS: GgmlType.IQ2_S}.get(q.quant, base)
    if plain == "attn_output":
        if q.n_expert == 8:
            return GgmlType.Q5_K if q.quant in _ATTN_OUTPUT_EIGHT else base
        return _ATTN_OUTPUT.get(q.quant, base)
    if plain == "attn_qkv":
        return _ATTN_QKV.get(q.quant, base)
    if plain in ("ffn_gate", "ffn_up") and q.quant is GgufQuant.IQ3_XS:
        return GgmlType.IQ3_XXS if q.n_layer // 8 <= layer < 7 * q.n_layer // 8 else base
    return base


def fitted_type(kind: GgmlType, row: int) -> GgmlType:
    """The type llama-quantize stores a row of ``row`` values in: ``kind``, or its fallback
    when the row is not whole blocks (F16 when neither fits)."""
    if row % GGML_BLOCKS[kind][0] == 0:
        return kind
    fallback = _FALLBACK.get(kind, GgmlType.F16)
    return fallback if row % GGML_BLOCKS[fallback][0] == 0 else GgmlType.F16


def tensor_type(q: Quantiser, kind: str, layer: int, row: int) -> GgmlType:
    """The ggml type of one 2-D weight of a ``q.quant`` GGUF file (``layer`` -1: not a block's)."""
    if q.quant in GGUF_FLOAT:
        return _DEFAULT_TYPE[q.quant]
    if kind == "output":
        return fitted_type(_output_type(q, row), row)
    if kind == "token_embd":
        return fitted_type(_embedding_type(q), row)
    return fitted_type(_mixed_type(q, kind, layer), row)


# ---- the tensors of a GGUF file ----------------------------------------------------------------
def layer_matrices(model: ModelSpec, layer: int = -1) -> tuple[tuple[str, int, int], ...]:
    """(kind, row length ne[0], rows) of block ``layer``'s 2-D weights, as convert_hf_to_gguf names them
    (``layer`` -1: a block with experts; only DeepSeek's dense first blocks differ)."""
    if model.latent_attention:
        return _latent_matrices(model, layer)
    if model.hybrid is not None:
        return hybrid_layer_matrices(model, layer)
    d, i, q, kv = model.hidden_size, model.intermediate_size, model.q_width, model.kv_width
    attn: tuple[tuple[str, int, int], ...]
    if model.fused_qkv:
        attn = (("attn_qkv", d, q + 2 * kv),)
    else:
        attn = (("attn_q", d, q), ("attn_k", d, kv), ("attn_v", d, kv))
    attn += (("attn_output", q, d),)
    suffix = "_exps" if model.num_experts > 1 else ""
    experts = model.num_experts
    mlp: tuple[tuple[str, int, int], ...] = (("ffn_up" + suffix, d, i * experts), ("ffn_down" + suffix, i, d * experts))
    if model.gated_mlp:
        mlp += (("ffn_gate" + suffix, d, i * experts),)
    if model.shared_expert_size:
        s = model.shared_expert_size
        mlp += (("ffn_up_shexp", d, s), ("ffn_gate_shexp", d, s), ("ffn_down_shexp", s, d))
    return attn + mlp


def _latent_matrices(model: ModelSpec, layer: int) -> tuple[tuple[str, int, int], ...]:
    """A ``deepseek2`` block's 2-D weights as llama.cpp creates them (LLM_ARCH_DEEPSEEK2 in
    ``llama_model::load_tensors``, read in the index's copy of the deepseek2 loader): ``attn_q_a`` {d,
    q_lora_rank} and ``attn_q_b`` {q_lora_rank, H·qk}, or ``attn_q`` {d, H·qk} without a q_lora_rank;
    ``attn_kv_a_mqa`` {d, kv_lora_rank + rope}; ``attn_k_b`` {qk_nope, kv_lora_rank, H} and ``attn_v_b``
    {kv_lora_rank, v, H} (PR #12801 split the older files' ``attn_kv_b`` {kv_lora_rank, H·(nope + v)} into
    these two: the same elements); ``attn_output`` {H·v, d}; for layer < ``leading_dense_block_count``
    ffn_gate / ffn_up / ffn_down of n_ff, else the experts (``ffn_*_exps`` of n_ff_exp) and the shared
    experts (``ffn_*_shexp`` of n_ff_exp · n_expert_shared)."""
    d, h, qk, v = model.hidden_size, model.num_heads, model.head_dim, model.v_head_dim
    rank = model.kv_lora_rank
    attn: tuple[tuple[str, int, int], ...]
    if model.q_lora_rank:
        attn = (("attn_q_a", d, model.q_lora_rank), ("attn_q_b", model.q_lora_rank, h * qk))
    else:
        attn = (("attn_q", d, h * qk),)
    attn += (
        ("attn_kv_a_mqa", d, model.latent_width),
        ("attn_k_b", model.qk_nope_head_dim, rank * h),
        ("attn_v_b", rank, v * h),
        ("attn_output", h * v, d),
    )
    if 0 <= layer < model.first_k_dense_replace:
        f = model.dense_intermediate_size
        return (*attn, ("ffn_up", d, f), ("ffn_down", f, d), ("ffn_gate", d, f))
    i, e = model.intermediate_size, model.num_experts
    suffix = "_exps" if e > 1 else ""
    mlp: tuple[tuple[str, int, int], ...] = (
        ("ffn_up" + suffix, d, i * e),
        ("ffn_down" + suffix, i, d * e),
        ("ffn_gate" + suffix, d, i * e),
    )
    if model.shared_expert_size:
        s = model.shared_expert_size
        mlp += (("ffn_up_shexp", d, s), ("ffn_gate_shexp", d, s), ("ffn_down_shexp", s, d))
    return attn + mlp


def layer_float32_params(model: ModelSpec, layer: int = -1) -> int:
    """Norms, biases, the router and attention sinks: llama.cpp keeps 1-D tensors and the MoE
    router (``ffn_gate_inp``) in float32 (``layer``: as :func:`layer_matrices`; a hybrid's: spread evenly,
    :func:`core.serving.llamacpp_hybrid.hybrid_float32_params`)."""
    if model.hybrid is not None:
        return hybrid_float32_params(model)
    matrices = sum(rows * row for _, row, rows in layer_matrices(model, layer))
    dense = 0 <= layer < model.first_k_dense_replace
    return max(0, (model.dense_layer_params() if dense else model.layer_params()) - matrices)


@dataclass(frozen=True)
class GgufLayout:
    """Bytes of the GGUF's tensors where llama.cpp puts them (index 0.. the GPUs; host apart)."""

    device_weights: tuple[float, ...]
    host_weights: float
    device_layers: tuple[tuple[int, ...], ...]  # the repeating layers on each GPU
    host_layers: tuple[int, ...]
    output_device: int  # -1: the output layer stays in host memory
    layer_bytes: tuple[float, ...]
    output_bytes: float
    embedding_bytes: float
    # --n-cpu-moe / --cpu-moe: the GPU layers whose routed experts stay in host RAM, and those experts' bytes
    # (in host_weights, not in device_weights): cpu_expert_bytes
    cpu_moe_layers: tuple[int, ...] = ()
    host_expert_bytes: float = 0.0


def layer_bytes(q: Quantiser, layer: int, matrices: tuple[tuple[str, int, int], ...], float32: int) -> float:
    """One layer's bytes: its ``matrices`` (layer_matrices) in their types, ``float32`` values beside."""
    stored = sum(ggml_row_bytes(tensor_type(q, kind, layer, row), row) * rows for kind, row, rows in matrices)
    return stored + float32 * 4.0


def device_of_layers(n_layer: int, gpu_layers: int, gpus: int, split: tuple[int, ...] = ()) -> tuple[list[int], int]:
    """llm_load_tensors' split: each repeating layer's GPU (-1: host) and the output layer's,
    for equal shares of ``gpus`` cards, or the shares of ``split`` (``--tensor-split``, as Ollama
    passes its own per-GPU layer counts)."""
    start = max(n_layer - gpu_layers, 0)
    offloaded = min(gpu_layers, n_layer + 1)
    weights = split if split and sum(split) > 0 else (1,) * gpus
    shares = [sum(weights[: k + 1]) / sum(weights) for k in range(gpus)]
    devices = [-1] * n_layer
    for i in range(start, n_layer):
        devices[i] = min(gpus - 1, bisect.bisect_right(shares, (i - start) / offloaded))
    output = min(gpus - 1, bisect.bisect_right(shares, (offloaded - 1) / offloaded)) if gpu_layers > n_layer else -1
    return devices, output


@lru_cache(maxsize=128)
def gguf_tensor_bytes(model: ModelSpec, quant: GgufQuant) -> tuple[tuple[float, ...], float, float]:
    """(each layer's bytes, the token embeddings', the output layer's) of a ``quant`` file; the
    same for every plan of the model, so kept (an edit of the context reuses it)."""
    q = quantiser(model, quant)
    scale = model.shape_scale
    d, vocab = model.hidden_size, model.vocab_size
    per_layer = tuple(
        layer_bytes(q, i, layer_matrices(model, i), layer_float32_params(model, i)) * scale
        for i in range(model.num_layers)
    )
    embed_type = tensor_type(q, "token_embd" if not model.tie_embeddings else "output", -1, d)
    embedding = ggml_row_bytes(embed_type, d) * vocab * scale
    # A tied head is llama.cpp's output tensor duplicated from token_embd (TENSOR_DUPLICATED).
    output = embedding
    if not model.tie_embeddings:
        output = ggml_row_bytes(tensor_type(q, "output", -1, d), d) * vocab * scale
    return per_layer, embedding, output + model.norm_params() * 4.0  # and output_norm


@lru_cache(maxsize=128)
def matvec_weights_by_type(model: ModelSpec, quant: GgufQuant, head: bool = True) -> tuple[tuple[GgmlType, float], ...]:
    """The weights one decode token's mat-vecs read, by ggml type, in a ``quant`` file: every
    block's 2-D weights (of an expert tensor, the share a token routes to) and, with ``head``, the
    output layer; the token embedding is a row lookup, not a product."""
    q = quantiser(model, quant)
    scale = model.shape_scale
    routed = model.routed_share
    totals: dict[GgmlType, float] = {}
    for layer in range(model.num_layers):
        for kind, row, rows in layer_matrices(model, layer):
            share = routed if is_expert_tensor(kind) else 1.0
            kind_type = tensor_type(q, kind, layer, row)
            totals[kind_type] = totals.get(kind_type, 0.0) + row * rows * share * scale
    if head:
        kind = tensor_type(q, "output", -1, model.hidden_size)
        totals[kind] = totals.get(kind, 0.0) + model.vocab_size * model.hidden_size * scale
    return tuple(sorted(totals.items(), key=lambda item: item[0].value))


# ---- the routed experts kept in host RAM: --n-cpu-moe N / --cpu-moe ----------------------------
# common/common.h (ggml-org/llama.cpp 001d906a): LLM_FFN_EXPS_REGEX = "\\.ffn_(up|down|gate|gate_up)_(ch|)exps";
# --cpu-moe adds it as one tensor_buft_override to ggml_backend_cpu_buffer_type(), --n-cpu-moe N adds
# "blk\\.i" + it for each i < N (llm_add_n_cpu_ffn_overrides), the same as -ot "blk\.(i)\.ffn_.*_exps=CPU". The
# loader matches a tensor's name with std::regex_search, so the experts' biases (gpt-oss's ``ffn_up_exps.bias``)
# move with them; the shared experts (``ffn_*_shexp``), the router (``ffn_gate_inp``) and the layer's attention
# stay on the layer's GPU, and so does its KV cache. A CPU override keeps the tensor in the host's model
# buffer (``CPU_Mapped`` with mmap, or the CPU's repacked buffer type for the types it repacks: the same bytes).
# With op offload on (llama.cpp's default; --no-op-offload turns it off, not an input here) a matrix product
# whose weight is in host memory runs on the GPU once its batch reaches the CUDA backend's offload_op minimum,
# 32 tokens (GGML_OP_OFFLOAD_MIN_BATCH's default), and the scheduler copies the weight into the GPU's compute
# buffer first, one such weight per graph split ("by starting a new split, the memory of the previously
# offloaded weights can be reused": ggml_backend_sched_split_graph, ggml/src/ggml-backend.cpp). The reserve
# graph is an n_ubatch prompt, so the GPU's compute buffer holds the largest expert tensor beside the FFN's
# activations. A decode step's experts run on the CPU, read from host memory (core.serving.speed).
OP_OFFLOAD_MIN_BATCH: Final = 32


def is_expert_tensor(kind: str) -> bool:
    """Whether a GGUF tensor kind matches LLM_FFN_EXPS_REGEX (the routed experts, not ``_shexp``)."""
    return kind.endswith("_exps")


@lru_cache(maxsize=128)
def expert_tensor_bytes(model: ModelSpec, quant: GgufQuant) -> tuple[tuple[float, float], ...]:
    """Each layer's (routed experts' bytes, its largest expert tensor's) in a ``quant`` file: the ``*_exps``
    matrices in their types and, with ``mlp_bias``, their float32 biases (num_experts x (up + gate + down
    widths)). (0, 0) for a layer without experts (DeepSeek's dense first layers)."""
    q = quantiser(model, quant)
    scale = model.shape_scale
    bias = 0.0
    if model.mlp_bias:
        i = model.intermediate_size
        bias = model.num_experts * ((2 * i if model.gated_mlp else i) + model.hidden_size) * 4.0
    out = []
    for layer in range(model.num_layers):
        sizes = [
            ggml_row_bytes(tensor_type(q, kind, layer, row), row) * rows
            for kind, row, rows in layer_matrices(model, layer)
            if is_expert_tensor(kind)
        ]
        total = sum(sizes) + (bias if sizes else 0.0)
        out.append((total * scale, max(sizes, default=0.0) * scale))
    return tuple(out)


def cpu_moe_count(plan: Plan) -> int:
    """The first layers whose experts --n-cpu-moe keeps in host RAM (the plan's count, at most the layer
    count: --cpu-moe); 0 for a dense model, under Ollama (no such option) and under other engines."""
    model, inf = plan.model, plan.inference
    if inf.engine is not Engine.LLAMACPP or model.num_experts <= 1 or inf.ollama_version is not OllamaVersion.NONE:
        return 0
    return min(max(inf.cpu_moe_layers, 0), model.num_layers)


def gguf_layout(plan: Plan, split: tuple[int, ...] = ()) -> GgufLayout:
    model, inf = plan.model, plan.inference
    per_layer, embedding, output = gguf_tensor_bytes(model, inf.gguf_quant)
    gpus = inf.pipeline_parallel
    devices, out_dev = device_of_layers(model.num_layers, inf.gpu_layers, gpus, split)
    device_weights = [0.0] * gpus
    for layer, dev in enumerate(devices):
        if dev >= 0:
            device_weights[dev] += per_layer[layer]
    host = embedding + sum(b for b, dev in zip(per_layer, devices, strict=True) if dev < 0)
    if out_dev >= 0:
        device_weights[out_dev] += output
    else:
        host += output
    on_device: list[list[int]] = [[] for _ in range(gpus)]
    for layer, dev in enumerate(devices):  # one pass: a deep model on many GPUs stays linear
        if dev >= 0:
            on_device[dev].append(layer)
    moved = tuple(i for i in range(cpu_moe_count(plan)) if devices[i] >= 0)
    experts = 0.0
    if moved:
        sizes = expert_tensor_bytes(model, inf.gguf_quant)
        for layer in moved:
            device_weights[devices[layer]] -= sizes[layer][0]
            experts += sizes[layer][0]
        host += experts
    return GgufLayout(
        device_weights=tuple(device_weights),
        host_weights=host,
        device_layers=tuple(tuple(layers) for layers in on_device),
        host_layers=tuple(i for i, dev in enumerate(devices) if dev < 0),
        output_device=out_dev,
        layer_bytes=per_layer,
        output_bytes=output,
        embedding_bytes=embedding,
        cpu_moe_layers=moved,
        host_expert_bytes=experts,
    )


# ---- KV cache and compute buffer ---------------------------------------------------------------
def context_cells(plan: Plan, context: int | None = None) -> int:
    """n_ctx: every slot's context together, padded as llama_kv_cache pads it."""
    inf = plan.inference
    pad = KV_PAD_FA if inf.flash_attention else KV_PAD
    total = (inf.context if context is None else context) * inf.concurrent
    return math.ceil(total / pad) * pad


def windowed(model: ModelSpec, layer: int) -> bool:
    """Whether ``layer`` attends within the sliding window: the model spec gives how many layers
    do, spread evenly through the stack (gpt-oss: every other one; Gemma 3: five of six)."""
    count, n = model.sliding_window_layers if model.sliding_window else 0, model.num_layers
    return (layer + 1) * count // n > layer * count // n


def cell_layer_bytes(model: ModelSpec, cache_type: CacheType) -> float:
    """One cell of one layer's cache: K and V rows in the cache type; MLA's latent as K, no V
    (:func:`core.serving.kv.llamacpp_cache_widths`)."""
    k_width, v_width = llamacpp_cache_widths(model)
    kind = CACHE_GGML[cache_type]
    return ggml_row_bytes(kind, k_width) + (ggml_row_bytes(kind, v_width) if v_width else 0.0)


def kv_bytes_of_layers(plan: Plan, layers: tuple[int, ...], cells: int) -> float:
    """K and V of ``layers`` in the cache type; a sliding-window layer keeps only
    ``min(n_ctx, pad(window × slots + n_ubatch))`` cells (llama_kv_cache_unified_iswa). A hybrid's cache
    holds its attention layers only (core.serving.llamacpp_hybrid: llama_memory_hybrid's ``filter_attn``)."""
    model, inf = plan.model, plan.inference
    if model.hybrid is not None:
        layers = tuple(i for i in layers if has_attention(model, i))
    row = cell_layer_bytes(model, inf.cache_type)
    swa_layers = sum(windowed(model, i) for i in layers) if model.sliding_window else 0
    pad = KV_PAD_FA if inf.flash_attention else KV_PAD
    swa_cells = min(cells, math.ceil(((model.sliding_window or 0) * inf.concurrent + inf.ubatch) / pad) * pad)
    return row * ((len(layers) - swa_layers) * cells + swa_layers * swa_cells)


def since(build: int, first: int) -> bool:
    """Whether llama.cpp build ``build`` (0: a current one) has the change first in build ``first``."""
    return build == 0 or build >= first


def mask_cast(plan: Plan, build: int | None = None) -> bool:
    """Whether the graph casts a float32 mask input to float16 for flash attention (a build before
    :data:`FA_MASK_F16_FROM_BUILD`; ``build`` None: the plan's)."""
    build = plan.inference.llamacpp_build if build is None else build
    return plan.inference.flash_attention and not since(build, FA_MASK_F16_FROM_BUILD)


def output_rows(plan: Plan, tokens: int, build: int | None = None) -> int:
    """Rows of float32 logits the reserve graph holds: one a slot for llama-server from
    :data:`SERVER_OUTPUTS_FROM_BUILD` (and Ollama's :data:`OLLAMA_SERVER_OUTPUTS`), else the micro-batch's
    ``tokens``; ``build`` None: the plan's."""
    inf = plan.inference
    build = inf.llamacpp_build if build is None else build
    if inf.ollama_version is OllamaVersion.NONE:
        per_slot = since(build, SERVER_OUTPUTS_FROM_BUILD)
    else:
        per_slot = inf.ollama_version in OLLAMA_SERVER_OUTPUTS
    return min(tokens, max(1, inf.concurrent)) if per_slot else tokens


def host_input_bytes(plan: Plan, cells: int, build: int | None = None) -> float:
    """The graph inputs in the host's compute buffer: the attention mask (float16 under flash attention from
    b9410, else float32: :data:`FA_MASK_F16_FROM_BUILD`) and the token embeddings' rows in float32, with the
    unused embeddings input beside them from :data:`EMBD_INPUT_FROM_BUILD`. With pipeline parallelism the
    scheduler keeps :data:`SCHED_COPIES` copies of each input (the embedding rows are a node, not an input: one).
    The token ids, positions and cache indices (a few KiB) are left out."""
    model, inf = plan.model, plan.inference
    build = inf.llamacpp_build if build is None else build
    tokens = min(inf.ubatch, cells)
    padded = math.ceil(tokens / KQ_MASK_PAD) * KQ_MASK_PAD
    element = 4.0 if mask_cast(plan, build) or not inf.flash_attention else 2.0
    hidden = tokens * model.hidden_size * 4.0
    inputs = cells * padded * element + (hidden if since(build, EMBD_INPUT_FROM_BUILD) else 0.0)
    return inputs * (SCHED_COPIES if pipeline_parallel(plan) else 1) + hidden


def ffn_live_bytes(model: ModelSpec, tokens: int) -> float:
    """The FFN's widest moment of ``tokens`` tokens: two float32 intermediates of the experts a token routes
    to (and the shared expert) and two hidden states."""
    ffn_width = model.intermediate_size * max(1, model.experts_per_token) + model.shared_expert_size
    return 2 * tokens * ffn_width * 4.0 + 2 * tokens * model.hidden_size * 4.0


def compute_buffer_bytes(
    plan: Plan,
    cells: int,
    *,
    output: bool,
    split: bool,
    casts: bool = True,
    build: int | None = None,
    offloaded_weight: float = 0.0,
) -> float:
    """The compute buffer of one GPU (see the module's docstring); ``casts``: this device runs the first
    attention layer, where a build before b9410 casts the mask (:func:`mask_cast`); ``build`` None: the plan's;
    ``offloaded_weight``: the largest host-resident expert tensor op offload copies here beside the FFN's
    activations (--n-cpu-moe, :data:`OP_OFFLOAD_MIN_BATCH`)."""
    model, inf = plan.model, plan.inference
    tokens = min(inf.ubatch, cells)
    padded = math.ceil(tokens / KQ_MASK_PAD) * KQ_MASK_PAD
    hidden = tokens * model.hidden_size * 4.0
    mask = cells * padded * (2.0 if inf.flash_attention else 4.0)
    ffn_live = ffn_live_bytes(model, tokens)
    ffn = ffn_live + mask + offloaded_weight
    attention = mask + HIDDEN_LIVE * hidden
    if not inf.flash_attention:
        attention += cells * tokens * model.num_heads * 4.0
    peak = max(attention, ffn)
    if casts and mask_cast(plan, build):
        # The float32 copy and its float16 cast, above what is live: ggml-alloc puts a block no free hole holds
        # above the highest live tensor (ggml_dyn_tallocr_alloc). In a hybrid whose first layer is recurrent
        # the first attention layer follows whole layers, whose FFN moment left the residual stream there.
        beside = HIDDEN_LIVE * hidden
        if model.hybrid is not None and not has_attention(model, 0):
            beside = max(beside, ffn_live)
        peak = max(peak, cells * padded * (4.0 + 2.0) + beside)
    if output:
        peak = max(peak, model.vocab_size * output_rows(plan, tokens, build) * 4.0 + hidden)
    if model.hybrid is not None:  # a recurrent layer's widest moment (core.serving.llamacpp_hybrid)
        peak = max(peak, recurrent_graph_bytes(model, tokens, inf.concurrent))
    if split:
        peak += (SCHED_COPIES - 1) * mask + SCHED_COPIES * hidden
    return peak


@dataclass(frozen=True)
class LlamaCppMemory:
    layout: GgufLayout
    cells: int
    device_kv: tuple[float, ...]
    device_compute: tuple[float, ...]
    host_kv: float
    host_compute: float
    overhead: float = CUDA_CONTEXT_BYTES  # per GPU, beside the buffers (device_overhead_bytes)
    # A hybrid's recurrent states, the "RS buffer" of each GPU and of the host (core.serving.llamacpp_hybrid);
    # empty / 0 for an attention-only model.
    device_rs: tuple[float, ...] = ()
    host_rs: float = 0.0

    @property
    def device_totals(self) -> tuple[float, ...]:
        totals = tuple(
            w + k + c + self.overhead
            for w, k, c in zip(self.layout.device_weights, self.device_kv, self.device_compute, strict=True)
        )
        if not self.device_rs:
            return totals
        return tuple(t + r for t, r in zip(totals, self.device_rs, strict=True))

    @property
    def deciding(self) -> int:
        totals = self.device_totals
        return totals.index(max(totals))

    @property
    def host_bytes(self) -> float:
        return self.layout.host_weights + self.host_kv + self.host_compute + self.host_rs


# ---- the prompt's matrix products by build ------------------------------------------------------
# The first build whose CUDA backend multiplies a prompt's quantised weights directly (MMQ) on
# cards with int8 tensor cores: b3216, commit a818f3028 (ggml-org/llama.cpp PR #8075, "CUDA: use
# MMQ instead of cuBLAS by default", merged 2024-06-24; Homebrew's llama.cpp formula pins tag
# b3216 to revision a818f3028d1497a51cb2b8eb7d993ad58784940e). Before it, ggml-cuda.cu's
# ggml_cuda_mul_mat (read at ggerganov/llama.cpp 005de593, the rule of PR #3776 that held until
# #8075) defined CUDA_USE_TENSOR_CORES unless built with GGML_CUDA_FORCE_MMQ and turned MMQ off
# when ``fp16_performance_good && src1->ne[1] > MMQ_MAX_BATCH_SIZE`` (compute capability 6.0 or
# 7.0 on, every NVIDIA card of the catalogue): the product then goes through
# ggml_cuda_op_mul_mat_cublas, which converts the quantised src0 to F16 (to_fp16_cuda) into a
# pool buffer before cublasGemmEx.
# Not modelled: HIP builds of that time kept MMQ at every batch except on RDNA3 (the rule above sits
# in the non-HIP branch), and PR #8075 left cuBLAS in place where there is no int8 tensor-core MMQ
# but FP16 tensor cores (V100, RDNA3); whether later builds still do is not read here.
CUBLAS_PROMPT_BEFORE_BUILD: Final = 3216
# ggml-cuda.cu: #define MMQ_MAX_BATCH_SIZE 32 ("max batch size to use MMQ kernels when tensor
# cores are available"); a micro-batch of more tokens goes to cuBLAS in those builds.
MMQ_MAX_BATCH_SIZE: Final = 32


def prompt_dequant_bytes(plan: Plan, gpu: GpuSpec, layout: GgufLayout) -> float:
    """Bytes one prompt micro-batch of more than :data:`MMQ_MAX_BATCH_SIZE` tokens moves, in a
    build before :data:`CUBLAS_PROMPT_BEFORE_BUILD` on an NVIDIA card, to turn the GPU layers'
    quantised matrices into F16 for cuBLAS: each matrix read in its GGUF type and written in F16
    (cuBLAS's own read of the F16 copy is the F16 model's, inside the product's time). The output
    matrix is left out: a prompt's logits are computed for its last token only (llama.cpp PR
    #6122, before these builds), a matrix-vector product. A mixture of experts is counted whole,
    every expert as if more than 32 tokens were routed to it: an upper bound. 0 otherwise."""
    inf = plan.inference
    build = inf.llamacpp_build
    native = inf.llamacpp_backend is LlamaCppBackend.NATIVE
    if (
        not 0 < build < CUBLAS_PROMPT_BEFORE_BUILD
        or gpu.vendor != "nvidia"
        or not native
        or inf.gguf_quant in GGUF_FLOAT
    ):
        return 0.0
    model = plan.model
    weights = sum(rows * row for _, row, rows in layer_matrices(model)) * model.params_scale
    float32 = layer_float32_params(model) * model.params_scale * 4.0
    layers = [i for device in layout.device_layers for i in device]
    return sum(layout.layer_bytes[i] - float32 + weights * ELEMENT_BYTES["fp16"] for i in layers)


# ---- a decode step's kernels: one CUDA graph or one launch each ---------------------------------
# CUDA graphs came with ggml-org/llama.cpp PR #6766 (commit bc4bba36, merged 2024-05-08; its squash
# message: "updated Makefile build to enable CUDA graphs", "removed the check for multiple devices
# ... instead checks for split buffers"). The earliest build whose compile line we read with
# -DGGML_CUDA_USE_GRAPHS is b2824 (XiongjieDai/GPU-Benchmarks-on-LLM-Inference aa72e0e, "LLaMA 3/
# Gaming GPUs/3070_v3.ipynb", `LLAMA_CUBLAS=1 make -j`; every CUDA notebook of that table whose build cell kept
# its output, b2824-b2843, shows it: all but the RTX 3080's, also b2824); the build number of
# bc4bba36 itself is not read, so the builds between it and b2824 are counted as launching each kernel.
CUDA_GRAPHS_FROM_BUILD: Final = 2824


def pipeline_parallel(plan: Plan) -> bool:
    """llama.cpp's scheduler keeps :data:`SCHED_COPIES` copies of every split's inputs
    when the model is split by layers over more than one GPU with every layer offloaded
    (llama.cpp's ``pipeline_parallel``: device count > 1, n_gpu_layers > n_layer, split mode
    layer, KV offloaded, and no tensor override: ``!model.has_tensor_overrides()`` in src/llama-context.cpp,
    so --n-cpu-moe turns it off); otherwise one."""
    inf = plan.inference
    return inf.pipeline_parallel > 1 and inf.gpu_layers > plan.model.num_layers and cpu_moe_count(plan) == 0


# ---- a prompt's micro-batches across the GPUs of a layer split ----------------------------------
# Pipeline parallelism came with ggml-org/llama.cpp PR #6017 ("llama : add pipeline parallelism
# support", slaren, merged 2024-03-13): llama_decode splits a batch of up to n_batch tokens into
# micro-batches of n_ubatch, computes each with ggml_backend_sched_graph_compute_async and returns
# without waiting ("Makes llama_decode asynchronous", the PR's description), so GPU 0 starts the
# next micro-batch while GPU 1 runs the one before. Its first release is b2413 (commit f30ea47a, the
# tag a git bisect in the llama.cpp issues of 2024-03-15 prints: "f30ea47a - (tag: b2413) llama :
# add pipeline parallelism support (#6017)"). How far ahead the host may run is set by the
# scheduler's copies of each split's inputs (SCHED_COPIES): ggml_backend_sched_compute_splits
# (read at ggml-org/ggml 5cecdad6, 2026-02-07, src/ggml-backend.cpp; the same code in the 2024 copies
# of ggml-backend.c in the code index) advances cur_copy once per graph (ggml_backend_sched_alloc_graph)
# and, before it copies a user input (positions, the mask: every GPU's split reads them) into copy
# c, waits on the host for the event that GPU recorded when it last finished a split with copy c,
# the micro-batch SCHED_COPIES before. The host cannot issue
# micro-batch k + 1 before the last GPU has finished micro-batch k - SCHED_COPIES, so at most
# SCHED_COPIES + 1 micro-batches are in flight: on more GPUs than that the GPUs wait. Vulkan builds
# are left without the overlap: whether ggml-vulkan records the events the copies wait on was not read.
PIPELINED_PROMPT_FROM_BUILD: Final = 2413
# The share of that ideal overlap llama.cpp's layer split is measured to reach. The only published
# pair of one setup's prompts of one and of several micro-batches found: ggml-org/llama.cpp PR #19378
# (JohannesGaessler, four RTX 4090s, master of 2026-02-07, the "-sm layer" column, n_ubatch 512,
# n_batch 2048), llama 8B Q4_0 pp512 / pp2048 = 12,550.97 / 18,788.11 t/s, at a depth of 32,768
# 5,099.65 / 7,925.21, at 65,536 3,154.69 / 4,996.19: 1.50 / 1.55 / 1.58 times the rate where the
# ideal overlap of four micro-batches over GPUs of 9 / 8 / 8 / 7 layers gives 2.17. Each later
# micro-batch left the last GPU 0.557 / 0.525 / 0.509 of one micro-batch's time after the one before
# instead of 0.281: 0.62 / 0.66 / 0.68 of the ideal saving, median 0.66
# (tests/core/test_llamacpp_pipeline.py re-derives it). The saving lost grows with the micro-batch's
# time (11 / 25 / 37 ms of 41 / 100 / 162), so it is not a fixed cost of the copies between GPUs;
# what in the scheduler or the driver (no peer-to-peer on GeForce RTX 40 cards) takes it was not
# found. Not from a scored source: the corpus holds that PR's pp512 row only, one micro-batch.
PIPELINE_OVERLAP_SHARE: Final = 0.66


def prompt_pipeline_interval(plan: Plan, layout: GgufLayout) -> float:
    """The time between two prompt micro-batches leaving the last GPU, as a share of one
    micro-batch's time through every layer: ideally the busiest GPU's share of the repeating
    layers, or 1 / (:data:`SCHED_COPIES` + 1) where the scheduler's copies keep fewer micro-batches
    in flight than there are GPUs, of whose saving :data:`PIPELINE_OVERLAP_SHARE` is reached; 1 (no
    overlap) without pipeline parallelism (:func:`pipeline_parallel`), on Vulkan, and in builds
    before :data:`PIPELINED_PROMPT_FROM_BUILD`."""
    inf = plan.inference
    build = inf.llamacpp_build
    if (
        not pipeline_parallel(plan)
        or inf.llamacpp_backend is not LlamaCppBackend.NATIVE
        or 0 < build < PIPELINED_PROMPT_FROM_BUILD
    ):
        return 1.0
    counts = [len(layers) for layers in layout.device_layers]
    total = sum(counts)
    if len(counts) < 2 or total <= 0:
        return 1.0
    ideal = max(max(counts) / total, 1.0 / (SCHED_COPIES + 1))
    return 1.0 - PIPELINE_OVERLAP_SHARE * (1.0 - ideal)


def cuda_graphs_replayed(plan: Plan, gpu: GpuSpec, running: int) -> bool:
    """Whether llama.cpp's CUDA backend replays a decode step's kernels as one CUDA graph
    (``ggml_backend_cuda_graph_compute``, read at agray3/llama.cpp a5fd1931, the PR's author's
    branch): a build from :data:`CUDA_GRAPHS_FROM_BUILD` (0, a current build, included), an
    NVIDIA card of compute capability 8.0 or more (``cc < CC_AMPERE`` disables them; the
    catalogue's pre-Ampere cards are the ones without bf16 tensor cores), one sequence decoding
    (an ADD node whose ``src1->ne[1] > 1`` disables them: "batch size > 1"), the CUDA backend (not
    Vulkan), and one copy of the
    scheduler's inputs. With pipeline parallelism ``ggml_backend_sched_compute_splits`` advances
    ``cur_copy`` after every graph (ggml-backend.c at ggerganov/llama.cpp 0054f368), so each
    token's nodes read their inputs at another address, the node-property check requires a
    graph update every token, and four consecutive updates set
    ``disable_due_to_too_many_updates`` for good: a layer split across GPUs launches every
    kernel on its own."""
    inf = plan.inference
    return (
        inf.engine is Engine.LLAMACPP
        and gpu.vendor == "nvidia"
        and inf.llamacpp_backend is LlamaCppBackend.NATIVE
        and (inf.llamacpp_build == 0 or inf.llamacpp_build >= CUDA_GRAPHS_FROM_BUILD)
        and bool(gpu.tflops_dense.get("bf16"))
        and running == 1
        and not pipeline_parallel(plan)
    )


# ---- a lone token's F16 mat-vec: scalar or vector loads, by build ------------------------------
# In the CUDA backend of the spring-2024 builds (ggml_cuda_mul_mat in src/ggml-cuda.cu at
# ggml-org/ggml e84c498b, 2024-05-12, the ggml of llama.cpp's b2797-b2837) a product of F16 weights
# by one column of float activations takes dequantize_mul_mat_vec (use_dequantize_mul_mat_vec: F16
# or quantised weights, src1->ne[1] == 1; only quantised weights have an mmvq kernel to take it
# over). Its convert_f16 (src/ggml-cuda/dmmv.cu) reads each thread's two halves with two 2-byte
# loads and the kernel its two activations with two 4-byte loads; one warp a row. ggml-org/llama.cpp
# PR #9816 ("Vectorize load instructions in dmmv f16 CUDA kernel", agray3, merged 2024-10-14;
# ggml-org/ggml 431305e1) reads them as one half2 and one float2. Its first release is b3916 (the
# release notes of tag b3916, as OpenBMB/llama.cpp's copy of the tag lists them). Later builds
# replaced the kernel (PR #10318, "CUDA: remove DMMV, consolidate F16 mult mat vec") and keep
# vector loads. Products of more than one column (several sequences, prompts) go to cuBLAS.
F16_VECTOR_LOADS_FROM_BUILD: Final = 3916


def f16_matvec_scalar_loads(plan: Plan, gpu: GpuSpec) -> bool:
    """Whether llama.cpp's CUDA backend multiplies a lone token by the plan's F16 weights with the
    scalar loads of ``dequantize_mul_mat_vec`` (a build before :data:`F16_VECTOR_LOADS_FROM_BUILD`
    on an NVIDIA card; 0, a current build, has vector loads)."""
    inf = plan.inference
    return (
        inf.engine is Engine.LLAMACPP
        and inf.llamacpp_backend is LlamaCppBackend.NATIVE
        and gpu.vendor == "nvidia"
        and inf.gguf_quant is GgufQuant.F16
        and 0 < inf.llamacpp_build < F16_VECTOR_LOADS_FROM_BUILD
    )


# ---- the Vulkan backend's q8_1 activations ---------------------------------------------------
# ggml-vulkan (read at ggml-org/ggml 400b9294, 2025-12-13, the ggml of llama.cpp's b7340 week:
# src/ggml-vulkan/ggml-vulkan.cpp) multiplies a lone token's activations in float
# (ggml_vk_mul_mat_vec_q_f16, the "dequantize_mul_mat_vec" shaders) unless
# ggml_vk_should_use_mmvq picks the integer-dot path (MMVQ), which first quantises the
# activations to q8_1 in a dispatch of its own (ggml_vk_quantize_q8_1). The q8_1 copy is kept for
# the next product of the same input (prealloc_y_last_tensor_used): q, k and v share one, as do
# gate and up. Only these types have a q8_1 mat-vec (ggml_vk_get_dequantize_mul_mat_vec, b_type
# Q8_1); of them Q3_K and Q6_K never take it ("performance issue ... due to 2-byte alignment").
VULKAN_MMVQ_TYPES: Final = frozenset(
    {
        GgmlType.Q4_0,
        GgmlType.Q4_1,
        GgmlType.Q5_0,
        GgmlType.Q5_1,
        GgmlType.Q8_0,
        GgmlType.MXFP4,
        GgmlType.Q2_K,
        GgmlType.Q4_K,
        GgmlType.Q5_K,
    }
)
# ggml_vk_should_use_mmvq for one token (n == 1): on NVIDIA only for rows longer than 4,096 ("Quantization
# overhead is not worth it for small k"; Q2_K always; Q8_0 and MXFP4 only before Turing, not modelled:
# never), on AMD from 2,048 (Q8_0 only on GCN, not modelled: never); other vendors always.
VULKAN_MMVQ_MIN_K: Final = {"nvidia": 4097, "amd": 2048}
# The weight matrices that read one input (one q8_1 copy each group).
_SHARED_INPUT: Final = {"attn_q": "attn", "attn_k": "attn", "attn_v": "attn", "attn_qkv": "attn", "ffn_gate": "ffn_up"}


def vulkan_uses_mmvq(vendor: str, k: int, kind: GgmlType) -> bool:
    """Whether ggml-vulkan multiplies a row of ``k`` values of type ``kind`` by one token's q8_1
    activations (:data:`VULKAN_MMVQ_TYPES`, :data:`VULKAN_MMVQ_MIN_K`)."""
    if kind not in VULKAN_MMVQ_TYPES:
        return False
    if kind is GgmlType.Q2_K:
        return True
    if kind in (GgmlType.Q8_0, GgmlType.MXFP4) and vendor in VULKAN_MMVQ_MIN_K:
        return False
    return k >= VULKAN_MMVQ_MIN_K.get(vendor, 0)


def vulkan_quantise_dispatches(plan: Plan, vendor: str) -> float:
    """Mean q8_1 quantisations a layer of a lone token's decode dispatches on ggml-vulkan: one per
    input whose products take the integer-dot path (:func:`vulkan_uses_mmvq`)."""
    model = plan.model
    q = quantiser(model, plan.inference.gguf_quant)
    total = 0
    for layer in range(model.num_layers):
        inputs = {
            _SHARED_INPUT.get(kind, kind)
            for kind, row, _ in layer_matrices(model, layer)
            if vulkan_uses_mmvq(vendor, row, tensor_type(q, kind, layer, row))
        }
        total += len(inputs)
    return total / max(1, model.num_layers)


def offloaded_experts(plan: Plan, layout: GgufLayout, cells: int) -> tuple[float, ...]:
    """Per GPU, the largest expert tensor of its --n-cpu-moe layers that op offload copies into its compute
    buffer for a reserve micro-batch of :data:`OP_OFFLOAD_MIN_BATCH` tokens or more; 0 elsewhere."""
    gpus = plan.inference.pipeline_parallel
    if not layout.cpu_moe_layers or min(plan.inference.ubatch, cells) < OP_OFFLOAD_MIN_BATCH:
        return (0.0,) * gpus
    sizes = expert_tensor_bytes(plan.model, plan.inference.gguf_quant)
    largest = [0.0] * gpus
    moved = set(layout.cpu_moe_layers)
    for g, layers in enumerate(layout.device_layers):
        largest[g] = max((sizes[i][1] for i in layers if i in moved), default=0.0)
    return tuple(largest)


def llamacpp_buffers(
    plan: Plan,
    context: int | None = None,
    layout: GgufLayout | None = None,
    overhead: float = CUDA_CONTEXT_BYTES,
    split: tuple[int, ...] = (),
) -> LlamaCppMemory:
    """Every buffer llama.cpp allocates for the plan (at ``context`` tokens per slot), and ``overhead``
    beside them on each GPU (:func:`device_overhead_bytes`); ``split``: ``--tensor-split``'s shares."""
    model, inf = plan.model, plan.inference
    layout = layout or gguf_layout(plan, split)
    cells = context_cells(plan, context)
    gpus = inf.pipeline_parallel
    kv = [kv_bytes_of_layers(plan, layers, cells) for layers in layout.device_layers]
    host_kv = kv_bytes_of_layers(plan, layout.host_layers, cells)
    piped = pipeline_parallel(plan)
    # The first attention layer's device casts the mask in builds before b9410: the host's when layers stay
    # there (the first ones do), else the first GPU holding layers.
    first = -1 if layout.host_layers else next((g for g in range(gpus) if layout.device_layers[g]), -1)
    offloaded = offloaded_experts(plan, layout, cells)
    compute = [
        compute_buffer_bytes(
            plan, cells, output=layout.output_device == g, split=piped, casts=g == first, offloaded_weight=offloaded[g]
        )
        if layout.device_layers[g]
        else 0.0
        for g in range(gpus)
    ]
    # The host holds the graph's inputs (the mask, the embedding rows) and computes any layer left there.
    host_compute = host_input_bytes(plan, cells)
    if layout.host_layers or layout.output_device < 0:
        host_compute = max(
            host_compute,
            compute_buffer_bytes(plan, cells, output=layout.output_device < 0, split=False, casts=first < 0),
        )
    tokens = min(inf.ubatch, cells)
    if layout.cpu_moe_layers and tokens < OP_OFFLOAD_MIN_BATCH:  # the experts' products run on the CPU
        host_compute = max(host_compute, host_input_bytes(plan, cells) + ffn_live_bytes(model, tokens))
    if model.hybrid is None:
        return LlamaCppMemory(layout, cells, tuple(kv), tuple(compute), host_kv, host_compute, overhead)
    # llama_memory_recurrent: max(1, n_seq_max) cells, on each layer's device (core.serving.llamacpp_hybrid)
    rs = tuple(rs_bytes_of_layers(model, layers, inf.concurrent) for layers in layout.device_layers)
    host_rs = rs_bytes_of_layers(model, layout.host_layers, inf.concurrent)
    return LlamaCppMemory(layout, cells, tuple(kv), tuple(compute), host_kv, host_compute, overhead, rs, host_rs)


# What Metal's device holds before llama.cpp's first buffer, from llama.cpp's own printouts, which compare
# MTLDevice.currentAllocatedSize with recommendedMaxWorkingSetSize: build 4467 (ggml-org/ci llama.cpp/12/
# 44cdcf14900dd199907b13f25d9c91a507f578/ggml-100-mac-m4/README.md) reports "using device Metal (Apple M4) -
# 10922 MiB free" against "recommendedMaxWorkingSetSize = 11453.25 MB" (10,922.67 MiB) before the model loads,
# and older builds' ggml_backend_metal_log_allocated_size lines read a 5,872.02 MiB model buffer as 5,872.08 MiB
# allocated in all. Under 1 MiB, counted as 1 MiB; there is no CUDA context on a Mac.
METAL_DEVICE_BYTES: Final = 1 * MiB


def device_overhead_bytes(gpu: GpuSpec) -> tuple[str, float]:
    """The per-GPU memory beside llama.cpp's buffers, and its name: Metal's device on Apple silicon, the
    CUDA context elsewhere."""
    if gpu.vendor == "apple":
        return "Metal device", METAL_DEVICE_BYTES
    return "CUDA context", CUDA_CONTEXT_BYTES


def llamacpp_memory(
    plan: Plan, gpu: GpuSpec, _layout: object = None, _fit: object = None, split: tuple[int, ...] = ()
) -> EngineMemory:
    """llama.cpp's memory on the GPU that holds the most, and the host part beside it (``split``:
    ``--tensor-split``'s shares; none: equal)."""
    model, inf = plan.model, plan.inference
    context_name, overhead = device_overhead_bytes(gpu)
    buffers = llamacpp_buffers(plan, overhead=overhead, split=split)
    g = buffers.deciding
    weights, kv, compute = buffers.layout.device_weights[g], buffers.device_kv[g], buffers.device_compute[g]
    rs = buffers.device_rs[g] if buffers.device_rs else 0.0
    total = weights + kv + rs + compute + overhead
    capacity = card_left_bytes(gpu.memory_bytes, plan.hardware.held_by_others)  # less what others hold
    usable = capacity * (1.0 - plan.hardware.headroom)
    verdict = judge(total, capacity, plan.hardware.headroom).verdict
    host_ram = plan.parallel.host_ram_gb * GB
    if host_ram and buffers.host_bytes > host_ram:
        verdict = Verdict.OOM

    def fits(context: int) -> bool:
        other = llamacpp_buffers(plan, context, buffers.layout, overhead)
        return max(other.device_totals) <= usable and (not host_ram or other.host_bytes <= host_ram)

    max_c = min(max(0, largest_fitting(fits, MAX_CONTEXT, inf.context)), model.max_position_embeddings)
    fits_slots = total <= usable and (not host_ram or buffers.host_bytes <= host_ram)
    cells = buffers.cells
    kv_terms = [Term("KV buffer", _kv_words(model, cells, inf.cache_type.value), kv)]
    if buffers.device_rs:  # a hybrid's recurrent states beside its attention layers' cache
        kv_terms.append(Term("RS buffer", _rs_words(model, inf.concurrent), rs))
    parts = (
        make_bucket(BucketKey.WEIGHTS, [Term("model buffer", _weights_words(plan, buffers.layout), weights)]),
        make_bucket(BucketKey.KV_CACHE, kv_terms),
        make_bucket(BucketKey.ACTIVATIONS, [Term("compute buffer", _compute_words(plan, buffers, g), compute)]),
        make_bucket(BucketKey.OVERHEAD, [Term(context_name, "per process and GPU", overhead)]),
    )
    host = buffers.host_bytes
    # In MiB, llama.cpp's log unit, term by term, the sum then in the window's GB (h55ux: the sum was in
    # GB of MiB terms, and the context's term had no figure).
    formula = (
        f"llama.cpp, GPU {g}: model {weights / MiB:,.2f} MiB + KV {kv / MiB:,.2f} MiB ({_cells_words(model, cells)}) + "
        + (f"RS {rs / MiB:,.2f} MiB ({_rs_cells(model, inf.concurrent)}) + " if buffers.device_rs else "")
        + f"compute "
        f"{compute / MiB:,.2f} MiB + {context_name} {overhead / MiB:,.2f} MiB = {total / MiB:,.2f} MiB "
        f"({gb(total)} GB); host memory {host / MiB:,.2f} MiB ({gb(host)} GB: token embeddings"
        f"{_host_layers(buffers)})"
        + (f" of {plan.parallel.host_ram_gb:g} GB RAM" if host_ram else ", host RAM not given")
    )
    return EngineMemory(
        weights_bytes=weights,
        kv_cache_bytes=kv + rs,
        activation_bytes=compute,
        non_torch_bytes=0.0,
        overhead_bytes=overhead,
        peak_bytes=weights + kv + rs + compute,
        total_bytes=total,
        footprint_bytes=total,
        budget_bytes=usable,
        kv_cache_tokens=cells,
        max_concurrency=float(inf.concurrent if fits_slots else 0),
        max_concurrent=inf.concurrent if fits_slots else 0,
        max_context=max_c,
        verdict=verdict,
        margin_bytes=usable - total,
        max_num_seqs=inf.concurrent,
        max_num_batched_tokens=inf.ubatch,
        formula=formula,
        parts=parts,
        host_bytes=host,
    )


def _compute_words(plan: Plan, buffers: LlamaCppMemory, g: int) -> str:
    """The compute term's words; with --n-cpu-moe and op offload, the expert tensor copied in beside the FFN."""
    tokens = min(plan.inference.ubatch, buffers.cells)
    words = f"one {tokens}-token batch"
    copied = offloaded_experts(plan, buffers.layout, buffers.cells)[g]
    if copied:
        words += f", with op offload a copy of the largest RAM-kept expert tensor ({copied / MiB:,.2f} MiB)"
    return words


def _kv_words(model: ModelSpec, cells: int, cache: str) -> str:
    """The KV term's words: MLA's cache is one latent per cell and layer, no V (llamacpp_cache_widths)."""
    if model.latent_attention:
        return f"{cells:,} cells × K only: the latent ({model.kv_lora_rank} + {model.qk_rope_head_dim} rope) in {cache}"
    return f"{cells:,} cells × {cache}"


def _cells_words(model: ModelSpec, cells: int) -> str:
    if model.latent_attention:
        return f"{cells:,} cells, K only: the {model.latent_width}-wide latent"
    if model.hybrid is not None:
        return f"{cells:,} cells, {model.kv_layers} attention layers"
    return f"{cells:,} cells"


def _rs_cells(model: ModelSpec, slots: int) -> str:
    cells = max(1, slots)
    return f"{cells} cell{'s' if cells > 1 else ''} × {model.recurrent_layers} recurrent layers, f32"


def _rs_words(model: ModelSpec, slots: int) -> str:
    """The RS term's words: llama_memory_recurrent's R (conv) and S (scan) rows, one cell a sequence."""
    mixer = MIXER_NAMES[model.recurrent_mixer]
    return f"{mixer} states: {_rs_cells(model, slots)} (R + S; --cache-type does not apply)"


def _host_layers(buffers: LlamaCppMemory) -> str:
    count = len(buffers.layout.host_layers)
    words = f", {count} layers not offloaded" if count else ""
    return words + _experts_words(buffers.layout)


def _experts_words(layout: GgufLayout) -> str:
    """The host's share of --n-cpu-moe: the experts of how many layers, in MiB."""
    moved = len(layout.cpu_moe_layers)
    if not moved:
        return ""
    layers = f"{moved} GPU layer{'s' if moved > 1 else ''}"
    return f", {layout.host_expert_bytes / MiB:,.2f} MiB of routed experts of {layers}"


def _weights_words(plan: Plan, layout: GgufLayout) -> str:
    """The model buffer's words: the GGUF type, and the experts --n-cpu-moe keeps in host RAM."""
    words = f"{plan.inference.gguf_quant.value} tensors on this GPU"
    moved = layout.cpu_moe_layers
    if not moved:
        return words
    n = plan.inference.cpu_moe_layers
    first = "--cpu-moe" if n >= plan.model.num_layers else f"--n-cpu-moe {n}"
    kept = f"{layout.host_expert_bytes / MiB:,.2f} MiB in RAM"
    return f"{words}, less layers {moved[0]}-{moved[-1]}'s ffn_*_exps ({first}: {kept})"
