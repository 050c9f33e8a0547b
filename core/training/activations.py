"""The tensors autograd keeps for the backward pass: per block, outside the blocks, the loss.

Op by op, following what a Hugging Face causal-LM implementation (transformers 5) and PEFT
(0.21) run and what PyTorch's autograd saves for each op, in the dtypes the plan's
precision roles give (:mod:`core.roles`).

One concern, a little past 400 lines: attention, MLP / experts, norms, adapters and the
loss are each a short function, and splitting them would only move the shared _Ctx around.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from core.breakdown import LayerActs, Term
from core.dtypes import DTYPE_BYTES, Dtype, Quant
from core.errors import PlanError
from core.format import sci
from core.hybrid import RecurrentMixer
from core.inputs import explicit_mask, loss_16bit_matters, loss_code_runs, needs_mask
from core.memo import fills_fields, last_answer
from core.model import (
    GDN_IN_PROJ,
    HEAD_TARGET,
    MIXER_TARGETS,
    MLP_TARGETS,
    ModelSpec,
    normalise_ia3_feedforward,
    normalise_lora_targets,
)
from core.parallel.layout import expert_load, routed_rows
from core.params import (
    boft_blocks,
    lycoris_matrix_tensors,
    oft_blocks,
    oft_neumann_bmms,
    randlora_bases,
    shira_tensor_sizes,
)
from core.plan import (
    VBLORA_TOPK,
    VBLORA_VECTOR_LENGTH,
    Attention,
    CheckpointPolicy,
    MegatronCeFusion,
    Method,
    MoeLayer,
    Optimizer,
    Plan,
    RoadVariant,
    Stack,
    TransformersLoss,
)
from core.roles import adapter_dtype, compute_dtype, dtypes_for, model_dtype
from core.training import gdn
from core.training.attention import (
    Kernel,
    math_kernel_bytes,
    megatron_fused_softmax,
    sdpa_kernel,
)
from core.training.extra_trained import head_copy_trains, merged_head_copy
from core.training.mamba import MixerShape, kernel_path_terms, torch_path_terms
from core.training.storage import litgpt_quantised_head

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_KERNEL_EAGER: Final = Kernel.EAGER
_KERNEL_EFFICIENT: Final = Kernel.EFFICIENT
_KERNEL_FLASH: Final = Kernel.FLASH
_KERNEL_MATH: Final = Kernel.MATH
_METHOD_ADAPTER_V2: Final = Method.ADAPTER_V2
_METHOD_FROZEN: Final = Method.FROZEN
_METHOD_FULL: Final = Method.FULL
_METHOD_LN_TUNING: Final = Method.LN_TUNING
_METHOD_LOHA: Final = Method.LOHA
_METHOD_SHIRA: Final = Method.SHIRA
_METHOD_BOFT: Final = Method.BOFT
_OPTIMIZER_LORA_FA: Final = Optimizer.LORA_FA
_STACK_COMPILE: Final = Stack.COMPILE
_TRANSFORMERS_LOSS_V4_31_TO_4_45: Final = TransformersLoss.V4_31_TO_4_45
_TRANSFORMERS_LOSS_V4_46_TO_4_48: Final = TransformersLoss.V4_46_TO_4_48

# torch.compile's default partitioner for training, min_cut_rematerialization_partition
# (pytorch/pytorch 00c07b93, torch/_functorch/partitioners.py), decides what the compiled
# forward saves: matmuls and the flash / efficient attention kernels are never recomputed
# (compute_intensive_ops), nor is a tensor the backward must materialise anyway for an op it
# cannot fuse into (is_materialized_backwards: every projection's input, read again by its
# weight-gradient matmul), nor a reduction whose output is 4x smaller than its input (a norm's
# 1/rms); every other pointwise op, dtype cast and view is recomputable, and a minimum cut
# picks the cheapest tensors to save from which the backward recomputes the rest. In a
# block that means, and this is all the model applies (each a cut no larger than eager's):
# - an RMSNorm keeps its input in the input's own dtype and its 1/rms, not the float32 copy
#   (x.float() is recomputed) nor the normalised value before the weight multiply;
# - a gated MLP keeps gate and up (matmul outputs), not act(gate); GELU's tanh-form
#   intermediates are recomputed from the fc output;
# - the projections' inputs (norm outputs, attention output, the down projection's input),
#   q/k/v, attention's saved tensors and the experts' tensors stay as eager keeps them.
# LayerNorm (one native_layer_norm op, its saved mean and 1/std) is left as eager keeps it.
COMPILE_NOTE: Final = "torch.compile recomputes it"

# Families whose RMSNorm multiplies by its weight in float32 (modeling_gemma*.py,
# modeling_olmo2.py; transformers 5.25.0 models/olmo3/modeling_olmo3.py Olmo3RMSNorm.forward:
# ``(self.weight * hidden_states).to(input_dtype)``), so the tensor that multiply keeps is float32
# whatever the input.
FLOAT32_NORM_SCALE: Final = (
    "gemma",
    "gemma2",
    "gemma3_text",
    "olmo2",
    "olmo3",
    "nemotron_h",
    "qwen3_next",
    "qwen3_5_text",
    "qwen3_5_moe_text",
)
# (NemotronHRMSNorm.forward in transformers 5.25.0 models/nemotron_h/modeling_nemotron_h.py:
# ``(self.weight.to(torch.float32) * hidden_states).to(input_dtype)``; Qwen3NextRMSNorm.forward, Qwen3_5RMSNorm's
# the same: ``output * (1.0 + self.weight.float())`` on the float32 normalised rows, then ``.type_as(x)``.)

# Families whose causal-LM forward upcasts its own logits, so the 16-bit lm_head output is freed before the loss
# (transformers 5.25.0 models/nemotron_h/modeling_nemotron_h.py NemotronHForCausalLM.forward:
# ``logits = self.lm_head(hidden_states).float()``), as every model did from 4.31 to 4.45 (_logits_terms).
LOGITS_UPCAST: Final = ("nemotron_h",)

# The token mixers a block may run (layer_activations' ``mixer``): attention, a hybrid's Mamba-2 mixer
# (core.training.mamba), or "" for none (a Nemotron-H MLP layer).
ATTENTION_MIXER: Final = "attention"
MAMBA2_MIXER: Final = "mamba2"
GDN_MIXER: Final = "gated_deltanet"  # a Qwen3-Next / Qwen3.5 Gated DeltaNet layer (core.training.gdn)


# Unsloth (docs/UNSLOTH.md). FastLanguageModel dispatches these model types to its own
# forward (unslothai/unsloth 015bdef, unsloth/models/loader.py FastLanguageModel.from_pretrained);
# every other type, 8-bit loading and full fine-tuning go through FastModel and its compiler,
# whose LoRA path was not read: there only the loss and the checkpointing rules apply.
UNSLOTH_FAST_FAMILIES: Final = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2")


def unsloth_fast_path(plan: Plan) -> bool:
    """Whether the plan runs Unsloth's FastLanguageModel forward (its RMSNorm and LoRA kernels)."""
    if not plan.unsloth or plan.method not in (Method.LORA, Method.QLORA, Method.DORA):
        return False
    if plan.method is Method.QLORA and plan.quant is Quant.INT8:
        return False
    return plan.model.family in UNSLOTH_FAST_FAMILIES and plan.model.num_experts <= 1


def unsloth_kernels(plan: Plan) -> frozenset[str]:
    """The projection groups Unsloth's fast LoRA kernels run (unslothai/unsloth 015bdef,
    unsloth/models/llama.py FastLlamaModel.patch_peft_model): none unless ``lora_dropout == 0``
    (PEFT's bias is "none" in every plan); per group only when every projection of it carries
    LoRA, has no base bias and no DoRA magnitude: "qkv" (LoRA_QKV), "o" (LoRA_W), "mlp"
    (LoRA_MLP, gated MLPs: SwiGLU / GeGLU)."""
    if not unsloth_fast_path(plan) or plan.method is Method.DORA or plan.lora.dropout > 0:
        return frozenset()
    model, targets = plan.model, set(plan.lora.targets)
    groups = set()
    if {"q_proj", "k_proj", "v_proj"} <= targets and not model.qkv_bias and not model.fused_qkv:
        groups.add("qkv")
    if "o_proj" in targets and not model.o_bias:
        groups.add("o")
    mlp = {"gate_proj", "up_proj", "down_proj"}
    if model.gated_mlp and not model.fused_gate_up and not model.mlp_bias and mlp <= targets:
        groups.add("mlp")
    return frozenset(groups)


@fills_fields
@dataclass(frozen=True)
class _Ctx:
    """What decides the saved tensors: sizes, dtypes and which weights train."""

    n: int  # tokens in the micro-batch, B·S
    b: int
    s: int
    ca: float  # bytes of a matmul output (16-bit unless float32)
    res: float  # bytes of the residual stream (the dtype the model runs in)
    mode: str  # "fp32" | "mixed" | "pure" | "autocast16" (see core.roles.Dtypes.mode)
    trainable: bool  # the block's own weights get gradients
    lora: tuple[str, ...]  # LoRA-targeted projections
    adapter: float  # bytes of an adapter weight
    adapter_out: float  # bytes of an adapter matmul output (the autocast dtype under autocast)
    model_dtype: Dtype
    compute_dtype: Dtype
    adapter_dtype: Dtype
    autocast: bool
    dropout: bool = False  # LoRA dropout > 0 on the adapters
    compiled: bool = False  # torch.compile's partitioner recomputes cheap elementwise ops (above)
    unsloth_norm: bool = False  # Unsloth's Triton RMSNorm (see UNSLOTH_FAST_FAMILIES)
    norms_train: bool = False  # PEFT's LN tuning: the residual stream's norms train (copies), nothing else
    prefix: int = 0  # prefix tuning's virtual keys and values before every layer's own (Plan.prefix_tokens)
    hada_autocast: bool = False  # LoHa under autocast: its delta weight is in the autocast dtype (adapter_copies)
    frozen_a: bool = False  # PEFT's LoRA-FA: lora_A frozen, so lora_A's matmul keeps no input (adapter_in)
    # PEFT's SHiRA (F.linear(x, new_weight)) and BOFT (x @ boft_rotation): the input read as is (adapter_copies)
    sparse_weight: bool = False

    def saves(self, name: str) -> bool:
        """A projection keeps its input only when its weight, or an adapter on it, trains."""
        return self.trainable or name in self.lora

    def adapter_copies(self, x: Dtype) -> bool:
        """Whether an adapter reading a tensor of dtype ``x`` keeps a copy of its own.

        PEFT's LoraLayer.forward casts the input to the adapter's dtype first
        (``_cast_input_dtype``, also under autocast); under autocast lora_A's matmul then
        casts it to the autocast dtype. Either cast makes a new tensor, which lora_A keeps.
        LoHa / LoKr cast the input to their delta weight's dtype (``_cast_input_dtype(x, delta.dtype)``):
        LoHa's delta comes out of HadaWeight's matmuls, in the autocast dtype under autocast, so an input
        already in it is read as is (tools/measure/lycoris_check.py); LoKr's torch.kron of float32 w1 and
        the autocast-dtype w2 is float32, so the input is copied as LoRA's.
        """
        if self.hada_autocast:
            return x is not self.compute_dtype
        if self.sparse_weight:  # SHiRA, BOFT: no cast of their own; autocast's per matmul (peft shira/, boft/layer.py)
            return self.autocast and x is not self.compute_dtype
        if self.frozen_a:  # nothing of the input is kept but dropout's mask (adapter_in), whatever its dtype
            return True
        if self.dropout:
            return True
        return self.adapter_dtype is not x or (self.autocast and x is not self.compute_dtype)

    @property
    def adapter_in(self) -> float:
        """Bytes of the copy an adapter keeps: the autocast dtype under autocast. With LoRA
        dropout (PEFT: ``lora_B(lora_A(dropout(x)))``, one nn.Dropout per adapted layer) each
        adapter keeps the dropped tensor and dropout keeps its mask (one byte per element).

        Under PEFT's LoRA-FA lora_A is frozen: its matmul keeps no input (no dA; dx reads only A), so of the input
        only dropout's mask is kept (the input needs a gradient). tools/measure/lycoris_check.py "lorafa": 4,096 B
        (lora_A's outputs alone) against LoRA's 266,240 B, to the byte."""
        mask = 1.0 if self.dropout else 0.0
        if self.frozen_a:
            return mask
        return (self.ca if self.autocast else self.adapter) + mask


def _context(plan: Plan, trainable: bool, lora: tuple[str, ...]) -> _Ctx:
    # Built without the frozen __init__'s object.__setattr__ per field (three contexts an
    # estimate, of one plan or two): the plan's own fields once (_plan_fields), then these three.
    ctx = object.__new__(_Ctx)
    dropout = bool(lora) and (plan.lora_adapters or plan.adalora) and plan.lora.dropout > 0
    ctx.__dict__.update(_plan_fields(plan), trainable=trainable, lora=lora, dropout=dropout)
    return ctx


@last_answer
def _plan_fields(plan: Plan) -> dict[str, object]:
    """The fields of a _Ctx that depend on the plan alone (read, never changed, by _context)."""
    b, s = plan.workload.micro_batch, plan.workload.seq_len
    dt = dtypes_for(plan)
    return {
        "n": b * s,
        "b": b,
        "s": s,
        "ca": dt.compute,
        "res": dt.residual,
        "mode": dt.mode,
        "adapter": dt.adapter,
        "adapter_out": dt.compute if dt.autocast else dt.adapter,
        "model_dtype": model_dtype(plan),
        "compute_dtype": compute_dtype(plan),
        "adapter_dtype": adapter_dtype(plan),
        "autocast": dt.autocast,
        "compiled": plan.stack is _STACK_COMPILE,
        "unsloth_norm": unsloth_fast_path(plan),
        "norms_train": plan.method is _METHOD_LN_TUNING,
        "prefix": plan.prefix_tokens,
        "hada_autocast": plan.method is _METHOD_LOHA and dt.autocast,
        "frozen_a": plan.optimizer is _OPTIMIZER_LORA_FA,
        "sparse_weight": plan.method is _METHOD_SHIRA or plan.method is _METHOD_BOFT,
    }


def _consumer_inputs(
    ctx: _Ctx, width: int, names: tuple[str, ...], fused: bool, label: str, x: Dtype | None = None
) -> list[Term]:
    """The copies of one tensor (dtype ``x``, the model's by default) that its readers keep.

    Autocast over a float32 model makes every consuming matmul cast its input to 16 bits
    itself (the autocast cache only holds casts of weights), so each keeps its own copy.
    Otherwise a trainable projection keeps the tensor itself (one copy however many read
    it); an adapter keeps its own cast when PEFT or autocast casts (see _Ctx.adapter_copies).
    """
    x = ctx.model_dtype if x is None else x
    savers = [nm for nm in names if ctx.saves(nm)]
    if fused and savers:
        savers = savers[:1]
    if not savers:
        return []
    el = ctx.n * width
    x_bytes = DTYPE_BYTES[x]
    if _readers_keep_itself(ctx, x):
        return [Term(label, f"N·{width} × {x_bytes:g}", el * x_bytes)]
    if ctx.trainable:
        formula = f"{len(savers)} × N·{width} × {ctx.ca:g}"
        return [Term(f"{label}, cast to 16 bits per reading matmul", formula, len(savers) * el * ctx.ca)]
    a = ctx.adapter_in
    if not a:  # LoRA-FA without dropout: the frozen lora_A keeps nothing of its input
        return []
    formula = f"{len(savers)} × N·{width} × {a:g}"
    how = "cast per adapter (PEFT / autocast)"
    if ctx.frozen_a:
        how = "dropout's mask per adapter (LoRA-FA: lora_A keeps no input)"
    return [Term(f"{label}, {how}", formula, len(savers) * el * a)]


def _readers_keep_itself(ctx: _Ctx, x: Dtype) -> bool:
    """Whether the matmuls reading a tensor of dtype ``x`` keep that one tensor (however many
    read it), rather than a cast copy each (see _consumer_inputs)."""
    if ctx.trainable:
        return not (ctx.autocast and x is not ctx.compute_dtype)
    return not ctx.adapter_copies(x)


def _norm(
    model: ModelSpec,
    ctx: _Ctx,
    label: str,
    with_output_consumers: list[Term],
    *,
    width: int | None = None,
    rows: int | None = None,
    in_bytes: float | None = None,
    input_kept: bool = False,
) -> list[Term]:
    """What a norm keeps (PyTorch autograd on HF's RMSNorm / LayerNorm code), plus its readers.

    ``width`` and ``rows`` default to the residual stream (N rows of d); q/k norms pass
    their own. ``in_bytes`` is the dtype of the normalised tensor (the residual's by default).
    ``input_kept``: another norm of the block already keeps this very input (a parallel block's
    second norm reads the block input too), so the input itself is not counted again; a copy the
    norm makes of it (a cast to float32) is its own and still counted.
    """
    d = model.hidden_size if width is None else width
    n = ctx.n if rows is None else rows
    x = ctx.res if in_bytes is None else in_bytes
    w = "d" if width is None else str(d)
    items: list[Term] = []

    def saved_input(term: Term, element_bytes: float) -> None:
        if not (input_kept and element_bytes == x):  # the block input itself: kept by the other norm
            items.append(term)

    if model.norm == "layernorm":
        if _low_precision_norm(model, ctx):
            # MPT's LPLayerNorm (ModelSpec.low_precision_layernorm): F.layer_norm on the input cast to
            # the autocast dtype, autocast off. native_layer_norm saves that input, the weight and bias
            # (cast too; d each, left out) and mean and rstd, float32 (pytorch/pytorch
            # tools/autograd/derivatives.yaml native_layer_norm; aten/src/ATen/native/cuda/
            # layer_norm_kernel.cu layer_norm_cuda: mean, rstd of toAccumulateType, Y empty_like the input).
            label_in, x_bytes = f"{label}: input (LPLayerNorm, the autocast dtype)", ctx.ca
        else:
            # layer_norm is on autocast's float32 list: under autocast its input is cast up.
            label_in, x_bytes = f"{label}: input", 4.0 if ctx.mode in ("mixed", "autocast16") else x
        saved_input(Term(label_in, f"N·{w} × {x_bytes:g}", n * d * x_bytes), x_bytes)
        items.append(Term(f"{label}: mean, 1/std (float32)", "2 × N × 4", n * 8))
    elif model.norm == "layernorm_nobias":
        items += _cohere_norm(ctx, label, (n, d, x), w, rows)
    elif ctx.unsloth_norm:
        # Unsloth's Fast_RMS_Layernorm.forward (unslothai/unsloth 015bdef,
        # unsloth/kernels/rms_layernorm.py): save_for_backward(X, W, r), X in its own dtype and
        # r = 1/rms in float32; no float32 copy of the input.
        saved_input(Term(f"{label}: input (Unsloth RMSNorm kernel)", f"N·{w} × {x:g}", n * d * x), x)
        items.append(Term(f"{label}: 1/rms (float32)", "rows × 4", n * 4))
    elif ctx.compiled:
        # Compiled (see COMPILE_NOTE): the input in its own dtype and 1/rms are the cut; the
        # float32 copy and the normalised value are recomputed in the backward.
        saved_input(Term(f"{label}: input ({COMPILE_NOTE} in float32)", f"N·{w} × {x:g}", n * d * x), x)
        items.append(Term(f"{label}: 1/rms (float32)", "rows × 4", n * 4))
    else:
        # x.float() is kept by pow() and the scaling mul; the normalised value is kept by
        # the weight multiply only when the weight trains: cast back to the input's dtype
        # first (LlamaRMSNorm: weight * x.to(input_dtype)), or multiplied in float32 and
        # cast after (Gemma's x * (1 + w.float()), Olmo2RMSNorm's (w * x).to(input_dtype)).
        saved_input(Term(f"{label}: input in float32", f"N·{w} × 4", n * d * 4), 4.0)
        items.append(Term(f"{label}: 1/rms (float32)", "rows × 4", n * 4))
        # LN tuning trains the residual stream's norms (rows None; q/k norms are not among PEFT's targets).
        if ctx.trainable or (ctx.norms_train and rows is None):
            h_bytes = 4.0 if model.family in FLOAT32_NORM_SCALE else x
            items.append(Term(f"{label}: normalised", f"N·{w} × {h_bytes:g}", n * d * h_bytes))
    return items + with_output_consumers


