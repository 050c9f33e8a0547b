"""``vramplan models``, ``gpus`` and ``links``: the catalogues, as a table or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from core.catalogue import load_gpus, load_links, load_models
from core.format import count as format_count
from core.model import ModelSpec
from core.units import GB

COMMANDS = ("models", "gpus", "links")


def register(sub: Any) -> None:
    models = sub.add_parser("models", help="list the model catalogue")
    models.add_argument("--json", action="store_true")
    gpus = sub.add_parser("gpus", help="list the GPU catalogue")
    gpus.add_argument("--json", action="store_true")
    links = sub.add_parser("links", help="list the interconnect catalogue (for --intra-link and --interconnect)")
    links.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> str:
    listing = {"models": _list_models, "gpus": _list_gpus, "links": _list_links}[args.command]
    return listing(args.json)


def _list_models(as_json: bool) -> str:
    models = load_models()
    if as_json:
        rows = [{"id": m.id, "name": m.name, "params": m.spec.total_params()} for m in models]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    lines = []
    for m in models:
        spec: ModelSpec = m.spec
        lines.append(
            f"{m.id:<26} {m.name:<32} {format_count(spec.total_params()):>7}  "
            f"L={spec.num_layers:<3} d={spec.hidden_size:<5} heads={spec.num_heads}/{spec.num_kv_heads}\n"
        )
    return "".join(lines)


def _list_gpus(as_json: bool) -> str:
    gpus = load_gpus()
    if as_json:
        rows = [
            {"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes, "tflops_dense": dict(g.tflops_dense)}
            for g in gpus
        ]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    return "".join(
        f"{g.id:<20} {g.name:<28} {g.memory_bytes / 2**20:>8,.0f} MiB  {g.memory_bytes / GB:>6.1f} GB  "
        + (f"bf16 {g.peak_tflops('bf16'):>7g} TFLOP/s" if g.dtype_problem("bf16") is None else "no bf16")
        + "\n"
        for g in gpus
    )


def _list_links(as_json: bool) -> str:
    links = load_links()
    if as_json:
        rows = [
            {
                "id": link.id,
                "name": link.name,
                "kind": link.kind.value,
                "bandwidth_gb_s": link.bandwidth_gb_s,
                "bus_efficiency": link.bus_efficiency,
                "latency_us": link.latency_us,
                "source": link.source,
            }
            for link in links
        ]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    return "".join(
        f"{link.id:<11} {link.kind.value:<6} {link.bandwidth_gb_s:>6g} GB/s per GPU per direction  "
        f"(NCCL reaches {link.bus_efficiency:.0%})  {link.name}\n"
        for link in links
    )
