"""The plan's precision roles resolved into bytes per kind of tensor.

One home for "which dtype does this tensor have": stored trainable weights, the frozen
base, adapters, gradients and optimizer state (the dtype of the parameter they belong to:
torch.optim allocates state with ``zeros_like(param)``), the residual stream (the dtype the
model was loaded in) and matmul outputs (the autocast dtype when autocast runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.dtypes import DTYPE_BYTES, Autocast, Dtype
from core.dtypes import compute_dtype as matmul_output_dtype
from core.memo import fills_fields, last_answer
from core.plan import Method, Plan, Stack, Strategy

# Enum members this module's hot paths compare with, read from their classes once: on Python 3.11 each
# ``Class.MEMBER`` read goes through EnumType.__getattr__'s slot, ~0.15 µs (core.plan's note; h74speed).
_AUTOCAST_NONE: Final = Autocast.NONE
_METHOD_FULL: Final = Method.FULL
_METHOD_LN_TUNING: Final = Method.LN_TUNING
_METHOD_FROZEN: Final = Method.FROZEN


@fills_fields
@dataclass(frozen=True)
class Dtypes:
    param: float  # a stored trainable weight (full fine-tuning, unfrozen layers)
    base: float  # a stored frozen base weight (LoRA / DoRA / frozen layers; before quantisation)
    adapter: float  # a LoRA / DoRA adapter weight
    grad: float  # a gradient, and each optimizer state tensor: the trainable parameter's dtype
    residual: float  # the residual stream: the dtype the model runs in
    compute: float  # matmul outputs: the autocast dtype, else the model's
    autocast: bool  # torch.autocast runs around the forward and the loss
    casts: bool  # autocast converts the model's tensors (float32 model under 16-bit autocast)

    @property
    def mode(self) -> str:
        """One of "fp32", "mixed" (autocast over a float32 model), "pure" (16-bit model, no
        autocast) or "autocast16" (16-bit model under autocast of the same dtype)."""
        if self.casts:
            return "mixed"
        if self.residual == 4:
            return "fp32"
        return "autocast16" if self.autocast else "pure"

    @property
    def mixed(self) -> bool:
        return self.casts


def kbit_float32(plan: Plan) -> bool:
    """QLoRA after PEFT's prepare_model_for_kbit_training (peft/utils/other.py: every float16 /
    bfloat16 parameter that is not Params4bit is cast to float32): the float32 norm weights
    make the hidden states float32, and bitsandbytes' Linear4bit casts each output back to
    its input's dtype (bitsandbytes 0.43.3 nn/modules.py: ``out.to(inp_dtype)``), so the
    model runs in float32 around its 4-bit matmuls. Not under DeepSpeed's 16-bit engine, which
    casts them back (:func:`deepspeed_cast_weights`)."""
    return plan.quantised_base and plan.kbit_upcast and deepspeed_engine_dtype(plan) is None


def qlora_unquantised_bytes(plan: Plan) -> float:
    """Bytes per parameter of what bitsandbytes leaves unquantised under QLoRA (embeddings, the
    output head, norms): the 16-bit dtype the model is loaded in, float32 after
    prepare_model_for_kbit_training (:func:`kbit_float32`). Stored so (core.training.storage) and
    gathered so by FSDP (core.parallel.state)."""
    return 4.0 if kbit_float32(plan) else 2.0


def saved_copy_bytes(plan: Plan, base: float) -> float:
    """Bytes per element of a PEFT modules_to_save copy (core.training.extra_trained): the dtype the module is
    stored in, ``base`` (the base's bytes), or under QLoRA what bitsandbytes leaves unquantised (the embedding and
    the head are never quantised). Stored so, gathered so by FSDP (core.parallel.state)."""
    return qlora_unquantised_bytes(plan) if plan.quantised_base else base


@last_answer  # asked several times per estimate: a pure function of the frozen plan (core.memo)
def model_dtype(plan: Plan) -> Dtype:
    """The dtype the model is loaded and runs in: the base's for adapter methods, DeepSpeed's
    16-bit dtype where its engine casts the weights (:func:`deepspeed_cast_weights`)."""
    if kbit_float32(plan):
        return Dtype.FP32
    return deepspeed_cast_weights(plan) or stored_weight_dtype(plan)


def stored_weight_dtype(plan: Plan) -> Dtype:
    """The dtype the plan chooses for the model's own floating weights: the trainable weights of
    full fine-tuning, the frozen base of LoRA / DoRA / QLoRA (QLoRA's unquantised remainder:
    float32 after prepare_model_for_kbit_training)."""
    if plan.quantised_base and plan.kbit_upcast:
        return Dtype.FP32
    return plan.base_dtype if plan.adapter_based else plan.weight_dtype


@last_answer  # asked several times per estimate: a pure function of the frozen plan (core.memo)
def compute_dtype(plan: Plan) -> Dtype:
    """The dtype ``plan``'s matmuls produce (:func:`core.dtypes.compute_dtype`)."""
    if kbit_float32(plan):
        return Dtype.FP32
    return matmul_output_dtype(model_dtype(plan), plan.autocast)


