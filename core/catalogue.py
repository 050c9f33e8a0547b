"""The model and GPU catalogues: data files in ``resources/``, read once, never executed."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from core.errors import PlanError, PlanFileError
from core.hfconfig import model_from_hf_config
from core.memo import last_answer
from core.model import ModelSpec
from core.resources import resource_path
from core.units import MiB

if TYPE_CHECKING:
    from core.plan import Plan

# Compute dtypes a GPU entry gives a dense TFLOP/s figure for (null where it has none).
DTYPES: Final = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class CatalogueModel:
    id: str
    name: str
    family: str
    hf_repo: str
    published_params: int
    published_params_source: str
    config_source: str
    config: Mapping[str, Any]
    spec: ModelSpec
    active_params: int | None = None  # MoE: the published active count, when the entry states one
    active_params_source: str = ""


@dataclass(frozen=True)
class PendingModel:
    """A catalogue entry whose architecture the config reader does not know yet (kept, not offered)."""

    id: str
    name: str
    model_type: str
    published_params: int
    reason: str


class GpuGroup(StrEnum):
    """The picker's groups: where the card lives."""

    LAPTOP = "laptop"
    DESKTOP = "desktop"
    DATACENTRE = "data-centre"
    APPLE = "apple"
    UNIFIED = "unified"  # a PC whose GPU shares the system's RAM: DGX Spark, Ryzen AI Max (Strix Halo)
    CUSTOM = "custom"


GROUP_LABELS: Final = {
    GpuGroup.LAPTOP: "Laptop",
    GpuGroup.DESKTOP: "Desktop and workstation",
    GpuGroup.DATACENTRE: "Data centre and cloud",
    GpuGroup.APPLE: "Apple silicon (unified memory)",
    GpuGroup.UNIFIED: "Unified-memory PCs",  # DGX Spark, Ryzen AI Max: short, so the picker keeps its width
    GpuGroup.CUSTOM: "Your own cards",
}
_SEGMENT_GROUPS: Final = {
    "laptop": GpuGroup.LAPTOP,
    "consumer": GpuGroup.DESKTOP,
    "workstation": GpuGroup.DESKTOP,
    "datacenter": GpuGroup.DATACENTRE,
    "apple": GpuGroup.APPLE,
    "unified": GpuGroup.UNIFIED,
}


class Generation(StrEnum):
    """A card's architecture, as far as the estimates tell families apart: the training speed
    fit's efficiency tables (core.training.speed) and the libraries' workspace sizes
    (core.runtime.cublas_workspace / te_workspace, read by training and serving)."""

    AMPERE = "ampere"  # sm80 / sm86
    ADA = "ada"  # sm89
    HOPPER = "hopper"  # sm90
    BLACKWELL = "blackwell"  # sm100 (B200, GB200), sm103 (B300, GB300), sm120 (RTX 50, RTX PRO 6000), sm121 (GB10)
    OTHER = "other"  # Volta, Turing, AMD, Apple, a custom card: not told apart


# Catalogue ids by family (NVIDIA's architecture of each product, its datasheet).
_GENERATION_PREFIXES: Final = (
    ("h100", Generation.HOPPER),
    ("h200", Generation.HOPPER),
    ("gh200", Generation.HOPPER),
    ("h20", Generation.HOPPER),
    ("h800", Generation.HOPPER),  # the H100 SXM's die (NVIDIA's H800 brief)
    ("b200", Generation.BLACKWELL),
    ("b300", Generation.BLACKWELL),  # Blackwell Ultra, compute capability 10.3 (nvidia-smi captures)
    ("gb200", Generation.BLACKWELL),  # the B200's GPU beside a Grace CPU (GB200 NVL72 datasheet)
    ("gb300", Generation.BLACKWELL),  # the B300's GPU beside a Grace CPU (GB300 NVL72 datasheet)
    ("dgx-spark", Generation.BLACKWELL),  # GB10: compute capability 12.1 (torch captures, dgx_spark_config #1)
    ("rtx-50", Generation.BLACKWELL),
    ("rtx-pro-", Generation.BLACKWELL),  # RTX PRO 4000 / 4500 / 5000 / 6000 Blackwell: sm120 (NVIDIA's datasheets)
    ("a100", Generation.AMPERE),
    ("a800", Generation.AMPERE),  # the A100's die (NVIDIA's A800 brief)
    ("a10", Generation.AMPERE),
    ("a30", Generation.AMPERE),
    ("a40", Generation.AMPERE),
    ("rtx-30", Generation.AMPERE),
    ("rtx-a", Generation.AMPERE),
    ("rtx-40", Generation.ADA),
    ("l40", Generation.ADA),
    ("l4", Generation.ADA),
    ("l20", Generation.ADA),
)


