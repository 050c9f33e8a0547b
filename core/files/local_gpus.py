"""This machine's GPUs: what the driver reports now, matched to the GPU catalogue.

Where each figure comes from:

- NVIDIA: NVML through the ``pynvml`` module of ``nvidia-ml-py`` (optional: imported here,
  lazily, only if installed; ``nvmlDeviceGetMemoryInfo`` gives total, used and free bytes),
  else ``nvidia-smi --query-gpu=name,memory.total,memory.used,memory.free,driver_version
  --format=csv,noheader,nounits`` (MiB). A unified-memory chip (GB10, DGX Spark) reports no
  memory either way; its total is the RAM ``/proc/meminfo`` gives and "free" its MemAvailable.
- AMD: ``rocm-smi --showproductname --showmeminfo vram --showdriverversion --json``
  ("VRAM Total Memory (B)", "VRAM Total Used Memory (B)", per ``cardN``).
- Apple silicon: ``sysctl -n hw.memsize machdep.cpu.brand_string``; the GPU may use only a
  share of unified memory by default (Metal's recommendedMaxWorkingSetSize): 2/3 up to
  36 GB, 3/4 above, the share the catalogue's Apple entries use. "Free now" is not reported.

The host's RAM and its speed are read in the same run (:mod:`core.files.local_host`: its
tool, dmidecode or PowerShell, starts before the GPUs' probes and is read after them) and come
back as :attr:`LocalGpus.host`, with notes of their own.

Every probe runs under one deadline (:data:`DEFAULT_TIMEOUT_S` in all): a hung tool is killed
with its process group, a hung NVML call is left in a daemon thread. Nothing here raises to
the caller: an absent tool is skipped quietly, a broken driver or an NVML/driver mismatch is
one note in the result. "Free now" is what other processes leave of each card.

The operating system CUDA runs under (``hardware.platform``, core.platform_rules): Windows' own
(``platform.system()`` "Windows") is native Windows; a Linux kernel whose ``/proc/version`` names
"microsoft" is WSL2's ("Linux version 5.15.153.1-microsoft-standard-WSL2 ...": Microsoft's kernel,
the test vLLM's ``in_wsl`` makes on ``uname()``), any other Linux native Linux. On a Mac none.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from core.catalogue import GpuSpec, custom_gpu
from core.errors import escape_controls
from core.files.gpu_match import match_catalogue
from core.files.local_host import (
    DMI_ENTRIES,
    DMIDECODE_QUERY,
    POWERSHELL_QUERY,
    UDEV_DMI,
    HostFound,
    LocalHost,
    host_from,
    linux_speed_files,
    parse_dmidecode,
    parse_sysctl_host,
    parse_windows_memory,
    read_meminfo,
    read_windows_memory,
    unreadable_note,
    windows_total,
)
from core.plan import Hardware, Platform
from core.units import GiB, MiB

DEFAULT_TIMEOUT_S: Final = 1.0
MAX_GPUS: Final = 64  # more cards than any node carries: the rest of a hostile listing is ignored
MAX_NAME_CHARS: Final = 200
NVIDIA_SMI_QUERY: Final = (
    "nvidia-smi",
    "--query-gpu=name,memory.total,memory.used,memory.free,driver_version",
    "--format=csv,noheader,nounits",
)
ROCM_SMI_QUERY: Final = ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json")
SYSCTL_QUERY: Final = ("sysctl", "-n", "hw.memsize", "machdep.cpu.brand_string")
PROC_VERSION: Final = "/proc/version"
WSL_KERNEL_MARK: Final = "microsoft"  # vLLM's in_wsl (vllm/platforms/interface.py), lower-cased
# Metal's default GPU working set (the catalogue's Apple entries, resources/gpus.json sources).
APPLE_SMALL_SHARE: Final = 2 / 3
APPLE_LARGE_SHARE: Final = 3 / 4
APPLE_SMALL_LIMIT_BYTES: Final = 36 * GiB


@dataclass(frozen=True)
class LocalGpu:
    """One card as this machine reports it, with its catalogue entry when one matches."""

    index: int
    name: str  # as the driver names it
    vendor: str  # nvidia | amd | apple
    total_bytes: int  # what the driver reports (Apple: the GPU's default share of unified memory)
    used_bytes: int | None  # held by processes now; None where the source does not say
    free_bytes: int | None
    source: str  # nvml | nvidia-smi | rocm-smi | sysctl ("nvml + /proc/meminfo" and "nvidia-smi + ...": GB10)
    driver: str = ""
    catalogue: GpuSpec | None = None
    unified_memory_bytes: int | None = None  # Apple: the machine's RAM

    @property
    def spec(self) -> GpuSpec:
        """The catalogue entry, else a custom card with the reported memory."""
        if self.catalogue is not None:
            return self.catalogue
        return custom_gpu(self.total_bytes / 1e9, Hardware().custom_tflops, name=f"{self.name} (this machine)")

    @property
    def held_fraction(self) -> float | None:
        """Share of the card other processes hold now (0 to 1), where reported."""
        if self.used_bytes is None or self.total_bytes <= 0:
            return None
        return min(1.0, max(0.0, self.used_bytes / self.total_bytes))

    def hardware_changes(self) -> dict[str, object]:
        """What ``Plan.with_hardware`` takes to plan on this card."""
        if self.catalogue is not None:
            return {"gpu": self.catalogue.id}
        return {"gpu": "custom", "custom_memory_gb": round(self.total_bytes / 1e9, 3)}

    @property
    def held_now_bytes(self) -> int:
        """What other processes hold on the card now (the driver's "used"), 0 where not reported: the
        plan's ``hardware.held_by_others`` that judges it against what is free now. The card keeps its
        catalogue figures (peak FLOP/s, bandwidth); each engine applies what is held by its own rules."""
        return max(0, self.used_bytes or 0)

    @property
    def label(self) -> str:
        text = f"{self.name}: {self.total_bytes / MiB:,.0f} MiB"
        if self.free_bytes is not None:
            text += f", {self.free_bytes / MiB:,.0f} MiB free now"
        match = self.catalogue.id if self.catalogue is not None else "custom card"
        return f"{text} ({match})"


@dataclass(frozen=True)
class LocalGpus:
    gpus: tuple[LocalGpu, ...]
    notes: tuple[str, ...]  # quiet notes: a driver that did not answer, a tool that failed
    tried: tuple[str, ...]  # the sources looked for, in order
    elapsed_s: float
    host: LocalHost | None = None  # the host's RAM and its speed (core/files/local_host.py); None: not looked
    platform: Platform | None = None  # the OS CUDA runs under (read_platform); None: not known (a Mac)

    @property
    def found(self) -> bool:
        return bool(self.gpus)

    @property
    def summary(self) -> str:
        if not self.gpus:
            return "No GPU found on this machine (looked for " + ", ".join(self.tried) + ")"
        names: dict[str, int] = {}
        for gpu in self.gpus:
            names[gpu.spec.name] = names.get(gpu.spec.name, 0) + 1
        return ", ".join(f"{count} × {name}" for name, count in names.items())

    def hardware_changes(self, gpu: LocalGpu) -> dict[str, object]:
        """What ``Plan.with_hardware`` takes to plan on ``gpu`` of this machine: the card, and the operating
        system CUDA runs under where it is known."""
        changes = gpu.hardware_changes()
        if self.platform is not None:
            changes["platform"] = self.platform
        return changes

    def same_cards(self) -> int:
        """How many cards are of the first card's kind (the GPUs per node a plan would use)."""
        if not self.gpus:
            return 0
        first = self.gpus[0]
        return sum(1 for g in self.gpus if g.spec.id == first.spec.id and g.total_bytes == first.total_bytes)


@dataclass
class _Probe:
    """What one detection run gathers, under one deadline."""

    deadline: float
    budget_s: float
    gpus: list[LocalGpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    meminfo: Callable[[], tuple[int, int | None] | None] = field(default_factory=lambda: read_meminfo)
    what: str = "GPU detection"  # what the deadline's note names

    def note(self, text: str) -> None:
        text = escape_controls(text)[:300]
        if text not in self.notes:
            self.notes.append(text)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def add(self, name: str, vendor: str, total: int, used: int | None, free: int | None, **extra: Any) -> None:
        if len(self.gpus) >= MAX_GPUS:
            return
        name = escape_controls(name.strip())[:MAX_NAME_CHARS] or f"{vendor} GPU"
        unified = extra.get("unified_memory_bytes")
        found = match_catalogue(name, vendor, total, unified)
        self.gpus.append(LocalGpu(len(self.gpus), name, vendor, total, used, free, catalogue=found, **extra))


# ---- running a tool under the deadline ---------------------------------------------------
def _first_line(raw: bytes) -> str:
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a tool that did not answer, with whatever it started (its own process group)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def run_tool(argv: tuple[str, ...], probe: _Probe) -> str | None:
    """The tool's output, or None: absent (quietly), failed, or past the deadline (noted)."""
    proc = start_tool(argv, probe)
    return None if proc is None else finish_tool(argv, proc, probe)


def start_tool(argv: tuple[str, ...], probe: _Probe) -> subprocess.Popen[bytes] | None:
    """The tool started (its answer read by :func:`finish_tool`), or None: absent (quietly), not
    startable or no time left (noted)."""
    executable = shutil.which(argv[0])
    if executable is None:
        return None
    if probe.left() <= 0:
        probe.note(f"{argv[0]} was not run: the {probe.budget_s:g} s given to {probe.what} was spent")
        return None
    env = {**os.environ, "LC_ALL": "C"}
    try:
        proc = subprocess.Popen(
            [executable, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=os.name == "posix",
        )
    except OSError as exc:
        probe.note(f"{argv[0]} could not be started ({exc.strerror or exc})")
        return None
    return proc


def finish_tool(argv: tuple[str, ...], proc: subprocess.Popen[bytes], probe: _Probe) -> str | None:
    """A started tool's output, or None: failed, or stopped at the deadline (noted)."""
    try:
        out, err = proc.communicate(timeout=max(0.0, probe.left()))
    except subprocess.TimeoutExpired:
        _stop(proc)
        probe.note(f"{argv[0]} did not answer within {probe.budget_s:g} s and was stopped")
        return None
    if proc.returncode != 0:
        probe.note(f"{argv[0]} failed: {_first_line(err) or _first_line(out) or f'exit status {proc.returncode}'}")
        return None
    return out.decode("utf-8", "replace")


# ---- NVIDIA --------------------------------------------------------------------------------
def _mib(text: str) -> int | None:
    text = text.strip()
    return int(float(text) * MiB) if re.fullmatch(r"\d+(\.\d+)?", text) else None


def parse_nvidia_smi(output: str, probe: _Probe) -> None:
    """Lines of ``name, total MiB, used MiB, free MiB, driver``; "[N/A]" figures are unknown."""
    for line in output.splitlines()[: MAX_GPUS * 2]:
        if not line.strip():
            continue
        parts = line.rsplit(",", 4)
        total = _mib(parts[1]) if len(parts) == 5 else None
        if total is None and len(parts) == 5 and add_unified_nvidia(probe, parts[0], "nvidia-smi", parts[4].strip()):
            continue
        if total is None or total <= 0:
            probe.note(f"nvidia-smi: a line that is not a GPU's memory was skipped ({line.strip()[:80]})")
            continue
        used, free = _mib(parts[2]), _mib(parts[3])
        probe.add(parts[0], "nvidia", total, used, free, source="nvidia-smi", driver=parts[4].strip()[:40])


def add_unified_nvidia(probe: _Probe, name: str, source: str, driver: str) -> bool:
    """A unified-memory NVIDIA chip (GB10: DGX Spark and its OEM twins) reports no memory total through
    nvidia-smi ("[N/A]") or NVML ("Not Supported"): CUDA allocates from the RAM the Linux kernel manages
    (resources/gpus.json, dgx-spark-gb10 sources), so that RAM is its total and MemAvailable what is free
    now. True when the name is such a catalogue entry and the RAM was read; nothing is added otherwise."""
    memory = probe.meminfo()
    if memory is None:
        return False
    total, available = memory
    entry = match_catalogue(escape_controls(name.strip())[:MAX_NAME_CHARS], "nvidia", total)
    if entry is None or entry.unified_memory_gb is None:
        return False
    used = None if available is None else max(0, total - available)
    probe.add(name, "nvidia", total, used, available, source=f"{source} + /proc/meminfo", driver=driver[:40])
    return True


def _load_nvml() -> Any | None:
    """The ``pynvml`` module when nvidia-ml-py is installed (never a required dependency)."""
    try:
        return importlib.import_module("pynvml")
    except Exception:  # ImportError, or a broken installation failing at import
        return None


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _read_nvml(nvml: Any) -> list[tuple[str, int, int, int, str]]:
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        readings = []
        for index in range(min(int(nvml.nvmlDeviceGetCount()), MAX_GPUS)):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as exc:  # GB10 answers NVML_ERROR_NOT_SUPPORTED: its memory is the system's
                if "NotSupported" not in type(exc).__name__:
                    raise
                readings.append((name, 0, 0, 0, driver))
                continue
            readings.append((name, int(memory.total), int(memory.used), int(memory.free), driver))
        return readings
    finally:
        nvml.nvmlShutdown()


def probe_nvml(nvml: Any, probe: _Probe) -> bool:
    """Read every NVIDIA card through NVML in a daemon thread; True when NVML answered
    (with cards or without), False when the library is absent and nvidia-smi should be asked."""
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["readings"] = _read_nvml(nvml)
        except Exception as exc:  # pynvml raises NVMLError subclasses; a broken module anything
            result["error"] = exc

    worker = threading.Thread(target=work, name="vramplan-nvml", daemon=True)
    worker.start()
    worker.join(max(0.0, probe.left()))
    if worker.is_alive():
        probe.note(f"NVML did not answer within {probe.budget_s:g} s")
        return True
    error = result.get("error")
    if error is not None:
        if "LibraryNotFound" in type(error).__name__:  # no NVIDIA driver installed: nothing to say
            return False
        probe.note(f"NVML: {_text(error) or type(error).__name__}")
        return True
    for name, total, used, free, driver in result.get("readings", []):
        if total > 0:
            probe.add(name, "nvidia", total, used, free, source="nvml", driver=driver[:40])
        elif not add_unified_nvidia(probe, name, "nvml", driver):
            probe.note(f"NVML: {name[:80]} reports no memory total; skipped")
    return True


def _nvidia(probe: _Probe, nvml: Any | None) -> None:
    if nvml is not None:
        probe.tried.append("NVML")
        if probe_nvml(nvml, probe):
            return
    probe.tried.append("nvidia-smi")
    output = run_tool(NVIDIA_SMI_QUERY, probe)
    if output is not None:
        parse_nvidia_smi(output, probe)


# ---- AMD -----------------------------------------------------------------------------------
def _bytes_field(card: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = card.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and re.fullmatch(r"\d{1,20}", str(value)):
            return int(value)
    return None


def parse_rocm_smi(output: str, probe: _Probe) -> None:
    """rocm-smi's JSON: ``{"card0": {"Card Series": ..., "VRAM Total Memory (B)": "..."}, "system": ...}``."""
    start, end = output.find("{"), output.rfind("}")
    try:
        document = json.loads(output[start : end + 1]) if 0 <= start < end else None
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        probe.note("rocm-smi: its output is not the JSON expected")
        return
    system = document.get("system")
    driver = system.get("Driver version", "") if isinstance(system, dict) else ""
    cards = sorted((k for k in document if re.fullmatch(r"card\d{1,4}", k)), key=lambda k: int(k[4:]))
    for key in cards:
        card = document[key]
        if not isinstance(card, dict):
            continue
        total = _bytes_field(card, "VRAM Total Memory (B)")
        if not total:
            probe.note(f"rocm-smi: {key} reports no VRAM total")
            continue
        used = _bytes_field(card, "VRAM Total Used Memory (B)")
        name = next(
            (str(card[k]) for k in ("Card Series", "Card series", "Marketing Name", "Card model") if card.get(k)),
            "AMD GPU",
        )
        free = None if used is None else max(0, total - used)
        probe.add(name, "amd", total, used, free, source="rocm-smi", driver=str(driver)[:40])


# ---- Apple silicon -------------------------------------------------------------------------
def apple_gpu_share(memory_bytes: int) -> float:
    return APPLE_SMALL_SHARE if memory_bytes <= APPLE_SMALL_LIMIT_BYTES else APPLE_LARGE_SHARE


def parse_sysctl(output: str, probe: _Probe) -> None:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if len(lines) < 2 or not lines[0].isdigit() or len(lines[0]) > 20:
        probe.note("sysctl: hw.memsize and the chip name were not both reported")
        return
    memory, chip = int(lines[0]), lines[1]
    if not chip.lower().startswith("apple"):
        probe.note(f"{chip[:60]}: an Intel Mac's GPU is not detected")
        return
    share = int(memory / MiB * apple_gpu_share(memory)) * MiB  # whole MiB, as Metal reports it
    probe.add(chip, "apple", share, None, None, source="sysctl", unified_memory_bytes=memory)


# ---- the host: its RAM and how fast it is read (core/files/local_host.py) --------------------
@dataclass(frozen=True)
class HostSources:
    """Where the host's figures are read from; tests point them at recorded files and stand-ins."""

    dmi_entries: str = DMI_ENTRIES
    udev_dmi: str = UDEV_DMI
    windows_memory: Callable[[], tuple[int, int | None] | None] = read_windows_memory


@dataclass
class _HostProbe:
    """The host's part of one detection: its tool starts first and runs beside the GPUs' probes."""

    system: str
    sources: HostSources
    probe: _Probe
    found: HostFound = field(default_factory=HostFound)
    tool: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None

    def start(self, meminfo: Callable[[], tuple[int, int | None] | None]) -> None:
        if self.system == "Linux":
            memory = meminfo()
            if memory is not None:
                self.found.total, self.found.total_source = memory, "/proc/meminfo"
            if not linux_speed_files(self.found, self.sources.dmi_entries, self.sources.udev_dmi):
                self.tool = DMIDECODE_QUERY
        elif self.system == "Windows":
            windows_total(self.found, self.sources.windows_memory)
            self.tool = POWERSHELL_QUERY
        if self.tool:
            self.proc = start_tool(self.tool, self.probe)

    def finish(self, sysctl_output: str | None) -> LocalHost:
        output = finish_tool(self.tool, self.proc, self.probe) if self.proc is not None else None
        if sysctl_output is not None:
            parse_sysctl_host(sysctl_output, self.found)
        elif self.tool:
            self._modules_from(output)
        for note in self.probe.notes:
            self.found.note(note)
        if self.system not in ("Linux", "Windows", "Darwin"):
            self.found.note(f"{self.system or 'this system'}: host memory is not detected here")
        return host_from(self.found)

    def _modules_from(self, output: str | None) -> None:
        """The modules the system's tool listed; where none, one note naming why, which takes the tool's own."""
        windows = self.tool == POWERSHELL_QUERY
        if output is not None:
            (parse_windows_memory if windows else parse_dmidecode)(output, self.found)
        if self.found.modules:
            return
        missing = f"no {'PowerShell' if windows else 'dmidecode'} on PATH" if self.proc is None else ""
        said = "; ".join(self.probe.notes) or missing or ("no modules" if windows else "")
        if windows:
            self.found.note(f"memory speed not found (Win32_PhysicalMemory: {said}); the typed Host RAM speed is kept")
        else:
            self.found.note(unreadable_note(self.found.records_readable, said))
        self.probe.notes.clear()


# ---- all of it -----------------------------------------------------------------------------
def read_platform(system: str, proc_version: str = PROC_VERSION) -> Platform | None:
    """The operating system CUDA runs under on this machine (module docstring), None where it is not one
    the plan names (a Mac) or ``/proc/version`` cannot be read."""
    if system == "Windows":
        return Platform.WINDOWS
    if system != "Linux":
        return None
    try:
        with open(proc_version, encoding="utf-8", errors="replace") as handle:
            text = handle.read(4096)
    except OSError:
        return None
    return Platform.WSL2 if WSL_KERNEL_MARK in text.lower() else Platform.LINUX


def detect_local_gpus(
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    system: str | None = None,
    nvml_loader: Callable[[], Any | None] = _load_nvml,
    meminfo: Callable[[], tuple[int, int | None] | None] | None = None,
    host_sources: HostSources | None = None,
) -> LocalGpus:
    """This machine's GPUs, and its host RAM and speed, within ``timeout_s`` seconds in all; never raises.

    ``system`` is ``platform.system()`` unless given (tests pass "Darwin" to read sysctl);
    ``nvml_loader`` returns the ``pynvml`` module or None (tests pass a stand-in); ``meminfo`` the
    RAM of the host and of a unified-memory NVIDIA chip (:func:`read_meminfo`; tests pass a stand-in);
    ``host_sources`` where the host's memory records are read (tests pass recorded ones). The host's
    tool (dmidecode, PowerShell) is started first and read last, so it runs beside the GPUs' probes
    under the same deadline; its notes are the host's own (``host.notes``), never the GPUs'.
    """
    started = time.monotonic()
    budget = max(0.01, float(timeout_s))
    meminfo = meminfo or read_meminfo
    probe = _Probe(deadline=started + budget, budget_s=budget, meminfo=meminfo)
    system = system or platform.system()
    host = _HostProbe(
        system, host_sources or HostSources(), _Probe(deadline=probe.deadline, budget_s=budget, what="detection")
    )
    sysctl: str | None = None
    try:
        host.start(meminfo)
    except Exception as exc:  # the host's surprise is the host's note; the GPUs are still looked for
        host.found.note(f"host memory detection stopped: {type(exc).__name__}: {exc}")
    try:
        _nvidia(probe, nvml_loader())
        probe.tried.append("rocm-smi")
        output = run_tool(ROCM_SMI_QUERY, probe)
        if output is not None:
            parse_rocm_smi(output, probe)
        if system == "Darwin":
            probe.tried.append("sysctl")
            sysctl = run_tool(SYSCTL_QUERY, probe)
            if sysctl is not None:
                parse_sysctl(sysctl, probe)
    except Exception as exc:  # the promise is "never raises": a surprise is a note too
        probe.note(f"GPU detection stopped: {type(exc).__name__}: {exc}")
    try:
        found_host: LocalHost | None = host.finish(sysctl)
    except Exception as exc:  # likewise
        found_host = LocalHost(notes=(f"host memory detection stopped: {type(exc).__name__}: {exc}",))
    gpus = tuple(probe.gpus)
    elapsed = time.monotonic() - started
    return LocalGpus(gpus, tuple(probe.notes), tuple(probe.tried), elapsed, found_host, read_platform(system))
