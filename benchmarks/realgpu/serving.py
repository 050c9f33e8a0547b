"""Serving rules against published start-up logs and speed measurements, leave one source out.

Corpora: benchmarks/realgpu/engine_logs.json (start-up logs of vLLM 0.2 - 0.19, SGLang,
llama.cpp, Ollama), benchmarks/realgpu/serving_speed.json (llama-bench tables, a vLLM A100
sweep, an SGLang run, the Qwen team's Qwen2.5 speed table), and the vLLM start-up logs the
0.19 rules were first read against (benchmarks/serving/vllm_logs.json: llm-d-planner's H100
logs and four 0.6.x logs).

Each record is mapped to a plan (the mapping, with every assumption, is :data:`MAPPING` and
the functions below) or listed with why it cannot be (:func:`unexpressed`). The constants
of core.serving.fit are set by one rule each (:func:`fit_constants`: the median of what the
records that show a constant imply) and every source is scored with the constants set
*without* it; a constant no other source shows falls back to its prior (:data:`PRIORS`) and
the table says so.

Tables: vLLM / SGLang "GPU KV cache size" (target: within 5 % on 90 % of logs, none past
10 %); llama.cpp's printed buffers, model, KV and compute, per GPU (target: within 3 %);
decode tokens/s per user (target: median |error| ≤ 15 %, worst ≤ 35 %); time to first token
where the source measured a cold prefill (target: within × 1.5); the Qwen2.5 table's batch-1
generate calls, 2,048 / (TTFT + 2,048 × time per token), held to the decode targets and setting
no constant; weights and total throughput for information.

    python benchmarks/realgpu/serving.py [--check] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.realgpu.hybrid_pages import report as hybrid_pages_report  # noqa: E402
from benchmarks.realgpu.hybrid_pages import rows as hybrid_page_rows  # noqa: E402
from benchmarks.realgpu.ollama import report as ollama_report  # noqa: E402
from benchmarks.realgpu.torch_capacity import TOLERANCE_GIB as CAPACITY_TOLERANCE_GIB  # noqa: E402
from benchmarks.realgpu.torch_capacity import comparable as capacity_comparable  # noqa: E402
from benchmarks.realgpu.torch_capacity import era as capacity_era  # noqa: E402
from benchmarks.realgpu.torch_capacity import records as capacity_records  # noqa: E402
from benchmarks.serving import vllm_plan  # noqa: E402
from core.catalogue import find_gpu, find_model  # noqa: E402
from core.dtypes import GgmlType, GgufQuant  # noqa: E402
from core.hfconfig import model_from_hf_config  # noqa: E402
from core.model import ModelSpec  # noqa: E402
from core.params import param_counts  # noqa: E402
from core.plan import Attention, CompileCache, Engine, Hardware, Inference, Plan, Platform  # noqa: E402
from core.runtime import CUDA_CONTEXT_BYTES  # noqa: E402
from core.serving import engines as serving_engines  # noqa: E402
from core.serving import releases  # noqa: E402
from core.serving.engines import rank_layout, serving_link, sglang_free_at_start  # noqa: E402
from core.serving.fit import (  # noqa: E402
    COLD_COMPILE_PEAK,
    DEFAULT_FIT,
    GRAPH_PER_LAYER,
    HF_HOST_LAYER,
    METAL_KERNELS,
    ServingFit,
    bandwidth_key,
    link_class,
    memory_class,
)
from core.serving.inference import InferenceEstimate, inference_estimate  # noqa: E402
from core.serving.llamacpp import (  # noqa: E402
    CUDA_GRAPHS_FROM_BUILD,
    FA_MASK_F16_FROM_BUILD,
    SERVER_OUTPUTS_FROM_BUILD,
    compute_buffer_bytes,
    context_cells,
    host_input_bytes,
    llamacpp_buffers,
)
from core.serving.speed import cycles_key, engine_family, kquant_matvec_seconds  # noqa: E402
from core.serving.vllm_rules import (  # noqa: E402
    GRAPH_ESTIMATE_IN_POOL_FROM,
    VLLM_BLOCK_SIZE,
    VLLM_CUDA_GRAPH_BYTES,
    non_torch_line_key,
    vllm_graph_count,
    vllm_graph_estimate,
    vllm_scheduler,
)
from core.serving.vllm_versions import era_of, graphs_before_kv  # noqa: E402
from core.units import GiB, MiB  # noqa: E402

REALGPU = ROOT / "benchmarks" / "realgpu"
ENGINE_LOGS = REALGPU / "engine_logs.json"
SPEED = REALGPU / "serving_speed.json"
OLD_LOGS = ROOT / "benchmarks" / "serving" / "vllm_logs.json"
CONFIGS = ROOT / "benchmarks" / "accuracy" / "configs"

KV_TARGET, KV_SHARE, KV_WORST = 5.0, 0.90, 10.0  # issue 23
BUFFER_TARGET = 3.0
DECODE_MEDIAN, DECODE_WORST = 15.0, 35.0
TTFT_RATIO = 1.5

# The links whose tensor-parallel buffers are fitted: NCCL's NVLS (multicast) buffers on NVSwitch
# systems and the network transport's. Over PCIe or plain NVLink the buffers are NCCL's ring ones,
# tens of MiB: held at 0, so a TP log on those links sets its era's non-torch base instead.
LARGE_COMM = ("nvlink-nvswitch", "network")
# Values a constant takes when no record outside the scored source shows it: what one would
# assume with no log at all (nothing outside torch, no driver reserve, no launch cost), or an
# outside figure (bandwidth: 77 % on an A100, John Musgrave's vLLM sweep, cited in the old
# core.serving.speed). The CUDA context is core.runtime's.
PRIORS: Mapping[str, float] = MappingProxyType(
    {
        "non_torch:v0": CUDA_CONTEXT_BYTES,
        "non_torch:v1-early": CUDA_CONTEXT_BYTES,
        "non_torch:v1": 0.0,
        "tp_comm": 0.0,
        "driver": 0.0,
        "bandwidth": 0.77,
        "overhead": 0.0,
        "launch": 0.0,
        f"launch:{HF_HOST_LAYER}": 0.0,
        # bytes per layer per graph: the 0.19 tuning logs' median estimate (0.84 GiB) over Llama-3.1-8B's 32
        # layers and the 86 graphs of 256 sequences (core.serving.vllm_rules.VLLM_CUDA_GRAPH_BYTES)
        "graphs": 0.84 * GiB / (32 * 86),
        # no cold start seen: a cold compile adds nothing (the planner's behaviour before h94cold)
        "cold": 0.0,
    }
)


# The rules before issue 23 (main at 311d2af, core/serving/vllm_rules.py): 0.25 GiB outside torch on
# one GPU and 2.1 GiB with tensor parallelism whatever the link, 0.46 GiB kept by the driver on every
# card, 77 % of the bandwidth and no launch time in decode. Scored under this branch's version rules,
# so the "before" column isolates what fitting by link and card class changed.
BEFORE_FIT = ServingFit(
    vllm_non_torch_bytes=MappingProxyType({"v0": 0.25 * GiB, "v1-early": 0.25 * GiB, "v1": 0.25 * GiB}),
    tp_comm_bytes=MappingProxyType({k: 1.85 * GiB for k in ("nvlink-nvswitch", "nvlink", "pcie", "network")}),
    driver_reserved_bytes=MappingProxyType({"hbm": 0.46 * GiB, "gddr": 0.46 * GiB, "unified": 0.46 * GiB}),
    bandwidth_efficiency=MappingProxyType({k: 0.77 for k in DEFAULT_FIT.bandwidth_efficiency}),
    kernel_cycles=MappingProxyType({k: 0.0 for k in DEFAULT_FIT.kernel_cycles}),
    launch_seconds=MappingProxyType({k: 0.0 for k in DEFAULT_FIT.launch_seconds}),
)


# ---- what is scored -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One published figure and the plan's prediction of it under a set of constants."""

    id: str
    source: str
    table: str  # kv | buffers | decode | ttft | weights | throughput
    what: str
    logged: float
    predict: Callable[[ServingFit], float] = field(compare=False)
    identifies: str = ""  # the constant this record can set (see fit_constants), "" none
    note: str = ""
    plan: Plan | None = field(default=None, compare=False)  # decode cases: their card and engine
    held_out: bool = False  # a log no constant is fitted on (identifies nothing), summarised apart

    def error_pct(self, fit: ServingFit) -> float:
        return 100.0 * (self.predict(fit) - self.logged) / self.logged


@dataclass(frozen=True)
class Unexpressed:
    id: str
    source: str
    engine: str
    reason: str


@dataclass(frozen=True)
class Row:
    case: Case
    predicted: float
    priors: tuple[str, ...]  # constants this source was scored with at their prior

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.case.logged) / self.case.logged

    @property
    def ratio(self) -> float:
        return self.predicted / self.case.logged


# ---- corpora --------------------------------------------------------------------------------
@cache
def engine_logs() -> dict[str, Any]:
    return json.loads(ENGINE_LOGS.read_text(encoding="utf-8"))


@cache
def speed_corpus() -> dict[str, Any]:
    return json.loads(SPEED.read_text(encoding="utf-8"))


@cache
def old_logs() -> dict[str, Any]:
    return json.loads(OLD_LOGS.read_text(encoding="utf-8"))


def number(text: Any) -> float:
    """The first number of a logged field ("14.2488 GiB", "93,872", "5.73x")."""
    if isinstance(text, (int, float)):
        return float(text)
    match = re.match(r"[\d,.]+", str(text).strip())
    assert match, text
    return float(match.group().replace(",", ""))


@cache
def config_model(name: str) -> ModelSpec:
    return model_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8")), name=name)


def catalogue(model_id: str) -> ModelSpec:
    return find_model(model_id).spec


def mistral_v02() -> ModelSpec:
    """Mistral-7B-Instruct-v0.2: v0.1's shapes without the sliding window (its config drops
    it and raises rope_theta to 1e6, which changes no tensor)."""
    return replace(catalogue("mistral-7b-v0.1"), name="Mistral 7B v0.2", sliding_window=None, sliding_window_layers=0)


def command_r() -> ModelSpec:
    """c4ai-command-r-v01 as the log shows it: 40 layers, 5,120 MiB of f16 KV at 4,096 cells is
    8,192 KV values per token and layer (no grouped heads: 64 heads of 128 = the hidden size);
    vocabulary 256,000 and MLP 22,528 as its config (neither decides the first GPU's buffer)."""
    return ModelSpec(
        name="Command-R v01",
        family="cohere",
        vocab_size=256000,
        hidden_size=8192,
        num_layers=40,
        num_heads=64,
        num_kv_heads=64,
        head_dim=128,
        intermediate_size=22528,
        tie_embeddings=True,
        norm="layernorm",
        norms_per_layer=1,
        max_position_embeddings=131072,
    )


def tinyllama() -> ModelSpec:
    """TinyLlama-1.1B (its config: 22 layers, hidden 2048, 32 heads / 4 KV heads, MLP 5632,
    vocabulary 32000); llama-bench prints it as 1.10 B parameters, 636.18 MiB in Q4_K_M."""
    return ModelSpec(
        name="TinyLlama 1.1B",
        family="llama",
        vocab_size=32000,
        hidden_size=2048,
        num_layers=22,
        num_heads=32,
        num_kv_heads=4,
        head_dim=64,
        intermediate_size=5632,
        max_position_embeddings=2048,
    )


# ---- predictions ----------------------------------------------------------------------------
def estimate_with(plan: Plan, fit: ServingFit) -> InferenceEstimate:
    return inference_estimate(plan, param_counts(plan), find_gpu(plan.hardware.gpu), fit)


def serving_plan(model: ModelSpec, model_id: str, gpu: str, **inference: Any) -> Plan:
    return Plan(model=model, model_id=model_id, hardware=Hardware(gpu=gpu)).with_inference(**inference)


def kv_tokens_case(
    case_id: str, source: str, plan: Plan, logged: float, note: str = "", what: str = "", held_out: bool = False
) -> Case:
    """A logged KV-cache size; ``held_out`` logs set no constant in any fit (they only check it)."""
    inf = plan.inference
    identifies = ""
    link = link_class(serving_link(inf, find_gpu(plan.hardware.gpu))).value
    if not held_out:  # a held-out log checks the constants and sets none
        if inf.tensor_parallel > 1 and link in LARGE_COMM:  # vLLM and SGLang both take these buffers
            identifies = "tp_comm:" + link
        elif inf.engine.value == "vllm" and inf.pipeline_parallel == 1:
            identifies = "non_torch:" + era_of(inf.vllm_version).accounting.value
    return Case(
        id=case_id,
        source=source,
        table="kv",
        what=what or f"{inf.engine.value} KV tokens",
        logged=logged,
        predict=lambda fit: float(estimate_with(plan, fit).kv_cache_tokens),
        identifies=identifies,
        note=note,
        plan=plan,
        held_out=held_out,
    )


