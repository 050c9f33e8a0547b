"""The ``llama-server`` command (llama.cpp) for the plan's serving settings.

Flags read from ggml-org/llama.cpp ``common/arg.cpp`` (stored commit 145b6280): ``-m`` (a GGUF
file), ``-c`` (the context of all slots together: without ``--kv-unified`` each of the ``-np``
slots gets ``c / np``, rounded up to 256 tokens in ``src/llama-context.cpp``), ``-np``
(parallel slots: the requests served at once), ``-n`` (tokens generated per request unless the
request says), ``-ngl`` (layers on the GPU: all), ``-fa on`` (flash attention, which a quantised
V cache needs), ``-ctk`` / ``-ctv`` (KV cache types f32 | f16 | bf16 | q8_0 | q4_0; q8_0 and
q4_0 keep one fp16 scale per 32 values, 6 % and 12 % over the planner's int8 / int4 bytes),
``-sm`` (none: one GPU; layer: layers and their KV cache split across GPUs, the plan's
pipeline stages) with ``-ts`` (the share of each GPU). The weights' format is the GGUF file's:
only BF16, F16 and F32 files store what the plan's 16- and 32-bit formats do.
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from core.dtypes import CacheType, GgufQuant, KvDtype, WeightFormat
from core.files.launch.common import Draft, Export, Target, command_words, header, model_reference
from core.inputs import DEFAULTS
from core.plan import ENGINE_LABELS, Engine, Plan

MAX_CONTEXT: Final = 2**31 - 1  # common_params.n_ctx is an int32_t
DEFAULT_UBATCH: Final = DEFAULTS["inference.ubatch"]  # -ub's default, 512 (common/common.h n_ubatch)
GGUF_TYPES: Final = {WeightFormat.BF16: "BF16", WeightFormat.FP16: "F16", WeightFormat.FP32: "F32"}
NEAREST_GGUF: Final = {
    WeightFormat.INT8: "Q8_0",
    WeightFormat.FP8: "Q8_0",
    WeightFormat.NF4: "Q4_0",
    WeightFormat.AWQ_INT4: "Q4_0",
    WeightFormat.GPTQ_INT4: "Q4_0",
    WeightFormat.GPTQ_INT8: "Q8_0",
    WeightFormat.MXFP4: "MXFP4_MOE",  # llama-quantize's gpt-oss type (LLAMA_FTYPE_MOSTLY_MXFP4_MOE)
}
CACHE_TYPES: Final = {
    KvDtype.FP32: "f32",
    KvDtype.FP16: "f16",
    KvDtype.BF16: "bf16",
    KvDtype.INT8: "q8_0",
    KvDtype.INT4: "q4_0",
}


def gguf_file(draft: Draft, model_ref: str | None, reader: str = "llama-server") -> tuple[str, str]:
    """The GGUF file ``reader`` is given: (the name's stem from the model, the file type), the
    plan's own type under llama.cpp, else the type nearest the plan's weights."""
    inf = draft.plan.inference
    if inf.engine is Engine.LLAMACPP:  # the plan names the GGUF type it was judged with
        kind = inf.gguf_quant.value
    else:
        fmt = inf.weight_dtype
        kind = GGUF_TYPES.get(fmt) or NEAREST_GGUF[fmt]
        if fmt not in GGUF_TYPES:
            draft.cannot(
                "inference.weight_dtype",
                f"a GGUF file stores {fmt.value} weights as none of its types ({kind} is named)",
            )
    stem = model_reference(draft, model_ref).rstrip("/").rsplit("/", 1)[-1]
    draft.cannot("model", f"{reader} reads a GGUF file: {stem}-{kind}.gguf stands for the one converted or downloaded")
    return stem, kind


def _engine_flags(draft: Draft) -> list[str]:
    """-ngl, -fa, -ctk / -ctv and -ub: the llama.cpp engine's own settings, or for a plan judged
    under another engine every layer on the GPU, flash attention and the nearest cache type."""
    inf = draft.plan.inference
    if inf.engine is Engine.LLAMACPP:
        cache = inf.cache_type.value
        # -ngl "auto" (common/arg.cpp: "an exact number, 'auto', or 'all'"): llama.cpp's own fit.
        layers = "auto" if inf.gpu_layers < 0 else str(inf.gpu_layers)
        if inf.gpu_layers < 0 and inf.pipeline_parallel > 1:
            draft.cannot(
                "inference.gpu_layers", "llama.cpp's fit stops when -ts is given: the even -ts written keeps -ngl all"
            )
        flags = ["-ngl", layers, "-fa", "on" if inf.flash_attention else "off"]
        flags += ["-ctk", cache, "-ctv", cache]
        return flags + (["-ub", str(inf.ubatch)] if inf.ubatch != DEFAULT_UBATCH else [])
    cache = CACHE_TYPES.get(inf.kv_dtype, "q8_0")
    if inf.kv_dtype not in CACHE_TYPES:
        draft.cannot("inference.kv_dtype", "llama.cpp has no fp8 KV cache (q8_0 is written)")
    draft.cannot(
        "inference.engine",
        f"the plan was judged under {ENGINE_LABELS[inf.engine]}'s memory rules, not llama.cpp's",
    )
    return ["-ngl", "999", "-fa", "on", "-ctk", cache, "-ctv", cache]


def _split(draft: Draft) -> list[str]:
    """Pipeline stages are llama.cpp's layer split; its row split keeps the KV cache on the main GPU,
    which is not the plan's tensor parallel (weights and KV heads split)."""
    inf = draft.plan.inference
    if inf.pipeline_parallel > 1:
        if inf.tensor_parallel > 1:
            draft.cannot("inference.tensor_parallel", "llama.cpp splits by layer or by row, not both (layers written)")
        return ["-sm", "layer", "-ts", ",".join(["1"] * inf.pipeline_parallel)]
    if inf.tensor_parallel > 1:
        draft.cannot("inference.tensor_parallel", "llama.cpp's row split keeps the KV cache on the main GPU, not split")
        return ["-sm", "row", "-ts", ",".join(["1"] * inf.tensor_parallel)]
    return ["-sm", "none"]


def export_llama_server(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    inf = plan.inference
    total = inf.context * inf.concurrent
    if total > MAX_CONTEXT:
        draft.cannot(
            "inference.context", f"llama.cpp's -c is a 32-bit count: {total:,} tokens over all slots is past it"
        )
    stem, kind = gguf_file(draft, model_ref)
    argv = ["llama-server", "-m", f"{stem}-{kind}.gguf", "-c", str(total)]
    argv += ["-np", str(inf.concurrent), "-n", str(inf.new_tokens), *_engine_flags(draft), *_split(draft)]
    if inf.replicas > 1:
        draft.cannot("inference.replicas", "one llama-server serves one copy: start one per replica")
    draft.outside(
        ["inference.gpu_memory_utilization", "inference.max_num_seqs", "inference.max_num_batched_tokens"],
        "vLLM's, not llama.cpp's",
    )
    draft.outside(["inference.mem_fraction_static"], "SGLang's, not llama.cpp's")
    draft.outside(
        ["inference.ollama_version"],
        "Ollama starts its own llama.cpp runner with the GPU layers its estimate chose: see the Ollama export",
    )
    layers = "the plan's GPU layers" if inf.engine is Engine.LLAMACPP else "every layer on the GPU"
    lines = [f"llama-server written by VRAM Planner: {layers}, one slot per concurrent request"]
    return draft.finish(Target.LLAMA_SERVER, header(lines) + " ".join(shlex.quote(w) for w in argv) + "\n")


def read_llama_server(text: str) -> dict[str, Any]:
    """Plan fields from a ``llama-server`` line (the inverse of :func:`export_llama_server`)."""
    words = command_words(text)
    flags = {words[i]: words[i + 1] for i in range(1, len(words) - 1, 2)}
    slots = int(flags["-np"])
    gpus = len(flags.get("-ts", "1").split(","))
    kind = flags["-m"].rsplit("-", 1)[-1].removesuffix(".gguf")
    weights = {**{v: k for k, v in NEAREST_GGUF.items()}, **{v: k for k, v in GGUF_TYPES.items()}}
    cache = flags["-ctk"]
    fields: dict[str, Any] = {
        "inference.gpu_layers": -1 if flags["-ngl"] == "auto" else int(flags["-ngl"]),
        "inference.cache_type": CacheType(cache),
        "inference.flash_attention": flags.get("-fa") != "off",
        "inference.ubatch": int(flags.get("-ub", DEFAULT_UBATCH)),
    }
    if flags["-sm"] != "row":  # llama.cpp as the engine (its row split is the plan's tensor parallel)
        fields["inference.engine"] = Engine.LLAMACPP
    if kind in set(GgufQuant):
        fields["inference.gguf_quant"] = GgufQuant(kind)
    if kind in weights:
        fields["inference.weight_dtype"] = weights[kind]
    if cache in CACHE_TYPES.values():
        fields["inference.kv_dtype"] = {v: k for k, v in CACHE_TYPES.items()}[cache]
    return {
        **fields,
        "inference.concurrent": slots,
        "inference.context": int(flags["-c"]) // slots,
        "inference.new_tokens": int(flags["-n"]),
        "inference.tensor_parallel": gpus if flags["-sm"] == "row" else 1,
        "inference.pipeline_parallel": gpus if flags["-sm"] == "layer" else 1,
    }
