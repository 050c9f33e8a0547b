"""Ollama: the Modelfile and the server's environment for the plan's Ollama release line.

A shell text: ``ollama serve`` started with the environment the estimate assumed, a Modelfile
written beside the GGUF file, and ``ollama create``. Names read at ollama/ollama, at the tag and
commit :data:`core.serving.ollama.LINES` cites for each line (v0.6.0 aee28501, v0.6.8 6a74bba7,
v0.9.0 5f57b0ef, v0.11.0 d5520684), and at v0.5.0 (aed1419c) and v0.5.13 (7a01ad76):

* ``envconfig/config.go``: ``OLLAMA_NUM_PARALLEL`` (parallel requests a model: the plan's
  concurrent requests; unset, the scheduler picks), ``OLLAMA_FLASH_ATTENTION`` (``Bool``: 1 / 0),
  ``OLLAMA_KV_CACHE_TYPE`` (passed to the runner only with flash attention, and only f16, q8_0,
  q4_0: ``llm/server.go``), ``OLLAMA_SCHED_SPREAD`` (skip ``server/sched.go``'s first try on one
  GPU alone: the estimate spreads the layers over the plan's pipeline GPUs), ``CUDA_VISIBLE_DEVICES``
  / ``HIP_VISIBLE_DEVICES``, and ``OLLAMA_CONTEXT_LENGTH`` from v0.5.13 (in every release of the
  0.6.7 line on; the 0.5 line's v0.5.0 - v0.5.12 lack it, and the Modelfile's num_ctx says it
  anyway). ``OLLAMA_GPU_OVERHEAD`` is left unset: the estimate holds nothing back for it.
* ``api/types.go`` ``Runner`` / ``Options``: ``num_ctx`` (tokens a request: Ollama gives the runner
  num_ctx x parallel), ``num_batch`` (llama.cpp's n_batch; ``llama/llama.go`` NewContextParams
  leaves n_ubatch at llama.cpp's 512, which llama.cpp caps at n_batch: the plan's micro-batch is
  num_batch up to 512), ``num_gpu`` (layers on the GPU, the output layer counting as one; -1, the
  default, lets Ollama's estimate choose), ``num_predict`` (tokens an answer; default -1, no limit).
* ``parser/parser.go``: ``FROM`` and ``PARAMETER name value`` lines; a value is quoted only with
  spaces or new lines, which the names written here never hold. ``types/model/name.go``: a model
  name is letters, digits, ``_``, ``-`` and ``.``, starting with a letter, digit or ``_``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Final

from core.catalogue import GpuSpec
from core.dtypes import CacheType, GgufQuant
from core.errors import PlanError
from core.estimate import gpu_for
from core.files.launch.common import Draft, Export, Target, header
from core.files.launch.llamacpp import CACHE_TYPES, DEFAULT_UBATCH, GGUF_TYPES, NEAREST_GGUF, gguf_file
from core.plan import ENGINE_LABELS, Engine, OllamaVersion, Plan
from core.serving import releases
from core.serving.ollama import KV_BYTES, LINES, line_of, ollama_estimate

CONTEXT_ENV_FROM: Final = OllamaVersion.V0_6_7  # OLLAMA_CONTEXT_LENGTH in every release of the line (v0.5.13 on)
MAX_UBATCH: Final = DEFAULT_UBATCH  # llama_context_default_params' n_ubatch, which Ollama never sets
DEVICES_ENV: Final = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}
LINE_MARK: Final = "Ollama release line "
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME: Final = 64


def newest_line(plan: Plan) -> OllamaVersion:
    """The newest line covered that can take the plan (a mixture-of-experts model with every layer
    on the GPU is refused from 0.30, whose llama.cpp fit is not modelled for it: core.plan)."""
    # As the file reads back: the model under llama.cpp, num_gpu only where _parameters writes it.
    layers = plan.inference.gpu_layers if plan.inference.engine is Engine.LLAMACPP else 999
    for line in sorted(LINES, key=lambda v: list(OllamaVersion).index(v), reverse=True):
        try:
            Plan(model=plan.model).with_inference(engine=Engine.LLAMACPP, ollama_version=line, gpu_layers=layers)
        except PlanError:
            continue
        return line
    return max(LINES, key=lambda v: list(OllamaVersion).index(v))


def _line(draft: Draft) -> OllamaVersion:
    inf = draft.plan.inference
    if inf.engine is not Engine.LLAMACPP:
        draft.cannot(
            "inference.engine", f"the plan was judged under {ENGINE_LABELS[inf.engine]}'s memory rules, not Ollama's"
        )
        return newest_line(draft.plan)
    if inf.ollama_version is OllamaVersion.NONE or inf.ollama_version not in LINES:
        draft.cannot(
            "inference.ollama_version",
            "the plan runs llama-server with its GPU layers as typed, not Ollama's own choice: see the "
            f"llama-server export (the newest line covered that takes the plan, {newest_line(draft.plan).value}, "
            "is written)",
        )
        return newest_line(draft.plan)
    return inf.ollama_version


def _cache(draft: Draft) -> tuple[bool, CacheType]:
    """Flash attention and the cache type Ollama passes (f16, q8_0, q4_0, and only with flash attention)."""
    inf = draft.plan.inference
    if inf.engine is Engine.LLAMACPP:
        flash, cache = inf.flash_attention, inf.cache_type
    else:  # every layer on the GPU with flash attention, as the llama-server export writes it
        flash, cache = True, CacheType(CACHE_TYPES.get(inf.kv_dtype, "q8_0"))
        if inf.kv_dtype not in CACHE_TYPES:
            draft.cannot("inference.kv_dtype", "Ollama has no fp8 KV cache (q8_0 is written)")
    if cache not in KV_BYTES:
        field = "inference.cache_type" if inf.engine is Engine.LLAMACPP else "inference.kv_dtype"
        draft.cannot(field, f"Ollama's OLLAMA_KV_CACHE_TYPE is f16, q8_0 or q4_0, not {cache.value} (f16 is written)")
        cache = CacheType.F16
    return flash, cache


def _environment(draft: Draft, version: OllamaVersion, gpu: GpuSpec | None) -> list[str]:
    inf = draft.plan.inference
    flash, cache = _cache(draft)
    env = [f"OLLAMA_NUM_PARALLEL={inf.concurrent}", f"OLLAMA_FLASH_ATTENTION={int(flash)}"]
    if flash:
        env.append(f"OLLAMA_KV_CACHE_TYPE={cache.value}")
    if releases.at_least(version, CONTEXT_ENV_FROM):
        env.append(f"OLLAMA_CONTEXT_LENGTH={inf.context}")
    gpus = inf.pipeline_parallel
    if gpus > 1:
        env.append("OLLAMA_SCHED_SPREAD=1")
    variable = DEVICES_ENV.get(gpu.vendor) if gpu is not None else None
    if variable:
        env.append(f"{variable}={','.join(str(i) for i in range(gpus))}")
    elif gpus > 1:
        draft.cannot(
            "inference.pipeline_parallel", "no CUDA or ROCm card to list: which GPUs Ollama spreads over is the host's"
        )
    if inf.tensor_parallel > 1:
        draft.cannot("inference.tensor_parallel", "Ollama splits a model by layers across GPUs, not its matrices")
    if inf.replicas > 1:
        draft.cannot("inference.replicas", "one Ollama server loads one copy of a model: start one per replica")
    return env


def _parameters(draft: Draft) -> list[str]:
    plan = draft.plan
    inf = plan.inference
    params = [f"num_ctx {inf.context}"]
    # core.serving.ollama.ollama_estimate: GPU layers past the model's are Ollama's own choice (num_gpu -1).
    if inf.engine is Engine.LLAMACPP and inf.gpu_layers <= plan.model.num_layers:
        params.append(f"num_gpu {inf.gpu_layers}")
    if inf.engine is Engine.LLAMACPP and inf.ollama_version is OllamaVersion.NONE and inf.cpu_moe_layers > 0:
        draft.cannot(
            "inference.cpu_moe_layers",
            "Ollama has no --n-cpu-moe: its runner keeps every offloaded layer's experts on the GPU",
        )
    ubatch = inf.ubatch if inf.engine is Engine.LLAMACPP else DEFAULT_UBATCH
    if ubatch > MAX_UBATCH:
        draft.cannot(
            "inference.ubatch",
            f"Ollama sets llama.cpp's n_batch (num_batch) but leaves n_ubatch at {MAX_UBATCH}: no larger micro-batch",
        )
    params.append(f"num_batch {min(ubatch, MAX_UBATCH)}")
    params.append(f"num_predict {inf.new_tokens}")
    return params


def _estimate_note(plan: Plan, gpu: GpuSpec | None) -> str:
    inf = plan.inference
    if gpu is None or inf.engine is not Engine.LLAMACPP or inf.ollama_version not in LINES:
        return ""
    chosen = ollama_estimate(plan, gpu)
    given = "num_gpu caps it" if inf.gpu_layers <= plan.model.num_layers else "num_gpu is left to it"
    return (
        f"Ollama's estimate as the planner reads it: {chosen.layers} of {chosen.layers_model} layers on the "
        f"{gpu.name} ({given}); ollama ps: PROCESSOR {chosen.processor}"
    )


def _safe(text: str) -> str:
    """A file or model name that needs no quoting in the Modelfile or the shell."""
    return _UNSAFE.sub("-", text).strip("-.")[:MAX_NAME] or "model"


def export_ollama(plan: Plan, model_ref: str | None = None) -> Export:
    draft = Draft(plan)
    version = _line(draft)
    line = line_of(version)
    try:
        gpu: GpuSpec | None = gpu_for(plan)
    except PlanError:
        gpu = None
    stem, kind = gguf_file(draft, model_ref, "Ollama's FROM")
    stem = _safe(stem)
    name = _safe(f"{stem}-{kind}".lower()).lstrip("-.")
    env = _environment(draft, version, gpu)
    params = _parameters(draft)
    draft.outside(
        ["inference.gpu_memory_utilization", "inference.max_num_seqs", "inference.max_num_batched_tokens"],
        "vLLM's, not Ollama's",
    )
    draft.outside(["inference.mem_fraction_static"], "SGLang's, not Ollama's")
    lines = [
        f"Ollama written by VRAM Planner: the server's environment and a Modelfile ({LINE_MARK}{version.value}: "
        f"{line.tags}; names read at {line.tag}, {line.commit[:8]})",
        _estimate_note(plan, gpu),
        "The environment is the server's: set it where `ollama serve` runs (a systemd unit: Environment= lines)",
    ]
    modelfile = [f"FROM ./{stem}-{kind}.gguf", *(f"PARAMETER {p}" for p in params)]
    body = [
        " ".join([*env, "ollama", "serve", "&"]),
        "until ollama list >/dev/null 2>&1; do sleep 1; done",
        "cat > Modelfile <<'EOF'",
        *modelfile,
        "EOF",
        f"ollama create {name} -f Modelfile",
    ]
    return draft.finish(Target.OLLAMA, header(x for x in lines if x) + "\n".join(body) + "\n")


def read_ollama(text: str) -> dict[str, Any]:
    """Plan fields from an Ollama export (the inverse of :func:`export_ollama`)."""
    env: dict[str, str] = {}
    params: dict[str, str] = {}
    source = ""
    fields: dict[str, Any] = {"inference.engine": Engine.LLAMACPP}
    for line in text.splitlines():
        if line.startswith("#") and LINE_MARK in line:
            fields["inference.ollama_version"] = OllamaVersion(line.split(LINE_MARK, 1)[1].split(":", 1)[0])
        elif line.endswith("ollama serve &"):
            env = dict(w.split("=", 1) for w in shlex.split(line) if "=" in w)
        elif line.startswith("PARAMETER "):
            _, name, value = line.split(" ", 2)
            params[name] = value
        elif line.startswith("FROM "):
            source = line.removeprefix("FROM ")
    kind = source.rsplit("-", 1)[-1].removesuffix(".gguf")
    weights = {**{v: k for k, v in NEAREST_GGUF.items()}, **{v: k for k, v in GGUF_TYPES.items()}}
    if kind in set(GgufQuant):
        fields["inference.gguf_quant"] = GgufQuant(kind)
    if kind in weights:
        fields["inference.weight_dtype"] = weights[kind]
    devices = next((env[v] for v in DEVICES_ENV.values() if v in env), "0")
    flash = env.get("OLLAMA_FLASH_ATTENTION") == "1"
    return {
        **fields,
        "inference.concurrent": int(env["OLLAMA_NUM_PARALLEL"]),
        "inference.flash_attention": flash,
        "inference.cache_type": CacheType(env.get("OLLAMA_KV_CACHE_TYPE", "f16")),
        "inference.pipeline_parallel": len(devices.split(",")),
        "inference.context": int(params["num_ctx"]),
        "inference.gpu_layers": int(params.get("num_gpu", 999)),
        "inference.ubatch": int(params["num_batch"]),
        "inference.new_tokens": int(params["num_predict"]),
    }
