"""The Plan: one immutable value holding every input of an estimate.

A Plan validates itself when it is built, against the one table of inputs
(:mod:`core.inputs`): every error is a :class:`PlanError` naming the input by its attribute
path (``workload.micro_batch``, ``lora.rank``, ``parallel.pipeline_parallel``), the value
and what is allowed. The rules that join several inputs (a split the model cannot take, the
precision roles a preset fixes) are here. Plans are saved as a versioned JSON document (see
:mod:`core.files.planfile`).

One concern past 400 lines: the Plan's parts, the rules that join them, and the edits that
keep a plan valid (on other GPUs, another model or method, a precision word or role).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from core.catalogue import find_gpu, find_link
from core.dtypes import WEIGHT_LABELS as WEIGHT_NAMES
from core.dtypes import Autocast, CacheType, Dtype, GgufQuant, KvDtype, LlamaCppBackend, MpDtype, Quant, WeightFormat
from core.errors import PlanError
from core.hybrid import MIXER_NAMES
from core.inputs import (
    ATTENTION_LABELS,
    DEFAULTS,
    ENGINE_LABELS,
    FLOAT8_LABELS,
    IA3_DEFAULT_TARGETS,
    LLAMA4_VLLM_FROM,
    LLAMACPP_MAX_DEVICES,
    MAX_GPUS,
    MAX_SEQ,
    MEGATRON_CE_FUSION_LABELS,
    METHOD_LABELS,
    OLLAMA_LLAMA_FIT,
    OPTIMIZER_IMPL_LABELS,
    OPTIMIZER_LABELS,
    PER_TOKEN_HEAD_KV,
    PRESET_LABELS,
    QUANT_LABELS,
    SGLANG_ENABLE_MULTIMODAL_FROM,
    SGLANG_MM_DISABLED_FAMILIES,
    SGLANG_WEIGHT_RELEASES,
    STACK_LABELS,
    STRATEGY_LABELS,
    TE_FLOAT8,
    TEXT_ONLY_EVERY_MODEL_FROM,
    TRANSFORMERS_LOSS_LABELS,
    VLLM_KV_FROM,
    VLLM_KV_NAMES,
    VLLM_WEIGHT_LINES,
    Accounting,
    Attention,
    CheckpointPolicy,
    CompileCache,
    CpRotate,
    Engine,
    Float8,
    FsdpUnits,
    GradSync,
    Kind,
    MegatronCeFusion,
    Method,
    ModulesToSave,
    MoeDispatcher,
    MoeLayer,
    Offload,
    OllamaVersion,
    Optimizer,
    OptimizerImpl,
    PipelineSchedule,
    PipelineSplit,
    Platform,
    Precision,
    PrefixCaching,
    Preset,
    RoadVariant,
    SglangVersion,
    Stack,
    Strategy,
    TorchVersion,
    TransformersLoss,
    TransformersVersion,
    VllmSampler,
    VllmVersion,
    checks_of,
    input_at,
    release_keeps_kv,
    release_loads,
    run_checks,
    skips_tower,
    text_only_from,
    torch_before,
)
from core.mac import mac_refusal
from core.memo import last_answer, replaced
from core.model import (
    ALL_LINEAR,
    BNB_LINEAR_EXPERTS_4X,
    HEAD_TARGET,
    LINEAR_EXPERTS_4X,
    MIXER_TARGETS,
    MLP_TARGETS,
    ModelSpec,
    check_text,
    normalise_lora_targets,
)
from core.optimizer_stacks import STACK_NAMES, OptimizerStack, built_labels, optimizer_refusal, optimizer_stack
from core.pipeline import compute_split
from core.units import GiB

UNQUANTISED_CACHE: Final = (CacheType.F16, CacheType.BF16, CacheType.F32)
# torch.optim.Muon first shipped in PyTorch 2.9.0 (pytorch/pytorch PR 160213 "[muon] Introduce Muon optimizer to
# PyTorch", landed August 2025; 2.9.0 released 2025-10-15; torch 2.8's torch/optim has no _muon.py): the plan's
# releases before the 2.8+ bucket lack it. (torch.optim.Adafactor came in 2.5, PR 129905 of July 2024; the plan's
# adafactor is transformers' own Adafactor, transformers/optimization.py, whatever the torch release.)
MUON_FIRST_TORCH: Final = TorchVersion.V2_8
# torch optimizers without a fused kernel (torch 2.13.0 torch/optim/rmsprop.py: foreach and for-loop only). Picking
# one where the plan says fused (the HF Trainer default, adamw_torch_fused) follows what torch builds when no
# implementation is asked for, foreach on CUDA (transformers' rmsprop passes neither): Plan.follow_optimizer.
NO_FUSED_OPTIMIZERS: Final = frozenset({Optimizer.RMSPROP})
# The enums, labels and ranges of the inputs live in core.inputs; the Plan re-exports them for
# the code that has always imported them from here.
__all__ = [
    "ATTENTION_LABELS",
    "ENGINE_LABELS",
    "FLOAT8_LABELS",
    "GPUS_PER_NODE",
    "MEGATRON_CE_FUSION_LABELS",
    "METHOD_LABELS",
    "OPTIMIZER_IMPL_LABELS",
    "OPTIMIZER_LABELS",
    "PRECISION_ROLES",
    "PRESET_LABELS",
    "PRESET_ROLES",
    "QUANT_LABELS",
    "ROLE_FIELDS",
    "STACK_LABELS",
    "STRATEGY_LABELS",
    "TE_FLOAT8",
    "TRANSFORMERS_LOSS_LABELS",
    "Accounting",
    "Attention",
    "CacheType",
    "CheckpointPolicy",
    "CompileCache",
    "CpRotate",
    "Engine",
    "Float8",
    "FsdpUnits",
    "GgufQuant",
    "GradSync",
    "Hardware",
    "Inference",
    "LessonSettings",
    "LoraSettings",
    "MegatronCeFusion",
    "Method",
    "ModulesToSave",
    "MoeDispatcher",
    "MoeLayer",
    "Offload",
    "OllamaVersion",
    "Optimizer",
    "OptimizerImpl",
    "Parallelism",
    "PipelineSchedule",
    "PipelineSplit",
    "Plan",
    "Platform",
    "Precision",
    "PrecisionRoles",
    "PrefixCaching",
    "Preset",
    "RoadVariant",
    "SglangVersion",
    "Stack",
    "Strategy",
    "TorchVersion",
    "TransformersLoss",
    "TransformersVersion",
    "VllmSampler",
    "VllmVersion",
    "Workload",
    "precision_fields",
    "precision_of",
    "preset_matching",
]


@dataclass(frozen=True)
class PrecisionRoles:
    """Where each kind of tensor lives. Defaults and their sources:

    - ``weight_dtype``: transformers 5 ``from_pretrained`` loads the checkpoint's dtype
      (``dtype="auto"``), bf16 for today's checkpoints; the HF Trainer does not upcast a
      model loaded in bf16, so its gradients and optimizer state are bf16 too.
    - ``base_dtype``: the frozen base of LoRA / DoRA / frozen layers, loaded the same way.
    - ``adapter_dtype``: PEFT ``get_peft_model(autocast_adapter_dtype=True)`` (its
      default) casts adapters to float32; litgpt's ``bf16-true`` keeps them in the base's.
    - ``autocast``: ``Trainer(bf16=True)`` wraps the forward and the loss in
      ``torch.autocast(dtype=bfloat16)``; ``fp16=True`` adds a GradScaler.
    """

    weight_dtype: Dtype
    base_dtype: Dtype
    adapter_dtype: Dtype
    autocast: Autocast


PRESET_ROLES: Final[dict[Preset, PrecisionRoles]] = {
    Preset.TRAINER_BF16: PrecisionRoles(Dtype.BF16, Dtype.BF16, Dtype.FP32, Autocast.BF16),
    Preset.FP32_AUTOCAST_BF16: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.BF16),
    Preset.PURE_BF16: PrecisionRoles(Dtype.BF16, Dtype.BF16, Dtype.FP32, Autocast.NONE),
    Preset.FP16_AMP: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.FP16),
    Preset.FP32: PrecisionRoles(Dtype.FP32, Dtype.FP32, Dtype.FP32, Autocast.NONE),
}
# The old single ``precision`` setting, read as roles (plan files before version 3, lesson
# mode). Pure fp16 never had a preset of its own: it is custom with fp16 storage.
PRECISION_ROLES: Final[dict[Precision, tuple[Preset, PrecisionRoles]]] = {
    Precision.FP32: (Preset.FP32, PRESET_ROLES[Preset.FP32]),
    Precision.BF16_MIXED: (Preset.FP32_AUTOCAST_BF16, PRESET_ROLES[Preset.FP32_AUTOCAST_BF16]),
    Precision.FP16_MIXED: (Preset.FP16_AMP, PRESET_ROLES[Preset.FP16_AMP]),
    Precision.BF16: (Preset.PURE_BF16, PRESET_ROLES[Preset.PURE_BF16]),
    Precision.FP16: (Preset.CUSTOM, PrecisionRoles(Dtype.FP16, Dtype.FP16, Dtype.FP32, Autocast.NONE)),
}
_MIXED_BY_AUTOCAST: Final = {
    Autocast.NONE: Precision.FP32,
    Autocast.BF16: Precision.BF16_MIXED,
    Autocast.FP16: Precision.FP16_MIXED,
}
ROLE_FIELDS: Final = ("weight_dtype", "base_dtype", "adapter_dtype", "autocast")


def precision_of(roles: PrecisionRoles) -> Precision:
    """The old one-word precision that describes the roles (what lesson mode reads)."""
    if roles.weight_dtype is Dtype.FP32:
        return _MIXED_BY_AUTOCAST[roles.autocast]
    return Precision.BF16 if roles.weight_dtype is Dtype.BF16 else Precision.FP16


def preset_matching(roles: PrecisionRoles) -> Preset:
    return next((p for p, r in PRESET_ROLES.items() if r == roles), Preset.CUSTOM)


def _roles_dict(roles: PrecisionRoles) -> dict[str, Any]:
    return {name: getattr(roles, name) for name in ROLE_FIELDS}


def precision_fields(precision: Precision) -> dict[str, Any]:
    """The preset and roles the old one-word ``precision`` names, as Plan fields:
    ``Plan(model=..., **precision_fields(Precision.BF16))`` is the pure-bf16 plan."""
    preset, roles = PRECISION_ROLES[precision]
    return {"preset": preset, **_roles_dict(roles)}


# GPUs in one server node: DGX/HGX A100, H100, H200 and B200 boards carry 8 (NVIDIA DGX
# user guides); what "N GPUs" means when a count is turned into nodes.
GPUS_PER_NODE: Final = 8


@dataclass(frozen=True)
class LoraSettings:
    rank: int = DEFAULTS["lora.rank"]
    alpha: float = DEFAULTS["lora.alpha"]
    dropout: float = DEFAULTS["lora.dropout"]  # PEFT lora_dropout: adapters keep a dropped copy + mask
    targets: tuple[str, ...] = DEFAULTS["lora.targets"]
    # PEFT IA3Config.feedforward_modules: the targets whose input, not output, is scaled.
    ia3_feedforward: tuple[str, ...] = DEFAULTS["lora.ia3_feedforward"]
    # LitGPT's adapters (branch h41adapt): lit_gpt/adapter.py Config's adapter_prompt_length and
    # adapter_start_layer, and --quantize bnb.* (the base stored as QLoRA's, by quant / double_quant).
    adapter_prompt_length: int = DEFAULTS["lora.adapter_prompt_length"]
    adapter_start_layer: int = DEFAULTS["lora.adapter_start_layer"]
    adapter_quantised: bool = DEFAULTS["lora.adapter_quantised"]
    # PEFT PromptLearningConfig.num_virtual_tokens (prompt tuning, P-tuning; branch h41soft).
    virtual_tokens: int = DEFAULTS["lora.virtual_tokens"]
    # PEFT LoKrConfig.decompose_factor (branch h53lyco): -1 splits each side near its square root.
    lokr_factor: int = DEFAULTS["lora.lokr_factor"]
    # PEFT OFTConfig.oft_block_size (branch h54oft): 32 by default; 0 takes ``rank`` as the number of blocks.
    oft_block_size: int = DEFAULTS["lora.oft_block_size"]
    # PEFT's modules_to_save and trainable_token_indices (branch h60mts): whole copies of the embedding / head
    # trained beside the adapters, and k rows of the embedding (core.training.extra_trained).
    modules_to_save: ModulesToSave = DEFAULTS["lora.modules_to_save"]
    trainable_tokens: int = DEFAULTS["lora.trainable_tokens"]
    # PEFT RoadConfig.variant (branch h76peft): road_1 trains out/2 angles and scales a target, road_2 out, road_4
    # 2·out.
    road_variant: RoadVariant = DEFAULTS["lora.road_variant"]

    def __post_init__(self) -> None:
        run_checks(self, _LORA_CHECKS)


def extra_trained_outside_method(plan: Plan) -> bool:
    """PEFT's modules_to_save copies, or trainable tokens beside LoRA's adapters: trained tensors the method's own
    parameter count leaves out (core.training.extra_trained)."""
    lora = plan.lora
    tokens = bool(lora.trainable_tokens) and plan.method is not Method.TRAINABLE_TOKENS
    return lora.modules_to_save is not ModulesToSave.NONE or tokens


def default_plan_on(model: ModelSpec, model_id: str = "") -> Plan:
    """The planner's defaults on ``model``: served on vLLM where that is the one engine the model is planned on
    (chunked attention, Llama 4; a hybrid recurrent model: :func:`serving_on`), else exactly ``Plan(model=model)``."""
    return Plan(model=model, model_id=model_id, inference=serving_on(model, Inference()))


def serving_on(model: ModelSpec, inference: Inference) -> Inference:
    """``inference`` for ``model``: where :func:`serving_refusal` refuses the engine or its release for a model
    planned on vLLM only, the plan moves to vLLM: chunked attention (Llama 4) at the default release where the
    plan's predates Llama 4, a hybrid recurrent model at the newest of HYBRID_VLLM_LINES where the plan's is not
    one of the model's. Where the plan's own release then refuses what else the plan asks (text only before the
    family's line, prefix caching of a hybrid before 0.26) and that default or newest line does not, that line.
    Anything else (no refusal, a refusal of another field, a model served elsewhere too): ``inference`` itself.
    A hybrid on llama.cpp that :func:`hybrid_llamacpp_refusal` allows stays there."""
    error = serving_refusal(model, inference)
    if error is None or error.field not in _ENGINE_CHOICE:
        return inference
    if model.hybrid is not None:  # the releases whose hybrid rules were read, else the newest
        fallback = HYBRID_VLLM_NEWEST
        version = inference.vllm_version if inference.vllm_version in hybrid_vllm_lines(model) else fallback
    elif model.chunked_attention:
        fallback = DEFAULTS["inference.vllm_version"]
        late = list(VllmVersion).index(inference.vllm_version) >= list(VllmVersion).index(LLAMA4_VLLM_FROM)
        version = inference.vllm_version if late else fallback
    else:
        return inference
    moved = replace(inference, engine=Engine.VLLM, vllm_version=version)
    if version is not fallback and serving_refusal(model, moved) is not None:
        other = replace(moved, vllm_version=fallback)
        if serving_refusal(model, other) is None:
            return other
    return moved


# The serving inputs that choose the engine and its build or release: a refusal of one of them is answered by
# another engine (serving_on); a refusal of any other field (a KV format, a split) by that field.
_ENGINE_CHOICE: Final = frozenset(
    ("inference.engine", "inference.vllm_version", "inference.llamacpp_build", "inference.ollama_version")
)


def serving_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """Whether the engine and release of ``inf`` can serve ``model`` as the planner models it, by the kind of model:
    the one answer Plan validation (which raises it), :func:`serving_on` (which moves a plan to vLLM where the
    engine is the reason), the window, the command line and the reports give. None: served. A model with chunked
    local attention (Llama 4) on vLLM from LLAMA4_VLLM_FROM only (:func:`_chunked_attention_refusal`); a hybrid
    recurrent model on the vLLM releases read and on llama.cpp (:func:`_hybrid_serving_refusal`); a
    latent-attention model on llama.cpp at a current build and without Ollama (:func:`_latent_llamacpp_refusal`).
    Sliding windows and mixtures of experts are served by every engine (their own settings are checked with the
    engine's: Plan._check_serving_layout). Then the weights: a format the vLLM or SGLang release does not load
    (:func:`_weight_format_refusal`), FP8 under transformers before 4.49 (:func:`_transformers_fp8_refusal`). Then
    what the plan asks of the engine beyond the model: text only where
    the engine or release builds the vision tower anyway (:func:`_text_only_refusal`), prefix caching of a hybrid
    before vLLM 0.26 (:func:`_hybrid_prefix_caching_refusal`)."""
    refused = _model_kind_refusal(model, inf)
    if refused is None:
        refused = _weight_format_refusal(inf)
    if refused is None:
        refused = _kv_format_refusal(model, inf)
    if refused is None:
        refused = _transformers_fp8_refusal(inf)
    if refused is None:
        refused = _text_only_refusal(model, inf)
    if refused is None:
        refused = _sglang_multimodal_refusal(model, inf)
    if refused is None:
        refused = _hybrid_prefix_caching_refusal(model, inf)
    return refused


# The serving choices whose entries an engine release may refuse with the rest of the plan as it is: the release
# pickers and the weight and KV-cache formats (:func:`refused_choices`).
RELEASE_CHOICES: Final = (
    "inference.vllm_version",
    "inference.sglang_version",
    "inference.transformers_version",
    "inference.weight_dtype",
    "inference.kv_dtype",
)


@last_answer
def refused_choices(model: ModelSpec, inf: Inference) -> dict[str, dict[str, str]]:
    """By path of :data:`RELEASE_CHOICES`, the entries :func:`serving_refusal` refuses were the plan to pick one, the
    rest of ``inf`` as it is, each entry's value with the refusal's reason: a weight format the release does not load
    (:func:`_weight_format_refusal`: its reason names the first or last release that does; FP8 under transformers
    before 4.49, :func:`_transformers_fp8_refusal`), a release that does not
    load the plan's weights, its model or what else it asks (text only, prefix caching of a hybrid), a KV format a
    hybrid's cache has not. The Serving form greys those entries with the reason, so that it offers only what Plan
    validation takes. A release picker is read only on its own engine; the plan's own values are never refused (it is
    valid). Reused for the same ``model`` and ``inf`` objects, as a training edit leaves both."""
    versions = {
        Engine.VLLM: "inference.vllm_version",
        Engine.SGLANG: "inference.sglang_version",
        Engine.HF: "inference.transformers_version",
    }
    paths = [p for p in RELEASE_CHOICES if p not in versions.values() or versions.get(inf.engine) == p]
    refused: dict[str, dict[str, str]] = {path: {} for path in RELEASE_CHOICES}
    for path in paths:
        spec = input_at(path)
        attribute, current = spec.attribute, getattr(inf, spec.attribute)
        for value in spec.enum:
            if value is current:
                continue
            error = serving_refusal(model, replaced(inf, **{attribute: value}))
            if error is not None:
                refused[path][value.value] = error.reason or f"expected {error.allowed}"
    return refused


def _weight_format_refusal(inf: Inference) -> PlanError | None:
    """A weight format the plan's vLLM or SGLang release does not load (core.inputs.release_loads: its --quantization
    name is not among the release's, read from the wheels), refused with the formats that release covers and the
    releases that take it."""
    release: VllmVersion | SglangVersion
    table: dict[WeightFormat, tuple[Any, Any]]
    if inf.engine is Engine.VLLM:
        label, release, table = "vLLM", inf.vllm_version, {**VLLM_WEIGHT_LINES}
    elif inf.engine is Engine.SGLANG:
        label, release, table = "SGLang", inf.sglang_version, {**SGLANG_WEIGHT_RELEASES}
    else:
        return None
    if release_loads(inf.weight_dtype, release):
        return None
    first, last = table[inf.weight_dtype]
    span = f"from {label} {first.value}" if first is not None else f"up to {label} {last.value if last else ''}"
    covered = ", ".join(WEIGHT_NAMES[f] for f in WeightFormat if release_loads(f, release))
    return PlanError(
        "inference.weight_dtype",
        inf.weight_dtype.value,
        f"one of {covered} on {label} {release.value}",
        f"{label} {release.value} has no {WEIGHT_NAMES[inf.weight_dtype]} weights: its --quantization takes the "
        f"format {span}",
    )


# vLLM's per-token-head integer caches run on one attention backend: TRITON_ATTN is the only backend whose
# supported_kv_cache_dtypes names int8_per_token_head / int4_per_token_head (vllm/v1/attention/backends/triton_attn.py
# in the 0.20.2, 0.25.1 and 0.34.0 wheels; no MLA backend has them). Without --attention-backend the platform takes
# the first valid backend of its priority list (0.20.2 vllm/platforms/cuda.py get_attn_backend_cls /
# get_valid_backends: FLASH_ATTN, FLASHINFER, TRITON_ATTN, ...; vllm/platforms/rocm.py appends TRITON_ATTN), so a
# model with ordinary attention falls to Triton, whose supports_head_size is ``head_size >= 32``; a latent-attention
# model, whose backends are all MLA ones, finds none ("No valid attention backend found"). int4 also rotates every
# head with a Hadamard transform that asserts a power-of-2 head size (0.25.1
# vllm/v1/attention/ops/int4_per_token_head.py fast_hadamard_transform: "Requires power-of-2 dim").
TRITON_MIN_HEAD_SIZE: Final = 32


def _kv_format_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """A per-token-head KV cache on vLLM or SGLang where the release does not keep it (core.inputs.release_keeps_kv:
    vLLM's int8_per_token_head and fp8_per_token_head from 0.20, int4_per_token_head from 0.25, no SGLang release),
    refused with the formats that release covers and the lines that take it; on vLLM, one its attention backend
    cannot run (above). transformers' QuantizedCache (int8 / int4) and llama.cpp's q8_0 / q4_0 are their own
    engines' rules; transformers has no fp8_per_token_head."""
    kv = inf.kv_dtype
    if inf.engine is Engine.HF and kv is KvDtype.FP8_PER_TOKEN_HEAD:
        why = "fp8_per_token_head is vLLM's cache (from 0.20); transformers' generate keeps no such cache"
        return PlanError("inference.kv_dtype", kv.value, "bf16, fp16, fp32, fp8, int8 or int4 under transformers", why)
    if inf.engine not in (Engine.VLLM, Engine.SGLANG) or kv not in VLLM_KV_NAMES:
        return None
    label, release = ("vLLM", inf.vllm_version) if inf.engine is Engine.VLLM else ("SGLang", inf.sglang_version)
    covered = ", ".join(k.value for k in KvDtype if release_keeps_kv(k, release))
    if not release_keeps_kv(kv, release):
        if inf.engine is Engine.SGLANG:
            what = "per-token-head" if kv is KvDtype.FP8_PER_TOKEN_HEAD else "integer"
            why = f"SGLang's --kv-cache-dtype takes no {what} format in any release (0.4.0 - 0.5.23: floats only)"
        else:
            named = {k: n + ("" if n == k.value else f" ({k.value})") for k, n in VLLM_KV_NAMES.items()}
            lines = "; ".join(f"{named[k]} from {VLLM_KV_FROM[k].value}" for k in VLLM_KV_NAMES)
            why = f"vLLM {release.value}'s --kv-cache-dtype has no {VLLM_KV_NAMES[kv]}: vLLM takes {lines}"
        return PlanError("inference.kv_dtype", kv.value, f"one of {covered} on {label} {release.value}", why)
    name = VLLM_KV_NAMES[kv]
    if model.latent_attention:
        why = f"vLLM's MLA attention backends have no {name}: only TRITON_ATTN keeps it, and it runs no MLA"
        return PlanError("inference.kv_dtype", kv.value, "bf16, fp16, fp32 or fp8 for a latent-attention model", why)
    if model.head_dim < TRITON_MIN_HEAD_SIZE:
        why = f"vLLM runs {name} on TRITON_ATTN only, which takes heads of {TRITON_MIN_HEAD_SIZE} or more"
        return PlanError("inference.kv_dtype", kv.value, f"a 16-bit or fp8 cache for a head of {model.head_dim}", why)
    if kv is KvDtype.INT4 and model.head_dim & (model.head_dim - 1):
        why = f"vLLM's {name} rotates each head by a Hadamard transform of a power-of-2 size, not {model.head_dim}"
        return PlanError("inference.kv_dtype", kv.value, f"int8, fp8 or 16 bits for a head of {model.head_dim}", why)
    return None


def _transformers_fp8_refusal(inf: Inference) -> PlanError | None:
    """FP8 weights under a transformers that cannot load them: the fine-grained FP8 integration
    (``integrations/finegrained_fp8.py``, ``FP8Linear``) is in the 4.49.0 wheel and not in 4.48.3's
    (core.serving.transformers_versions). Refused on the release, as Plan validation refused it before it joined
    :func:`serving_refusal` (branch h93form), so that the Serving form greys what Hugging Face generate cannot load."""
    if inf.engine is not Engine.HF or inf.weight_dtype is not WeightFormat.FP8:
        return None
    version, first = inf.transformers_version, TransformersVersion.V4_49
    if list(TransformersVersion).index(version) >= list(TransformersVersion).index(first):
        return None
    return PlanError(
        "inference.transformers_version",
        version.value,
        f"{first.value} or later with FP8 weights",
        "transformers loads fine-grained FP8 checkpoints from 4.49 (integrations/finegrained_fp8.py)",
    )


def _model_kind_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    if model.chunked_attention:
        return _chunked_attention_refusal(inf)
    if model.hybrid is not None:
        return _hybrid_serving_refusal(model, inf)
    if model.latent_attention and inf.engine is Engine.LLAMACPP:
        return _latent_llamacpp_refusal(inf)
    return None


# SGLang's text-only flag for the Qwen-VL families, open (not merged): sgl-project/sglang PR #28497. The
# --language-model-only that shipped from 0.5.18 (arg_groups/model_hook.py handle_language_model_only in the 0.5.20 /
# 0.5.23 wheels; absent from 0.5.17's) refuses any architecture outside ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES:
# MuseGlimmer (0.5.18), Cosmos3 / Cosmos3Edge (0.5.20), DeepseekV4ForCausalLM (0.5.23), none an image-text family
# the planner reads.
SGLANG_TEXT_ONLY_PR: Final = "sgl-project/sglang PR #28497"


def _text_only_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """Text-only serving (``inference.text_only``) of an image-text checkpoint on an engine or release that builds
    the vision tower whatever the requests hold (core.serving.text_only says what each engine does): vLLM before
    the family's line of core.inputs.TEXT_ONLY_FROM, SGLang (its ``--language-model-only`` takes none of these
    families; :data:`SGLANG_TEXT_ONLY_PR`, which would, is not merged) and transformers. llama.cpp loads a tower
    only from an mmproj file, which its plans leave out: nothing to refuse."""
    if not inf.text_only or not model.vision_params or inf.engine is Engine.LLAMACPP:
        return None
    family = model.vision_family or "an image-text family"
    every = f"vLLM {TEXT_ONLY_EVERY_MODEL_FROM.value} or later (any image-text family)"
    if inf.engine is Engine.VLLM:
        if not model.vision_family:
            return PlanError(
                "inference.text_only",
                True,
                "off for a model whose family is not recorded",
                "the plan's model predates the family field; reopen the model to read it",
            )
        if skips_tower(inf.vllm_version, model.vision_family):
            return None
        first = text_only_from(model.vision_family).value
        return PlanError(
            "inference.text_only",
            True,
            f"vLLM {first} or later for {family}",
            f"vLLM {inf.vllm_version.value} builds {family}'s vision tower whatever --limit-mm-per-prompt says",
        )
    if inf.engine is Engine.SGLANG:
        why = (
            "SGLang builds the vision tower: its --language-model-only (0.5.18 on) takes none of these families, "
            f"{SGLANG_TEXT_ONLY_PR} is not merged"
        )
        return PlanError("inference.text_only", True, every, why)
    why = "transformers 5.25's AutoModelForCausalLM builds the whole image-text model (Gemma 3) or refuses it (Qwen-VL)"
    return PlanError("inference.text_only", True, every, why)


def _sglang_multimodal_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """SGLang's --enable-multimodal (``inference.sglang_enable_multimodal``) for Gemma 3 / Llama 4 on SGLang
    (core.inputs.SGLANG_MM_DISABLED_FAMILIES) on a release before core.inputs.SGLANG_ENABLE_MULTIMODAL_FROM, whose
    server_args.py has no such flag (argparse refuses it; 0.4.5 serves both families as multimodal without it; the
    Serving form offers the box from that release only, core.inputs.sglang_multimodal_opt_in). Elsewhere the flag
    changes nothing, as its help text says ("If the model being served is not multimodal, nothing will happen"), and
    is left alone."""
    if not inf.sglang_enable_multimodal or inf.engine is not Engine.SGLANG:
        return None
    if not model.vision_params or model.vision_family not in SGLANG_MM_DISABLED_FAMILIES:
        return None
    if _SGLANG_LINES.index(inf.sglang_version) >= _SGLANG_LINES.index(SGLANG_ENABLE_MULTIMODAL_FROM):
        return None
    return PlanError(
        "inference.sglang_enable_multimodal",
        True,
        f"off, or SGLang {SGLANG_ENABLE_MULTIMODAL_FROM.value} or later",
        f"SGLang {inf.sglang_version.value}'s server_args.py has no --enable-multimodal: the flag came in "
        f"{SGLANG_ENABLE_MULTIMODAL_FROM.value}",
    )


def _hybrid_prefix_caching_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """Prefix caching asked of a hybrid on a vLLM release before :data:`PREFIX_CACHING_OPT_IN_FROM`, where
    ``is_prefix_caching_supported`` is False for hybrids ("Hybrid models do not support prefix caching since the
    feature is still experimental", 0.24.0 vllm/config/model.py) and what the engine then does with the switch is
    not modelled (core.serving.vllm_hybrid reads the releases from it on)."""
    if model.hybrid is None or inf.engine is not Engine.VLLM or inf.prefix_caching is not PrefixCaching.ON:
        return None
    if _VLLM_LINES.index(inf.vllm_version) >= _VLLM_LINES.index(PREFIX_CACHING_OPT_IN_FROM):
        return None
    return PlanError(
        "inference.prefix_caching",
        inf.prefix_caching.value,
        f"engine default or off, or vLLM {PREFIX_CACHING_OPT_IN_FROM.value} or later",
        f"vLLM {inf.vllm_version.value} does not support prefix caching for hybrid models",
    )


def _chunked_attention_refusal(inf: Inference) -> PlanError | None:
    """A model with chunked local attention (Llama 4) is planned on vLLM from the release line that loads it
    (core.inputs.LLAMA4_VLLM_FROM): vLLM's ChunkedLocalAttentionSpec and its KV groups were read
    (core.serving.vllm_rules). transformers' generate runs Llama4TextMoe's every expert on every token
    (hidden_states.repeat over num_local_experts, transformers 5.25.0 models/llama4/modeling_llama4.py), a
    working memory the generate rules do not count; SGLang's and llama.cpp's chunked caches were not read."""
    if inf.engine is not Engine.VLLM:
        return PlanError(
            "inference.engine",
            inf.engine.value,
            "vLLM for a model with chunked attention (Llama 4)",
            "planned on vLLM only: transformers' generate runs every expert on every token, and SGLang's and "
            "llama.cpp's chunked caches are not modelled",
        )
    if list(VllmVersion).index(inf.vllm_version) < list(VllmVersion).index(LLAMA4_VLLM_FROM):
        return PlanError(
            "inference.vllm_version",
            inf.vllm_version.value,
            f"{LLAMA4_VLLM_FROM.value} or later for Llama 4",
            "vLLM loads Llama 4 from 0.8.3",
        )
    return None


def _hybrid_serving_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """A hybrid recurrent model (core.hybrid) is planned for serving on the vLLM releases whose hybrid rules were
    read (:data:`HYBRID_VLLM_LINES`, from the first that loads the model), one pipeline stage, a tensor-parallel
    size its recurrent mixer splits evenly, a 16-bit or fp8 cache, and on llama.cpp as
    :func:`hybrid_llamacpp_refusal` allows; the rest is refused, naming what is not modelled."""
    hybrid = model.hybrid
    if hybrid is None:
        return None
    if inf.engine is Engine.LLAMACPP:  # core.serving.llamacpp_hybrid
        return hybrid_llamacpp_refusal(model, inf)
    if inf.engine is not Engine.VLLM or inf.vllm_version not in HYBRID_VLLM_LINES:
        field, value = (
            ("inference.engine", inf.engine.value)
            if inf.engine is not Engine.VLLM
            else ("inference.vllm_version", inf.vllm_version.value)
        )
        return PlanError(field, value, f"vLLM {_hybrid_lines_text(model)}", hybrid_refusal(model))
    if inf.vllm_version not in hybrid_vllm_lines(model):
        first = HYBRID_VLLM_FROM[model.family]
        why = f"vLLM {inf.vllm_version.value} does not load {model.name}: vLLM {first.value} is the first that does"
        return PlanError("inference.vllm_version", inf.vllm_version.value, f"vLLM {_hybrid_lines_text(model)}", why)
    if inf.kv_dtype in PER_TOKEN_HEAD_KV:  # vLLM's int8 / int4 / fp8_per_token_head (core.inputs.VLLM_KV_NAMES)
        why = "the hybrid page rule was read for 16-bit and fp8 caches, not vLLM's per-token-head ones"
        return PlanError("inference.kv_dtype", inf.kv_dtype.value, "bf16, fp16, fp32 or fp8 for a hybrid model", why)
    if inf.pipeline_parallel > 1:
        why = "the split of a hybrid's attention and recurrent layers over pipeline stages is not modelled"
        return PlanError("inference.pipeline_parallel", inf.pipeline_parallel, "1 for a hybrid model", why)
    try:
        hybrid.state_elements(inf.tensor_parallel)
    except PlanError as error:
        return PlanError("inference.tensor_parallel", inf.tensor_parallel, error.allowed)
    return None


def _latent_llamacpp_refusal(inf: Inference) -> PlanError | None:
    """llama.cpp's ``deepseek2`` cache is modelled for a current build only (``--llamacpp-build 0``: one
    latent as K, no V, ggml-org/llama.cpp PR #19067 of 2026-01-24, core.serving.kv.llamacpp_cache_widths):
    older builds kept V beside it (PR #12801, 2025-04) or the decompressed heads before that, and the
    build numbers of those changes are not read. Ollama's own estimate of a deepseek2 file (GraphSize's
    key and value lengths for it) is not read either."""
    if inf.llamacpp_build:
        return PlanError(
            "inference.llamacpp_build",
            inf.llamacpp_build,
            "0 (a current build) for a latent-attention model",
            "llama.cpp's deepseek2 cache changed with PR #12801 (2025-04: K and V of the latent) and PR "
            "#19067 (2026-01: K only); their build numbers are not read",
        )
    if inf.ollama_version is not OllamaVersion.NONE:
        return PlanError(
            "inference.ollama_version",
            inf.ollama_version.value,
            "none (llama-server) for a latent-attention model",
            "Ollama's own memory estimate of a deepseek2 file is not modelled",
        )
    return None


def lora_on(model: ModelSpec, lora: LoraSettings) -> LoraSettings:
    """``lora`` on ``model``: a latent-attention model has no k_proj or v_proj (nor q_proj with a
    q_lora_rank), so targets it lacks give way to o_proj, the one attention matrix a target names there
    (Plan._check_latent_attention); picking such a model, or reading a run config onto it, shows the
    targets that result. A hybrid: targets it lacks (its MLP's: :func:`hybrid_trained_targets`) give way
    (the output head stays, as a run config read onto it names it), and its mixer's in_proj and out_proj join them,
    the layers every released hybrid starts with (what :func:`hybrid_training_refusal` asks for). Any other model:
    ``lora`` itself."""
    if model.recurrent_mixer:  # the head is kept as a target (hybrid_training_refusal names it)
        kept = tuple(t for t in lora.targets if t in hybrid_trained_targets(model) or t == HEAD_TARGET)
        targets = normalise_lora_targets((*kept, *MIXER_TARGETS))
        if targets == lora.targets:
            return lora
        return replace(lora, targets=targets, ia3_feedforward=tuple(t for t in lora.ia3_feedforward if t in targets))
    if not model.latent_attention:
        return lora
    reach = model.adapter_targets()
    kept = tuple(t for t in lora.targets if t in reach or t == HEAD_TARGET)
    if kept == lora.targets:
        return lora
    targets = normalise_lora_targets(("o_proj", *kept))
    return replace(lora, targets=targets, ia3_feedforward=tuple(t for t in lora.ia3_feedforward if t in targets))


def _linear_experts(model: ModelSpec, release: TransformersLoss, litgpt: bool) -> bool:
    """Plan.linear_experts for ``model`` under ``release`` (LitGPT's own MoE: always)."""
    return litgpt or (release is not _TRANSFORMERS_V5 and model.family in LINEAR_EXPERTS_4X)


def moe_targets_reach_nothing(model: ModelSpec, targets: tuple[str, ...], linear_experts: bool) -> bool:
    """Whether ``targets`` reach no module of the mixture of experts ``model`` (ModelSpec.adapted_rows): MLP targets
    alone where its routed experts are 3-D, with no shared expert, no dense layer and not the head (PEFT: "Target
    modules {...} not found in the base model"). False for any other model."""
    if model.num_experts == 1 or model.recurrent_mixer or model.first_k_dense_replace or HEAD_TARGET in targets:
        return False
    return not model.adapted_rows(targets, linear_experts)


def _default_targets_for(method: Method, lora: LoraSettings) -> LoraSettings:
    """``lora`` with targets left at the other kind's default swapped for ``method``'s (IA3 or a
    LoRA-style adapter); chosen targets are kept."""
    lora_default = DEFAULTS["lora.targets"]
    left, taken = (lora_default, IA3_DEFAULT_TARGETS) if method is Method.IA3 else (IA3_DEFAULT_TARGETS, lora_default)
    return replace(lora, targets=taken) if lora.targets == left else lora


# PEFT's LN tuning (branch h52pfx): the model families whose default target modules are every norm on the
# residual stream, each block's and the final one (huggingface/peft 51c2ff66 src/peft/utils/constants.py
# TRANSFORMERS_MODELS_TO_LNTUNING_TARGET_MODULES_MAPPING: llama, mistral, gemma ["input_layernorm",
# "post_attention_layernorm", "norm"]; gemma2, gemma3_text those plus "pre_feedforward_layernorm",
# "post_feedforward_layernorm"; gpt2 ["ln_1", "ln_2", "ln_f"]). Qwen2 / Qwen3 name post_attention_layernorm
# alone and other families nothing (PEFT then asks for target_modules): not modelled.
LN_TUNING_FAMILIES: Final = ("llama", "mistral", "gemma", "gemma2", "gemma3_text", "gpt2")
# Method groups as sets: the properties below are asked some twenty times per estimate, and a set's
# hash lookup is several times faster than comparing a StrEnum with each member of a tuple.
_ADAPTER_BASED: Final = frozenset(
    (
        Method.LORA,
        Method.QLORA,
        Method.DORA,
        Method.IA3,
        Method.ADAPTER,
        Method.ADAPTER_V2,
        Method.PROMPT_TUNING,
        Method.P_TUNING,
        Method.PREFIX_TUNING,
        Method.LN_TUNING,
        Method.TRAINABLE_TOKENS,
        Method.LOHA,
        Method.LOKR,
        Method.VERA,
        Method.ADALORA,
        Method.OFT,
        Method.MISS,
        Method.FOURIERFT,
        Method.ROAD,
        Method.VBLORA,
        Method.RANDLORA,
        Method.SHIRA,
        Method.BOFT,
    )
)
_LYCORIS: Final = frozenset((Method.LOHA, Method.LOKR))
# PEFT's layers wrapping each target nn.Linear whose rules this planner models on one GPU or DDP only
# The vLLM release lines a hybrid recurrent model (core.hybrid) is planned on: V1 only (0.11.0 removed V0 and
# its MambaCacheManager), with prefix caching off for hybrids by default, so one recurrent-state page a request
# (vllm-project/vllm 0.11.0 wheel vllm/model_executor/models/config.py MambaModelConfig: "disabling prefix
# caching since it is not yet supported"; 0.12.0 - 0.19.0 vllm/config/model.py is_prefix_caching_supported:
# "Hybrid models do not support prefix caching"), and HybridAttentionMambaModelConfig's page rule as
# core.serving.vllm_hybrid has it (read in the 0.11.0, 0.11.1, 0.11.2, 0.12.0 - 0.19.0 wheels). 0.20.0 - 0.34.0
# (every x.0 wheel read, branch h66v20): the platform sets the page, and from 0.28.0 prefix caching is on for
# hybrids by default ("align" mode: two or three state blocks a request), as core.serving.vllm_hybrid models.
_VLLM_LINES: Final = list(VllmVersion)
_SGLANG_LINES: Final = list(SglangVersion)
HYBRID_VLLM_LINES: Final = frozenset(
    _VLLM_LINES[_VLLM_LINES.index(VllmVersion.V0_11) : _VLLM_LINES.index(VllmVersion.V0_34) + 1]
)
HYBRID_VLLM_LINES_TEXT: Final = "0.11 - 0.34"
HYBRID_VLLM_NEWEST: Final = VllmVersion.V0_34  # the line Plan.on_model moves a hybrid to from any other
# The first line whose ModelConfig.is_prefix_caching_supported is True for a generative hybrid (False up to 0.25.0:
# "Hybrid models do not support prefix caching"; the x.0 wheels read on branch h66v20, core.serving.vllm_hybrid's
# module text), so that --enable-prefix-caching turns "align" mode on (opt-in in 0.26.0 and 0.27.0, the default from
# 0.28.0: vllm_hybrid.PREFIX_CACHING_FROM); before it Plan validation refuses the switch.
PREFIX_CACHING_OPT_IN_FROM: Final = VllmVersion.V0_26


# The first release line that loads a hybrid family newer than 0.11, by core.hybrid's model_type: Qwen3.5 /
# Qwen3.6 (vllm/model_executor/models/qwen3_5.py and the registry's Qwen3_5ForConditionalGeneration /
# Qwen3_5MoeForConditionalGeneration are in the 0.17.0 wheel, not in 0.16.0's; 0.18.0 and 0.19.0 have them too).
HYBRID_VLLM_FROM: Final = {"qwen3_5_text": VllmVersion.V0_17, "qwen3_5_moe_text": VllmVersion.V0_17}


def _hybrid_first_line(model: ModelSpec) -> VllmVersion | None:
    """The first vLLM line that loads the hybrid ``model`` where it is newer than 0.11 (HYBRID_VLLM_FROM), else
    None; a hybrid's ModelSpec.family is core.hybrid's model_type."""
    return HYBRID_VLLM_FROM.get(model.family) if model.recurrent_mixer else None


def hybrid_vllm_lines(model: ModelSpec) -> frozenset[VllmVersion]:
    """The lines of HYBRID_VLLM_LINES that load the hybrid ``model`` (all of them but for HYBRID_VLLM_FROM)."""
    first = _hybrid_first_line(model)
    if first is None:
        return HYBRID_VLLM_LINES
    return frozenset(v for v in HYBRID_VLLM_LINES if _VLLM_LINES.index(v) >= _VLLM_LINES.index(first))


def _hybrid_lines_text(model: ModelSpec) -> str:
    first = _hybrid_first_line(model)
    return HYBRID_VLLM_LINES_TEXT if first is None else f"{first.value} - {HYBRID_VLLM_NEWEST.value}"


# Hybrid families Ollama serves on its own Go engine (ollamarunner), whose cache and estimate were not read:
# Qwen3-Next, and Qwen3.5 / Qwen3.6, whose qwen35 / qwen35moe GGUFs Ollama's model/models/qwen3next package loads
# (ollama/ollama cc90a035, model/models/qwen3next/model.go: model.Register for "qwen35", "qwen35moe", "qwen3next").
HYBRID_OLLAMA_ENGINE: Final = {
    "qwen3_next": "Qwen3-Next",
    "qwen3_5_text": "Qwen3.5 / Qwen3.6",
    "qwen3_5_moe_text": "Qwen3.5 / Qwen3.6",
}


def hybrid_refusal(model: ModelSpec) -> str:
    """Why a hybrid recurrent model is served on vLLM and llama.cpp only: what each other engine lacks."""
    hybrid = model.hybrid
    mixer = MIXER_NAMES[hybrid.mixer.kind] if hybrid is not None else "recurrent"
    return (
        f"{model.name} is a hybrid of {mixer} and attention layers, planned for serving on vLLM "
        f"{_hybrid_lines_text(model)} and llama.cpp (a current build) only: transformers' generate (its hybrid "
        "cache) and SGLang's recurrent-state pool are not modelled"
    )


def hybrid_llamacpp_refusal(model: ModelSpec, inf: Inference) -> PlanError | None:
    """What llama.cpp's plan of a hybrid recurrent model (core.serving.llamacpp_hybrid) refuses: a build other
    than a current one (0), whose architectures and llama_memory_recurrent were not read; an Ollama line before
    0.30, whose own estimate of a recurrent model (GraphSize, createLayout) was not read; Qwen3-Next and Qwen3.5 /
    Qwen3.6 on Ollama, whose Go engine runs them (:data:`HYBRID_OLLAMA_ENGINE`). None: planned."""
    if inf.llamacpp_build:
        why = (
            "the builds that first ran granitehybrid, nemotron_h, falcon-h1 and qwen3next, and "
            "llama_memory_recurrent's changes since, are not read"
        )
        return PlanError("inference.llamacpp_build", inf.llamacpp_build, "0 (a current build) for a hybrid model", why)
    line = inf.ollama_version
    own = HYBRID_OLLAMA_ENGINE.get(model.family)
    if line is OllamaVersion.NONE or (line in OLLAMA_LLAMA_FIT and own is None):
        return None
    if own is not None:
        why = f"Ollama runs {own} on its own Go engine (model/models/qwen3next), whose cache and estimate are not read"
        return PlanError("inference.ollama_version", line.value, f"none (llama-server) for {own}", why)
    fit = ", ".join(sorted(v.value for v in OLLAMA_LLAMA_FIT))
    why = "before 0.30 Ollama places layers by its own estimate, whose recurrent state was not read"
    return PlanError("inference.ollama_version", line.value, f"none or {fit} (llama-server's fit) for a hybrid", why)


# A hybrid's LoRA targets whose training is modelled: attention's and the Mamba-2 mixer's projections. The MLP's
# are left out: Granite 4.0-H's shared MLP is input_linear / output_linear and its experts 3-D parameters, which
# no target names here.
HYBRID_TRAINED_TARGETS: Final = ("q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "out_proj")
# A dense Gated DeltaNet hybrid's MLP (Qwen3.5: Qwen3_5MLP's gate_proj / up_proj / down_proj in every layer) is a
# plain gated MLP, adapted as any model's; a mixture of experts' (Qwen3-Next, Qwen3.5-MoE: 3-D experts, and a
# shared expert whose adapters the rules do not place) is not.
GDN_DENSE_TRAINED_TARGETS: Final = (*HYBRID_TRAINED_TARGETS, "gate_proj", "up_proj", "down_proj")


def hybrid_trained_targets(model: ModelSpec) -> tuple[str, ...]:
    """The LoRA targets whose training is modelled on the hybrid ``model``."""
    if model.recurrent_mixer == "gated_deltanet" and model.num_experts == 1:
        return GDN_DENSE_TRAINED_TARGETS
    return HYBRID_TRAINED_TARGETS


def training_refusal(subject: Plan | ModelSpec) -> str | None:
    """Why the training step of a plan (or of any plan of a model) is not estimated, or None where it is. Every
    view says so in place of a training verdict (the window's training view, the command line, comparisons, the
    diagnosis). Llama 4, whose transformers 5.25.0 Llama4TextMoe runs every expert on every token
    (``hidden_states.repeat(router_scores.shape[1], 1)`` into Llama4TextExperts' torch.bmm over
    num_local_experts: activations and FLOPs num_local_experts times a routed pass's) with chunked attention and
    a weightless q/k L2 norm on three layers in four, none of which the training rules count; a hybrid
    recurrent model outside what :func:`hybrid_training_refusal` allows."""
    model = subject if isinstance(subject, ModelSpec) else subject.model
    if model.chunked_attention:
        return (
            f"{model.name} is planned for serving on vLLM only: transformers' Llama4TextMoe runs all "
            f"{model.num_experts} experts on every token (activations and FLOPs {model.num_experts}× a routed "
            f"pass's), and its chunked attention ({model.chunked_layers} layers within {model.attention_chunk:,}-token "
            "chunks) and q/k L2 norm are not modelled for training"
        )
    if model.hybrid is None:
        return None
    if isinstance(subject, ModelSpec):
        return _hybrid_model_refusal(model)
    return hybrid_training_refusal(subject)


def _hybrid_model_refusal(model: ModelSpec) -> str | None:
    """What no plan of this hybrid can train: Falcon-H1's parallel layers, a plan file that predates the Mamba-2
    scan's chunk."""
    hybrid = model.hybrid
    assert hybrid is not None
    mixer = MIXER_NAMES[hybrid.mixer.kind]
    if hybrid.mixer.kind != "mamba2":
        return None  # Gated DeltaNet (Qwen3-Next, Qwen3.5 / 3.6): core.training.gdn; hybrid_training_refusal
    if model.attention_layers == model.recurrent_layers == model.num_layers:
        return (
            f"Training {model.name} is not estimated: its layers run {mixer} and attention side by side "
            "(Falcon-H1), which the training rules do not model; it is planned for serving only"
        )
    if not model.recurrent_chunk:
        return (
            f"Training {model.name} is not estimated: this plan's model predates the {mixer} scan's chunk size "
            "(mamba_chunk_size), which sizes what the mixer keeps; pick the model again"
        )
    return None


def check_trainable(plan: Plan, expected: str) -> None:
    """Raise the one error a training question about ``plan`` gets where its step is not estimated
    (:func:`training_refusal`); ``expected`` names what to ask instead (the command line's flag, a comparison's
    plan)."""
    refusal = training_refusal(plan)
    if refusal is not None:
        raise PlanError("mode", "training", expected, refusal)


def hybrid_training_refusal(plan: Plan) -> str | None:
    """A hybrid is trained here as transformers 5.25.0 + PEFT run it on one GPU, or on data-parallel ranks that each
    run that step (DDP, FSDP2, ZeRO-1 / 2 / 3: :func:`_hybrid_layout_gap`): a Mamba-2 hybrid (Granite 4.0-H,
    Bamba, Nemotron-H: core.training.mamba) or a Gated DeltaNet one (Qwen3-Next, Qwen3.5 / 3.6: core.training.gdn),
    both measured on fake tensors (benchmarks/accuracy/cases_hybrid.json): full fine-tuning or LoRA on attention's
    and the mixer's projections (a dense Gated DeltaNet hybrid's MLP too: :func:`hybrid_trained_targets`) with
    in_proj among them (the first layer is a recurrent layer in every released hybrid: with its adapter there
    every layer needs its gradient, which is what the rules count), 16-bit weights or autocast, no checkpointing
    or Hugging Face's per-layer one, PyTorch eager. Everything else is refused with what is missing."""
    model = plan.model
    refused = _hybrid_model_refusal(model)
    if refused is not None:
        return refused
    mixer = MIXER_NAMES[model.recurrent_mixer]
    why = _hybrid_plan_gap(plan)
    if why is None:
        return None
    return (
        f"Training {model.name} (a {mixer} hybrid) is estimated on one GPU or data-parallel ranks (DDP, FSDP2, "
        f"ZeRO-1 / 2 / 3) under transformers + PEFT only: {why}"
    )


# What transformers 5.25.0's base_model_tp_plan splits of each hybrid (models/<type>/configuration_<type>.py):
# attention only on Granite 4.0-H and Nemotron-H, attention and the MLP on Bamba; Qwen3-Next's and Qwen3.5's
# Gated DeltaNet projections are "colwise_gather_output" (each rank gathers their whole output back).
_MIXER_TP: Final = {
    "mamba2": "has no entry for the Mamba-2 mixer (its in_proj and out_proj would stay whole on every rank)",
    "gated_deltanet": (
        "plans the Gated DeltaNet projections colwise_gather_output (every rank gathers their whole output and "
        "runs the whole delta rule)"
    ),
}


def _hybrid_layout_gap(plan: Plan) -> str | None:
    """Which multi-GPU layout of a hybrid is not modelled: anything that splits the model (a rank of pure data
    parallelism runs the one-GPU step at its micro-batch; core.parallel holds its state, each decoder layer an
    FSDP unit of its own size: core.parallel.layout.fsdp_block_units), FSDP1's flat-parameter wrap, and ZeRO-3
    without the layer order (ModelSpec.layer_pattern; core.parallel.state._zero3_hybrid_modules reads it)."""
    par = plan.parallel
    if par.tensor_parallel > 1:
        return (
            f"tensor parallel is not modelled for it: transformers 5.25.0's base_model_tp_plan for {plan.model.family} "
            f"{_MIXER_TP[plan.model.recurrent_mixer]}; DDP, FSDP2 and ZeRO-1 / 2 / 3 are"
        )
    if par.pipeline_parallel > 1 or par.context_parallel > 1 or par.expert_parallel > 1:
        return (
            "pipeline, context and expert parallel are not modelled for it (a context-parallel ring would hand "
            "the recurrent state from rank to rank); DDP, FSDP2 and ZeRO-1 / 2 / 3 are"
        )
    if par.strategy is Strategy.ZERO3 and not plan.model.layer_pattern:
        return (
            "DeepSpeed ZeRO-3 is not modelled for it without its layer order: what ZeRO-3 keeps gathered follows the "
            "forward's module order, and this plan's model holds the layer counts alone (model.layer_pattern is "
            "empty: a file written before it, or an edited depth; pick the model again); ZeRO-1 / 2, DDP and FSDP2 are"
        )
    if par.strategy is Strategy.FSDP and par.fsdp1_wrap:
        return (
            "FSDP1's wrap (parallel.fsdp1_wrap) is not modelled for it: the blocks it leaves cached were checked "
            "for decoder layers of one size, and a hybrid's differ by kind; FSDP2 (fully_shard) is"
        )
    return None


def _hybrid_plan_gap(plan: Plan) -> str | None:
    if plan.method not in (Method.FULL, Method.LORA):
        return f"{METHOD_LABELS[plan.method]} is not modelled for it (full fine-tuning and LoRA are)"
    targets = tuple(t for t in plan.lora.targets)
    allowed = hybrid_trained_targets(plan.model)
    if plan.method is Method.LORA and (set(targets) - set(allowed) or "in_proj" not in targets):
        # in_proj: the first layer is a recurrent one in every released hybrid; without an adapter there its
        # mixer's input needs no gradient and keeps nothing, which the rules do not count. A Gated DeltaNet
        # layer's in_proj is its input projections (core.model.GDN_IN_PROJ).
        return (
            "LoRA is modelled on " + ", ".join(allowed) + " with in_proj among them; "
            f"this plan targets {', '.join(targets)}"
        )
    layout = _hybrid_layout_gap(plan)
    if layout is not None:
        return layout
    if plan.stack is not Stack.EAGER or plan.unsloth or plan.litgpt:
        return (
            "the software runs PyTorch eager under transformers (torch.compile, Megatron, Unsloth and LitGPT are "
            "not modelled)"
        )
    if plan.checkpointing and plan.checkpoint_policy is not CheckpointPolicy.FULL:
        return "checkpointing is Hugging Face's, every layer (selective policies are not modelled for it)"
    weights = plan.base_dtype if plan.method is Method.LORA else plan.weight_dtype
    if weights is Dtype.FP32 and plan.autocast is Autocast.NONE:
        return "float32 training is not modelled for it (16-bit weights or autocast are)"
    if plan.training_kv_cache and plan.model.recurrent_mixer == "gated_deltanet":
        # Qwen3NextGatedDeltaNet.forward with a cache: the conv state is written (update_conv_state) and the final
        # recurrent state returned and kept; neither path was counted with it.
        return "with use_cache on (the K/V cache kept in training) its Gated DeltaNet layers are not modelled"
    if plan.mamba_kernels and plan.training_kv_cache:
        # transformers 5.25.0 GraniteMoeHybridMambaLayer.forward (Bamba's, Nemotron-H's the same): the fused
        # function runs only when ``self.training and cache is None``; with use_cache the model makes a
        # DynamicCache and the mixer calls causal_conv1d and mamba_chunk_scan_combined one by one.
        return (
            "with use_cache on (the K/V cache kept in training) and mamba_ssm installed, the mixers run its "
            "kernels one by one, which is not modelled"
        )
    if plan.activation_offload or plan.optimizer_in_backward or plan.float8 is not Float8.NONE or plan.experts_loop:
        return "activation offloading, optimizer-in-backward, float8 and the experts' loop are not modelled for it"
    return None


# (branches h53lyco, h53vera, h54oft, h54ada, h58peft): the refusals of Plan._check_lycoris.
# FourierFT and RoAd (branch h76peft), VB-LoRA, RandLoRA and SHiRA (branch h78peft) likewise.
_PEFT_WRAPPED: Final = _LYCORIS | {
    Method.VERA, Method.OFT, Method.ADALORA, Method.MISS, Method.FOURIERFT, Method.ROAD, Method.VBLORA,
    Method.RANDLORA, Method.SHIRA, Method.BOFT,
}  # fmt: skip
_LITGPT_ADAPTERS: Final = frozenset((Method.ADAPTER, Method.ADAPTER_V2))
_PROMPT_LEARNING: Final = frozenset((Method.PROMPT_TUNING, Method.P_TUNING, Method.PREFIX_TUNING))
_PEFT_FLAT_TRAINED: Final = _PROMPT_LEARNING | {Method.LN_TUNING, Method.TRAINABLE_TOKENS}
# The rows a switch to the trainable-tokens method starts from: PEFT's method comparison experiment
# trainable_tokens/llama-3.2-3B-sos+eos (huggingface/peft 51c2ff66 method_comparison/MetaMathQA/experiments/
# trainable_tokens/llama-3.2-3B-sos+eos/adapter_config.json: token_indices [128000, 128001], the start and end of
# sequence tokens a chat template adds). TrainableTokensConfig's own default is an empty list.
TRAINABLE_TOKENS_SWITCH_ROWS: Final = 2
_LORA_SHAPED: Final = frozenset((Method.LORA, Method.QLORA, Method.DORA))
# The members the Plan's derived properties compare with, read from their classes once: on Python 3.11 each
# ``Method.QLORA`` read goes through EnumType.__getattr__'s slot (~0.15 µs; gone in 3.12), and one estimate()
# reads these properties some forty times (benchmarks/estimate_speed.py, h74speed).
_QLORA: Final = Method.QLORA
_VERA: Final = Method.VERA
_ADALORA: Final = Method.ADALORA
_OFT: Final = Method.OFT
_MISS: Final = Method.MISS
_TRANSFORMERS_V5: Final = TransformersLoss.V5_ON
_FOURIERFT: Final = Method.FOURIERFT
_ROAD: Final = Method.ROAD
_VBLORA: Final = Method.VBLORA
_RANDLORA: Final = Method.RANDLORA
_SHIRA: Final = Method.SHIRA
_BOFT: Final = Method.BOFT
_FROZEN: Final = Method.FROZEN
_ADAPTER: Final = Method.ADAPTER
_PREFIX_TUNING: Final = Method.PREFIX_TUNING
_VIRTUAL_TOKENS_FIRST: Final = (Method.PROMPT_TUNING, Method.P_TUNING)  # before the sequence, not the keys
_AUTOCAST_FP16: Final = Autocast.FP16
# VeraConfig's default rank (huggingface/peft 51c2ff66 src/peft/tuners/vera/config.py: ``r: int =
# field(default=256)``; LoraConfig's is 8): VeRA's A and B are frozen and shared, so it runs at far higher
# ranks than LoRA for the same trained count. A switch moves a rank still at one default to the other's.
VERA_DEFAULT_RANK: Final = 256
# AdaLoraConfig's initial rank (huggingface/peft 51c2ff66 src/peft/tuners/adalora/config.py: ``init_r: int =
# field(default=12)``; its ``r`` is LoraConfig's and unused): every AdaLoRA tensor has init_r rows, for the
# whole run (the RankAllocator masks lora_E, it never resizes). A switch moves the rank as VeRA's does.
ADALORA_DEFAULT_RANK: Final = 12
# MissConfig's rank (huggingface/peft 51c2ff66 src/peft/tuners/miss/config.py: ``r: int = field(default=64)``):
# miss_block is r x out per target; the input is summed over its in / r blocks of r features.
MISS_DEFAULT_RANK: Final = 64
# FourierFTConfig's n_frequency (huggingface/peft 51c2ff66 src/peft/tuners/fourierft/config.py: ``n_frequency: int =
# field(default=1000)``), which the plan holds as ``lora.rank``: the spectral coefficients each target trains.
FOURIERFT_DEFAULT_FREQUENCIES: Final = 1000
# VBLoRAConfig (huggingface/peft 51c2ff66 src/peft/tuners/vblora/config.py): ``r: int = field(default=4)``,
# ``num_vectors: int = field(default=256)``, ``vector_length: int = field(default=256)``, ``topk: int =
# field(default=2)``. The plan holds r as ``lora.rank``; the bank's shape and top-k are these defaults (the method
# comparison's vblora--llama-3.2-3B-default ran them; read configs refuse others).
VBLORA_DEFAULT_RANK: Final = 4
VBLORA_NUM_VECTORS: Final = 256
VBLORA_VECTOR_LENGTH: Final = 256
VBLORA_TOPK: Final = 2
# RandLoraConfig's and ShiraConfig's r (src/peft/tuners/randlora/config.py ``r: int = field(default=32)``,
# src/peft/tuners/shira/config.py ``r: int = field(default=32)``).
RANDLORA_DEFAULT_RANK: Final = 32
SHIRA_DEFAULT_RANK: Final = 32
# The rank each method's config starts from where it differs from LoraConfig's 8 (Plan.with_method).
_DEFAULT_RANKS: Final = {
    Method.VERA: VERA_DEFAULT_RANK,
    Method.ADALORA: ADALORA_DEFAULT_RANK,
    Method.MISS: MISS_DEFAULT_RANK,
    Method.FOURIERFT: FOURIERFT_DEFAULT_FREQUENCIES,
    Method.VBLORA: VBLORA_DEFAULT_RANK,
    Method.RANDLORA: RANDLORA_DEFAULT_RANK,
    Method.SHIRA: SHIRA_DEFAULT_RANK,
}
# BOFTConfig (huggingface/peft 51c2ff66 src/peft/tuners/boft/config.py): ``boft_block_size: int = field(default=4)``,
# ``boft_block_num: int = field(default=0)``, ``boft_n_butterfly_factor: int = field(default=1)``. The plan holds the
# block size in ``lora.oft_block_size`` (OFTConfig's is 32) and boft_block_num, with the size 0, as ``lora.rank``; one
# butterfly factor only (the comparison's boft--llama-3.2-3B-default ran it, and PEFT falls back to it when its
# fbd_cuda extension does not build: layer.py ``update_layer``); read configs refuse others.
BOFT_DEFAULT_BLOCK: Final = 4
# The block size each method's config starts from (Plan.with_method), as _DEFAULT_RANKS.
_DEFAULT_BLOCKS: Final = {Method.BOFT: BOFT_DEFAULT_BLOCK}


@functools.lru_cache(maxsize=1024)  # a few hundred input paths; each form reads every one of its own at each edit
def _reader(path: str) -> Callable[[Any], Any]:
    """The dotted ``path``'s value read in one C call (``operator.attrgetter`` follows the dots)."""
    return operator.attrgetter(path)


@last_answer  # read by the ranks' memory and by the step's time: one run plan, so their identity caches meet
def as_run(plan: Plan) -> Plan:
    """The plan with the sequence the model runs on (:attr:`Plan.run_seq_len`): PEFT's prompt learning
    puts its virtual tokens before every sequence, so the blocks' tensors, the logits and the step's
    FLOPs are those of seq + num_virtual_tokens positions. Read once, where the training estimate starts
    (the ranks' memory, the step's time); every other plan is returned as is."""
    if plan.run_seq_len == plan.workload.seq_len:  # (prefix tuning's tokens are keys only: the same sequence)
        return plan
    if plan.run_seq_len > MAX_SEQ:  # (the run's plan is a Plan too: its sequence within the input's range)
        raise PlanError(
            "lora.virtual_tokens",
            plan.lora.virtual_tokens,
            f"at most {MAX_SEQ - plan.workload.seq_len:,} with this sequence",
            f"the model runs on the sequence plus the virtual tokens, at most {MAX_SEQ:,}",
        )
    # core.memo.replaced: dataclasses.replace without the keyword call of __init__ (the checks run all the same)
    return replaced(plan, workload=replaced(plan.workload, seq_len=plan.run_seq_len))


def ia3_feedforward_within(lora: LoraSettings, targets: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """IA3's feedforward modules that are among ``targets`` (the settings' own by default)."""
    kept = set(lora.targets if targets is None else targets)
    return tuple(name for name in lora.ia3_feedforward if name in kept)


@dataclass(frozen=True)
class Workload:
    micro_batch: int = DEFAULTS["workload.micro_batch"]
    seq_len: int = DEFAULTS["workload.seq_len"]
    grad_accum: int = DEFAULTS["workload.grad_accum"]
    tokens: int = DEFAULTS["workload.tokens"]  # token budget of the whole run (for time and cost)
    eval_batch: int = DEFAULTS["workload.eval_batch"]  # 0: evaluate with the training micro-batch

    def __post_init__(self) -> None:
        run_checks(self, _WORKLOAD_CHECKS)


@dataclass(frozen=True)
class Hardware:
    gpu: str = DEFAULTS["hardware.gpu"]  # id in the GPU catalogue, or "custom"
    utilisation: float = DEFAULTS["hardware.utilisation"]  # compute utilisation; 0: modelled
    headroom: float = DEFAULTS["hardware.headroom"]  # fraction of the card kept free
    price_per_gpu_hour: float = DEFAULTS["hardware.price_per_gpu_hour"]  # currency units per GPU-hour
    custom_memory_gb: float = DEFAULTS["hardware.custom_memory_gb"]  # used when gpu == "custom"
    custom_tflops: float = DEFAULTS["hardware.custom_tflops"]  # dense 16-bit TFLOP/s, when gpu == "custom"
    custom_bandwidth_gb_s: float = DEFAULTS["hardware.custom_bandwidth_gb_s"]  # GB/s, when gpu == "custom"
    peak_tflops_override: float = DEFAULTS["hardware.peak_tflops_override"]  # 0: the card's peak
    # Calibration from a real run: what it measured (0: not measured), or the factor it gave.
    measured_tokens_per_s: float = DEFAULTS["hardware.measured_tokens_per_s"]  # per GPU
    measured_step_s: float = DEFAULTS["hardware.measured_step_s"]  # seconds per optimizer step
    calibration: float = DEFAULTS["hardware.calibration"]  # measured ÷ modelled compute speed; 0: none
    alloc_conf: str = DEFAULTS["hardware.alloc_conf"]  # PYTORCH_CUDA_ALLOC_CONF; "": PyTorch's defaults
    torch_version: TorchVersion = DEFAULTS["hardware.torch_version"]  # the release whose rules apply
    nccl_avoid_record_streams: bool = DEFAULTS["hardware.nccl_avoid_record_streams"]  # the env variable set
    held_by_others: float = DEFAULTS["hardware.held_by_others"]  # bytes other processes hold on each GPU
    platform: Platform = DEFAULTS["hardware.platform"]  # the OS CUDA runs under (core.platform_rules)

    def __post_init__(self) -> None:
        run_checks(self, _HARDWARE_CHECKS)


@dataclass(frozen=True)
class Parallelism:
    """How many GPUs, how the work is split across them, and what moves to the host.

    The GPU count is ``nodes × gpus_per_node``; it factors into tensor × pipeline ×
    context × data parallel degrees (the data-parallel degree is what is left). Whether a
    layout fits the model (heads divisible by the tensor-parallel degree, ...) is checked
    by :class:`Plan`, which knows the model. The frameworks' knobs are named as there.
    """

    nodes: int = DEFAULTS["parallel.nodes"]
    gpus_per_node: int = DEFAULTS["parallel.gpus_per_node"]
    strategy: Strategy = DEFAULTS["parallel.strategy"]
    tensor_parallel: int = DEFAULTS["parallel.tensor_parallel"]
    pipeline_parallel: int = DEFAULTS["parallel.pipeline_parallel"]
    context_parallel: int = DEFAULTS["parallel.context_parallel"]
    expert_parallel: int = DEFAULTS["parallel.expert_parallel"]  # Megatron --expert-model-parallel-size
    expert_imbalance: float = DEFAULTS["parallel.expert_imbalance"]  # busiest EP rank's routed tokens ÷ the mean
    capacity_factor: float = DEFAULTS["parallel.capacity_factor"]  # Megatron --moe-expert-capacity-factor; 0: none
    pad_to_capacity: bool = DEFAULTS["parallel.pad_to_capacity"]  # Megatron --moe-pad-expert-input-to-capacity
    # HSDP: FSDP shards within groups of DP ÷ R ranks, replicated across R of them (torchtitan's
    # data_parallel_replicate_degree, FSDP2 fully_shard on a 2-D (replicate, shard) mesh, FSDP1
    # ShardingStrategy.HYBRID_SHARD). 1: plain FSDP, sharded over every data-parallel rank.
    dp_replicate: int = DEFAULTS["parallel.dp_replicate"]
    moe_dispatcher: MoeDispatcher = DEFAULTS["parallel.moe_dispatcher"]  # Megatron's MoE token dispatcher
    cp_rotate_method: CpRotate = DEFAULTS["parallel.cp_rotate_method"]  # PyTorch ring attention's K/V rotater
    sequence_parallel: bool = DEFAULTS["parallel.sequence_parallel"]
    tp_overlap: bool = DEFAULTS["parallel.tp_overlap"]  # async TP / Megatron --tp-comm-overlap
    schedule: PipelineSchedule = DEFAULTS["parallel.schedule"]
    virtual_stages: int = DEFAULTS["parallel.virtual_stages"]  # model chunks per pipeline rank
    stage_split: PipelineSplit = DEFAULTS["parallel.stage_split"]  # blocks per stage: even, or nanotron's
    offload: Offload = DEFAULTS["parallel.offload"]
    reshard_after_forward: bool = DEFAULTS["parallel.reshard_after_forward"]
    fsdp_param_dtype: MpDtype = DEFAULTS["parallel.fsdp_param_dtype"]  # MixedPrecisionPolicy.param_dtype
    fsdp_reduce_dtype: MpDtype = DEFAULTS["parallel.fsdp_reduce_dtype"]  # MixedPrecisionPolicy.reduce_dtype
    fsdp_float8_all_gather: bool = DEFAULTS["parallel.fsdp_float8_all_gather"]  # torchao float8 all-gather
    fsdp1_wrap: bool = DEFAULTS["parallel.fsdp1_wrap"]  # FSDP1 wrap of a CPU/meta model (sync_module_states)
    grad_sync: GradSync = DEFAULTS["parallel.grad_sync"]  # FSDP reduce-scatter under accumulation (no_sync)
    fsdp_units: FsdpUnits = DEFAULTS["parallel.fsdp_units"]  # FSDP2 units of the embedding and head
    grad_reduce_in_fp32: bool = DEFAULTS["parallel.grad_reduce_in_fp32"]  # Megatron-Core DDP config
    grad_accum_fusion: bool = DEFAULTS["parallel.grad_accum_fusion"]  # Megatron --gradient-accumulation-fusion
    ddp_bucket_mb: float = DEFAULTS["parallel.ddp_bucket_mb"]
    ddp_bucket_view: bool = DEFAULTS["parallel.ddp_bucket_view"]  # gradient_as_bucket_view
    zero_bucket_elements: int = DEFAULTS["parallel.zero_bucket_elements"]
    zero_overlap_comm: bool = DEFAULTS["parallel.zero_overlap_comm"]  # DeepSpeed ZeRO-1/2 overlap_comm
    zero3_overlap_comm: bool = DEFAULTS["parallel.zero3_overlap_comm"]  # DeepSpeed ZeRO-3 overlap_comm
    # DeepSpeed bf16.bf16_master_weights_and_grads / bf16.bf16_optimizer_states (PR #7700, v0.18.3+)
    bf16_master_weights: bool = DEFAULTS["parallel.bf16_master_weights"]
    bf16_optimizer_states: bool = DEFAULTS["parallel.bf16_optimizer_states"]
    zero3_prefetch_elements: int = DEFAULTS["parallel.zero3_prefetch_elements"]
    zero3_max_live_elements: int = DEFAULTS["parallel.zero3_max_live_elements"]
    zero3_max_reuse_elements: int = DEFAULTS["parallel.zero3_max_reuse_elements"]
    intra_link: str = DEFAULTS["parallel.intra_link"]  # id in resources/links.json: GPU to GPU within a node
    inter_link: str = DEFAULTS["parallel.inter_link"]  # id in resources/links.json: between nodes
    host_ram_gb: float = DEFAULTS["parallel.host_ram_gb"]  # RAM per node
    host_memory_gbs: float = DEFAULTS["parallel.host_memory_gbs"]  # peak DRAM bandwidth per node
    host_threads_per_rank: int = DEFAULTS["parallel.host_threads_per_rank"]  # OMP_NUM_THREADS (0: launcher default)

    def __post_init__(self) -> None:
        run_checks(self, _PARALLEL_CHECKS)
        if self.world_size > MAX_GPUS:
            raise PlanError("parallel.world_size", self.world_size, f"an integer from 1 to {MAX_GPUS:,}")
        self._check_split()
        self._check_bf16_master()
        if self.virtual_stages > 1 and self.schedule is not PipelineSchedule.INTERLEAVED:
            raise PlanError(
                "parallel.virtual_stages", self.virtual_stages, "1", "only the interleaved schedule uses them"
            )
        if self.pad_to_capacity and not self.capacity_factor:
            # NVIDIA/Megatron-LM d98e8a64 transformer_config.py __post_init__: "moe_expert_capacity_factor must be
            # set to use moe_pad_expert_input_to_capacity" (a ValueError)
            raise PlanError("parallel.pad_to_capacity", True, "off without a capacity factor",
                            "Megatron: padding to capacity needs --moe-expert-capacity-factor")
        if self.stage_split is PipelineSplit.COMPUTE and self.schedule is PipelineSchedule.INTERLEAVED:
            # nanotron's build_model gives each rank one run of consecutive blocks (core.pipeline)
            raise PlanError("parallel.stage_split", self.stage_split.value, "even", "nanotron's split has no chunks")

    def _check_bf16_master(self) -> None:
        """What DeepSpeed refuses of its low-precision master options under a ZeRO stage (elsewhere they are
        ignored, as DeepSpeed's keys are). deepspeedai/DeepSpeed edaa7221: runtime/config.py
        ``_do_error_check`` ("bf16_optimizer_states requires bf16_master_weights_and_grads to be enabled")
        and runtime/base_optimizer.py ``ZeROOptimizer._configure_master_weights``, whose offload validator
        (stage_1_and_2.py ``_enforce_cpu_offload``, stage3.py ``_enforce_optimizer_offload``) asserts
        ZeRO-Offload with DeepSpeedCPUAdam when the master is bf16 and the optimizer states are not: float32
        states cannot stay on the GPU beside a bf16 master (the same at v0.18.3 6eb98aaf, PR #7700)."""
        if not self.strategy.deepspeed:
            return
        if self.bf16_optimizer_states and not self.bf16_master_weights:
            raise PlanError(
                "parallel.bf16_optimizer_states",
                True,
                "off without bf16 master weights",
                "DeepSpeed: bf16_optimizer_states requires bf16_master_weights_and_grads to be enabled",
            )
        if self.bf16_master_weights and not self.bf16_optimizer_states and self.offload is Offload.NONE:
            raise PlanError(
                "parallel.bf16_master_weights",
                True,
                "with bf16 optimizer states, or with optimizer offload",
                "DeepSpeed: bf16 master weights with float32 optimizer states require ZeRO-Offload with "
                "DeepSpeedCPUAdam",
            )

    def with_bf16_option(self, name: str, on: bool) -> Parallelism:
        """``bf16_master_weights`` or ``bf16_optimizer_states`` set to ``on`` as one checkbox sets it, with the
        other moved where DeepSpeed would refuse the pair (:meth:`_check_bf16_master`): states need the master,
        and on the GPU (no optimizer offload) a bf16 master needs bf16 states, so the two go on and off together
        there; offloaded the master may stand alone."""
        master, states = self.bf16_master_weights, self.bf16_optimizer_states
        alone = self.offload is not Offload.NONE
        if name == "bf16_master_weights":
            master, states = on, (states or not alone) and on
        else:
            states, master = on, on or (master and alone)
        return replace(self, bf16_master_weights=master, bf16_optimizer_states=states)

    def _check_split(self) -> None:
        """TP × PP × CP must divide the GPUs: the refusal names the first degree (in that
        order) that no longer divides them, so a pipeline split that does not fit names
        ``parallel.pipeline_parallel``."""
        world, split = self.world_size, 1
        for name in ("tensor_parallel", "pipeline_parallel", "context_parallel"):
            degree = getattr(self, name)
            split *= degree
            if world % split:
                raise PlanError(
                    f"parallel.{name}",
                    degree,
                    f"degrees whose product divides {world} GPUs",
                    f"TP {self.tensor_parallel} × PP {self.pipeline_parallel} × CP {self.context_parallel} "
                    f"= {self.tensor_parallel * self.pipeline_parallel * self.context_parallel}",
                )
        ep, shards = self.expert_parallel, self.data_parallel * self.context_parallel
        if shards % ep:
            # Megatron-Core builds the experts' grid from the same GPUs: expert TP (= TP unless set)
            # × EP × PP must divide the world size, so EP divides DP × CP (NVIDIA/Megatron-LM
            # d98e8a64, megatron/core/parallel_state.py initialize_model_parallel: "world_size (...)
            # is not divisible by expert_tensor_model_pipeline_parallel size").
            raise PlanError(
                "parallel.expert_parallel",
                ep,
                f"a divisor of DP × CP = {shards}",
                "Megatron-Core: the GPUs must divide by expert TP (= TP) × EP × PP, "
                f"here {self.tensor_parallel} × {ep} × {self.pipeline_parallel} into {world}",
            )

        self._check_replicate()

    def _check_replicate(self) -> None:
        """HSDP (``dp_replicate`` > 1) is FSDP's: R divides DP and leaves a shard group of more
        than one rank; not modelled beside expert parallel."""
        r = self.dp_replicate
        if r == 1:
            return
        if self.strategy is not Strategy.FSDP:
            # PyTorch's hybrid sharding is FSDP's (FSDP1 ShardingStrategy.HYBRID_SHARD, FSDP2
            # fully_shard on a 2-D mesh); DeepSpeed's ZeRO++ hpZ keeps a secondary partition and is
            # not this.
            raise PlanError("parallel.dp_replicate", r, "1", "hybrid sharding (HSDP) replicates FSDP's shards")
        if self.data_parallel % r:
            # torchtitan b5bcd76 parallel_dims.py _validate: dp_replicate · dp_shard · cp · tp · pp
            # must equal the world size.
            raise PlanError(
                "parallel.dp_replicate", r, f"a divisor of DP = {self.data_parallel}", "torchtitan: R × shard = DP"
            )
        if self.fsdp_shards == 1:
            raise PlanError(
                "parallel.dp_replicate",
                r,
                f"a divisor of DP = {self.data_parallel} that leaves a shard group of 2 or more",
                "a shard group of one rank is DDP (choose the DDP strategy)",
            )
        if self.expert_parallel > 1:
            raise PlanError("parallel.dp_replicate", r, "1 with expert parallel", "HSDP beside EP is not modelled")

    @property
    def fsdp_shards(self) -> int:
        """The ranks a sharded strategy shards the state over: data × context parallel ÷ the HSDP
        replicas (torchtitan b5bcd76 parallel_dims.py: the "fsdp" mesh is dp_shard × cp)."""
        return self.data_parallel * self.context_parallel // self.dp_replicate

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def data_parallel(self) -> int:
        """Ranks holding the same part of the model and different data."""
        return self.world_size // (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    @property
    def split(self) -> str:
        """How the GPUs factor, as the window and the command line print it."""
        text = (
            f"TP {self.tensor_parallel} × PP {self.pipeline_parallel} × CP {self.context_parallel} "
            f"× DP {self.data_parallel}"
        )
        text += f" (EP {self.expert_parallel})" if self.expert_parallel > 1 else ""
        return text + (f" (HSDP: {self.dp_replicate} replicas)" if self.dp_replicate > 1 else "")


@dataclass(frozen=True)
class Inference:
    """How the model is served. Engine defaults (0 = "the engine's default") follow the
    engine's own: see :mod:`core.serving.engines`."""

    weight_dtype: WeightFormat = DEFAULTS["inference.weight_dtype"]
    kv_dtype: KvDtype = DEFAULTS["inference.kv_dtype"]
    concurrent: int = DEFAULTS["inference.concurrent"]  # requests served at once (batch)
    context: int = DEFAULTS["inference.context"]  # tokens per request, prompt + generated
    engine: Engine = DEFAULTS["inference.engine"]
    new_tokens: int = DEFAULTS["inference.new_tokens"]  # generated tokens per request, part of ``context``
    tensor_parallel: int = DEFAULTS["inference.tensor_parallel"]  # GPUs one copy is split across
    pipeline_parallel: int = DEFAULTS["inference.pipeline_parallel"]  # stages the layers are split into
    replicas: int = DEFAULTS["inference.replicas"]  # independent copies (data parallel serving)
    gpu_memory_utilization: float = DEFAULTS["inference.gpu_memory_utilization"]  # vLLM
    max_num_seqs: int = DEFAULTS["inference.max_num_seqs"]  # vLLM scheduler limit; 0: its default
    max_num_batched_tokens: int = DEFAULTS["inference.max_num_batched_tokens"]  # vLLM; 0: its default
    mem_fraction_static: float = DEFAULTS["inference.mem_fraction_static"]  # SGLang; 0: its default
    vllm_version: VllmVersion = DEFAULTS["inference.vllm_version"]  # the release whose rules apply
    vllm_sampler: VllmSampler = DEFAULTS["inference.vllm_sampler"]  # vLLM V1's top-k/top-p sampler
    text_only: bool = DEFAULTS["inference.text_only"]  # image-text checkpoint served without its vision tower
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 / SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (core.context_limit)
    long_context: bool = DEFAULTS["inference.long_context"]
    # vLLM --enforce-eager / SGLang --disable-cuda-graph when False (core.serving.vllm_versions.graphs_captured)
    cuda_graphs: bool = DEFAULTS["inference.cuda_graphs"]
    prefix_caching: PrefixCaching = DEFAULTS["inference.prefix_caching"]  # vLLM; DEFAULT: the release's own
    # vLLM V1: the torch.compile cache a start finds (COLD: compiled inside the profile, core.serving.engines.vllm_pool)
    compile_cache: CompileCache = DEFAULTS["inference.compile_cache"]
    sglang_version: SglangVersion = DEFAULTS["inference.sglang_version"]  # the release whose fraction applies
    # SGLang --enable-multimodal: Gemma 3 / Llama 4 served with images (core.serving.sglang_versions.is_multimodal)
    sglang_enable_multimodal: bool = DEFAULTS["inference.sglang_enable_multimodal"]
    # Hugging Face generate: the transformers release whose MoE and FP8 host rules apply
    transformers_version: TransformersVersion = DEFAULTS["inference.transformers_version"]
    link: str = DEFAULTS["inference.link"]  # what carries the TP all-reduce; "auto": the card's own
    gguf_quant: GgufQuant = DEFAULTS["inference.gguf_quant"]  # llama.cpp: the GGUF file type
    gpu_layers: int = DEFAULTS["inference.gpu_layers"]  # llama.cpp -ngl
    cpu_moe_layers: int = DEFAULTS["inference.cpu_moe_layers"]  # llama.cpp --n-cpu-moe; >= num_layers: --cpu-moe
    host_bandwidth_gb_s: float = DEFAULTS["inference.host_bandwidth_gb_s"]  # what host-kept weights are read at
    ollama_version: OllamaVersion = DEFAULTS["inference.ollama_version"]  # Ollama in front; NONE: llama-server
    cache_type: CacheType = DEFAULTS["inference.cache_type"]  # llama.cpp -ctk / -ctv
    flash_attention: bool = DEFAULTS["inference.flash_attention"]  # llama.cpp -fa
    ubatch: int = DEFAULTS["inference.ubatch"]  # llama.cpp -ub
    llamacpp_build: int = DEFAULTS["inference.llamacpp_build"]  # llama.cpp bN whose kernels apply; 0: current
    llamacpp_backend: LlamaCppBackend = DEFAULTS["inference.llamacpp_backend"]  # ggml backend of the GPU layers

    def __post_init__(self) -> None:
        run_checks(self, _INFERENCE_CHECKS)

    @property
    def prompt_tokens(self) -> int:
        """The prompt: the context less the generated tokens, at least one token."""
        return max(1, self.context - self.new_tokens)

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.replicas


@dataclass(frozen=True)
class LessonSettings:
    """Inputs only the lesson's accounting uses."""

    activations_gb: float = DEFAULTS["lesson.activations_gb"]  # the lesson's activation allowance
    trainable_override: int = DEFAULTS["lesson.trainable_override"]  # T as given; 0 derives it

    def __post_init__(self) -> None:
        run_checks(self, _LESSON_CHECKS)


_LORA_CHECKS: Final = checks_of("lora")
_WORKLOAD_CHECKS: Final = checks_of("workload")
_HARDWARE_CHECKS: Final = checks_of("hardware")
_PARALLEL_CHECKS: Final = checks_of("parallel")
_INFERENCE_CHECKS: Final = checks_of("inference")
_LESSON_CHECKS: Final = checks_of("lesson")
_PLAN_CHECKS: Final = checks_of("")
_NESTED: Final = (
    ("lora", LoraSettings),
    ("workload", Workload),
    ("hardware", Hardware),
    ("parallel", Parallelism),
    ("inference", Inference),
    ("lesson", LessonSettings),
)


# Degrees a change of GPUs or strategy drops to 1 when their rules refuse it (Plan.with_layout).
_LAYOUT_DROPS: Final = ("parallel.expert_parallel", "parallel.dp_replicate")

# What a change of model drops when the new model refuses a split (Plan.on_model): the refused
# field -> the section and the degrees that go back to 1 (a tensor or pipeline split goes whole).
_SPLIT_WHOLE: Final[dict[str, object]] = {"tensor_parallel": 1, "pipeline_parallel": 1}
_MODEL_DROPS: Final[dict[str, tuple[str, dict[str, object]]]] = {
    "parallel.expert_parallel": ("parallel", {"expert_parallel": 1}),
    "parallel.tensor_parallel": ("parallel", {**_SPLIT_WHOLE, "virtual_stages": 1}),
    "parallel.pipeline_parallel": ("parallel", {**_SPLIT_WHOLE, "virtual_stages": 1}),
    "inference.tensor_parallel": ("inference", _SPLIT_WHOLE),
    "inference.pipeline_parallel": ("inference", _SPLIT_WHOLE),
    # llama.cpp's --n-cpu-moe on a dense model: no experts to keep in RAM (Plan._check_llamacpp)
    "inference.cpu_moe_layers": ("inference", {"cpu_moe_layers": 0}),
    # Settings the form shows only for some models (core.inputs matters=): a text model's unseen Text only tick,
    # a dense model's unseen prefix caching "on", which the picked image-text or hybrid model refuses on the
    # plan's engine and release (serving_refusal): the pick keeps the model and drops the setting.
    "inference.text_only": ("inference", {"text_only": False}),
    # SGLang's --enable-multimodal, unseen for a text model, which Gemma 3 refuses on a release without the flag
    "inference.sglang_enable_multimodal": ("inference", {"sglang_enable_multimodal": False}),
    "inference.prefix_caching": ("inference", {"prefix_caching": PrefixCaching.DEFAULT}),
}


@dataclass(frozen=True)
class Plan:
    model: ModelSpec
    model_id: str = ""  # catalogue id the model came from, "" for custom/imported
    method: Method = DEFAULTS["method"]
    lora: LoraSettings = field(default_factory=LoraSettings)
    quant: Quant = DEFAULTS["quant"]  # base storage for QLoRA
    double_quant: bool = DEFAULTS["double_quant"]  # QLoRA's quantised absmax constants
    # transformers' llm_int8_skip_modules: linears a bitsandbytes base keeps in 16 bits (core.model)
    bnb_skip_modules: str = DEFAULTS["bnb_skip_modules"]
    frozen_layers: int = DEFAULTS["frozen_layers"]  # FROZEN: bottom blocks (and embeddings) without gradients
    # The old one-word setting (lesson mode reads it), derived from the roles below; never
    # given (a plan file's own is read by core.files.planfile, which migrates it).
    precision: Precision = field(init=False)
    optimizer: Optimizer = DEFAULTS["optimizer"]
    # Precision roles (plan file version 3). A named preset fixes all four; "custom" leaves
    # them free. The defaults are the old default precision, bf16-mixed.
    preset: Preset = DEFAULTS["preset"]
    weight_dtype: Dtype = DEFAULTS["weight_dtype"]
    base_dtype: Dtype = DEFAULTS["base_dtype"]
    adapter_dtype: Dtype = DEFAULTS["adapter_dtype"]
    autocast: Autocast = DEFAULTS["autocast"]
    optimizer_impl: OptimizerImpl = DEFAULTS["optimizer_impl"]  # HF Trainer's adamw_torch_fused (torch ≥ 2.8)
    weight_decay: float = DEFAULTS["weight_decay"]  # the optimizer's (HF Trainer's default 0.0): time only
    galore_rank: int = DEFAULTS["galore_rank"]  # GaLore optim_args rank (read only with Optimizer.GALORE_ADAMW)
    galore_update_proj_gap: int = DEFAULTS["galore_update_proj_gap"]  # GaLore optim_args update_proj_gap
    checkpointing: bool = DEFAULTS["checkpointing"]
    checkpoint_policy: CheckpointPolicy = DEFAULTS["checkpoint_policy"]  # read only with checkpointing on
    checkpoint_every: int = DEFAULTS["checkpoint_every"]  # LAYER: every Nth block (torchtitan selective_ac_option)
    attention: Attention = DEFAULTS["attention"]
    chunked_loss: bool = DEFAULTS["chunked_loss"]  # cross-entropy computed in chunks (no full logits in float32)
    stack: Stack = DEFAULTS["stack"]  # the software that runs the step (its speed beyond the matmuls)
    float8: Float8 = DEFAULTS["float8"]  # float8 linears (torchao / Transformer Engine)
    fused_loss: bool = DEFAULTS["fused_loss"]  # Liger / Cut Cross-Entropy: head + loss fused, no logits tensor
    grad_clip: bool = DEFAULTS["grad_clip"]  # clip_grad_norm_ before the step
    optimizer_in_backward: bool = DEFAULTS["optimizer_in_backward"]  # torchtune optimizer_in_bwd
    activation_offload: bool = DEFAULTS["activation_offload"]  # saved activations to pinned host memory
    bnb_legacy: bool = DEFAULTS["bnb_legacy"]  # bitsandbytes < 0.43.2: the 4-bit matmul keeps its input
    kbit_upcast: bool = DEFAULTS["kbit_upcast"]  # peft prepare_model_for_kbit_training
    loss_16bit: bool = DEFAULTS["loss_16bit"]  # the loop's F.cross_entropy on 16-bit logits (no float32 upcast)
    compiled_loss: bool = DEFAULTS["compiled_loss"]  # cross-entropy under torch.compile (fused, 16-bit)
    flash_loss: bool = DEFAULTS["flash_loss"]  # flash-attn's fused cross-entropy (llm-foundry MPT): 16-bit logits kept
    logprob_head: bool = DEFAULTS["logprob_head"]  # prime-rl's RL head: per-token log-probs in vocabulary chunks
    litgpt: bool = DEFAULTS["litgpt"]  # litgpt finetune loop: chunked 16-bit loss, previous logits kept
    loop_keeps_output: bool = DEFAULTS["loop_keeps_output"]  # the loop holds model(...)'s output through backward
    training_kv_cache: bool = DEFAULTS["training_kv_cache"]  # the forward returns past_key_values (use_cache)
    # the transformers release line of the training run: what its causal-LM loss copies of the logits
    training_transformers: TransformersLoss = DEFAULTS["training_transformers"]
    unsloth: bool = DEFAULTS["unsloth"]  # Unsloth FastLanguageModel: fused chunked loss, fast LoRA kernels
    megatron_ce_fusion: MegatronCeFusion = DEFAULTS["megatron_ce_fusion"]  # Megatron-Core's fused cross-entropy
    moe_grouped_gemm: bool = DEFAULTS["moe_grouped_gemm"]  # Megatron --moe-grouped-gemm (TE grouped GEMM)
    experts_loop: bool = DEFAULTS["experts_loop"]  # MoE experts looped over stacked weights (transformers 4.55)
    moe_layer: MoeLayer = DEFAULTS["moe_layer"]  # whose MoE layer runs (transformers, torchtitan's two forms)
    mamba_kernels: bool = DEFAULTS["mamba_kernels"]  # a hybrid's Mamba-2 mixers run mamba_ssm's fused function
    workload: Workload = field(default_factory=Workload)
    hardware: Hardware = field(default_factory=Hardware)
    parallel: Parallelism = field(default_factory=Parallelism)
    inference: Inference = field(default_factory=Inference)
    accounting: Accounting = DEFAULTS["accounting"]
    lesson: LessonSettings = field(default_factory=LessonSettings)

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise PlanError("model", self.model, "a model description")
        if not isinstance(self.model_id, str):
            raise PlanError("model_id", self.model_id, "a catalogue id or empty")
        check_text("model_id", self.model_id, allow_empty=True)
        run_checks(self, _PLAN_CHECKS)
        self._reconcile_roles()
        for name, kind in _NESTED:
            if not isinstance(getattr(self, name), kind):
                raise PlanError(name, getattr(self, name), f"a {kind.__name__} value")
        if self.frozen_layers > self.model.num_layers:
            raise PlanError("frozen_layers", self.frozen_layers, f"an integer from 0 to {self.model.num_layers:,}")
        self._check_layout()
        served = serving_refusal(self.model, self.inference)  # the one answer: engine and release by model kind
        if served is not None:
            raise served
        self._check_latent_attention()
        self._check_moe_targets()
        self._check_held_by_others()
        if self.optimizer_in_backward and self.workload.grad_accum > 1:
            raise PlanError(
                "optimizer_in_backward",
                True,
                "off with gradient accumulation",
                "torchtune refuses it: each gradient is applied and freed as soon as it is formed",
            )
        if self.parallel.fsdp_float8_all_gather and self.float8 in (Float8.ROWWISE, Float8.ROWWISE_GW_HP):
            # Float8LinearConfig.__post_init__ asserts it (pytorch/ao 36027d8 torchao/float8/config.py);
            # without torchao's float8 linears the setting has nothing to gather and changes nothing.
            raise PlanError(
                "parallel.fsdp_float8_all_gather",
                True,
                f"off with {self.float8.value} float8",
                "torchao: enable_fsdp_float8_all_gather only supports tensorwise scaling granularity",
            )
        self._check_ia3()
        if self.method is Method.ADAPTER and self.lora.adapter_start_layer >= self.model.num_layers:
            # lit_gpt/adapter.py (Lightning-AI/litgpt 0f021f3): prompts from adapter_start_layer on only
            raise PlanError(
                "lora.adapter_start_layer",
                self.lora.adapter_start_layer,
                f"0 to {self.model.num_layers - 1}",
                "LitGPT's Adapter puts its prompts on the blocks from the start layer on: none, nothing trains",
            )
        self._check_prompt_learning()
        self._check_lycoris()
        self._check_fourierft()
        self._check_vblora_shira()
        self._check_boft()
        self._check_adalora()
        self._check_muon()
        self._check_galore()
        self._check_modules_to_save()
        self._check_lora_fa()
        self._check_ao_zero()
        self._check_new_optimizers()
        if self.method is Method.FROZEN and self.frozen_layers == 0:
            raise PlanError(
                "frozen_layers",
                0,
                f"1 to {self.model.num_layers}",
                "the frozen-layers method freezes at least one",
            )
        mac = mac_refusal(self)  # what an Apple GPU cannot run (core.mac: the libraries' reasons)
        if mac is not None:
            raise mac
        self._check_optimizer_stack()  # after the Mac's reasons: one GPU there, no ZeRO or Megatron

    def _check_ia3(self) -> None:
        """IA3's targets: at least one, none the head, its feedforward ones among them (PEFT's IA3Config)."""
        if self.method is not Method.IA3:
            return
        if not self.lora.targets:
            raise PlanError("lora.targets", "", "at least one module", "IA3 scales the targets' inputs or outputs")
        if HEAD_TARGET in self.lora.targets:
            raise PlanError(
                "lora.targets", HEAD_TARGET, "the blocks' projections", "IA3 on the output head is not modelled"
            )
        if not set(self.lora.ia3_feedforward) <= set(self.lora.targets):
            # huggingface/peft 51c2ff66 src/peft/tuners/ia3/config.py IA3Config.__post_init__
            raise PlanError(
                "lora.ia3_feedforward",
                ",".join(self.lora.ia3_feedforward),
                f"a subset of the targets ({','.join(self.lora.targets)})",
                "PEFT: feedforward_modules should be a subset of target_modules",
            )

    @property
    def precision_word(self) -> str:
        """The precision as the command line names it: the preset's word (--preset), or a custom set of roles
        as weights / base / adapters and the autocast (the --weight-dtype, --base-dtype, --adapter-dtype and
        --autocast values)."""
        if self.preset is not Preset.CUSTOM:
            return self.preset.value
        dtypes = "/".join(d.value for d in (self.weight_dtype, self.base_dtype, self.adapter_dtype))
        return f"custom {dtypes}, autocast {self.autocast.value}"

    @property
    def checkpointing_text(self) -> str:
        """The checkpointing as one short phrase: off, on (full), or the selective policy."""
        if not self.checkpointing:
            return "off"
        if self.checkpoint_policy is CheckpointPolicy.OP:
            return "selective per op"
        if self.checkpoint_policy is CheckpointPolicy.LAYER:
            return f"every {self.checkpoint_every} block(s)"
        if self.checkpoint_policy is CheckpointPolicy.ATTENTION:
            return "attention only"
        if self.checkpoint_policy is CheckpointPolicy.UNSLOTH:
            return "offloaded (Unsloth)"
        return "on"

    def _check_held_by_others(self) -> None:
        """Refuse memory held by other processes that the card does not have: what is held leaves
        the run nothing where it reaches the card's memory (the driver's figure)."""
        held = self.hardware.held_by_others
        if held <= 0:
            return
        hw = self.hardware
        card = hw.custom_memory_gb * 1e9 if hw.gpu == "custom" else find_gpu(hw.gpu).memory_bytes
        if held >= card:
            raise PlanError(
                "hardware.held_by_others",
                held,
                f"less than the card's {card / GiB:,.2f} GiB",
                f"{held / GiB:,.2f} GiB held by other processes leaves the run nothing on this card",
            )

    def _check_layout(self) -> None:
        """Refuse a split the frameworks cannot run on this model (Megatron-LM's and
        torchtitan's own checks: heads and KV groups divide by the tensor-parallel degree,
        at least one layer per pipeline chunk, the sequence in 2 × CP load-balanced chunks)."""
        par, model = self.parallel, self.model
        tp = par.tensor_parallel
        if tp > 1:
            for what, heads in (("attention heads", model.num_heads), ("KV heads", model.num_kv_heads)):
                if heads % tp:
                    raise PlanError("parallel.tensor_parallel", tp, f"a divisor of the model's {heads} {what}")
        chunks = par.pipeline_parallel * par.virtual_stages
        if chunks > model.num_layers:
            raise PlanError(
                "parallel.pipeline_parallel",
                par.pipeline_parallel,
                f"at most {model.num_layers // par.virtual_stages} stages",
                f"the model has {model.num_layers} layers for {chunks} pipeline chunks",
            )
        if par.pipeline_parallel > 1 and par.stage_split is PipelineSplit.COMPUTE:
            blocks, head = compute_split(model, par.pipeline_parallel)
            if min(blocks) == 0 or head != par.pipeline_parallel - 1:
                raise PlanError(
                    "parallel.pipeline_parallel",
                    par.pipeline_parallel,
                    "fewer stages",
                    f"split by compute as nanotron deals them, the {model.num_layers} layers and the head fill "
                    f"{len({i for i, b in enumerate(blocks) if b} | {head})} of the {par.pipeline_parallel} stages",
                )
        self._check_serving_layout()
        ep = par.expert_parallel
        if ep > 1 and model.num_experts % ep:
            # Megatron-LM d98e8a64, megatron/training/arguments.py: "num_experts must be non None
            # to use expert model parallelism"; "Number of experts should be a multiple of expert
            # model parallel_size." (moe_layer.py: num_local_experts = num_moe_experts // ep_size).
            allowed = (
                "1 (the model has no experts)"
                if model.num_experts == 1
                else (f"a divisor of the model's {model.num_experts} experts")
            )
            raise PlanError(
                "parallel.expert_parallel",
                ep,
                allowed,
                "Megatron-LM: the number of experts must be a multiple of the expert-parallel size",
            )
        cp = par.context_parallel
        if cp > 1 and self.workload.seq_len % (2 * cp):
            raise PlanError(
                "parallel.context_parallel",
                cp,
                f"a degree where 2 × CP divides the sequence of {self.workload.seq_len} tokens",
                "context parallel splits it into 2 × CP load-balanced chunks",
            )

    def _check_latent_attention(self) -> None:
        """Refuse adapter targets a multi-head latent attention model (DeepSeek-V2 / V3, Kimi K2) has no matrix
        for (the llama.cpp builds and Ollama lines whose ``deepseek2`` cache is not modelled:
        :func:`serving_refusal`). MLA has no k_proj or v_proj, and q_proj only without a q_lora_rank
        (DeepSeek-V2-Lite): PEFT matches module names, so those targets would adapt nothing
        (ModelSpec.latent_shapes names the rest)."""
        model = self.model
        if not model.latent_attention:
            return
        uses_targets = self.lora_adapters or self.method in _PEFT_WRAPPED
        if not (uses_targets or self.method is Method.IA3):
            return
        reach = model.adapter_targets()
        missing = [t for t in self.lora.targets if t not in reach and t not in (HEAD_TARGET, ALL_LINEAR)]
        if missing:
            raise PlanError(
                "lora.targets",
                ", ".join(missing),
                "o_proj and the MLP (gate_proj, up_proj, down_proj) on a latent-attention model",
                f"{model.name} has no {' or '.join(missing)}: its attention is "
                + ", ".join(n for n in model.latent_shapes()),
            )

    def _check_moe_targets(self) -> None:
        """Refuse adapter targets that reach no module of a mixture of experts, as PEFT does ("Target modules {...}
        not found in the base model", huggingface/peft 0.18.0 tuners_utils.py ``inject_adapter``;
        tests/data/moe_lora/): MLP targets alone where the routed experts are 3-D parameters (transformers 5.x, gpt-oss
        and Llama 4 in 4.x too; ModelSpec.adapted_rows), no shared expert and no dense layer holds an MLP."""
        model = self.model
        if not self.targets_adapted or not moe_targets_reach_nothing(model, self.lora.targets, self.linear_experts):
            return
        fix = "add attention targets (q_proj, k_proj, v_proj, o_proj)"
        if model.family in LINEAR_EXPERTS_4X and not self.linear_experts:
            fix += " or pick transformers 4.49-4.57, whose experts are nn.Linear"
        raise PlanError(
            "lora.targets",
            ", ".join(self.lora.targets),
            "targets that reach a module: " + fix,
            f"PEFT finds none of them in {model.name}: its routed experts are 3-D parameters under this "
            "transformers release and it has no shared expert",
        )

    def _check_serving_layout(self) -> None:
        """Refuse a serving split vLLM refuses (vllm-project/vllm, stored snapshot commit
        0052a5b8 of ``vllm/config/model.py``, ``ModelConfig.verify_with_parallel_config``:
        "Total number of attention heads (...) must be divisible by tensor parallel size";
        ``vllm/model_executor/layers/linear.py QKVParallelLinear.__init__``: with TP ≥ the KV
        heads each rank holds one, ``divide(tp_size, total_num_kv_heads)`` (TP a multiple of
        them, the heads replicated), else ``divide(total_num_kv_heads, tp_size)``). A pipeline
        stage needs at least one layer to hold, so PP is at most the layer count (the same
        bound the training check sets; vLLM's own layer partitioning was not read for it)."""
        inf, model = self.inference, self.model
        tp = inf.tensor_parallel
        if tp > 1:
            kv = model.num_kv_heads
            if model.num_heads % tp:
                raise PlanError(
                    "inference.tensor_parallel", tp, f"a divisor of the model's {model.num_heads} attention heads"
                )
            if (kv % tp) if tp < kv else (tp % kv):
                raise PlanError(
                    "inference.tensor_parallel",
                    tp,
                    f"a divisor or a multiple of the model's {kv} KV heads",
                    "vLLM splits the KV heads evenly, or replicates them when TP exceeds them",
                )
        if inf.pipeline_parallel > model.num_layers:
            raise PlanError(
                "inference.pipeline_parallel",
                inf.pipeline_parallel,
                f"at most {model.num_layers} stages",
                f"the model has {model.num_layers} layers",
            )
        if inf.engine is Engine.LLAMACPP:
            self._check_llamacpp()
        elif inf.link.strip().lower() != "auto":
            find_link(inf.link, "inference.link")

    def _check_llamacpp(self) -> None:
        """Refuse what llama.cpp refuses (ggml-org/llama.cpp src/llama-context.cpp, the stored
        commit 145b6280 the launch exporter reads: "V cache quantization requires flash_attn"), and
        a split the planner does not model: llama.cpp spreads layers over GPUs (``-sm layer``, the
        plan's pipeline stages), 16 at most (core.inputs.LLAMACPP_MAX_DEVICES); its row split keeps
        the whole KV cache on the main GPU. --n-cpu-moe of a dense model: it has no expert tensors to move."""
        inf = self.inference
        if inf.tensor_parallel > 1:
            raise PlanError(
                "inference.tensor_parallel",
                inf.tensor_parallel,
                "1 with llama.cpp",
                "llama.cpp splits the layers across GPUs: give them as pipeline stages (-sm layer)",
            )
        if inf.pipeline_parallel > LLAMACPP_MAX_DEVICES:
            raise PlanError(
                "inference.pipeline_parallel",
                inf.pipeline_parallel,
                f"at most {LLAMACPP_MAX_DEVICES} GPUs with llama.cpp",
                f"ggml's CUDA backend holds at most {LLAMACPP_MAX_DEVICES} devices (GGML_CUDA_MAX_DEVICES)",
            )
        self._check_llamacpp_fit()
        if inf.cpu_moe_layers > 0 and self.model.num_experts <= 1 and inf.ollama_version is OllamaVersion.NONE:
            # Ollama has no such option and leaves the count unread (core.serving.llamacpp.cpu_moe_count).
            raise PlanError(
                "inference.cpu_moe_layers",
                inf.cpu_moe_layers,
                "0 for a dense model",
                f"{self.model.name} has no routed experts: --n-cpu-moe moves ffn_*_exps tensors only "
                "(use fewer GPU layers)",
            )
        if inf.cache_type not in UNQUANTISED_CACHE and not inf.flash_attention:
            raise PlanError(
                "inference.cache_type",
                inf.cache_type.value,
                "f16, bf16 or f32 without flash attention",
                "llama.cpp refuses it: V cache quantization requires flash_attn",
            )

    def _check_llamacpp_fit(self) -> None:
        """llama.cpp's own fit (``-ngl auto``, or an Ollama line from 0.30 without num_gpu) moves a
        mixture-of-experts model's expert tensors to the host first (common/fit.cpp 08033df0, its step
        4), which core.serving.llamacpp_fit does not model: refused with the plan, not at its estimate."""
        inf, model = self.inference, self.model
        if model.num_experts <= 1:
            return
        reason = "llama.cpp's fit of a mixture-of-experts model, common/fit.cpp's step 4, is not modelled"
        if inf.ollama_version is OllamaVersion.NONE and inf.gpu_layers < 0:
            raise PlanError("inference.gpu_layers", inf.gpu_layers, "a layer count (0 or more)", reason)
        if inf.ollama_version in OLLAMA_LLAMA_FIT and not 0 <= inf.gpu_layers <= model.num_layers:
            lines = ", ".join(
                v.value for v in OllamaVersion if v is not OllamaVersion.NONE and v not in OLLAMA_LLAMA_FIT
            )
            raise PlanError(
                "inference.ollama_version", inf.ollama_version.value, f"a line before 0.30 ({lines})", reason
            )

    def _reconcile_roles(self) -> None:
        """Keep the preset and the roles one description, and derive ``precision`` from them.

        Built with only one of them (``Plan(preset=...)``, ``Plan(preset=CUSTOM,
        base_dtype=...)``, roles alone) the other follows; given both and disagreeing, the
        plan is refused, naming the preset. :meth:`with_changes` decides which one an edit
        meant before this check runs.
        """
        default = PRESET_ROLES[Preset.FP32_AUTOCAST_BF16]
        roles = self.roles
        preset = self.preset
        if preset is not Preset.CUSTOM and roles != PRESET_ROLES[preset]:
            if roles == default:  # roles left at their defaults: the preset sets them
                roles = PRESET_ROLES[preset]
            elif preset is Preset.FP32_AUTOCAST_BF16:  # preset left at its default: the roles decide
                preset = preset_matching(roles)
            else:
                raise PlanError("preset", preset.value, "custom", f"the roles differ from the {preset.value} preset's")
        object.__setattr__(self, "preset", preset)
        for name in ROLE_FIELDS:
            object.__setattr__(self, name, getattr(roles, name))
        object.__setattr__(self, "precision", precision_of(roles))

    def _check_prompt_learning(self) -> None:
        """Prompt tuning and P-tuning as this planner models them: one process (or DDP) over a
        16- or 32-bit base. The virtual tokens' embeddings sit outside every block, which the
        sharded and split layouts' adapter rules (one adapter per block) do not describe; PEFT's
        prompt learning on a quantised base is not modelled. LN tuning (branch h52pfx) likewise, on the families
        whose default targets are modelled; prefix tuning under SDPA and without checkpointing, as PEFT runs it."""
        if not self.peft_flat_trained:
            return
        par = self.parallel
        if par.strategy is not Strategy.DDP or par.tensor_parallel * par.pipeline_parallel * par.context_parallel > 1:
            raise PlanError(
                "parallel.strategy",
                par.strategy.value,
                f"one GPU or DDP (no TP, PP or CP) with {METHOD_LABELS[self.method]}",
                "the trained tensors are not one adapter per block; only one GPU and DDP are modelled",
            )
        if self.stack is Stack.MEGATRON or self.litgpt or self.unsloth:
            raise PlanError("stack", self.stack.value, "PEFT on PyTorch", "the method is PEFT's (PeftModelForCausalLM)")
        if self.method is Method.LN_TUNING and self.model.family not in LN_TUNING_FAMILIES:
            raise PlanError(
                "method",
                self.method.value,
                f"a model of a family PEFT's LN tuning trains every norm of ({', '.join(LN_TUNING_FAMILIES)})",
                f"{self.model.family or 'this model'}: PEFT's TRANSFORMERS_MODELS_TO_LNTUNING_TARGET_MODULES_MAPPING "
                "names other modules or none (not modelled)",
            )
        if self.prefix_tokens and self.checkpointing:
            # huggingface/peft 51c2ff66 src/peft/peft_model.py ``_setup_prompt_encoder``, PREFIX_TUNING: "prefix
            # tuning now uses Cache but that won't work with gradient checkpointing" -> ValueError.
            raise PlanError(
                "checkpointing",
                True,
                "off with prefix tuning",
                "PEFT: PREFIX_TUNING does not work with gradient checkpointing",
            )
        if self.prefix_tokens and self.attention is not Attention.SDPA:
            raise PlanError(
                "attention",
                self.attention.value,
                "sdpa with prefix tuning",
                "prefix tuning's keys come from a cache; only SDPA with its explicit mask is modelled",
            )

    def _check_modules_to_save(self) -> None:
        """PEFT's modules_to_save and trainable_token_indices as this planner models them (branch h60mts,
        core.training.extra_trained): on a PEFT method, the layouts :meth:`_check_extra_trained_layout` allows,
        detailed accounting. What PEFT itself
        refuses (huggingface/peft 51c2ff66 src/peft/utils/other.py) is refused with its reason."""
        lora = self.lora
        self._check_trainable_tokens_method()
        if lora.modules_to_save is ModulesToSave.NONE and not lora.trainable_tokens:
            return
        path = "lora.modules_to_save" if lora.modules_to_save is not ModulesToSave.NONE else "lora.trainable_tokens"
        value = lora.modules_to_save.value if path == "lora.modules_to_save" else lora.trainable_tokens
        if not self.peft_config:
            raise PlanError(
                path,
                value,
                "none (0) with this method",
                "modules_to_save and trainable tokens are PEFT "
                f"config keys; {METHOD_LABELS[self.method]} here is not PEFT's",
            )
        if lora.trainable_tokens and not (self.lora_adapters or self.method is Method.TRAINABLE_TOKENS):
            # huggingface/peft 51c2ff66: only src/peft/tuners/lora/config.py declares trainable_token_indices.
            raise PlanError(
                "lora.trainable_tokens",
                lora.trainable_tokens,
                "0 with this method",
                "PEFT: trainable_token_indices is a LoraConfig key (LoRA, DoRA, QLoRA)",
            )
        if lora.trainable_tokens and lora.modules_to_save.embedding:
            # set_additional_trainable_modules: "The embedding layer is already marked to be trained fully".
            raise PlanError(
                "lora.trainable_tokens",
                lora.trainable_tokens,
                "0 while the embedding trains in full",
                "PEFT: the embedding layer is already marked to be trained fully (modules_to_save)",
            )
        if lora.modules_to_save.head and HEAD_TARGET in lora.targets and self.lora_adapters:
            # AuxiliaryTrainingWrapper.check_module: a BaseTunerLayer (the head's LoRA) cannot be wrapped.
            raise PlanError(
                "lora.modules_to_save",
                lora.modules_to_save.value,
                "no head while lm_head takes a LoRA adapter",
                "PEFT: modules_to_save cannot be applied to a LoRA layer (TypeError)",
            )
        if lora.trainable_tokens > self.model.vocab_size:
            raise PlanError(
                "lora.trainable_tokens",
                lora.trainable_tokens,
                f"0 to {self.model.vocab_size:,}",
                "token indices are rows of the embedding",
            )
        self._check_extra_trained_layout()
        # The trainable-tokens method's rows are its own trainable parameters, which the lesson's T counts.
        if self.accounting is Accounting.LESSON and extra_trained_outside_method(self):
            raise PlanError(
                "accounting",
                self.accounting.value,
                "detailed with modules_to_save or trainable tokens",
                "the lesson's four buckets have no term for the trained copies",
            )

    def _check_trainable_tokens_method(self) -> None:
        """PEFT's trainable-tokens method (huggingface/peft 5d602fdb src/peft/tuners/trainable_tokens/config.py
        ``TrainableTokensConfig``): ``token_indices`` name at least one row, and the config has no
        ``modules_to_save``."""
        if self.method is not Method.TRAINABLE_TOKENS:
            return
        if not self.lora.trainable_tokens:
            raise PlanError(
                "lora.trainable_tokens",
                0,
                f"1 to {self.model.vocab_size:,}",
                "the trainable-tokens method trains the rows its token_indices name: at least one",
            )
        if self.lora.modules_to_save is not ModulesToSave.NONE:
            raise PlanError(
                "lora.modules_to_save",
                self.lora.modules_to_save.value,
                "none with trainable tokens",
                "PEFT: TrainableTokensConfig has no modules_to_save",
            )
        if self.optimizer is Optimizer.ADAFACTOR:
            # core.training.optimizer.adafactor_state_elements has no rule for the (k, d) delta (branch h61mts2 left
            # that file to the branch that owned it): refused rather than priced as LoRA's factors.
            raise PlanError(
                "optimizer",
                self.optimizer.value,
                "another optimizer with trainable tokens",
                "Adafactor's factored statistics of the trainable-tokens delta are not modelled yet",
            )

    def _check_extra_trained_layout(self) -> None:
        """The layouts the trained copies are priced on (branch h61mts2, core.parallel.state): one GPU, DDP,
        FSDP2 (the copies in the root unit) and DeepSpeed ZeRO 1-3 (the copies trainable parameters like the
        adapters). Not the tensor-, pipeline-, context- or expert-parallel splits of a vocabulary-sized matrix,
        nor FSDP1 under PEFT's wrap policy, nor trainable tokens sharded."""
        par = self.parallel
        ep = par.expert_parallel if par.strategy is not Strategy.DDP else 1  # DDP as branch h60mts allowed it
        if par.tensor_parallel * par.pipeline_parallel * par.context_parallel * ep > 1:
            raise PlanError(
                "parallel.strategy",
                par.strategy.value,
                "no TP, PP, CP or EP with modules_to_save or trainable tokens",
                "how a split of the embedding / head splits PEFT's copies is not modelled",
            )
        if self.lora.trainable_tokens and par.strategy is not Strategy.DDP:
            # huggingface/peft 5d602fdb src/peft/tuners/trainable_tokens/layer.py: a ZeRO-3 path of its own
            # (gather_params_ctx), the original rows a buffer no sharding wrapper splits; not measured.
            raise PlanError(
                "parallel.strategy",
                par.strategy.value,
                "one GPU or DDP with trainable tokens",
                "trainable tokens under FSDP or ZeRO (the rows' buffer, ZeRO-3's gathered init) are not modelled",
            )
        if par.strategy is Strategy.FSDP and par.fsdp1_wrap and self.lora.modules_to_save is not ModulesToSave.NONE:
            # huggingface/peft 5d602fdb src/peft/utils/other.py fsdp_auto_wrap_policy: its lambda policy wraps
            # every leaf module whose weight requires grad, the copies each their own FSDP1 unit.
            raise PlanError(
                "parallel.fsdp1_wrap",
                True,
                "off (FSDP2) with modules_to_save",
                "under FSDP1 PEFT's wrap policy makes each trained copy a unit of its own, which is not modelled",
            )

    def _check_lycoris(self) -> None:
        """LoHa, LoKr, VeRA, OFT, AdaLoRA and MiSS as this planner models them (huggingface/peft 51c2ff66
        src/peft/tuners/loha, lokr, vera, oft, adalora, miss): PEFT's layers on the blocks' nn.Linear projections of a
        16- or 32-bit base, on one GPU or DDP. The whole delta weight each LoHa / LoKr forward builds, VeRA's
        shared projections sliced per target and AdaLoRA's RankAllocator (a whole copy of every adapter tensor on
        each rank) are not split by the sharded layouts' adapter rules; a MoE model's experts are no nn.Linear
        each, and the output head is not modelled as a target."""
        if self.method not in _PEFT_WRAPPED:
            return
        par = self.parallel
        if par.strategy is not Strategy.DDP or par.tensor_parallel * par.pipeline_parallel * par.context_parallel > 1:
            raise PlanError(
                "parallel.strategy",
                par.strategy.value,
                f"one GPU or DDP (no TP, PP or CP) with {METHOD_LABELS[self.method]}",
                "PEFT's layer on each target is whole on every rank; only one GPU and DDP are modelled",
            )
        if self.stack is not Stack.EAGER or self.litgpt or self.unsloth:
            why = "the method is PEFT's; what torch.compile keeps of its layers' tensors is not modelled"
            raise PlanError("stack", self.stack.value, "PEFT on eager PyTorch", why)
        if (self.checkpointing and self.checkpoint_policy is CheckpointPolicy.OP) or self.float8 is not Float8.NONE:
            raise PlanError(
                "checkpoint_policy" if self.float8 is Float8.NONE else "float8",
                self.checkpoint_policy.value if self.float8 is Float8.NONE else self.float8.value,
                "full checkpointing or none, 16- or 32-bit linears",
                f"torchtitan's per-op checkpointing and float8 linears are not run with PEFT's "
                f"{METHOD_LABELS[self.method]}",
            )
        if self.model.num_experts > 1:
            raise PlanError(
                "method",
                self.method.value,
                "a dense model",
                "a MoE model's experts are not one nn.Linear each: PEFT's layers on them are not modelled",
            )
        if HEAD_TARGET in self.lora.targets:
            raise PlanError(
                "lora.targets",
                ",".join(self.lora.targets),
                f"the blocks' projections with {METHOD_LABELS[self.method]}",
                f"{METHOD_LABELS[self.method]} on the output head is not modelled",
            )

    def _check_fourierft(self) -> None:
        """PEFT refuses more spectral coefficients than a target's weight has entries (huggingface/peft 51c2ff66
        src/peft/tuners/fourierft/layer.py ``update_layer``: "`n_frequency` should be less than or equal to the
        product of the input and output dimensions")."""
        if self.method is not _FOURIERFT:
            return
        smallest = min((i * o for i, o in self.model.adapted_shapes(self.lora.targets, self.linear_experts)), default=0)
        if smallest and self.lora.rank > smallest:
            raise PlanError(
                "lora.rank",
                self.lora.rank,
                f"at most {smallest:,} (in × out of the smallest target)",
                "PEFT's FourierFT refuses more coefficients than the target's weight has entries",
            )

    def _check_vblora_shira(self) -> None:
        """PEFT's own refusals (huggingface/peft 51c2ff66): VB-LoRA's ``update_layer`` (src/peft/tuners/vblora/
        layer.py) "`in_features` ... must be divisible by `vector_length`" and the same of out_features; SHiRA's
        ``update_layer`` (src/peft/tuners/shira/layer.py) refuses r·(in + out) above in·out ("more shira params than
        the total number of params in the base layer")."""
        if self.method is _VBLORA:
            sides = {n for i, o in self.model.adapted_shapes(self.lora.targets, self.linear_experts) for n in (i, o)}
            odd = sorted(n for n in sides if n % VBLORA_VECTOR_LENGTH)
            if odd:
                raise PlanError(
                    "method",
                    self.method.value,
                    f"targets whose widths divide by {VBLORA_VECTOR_LENGTH} (VBLoRAConfig.vector_length)",
                    f"PEFT's VB-LoRA refuses a target {odd[0]:,} wide: its sides must be whole bank vectors",
                )
        if self.method is _SHIRA:
            for fan_in, fan_out in self.model.adapted_shapes(self.lora.targets, self.linear_experts):
                if self.lora.rank * (fan_in + fan_out) > fan_in * fan_out:
                    raise PlanError(
                        "lora.rank",
                        self.lora.rank,
                        f"at most {fan_in * fan_out // (fan_in + fan_out):,} (in·out / (in + out) of a {fan_in:,} → "
                        f"{fan_out:,} target)",
                        "PEFT's SHiRA refuses more trained entries than the target's weight has",
                    )

    def _check_boft(self) -> None:
        """PEFT's own refusals (huggingface/peft 51c2ff66 src/peft/tuners/boft/layer.py ``update_layer``): no
        adjustment as OFT's; "in_features (…) must be divisible by boft_block_size (…)!" (or boft_block_num)."""
        if self.method is not _BOFT:
            return
        size = self.lora.oft_block_size
        part, path, name = (size, "lora.oft_block_size", "boft_block_size") if size else (
            self.lora.rank, "lora.rank", "boft_block_num"
        )
        for fan_in, _ in self.model.adapted_shapes(self.lora.targets, self.linear_experts):
            if fan_in % part:
                raise PlanError(
                    path,
                    part,
                    f"a divisor of every target's input width ({fan_in:,} here)",
                    f"PEFT's BOFT refuses a {name} that does not divide in_features",
                )

    def _check_adalora(self) -> None:
        """AdaLoRA's RankAllocator keeps its copies of every adapter tensor on the GPU, wherever the optimizer
        runs (huggingface/peft 51c2ff66 src/peft/tuners/adalora/layer.py ``update_ipt``: ``zeros_like(p)``): with
        the optimizer on the host they would sit beside an offloaded state the planner moves whole."""
        if self.method is Method.ADALORA and self.parallel.offload is not Offload.NONE:
            raise PlanError(
                "parallel.offload",
                self.parallel.offload.value,
                "none with AdaLoRA",
                "the RankAllocator's copies stay on the GPU beside an offloaded optimizer: not modelled",
            )

    def _check_muon(self) -> None:
        """torch.optim.Muon (torch 2.13.0 torch/optim/_muon.py) takes only 2-D parameters and orthogonalises each
        whole matrix on its rank: the plan runs it on a dense model's block matrices under full or frozen-layer
        training, one GPU, DDP or pipeline stages; the rest is refused with the reason, not guessed."""
        if self.optimizer is not Optimizer.MUON:
            return
        par = self.parallel
        why = ""
        if torch_before(self.hardware.torch_version, MUON_FIRST_TORCH):
            field, value, allowed = "hardware.torch_version", self.hardware.torch_version.value, "2.8+ with Muon"
            why = "a PyTorch release without it (torch.optim.Muon first shipped in 2.9.0, pytorch/pytorch PR 160213)"
        elif self.method not in (Method.FULL, Method.FROZEN):
            field, value, allowed, why = "method", self.method.value, "full or frozen with Muon", "adapters"
        elif self.model.num_experts > 1 or self.model.kv_lora_rank:
            field, value, allowed = "model", self.model.name, "a dense model without latent attention with Muon"
            why = "expert weights (3-D in transformers 5) and latent attention's matrices"
        elif par.strategy is not Strategy.DDP or par.tensor_parallel > 1 or par.offload is not Offload.NONE:
            field, value, allowed = "parallel.strategy", par.strategy.value, "ddp, no tensor parallel or offload"
            why = "sharded or offloaded matrices (Newton-Schulz reads each whole matrix)"
        elif self.stack is Stack.MEGATRON:
            field, value, allowed, why = "stack", self.stack.value, "eager or compile with Muon", "Megatron's own"
        if why:
            raise PlanError(field, value, allowed, f"torch.optim.Muon with {why}: not modelled")

    def _check_galore(self) -> None:
        """GaLore's AdamW (galore-torch 1.0 galore_torch/adamw.py; transformers 5.25 trainer_optimizer.py
        _setup_low_rank_optimizer): the projector reads each targeted gradient as a whole 2-D matrix (its shape picks
        the side, torch.linalg.svd of all of it). Planned on full training (GaLore trains full weights: under PEFT the
        targeted Linear weights are frozen, HF would project none of them), one GPU or DDP; the layer-wise form
        (optimizer_in_backward) on one GPU, as HF raises "Layer-wise ... does not support DDP". Sharded or flattened
        matrices (ZeRO's flat partitions, FSDP's shards), tensor parallel and offload are refused with the reason."""
        if self.optimizer is not Optimizer.GALORE_ADAMW:
            return
        par = self.parallel
        why = ""
        if self.method not in (Method.FULL, Method.FROZEN):
            field, value, allowed = "method", self.method.value, "full or frozen with GaLore"
            why = "adapters (GaLore trains the full Linear weights; under PEFT they are frozen and none is projected)"
        elif self.model.num_experts > 1 or self.model.kv_lora_rank:
            field, value, allowed = "model", self.model.name, "a dense model without latent attention with GaLore"
            why = "expert weights (3-D in transformers 5, not nn.Linear) and latent attention's matrices"
        elif par.strategy is not Strategy.DDP or par.tensor_parallel > 1 or par.offload is not Offload.NONE:
            field, value, allowed = "parallel.strategy", par.strategy.value, "ddp, no tensor parallel or offload"
            why = "sharded, flattened or offloaded matrices (the projector's SVD reads each whole 2-D gradient)"
        elif self.litgpt or self.unsloth:  # Megatron: the stack's own table refuses it (_check_optimizer_stack)
            field, value, allowed = "litgpt" if self.litgpt else "unsloth", "on", "off with GaLore"
            why = "LitGPT's or Unsloth's trainer (transformers' Trainer builds GaLore from optim_target_modules)"
        elif self.optimizer_in_backward and par.world_size > 1:
            field, value, allowed = "optimizer_in_backward", "on", "off with GaLore on more than one GPU"
            why = "its layer-wise form under DDP (transformers raises 'Layer-wise ... does not support DDP')"
        if why:
            raise PlanError(field, value, allowed, f"GaLore with {why}: not modelled")

    def _check_new_optimizers(self) -> None:
        """torch.optim.RMSprop has no fused implementation (torch 2.13.0 torch/optim/rmsprop.py: foreach and for-loop
        only)."""
        if self.optimizer is Optimizer.RMSPROP and self.optimizer_impl is OptimizerImpl.FUSED:
            raise PlanError(
                "optimizer_impl",
                self.optimizer_impl.value,
                "foreach or forloop with RMSprop",
                "torch.optim.RMSprop has no fused implementation (torch 2.13 rmsprop.py: foreach or for-loop)",
            )

    def _check_optimizer_stack(self) -> None:
        """The optimizers the plan's stack builds (core.optimizer_stacks, one table with each stack's source):
        Megatron-Core's adam / sgd / lion, DeepSpeed ZeRO-Offload's CPU Adam / Adagrad / Lion, Megatron's CPU offload
        Adam (AdamW mode) / SGD; PyTorch any. Refused with the stack's rule and what it builds. Under an offload the
        offload is the field named (the optimizer runs without it)."""
        par = self.parallel
        stack = optimizer_stack(self.stack, par.strategy, par.offload)
        why = optimizer_refusal(self.optimizer, stack)
        if not why:
            return
        label = OPTIMIZER_LABELS[self.optimizer]
        if stack in (OptimizerStack.ZERO_OFFLOAD, OptimizerStack.MEGATRON_OFFLOAD):
            allowed = f"none with {label}, or an optimizer {STACK_NAMES[stack]} builds: {built_labels(stack)}"
            raise PlanError("parallel.offload", par.offload.value, allowed, why)
        allowed = f"one {STACK_NAMES[stack]} builds: {built_labels(stack)}"
        raise PlanError("optimizer", self.optimizer.value, allowed, why)

    def _check_lora_fa(self) -> None:
        """PEFT's LoRA-FA (huggingface/peft 5d602fdb src/peft/optimizers/lorafa.py, PEFT 0.18.0 alike) takes a
        PeftModel: ``create_lorafa_optimizer`` freezes every parameter named lora_A, and LoraFAOptimizer.step pairs
        each lora_A with the next parameter whose name holds "lora" (its lora_B) and multiplies whole A (A @ A.T).
        The plan runs it on PEFT's LoRA / QLoRA, one GPU or DDP; the rest is refused with the reason."""
        if self.optimizer is not Optimizer.LORA_FA:
            return
        par = self.parallel
        why = ""
        if self.method not in (Method.LORA, Method.QLORA):
            field, value, allowed = "method", self.method.value, "lora or qlora with LoRA-FA"
            why = "no lora_A to freeze"
            if self.method is Method.DORA:
                why = "DoRA's lora_magnitude_vector, which breaks the step's (lora_A, lora_B) pairing by name"
        elif self.litgpt or self.unsloth or self.stack is Stack.MEGATRON:
            field, value, allowed = "stack", self.stack.value, "PEFT's own LoRA layers with LoRA-FA"
            why = "LitGPT's, Unsloth's or Megatron's LoRA (create_lorafa_optimizer takes a PeftModel)"
        elif par.strategy is not Strategy.DDP or par.tensor_parallel > 1 or par.offload is not Offload.NONE:
            field, value, allowed = "parallel.strategy", par.strategy.value, "ddp, no tensor parallel or offload"
            why = "sharded or offloaded adapters (the step pairs lora_A and lora_B by name and reads whole A)"
        if why:
            raise PlanError(field, value, allowed, f"LoRA-FA with {why}: not modelled")

    def _check_ao_zero(self) -> None:
        """torchao's low-bit AdamW under a DeepSpeed ZeRO stage. ZeRO hands the optimizer flat float32 partitions,
        not the model's tensors (deepspeedai/DeepSpeed edaa7221): stages 1-2 one per param group, the group padded to a
        multiple of 2 × DP (stage_1_and_2.py lines 391-393, nccl_start_alignment_factor 2), so 2·⌈N/(2·DP)⌉ elements;
        stage 3 one per sub-group, each parameter padded to a multiple of DP (partition_parameters.py _padding_size).
        torchao quantises a moment only for a tensor of 4,096 elements or more that its block (256; 128 at 4 bits)
        divides (pytorch/ao 36027d82 torchao/optim/adam.py ``_new_buffer``), else keeps it in the tensor's dtype:
        whether a partition is a block multiple depends on the param groups' element counts (the trainer's), which
        the plan does not fix, so its state is 8 B or ~2 B an element by that chance alone. DeepSpeed also asserts
        without ``zero_allow_untested_optimizer`` (runtime/engine.py line 1990: torchao's AdamW is not in
        zero/utils.py ZERO_SUPPORTED_OPTIMIZERS). Refused with the reason, not guessed."""
        low_bit = (Optimizer.AO_ADAMW_8BIT, Optimizer.AO_ADAMW_4BIT, Optimizer.AO_ADAMW_FP8)
        if self.optimizer in low_bit and self.parallel.strategy.deepspeed and self.stack is not Stack.MEGATRON:
            raise PlanError(
                "optimizer",
                self.optimizer.value,
                "a torchao low-bit AdamW on one GPU, DDP or FSDP, or AdamW (or bitsandbytes') under ZeRO",
                "torchao quantises only tensors its block divides; ZeRO's flat float32 partitions are block multiples "
                "or not by the param groups' sizes alone (padded to 2 × DP at stages 1-2): not modelled",
            )

    # ---- derived inputs (no arithmetic on memory here: that is the estimator's) ------
    @property
    def roles(self) -> PrecisionRoles:
        return PrecisionRoles(self.weight_dtype, self.base_dtype, self.adapter_dtype, self.autocast)

    @property
    def adapter_based(self) -> bool:
        """A frozen base with small trained tensors beside it (LoRA, QLoRA, DoRA, IA3, LitGPT's adapters,
        prompt tuning, P-tuning, prefix tuning, LN tuning)."""
        return self.method in _ADAPTER_BASED

    @property
    def lycoris(self) -> bool:
        """PEFT's LoHa or LoKr: rank-r factors on ``lora.targets`` whose product, the whole delta weight of
        each target, is built at every forward (huggingface/peft 51c2ff66 src/peft/tuners/loha, lokr)."""
        return self.method in _LYCORIS

    @property
    def vera(self) -> bool:
        """PEFT's VeRA: a frozen random pair (vera_A r × in, vera_B out × r, the largest target's sides) shared
        by every target of ``lora.targets``, scaled by two trained vectors per target (huggingface/peft
        51c2ff66 src/peft/tuners/vera)."""
        return self.method is _VERA

    @property
    def adalora(self) -> bool:
        """PEFT's AdaLoRA: lora_A (r × in), lora_E (r × 1) and lora_B (out × r) on each target of
        ``lora.targets`` at ``lora.rank`` = init_r, applied as ``x @ (A * E).T @ B.T``, with a RankAllocator
        that keeps three copies of every trained tensor (huggingface/peft 51c2ff66 src/peft/tuners/adalora)."""
        return self.method is _ADALORA

    @property
    def oft(self) -> bool:
        """PEFT's OFT: each target of ``lora.targets`` rotates its input by a block-diagonal orthogonal matrix
        (``lora.oft_block_size`` wide blocks, or ``lora.rank`` blocks when that is 0) built every forward from
        trained skew-symmetric blocks (huggingface/peft 51c2ff66 src/peft/tuners/oft)."""
        return self.method is _OFT

    @property
    def boft(self) -> bool:
        """PEFT's BOFT with one butterfly factor: each target of ``lora.targets`` multiplies its input by a dense
        in × in orthogonal matrix, the Cayley transforms of its trained b × b blocks (``lora.oft_block_size`` wide,
        or ``lora.rank`` blocks when that is 0) made block-diagonal and permuted by two bmms with ``boft_P``, then
        scales the frozen base's output by trained ``boft_s`` (huggingface/peft 51c2ff66 src/peft/tuners/boft/
        layer.py ``Linear.forward``)."""
        return self.method is _BOFT

    @property
    def miss(self) -> bool:
        """PEFT's MiSS (formerly Bone) with MissConfig's default init: each target of ``lora.targets`` adds
        ``sum(x.reshape(..., in / r, r), dim=-2) @ miss_block`` (r × out, trained) to its frozen base linear's
        output (huggingface/peft 51c2ff66 src/peft/tuners/miss/layer.py ``MissLinear.forward``)."""
        return self.method is _MISS

    @property
    def peft_wrapped(self) -> bool:
        """PEFT's methods that wrap each target of ``lora.targets`` in a layer of their own over a frozen base (LoHa,
        LoKr, VeRA, OFT, AdaLoRA, MiSS, FourierFT, RoAd, VB-LoRA, RandLoRA, SHiRA): one set, read by the refusals and
        by every rule that asks which of them runs."""
        return self.method in _PEFT_WRAPPED

    @property
    def fourierft(self) -> bool:
        """PEFT's FourierFT: each target of ``lora.targets`` trains ``lora.rank`` (n_frequency) spectral
        coefficients, scattered into an (out, in) grid whose inverse 2-D FFT, scaled, is the whole delta weight,
        built every forward and applied as ``F.linear(x, delta)`` beside the frozen base linear (huggingface/peft
        51c2ff66 src/peft/tuners/fourierft/layer.py ``get_delta_weight``, ``FourierFTLinear.forward``)."""
        return self.method is _FOURIERFT

    @property
    def road(self) -> bool:
        """PEFT's RoAd: each target's frozen base output, cast to the adapter's dtype, is rotated in pairs by
        trained angles and scales (``lora.road_variant``), elementwise (huggingface/peft 51c2ff66
        src/peft/tuners/road/layer.py ``Linear.forward``, ``_apply_road``)."""
        return self.method is _ROAD

    @property
    def vblora(self) -> bool:
        """PEFT's VB-LoRA: each target of ``lora.targets`` assembles its rank-r A (r × in) and B (out × r) every
        forward from the shared trained vector bank (each length-256 slot a softmax mix of its top-2 logits' bank
        vectors) and applies them as LoRA's two matmuls (huggingface/peft 51c2ff66 src/peft/tuners/vblora/layer.py
        ``_get_low_rank_matrix``, ``_get_lora_matrices``, ``Linear.forward``)."""
        return self.method is _VBLORA

    @property
    def randlora(self) -> bool:
        """PEFT's RandLoRA: each target of ``lora.targets`` multiplies its input by frozen shared random bases
        (ceil(min(in, out) / r) of rank r) scaled by trained randlora_lambda (r × bases) and randlora_gamma (bases ×
        min(in, out)), a full-rank update applied as two matmuls (huggingface/peft 51c2ff66 src/peft/tuners/randlora/
        layer.py ``UniqueBaseGrad``, ``get_scaled_bases``, ``Linear.forward``)."""
        return self.method is _RANDLORA

    @property
    def shira(self) -> bool:
        """PEFT's SHiRA: each target of ``lora.targets`` trains r·(in + out) entries of its weight (a random mask),
        added as a sparse tensor to a copy of the frozen weight every forward, applied as ``F.linear(x, new_weight)``
        (huggingface/peft 51c2ff66 src/peft/tuners/shira/layer.py ``get_delta_weight``, ``Linear.forward``)."""
        return self.method is _SHIRA

    @property
    def peft_config(self) -> bool:
        """The method is PEFT's, configured by a PeftConfig with modules_to_save / trainable_token_indices
        (every adapter method but LitGPT's own, on a stack that loads PEFT: not LitGPT's, not Megatron)."""
        return self.adapter_based and not self.litgpt_adapter and not self.litgpt and self.stack is not Stack.MEGATRON

    @property
    def litgpt_adapter(self) -> bool:
        """LitGPT's Adapter or Adapter v2 (lit_gpt/adapter.py, lit_gpt/adapter_v2.py)."""
        return self.method in _LITGPT_ADAPTERS

    @property
    def gradless_layers(self) -> int:
        """Bottom blocks the backward never reaches (they keep no activations): the frozen-layers
        method's frozen blocks; under LitGPT's Adapter (v1) the blocks below ``adapter_start_layer``,
        which train nothing and follow only the frozen embedding (lit_gpt/adapter.py at
        Lightning-AI/litgpt 0f021f3). Adapter v2 trains every block's norms, biases and scales."""
        method = self.method
        if method is _FROZEN:
            return min(self.frozen_layers, self.model.num_layers)
        if method is _ADAPTER:
            return min(self.lora.adapter_start_layer, self.model.num_layers)
        return 0

    @property
    def quantised_base(self) -> bool:
        """The frozen base stored by bitsandbytes (``quant``, ``double_quant``): QLoRA, or LitGPT's
        adapters under ``--quantize bnb.*`` (one pair of method and quantisation, the same storage)."""
        method = self.method
        return method is _QLORA or (method in _LITGPT_ADAPTERS and self.lora.adapter_quantised)

    @property
    def prompt_learning(self) -> bool:
        """PEFT's prompt learning (its PromptLearningConfig methods): trained virtual tokens, their tensors
        outside the blocks; prompt tuning and P-tuning put them before the sequence, prefix tuning before
        every layer's keys and values."""
        return self.method in _PROMPT_LEARNING

    @property
    def peft_flat_trained(self) -> bool:
        """PEFT's prompt learning or LN tuning: trained tensors that are no LoRA-style adapter of the
        blocks' targets (core.params.flat_trained_sizes counts them), on one GPU or DDP."""
        return self.method in _PEFT_FLAT_TRAINED

    @property
    def prefix_tokens(self) -> int:
        """Keys and values prefix tuning puts before the sequence's own in every layer's attention
        (huggingface/peft 51c2ff66 src/peft/peft_model.py ``PeftModelForCausalLM.forward``: ``past_key_values =
        self.get_prompt(batch_size, ...)`` handed to the base model as its cache); 0 for every other method."""
        return self.lora.virtual_tokens if self.method is _PREFIX_TUNING else 0

    @property
    def run_seq_len(self) -> int:
        """Tokens the model runs on per sequence: the sequence, plus PEFT's virtual tokens under prompt
        learning (huggingface/peft 51c2ff66 src/peft/peft_model.py PeftModelForCausalLM.forward:
        ``inputs_embeds = torch.cat((prompts, inputs_embeds), dim=1)``, the labels padded with -100 in
        front and the attention mask with ones, so every block, the logits and the loss cover
        seq + num_virtual_tokens positions)."""
        extra = self.lora.virtual_tokens if self.method in _VIRTUAL_TOKENS_FIRST else 0
        return self.workload.seq_len + extra

    @property
    def linear_experts(self) -> bool:
        """Whether the run's model code holds the routed experts as nn.Linear modules an adapter's MLP targets reach
        (ModelSpec.adapted_rows): transformers 4.x for LINEAR_EXPERTS_4X's families (from 5.0 they are 3-D
        parameters), LitGPT's own MoE (``LLaMAMoE.experts``, a ModuleList of LLaMAMLP whose linears its LoRA
        replaces) always. A dense model: no routed experts, the flag reads nowhere."""
        return _linear_experts(self.model, self.training_transformers, self.litgpt_code)

    @property
    def litgpt_code(self) -> bool:
        """Whether LitGPT's own model code runs the plan: its switch on where the window shows it (core.inputs' "litgpt"
        row matters only without Unsloth and a fused loss), so a switch left on under Liger's loss changes nothing the
        window does not show (one answer)."""
        return self.litgpt and not self.unsloth and not self.fused_loss

    @property
    def bnb_16bit_experts(self) -> bool:
        """Whether a bitsandbytes base leaves the routed experts unquantised, in the model's 16-bit dtype (float32
        after prepare_model_for_kbit_training, core.roles.kbit_float32): transformers quantises nn.Linear modules
        only, and holds the experts as 3-D parameters from 5.0 and for every family outside BNB_LINEAR_EXPERTS_4X
        in 4.x (core.model; bitsandbytes-foundation/bitsandbytes issue 1849). Not under LitGPT (its MoE's experts
        are nn.Linear, quantised by Lightning's plugin) nor Unsloth's 4-bit loader, which patches the quantizer to
        pack 3-D experts as Params4bit (unslothai/unsloth-zoo 0d3aba8a unsloth_zoo/temporary_patches/
        moe_utils_bnb4bit.py: "These patches teach it to recognize and quantize those parameters"; its int8 is
        transformers' own)."""
        if not self._transformers_quantises_moe:
            return False
        return self.training_transformers is _TRANSFORMERS_V5 or self.model.family not in BNB_LINEAR_EXPERTS_4X

    @property
    def release_moves_bnb_experts(self) -> bool:
        """Whether the transformers release decides if a bitsandbytes base quantises the routed experts
        (:attr:`bnb_16bit_experts`): a family whose experts 4.x held as nn.Linear, loaded by transformers."""
        return self._transformers_quantises_moe and self.model.family in BNB_LINEAR_EXPERTS_4X

    @property
    def _transformers_quantises_moe(self) -> bool:
        """A mixture of experts on a bitsandbytes base that transformers' own quantizer builds (not LitGPT's
        plugin, not Unsloth's patched 4-bit loader)."""
        if not self.quantised_base or self.model.num_experts == 1 or self.litgpt_code:
            return False
        return not (self.unsloth and self.four_bit_base)

    @property
    def release_moves_adapters(self) -> bool:
        """Whether the transformers release changes what the plan's adapter targets reach: a mixture of experts of
        LINEAR_EXPERTS_4X trained with targets among the MLP's, not through LitGPT's own model code."""
        model = self.model
        if model.num_experts == 1 or model.family not in LINEAR_EXPERTS_4X or self.litgpt_code:
            return False
        if not self.targets_adapted:
            return False
        return not set(self.lora.targets).isdisjoint(MLP_TARGETS)

    @property
    def all_linear_reaches_more(self) -> bool:
        """Whether the plan's all-linear adapts a module the seven names do not reach: an MoE router or Qwen2-MoE's
        shared-expert gate that the release builds as nn.Linear (ModelSpec.all_linear_rows). Elsewhere all-linear and
        the seven names train the same matrices."""
        if ALL_LINEAR not in self.lora.targets:
            return False
        model, linear = self.model, self.linear_experts
        return any(model.all_linear_rows(linear, dense) for _, dense in model.adapter_blocks())

    @property
    def trained_targets(self) -> tuple[str, ...]:
        """``lora.targets`` as what they train: all-linear kept only where it reaches more than the seven names
        (:attr:`all_linear_reaches_more`), so an export that lists the seven names reads back as the same plan."""
        if ALL_LINEAR not in self.lora.targets or self.all_linear_reaches_more:
            return self.lora.targets
        return tuple(t for t in self.lora.targets if t != ALL_LINEAR)

    @property
    def targets_adapted(self) -> bool:
        """Whether the plan's method puts something on each of ``lora.targets`` (LoRA-shaped adapters, PEFT's
        wrapped methods, IA3), what PEFT's target_modules decide."""
        return self.lora_adapters or self.method in _PEFT_WRAPPED or self.method is Method.IA3

    @property
    def lora_adapters(self) -> bool:
        """LoRA-shaped adapters (lora_A, lora_B of rank r) on ``lora.targets``."""
        return self.method in _LORA_SHAPED

    @property
    def four_bit_base(self) -> bool:
        """QLoRA over a bitsandbytes 4-bit base (NF4 / FP4): packed data plus a quantisation state."""
        return self.quantised_base and self.quant in (Quant.NF4, Quant.FP4)

    @property
    def grad_scaler(self) -> bool:
        """fp16 autocast runs with a GradScaler (Trainer(fp16=True), torch.amp recipes)."""
        return self.autocast is _AUTOCAST_FP16

    @property
    def effective_batch(self) -> int:
        """Sequences per optimizer step: micro-batch × accumulation × data-parallel ranks."""
        return self.workload.micro_batch * self.workload.grad_accum * self.parallel.data_parallel

    @property
    def world_size(self) -> int:
        """GPUs the run uses: nodes × GPUs per node."""
        return self.parallel.world_size

    def with_changes(self, **changes: Any) -> Plan:
        """A copy with top-level fields replaced; nested ones via ``workload=...`` etc.

        Precision edits say what they mean: the old one-word ``precision`` (it is derived, so
        this is the only way to give it) alone picks its preset and roles, a named ``preset``
        alone brings its roles, a role alone makes the plan custom (unless the roles still are
        the preset's). A ``precision`` given with a preset or a role is left to them.
        """
        word = changes.pop("precision", None)
        role_edits = {k: changes[k] for k in ROLE_FIELDS if k in changes}
        if word is not None and "preset" not in changes and not role_edits:
            changes.update(precision_fields(Precision(word)))
        elif "preset" in changes and Preset(changes["preset"]) is not Preset.CUSTOM and not role_edits:
            changes.update(_roles_dict(PRESET_ROLES[Preset(changes["preset"])]))
        elif role_edits and "preset" not in changes:
            roles = replace(self.roles, **role_edits)
            if self.preset is not Preset.CUSTOM and roles != PRESET_ROLES[self.preset]:
                changes["preset"] = Preset.CUSTOM
        return replace(self, **changes)

    def with_input(self, path: str, value: Any) -> Plan:
        """This plan with the input at ``path`` (a row of :mod:`core.inputs`) set to ``value``,
        as a form's field edits it: an enum may come as its text, the method switches the
        way :meth:`with_method` does, precision roles the way :meth:`with_changes` does, and
        a parameter count of 0 means "derive it from the architecture"."""
        spec = input_at(path)
        if spec.kind is Kind.ENUM:
            value = spec.enum(value)
        group, _, name = path.rpartition(".")
        if path == "method":
            return self.with_method(value)
        if path == "optimizer":
            return self.with_changes(optimizer=value, optimizer_impl=self.follow_optimizer(value))
        if path == "model.params_override":
            return replace(self, model=replace(self.model, params_override=value or None))
        if not group:
            return self.with_changes(**{name: value})
        return replace(self, **{group: replace(getattr(self, group), **{name: value})})

    def follow_optimizer(self, optimizer: Optimizer) -> OptimizerImpl:
        """The implementation a switch to ``optimizer`` keeps: the plan's, unless it is fused and ``optimizer``
        has none (:data:`NO_FUSED_OPTIMIZERS`): then torch's default, foreach. A typed fused is still refused."""
        if optimizer in NO_FUSED_OPTIMIZERS and self.optimizer_impl is OptimizerImpl.FUSED:
            return OptimizerImpl.FOREACH
        return self.optimizer_impl

    def input_value(self, path: str) -> Any:
        """The value of the input at ``path`` (0 for a parameter count derived from the architecture)."""
        value = _reader(path)(self)
        return 0 if value is None else value

    def checkpointed_blocks(self, layers: int) -> int:
        """Blocks (of ``layers``) whose activations are recomputed: all under full or per-op
        checkpointing; under layer SAC those whose 1-based index is a multiple of N
        (torchtitan ``_apply_layer_sac``: ``_layer_sac_count % ac_freq == 0``); none under
        attention-only recompute, which re-runs only the core attention of each block."""
        if not self.checkpointing or self.checkpoint_policy is CheckpointPolicy.ATTENTION:
            return 0  # attention-only recompute keeps every block's own tensors (no block is checkpointed)
        if self.checkpoint_policy is CheckpointPolicy.LAYER:
            return layers // self.checkpoint_every
        return layers

    def with_workload(self, **changes: Any) -> Plan:
        return replace(self, workload=replace(self.workload, **changes))

    def with_hardware(self, **changes: Any) -> Plan:
        return replace(self, hardware=replace(self.hardware, **changes))

    def with_parallel(self, **changes: Any) -> Plan:
        return replace(self, parallel=replace(self.parallel, **changes))

    def with_inference(self, **changes: Any) -> Plan:
        return replace(self, inference=replace(self.inference, **changes))

    def with_lora(self, **changes: Any) -> Plan:
        return replace(self, lora=replace(self.lora, **changes))

    def with_lesson(self, **changes: Any) -> Plan:
        return replace(self, lesson=replace(self.lesson, **changes))

    # ---- the same plan on other GPUs, model or method (one home: forms, CLI, remedies) ----
    def on_gpus(self, count: int, strategy: Strategy | None = None, *, per_node: int = GPUS_PER_NODE) -> Plan:
        """This plan on ``count`` GPUs: one node up to ``per_node`` GPUs, then full nodes
        (a count that does not fill whole nodes stays on one). Tensor, pipeline and
        context degrees are kept when they still divide the count, else they drop to 1."""
        nodes, gpus = (count // per_node, per_node) if count > per_node and count % per_node == 0 else (1, count)
        par = self.parallel
        changes: dict[str, Any] = {"nodes": nodes, "gpus_per_node": gpus}
        if strategy is not None:
            changes["strategy"] = strategy
        split = par.tensor_parallel * par.pipeline_parallel * par.context_parallel
        if count % split:
            changes.update(tensor_parallel=1, pipeline_parallel=1, context_parallel=1, virtual_stages=1)
            split = 1
        return self.with_layout(**changes)

    def with_layout(self, **changes: Any) -> Plan:
        """These parallel settings; an expert-parallel degree or HSDP replicas that the new
        layout's own rules refuse (Parallelism's checks) drop to 1: every expert on each rank,
        FSDP over every data-parallel rank. Any other refusal is raised."""
        for _ in range(len(_LAYOUT_DROPS)):
            try:
                return self.with_parallel(**changes)
            except PlanError as error:
                if error.field not in _LAYOUT_DROPS:
                    raise
                changes = {**changes, error.field.removeprefix("parallel."): 1}
        return self.with_parallel(**changes)

    def on_model(self, model: ModelSpec, model_id: str = "") -> Plan:
        """This plan on another model; frozen layers are kept within the new model's depth, and
        a tensor or pipeline split the new model cannot take (heads that TP does not divide,
        fewer layers than pipeline chunks), for training or serving, drops to 1 on the same GPUs,
        as :meth:`on_gpus` does; so does an expert-parallel degree the new model's experts do not
        divide, and llama.cpp's --n-cpu-moe drops to 0 on a model with no experts; Text only and prefix caching
        go back to their defaults where the new model refuses them on the plan's engine. A model planned on vLLM only
        (chunked attention, Llama 4; a hybrid recurrent model: :func:`serving_refusal`) moves the plan's serving to
        vLLM (:func:`serving_on`)."""
        frozen = min(self.frozen_layers, model.num_layers)
        plan = self
        if self.lora.adapter_start_layer >= model.num_layers:  # LitGPT's Adapter: some block keeps a prompt
            plan = replace(self, lora=replace(self.lora, adapter_start_layer=max(0, model.num_layers - 1)))
        plan = plan.targets_for(model)
        plan = replace(plan, inference=serving_on(model, plan.inference))
        for _ in range(6):  # the training split, the experts' split, the serving split, llama.cpp's experts in RAM,
            # text only, prefix caching
            try:
                return replace(plan, model=model, model_id=model_id, frozen_layers=frozen)
            except PlanError as error:
                if error.field not in _MODEL_DROPS:
                    raise
                section, degrees = _MODEL_DROPS[error.field]
                held = getattr(plan, section)
                if replace(held, **degrees) == held:
                    raise  # already whole: the model refuses something else about it
                plan = replace(plan, **{section: replace(held, **degrees)})
        return replace(plan, model=model, model_id=model_id, frozen_layers=frozen)

    def targets_for(self, model: ModelSpec) -> Plan:
        """This plan's adapter targets as ``model`` has them (:func:`lora_on`). On a mixture of experts where the
        MLP's targets alone reach nothing under the plan's release (:func:`moe_targets_reach_nothing`, what
        Plan._check_moe_targets refuses), q_proj and v_proj join them, PEFT's LoRA default (as a latent-attention
        model's missing targets give way to o_proj)."""
        lora = lora_on(model, self.lora)
        linear = _linear_experts(model, self.training_transformers, self.litgpt_code)
        if self.targets_adapted and moe_targets_reach_nothing(model, lora.targets, linear):
            lora = replace(lora, targets=normalise_lora_targets(("q_proj", "v_proj", *lora.targets)))
        return self if lora is self.lora else replace(self, lora=lora)

    def with_method(self, method: Method, *, typed: frozenset[str] = frozenset(), **changes: Any) -> Plan:
        """This plan trained another way; ``changes`` are further top-level fields (lora, quant...).

        The frozen-layers method needs at least one frozen block: switching to it from a plan
        with none starts from half the model, a common choice, rather than refuse the switch.
        Leaving it keeps the count, so switching back restores it. Targets still at one method's
        default become the other's (LoRA's q_proj, v_proj; IA3's k_proj, v_proj, down_proj, as
        PEFT picks each when a config names none), and IA3's feedforward modules stay among the
        targets; neither when ``typed`` (the input paths the user typed) names it. IA3, LoHa, LoKr,
        VeRA, OFT and AdaLoRA leave the output head out of the targets. A rank still at one method's config default
        (LoRA's 8, VeRA's 256, AdaLoRA's init_r 12) becomes the new method's on a switch, unless typed; so does a
        block size (OFTConfig's 32, BOFTConfig's 4).
        Prefix tuning runs without gradient checkpointing and under SDPA (PEFT's refusal; the
        modelled kernel).
        """
        model = changes.get("model", self.model)
        if method is Method.FROZEN and changes.get("frozen_layers", self.frozen_layers) == 0:
            changes["frozen_layers"] = max(1, model.num_layers // 2)
        lora = changes.get("lora", self.lora)
        if "lora.targets" not in typed and (method is Method.IA3) != (self.method is Method.IA3):
            lora = changes["lora"] = _default_targets_for(method, lora)
        off_head = method is Method.IA3 or method in _PEFT_WRAPPED
        if off_head and HEAD_TARGET in lora.targets and "lora.targets" not in typed:
            # IA3, LoHa, LoKr, VeRA or OFT on the head is not modelled (__post_init__ refuses it): a switch leaves
            # it out.
            fallback = IA3_DEFAULT_TARGETS if method is Method.IA3 else DEFAULTS["lora.targets"]
            lora = replace(lora, targets=tuple(t for t in lora.targets if t != HEAD_TARGET) or fallback)
            changes["lora"] = lora
        was_block = _DEFAULT_BLOCKS.get(self.method, DEFAULTS["lora.oft_block_size"])
        now_block = _DEFAULT_BLOCKS.get(method, DEFAULTS["lora.oft_block_size"])
        if "lora.oft_block_size" not in typed and was_block != now_block and lora.oft_block_size == was_block:
            lora = changes["lora"] = replace(lora, oft_block_size=now_block)
        was = _DEFAULT_RANKS.get(self.method, DEFAULTS["lora.rank"])
        now = _DEFAULT_RANKS.get(method, DEFAULTS["lora.rank"])
        if "lora.rank" not in typed and was != now and lora.rank == was:
            lora = changes["lora"] = replace(lora, rank=now)
        if method is Method.PREFIX_TUNING:
            # PEFT refuses prefix tuning with gradient checkpointing, and only SDPA's explicit-mask path is
            # modelled (__post_init__ refuses both): a switch turns checkpointing off and picks SDPA, as a
            # user must, unless the user typed them.
            if "checkpointing" not in typed:
                changes["checkpointing"] = False
            if "attention" not in typed:
                changes["attention"] = Attention.SDPA
        if (method not in _ADAPTER_BASED or method in _LITGPT_ADAPTERS) and "lora.modules_to_save" not in typed:
            # modules_to_save is a PEFT config key (__post_init__ refuses it elsewhere): a switch to full
            # fine-tuning, frozen layers or LitGPT's adapters drops it, as leaving PEFT does.
            lora = changes["lora"] = replace(lora, modules_to_save=ModulesToSave.NONE)
        if method is Method.TRAINABLE_TOKENS:
            # The method trains at least one row and has no modules_to_save (__post_init__ refuses either): a
            # switch keeps the rows set or starts from TRAINABLE_TOKENS_SWITCH_ROWS, and drops the copies.
            rows = lora.trainable_tokens or TRAINABLE_TOKENS_SWITCH_ROWS
            lora = changes["lora"] = replace(lora, trainable_tokens=rows, modules_to_save=ModulesToSave.NONE)
        elif method not in _LORA_SHAPED and "lora.trainable_tokens" not in typed:
            # trainable_token_indices is LoraConfig's alone: a switch to any other method drops the rows.
            lora = changes["lora"] = replace(lora, trainable_tokens=0)
        if method is Method.IA3 and "lora.ia3_feedforward" not in typed:
            # IA3's feedforward modules are some of its targets (PEFT refuses others): switching
            # from LoRA on q_proj, k_proj keeps those targets and scales their outputs.
            changes["lora"] = replace(lora, ia3_feedforward=ia3_feedforward_within(lora))
        return replace(self, method=method, **changes)