def tokens_from_gib(plan: Plan, gib: float) -> float:
    """Whole 16-token blocks of a logged KV size, for logs that print only the GiB."""
    per_token = estimate_with(plan, DEFAULT_FIT).kv_bytes_per_token
    return float(int(gib * GiB // (VLLM_BLOCK_SIZE * per_token)) * VLLM_BLOCK_SIZE)


# ---- vLLM and SGLang start-up logs --------------------------------------------------------------
def _qwen2_7b() -> tuple[ModelSpec, str]:
    # Qwen2-7B(-Instruct) has Qwen2.5-7B's shapes: 28 layers, hidden 3584, 28 / 4 heads, MLP 18944,
    # vocabulary 152064, untied (both configs).
    return catalogue("qwen2.5-7b"), "qwen2.5-7b"


# Per engine-log record: the plan's inputs beyond what the record's settings give directly,
# with why. Records not here are listed by unexpressed() with their reason.
DENNISLEE_SAME_NODE: Final = "pcie4-host"
MAPPING: Mapping[str, dict[str, Any]] = MappingProxyType(
    {
        # dennislee22: vLLM 0.10.1.1, Qwen2-7B-Instruct, 16,384 tokens, the scheduler printed 2,048.
        # Every worker prints "Using FlashInfer for top-p & top-k sampling" (the log's line 26 and
        # the like), except the 40 GB run's remote worker (pid 1384, the one that prints the pool):
        # "FlashInfer is not available" (line 77), so its profile sorts (vllm_rules.sampler_path).
        "dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM": {"util": 0.25, "tp": 1},
        "dennislee22-vllm-7B-1gpuA10080GB-0.5GRAM": {"util": 0.5, "tp": 1},
        # Same node, but no NVLink: the log prints "Custom allreduce is disabled because your
        # platform lacks GPU P2P capability" (log/vllm-7B-2gpuA10080GB-0.25GRAM-same-node.log,
        # line 23): NCCL carries the all-reduce through host memory (its SHM transport), the
        # catalogue's PCIe 4.0 link without P2P (resources/links.json cites NCCL's figures).
        "dennislee22-vllm-7B-2gpuA10080GB-0.25GRAM-same-node": {"util": 0.25, "tp": 2, "link": DENNISLEE_SAME_NODE},
        "dennislee22-vllm-7B-2gpuA10080GB-0.5GRAM-same-node": {"util": 0.5, "tp": 2, "link": DENNISLEE_SAME_NODE},
        # TP across two nodes: the memory rule needs only the link's class (a network).
        "dennislee22-vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes": {
            "util": 0.5,
            "tp": 2,
            "link": "roce-100",
            "sampler": "native",
        },
        "dennislee22-vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes": {"util": 0.8, "tp": 4, "link": "roce-100"},
    }
)


def dennislee_cases() -> list[Case]:
    cases = []
    for log in engine_logs()["logs"]:
        if log["id"] not in MAPPING:
            continue
        m = MAPPING[log["id"]]
        gpt = "120B" in log["id"]
        model, model_id = (catalogue("gpt-oss-120b"), "gpt-oss-120b") if gpt else _qwen2_7b()
        plan = serving_plan(
            model,
            model_id,
            log["gpu_catalogue_id"],
            engine="vllm",
            vllm_version="0.10",
            context=16384,
            tensor_parallel=m["tp"],
            gpu_memory_utilization=m["util"],
            max_num_batched_tokens=2048,
            max_num_seqs=256,
            weight_dtype="mxfp4" if gpt else "bf16",
            link=m.get("link", "auto"),
            vllm_sampler=m.get("sampler", "flashinfer"),
        )
        cases.append(kv_tokens_case(log["id"], log["source_id"], plan, number(log["logged"]["kv_cache_tokens"])))
        cases.append(weights_case(log, plan))
    return cases


def weights_case(log: dict[str, Any], plan: Plan) -> Case:
    logged = log["logged"]
    gib = number(logged.get("weights_gib") or logged.get("weights_gb"))
    return Case(
        id=log["id"],
        source=log["source_id"],
        table="weights",
        what="weights per GPU (GiB)",
        logged=gib,
        predict=lambda fit: estimate_with(plan, fit).weights_bytes / GiB,
    )


@dataclass(frozen=True)
class LogCase:
    """One engine start-up log of another thread, mapped by hand onto a plan: the model (from the
    catalogue, or from its config.json when ``config`` is set), the card, the engine settings the
    log or its thread states, and how its KV figure is read (``kv``: "tokens" as printed, "gib"
    as whole blocks of the printed GiB with ``note`` saying so, "" for a log without one).
    ``held_out``: a log found after the constants were set and never used to fit any (issue 23's
    held-out check): its KV case identifies no constant and the summary reports it on its own line."""

    log_id: str
    model_id: str
    gpu: str
    settings: Mapping[str, Any]
    kv: str = "tokens"
    note: str = ""
    weights: bool = True
    config: bool = False
    held_out: bool = False


# Issue 23's held-out logs (found after the constants were set; fit nothing; engine_logs.json
# has each log's settings, quote and assumptions). Expert parallelism is no serving input of the
# plan: a TP + EP run is mapped as TP over the same GPUs (each GPU holds whole experts instead of
# a slice of every one: the same bytes). A 2507 Qwen3 checkpoint has its base model's tensors.
# The API server's defaults on these cards (2,048 tokens a step, as the 0.9.2 and 0.10.2 logs
# print, and 256 sequences), and the 0.27.1 post's flags.
_V1_SERVE: Final = MappingProxyType(dict(engine="vllm", max_num_batched_tokens=2048, max_num_seqs=256))
_L40S_EP: Final = MappingProxyType(dict(_V1_SERVE, vllm_version="0.10", context=32768, weight_dtype="fp8"))
_A100_QWEN3_8B: Final = MappingProxyType(dict(_V1_SERVE, context=40960, gpu_memory_utilization=0.9))
_RTX_PRO_235B: Final = MappingProxyType(
    dict(
        engine="vllm",
        vllm_version="0.27",
        context=32768,
        gpu_memory_utilization=0.9,
        max_num_seqs=32,
        weight_dtype="fp8",
    )
)


def _held(log_id: str, model_id: str, gpu: str, weights: bool = True, kv: str = "tokens", **settings: Any) -> LogCase:
    """A held-out log's case: its KV tokens as printed (``kv`` "" where FIGURES_NOT_COMPARABLE says why
    not), from the catalogue or a committed config."""
    config = (CONFIGS / f"{model_id}.json").exists()
    return LogCase(
        log_id, model_id, gpu, MappingProxyType(settings), kv=kv, weights=weights, config=config, held_out=True
    )


# The third round (2026-12-04): committed server logs of independent repositories, each card
# named by the log or its repository (engine_logs.json says how). vLLM 0.10.x on the H100s takes
# the API server's 8,192 tokens and 1,024 sequences, which the plan resolves itself; the TP 8
# pools are the smallest worker's, which the engine unifies the workers to.
_V010_TP8_H100: Final = MappingProxyType(
    dict(engine="vllm", vllm_version="0.10", context=32768, tensor_parallel=8, kv_dtype="fp8")
)
THIRD_ROUND_LOGS: Final = (
    _held(
        "abinav-vllm0110-llama31-8b-l4",
        "llama-3.1-8b",
        "l4",
        engine="vllm",
        max_num_batched_tokens=2048,
        vllm_version="0.11",
        context=32000,
        gpu_memory_utilization=0.92,
        max_num_seqs=128,
    ),
    _held(
        "kumaxxp-vllm0130-qwen25-14b-awq-a5000",
        "qwen2.5-14b",
        "rtx-a5000",
        **_V1_SERVE,
        vllm_version="0.13",
        context=8192,
        weight_dtype="awq-int4",
        kv_dtype="fp16",
    ),
    _held(
        "sridhar-vllm0191-phi3-mini-3090-wsl",
        "phi-3-mini-4k-instruct",
        "rtx-3090",
        **_V1_SERVE,
        vllm_version="0.19",
        context=4096,
        gpu_memory_utilization=0.85,
        weight_dtype="fp16",
        kv_dtype="fp16",
    ),
    _held(
        "kolyangg-vllm0102-qwen3-30b-a3b-h100",
        "qwen3-30b-a3b",
        "h100-sxm",
        engine="vllm",
        vllm_version="0.10",
        context=6144,
    ),
    _held(
        "nnamdiodozi-vllm0221-qwen3-30b-a3b-fp8-h100",
        "qwen3-30b-a3b",
        "h100-sxm",
        engine="vllm",
        vllm_version="0.22",
        context=8192,
        gpu_memory_utilization=0.92,
        max_num_batched_tokens=8192,
        max_num_seqs=64,
        weight_dtype="fp8",
    ),
    _held(
        "shanghaoli-vllm0102-qwen25-3b-4090",
        "qwen2.5-3b",
        "rtx-4090",
        engine="vllm",
        vllm_version="0.10",
        context=4096,
        max_num_seqs=1,
        weight_dtype="fp16",
        kv_dtype="fp16",
    ),
    _held("daisuketakai-vllm0100-qwen3-32b-8xh100-tp8-fp8kv", "qwen3-32b", "h100-sxm", **_V010_TP8_H100),
    _held(
        "daisuketakai-vllm0100-qwen3-235b-fp8-8xh100-tp8-ep-fp8kv",
        "qwen3-235b-a22b",
        "h100-sxm",
        **_V010_TP8_H100,
        weight_dtype="fp8",
    ),
    _held(
        "lukejyk-vllm0261dev-qwen3-coder-30b-a3b-a100",
        "qwen3-30b-a3b",
        "a100-80gb-sxm",
        engine="vllm",
        vllm_version="0.26",
        context=131072,
        gpu_memory_utilization=0.9,
        max_num_seqs=16,
        vllm_sampler="flashinfer",  # the log: "Using FlashInfer for top-p & top-k sampling"
    ),
)


# The fourth round (2026-12-05, issue 23's newest eras): committed server logs of six more
# independent repositories, each card named by the log (a device name, compute capability and
# total) or by its repository, except the A100 40GB, which the record identifies from the log's
# budget. engine_logs.json has each log's quote, settings and assumptions.
FOURTH_ROUND_LOGS: Final = (
    _held(
        "vediosifter-vllm0120-qwen3-30b-a3b-rtxpro6000",
        "qwen3-30b-a3b",
        "rtx-pro-6000-blackwell",
        engine="vllm",
        vllm_version="0.12",
        context=4096,
        gpu_memory_utilization=0.85,
    ),
    _held(
        "anton-vllm0100-qwen3-30b-a3b-awq-3090",
        "qwen3-30b-a3b",
        "rtx-3090",
        **_V1_SERVE,
        vllm_version="0.10",
        context=2048,
        gpu_memory_utilization=0.8,
        weight_dtype="awq-int4",
    ),
    _held(
        "eslam-vllm0300-qwen25-1.5b-t4",
        "qwen2.5-1.5b",
        "t4",
        **_V1_SERVE,
        vllm_version="0.30",
        context=4096,
        gpu_memory_utilization=0.85,
        weight_dtype="fp16",
        kv_dtype="fp16",
    ),
    _held(
        "faradawn-vllm0112-llama3-8b-h200", "llama-3.1-8b", "h200-sxm", engine="vllm", vllm_version="0.11", context=1024
    ),
    # SGLang before 0.5.10 with its default memory fraction (0.836 printed) on an 80 GB Ampere card.
    _held(
        "cli991-sglang059-qwen25-3b-a100-80gb",
        "qwen2.5-3b",
        "a100-80gb-sxm",
        weights=False,
        engine="sglang",
        sglang_version="0.5.9",
        context=32768,
    ),
    _held(
        "kuuroooo-vllm0190-llama31-70b-awq-2xa100-40gb-tp2",
        "llama-3.1-70b",
        "a100-40gb-sxm",
        **_V1_SERVE,
        vllm_version="0.19",
        context=8192,
        tensor_parallel=2,
        weight_dtype="awq-int4",
        kv_dtype="fp16",
    ),
)


# The fifth round (2026-12-05, issue 23 round two; engine_logs.json has each quote, settings and
# assumptions): vLLM 0.29.0 on an RTX 5060 Ti 16GB under Docker on WSL2
# (Freshair129/Private-Runtime-Platform@f52b9b9), a Qwen3-4B fine-tune in bf16 at 0.7 and 8,192
# tokens, started with a cold torch.compile cache (docs/SERVING.md: why it is +43 %).
# GIO443/statecraft-serving's vLLM 0.30.0 runs (below): the flags both env.json files list.
_GIO443: Final = MappingProxyType(
    dict(
        _V1_SERVE, vllm_version="0.30", context=16384, gpu_memory_utilization=0.8, weight_dtype="bf16", kv_dtype="bf16"
    )
)
FIFTH_ROUND_LOGS: Final = (
    # Its weights are scored; its KV figure is not (FIGURES_NOT_COMPARABLE: the log prints a cold compile
    # inside the profile and WSL2's whole-card total, neither of which a plan states).
    _held(
        "freshair-vllm0290-qwen3-4b-5060ti-wsl",
        "qwen3-4b",
        "rtx-5060-ti-16gb",
        kv="",
        **_V1_SERVE,
        vllm_version="0.29",
        context=8192,
        gpu_memory_utilization=0.7,
    ),
    # vLLM 0.31.0 with every default (0.92, the model's 131,072 tokens, vllm serve's 2,048
    # batched tokens on an A100) on one A100 80GB: course notes whose repository the index
    # tools could not resolve (engine_logs.json, code-index file 70682754770).
    # vLLM 0.30.0, Qwen2.5-1.5B-Instruct bf16 at 0.8 and 16,384 tokens on an RTX 4070 Laptop GPU
    # under WSL2 (GIO443/statecraft-serving@992a95b, the harness's parse of the start-up lines).
    _held("gio443-vllm0300-qwen25-1.5b-4070laptop-wsl", "qwen2.5-1.5b", "rtx-4070-laptop", **_GIO443),
    # The same run with --enforce-eager (h68eager): no CUDA-graph estimate before the pool, no compile.
    _held(
        "gio443-vllm0300-qwen25-1.5b-4070laptop-wsl-eager",
        "qwen2.5-1.5b",
        "rtx-4070-laptop",
        **_GIO443,
        cuda_graphs=False,
    ),
    _held(
        "a100notes-vllm0310-llama31-8b-a100-80gb",
        "llama-3.1-8b",
        "a100-80gb-sxm",
        **_V1_SERVE,
        vllm_version="0.31",
        context=131072,
    ),
)


# The sixth round (2026-12-05, h41srv): SGLang 0.5.20 on the RTX 4050 Laptop GPU, which entered the
# catalogue for them (Tegdam/pickr_ai@54ed83a, section 6.3: Qwen2.5-3B-Instruct-AWQ forced onto the
# awq kernel, 2,048 tokens, under WSL2). docs/SERVING.md says why both read above the pool.
_TEGDAM_SGLANG: Final = MappingProxyType(
    dict(engine="sglang", sglang_version="0.5.20", context=2048, weight_dtype="awq-int4", kv_dtype="fp16")
)
SIXTH_ROUND_LOGS: Final = (
    _held(
        "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f080",
        "qwen2.5-3b",
        "rtx-4050-laptop",
        weights=False,
        **_TEGDAM_SGLANG,
        mem_fraction_static=0.8,
    ),
    _held(
        "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f060",
        "qwen2.5-3b",
        "rtx-4050-laptop",
        weights=False,
        **_TEGDAM_SGLANG,
        mem_fraction_static=0.6,
    ),
)


HELD_OUT_LOGS: Final = (
    # SGLang 0.4.3.post4, QwQ-32B (Qwen2.5-32B's tensors, 131,072 positions) on four L4s, and
    # SGLang 0.4.2.x on one RTX 3090 driving a Windows desktop; the fractions are the printed ones.
    _held(
        "durand-sglang0434-qwq32b-4xl4-tp4",
        "qwen2.5-32b",
        "l4",
        weights=False,
        engine="sglang",
        sglang_version="0.4.3",
        context=131072,
        tensor_parallel=4,
        mem_fraction_static=0.85,
    ),
    _held(
        "jerryzsj-sglang042-r1-distill-qwen7b-3090",
        "deepseek-r1-distill-qwen-7b",
        "rtx-3090",
        weights=False,
        engine="sglang",
        sglang_version="0.4.2",
        context=131072,
        mem_fraction_static=0.88,
    ),
    # vLLM 0.9.2 and 0.19.1 serving Qwen3-8B with their defaults on one A100 40GB.
    _held("tokenkaki-vllm092-qwen3-8b-a100-40gb", "qwen3-8b", "a100-40gb-sxm", **_A100_QWEN3_8B, vllm_version="0.9"),
    _held("tokenkaki-vllm0191-qwen3-8b-a100-40gb", "qwen3-8b", "a100-40gb-sxm", **_A100_QWEN3_8B, vllm_version="0.19"),
    # vLLM 0.10.2, Qwen3 FP8 MoE checkpoints with --enable-expert-parallel on L40S machines.
    _held(
        "roethig-vllm0102-qwen3-235b-fp8-8xl40s-tp8-ep",
        "qwen3-235b-a22b",
        "l40s",
        **_L40S_EP,
        tensor_parallel=8,
        gpu_memory_utilization=0.9,
    ),
    _held(
        "roethig-vllm0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep",
        "qwen3-30b-a3b",
        "l40s",
        weights=False,
        **_L40S_EP,
        tensor_parallel=2,
        gpu_memory_utilization=0.95,
    ),
    # vLLM 0.27.1, Qwen3-235B-A22B FP8 on four RTX PRO 6000 Blackwell over PCIe: TP 4, TP 4 with
    # EP, PP 4 (the last two from the post's table; PP's per-GPU figures are one for four stages).
    _held(
        "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-tp4",
        "qwen3-235b-a22b",
        "rtx-pro-6000-blackwell",
        **_RTX_PRO_235B,
        tensor_parallel=4,
    ),
    _held(
        "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-tp4-ep",
        "qwen3-235b-a22b",
        "rtx-pro-6000-blackwell",
        **_RTX_PRO_235B,
        tensor_parallel=4,
    ),
    _held(
        "kubesimplify-vllm0271-qwen3-235b-fp8-4xrtxpro6000-pp4",
        "qwen3-235b-a22b",
        "rtx-pro-6000-blackwell",
        weights=False,
        **_RTX_PRO_235B,
        pipeline_parallel=4,
    ),
    *THIRD_ROUND_LOGS,
    *FOURTH_ROUND_LOGS,
    *FIFTH_ROUND_LOGS,
    *SIXTH_ROUND_LOGS,
)


OTHER_LOGS: Final = (
    # Issue #21348's SGLang run: mem_fraction_static 0.93 given, the config's 40,960 tokens, FP8
    # weights (block-scaled FP8: scales under 0.1 %). SGLang "not stated (2025-07)": the releases
    # of that month, 0.4.9 (2025-07-06) and 0.4.10 (2025-07-31), share one rule
    # (core.serving.sglang_versions); the fraction is given anyway.
    LogCase(
        "vllm21348-qwen3-235b-fp8-h100-tp4-sglang",
        "qwen3-235b-a22b",
        "h100-sxm",
        MappingProxyType(
            dict(
                engine="sglang",
                context=40960,
                tensor_parallel=4,
                weight_dtype="fp8",
                mem_fraction_static=0.93,
                sglang_version="0.4.10",
            )
        ),
        weights=False,
        config=True,
    ),
    # Issue #13061: vLLM 0.7 (V0), 2 × RTX 4090, utilisation 0.98, the model's 131,072 tokens, so
    # chunked prefill on (past 32,768) with 2,048 tokens a step.
    LogCase(
        "vllm13061-r1-distill-qwen14b-2x4090-tp2",
        "deepseek-r1-distill-qwen-14b",
        "rtx-4090",
        MappingProxyType(
            dict(
                engine="vllm",
                vllm_version="0.7",
                context=131072,
                tensor_parallel=2,
                gpu_memory_utilization=0.98,
                max_num_batched_tokens=2048,
            )
        ),
        kv="gib",
        note="tokens: whole blocks of the logged 8.69 GiB (the record's doubt: its 81,536 is not)",
    ),
    # PR #24577: ~0.10.2, lm-eval's offline LLM class (its defaults on an A100: 8,192 tokens,
    # 256 sequences), utilisation 0.9, 4,096 tokens. It runs VLLM_ATTENTION_BACKEND=FLASHINFER, so
    # FlashInfer is installed, and 0.10's TopKTopPSampler then takes FlashInfer's sampler.
    LogCase(
        "vllm24577-qwen3-0.6b-a100-bf16kv",
        "qwen3-0.6b",
        "a100-80gb-sxm",
        MappingProxyType(
            dict(
                engine="vllm",
                vllm_version="0.10",
                context=4096,
                gpu_memory_utilization=0.9,
                max_num_batched_tokens=8192,
                max_num_seqs=256,
                vllm_sampler="flashinfer",
            )
        ),
        config=True,
    ),
    # myoceane: vLLM 0.19.0, gpt-oss-20b (MXFP4) on an A100 80GB, utilisation 0.65, 131,072 tokens;
    # the page is cut before the token line: whole blocks of the 36.56 GiB printed.
    LogCase(
        "myoceane-gpt-oss-20b-a100-0.65",
        "gpt-oss-20b",
        "a100-80gb-sxm",
        MappingProxyType(
            dict(
                engine="vllm",
                vllm_version="0.19",
                context=131072,
                gpu_memory_utilization=0.65,
                weight_dtype="mxfp4",
            )
        ),
        kv="gib",
        note="tokens: whole blocks of the logged 36.56 GiB",
    ),
    # Held out (found after the constants were set; fits nothing): issue #17327, bedovyy's RTX 3090
    # with VLLM_USE_V1=0 (the V0 engine: 0.7's rules, the last release whose default it is),
    # utilisation 0.9, 8 sequences, the model's 40,960 tokens (so V0's chunked prefill, 2,048 a
    # step), W4A16 weights as GPTQ int4. The block count is cut in the excerpt: whole blocks of the
    # 5.34 GiB printed.
    LogCase(
        "vllm17327-qwen3-30b-a3b-w4a16-3090-v0",
        "qwen3-30b-a3b",
        "rtx-3090",
        MappingProxyType(
            dict(
                engine="vllm",
                vllm_version="0.7",
                context=40960,
                gpu_memory_utilization=0.9,
                max_num_seqs=8,
                max_num_batched_tokens=2048,
                weight_dtype="gptq-int4",
            )
        ),
        kv="gib",
        note="tokens: whole blocks of the logged 5.34 GiB (the excerpt cuts the block count)",
        held_out=True,
    ),
    # Issue #27508 (gpt-oss-120b, ~0.11.0, one H100): listed in NOT_EXPRESSIBLE with why.
    # Issue #33155: 0.14.1, one H100, only the weights line (the start ran out of memory).
    LogCase(
        "vllm33155-gpt-oss-120b-h100-v0141-weights",
        "gpt-oss-120b",
        "h100-sxm",
        MappingProxyType(dict(engine="vllm", vllm_version="0.14", context=8192, weight_dtype="mxfp4")),
        kv="",
    ),
    *HELD_OUT_LOGS,
)


# Memory other processes held on the card (hardware.held_by_others), read from the log's own printed free memory before
# the engine loads, never fitted: held = what SGLang reads free after start-up on a card nothing else holds
# (core.serving.engines.sglang_free_at_start, the default fit) less the printed figure, at least 0. The line that gives
# it is the record's "free_printed" field (engine_logs.json: its "logged" key and the line quoted); logs without one
# are left at 0. SGLang's "GB" is GiB (sglang/srt/utils.py get_available_gpu_memory: bytes / (1 << 30)).
def free_printed_keys() -> Mapping[str, str]:
    """Log id -> the "logged" key of its printed free memory before the weights (the records' "free_printed")."""
    return {log["id"]: log["free_printed"]["key"] for log in engine_logs()["logs"] if "free_printed" in log}


# Tegdam's SGLang table prints no line before the weights; vLLM 0.29.0 started on the same machine prints
# "Free memory on device (4.95/6.0 GiB) on startup" (engine_logs.json, the logs' assumptions): its free
# memory after a CUDA start-up, the figure SGLang reads at the same point.
FREE_PRINTED_ON_THE_MACHINE_GIB: Final = MappingProxyType(
    {
        "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f080": 4.95,
        "tegdam-sglang0520-qwen25-3b-awq-4050laptop-wsl-f060": 4.95,
    }
)


# Logs that ran under WSL2 (hardware.platform, core.platform_rules: the driver's total is the whole card): the records
# whose "platform" field says so, with what shows it; never fitted (every one is held out). Set before the printed
# free memory is read, so held = the whole card's free less the printed figure.
def wsl2_logs() -> Mapping[str, str]:
    """Log id -> what shows the log ran under WSL2 (the records' "platform" field)."""
    logs = engine_logs()["logs"]
    return {log["id"]: log["platform"]["shown_by"] for log in logs if log.get("platform", {}).get("os") == "wsl2"}


# A log's torch.compile cache at start-up (core.inputs.CompileCache): the records' "compile" field, "cold" where the log
# prints a compile ("Compiling a graph ...", "saved AOT compiled function"), its notes state one or it is inferred
# (a container that keeps no ~/.cache/vllm), "warm" where it prints "Directly load AOT compilation"; each with its
# basis. A record without one is planned warm, the plan's default.
def compile_states() -> Mapping[str, dict[str, str]]:
    """Log id -> the record's "compile" field (cache, basis, evidence)."""
    return {log["id"]: log["compile"] for log in engine_logs()["logs"] if "compile" in log}


def on_platform(log: dict[str, Any], plan: Plan) -> Plan:
    """The plan on the platform the log ran under (WSL2 where its record says so, else native Linux) and with its
    compile cache as the record has it (cold or warm; warm where it says nothing)."""
    if log.get("platform", {}).get("os") == "wsl2":
        plan = plan.with_hardware(platform=Platform.WSL2)
    if log.get("compile", {}).get("cache") == CompileCache.COLD:
        plan = plan.with_inference(compile_cache=CompileCache.COLD)
    return plan


def with_printed_free(log: dict[str, Any], plan: Plan) -> Plan:
    """The plan with the memory other processes held, where the log prints the free memory before the
    engine loads (the record's "free_printed", FREE_PRINTED_ON_THE_MACHINE_GIB); else the plan as it is."""
    if "free_printed" in log:
        printed = number(log["logged"][log["free_printed"]["key"]])
    elif log["id"] in FREE_PRINTED_ON_THE_MACHINE_GIB:
        printed = FREE_PRINTED_ON_THE_MACHINE_GIB[log["id"]]
    else:
        return plan
    headless = sglang_free_at_start(plan, find_gpu(plan.hardware.gpu), DEFAULT_FIT)
    return plan.with_hardware(held_by_others=max(0.0, headless - printed * GiB))


# Logs whose own lines show the machine ran a driver of the older era (torch_capacity.py's "old", before
# R560), which kept less of every card than today's (the RTX 3090 23.68-23.70 GiB then, 23.56-23.58 now;
# the RTX 3060 12GB 11.75 then, 11.63 now): the card's total is then the median of its old-era PyTorch
# totals (benchmarks/realgpu/torch_capacity.json), not the current one the catalogue's reserve gives. No
# plan input states the driver, so the benchmark states it, as it states memory held by others; never
# fitted. The records' "old_driver" field: the card and the line that shows it.
def old_driver_logs() -> Mapping[str, str]:
    """Log id -> the card whose old-era reserve applies (the records' "old_driver" field)."""
    return {log["id"]: log["old_driver"]["card"] for log in engine_logs()["logs"] if "old_driver" in log}


def old_driver_reserve(card: str) -> float:
    """What the driver kept of ``card`` before R560: its memory less the median of its old-era totals."""
    old = [
        r["total_gib"]
        for r in capacity_records()
        if r["card"] == card and capacity_comparable(r) and capacity_era(r) == "old"
    ]
    return find_gpu(card).memory_bytes - statistics.median(old) * GiB


def on_old_driver(case: Case, card: str) -> Case:
    """The case predicted with ``card``'s old-era reserve in place of the fitted one."""
    reserve, predict = old_driver_reserve(card), case.predict
    note = f"{case.note}; " if case.note else ""
    return replace(
        case,
        predict=lambda fit: predict(with_constant(fit, f"driver:{card}", reserve)),
        note=f"{note}the log's driver is of the older era (its record's old_driver)",
    )


def other_vllm_cases() -> list[Case]:
    """The single vLLM / SGLang logs of other threads, each mapped by hand (OTHER_LOGS)."""
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    cases: list[Case] = []
    for entry in OTHER_LOGS:
        log = logs[entry.log_id]
        model = config_model(entry.model_id) if entry.config else catalogue(entry.model_id)
        plan = on_platform(log, serving_plan(model, entry.model_id, entry.gpu, **entry.settings))
        plan = with_printed_free(log, plan)
        if entry.kv == "tokens":
            logged = number(log["logged"]["kv_cache_tokens"])
        elif entry.kv == "gib":
            logged = tokens_from_gib(plan, number(log["logged"]["kv_cache_gib"]))
        if entry.kv:
            case = kv_tokens_case(log["id"], log["source_id"], plan, logged, entry.note, held_out=entry.held_out)
            cases.append(on_old_driver(case, log["old_driver"]["card"]) if "old_driver" in log else case)
        if entry.weights:
            cases.append(weights_case(log, plan))
    return cases


# Old-corpus logs that became expressible after every constant was fixed, so they set none (held out):
# DeepSeek-V2-Lite-Chat, once the model spec described multi-head latent attention (branch h55mla).
OLD_CORPUS_HELD_OUT: Final = frozenset({"deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192"})


def old_corpus_cases() -> list[Case]:
    """The logs the 0.19 rules were read against: llm-d-planner's (vLLM 0.19.0, H100) and the
    0.6.x ones of vLLM's threads, each its own source."""
    cases: list[Case] = []
    for entry in old_logs()["entries"]:
        if "image-text" in entry.get("outside_target", "") or entry["id"] in OLD_NOT_EXPRESSIBLE:
            continue  # listed by unexpressed()
        source = old_source(entry)
        version = "0.19" if entry["vllm_version"].startswith("0.19") else "0.6"
        # The entry's plan as benchmarks/serving.py reads it (the rules' own scoring), at its release.
        plan = vllm_plan(entry).with_inference(vllm_version=version)
        logged = entry["logged"]
        tokens = logged.get("kv_cache_tokens") or tokens_from_gib(plan, logged["kv_cache_gib"])
        held = entry["id"] in OLD_CORPUS_HELD_OUT
        cases.append(
            kv_tokens_case(entry["id"], source, plan, float(tokens), entry.get("model_note", ""), held_out=held)
        )
        cases.append(
            Case(
                entry["id"],
                source,
                "weights",
                "weights per GPU (GiB)",
                logged["weights_gib"],
                lambda fit, plan=plan: estimate_with(plan, fit).weights_bytes / GiB,
            )
        )
    return cases


def old_source(entry: dict[str, Any]) -> str:
    url = entry["url"]
    if "llm-d-planner" in url:
        return "llm-d-planner"
    return "vllm-pr-10511" if "10511" in url else "vllm-issue-10517"


# What the driver keeps (card − torch's total), where a log shows the total: printed, or
# implied by two runs at two utilisations ((KV₂ − KV₁) ÷ (u₂ − u₁), weights and the rest equal).
def graph_observations() -> list[tuple[str, float, float, str]]:
    """(source, layers x graphs, bytes, log) of every mapped vLLM log of a release that sets its CUDA-graph
    estimate aside before the KV cache (0.20 on) and prints it: the fit of core.serving.fit.DEFAULT_GRAPHS."""
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    seen: list[tuple[str, float, float, str]] = []
    for entry in OTHER_LOGS:
        log = logs[entry.log_id]
        printed = log["logged"].get("cuda_graph_estimate_gib")
        if not printed:
            continue
        model = config_model(entry.model_id) if entry.config else catalogue(entry.model_id)
        plan = serving_plan(model, entry.model_id, entry.gpu, **entry.settings)
        if graphs_before_kv(plan.inference, plan.model):
            seen.append((log["source_id"], graph_units(plan), number(printed) * GiB, log["id"]))
    return seen


def graph_units(plan: Plan) -> float:
    """The rank's decoder layers times the CUDA graphs the plan's release captures."""
    inf, gpu = plan.inference, find_gpu(plan.hardware.gpu)
    batched, seqs = vllm_scheduler(inf, gpu)
    return float(rank_layout(plan).layers * vllm_graph_count(seqs, batched, gpu.id, inf.vllm_version))


def graph_rule_bytes(plan: Plan, fit: ServingFit) -> float:
    """core.serving.vllm_rules.vllm_graph_estimate for the plan's rank, scheduler and card."""
    inf, gpu = plan.inference, find_gpu(plan.hardware.gpu)
    batched, seqs = vllm_scheduler(inf, gpu)
    return vllm_graph_estimate(rank_layout(plan).layers, seqs, batched, gpu.id, inf.vllm_version, fit)


def fit_graphs(fit: ServingFit, graphs: list[tuple[str, float, float, str]]) -> tuple[ServingFit, list[str]]:
    """Bytes per layer per graph: the printed estimates' sum over their layers x graphs."""
    key = f"graphs:{GRAPH_PER_LAYER}"
    if not graphs:
        return with_constant(fit, key, PRIORS["graphs"]), [key]
    return with_constant(fit, key, sum(g[2] for g in graphs) / sum(g[1] for g in graphs)), []


def graph_estimate_table() -> str:
    """vLLM's printed CUDA-graph estimate against the rule, each log's source left out of the fit."""
    graphs = graph_observations()
    lines = [
        "| log | layers x graphs | printed (GiB) | rule, source left out (GiB) | fixed 0.84 GiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for source, units, printed, log_id in graphs:
        fit, _ = fit_graphs(DEFAULT_FIT, [g for g in graphs if g[0] != source])
        rule = units * fit.vllm_graph_bytes[GRAPH_PER_LAYER]
        lines.append(
            f"| {log_id} | {units:,.0f} | {printed / GiB:.2f} | {rule / GiB:.2f} | {VLLM_CUDA_GRAPH_BYTES / GiB:.2f} |"
        )
    return "\n".join(lines)


# The pool of the 0.20+ releases sets the CUDA-graph rule aside (core.serving.vllm_rules.vllm_graph_reserve) and, on a
# cold plan, the cold-compile term (core.serving.fit COLD_COMPILE_PEAK), where it set the fixed 0.84 GiB aside for
# every start until h94cold (docs/SERVING.md). Adopted because, leave one source out, it scores those logs better as a
# whole and takes none out of its 5 % band; the rows before -> after, each with the constants fitted without its source.
GRAPH_RULE_FROM: Final = GRAPH_ESTIMATE_IN_POOL_FROM  # 0.20: no log of that line in the corpus


def _fixed_graphs(*_args: object, **_kwargs: object) -> float:
    return VLLM_CUDA_GRAPH_BYTES


def graph_rule_rows(cases: list[Case]) -> list[tuple[Case, float, float]]:
    """(case, predicted as before h94cold: the fixed 0.84 GiB and no cold-compile term, predicted now) for every KV
    log of a 0.20+ vLLM plan, each with the constants fitted without its source."""
    drivers, graphs = driver_observations(), graph_observations()
    out = []
    for case in cases:
        plan = case.plan
        if case.table != "kv" or plan is None or plan.inference.engine is not Engine.VLLM:
            continue
        if not releases.at_least(plan.inference.vllm_version, GRAPH_RULE_FROM):
            continue
        kept = [c for c in cases if c.source != case.source]
        others = [g for g in graphs if g[0] != case.source]
        fit, _ = fit_constants(kept, [d for d in drivers if d[0] != case.source], others)
        with mock.patch.object(serving_engines, "vllm_graph_reserve", _fixed_graphs):
            warm = plan.with_inference(compile_cache=CompileCache.WARM)
            fixed = float(estimate_with(warm, fit).kv_cache_tokens)
        out.append((case, fixed, case.predict(fit)))
    return out


def graph_rule_summary(rows: list[tuple[Case, float, float]]) -> tuple[str, bool]:
    """The rows' summary before -> after, and whether the rule and the cold term are kept: the mean |error| falls,
    no more rows are past 5 %, and no row inside its 5 % band leaves it (issue 23's test, h94cold)."""
    before = [abs(100 * (fixed / case.logged - 1)) for case, fixed, _ in rows]
    after = [abs(100 * (now / case.logged - 1)) for case, _, now in rows]
    inside = sum(1 for b in before if b <= KV_TARGET), sum(1 for a in after if a <= KV_TARGET)
    left = [case.id for (case, _, _), b, a in zip(rows, before, after, strict=True) if b <= KV_TARGET < a]
    keep = statistics.mean(after) < statistics.mean(before) and inside[1] >= inside[0] and not left
    line = (
        f"{len(rows)} logs: within 5 % {inside[0]} -> {inside[1]}, median |error| {statistics.median(before):.1f} -> "
        f"{statistics.median(after):.1f} %, mean {statistics.mean(before):.1f} -> {statistics.mean(after):.1f} %, "
        f"worst {max(before):.1f} -> {max(after):.1f} %; rows leaving the 5 % band: {', '.join(left) or 'none'}"
    )
    return line, keep


def graph_rule_table(cases: list[Case]) -> str:
    rows = graph_rule_rows(cases)
    lines = ["| log | compile | logged | fixed 0.84 GiB, warm | error | rule + cold term | error |"]
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for case, fixed, rule in rows:
        assert case.plan is not None, case.id
        lines.append(
            f"| {case.id} | {case.plan.inference.compile_cache.value} | {case.logged:,.0f} | {fixed:,.0f} | "
            f"{100 * (fixed / case.logged - 1):+.1f} % | {rule:,.0f} | {100 * (rule / case.logged - 1):+.1f} % |"
        )
    line, keep = graph_rule_summary(rows)
    return "\n".join(lines) + f"\n\n{line} — {'kept' if keep else 'NOT BETTER'}"


# ---- the cold-compile term (core.serving.fit COLD_COMPILE_PEAK) --------------------------------------------------
COLD_KEY: Final = f"cold:{COLD_COMPILE_PEAK}"


def cold_observations(cases: list[Case], fit: ServingFit) -> list[tuple[str, float, str, str]]:
    """(source, bytes, log, how) of what each cold start of a source among ``cases`` implies the cold compile added to
    vLLM's profiled peak, on one GPU (a TP / PP log's activation and communication memory are off by more than the
    term: docs/SERVING.md h93graph): the printed peak activation less the planner's warm one and the CUDA-graph
    estimate (printed, else the rule); else what --enforce-eager freed less the rule; else the term that makes its KV
    tokens (``implied``). And the published warm / cold pair (the rejected Tegdam record): cold less warm peak."""
    sources, by_id = {c.source for c in cases}, {c.id: c for c in cases if c.table == "kv"}
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    seen: list[tuple[str, float, str, str]] = []
    for entry in OTHER_LOGS:
        log = logs[entry.log_id]
        if log.get("compile", {}).get("cache") != CompileCache.COLD or log["source_id"] not in sources:
            continue
        model = config_model(entry.model_id) if entry.config else catalogue(entry.model_id)
        plan = on_platform(log, serving_plan(model, entry.model_id, entry.gpu, **entry.settings))
        if plan.inference.tensor_parallel * plan.inference.pipeline_parallel > 1:
            continue
        printed, graphs = log["logged"], graph_rule_bytes(plan, fit)
        warm = estimate_with(plan.with_inference(compile_cache=CompileCache.WARM), fit).activation_bytes
        if "activation_gib" in printed:
            if "cuda_graph_estimate_gib" in printed:
                graphs = number(printed["cuda_graph_estimate_gib"]) * GiB
            seen.append((log["source_id"], number(printed["activation_gib"]) * GiB - warm - graphs, log["id"], "split"))
        elif "eager_frees_gib" in printed:
            seen.append((log["source_id"], number(printed["eager_frees_gib"]) * GiB - graphs, log["id"], "eager"))
        elif log["id"] in by_id:
            seen.append((log["source_id"], implied(by_id[log["id"]], fit, COLD_KEY, 0.0, 2 * GiB), log["id"], "kv"))
    for record in engine_logs()["rejected"]:
        pair = record.get("compile_pair")
        if pair and TEGDAM_SOURCE in sources:
            gap = (pair["cold"]["activation_gib"] - pair["warm"]["activation_gib"]) * GiB
            seen.append((TEGDAM_SOURCE, gap, "tegdam-vllm0290-qwen25-3b-awq-4050laptop (warm / cold pair)", "pair"))
    return seen


# The source of the published warm / cold pair (its SGLang starts are scored cases of the same source).
TEGDAM_SOURCE: Final = "tegdam-pickr-ai"


def fit_cold(fit: ServingFit, cases: list[Case]) -> tuple[ServingFit, list[str]]:
    """The cold-compile term: the median of what each cold start implies (cold_observations)."""
    fit = with_constant(fit, COLD_KEY, PRIORS["cold"])
    values = [value for _, value, _, _ in cold_observations(cases, fit)]
    value, prior = _median(values, PRIORS["cold"])
    return with_constant(fit, COLD_KEY, value), [COLD_KEY] if prior else []


def cold_table(cases: list[Case]) -> str:
    """What each cold start implies, on every source and with its own source left out."""
    lines = ["| log | source | how | implied (GiB) | term fitted without its source (GiB) |", "|---|---|---|---:|---:|"]
    everything, _ = fit_constants(cases, driver_observations())
    for source, value, log_id, how in cold_observations(cases, everything):
        without, _ = fit_constants([c for c in cases if c.source != source], driver_observations())
        term = without.vllm_cold_compile_bytes[COLD_COMPILE_PEAK]
        lines.append(f"| {log_id} | {source} | {how} | {value / GiB:.2f} | {term / GiB:.2f} |")
    return "\n".join(lines)


def driver_observations() -> list[tuple[str, str, float]]:
    """(source, card, bytes the driver keeps)."""
    seen: list[tuple[str, str, float]] = []
    for entry in old_logs()["entries"]:
        total = entry["logged"].get("total_gib")
        if total:
            seen.append((old_source(entry), entry["gpu"], find_gpu(entry["gpu"]).memory_bytes - total * GiB))
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    quarter = number(logs["dennislee22-vllm-7B-1gpuA10080GB-0.25GRAM"]["logged"]["kv_cache_gib"])
    half = number(logs["dennislee22-vllm-7B-1gpuA10080GB-0.5GRAM"]["logged"]["kv_cache_gib"])
    total = (half - quarter) / 0.25 * GiB
    seen.append(("dennislee22-vllm-benchmarking", "a100-80gb-sxm", find_gpu("a100-80gb-sxm").memory_bytes - total))
    total_b200 = number(logs["vllm21489-gemma3-4b-b200-bench-latency"]["logged"]["total_gib"]) * GiB
    seen.append(("vllm-pr-21489", "b200", find_gpu("b200").memory_bytes - total_b200))
    logged = {card for _, card, _ in seen}
    return seen + [o for o in capacity_observations() if o[1] not in logged]


# Card totals quoted from PyTorch's OOM messages (benchmarks/realgpu/torch_capacity.json): the
# message prints cudaMemGetInfo's total (pytorch/pytorch eb42ad6e, c10/cuda/CUDACachingAllocator.cpp,
# DeviceCachingAllocator::malloc), the number vLLM and SGLang size from. A card no engine log shows
# the total of takes its reserve from them when at least three messages from current stacks (no
# driver before R560, Linux, the catalogue's ECC mode) agree to 0.05 GiB: the total moved with the
# driver, so disagreeing messages say which stack ran more than what the card keeps today.
CAPACITY_SOURCE: Final = "torch-oom:"
CAPACITY_MIN_MESSAGES: Final = 3


def capacity_observations() -> list[tuple[str, str, float]]:
    """(source, card, bytes the driver keeps) from the OOM messages of cards whose current totals agree."""
    by_card: dict[str, list[dict[str, Any]]] = {}
    for record in capacity_records():
        if capacity_comparable(record) and capacity_era(record) != "old":
            by_card.setdefault(record["card"], []).append(record)
    seen = []
    for card, found in sorted(by_card.items()):
        totals = [r["total_gib"] for r in found]
        if len(found) < CAPACITY_MIN_MESSAGES or max(totals) - min(totals) > CAPACITY_TOLERANCE_GIB:
            continue
        memory = find_gpu(card).memory_bytes
        for r in found:
            where = str(r.get("url") or r["corpus_file_id"])
            seen.append((CAPACITY_SOURCE + where, card, memory - r["total_gib"] * GiB))
    return seen


# ---- llama.cpp's printed buffers ------------------------------------------------------------------
# XiongjieDai's Apple machines missing from the catalogue: the buffers do not depend on the card,
# and the speed only on its bandwidth, which these catalogue parts share (M1: 68.25 GB/s; the
# 64 GB M3 Max is the 40-core part, 400 GB/s like the 128 GB one).
APPLE_STAND_INS: Mapping[str, str] = MappingProxyType({"M1 8GB": "apple-m1-16gb", "M3max 64GB": "apple-m3-max-128gb"})


def xd_card(record: dict[str, Any]) -> str:
    if record.get("gpu_catalogue_id"):
        return str(record["gpu_catalogue_id"])
    return APPLE_STAND_INS[record["gpu"]]


def llama_plan(model: ModelSpec, model_id: str, gpu: str, **inference: Any) -> Plan:
    return serving_plan(model, model_id, gpu, engine="llamacpp", **inference)


def buffer_cases(
    case_id: str, source: str, plan: Plan, logged: Mapping[str, Any], kinds: Iterable[str] = ("model", "kv", "compute")
) -> list[Case]:
    """One case per printed GPU buffer. Model buffers are compared as sorted lists: llama.cpp
    prints them in the order of a std::map keyed by buffer-type pointers, not by GPU."""
    cases = []
    names = {"model": "model_buffer_mib", "kv": "kv_buffer_mib", "compute": "compute_buffer_mib"}
    for kind in kinds:
        printed = {
            dev: number(v) for dev, v in logged.get(names[kind], {}).items() if dev == "Metal" or dev[4:].isdigit()
        }
        if kind == "model" and printed:
            order = sorted(printed.values())
            for rank, value in enumerate(order):
                cases.append(
                    _buffer(
                        case_id,
                        source,
                        plan,
                        kind,
                        f"GPU buffer {rank + 1} of {len(order)} by size",
                        value,
                        lambda b, rank=rank: sorted(b.layout.device_weights)[rank],
                    )
                )
            continue
        for dev, value in printed.items():
            index = 0 if dev == "Metal" else int(dev[4:])
            cases.append(_buffer(case_id, source, plan, kind, dev, value, _device_getter(kind, index)))
    host = logged.get("model_buffer_mib", {}).get("CPU")
    if host and "model" in kinds:
        cases.append(_buffer(case_id, source, plan, "model", "CPU", number(host), lambda b: b.layout.host_weights))
    # The host's compute buffer: the graph's inputs (core.serving.llamacpp.host_input_bytes), no constant in it.
    for dev in ("CPU", "CUDA_Host"):
        host = logged.get("compute_buffer_mib", {}).get(dev)
        if host and "compute" in kinds:
            cases.append(_buffer(case_id, source, plan, "compute", dev, number(host), lambda b: b.host_compute))
    return cases


def _device_getter(kind: str, index: int) -> Callable[[Any], float]:
    if kind == "kv":
        return lambda b: b.device_kv[index]
    return lambda b: b.device_compute[index]


def _buffer(
    case_id: str, source: str, plan: Plan, kind: str, dev: str, mib: float, get: Callable[[Any], float]
) -> Case:
    return Case(
        f"{case_id} {kind} {dev}",
        source,
        "buffers",
        f"{kind} buffer (MiB)",
        mib,
        lambda fit: get(llamacpp_buffers(plan)) / MiB,
    )


def xiongjiedai_buffer_cases() -> list[Case]:
    cases = []
    for log in engine_logs()["logs"]:
        if log["source_id"] != "xiongjiedai-gpu-benchmarks":
            continue
        n_ctx = int(log["logged"]["n_ctx"])  # printed; the M1 8 GB run had no -c 0 and took 512
        plan = llama_plan(
            catalogue("llama-3.1-8b"),
            "llama-3.1-8b",
            xd_card(log),
            context=n_ctx,
            pipeline_parallel=log["gpu_count"],
            gguf_quant="Q4_K_M",
            cache_type="f16",
            flash_attention=False,
            ubatch=512,
            llamacpp_build=int(log["engine_version"].split()[2]),  # "llama.cpp build 2795 (bcdee0da)"
        )
        cases += buffer_cases(log["id"], log["source_id"], plan, log["logged"])
    return cases


def kv_together_case(log: dict[str, Any], plan: Plan) -> Case:
    """A log whose GPUs split the layers by free memory (a split equal shares cannot give): the KV
    buffers' sum over the GPUs, which does not depend on the split."""
    return Case(
        f"{log['id']} kv GPUs together",
        log["source_id"],
        "buffers",
        "KV buffer (MiB)",
        number(log["logged"]["kv_self_mib"]),
        lambda fit: sum(llamacpp_buffers(plan).device_kv) / MiB,
    )


def other_llamacpp_cases() -> list[Case]:
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    cases: list[Case] = []
    for case_id, ctx in (
        ("logdetective106-mistral7b-v0.2-q4ks-ctx2048", 2048),
        ("logdetective106-mistral7b-v0.2-q4ks-ctx32768", 32768),
    ):
        # llama-cpp-python's bundled llama.cpp of about 2025-01: a build between b4400 and b4500 (taken as b4450);
        # only the host's inputs depend on it, the same for every build before b7775.
        plan = llama_plan(
            mistral_v02(), "", "rtx-4090", context=ctx, gguf_quant="Q4_K_S", flash_attention=False, llamacpp_build=4450
        )
        cases += buffer_cases(case_id, logs[case_id]["source_id"], plan, logs[case_id]["logged"], ("kv", "compute"))
    # Command-R on a 4070 Ti + 3090 Ti: the layers split by free memory (12 / 28 by the KV lines),
    # which equal shares cannot give; the first GPU's compute buffer does not depend on the split
    # (it holds no output layer) and the KV buffers' sum does not either.
    log = logs["llamacpp6122-commandr-4070ti-3090ti-4k"]
    plan = llama_plan(
        command_r(), "", "rtx-3090-ti", context=4096, pipeline_parallel=2, gguf_quant="Q4_K_M", flash_attention=False
    )
    cases += buffer_cases(
        log["id"], log["source_id"], plan, {"compute_buffer_mib": {"CUDA0": "672.01 MiB"}}, ("compute",)
    )
    cases.append(kv_together_case(log, plan))
    # Qwen2.5-Coder-32B with q8_0 KV and flash attention on two GPUs split by free memory
    # (41 / 23 layers): the KV together, and each GPU's compute buffer (the second holds the output).
    log = logs["llamacpp11200-qwen25coder32b-q8kv-32k-2gpu"]
    plan = llama_plan(
        catalogue("qwen2.5-32b"),
        "qwen2.5-32b",
        "rtx-3090-ti",
        context=32768,
        pipeline_parallel=2,
        gguf_quant="Q8_0",
        cache_type="q8_0",
        flash_attention=True,
    )
    cases.append(kv_together_case(log, plan))
    # Its compute buffers: listed in FIGURES_NOT_COMPARABLE with why.
    # Ollama's new engine, Mistral Small 3.1 (architecture mistral3) in Q8_0 on two GPUs: only the
    # model buffers were printed; their sum (the split is Ollama's own, by free memory) and the host's.
    log = logs["ollama11090-mistral3-q8-2gpu-weights"]
    plan = llama_plan(
        catalogue("mistral-small-24b"),
        "mistral-small-24b",
        "rtx-3090",
        context=4096,
        pipeline_parallel=2,
        gguf_quant="Q8_0",
    )
    # The GPUs' model buffers: listed in FIGURES_NOT_COMPARABLE with why.
    cases.append(
        Case(
            f"{log['id']} model CPU",
            log["source_id"],
            "buffers",
            "model buffer (MiB)",
            680.0,
            lambda fit, plan=plan: llamacpp_buffers(plan).layout.host_weights / MiB,
        )
    )
    return cases + hybrid_rs_cases(logs) + logits_cap_cases(logs) + llama_bench_size_cases()


def qwen36_27b_recurrent() -> ModelSpec:
    """The Gated DeltaNet stack of a 64-layer Qwen3.5/3.6 27B (Qwen/Qwen3.6-27B config.json: 48 value heads × 128,
    16 key heads × 128, kernel 4, every fourth of the 64 layers full attention) on Qwen3-Next's spec, whose mixer it
    is: only its recurrent-state buffer is compared, which depends on nothing else."""
    return replace(
        catalogue("qwen3-next-80b-a3b-instruct"),
        num_layers=64,
        attention_layers=16,
        recurrent_layers=48,
        layer_pattern="MMM*" * 16,  # its layer_types: three linear_attention layers, then full_attention
        recurrent_heads=48,
        recurrent_head_dim=128,
        recurrent_inner=48 * 128,
        recurrent_groups=16,
        recurrent_state=128,
        recurrent_conv_kernel=4,
    )


def hybrid_rs_cases(logs: Mapping[str, dict[str, Any]]) -> list[Case]:
    """llama_memory_recurrent's printed size over every device (core.serving.llamacpp_hybrid: f32 R and S rows,
    one cell a sequence), held out: no constant enters it. The card is not stated and does not matter."""
    cases = []
    for case_id in ("llamacpp23792-qwen36-27b-rs-2seq", "llamacpp23792-qwen36-27b-rs-3seq"):
        log = logs[case_id]
        slots = int(log["logged"]["cells"])
        # A hybrid's default plan is refused off vLLM and llama.cpp: the inference is given whole.
        served = Inference(engine=Engine.LLAMACPP, concurrent=slots, context=4096)
        plan = Plan(model=qwen36_27b_recurrent(), hardware=Hardware(gpu="h100-sxm"), inference=served)
        cases.append(
            Case(
                f"{case_id} RS all devices",
                log["source_id"],
                "buffers",
                "RS buffer (MiB)",
                number(log["logged"]["rs_size_mib"]),
                lambda fit, plan=plan: (sum(llamacpp_buffers(plan).device_rs) + llamacpp_buffers(plan).host_rs) / MiB,
            )
        )
    return cases


# drauh's four runs of one master (ggml-org/llama.cpp issue #23527, engine_logs.json "llamacpp23527-..."): the build
# whose rules each run has (the reserve's logits by core.serving.llamacpp.output_rows, the mask by mask_cast), and
# whether its CUDA0 figure is scored. Held out: no constant is fitted on them. The host's buffer (the graph's inputs)
# is scored for all four; the two GPU figures left out are in FIGURES_NOT_COMPARABLE with why.
LOGITS_CAP_RUNS: Final = (
    ("baseline", FA_MASK_F16_FROM_BUILD - 1, True),
    ("cap", FA_MASK_F16_FROM_BUILD - 1, None),
    ("pr23764", FA_MASK_F16_FROM_BUILD, True),
    ("cap-pr23764", SERVER_OUTPUTS_FROM_BUILD, None),
)


def logits_cap_cases(logs: Mapping[str, dict[str, Any]]) -> list[Case]:
    """The reserve's logits and the mask, A/B (issue #23527): each run's CUDA0 and CUDA_Host compute buffers at the
    rules of its build. A hybrid is planned at a current build only, so the build is passed to the rules."""
    cases: list[Case] = []
    for tag, build, logits in LOGITS_CAP_RUNS:
        log = logs[f"llamacpp23527-qwen36-35b-a3b-150k-ub4096-{tag}"]
        served = Inference(
            engine=Engine.LLAMACPP,
            context=150_000,
            concurrent=1,
            ubatch=4096,
            cache_type="q8_0",
            flash_attention=True,
            gguf_quant="Q4_K_M",
        )
        plan = Plan(model=catalogue("qwen3.5-35b-a3b"), hardware=Hardware(gpu="rtx-3080"), inference=served)
        cells = context_cells(plan)
        printed = log["logged"]["compute_buffer_mib"]
        cases.append(
            Case(
                f"{log['id']} compute CUDA_Host",
                log["source_id"],
                "buffers",
                "compute buffer (MiB)",
                number(printed["CUDA_Host"]),
                lambda fit, plan=plan, cells=cells, build=build: host_input_bytes(plan, cells, build=build) / MiB,
            )
        )
        if logits is None:
            continue
        cases.append(
            Case(
                f"{log['id']} compute CUDA0",
                log["source_id"],
                "buffers",
                "compute buffer (MiB)",
                number(printed["CUDA0"]),
                lambda fit, plan=plan, cells=cells, build=build: (
                    compute_buffer_bytes(plan, cells, output=True, split=False, build=build) / MiB
                ),
            )
        )
    return cases


MODEL_SIZES: Mapping[str, tuple[str, str, str]] = MappingProxyType(
    {  # the size column of llama-bench's table, per (model, type): (catalogue id, GGUF type, card)
        "llama 8B Q4_K - Medium": ("llama-3.1-8b", "Q4_K_M", "rtx-4090"),
        "llama 8B F16": ("llama-3.1-8b", "F16", "rtx-4090"),
        "llama 70B Q4_K - Medium": ("llama-3.1-70b", "Q4_K_M", "a100-80gb-sxm"),
        "llama 70B F16": ("llama-3.1-70b", "F16", "apple-m2-ultra-192gb"),
        "llama 3B Q4_K - Medium": ("llama-3.2-3b", "Q4_K_M", "rtx-4090"),
        "llama 1B Q4_K - Medium": ("tinyllama", "Q4_K_M", "rtx-4090"),
    }
)


def llama_bench_size_cases() -> list[Case]:
    """llama-bench prints each file's size (llama_model_size: every tensor): once per source and file."""
    seen: dict[tuple[str, str], Case] = {}
    for record in speed_corpus()["measurements"]:
        quote = record["quote"]
        if not quote.startswith("| llama"):
            continue
        cells = [c.strip() for c in quote.strip("|").split("|")]
        name, size = cells[0], cells[1]
        if not size.endswith(("GiB", "MiB")):
            continue  # a comparison table without llama-bench's size column (PR #19378's)
        if name not in MODEL_SIZES or (record["source_id"], name) in seen:
            continue
        model_id, quant, card = MODEL_SIZES[name]
        model = tinyllama() if model_id == "tinyllama" else catalogue(model_id)
        plan = llama_plan(
            model,
            "" if model_id == "tinyllama" else model_id,
            card,
            context=512,
            gguf_quant=quant,
            flash_attention=False,
        )
        unit = MiB if size.endswith("MiB") else GiB
        seen[(record["source_id"], name)] = Case(
            f"{record['source_id']} {name}",
            record["source_id"],
            "buffers",
            f"model size ({size.split()[-1]})",
            number(size),
            lambda fit, plan=plan, unit=unit: _file_bytes(plan) / unit,
            note="llama-bench's size column",
        )
    return list(seen.values())


def _file_bytes(plan: Plan) -> float:
    layout = llamacpp_buffers(plan).layout
    duplicated = layout.embedding_bytes if plan.model.tie_embeddings else 0.0  # the tied head is one tensor
    return sum(layout.device_weights) + layout.host_weights - duplicated


# ---- speed --------------------------------------------------------------------------------------
def _decode(plan: Plan, fit: ServingFit) -> float:
    return estimate_with(plan, fit).speed.per_request_tokens_per_s


def _prefill_seconds(plan: Plan, fit: ServingFit) -> float:
    return estimate_with(plan, fit).speed.ttft_alone_s


def llama_bench_cases() -> list[Case]:
    """llama-bench's tg (tokens generated one at a time from an empty context) and pp (a cold
    prompt of n tokens in one batch) rows: decode tokens/s and a cold prefill's time."""
    cases = []
    for record in speed_corpus()["measurements"]:
        if record["engine"] != "llama.cpp" or record["id"] == "geerling43-1b-pp512":
            continue
        if record["id"] in F16_PREFILL_OFF_TENSOR_CORES or record["id"] in PREFILL_RUN_UNSTEADY:
            continue  # listed by unexpressed()
        plan = bench_plan(record)
        if record["metric"] == "tg_tok_s":
            cases.append(
                Case(
                    record["id"],
                    record["source_id"],
                    "decode",
                    "decode tokens/s per user",
                    record["value"],
                    lambda fit, plan=plan: _decode(plan, fit),
                    identifies=speed_role(record, plan),
                    plan=plan,
                )
            )
        else:
            tokens = int(record["input_len"])
            cases.append(
                Case(
                    record["id"],
                    record["source_id"],
                    "ttft",
                    f"cold prefill of {tokens} tokens (s)",
                    tokens / record["value"],
                    lambda fit, plan=plan: _prefill_seconds(plan, fit),
                    note="llama-bench pp: a cold prompt in one batch",
                )
            )
    return cases


# Sources that time one setup with and without CUDA graphs (core.serving.llamacpp.cuda_graphs_replayed)
# with ./main, whose eval rate also holds the CPU's sampling between tokens and the April 2024
# kernels: their difference sets the launch overhead per kernel (graph_pairs); their levels are
# scored, not fitted on.
GRAPH_PAIR_SOURCES: Final = frozenset({"llamacpp-issue-6763", "llamacpp-pr-6766"})


def speed_role(record: dict[str, Any], plan: Plan | None = None) -> str:
    """What a llama.cpp decode row sets: the launch overhead (a graph on / off pair, by its
    difference), nothing (a Vulkan build: scored with ggml-vulkan's dispatches,
    core.serving.speed.VULKAN_KERNELS_PER_LAYER, not fitted on; a step bound by an Apple GPU's
    K-quant mat-vec ALUs, core.serving.speed.APPLE_MATVEC_CYCLES, whose time says nothing
    of the bandwidth), or the bandwidth efficiency and cycles (the rest)."""
    if record["source_id"] in GRAPH_PAIR_SOURCES:
        return "launch"
    if "Vulkan" in record["engine_version"]:
        return ""
    if record["quant"] in LOW_BIT_K_QUANTS_NOT_FITTED or record["source_id"] in SMALL_MODEL_SOURCES_NOT_FITTED:
        return ""
    return "" if plan is not None and alu_bound(plan) else "speed"


# CUDA tg rows of the 2- and 3-bit K-quant file types are scored, not fitted on: their mat-vecs
# do not run at the rate per byte the other types share. PR #4766's master (January 2024), one
# table, two cards: RTX 3090 Q2_K 92.69 and Q3_K_S 87.26 t/s against Q4_0 121.82 and F16 48.52 (by
# bytes read, Q2_K should lead Q4_0); P40 Q2_K 33.52 and Q3_K_S 30.93 against Q4_0 56.79. Builds
# before b2080 charge their mat-vecs' ALU time (core.serving.speed.CUDA_LOW_BIT_MATVEC_CYCLES, set
# from PR #5351's rows, a source not scored; kquant_cuda_cycles re-derives it), whose time says
# nothing of the bandwidth; later builds' rows of these types would still read at one rate per byte.
LOW_BIT_K_QUANTS_NOT_FITTED: Final = frozenset({"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L"})

# Sources whose decode rows are scored, not fitted on, because fitting them makes every other source's
# held-out decode median worse: a small model whose time per token is mostly fixed cost, which one
# count of cycles a kernel does not express. PR #12183 (RTX 4090, March 2025): Qwen2.5 1.5B +8.5 to
# +10.1 % held out from 10 to 1,000 prompt tokens where Llama 3.2 3B is within 2.7 %; fitted on, its
# rows raise the kernel cycles 4,815 -> 5,045 and the other sources' median 5.2 -> 5.3 % (4,578 ->
# 5,023 and 6.4 -> 7.2 % before PR #15035's RTX 4090 rows joined, which, fitted on, improve it).
SMALL_MODEL_SOURCES_NOT_FITTED: Final = frozenset({"llamacpp-pr-12183"})


# ggml-org/llama.cpp PR #5351 ("CUDA: mul_mat_vec_q for batch sizes > 1", JohannesGaessler, February
# 2024), the description's RTX 3090 table, "t/s master" at batch size 1 (pp512 of one-token steps,
# the mul_mat_vec_q of the January builds): the rows that set core.serving.speed.CUDA_LOW_BIT_MATVEC_CYCLES.
# Not in the scored corpus (a batch-size sweep of prompt runs, not a tg row), read as the quotes:
# "| RTX 3090 | llama 7B Q2_K_M | 1 | pp512 | 103.75 |", "| RTX 3090 | llama 7B Q3_K_S | 1 | pp512 | 98.36 |"
# ("Q2_K_M": llama-bench's name of the Q2_K file type then; Q4_0 at 131.80 beside them).
PR5351_BATCH1_MASTER: Mapping[str, float] = MappingProxyType({"Q3_K_S": 98.36, "Q2_K": 103.75})


def _pr5351_plan(quant: str) -> Plan:
    """A PR #5351 row's plan: Llama 2 7B on an RTX 3090, 512 one-token steps from an empty cache, a
    build of those weeks (read as b1786, before CUDA_LOW_BIT_MATVEC_BEFORE_BUILD)."""
    return llama_plan(
        catalogue("llama-2-7b"),
        "llama-2-7b",
        "rtx-3090",
        context=512,
        new_tokens=512,
        gguf_quant=GgufQuant(quant),
        cache_type="f16",
        flash_attention=False,
        ubatch=512,
        llamacpp_build=1786,
    )


def kquant_cuda_cycles() -> dict[GgmlType, float]:
    """CUDA_LOW_BIT_MATVEC_CYCLES re-derived from :data:`PR5351_BATCH1_MASTER`: each row's time per
    token less what the step spends outside its mat-vecs' ALU time (the estimate's step with the
    present cycles, less their ALU seconds), over its weights' ALU seconds per lane-cycle; the Q3_K_S
    file sets Q3_K, then the Q2_K file, whose attn_v and ffn_down are Q3_K, sets Q2_K."""
    cycles: dict[GgmlType, float] = {}
    for quant, kind in (("Q3_K_S", GgmlType.Q3_K), ("Q2_K", GgmlType.Q2_K)):
        plan = _pr5351_plan(quant)
        card = find_gpu("rtx-3090")
        if estimate_with(plan, DEFAULT_FIT).speed.curve[0].memory_bound:
            raise ValueError(f"PR #5351 {quant}: the step is bound by its reads, not its mat-vecs' ALUs")
        outside = 1.0 / _decode(plan, DEFAULT_FIT) - kquant_matvec_seconds(plan, card)
        known = kquant_matvec_seconds(plan, card, cycles_of=cycles)
        per_cycle = kquant_matvec_seconds(plan, card, cycles_of={kind: 1.0})
        cycles[kind] = (1.0 / PR5351_BATCH1_MASTER[quant] - outside - known) / per_cycle
    return cycles


def alu_bound(plan: Plan) -> bool:
    """Whether a lone token's decode step is bound by its compute (for llama.cpp on an Apple GPU,
    the K-quant mat-vecs' ALU work) rather than its reads, with core.serving.fit's constants."""
    return not estimate_with(plan, DEFAULT_FIT).speed.curve[0].memory_bound


# llama-bench F16 prefill rows a tenth to a third of the same chip's in the same table, where the
# card's own Q4_K_M prefill matches that chip's: the F16 GEMMs of those runs did not reach the
# tensor cores (a machine or build state no plan input expresses). Listed by unexpressed().
F16_PREFILL_OFF_TENSOR_CORES: Final = frozenset(
    {
        "xd-a100-sxm-x1-8b-f16-pp512",
        "xd-a100-sxm-x4-8b-f16-pp512",
        "xd-l40s-x1-8b-f16-pp512",
        "xd-l40s-x4-8b-f16-pp512",
        "xd-5000-ada-x4-8b-f16-pp512",
    }
)
F16_PREFILL_WHY: Final = (
    "F16 pp512 far below the same chip's in the same table while the card's Q4_K_M pp512 matches it: A100 SXM4 "
    "604 and 627 t/s against the A100 PCIe's 7,741 (both GA100; one-GPU Q4_K_M 5,948 and 5,981), i.e. 9.7 "
    "TFLOP/s, the CUDA-core rate, not the tensor cores'; L40S 2,254 and 2,211 t/s against the RTX 6000 Ada's "
    "6,663 (both AD102 with 142 SMs; one-GPU Q4_K_M 6,035 and 5,792); RTX 5000 Ada on four GPUs 2,428 t/s against "
    "the same card's 6,161 on one (Q4_K_M: 4,671 on four, 4,761 on one; a layer split runs the same FLOPs), "
    "39 TFLOP/s, below its 65 TFLOP/s CUDA-core peak. The F16 GEMMs of those runs did not use the tensor cores"
)


# llama-bench pp rows whose own run says the time is not the prompt's work: on one GPU a prompt of
# N tokens runs N / 512 micro-batches of the same products, so a steady run's tokens/s falls with N
# (attention grows); it cannot rise. Listed by unexpressed().
PREFILL_RUN_UNSTEADY: Final = frozenset({"xd-a40-x1-70b-q4_kmedium-pp512"})
PREFILL_RUN_UNSTEADY_WHY: Final = (
    "the one-A40 Llama 3 70B Q4_K_M prompt (XiongjieDai aa72e0e, A40_v3.ipynb cell 15, build 2833) runs faster "
    "the longer the prompt: pp512 / 1024 / 4096 / 8192 = 209.38 ± 9.14, 239.92 ± 9.96, 268.89 ± 13.97, "
    "291.13 ± 10.38 t/s, where the same model on one RTX A6000 (the same GA102 with 84 SMs, A6000_v3.ipynb "
    "cell 15) falls 482.19 ± 0.25 -> 340.73 ± 0.09 and the same A40's 8B rows fall 3,324.98 -> 2,013.34. "
    "Solved on pp512 and pp1024, each run holds 0.62 s that does not grow with the prompt (2.445 s = 0.62 + "
    "512 x 3.56 ms), a quarter of the pp512 time, and the spread is 4-5 % against under 1 % for the machine's "
    "other one-GPU rows: the machine's state during that run, not the engine's prompt work (at the marginal "
    "3.56 ms a token the estimate's 1.498 s for 512 tokens is -18 %)"
)

# Records that name a branch or a date instead of a build number, mapped to a build on the same side
# of the rule the record is about: CUDA graphs (core.serving.llamacpp.CUDA_GRAPHS_FROM_BUILD). Their
# other build rule (cuBLAS prompts before b3216) reads no decode row.
NAMED_BUILDS: Mapping[str, int] = MappingProxyType(
    {
        "master of 2024-04-19, before PR #6766 (no CUDA graphs)": CUDA_GRAPHS_FROM_BUILD - 1,
        "agray3's CUDA-graph branch of 2024-04-19 (the code merged as PR #6766)": CUDA_GRAPHS_FROM_BUILD,
        "PR #6766 branch of 2024-04-19 (CUDA graphs)": CUDA_GRAPHS_FROM_BUILD,
        "master of 2024-05-15, after PR #6766 (CUDA graphs)": CUDA_GRAPHS_FROM_BUILD,
        # An Apple GPU's row, which no build rule reads: XiongjieDai's Mac build of the same weeks.
        "LM Studio of 2024-05 (llama.cpp's Metal backend, build not stated)": 2797,
        # PR #4766's master of January 2024: slaren's PR #4812 prints that master as build 1786
        # (32d9f7d9, 2024-01-07); every build rule reads it as before b2824 (no CUDA graphs, cuBLAS
        # prompts, scalar F16 mat-vecs), as any January 2024 build.
        "master of January 2024 (PR #4766's review, before the ggml-backend scheduler)": 1786,
        "PR #4766 branch of 2024-01-10 (ggerganov's RTX 4090 run, build not printed)": 1786,
        # 2025-2026 masters, after every build rule's threshold (CUDA graphs b2824, MMQ prompts b3216,
        # vectorised F16 mat-vecs b3916): the newest build the corpus prints (Geerling's 7474,
        # f9ec8858e, December 2025) reads the same.
        "master of 2025-03-17 (PR #12183's review, build not printed)": 7474,
        "master of 2025-08-02 (PR #15035's review, build not printed)": 7474,
        "master of 2026-02-07 (PR #19378's review, build not printed)": 7474,
        "master of 2026-05-15 (PR #21024's review, build not printed), Vulkan backend": 7474,
    }
)


def llamacpp_build(version: str) -> int:
    """The build number a record's engine_version states: "llama.cpp build 2837 (d11afd66)" (XiongjieDai's
    llama-bench header) or "build 93bc3839 (3622)" (llama-bench's "build: <commit> (<number>)" line), or
    :data:`NAMED_BUILDS`'s for a branch named by its date."""
    if version in NAMED_BUILDS:
        return NAMED_BUILDS[version]
    found = re.search(r"\((\d+)\)", version) or re.search(r"build (\d+)\b", version)
    if found is None:
        raise ValueError(f"no build number in {version!r}")
    return int(found.group(1))


# llama-bench's model column names a file type by llama_model_ftype_name ("Q4_K - Medium"); the
# records since h62lcpp give the llama-quantize name (GgufQuant) instead.
BENCH_FTYPE_NAMES: Mapping[str, GgufQuant] = MappingProxyType({"Q4_K - Medium": GgufQuant.Q4_K_M})


def bench_quant(record: Mapping[str, Any]) -> GgufQuant:
    """A llama-bench record's file type; one the plan has no name for is refused, not guessed."""
    text = str(record["quant"])
    if "F16" in text:
        return GgufQuant.F16
    if text in BENCH_FTYPE_NAMES:
        return BENCH_FTYPE_NAMES[text]
    try:
        return GgufQuant(text)
    except ValueError:
        raise ValueError(f"{record['id']}: file type {text!r} is not a GGUF file type of the plan") from None


def bench_plan(record: dict[str, Any]) -> Plan:
    """The plan of one llama-bench row: all layers on the GPUs (-ngl 99), f16 KV, one request; no
    flash attention and a 512-token micro-batch (the defaults of the builds before 2025) unless the
    record's ``settings`` say otherwise."""
    settings = record.get("settings", {})
    model_text = record["model"]
    if "TinyLlama" in model_text:
        model, model_id = tinyllama(), ""
    elif "3.2-3B" in model_text:
        model, model_id = catalogue("llama-3.2-3b"), "llama-3.2-3b"
    elif "Qwen2.5-1.5B" in model_text:
        model, model_id = catalogue("qwen2.5-1.5b"), "qwen2.5-1.5b"
    elif "Qwen2.5-3B" in model_text:
        model, model_id = catalogue("qwen2.5-3b"), "qwen2.5-3b"
    elif "70B" in model_text:
        model, model_id = catalogue("llama-3.1-70b"), "llama-3.1-70b"
    elif "Llama-2-7b" in model_text:
        model, model_id = catalogue("llama-2-7b"), "llama-2-7b"
    else:
        model, model_id = catalogue("llama-3.1-8b"), "llama-3.1-8b"
    quant = bench_quant(record)
    prompt, generated = int(record["input_len"]), int(record["output_len"])
    return llama_plan(
        model,
        model_id,
        xd_card(record),
        context=max(1, prompt + generated),
        new_tokens=generated,
        pipeline_parallel=record["gpu_count"],
        gguf_quant=quant,
        cache_type="f16",
        flash_attention=bool(settings.get("flash_attention", False)),
        ubatch=int(settings.get("n_ubatch", 512)),
        llamacpp_build=llamacpp_build(record["engine_version"]),
        llamacpp_backend="vulkan" if "Vulkan" in record["engine_version"] else "native",
    )


# dennislee22's runs: `benchmark_serving.py --num-prompts N` (all N at once), 1,024 tokens in and out.
DENNISLEE_RUNS: Mapping[str, tuple[str, str, int, float]] = MappingProxyType(
    {  # test: (model id, card, TP, gpu_memory_utilization)
        "test2": ("qwen2.5-7b", "a100-80gb-sxm", 2, 0.25),
        "test3": ("qwen2.5-7b", "a100-80gb-sxm", 2, 0.5),
        "test4": ("qwen2.5-7b", "a100-80gb-sxm", 1, 0.25),
        "test5": ("qwen2.5-7b", "a100-80gb-sxm", 1, 0.5),
        "test6": ("qwen2.5-32b", "a100-80gb-sxm", 2, 0.9),  # utilisation not stated: the default
        "test7": ("qwen2.5-32b", "a100-80gb-sxm", 1, 0.9),
        "test8": ("qwen2.5-72b", "a100-80gb-sxm", 2, 0.9),  # Qwen2-72B: Qwen2.5-72B's shapes
    }
)


def dennislee_speed_cases() -> list[Case]:
    cases = []
    for record in speed_corpus()["measurements"]:
        if record["source_id"] != "dennislee22-vllm-benchmarking":
            continue
        test = record["id"].split("-")[1]
        if test not in DENNISLEE_RUNS:
            continue  # across nodes: listed by unexpressed()
        model_id, card, tp, util = DENNISLEE_RUNS[test]
        plan = serving_plan(
            catalogue(model_id),
            model_id,
            card,
            engine="vllm",
            vllm_version="0.10",
            context=2048,
            new_tokens=1024,
            concurrent=int(record["concurrency"]),
            tensor_parallel=tp,
            gpu_memory_utilization=util,
            max_num_batched_tokens=2048,
            max_num_seqs=256,
            link=DENNISLEE_SAME_NODE if tp > 1 else "auto",  # no GPU P2P on that node (see MAPPING)
            vllm_sampler="flashinfer",  # the same install as the one-node start-up logs (MAPPING)
        )
        if record["metric"] == "itl_ms":
            cases.append(
                Case(
                    record["id"],
                    record["source_id"],
                    "decode",
                    "decode tokens/s per user (1000 / ITL)",
                    1000.0 / record["value"],
                    lambda fit, plan=plan: _decode(plan, fit),
                    identifies="speed",
                    plan=plan,
                )
            )
        elif record["metric"] == "output_tok_s_total":
            cases.append(
                Case(
                    record["id"],
                    record["source_id"],
                    "throughput",
                    "output tokens/s, all requests",
                    record["value"],
                    lambda fit, plan=plan: estimate_with(plan, fit).speed.total_tokens_per_s,
                )
            )
    return cases


def sglang_speed_cases() -> list[Case]:
    record = next(r for r in speed_corpus()["measurements"] if r["id"] == "achatbot183-gpt-oss-20b-h100-c4-otps")
    plan = serving_plan(
        catalogue("gpt-oss-20b"),
        "gpt-oss-20b",
        "h100-sxm",
        engine="sglang",
        context=1536,
        new_tokens=1024,
        concurrent=4,
        weight_dtype="mxfp4",
        # "not stated (2025-08-10, gpt-oss day-0 support)": the release then current was 0.4.10 (2025-07-31), but its
        # wheels (0.4.10, 0.4.10.post2) have no sglang/srt/models/gpt_oss.py nor quantization/mxfp4.py and no mxfp4
        # among --quantization's choices; the day-0 images were 0.5.0rc*, not on the covered list. 0.5.1 (2025-08-23)
        # is the first covered release that loads it (core.inputs.SGLANG_WEIGHT_RELEASES); the estimate's figure is
        # the same on both (1,184.6 tok/s with the default fit, h91vals).
        sglang_version="0.5.1",
    )
    return [
        Case(
            record["id"],
            record["source_id"],
            "throughput",
            "output tokens/s, all requests",
            record["value"],
            lambda fit: estimate_with(plan, fit).speed.total_tokens_per_s,
            note="20 prompts at most 4 at a time: the closed-batch model runs 5 waves of 4",
        )
    ]


# The Qwen team's speed tables. Qwen2.5 (QwenLM/Qwen3@a912d239 docs/source/benchmark/speed_benchmark.rst; the
# scripts examples/speed-benchmark/speed_benchmark_{transformers,vllm}.py at 8205ba2a, unchanged at HEAD):
# tokens/s = 2048 / the wall time of one generate call of batch 1, the prompt's prefill included. Qwen3
# (7a2f61ff docs/source/getting_started/speed_benchmark.md, H20): (prompt + 2048) / that time, by the page's
# formula and its numbers (another tool than the published script).
QWEN_SOURCE: Final = "qwen2.5-speed-benchmark"
QWEN3_SOURCE: Final = "qwen3-speed-benchmark"
QWEN_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "BF16": "bf16",
        "FP8": "fp8",
        "GPTQ-INT4": "gptq-int4",
        "GPTQ-INT8": "gptq-int8",
        "AWQ": "awq-int4",
        "AWQ-INT4": "awq-int4",
    }
)


def qwen_generate_seconds(plan: Plan, fit: ServingFit) -> float:
    """One generate call of batch 1: the prompt's prefill, then every new token at the decode rate."""
    speed = estimate_with(plan, fit).speed
    return speed.ttft_alone_s + plan.inference.new_tokens / speed.per_request_tokens_per_s


def qwen_counted_tokens(record: dict[str, Any]) -> int:
    """The tokens a record's speed divides by the time: the new ones (Qwen2.5's script), or the
    prompt's too (the Qwen3 page's formula)."""
    prompt = int(record["input_len"]) if record["metric"] == "generate_tok_s_with_prompt" else 0
    return prompt + int(record["output_len"])


def qwen_not_expressible(record: dict[str, Any]) -> str:
    """Why a row of the Qwen tables is not scored, "" when it is."""
    if record["catalogue_id"] is None:
        return f"{record['model']} is not in the model catalogue (no committed config)"
    if record["quant"].upper() not in QWEN_FORMATS:
        return f"{record['quant']} is not a weight format of the plan"
    if record["engine"] == "transformers" and record["gpu_count"] > 1:
        return (
            f"device_map='auto' over {record['gpu_count']} GPUs: the layers run one GPU after another "
            "(accelerate's hooks move the activations), which the plan's engines do not describe"
        )
    return ""


def qwen_plan(record: dict[str, Any]) -> Plan:
    settings = record["settings"]
    inference: dict[str, Any] = {
        "context": int(record["input_len"]) + int(record["output_len"]),
        "new_tokens": int(record["output_len"]),
        "concurrent": 1,
        "weight_dtype": QWEN_FORMATS[record["quant"].upper()],
    }
    if record["engine"] == "vllm":
        inference |= {
            "engine": "vllm",
            "vllm_version": "0.6",
            "tensor_parallel": int(record["tensor_parallel"]),
            "gpu_memory_utilization": float(settings["gpu_memory_utilization"]),
            # enforce_eager=True: each decode kernel launched on its own (inference.cuda_graphs off)
            "cuda_graphs": not settings.get("enforce_eager", False),
        }
    elif record["engine"] == "sglang":
        inference |= {
            "engine": "sglang",
            "sglang_version": "0.4.6",
            "tensor_parallel": int(record["tensor_parallel"]),
            "mem_fraction_static": float(settings["mem_fraction_static"]),
        }
    else:
        inference |= {"engine": "hf", "transformers_version": transformers_line(record)}
    model_id = str(record["catalogue_id"])
    plan = serving_plan(catalogue(model_id), model_id, str(record["gpu_catalogue_id"]), **inference)
    return replace(plan, attention=qwen_attention(record)) if record["engine"] == "transformers" else plan


# transformers' attn_implementation names, as the records give them.
ATTN_IMPLEMENTATIONS: Final = {"flash_attention_2": Attention.FLASH, "sdpa": Attention.SDPA, "eager": Attention.EAGER}


def qwen_attention(record: dict[str, Any]) -> Attention:
    """The attention implementation a transformers row ran: the Qwen2.5 tool passes
    ``attn_implementation='flash_attention_2'`` (examples/speed-benchmark/speed_benchmark_transformers.py at
    8205ba2a, ``USE_FLASH_ATTN = True``), the record's setting; the Qwen3 page states none and lists
    Flash Attention 2.7.4 in its environment, which its records take as flash_attention_2 (their
    assumptions)."""
    return ATTN_IMPLEMENTATIONS[str(record["settings"].get("attn_implementation", "flash_attention_2"))]


def transformers_line(record: dict[str, Any]) -> str:
    """The transformers release line a record ran ("transformers 4.46.0 (torch ...)" -> "4.46"):
    the Qwen2.5 table ran 4.46.0, the Qwen3 table 4.51.3, whose MoE blocks loop over every expert
    (core.serving.transformers_versions)."""
    release = str(record["engine_version"]).split()[1]
    return ".".join(release.split(".")[:2])


def implied_host_layer(case: Case) -> float:
    """Host seconds per layer a transformers row at a 1-token prompt implies: its time per new token
    (the prefill of one token is a step like the others) over the model's layers. Dense BF16 rows on
    one GPU only (:func:`qwen_speed_cases` marks them): a quantised layer launches its dequantising
    kernels too, and transformers' MoE block loops over its experts."""
    record = next(r for r in speed_corpus()["measurements"] if r["id"] == case.id)
    assert case.plan is not None
    per_token = qwen_counted_tokens(record) / record["value"] / int(record["output_len"])
    return per_token / case.plan.model.num_layers


def qwen_records(source: str = QWEN_SOURCE) -> list[dict[str, Any]]:
    return [r for r in speed_corpus()["measurements"] if r["source_id"] == source]


def qwen_speed_cases() -> list[Case]:
    """Every expressible row of the Qwen tables, scored held out and setting no constant."""
    cases = []
    for record in qwen_records(QWEN_SOURCE) + qwen_records(QWEN3_SOURCE):
        if qwen_not_expressible(record):
            continue  # listed by unexpressed()
        plan = qwen_plan(record)
        counted, new = qwen_counted_tokens(record), int(record["output_len"])
        host = record["engine"] == "transformers" and record["quant"] == "BF16" and int(record["input_len"]) == 1
        host = host and plan.model.num_experts <= 1
        what = (
            f"{new} / (TTFT + {new} × time per token)"
            if counted == new
            else "(prompt + 2048) / (TTFT + 2048 × time per token)"
        )
        cases.append(
            Case(
                record["id"],
                record["source_id"],
                "generate",
                f"{what}, batch 1",
                record["value"],
                lambda fit, plan=plan, counted=counted: counted / qwen_generate_seconds(plan, fit),
                identifies="host" if host else "",
                plan=plan,
            )
        )
    return cases


def all_cases() -> list[Case]:
    return (
        dennislee_cases()
        + other_vllm_cases()
        + old_corpus_cases()
        + xiongjiedai_buffer_cases()
        + other_llamacpp_cases()
        + llama_bench_cases()
        + dennislee_speed_cases()
        + sglang_speed_cases()
        + qwen_speed_cases()
    )


# ---- what is not expressible ------------------------------------------------------------------
NOT_EXPRESSIBLE: Mapping[str, str] = MappingProxyType(
    {
        "vllm25350-fp8kv-100k": "neither the model nor the card is in the excerpt",
        "myoceane-gemma4-26b-a4b-a100-0.9-eager": "Gemma 4 (a sliding-window / global MoE) has no config in the "
        "catalogue or committed, and no public copy was found",
        "recipes-kimi-k2-thinking-h200-tp8": "Kimi-K2-Thinking's INT4 QAT experts (compressed-tensors pack-quantized, "
        "groups of 32, attention and shared experts in bf16) are no weight format of the plan, so the pool is not "
        "predictable. Its latent cache is (catalogue kimi-k2): 46.80 GiB (as rounded) for 715,072 tokens is "
        "70,274 B a token, "
        "61 layers x (512 + 64) x 2 B = 70,272 B on each of the 8 ranks (core.serving.kv)",
        "recipes-kimi-k2-thinking-h200-tp8-dcp8": "the INT4 experts as above, and decode context parallelism "
        "multiplies the reported tokens (not a plan input): 5,721,088 = 8 x 715,136",
        "sglang4826-gemma3-4b-h200": "image-text checkpoint (Gemma3ForConditionalGeneration): SGLang lowers "
        "mem_fraction_static for multimodal models, which the plan does not model (its weights it does: 'mem "
        "usage=8.13 GB', GiB, against 8.01 GiB planned with the SigLIP tower since branch h62vis, 7.23 before). "
        "The stated build (main of 2025-03-27, between the 0.4.4 and 0.4.5 wheels) takes the 0.4 table's 0.88, "
        "and 0.4.4's model_runner.py multiplies it by 0.95 for a multimodal model: 0.836, the fraction the log "
        "implies ((131.08 + 8.13 - (131.08 - 108.24)) / 139.21 = 0.836)",
        "sglang18039-mimo-v2-flash-tp4-main": "card not in the excerpt, and the log shows the pre-fix sliding-window "
        "accounting the PR corrects",
        "llamafile552-trilm-4080-ctx512": "the TriLM model's size and quantisation are not in the excerpt",
        "vllm2031-llama2-7b-a100-tp1-main": "vLLM 0.2.4: older than the releases the rules cover (0.6 on)",
        "vllm2031-llama2-7b-a100-tp1-pr": "vLLM 0.2.5: older than the releases the rules cover (0.6 on)",
        "vllm2031-llama2-70b-a100-tp4-main": "vLLM 0.2.4 (and its profiler bug at TP > 1, the PR's subject)",
        "vllm2031-llama2-70b-a100-tp4-pr": "vLLM 0.2.5: older than the releases the rules cover (0.6 on)",
        "vllm12569-llama31-70b-w8a8-v1-2048": "the card is not stated (an 80 GB part, from the weights)",
        "vllm7553-yi15-34b-4x4090-tp4-cudagraph": "nvidia-smi totals of vLLM 0.5.4, not a start-up split; 0.5 is "
        "older than the releases covered",
        "vllm7553-yi15-34b-4x4090-tp4-eager": "nvidia-smi totals of vLLM 0.5.4, not a start-up split; 0.5 is older "
        "than the releases covered",
        "vllm21489-gemma3-4b-b200-bench-latency": "image-text Gemma 3 under `vllm bench latency`: its 9.96 GiB peak "
        "is the vision encoder's profile, which the plan does not describe (its weights it does since branch "
        "h62vis: 8.58 GiB logged, 8.01 GiB planned with the SigLIP tower, 7.23 before)",
        "qwen16-qwen15-7b-gptq-int4-3090": "vLLM ~0.3 (February 2024): older than the releases covered",
        "vllm21348-qwen3-235b-fp8-h100-tp4-vllm": "run with an LMCache KV connector (--kv-transfer-config), which "
        "sets up its own GPU buffers (not a plan input), on an unstated release (0.9.2 or 0.10.0 by the date)",
        "vllm27508-gpt-oss-120b-h100-gmu095-mnbt1024": "only 'Available KV cache memory: 1.71 GiB' is in the excerpt, "
        "and two unstated inputs each move more than that: the weights (not printed; the same model on one H100 "
        "loads 65.97 GiB with 0.10.1's Marlin MXFP4 path, issue #23278, and 64.38 GiB with 0.14.1's Triton path, "
        "issue #33155: 1.59 GiB apart) and the sampler of the profile run (1,024 rows x 201,088 logits: 14 B a "
        "logit with the Triton top-k/top-p of PR #33538, Feb. 2026, which the planner follows, 2.7 GiB; about 40 B "
        "with the sort-based path before it, PR #32558's 1.25 GB for 256 x 131,072, 7.7 GiB; issue #23278's 0.10.1 "
        "log of this model implies 7.4 GiB outside the weights). The planner's 0.19 sampler gives 6.15 GiB of pool",
    }
)
# Old-corpus logs left out with the reason (the rest of benchmarks/serving/vllm_logs.json is scored).
OLD_NOT_EXPRESSIBLE: Mapping[str, str] = MappingProxyType(
    {
        "llama3-8b-h100-tp1": "a development build of the PR that rewrote the profiler's accounting (0.6.5.dev): "
        "its non-torch 1.79 GiB at TP 1 is five times what the 0.6.4 and 0.7 releases print (0.35, 0.25 GiB), and "
        "which release's rule it shows is unknown",
        "llama3-8b-h100-tp2": "the same development build (0.6.5.dev), and its KV size is derived, not printed",
    }
)
SPEED_NOT_EXPRESSIBLE: Mapping[str, str] = MappingProxyType(
    {
        "dennislee22 test1 / test9": "tensor parallel across Kubernetes nodes through Ray over the pod network (TCP): "
        "no catalogue link is that (its all-reduces take about 0.7 ms, against 10 µs for InfiniBand)",
        "dennislee22 TTFT": "not a cold prefill: vLLM's log shows 40-54 % prefix-cache hits on the random prompts",
        "achatbot183 TTFT": "2.7 s for a 512-token prompt at concurrency 4 is a hundred times its prefill: the "
        "client's queue or the Modal cold start, not the engine's prefill",
        "vllm-recipes-kimi-k2-thinking": "Kimi-K2-Thinking's INT4 QAT experts are no weight format of the plan (the "
        "decode reads them): the model itself is describable since multi-head latent attention is (kimi-k2)",
        "geerling43-1b-pp512": "±9,881 on 10,802 tokens/s: the record itself calls it unreliable",
    }
)


# The vLLM 0.29.0 start on an RTX 5060 Ti under WSL2 (engine_logs.json; docs/SERVING.md, h78kv): what its own
# lines show that no plan input states. The quoted lines are in the record's quote (the test checks them).
FRESHAIR_KV_WHY: Final = (
    "the log prints two things no plan input states, both inside the window that sizes the pool. (1) A cold "
    "torch.compile in the profile: 'Compiling a graph for compile range (1, 2048) takes 16.63 s', 'saved AOT "
    "compiled function', 'torch.compile took 27.73 s in total' before 'Initial profiling/warmup run took 6.58 s' "
    "(0.29.0 wheel 98dff2a81: determine_available_memory runs profile_run, the compiled model's first forward, "
    "inside memory_profiling; mem_utils.py counts total_consumed = init free - free after the profile and "
    "transient_peak_headroom = torch peak - allocated): 0.95 GiB consumed beyond the 7.64 GiB load and 0.71 GiB "
    "of transient peak, where the warm 0.30.0 T4 start ('Directly load AOT compilation') shows 0.12. (2) WSL2's "
    "total: 'Free memory on device (14.8/15.9 GiB)', 'Desired GPU memory utilization is (0.7, 11.13 GiB)': the "
    "whole 16,311 MiB card, where the planner's Linux total is 15.51 GiB. The planner estimates a warm start on "
    "Linux (2.07 GiB, 15,120 tokens against 10,576 printed, +43 %) and warns of the cold one "
    "(core.serving.engines.cold_compile_warning); with the whole card as total it would be 2.37 GiB, and less "
    "the 0.98 GiB one published warm/cold pair of 0.29.0 lost (Tegdam/pickr_ai, the warning's figure) 1.39 "
    "GiB against the 1.45 printed: the two effects account for the gap, and neither is fitted. (Those figures are "
    "h78kv's, with the fixed 0.84 GiB of graphs.) Both are plan inputs now (h92wsl, h94cold): planned under WSL2 "
    "and cold, with the CUDA-graph rule (0.42 GiB against the 0.38 printed) and the cold-compile term (0.55 GiB), "
    "the pool is 2.24 GiB (16,336 tokens, +54 %) and the planner's peak activation with the graphs 1.13 GiB against "
    "the 1.09 printed; what is left is outside torch: 0.95 GiB consumed beyond the load against the planner's 0.29, "
    "and the load itself 0.15 above the tensors. A cold compile's kernels outside torch are not modelled (Tegdam's "
    "0.29.0 pair: consumed 0.53 GiB more cold; the A100 notes' cold 0.31.0 start: none), so this figure stays "
    "unscored"
)


# Single figures of logs whose other figures are scored: (log id, figure) -> why not this one.
FIGURES_NOT_COMPARABLE: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("freshair-vllm0290-qwen3-4b-5060ti-wsl", "KV-cache tokens"): FRESHAIR_KV_WHY,
        ("llamacpp11200-qwen25coder32b-q8kv-32k-2gpu", "compute CUDA0 / CUDA1"): "the ubatch of the run is not in "
        "the excerpt and was not the default 512: CUDA1 holds the output layer, and with flash attention the reserve "
        "graph's logits alone are 152,064 x 512 x 4 B = 297 MiB, above the 237.51 MiB printed (the same model and "
        "cache on one GPU print 307 MiB in issue #11337, two GPUs at n_copies=4 print 459 / 472 MiB in #10547)",
        ("llamacpp23527-qwen36-35b-a3b-150k-ub4096-cap", "compute CUDA0"): "PR #23861's cap of the reserve's "
        "outputs patched onto a master before b9410 (a float32 mask cast for flash attention beside one row of "
        "logits): no build number gives that state. Planned with the cast and no logits it is 3,724 MiB against "
        "3,892 printed (-4.3 %): the cast, 150,016 x 4,096 x 6 B = 3,516 MiB, beside the FFN moment of the recurrent "
        "layers before the first attention layer (208 MiB), the rule set with Qwen3.5-9B's log in view "
        "(docs/SERVING.md); the 168 MiB more live at -ub 4096 is not read, and nothing is fitted on it",
        ("llamacpp23527-qwen36-35b-a3b-150k-ub4096-cap-pr23764", "compute CUDA0"): "--cpu-moe keeps the experts in "
        "host memory, and at -ub 4096 the scheduler copies a MoE layer's expert matrices to the GPU for its products, "
        "into the compute buffer (not planned): with one row of logits and a float16 mask (b9460 on) that FFN moment "
        "decides, 1,982 MiB printed against 1,380 planned (the float16 mask 1,172 MiB and the FFN moment's 208 MiB; "
        "the 602 MiB left is of the order of one layer's 256 experts, gate, up and down: 432 MiB in Q4_K, more in "
        "unsloth's mix)",
        ("ollama11090-mistral3-q8-2gpu-weights", "model GPUs together"): "the GGUF holds Mistral Small 3.1's "
        "vision encoder: 585 tensors against the text model's 363 (40 layers x 9 + embedding, output norm and "
        "head), and 23.4 GiB on the GPUs against 22.66 GiB for the text weights, the 0.74 GiB an f16 Pixtral "
        "encoder of about 0.4 B parameters takes; the plan's llama.cpp / Ollama weights are the language model's "
        "(llama.cpp loads a tower from a separate mmproj GGUF only when given one; Ollama's engine packs it into "
        "the one GGUF, not modelled; core.vision counts it for vLLM, SGLang and transformers)",
    }
)