# DeepSpeed's model dtype under ``bf16.enabled`` / ``fp16.enabled``, which the plan's 16-bit autocast
# stands for under a ZeRO stage (the DeepSpeed export writes ``bf16.enabled`` from it).
_ENGINE_DTYPES = {Autocast.BF16: Dtype.BF16, Autocast.FP16: Dtype.FP16}


@last_answer  # asked several times per estimate: a pure function of the frozen plan (core.memo)
def deepspeed_engine_dtype(plan: Plan) -> Dtype | None:
    """DeepSpeed's model dtype for ``plan``: the 16-bit dtype of ``bf16.enabled`` / ``fp16.enabled``
    (the plan's 16-bit autocast) under a DeepSpeed ZeRO stage, else None. DeepSpeed runs no
    torch.autocast of its own there: the engine casts the module instead, accumulates the
    gradients in this dtype (``grad_accum_dtype`` defaults to it) and communicates in it
    (``communication_data_type``: deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/engine.py
    ``get_data_types``, ``communication_data_type``). Not under the Megatron stack, whose ZeRO-1 is
    Megatron's distributed optimizer."""
    if not plan.parallel.strategy.deepspeed or plan.stack is Stack.MEGATRON:
        return None
    return _ENGINE_DTYPES.get(plan.autocast)


def runs_autocast(plan: Plan) -> bool:
    """Whether torch.autocast runs around ``plan``'s forward and loss: the plan's 16-bit autocast,
    except under DeepSpeed's 16-bit engine (:func:`deepspeed_engine_dtype`), where nothing opens one and
    the cast module runs in its own dtype (norms and softmax take 16-bit inputs, no float32 copies):

    - the engine: microsoft/DeepSpeed v0.11.1 e9503fe4, v0.14.0 ce78a632 and v0.16.4,
      deepspeed/runtime/engine.py ``DeepSpeedEngine.forward`` calls ``self.module(*inputs, **kwargs)`` with no
      torch.autocast anywhere in the file; from v0.17.2 (ed5f7375, #6993) ``forward`` runs under
      ``torch.autocast(..., enabled=self.torch_autocast_enabled())``, on only with a ``torch_autocast``
      config section (float32 weights, autocast's op lists: not ``bf16.enabled``), and an autocast opened
      outside is refused (``validate_nested_autocast`` raises) — from v0.17.6 (66bf2a64, #7543) switched off
      instead (deepspeed/runtime/torch_autocast.py ``autocast_if_enabled``: ``enabled=False``;
      deepspeedai/DeepSpeed edaa7221 the same);
    - accelerate v0.28.0 and 16cb6eb8 (2026-07), src/accelerate/accelerator.py ``Accelerator.__init__``:
      ``native_amp`` stays False under ``DistributedType.DEEPSPEED``, so ``Accelerator.autocast`` yields
      ``get_mixed_precision_context_manager(False)``, a nullcontext, and ``_prepare_deepspeed`` wraps no
      forward;
    - transformers 4.38.2 src/transformers/trainer.py ``Trainer.__init__``: fp16 / bf16 set no AMP "if
      self.is_deepspeed_enabled" ("deepspeed ... manage their own half precision"), and
      ``autocast_smart_context_manager`` is a nullcontext off CPU AMP.
    A script of its own that opens torch.autocast around an engine before v0.17.2 is the one exception."""
    return plan.autocast is not _AUTOCAST_NONE and deepspeed_engine_dtype(plan) is None


