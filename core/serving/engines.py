"""Memory of a serving engine, laid out as the engine lays it out.

Two engines, each modelled from its source:

* Hugging Face ``model.generate`` (transformers 4.5x): one static batch of B requests.
  The prompt of every request is prefilled at once (a forward over B × S tokens with
  ``use_cache=True``); only the last position's logits are computed
  (``logits_to_keep=1``); the ``DynamicCache`` then grows by one position per request
  and layer each step, to S + new tokens. Peak = weights + KV cache + the larger of the
  prefill's working memory and the last decode step's.
* vLLM (V1 engine, the 0.19.0 release): the KV pool takes what is left of
  ``total × gpu_memory_utilization`` after the weights, the torch peak of the profile run and
  the memory allocated outside torch during it; the rules and their sources are in
  :mod:`core.serving.vllm_rules`.

Per rank: tensor parallelism divides the matrices and the KV heads (at least one KV head
per rank); pipeline parallelism divides the layers (the rank with the most layers and the
embeddings decides). Replicas repeat the whole.

The three engines share the weights, working-memory and overhead terms, and reading them
side by side is the point; vLLM's own arithmetic (profile, blocks, groups) lives in
:mod:`core.serving.vllm_rules`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from core.breakdown import Bucket, BucketKey, Term, make_bucket
from core.catalogue import GpuSpec, LinkSpec, find_link, intra_link_of
from core.dtypes import (
    DENSE_BYTES,
    HALF,
    KV_BYTES,
    WeightFormat,
    mlp_matrix_params,
    mxfp4_bytes_per_weight,
    weight_bytes,
)
from core.format import gb
from core.inputs import PER_TOKEN_HEAD_KV, VllmVersion
from core.model import ModelSpec
from core.plan import Attention, Engine, Inference, Plan, PrefixCaching
from core.runtime import (
    CUDA_CONTEXT_BYTES,
    MPS_OPEN_HEAPS_BYTES,
    card_left_bytes,
    cublas_workspace,
    pytorch_limit_bytes,
    runs_mps,
    runtime_names,
)
from core.serving.fit import COLD_COMPILE_PEAK, DEFAULT_FIT, ServingFit, link_class
from core.serving.gptq import after_loading_delta, cuda_old_dequant_bytes
from core.serving.kv import (
    cached_positions,
    kv_bytes_per_token_layer,
    kv_formula,
    kv_heads_per_rank,
    per_token_head_scale_bytes,
)
from core.serving.sglang_versions import (
    TEXT_LAUNCH,
    Launch,
    card_mib,
    default_fraction,
    default_notes,
    graphs_reserved,
    launch_of,
    mm_reserve_mib,
    multimodal_words,
    release_default,
    reserves_for_graphs,
    runner_factor,
)
from core.serving.sglang_weights import rope_bytes
from core.serving.text_only import encoder_profile, skips_vision_tower
from core.serving.vllm_hybrid import align_mode, hybrid_groups, plan_pages, state_blocks
from core.serving.vllm_rules import (
    MOE_WORKSPACE_KEPT_FROM,
    VLLM_BLOCK_SIZE,
    VLLM_CUDA_GRAPH_BYTES,
    VLLM_KV_MARGIN_FLOOR_BYTES,
    VLLM_KV_MARGIN_FRACTION,
    KvGroups,
    activation_element_bytes,
    moe_workspace_bytes,
    mxfp4_padding,
    sampler_path,
    vllm_blocks_per_request,
    vllm_graph_reserve,
    vllm_kv_groups,
    vllm_non_torch_bytes,
    vllm_sampler_bytes,
    vllm_scheduler,
    vllm_total_memory,
)
from core.serving.vllm_versions import (
    CAPACITY_TOKENS_FROM,
    at_least,
    chunked_groups,
    cold_compile_planned,
    compiles_in_profile,
    counts_others_as_non_torch,
    default_block_size,
    era_of,
    graphs_before_kv,
    graphs_captured,
    profile_tokens,
    start_check,
    utilization,
    v2_runner,
)
from core.solve import largest_fitting
from core.start_refusal import RefusalKind, StartRefusal
from core.units import GiB, MiB
from core.verdict import Verdict, judge

if TYPE_CHECKING:
    from core.serving.inference import InferenceEstimate

# --- serving overhead: the one home ---------------------------------------------------
# Memory a serving process holds outside the caching allocator: the CUDA context
# (core.runtime.CUDA_CONTEXT_BYTES, the same constant training uses).
SERVING_OVERHEAD_BYTES: Final = CUDA_CONTEXT_BYTES

# --- SGLang: the default mem_fraction_static by release lives in core.serving.sglang_versions.
# profile_max_num_token (python/sglang/srt/model_executor/model_runner.py): pool = memory free
# after the weights load - total × (1 - mem_fraction_static), in tokens of 2 · KV heads per rank
# · head width · layers · bytes; activations and CUDA graphs live in the (1 - fraction) left over.
# The rotary cos/sin table it also subtracts: core.serving.sglang_weights (SGLANG_ROPE_CACHE_BYTES).

# --- Hugging Face generate -----------------------------------------------------------
# Hugging Face's eager-mode decoder layer keeps four hidden-size tensors alive at the MLP
# (the attention output beside the residual, the normed input, the block output): 4 copies
# reproduce the working memory h2-measure recorded for generate
# (benchmarks/serving/measured, llama-3.1-8b: 118.9 kB per prompt token against
# (3 · 14336 + 4 · 4096) · 2 = 118.8 kB).
HF_HIDDEN_COPIES: Final = 4
# After the forward, generate keeps the last position's logits (16-bit), copies them to
# float32 and the logits processors / softmax make one more float32 row: 2 + 4 + 4 bytes.
HF_LOGIT_BYTES: Final = 10
# Eager attention materialises scores (16-bit), their float32 softmax and the cast back.
EAGER_SCORE_BYTES: Final = 8

# GPTQ checkpoints under transformers run AutoGPTQ's ExLlama (v1) kernels: GPTQConfig's
# ``exllama_config`` defaults to version 1 (transformers 4.46 utils/quantization_config.py
# GPTQConfig.post_init), and AutoGPTQ's ``autogptq_post_init`` (AutoGPTQ/AutoGPTQ v0.7.1
# auto_gptq/modeling/_utils.py) then allocates, per device and for as long as the model lives,
# ``temp_dq``: float16 room for the largest quantised layer dequantised (qweight.numel() × 8
# elements = in × out), which the prefill's cuBLAS path dequantises into; and ``temp_state``,
# max_input_len × max_inner_outer_dim float16, 1 × 1 without act-order (Qwen's, Llama's GPTQ
# checkpoints: desc_act false). vLLM's GPTQ kernels keep no such buffer. ExLlama takes 4 bits only: an
# 8-bit GPTQ model runs AutoGPTQ's cuda-old linear, which keeps none either (core.serving.gptq).
EXLLAMA_DQ_BYTES: Final = 2  # float16 per dequantised weight

MAX_CONCURRENT: Final = 10_000_000
MAX_CONTEXT: Final = 100_000_000


def vllm_free_at_start(plan: Plan, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT) -> float:
    """The free memory vLLM's worker reads at init: the total it reads from the driver less its CUDA context
    and what other processes hold (``hardware.held_by_others``), never below 0; the start-up check and 0.34's
    bound on the pool read it."""
    hw = plan.hardware
    return max(0.0, vllm_total_memory(gpu, fit, hw.platform) - CUDA_CONTEXT_BYTES - hw.held_by_others)


@dataclass(frozen=True)
class RankLayout:
    """What the rank that decides holds."""

    weights_bytes: float
    layers: int  # decoder layers on this rank
    kv_token_layer_bytes: float  # one token in one layer on this rank
    kv_heads: int
    intermediate: int  # MLP width on this rank
    q_heads: int
    tower_bytes: float = 0.0  # the vision tower + projector among weights_bytes (:func:`tower_bytes`)
    kv_layers: int = 0  # layers with a KV cache on this rank: every layer, or a hybrid's attention layers


def tower_bytes(model: ModelSpec, fmt: WeightFormat, tp: int, text_only: bool = False) -> float:
    """An image-text checkpoint's vision tower + projector (core.vision) on the rank that decides: vLLM, SGLang
    and transformers load it with the model. vLLM skips it only in its text-only mode, every modality's
    ``--limit-mm-per-prompt`` 0 (vllm-project/vllm PR #22299, merged 2025-08-06, for the models it listed; PR
    #26000 added Qwen3-VL; PR #32605, January 2026, made it every model's ``_mark_tower_model``); SGLang's
    ``--language-model-only`` (0.5.18 on) takes none of the planner's image-text families (core.plan
    ``SGLANG_TEXT_ONLY_PR``). ``text_only``: the plan's text-only mode where its
    engine and release skip the tower (core.serving.text_only.skips_vision_tower, which refuses the others).
    Split over tensor-parallel ranks as vLLM's default ``mm_encoder_tp_mode`` "weights" shards it
    (an approximation: PR #26000's Qwen3-VL-235B at TP 8 logs 0.33 GiB more per rank with the tower than
    without and 1.27 GiB with it replicated, a quarter rather than an eighth, as parts stay whole), on the first
    pipeline stage, which the layout's worst rank already is. Kept in 16 bits under a quantised
    format (the AWQ / GPTQ / FP8 image-text checkpoints people serve leave the tower unquantised; assumed, not
    read per checkpoint), in float32 for an fp32 plan."""
    if not model.vision_params or text_only:
        return 0.0
    per = DENSE_BYTES.get(fmt, HALF)
    return model.vision_params * per / tp


def weights_term(layout: RankLayout) -> Term:
    """The rank's weights, naming the vision tower's share where the checkpoint has one."""
    if not layout.tower_bytes:
        return Term("weights on the rank", "stored weights", layout.weights_bytes)
    lm = layout.weights_bytes - layout.tower_bytes
    formula = f"language model {gb(lm)} GB + vision tower {gb(layout.tower_bytes)} GB"
    return Term("weights on the rank (language model + vision tower)", formula, layout.weights_bytes)


def _kv_token_layer_bytes(model: ModelSpec, inf: Inference, tp: int) -> float:
    """One token in one layer on a rank, as the plan's engine keeps it: transformers' generate caches MLA's
    decompressed K and V, the engines its latent; vLLM's per-token-head caches add their scales
    (core.serving.kv.per_token_head_scale_bytes)."""
    kv = kv_bytes_per_token_layer(model, KV_BYTES[inf.kv_dtype], tp, inf.engine is not Engine.HF)
    if inf.engine is Engine.VLLM and inf.kv_dtype in PER_TOKEN_HEAD_KV:
        kv += per_token_head_scale_bytes(model, tp)
    return kv


def rank_layout(plan: Plan) -> RankLayout:
    model, inf = plan.model, plan.inference
    tp, pp = inf.tensor_parallel, inf.pipeline_parallel
    total = model.total_params()
    # GPTQ / AWQ: what the engine's kernel frees or adds after loading (core.serving.gptq)
    all_weights = weight_bytes(model, total, inf.weight_dtype) + after_loading_delta(
        plan, model, model.stored_matmul_params()
    )
    per_param = all_weights / total if total else 0.0
    layers = math.ceil(model.num_layers / pp)
    padding = 0.0
    if inf.weight_dtype is WeightFormat.MXFP4 and inf.engine is Engine.VLLM:
        experts = mlp_matrix_params(model) * mxfp4_bytes_per_weight() * layers / model.num_layers / tp
        padding = experts * (mxfp4_padding(model, tp) - 1)
    # KV projections are replicated, not split, once tp exceeds the KV heads; MLA's down-projections
    # and their norms are whole on every rank (ModelSpec.replicated_latent_params).
    replicated: float
    if model.latent_attention:
        replicated = (tp - 1) * model.replicated_latent_params() * model.num_layers
    else:
        kv_rep = kv_heads_per_rank(model, tp) * tp / model.num_kv_heads
        kv_proj = 2 * model.hidden_size * model.kv_width * model.num_layers
        replicated = (kv_rep - 1) * kv_proj
    scale = model.params_scale
    block_params = (model.blocks_params() + replicated) * scale
    ends = (model.embedding_params() + model.head_params()) * scale
    if pp > 1:
        ends = max(model.embedding_params(), model.head_params() or model.embedding_params()) * scale
    rank_params = (block_params * layers / model.num_layers + ends) / tp
    tower = tower_bytes(model, inf.weight_dtype, tp, skips_vision_tower(model, inf))
    return RankLayout(
        weights_bytes=rank_params * per_param + padding + tower,
        layers=layers,
        kv_token_layer_bytes=_kv_token_layer_bytes(model, inf, tp),
        kv_heads=kv_heads_per_rank(model, tp),
        intermediate=math.ceil(model.intermediate_size * max(1, model.experts_per_token) / tp),
        q_heads=max(1, model.num_heads // tp),
        tower_bytes=tower,
        kv_layers=math.ceil(model.kv_layers / pp),
    )


def forward_working_bytes(
    model: ModelSpec, layout: RankLayout, tokens: int, hidden_copies: int, bytes_per_element: float = 2.0
) -> float:
    """Torch working memory of a forward over ``tokens`` tokens (one block's widest moment)."""
    mlp = (3 if model.gated_mlp else 2) * layout.intermediate
    return tokens * (mlp + hidden_copies * model.hidden_size) * bytes_per_element


def hf_cached_positions(model: ModelSpec, tokens: int) -> int:
    """Layer-positions transformers' DynamicCache keeps: it caps only layers the config types
    as sliding (Gemma 2/3 ``layer_types``); a model whose every layer has the window
    (Mistral 7B v0.1) keeps all positions and applies the window as a mask, as h2-measure's
    Mistral case shows (benchmarks/serving/measured/hf-mistral-7b-b2-s8192.json)."""
    if model.sliding_window and model.sliding_window_layers >= model.num_layers:
        return model.num_layers * tokens
    return cached_positions(model, tokens)


@dataclass(frozen=True)
class EngineMemory:
    weights_bytes: float
    kv_cache_bytes: float  # hf: the batch's cache at its longest; vllm: the whole pool
    activation_bytes: float  # hf: prefill/decode working memory; vllm: profiled peak
    non_torch_bytes: float
    overhead_bytes: float  # CUDA context (generate: and its cuBLAS workspace)
    peak_bytes: float  # allocator level (torch)
    total_bytes: float  # what the plan needs at once (judged by core.verdict)
    footprint_bytes: float  # what the process holds on the card (vllm: card × utilisation + context)
    budget_bytes: float  # what the process may take (hf: capacity less headroom; vllm: the card)
    kv_cache_tokens: int  # tokens the cache holds (hf: B × context; vllm: GPU KV cache size)
    max_concurrency: float  # requests of the plan's context that fit (vllm: as it logs it)
    max_concurrent: int
    max_context: int
    verdict: Verdict  # core.verdict.judge on total_bytes; a pool that holds no request is OOM
    margin_bytes: float
    max_num_seqs: int
    max_num_batched_tokens: int
    formula: str
    cuda_graph_bytes: float = 0.0  # vllm: graph pool captured after the KV pool, outside it
    host_bytes: float = 0.0  # llama.cpp: what stays in host memory (embeddings, layers not offloaded)
    # What ``total_bytes`` is made of, in SERVING_BUCKET_ORDER: the figure judged, part by part.
    parts: tuple[Bucket, ...] = ()
    # The engine's own refusal of its memory at start-up, classified where it is decided (None where it starts):
    # vLLM's free-memory check (:func:`vllm_start_refusal`), its KV pool short of one request (:func:`vllm_kv_refusal`),
    # SGLang's empty token pool (:func:`_sglang_refusal`).
    refusal: StartRefusal | None = None


# --- Hugging Face generate -------------------------------------------------------------
def exllama_buffer_bytes(plan: Plan, layout: RankLayout) -> float:
    """AutoGPTQ's ExLlama dequantisation buffer on the rank (EXLLAMA_DQ_BYTES): a GPTQ model
    served by transformers holds the largest quantised matrix of the rank once more in float16;
    0 for every other weight format and engine."""
    inf = plan.inference
    if inf.engine is not Engine.HF or inf.weight_dtype is not WeightFormat.GPTQ_INT4:
        return 0.0
    largest = max(n_in * n_out for n_in, n_out in plan.model.linear_shapes().values())
    return largest / inf.tensor_parallel * EXLLAMA_DQ_BYTES


def _hf_forward_bytes(plan: Plan, layout: RankLayout, tokens: int) -> float:
    """Generate's working memory of one forward over ``tokens`` tokens: the block's widest moment, or
    where AutoGPTQ's cuda-old linears dequantise a matrix in torch (8-bit GPTQ, 128 rows or more:
    core.serving.gptq.cuda_old_dequant_bytes) the moment of the MLP's last product, its one
    intermediate-wide input and the hidden copies beside the dequantisation's transient."""
    model = plan.model
    widest = forward_working_bytes(model, layout, tokens, HF_HIDDEN_COPIES)
    dequant = cuda_old_dequant_bytes(plan, tokens)
    if not dequant:
        return widest
    return max(widest, tokens * (layout.intermediate + HF_HIDDEN_COPIES * model.hidden_size) * 2 + dequant)


def hf_peak_bytes(plan: Plan, layout: RankLayout, batch: int, context: int) -> tuple[float, float, float]:
    """(peak, KV cache at the end, working memory at the peak) for a static batch."""
    model, inf = plan.model, plan.inference
    prompt = max(1, context - inf.new_tokens)
    per_pos = layout.kv_token_layer_bytes
    pp_share = layout.layers / model.num_layers
    # Through the prefill every layer holds the whole prompt: transformers' (5.x)
    # DynamicSlidingWindowLayer keeps its last window − 1 positions as a *view* of the
    # prefill's keys and values, so their storage stays alive until the first decode step
    # rebuilds the windowed layers at window length (measured: benchmarks/serving/measured/
    # hf-gemma3-1b-b4-s8192.json, KV after the prefill 26 layers × 8,192 tokens).
    kv_prompt = per_pos * batch * model.num_layers * prompt * pp_share
    kv_end = per_pos * batch * hf_cached_positions(model, context) * pp_share
    logits = batch * model.vocab_size * HF_LOGIT_BYTES
    prefill = _hf_forward_bytes(plan, layout, batch * prompt) + logits
    if plan.attention is Attention.EAGER:
        prefill += batch * layout.q_heads * prompt * prompt * EAGER_SCORE_BYTES
    # Each decode step torch.cat's one layer's K (then V) into a new tensor before the
    # old one is freed: one layer's K of the whole batch is transient.
    cat_transient = per_pos / 2 * batch * context
    decode = _hf_forward_bytes(plan, layout, batch) + logits + cat_transient
    working = max(prefill + kv_prompt, decode + kv_end) - kv_end
    peak = layout.weights_bytes + exllama_buffer_bytes(plan, layout) + kv_end + working
    return peak, kv_end, working


def hf_memory(plan: Plan, gpu: GpuSpec, layout: RankLayout, fit: ServingFit = DEFAULT_FIT) -> EngineMemory:
    inf = plan.inference
    # On an Apple GPU: MPS's limit, at most the RAM; less what other processes hold on the card.
    capacity = card_left_bytes(pytorch_limit_bytes(gpu), plan.hardware.held_by_others)
    usable = capacity * (1.0 - plan.hardware.headroom)
    peak, kv, working = hf_peak_bytes(plan, layout, inf.concurrent, inf.context)
    overheads = hf_overhead_terms(gpu.id)
    overhead = sum(t.bytes for t in overheads)
    total = peak + overhead

    def fits(batch: int, context: int) -> bool:
        return hf_peak_bytes(plan, layout, batch, context)[0] + overhead <= usable

    # Every term of the peak but the weights is proportional to the batch: the largest batch
    # has a closed form, which the solver confirms in a call or two.
    fixed = layout.weights_bytes + exllama_buffer_bytes(plan, layout)
    room = usable - overhead - fixed
    one = hf_peak_bytes(plan, layout, 1, inf.context)[0] - fixed
    max_b = max(0, largest_fitting(lambda b: fits(b, inf.context), MAX_CONCURRENT, room / one if one > 0 else 1))
    # In the context the peak is close to linear (attention scores and windows bend it):
    # a secant through the plan's context and half of it starts the search near the answer.
    half = max(1, inf.context // 2)
    slope = (peak - hf_peak_bytes(plan, layout, inf.concurrent, half)[0]) / max(1, inf.context - half)
    guess_c = inf.context + (room - (peak - fixed)) / slope if slope > 0 else 1
    max_c = max(0, largest_fitting(lambda n: fits(inf.concurrent, n), MAX_CONTEXT, guess_c))
    max_c = min(max_c, plan.model.max_position_embeddings)  # no longer than the model reads
    verdict = judge(total, capacity, plan.hardware.headroom).verdict
    buffer = exllama_buffer_bytes(plan, layout)
    weights = f"{gb(layout.weights_bytes)} + {gb(buffer)} (GPTQ buffer)" if buffer else gb(layout.weights_bytes)
    formula = (
        f"peak = weights + KV cache + working = {weights} + {gb(kv)} + {gb(working)} GB; "
        f"KV = {kv_formula(plan.model, layout.layers, inf.tensor_parallel, latent=False)} · "
        f"{inf.context:,} tokens · {inf.concurrent} · {KV_BYTES[inf.kv_dtype]:g} B"
    )
    return EngineMemory(
        weights_bytes=layout.weights_bytes,
        kv_cache_bytes=kv,
        activation_bytes=working,
        non_torch_bytes=0.0,
        overhead_bytes=overhead,
        peak_bytes=peak,
        total_bytes=total,
        footprint_bytes=total,
        budget_bytes=usable,
        kv_cache_tokens=inf.concurrent * inf.context,
        max_concurrency=float(max_b),
        max_concurrent=max_b,
        max_context=max_c,
        verdict=verdict,
        margin_bytes=usable - total,
        max_num_seqs=inf.concurrent,
        max_num_batched_tokens=inf.concurrent * inf.prompt_tokens,
        formula=formula,
        parts=_hf_parts(plan, layout, kv, working, overheads),
    )


def hf_overhead_terms(gpu_id: str) -> tuple[Term, ...]:
    """What generate's process holds beside its tensors. On a CUDA card: the CUDA context, and the cuBLAS
    workspace PyTorch takes from its caching allocator at the first matmul of the generating thread's one
    handle, at the size the card gets (core.runtime.cublas_workspace). A real card's max_memory_allocated
    counts the workspace, the fake-tensor measurements (benchmarks/serving/measured) do not: it is kept
    out of peak_bytes, which those measurements score, and in the total the verdict reads. On an Apple
    GPU (PyTorch's MPS backend): neither, but the MPS allocator's heaps' unused room
    (core.runtime.MPS_OPEN_HEAPS_BYTES)."""
    if runs_mps(gpu_id):
        return (
            Term(
                "MPS heaps' unused room (the last 1 GiB, 32 MiB and 8 MiB heap, half used on average)",
                "PyTorch's MPS allocator: no CUDA context or cuBLAS workspace",
                MPS_OPEN_HEAPS_BYTES,
            ),
        )
    workspace = cublas_workspace(gpu_id)
    return (
        Term(runtime_names(gpu_id).context, "per process", SERVING_OVERHEAD_BYTES),
        Term(
            f"{workspace.library} workspace (PyTorch: the generating thread's handle){workspace.note}",
            f"1 handle × {workspace.label}",
            workspace.bytes,
        ),
    )


def _hf_parts(
    plan: Plan, layout: RankLayout, kv: float, working: float, overheads: tuple[Term, ...]
) -> tuple[Bucket, ...]:
    """What generate's total is made of, bucket by bucket (SERVING_BUCKET_ORDER)."""
    inf = plan.inference
    return (
        make_bucket(
            BucketKey.WEIGHTS,
            [
                weights_term(layout),
                Term(
                    "GPTQ dequantisation buffer",
                    "AutoGPTQ's ExLlama kernels: the largest quantised matrix × 2 B (float16)",
                    exllama_buffer_bytes(plan, layout),
                ),
            ],
        ),
        make_bucket(
            BucketKey.KV_CACHE,
            [Term("the batch's KV cache at its longest", f"{inf.concurrent} × {inf.context:,} tokens", kv)],
        ),
        make_bucket(BucketKey.ACTIVATIONS, [Term("working memory at the peak", "prefill or decode", working)]),
        make_bucket(BucketKey.OVERHEAD, overheads),
    )


# --- vLLM --------------------------------------------------------------------------------
def pooled_verdict(concurrency: float, need: float, capacity: float, headroom: float) -> Verdict:
    """An engine with a pool refuses to start when one request does not fit (OOM); otherwise
    what the requests running together hold is judged like any total, against ``capacity`` (the
    card less what other processes hold). Requests past the pool wait in the queue
    (InferenceEstimate.queued) and need no memory meanwhile."""
    if concurrency < 1:
        return Verdict.OOM
    return judge(need, capacity, headroom).verdict


def vllm_profile_peak(
    model: ModelSpec, layout: RankLayout, inf: Inference, batched_tokens: int, seqs: int, gpu_id: str
) -> float:
    """Torch peak increase of vLLM's profile run on the rank that decides (the last pipeline
    stage, which also runs the sampler): the forward, then the sampler, and the cuBLAS
    workspace of the worker's one handle at the size the card ``gpu_id`` gets
    (core.runtime.cublas_workspace); a later pipeline stage also holds the hidden states and residual it received
    (IntermediateTensors). The forward keeps the era's hidden-size copies
    (core.serving.vllm_versions)."""
    element = activation_element_bytes(inf)
    era = era_of(inf.vllm_version)
    copies = era.hidden_copies
    path = sampler_path(inf, min(seqs, batched_tokens), v2_runner(inf, model))
    sampler = vllm_sampler_bytes(model, batched_tokens, seqs, element, era.v1, path)
    if model.num_experts > 1:
        # The fused-MoE scratch comes from the worker's WorkspaceManager and stays allocated
        # after the forward, so the sampler runs on top of it; the MLP's own transients are
        # that scratch. Before 0.13.0 (72506c983, where FusedMoEModularKernel first takes it from
        # current_workspace_manager()) each call allocates it (0.10.2, 26b999c71,
        # fused_moe/modular_kernel.py: workspace13 = torch.empty(...)) and frees it on return,
        # so the sampler runs without it.
        hidden = batched_tokens * copies * model.hidden_size * element
        workspace = moe_workspace_bytes(model, inf, batched_tokens, element)
        if at_least(inf.vllm_version, MOE_WORKSPACE_KEPT_FROM):
            peak = workspace + max(hidden, sampler)
        else:
            peak = max(workspace + hidden, sampler)
    else:
        peak = max(forward_working_bytes(model, layout, batched_tokens, copies, element), sampler)
    if inf.pipeline_parallel > 1:
        peak += 2 * batched_tokens * model.hidden_size * element
    # An image-text model's encoder profile runs first; its pixel values and embeddings stay through the rest.
    encoder = encoder_profile(model, inf, batched_tokens, seqs, element)
    peak = max(encoder.peak, encoder.kept + peak)
    return peak + cublas_workspace(gpu_id).bytes


def serving_link(inf: Inference, gpu: GpuSpec) -> LinkSpec:
    """What carries the tensor-parallel all-reduce: the plan's link, or with "auto" the card's own."""
    if inf.link.strip().lower() == "auto":
        return intra_link_of("auto", gpu.id)
    return find_link(inf.link, "inference.link")


@dataclass(frozen=True)
class VllmPool:
    """What vLLM's start-up works out before any request: the budget and the blocks."""

    requested: float  # total × gpu_memory_utilization
    activation: float
    non_torch: float
    graphs_reserved: float  # the CUDA-graph estimate set aside before the pool (0.21 on)
    blocks: int
    groups: KvGroups
    page_bytes: float  # one block of one layer
    kv_tokens: int
    per_request: int  # blocks one request of the plan's context takes
    batched: int
    seqs: int
    margin: float = 0.0  # 0.34's sizing margin kept free beside the reserve
    cold_compile: float = 0.0  # a cold compile's share of ``activation`` (core.serving.fit COLD_COMPILE_PEAK)
    block_size: int = VLLM_BLOCK_SIZE  # tokens per block

    @property
    def block_bytes(self) -> float:
        return self.page_bytes * self.groups.size

    @property
    def pool_bytes(self) -> float:
        return self.blocks * self.block_bytes

    @property
    def concurrency(self) -> float:
        return self.blocks / self.per_request if self.per_request > 0 else 0.0


def vllm_pool(plan: Plan, gpu: GpuSpec, layout: RankLayout, fit: ServingFit) -> VllmPool:
    """The KV pool vLLM sizes at start-up, under the rules of the plan's release."""
    model, inf = plan.model, plan.inference
    era = era_of(inf.vllm_version)
    batched, seqs = vllm_scheduler(inf, gpu)
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    requested = math.ceil(total * utilization(inf))  # request_memory
    activation = vllm_profile_peak(model, layout, inf, profile_tokens(inf, batched), seqs, gpu.id)
    non_torch = vllm_non_torch_bytes(inf, serving_link(inf, gpu), fit)
    if counts_others_as_non_torch(inf.vllm_version):  # 0.8 - 0.9: total - free - torch (vllm_versions)
        non_torch += plan.hardware.held_by_others
    graphs = 0.0
    if graphs_before_kv(inf, model):
        graphs = vllm_graph_reserve(layout.layers, seqs, batched, gpu.id, inf.vllm_version, fit)
    # A cold compile inside the profiling forward raises its peak (core.serving.fit COLD_COMPILE_PEAK).
    cold = fit.vllm_cold_compile_bytes[COLD_COMPILE_PEAK] if cold_compile_planned(inf) else 0.0
    activation += cold
    budget = requested - layout.weights_bytes - activation - non_torch - graphs
    margin = 0.0
    if era.measured:
        # measure_kv_cache_bytes (0.34): min(requested - held, free - margin) - reserve, where
        # held = weights + non-torch + the captured graphs, reserve = the profiled peak plus the
        # graph estimate, and free is what start-up left (the CUDA context already taken).
        reserve = activation + graphs
        margin = max(VLLM_KV_MARGIN_FLOOR_BYTES, VLLM_KV_MARGIN_FRACTION * reserve)
        bound = min(float(requested), vllm_free_at_start(plan, gpu, fit) - margin)
        budget = bound - layout.weights_bytes - non_torch - graphs - reserve
    # Chunked-local layers get groups of their own only where the release does so by default (vllm_versions).
    grouped = era.kv_groups and (not model.chunked_attention or chunked_groups(inf.vllm_version))
    groups = vllm_kv_groups(model, layout.layers, grouped)
    block_size = default_block_size(model, gpu.id, inf.vllm_version, inf.kv_dtype in PER_TOKEN_HEAD_KV)
    page_bytes = block_size * layout.kv_token_layer_bytes
    smallest_block = block_size
    hybrid = model.hybrid
    if hybrid is not None:  # one page for attention blocks and recurrent states (core.serving.vllm_hybrid)
        pages = plan_pages(plan, gpu.id)
        size, attention, recurrent = hybrid_groups(hybrid.attention_layers, hybrid.recurrent_layers)
        held = state_blocks(plan, gpu.id)
        groups = KvGroups(size=size, full=attention, windowed=0, window=0, recurrent=recurrent, recurrent_blocks=held)
        block_size, page_bytes = pages.block_size, float(pages.page_bytes)
        # a recurrent group's block is max_model_len tokens, or the attention block in "align" mode
        smallest_block = block_size if align_mode(inf) else min(block_size, inf.context)
    # get_num_blocks: available // page // layers per group; every block serves one group.
    blocks = max(0, int(budget // page_bytes // groups.size)) if page_bytes > 0 else 0
    per_request = vllm_blocks_per_request(groups, inf.context, batched, block_size)
    kv_tokens = blocks // groups.count * smallest_block  # _report_kv_cache_config (up to 0.20)
    if at_least(inf.vllm_version, CAPACITY_TOKENS_FROM) and per_request > 0:
        kv_tokens = int(blocks / per_request * inf.context)  # concurrency x max_model_len (0.21 on)
    return VllmPool(
        requested=requested,
        activation=activation,
        non_torch=non_torch,
        graphs_reserved=graphs,
        blocks=blocks,
        groups=groups,
        page_bytes=page_bytes,
        kv_tokens=kv_tokens,
        per_request=per_request,
        batched=batched,
        seqs=seqs,
        margin=margin,
        block_size=block_size,
        cold_compile=cold,
    )


def vllm_starting_utilization(plan: Plan, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT) -> float | None:
    """The gpu_memory_utilization at which vLLM's start-up check (0.9 - 0.33,
    core.serving.vllm_versions.START_CHECK_FROM) passes, free ÷ total rounded down to 0.001, where the
    plan's own fails; None where it starts. The free memory its worker reads at init: the total vLLM
    reads from the driver less its CUDA context and what other processes hold."""
    inf = plan.inference
    if not start_check(inf.vllm_version):
        return None
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    free = vllm_free_at_start(plan, gpu, fit)
    if total <= 0 or free >= total * utilization(inf):
        return None
    return math.floor(free / total * 1000) / 1000


# The highest share a higher-share remedy offers (core.advice.serving_remedies), vLLM's gpu_memory_utilization and
# SGLang's mem_fraction_static alike: vLLM's own guide raises the default 0.9 to 0.95 and no further, "Provides more KV
# cache space but leaves less headroom for temporary allocations" (vllm-project/vllm docs/configuration/optimization.md,
# "Reducing preemption"); what the share leaves is all that other processes, the CUDA context and allocations outside
# the engine's accounting (the sampler, NCCL, a cold compile's kernels: h94cold) may use.
HIGHEST_SHARE: Final = 0.95


def vllm_highest_utilization(plan: Plan, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT) -> float:
    """The highest gpu_memory_utilization worth offering: :data:`HIGHEST_SHARE`, and no more than the free memory at
    start-up ÷ the total (:func:`vllm_free_at_start`: the CUDA context and what other processes hold taken), rounded
    down to 0.01 — above it 0.9 - 0.33 refuse to start (:func:`vllm_start_refusal`) and the other releases would ask
    for memory the card does not have."""
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    if total <= 0:
        return 0.0
    return min(HIGHEST_SHARE, math.floor(vllm_free_at_start(plan, gpu, fit) / total * 100) / 100)


def vllm_start_refusal(plan: Plan, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT) -> StartRefusal | None:
    """vLLM's start-up check (kind FREE_MEMORY) in its own words, with the utilisation that would start
    (:func:`vllm_starting_utilization`), or None where it starts."""
    would = vllm_starting_utilization(plan, gpu, fit)
    if would is None:
        return None
    inf = plan.inference
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    held = plan.hardware.held_by_others
    free = vllm_free_at_start(plan, gpu, fit)
    requested = total * utilization(inf)
    others = f" and the {held / GiB:.2f} GiB other processes hold" if held else ""
    words = (
        f'vLLM {inf.vllm_version.value} refuses to start: "Free memory on device ({free / GiB:.2f}/'
        f"{total / GiB:.2f} GiB) on startup is less than desired GPU memory utilization ({utilization(inf):g}, "
        f'{requested / GiB:.2f} GiB)" (free: the total less its CUDA context {CUDA_CONTEXT_BYTES / GiB:.2f} GiB'
        f"{others}). --gpu-memory-utilization {would:.3f} or less (free ÷ total) would start."
    )
    cause = "the free memory at start-up is less than the gpu_memory_utilization share it asks for"
    return StartRefusal(RefusalKind.FREE_MEMORY, words, cause)


def _refused(memory: EngineMemory, refusal: StartRefusal, share: float) -> EngineMemory:
    """An engine that does not start: no pool, no request, out of memory, and why in its words. What it
    asks for at start (``share``: vLLM's utilisation × total and its CUDA context) is the figure judged;
    the part beyond its weights, activations and runtime is one more overhead term, so the chart's parts
    add up. No pool is allocated, so the KV cache bucket holds nothing (it showed the blocks the requests
    would have taken)."""
    running = sum(b.bytes for b in memory.parts if b.key is BucketKey.KV_CACHE)  # the requests' blocks
    started = memory.total_bytes - running
    rest = max(0.0, share - started)
    term = Term("the rest of the share vLLM asks for at start-up", "utilisation × total + CUDA context", rest)
    parts = tuple(
        make_bucket(b.key, (*b.terms, term))
        if b.key is BucketKey.OVERHEAD
        else make_bucket(b.key, (), "no pool: vLLM does not start")
        if b.key is BucketKey.KV_CACHE
        else b
        for b in memory.parts
    )
    return replace(
        memory,
        total_bytes=started + rest,
        parts=parts,
        kv_cache_bytes=0.0,
        peak_bytes=memory.peak_bytes - memory.kv_cache_bytes,  # no pool was allocated
        kv_cache_tokens=0,
        max_concurrency=0.0,
        max_concurrent=0,
        max_context=0,
        verdict=Verdict.OOM,
        margin_bytes=-(started + rest),
        formula=refusal.words,
        refusal=refusal,
    )


def vllm_memory(plan: Plan, gpu: GpuSpec, layout: RankLayout, fit: ServingFit = DEFAULT_FIT) -> EngineMemory:
    refusal = vllm_start_refusal(plan, gpu, fit)
    memory = _vllm_started(plan, gpu, layout, fit)
    if refusal is None:
        return memory
    share = vllm_total_memory(gpu, fit, plan.hardware.platform) * utilization(plan.inference) + CUDA_CONTEXT_BYTES
    return _refused(memory, refusal, share)


def _vllm_started(plan: Plan, gpu: GpuSpec, layout: RankLayout, fit: ServingFit) -> EngineMemory:
    model, inf = plan.model, plan.inference
    pool = vllm_pool(plan, gpu, layout, fit)
    blocks, groups, batched = pool.blocks, pool.groups, pool.batched
    # The longest context for the plan's concurrency: the requests vLLM runs at once (up to
    # max_num_seqs) each with that many tokens, within the pool and the model's context window.
    at_once = max(1, min(inf.concurrent, pool.seqs))

    def all_fit(context: int) -> bool:
        return blocks >= at_once * vllm_blocks_per_request(groups, context, batched, pool.block_size)

    max_c = min(max(0, largest_fitting(all_fit, MAX_CONTEXT, pool.kv_tokens // at_once)), model.max_position_embeddings)
    max_b = min(int(pool.concurrency), pool.seqs)
    # What the plan holds at once: vLLM's non-KV memory plus the blocks of the requests that
    # run together (the rest wait in the queue and hold nothing); at least one request, so a
    # pool too small for it shows its shortfall (and a change that narrows it, its gain).
    resident = max(1.0, min(float(inf.concurrent), math.floor(pool.concurrency)))
    running_kv = resident * pool.per_request * pool.block_bytes
    fixed = layout.weights_bytes + pool.activation + pool.non_torch + pool.graphs_reserved
    capacity = card_left_bytes(gpu.memory_bytes, plan.hardware.held_by_others)
    verdict = pooled_verdict(pool.concurrency, fixed + running_kv, capacity, plan.hardware.headroom)
    overhead_terms = [Term("non-torch memory", "NCCL, kernels' modules", pool.non_torch)]
    if pool.graphs_reserved:
        overhead_terms.append(Term("CUDA graphs (estimated)", "set aside before the KV cache", pool.graphs_reserved))
    parts = (
        make_bucket(BucketKey.WEIGHTS, [weights_term(layout)]),
        make_bucket(
            BucketKey.KV_CACHE,
            [
                Term(
                    "blocks of the requests running together", f"{resident:g} × {pool.per_request:,} blocks", running_kv
                )
            ],
        ),
        make_bucket(BucketKey.ACTIVATIONS, _vllm_activation_terms(pool)),
        make_bucket(BucketKey.OVERHEAD, overhead_terms),
    )
    return EngineMemory(
        weights_bytes=layout.weights_bytes,
        kv_cache_bytes=pool.pool_bytes,
        activation_bytes=pool.activation,
        non_torch_bytes=pool.non_torch,
        overhead_bytes=SERVING_OVERHEAD_BYTES,
        peak_bytes=layout.weights_bytes + pool.activation + pool.pool_bytes,
        total_bytes=fixed + running_kv,  # what the requests running together hold (vLLM takes card × utilisation)
        footprint_bytes=_vllm_footprint(layout, pool, graphs_captured(inf)),
        budget_bytes=capacity,  # the card less what others hold: gpu_memory_utilization is vLLM's own headroom
        kv_cache_tokens=pool.kv_tokens,
        max_concurrency=pool.concurrency,
        max_concurrent=max_b,
        max_context=max_c,
        verdict=verdict,
        margin_bytes=(pool.concurrency - inf.concurrent) * pool.per_request * pool.block_bytes,
        max_num_seqs=pool.seqs,
        max_num_batched_tokens=batched,
        formula=_vllm_formula(plan, gpu, layout, pool, fit),
        cuda_graph_bytes=(pool.graphs_reserved or VLLM_CUDA_GRAPH_BYTES) if graphs_captured(inf) else 0.0,
        parts=parts,
        refusal=vllm_pool_refusal(plan, gpu, layout, pool, fit),
    )


def _vllm_activation_terms(pool: VllmPool) -> list[Term]:
    """The profiled peak, and on a cold plan the cold compile's part of it apart."""
    if not pool.cold_compile:
        return [Term("profiled activation peak", "profile run", pool.activation)]
    return [
        Term("profiled activation peak", "profile run", pool.activation - pool.cold_compile),
        Term("cold torch.compile", "compiled inside the profile run (compile cache cold)", pool.cold_compile),
    ]


def vllm_kv_refusal(plan: Plan, gpu: GpuSpec, pool: VllmPool, fit: ServingFit = DEFAULT_FIT) -> StartRefusal | None:
    """vLLM's refusal to start where its KV cache holds blocks but fewer than one request of max_model_len needs
    (``pool.concurrency`` below 1; kind KV_POOL_SHORT), in its words with this plan's figures, and what would start
    it; None otherwise
    (no block at all is vLLM's "No available memory for the cache blocks": :func:`vllm_no_blocks_refusal`).
    V1 (0.8 on): ``check_enough_kv_cache_memory`` (vllm-project/vllm@001cabc1 vllm/v1/core/kv_cache_utils.py
    ``_check_enough_kv_cache_memory``: needed = max_memory_usage_bytes at max_model_len, raised when it is larger than
    the available memory, with ``estimate_max_model_len``'s binary search); V0 (0.6 - 0.7): vllm/worker/worker.py
    ``raise_if_cache_size_invalid`` (max_model_len > block_size × num_gpu_blocks). h88fix: the cold-start sentence
    read "about 0 of the 32 requests fit" where vLLM raises one of these. A higher --gpu-memory-utilization is named
    where its pool would hold the request within :func:`vllm_highest_utilization`, the most the Diagnosis offers."""
    if pool.blocks <= 0 or pool.concurrency >= 1 or pool.per_request <= 0:
        return None
    inf = plan.inference
    longest = largest_fitting(
        lambda c: vllm_blocks_per_request(pool.groups, c, pool.batched, pool.block_size) <= pool.blocks,
        inf.context,
        pool.blocks * pool.block_size,
    )
    if era_of(inf.vllm_version).v1:
        needed = pool.per_request * pool.block_bytes
        estimated = f"Based on the available memory, the estimated maximum model length is {longest}. "
        estimated = estimated if longest else ""
        words = (
            f"To serve at least one request with the models's max seq len ({inf.context}), ({needed / GiB:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache memory ({pool.pool_bytes / GiB:.2f} GiB). "
            f"{estimated}Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
            "engine."
        )
    else:
        words = (
            f"The model's max seq len ({inf.context}) is larger than the maximum number of tokens that can be stored "
            f"in KV cache ({pool.blocks * pool.block_size}). Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
    shorter = f"--max-model-len {longest:,} or less, " if longest else ""
    higher = _higher_utilization_words(plan, gpu, pool, fit)
    said = (
        f'vLLM {inf.vllm_version.value} would not start: "{words}" What starts it: {shorter}{higher}an fp8 KV cache '
        "(--kv-cache-dtype fp8), or tensor parallel over more GPUs."
    )
    cause = f"its KV cache pool, {pool.kv_tokens:,} tokens, holds less than one request of {inf.context:,}"
    return StartRefusal(RefusalKind.KV_POOL_SHORT, said, cause)


def vllm_share_for_one_request(plan: Plan, gpu: GpuSpec, pool: VllmPool, held: float, fit: ServingFit) -> float | None:
    """The gpu_memory_utilization whose KV budget holds one request of the plan's context: what vLLM holds besides
    the pool (``held``) and the request's blocks, ÷ the total, rounded up to 0.01; None past
    :func:`vllm_highest_utilization` (the Diagnosis then offers no higher share either)."""
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    if total <= 0:
        return None
    needed = math.ceil((held + pool.per_request * pool.block_bytes) / total * 100 - 1e-6) / 100
    return needed if needed <= vllm_highest_utilization(plan, gpu, fit) else None


def _higher_utilization_words(plan: Plan, gpu: GpuSpec, pool: VllmPool, fit: ServingFit) -> str:
    """:func:`vllm_share_for_one_request` in words for a pool short of one request; what vLLM holds besides the pool
    is what it requested less the pool (a remainder under one block aside)."""
    needed = vllm_share_for_one_request(plan, gpu, pool, pool.requested - pool.pool_bytes, fit)
    if needed is None:
        return ""
    highest = vllm_highest_utilization(plan, gpu, fit)
    more = f" or more (up to {highest:g})" if needed < highest else ""
    return f"--gpu-memory-utilization {needed:.2f}{more}, "


def vllm_pool_refusal(
    plan: Plan, gpu: GpuSpec, layout: RankLayout, pool: VllmPool, fit: ServingFit
) -> StartRefusal | None:
    """vLLM's refusal of its KV pool at start-up, once the model is loaded and profiled: no block at all
    (:func:`vllm_no_blocks_refusal`), else fewer blocks than one request (:func:`vllm_kv_refusal`); None where it
    starts."""
    return vllm_no_blocks_refusal(plan, gpu, layout, pool, fit) or vllm_kv_refusal(plan, gpu, pool, fit)


# vLLM's words where the KV budget leaves no block, 0.6 - 0.33: V0's ``raise_if_cache_size_invalid``
# (``num_gpu_blocks <= 0``; vllm 0.6.6.post1 and 0.8.5 wheels, vllm/worker/worker.py) and V1's
# ``_check_enough_kv_cache_memory`` (``available_memory <= 0``; vllm 0.8.5 wheel vllm/v1/core/kv_cache_utils.py line
# 526, 0.19.0 wheel line 625, 0.33.0 wheel vllm/v1/core/kv_cache_planning.py line 56) all open with these words. 0.6 -
# 0.12 end the sentence there (vllm 0.12.0 wheel, commit 4fd9d6a85, kv_cache_utils.py line 687); 0.13 - 0.21 add
# :data:`VLLM_NO_BLOCKS_SEE` (0.13.0, 72506c983, line 688; 0.14.0, b17039bcc, line 617; 0.16.0, 89a77b108, line 617;
# 0.20.0, b8160878f, line 697; 0.21.0, ad7125a43, line 697); from 0.22 the sentence goes on
# :data:`VLLM_NO_BLOCKS_CPU` before it (0.22.0, 0b3ba88f1, line 699; 0.23.0, 0fc695fc6, line 721; 0.26.0, ffd46bfab,
# line 759; 0.32.0, 5df63a720, line 1011; 0.33.0, 4ba787ec9, kv_cache_planning.py line 58). h97rem read 0.12 - 0.33
# where h95ui had ended the quote in an ellipsis from 0.20.
VLLM_NO_BLOCKS: Final = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine"
)
VLLM_NO_BLOCKS_CPU: Final = " (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
VLLM_NO_BLOCKS_SEE: Final = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _no_blocks_words(inf: Inference, era_measured: bool) -> str:
    """The message vLLM raises with, by release. 0.34 (vllm 0.34.0 wheel, vllm/v1/core/kv_cache_planning.py
    ``_check_enough_kv_cache_memory`` line 106 with ``_more_kv_cache_memory_hint``, the extensible KV cache) gives
    its own hint after the first sentence, by the utilisation it resolved (unset: 1.0)."""
    if not era_measured:
        line = inf.vllm_version
        cpu = VLLM_NO_BLOCKS_CPU if at_least(line, VllmVersion.V0_22) else ""
        see = VLLM_NO_BLOCKS_SEE if at_least(line, VllmVersion.V0_13) else ""
        return f"{VLLM_NO_BLOCKS}{cpu}.{see}"
    first = "No available memory for the cache blocks."
    share = utilization(inf)
    if share < 1.0:
        return (
            f"{first} The KV cache gets what is left after the model and its activations within "
            f"`gpu_memory_utilization`={share:g}; increase it (with the extensible KV cache it defaults to 1.0) or "
            "decrease `max_model_len` or `max_num_seqs`."
        )
    return (
        f"{first} The extensible KV cache already takes all device memory left after the model and its activations; "
        "decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more memory."
    )


def vllm_no_blocks_refusal(
    plan: Plan, gpu: GpuSpec, layout: RankLayout, pool: VllmPool, fit: ServingFit
) -> StartRefusal | None:
    """vLLM's refusal where the weights, the profile run's activation peak and the memory outside torch leave its KV
    budget no block (kind NO_CACHE_BLOCKS), in its words with this plan's figures; None where the pool holds a block,
    and where the weights and the profile run do not fit the free memory at all (CUDA runs out while vLLM loads or
    profiles, before this check: the verdict's own out of memory). Every release raises it at start-up (the words'
    sources above); V1 checks the budget in bytes, V0 the blocks, so a budget under one block (a few MiB) is said
    here, where V1 says its KV-pool-short message instead."""
    if pool.blocks > 0 or pool.page_bytes <= 0 or layout.weights_bytes <= 0:  # no page: no KV cache to check (V0
        return None  # skips an attention-free model, V1 an empty kv_cache_spec: the wheels' lines above)
    inf = plan.inference
    loaded = layout.weights_bytes + pool.activation + pool.non_torch
    if loaded > vllm_free_at_start(plan, gpu, fit):
        return None
    total = vllm_total_memory(gpu, fit, plan.hardware.platform)
    held = loaded + pool.graphs_reserved
    needed = vllm_share_for_one_request(plan, gpu, pool, held, fit)
    highest = vllm_highest_utilization(plan, gpu, fit)
    higher = (
        f"a --gpu-memory-utilization above {held / total:.3f} ({needed:.2f}"
        f"{f' or more holds a request; up to {highest:g}' if needed < highest else ' holds a request'}), "
        if needed is not None
        else ""
    )
    words = (
        f'vLLM {inf.vllm_version.value} would not start: "{_no_blocks_words(inf, era_of(inf.vllm_version).measured)}"'
        f" Its weights {layout.weights_bytes / GiB:.2f} GiB, profile peak {pool.activation / GiB:.2f} GiB and "
        f"memory outside torch {(held - layout.weights_bytes - pool.activation) / GiB:.2f} GiB take all of "
        f"{utilization(inf):g} × {total / GiB:.2f} GiB. What starts it: {higher}quantised weights, or tensor parallel "
        "over more GPUs."
    )
    cause = "its weights and working memory leave no memory for the KV cache's blocks"
    return StartRefusal(RefusalKind.NO_CACHE_BLOCKS, words, cause)


def _vllm_footprint(layout: RankLayout, pool: VllmPool, captured: bool = True) -> float:
    """What the process holds on the card: up to 0.33 the requested share (card x utilisation),
    the CUDA context and the graphs captured after the pool where they were not set aside (none
    under --enforce-eager: ``captured`` False);
    0.34's measured pool: what it holds (weights, non-torch, graphs, the pool, the activation
    peak when it runs) and the context, never the whole requested share."""
    if pool.margin:
        held = layout.weights_bytes + pool.non_torch + pool.graphs_reserved + pool.pool_bytes + pool.activation
        return min(float(pool.requested), held) + SERVING_OVERHEAD_BYTES
    after = VLLM_CUDA_GRAPH_BYTES if captured and not pool.graphs_reserved else 0.0
    return pool.requested + SERVING_OVERHEAD_BYTES + after


def _vllm_formula(plan: Plan, gpu: GpuSpec, layout: RankLayout, pool: VllmPool, fit: ServingFit) -> str:
    inf = plan.inference
    era = era_of(inf.vllm_version)
    graphs = f" − CUDA graphs {pool.graphs_reserved / GiB:.2f}" if pool.graphs_reserved else ""
    after = (
        ""
        if pool.graphs_reserved
        else (f"; CUDA graphs (captured afterwards, outside the pool) about {VLLM_CUDA_GRAPH_BYTES / GiB:.2f} GiB")
    )
    if not graphs_captured(inf):
        after = "; --enforce-eager: no CUDA graphs captured or set aside" + (", no torch.compile" if era.v1 else "")
    budget = pool.requested - layout.weights_bytes - pool.activation - pool.non_torch - pool.graphs_reserved
    share = f"{vllm_total_memory(gpu, fit, plan.hardware.platform) / GiB:.2f} GiB × {utilization(inf):g}"
    held = plan.hardware.held_by_others
    counts_held = held and counts_others_as_non_torch(inf.vllm_version)
    counted = f" (with {held / GiB:.2f} GiB other processes hold)" if counts_held else ""
    if pool.margin:  # 0.34: the free memory after start-up bounds it, less the margin and the reserve
        free = vllm_total_memory(gpu, fit, plan.hardware.platform) - CUDA_CONTEXT_BYTES - held - pool.margin
        share = f"min({share}, free after start-up less margin {pool.margin / GiB:.2f} = {free / GiB:.2f} GiB)"
        budget = min(float(pool.requested), free) - layout.weights_bytes - pool.non_torch - 2 * pool.graphs_reserved
        budget -= pool.activation
        graphs = (
            f" − CUDA graphs {pool.graphs_reserved / GiB:.2f} held and {pool.graphs_reserved / GiB:.2f} in the reserve"
            if pool.graphs_reserved
            else ""
        )
    hybrid = ""
    if plan.model.hybrid is not None:  # core.serving.vllm_hybrid: the common page of attention and state
        pages = plan_pages(plan, gpu.id)
        held = pool.groups.recurrent_blocks
        if align_mode(inf):
            switch = "on (--enable-prefix-caching, " if inf.prefix_caching is PrefixCaching.ON else "on by default ("
            state = f"prefix caching {switch}mamba_cache_mode align): {held} state blocks a request"
        elif inf.prefix_caching is PrefixCaching.OFF:
            state = "prefix caching off (--no-enable-prefix-caching): one state block a request"
        else:
            state = "one state block a request"
        hybrid = (
            f"; hybrid: attention block size {pages.block_size:,} tokens, mamba page padded by "
            f"{pages.padding_pct:.2f}%, {pool.groups.full} attention and {pool.groups.recurrent} recurrent-state "
            f"groups, {state}"
        )
    return (
        f"vLLM {inf.vllm_version.value} ({era.name}), in GiB as vLLM logs them: KV pool = {share}"
        f" − weights {layout.weights_bytes / GiB:.2f} − activation peak "
        f"{pool.activation / GiB:.2f}{_cold_words(pool)} − non-torch {pool.non_torch / GiB:.2f}{counted}{graphs} = "
        f"{max(budget, 0) / GiB:.2f} GiB; "
        f"{pool.blocks:,} blocks of {pool.groups.size} layers × {pool.block_size} = GPU KV cache size "
        f"{pool.kv_tokens:,} tokens; "
        f"maximum concurrency for {inf.context:,} tokens per request: {pool.concurrency:.2f}x{hybrid}{after}"
    )


def _cold_words(pool: VllmPool) -> str:
    """The cold compile's share of the profiled peak, for the formula (a cold plan's compile cache)."""
    return f" (with a cold torch.compile's {pool.cold_compile / GiB:.2f})" if pool.cold_compile else ""


def _sglang_fraction_words(inf: Inference, gpu: GpuSpec, launch: Launch = TEXT_LAUNCH) -> str:
    """Where the plan's mem_fraction_static came from, for the formula: given (nothing said), or the release's
    default, with or without its reserves for CUDA graphs under --disable-cuda-graph
    (sglang_versions.graphs_reserved), and what of the model and card changed it (sglang_versions.default_notes:
    prefill graphs left out, the llama-2 cap, the multimodal reduction)."""
    if inf.mem_fraction_static > 0:
        factor = runner_factor(inf.sglang_version, launch)
        if factor == 1.0:
            return ""
        return f" ({inf.mem_fraction_static:g} given × {factor:g} for {multimodal_words(inf, launch)})"
    notes = "".join(f"; {note}" for note in default_notes(inf, gpu, launch))
    if inf.cuda_graphs:
        return f" (SGLang {inf.sglang_version.value}'s default{notes})"
    if not reserves_for_graphs(inf.sglang_version):
        return f" (SGLang {inf.sglang_version.value}'s default, which --disable-cuda-graph does not change{notes})"
    decode, prefill = graphs_reserved(inf.sglang_version, inf.cuda_graphs)
    if decode and prefill:
        reserve = ": its reserve for graphs kept"
    elif decode:
        reserve = ": its reserve for decode graphs kept, none for prefill graphs"
    else:
        reserve = ": no reserve for graphs"
    return f" (SGLang {inf.sglang_version.value}'s default with --disable-cuda-graph{reserve}{notes})"


def sglang_fraction(inf: Inference, gpu: GpuSpec, launch: Launch = TEXT_LAUNCH) -> float:
    """mem_fraction_static as given, or the plan's SGLang release's default for the card (``launch``: the model
    and card the default reads, sglang_versions.launch_of; :func:`sglang_plan_fraction` builds it)."""
    if inf.mem_fraction_static > 0:  # up to 0.4.8 the ModelRunner reduces a given fraction too
        return inf.mem_fraction_static * runner_factor(inf.sglang_version, launch)
    return default_fraction(inf, gpu, launch)


def sglang_plan_fraction(plan: Plan, gpu: GpuSpec) -> float:
    """The plan's mem_fraction_static on ``gpu``: as given, or its release's default for its model and the card."""
    return sglang_fraction(plan.inference, gpu, launch_of(plan, gpu))


def sglang_flag_fraction(plan: Plan, gpu: GpuSpec) -> float:
    """What ``--mem-fraction-static`` says so the server ends at :func:`sglang_plan_fraction`: the plan's own, or the
    default it judged, before the reduction 0.4.0 - 0.4.8's ModelRunner applies again to any fraction."""
    inf = plan.inference
    if inf.mem_fraction_static > 0:
        return inf.mem_fraction_static
    launch = launch_of(plan, gpu)
    if runner_factor(inf.sglang_version, launch) != 1.0:
        return release_default(inf, gpu, launch)
    return default_fraction(inf, gpu, launch)


def sglang_rope_cache_bytes(model: ModelSpec) -> float:
    """SGLang's float32 cos/sin table (SGLANG_ROPE_CACHE_BYTES): positions × head width, none
    for a model without rotary embeddings (ALiBi, learned positions)."""
    return float(rope_bytes(model))


def sglang_free_at_start(plan: Plan, gpu: GpuSpec, fit: ServingFit = DEFAULT_FIT) -> float:
    """The free memory SGLang reads after its distributed start on a card nothing else holds: the total
    vLLM reads from the driver less the CUDA context and, with tensor parallelism, NCCL's buffers
    (ServingFit.tp_comm_bytes). Its log prints it as "Load weight begin. avail mem=X GB" (GiB)."""
    inf = plan.inference
    comm = fit.tp_comm_bytes[link_class(serving_link(inf, gpu))] if inf.tensor_parallel > 1 else 0.0
    return max(0.0, vllm_total_memory(gpu, fit, plan.hardware.platform) - SERVING_OVERHEAD_BYTES - comm)


def sglang_memory(plan: Plan, gpu: GpuSpec, layout: RankLayout, fit: ServingFit = DEFAULT_FIT) -> EngineMemory:
    """SGLang's token pool: what the static fraction leaves after the weights.

    ``profile_max_num_token`` (python/sglang/srt/model_executor/model_runner.py): rest =
    free memory after the weights − total × (1 − mem_fraction_static), where "total" is the
    free memory SGLang measured after the distributed start (the CUDA context and, with tensor
    parallelism, NCCL's buffers already taken), not the card. So pool = (card − driver −
    context − communication buffers) × fraction − weights. The buffers are taken as
    ServingFit.tp_comm_bytes, shared with vLLM, though SGLang's pool depends on what its
    distributed start takes (logged as "Init torch distributed ends. mem usage") and vLLM's on what
    its profile's forward adds after that; SGLang's Qwen3-235B log on four H100s (vLLM issue
    #21348) is 1.8 GiB short of a card-size total (docs/SERVING.md, "Is the gap NVLS? Read from
    source: no").

    Memory other processes hold (``hardware.held_by_others``) is missing from both free-memory
    readings, the total at start-up and the free memory after the weights, so the pool shrinks by
    mem_fraction_static × held: (total − held) × fraction − weights (sgl-project/sglang@001ccef0
    ``model_runner_kv_cache_mixin.py`` ``profile_max_num_token``, its ``total_gpu_memory`` the
    ``min_per_gpu_memory`` that ``init_torch_distributed`` reads with ``get_available_gpu_memory``)."""
    inf = plan.inference
    held = plan.hardware.held_by_others
    total = max(0.0, sglang_free_at_start(plan, gpu, fit) - held)
    launch = launch_of(plan, gpu)
    fraction = sglang_fraction(inf, gpu, launch)
    given = _sglang_fraction_words(inf, gpu, launch)
    # The (1 - fraction) of that total is what SGLang keeps for activations and CUDA graphs.
    rope = sglang_rope_cache_bytes(plan.model)
    mm_reserve = mm_reserve_mib(inf.sglang_version, launch, card_mib(gpu)) * MiB  # a multimodal model's, from 0.5.18
    pool_budget = total * fraction - layout.weights_bytes - rope - mm_reserve
    cell = layout.kv_token_layer_bytes * layout.layers
    tokens = max(0, int(pool_budget // cell)) if cell > 0 else 0
    per_request = cached_positions(plan.model, inf.context) / plan.model.num_layers
    concurrency = tokens / per_request if per_request > 0 else 0.0
    resident = max(1.0, min(float(inf.concurrent), math.floor(concurrency)))
    running_kv = resident * per_request * cell
    need = layout.weights_bytes + running_kv
    capacity = card_left_bytes(gpu.memory_bytes, plan.hardware.held_by_others)
    verdict = pooled_verdict(concurrency, need, capacity, plan.hardware.headroom)
    reserved = total * (1 - fraction)
    parts = (
        make_bucket(BucketKey.WEIGHTS, [weights_term(layout)]),
        make_bucket(
            BucketKey.KV_CACHE,
            [Term("tokens of the requests running together", f"{resident:g} × {per_request:,.0f} tokens", running_kv)],
        ),
    )
    others = f", {held / GiB:.2f} GiB other processes hold" if held else ""
    taken = f"− weights {layout.weights_bytes / GiB:.2f} − rotary cos/sin table (float32) {rope / GiB:.2f}" + (
        f" − multimodal reserve (embedding cache / feature pool) {mm_reserve / GiB:.2f}" if mm_reserve else ""
    )
    formula = (
        f"In GiB: token pool = {total / GiB:.2f} GiB (free after start-up: CUDA context and NCCL taken{others}) × "
        f"mem_fraction_static {fraction:g}{given} {taken} = {max(pool_budget, 0) / GiB:.2f} GiB ÷ {cell:,.0f} B per "
        f"token = {tokens:,} tokens; {reserved / GiB:.2f} GiB left for activations and CUDA graphs"
        + ("" if inf.cuda_graphs else " (none captured: --disable-cuda-graph)")
    )
    memory = EngineMemory(
        weights_bytes=layout.weights_bytes,
        kv_cache_bytes=tokens * cell,
        activation_bytes=reserved,
        non_torch_bytes=0.0,
        overhead_bytes=SERVING_OVERHEAD_BYTES,
        peak_bytes=layout.weights_bytes + tokens * cell,
        total_bytes=need,  # weights + the running requests' tokens; SGLang itself takes the static fraction
        footprint_bytes=total * fraction + reserved,
        budget_bytes=capacity,
        kv_cache_tokens=tokens,
        max_concurrency=concurrency,
        max_concurrent=int(concurrency),
        # Tokens each of the plan's requests may hold when they share the pool, within the
        # model's context window (cached_positions: a sliding-window layer holds less).
        max_context=_sglang_context(plan, tokens),
        verdict=verdict,
        margin_bytes=(concurrency - inf.concurrent) * per_request * cell,
        max_num_seqs=inf.concurrent,
        max_num_batched_tokens=inf.max_num_batched_tokens,
        formula=formula,
        parts=parts,
    )
    return replace(memory, refusal=_sglang_refusal(fraction, held, tokens, cell, layout.weights_bytes, total))


def _sglang_refusal(
    fraction: float, held: float, tokens: int, cell: float, weights: float, free: float
) -> StartRefusal | None:
    """SGLang's refusal where its pool gets no token: ``profile_max_num_token`` then raises "Not enough memory.
    Please try to increase --mem-fraction-static." (sgl-project/sglang@001ccef0 ``model_runner_kv_cache_mixin.py``;
    sglang 0.5.23 wheel, sglang/srt/model_executor/pool_configurator.py ``__post_init__``: ``max_total_num_tokens <=
    0``; kind EMPTY_POOL), whether the memory other processes hold or the weights themselves empty it; None where the
    pool holds tokens, and where the weights do not fit the ``free`` memory at all (CUDA runs out while SGLang loads
    them, before the pool is sized: the verdict's own out of memory). h95ui: a pool the weights alone emptied had no
    refusal, though SGLang raises the same there."""
    if tokens > 0 or cell <= 0 or weights <= 0 or weights > free:
        return None
    said = 'SGLang refuses to start: "Not enough memory. Please try to increase --mem-fraction-static." '
    if held > 0:
        words = (
            f"{said}The {held / GiB:.2f} GiB other processes hold take mem_fraction_static {fraction:g} × that = "
            f"{fraction * held / GiB:.2f} GiB from its token pool."
        )
        cause = "the memory other processes hold leaves its token pool empty"
        return StartRefusal(RefusalKind.EMPTY_POOL, words, cause)
    words = (
        f"{said}Its weights {weights / GiB:.2f} GiB and rotary table take all of mem_fraction_static {fraction:g} × "
        f"{free / GiB:.2f} GiB free = {fraction * free / GiB:.2f} GiB, the share its token pool is cut from."
    )
    cause = "its weights take all of mem_fraction_static, leaving no token pool"
    return StartRefusal(RefusalKind.EMPTY_POOL, words, cause)


def _sglang_context(plan: Plan, tokens: int) -> int:
    model, n = plan.model, max(1, plan.inference.concurrent)

    def all_fit(context: int) -> bool:
        return n * cached_positions(model, context) / model.num_layers <= tokens

    return min(max(0, largest_fitting(all_fit, MAX_CONTEXT, tokens // n)), model.max_position_embeddings)


def cold_compile_warning(plan: Plan, served: InferenceEstimate, fit: ServingFit = DEFAULT_FIT) -> str:
    """The sentence for a vLLM plan planned warm (core.inputs.CompileCache) whose release compiles the model inside
    the memory profile that sizes the KV cache (core.serving.vllm_versions.compiles_in_profile), when a cold start
    would serve fewer of the plan's requests at once than ``served`` (the warm start) does; else "" (and on a cold
    plan, whose estimate holds the cold compile already). The tokens are the fitted cold-compile peak
    (core.serving.fit COLD_COMPILE_PEAK, what a cold plan's pool loses) at this plan's KV bytes per token."""
    inf = plan.inference
    if inf.engine is not Engine.VLLM or runs_mps(plan.hardware.gpu) or not compiles_in_profile(inf.vllm_version):
        return ""
    if not graphs_captured(inf) or cold_compile_planned(inf):  # --enforce-eager compiles nothing; cold: estimated
        return ""
    layout = rank_layout(plan)
    cold_bytes = fit.vllm_cold_compile_bytes[COLD_COMPILE_PEAK]
    tokens = cold_bytes / (layout.kv_token_layer_bytes * layout.layers)
    pool = served.kv_cache_tokens
    if pool <= 0 or not served.max_concurrent:
        return ""  # no request fits even warm: the verdict says so
    # whole requests of the cold pool, no more than the warm plan's own limit (max_num_seqs)
    at_once = min(served.max_concurrent, int(served.max_concurrency * max(0.0, pool - tokens) / pool))
    if at_once >= inf.concurrent:
        return ""  # the plan's requests still fit at once after a cold start
    cold = (
        f"vLLM {inf.vllm_version.value} compiles the model (torch.compile) inside the forward that sizes the KV "
        "cache, and this plan is planned warm (a restart that finds ~/.cache/vllm): a first start with a cold compile "
        f"cache (a new model or settings, or no ~/.cache/vllm kept) can leave about {tokens:,.0f} fewer KV tokens "
        f"({cold_bytes / GiB:.2f} GiB, the median of five published cold starts; larger models have lost several "
        "GiB; --compile-cache cold plans it): "
    )
    if served.max_concurrency * max(0.0, pool - tokens) / pool < 1:  # h88fix: not "about 0 of the 32 requests"
        return cold + (
            f"then its KV cache holds less than one request of max_model_len {inf.context:,} tokens and vLLM would "
            'not start ("To serve at least one request with the models\'s max seq len ... Try increasing '
            "`gpu_memory_utilization` or decreasing `max_model_len`\", vllm/v1/core/kv_cache_utils.py "
            "check_enough_kv_cache_memory). A warm compile cache starts; a shorter --max-model-len or a higher "
            "--gpu-memory-utilization starts cold too."
        )
    return cold + (
        f"then about {at_once:,} of the {inf.concurrent:,} requests fit at once. A warm compile cache does not."
    )
