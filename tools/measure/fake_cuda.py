"""Build and preload the fake-CUDA native shim (fake_cuda.cpp) for CPU-only torch builds.

Nothing here imports torch: :func:`preload` must run before ``import torch``.
The library is compiled with g++ at first use (about 2 s) into a cache directory
keyed by the torch version and the source hash.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

_SRC = Path(__file__).with_name("fake_cuda.cpp")
_LOADED: ctypes.CDLL | None = None


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torch is not installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations)))


def torch_build_info() -> dict[str, str | None]:
    """Read torch/version.py as text (no import): version and CUDA version (None on CPU builds)."""
    text = (torch_dir() / "version.py").read_text()

    def field(name: str) -> str | None:
        m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(.+)$", text, re.M)
        if not m:
            return None
        val = m.group(1).strip()
        return None if val == "None" else val.strip("'\"")

    return {"version": field("__version__"), "cuda": field("cuda")}


def is_cpu_only_build() -> bool:
    info = torch_build_info()
    return info["cuda"] is None and "rocm" not in (info["version"] or "")


def _cache_dir() -> Path:
    base = Path(os.environ.get("VRAMPLAN_MEASURE_CACHE", Path.home() / ".cache" / "vramplan-measure"))
    return base


def build() -> Path:
    tdir = torch_dir()
    info = torch_build_info()
    key = hashlib.sha256(_SRC.read_bytes() + str(info).encode() + str(tdir).encode()).hexdigest()[:16]
    out = _cache_dir() / f"libvramplan_fake_cuda-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    # torch >= 2.x wheels use the C++11 ABI; headers need C++20 in recent releases.
    cmd = [
        os.environ.get("CXX", "g++"),
        "-O1",
        "-shared",
        "-fPIC",
        "-std=c++20",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        "-w",
        f"-I{tdir / 'include'}",
        str(_SRC),
        "-o",
        str(tmp),
        f"-L{tdir / 'lib'}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{tdir / 'lib'}",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("building the fake-CUDA shim failed:\n" + " ".join(cmd) + "\n" + res.stderr[-4000:])
    os.replace(tmp, out)
    return out


def preload() -> None:
    """Compile (if needed) and load the shim. Must be called before torch is imported."""
    global _LOADED
    if _LOADED is not None:
        return
    if "torch" in sys.modules:
        raise RuntimeError("fake-cuda must be set up before torch is imported (CUDAHooks are read once at torch init)")
    if not is_cpu_only_build():
        raise RuntimeError("fake-cuda is only for CPU-only torch builds; use --backend cuda on a CUDA build")
    _LOADED = ctypes.CDLL(str(build()), mode=ctypes.RTLD_GLOBAL)
    assert _LOADED.vramplan_fake_cuda_loaded() == 1


def is_loaded() -> bool:
    return _LOADED is not None
