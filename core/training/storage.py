"""What a training step stores: weights (as the precision roles and quantisation store
them), the copies autocast makes of them, and the gradients. The optimizer's state lives
in :mod:`core.training.optimizer`; the phases that hold them in :mod:`core.training.detailed`.
"""

from __future__ import annotations

from typing import Final

from core.breakdown import Term
from core.dtypes import (
    DTYPE_BYTES,
    Dtype,
    Quant,
    WeightFormat,
    matrix_output_rows,
    nf4_bytes_per_weight,
    quantised_matrix_bytes,
)
from core.format import sci
from core.params import (
    ParamCounts,
    bnb_16bit_experts,
    bnb_kept,
    bnb_quantised_head,
    oft_index_elements,
    quantised_block_params,
    randlora_projection_elements,
    shira_index_elements,
    vera_projection_elements,
)
from core.plan import Method, Plan
from core.roles import Dtypes, adapter_dtype, deepspeed_engine_dtype, qlora_unquantised_bytes

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_DTYPE_FP32: Final = Dtype.FP32
_METHOD_ADALORA: Final = Method.ADALORA
_METHOD_FROZEN: Final = Method.FROZEN
_METHOD_FULL: Final = Method.FULL
_METHOD_LN_TUNING: Final = Method.LN_TUNING
_METHOD_LOHA: Final = Method.LOHA
_METHOD_OFT: Final = Method.OFT
_METHOD_PREFIX_TUNING: Final = Method.PREFIX_TUNING
_METHOD_TRAINABLE_TOKENS: Final = Method.TRAINABLE_TOKENS
_METHOD_VERA: Final = Method.VERA
_QUANT_INT8: Final = Quant.INT8
_WEIGHT_FORMAT_INT8: Final = WeightFormat.INT8

__all__ = [
    "autocast_copies",
    "copy_terms",
    "gradient_terms",
    "litgpt_quantised_head",
    "vision_weight_term",
    "weight_terms",
]

# NF4/FP4 and LLM.int8 storage: core.dtypes (one home for quantised weights).


def _dtype_name(b: float) -> str:
    return "float32" if b == 4 else "16-bit"


# --- weights -------------------------------------------------------------------------
_ADAPTER_LABELS: Final = {
    Method.DORA: "DoRA adapters + magnitudes",
    Method.IA3: "IA3 vectors",
    Method.ADAPTER: "Adapter prompts + gates",
    Method.ADAPTER_V2: "Adapter v2 prompts, gates, biases, scales + norms",
    Method.PROMPT_TUNING: "prompt embeddings",
    Method.P_TUNING: "prompt embeddings + MLP encoder",
    Method.PREFIX_TUNING: "prefix keys and values",
    Method.LN_TUNING: "trained copies of the norms",
    Method.LOHA: "LoHa factors",
    Method.LOKR: "LoKr factors",
    Method.VERA: "VeRA vectors λ_d, λ_b",
    Method.ADALORA: "AdaLoRA lora_A, lora_E, lora_B",
    Method.OFT: "OFT skew-symmetric blocks",
    Method.MISS: "MiSS blocks",
    Method.FOURIERFT: "FourierFT spectra",
    Method.ROAD: "RoAd angles and scales",
    Method.VBLORA: "VB-LoRA logits + vector bank",
    Method.RANDLORA: "RandLoRA λ and γ",
    Method.SHIRA: "SHiRA sparse weights",
    Method.BOFT: "BOFT blocks boft_R + scales boft_s",
    Method.TRAINABLE_TOKENS: "trainable token rows (delta)",
}


