"""Image-text checkpoints at serving: text-only mode and vLLM's encoder profile run.

Text-only mode (``inference.text_only``): vLLM builds no vision tower when every modality the tower serves
has ``--limit-mm-per-prompt`` 0, from the release lines core.inputs names
(``TEXT_ONLY_FROM``). The other engines cannot skip it, so Plan validation refuses a text-only plan on
them with the reason (core.plan ``_text_only_refusal``, one of :func:`core.plan.serving_refusal`'s answers):

* SGLang: the ``--language-model-only`` of 0.5.18 - 0.5.23 refuses every architecture outside its allowlist (Muse
  Glimmer, Cosmos 3, DeepSeek-V4: core.plan ``SGLANG_TEXT_ONLY_PR``); sgl-project/sglang PR #28497, which would take
  the Qwen-VL families, is not merged. Gemma3ForConditionalGeneration builds its SigLIP tower whatever
  ``--enable-multimodal`` says (models/gemma3_mm.py ``__init__``: HF's AutoModel.from_config in 0.4.5 / 0.4.6,
  SiglipVisionModel from 0.4.7, read to 0.5.23), as do Qwen2_5_VLForConditionalGeneration (``self.visual``) and the
  LLaVA / Mistral 3 classes, which are multimodal at every default anyway. Llama 4, planned on vLLM only, is the
  exception (models/mllama4.py): 0.4.5's Llama4ForConditionalGeneration builds no tower and skips its weights,
  0.4.6 - 0.4.9 build it always, 0.4.10 - 0.5.23 only with ``--enable-multimodal`` (``has_vision =
  has_vision_weights and enable_multimodal``, the server argument's default None).
* transformers 5.25.0: ``AutoModelForCausalLM.from_config`` on a Gemma 3 config builds
  Gemma3ForConditionalGeneration, tower and all (22,202,880 of a 23,641,344-parameter two-layer test model
  on the meta device are the tower's and projector's), and refuses Qwen2.5-VL / Qwen3-VL configs ("Unrecognized
  configuration class ... for this kind of AutoModel"); checked with /tmp/torchenv (transformers 5.25.0,
  torch 2.13.0+cpu).

vLLM's encoder profile (V1, 0.10 - 0.19; read in the 0.10.1 (aab549870), 0.15.0 (f17644344) and 0.19.0
(2a69949bd) wheels, ``vllm/v1/worker/gpu_model_runner.py`` ``profile_run``): before the text forward of the
memory profile, an image-text model runs its tower on ``max_items_per_batch`` dummy images of the most
features (``_get_mm_dummy_batch``) and keeps their embeddings in ``encoder_cache`` through the text forward;
the batch of pixel values (``batched_dummy_mm_inputs``, a local of profile_run) is still referenced then too.
``MultiModalBudget`` (0.19.0 ``vllm/multimodal/encoder_budget.py``; the same ``_get_max_items`` in 0.10.1's
``vllm/v1/worker/utils.py``, whose default limit is 999 under V1 too) sizes the batch: the encoder budget is
``max(max_num_batched_tokens, tokens per item)`` (``compute_mm_encoder_budget``, v1/core/
encoder_cache_manager.py: encoder_cache_size and max_num_encoder_input_tokens default to max_num_batched_tokens,
config/scheduler.py), items = ``max(1, min(budget // tokens per item, max_num_seqs × max(1, min(999,
max_model_len // tokens per item))))`` (``_get_max_items``; 999 is get_limit_per_prompt's default). The pixel
values are in the model's dtype (multimodal/processing/context.py ``_postprocess_output``). gemma-3-4b-it's
0.19.0 start-up on an H100 logs "Encoder cache will be initialized with a budget of 8192 tokens, and profiled
with 32 image items" (llm-d-incubation/llm-d-planner@d3121e059da8 accuracy/results/v0.19.0/logs/
google-gemma-3-4b-it--h100-80gb--tp1pp1dp1--8192.log): 8192 // 256 = 32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.format import count
from core.inputs import sglang_multimodal_decides, skips_tower
from core.model import ModelSpec
from core.plan import Engine, Inference, VllmVersion
from core.serving.sglang_versions import is_multimodal
from core.serving.vllm_versions import at_least

# get_limit_per_prompt's default for a modality left unset (vllm/config/multimodal.py, 0.19.0).
VLLM_DEFAULT_MM_LIMIT: Final = 999
# The release lines whose profile_run was read (above); the V2 model runner of later lines is not.
ENCODER_PROFILE_FROM: Final = VllmVersion.V0_10
ENCODER_PROFILE_LAST: Final = VllmVersion.V0_19


def skips_vision_tower(model: ModelSpec, inf: Inference) -> bool:
    """Whether the plan serves ``model`` without its vision tower: text only, on a vLLM release that skips the
    family's tower. Plan validation has refused a text-only plan on any other engine or release (llama.cpp aside,
    which loads a tower only from an mmproj file its plans leave out)."""
    if not inf.text_only or not model.vision_params or inf.engine is not Engine.VLLM:
        return False
    return bool(model.vision_family) and skips_tower(inf.vllm_version, model.vision_family)


def sglang_text_model(model: ModelSpec, inf: Inference) -> bool:
    """Whether SGLang serves the image-text checkpoint as a text model although it builds (and the weights count)
    the vision tower: Gemma 3 (Llama 4 is planned on vLLM only) from 0.4.6, whose ModelConfig leaves the families of
    ``mm_disabled_models`` text-only unless ``--enable-multimodal`` is given
    (core.serving.sglang_versions.is_multimodal, the rule the pool follows). Requests with images are not taken."""
    return sglang_multimodal_decides(model, inf) and not is_multimodal(
        inf.sglang_version, model, inf.sglang_enable_multimodal
    )


def tower_serving_words(model: ModelSpec, inf: Inference) -> str:
    """How a serving plan holds an image-text checkpoint's vision tower, and where the engine decides it apart whether
    images are taken, in the words the window's model summary, the command line and the report all show
    (:func:`tower_line`; the serving figures count the tower by the same rule: :func:`skips_vision_tower`,
    core.serving.engines.tower_bytes). Empty for a text-only model."""
    if not model.vision_params:
        return ""
    if inf.engine is Engine.LLAMACPP:
        return "not loaded: llama.cpp reads a tower only from a separate mmproj file"
    if skips_vision_tower(model, inf):
        return "not loaded: text only"
    if sglang_text_model(model, inf):
        return "loaded, yet SGLang takes no images without --enable-multimodal"
    if sglang_multimodal_decides(model, inf):
        return "loaded, images taken (--enable-multimodal)"
    return "loaded"


def tower_line(model: ModelSpec, inf: Inference) -> str:
    """The serving plan's vision tower in one line, as the command line and the report write it: its kind, its
    parameters and :func:`tower_serving_words` (the window's model summary gives the same words after its count).
    Empty for a text-only model."""
    words = tower_serving_words(model, inf)
    if not words:
        return ""
    return f"{model.vision_kind or 'vision'} vision tower and projector ({count(model.vision_params)}): {words}"


@dataclass(frozen=True)
class EncoderProfile:
    """vLLM's encoder profile on the rank that decides (bytes)."""

    items: int  # dummy images in the batch
    kept: float  # held through the text forward: the pixel values and the images' embeddings
    peak: float  # the tower's own peak: pixel values + the widest moment of one encoder layer


def encoder_profile(model: ModelSpec, inf: Inference, batched: int, seqs: int, element: float) -> EncoderProfile:
    """The encoder profile run of an image-text plan served by vLLM 0.10 - 0.19 with images allowed; zero
    where there is none (text only, no tower, a tower whose dummy image is not modelled, another release).
    The tower's peak: a SigLIP / CLIP layer's MLP holds the residual and the normed input (2 × width) and
    fc1's output with its activation (2 × MLP width) for every position of every image, without
    attention scores (MMEncoderAttention runs FlashAttention; the 0.19.0 log: "Using
    AttentionBackendEnum.FLASH_ATTN for MMEncoderAttention")."""
    per_item = model.vision_embeddings
    none = EncoderProfile(0, 0.0, 0.0)
    if inf.engine is not Engine.VLLM or not per_item or skips_vision_tower(model, inf):
        return none
    version = inf.vllm_version
    if not (at_least(version, ENCODER_PROFILE_FROM) and at_least(ENCODER_PROFILE_LAST, version)):
        return none
    budget = max(batched, per_item)
    per_prompt = max(1, min(VLLM_DEFAULT_MM_LIMIT, inf.context // per_item))
    items = max(1, min(budget // per_item, seqs * per_prompt))
    pixels = items * model.vision_pixels * element
    embeddings = items * per_item * model.hidden_size * element
    layer = items * model.vision_patches * (2 * model.vision_width + 2 * model.vision_inner) * element
    return EncoderProfile(items, pixels + embeddings, pixels + layer)
