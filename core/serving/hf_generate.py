"""Hugging Face ``generate``: what the host's Python does per layer of a decode step, read from transformers' source.

The host time of a dense decoder layer is a fitted constant (core.serving.fit.HF_HOST_LAYER: the
Qwen speed tables' dense BF16 rows, each table scored with the other's). Two code paths of
transformers run far more host work per layer than a dense layer does, and both are counted here
from the source, in units of that dense layer, so no new constant is fitted:

* **A mixture-of-experts block loops over its experts in Python** (how, by release:
  :mod:`core.serving.transformers_versions`). transformers v4.51.3 ``Qwen3MoeSparseMoeBlock.forward``
  (src/transformers/models/qwen3_moe/modeling_qwen3_moe.py; the Mixtral and Qwen2-MoE blocks of the
  same release loop the same way, ``for expert_idx in range(self.num_experts)``) runs, for each of
  the ``num_experts`` experts whether a token routes to it or not: ``expert_mask[expert_idx]``,
  ``torch.where`` (a nonzero: the host waits for the device to learn how many rows), the gather
  ``hidden_states[None, top_x]``, ``reshape``, the expert's MLP (gate, act, up, mul, down), the
  gather of its routing weights, the product, ``.to`` and ``index_add_``:
  :data:`EXPERT_ITERATION_OPS` torch calls. A decode step's layer then issues ``DENSE_LAYER_OPS -
  DENSE_MLP_OPS + MOE_ROUTER_OPS + num_experts x EXPERT_ITERATION_OPS`` calls where a dense layer
  issues :data:`DENSE_LAYER_OPS`, and its host time is the dense layer's in that ratio
  (:func:`host_layer_ratio`). Each call is taken to cost the host the same; an empty expert's calls
  launch no kernel (cuBLAS and the elementwise ops return on zero rows) and may cost it less.
  From 4.53.0 (4.52 for Mixtral and Qwen2-MoE) the loop runs over the experts some token routes to
  only: :data:`HIT_SELECTION_OPS` more calls to find them, and :data:`HIT_EXPERT_EXTRA_OPS` more per
  expert where the loop walks a tensor. How many experts a step hits is a model, stated:
  each of the step's tokens routes to ``experts_per_token`` distinct experts, independently and
  uniformly, so ``E x (1 - (1 - k / E) ** n)`` of the ``E`` experts are hit at ``n`` tokens
  (:func:`experts_hit`): exactly ``k`` at batch 1. From 5.0 the experts are one module and its
  default ``grouped_mm`` forward issues a fixed :data:`GROUPED_EXPERTS_OPS` calls, no loop.
* **The fine-grained FP8 linear synchronises the device after every product.** transformers v4.51.3
  ``FP8Linear.forward`` (src/transformers/integrations/finegrained_fp8.py) quantises the
  activations with the Triton kernel ``act_quant_kernel``, multiplies with the Triton kernel
  ``_w8a8_block_fp8_matmul`` and then calls ``torch.cuda.synchronize()``: the host waits for the
  device after every FP8 linear, so the device's work no longer hides behind the host's loop (the
  step is the sum of the two, not the longer) and each linear pays two Triton launches from
  Python, :data:`TRITON_LAUNCH_S` each. The synchronisation is still there in 4.53.0 and 4.55.0
  (``torch_accelerator_module.synchronize()``).

A decode step's device work also depends on the release: it moves each layer's KV cache more than once
(:func:`decode_kv_passes`): ``DynamicCache.update``'s ``torch.cat`` copies it every step, and where the
release's attention path calls ``repeat_kv`` (eager; SDPA to 4.53; the FlashAttention-2 classes of the
Mistral-lineage families to 4.47, Qwen2-MoE's to 4.57) it is copied to every query head and read there.
"""

from __future__ import annotations

from typing import Final

from core.dtypes import WeightFormat
from core.model import ModelSpec
from core.plan import Attention, Engine, Plan, TransformersVersion
from core.serving.releases import at_least
from core.serving.transformers_versions import MoeLoop, era_of, moe_loop
from core.training.attention import sdpa_refused