def weight_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    model = plan.model
    p = counts.total
    terms: list[Term] = []
    if plan.quantised_base:
        quantised = quantised_block_params(plan) + litgpt_quantised_head(plan) + bnb_quantised_head(plan)
        experts = bnb_16bit_experts(plan)
        rest = p - quantised - experts
        if plan.quant is _QUANT_INT8:
            rows = matrix_output_rows(model)
            q_bytes = quantised_matrix_bytes(model, _WEIGHT_FORMAT_INT8, quantised)
            terms.append(
                Term("int8 block weights + row scales", f"{sci(quantised)} × 1 B + {sci(rows)} × 4 B", q_bytes)
            )
        else:
            per = nf4_bytes_per_weight(plan.double_quant)
            how = "0.5 + 1/64 + 4/(64·256)" if plan.double_quant else "0.5 + 4/64"
            terms.append(Term(f"{plan.quant.value} block weights", f"{sci(quantised)} × ({how}) B", quantised * per))
        # bitsandbytes leaves embeddings, the output head and norms in the compute dtype (not
        # LitGPT's head: litgpt_quantised_head);
        # prepare_model_for_kbit_training casts them to float32 (core.roles.kbit_float32).
        unq = qlora_unquantised_bytes(plan)
        kbit = ", float32 (prepare_model_for_kbit_training)" if unq == 4 else ""
        if experts:
            terms.append(Term(_experts_label(plan, kbit), f"{sci(experts)} × {unq:g} B", experts * unq))
        label = _unquantised_label(plan) + kbit
        terms.append(Term(label, f"{sci(rest)} × {unq:g} B", rest * unq))
    elif plan.method is _METHOD_FROZEN and dt.param != dt.base:
        t, f = counts.trainable, counts.frozen_base
        terms.append(Term("trainable weights", f"{sci(t)} × {dt.param:g} B", t * dt.param))
        terms.append(Term("frozen weights", f"{sci(f)} × {dt.base:g} B", f * dt.base))
    else:
        b = dt.param if plan.method is _METHOD_FULL else dt.base
        terms.append(Term("base weights", f"P × {b:g} B = {sci(p)} × {b:g} B", p * b))
    if counts.adapter:
        a = dt.adapter
        label = _ADAPTER_LABELS.get(plan.method, "LoRA adapters")
        terms.append(Term(f"{label} ({_dtype_name(a)})", f"{sci(counts.adapter)} × {a:g} B", counts.adapter * a))
    shared = vera_projection_elements(plan)
    if shared:
        # The frozen buffers are cast as the adapters are: to the base's dtype by _move_adapter_to_device_of_base_layer,
        # then to float32 by cast_adapter_dtype (autocast_adapter_dtype=True; huggingface/peft 51c2ff66
        # src/peft/tuners/tuners_utils.py, BufferDict entries included): the adapter dtype.
        a = dt.adapter
        label = f"VeRA shared vera_A, vera_B (frozen, {_dtype_name(a)})"
        terms.append(Term(label, f"r·(max in + max out) = {sci(shared)} × {a:g} B", shared * a))
    bases = randlora_projection_elements(plan)
    if bases:
        # RandLoRA's BufferDict entries, cast as VeRA's (tuners_utils.py cast_adapter_dtype casts BufferDict tensors
        # too; tools/measure/peft_more_check.py lists them float32 on a bf16 base): the adapter dtype.
        a = dt.adapter
        label = f"RandLoRA shared randlora_A, randlora_B (frozen, {_dtype_name(a)})"
        formula = f"r·min + max·bases·r = {sci(bases)} × {a:g} B"
        terms.append(Term(label, formula, bases * a))
    if model.vision_params:
        terms.append(vision_weight_term(plan, dt))
    shira = model.over_blocks(lambda dense: shira_index_elements(plan, dense))
    if shira:
        # SHiRA's shira_indices (core.params.shira_index_elements): int32 on the base weight's device.
        label = "SHiRA mask indices (int32)"
        terms.append(Term(label, f"L × Σ 2·r(in + out) = {sci(shira)} × 4 B", shira * 4.0))
    index = model.over_blocks(lambda dense: oft_index_elements(plan, dense))
    if index:
        # OFTRotationModule's rows / cols buffers (core.params.oft_index_elements): int64, moved with the adapter.
        label = "OFT upper-triangle index buffers (int64)"
        terms.append(Term(label, f"L × Σ 2·b(b−1)/2 = {sci(index)} × 8 B", index * 8.0))
    return terms


