"""What both specs share: project metadata, what is left out of a bundle, and the check
that a built bundle holds nothing it must not.

Imported by ``vramplan.spec`` and ``bare.spec`` (so the app and the bare-window baseline
are frozen the same way) and by ``build.py`` / ``benchmarks/startup.py``. Standard library
only: it runs inside PyInstaller and in plain scripts.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import icudata

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"

DISPLAY_NAME = "VRAM Planner"
BUNDLE_ID = "org.vramplan.VRAMPlanner"
PLAN_EXTENSION = "vramplan.json"  # gui/dialogs.py PLAN_FILTER


@dataclass(frozen=True)
class Project:
    name: str  # the executable's name and the bundle folder's name
    version: str  # as written in pyproject.toml
    description: str

    @property
    def version_tuple(self) -> tuple[int, int, int, int]:
        """Four integers for Windows VERSIONINFO / CFBundleVersion ('1.2.0rc1' → (1, 2, 0, 0))."""
        numbers = [int(n) for n in re.findall(r"\d+", self.version.split("+")[0])[:3]]
        padded = [*numbers, 0, 0, 0, 0][:4]
        return padded[0], padded[1], padded[2], padded[3]


def project() -> Project:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        meta = tomllib.load(handle)["project"]
    return Project(name=meta["name"], version=meta["version"], description=meta["description"])


def platform_tag() -> str:
    """'linux-x86_64', 'windows-x86_64', 'macos-arm64': the suffix of release archives."""
    import platform

    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)
    system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform.rstrip("0123456789"))
    return f"{system}-{machine}"


# ---- what stays out ---------------------------------------------------------------
# Python modules never frozen. The heavy ones must never be bundled even when installed
# beside the build (the measurement tool's venv has torch); the rest are standard-library
# or optional pyqtgraph back-ends the app does not use.
EXCLUDED_MODULES: tuple[str, ...] = (
    # never: the measurement tool's stack and other heavy optional imports
    "torch", "torchvision", "transformers", "peft", "safetensors", "accelerate", "bitsandbytes",
    "tensorflow", "jax", "scipy", "pandas", "matplotlib", "PIL", "cv2", "sklearn", "numba",
    "cupy", "h5py", "colorcet", "OpenGL", "IPython", "jupyter_client", "ipykernel", "tools",
    # other Qt bindings (pyqtgraph probes for them)
    "PyQt5", "PyQt6", "PySide2", "sip",
    # Qt modules the app does not use. The app uses QtCore, QtGui, QtWidgets and QtSvg;
    # pyqtgraph 0.14 also imports QtOpenGL and QtOpenGLWidgets unconditionally
    # (Qt/OpenGLHelpers.py, PColorMeshItem.py; PlotCurveItem reads QtWidgets.QOpenGLWidget),
    # so those two stay (1.5 MB). It imports QtTest inside try/except: leaving it out only
    # makes pyqtgraph.Qt.QtTest a FailedImport placeholder.
    "PySide6.QtNetwork", "PySide6.QtQml", "PySide6.QtQuick", "PySide6.QtQuickControls2",
    "PySide6.QtQuickWidgets", "PySide6.QtQuickTest", "PySide6.QtPdf", "PySide6.QtPdfWidgets",
    "PySide6.QtDBus", "PySide6.QtTest",
    "PySide6.QtPrintSupport", "PySide6.QtConcurrent", "PySide6.QtSql", "PySide6.QtXml",
    "PySide6.QtDesigner", "PySide6.QtHelp", "PySide6.QtUiTools", "PySide6.QtSvgWidgets",
    "PySide6.QtLabsStyleKit", "PySide6.QtQmlFeatures", "PySide6.scripts",
    # standard library the app never imports
    "tkinter", "_tkinter", "turtle", "turtledemo", "idlelib", "lib2to3", "pydoc_data",
    "test", "unittest", "doctest", "pdb", "distutils", "setuptools", "pkg_resources",
    "pip", "ensurepip", "venv", "xmlrpc", "sqlite3", "_sqlite3", "curses", "_curses",
    "dbm", "lzma", "_lzma", "bz2", "_bz2",
    "readline",  # the REPL's line editor (and libreadline, libtinfo)
    # no network, ever: leaves OpenSSL (libssl, libcrypto) out; hashlib falls back to its
    # built-in _sha2/_md5 modules
    "ssl", "_ssl", "_hashlib",
    # numpy's build and test tooling
    "numpy.f2py", "numpy.distutils", "numpy.testing", "numpy._pyinstaller", "numpy.typing.mypy_plugin",
    # numpy parts nothing the app runs imports (1.6 MB of the tar.gz; numpy 2 imports each on first
    # attribute access, numpy/__init__.py __getattr__): random (pyqtgraph calls it only in
    # functions.pseudoScatter), fft (PlotDataItem's FFT transform, offered only by the plot's
    # context menu, which gui/chart/widget.py disables), masked arrays and polynomials (no
    # caller in the app or pyqtgraph), and the C test helpers numpy's own hook adds for its
    # test suite (hook-numpy.py: "used in tests (which are not packed)")
    "numpy.random", "numpy.fft", "numpy.ma", "numpy.polynomial", "numpy._core._multiarray_tests",
    # PyYAML's libyaml binding (2.7 MB): the app reads YAML with yaml.safe_load, whose
    # SafeLoader is pure Python; without _yaml, yaml's cyaml import fails and is skipped
    "yaml._yaml", "yaml.cyaml",
    # pyqtgraph parts that need packages we do not ship
    "pyqtgraph.examples", "pyqtgraph.opengl", "pyqtgraph.jupyter", "pyqtgraph.canvas",
    "pyqtgraph.flowchart", "pyqtgraph.console",
)  # fmt: skip

# Files dropped from the collected binaries and data, matched against their path inside
# the bundle ('/' separators). Qt plug-ins for embedded displays, networking, printing,
# SQL, QML and image formats we never read, and the Qt libraries only those pulled in.
# PySide6/Qt/plugins on Linux and macOS, PySide6/plugins on Windows.
_QT = "PySide6*"
_UNUSED_QT_LIBRARIES = (
    "Qt6Network", "Qt6Qml", "Qt6Quick", "Qt6Pdf", "Qt6PrintSupport", "Qt6Sql", "Qt6Test",
    "Qt6Concurrent", "Qt6Xml", "Qt6Designer", "Qt6Help", "Qt6UiTools", "Qt6VirtualKeyboard",
    "Qt6EglFS", "Qt6EglFs", "Qt6WaylandCompositor", "Qt6WlShell", "Qt6Labs", "Qt6Lottie",
    "Qt6SvgWidgets",
)  # fmt: skip
EXCLUDED_FILES: tuple[str, ...] = (
    "*.pyi",  # type stubs: no use at run time
    f"{_QT}/translations/*",  # the UI is English only
    f"{_QT}/qml/*",
    f"{_QT}/plugins/egldeviceintegrations/*",
    f"{_QT}/plugins/networkinformation/*",
    f"{_QT}/plugins/tls/*",
    f"{_QT}/plugins/printsupport/*",
    f"{_QT}/plugins/sqldrivers/*",
    f"{_QT}/plugins/qmltooling/*",
    f"{_QT}/plugins/designer/*",
    f"{_QT}/plugins/generic/*",  # evdev/tslib input for kiosk set-ups
    f"{_QT}/plugins/wayland-graphics-integration-server/*",
    f"{_QT}/plugins/wayland-graphics-integration-client/*-server.so",  # compositor buffer sharing
    f"{_QT}/plugins/wayland-shell-integration/*fullscreen-shell*",
    f"{_QT}/plugins/wayland-shell-integration/*ivi-shell*",  # in-vehicle
    f"{_QT}/plugins/wayland-shell-integration/*wl-shell*",  # superseded by xdg-shell
    f"{_QT}/plugins/platforminputcontexts/*virtualkeyboard*",  # needs QtQuick
    f"{_QT}/plugins/vectorimageformats/*",  # Lottie, needs QtQuick
    # The GTK3 theme would pull the build host's whole GTK stack into the bundle; the app
    # draws with Fusion anyway, and desktop portals still give native file dialogs.
    f"{_QT}/plugins/platformthemes/*gtk3*",
    f"{_QT}/plugins/platforms/*eglfs*",
    f"{_QT}/plugins/platforms/*linuxfb*",
    f"{_QT}/plugins/platforms/*minimal*",
    f"{_QT}/plugins/platforms/*vnc*",
    f"{_QT}/plugins/platforms/*vkkhrdisplay*",
    f"{_QT}/plugins/platforms/*direct2d*",
    "pyqtgraph/icons/peegee/*",  # pyqtgraph's own logo in many sizes (1 MB); its widget icons stay
    # image formats: Qt reads PNG itself; SVG comes from qsvg; ICO for Windows icons
    *(f"{_QT}/plugins/imageformats/*{fmt}*" for fmt in ("gif", "jpeg", "tiff", "webp", "tga", "wbmp", "pdf", "icns")),
    # libraries only the above (or excluded modules) use
    # (Linux libQt6X.so.6 and Windows Qt6X.dll; macOS QtX.framework)
    *(f"*{lib}*" for lib in _UNUSED_QT_LIBRARIES),
    *(f"*/{lib.replace('Qt6', 'Qt')}.framework/*" for lib in _UNUSED_QT_LIBRARIES),
)  # fmt: skip

# Names that must never appear in a built bundle: the check after every build.
# ('scipy' only as a package folder: numpy's own BLAS is called libscipy_openblas.)
FORBIDDEN_IN_BUNDLE: tuple[str, ...] = (
    "*torch*", "*transformers*", "*tkinter*", "*libtk8*", "*libtcl8*", "*/PIL/*", "*/scipy/*",
    "*matplotlib*", "*Qt6Qml*", "*Qt6Quick*", "*Qt6Pdf*", "*Qt6Network*", "*/PySide6/QtNetwork*",
    "*Qt6Test*", "*/PySide6/QtTest*", "*Qt6PrintSupport*",
    "*/translations/*.qm", "*/tools/measure/*",
    "*/numpy/random/*", "*/numpy/fft/*", "*/numpy/_core/_multiarray_tests*",
    "*/QtQml.framework/*", "*/QtQuick.framework/*", "*/QtNetwork.framework/*", "*/QtPdf.framework/*",
)  # fmt: skip


def _excluded(dest: str, patterns: tuple[str, ...]) -> bool:
    path = dest.replace("\\", "/")
    return any(fnmatch.fnmatch(path, p) for p in patterns)


def filter_toc(toc: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Drop the entries of a PyInstaller TOC (dest, source, kind) that EXCLUDED_FILES names."""
    return [entry for entry in toc if not _excluded(entry[0], EXCLUDED_FILES)]


