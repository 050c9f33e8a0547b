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

A mixture of experts' routed experts kept in host RAM (the plan's ``cpu_moe_layers``) are written
``--n-cpu-moe N`` (the first N layers'), or ``--cpu-moe`` (every layer's) from the layer count up. The
reader takes those (and ``-ncmoe`` / ``-cmoe``) and the ``-ot`` / ``--override-tensor`` patterns that say the
same: a pattern ``=CPU`` that moves the up, gate and down experts of layers 0 .. N-1 and nothing else, tried
on tensor names as llama.cpp's loader does (``std::regex_search``; Python's ``re`` reads these patterns alike).
A pattern it cannot read so is listed (:class:`UnreadOverrides`), never dropped.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Final

from core.dtypes import CacheType, GgufQuant, KvDtype, WeightFormat
from core.errors import PlanFileError
from core.files.launch.common import Draft, Export, Target, command_words, header, model_reference
from core.inputs import DEFAULTS
from core.plan import ENGINE_LABELS, Engine, OllamaVersion, Plan

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


# What the reader takes --cpu-moe as: every layer's experts, past any model's layer count (as -ngl 999 is "all").
CPU_MOE_ALL: Final = 999
# Switches that take no value (common/arg.cpp: -cmoe / --cpu-moe); every other flag is followed by its value.
_SWITCHES: Final = frozenset({"--cpu-moe", "-cmoe"})
_OVERRIDE_FLAGS: Final = frozenset({"-ot", "--override-tensor"})
_N_CPU_MOE_FLAGS: Final = frozenset({"--n-cpu-moe", "-ncmoe"})
# The layers a pattern is tried on: more than any GGUF in the catalogue has (Kimi K2 / DeepSeek V3: 61).
_PATTERN_LAYERS: Final = 512
_EXPERT_NAMES: Final = ("ffn_up_exps", "ffn_gate_exps", "ffn_down_exps")
_OTHER_NAMES: Final = ("ffn_up_shexp", "ffn_up", "ffn_gate_inp", "attn_q", "attn_output", "ffn_norm")


class UnreadOverrides(PlanFileError):
    """``-ot`` patterns a llama-server line gives that the reader cannot read as experts kept in RAM."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = tuple(patterns)
        super().__init__("llama-server command", f"has -ot patterns the planner cannot read: {', '.join(patterns)}")

    def __reduce__(self) -> tuple[type[UnreadOverrides], tuple[list[str]]]:  # type: ignore[override]
        return (type(self), (list(self.patterns),))


def cpu_moe_flags(plan: Plan) -> list[str]:
    """``--n-cpu-moe N`` / ``--cpu-moe`` for the plan's experts kept in host RAM (none for a dense model,
    under Ollama or with none kept)."""
    inf, model = plan.inference, plan.model
    if inf.cpu_moe_layers <= 0 or model.num_experts <= 1 or inf.ollama_version is not OllamaVersion.NONE:
        return []
    return ["--cpu-moe"] if inf.cpu_moe_layers >= model.num_layers else ["--n-cpu-moe", str(inf.cpu_moe_layers)]


def override_layers(pattern: str) -> int | None:
    """The N of ``--n-cpu-moe N`` one ``-ot`` entry (``regex=BUFFER``) says: the experts of layers 0 .. N-1
    kept on the CPU (:data:`CPU_MOE_ALL` for every layer); None for a pattern that moves anything else,
    some experts of a layer only, layers that do not start at 0, or to another buffer than CPU."""
    regex, sep, buffer = pattern.rpartition("=")
    if not sep or buffer.strip().upper() != "CPU":
        return None
    try:
        compiled = re.compile(regex)
    except re.error:
        return None
    layers = []
    for i in range(_PATTERN_LAYERS):
        hits = [bool(compiled.search(f"blk.{i}.{name}.weight")) for name in _EXPERT_NAMES]
        if any(compiled.search(f"blk.{i}.{name}.weight") for name in _OTHER_NAMES):
            return None
        if any(hits) and not all(hits):
            return None
        if all(hits):
            layers.append(i)
    if not layers or layers != list(range(len(layers))):
        return None
    return CPU_MOE_ALL if len(layers) == _PATTERN_LAYERS else len(layers)


def _cpu_moe_read(words: list[str]) -> tuple[int, list[str]]:
    """The experts kept in RAM a llama-server line asks for (layers; 0: none) and the -ot entries not read."""
    layers, unread = 0, []
    for i, word in enumerate(words):
        if word in _SWITCHES:
            layers = CPU_MOE_ALL
        elif word in _N_CPU_MOE_FLAGS and i + 1 < len(words):
            layers = max(layers, int(words[i + 1]))
        elif word in _OVERRIDE_FLAGS and i + 1 < len(words):
            for entry in words[i + 1].split(","):  # common/arg.cpp splits -ot's value on commas
                read = override_layers(entry)
                if read is None:
                    unread.append(entry)
                else:
                    layers = max(layers, read)
    return layers, unread


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
        if inf.cpu_moe_layers > 0 and draft.plan.model.num_experts <= 1:
            draft.cannot("inference.cpu_moe_layers", "the model has no routed experts for --n-cpu-moe to keep in RAM")
        flags = ["-ngl", layers, *cpu_moe_flags(draft.plan), "-fa", "on" if inf.flash_attention else "off"]
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


def read_llama_server(text: str, unread: list[str] | None = None) -> dict[str, Any]:
    """Plan fields from a ``llama-server`` line (the inverse of :func:`export_llama_server`). ``-ot`` entries
    it cannot read as experts kept in RAM are appended to ``unread``; without that list they are refused
    (:class:`UnreadOverrides`), never dropped."""
    words = command_words(text)
    values = [w for w in words[1:] if w not in _SWITCHES]
    flags = {values[i]: values[i + 1] for i in range(0, len(values) - 1, 2)}
    experts, not_read = _cpu_moe_read(words)
    if not_read and unread is None:
        raise UnreadOverrides(not_read)
    if unread is not None:
        unread.extend(not_read)
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
        "inference.cpu_moe_layers": experts,
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
