"""``vramplan models``, ``gpus`` and ``links``: the catalogues, as a table or JSON; and what
this machine has: ``gpus --local`` (its GPUs, :mod:`core.files.local_gpus`) and
``models --cached`` (the models in its Hugging Face cache, :mod:`core.files.hfcache`)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from typing import Any, Final

from core.catalogue import load_gpus, load_links, load_models
from core.cli.parser import UsageError, text_arg
from core.cli.render import json_text
from core.errors import one_line
from core.files.hfcache import CachedModel, CacheScan, scan_cache
from core.files.local_gpus import LocalGpu, LocalGpus, detect_local_gpus
from core.files.local_host import LocalHost
from core.files.local_host import as_json as host_json
from core.format import count as format_count
from core.format import memory as format_memory
from core.inputs import PLATFORM_LABELS, Platform, input_at
from core.model import ModelSpec
from core.optimizer_stacks import STACK_NAMES, STACK_RULES, OptimizerStack, built
from core.units import GB, GiB, MiB

COMMANDS = ("models", "gpus", "links", "optimizers")
# GPU detection's wait on the command line: longer than the window's second, since a driver
# without persistence mode takes a few seconds to wake; bounded both ways.
LOCAL_TIMEOUT_S: Final = 5.0
MIN_TIMEOUT_S: Final = 0.1
MAX_TIMEOUT_S: Final = 60.0
MAX_SEARCH_CHARS: Final = 200


def register(sub: Any) -> None:
    models = sub.add_parser("models", help="list the model catalogue, or (--cached) the models downloaded here")
    models.add_argument("--json", action="store_true")
    models.add_argument(
        "--cached", action="store_true", help="the models in this machine's Hugging Face cache, read offline"
    )
    models.add_argument(
        "--cache", type=text_arg, metavar="DIR", help="--cached: this cache folder (default: HF_HUB_CACHE, HF_HOME/hub)"
    )
    models.add_argument(
        "--headers", action="store_true", help="--cached: count parameters from the safetensors headers too (slower)"
    )
    models.add_argument(
        "--search", type=text_arg, metavar="TEXT", help="only the models whose id or name has every word"
    )
    gpus = sub.add_parser("gpus", help="list the GPU catalogue, or (--local) the GPUs of this machine")
    gpus.add_argument("--json", action="store_true")
    gpus.add_argument(
        "--local",
        action="store_true",
        help="this machine's GPUs (NVML, nvidia-smi, rocm-smi, sysctl), its host RAM and speed",
    )
    gpus.add_argument(
        "--timeout",
        type=float,
        default=LOCAL_TIMEOUT_S,
        metavar="S",
        help=f"--local: seconds to wait for the drivers in all (default {LOCAL_TIMEOUT_S:g})",
    )
    links = sub.add_parser("links", help="list the interconnect catalogue (for --intra-link and --interconnect)")
    links.add_argument("--json", action="store_true")
    optimizers = sub.add_parser("optimizers", help="which optimizers each training stack builds, and each one's rule")
    optimizers.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> str:
    if args.command == "gpus" and args.local:
        if not MIN_TIMEOUT_S <= args.timeout <= MAX_TIMEOUT_S:
            raise UsageError(
                f"--timeout: {args.timeout:g} is not allowed; expected {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g}"
            )
        found = detect_local_gpus(args.timeout)
        return json_text(local_gpus_json(found)) if args.json else render_local_gpus(found)
    if args.command == "models":
        search = _search_text(args.search)
        if args.cached:
            scan = scan_cache(args.cache, headers=args.headers)
            return json_text(cache_json(scan, search)) if args.json else render_cache(scan, search)
        if args.cache is not None or args.headers:
            raise UsageError("--cache and --headers apply to --cached")
        return _list_models(args.json, search)
    listing = {"gpus": _list_gpus, "links": _list_links, "optimizers": _list_optimizers}[args.command]
    return listing(args.json)


def _search_text(text: str | None) -> str:
    if text is None:
        return ""
    if len(text) > MAX_SEARCH_CHARS:
        raise UsageError(f"--search: {len(text):,} characters; at most {MAX_SEARCH_CHARS}")
    return text


# ---- this machine's GPUs -----------------------------------------------------------------------
def _plan_options(gpu: LocalGpu, found: LocalGpus) -> str:
    changes = found.hardware_changes(gpu)
    if changes.get("gpu") == "custom":
        options = f"--gpu custom --custom-memory-gb {changes['custom_memory_gb']:g}"
    else:
        options = f"--gpu {changes['gpu']}"
    platform = changes.get("platform")
    # Native Linux is every plan's default: only another platform is named (core.platform_rules).
    return options + (f" --platform {platform}" if platform not in (None, Platform.LINUX) else "")


def render_local_gpus(found: LocalGpus) -> str:
    """The summary, each card with what its driver says and the options that plan on it, the notes."""
    lines = [f"{found.summary} (in {found.elapsed_s:.2f} s)" if found.found else found.summary]
    for gpu in found.gpus:
        lines.append(f"  {gpu.index}: {gpu.label}")
        via = f"via {gpu.source}" + (f", driver {gpu.driver}" if gpu.driver else "")
        lines.append(f"     {via}; plan on it: {_plan_options(gpu, found)}")
        held = gpu.held_fraction
        if held:
            # Rounded up to the 0.01 GiB the window types: never less than what is held.
            gib = math.ceil(gpu.held_now_bytes / GiB * 100) / 100
            lines.append(
                f"     other processes hold {gib:g} GiB ({held:.0%}): --held-by-others {gib:g} judges a plan "
                "against what is free now"
            )
    if found.platform not in (None, Platform.LINUX):
        label = PLATFORM_LABELS[found.platform]
        lines.append(f"  CUDA runs under {label} here: --platform {found.platform} (the driver reports the whole card)")
    count = found.same_cards()
    if count > 1:
        lines.append(f"  {count} cards of one kind: --gpus {count} plans on all of them")
    lines += [f"  note: {note}" for note in found.notes]
    if found.host is not None:
        lines += render_local_host(found.host)
    return "\n".join(lines) + "\n"


def render_local_host(host: LocalHost) -> list[str]:
    """The host's RAM and speed, where the size came from, the options that plan with them, its notes."""
    lines = [host.label]
    values = host.plan_values()
    if values:
        options = " ".join(f"{input_at(path).flags[0]} {value:g}" for path, value in values.items())
        via = f"RAM from {host.total_source}; " if host.total_source else ""
        lines.append(f"  {via}plan with it: {options}")
    lines += [f"  note: {note}" for note in host.notes]
    return lines