def _cohere_norm(ctx: _Ctx, label: str, shape: tuple[int, int, float], w: str, rows: int | None) -> list[Term]:
    """What autograd keeps of Cohere's weight-only LayerNorm (ModelSpec.norm "layernorm_nobias"), eager:
    CohereLayerNorm.forward (huggingface/transformers 5.25.0 src/transformers/models/cohere/modeling_cohere.py,
    Cohere2LayerNorm the same) casts the input to float32, computes ``hidden_states - mean`` twice (pow(2) keeps
    the first, the product with rsqrt the second: two float32 tensors, never the input itself) and 1/std
    (rsqrt keeps its result, rows × 4); ``weight.float() * normalised`` keeps the float32 normalised value only
    when the weight trains. Counted with torch 2.13's saved_tensors_hooks on a bf16 input: 8 bytes an element
    with the weight frozen, 12 with it trained, 4 a row (tests/core/test_cohere.py). Compiled (torch.compile's
    inductor, torch 2.13 CPU, counted the same way, weight trained or not): the input itself and the row
    statistics, mean and 1/std, float32.
    ``shape``: rows, width and the input's bytes an element."""
    n, d, x = shape
    if ctx.compiled:
        return [
            Term(f"{label}: input ({COMPILE_NOTE} in float32)", f"N·{w} × {x:g}", n * d * x),
            Term(f"{label}: mean, 1/std (float32)", "2 × rows × 4", n * 8),
        ]
    items = [
        Term(f"{label}: input minus its mean, twice (float32)", f"2 × N·{w} × 4", 2 * n * d * 4),
        Term(f"{label}: 1/std (float32)", "rows × 4", n * 4),
    ]
    if ctx.trainable or (ctx.norms_train and rows is None):
        items.append(Term(f"{label}: normalised (float32)", f"N·{w} × 4", n * d * 4))
    return items


def _low_precision_norm(model: ModelSpec, ctx: _Ctx) -> bool:
    """Whether the model's LayerNorms run as MPT's LPLayerNorm (see ModelSpec.low_precision_layernorm):
    only under autocast; without it LPLayerNorm is nn.LayerNorm."""
    return model.low_precision_layernorm and ctx.autocast


def _norm_output(model: ModelSpec, ctx: _Ctx) -> Dtype | None:
    """The dtype a pre-norm's output reaches its readers in (``x`` of _consumer_inputs): the autocast
    dtype under LPLayerNorm (native_layer_norm's output is empty_like its 16-bit input), so every
    reading matmul keeps that one tensor (autocast's cast to its own dtype returns it); else None, the
    model's dtype."""
    return ctx.compute_dtype if _low_precision_norm(model, ctx) and not model.post_norm else None