# torch calls one decoder layer issues per decode step of one token (transformers v4.51.3,
# modeling_qwen3.py / modeling_qwen3_moe.py, attn_implementation "flash_attention_2", DynamicCache),
# counted from the source: input RMSNorm 8 (to float32, pow, mean, add, rsqrt, mul, to, weight mul);
# attention 25 (q_proj, view, q_norm's 8, transpose; the same for k; v_proj, view, transpose);
# rotary 16 (cos and sin unsqueeze; for q and k: x * cos, rotate_half's two slices, neg and cat,
# x * sin, add); DynamicCache.update 2 (torch.cat of k and v); flash_attention_forward 8 (three
# transposes, flash_attn_func's contiguity checks and kernel); reshape, contiguous, o_proj 3;
# residual add 1; post-attention RMSNorm 8; MLP 5 (gate, act, up, mul, down); residual add 1.
DENSE_LAYER_OPS: Final = 77
DENSE_MLP_OPS: Final = 5
# Qwen3MoeSparseMoeBlock.forward outside its loop: view, gate, softmax, topk, sum, in-place divide,
# to, zeros, one_hot, permute, reshape.
MOE_ROUTER_OPS: Final = 11
# One pass of its loop over the experts (see the module docstring).
EXPERT_ITERATION_OPS: Final = 13
# 4.52's Mixtral / Qwen2-MoE and 4.53+'s blocks find the experts hit: expert_mask.sum, the comparison
# (> or torch.greater), nonzero (the host waits for the device), then .tolist() (4.52) or the
# iteration over the tensor (Tensor.__iter__: unbind).
HIT_SELECTION_OPS: Final = 4
# 4.53-4.57's loop walks a tensor: self.experts[expert_idx] turns the one-element tensor into an int
# (ModuleList.__getitem__ -> operator.index -> Tensor.__index__, the host waits) and
# expert_mask[expert_idx] takes a .squeeze(0); 4.52's list of ints needs neither.
HIT_EXPERT_EXTRA_OPS: Final = 2
# transformers 5.25.0: Qwen3MoeSparseMoeBlock.forward's view and reshape and Qwen3MoeTopKRouter.forward
# (reshape, F.linear, softmax, topk, sum, in-place divide, .to).
GROUPED_ROUTER_OPS: Final = 9
# transformers 5.25.0 integrations/moe.py grouped_mm_experts_forward on CUDA (no bias, no expert
# parallelism): two reshapes, sort, the floor division, two gathers, .int, histc, cumsum; per product
# (gate_up, down) transpose, .to and grouped_mm; _default_apply_gate's chunk, act and mul; unsqueeze and
# the routing product, empty_like, arange, the inverse permutation's index_put and gather, view, sum, .to.
GROUPED_EXPERTS_OPS: Final = 27
# FP8Linear.forward's Triton kernels per linear: act_quant_kernel and _w8a8_block_fp8_matmul.
FP8_TRITON_KERNELS: Final = 2
# Host time of one Triton launch from Python (JITFunction.run on a compiled kernel): 18 us after
# triton-lang/triton PR #3648 ("Faster jit", merged 2024-04-13: "from 49us to 18us"), in every
# Triton from 3.0, so in the Triton 3.2 that PyTorch 2.6 (the Qwen3 table's) ships. Measured by that
# PR's author on their machine, not on a scored source.
TRITON_LAUNCH_S: Final = 18e-6
# Linear layers of a dense decoder layer (q, k, v, o, gate, up, down) and of an MoE layer's attention.
ATTENTION_LINEARS: Final = 4
MLP_LINEARS: Final = 3


def moe_looped(model: ModelSpec) -> bool:
    """Whether the model has an MoE block (its MLP is a router and experts)."""
    return model.num_experts > 1


def experts_hit(model: ModelSpec, tokens: int) -> float:
    """Experts of one layer some token of a step routes to, expected: each token picks
    ``experts_per_token`` distinct experts, independently and uniformly (a model; exactly top-k at one
    token)."""
    experts, k = model.num_experts, min(model.experts_per_token, model.num_experts)
    return experts * (1.0 - (1.0 - k / experts) ** max(tokens, 1))