def unexpressed() -> list[Unexpressed]:
    logs = {log["id"]: log for log in engine_logs()["logs"]}
    out = [Unexpressed(i, logs[i]["source_id"], logs[i]["engine"], why) for i, why in NOT_EXPRESSIBLE.items()]
    for entry in old_logs()["entries"]:
        if "image-text" in entry.get("outside_target", ""):
            out.append(Unexpressed(entry["id"], old_source(entry), "vllm", entry["outside_target"]))
        if entry["id"] in OLD_NOT_EXPRESSIBLE:
            out.append(Unexpressed(entry["id"], old_source(entry), "vllm", OLD_NOT_EXPRESSIBLE[entry["id"]]))
    for excluded in old_logs()["excluded"]:
        out.append(Unexpressed(excluded["log"], "llm-d-planner", "vllm", excluded["why"]))
    out += [
        Unexpressed(f"{log_id} {figure}", logs[log_id]["source_id"], logs[log_id]["engine"], why)
        for (log_id, figure), why in FIGURES_NOT_COMPARABLE.items()
    ]
    out += [Unexpressed(what, what.split()[0], "speed", why) for what, why in SPEED_NOT_EXPRESSIBLE.items()]
    out += [
        Unexpressed(record, "xiongjiedai-gpu-benchmarks", "llama.cpp", F16_PREFILL_WHY)
        for record in sorted(F16_PREFILL_OFF_TENSOR_CORES)
    ]
    out += [
        Unexpressed(record, "xiongjiedai-gpu-benchmarks", "llama.cpp", PREFILL_RUN_UNSTEADY_WHY)
        for record in sorted(PREFILL_RUN_UNSTEADY)
    ]
    out += [
        Unexpressed(r["id"], r["source_id"], r["engine"], qwen_not_expressible(r))
        for r in qwen_records(QWEN_SOURCE) + qwen_records(QWEN3_SOURCE)
        if qwen_not_expressible(r)
    ]
    return out