def local_gpus_json(found: LocalGpus) -> dict[str, Any]:
    return {
        "host": None if found.host is None else host_json(found.host),
        "found": found.found,
        "summary": found.summary,
        "elapsed_s": round(found.elapsed_s, 3),
        "tried": list(found.tried),
        "notes": list(found.notes),
        "same_cards": found.same_cards(),
        "platform": None if found.platform is None else found.platform.value,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "vendor": g.vendor,
                "total_bytes": g.total_bytes,
                "used_bytes": g.used_bytes,
                "free_bytes": g.free_bytes,
                "source": g.source,
                "driver": g.driver,
                "catalogue_id": g.catalogue.id if g.catalogue is not None else None,
                "plan_hardware": g.hardware_changes(),
                "unified_memory_bytes": g.unified_memory_bytes,
            }
            for g in found.gpus
        ],
    }


# ---- this machine's Hugging Face cache ----------------------------------------------------------
def _params(model: CachedModel) -> int:
    return model.checkpoint_params or model.spec.total_params()


def render_cache(scan: CacheScan, search: str) -> str:
    if not scan.exists:
        return f"No Hugging Face cache at {scan.root} (set HF_HUB_CACHE or HF_HOME, or give --cache DIR)\n"
    models = scan.search(search) if search else list(scan.models)
    shown = f"{len(models)} of {len(scan.models)}" if search else f"{len(scan.models)}"
    lines = [f"Hugging Face cache at {scan.root}: {shown} models, {len(scan.skipped)} skipped ({scan.elapsed_s:.2f} s)"]
    width = max((len(m.repo_id) for m in models), default=10)
    for model in models:
        counted = "headers" if model.checkpoint_params else "config.json"
        lines.append(
            f"  {model.repo_id:<{width}}  {format_count(_params(model)):>7} params ({counted})  "
            f"{format_memory(model.size_bytes):>9} on disk  {model.revision[:8]}{' (main)' if model.ref else ''}"
        )
        if model.catalogue_id is not None:
            lines.append(f"      catalogue model of that name: {model.catalogue_id}")
        lines += [f"      note: {note}" for note in model.notes]
    if scan.skipped:
        lines.append("Skipped:")
        lines += [f"  {one_line(s.name)} — {s.reason}" for s in scan.skipped]
    if models:
        lines.append("Plan on one: vramplan estimate --model ORG/NAME (read from this cache, offline)")
    return "\n".join(lines) + "\n"