def _is_shared_library(dest: str) -> bool:
    """Libraries collected only because something links them (not Python extensions, not
    Qt plug-ins, which are loaded by name and so are roots)."""
    path = dest.replace("\\", "/")
    return "/" not in path or path.startswith(("PySide6/Qt/lib/", "numpy.libs/"))


def prune_unneeded_libraries(binaries: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Drop linked libraries that nothing left in the bundle links any more (Linux).

    PyInstaller resolves the libraries of every plug-in before the spec filters the
    plug-ins, so dropping e.g. the GTK3 theme leaves the GTK stack behind; this takes it
    out again. Repeats until nothing changes (a library may only be needed by another
    library that was just dropped).
    """
    if not sys.platform.startswith("linux"):
        return binaries
    from PyInstaller.depend.bindepend import get_imports

    imports: dict[str, set[str]] = {}

    def needs(source: str) -> set[str]:
        if source not in imports:
            try:
                imports[source] = {name for name, _resolved in get_imports(source)}
            except Exception:  # unreadable: assume it needs everything it might
                imports[source] = set()
        return imports[source]

    kept = list(binaries)
    while True:
        needed = set().union(*(needs(src) for _dest, src, kind in kept if kind != "SYMLINK"))
        pruned = [
            entry
            for entry in kept
            if entry[2] != "BINARY"
            or not _is_shared_library(entry[0])
            or Path(entry[0]).name in needed
            or Path(entry[0]).name.startswith("libpython")
        ]
        if len(pruned) == len(kept):
            return pruned
        kept = pruned


def strip_python_runtime(binaries: list[tuple[str, str, str]], workdir: Path) -> list[tuple[str, str, str]]:
    """Debug-info-free copies of the interpreter's own libraries (Linux).

    A Python built from source (pyenv, some CI images) ships libpython and lib-dynload
    with ~20 MB of debug info. Only these are stripped: wheel libraries are stripped
    already and patchelf-edited, and running strip over them breaks them (numpy's
    OpenBLAS: "ELF load command address/offset not page-aligned"), which is why the
    spec's global strip option stays off.
    """
    strip = shutil.which("strip")
    if not sys.platform.startswith("linux") or strip is None:
        return binaries
    runtime = Path(sys.base_prefix).resolve()
    result = []
    for dest, src, kind in binaries:
        source = Path(src).resolve()
        if kind in ("BINARY", "EXTENSION") and source.is_relative_to(runtime) and "site-packages" not in source.parts:
            target = workdir / "stripped" / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
                subprocess.run([strip, "--strip-debug", "-o", str(target), str(source)], check=True)
            src = str(target)
        result.append((dest, src, kind))
    return result


_ICU_DATA_LIBRARY = re.compile(r"libicudata\.so(\.\d+)*")  # Qt/lib/libicudata.so.73


def trim_icu_data(binaries: list[tuple[str, str, str]], workdir: Path) -> list[tuple[str, str, str]]:
    """Qt's libicudata without the ICU data no Qt call reads (Linux; packaging/icudata.py):
    for PySide6 6.11's ICU 73, 32.0 MB → 16.0 MB unpacked, 12.4 MB → 6.0 MB gzipped (make dist, 2026-12-07)."""
    if not sys.platform.startswith("linux"):
        return binaries
    result = []
    for dest, src, kind in binaries:
        if kind == "BINARY" and _ICU_DATA_LIBRARY.fullmatch(Path(dest).name):
            trimmed = icudata.trimmed_library(Path(src), workdir)
            if trimmed is None:
                print("[bundle] no C compiler (cc): libicudata keeps all its ICU data", file=sys.stderr)
            else:
                src = str(trimmed)
        result.append((dest, src, kind))
    return result


def icu_leftovers(folder: Path) -> list[str]:
    """ICU data items in a built bundle's libicudata that ICU_UNUSED_ITEMS names (should be none)."""
    found = []
    for library in sorted(folder.rglob("libicudata.so*")):
        if _ICU_DATA_LIBRARY.fullmatch(library.name) and library.is_file() and not library.is_symlink():
            _symbol, package = icudata.package_from_library(library)
            found += [f"{library.name}: {item}" for item in icudata.unused_items(package)]
    return found


def resource_datas() -> list[tuple[str, str]]:
    """``resources/`` as bundle data under ``resources/`` (core/resources.py reads it via
    sys._MEIPASS). The .ico/.icns containers are for the executable, not for the app."""
    datas = []
    for path in sorted((ROOT / "resources").rglob("*")):
        if path.is_file() and path.suffix not in {".ico", ".icns"} and "__pycache__" not in path.parts:
            datas.append((str(path), str(path.parent.relative_to(ROOT))))
    datas.append((str(PACKAGING / "selftest_plan.json"), "selftest"))
    return datas


def write_windows_version_info(meta: Project) -> Path:
    """packaging/windows/version_info.txt (PyInstaller's VSVersionInfo syntax) from pyproject."""
    numbers = meta.version_tuple
    text = f"""# Generated by packaging/bundle.py from pyproject.toml ({meta.name} {meta.version}); do not edit.
VSVersionInfo(
  ffi=FixedFileInfo(
    filevers={numbers},
    prodvers={numbers},
    mask=0x3f,
    flags=0x0,
    OS=0x40004,
    fileType=0x1,
    subtype=0x0,
    date=(0, 0)
  ),
  kids=[
    StringFileInfo([
      StringTable('040904B0', [
        StringStruct('CompanyName', '{DISPLAY_NAME}'),
        StringStruct('FileDescription', '{DISPLAY_NAME}'),
        StringStruct('FileVersion', '{meta.version}'),
        StringStruct('InternalName', '{meta.name}'),
        StringStruct('LegalCopyright', 'MIT License'),
        StringStruct('OriginalFilename', '{meta.name}.exe'),
        StringStruct('ProductName', '{DISPLAY_NAME}'),
        StringStruct('ProductVersion', '{meta.version}')
      ])
    ]),
    VarFileInfo([VarStruct('Translation', [1033, 1200])])
  ]
)
"""
    target = PACKAGING / "windows" / "version_info.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


def info_plist(meta: Project) -> dict[str, object]:
    return {
        "CFBundleName": DISPLAY_NAME,
        "CFBundleDisplayName": DISPLAY_NAME,
        "CFBundleIdentifier": BUNDLE_ID,
        "CFBundleShortVersionString": meta.version,
        "CFBundleVersion": ".".join(str(n) for n in meta.version_tuple[:3]),
        "CFBundleExecutable": meta.name,
        "CFBundlePackageType": "APPL",
        "NSHighResolutionCapable": True,
        "NSPrincipalClass": "NSApplication",
        "NSRequiresAquaSystemAppearance": False,  # follow the system's dark mode
        "LSApplicationCategoryType": "public.app-category.developer-tools",
        "NSHumanReadableCopyright": "MIT License",
        "CFBundleDocumentTypes": [
            {
                "CFBundleTypeName": f"{DISPLAY_NAME} plan",
                "CFBundleTypeRole": "Editor",
                "LSHandlerRank": "Owner",
                "CFBundleTypeExtensions": [PLAN_EXTENSION],
            }
        ],
    }


def bundle_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)).replace("\\", "/") for p in folder.rglob("*") if p.is_file())


def forbidden_files(folder: Path) -> list[str]:
    """Files in a built bundle that FORBIDDEN_IN_BUNDLE names (the list should be empty)."""
    return [f for f in bundle_files(folder) if _excluded("/" + f, FORBIDDEN_IN_BUNDLE)]


def folder_size_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