def _layer_ops(model: ModelSpec, version: TransformersVersion) -> tuple[float, float]:
    """(torch calls a decoder layer issues per decode step outside the loop over experts, calls per
    expert the loop runs) under the release."""
    base = DENSE_LAYER_OPS - DENSE_MLP_OPS
    loop = moe_loop(version, model.family)
    if loop is MoeLoop.EVERY_EXPERT:
        return base + MOE_ROUTER_OPS + model.num_experts * EXPERT_ITERATION_OPS, 0.0
    if loop is MoeLoop.GROUPED_MM:
        return base + GROUPED_ROUTER_OPS + GROUPED_EXPERTS_OPS, 0.0
    extra = HIT_EXPERT_EXTRA_OPS if loop is MoeLoop.EXPERTS_HIT else 0
    return base + MOE_ROUTER_OPS + HIT_SELECTION_OPS, float(EXPERT_ITERATION_OPS + extra)


def host_ratio_parts(model: ModelSpec, version: TransformersVersion) -> tuple[float, float]:
    """(a layer's host time outside the loop over the experts hit, its host time per expert hit),
    in dense layers (1, 0 for a dense model)."""
    if not moe_looped(model):
        return 1.0, 0.0
    fixed, per_expert = _layer_ops(model, version)
    return fixed / DENSE_LAYER_OPS, per_expert / DENSE_LAYER_OPS


def host_layer_ratio(model: ModelSpec, version: TransformersVersion, tokens: int = 1) -> float:
    """A decoder layer's host time per decode step of ``tokens`` tokens, in dense layers:
    ``fixed + per_expert x experts_hit`` of :func:`host_ratio_parts` (1 for a dense model)."""
    fixed, per_expert = host_ratio_parts(model, version)
    return fixed + per_expert * experts_hit(model, tokens)


def fp8_synchronised(plan: Plan) -> bool:
    """Whether the plan's linears are transformers' fine-grained FP8 ones, which synchronise the device."""
    inf = plan.inference
    return (
        inf.engine is Engine.HF
        and inf.weight_dtype is WeightFormat.FP8
        and era_of(inf.transformers_version).fp8_synchronises
    )


def fp8_linears_parts(model: ModelSpec, version: TransformersVersion) -> tuple[int, int]:
    """(FP8Linear modules one decode step runs per layer outside the loop over the experts hit, FP8
    linears per expert hit): attention's four and the MLP's three; an MoE block's loop over every
    expert runs every expert's three, a loop over the experts hit three per expert hit (the router
    stays in 16 bits). From 5.0 the experts' FP8 products are counted as the loop over the experts hit
    runs them (FP8Experts' eager forward; its grouped dispatch not read)."""
    if not moe_looped(model):
        return ATTENTION_LINEARS + MLP_LINEARS, 0
    if moe_loop(version, model.family) is MoeLoop.EVERY_EXPERT:
        return ATTENTION_LINEARS + MLP_LINEARS * model.num_experts, 0
    return ATTENTION_LINEARS, MLP_LINEARS


def fp8_linears_per_layer(model: ModelSpec, version: TransformersVersion, tokens: int = 1) -> float:
    """FP8Linear modules one decode step of ``tokens`` tokens runs per layer."""
    fixed, per_expert = fp8_linears_parts(model, version)
    return fixed + per_expert * (experts_hit(model, tokens) if per_expert else 0.0)