# AMD cards by LLVM target (AMD's "GPU hardware specifications" table in the ROCm documentation,
# rocm.docs.amd.com reference/gpu-arch-specs: MI355X / MI350X gfx950, MI300X / MI325X gfx942, MI250X /
# MI210 gfx90a, Radeon RX 7900 XTX / XT gfx1100, RX 9070 XT gfx1201; Ryzen AI Max+ 395's Radeon 8060S
# gfx1151, as rocminfo names it in antirez/ds4 issue #475): PyTorch's ROCm build picks its BLAS library and
# workspace by this target (core.runtime), and the serving checks which engines build for it (core.checks).
_AMD_TARGET_PREFIXES: Final = (
    ("mi355x", "gfx950"),
    ("mi350x", "gfx950"),
    ("rx-7900", "gfx1100"),
    ("rx-9070", "gfx1201"),
    ("ryzen-ai-max", "gfx1151"),
    ("mi300x", "gfx942"),
    ("mi325x", "gfx942"),
    ("mi250x", "gfx90a"),
    ("mi210", "gfx90a"),
)


_T = TypeVar("_T")


def _by_prefix(table: tuple[tuple[str, _T], ...], gpu_id: str) -> _T | None:
    """The value of the first of ``table``'s (prefix, value) rows whose prefix starts ``gpu_id``."""
    return next((value for prefix, value in table if gpu_id.startswith(prefix)), None)


@lru_cache(maxsize=64)
def amd_target(gpu_id: str) -> str | None:
    """The LLVM target (gfx…) of the catalogue's AMD card ``gpu_id``; None for any other card. A pure function
    of the id, read three times an estimate (the runtime's names, the serving checks): kept per id, as
    :func:`generation` is."""
    return _by_prefix(_AMD_TARGET_PREFIXES, gpu_id)


@lru_cache(maxsize=64)
def generation(gpu_id: str) -> Generation:
    """The architecture of the catalogue card ``gpu_id`` (OTHER for a custom card, one the
    catalogue lacks, or a family the table does not name). A pure function of the id, read
    several times an estimate: kept per id (a walk over the prefix table each time otherwise)."""
    if gpu_id.endswith("-ada"):  # RTX 4000/5000/6000 Ada: a suffix, read before the prefixes ("rtx-50…")
        return Generation.ADA
    return _by_prefix(_GENERATION_PREFIXES, gpu_id) or Generation.OTHER


# The datacenter Blackwell cards, compute capability 10.0 (B200, GB200) and 10.3 (B300, GB300; nvidia-smi captures):
# their tensor cores reach the datasheet's 16-bit rate through tcgen05, 8,192 dense FLOPs per SM per clock against
# Hopper's 4,096 (NVIDIA/cudnn-frontend@21258cf5 benchmark/dsa/benchmark_single_dsa.py ``_FLOPS_PER_CLOCK_PER_SM``
# {9: 4096, 10: 8192, 12: 1024}: B200's 2,250 TFLOP/s = 148 SMs x 8,192 x 1.855 GHz). The RTX 50 / RTX PRO
# Blackwell cards and GB10 (sm_120 / sm_121) have no tcgen05: their peak is the warp-level mma.sync rate.
_TCGEN05_PREFIXES: Final = ("b200", "b300", "gb200", "gb300")


@lru_cache(maxsize=64)
def tcgen05(gpu_id: str) -> bool:
    """Whether the catalogue card ``gpu_id`` is a datacenter Blackwell (sm_100 / sm_103), whose 16-bit peak only
    tcgen05 MMAs reach."""
    return gpu_id.startswith(_TCGEN05_PREFIXES)


# The rates a compute dtype's peak is read from, in order (GpuSpec.peak_tflops; read several times an estimate).
_PEAK_FALLBACKS: Final = {
    "fp32": ("fp32", "tf32"),
    "tf32": ("tf32", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    # A card without fp8 tensor cores runs fp8 weights dequantised (vLLM's FP8 Marlin
    # on Ampere) at its 16-bit rate: its int8 rate is no fp8 rate.
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "fp8", "bf16", "fp16"),
}


