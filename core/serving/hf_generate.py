"""Hugging Face ``generate`` at batch 1: what the host's Python does per layer, read from transformers' source.

The host time of a dense decoder layer is a fitted constant (core.serving.fit.HF_HOST_LAYER: the
Qwen speed tables' dense BF16 rows, each table scored with the other's). Two code paths of
transformers run far more host work per layer than a dense layer does, and both are counted here
from the source, in units of that dense layer, so no new constant is fitted:

* **A mixture-of-experts block loops over every expert in Python.** transformers v4.51.3
  ``Qwen3MoeSparseMoeBlock.forward`` (src/transformers/models/qwen3_moe/modeling_qwen3_moe.py; the
  Mixtral and Qwen2-MoE blocks of the same release loop the same way, ``for expert_idx in
  range(self.num_experts)``) runs, for each of the ``num_experts`` experts whether a token routes
  to it or not: ``expert_mask[expert_idx]``, ``torch.where`` (a nonzero: the host waits for the
  device to learn how many rows), the gather ``hidden_states[None, top_x]``, ``reshape``, the
  expert's MLP (gate, act, up, mul, down), the gather of its routing weights, the product,
  ``.to`` and ``index_add_``: :data:`EXPERT_ITERATION_OPS` torch calls. A decode step's layer then
  issues ``DENSE_LAYER_OPS - DENSE_MLP_OPS + MOE_ROUTER_OPS + num_experts x EXPERT_ITERATION_OPS``
  calls where a dense layer issues :data:`DENSE_LAYER_OPS`, and its host time is the dense layer's
  in that ratio (:func:`host_layer_ratio`). Each call is taken to cost the host the same; an empty
  expert's calls launch no kernel (cuBLAS and the elementwise ops return on zero rows) and may cost
  it less. Later releases loop over the experts some token routes to only (``expert_hitted``, read in
  the 4.53.0 and 4.55.0 wheels): the plan has no transformers version, and the loop over every expert
  is the one the scored table ran, so newer releases are over-charged here.
* **The fine-grained FP8 linear synchronises the device after every product.** transformers v4.51.3
  ``FP8Linear.forward`` (src/transformers/integrations/finegrained_fp8.py) quantises the
  activations with the Triton kernel ``act_quant_kernel``, multiplies with the Triton kernel
  ``_w8a8_block_fp8_matmul`` and then calls ``torch.cuda.synchronize()``: the host waits for the
  device after every FP8 linear, so the device's work no longer hides behind the host's loop (the
  step is the sum of the two, not the longer) and each linear pays two Triton launches from
  Python, :data:`TRITON_LAUNCH_S` each. The synchronisation is still there in 4.53.0 and 4.55.0
  (``torch_accelerator_module.synchronize()``).
"""

from __future__ import annotations

from typing import Final

from core.dtypes import WeightFormat
from core.model import ModelSpec
from core.plan import Engine, Plan

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
    """Whether transformers runs the model's MLP as a Python loop over its experts."""
    return model.num_experts > 1


def host_layer_ratio(model: ModelSpec) -> float:
    """A decoder layer's host time per decode step, in dense layers (1 for a dense model)."""
    if not moe_looped(model):
        return 1.0
    ops = DENSE_LAYER_OPS - DENSE_MLP_OPS + MOE_ROUTER_OPS + model.num_experts * EXPERT_ITERATION_OPS
    return ops / DENSE_LAYER_OPS


def fp8_synchronised(plan: Plan) -> bool:
    """Whether the plan's linears are transformers' fine-grained FP8 ones, which synchronise the device."""
    inf = plan.inference
    return inf.engine is Engine.HF and inf.weight_dtype is WeightFormat.FP8


def fp8_linears_per_layer(model: ModelSpec) -> int:
    """FP8Linear modules one decode step runs per layer: attention's four and the MLP's three, every
    expert's three in an MoE block's loop (the router stays in 16 bits)."""
    experts = model.num_experts if moe_looped(model) else 1
    return ATTENTION_LINEARS + MLP_LINEARS * experts


def fp8_launch_seconds_per_layer(model: ModelSpec) -> float:
    """Host seconds per layer the FP8 linears' Triton launches add."""
    return fp8_linears_per_layer(model) * FP8_TRITON_KERNELS * TRITON_LAUNCH_S