def runs_grad_scaler(plan: Plan) -> bool:
    """Whether torch's GradScaler runs (fp16 autocast, :attr:`Plan.grad_scaler`): not under DeepSpeed's fp16
    engine, whose ZeRO optimizers scale the loss themselves (microsoft/DeepSpeed v0.11.1 e9503fe4 and v0.14.0
    ce78a632, deepspeed/runtime/zero/stage_1_and_2.py and stage3.py ``self.loss_scaler = CreateLossScaler(...)``;
    runtime/fp16/loss_scaler.py ``DynamicLossScaler``, its ``cur_scale`` a Python float) and take fp16 weights;
    deepspeedai/DeepSpeed edaa7221 engine.py builds a ``torch.amp.GradScaler`` only without ZeRO, under its
    ``torch_autocast`` section."""
    return plan.grad_scaler and deepspeed_engine_dtype(plan) is None


def deepspeed_cast_adapters(plan: Plan) -> Dtype | None:
    """The 16-bit dtype DeepSpeed's engine casts the plan's adapters to, or None where it keeps them.

    deepspeedai/DeepSpeed edaa7221, deepspeed/runtime/engine.py ``_configure_distributed_model``: with
    fp16 or bf16 enabled, ``_cast_module_mixed_precision`` casts every floating parameter to that
    dtype (``p.data = p.data.to(param_dtype)``), PEFT's float32 adapters among them, "unless
    is_zero_init_model": a ZeRO-3 model whose parameters carry ``ds_id``, as transformers'
    ``from_pretrained`` loads one under ``deepspeed.zero.Init`` — there the adapters PEFT adds
    afterwards keep their dtype (that skip came with b919284a, June 2026, #8066; before it the
    engine called ``self.module.bfloat16()`` / ``half()`` on every stage, e.g. v0.14.0 ce78a632).
    So ZeRO-1 and ZeRO-2 train 16-bit adapters whatever the plan stores; ZeRO-3 keeps them."""
    engine = deepspeed_engine_dtype(plan)
    if engine is None or not plan.adapter_based or plan.parallel.strategy is Strategy.ZERO3:
        return None
    return engine if plan.adapter_dtype is not engine else None


def deepspeed_cast_weights(plan: Plan) -> Dtype | None:
    """The 16-bit dtype DeepSpeed's bf16 / fp16 engine gives the model's own weights (full
    fine-tuning's trainable weights, LoRA / DoRA's frozen base) when the plan stores another
    (float32), at every ZeRO stage and in every release read; None where nothing is cast.

    - ZeRO-1 / ZeRO-2: the engine casts the module before it builds the optimizer.
      microsoft/DeepSpeed v0.11.1 e9503fe4 and v0.14.0 ce78a632, deepspeed/runtime/engine.py
      ``_configure_distributed_model``: ``self.module.bfloat16()`` / ``self.module.half()``;
      deepspeedai/DeepSpeed edaa7221 (after v0.19.5) the same function: ``_cast_module_mixed_precision``,
      ``p.data = p.data.to(param_dtype)`` for every floating parameter. stage_1_and_2.py then
      flattens these 16-bit parameters (``bit16_groups_flat``) and clones the float32 master
      partition from them (``single_partition_of_fp32_groups``); ``param.grad`` is 16-bit.
    - ZeRO-3: a model built under ``deepspeed.zero.Init`` (transformers' ``from_pretrained`` with a
      ZeRO-3 config) is created in the config's dtype: partition_parameters.py ``Init._set_dtype``
      (bf16 when ``bf16.enabled``, half when ``fp16.enabled``) and ``_add_tensor_creation_wrappers``
      (``zero_wrapper_for_fp_tensor_constructor(..., self.dtype)`` at v0.11.1 / v0.14.0; edaa7221 under
      ``DEFAULT_TENSOR_OVERRIDES``, which include the dtype). The engine casts such a model again
      before b919284a (#8066, June 2026) and skips it after, where it is 16-bit already; a model
      built outside zero.Init is cast in every release. stage3.py flattens the 16-bit partitions
      (``fp16_partitioned_groups_flat``) beside the float32 ones (``fp32_partitioned_groups_flat``).
    QLoRA's 4-bit weights are no floating parameter (``p.is_floating_point()`` is False for
    Params4bit's uint8), but its unquantised remainder (embeddings, norms, head) is, and
    prepare_model_for_kbit_training's float32 upcast of it does not survive: ZeRO-1/2 cast it
    back (above), and under ZeRO-3 PEFT's ``param.data = param.data.to(torch.float32)`` replaces
    only the placeholder while the gathered weight takes its partition's (16-bit) dtype
    (partition_parameters.py ``all_gather_coalesced``: ``dtype=get_only_unique_item(p.ds_tensor.dtype
    ...)``, v0.11.1 and edaa7221)."""
    engine = deepspeed_engine_dtype(plan)
    return engine if engine is not None and stored_weight_dtype(plan) is not engine else None