@dataclass(frozen=True)
class GpuSpec:
    id: str
    name: str
    vendor: str
    segment: str
    memory_bytes: int  # what the driver reports as total memory
    memory_reported: str
    memory_marketing_gb: float
    tflops_dense: Mapping[str, float | None]
    memory_bandwidth_gb_s: float
    board_power_w: float
    sources: tuple[str, ...]
    notes: str = ""
    # dtype -> why the card cannot run it (its TFLOP/s entry is then null).
    unsupported_dtypes: Mapping[str, str] = field(default_factory=dict)
    price_per_hour_usd: float | None = None  # typical cloud on-demand price of one GPU
    price_purchase_usd: float | None = None  # or its purchase price (launch MSRP)
    price_source: str = ""
    price_date: str | None = None
    checked_two_sources: tuple[str, ...] = ()  # fields whose value two independent sources agree on
    # A unified-memory machine (Apple silicon, DGX Spark, Ryzen AI Max): its RAM; memory_bytes is the part
    # the GPU may use by default, gpu_share that part's fraction where a rule sets one (Metal's working set,
    # Linux's TTM limit), None where the driver reports the memory the OS manages (DGX Spark).
    unified_memory_gb: float | None = None
    gpu_share: float | None = None
    # The link between two of these cards in one node (resources/links.json), from each
    # product's datasheet: NVLink 3 for A100 SXM, NVLink 4 for H100 / H200 SXM, GH200 and H20,
    # NVLink 5 for B200, NVLink 2 for V100 SXM2, Infinity Fabric for MI300X / MI325X; the
    # others talk over their PCIe generation (3.0: T4, GeForce RTX 20; 5.0: RTX 50, H100 PCIe /
    # NVL, RTX PRO 6000 Blackwell; 4.0: the rest). What "auto" means for parallel.intra_link.
    intra_link: str = "pcie4-x16"
    # The GPU's boost clock (GHz) from its product page or whitepaper; None where the vendor
    # prints none (Apple) or it varies with the power limit (laptop parts). Read by the serving
    # speed model: a kernel's fixed cost is counted in the SM's cycles.
    boost_clock_ghz: float | None = None
    # Streaming multiprocessors (the architecture whitepaper's count): how many matmul tiles run at
    # once, one wave (core.training.gemm_shape). None: tile quantization only.
    sm_count: int | None = None

    @property
    def group(self) -> GpuGroup:
        return _SEGMENT_GROUPS.get(self.segment, GpuGroup.CUSTOM)

    def figure_fields(self) -> tuple[str, ...]:
        """The figures this entry gives, named as ``checked_two_sources`` names them."""
        fields = ["memory_bytes", "memory_bandwidth_gb_s"]
        fields += ["board_power_w"] if self.board_power_w else []
        fields += [f"tflops_dense.{dtype}" for dtype in DTYPES if self.tflops_dense.get(dtype) is not None]
        fields += ["price_per_hour_usd"] if self.price_per_hour_usd is not None else []
        fields += ["price_purchase_usd"] if self.price_purchase_usd is not None else []
        return tuple(fields)

    def hourly_price(self) -> tuple[float, str] | None:
        """The typical price per GPU-hour (USD) with its source and date, where the catalogue
        gives one; None for a card without a price."""
        price = self.price_per_hour_usd
        if price is None or price <= 0:
            return None
        source = self.price_source or "catalogue"
        return float(price), f"{source}, {self.price_date}" if self.price_date else source

    def dtype_problem(self, dtype: str) -> str | None:
        """Why this card cannot run ``dtype`` natively, or None when it can (or nothing is known)."""
        return self.unsupported_dtypes.get(dtype)

    def peak_tflops(self, dtype: str) -> float:
        """Dense peak for a compute dtype; falls back to the nearest supported rate."""
        for key in _PEAK_FALLBACKS.get(dtype, (dtype,)):
            value = self.tflops_dense.get(key)
            if value:
                return float(value)
        return 0.0


