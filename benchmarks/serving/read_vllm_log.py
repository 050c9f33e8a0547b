"""Read the memory figures out of a vLLM (V1 engine) start-up log.

Used once to fill benchmarks/serving/vllm_logs.json from the v0.19.0 logs that
llm-d-incubation/llm-d-planner publishes (accuracy/results/v0.19.0/logs, commit
d3121e059da88662db39a926a3ead964be97359b); kept so anyone can re-read them:

    python benchmarks/serving/read_vllm_log.py LOG [LOG ...]   # prints one JSON object per log

It reads the lines vLLM 0.19.0 prints (vllm/v1/worker/gpu_worker.py, gpu_model_runner.py,
v1/core/kv_cache_utils.py, engine/arg_utils.py). With pipeline parallelism every stage
prints its own profile; the stage with the largest non-KV memory decides the pool (vLLM
takes the smallest block count over the stages), so its figures are the ones kept.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

_ARGS = re.compile(r"non-default args: (\{.*\})")
_PROFILE = re.compile(
    r"Total non KV cache memory: ([\d.]+)GiB; torch peak memory increase: ([\d.]+)GiB; "
    r"non-torch forward increase memory: ([\d.]+)GiB; weights memory: ([\d.]+)GiB"
)
_TOTAL = re.compile(r"total_memory=([\d.]+)GiB")
_REQUESTED = re.compile(r"Requested memory: [\d.]+ \(util\), ([\d.]+) GiB")
_AVAILABLE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_GRAPHS = re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB total")
_GRAPHS_ACTUAL = re.compile(r"CUDA graph pool memory: ([\d.]+) GiB \(actual\)")
_DEFAULT = re.compile(r"Defaulting (max_num_batched_tokens|max_num_seqs) to (\d+)")
_VERSION = re.compile(r"Initializing a V1 LLM engine \(v([\w.]+)\)")


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = list(pattern.finditer(text))
    return found[-1] if found else None


def read_log(text: str) -> dict[str, Any]:
    """The settings and memory figures of one start-up log (absent figures are left out)."""
    out: dict[str, Any] = {}
    if args := _last(_ARGS, text):
        out["args"] = ast.literal_eval(args.group(1))
    if version := _last(_VERSION, text):
        out["vllm_version"] = version.group(1)
    for match in _DEFAULT.finditer(text):
        out[match.group(1)] = int(match.group(2))
    logged: dict[str, Any] = {}
    profiles = [tuple(float(x) for x in m.groups()) for m in _PROFILE.finditer(text)]
    if profiles:
        non_kv, peak, non_torch, weights = max(profiles)  # the stage that decides the pool
        logged.update(non_kv_gib=non_kv, activation_gib=peak, non_torch_gib=non_torch, weights_gib=weights)
    for key, pattern in (("total_gib", _TOTAL), ("requested_gib", _REQUESTED), ("cuda_graph_estimate_gib", _GRAPHS)):
        if match := _last(pattern, text):
            logged[key] = float(match.group(1))
    if match := _last(_GRAPHS_ACTUAL, text):
        logged["cuda_graph_actual_gib"] = float(match.group(1))
    if match := _last(_AVAILABLE, text):
        logged["kv_cache_gib"] = float(match.group(1))
        if len(set(profiles)) > 1 and "requested_gib" in logged:
            # Stages differ: the decisive stage's pool (requested - its non-KV memory).
            logged["kv_cache_gib"] = round(logged["requested_gib"] - logged["non_kv_gib"], 2)
    if match := _last(_TOKENS, text):
        logged["kv_cache_tokens"] = int(match.group(1).replace(",", ""))
    if match := _last(_CONCURRENCY, text):
        logged["max_concurrency"] = float(match.group(2))
    out["logged"] = logged
    return out


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        print(json.dumps({"file": path.name, **read_log(path.read_text(encoding="utf-8", errors="replace"))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
