"""Ollama's own layer placement against the ``offload`` lines its users posted.

Each record of benchmarks/realgpu/ollama_logs.json is one ``msg="offload to cuda"`` (later
``msg=offload``) line of Ollama's server log: what its estimate (``llm/memory.go``
``EstimateGPULayers``) decided for the GPU memory it found free. :mod:`core.serving.ollama`
reads that rule from the source; this replays it with the record's model, GGUF type, free
memory, ``--ctx-size`` and ``--parallel`` and compares the layer count and the estimate's figures.
They are Ollama's estimates, not the memory the runner then allocates. Held out: no constant of
the rule was set from these records (docs/SERVING.md, "Ollama's own layer placement").

    python -m benchmarks.realgpu.ollama
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalogue import find_model  # noqa: E402
from core.dtypes import CacheType, GgufQuant  # noqa: E402
from core.plan import Engine, OllamaVersion  # noqa: E402
from core.presets import default_plan  # noqa: E402
from core.serving.ollama import (  # noqa: E402
    LINES,
    METAL_MINIMUM_MEMORY,
    Card,
    OllamaEstimate,
    estimate_gpu_layers,
    layout_gpu_layers,
    ollama_model,
)
from core.units import GiB, MiB  # noqa: E402

LOGS = Path(__file__).with_name("ollama_logs.json")
FIGURES = ("required_full", "required_partial", "kv", "graph_full", "graph_partial")
_ESTIMATE_FIELD = {
    "required_full": "full",
    "required_partial": "partial",
    "kv": "kv",
    "graph_full": "graph_full",
    "graph_partial": "graph_partial",
}


@cache
def records() -> list[dict[str, Any]]:
    return list(json.loads(LOGS.read_text(encoding="utf-8"))["logs"])


@cache
def layout_records() -> list[dict[str, Any]]:
    """The layouts of v0.12.11 on (llm/server.go createLayout), as device.go logs them."""
    return list(json.loads(LOGS.read_text(encoding="utf-8"))["layouts"])


def parse_bytes(text: str) -> float:
    """``"19.5 GiB"`` / ``"896.0 MiB"`` as format.HumanBytes2 prints them, in bytes."""
    match = re.fullmatch(r"([\d.]+) (GiB|MiB)", text.strip())
    if match is None:
        raise ValueError(f"not a HumanBytes2 figure: {text!r}")
    return float(match.group(1)) * (GiB if match.group(2) == "GiB" else MiB)


def human_bytes2(value: float) -> str:
    """Ollama's format.HumanBytes2 (v0.9.0 format/bytes.go): one decimal of GiB, else of MiB."""
    return f"{value / GiB:.1f} GiB" if value >= GiB else f"{value / MiB:.1f} MiB"


def replay(record: dict[str, Any]) -> OllamaEstimate:
    settings = record["settings"]
    metal = record["library"] == "metal"
    cards = [
        Card(int(g * GiB), METAL_MINIMUM_MEMORY, True) if metal else Card(int(g * GiB))
        for g in settings["memory_available_gib"]
    ]
    model = ollama_model(find_model(record["catalogue_id"]).spec, GgufQuant(record["gguf_quant"]))
    return estimate_gpu_layers(
        model,
        cards,
        LINES[OllamaVersion(record["scored_with_line"])],
        context=settings["ctx_size"],
        parallel=settings["parallel"],
        cache=CacheType(settings["kv_cache_type"]),
        num_gpu=settings["num_gpu"],
    )


@dataclass(frozen=True)
class Scored:
    id: str
    line: str
    in_line: bool  # the log's release lies within the lines covered (0.5.0 on)
    layers: tuple[int, int]  # (replayed, logged)
    figures: tuple[tuple[str, float, float, bool], ...]  # (name, replayed, logged, prints the same)


def score(record: dict[str, Any]) -> Scored:
    estimate = replay(record)
    logged = record["logged"]
    figures = []
    for name in FIGURES:
        mine = float(getattr(estimate, _ESTIMATE_FIELD[name]))
        figures.append((name, mine, parse_bytes(logged[name]), human_bytes2(mine) == logged[name]))
    return Scored(
        id=record["id"],
        line=record["scored_with_line"],
        in_line="before the lines covered" not in " ".join(record["assumptions"]),
        layers=(estimate.layers, int(logged["layers_offload"])),
        figures=tuple(figures),
    )