def custom_gpu(memory_gb: float, tflops: float, name: str = "", bandwidth_gb_s: float = 0.0) -> GpuSpec:
    """A card the user describes by its memory (decimal GB), 16-bit dense TFLOP/s and memory
    bandwidth (decimal GB/s; 0: unknown)."""
    return GpuSpec(
        id="custom",
        name=name or f"Custom GPU ({memory_gb:g} GB)",
        vendor="custom",
        segment="custom",
        memory_bytes=int(memory_gb * 1e9),
        memory_reported=f"{memory_gb:g} GB as typed",
        memory_marketing_gb=memory_gb,
        tflops_dense={"fp32": tflops / 2, "bf16": tflops, "fp16": tflops},
        memory_bandwidth_gb_s=bandwidth_gb_s,
        board_power_w=0.0,
        sources=(),
    )


def _load_json(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            raw = handle.read(50_000_000)
        return json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise PlanFileError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    except RecursionError:
        raise PlanFileError(str(path), "is nested too deeply to be a catalogue") from None
    except ValueError as exc:  # bad UTF-8, bad JSON, an integer of thousands of digits
        raise PlanFileError(str(path), f"is not valid JSON ({exc})") from None


def load_models(path: str | None = None) -> tuple[CatalogueModel, ...]:
    """The catalogue models the config reader understands (see :func:`pending_models` for the rest)."""
    return _read_models(path)[0]


def pending_models(path: str | None = None) -> tuple[PendingModel, ...]:
    """Entries of families the config reader does not parse yet: kept in the file, not offered."""
    return _read_models(path)[1]


def _unknown_architecture(exc: PlanError) -> bool:
    """A family the reader does not plan: unknown, or known and refused with what it lacks (core.hfconfig's
    RECURRENT_MODEL_TYPES, UNMODELLED_MODEL_TYPES); either is kept aside, not a broken catalogue."""
    return exc.field == "config.model_type"


@lru_cache(maxsize=1)
def _read_models(path: str | None = None) -> tuple[tuple[CatalogueModel, ...], tuple[PendingModel, ...]]:
    data = _load_json(Path(path) if path else resource_path("models.json"))
    where = path or "resources/models.json"
    if not isinstance(data, dict) or data.get("format") != "vramplan-model-catalogue":
        raise PlanFileError(where, "is not a VRAM Planner model catalogue")
    if not isinstance(data.get("models", []), list):
        raise PlanFileError(where, "has a 'models' entry that is not a list")
    models = []
    pending = []
    for index, entry in enumerate(data.get("models", [])):
        try:
            try:
                spec = model_from_hf_config(entry["config"], name=entry["name"])
            except PlanError as exc:
                if not _unknown_architecture(exc):
                    raise
                pending.append(
                    PendingModel(
                        id=str(entry["id"]),
                        name=str(entry["name"]),
                        model_type=str(entry["config"].get("model_type")),
                        published_params=int(entry["published_params"]),
                        reason=str(exc),
                    )
                )
                continue
            active = entry.get("active_params")
            models.append(
                CatalogueModel(
                    id=str(entry["id"]),
                    name=str(entry["name"]),
                    family=str(entry.get("family", spec.family)),
                    hf_repo=str(entry.get("hf_repo", "")),
                    published_params=int(entry["published_params"]),
                    published_params_source=str(entry.get("published_params_source", "")),
                    config_source=str(entry.get("config_source", "")),
                    config=entry["config"],
                    spec=spec,
                    active_params=None if active is None else int(active),
                    active_params_source=str(entry.get("active_params_source", "")),
                )
            )
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError, PlanError) as exc:
            raise PlanFileError(where, f"model entry {index} is malformed: {exc}") from None
    return tuple(models), tuple(pending)