def vision_weight_term(plan: Plan, dt: Dtypes) -> Term:
    """The frozen vision tower + projector of an image-text checkpoint (core.vision): loaded with the model
    and never trained by these plans, so no gradient or optimizer state. It is stored as the frozen base is
    (``base_dtype``, DeepSpeed's 16-bit engine casting it as every floating weight), full fine-tuning included:
    there the plan's only frozen weights are the tower's, which a framework that casts the trained weights after
    loading leaves as loaded (LLaMA-Factory v0.9.4 95ac3f23 ``model/adapter.py`` ``_setup_full_tuning`` lines
    50-56: the ``get_forbidden_modules`` parameters, the vision tower and projector under ``freeze_vision_tower``
    / ``freeze_multi_modal_projector``, both true by default, get ``requires_grad_(False)`` and no float32 cast).
    Every preset holds the base in the weights' dtype, so a full plan on a preset stores the tower as the
    trained weights, one dtype the model was loaded in. A bitsandbytes base
    quantises its nn.Linear weights too: transformers 5.25.0 ``quantizers/base.py`` get_keys_to_not_convert
    skips only tied weights, the output embedding and the last parameter (the language model's final norm),
    and ``integrations/bitsandbytes.py`` replaces every other nn.Linear; its convolutions, position tables,
    norms, biases and Gemma 3's mm_input_projection_weight (an nn.Parameter) stay in the compute dtype, as
    the language model's unquantised parts do (int8: its float32 row scales, under 0.1 %, are left out)."""
    model = plan.model
    n, kind = model.vision_params, model.vision_kind or "vision"
    label = f"vision tower + projector ({kind}, frozen)"
    if plan.quantised_base:
        q = model.vision_linear_params
        per = 1.0 if plan.quant is Quant.INT8 else nf4_bytes_per_weight(plan.double_quant)
        unq = qlora_unquantised_bytes(plan)
        formula = f"{sci(q)} Linear weights × {per:.4g} B + {sci(n - q)} × {unq:g} B"
        return Term(label, formula, q * per + (n - q) * unq)
    b = DTYPE_BYTES[deepspeed_engine_dtype(plan) or plan.base_dtype] if plan.method is Method.FULL else dt.base
    return Term(label, f"{sci(n)} × {b:g} B", n * b)


def _unquantised_label(plan: Plan) -> str:
    """What a QLoRA base leaves unquantised, naming the matrices ``bnb_skip_modules`` keeps
    (core.params.bnb_kept) and a head the skip list leaves to be quantised."""
    kept = bnb_kept(plan)
    head = "" if bnb_quantised_head(plan) else "head, "
    label = f"unquantised (embeddings, {head}norms"
    if kept.matrices:
        label += f", {kept.matrices} block matrices kept: {plan.bnb_skip_modules}"
    label += ")"
    return label


def _experts_label(plan: Plan, kbit: str) -> str:
    """The routed experts a bitsandbytes base leaves unquantised (core.params.bnb_16bit_experts), naming why: the
    release holds them as 3-D parameters, and bitsandbytes replaces nn.Linear modules only (bitsandbytes-foundation/
    bitsandbytes issue 1849); where 4.x held them as nn.Linear, the release the plan names."""
    release = f" {plan.training_transformers.value}" if plan.release_moves_bnb_experts else ""
    why = f"3-D parameters in transformers{release}; bitsandbytes quantises nn.Linear only"
    return f"routed experts unquantised{kbit} ({why})"


def litgpt_quantised_head(plan: Plan) -> int:
    """The head's weights that LitGPT's QLoRA quantises: Lightning's ``BitsandbytesPrecision``
    (lightning 2.4, ``fabric/plugins/precision/bitsandbytes.py``, pinned by litgpt 00af8b0)
    replaces every ``torch.nn.Linear`` of the model by its 4-bit class, ``lm_head`` included,
    unless ``ignore_modules`` names it, and ``litgpt/finetune/lora.py`` passes none. NF4 / FP4
    only (LLM.int8 is not a QLoRA recipe of LitGPT's config hub); 0 for a tied head."""
    if not plan.litgpt or not plan.quantised_base or plan.quant is Quant.INT8:
        return 0
    model = plan.model
    # Scaled with a typed P as the matrices are (core.model.params_scale): never more than what
    # the matrices leave of the whole.
    head = round(model.head_params() * model.params_scale)
    return min(head, model.total_params() - model.stored_matmul_params())


def autocast_copies(plan: Plan) -> float:
    """Elements of the 16-bit weight copies autocast makes and autograd keeps until the backward.

    Trainable weights are leaves that need a gradient: autocast's cache keeps their casts until
    the forward ends (aten/src/ATen/autocast_mode.cpp ``cached_cast``: ``arg.requires_grad()
    && arg.is_leaf()``), checkpointing or not. A frozen base (LoRA, DoRA) is cast anew at each
    use and only autograd keeps the cast, for the input's gradient: a checkpointed block keeps
    nothing of its forward (reentrant checkpointing runs it under no_grad, non-reentrant drops
    what it would save; per-op SAC saves matmul outputs, not the casts), so only the blocks that
    are not checkpointed and the head, outside every block, keep theirs."""
    model = plan.model
    per_layer = model.matmul_params() // model.num_layers
    layers = model.num_layers - (plan.frozen_layers if plan.method is Method.FROZEN else 0)
    if plan.adapter_based and plan.checkpointing:
        layers -= plan.checkpointed_blocks(model.num_layers)
    return (layers * per_layer + model.vocab_size * model.hidden_size) * model.params_scale