# ---- fitting the constants, leaving one source out -----------------------------------------------
def with_constant(fit: ServingFit, key: str, value: float) -> ServingFit:
    group, _, name = key.partition(":")
    attribute = {
        "non_torch": "vllm_non_torch_bytes",
        "tp_comm": "tp_comm_bytes",
        "driver": "driver_reserved_bytes",
        "bandwidth": "bandwidth_efficiency",
        "overhead": "kernel_cycles",
        "launch": "launch_seconds",
        "graphs": "vllm_graph_bytes",
        "cold": "vllm_cold_compile_bytes",
    }[group]
    values = dict(getattr(fit, attribute))
    values[name] = value
    return replace(fit, **{attribute: MappingProxyType(values)})


def implied(case: Case, fit: ServingFit, key: str, low: float, high: float) -> float:
    """The value of constant ``key`` that makes ``case``'s prediction its logged figure: a
    secant through two values, then once more through the guess and the nearer of them (the
    predictions are linear in these constants, or nearly: whole blocks, a bandwidth term)."""
    f_low = case.predict(with_constant(fit, key, low)) - case.logged
    f_high = case.predict(with_constant(fit, key, high)) - case.logged
    if f_high == f_low:
        return low
    guess = low - f_low * (high - low) / (f_high - f_low)
    f_guess = case.predict(with_constant(fit, key, guess)) - case.logged
    near, f_near = (low, f_low) if abs(guess - low) < abs(guess - high) else (high, f_high)
    if f_guess == f_near:
        return guess
    return guess - f_guess * (guess - near) / (f_guess - f_near)