def _attention(plan: Plan, ctx: _Ctx) -> list[Term]:
    """q, k, v after their norms and RoPE, and what the attention kernel keeps."""
    model = plan.model
    b, s, n, ca = ctx.b, ctx.s, ctx.n, ctx.ca
    h = model.num_heads
    q_el, kv_el = n * model.q_width, n * model.kv_width
    kernel = sdpa_kernel(plan)
    # An adapter on o_proj keeps its own cast of the attention output (see adapter_copies).
    o_adapter_copy = "o_proj" in ctx.lora and not ctx.trainable and ctx.adapter_copies(ctx.compute_dtype)
    items: list[Term] = []
    if model.qk_norm:
        # Qwen3 / Gemma-3 normalise every head (rows N·H, width hd), OLMo-2 the whole
        # projection (rows N); both read the projection output, in the compute dtype.
        per_head = model.qk_norm in ("head", "per_head")  # normalised over head_dim, whatever the weight
        for name, width, heads in (("q", model.q_width, h), ("k", model.kv_width, model.num_kv_heads)):
            items += _norm(
                model,
                ctx,
                f"{name} norm",
                [],
                width=model.head_dim if per_head else width,
                rows=n * heads if per_head else n,
                in_bytes=ca,
            )
    if model.family == "gpt2":
        items.append(Term("q, k, v (the fused projection's output)", f"N·(q + 2kv) × {ca:g}", (q_el + 2 * kv_el) * ca))
    elif kernel is not _KERNEL_MATH:  # the math kernel keeps its own scaled q, k and repeated v instead
        items.append(Term("q after RoPE", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
        items += _kv_terms(plan, ctx, kernel)
    if kernel is _KERNEL_EAGER:
        items += _eager_scores(plan, ctx, b * h * s * s)
        if ctx.saves("o_proj") and not o_adapter_copy:  # else the adapter's copy below is what is kept
            items.append(Term("attention output (o_proj input)", f"N·H·hd × {ca:g}", q_el * ca))
    elif kernel is _KERNEL_MATH:
        # PyTorch's math fallback (float32 with grouped-query heads, or unsupported shapes;
        # _scaled_dot_product_attention_math): the matmuls keep q and k each scaled by
        # √scale and v repeated to every head, not the inputs; then the probabilities, and an
        # output laid out (B, H, S, hd) that o_proj reads through a contiguous copy. All in
        # float32 from PyTorch 2.5, in the inputs' dtype before (math_kernel_bytes).
        scores, inner = b * h * s * s, math_kernel_bytes(plan, ca)
        held = "float32" if inner == 4 else f"{inner:g} bytes"
        items.append(Term("math kernel: scaled q, k and repeated v", f"3 × N·H·hd × {inner:g}", 3 * q_el * inner))
        items.append(
            Term(
                f"math kernel: probabilities ({held})",
                f"B·H·S² × {inner:g} = {sci(scores)} × {inner:g}",
                scores * inner,
            )
        )
        items.append(Term("attention output (o_proj input)", f"N·H·hd × {ca:g}", q_el * ca))
    else:
        # Flash / memory-efficient kernels keep their output and a float32 log-sum-exp per
        # row (the efficient kernel pads the rows to a multiple of 32).
        rows = s if kernel is _KERNEL_FLASH else -(-s // 32) * 32
        items.append(Term("softmax log-sum-exp (float32)", f"B·H·S × 4 = {sci(b * h * rows)} × 4", b * h * rows * 4))
        items.append(Term("attention output", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
    if model.fused_qkv and model.family == "gpt2" and kernel is not _KERNEL_EAGER and not plan.checkpointing:
        # With use_cache on (the default outside checkpointing) the KV cache concatenates k
        # and v into fresh tensors, which attention then keeps, while q still pins the fused
        # projection output (transformers DynamicLayer.update).
        items.append(Term("k, v copies made by the KV cache", f"2 × N·kv × {ca:g}", 2 * kv_el * ca))
    if o_adapter_copy:
        a = ctx.adapter_in
        items.append(Term("o_proj input cast for its adapter", f"N·H·hd × {a:g}", q_el * a))
    if model.family in gdn.GATED_ATTENTION:
        o_input = ctx.saves("o_proj") and not o_adapter_copy
        items += gdn.gated_attention_terms(ctx.n, h, model.num_kv_heads, model.head_dim, ca, ctx.trainable, o_input)
    return items


def _latent_attention(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What transformers' DeepseekV3Attention keeps (huggingface/transformers 00b676f8
    models/deepseek_v3/modeling_deepseek_v3.py ``forward``), after the attention norm's readers:
    q_a_layernorm on q_a_proj's output (with a q_lora_rank) and q_b_proj's input; kv_a_layernorm on the
    latent part of kv_a_proj_with_mqa's output (its ``.to(float32)`` a copy, so the compressed kv itself
    is not pinned) and kv_b_proj's input; the rotary parts' ``q * cos + rotate_half(q) * sin`` keep only
    cos and sin; ``torch.cat`` makes q and k (H · qk_head_dim each), which the kernel keeps; v is a view
    of kv_b_proj's output, so a kernel that keeps v pins the whole output, H · (qk_nope + v_head_dim),
    except FlashAttention-2, whose padding of v to qk_head_dim (``F.pad``) is a copy it keeps instead."""
    model = plan.model
    b, s, n, ca = ctx.b, ctx.s, ctx.n, ctx.ca
    h, qk, v = model.num_heads, model.head_dim, model.v_head_dim
    kernel = sdpa_kernel(plan)
    items: list[Term] = []
    if model.q_lora_rank:
        qr = model.q_lora_rank
        items += _norm(model, ctx, "q_a norm", [], width=qr, in_bytes=ca)
        items += _consumer_inputs(ctx, qr, ("q_b_proj",), False, "q_b_proj input (q_a norm output)")
    r = model.kv_lora_rank
    items += _norm(model, ctx, "kv_a norm", [], width=r, in_bytes=ca)
    items += _consumer_inputs(ctx, r, ("kv_b_proj",), False, "kv_b_proj input (kv_a norm output)")
    q_el, out_el = n * h * qk, n * h * v
    if kernel is Kernel.MATH:
        inner = math_kernel_bytes(plan, ca)
        items.append(
            Term("math kernel: scaled q, k and v", f"N·H·(2·{qk} + {v}) × {inner:g}", (2 * q_el + out_el) * inner)
        )
        scores = b * h * s * s
        items.append(Term("math kernel: probabilities", f"B·H·S² × {inner:g}", scores * inner))
        items.append(Term("attention output (o_proj input)", f"N·H·{v} × {ca:g}", out_el * ca))
        return items
    items.append(Term("q (nope | rope, concatenated)", f"N·H·{qk} × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
    items.append(Term("k (nope | rope, concatenated)", f"N·H·{qk} × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
    if kernel is Kernel.FLASH:
        items.append(Term(f"v padded to {qk} (FlashAttention-2)", f"N·H·{qk} × {ca:g}", q_el * ca))
    else:
        kv_b = n * h * (model.qk_nope_head_dim + v)
        items.append(
            Term("kv_b_proj output (v is a view of it)", f"N·H·({model.qk_nope_head_dim} + {v}) × {ca:g}", kv_b * ca)
        )
    if kernel is Kernel.EAGER:
        items += _eager_scores(plan, ctx, b * h * s * s)
        if ctx.saves("o_proj"):
            items.append(Term("attention output (o_proj input)", f"N·H·{v} × {ca:g}", out_el * ca))
        return items
    rows = s if kernel is Kernel.FLASH else -(-s // 32) * 32
    items.append(Term("softmax log-sum-exp (float32)", f"B·H·S × 4 = {sci(b * h * rows)} × 4", b * h * rows * 4))
    if kernel is Kernel.FLASH:  # its output at qk_head_dim, sliced and copied for o_proj
        items.append(Term("attention output (padded)", f"N·H·{qk} × {ca:g}", q_el * ca))
        if ctx.saves("o_proj"):
            items.append(Term("o_proj input (the output sliced to v)", f"N·H·{v} × {ca:g}", out_el * ca))
    else:
        items.append(Term("attention output", f"N·H·{v} × {ca:g} = {sci(out_el)} × {ca:g}", out_el * ca))
    return items


def _kv_terms(plan: Plan, ctx: _Ctx, kernel: Kernel) -> list[Term]:
    """The k and v a fused or eager attention kernel keeps (after RoPE for k).

    Eager attention, and SDPA with a mask (no enable_gqa then), repeat k and v to every head; so does
    LitGPT in training (litgpt/model.py 00af8b0, CausalSelfAttention.forward: ``k.expand(...)`` then
    ``reshape``, a copy, "training: flash attention requires it"). With multi-head attention LitGPT's v
    is no copy (litgpt_pins_qkv): SDPA keeps the whole fused q|k|v output through it."""
    model, ca = plan.model, ctx.ca
    repeated = kernel is Kernel.EAGER or (explicit_mask(plan) and kernel is not Kernel.FLASH) or plan.litgpt
    keys = ctx.b * (ctx.s + ctx.prefix)  # prefix tuning: the virtual keys and values come first (_prefix_terms)
    kv_saved = keys * (model.q_width if repeated else model.kv_width)
    if litgpt_pins_qkv(plan) and not ctx.prefix:
        fused = ctx.n * (model.q_width + 2 * model.kv_width)
        return [
            Term("k after RoPE", f"{sci(kv_saved)} × {ca:g}", kv_saved * ca),
            Term("v, a view of the fused q|k|v output (kept whole)", f"N·(q + 2kv) × {ca:g}", fused * ca),
        ]
    label = "k, v repeated to every head" if repeated and model.num_kv_heads != model.num_heads else "k, v"
    if ctx.prefix:
        label += f" (seq + {ctx.prefix} prefix positions)"
    kv = Term(label, f"2 × {sci(kv_saved)} × {ca:g}", 2 * kv_saved * ca)
    return [kv, *_prefix_terms(plan, ctx, kernel, repeated)]


def litgpt_pins_qkv(plan: Plan) -> bool:
    """lit-gpt / LitGPT with multi-head attention (``q_per_kv`` 1): v stays a view of the fused q|k|v output.

    lit-gpt 8641822 lit_gpt/model.py and litgpt 5895df1 / 00af8b0 litgpt/model.py
    ``CausalSelfAttention.forward``: ``qkv.view(B, T, G, q_per_kv + 2, hs).permute(0, 2, 3, 1, 4)``,
    ``split((q_per_kv, 1, 1), dim=2)``, no ``expand`` when ``n_query_groups == n_head``, and
    ``v.reshape(B, -1, T, hs)`` merges a group dimension with one of size 1: a view. q and k are new
    tensors (``torch.cat`` after ``apply_rope``), v is not, and SDPA keeps v for its backward, so the
    whole N·(q + 2kv) output stays (tools/measure/litgpt_qkv_check.py: the q|k|v storage among the
    saved tensors with 8 heads of 8 groups, not with 2 groups). No q/k norm at those commits."""
    model = plan.model
    return plan.litgpt and model.num_kv_heads == model.num_heads and not model.qk_norm


def _prefix_terms(plan: Plan, ctx: _Ctx, kernel: Kernel, repeated: bool) -> list[Term]:
    """What prefix tuning adds to a layer's attention beyond its longer k and v (huggingface/peft 51c2ff66
    src/peft/peft_model.py ``get_prompt``: the prefix encoder's output, cast to the base model's dtype, viewed as
    (B, n, 2·layers, kv heads, head_dim) and handed to the model as a ``DynamicCache``; each attention's
    ``past_key_values.update`` returns the cache's ``torch.cat`` of the prefix and the layer's own k and v,
    B × kv heads × (S + n) × head_dim each, which the cache holds as long as the model's output).

    - With grouped-query heads repeated (an explicit mask: the keys outnumber the queries, so transformers
      cannot hand SDPA ``is_causal``), SDPA keeps the repeated copies and the cache its own k and v besides.
    - The memory-efficient kernel keeps the mask as a bias in the compute dtype, B × S × (S + n), one per layer:
      pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp (a 2.5+ copy read through the file index,
      id 40065839) ``scaled_dot_product_attention``, efficient branch: ``convert_boolean_attn_mask(attn_mask_,
      query_.dtype())`` then ``preprocess_mask`` (``pad_bias<8>``: the keys' dimension padded to a multiple of 8
      where the rows' stride is not one), the result handed to ``_scaled_dot_product_efficient_attention``."""
    if not ctx.prefix:
        return []
    model, b, s, ca = plan.model, ctx.b, ctx.s, ctx.ca
    keys = s + ctx.prefix
    items: list[Term] = []
    if repeated and model.num_kv_heads != model.num_heads:
        el = 2 * b * keys * model.kv_width
        items.append(Term("prefix tuning: the cache's k, v (seq + prefix)", f"2 × B·(S + n)·kv × {ca:g}", el * ca))
    if kernel is Kernel.EFFICIENT:
        el = b * s * (-(-keys // 8) * 8)
        items.append(Term("prefix tuning: the mask as the kernel's bias", f"B·S·(S + n) × {ca:g}", el * ca))
    return items


def gpt2_softmax_in_scores_dtype(plan: Plan) -> bool:
    """GPT-2's eager attention runs its softmax in the scores' own dtype: transformers' GPT-2 calls
    ``nn.functional.softmax(attn_weights, dim=-1)`` with no ``dtype=torch.float32`` and then
    ``attn_weights.type(value.dtype)``, a no-op outside mixed precision (huggingface/transformers v4.42.0
    models/gpt2/modeling_gpt2.py ``GPT2Attention._attn``; v4.57.1 and v5.0.0 ``eager_attention_forward``),
    where the Llama-style ``eager_attention_forward`` takes ``softmax(..., dtype=torch.float32).to(query.dtype)``
    (v4.57.1 models/llama/modeling_llama.py). Under autocast PyTorch runs softmax in float32 (autocast's
    float32 op list) and the cast makes the 16-bit copy, the Llama case; with 16-bit weights and no autocast
    the one tensor the softmax backward reads is 16-bit and there is no cast."""
    return plan.model.family == "gpt2" and not dtypes_for(plan).autocast


def _eager_scores(plan: Plan, ctx: _Ctx, scores: int) -> list[Term]:
    """The scores-sized tensors eager attention keeps: the probabilities its softmax backward reads (float32,
    or 16-bit under Megatron's fused kernel and GPT-2's softmax in the scores' dtype), soft-capped scores,
    dropout's mask and output, or the probabilities' 16-bit cast the second matmul reads."""
    model, ca = plan.model, ctx.ca
    fused_softmax = megatron_fused_softmax(plan)
    in_scores_dtype = fused_softmax or gpt2_softmax_in_scores_dtype(plan)
    items: list[Term] = []
    if fused_softmax:
        # Megatron's fused scale-mask-softmax kernel keeps its 16-bit output, no float32 softmax (see
        # core.training.attention.megatron_fused_softmax); without dropout the second matmul keeps that tensor.
        label = "attention probabilities (16 bits, Megatron's fused softmax kernel)"
        items.append(Term(label, f"B·H·S² × {ca:g} = {sci(scores)} × {ca:g}", scores * ca))
    elif in_scores_dtype:
        label = f"attention probabilities ({ca * 8:g}-bit: GPT-2's softmax in the scores' dtype)"
        items.append(Term(label, f"B·H·S² × {ca:g} = {sci(scores)} × {ca:g}", scores * ca))
    else:
        items.append(Term("attention probabilities (float32)", f"B·H·S² × 4 = {sci(scores)} × 4", scores * 4))
    if model.attn_softcap:
        items.append(Term("soft-capped scores (tanh)", f"B·H·S² × {ca:g}", scores * ca))
    if model.attention_dropout:
        items.append(
            Term("attention dropout mask + dropped probabilities", f"B·H·S² × (1 + {ca:g})", scores * (1 + ca))
        )
    elif ca == 2 and not in_scores_dtype:
        items.append(Term("probabilities cast to 16 bits", f"B·H·S² × 2 = {sci(scores)} × 2", scores * 2))
    return items


def _mlp(plan: Plan, ctx: _Ctx) -> list[Term]:
    """The dense MLP's saved tensors, or a mixture of experts' (see _experts): where such a model holds dense layers
    too (``first_k_dense_replace``: DeepSeek-V2/V3's, GLM-4.5's, ERNIE 4.5's first ones, Llama 4's interleaved ones;
    ModelSpec.adapter_blocks), one block's mean over the layers, the experts' tensors in the MoE layers' share and a
    plain MLP of ``dense_intermediate_size`` (DeepseekV3MLP, Glm4MoeMLP, Ernie4_5_MoeMLP, Llama4TextMLP) in the
    dense layers' share. The MLP norm's output is kept in either kind (its readers differ: the router and shared
    expert, or gate and up), counted once."""
    model = plan.model
    if model.num_experts == 1:
        return _dense_mlp(plan, ctx, model.intermediate_size)
    experts = _experts(plan, ctx)
    dense = model.dense_layers
    if not dense:
        return experts
    moe, layers = model.moe_layers, model.num_layers
    # the router's input and probabilities are first (_mlp_part keeps them whole under tensor parallel)
    router = next(k for k, t in enumerate(experts) if t.label.startswith("router"))
    return (
        experts[:router]
        + [_share_of(t, moe, layers, "MoE") for t in experts[router:]]
        + [_share_of(t, dense, layers, "dense") for t in _dense_mlp(plan, ctx, model.dense_intermediate_size)]
    )


def _share_of(term: Term, held: int, layers: int, kind: str) -> Term:
    """``term`` of one kind of block as its share of a block's mean (``held`` of the ``layers``)."""
    return Term(f"{term.label} ({kind} layers: {held} of {layers})", f"({term.formula}) × {held}/{layers}",
                term.bytes * held / layers)  # fmt: skip


def _dense_mlp(plan: Plan, ctx: _Ctx, i: int) -> list[Term]:
    """A plain MLP of width ``i``: its saved tensors."""
    model = plan.model
    n, ca = ctx.n, ctx.ca
    items: list[Term] = []
    mlp_el = n * i
    if model.gated_mlp and ctx.compiled:
        formula = f"2 × N·I × {ca:g} = 2 × {sci(mlp_el)} × {ca:g}"
        items.append(Term(f"gate, up (act(gate): {COMPILE_NOTE})", formula, 2 * mlp_el * ca))
    elif model.gated_mlp:
        items.append(Term("gate, act(gate), up", f"3 × N·I × {ca:g} = 3 × {sci(mlp_el)} × {ca:g}", 3 * mlp_el * ca))
    elif model.activation == "gelu_new" and ctx.compiled:
        items.append(Term(f"fc output (GELU's intermediates: {COMPILE_NOTE})", f"N·I × {ca:g}", mlp_el * ca))
    elif model.activation == "gelu_new":
        # NewGELUActivation is plain tensor code: pow, tanh and two multiplies each keep a
        # tensor; under autocast pow runs in float32 (it is on autocast's float32 list).
        per = {"fp32": 16.0, "mixed": 14.0, "pure": 8.0, "autocast16": 14.0}[ctx.mode]
        items.append(Term("fc output and GELU (tanh form) intermediates", f"N·I × {per:g}", mlp_el * per))
    elif model.activation == "relu2" and not ctx.compiled:
        # transformers 5.25.0 ReLUSquaredActivation (activations.py): relu keeps its output and torch.square
        # (pow) its input, the same tensor; under autocast pow runs in float32 (on autocast's float32 list) on a
        # float32 copy of it, which it keeps (Nemotron-H's MLP: tools/measure on fake CUDA, bf16 autocast).
        items.append(Term("relu output (kept by relu and the square)", f"N·I × {ca:g}", mlp_el * ca))
        if ctx.autocast:
            items.append(Term("relu output in float32, the square's input (autocast)", "N·I × 4", mlp_el * 4))
    else:
        items.append(Term("fc output (activation input)", f"N·I × {ca:g}", mlp_el * ca))
    if ctx.saves("down_proj"):
        if not ctx.trainable and ctx.adapter_copies(ctx.compute_dtype):
            a = ctx.adapter_in
            items.append(Term("down-projection input cast for its adapter", f"N·I × {a:g}", mlp_el * a))
        else:
            items.append(Term("down-projection input", f"N·I × {ca:g} = {sci(mlp_el)} × {ca:g}", mlp_el * ca))
    return items


def _experts(plan: Plan, ctx: _Ctx) -> list[Term]:
    """A mixture-of-experts block as transformers 5 runs it (integrations/moe.py
    grouped_mm_experts_forward; Mixtral, Qwen2-MoE, Qwen3-MoE).

    The router's float32 softmax and top-k indices; the S = N·k routed (token, expert) pairs
    gathered and run through torch's grouped_mm, which autocast does not cover, so the
    experts compute in the dtype the weights are stored in: gate|up output and act(gate)
    (kept by the activation and the product), the expert output (kept by the multiply with
    the routing weight, which needs a gradient), and when the experts train also the
    gathered input and the down projection's input. A Qwen2-MoE shared expert is a plain
    MLP (autocast covers it) whose output is kept by its sigmoid gate's multiply.
    """
    model = plan.model
    n, ca, d, i = ctx.n, ctx.ca, model.hidden_size, model.intermediate_size
    k, e = model.experts_per_token, model.num_experts
    pairs: float = n * k
    w = DTYPE_BYTES[ctx.model_dtype]
    readers = ("router",) + (
        ("shared gate_proj", "shared up_proj", "shared expert gate") if model.shared_expert_size else ()
    )
    items = _consumer_inputs(ctx, d, readers, False, "MLP norm output (router, shared expert)")
    items.append(Term("router probabilities (float32) and top-k indices", "N·E × 4 + N·k × 8", n * e * 4 + pairs * 8))
    # The busiest expert-parallel rank's experts keep expert_load × the N·k routed rows (the plan's routing
    # imbalance, capped or padded by a capacity factor; 1.0 balanced).
    load = expert_load(plan)
    nk = routed_rows(load)  # the formulas say the busiest rank's share
    if load != 1.0:
        pairs *= load
    if plan.moe_layer is not MoeLayer.TRANSFORMERS and ctx.trainable and not plan.experts_loop:
        return items + _experts_torchtitan(plan, ctx, pairs, nk)
    if plan.experts_loop:
        items += _experts_loop(plan, ctx, pairs, w)
    else:
        items.append(
            Term(
                "experts: gate|up output and act(gate)",
                f"{nk}·3I × {w:g} = {sci(pairs * 3 * i)} × {w:g}",
                pairs * 3 * i * w,
            )
        )
    items.append(Term("experts: output kept for the routing weights", f"{nk}·d × {w:g}", pairs * d * w))
    if ctx.trainable:
        items.append(Term("experts: gathered input and down input", f"{nk}·(d + I) × {w:g}", pairs * (d + i) * w))
    if model.shared_expert_size:
        shared = n * model.shared_expert_size
        per = 4 if ctx.trainable else 3
        formula = f"{per} × N·I_s × {ca:g} + N·d × {ca:g}"
        items.append(Term("shared expert: MLP tensors and its gated output", formula, per * shared * ca + n * d * ca))
    return items


def _experts_torchtitan(plan: Plan, ctx: _Ctx, pairs: float, nk: str = "N·k") -> list[Term]:
    """What torchtitan's MoE layer keeps past the router when its experts train (plan setting ``moe_layer``).

    pytorch/torchtitan d021aa9c torchtitan/models/moe/moe.py (the bmm form, from e1f7f318) and PrimeIntellect-ai/
    prime-rl 8718eb14 src/prime_rl/trainer/models/layers/moe.py (the scatter-add form, torchtitan's before it), with
    ``score_before_experts=False`` as their Qwen3 and DeepSeek-V3 build it:

    - ``_run_experts_grouped_mm`` casts the permuted rows and the weights with ``.bfloat16()``, so the experts run in
      bf16 whatever the model's dtype: the padded permuted input (kept by both gate and up grouped_mm), the gate and
      up outputs, silu(gate) and their product (the down grouped_mm's input); under torch.compile the partitioner
      recomputes one of the four I-wide tensors (3 kept).
    - ``routed_output.to(torch.float32) * scores`` (scatter form) or ``torch.bmm(scores, unsorted.float())`` (bmm
      form) keeps the float32 copy of the experts' output for the scores' gradient, N·k·d × 4. Compiled, the scatter
      form keeps the bf16 output and recomputes the copy; the bmm form keeps the float32 copy still.
    - the sorted scores (float32), the argsort's and the gather's int64 indices and the padded permutation's int32
      ones: 24 B a routed row in both forms, eager or compiled.
    - a shared expert is torchtitan's FeedForward, no gate on its output: w1's and w3's outputs, silu and the
      product (3 of them compiled), in the compute dtype.

    Measured on the CPU with torch 2.13.0 and each layer's own source (tools/measure/titan_moe_check.py;
    tests/data/titan_moe/saved.json): the rows padded per expert to a multiple of 8 (E·8 more a block) are left
    out, as are the compiled graph's per-token scalars (the softmax's max and sum, 8 B a token)."""
    model = plan.model
    d, i, ca = model.hidden_size, model.intermediate_size, ctx.ca
    kept = 3 if ctx.compiled else 4
    bmm = plan.moe_layer is MoeLayer.TORCHTITAN_BMM
    out_bytes, out_label = (4.0, "float32 copy") if bmm or not ctx.compiled else (ca, "16-bit output (compiled)")
    items = [
        Term(
            f"experts (torchtitan): permuted input and {kept} of gate, up, silu(gate), their product (bf16)",
            f"{nk}·(d + {kept}I) × 2 = {sci(pairs * (d + kept * i))} × 2",
            pairs * (d + kept * i) * 2,
        ),
        Term(
            f"experts (torchtitan): output kept for the routing weights ({out_label})",
            f"{nk}·d × {out_bytes:g}",
            pairs * d * out_bytes,
        ),
        Term("experts (torchtitan): sorted scores and the permutation's indices", f"{nk} × 24", pairs * 24),
    ]
    if model.shared_expert_size:
        shared = ctx.n * model.shared_expert_size
        items.append(Term("shared expert (torchtitan FeedForward)", f"{kept} × N·I_s × {ca:g}", kept * shared * ca))
    return items


def _experts_loop(plan: Plan, ctx: _Ctx, pairs: float, w: float) -> list[Term]:
    """What transformers 4.55's GptOssExperts keeps in training (plan setting ``experts_loop``):
    it loops over the experts hit and runs each on its rows (huggingface/transformers v4.55.0,
    src/transformers/models/gpt_oss/modeling_gpt_oss.py ``GptOssExperts.forward``, ``if self.training``).

    - ``self.gate_up_proj[expert_idx]`` and ``self.down_proj[expert_idx]`` index the stacked
      parameters with a one-element index tensor: advanced indexing, a copy of that expert's
      [d, 2I] and [I, d] weights, which the matmuls keep for their input's gradient. One copy per
      expert hit (every expert once the N·k routed rows outnumber them).
    - The gate|up output (2I per row) is kept by the two clamps (their inputs are its views); the
      clamped gate and its sigmoid by their product (glu), ``up + 1`` and glu by the gated product:
      four I-wide tensors beside it, where a fused activation keeps act(gate) alone (_experts).
    - ``next_states.index_add_(0, token_idx, weighted_output)`` keeps its source, the weighted
      output (derivatives.yaml, ``index_add``: the source's gradient is formed ``expand_as(source)``).

    Checked on the CPU against transformers 4.55.0 and torch 2.13 (a pack hook over a small
    GptOssMLP, docs/REAL_GPU_MEMORY.md "transformers 4.55's gpt-oss experts loop"): 7I + 3d per routed
    row and the 2E weight copies with the experts trained, 6I + 2d and the copies with them frozen.
    """
    model = plan.model
    d, i, e = model.hidden_size, model.intermediate_size, model.num_experts
    hit = min(e, pairs)
    copies = hit * 3 * d * i
    return [
        Term(
            "experts (looped): gate|up output, clamped gate, its sigmoid, glu, up + 1",
            f"N·k·6I × {w:g} = {sci(pairs * 6 * i)} × {w:g}",
            pairs * 6 * i * w,
        ),
        Term("experts (looped): weighted output (index_add_ keeps its source)", f"N·k·d × {w:g}", pairs * d * w),
        Term(
            "experts (looped): each expert's weights indexed out of the stacked parameters (copies kept)",
            f"{hit} experts × 3·d·I × {w:g} = {sci(copies)} × {w:g}",
            copies * w,
        ),
    ]


def _adapters(plan: Plan, ctx: _Ctx) -> list[Term]:
    """LoRA's rank-r intermediates, and DoRA's two kept products per adapted matrix.

    PEFT's DoraLinearLayer.forward computes ``(m/‖W + sBA‖ − 1)·base + m/‖W + sBA‖·s·BA(x)``
    with the norm detached: the multiplies by the trained magnitude keep the base output and
    the adapter output (N·out each); the weight norm itself runs on detached tensors and
    keeps nothing, and B·A, built from an identity matrix, is a transient of the layer's forward.
    """
    model = plan.model
    if plan.randlora:  # its input keepers may be none of the targets (ctx.lora: randlora_keeps_input)
        return _randlora(plan, ctx)
    if not ctx.lora:
        return []
    if plan.lycoris:
        return _lycoris(plan, ctx)
    if plan.fourierft:
        return _fourierft(plan, ctx)
    if plan.vblora:
        return _vblora(plan, ctx)
    if plan.shira:
        return _shira(plan, ctx)
    if plan.boft:
        return _boft(plan, ctx)
    if plan.adalora:
        return _adalora(plan, ctx)
    if plan.oft:
        return _oft(plan, ctx)
    n = ctx.n
    shapes = model.linear_shapes()
    if model.recurrent_mixer:  # a hybrid layer's own targets (layer_targets), the mixer's among them
        shapes = {**shapes, **dict.fromkeys((*MIXER_TARGETS, *GDN_IN_PROJ.get(model.family, ())), (0, 0))}
    ab = ctx.adapter_out
    if model.num_experts > 1 and not model.recurrent_mixer:  # an MLP target's adapters by what it reaches
        count = sum(_token_copies(plan, nm) for nm in ctx.lora if nm in shapes)
        items = [Term("LoRA A outputs (kept for B)", f"{count:g} × N·r × {ab:g}", n * plan.lora.rank * count * ab)]
    else:
        rank_el = sum(n * plan.lora.rank for nm in ctx.lora if nm in shapes)
        items = [Term("LoRA A outputs (kept for B)", f"{len(ctx.lora)} × N·r × {ab:g}", rank_el * ab)]
    if plan.method is Method.DORA:
        # get_lora_weight's lora_B(lora_A(torch.eye(in))) (in², then in × out) is used only
        # through .detach(): its graph dies with the layer's forward, so no block keeps it
        # (huggingface/peft v0.21.2 src/peft/tuners/lora/dora.py; the "reference cycle" that
        # kept it was the measuring tool's module hooks, tools/measure/NOTES.md, branch h76memtr).
        targets, experts = plan.lora.targets, plan.linear_experts  # every kind of block's (adapter_blocks), as a mean
        outs = (
            model.over_blocks(
                lambda dense: sum(out * copies for _, out, copies in model.adapted_matrices(targets, experts, dense))
            )
            / model.num_layers
        )
        items.append(
            Term(
                "DoRA: base and adapter outputs kept for the magnitude",
                f"N·Σout × ({ctx.ca:g} + {ab:g})",
                n * outs * (ctx.ca + ab),
            )
        )
    return items


def _token_copies(plan: Plan, target: str) -> float:
    """How many of a token's adapter passes one target of a mixture-of-experts block makes (ModelSpec.target_rows):
    1 for attention's; an MLP target's top-k routed experts (transformers 4.x: E copies, each on k / E of the
    tokens) and its shared expert's one, or none where neither is reached; a dense layer's MLP once (a block's mean
    over the kinds of adapter_blocks)."""
    model = plan.model
    if target not in MLP_TARGETS:
        return 1.0
    share = model.routed_share
    rows = model.target_rows(target, plan.linear_experts)
    return sum(held * c * (share if routed else 1.0) for held, _, _, c, routed in rows)


def dora_forward_transient(plan: Plan, head: bool = True) -> Term | None:
    """The largest tensors one DoRA layer makes and frees inside its own forward, for the widest adapted matrix
    (the output head's too when it is adapted and ``head``), or None without DoRA.

    huggingface/peft v0.21.2 (the release wheel; the same from 0.19.0) src/peft/tuners/lora/dora.py
    ``DoraLinearLayer``: ``get_lora_weight`` (lines 94-99) builds ``x_eye = torch.eye(in, dtype=lora_A's)`` and
    ``lora_B(lora_A(x_eye)).T``: the identity (in² in the adapter's dtype), under autocast its cast for lora_A's
    matmul (in², kept by that matmul while B·A's graph lives), A·eye (in × r) and B·A (in × out, the matmul's
    dtype). ``forward`` (lines 137-145) then rebinds B·A to its cast to x's dtype, which
    src/peft/tuners/lora/layer.py ``Linear.forward`` (line 1100) has cast to the adapter's (``_cast_input_dtype``;
    the uncast B·A is then freed: nothing saved it), casts the frozen weight to it too (``weight.to(x.dtype)``),
    and ``get_weight_norm`` (lines 86-91) forms ``weight + scaling * lora_weight``: two more out × in tensors.
    All of it is freed when the layer returns (B·A is used only detached), so one layer's share is alive at a
    time: the larger of the moment B·A is made (the identity still held) and the moment the sum is (the
    identity freed, its cast and A·eye still saved by the adapters' matmuls). Measured: tools/measure, Llama 3.2
    1B DoRA at 1 × 256, all-linear and on q, v and the head (benchmarks/accuracy/measured,
    ``llama32-1b-dora-r8-*-b1-s256``; tests/core/test_dora_transient.py)."""
    if plan.method is not Method.DORA:
        return None
    dt = dtypes_for(plan)
    a, c = dt.adapter, (dt.compute if dt.autocast else dt.adapter)
    r = plan.lora.rank
    shapes = plan.model.adapted_shapes(plan.lora.targets, plan.linear_experts)  # every kind of block's
    head_shape = plan.model.head_adapter_shape(plan.lora.targets) if head else None
    if head_shape:
        shapes.append(head_shape)
    if not shapes:
        return None

    def moments(fan_in: int, fan_out: int) -> float:
        eye, ba = fan_in * fan_in, fan_in * fan_out
        saved = eye * c + fan_in * r * c  # the identity's cast (or itself) and A·eye, saved by the matmuls
        built = saved + (eye * a if c != a else 0.0) + ba * c  # the identity itself and B·A
        norm = saved + ba * a + (ba * a if dt.base != a else 0.0) + 2 * ba * a  # B·A in x's dtype, the weight
        return max(built, norm)

    fan_in, fan_out = max(shapes, key=lambda shape: moments(*shape))
    cast = f" + in² × {c:g}" if c != a else ""
    return Term(
        f"DoRA: one layer's B·A built from an identity, in × out = {fan_in} × {fan_out} (freed with the layer)",
        f"max(in² × {a:g}{cast} + in·out × {c:g}, in² × {c:g} + in·out × {a:g} × (3 + weight cast))",
        moments(fan_in, fan_out),
    )


def _lycoris(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's LoHa / LoKr keep per block beyond each target's input copy (huggingface/peft 51c2ff66).

    ``Linear._get_delta_activations`` (src/peft/tuners/loha/layer.py, lokr/layer.py): ``delta_weight =
    self.get_delta_weight(...)``, the whole (out × in) update in the adapter's dtype (float32 under
    autocast_adapter_dtype); ``input = self._cast_input_dtype(input, delta_weight.dtype)``, a copy of the
    input per target (the adapter copy _consumer_inputs counts, as LoRA's); ``F.linear(input, delta_weight)``
    keeps both, the input for the delta's gradient and the delta for the input's. Under autocast F.linear
    casts both to the autocast dtype and keeps those casts (``ctx.adapter_out``). LoHa's ``HadaWeight``
    saves only its four leaf factors; LoKr's ``make_kron`` (torch.kron) keeps w2 when it is a product
    (core.params.lycoris_matrix_tensors), its ``* scale`` nothing. The delta does not scale with the
    tokens: it is one per target per block, kept until that block's backward."""
    matrices = plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts)
    ab = ctx.adapter_out
    delta = sum(fan_in * fan_out * copies for fan_in, fan_out, copies in matrices)
    name = "LoHa" if plan.method is Method.LOHA else "LoKr"
    items = [Term(f"{name}: each target's delta weight, kept by F.linear", f"Σ out·in × {ab:g}", delta * ab)]
    kron = sum(lycoris_matrix_tensors(plan, fan_in, fan_out)[1] * copies for fan_in, fan_out, copies in matrices)
    if kron:  # (under autocast the matmul's output, in the autocast dtype, is what kron's multiply keeps)
        items.append(Term("LoKr: w2 = w2_a @ w2_b, kept by torch.kron", f"Σ b·d × {ab:g}", kron * ab))
    return items


def _fourierft(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's FourierFT keeps per block beyond each target's input copy (huggingface/peft 51c2ff66
    src/peft/tuners/fourierft/layer.py). ``get_delta_weight``: ``dense_spectrum = torch.zeros(out, in)`` (float32),
    ``dense_spectrum[indices[0, :], indices[1, :]] = spectrum.float()`` (the scatter keeps its indices: the 2 × n int64
    ``indices``, a plain dict entry left on the host and copied to the device each forward, ``.to(spectrum.device)``),
    ``torch.fft.ifft2(dense_spectrum).real * scaling`` (the FFT and the scalar multiply keep nothing), then
    ``FourierFTLinear.forward``: ``x = x.to(delta_w.dtype)`` (the float32 copy of the input _consumer_inputs counts, as
    LoKr's) and ``F.linear(x, delta_w)``, which keeps the whole (out × in) delta, in the adapter dtype or, under
    autocast, its cast to the autocast dtype (``ctx.adapter_out``), until the block's backward.
    tools/measure/peft_more_check.py (PEFT 0.18.0, whose forward is 51c2ff66's; torch 2.13 CPU): to the byte."""
    matrices = plan.model.adapted_matrices(plan.lora.targets, plan.linear_experts)
    ab, n = ctx.adapter_out, plan.lora.rank
    delta = sum(fan_in * fan_out * copies for fan_in, fan_out, copies in matrices)
    count = sum(copies for _, _, copies in matrices)
    return [
        Term("FourierFT: each target's delta weight, kept by F.linear", f"Σ out·in × {ab:g}", delta * ab),
        Term("FourierFT: spectrum indices (int64), kept by the scatter", f"{count} × 2·n × 8", count * 2 * n * 8),
    ]


def _adalora(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's AdaLoRA keeps per block beyond each target's input copy (huggingface/peft 51c2ff66
    src/peft/tuners/adalora/layer.py ``SVDLinear.forward``): ``x = self._cast_input_dtype(x, lora_A.dtype)``
    (LoRA's copy, which _consumer_inputs counts), then ``(dropout(x) @ (lora_A * lora_E).T @ lora_B.T) *
    scaling / (ranknum + 1e-5)``. The first matmul keeps its input and ``(A * E).T`` (r × in, a product, not a
    parameter), the second its input x·(A·E)ᵀ (N × r), LoRA's A output; the division keeps ``ranknum + 1e-5``
    (one element a target), the scalar multiply nothing. Under autocast the matmuls cast and keep 16-bit copies:
    of (A·E)ᵀ, and of lora_B.T, a view (no leaf), so the autocast cache holds none of the adapters
    (core.training.storage.copy_terms). tools/measure/lycoris_check.py (PEFT 0.18.0's identical forward, torch
    2.13 CPU) matches to the byte, with and without bf16 autocast. The orthogonal regularisation
    AdaLoraModel.forward adds to a loss (PeftModelForCausalLM and the other task models, not the task-less
    PeftModel) keeps r × r per matrix (1.8 MB at init_r 64 on Llama-3.2-3B's q, v), or under autocast 16-bit
    copies of every A and B: not modelled (docs/REAL_GPU_MEMORY.md, "PEFT's AdaLoRA")."""
    matrices = plan.model.adapted_matrices(ctx.lora, plan.linear_experts)
    ab, r = ctx.adapter_out, plan.lora.rank
    count = sum(copies for _, _, copies in matrices)
    ins = sum(fan_in * copies for fan_in, _, copies in matrices)
    items = [
        Term("AdaLoRA: x·(A·E)ᵀ kept for lora_B", f"{count} × N·r × {ab:g}", count * ctx.n * r * ab),
        Term("AdaLoRA: (A·E)ᵀ kept by its matmul", f"r·Σin × {ab:g}", r * ins * ab),
        Term("AdaLoRA: ranknum + 1e-5 kept by the division", f"{count} × {ctx.adapter:g} B", count * ctx.adapter),
    ]
    if ctx.autocast and ctx.adapter_dtype is not ctx.compute_dtype:
        outs = sum(fan_out * copies for _, fan_out, copies in matrices)
        label = "AdaLoRA: 16-bit cast of lora_B.T (autocast, kept by the matmul)"
        items.append(Term(label, f"r·Σout × {ctx.ca:g}", r * outs * ctx.ca))
    return items


def _oft(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's OFT keeps per block beyond each target's input copy (huggingface/peft 51c2ff66
    src/peft/tuners/oft/layer.py ``Linear.forward`` and ``OFTRotationModule``).

    ``x = self._cast_input_dtype(x, oft_R.weight.dtype)`` then ``oft_R(x)``: the einsum of the input, (N, r, b),
    with the rotation R, (r, b, b), runs as one bmm keeping both; the input is the adapter copy _consumer_inputs
    counts, as LoRA's (N × in, in the adapter's dtype, or the autocast dtype under autocast; none when they
    equal the input's). The frozen base linear then reads the rotated input and keeps nothing for a weight
    gradient. ``_cayley_batch`` builds R every forward from the skew-symmetric Q, (r, b, b): with the default
    five Neumann terms three bmms (Q², Q³, Q⁴) keep Q, Q² and Q³, and the einsum keeps R: (bmms + 1) × r·b²
    = in·b a target, in the adapter's dtype. Under autocast with float32 blocks each bmm casts both its operands
    anew (not leaves: not cached) and keeps the casts, and R is cast for the einsum: (2·bmms + 1) × in·b in
    the autocast dtype. tools/measure/lycoris_check.py (PEFT 0.18.0, whose OFT forward equals 51c2ff66's;
    torch 2.13 CPU) matches to the byte with and without bf16 autocast, at 2, 3, 5 and 7 terms. The
    backward's transients (each bmm's two input gradients, r·b² each) are not modelled."""
    bmms = oft_neumann_bmms()
    cast = ctx.autocast and ctx.adapter_dtype is not ctx.compute_dtype
    kept, size = (2 * bmms + 1, ctx.ca) if cast else (bmms + 1, ctx.adapter)
    squares = sum(
        fan_in * oft_blocks(plan, fan_in)[1] * c
        for fan_in, _, c in plan.model.adapted_matrices(ctx.lora, plan.linear_experts)
    )
    how = "Q, its powers and R" if not cast else "the bmms' 16-bit casts and R's"
    label = f"OFT: the rotation's blocks kept ({how}, Cayley–Neumann, {bmms} bmms)"
    return [Term(label, f"{kept} × Σ in·b × {size:g}", kept * squares * size)]


def _vera(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's VeRA keeps per block (huggingface/peft 51c2ff66 src/peft/tuners/vera/layer.py
    ``Linear.forward``): ``x = self._cast_input_dtype(x, lambda_d.dtype)`` (a float32 copy on a 16-bit base),
    then ``lambda_b * F.linear(lambda_d * F.linear(dropout(x), sliced_A), sliced_B)``. The slices of the shared
    vera_A / vera_B are frozen, so neither F.linear keeps its input for a weight gradient: no copy of x is kept
    (the targets are not in ``ctx.lora``). ``lambda_d * (A x)`` keeps A x (N × r) for lambda_d's gradient and
    ``lambda_b * (B ·)`` keeps B's output (N × out) for lambda_b's: in the adapter's dtype, or the autocast dtype
    under autocast (``ctx.adapter_out``). Under autocast each F.linear casts its frozen weight slice to 16 bits
    anew (autocast caches only leaves that need a gradient) and keeps the cast for its input's gradient:
    r·in + out·r a target. tools/measure/lycoris_check.py (PEFT 0.18.0's same forward, torch 2.13 CPU) matches to
    the byte, with and without bf16 autocast. vera_dropout is not modelled (read configs refuse it)."""
    if not plan.vera:
        return []
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    ab, r = ctx.adapter_out, plan.lora.rank
    outs = sum(fan_out * copies for _, fan_out, copies in matrices)
    count = sum(copies for _, _, copies in matrices)
    items = [
        Term("VeRA: A·x kept for λ_d", f"{count} × N·r × {ab:g}", count * ctx.n * r * ab),
        Term("VeRA: B's output kept for λ_b", f"N·Σout × {ab:g}", ctx.n * outs * ab),
    ]
    if ctx.autocast and ctx.adapter_dtype is not ctx.compute_dtype:
        sliced = sum(r * (fan_in + fan_out) * copies for fan_in, fan_out, copies in matrices)
        label = "VeRA: 16-bit casts of the sliced vera_A, vera_B (autocast, kept by F.linear)"
        items.append(Term(label, f"Σ r·(in + out) × {ctx.ca:g}", sliced * ctx.ca))
    return items


def _miss(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's MiSS keeps per block (huggingface/peft 51c2ff66 src/peft/tuners/miss/layer.py
    ``MissLinear.forward``, init_weights True): ``x = self._cast_input_dtype(x, miss.dtype)`` (a float32 copy on a
    16-bit base, freed once summed), then ``torch.sum(x.reshape(..., in // r, r), dim=-2) @ miss``: the matmul keeps
    the block sum (N × r) for miss_block's gradient, in the adapter's dtype or, under autocast, the autocast dtype
    (``ctx.adapter_out``); the cast, the sum and the add onto the base output keep nothing, and the frozen base linear
    keeps no copy of x (the targets are not in ``ctx.lora``). Under autocast the matmul also keeps the autocast
    cache's 16-bit miss_block, counted with the weights (core.training.storage.copy_terms).
    tools/measure/lycoris_check.py (PEFT 0.18.0, whose forward is 51c2ff66's on a 16-bit base, torch 2.13 CPU):
    16,384 B, and 18,432 B with the cache's casts under bf16 autocast, at r 16 — the rule to the byte."""
    if not plan.miss:
        return []
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    ab, r = ctx.adapter_out, plan.lora.rank
    count = sum(copies for _, _, copies in matrices)
    return [Term("MiSS: block sums kept for miss_block", f"{count} × N·r × {ab:g}", count * ctx.n * r * ab)]


def _vblora(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's VB-LoRA keeps per block beyond each target's input copy (huggingface/peft 51c2ff66
    src/peft/tuners/vblora/layer.py). ``_get_low_rank_matrix``: ``logits.topk(topk, dim=-1)`` (the int64 indices
    kept by the gather), ``F.softmax`` (its output kept), ``vblora_vector_bank[indices]`` (the gathered vectors, k ×
    each sub-vector, kept by the multiply), summed into A (r × in) and B (out × r, a transposed copy); ``forward``:
    ``x.to(bank dtype)`` (the float32 copy _consumer_inputs counts, as LoRA's), ``F.linear(F.linear(x, A), B)``, which
    keeps A, B and x·Aᵀ (N × r). tools/measure/peft_more_check.py (PEFT 0.18.0, whose forward is 51c2ff66's; torch
    2.13 CPU): every kept tensor to the byte."""
    n, r, k, length = ctx.n, plan.lora.rank, VBLORA_TOPK, VBLORA_VECTOR_LENGTH
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    count = sum(copies for _, _, copies in matrices)
    sides = sum((fan_in + fan_out) * copies for fan_in, fan_out, copies in matrices)
    ab, a = ctx.adapter_out, ctx.adapter
    slots = r * sides // length  # sub-vectors of A and B: each picks k bank vectors
    return [
        Term("VB-LoRA: x·Aᵀ outputs (kept for B)", f"{count} × N·r × {ab:g}", count * n * r * ab),
        Term("VB-LoRA: assembled A and B, kept by F.linear", f"r·Σ(in + out) × {ab:g}", r * sides * ab),
        Term(
            "VB-LoRA: gathered bank vectors, top-k indices and weights",
            f"{k} × r·Σ(in + out) × {a:g} + {k} × r·Σ(in + out)/{length} × (8 + {a:g})",
            k * r * sides * a + k * slots * (8 + a),
        ),
    ]


def randlora_keeps_input(fan_in: int, fan_out: int) -> bool:
    """Whether RandLoRA's first matmul on an (out × in) target keeps the input: its weight is the trained scaled
    basis (in ≤ out; huggingface/peft 51c2ff66 src/peft/tuners/randlora/layer.py ``get_scaled_bases`` returns
    ``update_A, update_B`` when ``min_dim == self.in_features``), else the frozen randlora_B slice, which needs no
    input for its gradient."""
    return fan_in <= fan_out


def _randlora(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's RandLoRA keeps per block (huggingface/peft 51c2ff66 src/peft/tuners/randlora/layer.py
    ``Linear.forward``: ``update_B, update_A = get_scaled_bases(...)``, ``x = x.to(update_A.dtype)``,
    ``F.linear(F.linear(x, update_B), update_A) * scaling``). ``UniqueBaseGrad``'s scaled basis, λ × randlora_A × γ,
    (r·bases × min(in, out), the adapter dtype), is kept by the matmul it is the weight of; the other weight is a view
    of the frozen randlora_B. Where in ≤ out the basis is the first matmul's weight: it keeps the input's float32
    copy (_consumer_inputs, :func:`randlora_keeps_input`); else the second's: it keeps the first's output (N ×
    r·bases). tools/measure/peft_more_check.py (PEFT 0.18.0, whose forward is 51c2ff66's; torch 2.13 CPU): to the
    byte."""
    n, r, ab = ctx.n, plan.lora.rank, ctx.adapter_out
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    basis = sum(r * randlora_bases(i, o, r) * min(i, o) * c for i, o, c in matrices)
    middle = sum(r * randlora_bases(i, o, r) * c for i, o, c in matrices if not randlora_keeps_input(i, o))
    items = [Term("RandLoRA: each target's scaled basis λ·A·γ, kept", f"Σ r·bases·min(in, out) × {ab:g}", basis * ab)]
    if middle:
        label = "RandLoRA: the first matmul's output where out < in (kept for γ)"
        items.append(Term(label, f"N × Σ r·bases × {ab:g}", n * middle * ab))
    return items


def _shira(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's SHiRA keeps per block (huggingface/peft 51c2ff66 src/peft/tuners/shira/layer.py
    ``Linear.forward``: ``new_weight = copy.deepcopy(self.base_layer.weight.data)``, ``new_weight +=
    get_delta_weight(...)`` (``torch.sparse_coo_tensor(shira_indices, shira_weight * scaling, shape)``),
    ``F.linear(x, new_weight)``). F.linear keeps the whole new weight (in the base's dtype; under autocast its cast
    to the autocast dtype) for the input's gradient and x itself for the weight's (_consumer_inputs: no cast of its
    own); the sparse tensor keeps its int64 indices (2 × r·(in + out)) and its scaled values (the adapter dtype).
    tools/measure/peft_more_check.py (PEFT 0.18.0, whose forward is 51c2ff66's; torch 2.13 CPU): to the byte."""
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    weights = sum(i * o * c for i, o, c in matrices)
    w = ctx.ca if ctx.autocast else DTYPE_BYTES[plan.base_dtype]
    values = sum(shira_tensor_sizes(plan))
    a = ctx.adapter
    return [
        Term(
            "SHiRA: each target's new weight (copy + sparse delta), kept by F.linear", f"Σ out·in × {w:g}", weights * w
        ),
        Term(
            "SHiRA: the sparse delta's indices (int64) and values",
            f"r·Σ(in + out) × (2 × 8 + {a:g})",
            values * (16 + a),
        ),
    ]


def _boft(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's BOFT keeps per block beyond each target's input, one butterfly factor (huggingface/peft 51c2ff66
    src/peft/tuners/boft/layer.py ``Linear.forward``). Every forward builds ``boft_rotation = torch.eye(in)`` in the
    input's dtype; ``cayley_batch`` solves (I + S) Q = I − S on the float32 (in / b, b, b) blocks (linalg.solve keeps
    its A, LU, pivots (int32) and Q); ``torch.block_diag`` (or the fbd_cuda extension) makes them one in × in float32
    matrix, cast to the input's dtype; ``boft_P.to(x)`` copies the float32 permutation buffer (on the host: storage's
    copy_terms) to the input's dtype on the GPU, and both bmms with it keep that copy; ``butterfly_oft_mat @
    boft_rotation`` keeps the identity; ``x @ boft_rotation`` keeps the product (and x, the input: read as is,
    _consumer_inputs); ``result * boft_scale`` keeps the frozen base's output (N × out) and the float32 scale, and
    the scale's product keeps the ones it multiplied. So per target 3 × in² in the input's dtype (the bmms' and
    matmuls' 16-bit casts under autocast), N·out, 3·in·b float32, in int32 and out × (4 + the input's bytes).
    tools/measure/boft_check.py (PEFT 0.21.2, whose BOFT forward is 51c2ff66's; torch 2.13 CPU): to the byte, with and
    without bf16 autocast. A first layer's input needs no gradient, so its product is not kept there: not modelled
    (one target's in² of the layers' count); nor the backward's in² gradients (transients)."""
    matrices = plan.model.adapted_matrices(ctx.lora, plan.linear_experts)
    xm = DTYPE_BYTES[ctx.model_dtype]
    xb = ctx.ca if ctx.autocast else xm
    a = ctx.adapter
    squares = sum(fan_in * fan_in * c for fan_in, _, c in matrices)
    outs = sum(fan_out * c for _, fan_out, c in matrices)
    solve = sum((3 * boft_blocks(plan, fan_in)[1] * a + 4) * fan_in * c for fan_in, _, c in matrices)
    return [
        Term(
            "BOFT: the identity, boft_P's copy and the rotation, in × in each, kept",
            f"3 × Σ in² × {xb:g}",
            3 * squares * xb,
        ),
        Term("BOFT: the frozen base's output, kept for boft_s", f"N·Σout × {xb:g}", ctx.n * outs * xb),
        Term(
            "BOFT: the Cayley solve's blocks and pivots, the scale vectors",
            f"Σ in·(3·b × {a:g} + 4) + Σout × ({a:g} + {xm:g})",
            solve + outs * (a + xm),
        ),
    ]


# RoAd's angle / scale columns its ops keep per output feature, by variant (huggingface/peft 51c2ff66
# src/peft/tuners/road/layer.py ``_prepare_cols``): road_1 repeats its out/2 angles and scales to out first
# (repeat_interleave: the repeated angles and scales, cos, sin and both products kept, 6 vectors of out); road_2 keeps
# cos, sin and the products (4); road_4's strided halves of the scales are copied by ``flatten`` where the output
# spans more than one group, every real width (6). tools/measure/peft_more_check.py lists them: 6, 4 and 6 (4 on its
# one-group v_proj) out-long float32 vectors a target.
_ROAD_COLUMNS: Final = {RoadVariant.ROAD_1: 6, RoadVariant.ROAD_2: 4, RoadVariant.ROAD_4: 6}


def _road(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What PEFT's RoAd keeps per block (huggingface/peft 51c2ff66 src/peft/tuners/road/layer.py ``Linear.forward``:
    ``result = self._cast_input_dtype(base_layer(x), road_theta.dtype)``, then ``_apply_road``: ``x * first_col +
    rotate_half_x * second_col``, ``rotate_half_x = torch.stack((-x2, x1), dim=1).reshape(x.shape)``). The first
    multiply keeps the base output in the adapter's dtype (a float32 copy of a 16-bit output; elementwise ops are not
    autocast), the second the rotated copy, N × out each a target, for the angles' and scales' gradients; each keeps
    its column (out). The frozen base linear keeps no copy of x. tools/measure/peft_more_check.py (PEFT 0.18.0,
    whose forward is 51c2ff66's; torch 2.13 CPU): the two N × out copies and the columns, to the byte."""
    if not plan.road:
        return []
    matrices = plan.model.adapted_matrices(tuple(t for t in plan.lora.targets if t != HEAD_TARGET), plan.linear_experts)
    ab = ctx.adapter
    outs = sum(fan_out * copies for _, fan_out, copies in matrices)
    columns = _ROAD_COLUMNS[plan.lora.road_variant]
    return [
        Term("RoAd: the output and its rotated half, kept", f"2 × N·Σout × {ab:g}", 2 * ctx.n * outs * ab),
        Term("RoAd: the angle and scale columns, kept", f"{columns} × Σout × {ab:g}", columns * outs * ab),
    ]


# The tensor each projection reads, for IA3's feedforward scaling (one tensor per group).
_IA3_INPUT_GROUPS: Final = {
    "q_proj": "qkv",
    "k_proj": "qkv",
    "v_proj": "qkv",
    "o_proj": "o",
    "gate_proj": "mlp",
    "up_proj": "mlp",
    "down_proj": "down",
}


def _ia3(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What IA3's scalings keep for the vectors' gradients (huggingface/peft 51c2ff66,
    src/peft/tuners/ia3/layer.py ``Linear.forward``).

    Not feedforward: ``result = base_layer(x); result = (result * ia3_scaling).to(result_dtype)``:
    the multiply keeps the projection's raw output (N·out in the matmul's output dtype), a tensor
    nothing else keeps (the readers get the scaled copy). Feedforward:
    ``x = x.to(ia3_l.dtype); (x * ia3_scaling).to(previous_dtype)``: the multiply keeps the input
    cast to the vector's dtype (N·in in the adapter's dtype); where the cast is a no-op (the input
    already in that dtype) the targets reading one tensor keep that one tensor, which the frozen
    projection itself does not keep.
    """
    if plan.method is not Method.IA3:
        return []
    model = plan.model
    out_el = 0.0
    in_copies: dict[tuple[str, int], float] = {}
    ff = set(normalise_ia3_feedforward(plan.lora.ia3_feedforward))
    for name in normalise_lora_targets(plan.lora.targets):
        # What the target adapts in each kind of block (ModelSpec.target_rows: a dense layer's own MLP, a routed
        # expert's vector on top-k / experts of the tokens, a shared expert's on all, all-linear's router), as a
        # block's mean over the layers.
        for k, (held, fan_in, fan_out, copies, routed) in enumerate(model.target_rows(name, plan.linear_experts)):
            tokens = held * copies * (model.routed_share if routed else 1.0)
            if name not in ff:
                out_el += tokens * fan_out
                continue
            after_norm = _norm_output(model, ctx) or ctx.model_dtype
            reads = ctx.compute_dtype if name in ("o_proj", "down_proj") else after_norm
            key = (_IA3_INPUT_GROUPS[name] if reads is ctx.adapter_dtype else name, k)
            in_copies[key] = tokens * fan_in
    items = []
    if out_el:
        formula = f"N·Σout × {ctx.ca:g} = {sci(ctx.n * out_el)} × {ctx.ca:g}"
        items.append(Term("IA3: raw outputs of the output-scaled targets", formula, ctx.n * out_el * ctx.ca))
    in_el = sum(in_copies.values())
    if in_el:
        formula = f"N·Σin × {ctx.adapter:g} = {sci(ctx.n * in_el)} × {ctx.adapter:g}"
        items.append(Term("IA3: feedforward inputs in the vectors' dtype", formula, ctx.n * in_el * ctx.adapter))
    return items


def _litgpt_adapter(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What LitGPT's Adapter / Adapter v2 keep in a block (Lightning-AI/litgpt 0f021f3, the
    resource tables' adapter rows).

    lit_gpt/adapter.py ``CausalSelfAttention.scaled_dot_product_attention``: each block from
    ``adapter_start_layer`` on attends a second time, ``ay = F.scaled_dot_product_attention(q, ak,
    av, amask)`` over the P prompt keys (ak, av: batch 1), and returns ``y + gating_factor * ay``:
    the gate's multiply keeps ay (N·q_width, the kernel's own output). PyTorch's fused kernels need
    q, k and v of one batch size (aten/src/ATen/native/transformers/sdp_utils_cpp.h
    ``check_batch_size_and_num_heads``), so a micro-batch of one runs the memory-efficient kernel
    (its output and float32 logsumexp, N·H) and a larger one the math path (the query scaled by
    √scale, N·q_width, and the B·H·S·P probabilities). Under v2 the blocks below the start layer
    train too, so the prompt terms are averaged over every block (adapted share shown).

    lit_gpt/adapter_v2.py ``AdapterV2Linear.forward``: ``adapter_scale * (linear(x) + adapter_bias)``;
    the trained scale's multiply keeps ``linear(x) + adapter_bias`` (N·out, the model's dtype) of
    every linear layer. ``adapter_filter`` trains norm_1 / norm_2: lit_gpt/rmsnorm.py
    ``(self.weight * x_normed).to(dtype)`` then keeps x_normed, float32 (a LayerNorm keeps its
    input, mean and rstd either way).
    """
    if not plan.litgpt_adapter:
        return []
    model = plan.model
    n, q = ctx.n, model.q_width
    length = plan.lora.adapter_prompt_length
    blocks = model.num_layers - plan.gradless_layers
    share = max(0, model.num_layers - plan.lora.adapter_start_layer) / blocks if blocks else 0.0
    of = "" if share == 1.0 else f" × {share:.2f} (adapted share of the blocks)"
    items = [
        Term("adaption prompt: attention output kept by the gate" + of, f"N·{q} × {ctx.ca:g}", n * q * ctx.ca * share)
    ]
    if ctx.b == 1:
        lse = n * model.num_heads * 4.0 * share
        items.append(Term("adaption prompt: logsumexp (memory-efficient SDPA, float32)" + of, "N·H × 4", lse))
    else:
        scaled = n * q * ctx.ca * share
        items.append(Term("adaption prompt: query × √scale (math SDPA)" + of, f"N·{q} × {ctx.ca:g}", scaled))
        probs = n * model.num_heads * length * ctx.ca * share
        items.append(Term("adaption prompt: probabilities (math SDPA)" + of, f"N·H·{length} × {ctx.ca:g}", probs))
    if plan.method is Method.ADAPTER_V2:
        d, i = model.hidden_size, model.intermediate_size
        mlp = ((2 * i if model.gated_mlp else i) + d) * (model.experts_per_token if model.num_experts > 1 else 1)
        out = q + 2 * model.kv_width + d + mlp + (model.num_experts if model.num_experts > 1 else 0)
        items.append(
            Term("Adapter v2: linear outputs + bias, kept by the scales", f"N·{out} × {ctx.ca:g}", n * out * ctx.ca)
        )
        if model.norm != "layernorm":
            norms = min(2, model.norms_per_layer)
            items.append(
                Term("Adapter v2: trained norms' normalised input (float32)", f"{norms} × N·d × 4", norms * n * d * 4.0)
            )
    return items


@last_answer
def layer_activations(plan: Plan, trainable_block: bool, mixer: str = ATTENTION_MIXER, mlp: bool = True) -> LayerActs:
    """Saved tensors of one transformer block for micro-batch B and sequence S.

    A hybrid's layers (core.hybrid) differ in their parts: ``mixer`` is the token mixer after the first norm
    (:data:`ATTENTION_MIXER`, :data:`MAMBA2_MIXER`, or "" for none: a Nemotron-H MLP layer), ``mlp`` whether the
    MLP (or mixture of experts) and its norm follow (Granite 4.0-H and Bamba: every layer; Nemotron-H: its own
    layers). An adapter is counted in a layer only where its target matrix is (:func:`layer_targets`)."""
    model = plan.model
    # The head's adapter (lm_head) is outside the blocks: outside_blocks keeps what it saves.
    # An adapter reading each target's input (LoHa / LoKr, OFT and AdaLoRA too).
    lora_like = plan.lora_adapters or plan.lycoris or plan.oft or plan.adalora or plan.fourierft
    lora_like = lora_like or plan.vblora or plan.randlora or plan.shira or plan.boft
    block_targets = tuple(t for t in plan.lora.targets if t != HEAD_TARGET) if lora_like else ()
    if plan.randlora:  # the targets whose first matmul keeps the input (randlora_keeps_input)
        shapes = model.linear_shapes()
        block_targets = tuple(t for t in block_targets if t in shapes and randlora_keeps_input(*shapes[t]))
    if model.recurrent_mixer:
        block_targets = layer_targets(block_targets, mixer, mlp, model.family)
    ctx = _context(plan, trainable_block, block_targets)
    n, d = ctx.n, model.hidden_size
    kernels = unsloth_kernels(plan)
    qkv: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")
    if model.latent_attention:  # the attention norm's output is read by the query's and the latent's projections
        qkv = ("q_a_proj" if model.q_lora_rank else "q_proj", "kv_a_proj_with_mqa")
    items: list[Term] = []
    replicated: list[int] = []
    gathered: list[int] = []

    def outside_tp(terms: list[Term], readers: list[Term] | None = None) -> None:
        """Replicated terms; ``readers`` (the column-parallel matmuls' inputs) go last."""
        terms = terms + (readers or [])
        replicated.extend(range(len(items), len(items) + len(terms)))
        if readers:
            gathered.extend(range(len(items) + len(terms) - len(readers), len(items) + len(terms)))
        items.extend(terms)

    attn_readers: list[Term] = []
    if mixer != ATTENTION_MIXER:
        if mixer == MAMBA2_MIXER:
            readers = _consumer_inputs(ctx, d, ("in_proj",), False, "mixer norm output (in_proj input)")
            outside_tp(_norm(model, ctx, "mixer norm", []), readers)
            items += _mamba2(plan, ctx)
        elif mixer == GDN_MIXER:
            names = GDN_IN_PROJ.get(model.family, ())
            readers = _consumer_inputs(ctx, d, names, False, "mixer norm output (input projections' input)")
            outside_tp(_norm(model, ctx, "mixer norm", []), readers)
            items += _gated_deltanet(plan, ctx)
    elif model.post_norm:
        # OLMo-2: q/k/v and the MLP read the residual stream itself; the norms sit on the
        # sub-block outputs (o_proj's and down_proj's, in the compute dtype).
        outside_tp([], _consumer_inputs(ctx, d, qkv, model.fused_qkv, "block input (q/k/v input)"))
    else:
        attn_readers = _consumer_inputs(ctx, d, qkv, model.fused_qkv, "attention norm output", _norm_output(model, ctx))
        if "qkv" in kernels:
            attn_readers = [_unsloth_input("q/k/v input (Unsloth LoRA_QKV keeps X only)", ctx, d)]
        outside_tp(_norm(model, ctx, "attention norm", []), attn_readers)
    if mixer == ATTENTION_MIXER and model.latent_attention:
        items += _latent_attention(plan, ctx)
    elif mixer == ATTENTION_MIXER:
        items += _unsloth_o(plan, ctx, _attention(plan, ctx)) if "o" in kernels else _attention(plan, ctx)
    if model.dropout:
        outside_tp([Term("residual dropout mask", "N·d × 1", n * d)])
    if mlp:
        _mlp_part(plan, ctx, kernels, attn_readers, outside_tp, items)
    items += _adapters(plan, replace(ctx, lora=_unpatched(ctx.lora, kernels)) if kernels else ctx)
    items += _ia3(plan, ctx)
    items += _vera(plan, ctx)
    items += _miss(plan, ctx)
    items += _road(plan, ctx)
    items += _litgpt_adapter(plan, ctx)
    items += _bnb_kept_inputs(plan, ctx)
    return LayerActs(tuple(items), tuple(replicated), tuple(gathered))


def _mlp_part(
    plan: Plan,
    ctx: _Ctx,
    kernels: frozenset[str],
    attn_readers: list[Term],
    outside_tp: Callable[..., None],
    items: list[Term],
) -> None:
    """The block's second half: the MLP's norm and readers, the MLP or experts, the post-norms."""
    model, n, d = plan.model, ctx.n, plan.model.hidden_size
    mlp_in = ("gate_proj", "up_proj") if model.gated_mlp else ("up_proj",)
    mlp_readers = []
    if model.num_experts == 1:
        mlp_readers = _consumer_inputs(ctx, d, mlp_in, model.fused_gate_up, "MLP input", _norm_output(model, ctx))
    if "mlp" in kernels:
        mlp_readers = [_unsloth_input("MLP input (Unsloth LoRA_MLP keeps X)", ctx, d)]
    if model.post_norm:
        outside_tp(_norm(model, ctx, "post-attention norm", [], in_bytes=ctx.ca))
        outside_tp([], mlp_readers)
    elif model.parallel_residual and model.norms_per_layer == 1:
        outside_tp([], _shared_norm_readers(model, ctx, attn_readers, mlp_readers))
    else:
        if model.norms_per_layer == 4:  # Gemma-2/3's post-attention norm on the attention output
            outside_tp(_norm(model, ctx, "post-attention norm", []))
        # A parallel block's MLP norm reads the block input, which the attention norm keeps already.
        outside_tp(_norm(model, ctx, "MLP norm", [], input_kept=model.parallel_residual), mlp_readers)
    mlp = _unsloth_mlp(plan, ctx) if "mlp" in kernels else _mlp(plan, ctx)
    if model.num_experts > 1:  # the router's input and probabilities are not split (_experts puts them first)
        routed = next(i for i, t in enumerate(mlp) if t.label.startswith("router")) + 1
        outside_tp(mlp[:routed])
        mlp = mlp[routed:]
    items += mlp
    if model.dropout:
        outside_tp([Term("residual dropout mask", "N·d × 1", n * d)])
    if model.post_norm:
        outside_tp(_norm(model, ctx, "post-MLP norm", [], in_bytes=ctx.ca))
    elif model.norms_per_layer == 4:
        outside_tp(_norm(model, ctx, "post-MLP norm", []))


# A hybrid's adapter targets by the part of a layer their matrix is in (transformers 5.25.0 module names):
# the Mamba-2 mixer's in_proj / out_proj, attention's q / k / v / o, the MLP's.
_MIXER_TARGETS: Final = {
    ATTENTION_MIXER: ("q_proj", "k_proj", "v_proj", "o_proj"),
    MAMBA2_MIXER: MIXER_TARGETS,
    GDN_MIXER: MIXER_TARGETS,
}


def layer_targets(targets: tuple[str, ...], mixer: str, mlp: bool, family: str = "") -> tuple[str, ...]:
    """The adapter targets a hybrid's layer of this kind has a matrix for. A Gated DeltaNet layer's ``in_proj``
    is its input projections, each with an adapter of its own (core.model.GDN_IN_PROJ)."""
    mine = _MIXER_TARGETS.get(mixer, ()) + (("gate_proj", "up_proj", "down_proj") if mlp else ())
    kept = tuple(t for t in targets if t in mine)
    if mixer == GDN_MIXER and "in_proj" in kept:
        kept = tuple(n for t in kept for n in (GDN_IN_PROJ.get(family, (t,)) if t == "in_proj" else (t,)))
    return kept


def mixer_shape(plan: Plan) -> MixerShape:
    """The plan's Mamba-2 mixer (its ModelSpec's core.hybrid.RecurrentMixer) at its micro-batch and sequence."""
    model, w = plan.model, plan.workload
    return MixerShape(w.micro_batch, w.seq_len, _recurrent_mixer(model), model.recurrent_chunk)


def _recurrent_mixer(model: ModelSpec) -> RecurrentMixer:
    mixer = model.mixer
    if mixer is None:
        raise PlanError("model.recurrent_mixer", "", "a hybrid model's recurrent mixer")
    return mixer


def hybrid_stack(plan: Plan, trainable: bool) -> tuple[tuple[int, LayerActs], ...]:
    """A hybrid's layers by kind, each kind's count and one layer's saved tensors: Granite 4.0-H, Bamba,
    Qwen3-Next and Qwen3.5 run attention or the mixer, then the MLP (or experts), in every layer; Nemotron-H one
    of attention, the mixer or the MLP (ModelSpec.hybrid_layer_counts)."""
    attention, recurrent, mlp = plan.model.hybrid_layer_counts()
    kinds: tuple[tuple[int, LayerActs], ...]
    if plan.model.family == "nemotron_h":
        kinds = (
            (attention, layer_activations(plan, trainable, ATTENTION_MIXER, False)),
            (recurrent, layer_activations(plan, trainable, MAMBA2_MIXER, False)),
            (mlp, layer_activations(plan, trainable, "", True)),
        )
    else:
        mixer = GDN_MIXER if plan.model.recurrent_mixer == GDN_MIXER else MAMBA2_MIXER
        kinds = (
            (attention, layer_activations(plan, trainable)),
            (recurrent, layer_activations(plan, trainable, mixer)),
        )
    return tuple((count, acts) for count, acts in kinds if count)


def _mamba2(plan: Plan, ctx: _Ctx) -> list[Term]:
    """A Mamba-2 mixer's saved tensors after in_proj (core.training.mamba): mamba_ssm's fused function keeps
    out_proj inside it (its input recomputed in the backward); the torch path's out_proj keeps its input as any
    projection (the ``.to(dtype)`` copy of the gated norm's float32 output, in the model's dtype)."""
    m = mixer_shape(plan)
    if plan.mamba_kernels:
        return kernel_path_terms(m, ctx.ca)
    terms = torch_path_terms(m, ctx.ca, ctx.autocast, ctx.trainable, ctx.mode == "mixed")
    return terms + _consumer_inputs(ctx, m.inner, ("out_proj",), False, "Mamba-2: out_proj input")


def deltanet_shape(plan: Plan) -> gdn.DeltaNetShape:
    """The plan's Gated DeltaNet layer (its ModelSpec's core.hybrid.RecurrentMixer: value heads, value dim, key
    heads as groups, key dim as state) at its micro-batch and sequence."""
    w = plan.workload
    return gdn.DeltaNetShape(w.micro_batch, w.seq_len, _recurrent_mixer(plan.model))


def _gated_deltanet(plan: Plan, ctx: _Ctx) -> list[Term]:
    """A Gated DeltaNet layer's saved tensors after its input projections (core.training.gdn), then out_proj's
    input as any projection's (the gated norm's output in the model's dtype)."""
    m = deltanet_shape(plan)
    if plan.mamba_kernels:
        terms = gdn.kernel_path_terms(m, ctx.ca, ctx.autocast, ctx.trainable)
    else:
        terms = gdn.torch_path_terms(m, ctx.ca, ctx.autocast, ctx.trainable)
    return terms + _consumer_inputs(ctx, m.value_width, ("out_proj",), False, "Gated DeltaNet: out_proj input")


def _shared_norm_readers(model: ModelSpec, ctx: _Ctx, attn_readers: list[Term], mlp_readers: list[Term]) -> list[Term]:
    """The MLP's saved input in a parallel block with one shared norm (Falcon-7B, Phi-1.5 / 2).

    Lightning-AI/litgpt 5895df1 (and lit-gpt 8641822) litgpt/model.py ``Block.forward``: ``x_normed =
    self.norm_1(x)``, attention reads it, and with ``shared_attention_norm`` the MLP reads the same
    ``x_normed`` (``x = self.mlp(x_normed) + attention_output + x``); transformers' PhiDecoderLayer.forward
    (models/phi/modeling_phi.py at 007750f3) and FalconDecoderLayer.forward with ``parallel_attn`` (the MLP
    reads ``attention_layernorm_out``) do the same. There is no second norm, and where the matmuls keep
    the tensor itself (no per-matmul cast, no adapter copy) the MLP's input is the tensor the q/k/v
    projections keep already: nothing more. Cast copies are each matmul's own and stay."""
    if attn_readers and mlp_readers and _readers_keep_itself(ctx, _norm_output(model, ctx) or ctx.model_dtype):
        return []
    return mlp_readers


_KERNEL_GROUPS: Final = {
    "qkv": ("q_proj", "k_proj", "v_proj"),
    "o": ("o_proj",),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
}


def _unpatched(lora: tuple[str, ...], kernels: frozenset[str]) -> tuple[str, ...]:
    """The adapted projections PEFT's own forward still runs (their N·r intermediates kept):
    Unsloth's kernels recompute X·A in the backward and keep no N·r tensor."""
    patched = {name for group in kernels for name in _KERNEL_GROUPS[group]}
    return tuple(name for name in lora if name not in patched)


def _unsloth_input(label: str, ctx: _Ctx, d: int) -> Term:
    """A fast LoRA kernel's saved input X: the norm's output, in the hidden states' dtype
    (unslothai/unsloth 015bdef, unsloth/kernels/fast_lora.py: ``ctx.save_for_backward(..., X)``)."""
    return Term(label, f"N·d × {ctx.res:g}", ctx.n * d * ctx.res)


def _unsloth_o(plan: Plan, ctx: _Ctx, attention: list[Term]) -> list[Term]:
    """With Unsloth's LoRA_W on o_proj the projection keeps its input (the attention output)
    itself, not PEFT's cast copy for the adapter (unsloth/kernels/fast_lora.py LoRA_W.forward)."""
    kept = [t for t in attention if t.label != "o_proj input cast for its adapter"]
    if sdpa_kernel(plan) is Kernel.EAGER and not any(t.label == "attention output (o_proj input)" for t in kept):
        q_el = ctx.n * plan.model.q_width
        kept.append(Term("attention output (o_proj input)", f"N·H·hd × {ctx.ca:g}", q_el * ctx.ca))
    return kept


def _unsloth_mlp(plan: Plan, ctx: _Ctx) -> list[Term]:
    """Unsloth's LoRA_MLP.forward saves X, e = gate output and g = up output, all in X's dtype;
    h = act(e)·g, the down projection's input, is recomputed in place by the backward
    (unslothai/unsloth 015bdef, unsloth/kernels/fast_lora.py LoRA_MLP.forward/backward)."""
    el = ctx.n * plan.model.intermediate_size
    formula = f"2 × N·I × {ctx.ca:g} = 2 × {sci(el)} × {ctx.ca:g}"
    return [Term("gate, up outputs (Unsloth LoRA_MLP; act(gate)·up recomputed)", formula, 2 * el * ctx.ca)]


def _bnb_kept_inputs(plan: Plan, ctx: _Ctx) -> list[Term]:
    """bitsandbytes before 0.43.2: ``MatMul4Bit.forward`` set ``ctx.tensors = (A, B)`` whenever
    its input needs a gradient (bitsandbytes 0.43.1, bitsandbytes/autograd/_functions.py;
    0.43.2 keeps ``(None, B)``): every 4-bit layer keeps its input until the backward. Only the
    inputs nothing else keeps are added: the attention and MLP norms' outputs when no adapter
    keeps them as they are, the attention output under eager attention (the fused kernels keep
    it anyway), and down_proj's input. A reference on ``ctx`` is not a saved tensor, so
    non-reentrant checkpointing does not drop it; the reentrant checkpointing QLoRA recipes use
    runs the forward under no_grad, and only the recomputed block keeps them (as this block)."""
    model = plan.model
    if not plan.quantised_base or not plan.bnb_legacy or plan.quant is Quant.INT8 or model.num_experts > 1:
        return []
    n, d, i = ctx.n, model.hidden_size, model.intermediate_size
    res = ctx.res

    def kept_by_adapter(names: tuple[str, ...]) -> bool:
        return any(nm in ctx.lora for nm in names) and not ctx.adapter_copies(ctx.model_dtype)

    items = []
    if not kept_by_adapter(("q_proj", "k_proj", "v_proj")):
        items.append(Term("4-bit q/k/v input kept (bitsandbytes < 0.43.2)", f"N·d × {res:g}", n * d * res))
    if sdpa_kernel(plan) is Kernel.EAGER and "o_proj" not in ctx.lora:
        items.append(
            Term("4-bit o_proj input kept (bitsandbytes < 0.43.2)", f"N·q × {ctx.ca:g}", n * model.q_width * ctx.ca)
        )
    mlp_in = ("gate_proj", "up_proj") if model.gated_mlp else ("up_proj",)
    shared_norm = model.parallel_residual and model.norms_per_layer == 1  # the MLP reads the q/k/v input
    if not kept_by_adapter(mlp_in) and not shared_norm:
        items.append(Term("4-bit MLP input kept (bitsandbytes < 0.43.2)", f"N·d × {res:g}", n * d * res))
    if "down_proj" not in ctx.lora or ctx.adapter_copies(ctx.compute_dtype):
        items.append(Term("4-bit down_proj input kept (bitsandbytes < 0.43.2)", f"N·I × {ctx.ca:g}", n * i * ctx.ca))
    return items


@fills_fields
@dataclass(frozen=True)
class LossMemory:
    """The loss's tensors at its two moments. Tuples: ``loss_memory`` keeps its last answer
    (core.memo.last_answer), so a caller that could append to it would change every later answer."""

    forward: tuple[Term, ...]  # live at the end of the forward pass (logits, their float32 copy, log-softmax)
    backward: tuple[Term, ...]  # live at the start of the backward pass
    # Held by the loop through every phase of the backward and the optimizer step (the key/value cache of a
    # model output the loop keeps: kv_cache_terms); split over tensor-parallel ranks like the rest.
    held: tuple[Term, ...] = ()


@last_answer
def loss_memory(plan: Plan, loss_parallel: bool = False) -> LossMemory:
    """The logits and the cross-entropy, as transformers' ForCausalLMLoss computes it.

    The forward keeps the logits (16 bits under autocast), their float32 upcast and the
    float32 log-softmax the backward needs; transformers before 4.49 also a shifted float32
    copy, and before 4.46 no 16-bit logits (``training_transformers``: :func:`_logits_terms`).
    The training loop drops the model output before ``backward()`` (as the HF Trainer does), so
    the backward starts with the log-softmax, the gradient flowing into it and the gradient it
    produces: three float32 N·V tensors.

    A loop that keeps the output through the backward (``loop_keeps_output``) holds its logits
    as a fourth (:func:`_kept_output_logits`): float32 from
    transformers 4.31 to 4.45 (4.37.2 ``LlamaForCausalLM.forward`` rebinds ``logits =
    logits.float()`` and returns that tensor in ``CausalLMOutputWithPast(logits=logits)``; Answer.AI's
    README pins ``transformers!=4.38.*,!=4.39.*``), the lm_head's own dtype from 4.46.

    ``loss_parallel``: the cross-entropy of vocabulary-sharded logits under PyTorch's
    ``loss_parallel()`` (see :func:`_loss_parallel`), which holds one float32 N·V tensor more
    in the forward and in the backward.

    The model's key/value cache, when its forward returns one (``training_kv_cache``), is part of
    the same output: :func:`kv_cache_terms`.
    """
    loss = _loss_terms(plan, loss_parallel)
    cache = kv_cache_terms(plan)
    if not cache:
        return loss
    return LossMemory(loss.forward + cache, loss.backward, cache if plan.loop_keeps_output else ())


def kv_cache_terms(plan: Plan) -> tuple[Term, ...]:
    """The key/value cache a transformers model returns from its training forward (``training_kv_cache``:
    ``use_cache=True``, the config's default). huggingface/transformers v4.31.0
    models/llama/modeling_llama.py: ``LlamaAttention.forward`` sets ``past_key_value = (key_states,
    value_states) if use_cache else None`` after RoPE and before ``repeat_kv``, so each layer keeps its K
    and V at kv_heads × head_dim; ``LlamaModel.forward`` collects them in ``next_decoder_cache`` and
    returns them as ``past_key_values``, turning use_cache off only under its own gradient checkpointing.
    They live from their layer's forward to the end of the model's (where the loss is taken), and through
    every phase of the backward and the optimizer step when the loop keeps the output (``loop_keeps_output``:
    LossMemory.held; Answer.AI's loop drops it after the step).

    Which of them are extra: a block recomputed by full checkpointing (PyTorch's checkpoint_wrapper) keeps
    none of its forward's tensors, so every layer's K and V are; without checkpointing the attention's own
    saved K and V are the same tensors (``repeat_kv`` returns its input when n_rep == 1, and flash-attn
    takes K and V unrepeated), so only grouped-query heads repeated for eager or SDPA attention leave the
    cached ones extra. Selective policies are taken as no checkpointing (they keep some of the block). The
    cache is counted with the loss, on the stage that holds the head."""
    model = plan.model
    if not plan.training_kv_cache or plan.stack is Stack.MEGATRON:
        return ()
    recomputed = plan.checkpointing and plan.checkpoint_policy is CheckpointPolicy.FULL
    flash_attn = (Attention.FLASH, Attention.FLASH1, Attention.FLASH3)  # the flash-attn package's kernels
    repeated = model.num_kv_heads < model.num_heads and plan.attention not in flash_attn
    if not (recomputed or repeated):
        return ()
    ca = dtypes_for(plan).compute
    n = plan.workload.micro_batch * plan.workload.seq_len
    layers = model.kv_layers  # a hybrid's attention layers; its recurrent states are small beside them
    return (
        Term(
            "key/value cache returned by the forward (past_key_values), every layer",
            f"2 × L × N × kv·head_dim × {ca:g} = 2 × {layers} × {sci(n)} × {model.kv_width} × {ca:g}",
            2 * layers * n * model.kv_width * ca,
        ),
    )


def _loss_terms(plan: Plan, loss_parallel: bool) -> LossMemory:
    """The logits and the cross-entropy alone (see :func:`loss_memory`)."""
    model = plan.model
    n = plan.workload.micro_batch * plan.workload.seq_len
    v = model.vocab_size
    nv = n * v
    if plan.fused_loss:
        return _fused_loss(plan, n)
    if plan.unsloth:
        return _unsloth_loss(plan, n)
    if plan.litgpt:
        return _litgpt_loss(plan, n)
    if plan.chunked_loss:
        chunk = -(-nv // 8)
        fwd = [Term("loss chunk: logits and log-softmax (float32), 1/8 of N·V", "2 × (N·V/8) × 4", chunk * 8)]
        bwd = [Term("loss chunk gradients (float32), 1/8 of N·V", "3 × (N·V/8) × 4", chunk * 12)]
        return LossMemory(tuple(fwd), tuple(bwd))
    ca = dtypes_for(plan).compute
    if loss_code_runs(plan, "flash_loss"):
        return _flash_loss(n, nv, ca)
    if loss_code_runs(plan, "compiled_loss"):
        return _compiled_loss(nv, ca)
    if loss_code_runs(plan, "logprob_head"):
        return _logprob_head(plan, n)
    if plan.stack is Stack.MEGATRON:
        megatron = _megatron_loss(nv, ca, plan.megatron_ce_fusion)
        if not model.final_softcap:
            return megatron
        # Gemma 2 under Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge d9f7643b, src/megatron/bridge/models/
        # gemma/gemma2_provider.py: Gemma2OutputLayer.forward -> logit_softcapping, scale * tanh(logits /
        # scale)): the division and the product by a scalar save nothing, tanh saves its result; the capped
        # logits then go to Megatron's own cross-entropy, whichever fusion the plan names.
        tanh = Term("soft-capped logits (tanh, kept)", f"N·V × {ca:g}", nv * ca)
        return LossMemory((*megatron.forward, tanh), (*megatron.backward, tanh))
    # The loop's own F.cross_entropy on 16-bit logits (plan.loss_16bit): aten's log_softmax and
    # nll_loss in the logits' dtype, no float32 copy (see _aten_loss_terms).
    half = plan.loss_16bit and not loss_parallel and loss_16bit_matters(plan)
    lp, what = (int(ca), "16-bit") if half else (4, "float32")
    # transformers' own loss, by release (plan.training_transformers); not a loop's own 16-bit loss nor
    # torchtitan's loss_parallel.
    release = None if half or loss_parallel else plan.training_transformers
    fwd = _logits_terms(plan, nv, ca, half, release)
    if loss_parallel:
        fwd_loss, bwd = _loss_parallel(nv)
        fwd += fwd_loss
    else:
        fwd_loss, bwd = _aten_loss_terms(nv, lp, what)
        fwd += fwd_loss
    if model.final_softcap:
        bwd.append(Term("soft-capped logits (tanh, kept)", f"N·V × {ca:g}", nv * ca))
    return LossMemory(tuple(fwd), tuple(bwd) + _kept_output_logits(plan, nv, ca, release))


def _logits_terms(plan: Plan, nv: int, ca: float, half: bool, release: TransformersLoss | None) -> list[Term]:
    """The logits and what the loss copies of them before its log-softmax, at the cross-entropy.
    ``release`` is the transformers release line of the model's own loss (None: another loss
    on the same logits: a loop's own 16-bit loss, ``half``, makes no float32 upcast; loss_parallel does).

    Read in the released wheels, ``models/llama/modeling_llama.py`` ``LlamaForCausalLM.forward``
    (Mistral's and Qwen2's the same in 4.40.0 and 4.45.0) and ``loss/loss_utils.py``
    ``ForCausalLMLoss``:

    - 4.31.0 - 4.45.0 (read in 4.31.0, 4.36.0, 4.37.2, 4.38.0, 4.40.0, 4.44.0, 4.45.0): ``logits =
      logits.float()`` (4.45: ``self.lm_head(...).float()``) rebinds the logits, so a 16-bit lm_head
      output is freed (no backward saves it: ``mm`` saves its inputs, ``_to_copy`` nothing), then
      ``shift_logits = logits[..., :-1, :].contiguous()`` copies them, float32, before
      ``CrossEntropyLoss()``; the output returns the float32 logits;
    - 4.46.0 - 4.48.0 (read in 4.46.0, 4.47.0, 4.48.0): ``ForCausalLMLoss`` upcasts a local
      ``logits.float()`` and makes the same shifted copy; the model's 16-bit logits stay in the output;
    - 4.49.0 on (read in 4.49.0, 4.50.0, 5.0.0): ``labels = nn.functional.pad(labels, (0, 1),
      value=ignore_index)`` shifts the labels and ``logits.float().view(-1, vocab_size)`` goes to the
      cross-entropy: no shifted copy.

    The shifted copy has (S − 1)/S of the logits' rows; it is counted at N·V, as the log-softmax is."""
    f = f"N·V × 4 = {sci(nv)} × 4"
    upcasts = release is _TRANSFORMERS_LOSS_V4_31_TO_4_45 or (
        release is not None and plan.model.family in LOGITS_UPCAST
    )
    rebound = upcasts and ca == 2
    if rebound:
        terms = [Term("logits rebound to float32 (logits.float(); the 16-bit ones freed)", f, nv * 4)]
    else:
        terms = [Term("logits", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)]
    if plan.model.final_softcap:
        terms.append(Term("soft-capped logits (tanh, kept)", f"N·V × {ca:g}", nv * ca))
    if ca == 2 and not half and not rebound:
        terms.append(Term("logits upcast to float32", f, nv * 4))
    if release in (_TRANSFORMERS_LOSS_V4_31_TO_4_45, _TRANSFORMERS_LOSS_V4_46_TO_4_48):
        terms.append(Term("shifted logits copy (logits[..., :-1, :].contiguous(), float32)", f, nv * 4))
    return terms


def _kept_output_logits(plan: Plan, nv: int, ca: float, release: TransformersLoss | None) -> tuple[Term, ...]:
    """The logits of a model output the loop keeps (``loop_keeps_output``), counted at the backward's start
    beside the loss's three N·V tensors: Answer.AI's train.py (AnswerDotAI/fsdp_qlora e877dda, lines
    841-894) binds ``output = model(...)``, runs ``loss.backward()`` and ``optimizer.step()``, and only then
    sets ``output = None``. transformers 4.31 - 4.45 return the float32 logits they rebound
    (:func:`_logits_terms`); 4.46 on return the lm_head's own."""
    if not plan.loop_keeps_output:
        return ()
    lp = 4 if release is TransformersLoss.V4_31_TO_4_45 else int(ca)
    what = "float32" if lp == 4 else "16-bit"
    return (
        Term(
            f"the model output's {what} logits, kept by the loop through the backward",
            f"N·V × {lp:g} = {sci(nv)} × {lp:g}",
            nv * lp,
        ),
    )


def _aten_loss_terms(nv: int, lp: int, what: str) -> tuple[list[Term], list[Term]]:
    """aten's cross-entropy (log_softmax, then nll_loss) on logits of ``lp`` bytes: the forward
    keeps the log-softmax (``_log_softmax`` saves its result); the backward holds it, the
    gradient into it (``nll_loss_backward``: zeros with the target's −1 scattered in) and the
    logits' gradient (``_log_softmax_backward_data``), each in the input's dtype (pytorch/pytorch
    aten/src/ATen/native/SoftMax.cpp, LossNLL.cpp; derivatives.yaml ``_log_softmax``: ``result``).
    transformers' ForCausalLMLoss upcasts first (``logits.float()``), so there ``lp`` is 4; a loop's
    own F.cross_entropy on a 16-bit model's logits runs in 2 bytes (rasbt/LLMs-from-scratch 908dd2f
    ch05/10_llm-training-speed ``calc_loss_batch``, its model cast with ``.to(torch.bfloat16)``)."""
    f = f"N·V × {lp:g} = {sci(nv)} × {lp:g}"
    fwd = [Term(f"log-softmax kept for the backward ({what})", f, nv * lp)]
    bwd = [
        Term(f"log-softmax kept for the backward ({what})", f, nv * lp),
        Term(f"gradient into the log-softmax ({what})", f, nv * lp),
        Term(f"gradient of the logits ({what})", f, nv * lp),
    ]
    return fwd, bwd


def _loss_parallel(nv: int) -> tuple[list[Term], list[Term]]:
    """The float32 cross-entropy of one rank's vocabulary shard under PyTorch's
    ``torch.distributed.tensor.parallel.loss_parallel()``, which torchtitan enters whenever TP > 1
    (pytorch/torchtitan 9dec370: ``train.py`` ``get_train_context(parallel_dims.loss_parallel_enabled)``,
    the head ``ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)``). Its handlers
    (pytorch/pytorch 3be1238 and 02eef6b alike, ``torch/distributed/tensor/parallel/loss.py``) replace
    aten's kernels:

    - ``_log_softmax`` is the decomposition with all-reduces inserted: ``shifted = x - x_max``,
      ``torch.sum(torch.exp(shifted))``, then ``result = shifted - shifted_logsumexp``; the float32
      input, ``shifted`` and ``exp(shifted)`` (or ``result``) are alive at once, two N·V tensors
      beside the input where aten's fused kernel writes one;
    - ``_nll_loss_and_log_softmax_backward`` fuses both backwards: ``grad_input =
      torch.zeros_like(x)``, the scatter of −1 into it, then ``(grad_input + torch.exp(x)) *
      grad_output``; with the kept log-softmax ``x`` that is four N·V tensors alive when the
      product is allocated (``_log_softmax_backward_handler`` only returns it), where aten's
      ``nll_loss_backward`` and ``_log_softmax_backward_data`` hold three.

    Returns the forward's loss terms (after the logits and their float32 copy) and the backward's."""
    f = f"N·V × 4 = {sci(nv)} × 4"
    fwd = [Term("loss parallel's log-softmax: x − max, then its exp or the result (float32)", f"2 × {f}", 2 * nv * 4)]
    bwd = [
        Term("log-softmax kept for the backward (float32)", f, nv * 4),
        Term("loss parallel's backward: zeros the target's −1 is scattered into (float32)", f, nv * 4),
        Term("loss parallel's backward: that plus exp(log-softmax) (float32)", f, nv * 4),
        Term("gradient of the logits: that times the loss gradient (float32)", f, nv * 4),
    ]
    return fwd, bwd


def _megatron_loss(nv: int, ca: float, fusion: MegatronCeFusion = MegatronCeFusion.OFF) -> LossMemory:
    """Megatron-Core's cross-entropy of one rank's vocabulary shard, as ``compute_language_model_loss``
    picks it (NVIDIA/Megatron-LM d98e8a64, ``megatron/core/models/common/language_module/
    language_module.py``; GPTModel calls it with the output layer's 16-bit logits at any TP).

    Off, ``tensor_parallel.vocab_parallel_cross_entropy`` (``megatron/core/tensor_parallel/
    cross_entropy.py``, the same at 000c4ac2 and d98e8a64): ``_VocabParallelCrossEntropy.forward``
    upcasts the logits with ``.float()`` (a copy when they are 16-bit), subtracts the maximum, takes
    the exponential (``torch.exp(..., out=exp_logits)``) and divides by its sum, all in place, and
    saves that softmax; ``backward`` turns the saved softmax into the gradient in place
    (``grad_2d[arange_1d, masked_target_1d] -=``, ``grad_input.mul_``), which autograd casts to the
    logits' dtype (``validate_outputs``). One float32 N·V tensor where aten's kernels hold three.

    Native (``megatron/core/fusions/fused_cross_entropy.py``): the same steps, each function wrapped in
    ``jit_fuser``, which is ``torch.compile`` on torch >= 2.2 (``megatron/core/jit.py``). The
    backward's ``calculate_gradients`` does the indexed ``-=`` on a view of the saved softmax, a graph
    input: functionalised it is an out-of-place ``index_put`` whose result is multiplied and only then
    copied back. Inductor's reinplacing takes an op on a view of a graph input in place only when a
    ``copy_`` writes that op's own result (or a view of it) back into the input (pytorch/pytorch
    010c65b0 ``torch/_inductor/fx_passes/reinplace.py`` ``can_inplace``); here the copy's source is the
    product, so the ``index_put`` is lowered as a clone of the softmax scattered into: a new float32
    N·V buffer beside it, alive while the fused multiply writes the softmax and
    ``grad_input.to(torch.bfloat16)``. One float32 N·V tensor more than off in the backward; the
    forward's steps (the ``.float()`` copy, then ``-=``, ``exp(out=)`` and ``div_`` on the copy itself,
    pointwise results Inductor writes into the mutated input) keep what off keeps.

    Transformer Engine's (``te_parallel_cross_entropy``: NVIDIA/TransformerEngine 4329ff84, the
    revision d98e8a64 pins, ``transformer_engine/pytorch/cross_entropy.py`` and
    ``pytorch/triton/cross_entropy.py``): ``online_softmax_kernel`` reads the logits for each row's
    max and sum, ``cross_entropy_kernel`` writes the gradient into the logits themselves
    (``tl.store(X_ptr + X_offsets, X_block.to(grad_dtype))``) and the logits are saved; the backward
    scales them in place (``element_mul_kernel``) and returns them. No float32 N·V tensor: the
    16-bit logits, kept from the forward through the backward."""
    f = f"N·V × 4 = {sci(nv)} × 4"
    logits = Term("logits", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)
    if fusion is MegatronCeFusion.TE:
        kept = Term(
            "logits, turned into their gradient in place by Transformer Engine's kernel (kept)",
            f"N·V × {ca:g} = {sci(nv)} × {ca:g}",
            nv * ca,
        )
        return LossMemory((kept,), (kept,))
    grad = Term("the softmax turned into the logits' gradient in place (float32)", f, nv * 4)
    if fusion is MegatronCeFusion.NATIVE:
        copy = Term("the compiled index_put's result beside the softmax (float32, torch.compile)", f, nv * 4)
        bf16 = Term(
            "the logits' gradient cast to bfloat16 in the compiled function", f"N·V × 2 = {sci(nv)} × 2", nv * 2
        )
        backward = [grad, copy, bf16]
    else:
        backward = [grad]
        if ca != 4:
            backward.append(Term(f"the logits' gradient cast to {ca:g} B (autograd)", f"N·V × {ca:g}", nv * ca))
    if ca == 4:  # float32 logits: .float() returns them, and they become the softmax in place
        softmax = Term("logits turned into the softmax in place (float32, kept)", f, nv * 4)
        return LossMemory((softmax,), tuple(backward))
    softmax = Term("float32 copy turned into the softmax in place (kept)", f, nv * 4)
    return LossMemory((logits, softmax), tuple(backward))


# The cross-entropy under torch.compile, as torchtitan runs it since d1f62be7 (Feb 2025,
# pytorch/torchtitan torchtitan/components/loss.py at e7c0cae: ``cross_entropy(pred.flatten(0, 1).float(),
# labels)`` wrapped in ``torch.compile`` when ``training.compile``). In the compiled graph the
# float32 upcast and log_softmax are pointwise ops and row reductions (amax, sum of exp), which
# Inductor's min-cut partitioner (pytorch/pytorch 00c07b93 torch/_functorch/partitioners.py)
# may recompute: the cheapest cut is the 16-bit logits (the graph's input) and one max and one
# log-sum per row, not the float32 log-softmax. The backward's nll_loss scatter into zeros is
# rewritten as a pointwise ``where`` (``scatter_upon_const_tensor``, torch/_inductor/fx_passes,
# written for cross-entropy's backward), so one fused kernel reads the logits and the row stats and
# writes the logits' gradient in their dtype (the ``.float()`` cast's backward is fused in too).
COMPILED_LOSS_NOTE: Final = "cross-entropy under torch.compile"


def _compiled_loss(nv: int, ca: float) -> LossMemory:
    """The logits and the compiled cross-entropy (see COMPILED_LOSS_NOTE): the forward keeps the
    logits only; the backward holds them and their gradient, both in the logits' dtype."""
    logits = Term(f"logits, kept by the {COMPILED_LOSS_NOTE}", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)
    grad = Term(f"gradient of the logits (one fused kernel, {ca:g} B)", f"N·V × {ca:g}", nv * ca)
    return LossMemory((logits,), (logits, grad))


# flash-attn's fused cross-entropy, ``flash_attn.losses.cross_entropy.CrossEntropyLoss``: the loss of
# llm-foundry's MPT by default (``loss_fn: fused_crossentropy``, constructed as
# ``FusedCrossEntropyLoss(ignore_index=-100)``, no ``inplace_backward``): mosaicml/examples 71dd21bd
# (the Apr 2023 A100 40GB table's commit) examples/llm/src/models/mosaic_gpt/mosaic_gpt.py
# ComposerMosaicGPT.__init__ with flash-attn==0.2.8 and xentropy-cuda-lib@v0.2.8 (examples/llm/requirements.txt);
# mosaicml/llm-foundry b2a43a147, 5e85bd62d and 495218376 llmfoundry/models/mpt/modeling_mpt.py
# ComposerMPTCausalLM.__init__ the same (flash-attn 1.0.9 or 2.3.2 / 2.4.2 / 2.5.0 in setup.py). Its
# ``loss`` passes ``outputs.logits.view(-1, V)``: the 16-bit logits, no float32 upcast.
FLASH_LOSS_NOTE: Final = "flash-attn's fused cross-entropy"


def _flash_loss(n: int, nv: int, ca: float) -> LossMemory:
    """flash-attn's fused cross-entropy (see FLASH_LOSS_NOTE), the same in both of its kernels.

    Dao-AILab/flash-attention v0.2.8 and v1.0.9 ``flash_attn/losses/cross_entropy.py``
    ``SoftmaxCrossEntropyLossFn``: ``forward`` calls ``xentropy_cuda_lib.forward`` (``csrc/xentropy/
    xentropy_kernel.cu`` ``host_softmax_xentropy``: ``losses`` and ``max_log_sum_exp``, N float32 each,
    computed from the logits in their dtype) and ``ctx.save_for_backward(logits, lse, labels_local)``;
    ``backward`` calls ``host_softmax_xentropy_backward``, whose ``Tensor gI = inplace ? logits_ :
    at::empty_like(logits_)`` is the logits' gradient in their dtype. From v2.3.2 (v2.4.2, v2.5.0)
    ``flash_attn/ops/triton/cross_entropy.py`` ``CrossEntropyLoss`` (an autograd Function) does the same:
    ``losses``/``lse`` ``torch.empty(..., dtype=torch.float)``, ``ctx.save_for_backward(logits, lse,
    labels)``, ``dlogits = logits if ctx.inplace_backward else torch.empty_like(logits)``.
    ``inplace_backward`` is False by default in every one and llm-foundry never sets it: the forward
    keeps the logits, the backward holds them and their gradient, both in the logits' dtype."""
    logits = Term(f"logits, kept by {FLASH_LOSS_NOTE}", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)
    rows = Term("per-token loss and log-sum-exp (float32)", "2 × N × 4", 2 * n * 4)
    grad = Term(f"gradient of the logits (empty_like the logits, {ca:g} B)", f"N·V × {ca:g}", nv * ca)
    return LossMemory((logits, rows), (logits, grad, Term("log-sum-exp kept (float32)", "N × 4", n * 4)))


# prime-rl's RL head, ``FusedOutputLinear`` (PrimeIntellect-ai/prime-rl 8718eb14
# src/prime_rl/trainer/models/layers/lm_head.py): its vocabulary chunk, ``fused_lm_head_chunk_size``, which
# rl/config.py ``auto_setup_fused_lm_head_chunk_size`` sets to 2048 whenever the model's impl is not
# liger_kernel (trainer/config.py refuses one under 512).
PRIME_RL_LOGPROB_CHUNK: Final = 2048
# The per-token tensors about the head, bytes a token: the int64 labels and the float32 log-sum-exp the
# Function saves (``ctx.save_for_backward(hidden, weight, labels, logz)``), the float32 log-probs and entropy
# the loop's ``out`` keeps (rl/train.py, after ``shift_tensor_right``), the policy loss's float32 coefficient
# saved by its product (rl/loss.py ``-(coeff.detach() * trainer_logprobs)``) and the float32 gradient into
# the log-probs (``grad_logprobs.to(torch.float32)``): 8 + 4 + 4 + 4 + 4 + 4.
PRIME_RL_PER_TOKEN_BYTES: Final = 28


def _logprob_head(plan: Plan, n: int) -> LossMemory:
    """prime-rl's chunked log-prob / entropy head (PrimeIntellect-ai/prime-rl 8718eb14,
    ``models/layers/lm_head.py`` ``_ChunkedLogProbEntropyFn``), which its RL trainer puts in place of the
    head (``inject_prime_lm_head``) and whose per-token log-probs feed the policy loss (rl/loss.py: every
    tensor there is per token, none N × V). No logits tensor: C = :data:`PRIME_RL_LOGPROB_CHUNK` columns at a
    time. Unlike Liger's fused loss (:func:`_fused_loss`) it forms no gradient in the forward: it saves the
    head's input, its weight, the labels and the log-sum-exp, and the backward recomputes each chunk.

    Forward, per chunk: ``logits = hidden @ w_chunk.t()`` (N·C in the compute dtype), ``logits_f =
    logits.to(torch.float32)`` (the same tensor when it is float32 already), then
    ``_online_logsumexp_and_weighted_update``'s ``chunk_exp = torch.exp(chunk_logits - m_new.unsqueeze(-1))``
    (the difference and the exp alive at once) and ``chunk_exp * chunk_logits``: the logits, their float32
    copy and two float32 N·C tensors at its high point.

    Backward: ``grad_hidden = torch.zeros_like(hidden)`` (N·d) and ``grad_weight = torch.zeros_like(weight)``
    (V·d, in the weight's dtype, made whether or not the head trains), filled chunk by chunk. In each chunk
    after the first, Python rebinds ``logits``, ``logits_f``, ``p`` and ``grad_logits`` only once their new
    values exist, so at ``p = torch.exp(logits_f - logz.unsqueeze(-1))`` the new logits and their float32
    copy, the difference, the new ``p``, and the previous chunk's ``p`` and ``grad_logits`` are alive: the
    logits and five float32 N·C tensors (four when the logits are float32: ``logits_f`` is them), and the
    previous chunk's ``grad_w_chunk`` (C·d). Measured (tools/measure/logprob_head_check.py, prime-rl's own
    Function on torch 2.13.0 CPU, bf16, N 512, V 5,000): 14 B per N·C at the forward's high point, 22 B per N·C
    beside the two gradients at the backward's (``aten.exp``), each with under 50 B a token left over."""
    model = plan.model
    d, v = model.hidden_size, model.vocab_size
    dt = dtypes_for(plan)
    ca = dt.compute
    c = min(v, PRIME_RL_LOGPROB_CHUNK)
    nc = n * c
    logits = Term(f"log-prob head: one {c:,}-column chunk's logits", f"N·C × {ca:g} = {sci(nc)} × {ca:g}", nc * ca)
    chunk = [logits]
    if ca != 4:
        chunk.append(Term("log-prob head: that chunk in float32 (logits.to(torch.float32))", "N·C × 4", nc * 4))
    per_token = Term(
        "log-prob head: labels, log-sum-exp, log-probs, entropy, the policy loss's coefficient and gradient",
        f"N × {PRIME_RL_PER_TOKEN_BYTES}",
        n * PRIME_RL_PER_TOKEN_BYTES,
    )
    fwd = [
        *chunk,
        Term("log-prob head: the online logsumexp's exp(x − m) and exp·x (float32)", "2 × N·C × 4", 2 * nc * 4),
        per_token,
    ]
    w = DTYPE_BYTES[model_dtype(plan)]
    bwd = [
        *chunk,
        Term("log-prob head: x − log-sum-exp and the new softmax chunk (float32)", "2 × N·C × 4", 2 * nc * 4),
        Term("log-prob head: the previous chunk's softmax and logits' gradient (float32)", "2 × N·C × 4", 2 * nc * 4),
        Term("log-prob head: the input's gradient (zeros_like(hidden))", f"N·d × {dt.residual:g}", n * d * dt.residual),
        Term("log-prob head: the weight's gradient (zeros_like(weight))", f"V·d × {w:g}", v * d * w),
        Term("log-prob head: the previous chunk's weight gradient", f"C·d × {w:g}", c * d * w),
        per_token,
    ]
    return LossMemory(tuple(fwd), tuple(bwd))


# litgpt/finetune/lora.py and full.py (Lightning-AI/litgpt 00af8b0): ``model(input_ids, lm_head_chunk_size=128)``.
LITGPT_HEAD_CHUNK: Final = 128


def _litgpt_loss(plan: Plan, n: int) -> LossMemory:
    """LitGPT's fine-tuning loss (Lightning-AI/litgpt 00af8b0, ``finetune/lora.py`` ``fit`` and
    ``utils.py`` ``chunked_cross_entropy``). The head runs on 128-token slices of the sequence
    and returns a list of logits in the compute dtype; ``F.cross_entropy`` on each slice keeps
    its log-softmax output, in the same dtype (no float32 upcast). The loop's ``logits`` keeps
    every slice's logits through the backward, and is rebound only when the next forward has
    returned: until then the previous micro-batch's logits, and the whole graph they lead back
    to, stay alive. So the forward ends with two N·V tensors (this batch's logits and the last
    batch's, then its log-probabilities), and the backward starts with the logits, the
    log-probabilities (freed slice by slice) and one slice's two gradients.

    With bitsandbytes before 0.43.2 that old graph still holds every 4-bit layer's input
    (``MatMul4Bit`` keeps ``ctx.tensors = (A, B)``, bitsandbytes 0.42.0
    ``autograd/_functions.py``, an attribute of the node, not a saved tensor that the backward
    releases). With the head quantised (:func:`litgpt_quantised_head`) every slice's forward
    and input gradient dequantise the whole head (:func:`_litgpt_head_dequantised`): the last
    slice's forward does it on top of everything the forward keeps, the first slice's
    backward on top of what the backward starts with."""
    model = plan.model
    v = model.vocab_size
    ca = dtypes_for(plan).compute
    nv = n * v
    rows = min(n, plan.workload.micro_batch * LITGPT_HEAD_CHUNK)
    logits = Term("logits of every 128-token slice (kept by the loop)", f"N·V × {ca:g} = {sci(nv)} × {ca:g}", nv * ca)
    fwd = [
        logits,
        Term("the previous batch's logits, then the log-probabilities", f"N·V × {ca:g}", nv * ca),
        *_litgpt_stale_inputs(plan, n, ca),
    ]
    bwd = [
        logits,
        Term("log-probabilities of every slice (freed slice by slice)", f"N·V × {ca:g}", nv * ca),
        Term("one slice's gradients (log-probabilities, logits)", f"2 × {rows:,} × V × {ca:g}", 2 * rows * v * ca),
    ]
    if litgpt_quantised_head(plan):
        fwd += _litgpt_head_dequantised(plan, "forward")
        bwd += _litgpt_head_dequantised(plan, "backward")
    return LossMemory(tuple(fwd), tuple(bwd))


# Lightning's BitsandbytesPrecision quantises every 4-bit weight from a float16 copy
# (Lightning-AI/pytorch-lightning 2.1.0 to 2.4.0, src/lightning/fabric/plugins/precision/bitsandbytes.py,
# _Linear4bit: ``w = weight.contiguous().to(device=..., dtype=torch.half)`` before
# ``bnb.functional.quantize_4bit(w, ...)``), and bitsandbytes records the input's dtype in the
# QuantState (0.42.0 functional.py quantize_4bit: ``QuantState(..., dtype=A.dtype, ...)``).
LIGHTNING_4BIT_SOURCE_DTYPE: Final = Dtype.FP16


def _litgpt_head_dequantised(plan: Plan, phase: str) -> list[Term]:
    """The 4-bit head, dequantised for one slice's matmul (bitsandbytes 0.42.0
    ``autograd/_functions.py`` ``MatMul4Bit``: ``F.dequantize_4bit(B, quant_state).to(A.dtype)`` in
    the forward, ``.to(grad_output.dtype)`` in the backward). ``dequantize_4bit`` returns the
    QuantState's dtype, float16 under Lightning (LIGHTNING_4BIT_SOURCE_DTYPE), and ``.to`` copies
    it into the compute dtype while the float16 tensor is still alive: two V·d tensors at once,
    one when the compute dtype is float16 itself."""
    model = plan.model
    vd = model.vocab_size * model.hidden_size
    src = DTYPE_BYTES[LIGHTNING_4BIT_SOURCE_DTYPE]
    terms = [Term(f"4-bit head dequantised for a slice's {phase} (float16)", f"V·d × {src:g}", vd * src)]
    compute = compute_dtype(plan)
    if compute is not LIGHTNING_4BIT_SOURCE_DTYPE:
        ca = DTYPE_BYTES[compute]
        terms.append(Term(f"its copy in the compute dtype ({phase})", f"V·d × {ca:g}", vd * ca))
    return terms


def _litgpt_stale_inputs(plan: Plan, n: int, ca: float) -> list[Term]:
    """The previous micro-batch's 4-bit layer inputs that LitGPT's loop keeps alive through its
    ``logits`` until the next forward returns (bitsandbytes < 0.43.2, see :func:`_litgpt_loss`):
    each block's q/k/v input, o_proj input, MLP input and down_proj input, and the head's. In a
    parallel block with one shared norm the MLP input is the q/k/v input (_shared_norm_readers)."""
    model = plan.model
    if not plan.quantised_base or not plan.bnb_legacy or plan.quant is Quant.INT8 or model.num_experts > 1:
        return []
    shared = model.parallel_residual and model.norms_per_layer == 1
    inputs = 1 if shared else 2  # the q/k/v input and the MLP input, one tensor under a shared norm
    per_block = inputs * model.hidden_size + model.q_width + model.intermediate_size
    head = model.hidden_size if litgpt_quantised_head(plan) else 0
    total = n * (model.num_layers * per_block + head) * ca
    label = "the previous batch's 4-bit layer inputs (bitsandbytes < 0.43.2)"
    return [Term(label, f"N·(L·({inputs}d + q + I) + d) × {ca:g}", total)]


def _fused_loss(plan: Plan, n: int) -> LossMemory:
    """Liger's fused linear cross-entropy (linkedin/Liger-Kernel ead96b61,
    ``ops/fused_linear_cross_entropy.py``): the forward runs the head and the loss on chunks
    of ``next_power_of_2(⌈N / ⌈V/d⌉⌉)`` rows, so a chunk's logits are about the size of the
    hidden states, computes the input's gradient (``grad_input``, N·d in the input's dtype)
    chunk by chunk and keeps it for the backward, with the head's gradient when it trains
    (counted with the gradients). Cut Cross-Entropy keeps less still (no logits chunk in
    global memory): it is counted as Liger, an upper bound."""
    model = plan.model
    d, v = model.hidden_size, model.vocab_size
    ca = dtypes_for(plan).compute
    factor = -(-v // d)
    rows = min(n, 1 << max(0, (-(-n // factor) - 1).bit_length()))
    chunk = rows * v
    grad_input = Term("fused loss: input gradient formed in the forward (kept)", f"N·d × {ca:g}", n * d * ca)
    fwd = [
        Term("fused loss: one chunk's logits", f"{rows:,} rows × V × {ca:g}", chunk * ca),
        grad_input,
        Term("fused loss: per-token loss (float32)", "N × 4", n * 4),
    ]
    head_trains = plan.method is Method.FULL or (plan.method is Method.FROZEN and not model.tie_embeddings)
    if head_trains:
        g = dtypes_for(plan).grad
        fwd.append(Term("fused loss: the head's gradient, formed in the forward", f"V·d × {g:g}", v * d * g))
    return LossMemory(tuple(fwd), (grad_input,))


# Unsloth's fused cross-entropy (unslothai/unsloth-zoo ce232d6,
# unsloth_zoo/fused_losses/cross_entropy_loss.py _get_chunk_multiplier, get_chunk_size): the
# target of one chunk's float32 logits is min(½ × free memory at the first call, 4 GiB). Half
# the free memory depends on the run (it is read once, on the card, before the first loss): the
# 4 GiB cap is the documented upper bound, which the estimate takes.
UNSLOTH_CE_TARGET_BYTES: Final = 4 * 1024**3
# Inside a chunk, what the eager ops would hold at once per logit: the logits in the head's
# dtype, their float32 copy, the float32 log-softmax, its float32 gradient and the gradient in
# the head's dtype (unsloth-zoo ce232d6, UnslothFusedLoss.forward: ``F.linear``, ``.float()``,
# ``F.cross_entropy`` under ``torch.func.grad_and_value``). The chunk runs under torch.compile
# when it can, whose live set was not measured: this eager set is the upper bound.
UNSLOTH_CE_FLOAT32_PER_LOGIT: Final = 3


def unsloth_ce_chunks(n: int, vocab: int) -> int:
    """How many token chunks Unsloth's fused loss splits N·V into (``get_chunk_size`` with the
    4 GiB target): 1 when the float32 logits fit the target, else the exact ratio rounded up
    to a multiple of 4."""
    logits = n * vocab * 4
    if logits <= UNSLOTH_CE_TARGET_BYTES:
        return 1
    return -(-logits // (4 * UNSLOTH_CE_TARGET_BYTES)) * 4


def _unsloth_loss(plan: Plan, n: int) -> LossMemory:
    """Unsloth's fused cross-entropy (unsloth-zoo ce232d6, ``UnslothFusedLoss``; the loss of
    FastLanguageModel's ``CausalLM_fast_forward`` in unslothai/unsloth 015bdef whenever labels are
    given): the hidden states are split into token chunks (:func:`unsloth_ce_chunks`, ``torch.chunk``
    rounds a chunk up), each chunk's head, loss and input gradient computed in the forward; the
    input gradient (``torch.empty_like(hidden_states)``, N·d in their dtype) is kept for the
    backward, which returns a new scaled N·d tensor. Unsloth before 2025.8 (unsloth 806bee2 moved
    ``CausalLM_fast_forward`` from Cut Cross-Entropy to this loss) and FastModel with a frozen
    head call Cut Cross-Entropy instead: that is the plan's ``fused_loss``, which comes first."""
    model = plan.model
    head_trains = plan.method is Method.FULL or (plan.method is Method.FROZEN and not model.tie_embeddings)
    if not unsloth_fast_path(plan) and not head_trains:
        # FastModel's rewritten forward calls Cut Cross-Entropy when the head is frozen
        # (unsloth-zoo ce232d6, unsloth_zoo/compiler.py cross_entropy_replacement_1 ->
        # loss_utils.py fused_linear_cross_entropy): counted as Liger, an upper bound.
        return _fused_loss(plan, n)
    d, v = model.hidden_size, model.vocab_size
    dt = dtypes_for(plan)
    ca, res = dt.compute, dt.residual
    chunks = unsloth_ce_chunks(n, v)
    rows = -(-n // chunks)
    per_logit = 2 * ca + 4 * UNSLOTH_CE_FLOAT32_PER_LOGIT
    grad_input = Term("Unsloth fused loss: input gradient formed in the forward (kept)", f"N·d × {res:g}", n * d * res)
    fwd = [
        Term(
            f"Unsloth fused loss: one chunk of {chunks} ({rows:,} rows × V): logits, float32 copy, "
            "log-softmax and gradients (eager, upper bound)",
            f"{rows:,} × V × ({2 * ca:g} + 3 × 4)",
            rows * v * per_logit,
        ),
        grad_input,
    ]
    if head_trains:
        g = dt.grad
        fwd.append(Term("Unsloth fused loss: the head's gradient, formed in the forward", f"V·d × {g:g}", v * d * g))
    scaled = Term("Unsloth fused loss: the backward's scaled input gradient", f"N·d × {res:g}", n * d * res)
    return LossMemory(tuple(fwd), (grad_input, scaled))


def _prompt_encoder(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What P-tuning's MLP encoder keeps (huggingface/peft 51c2ff66 src/peft/tuners/p_tuning/model.py
    ``PromptEncoder.forward``: ``mlp_head(embedding(indices))`` on the batch's B × num_virtual_tokens
    indices, ``PeftModel.get_prompt`` expanding them per sample): the first Linear's input, and each
    ReLU's output, which the ReLU's backward and the next Linear (its weight trains) both read, all in
    the encoder's dtype (the adapter role: PEFT builds it in float32 and casts only its output,
    ``prompts.to(inputs_embeds.dtype)``). Prompt tuning's embedding keeps only its int64 indices."""
    if plan.method is not Method.P_TUNING:
        return []
    d = plan.model.hidden_size
    el = plan.workload.micro_batch * plan.lora.virtual_tokens * 3 * d  # d in, h = d hidden twice
    formula = f"B·n_virtual·(d + 2h) × {ctx.adapter:g} = {sci(el)} × {ctx.adapter:g}"
    return [Term("P-tuning encoder: its input and ReLU outputs", formula, el * ctx.adapter)]


def outside_blocks(plan: Plan) -> LayerActs:
    """Saved tensors outside the blocks: embedding dropout, the final norm and its reader.

    All lie in the sequence region (replicated under TP without sequence parallelism); the
    head's input is the column-parallel head's ``gathered`` input (see LayerActs)."""
    model = plan.model
    n = plan.workload.micro_batch * plan.workload.seq_len
    d = model.hidden_size
    head_trains = plan.method is _METHOD_FULL or (plan.method is _METHOD_FROZEN and not model.tie_embeddings)
    head_trains = head_trains or head_copy_trains(plan)  # PEFT's modules_to_save / tied trainable tokens
    adapted = plan.lora_adapters and model.head_adapter_shape(plan.lora.targets) is not None
    lora = (HEAD_TARGET,) if adapted else ()
    ctx = _context(plan, plan.method in (_METHOD_FULL, _METHOD_FROZEN), lora)
    head_ctx = _context(plan, head_trains, lora)  # the same context but whether the head trains
    head_input = _norm_output(model, ctx)
    readers = _consumer_inputs(head_ctx, d, (HEAD_TARGET,), False, "final norm output (head input)", head_input)
    items = _norm(model, ctx, "final norm", readers)
    gathered = tuple(range(len(items) - len(readers), len(items)))
    if adapted:
        items += _head_adapter(plan, ctx)
    if model.dropout:
        items.append(Term("embedding dropout mask", "N·d × 1", n * d))
    items += _prompt_encoder(plan, ctx)
    dt = dtypes_for(plan)
    items += merged_head_copy(plan, dt)
    if plan.method is _METHOD_ADAPTER_V2:  # lit_gpt/adapter_v2.py: ln_f trains, lm_head is an AdapterV2Linear
        if model.norm != "layernorm":
            items.append(Term("Adapter v2: final norm's normalised input (float32)", "N·d × 4", n * d * 4.0))
        v = model.vocab_size
        items.append(
            Term("Adapter v2: logits + bias, kept by the head's scale", f"N·V × {dt.compute:g}", n * v * dt.compute)
        )
    if needs_mask(plan) and sdpa_kernel(plan) is _KERNEL_EFFICIENT:
        s = plan.workload.seq_len
        mask = plan.workload.micro_batch * s * s * dt.compute
        items.append(Term("sliding-window mask kept by the attention kernel", f"B·S² × {dt.compute:g}", mask))
    return LayerActs(tuple(items), tuple(range(len(items))), gathered)


def _head_adapter(plan: Plan, ctx: _Ctx) -> list[Term]:
    """What a LoRA on the output head keeps beyond its input (kept through _consumer_inputs: the frozen
    head alone keeps none, ``ctx.saves``): the rank-r output of A, which B's weight gradient reads, and
    DoRA's products (see :func:`_adapters`) over the head's V outputs. The three forwards are one
    shape: huggingface/peft 51c2ff66 src/peft/tuners/lora/layer.py ``Linear.forward``
    (``result + lora_B(lora_A(dropout(x))) * scaling``), Lightning-AI/litgpt 00af8b0d litgpt/lora.py
    ``LoRALinear.forward`` (``(self.lora_dropout(x) @ A.T @ B.T) * self.scaling``) and pytorch/torchtune
    ff594c23 torchtune/modules/peft/lora.py ``LoRALinear.forward`` (``lora_b(lora_a(dropout(x)))``): the
    multiply by the float ``scaling`` and the sum keep nothing. The V-wide tensors the branch makes
    (B's output, its scaled copy, the scaled gradient in the backward) live a moment each, beside the
    logits and below the loss's own N·V tensors (loss_memory), so no phase's peak moves."""
    v = plan.model.vocab_size
    r, ab = plan.lora.rank, ctx.adapter_out
    items = [Term("LoRA A output of the head (kept for B)", f"N·r × {ab:g}", ctx.n * r * ab)]
    if plan.method is Method.DORA:
        items.append(
            Term(
                "DoRA on the head: base and adapter outputs kept for the magnitude",
                f"N·V × ({ctx.ca:g} + {ab:g})",
                ctx.n * v * (ctx.ca + ab),
            )
        )
    return items


def _sac_matmuls(model: ModelSpec, adapted: tuple[str, ...] = (), rank: int = 0) -> list[tuple[str, int, bool, bool]]:
    """A block's matmuls in execution order: (name, output width, replicated, adapter's).

    A projection with a bias runs as ``aten.addmm``, which torchtitan's save list does not
    name, so it neither counts nor is saved. A LoRA adapter (PEFT ``LoraLayer.forward``: the
    base layer first, then ``lora_B(lora_A(x))``) adds two bias-free mms after its base
    projection. A MoE block's experts run as grouped matmuls (not listed either); its router
    and shared expert are plain linears. DoRA's extra matmuls are not modelled.
    """
    q, kv, i, d = model.q_width, model.kv_width, model.intermediate_size, model.hidden_size
    targets = set(normalise_lora_targets(adapted)) if adapted else set()
    mms: list[tuple[str, int, bool, bool]] = []

    def add(name: str, width: int, replicated: bool, bias: bool, projections: set[str]) -> None:
        if not bias:
            mms.append((name, width, replicated, False))
        if targets & projections:
            mms.extend(((f"{name} LoRA A", rank, False, True), (f"{name} LoRA B", width, replicated, True)))

    if model.fused_qkv:
        add("q|k|v", q + 2 * kv, False, model.qkv_bias, {"q_proj", "k_proj", "v_proj"})
    else:
        for name, width in (("q", q), ("k", kv), ("v", kv)):
            add(name, width, False, model.qkv_bias, {f"{name}_proj"})
    add("o", d, True, model.o_bias, {"o_proj"})
    if model.num_experts > 1:
        add("router", model.num_experts, True, model.router_bias, set())
        s = model.shared_expert_size
        if s:
            for name, width, replicated in (
                ("shared gate", s, False),
                ("shared up", s, False),
                ("shared down", d, True),
            ):
                add(name, width, replicated, False, set())
            add("shared expert gate", 1, True, False, set())
        return mms
    if model.gated_mlp and model.fused_gate_up:
        add("gate|up", 2 * i, False, model.mlp_bias, {"gate_proj", "up_proj"})
    elif model.gated_mlp:
        add("gate", i, False, model.mlp_bias, {"gate_proj"})
        add("up", i, False, model.mlp_bias, {"up_proj"})
    else:
        add("up", i, False, model.mlp_bias, {"up_proj"})
    add("down", d, True, model.mlp_bias, {"down_proj"})
    return mms


# torch.compile over a block under per-op SAC (torchtitan 9dec370 and e7c0cae, ``apply_compile``
# compiles each block after ``apply_ac`` wrapped it, ``fullgraph=True``). Eager SAC caches the
# output of every op its policy marks MUST_SAVE, whether or not a backward reads it
# (torch/utils/checkpoint.py ``_CachingTorchDispatchMode``: ``storage[...] = ...`` for a SAVE
# policy; pytorch/pytorch 0008d771). Under compile the same mode only tags the traced nodes
# (``node.meta["recompute"] = policy``), and Inductor's min-cut partitioner
# (torch/_functorch/partitioners.py at c28ba8e5, ``solve_min_cut``) saves a node only where it
# cuts a path from the forward to a node the backward needs (``required_bw_nodes``): a MUST_SAVE
# node is barred from recomputation, not forced into the saved set, and ``_extract_fwd_bwd_modules``
# drops any saved value the backward graph does not use. In a pre-norm block the MLP's last
# projection feeds only the residual add that makes the block's output (``out = h +
# self.feed_forward(...)``, torchtitan's TransformerBlock), whose backward passes the gradient on
# without reading its inputs; the output itself is the next block's input, kept there. So the down
# projection's output (and its LoRA B's) is cached by eager op SAC and not kept when compiled. A
# norm on the MLP output (OLMo-2's post-norm, Gemma-2/3's post-feed-forward norm) reads it in its
# backward, and a mixture of experts' shared-expert gate multiplies it: kept there.
SAC_COMPILED_NOTE: Final = "torch.compile keeps only what the backward reads"


def _unread_by_backward(plan: Plan) -> frozenset[str]:
    """The op-SAC matmul outputs (``_sac_matmuls`` names) a compiled block does not keep because
    no backward reads them (see SAC_COMPILED_NOTE): empty unless compiled."""
    model = plan.model
    if plan.stack is not Stack.COMPILE or model.num_experts > 1 or model.post_norm or model.norms_per_layer == 4:
        return frozenset()
    return frozenset({"down", "down LoRA B"})


def selective_saved(plan: Plan) -> LayerActs:
    """What torchtitan's per-op selective checkpointing caches for one block, beside the
    block's input (pytorch/torchtitan commit 1f029641, ``_apply_op_sac`` in
    torchtitan/distributed/activation_checkpoint.py and ``_op_sac_save_list`` in
    torchtitan/models/llama3/parallelize.py): the output of every mm except every second
    one (the 1st, 3rd, 5th … of the block are saved), and the SDPA flash / efficient kernel's
    output with its float32 log-sum-exp. Eager attention's bmm / softmax, the flash-attn
    package's own op, norms, RoPE and activations are recomputed. Compiled, the down
    projection's output is not kept (SAC_COMPILED_NOTE).
    """
    model = plan.model
    b, s = plan.workload.micro_batch, plan.workload.seq_len
    n = b * s
    dt = dtypes_for(plan)
    ca = dt.compute
    adapter_out = dt.compute if dt.autocast else dt.adapter
    adapted = plan.lora.targets if plan.lora_adapters else ()
    unread = _unread_by_backward(plan)
    items: list[Term] = []
    replicated: list[int] = []
    for k, (name, width, outside, adapter) in enumerate(_sac_matmuls(model, adapted, plan.lora.rank)):
        if k % 2:  # the 2nd, 4th … matmul is recomputed
            continue
        if name in unread:  # compiled: a saved output no backward reads is not kept (SAC_COMPILED_NOTE)
            continue
        if outside:
            replicated.append(len(items))
        el = adapter_out if adapter else ca
        items.append(Term(f"op SAC: {name} matmul output (saved)", f"N·{width} × {el:g}", n * width * el))
    kernel = sdpa_kernel(plan)
    if plan.attention is Attention.SDPA and kernel in (Kernel.FLASH, Kernel.EFFICIENT):
        h = model.num_heads
        rows = s if kernel is Kernel.FLASH else -(-s // 32) * 32
        q_el = n * model.q_width
        items.append(Term("op SAC: attention output (saved)", f"N·H·hd × {ca:g} = {sci(q_el)} × {ca:g}", q_el * ca))
        lse = b * h * rows
        items.append(Term("op SAC: attention log-sum-exp (float32, saved)", f"B·H·S × 4 = {sci(lse)} × 4", lse * 4))
    return LayerActs(tuple(items), tuple(replicated))


# What Megatron's selective recompute (--recompute-modules core_attn) frees: the tensors the
# core attention keeps between its two matmuls, the scores-sized ones of eager and math
# attention and a fused kernel's log-sum-exp (its output stays: the output projection keeps it).
CORE_ATTENTION_LABELS: Final = (
    "attention probabilities",
    "soft-capped scores",
    "attention dropout mask",
    "probabilities cast to 16 bits",
    "math kernel: probabilities",
    "softmax log-sum-exp",
)


def core_attention_bytes(block: LayerActs) -> float:
    """The part of one block's saved tensors the core attention keeps (see above)."""
    return float(sum(t.bytes for t in block.items if t.label.startswith(CORE_ATTENTION_LABELS)))


def recomputed_share(plan: Plan) -> float:
    """Share of the forward's matmul work the backward runs again: 1 with full
    checkpointing, the checkpointed blocks' share under layer SAC, and under per-op SAC
    the recomputed matmuls' share of a block's matmul outputs (attention's own FLOPs
    and the experts' grouped matmuls are left out of this ratio)."""
    if not plan.checkpointing or plan.checkpoint_policy is CheckpointPolicy.ATTENTION:
        return 0.0  # attention-only recompute re-runs no projection
    if plan.checkpoint_policy is CheckpointPolicy.LAYER:
        return plan.checkpointed_blocks(plan.model.num_layers) / plan.model.num_layers
    if plan.checkpoint_policy is CheckpointPolicy.OP:
        shapes = plan.model.linear_shapes()
        fan_in = {nm: f"{nm}_proj" for nm in ("q", "k", "v", "o", "gate", "up", "down")}
        total = sum(a * b for a, b in shapes.values())
        again = sum(
            shapes[fan_in[name]][0] * width
            for k, (name, width, _, _) in enumerate(_sac_matmuls(plan.model))
            if k % 2 and name in fan_in
        )
        return again / total if total else 0.0
    return 1.0
