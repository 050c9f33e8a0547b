"""The vision tower and projector of an image-text checkpoint, counted from its ``config.json``.

vLLM, SGLang and transformers' ``AutoModelForImageTextToText`` load an image-text checkpoint whole
(Gemma3ForConditionalGeneration, Mistral3ForConditionalGeneration, Qwen2_5_VLForConditionalGeneration,
Qwen3VLForConditionalGeneration, Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration,
LlavaForConditionalGeneration, LlavaNextForConditionalGeneration,
LlavaOnevisionForConditionalGeneration), and fine-tuning one keeps the frozen tower
on the GPU: its parameters are weights the plan holds beside the language model's. Every count follows the
module's ``__init__`` in huggingface/transformers 5.25.0 (``models/<family>/modeling_<family>.py``) and was
checked against the library's own count of a model built on the meta device (tests/core/test_vision.py).

Only values are read. A ``vision_config`` of a family not below is refused with the reason: the engines
would load a tower this module cannot count.

What the plans do with it (core.training.storage.vision_weight_term, core.serving.engines.tower_bytes):
- Training holds it frozen in the base dtype: no gradient, no optimizer state. The plans' workloads are text,
  so the tower never runs and holds no activations.
- LoRA targets by name: PEFT matches ``target_modules`` against every module name's suffix (huggingface/peft
  0.18.0 ``tuners/tuners_utils.py`` check_target_module_exists) and its ``all-linear`` shorthand takes every
  nn.Linear but the output head (``_maybe_include_all_linear_layers``, no vision exclusion), so ``q_proj`` /
  ``v_proj`` also wrap SigLIP's, CLIP's and Pixtral's attention and ``all-linear`` every tower Linear. Those
  adapters are not counted: with a text workload the tower never runs, its adapters get no gradient and
  torch's optimizers keep no state for a parameter whose grad is None, leaving their float32 weights alone
  (Gemma 3's SigLIP, all-linear at r = 16: 27 × 16 × (4 · 2,304 + 2 · 5,456) = 8.7 M, 35 MB against
  the default LoRA plan's 16.8 GB peak on gemma-3-4b, about 0.2 %).
- QLoRA quantises its nn.Linear weights (``linear_weights``), as it does the language model's.
- Serving: vLLM, SGLang and transformers load it; llama.cpp keeps it in a separate mmproj GGUF that loads
  only when given, so llama.cpp plans leave it out. vLLM's text-only mode (every modality's
  ``--limit-mm-per-prompt`` 0) skips it from the releases core.serving.vllm_versions names; its encoder
  profile run (:class:`EncoderGeometry`, core.serving.text_only) counts against the KV pool otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.errors import PlanError
from core.model import is_int

__all__ = ["TEXT_MODEL_TYPES", "VISION_FAMILIES", "EncoderGeometry", "VisionTower", "vision_tower"]

# The language model of two image-text families is a text family the planner reads under another name:
# Qwen2_5_VLTextModel's decoder layer is Qwen2's (q/k/v with a bias, o_proj without, a gated MLP without
# biases, two RMSNorms; transformers 5.25.0 models/qwen2_5_vl/modeling_qwen2_5_vl.py Qwen2_5_VLAttention,
# Qwen2MLP, Qwen2_5_VLDecoderLayer) and Qwen3VLTextModel's is Qwen3's (attention_bias from the config,
# q_norm / k_norm on the head width; models/qwen3_vl/modeling_qwen3_vl.py Qwen3VLTextAttention). Only the
# rotary embedding differs (multimodal 3-D RoPE), which holds no parameters.
TEXT_MODEL_TYPES: Final = {"qwen2_5_vl_text": "qwen2", "qwen3_vl_text": "qwen3"}


@dataclass(frozen=True)
class VisionTower:
    """What the checkpoint loads beside its language model."""

    kind: str  # the tower's family, as the breakdown names it
    params: int  # tower + projector, every parameter
    linear_weights: int  # the nn.Linear weight matrices among them: what bitsandbytes quantises
    family: str = ""  # the wrapper's model_type (VISION_FAMILIES): which engine release skips the tower
    profile: EncoderGeometry | None = None  # one image of vLLM's encoder profile; None: not modelled
    # vision_config's num_hidden_layers and hidden_size as transformers' config object answers them (what SGLang's
    # adjust_mem_fraction_for_vlm reads: core.serving.sglang_versions); 0: the object has no such attribute.
    config_layers: int = 0
    config_hidden: int = 0


@dataclass(frozen=True)
class EncoderGeometry:
    """One dummy image of vLLM's encoder profile run, for towers that take every image at one size (Gemma 3's
    SigLIP at ``image_size``, LLaVA 1.5's CLIP / SigLIP); the dynamic-resolution towers (Pixtral, the Qwen
    towers, LLaVA-NeXT / OneVision's tiles) size theirs from the processor's config, which is not read."""

    embeddings: int  # embeddings one image gives the language model (vLLM's tokens per item)
    patches: int  # positions one image runs through the tower
    pixels: int  # pixel values of one image (channels × side²)
    width: int  # the tower's hidden size
    inner: int  # its MLP width


class _Vision:
    """Typed reads of ``vision_config`` (``where`` names the key in every refusal)."""

    def __init__(self, config: Mapping[str, Any], where: str) -> None:
        self.config, self.where = config, where

    def whole(self, key: str, default: int) -> int:
        value = self.config.get(key)
        if value is None:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not is_int(value) or not 0 < value <= 10_000_000:
            raise PlanError(f"{self.where}.{key}", value, "a positive integer")
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise PlanError(f"{self.where}.{key}", value, "true or false")
        return value

    def count(self, key: str, default: int) -> int:
        """A layer index or a list of them (``vision_feature_layer``, ``deepstack_visual_indexes``): how many."""
        value = self.config.get(key, default)
        if isinstance(value, list):
            return len(value)
        if is_int(value):
            return 1
        raise PlanError(f"{self.where}.{key}", value, "a layer index or a list of them")


def _encoder_layers(d: int, inner: int, layers: int) -> tuple[int, int]:
    """SigLIP / CLIP encoder layers: q, k, v, out_proj with biases, two LayerNorms, fc1 and fc2 with biases
    (SiglipEncoderLayer, CLIPEncoderLayer). Returns (parameters, Linear weight elements)."""
    linear = 4 * d * d + 2 * d * inner
    return layers * (linear + 4 * d + 4 * d + inner + d), layers * linear


def _siglip(v: _Vision) -> tuple[int, int]:
    """SiglipVisionTransformer (SiglipVisionConfig's defaults): patch Conv2d with a bias, a learned position
    per patch, the encoder, post_layernorm and, with ``vision_use_head``, the attention-pooling head."""
    d, inner, c, p = (
        v.whole("hidden_size", 768),
        v.whole("intermediate_size", 3072),
        v.whole("num_channels", 3),
        v.whole("patch_size", 16),
    )
    patches = (v.whole("image_size", 224) // p) ** 2
    params, linear = _encoder_layers(d, inner, v.whole("num_hidden_layers", 12))
    params += c * p * p * d + d + patches * d + 2 * d
    if v.flag("vision_use_head", True):
        # SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention (in_proj 3d² + 3d, out_proj, a
        # Linear), a LayerNorm and SiglipMLP.
        params += d + 3 * d * d + 3 * d + d * d + d + 2 * d + 2 * d * inner + inner + d
        linear += d * d + 2 * d * inner
    return params, linear


def _clip(v: _Vision) -> tuple[int, int]:
    """CLIPVisionTransformer (CLIPVisionConfig's defaults): class embedding, patch Conv2d without a bias,
    patches + 1 learned positions, pre_layrnorm, every encoder layer and post_layernorm (HF builds them all)."""
    d, inner, c, p = (
        v.whole("hidden_size", 768),
        v.whole("intermediate_size", 3072),
        v.whole("num_channels", 3),
        v.whole("patch_size", 32),
    )
    patches = (v.whole("image_size", 224) // p) ** 2
    params, linear = _encoder_layers(d, inner, v.whole("num_hidden_layers", 12))
    return params + d + c * p * p * d + (patches + 1) * d + 4 * d, linear


def _pixtral(v: _Vision) -> tuple[int, int]:
    """PixtralVisionModel (PixtralVisionConfig's defaults): patch Conv2d without a bias, ln_pre, and layers of
    two RMSNorms, q/k/v/o without biases and a gated MLP without biases."""
    d, inner, c, p = (
        v.whole("hidden_size", 1024),
        v.whole("intermediate_size", 4096),
        v.whole("num_channels", 3),
        v.whole("patch_size", 16),
    )
    layers = v.whole("num_hidden_layers", 24)
    linear = layers * (4 * d * d + 3 * d * inner)
    return c * p * p * d + d + linear + layers * 2 * d, linear


def _qwen2_5_vl(v: _Vision) -> tuple[int, int]:
    """Qwen2_5_VisionTransformerPretrainedModel: Conv3d patches without a bias, blocks of two RMSNorms, qkv
    and proj with biases and a gated MLP with biases, then the patch merger (ln_q, two Linears with biases)."""
    d, inner, depth = v.whole("hidden_size", 1280), v.whole("intermediate_size", 3420), v.whole("depth", 32)
    c, t, p = v.whole("in_channels", 3), v.whole("temporal_patch_size", 2), v.whole("patch_size", 14)
    merged, out = d * v.whole("spatial_merge_size", 2) ** 2, v.whole("out_hidden_size", 3584)
    block_linear = 4 * d * d + 3 * d * inner
    merger_linear = merged * merged + merged * out
    params = c * t * p * p * d + depth * (block_linear + 2 * d + 3 * d + d + 2 * inner + d)
    params += d + merger_linear + merged + out
    return params, depth * block_linear + merger_linear


def _qwen3_vl(v: _Vision) -> tuple[int, int]:
    """Qwen3VLVisionModel: Conv3d patches with a bias, a learned position table, blocks of two LayerNorms,
    qkv and proj with biases and linear_fc1 / fc2 with biases, the merger (LayerNorm over d) and one
    DeepStack merger per ``deepstack_visual_indexes`` entry (its LayerNorm over the merged width)."""
    deepstack = v.count("deepstack_visual_indexes", 0) if "deepstack_visual_indexes" in v.config else 3
    return _qwen3_vl_tower(v, deepstack)


def _qwen3_5_vision(v: _Vision) -> tuple[int, int]:
    """Qwen3_5VisionModel (Qwen3.5 / Qwen3.6, dense and MoE): Qwen3VLVisionModel without its DeepStack mergers
    (transformers 5.25.0 models/qwen3_5/modular_qwen3_5.py ``del self.deepstack_merger_list``), whatever
    ``deepstack_visual_indexes`` a config carries (the released ones carry [])."""
    return _qwen3_vl_tower(v, 0)


def _qwen3_vl_tower(v: _Vision, deepstack: int) -> tuple[int, int]:
    d, inner, depth = v.whole("hidden_size", 1152), v.whole("intermediate_size", 4304), v.whole("depth", 27)
    c, t, p = v.whole("in_channels", 3), v.whole("temporal_patch_size", 2), v.whole("patch_size", 16)
    merged, out = d * v.whole("spatial_merge_size", 2) ** 2, v.whole("out_hidden_size", 3584)
    block_linear = 4 * d * d + 2 * d * inner
    merger_linear = merged * merged + merged * out
    merger = merger_linear + merged + out
    params = c * t * p * p * d + d + v.whole("num_position_embeddings", 2304) * d
    params += depth * (block_linear + 4 * d + 3 * d + d + inner + d)
    params += 2 * d + merger + deepstack * (2 * merged + merger)
    return params, depth * block_linear + (1 + deepstack) * merger_linear


def _llama4_vision(v: _Vision) -> tuple[int, int]:
    """Llama4VisionModel (Llama4VisionConfig's defaults): Llama4UnfoldConvolution's Linear (c·p² → d, no bias), a
    class embedding, (image_size // patch)² + 1 learned positions, layernorm_pre and layernorm_post, encoder layers of
    q/k/v/o with biases, fc1 / fc2 with biases and two LayerNorms, and the vision_adapter's Llama4VisionMLP2 (fc1:
    intermediate_size → projector_input_dim, fc2: projector_output_dim², no biases)."""
    d, inner, c, p = (
        v.whole("hidden_size", 768),
        v.whole("intermediate_size", 5632),
        v.whole("num_channels", 3),
        v.whole("patch_size", 14),
    )
    positions = (v.whole("image_size", 448) // p) ** 2 + 1
    params, linear = _encoder_layers(d, inner, v.whole("num_hidden_layers", 34))
    adapter = inner * v.whole("projector_input_dim", 4096) + v.whole("projector_output_dim", 4096) ** 2
    patch = c * p * p * d
    return params + patch + d + positions * d + 4 * d + adapter, linear + patch + adapter


_TOWERS: Final[dict[str, tuple[str, Callable[[_Vision], tuple[int, int]]]]] = {
    "siglip_vision_model": ("SigLIP", _siglip),
    "clip_vision_model": ("CLIP", _clip),
    "pixtral": ("Pixtral", _pixtral),
    "qwen2_5_vl": ("Qwen2.5-VL vision", _qwen2_5_vl),
    "qwen3_vl": ("Qwen3-VL vision", _qwen3_vl),
    "qwen3_5_vision": ("Qwen3.5", _qwen3_5_vision),
    "llama4_vision_model": ("Llama 4", _llama4_vision),
}
# The wrapper's model_type, the towers it builds (vision_config.model_type; the first is the config
# class's default) and its projector.
VISION_FAMILIES: Final = {
    "gemma3": ("siglip_vision_model",),
    "mistral3": ("pixtral",),
    "llava": ("clip_vision_model", "siglip_vision_model"),
    "llava_next": ("clip_vision_model", "siglip_vision_model"),
    "llava_onevision": ("siglip_vision_model",),
    "qwen2_5_vl": ("qwen2_5_vl",),
    "qwen3_vl": ("qwen3_vl",),
    "qwen3_5": ("qwen3_5_vision",),
    "qwen3_5_moe": ("qwen3_5_vision",),
    "llama4": ("llama4_vision_model",),
}
# vision_config.model_type as other writers spell it: transformers 5.25.0's Qwen2_5_VLVisionConfig /
# Qwen3VLVisionConfig say qwen2_5_vl_vision / qwen3_vl_vision where older configs say the wrapper's name;
# "siglip" is SiglipConfig's own name, whose vision part is the same SiglipVisionTransformer. Qwen3.5's
# released configs name their tower "qwen3_5" / "qwen3_5_moe" (Qwen3_5Config.__post_init__ rewrites the first to
# qwen3_5_vision); Qwen3_5MoeVisionConfig writes qwen3_5_moe_vision, the same Qwen3_5VisionModel.
_VISION_TYPE_ALIASES: Final = {
    "qwen2_5_vl_vision": "qwen2_5_vl",
    "qwen3_vl_vision": "qwen3_vl",
    "qwen3_5": "qwen3_5_vision",
    "qwen3_5_moe": "qwen3_5_vision",
    "qwen3_5_moe_vision": "qwen3_5_vision",
    "siglip": "siglip_vision_model",
}


# The towers' widths when vision_config leaves them out (the config classes' defaults, as above).
_DEFAULT_WIDTH: Final = {
    "siglip_vision_model": 768,
    "clip_vision_model": 768,
    "pixtral": 1024,
    "llama4_vision_model": 768,
}
# num_hidden_layers / hidden_size of the vision config object when vision_config leaves them out, in the
# transformers releases SGLang 0.4.9 - 0.5.23 pin (4.53.0 - 5.19.0; the wheels' Requires-Dist): the classes'
# defaults (SiglipVisionConfig 12 / 768, CLIPVisionConfig 12 / 768, PixtralVisionConfig 24 / 1024,
# Llama4VisionConfig 34 / 768, Qwen2_5_VLVisionConfig hidden_size 3584, Qwen3VLVisionConfig 1152). The Qwen vision
# configs name their depth ``depth`` and answer no num_hidden_layers (0 here) up to 5.19.0: checked by building
# Qwen2_5_VLConfig / Qwen3VLConfig under transformers 5.19.0; 5.25.0's attribute_map maps it to depth, too late.
_CONFIG_LAYERS: Final = {"siglip_vision_model": 12, "clip_vision_model": 12, "pixtral": 24, "llama4_vision_model": 34}
_CONFIG_HIDDEN: Final = _DEFAULT_WIDTH | {"qwen2_5_vl": 3584, "qwen3_vl": 1152, "qwen3_5_vision": 1152}


def _projector(family: str, kind: str, v: _Vision, wrapper: _Vision, text_hidden: int) -> tuple[int, int]:
    """The wrapper's projector from the tower's width to the language model's (the Qwen mergers are counted
    with their towers)."""
    d = v.whole("hidden_size", _DEFAULT_WIDTH.get(kind, 1))
    if family == "llama4":
        # Llama4MultiModalProjector: linear_1, vision_output_dim → the text width, no bias.
        out = v.whole("vision_output_dim", 7680) * text_hidden
        return out, out
    if family == "gemma3":
        # Gemma3MultiModalProjector: mm_input_projection_weight (an nn.Parameter, not a Linear) and
        # mm_soft_emb_norm, an RMSNorm over the tower's width.
        return d * text_hidden + d, 0
    if family in ("mistral3", "llava", "llava_next", "llava_onevision"):
        # Mistral3MultiModalProjector: its RMSNorm and Mistral3PatchMerger.merging_layer (d·s² → d, no bias),
        # then linear_1 (d × feature layers → text) and linear_2, biased by multimodal_projector_bias
        # (Mistral3Config False, the LLaVA configs True); LlavaMultiModalProjector has linear_1 and linear_2
        # only, and LLaVA-NeXT / OneVision add image_newline, an nn.Parameter of the text width.
        into = d * wrapper.count("vision_feature_layer", -1)
        linear = into * text_hidden + text_hidden * text_hidden
        bias = 2 * text_hidden if wrapper.flag("multimodal_projector_bias", family != "mistral3") else 0
        if family != "mistral3":
            newline = 0 if family == "llava" else text_hidden
            return linear + bias + newline, linear
        merge = d * wrapper.whole("spatial_merge_size", 2) ** 2 * d
        return d + merge + linear + bias, merge + linear
    return 0, 0


def vision_tower(config: Mapping[str, Any], text_hidden: int) -> VisionTower | None:
    """The tower and projector of the wrapper ``config`` whose language model is ``text_hidden`` wide; None
    without a ``vision_config``. Refuses (:class:`PlanError`) a tower or wrapper it cannot count."""
    raw = config.get("vision_config")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise PlanError("config.vision_config", type(raw).__name__, "a JSON object")
    family = config.get("model_type")
    where = "config.vision_config"
    if not isinstance(family, str) or family not in VISION_FAMILIES:
        # The catalogue keeps an entry refused as an "unknown architecture" aside (core.catalogue).
        allowed = "an image-text family whose vision tower the planner counts: " + ", ".join(VISION_FAMILIES)
        allowed += " (the engines load the tower, so it is refused, not dropped)"
        raise PlanError("config.model_type", family, allowed, "unknown architecture")
    kind = raw.get("model_type", VISION_FAMILIES[family][0])
    kind = _VISION_TYPE_ALIASES.get(kind, kind) if isinstance(kind, str) else kind
    if kind not in VISION_FAMILIES[family]:
        towers = ", ".join(VISION_FAMILIES[family])
        allowed = f"{towers} for {family} (a tower the planner counts; the engines load it)"
        raise PlanError(f"{where}.model_type", raw.get("model_type"), allowed)
    v = _Vision(raw, where)
    name, count = _TOWERS[kind]
    params, linear = count(v)
    wrapper = _Vision(config, "config")
    extra, extra_linear = _projector(family, kind, v, wrapper, text_hidden)
    profile = _geometry(family, kind, v, wrapper)
    layers = v.whole("num_hidden_layers", _CONFIG_LAYERS.get(kind, 0))
    hidden = v.whole("hidden_size", _CONFIG_HIDDEN[kind])
    return VisionTower(name, params + extra, linear + extra_linear, family, profile, layers, hidden)


def _geometry(family: str, kind: str, v: _Vision, wrapper: _Vision) -> EncoderGeometry | None:
    """One dummy image of vLLM's encoder profile where every image has the tower's own size: Gemma 3 without
    pan-and-scan (vLLM 0.19.0 gemma3_mm.py get_num_image_tokens: (crops + 1) × image_seq_length, crops 0
    unless do_pan_and_scan, which is off by default; image_seq_length is the config's mm_tokens_per_image) and
    LLaVA 1.5 (llava.py get_num_image_tokens: the tower's patches, (image_size // patch_size)², the CLIP class
    position dropped by vision_feature_select_strategy "default")."""
    if family not in ("gemma3", "llava") or kind not in ("siglip_vision_model", "clip_vision_model"):
        return None
    clip = kind == "clip_vision_model"
    side, patch = v.whole("image_size", 224), v.whole("patch_size", 32 if clip else 16)
    patches = (side // patch) ** 2
    embeddings = wrapper.whole("mm_tokens_per_image", 256) if family == "gemma3" else patches
    width = v.whole("hidden_size", _DEFAULT_WIDTH[kind])
    inner = v.whole("intermediate_size", 3072)
    return EncoderGeometry(embeddings, patches + int(clip), v.whole("num_channels", 3) * side * side, width, inner)