def copy_terms(plan: Plan, counts: ParamCounts, dt: Dtypes) -> list[Term]:
    """16-bit copies autocast makes of float32 weights: of a float32 model's matmul weights,
    and of float32 adapters on a 16-bit base (the autocast cache keeps casts of leaf
    tensors that need a gradient; a weight already in the autocast dtype is used as is)."""
    terms = []
    if dt.casts and not plan.quantised_base:
        el = autocast_copies(plan)
        terms.append(Term("16-bit working copies of matmul weights (autocast)", f"{sci(el)} × 2 B", el * 2))
    cast = counts.adapter
    if plan.prompt_learning:
        # The virtual tokens' embedding is read by F.embedding, which autocast does not cast (the
        # prompts are cast by PEFT's ``prompts.to(inputs_embeds.dtype)``, nothing cached); only
        # P-tuning's MLP linears are (huggingface/peft 51c2ff66 src/peft/tuners/p_tuning/model.py).
        cast -= plan.lora.virtual_tokens * plan.model.hidden_size
    if plan.method in (_METHOD_PREFIX_TUNING, _METHOD_LN_TUNING, _METHOD_TRAINABLE_TOKENS):
        # Prefix tuning's one tensor is an embedding too (F.embedding; get_prompt casts its output,
        # ``past_key_values.to(self.base_model_torch_dtype)``); LN tuning's norms multiply, no matmul; the
        # trainable tokens' delta is index_copy'd into the embedding (TrainableTokensLayer.forward), no matmul.
        cast = 0
    if plan.method is _METHOD_VERA:
        # VeRA's trained vectors only multiply (huggingface/peft 51c2ff66 src/peft/tuners/vera/layer.py
        # Linear.forward); its matmuls read the frozen vera_A / vera_B, which need no gradient, so autocast casts
        # them at each use without caching (their casts, kept by autograd, are activations:
        # core.training.activations._vera). Measured: tools/measure/lycoris_check.py.
        cast = 0
    if plan.method is _METHOD_ADALORA:
        # SVDLinear.forward (huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py) multiplies by
        # ``(lora_A * lora_E).T`` and ``lora_B.T``: a product and a view, no leaf, so autocast caches no cast of
        # them (their casts, kept by the matmuls, are activations: core.training.activations._adalora).
        # Measured: tools/measure/lycoris_check.py.
        cast = 0
    if plan.method is _METHOD_OFT:
        # OFT's trained vector is scattered into its skew-symmetric blocks (index_put, not an autocast op); only
        # the blocks built from it are cast, anew at each bmm (not leaves: not cached). Those casts are
        # activations (core.training.activations._oft; measured: tools/measure/lycoris_check.py).
        cast = 0
    if plan.method is _METHOD_LOHA:
        # HadaWeight.forward (huggingface/peft 51c2ff66 src/peft/tuners/loha/layer.py) runs its matmuls inside a
        # custom autograd Function, with grad off: autocast caches no cast of the factors (measured:
        # tools/measure/lycoris_check.py keeps none).
        cast = 0
    if plan.vblora or plan.randlora or plan.shira:
        # No trained leaf meets a matmul (branch h78peft; huggingface/peft 51c2ff66): VB-LoRA's A and B are built from
        # its logits and bank by topk / softmax / gather (vblora/layer.py ``_get_low_rank_matrix``), RandLoRA's scaled
        # basis is UniqueBaseGrad's product (randlora/layer.py), SHiRA's values are added as a sparse tensor
        # (shira/layer.py): autocast caches no cast of them.
        cast = 0
    if plan.boft:
        # BOFT's boft_R meets only the Cayley transform's elementwise ops and linalg.solve, boft_s a multiply
        # (huggingface/peft 51c2ff66 src/peft/tuners/boft/layer.py ``cayley_batch``, ``Linear.forward``); its matmuls
        # read matrices built from them (branch h80boft; tools/measure/boft_check.py): nothing cached. Its (1, in, in)
        # float32 boft_P buffers are registered outside PEFT's device moves (``register_buffer``, not one of
        # adapter_layer_names; tuners_utils.py ``_replace_module`` moves the ``boft_``-named submodules only): on
        # the host in the comparison's run, which moves no model; copied to the GPU every forward (activations).
        cast = 0
    if dt.autocast and cast and adapter_dtype(plan) is _DTYPE_FP32:
        terms.append(Term("16-bit copies of the adapters (autocast)", f"{sci(cast)} × 2 B", cast * 2))
    return terms


def gradient_terms(counts: ParamCounts, dt: Dtypes) -> list[Term]:
    t = counts.trainable
    return [Term("gradients", f"T × {dt.grad:g} B = {sci(t)} × {dt.grad:g} B", t * dt.grad)]
