"""The ``vllm serve`` command for the plan's serving settings.

Flags read from vLLM 0.19.0 (the release :mod:`core.serving.vllm_rules` follows; ``vllm/engine/arg_utils.py``
builds them from ``vllm/config/``): ``--dtype`` (bfloat16 | float16 | float32), ``--quantization``
(fp8: weights quantised in flight; awq / gptq, and gptq_marlin for an 8-bit GPTQ plan: the checkpoint
must be one; bitsandbytes: 4-bit in flight), ``--kv-cache-dtype`` (auto: the model's dtype; fp8;
int8_per_token_head from 0.20 and int4_per_token_head from 0.25, core.inputs.VLLM_KV_NAMES), ``--max-model-len``,
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size`` (replicas),
``--gpu-memory-utilization`` (always written: its default moved from 0.9 to 0.92 in later
releases), ``--max-num-seqs`` and ``--max-num-batched-tokens`` (written when the plan sets them), and for a
text-only plan ``--limit-mm-per-prompt`` with 0 for every modality the tower serves (JSON, e.g.
``'{"image":0,"video":0}'`` for Qwen-VL; core.serving.vllm_versions.limit_mm_json), and last, only where the plan
leaves the engine's default, ``--enforce-eager`` (CUDA graphs off) and ``--enable-prefix-caching`` /
``--no-enable-prefix-caching``.
Each is checked against the plan's release line (``inference.vllm_version``; core.files.launch.engine_flags
``vllm_release_flags``, read from each line's wheel): one the line's parser has not is left out and said among what
the export cannot say (``--data-parallel-size`` before 0.8: one server per replica), never written for the server to
stop on ("unrecognized arguments"). So is a value the line does not take (``vllm_release_values``: ``--quantization
mxfp4`` before 0.10, ``bitsandbytes`` after 0.27, whose QUANTIZATION_METHODS dropped it).
How many requests arrive at once, and how long each answer may be, are the clients'.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from core.context_limit import VLLM_LONG_ENV, past_limit
from core.dtypes import KvDtype, WeightFormat
from core.files.launch.common import (
    Draft,
    Export,
    Target,
    fraction_text,
    gptq_int8_header,
    header,
    model_reference,
)
from core.files.launch.engine_flags import (
    Choices,
    first_release_with,
    refused_options,
    releases_taking,
    vllm_release_flags,
    vllm_release_values,
)
from core.inputs import VLLM_KV_NAMES, CompileCache
from core.plan import ENGINE_LABELS, Engine, Plan, PrefixCaching, VllmVersion
from core.serving.vllm_versions import limit_mm_json

# Switches with no value, written after every flag with one (read_vllm pairs the others).
ENFORCE_EAGER: Final = "--enforce-eager"
PREFIX_CACHING_FLAGS: Final = {
    PrefixCaching.ON: "--enable-prefix-caching",
    PrefixCaching.OFF: "--no-enable-prefix-caching",
}
# vLLM V1's compile cache turned off: every release 0.8.5 - 0.34.0 reads it as bool(int(value)) (vllm/envs.py), and
# with it set never loads a compiled artefact (0.33.0 vllm/compilation/decorators.py: no _try_load_aot_compiled_fn;
# compiler_interface.py: Inductor's cache off), so every start compiles cold (core.inputs.CompileCache.COLD).
DISABLE_COMPILE_CACHE: Final = "VLLM_DISABLE_COMPILE_CACHE"
DTYPES: Final = {WeightFormat.BF16: "bfloat16", WeightFormat.FP16: "float16", WeightFormat.FP32: "float32"}
KV_DTYPES: Final = {KvDtype.BF16: "bfloat16", KvDtype.FP16: "float16", KvDtype.FP32: "float32"}
QUANTIZATION: Final = {
    WeightFormat.FP8: "fp8",
    WeightFormat.AWQ_INT4: "awq",
    WeightFormat.GPTQ_INT4: "gptq",
    # Marlin over a GPTQ checkpoint, 4 or 8 bits as its config says (GPTQMarlinConfig.get_name); the only name
    # that tells an 8-bit plan apart when read back
    WeightFormat.GPTQ_INT8: "gptq_marlin",
    WeightFormat.NF4: "bitsandbytes",
    WeightFormat.MXFP4: "mxfp4",  # vllm/model_executor/layers/quantization/mxfp4.py, get_name()
}
# vLLM's --kv-cache-dtype names read as the plan's fp8: one byte an element with per-tensor scales
# (vllm/v1/kv_cache_interface.py get_kv_quant_mode: KVQuantMode.FP8_PER_TENSOR for any other "fp8..." name, 0.20.2 and
# 0.34.0; STR_DTYPE_TO_TORCH_DTYPE torch.uint8). fp8_per_token_head is its own format (core.inputs.VLLM_KV_NAMES).
PLAIN_FP8_KV: Final = frozenset(("fp8", "fp8_e4m3", "fp8_e5m2"))
# The other fp8 names of the choices (resources/engine_flags/vllm_serve.txt), read in the 0.20.2 and 0.34.0 wheels:
# neither is the plan's fp8, so the reader says so rather than planning a per-tensor fp8 cache.
KV_NOT_PLANNED: Final = {
    # vllm/v1/attention/backends/mla/flashmla_sparse.py (FLASHMLA_SPARSE, sparse_swa): the only backends naming it
    "fp8_ds_mla": "DeepSeek V3.2's sparse-MLA layout (fp8 latent, float32 tile scales and a 16-bit RoPE part per "
    "token), kept only by vLLM's sparse-MLA backends: no model the plan serves has sparse attention",
    # vllm/config/cache.py and vllm/utils/torch_utils.py (torch.float8_e4m3fn) only: no CUDA or ROCm backend lists it
    "fp8_inc": "Intel Neural Compressor's fp8 for Gaudi (HPU) plugins: no CUDA or ROCm attention backend keeps it",
}
# The export's first line names the release line whose flags it wrote; the pasted-command reader takes it back as the
# plan's line (core.files.launch.serve_command._version_fields), as it does SGLang's PIP_MARK line.
FLAGS_MARK: Final = "vllm serve written by VRAM Planner (flags of vLLM "
CLIENT_WHY: Final = "the clients' (requests at once, max_tokens per answer), not the server's"
# The plan field each written option carries, named where a release's parser has not the option.
FLAG_FIELDS: Final = {
    "--dtype": "inference.weight_dtype",
    "--quantization": "inference.weight_dtype",
    "--kv-cache-dtype": "inference.kv_dtype",
    "--max-model-len": "inference.context",
    "--tensor-parallel-size": "inference.tensor_parallel",
    "--pipeline-parallel-size": "inference.pipeline_parallel",
    "--data-parallel-size": "inference.replicas",
    "--gpu-memory-utilization": "inference.gpu_memory_utilization",
    "--max-num-seqs": "inference.max_num_seqs",
    "--max-num-batched-tokens": "inference.max_num_batched_tokens",
    "--limit-mm-per-prompt": "inference.text_only",
    ENFORCE_EAGER: "inference.cuda_graphs",
    **{flag: "inference.prefix_caching" for flag in PREFIX_CACHING_FLAGS.values()},
}


def compute_dtype(draft: Draft, int8_why: str) -> str:
    """``--dtype`` of vLLM and SGLang: the weights' 16- or 32-bit type; quantised weights compute
    (and keep the KV cache) in the cache's. Neither quantises to LLM.int8 in flight (``int8_why``)."""
    inf = draft.plan.inference
    if inf.weight_dtype in DTYPES:
        return DTYPES[inf.weight_dtype]
    if inf.weight_dtype is WeightFormat.INT8:
        draft.cannot("inference.weight_dtype", int8_why)
    return KV_DTYPES.get(inf.kv_dtype, "bfloat16")