def cache_json(scan: CacheScan, search: str) -> dict[str, Any]:
    models = scan.search(search) if search else list(scan.models)
    return {
        "root": scan.root,
        "exists": scan.exists,
        "elapsed_s": round(scan.elapsed_s, 3),
        "models": [
            {
                "repo_id": m.repo_id,
                "revision": m.revision,
                "ref": m.ref,
                "path": m.path,
                "params": _params(m),
                "params_from": "headers" if m.checkpoint_params else "config.json",
                "size_bytes": m.size_bytes,
                "notes": list(m.notes),
                "catalogue_id": m.catalogue_id,
                "model": m.spec.to_dict(),
            }
            for m in models
        ],
        "skipped": [{"name": s.name, "reason": s.reason} for s in scan.skipped],
    }


# ---- the catalogues -----------------------------------------------------------------------------
def _list_models(as_json: bool, search: str = "") -> str:
    words = search.lower().split()
    models = [m for m in load_models() if all(w in f"{m.id} {m.name} {m.hf_repo}".lower() for w in words)]
    if as_json:
        rows = [{"id": m.id, "name": m.name, "params": m.spec.total_params()} for m in models]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    lines = []
    id_width, name_width = _widths((m.id, m.name) for m in models)
    for m in models:
        spec: ModelSpec = m.spec
        kv = f"MLA {spec.latent_width}" if spec.latent_attention else str(spec.num_kv_heads)  # the cached latent
        lines.append(
            f"{m.id:<{id_width}} {m.name:<{name_width}} {format_count(spec.total_params()):>7}  "
            f"L={spec.num_layers:<3} d={spec.hidden_size:<5} heads={spec.num_heads}/{kv}\n"
        )
    return "".join(lines)


def _widths(rows: Iterable[tuple[str, str]]) -> tuple[int, int]:
    """The id and name columns' widths: the longest of each, so every later column lines up."""
    pairs = list(rows)
    return max((len(i) for i, _ in pairs), default=2), max((len(n) for _, n in pairs), default=4)


def _list_gpus(as_json: bool) -> str:
    gpus = load_gpus()
    if as_json:
        rows = [
            {"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes, "tflops_dense": dict(g.tflops_dense)}
            for g in gpus
        ]
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    id_width, name_width = _widths((g.id, g.name) for g in gpus)
    return "".join(
        f"{g.id:<{id_width}} {g.name:<{name_width}} {g.memory_bytes / MiB:>8,.0f} MiB  {g.memory_bytes / GB:>6.1f} GB  "
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


def _list_optimizers(as_json: bool) -> str:
    """The one table (core.optimizer_stacks): each stack, its rule and the optimizers it builds."""
    rows = [
        {
            "stack": stack.value,
            "name": STACK_NAMES[stack],
            "rule": STACK_RULES[stack],
            "builds": [o.value for o in built(stack)],
        }
        for stack in OptimizerStack
    ]
    if as_json:
        return json.dumps(rows, indent=2, allow_nan=False) + "\n"
    return "".join(f"{row['name']}\n  rule: {row['rule']}\n  builds: {', '.join(row['builds'])}\n" for row in rows)