def table(rows: list[Scored]) -> str:
    head = "| record | rule | layers (replayed / logged) | " + " | ".join(FIGURES) + " |"
    lines = [head, "|" + "---|" * (3 + len(FIGURES))]
    for row in rows:
        cells = [
            f"{mine / GiB:.2f} / {logged / GiB:.2f} GiB ({100 * (mine / logged - 1):+.1f} %{'' if same else ' *'})"
            for _, mine, logged, same in row.figures
        ]
        tag = row.line + ("" if row.in_line else " (log older)")
        lines.append(f"| {row.id} | {tag} | {row.layers[0]} / {row.layers[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: list[Scored]) -> str:
    exact = sum(r.layers[0] == r.layers[1] for r in rows)
    covered = [r for r in rows if r.in_line]
    exact_covered = sum(r.layers[0] == r.layers[1] for r in covered)
    printed = sum(same for r in rows for *_, same in r.figures)
    total = sum(len(r.figures) for r in rows)
    errors = sorted(abs(mine / logged - 1) for r in rows for _, mine, logged, _ in r.figures)
    median = errors[len(errors) // 2] * 100 if errors else 0.0
    return (
        f"Ollama's layer count exact in {exact} of {len(rows)} logs ({exact_covered} of {len(covered)} from the "
        f"releases covered); estimate figures printing as logged {printed} of {total}, median |error| "
        f"{median:.1f} % (information, held out: no target)"
    )


LAYOUT_FIGURES = ("weights_gpu", "kv", "graph", "total")


def replay_layout(record: dict[str, Any]) -> tuple[OllamaEstimate, dict[str, float]]:
    """createLayout for the record's model, free memory, num_ctx and parallel; the figures device.go logs."""
    settings = record["settings"]
    metal = record["library"] == "metal"
    cards = [
        Card(int(g * GiB), METAL_MINIMUM_MEMORY, True) if metal else Card(int(g * GiB))
        for g in settings["memory_free_gib"]
    ]
    base = default_plan()
    inference = replace(
        base.inference,
        engine=Engine.LLAMACPP,
        ollama_version=OllamaVersion(record["scored_with_line"]),
        gguf_quant=GgufQuant(record["gguf_quant"]),
        cache_type=CacheType(settings["kv_cache_type"]),
        context=settings["ctx_size"],
        concurrent=settings["parallel"],
    )
    plan = replace(base, model=find_model(record["catalogue_id"]).spec, inference=inference)
    line = LINES[OllamaVersion(record["scored_with_line"])]
    est = layout_gpu_layers(plan, cards, line, settings["parallel"], settings["num_gpu"])
    # The figures are those of a full offload (every record that prints them is one): all the weights
    # on the GPU, the full-offload graph.
    weights = est.weights_repeating + est.weights_output
    return est, {"weights_gpu": weights, "kv": est.kv, "graph": est.graph_full, "total": est.full}


def _layout_cell(mine: float, logged: str) -> tuple[str, bool, float]:
    theirs = parse_bytes(logged)
    same = human_bytes2(mine) == logged
    error = mine / theirs - 1
    return f"{mine / GiB:.2f} / {theirs / GiB:.2f} GiB ({100 * error:+.1f} %{'' if same else ' *'})", same, abs(error)


def layout_table() -> tuple[str, str]:
    lines = ["| record | rule | layers (replayed / logged) | " + " | ".join(LAYOUT_FIGURES) + " |"]
    lines.append("|" + "---|" * (3 + len(LAYOUT_FIGURES)))
    exact = printed = 0
    errors: list[float] = []
    for record in layout_records():
        est, figures = replay_layout(record)
        logged = record["logged"]
        exact += est.layers == logged["layers"]
        cells = []
        for name in LAYOUT_FIGURES:
            if name not in logged:
                cells.append("—")
                continue
            cell, same, error = _layout_cell(figures[name], logged[name])
            cells.append(cell)
            printed += same
            errors.append(error)
        layers = f"{est.layers} / {logged['layers']}"
        lines.append(f"| {record['id']} | {record['scored_with_line']} | {layers} | " + " | ".join(cells) + " |")
    errors.sort()
    median = errors[len(errors) // 2] * 100 if errors else 0.0
    worst = errors[-1] * 100 if errors else 0.0
    summary_line = (
        f"createLayout's layer count exact in {exact} of {len(layout_records())} loads; device.go figures "
        f"printing as logged {printed} of {len(errors)}, median |error| {median:.1f} %, worst {worst:.1f} % "
        "(information, held out: no target)"
    )
    return summary_line, "\n".join(lines)


def report() -> str:
    rows = [score(r) for r in records()]
    layout_summary, layouts = layout_table()
    return "\n".join(
        [
            "## Ollama's own layer placement (held out; its estimate, not memory measured)\n",
            f"- {summary(rows)}\n",
            table(rows),
            "\n* the replayed figure does not print as the logged one (format.HumanBytes2, one decimal)",
            "\n### From v0.12.11: llm/server.go createLayout (device.go's memory lines)\n",
            f"- {layout_summary}\n",
            layouts,
        ]
    )


def main() -> int:
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