def _weights(draft: Draft) -> list[str]:
    inf = draft.plan.inference
    fmt, kv = inf.weight_dtype, inf.kv_dtype
    dtype = compute_dtype(draft, "vLLM quantises in flight to fp8 or 4-bit bitsandbytes, not LLM.int8")
    flags = ["--dtype", dtype]
    if fmt in QUANTIZATION:
        flags += ["--quantization", QUANTIZATION[fmt]]
    if kv is KvDtype.FP8:
        flags += ["--kv-cache-dtype", "fp8"]
    elif kv in VLLM_KV_NAMES:  # the release takes it (Plan validation: core.plan._kv_format_refusal)
        flags += ["--kv-cache-dtype", VLLM_KV_NAMES[kv]]
    elif kv not in KV_DTYPES:
        draft.cannot("inference.kv_dtype", "vLLM's quantised KV cache is fp8")
    elif KV_DTYPES[kv] != dtype:
        draft.cannot("inference.kv_dtype", f"vLLM keeps the KV cache in the model's dtype ({dtype}) or fp8")
    return flags


def export_vllm(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    inf = plan.inference
    argv = ["vllm", "serve", model_reference(draft, model_ref), *_weights(draft)]
    argv += ["--max-model-len", str(inf.context), "--tensor-parallel-size", str(inf.tensor_parallel)]
    if inf.pipeline_parallel > 1:
        argv += ["--pipeline-parallel-size", str(inf.pipeline_parallel)]
    if inf.replicas > 1:
        argv += ["--data-parallel-size", str(inf.replicas)]
    if inf.gpu_memory_utilization:  # 0: the release's own default (0.9; 0.92 from 0.21), so no flag
        argv += ["--gpu-memory-utilization", fraction_text(inf.gpu_memory_utilization)]
    if inf.max_num_seqs:
        argv += ["--max-num-seqs", str(inf.max_num_seqs)]
    if inf.max_num_batched_tokens:
        argv += ["--max-num-batched-tokens", str(inf.max_num_batched_tokens)]
    if inf.text_only and plan.model.vision_params:
        argv += ["--limit-mm-per-prompt", limit_mm_json(plan.model.vision_family)]
    if not inf.cuda_graphs:
        argv.append(ENFORCE_EAGER)
    if inf.prefix_caching in PREFIX_CACHING_FLAGS:
        argv.append(PREFIX_CACHING_FLAGS[inf.prefix_caching])
    line = inf.vllm_version
    replicas = f"run {inf.replicas} servers, one per replica, behind a load balancer"
    argv[3:], left_out = leave_out_refused(
        draft,
        argv[3:],
        (f"vLLM {line.value}", vllm_release_flags(line)),
        ([v.value for v in VllmVersion], vllm_release_flags),
        FLAG_FIELDS,
        {"--data-parallel-size": replicas},
        vllm_release_values,
    )
    if inf.engine is not Engine.VLLM:
        draft.cannot(
            "inference.engine", f"the plan was judged under {ENGINE_LABELS[inf.engine]}'s memory rules, not vLLM's"
        )
    draft.outside(["inference.concurrent", "inference.new_tokens"], CLIENT_WHY)
    draft.outside(["inference.mem_fraction_static"], "SGLang's, not vLLM's")
    lines = [f"{FLAGS_MARK}{line.value})", *left_out]
    if inf.weight_dtype in (WeightFormat.AWQ_INT4, WeightFormat.GPTQ_INT4):
        lines.append(
            f"Serve an {QUANTIZATION[inf.weight_dtype].upper()} checkpoint of the model: the weights come from it."
        )
    lines += gptq_int8_header(draft, "vLLM")
    # A context past the model's limit that the plan allows: the variable vLLM refuses to start without
    # (core.context_limit); an unallowed one is the verdict's "would not start", written as planned.
    env = [f"{VLLM_LONG_ENV}=1"] if inf.long_context and past_limit(plan) else []
    if inf.compile_cache is CompileCache.COLD and inf.cuda_graphs:  # every line 0.6.6 - 0.34.0 reads it (envs.py)
        # A cold compile planned: the variable that makes every start compile cold (serve_command reads it back).
        env.append(f"{DISABLE_COMPILE_CACHE}=1")
        lines.append(
            f"Planned with a cold compile cache: {DISABLE_COMPILE_CACHE}=1 makes every start compile cold; without "
            "it a restart that finds ~/.cache/vllm loads the compiled model and gets a larger KV cache."
        )
    return draft.finish(Target.VLLM, header(lines) + " ".join(shlex.quote(w) for w in [*env, *argv]) + "\n")


def leave_out_refused(
    draft: Draft,
    flags: list[str],
    release: tuple[str, frozenset[str]],
    history: tuple[Iterable[str], Callable[[str], frozenset[str]]],
    fields: Mapping[str, str],
    hints: Mapping[str, str],
    values_of: Callable[[str, str], Choices | None] = lambda _release, _option: None,
) -> tuple[list[str], list[str]]:
    """``flags`` less the options the plan's release (its label and its parser's option strings) has not, each said
    on the plan field it carries: "vLLM 0.7 has no --data-parallel-size (0.8 on): left out; HINT". ``history``:
    the covered releases oldest first and their option strings, to name the first that has it. Then less the values
    the release does not take (``values_of(release, option)``: engine_flags.vllm_release_values /
    sglang_release_values), the option with it: "vLLM 0.28 takes no --quantization bitsandbytes (up to 0.27): left
    out". Returned with the kept options: the same words as header lines, so the command says them wherever it is
    pasted."""
    label, accepted = release
    kept, refused = refused_options(flags, accepted)
    said = []
    for flag in refused:
        first = first_release_with(flag, *history)
        since = f" ({first} on)" if first else ""
        hint = f"; {hints[flag]}" if flag in hints else ""
        said.append(f"{label} has no {flag}{since}: left out{hint}")
        draft.cannot(fields.get(flag, "inference.engine"), said[-1])
    current = label.split()[-1]
    out: list[str] = []
    for word in kept:
        option = out[-1] if out else ""
        choices = values_of(current, option) if option.startswith("-") and not word.startswith("-") else None
        if choices is None or choices.takes(word):
            out.append(word)
            continue
        out.pop()
        later, earlier = releases_taking(option, word, history[0], values_of, current)
        span = f" ({later} on)" if later else f" (up to {earlier})" if earlier else " (no release read takes it)"
        said.append(f"{label} takes no {option} {word}{span}: left out")
        draft.cannot(fields.get(option, "inference.engine"), said[-1])
    return out, said


def read_vllm(text: str) -> tuple[str, dict[str, Any]]:
    """The model and the plan fields of a ``vllm serve`` line (the inverse of :func:`export_vllm`); what else the line
    holds, and the words not understood: :func:`core.files.launch.serve_command.read_command`."""
    from core.files.launch.serve_command import read_command

    read = read_command(text)
    return read.model_ref, dict(read.fields)


def text_only_limits(value: str) -> bool:
    """Whether a ``--limit-mm-per-prompt`` value turns every modality off: a JSON object whose counts (a number,
    or an object's ``count``) are all 0. Anything else vLLM reads as limits that let some input through."""
    if not value.strip():
        return False
    try:
        limits = json.loads(value)
    except ValueError:
        return False
    if not isinstance(limits, dict) or not limits:
        return False
    counts = [v.get("count", 1) if isinstance(v, dict) else v for v in limits.values()]
    return all(isinstance(c, int) and not isinstance(c, bool) and c == 0 for c in counts)
