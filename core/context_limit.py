"""A serving context past the model's own limit: what each engine does with it, in its own words.

The limit is ``max_position_embeddings`` as the model's config.json states it (a config's ``rope_scaling`` already
defines it there: Llama 3.1's 131,072). One home (:func:`past_limit_words`): the banner, the command line and the
reports read it through :meth:`core.serving.inference.InferenceEstimate.limits_sentence`.

- vLLM refuses to start unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (vllm 0.19.0 wheel, vllm/config/model.py
  ``_get_and_verify_max_len``: "User-specified max_model_len (...) is greater than the derived max_model_len (...)"
  raised as a ValueError; with the variable the same words are a warning; vllm/envs.py reads it as "1" or "true").
- SGLang likewise unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` (sglang 0.5.23 wheel,
  sglang/srt/configs/model_config.py ``ModelConfig._derive_context_length``).
- llama.cpp starts and warns (src/llama-context.cpp ``llama_context``: "n_ctx_seq (%u) > n_ctx_train (%u) --
  possible training context overflow"; n_ctx_per_seq in older builds).
- transformers' generate runs RoPE at any position and says nothing; Ollama sizes its own context: "" for both.

The plan's ``inference.long_context`` is the variable set (a pasted command's ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` or
``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`` sets it: core.files.launch.serve_command._environment).
"""

from __future__ import annotations

from typing import Final

from core.plan import ENGINE_LABELS, Engine, OllamaVersion, Plan
from core.start_refusal import RefusalKind, StartRefusal

VLLM_LONG_ENV: Final = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
SGLANG_LONG_ENV: Final = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"  # read by core.files.launch (export, paste)
# vllm 0.19.0 vllm/config/model.py _get_and_verify_max_len, the warning raised with (or logged beside) the refusal
VLLM_CAUTION: Final = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position encoding "
    "(RoPE), positions exceeding derived_max_model_len lead to nan."
)


def past_limit(plan: Plan) -> bool:
    """The plan's serving context is longer than the model's ``max_position_embeddings``."""
    return plan.inference.context > plan.model.max_position_embeddings


def would_not_start(plan: Plan) -> bool:
    """The engine refuses a context past the model's limit: vLLM or SGLang without their variable set."""
    inf = plan.inference
    return past_limit(plan) and inf.engine in (Engine.VLLM, Engine.SGLANG) and not inf.long_context


def context_start_refusal(plan: Plan) -> StartRefusal | None:
    """The engine's refusal of a context past the model's limit (:func:`would_not_start`), classified
    (:class:`core.start_refusal.StartRefusal`, kind CONTEXT) with its words (:func:`past_limit_words`); None where it
    starts. The one place this refusal is decided: the estimate carries it, first of the engine's checks."""
    if not would_not_start(plan):
        return None
    context, limit = plan.inference.context, plan.model.max_position_embeddings
    cause = f"the context, {context:,} tokens, passes the model's limit of {limit:,}"
    return StartRefusal(RefusalKind.CONTEXT, past_limit_words(plan), cause)


def refused_context_words(plan: Plan) -> str:
    """How far a plan goes where its engine refuses the context at start-up (:func:`would_not_start`), for the
    Diagnosis's limits: "vLLM refuses a context of 8,192 tokens at start-up, past the model's 4,096"; "" where it
    starts (h92verd: the limits said "14 requests of 8,192 tokens" of a plan vLLM would not start). The variable
    that starts it is said beside, in the engine's words (:func:`past_limit_words`): too long a name for the limits."""
    if not would_not_start(plan):
        return ""
    inf = plan.inference
    return (
        f"{ENGINE_LABELS[inf.engine]} refuses a context of {inf.context:,} tokens at start-up, past the model's "
        f"{plan.model.max_position_embeddings:,}"
    )


def starting_context(plan: Plan, longest: int) -> int:
    """The longest context the plan's engine starts with, of ``longest`` (what the memory holds at the plan's
    concurrency): at most the model's limit where the engine refuses a longer one (:func:`would_not_start`)."""
    return min(longest, plan.model.max_position_embeddings) if would_not_start(plan) else longest


def past_limit_words(plan: Plan) -> str:
    """What the plan's engine does with a context past the model's limit, in its words ("" where the context is
    within it, or the engine says nothing)."""
    if not past_limit(plan):
        return ""
    inf, limit = plan.inference, plan.model.max_position_embeddings
    if inf.engine is Engine.VLLM:
        said = (
            f"User-specified max_model_len ({inf.context}) is greater than the derived max_model_len "
            f"(max_position_embeddings={limit} or model_max_length=None in model's config.json)."
        )
        if inf.long_context:
            return f'vLLM starts with {VLLM_LONG_ENV}=1 and warns: "{said} {VLLM_CAUTION}"'
        return (
            f'vLLM would not start: "{said}" {VLLM_LONG_ENV}=1 starts it, with vLLM\'s caution that past {limit:,} '
            "positions a RoPE model gives NaN"
        )
    if inf.engine is Engine.SGLANG:
        said = (
            f"User-specified context_length ({inf.context}) is greater than the derived context_length ({limit}). "
            "This may lead to incorrect model outputs or CUDA errors."
        )
        if inf.long_context:
            return f'SGLang starts with {SGLANG_LONG_ENV}=1 and warns: "Warning: {said}"'
        return f'SGLang would not start: "Warning: {said}" {SGLANG_LONG_ENV}=1 starts it'
    if inf.engine is Engine.LLAMACPP and inf.ollama_version is OllamaVersion.NONE:
        return (
            f'llama.cpp starts and warns: "n_ctx_seq ({inf.context}) > n_ctx_train ({limit}) -- possible training '
            'context overflow"'
        )
    return ""