def _median(values: list[float], prior: float) -> tuple[float, bool]:
    return (statistics.median(values), False) if values else (prior, True)


def fit_drivers(fit: ServingFit, drivers: list[tuple[str, str, float]]) -> tuple[ServingFit, list[str]]:
    """Each card's driver reserve (the median of its observations) and each memory class's (the
    median of its cards'; the cards set by engine logs only: OOM messages give a card its own
    value, never its class's)."""
    priors: list[str] = []
    by_card: dict[str, list[float]] = {}
    for _, card, reserve in drivers:
        by_card.setdefault(card, []).append(reserve)
    logged = {card for source, card, _ in drivers if not source.startswith(CAPACITY_SOURCE)}
    classes: dict[str, list[float]] = {}
    for card, values in by_card.items():
        fit = with_constant(fit, f"driver:{card}", statistics.median(values))
        if card in logged:
            classes.setdefault(memory_class(find_gpu(card)).value, []).append(statistics.median(values))
    every_card = [statistics.median(v) for card, v in by_card.items() if card in logged]
    for cls in ("hbm", "gddr"):
        # A class no log shows takes every card's median: drivers keep about the same everywhere.
        value, prior = _median(classes.get(cls, []), statistics.median(every_card) if every_card else PRIORS["driver"])
        fit = with_constant(fit, f"driver:{cls}", value)
        priors += [f"driver:{cls} (every card's)"] if prior else []
    return _drop_cards(fit, set(by_card)), priors