# ---- the KV cache a decode step moves -----------------------------------------------------------
# transformers' DynamicCache.update appends a step's key and value with ``torch.cat([cache,
# new], dim=-2)`` (4.46.0 and 4.51.3 ``cache_utils.py`` ``DynamicCache.update``; 5.25.0
# ``DynamicLayer.update``): a new tensor each step, so every layer's whole cache is read and written
# once more per step, for K and for V: two passes over the layer's cached bytes.
CACHE_CAT_PASSES: Final = 2.0
# Model families whose own FlashAttention2 class calls repeat_kv before flash_attn_func in 4.45-4.47
# (read in 4.45.0, 4.46.0 and 4.47.1: ``Qwen2FlashAttention2.forward``, ``key_states =
# repeat_kv(key_states, self.num_key_value_groups)``; the same in Mistral's, Mixtral's, Phi-3's,
# PhiMoE's, Qwen2-MoE's and Starcoder2's; Llama's and Gemma's do not). From 4.48 these families run
# integrations/flash_attention.py, which passes the KV heads to flash-attn unrepeated; Qwen2-MoE keeps
# its own class, repeat_kv included, through 4.57 (read in 4.48.3, 4.49.0, 4.50.0, 4.51.3, 4.52.4,
# 4.53.0, 4.54.0, 4.55.0, 4.57.6; gone in 5.0.0).
FLASH_REPEATS_FAMILIES_TO_4_47: Final = frozenset(
    {"mistral", "mixtral", "phi3", "phimoe", "qwen2", "qwen2_moe", "starcoder2"}
)
FLASH_REPEATS_FAMILIES_TO_4_57: Final = frozenset({"qwen2_moe"})


def _flash_repeats_kv(version: TransformersVersion, family: str) -> bool:
    if at_least(version, TransformersVersion.V5_0):
        return False
    if at_least(version, TransformersVersion.V4_48):
        return family in FLASH_REPEATS_FAMILIES_TO_4_57
    return family in FLASH_REPEATS_FAMILIES_TO_4_47


def _sdpa_repeats_kv(version: TransformersVersion, family: str) -> bool:
    """integrations/sdpa_attention.py ``sdpa_attention_forward`` repeats K and V unconditionally up to
    4.53.0; from 4.54.0 only when ``use_gqa_in_sdpa`` is false (it is true on CUDA with torch >= 2.5 and
    no mask, a lone unpadded request's decode step: ``enable_gqa=True``); Qwen2-MoE's own SDPA class
    repeats through 4.57 (4.57.6 ``Qwen2MoeSdpaAttention.forward``)."""
    if at_least(version, TransformersVersion.V5_0):
        return False
    if at_least(version, TransformersVersion.V4_54):
        return family in FLASH_REPEATS_FAMILIES_TO_4_57
    return True


def hf_attention(plan: Plan) -> Attention:
    """The attention implementation transformers runs: the plan's, eager where the model refuses SDPA
    (core.training.attention.sdpa_refused); FlashAttention 1 and 3 are taken as FlashAttention-2 (transformers'
    flash_attention_3 runs the same _flash_attention_forward path, K and V as cached)."""
    if sdpa_refused(plan):
        return Attention.EAGER
    return Attention.FLASH if plan.attention in (Attention.FLASH1, Attention.FLASH3) else plan.attention


def repeats_kv(plan: Plan) -> bool:
    """Whether a decode step materialises the cached K and V at the query head count
    (``repeat_kv``: ``expand`` then ``reshape``, a copy) before attention reads them: eager attention
    always (``eager_attention_forward``), SDPA and FlashAttention-2 by release and family (above)."""
    model, version = plan.model, plan.inference.transformers_version
    if model.num_heads <= model.num_kv_heads:
        return False  # repeat_kv returns its input when n_rep == 1
    attention = hf_attention(plan)
    if attention is Attention.EAGER:
        return True
    if attention is Attention.SDPA:
        return _sdpa_repeats_kv(version, model.family)
    return _flash_repeats_kv(version, model.family)


def decode_kv_passes(plan: Plan) -> float:
    """Passes over each layer's cached K and V bytes one Hugging Face generate decode step makes: the
    cache's ``torch.cat`` (:data:`CACHE_CAT_PASSES`), then attention's read of it — once where the
    kernel takes the KV heads as they are, else ``repeat_kv`` reads it once and writes it ``r`` times
    (``r`` query heads per KV head) and attention reads the ``r`` copies: ``1 + 2r``. 1 for other
    engines (a paged cache read once)."""
    if plan.inference.engine is not Engine.HF:
        return 1.0
    model = plan.model
    read = 1.0
    if repeats_kv(plan):
        read = 1.0 + 2.0 * model.num_heads / model.num_kv_heads
    return CACHE_CAT_PASSES + read