def cast_weights_label(plan: Plan) -> str:
    """What :func:`deepspeed_cast_weights` casts, in words."""
    if plan.method is Method.FULL:
        return "weights"
    return "unquantised weights" if plan.quantised_base else "base weights"


def adapter_dtype(plan: Plan) -> Dtype:
    """The dtype the plan's adapters train in: the plan's, or DeepSpeed's cast of them
    (:func:`deepspeed_cast_adapters`). LN tuning's copies keep the norms' own dtype, the frozen base's:
    PEFT skips its float32 cast for them (huggingface/peft 51c2ff66 src/peft/tuners/ln_tuning/model.py
    ``LNTuningModel._cast_adapter_dtype``: "LN Tuning does not add adapter layers, instead it creates copies
    of the original layer. For this reason, we need to skip adapter autocasting")."""
    if plan.method is _METHOD_LN_TUNING:
        return plan.base_dtype
    return deepspeed_cast_adapters(plan) or plan.adapter_dtype


def residual_dtype(plan: Plan, model: Dtype, compute: Dtype, autocast: bool) -> Dtype:
    """The residual stream's dtype: the model's, except in a frozen-layers plan whose trained blocks are held in
    another dtype than the frozen base (LLaMA-Factory's float32 cast of the trained blocks) under autocast: the
    frozen embedding and blocks hand them hidden states in the base's dtype, autocast's matmuls return the autocast
    dtype, and the residual adds (transformers 5.25.0 models/llama/modeling_llama.py ``LlamaDecoderLayer.forward``:
    ``hidden_states = residual + hidden_states``) keep it when the two agree. LlamaRMSNorm casts back to its input's
    dtype before the weight multiply (``self.weight * hidden_states.to(input_dtype)``), so the normalised value it
    keeps is in that dtype too, while its output, promoted by the float32 weight, is float32 and cast per reading
    matmul as in the float32 model (mode "mixed"). Measured on CPU autocast, torch 2.13.0 and transformers 5.25.0
    (tools/measure/freeze_cast_residual.py): each trained float32 block's input and output are bf16, and it keeps
    65,536 B (two norms, N·d × 2) less than the all-float32 model's block, the normalised values' difference."""
    if plan.method is _METHOD_FROZEN and autocast and plan.base_dtype is not model and plan.base_dtype is compute:
        return plan.base_dtype
    return model


@last_answer
def dtypes_for(plan: Plan) -> Dtypes:
    """The dtypes of ``plan``; one estimate asks several times for the same (immutable)
    plan, so the last answer is kept (core.memo.last_answer)."""
    return _dtypes_for(plan)


def _dtypes_for(plan: Plan) -> Dtypes:
    model = model_dtype(plan)
    autocast = runs_autocast(plan)
    compute = compute_dtype(plan)
    adapter = adapter_dtype(plan)
    engine = deepspeed_engine_dtype(plan)
    param = engine or plan.weight_dtype
    base = param if plan.method is _METHOD_FULL else engine or plan.base_dtype
    trainable = adapter if plan.adapter_based else param
    return Dtypes(
        param=DTYPE_BYTES[param],
        base=DTYPE_BYTES[base],
        adapter=DTYPE_BYTES[adapter],
        grad=DTYPE_BYTES[trainable],
        residual=DTYPE_BYTES[residual_dtype(plan, model, compute, autocast)],
        compute=DTYPE_BYTES[compute],
        autocast=autocast,
        casts=autocast and compute is not model,
    )