def fit_constants(
    cases: list[Case],
    drivers: list[tuple[str, str, float]],
    graphs: list[tuple[str, float, float]] | None = None,
) -> tuple[ServingFit, tuple[str, ...]]:
    """The constants from ``cases`` (and the driver and CUDA-graph observations: every source's CUDA-graph
    estimates unless given), one rule each; returns the fit and the constants that had no record and took
    their prior."""
    fit, priors = fit_drivers(DEFAULT_FIT, drivers)
    fit, graph_priors = fit_graphs(fit, graph_observations() if graphs is None else graphs)
    priors += graph_priors
    fit, line_values = _eras_only(fit), {}
    for era in ("v0", "v1-early", "v1"):
        key = f"non_torch:{era}"
        shown = [c for c in cases if c.identifies == key]
        values = [implied(c, fit, key, 0.0, 2 * GiB) for c in shown]
        value, prior = _median(values, PRIORS[key])
        fit, priors = with_constant(fit, key, value), priors + ([key] if prior else [])
        for case, implied_value in zip(shown, values, strict=True):
            assert case.plan is not None, case.id
            line_values.setdefault(non_torch_line_key(case.plan.inference), []).append(implied_value)
    # A release line with logs of its own takes their median (the 0.10 logs show almost nothing
    # outside torch, the 0.19.0 ones a quarter of a GiB); the others, their era's.
    for line, values in sorted(line_values.items()):
        fit = with_constant(fit, f"non_torch:{line}", statistics.median(values))
    for cls in ("nvlink", "pcie"):
        fit = with_constant(fit, f"tp_comm:{cls}", 0.0)
    for cls in LARGE_COMM:
        key = f"tp_comm:{cls}"
        values = [implied(c, fit, key, 0.0, 2 * GiB) for c in cases if c.identifies == key]
        value, prior = _median(values, PRIORS["tp_comm"])
        fit, priors = with_constant(fit, key, value), priors + ([key] if prior else [])
    # The launch overhead per kernel: the median of what the graph on / off pairs imply.
    value, prior = _median([implied_launch(*pair) for pair in graph_pairs(cases)], PRIORS["launch"])
    fit, priors = with_constant(fit, "launch:eager", value), priors + (["launch:eager"] if prior else [])
    # Hugging Face generate's host time per layer: the median of what the transformers rows imply.
    key = f"launch:{HF_HOST_LAYER}"
    value, prior = _median([implied_host_layer(c) for c in cases if c.identifies == "host"], PRIORS[key])
    fit, priors = with_constant(fit, key, value), priors + ([key] if prior else [])
    fit, speed_priors = fit_speed(fit, [c for c in cases if c.identifies == "speed"])
    fit, cold_priors = fit_cold(fit, cases)
    return fit, tuple(priors + speed_priors + cold_priors)