@lru_cache(maxsize=1)
def load_gpus(path: str | None = None) -> tuple[GpuSpec, ...]:
    data = _load_json(Path(path) if path else resource_path("gpus.json"))
    where = path or "resources/gpus.json"
    if not isinstance(data, dict) or data.get("format") != "vramplan-gpu-catalogue":
        raise PlanFileError(where, "is not a VRAM Planner GPU catalogue")
    if not isinstance(data.get("gpus", []), list):
        raise PlanFileError(where, "has a 'gpus' entry that is not a list")
    gpus = []
    for index, entry in enumerate(data.get("gpus", [])):
        try:
            tflops = {str(k): (None if v is None else float(v)) for k, v in dict(entry["tflops_dense"]).items()}
            memory = int(entry["memory_bytes"])
            if memory <= 0 or (memory % MiB and memory % 1000):
                raise ValueError(f"memory_bytes {memory} is not a whole number of MiB")
            if any(v is not None and (not math.isfinite(v) or v < 0) for v in tflops.values()):
                raise ValueError("a TFLOP/s figure is negative or not finite")
            gpus.append(
                GpuSpec(
                    id=str(entry["id"]),
                    name=str(entry["name"]),
                    vendor=str(entry.get("vendor", "")),
                    segment=str(entry.get("segment", "")),
                    memory_bytes=memory,
                    memory_reported=str(entry.get("memory_reported", "")),
                    memory_marketing_gb=float(entry.get("memory_marketing_gb", 0)),
                    tflops_dense=tflops,
                    memory_bandwidth_gb_s=float(entry.get("memory_bandwidth_gb_s") or 0),
                    board_power_w=float(entry.get("board_power_w") or 0),
                    sources=tuple(str(s) for s in entry.get("sources", ())),
                    notes=str(entry.get("notes", "")),
                    unsupported_dtypes={str(k): str(v) for k, v in dict(entry.get("unsupported_dtypes") or {}).items()},
                    price_per_hour_usd=_optional_number(entry.get("price_per_hour_usd")),
                    price_purchase_usd=_optional_number(entry.get("price_purchase_usd")),
                    price_source=str(entry.get("price_source") or ""),
                    price_date=None if entry.get("price_date") is None else str(entry["price_date"]),
                    checked_two_sources=tuple(str(f) for f in entry.get("checked_two_sources") or ()),
                    unified_memory_gb=_optional_number(entry.get("unified_memory_gb")),
                    gpu_share=_optional_number(entry.get("gpu_share")),
                    intra_link=str(entry.get("intra_link") or "pcie4-x16"),
                    boost_clock_ghz=_optional_number(entry.get("boost_clock_ghz")),
                    sm_count=_optional_count(entry.get("sm_count")),
                )
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise PlanFileError(where, f"GPU entry {index} is malformed: {exc}") from None
    return tuple(gpus)


@lru_cache(maxsize=1)
def _share_rules() -> dict[str, str]:
    data = _load_json(resource_path("gpus.json"))
    return {str(entry["id"]): str(entry["share_rule"]) for entry in data["gpus"] if entry.get("share_rule")}


def share_rule(gpu_id: str) -> str:
    """How a non-Apple unified-memory machine's GPU share is set and raised, in a few lines (the catalogue
    entry's ``share_rule``); "" for any other card (an Apple entry's rule is the window's own text about
    iogpu.wired_limit_mb). Read from the shipped catalogue when the window first shows such a card: a text,
    not a figure, so it is no field of GpuSpec (whose fields every estimate carries)."""
    return _share_rules().get(gpu_id, "")


def _optional_number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative number or null")
    return float(value)


def _optional_count(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a positive whole number or null")
    return value


class LinkKind(StrEnum):
    """Where a link sits: between the GPUs of one node, or between nodes."""

    INTRA = "intra"
    INTER = "inter"


@dataclass(frozen=True)
class LinkSpec:
    """One interconnect: its peak per GPU and direction, what NCCL reaches of it, its latency."""

    id: str
    name: str
    kind: LinkKind
    bandwidth_gb_s: float  # per GPU, per direction (decimal GB/s)
    bus_efficiency: float  # share of the peak NCCL's ring reaches (nccl-tests busbw)
    latency_us: float  # per ring hop (NCCL's hwLat, Simple protocol)
    source: str
    efficiency_source: str
    host_link: str = ""  # intra links: the GPU's PCIe link to the host (offload traffic)

    @property
    def bus_bytes_per_second(self) -> float:
        """The bandwidth a collective sees: peak × efficiency, in bytes per second."""
        return self.bandwidth_gb_s * 1e9 * self.bus_efficiency


@lru_cache(maxsize=1)
def load_links(path: str | None = None) -> tuple[LinkSpec, ...]:
    data = _load_json(Path(path) if path else resource_path("links.json"))
    where = path or "resources/links.json"
    if not isinstance(data, dict) or data.get("format") != "vramplan-link-catalogue":
        raise PlanFileError(where, "is not a VRAM Planner link catalogue")
    if not isinstance(data.get("links", []), list):
        raise PlanFileError(where, "has a 'links' entry that is not a list")
    links = []
    for index, entry in enumerate(data.get("links", [])):
        try:
            bandwidth = _optional_number(entry["bandwidth_gb_s"])
            efficiency = _optional_number(entry["bus_efficiency"])
            latency = _optional_number(entry["latency_us"])
            if not bandwidth or not efficiency or efficiency > 1 or latency is None:
                raise ValueError("bandwidth and efficiency must be above 0 (efficiency at most 1), latency given")
            links.append(
                LinkSpec(
                    id=str(entry["id"]),
                    name=str(entry["name"]),
                    kind=LinkKind(entry["kind"]),
                    bandwidth_gb_s=bandwidth,
                    bus_efficiency=efficiency,
                    latency_us=latency,
                    source=str(entry["source"]),
                    efficiency_source=str(entry.get("efficiency_source", "")),
                    host_link=str(entry.get("host_link") or ""),
                )
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise PlanFileError(where, f"link entry {index} is malformed: {exc}") from None
    return tuple(links)


# parallel.intra_link's default: the link the plan's card has (GpuSpec.intra_link).
CARD_LINK: Final = "auto"


def intra_link_of(link_id: str, gpu_id: str) -> LinkSpec:
    """The link within a node: ``link_id``, or with ``auto`` the card's own (PCIe 4.0 for a
    custom card or one the catalogue lacks)."""
    if link_id.strip().lower() != CARD_LINK:
        return find_link(link_id, "parallel.intra_link")
    card = next((g for g in load_gpus() if g.id == gpu_id), None)
    return find_link(card.intra_link if card is not None else "pcie4-x16", "parallel.intra_link")


class _Named(Protocol):  # a catalogue entry: CatalogueModel, GpuSpec, LinkSpec (frozen: read-only)
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...


def _closest(wanted: str, entries: Sequence[_Named]) -> str:
    """ "closest: a, b" — the ids of up to three entries near ``wanted``, for the refusal's reason: first those
    whose id or name holds it whole (``a100``, ``qwen3-30b``, ``4090``), then difflib's nearest (a typo such as
    ``llama3.1-8b`` or ``h100sxm``); "" when none is near. Only a refusal pays for it."""
    names: dict[str, str] = {}
    for entry in entries:
        names.setdefault(entry.id, entry.id)
        names.setdefault(entry.name.lower(), entry.id)
    key = wanted.strip().lower()[:100]  # difflib is quadratic in the length: a pasted paragraph stays cheap
    holding = [names[n] for n in names if len(key) >= 2 and key in n]
    near = [names[n] for n in difflib.get_close_matches(key, list(names), n=6, cutoff=0.6)]
    ids = list(dict.fromkeys(holding + near))[:3]
    return f"closest: {', '.join(ids)}" if ids else ""


@lru_cache(maxsize=64)
def find_link(link_id: str, field: str = "parallel.intra_link") -> LinkSpec:
    """The catalogue link ``link_id``; a PlanError naming ``field`` when there is none."""
    wanted = link_id.strip().lower()
    for link in load_links():
        if link.id == wanted or link.name.lower() == wanted:
            return link
    raise PlanError(field, link_id, "a link id from `vramplan links`", _closest(wanted, load_links()))


def find_model(model_id: str) -> CatalogueModel:
    wanted = model_id.strip().lower()
    for model in load_models():
        if model.id == wanted or model.name.lower() == wanted or model.hf_repo.lower() == wanted:
            return model
    raise PlanError("model", model_id, "a model id from `vramplan models`", _closest(wanted, load_models()))


def closest_models(hub_id: str) -> str:
    """The catalogue models near a Hub id's repository name (``meta-llama/Meta-Llama-3-8B``: "closest:
    llama-3.1-8b, …"), "" when none is near: what the refusal of a Hub id neither cache nor catalogue has adds."""
    return _closest(hub_id.strip().rstrip("/").rsplit("/", 1)[-1], load_models())


# ---- which catalogue model a plan's model is --------------------------------------------------
def catalogue_entry(plan: Plan) -> CatalogueModel | None:
    """The catalogue model the plan's model is, if any: the entry whose spec equals the plan's (architecture,
    counts and name), the one ``plan.model_id`` names where several are equal. The spec decides, not the id: a
    plan whose model was edited after a catalogue pick is no longer that checkpoint (the window's model form
    clears the id on an edit; a plan file can still carry both), and a model read without an id (an old plan
    file, a run config) whose spec is an entry's is that entry. The one answer to "which checkpoint is this":
    the launch exports (core.files.launch) and SGLang's --model-path (core.serving.sglang_versions) read it."""
    return _entry_of(plan.model, plan.model_id)


def hub_repo_of(plan: Plan) -> str:
    """The Hugging Face repository of the plan's catalogue model (:func:`catalogue_entry`), "" where it is none:
    what a launch export writes as the model and what SGLang then reads as --model-path."""
    entry = catalogue_entry(plan)
    return entry.hf_repo if entry is not None else ""


@last_answer  # by identity: the plans of one session share a few ModelSpec objects
def _entry_of(model: ModelSpec, model_id: str) -> CatalogueModel | None:
    try:
        models = load_models()
    except PlanFileError:  # a broken catalogue names no model
        return None
    same = _models_by_spec(models).get(model, ())
    return next((m for m in same if m.id == model_id), same[0] if same else None)


@last_answer  # keyed on the catalogue tuple load_models keeps: its index never changes
def _models_by_spec(models: tuple[CatalogueModel, ...]) -> dict[ModelSpec, tuple[CatalogueModel, ...]]:
    """The entries by spec (a scan comparing every entry's spec took 0.2 ms; a hashed look-up a few µs)."""
    index: dict[ModelSpec, tuple[CatalogueModel, ...]] = {}
    for model in models:
        index[model.spec] = (*index.get(model.spec, ()), model)
    return index


def find_gpu(gpu_id: str) -> GpuSpec:
    """The catalogue's card whose id or name (any case) is ``gpu_id``: the first in the catalogue."""
    found = _gpu_index(load_gpus()).get(gpu_id.strip().lower())
    if found is None:
        allowed = "a GPU id from `vramplan gpus` or 'custom'"
        raise PlanError("hardware.gpu", gpu_id, allowed, _closest(gpu_id, load_gpus()))
    return found


@last_answer  # keyed on the catalogue tuple load_gpus keeps: the index of a loaded catalogue never changes
def _gpu_index(gpus: tuple[GpuSpec, ...]) -> dict[str, GpuSpec]:
    """Each card's id and lower-cased name to the first card in ``gpus`` that has it (as id or name):
    the card a scan in catalogue order would stop at. Read by every estimate; never changed."""
    index: dict[str, GpuSpec] = {}
    for gpu in gpus:
        index.setdefault(gpu.id, gpu)
        index.setdefault(gpu.name.lower(), gpu)
    return index


# "24 GB", "24gb", "80 GiB", "24G": a memory size in a search.
# A size starts where a number starts (the lookbehind): without it, a query of n digits was
# tried from each of its n positions, n² steps (1,000 digits typed into the GPU picker, which
# searches each card: 12 s; 4,000: 168 s; benchmarks/gui_input_audit.py).
_MEMORY_WORDS: Final = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:gib|gb|g)\b")


def gpu_search_text(gpu: GpuSpec) -> str:
    """What a GPU search matches against: id, name, vendor, segment and group."""
    return f"{gpu.id} {gpu.name} {gpu.vendor} {gpu.segment} {gpu.group.value} {GROUP_LABELS[gpu.group]}".lower()


def _memory_matches(gpu: GpuSpec, size_gb: float) -> bool:
    """The card's nominal memory (or an Apple machine's RAM) is the size asked for."""
    nominal = gpu.unified_memory_gb if gpu.unified_memory_gb is not None else gpu.memory_marketing_gb
    return abs(nominal - size_gb) < 0.5


def search(items: tuple[Any, ...], text: str) -> list[Any]:
    """Catalogue entries matching every word of ``text``.

    Words match the id and name (GPUs also vendor and group: "amd", "laptop", "apple");
    a memory size ("24 GB", "80gb") matches a GPU's nominal memory.
    """
    query = text.lower()
    sizes = [float(m.group(1)) for m in _MEMORY_WORDS.finditer(query)]
    words = _MEMORY_WORDS.sub(" ", query).split()
    found = []
    for item in items:
        if isinstance(item, GpuSpec):
            haystack = gpu_search_text(item)
            if not all(_memory_matches(item, size) for size in sizes):
                continue
        else:
            haystack = f"{item.id} {item.name}".lower()
            if sizes and not all(f"{size:g}" in haystack for size in sizes):
                continue
        if all(word in haystack for word in words):
            found.append(item)
    return found