def _eras_only(fit: ServingFit) -> ServingFit:
    """The non-torch constants of the accounting eras only: a release line's own value is set
    by the fold's logs of that line, never carried from the all-source fit."""
    values = {k: v for k, v in fit.vllm_non_torch_bytes.items() if "@" not in k}
    return replace(fit, vllm_non_torch_bytes=MappingProxyType(values))


def _drop_cards(fit: ServingFit, keep: set[str]) -> ServingFit:
    """Only the cards this fit saw keep a value of their own (a held-out card falls back to its class)."""
    classes = {"hbm", "gddr", "unified"}
    values = {k: v for k, v in fit.driver_reserved_bytes.items() if k in classes or k in keep}
    return replace(fit, driver_reserved_bytes=MappingProxyType(values))


def speed_keys(case: Case) -> tuple[str, str, str]:
    """(bandwidth key, engine family, kernel-cycles key) of a decode case's plan (core.serving.fit's keys)."""
    assert case.plan is not None, case.id
    family, gpu = engine_family(case.plan), find_gpu(case.plan.hardware.gpu)
    return bandwidth_key(family, gpu), family.value, cycles_key(gpu, family)


@dataclass(frozen=True)
class Linear:
    """A decode case's time per output token as A · (1 / efficiency) + B · cycles per kernel +
    C · launch overhead per kernel + D: the speed model is linear in all three while the step is
    bound by memory (all these are)."""

    case: Case
    bandwidth: str
    family: str
    a: float
    b: float
    d: float
    c: float = 0.0
    cycles: str = ""  # the kernel-cycles key its kernels pay (core.serving.speed.cycles_key)

    @property
    def seconds(self) -> float:
        return 1.0 / self.case.logged


@cache
def linearise(case: Case) -> Linear:
    key, family, cycles_name = speed_keys(case)

    def seconds(efficiency: float, overhead: float, host: float = 0.0) -> float:
        fit = with_constant(DEFAULT_FIT, f"bandwidth:{key}", efficiency)
        fit = with_constant(fit, f"overhead:{cycles_name}", overhead)
        return 1.0 / case.predict(with_constant(fit, f"launch:{family}", host))

    base, slow, cycles, host = seconds(0.8, 0.0), seconds(0.4, 0.0), seconds(0.8, 1000.0), seconds(0.8, 0.0, 1e-6)
    a = (slow - base) / (1 / 0.4 - 1 / 0.8)
    return Linear(case, key, family, a, (cycles - base) / 1000.0, base - a / 0.8, (host - base) / 1e-6, cycles_name)


def graph_pairs(cases: list[Case]) -> list[tuple[Case, Case]]:
    """The records that time one setup twice, each kernel launched on its own ("-master-")
    and the step replayed as one CUDA graph ("-graphs-"): same machine, build, model and
    program, so their difference is the launches alone."""
    by_id = {c.id: c for c in cases}
    pairs = []
    for case in cases:
        partner = by_id.get(case.id.replace("-master-", "-graphs-"))
        if case.identifies == "launch" and "-master-" in case.id and partner is not None:
            pairs.append((case, partner))
    return pairs


def implied_launch(launched: Case, replayed: Case) -> float:
    """Launch overhead per kernel a pair implies: the measured time per token the graph saves over
    the kernels the model launches one by one in the first and not in the second."""
    kernels = linearise(launched).c - linearise(replayed).c
    return (1.0 / launched.logged - 1.0 / replayed.logged) / kernels


def fit_speed(fit: ServingFit, cases: list[Case]) -> tuple[ServingFit, list[str]]:
    """Bandwidth efficiency per engine family and memory class, and the per-kernel cycles of
    eager engines, by least squares on the relative error of the time per token (the model is
    linear in 1 / efficiency and in the cycles), the launch overhead already set (by
    :func:`graph_pairs`); without records, the priors."""
    rows = [linearise(c) for c in cases]
    keys = sorted({r.bandwidth for r in rows})
    # Kernel cycles per key: CUDA's eager kernels ("eager") and Metal's dispatches ("metal") apart.
    cycle_keys = sorted({r.cycles for r in rows if r.family == "eager"})
    eager = "eager" in cycle_keys
    names = [f"bandwidth:{k}" for k in keys] + [f"overhead:{k}" for k in cycle_keys]
    matrix = []
    for r in rows:
        row = [r.a / r.seconds if r.bandwidth == k else 0.0 for k in keys]
        row += [r.b / r.seconds if r.family == "eager" and r.cycles == k else 0.0 for k in cycle_keys]
        launches = r.c * fit.launch_seconds[r.family]
        matrix.append((row, 1.0 - (r.d + launches) / r.seconds))
    solution = least_squares(matrix, len(names))
    for name, value in zip(names, solution, strict=True):
        if name.startswith("bandwidth"):
            fit = with_constant(fit, name, min(1.2, max(0.1, 1.0 / value if value > 0 else 1.2)))
        else:
            fit = with_constant(fit, name, max(0.0, value))
    fit = with_constant(fit, "overhead:cuda-graphs", 0.0)
    fit = with_constant(fit, "launch:cuda-graphs", 0.0)
    priors = []
    for family, other in (("eager", "cuda-graphs"), ("cuda-graphs", "eager")):
        for cls in ("hbm", "gddr", "unified"):
            if f"{family}/{cls}" in keys:
                continue
            # No record of this engine family on this memory: the other family's (the memory
            # decides most of it), else the prior.
            if f"{other}/{cls}" in keys:
                value = fit.bandwidth_efficiency[f"{other}/{cls}"]
                priors.append(f"bandwidth:{family}/{cls} (as {other})")
            else:
                value = PRIORS["bandwidth"]
                priors.append(f"bandwidth:{family}/{cls}")
            fit = with_constant(fit, f"bandwidth:{family}/{cls}", value)
    if not eager:
        fit, priors = with_constant(fit, "overhead:eager", PRIORS["overhead"]), [*priors, "overhead:eager"]
    if METAL_KERNELS not in cycle_keys:
        # No Apple decode row: Metal's dispatches take CUDA's kernels' cycles.
        fit = with_constant(fit, f"overhead:{METAL_KERNELS}", fit.kernel_cycles["eager"])
        priors = [*priors, f"overhead:{METAL_KERNELS} (as eager)"]
    return fit, priors


def least_squares(rows: list[tuple[list[float], float]], n: int) -> list[float]:
    """argmin ‖Xb − y‖² by the normal equations (n is a handful)."""
    xtx = [[sum(r[0][i] * r[0][j] for r in rows) for j in range(n)] for i in range(n)]
    xty = [sum(r[0][i] * r[1] for r in rows) for i in range(n)]
    for i in range(n):  # Gauss-Jordan with partial pivoting
        pivot = max(range(i, n), key=lambda k: abs(xtx[k][i]))
        xtx[i], xtx[pivot], xty[i], xty[pivot] = xtx[pivot], xtx[i], xty[pivot], xty[i]
        if abs(xtx[i][i]) < 1e-30:
            continue
        for k in range(n):
            if k != i:
                factor = xtx[k][i] / xtx[i][i]
                xtx[k] = [a - factor * b for a, b in zip(xtx[k], xtx[i], strict=True)]
                xty[k] -= factor * xty[i]
    return [xty[i] / xtx[i][i] if abs(xtx[i][i]) > 1e-30 else 0.0 for i in range(n)]


def score(cases: list[Case]) -> tuple[list[Row], dict[str, tuple[str, ...]], ServingFit]:
    """Every case predicted with the constants fitted without its source; and the fit on all."""
    drivers, graphs = driver_observations(), graph_observations()
    rows, priors = [], {}
    for source in sorted({c.source for c in cases}):
        others = [g for g in graphs if g[0] != source]
        kept = [c for c in cases if c.source != source]
        fit, prior = fit_constants(kept, [d for d in drivers if d[0] != source], others)
        priors[source] = prior
        for case in cases:
            if case.source == source:
                rows.append(Row(case, case.predict(fit), _used(case, prior)))
    everything, _ = fit_constants(cases, drivers, graphs)
    return rows, priors, everything


def _used(case: Case, priors: tuple[str, ...]) -> tuple[str, ...]:
    """The priors this case's prediction reads (the table's last column)."""
    plan = case.plan or _case_plan(case)
    if plan is None or case.table in ("buffers", "weights"):
        return ()
    inf, gpu = plan.inference, find_gpu(plan.hardware.gpu)
    wanted = set()
    if case.table == "kv":
        wanted.add(f"driver:{memory_class(gpu).value}")
        wanted.add(f"non_torch:{era_of(inf.vllm_version).accounting.value}")
        wanted.add(f"non_torch:{non_torch_line_key(inf)}")
        if inf.tensor_parallel > 1:
            wanted.add(f"tp_comm:{link_class(serving_link(inf, gpu)).value}")
    else:
        wanted.add(f"bandwidth:{bandwidth_key(engine_family(plan), gpu)}")
        wanted.add(f"overhead:{engine_family(plan).value}")
        wanted.add(f"launch:{engine_family(plan).value}")
        if inf.engine.value == "hf":
            wanted.add(f"launch:{HF_HOST_LAYER}")
    return tuple(p for p in priors if p.split(" ")[0] in wanted or p.split(" (")[0] in wanted)


def _case_plan(case: Case) -> Plan | None:
    defaults = getattr(case.predict, "__defaults__", None) or ()
    return next((d for d in defaults if isinstance(d, Plan)), None)


# ---- tables ------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))] if values else math.nan


@dataclass(frozen=True)
class Summary:
    name: str
    line: str
    met: bool


def kv_summary(rows: list[Row]) -> Summary:
    kv = [r for r in rows if r.case.table == "kv"]
    errors = [abs(r.error_pct) for r in kv]
    within = sum(e <= KV_TARGET for e in errors)
    share = within / len(kv) if kv else 0.0
    worst = max(errors, default=math.nan)
    line = (
        f"KV-cache tokens (vLLM, SGLang): {within} of {len(kv)} logs within {KV_TARGET:g} % ({share:.0%}; target "
        f"{KV_SHARE:.0%}), median |error| {statistics.median(errors):.2f} %, worst {worst:.1f} % "
        f"(target ≤ {KV_WORST:g} %)"
    )
    return Summary("kv", line, share >= KV_SHARE and worst <= KV_WORST)


def held_out_summary(rows: list[Row]) -> Summary:
    """The KV logs no constant was fitted on (LogCase.held_out), on their own line; they are in
    kv_summary's count too. Held to the same worst-case target."""
    held = [r for r in rows if r.case.table == "kv" and r.case.held_out]
    errors = [abs(r.error_pct) for r in held]
    if not held:
        return Summary("kv-held-out", "KV-cache tokens, held-out logs: none", True)
    signed = ", ".join(f"{r.case.id} {r.error_pct:+.1f} %" for r in held)
    line = (
        f"KV-cache tokens, held-out logs (never fitted): {sum(e <= KV_TARGET for e in errors)} of {len(held)} "
        f"within {KV_TARGET:g} %, worst {max(errors):.1f} % ({signed})"
    )
    return Summary("kv-held-out", line, max(errors) <= KV_WORST)


def buffer_summary(rows: list[Row]) -> Summary:
    buf = [r for r in rows if r.case.table == "buffers"]
    errors = [abs(r.error_pct) for r in buf]
    within = sum(e <= BUFFER_TARGET for e in errors)
    line = (
        f"llama.cpp buffers (model, KV, compute, file size): {within} of {len(buf)} within {BUFFER_TARGET:g} %, "
        f"median |error| {statistics.median(errors):.2f} %, worst {max(errors):.1f} %"
    )
    return Summary("buffers", line, within == len(buf))


def decode_summary(rows: list[Row]) -> Summary:
    dec = [r for r in rows if r.case.table == "decode"]
    errors = [abs(r.error_pct) for r in dec]
    med, worst = statistics.median(errors), max(errors)
    line = (
        f"Decode tokens/s per user: {len(dec)} points, median |error| {med:.1f} % (target ≤ {DECODE_MEDIAN:g} %), "
        f"worst {worst:.1f} % (target ≤ {DECODE_WORST:g} %), within 35 %: {sum(e <= DECODE_WORST for e in errors)}"
    )
    return Summary("decode", line, med <= DECODE_MEDIAN and worst <= DECODE_WORST)


def generate_summary(rows: list[Row]) -> Summary:
    """The Qwen tables' batch-1 generate calls (decode dominated: 2,048 new tokens), held to the
    decode targets."""
    gen = [r for r in rows if r.case.table == "generate"]
    errors = [abs(r.error_pct) for r in gen]
    med, worst = statistics.median(errors), max(errors)
    line = (
        f"Batch-1 generate tokens/s (Qwen2.5 and Qwen3 tables, prefill included): {len(gen)} points, "
        f"median |error| {med:.1f} % "
        f"(decode target ≤ {DECODE_MEDIAN:g} %), worst {worst:.1f} %, within 35 %: "
        f"{sum(e <= DECODE_WORST for e in errors)}, median signed {statistics.median(r.error_pct for r in gen):+.1f} %"
    )
    return Summary("generate", line, med <= DECODE_MEDIAN and worst <= DECODE_WORST)


def generate_groups_table(rows: list[Row]) -> str:
    """The generate rows by source, engine and weight format: how many, median signed error, worst."""
    lines = ["| source | engine | format | rows | median error | worst |", "|---|---|---|---:|---:|---:|"]
    gen = [r for r in rows if r.case.table == "generate"]
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in gen:
        assert r.case.plan is not None
        inf = r.case.plan.inference
        groups.setdefault((r.case.source, inf.engine.value, inf.weight_dtype.value), []).append(r.error_pct)
    for (source, engine, fmt), errors in sorted(groups.items()):
        lines.append(
            f"| {source} | {engine} | {fmt} | {len(errors)} | {statistics.median(errors):+.1f} % | "
            f"{max(errors, key=abs):+.1f} % |"
        )
    return "\n".join(lines)


def ttft_summary(rows: list[Row]) -> Summary:
    ttft = [r for r in rows if r.case.table == "ttft"]
    ratios = [max(r.ratio, 1 / r.ratio) for r in ttft]
    within = sum(x <= TTFT_RATIO for x in ratios)
    line = (
        f"TTFT, cold prefill: {within} of {len(ttft)} within × {TTFT_RATIO:g}, median ratio "
        f"{statistics.median(r.ratio for r in ttft):.2f}, worst × {max(ratios):.2f}"
    )
    return Summary("ttft", line, within == len(ttft))


def summaries(rows: list[Row]) -> list[Summary]:
    return [
        kv_summary(rows),
        held_out_summary(rows),
        buffer_summary(rows),
        decode_summary(rows),
        generate_summary(rows),
        ttft_summary(rows),
    ]


def source_table(rows: list[Row], priors: dict[str, tuple[str, ...]]) -> str:
    lines = [
        "| source (left out) | records | median |error| | worst | constants no other source sets (fallback used) |",
        "|---|---:|---:|---:|---|",
    ]
    for source in sorted({r.case.source for r in rows}):
        mine = [r for r in rows if r.case.source == source]
        errors = [abs(r.error_pct) for r in mine]
        used = sorted({p for r in mine for p in r.priors})
        lines.append(
            f"| {source} | {len(mine)} | {statistics.median(errors):.1f} % | {max(errors):.1f} % | "
            f"{', '.join(used) or '—'} |"
        )
    return "\n".join(lines)


def before_after_table(rows: list[Row], table: str) -> str:
    """Per source: median and worst |error| with the constants before issue 23 (BEFORE_FIT) and
    with the constants fitted without that source (leave one source out)."""
    lines = [
        "| source (left out) | records | before: median | before: worst | after: median | after: worst |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    mine = [r for r in rows if r.case.table == table]
    groups = {source: [r for r in mine if r.case.source == source] for source in sorted({r.case.source for r in mine})}
    groups["all"] = mine
    for source, group in groups.items():
        before = [abs(r.case.error_pct(BEFORE_FIT)) for r in group]
        after = [abs(r.error_pct) for r in group]
        lines.append(
            f"| {source} | {len(group)} | {statistics.median(before):.2f} % | {max(before):.1f} % | "
            f"{statistics.median(after):.2f} % | {max(after):.1f} % |"
        )
    return "\n".join(lines)


def case_table(rows: list[Row], table: str, digits: int = 2) -> str:
    lines = ["| record | source | figure | logged | predicted | error |", "|---|---|---|---:|---:|---:|"]
    for r in sorted((r for r in rows if r.case.table == table), key=lambda r: -abs(r.error_pct)):
        note = f" ({r.case.note})" if r.case.note else ""
        lines.append(
            f"| {r.case.id}{note} | {r.case.source} | {r.case.what} | {r.case.logged:,.{digits}f} | "
            f"{r.predicted:,.{digits}f} | {r.error_pct:+.1f} % |"
        )
    return "\n".join(lines)


def fit_table(fit: ServingFit) -> str:
    lines = ["| constant | fitted on every source | core.serving.fit |", "|---|---:|---:|"]
    for name, mine, core in fit_pairs(fit):
        lines.append(f"| {name} | {mine:.4g} | {core:.4g} |")
    return "\n".join(lines)


def fit_pairs(fit: ServingFit) -> list[tuple[str, float, float]]:
    pairs = []
    for attribute, scale in (
        ("vllm_non_torch_bytes", GiB),
        ("tp_comm_bytes", GiB),
        ("driver_reserved_bytes", GiB),
        ("bandwidth_efficiency", 1.0),
        ("kernel_cycles", 1.0),
        ("launch_seconds", 1e-6),
        ("vllm_graph_bytes", MiB),
        ("vllm_cold_compile_bytes", GiB),
    ):
        mine, core = getattr(fit, attribute), getattr(DEFAULT_FIT, attribute)
        for key in sorted(set(mine) | set(core)):
            pairs.append((f"{attribute}[{key}]", mine.get(key, math.nan) / scale, core.get(key, math.nan) / scale))
    return pairs


def fit_agrees(fit: ServingFit) -> bool:
    """core.serving.fit holds the all-source fit (to the rounding it is written with)."""
    return all(
        math.isclose(mine, core, rel_tol=0.02, abs_tol=0.02) for _, mine, core in fit_pairs(fit) if not math.isnan(mine)
    )


def unexpressed_table(items: list[Unexpressed]) -> str:
    lines = ["| record | source | engine | why it is not scored |", "|---|---|---|---|"]
    lines += [f"| {u.id} | {u.source} | {u.engine} | {u.reason} |" for u in items]
    return "\n".join(lines)


def report(
    rows: list[Row], priors: dict[str, tuple[str, ...]], fit: ServingFit, cases: list[Case] | None = None
) -> str:
    parts = ["## Summary (each source scored with constants fitted without it)\n"]
    parts += [f"- {s.line} — {'met' if s.met else 'MISSED'}" for s in summaries(rows)]
    parts += ["\n## Per source, left out\n", source_table(rows, priors)]
    parts += ["\n## KV-cache tokens per source: before issue 23's constants, after (left out)\n"]
    parts += [before_after_table(rows, "kv")]
    parts += ["\n## Decode tokens/s per source: before, after (left out)\n", before_after_table(rows, "decode")]
    parts += ["\n## Batch-1 generate tokens/s by engine and format (held out)\n", generate_groups_table(rows)]
    for table, title, digits in (
        ("kv", "vLLM / SGLang: GPU KV cache size (tokens)", 0),
        ("buffers", "llama.cpp: printed buffers", 2),
        ("decode", "Decode tokens/s per user", 1),
        ("generate", "Batch-1 generate tokens/s, prefill included (Qwen2.5 and Qwen3 tables)", 2),
        ("ttft", "Cold prefill (s)", 3),
        ("weights", "Weights per GPU, as logged (information)", 2),
        ("throughput", "Output tokens/s in total (information)", 0),
    ):
        parts += [f"\n## {title}\n", case_table(rows, table, digits)]
    parts += ["\n" + ollama_report()]  # Ollama's own decisions: information, no target (issue 23)
    parts += ["\n" + hybrid_pages_report()]  # vLLM's hybrid page rule: the published figures, exact (h65hyb)
    parts += ["\n## vLLM 0.20+: the CUDA-graph estimate printed, and the rule per layer and graph\n"]
    parts += [graph_estimate_table()]
    if cases is not None:
        parts += ["\n## vLLM: what each cold torch.compile start implies (the cold-compile term)\n", cold_table(cases)]
        parts += ["\n## vLLM 0.20+ KV tokens: the fixed 0.84 GiB before, the CUDA-graph rule and the cold term now\n"]
        parts += [graph_rule_table(cases)]
    parts += ["\n## Not expressible\n", unexpressed_table(unexpressed())]
    parts += ["\n## Constants fitted on every source\n", fit_table(fit)]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target of issue 23 is missed")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    cases = all_cases()
    rows, priors, fit = score(cases)
    text = report(rows, priors, fit, cases)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    if not args.check:
        return 0
    missed = [s.name for s in summaries(rows) if not s.met]
    if not all(r.exact for r in hybrid_page_rows()):
        missed.append("vLLM hybrid page figures")
    if not fit_agrees(fit):
        missed.append("core.serving.fit differs from the all-source fit")
    print(f"\ncheck: {'missed: ' + ', '.join(missed) if missed else 'every target met'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
