"""Render the real main window offscreen to a PNG: ``python -m gui.screenshot out.png``.

Used for the README's docs/screenshot.png (the start-up plan) and, with ``--diagnosis``,
docs/diagnosis.png (the lesson's 7B model, full 16-bit fine-tuning, on a 24 GB card, with
the Diagnosis tab open); ``--parallel`` renders docs/parallel.png (Llama 3.1 70B, full
fine-tuning with FSDP2 on 16 H100s at 8,192 tokens); ``--serving`` renders docs/serving.png (Llama 3.1 8B on one H100
with vLLM's defaults, Compute tab); ``--llamacpp`` Llama 3.1 8B as Q4_K_M on an RTX 4090 with 20 of
32 layers offloaded (Serving tab); ``--compare`` renders docs/comparison.png (four plans side
by side). ``--size 1280x720`` and ``--theme dark`` render the sizes and themes a README shows.
``--local`` shows what this machine would report (a stubbed RTX 4090 with 3,000 MiB held by
another process, and two downloaded models), as the first start plans on it;
``--export TARGET`` renders File → Export launch config… for that tool (docs/LOCAL_MACHINE.md);
``--gpu ID`` puts the catalogue card ID on the plan and scrolls the plan column to the Hardware section;
``--compare-docked`` shows View → Compare plans with those four plans docked in the window at ``--size``.
No user settings are read or written (a temporary folder).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.plan import Plan

WIDTH, HEIGHT = 1400, 900


def render(
    path: str,
    width: int = WIDTH,
    height: int = HEIGHT,
    *,
    mode: str = "training",
    diagnosis: bool = False,
    theme: str = "light",
    serving: bool = False,
    parallel: bool = False,
    local: bool = False,
    export_target: str = "",
    llamacpp: bool = False,
    gpu: str = "",
    compare: bool = False,
) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from gui.settings import Settings
    from gui.theme import apply_theme

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(["vramplan-screenshot"])
    with tempfile.TemporaryDirectory() as folder:
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, folder)
        settings = Settings(os.path.join(folder, "screenshot.ini"))
        apply_theme(app, theme)
        from gui.main_window import MainWindow

        window = MainWindow(settings=settings)
        window.set_chart_mode(mode)
        window.resize(width, height)
        _stage(
            window,
            diagnosis=diagnosis,
            serving=serving,
            llamacpp=llamacpp,
            parallel=parallel,
            local=local or bool(export_target),
        )
        if gpu:
            window.controller.update("hardware.gpu", lambda plan: plan.with_hardware(gpu=gpu))
        # The window sizes its docks itself (a share of the width, never below what the forms
        # need): a fixed [330, 470] squeezed the Diagnosis at 1920 px and the forms at 1280 px.
        window.show()
        for _ in range(5):
            app.processEvents()
        if parallel or local or gpu:  # the plan column scrolled to the Parallelism (Hardware) section
            _scroll_plan_column(app, window, llamacpp=llamacpp, local=local, gpu=gpu)
        if diagnosis:
            _wait_for_diagnosis(app, window)
        if compare:  # View → Compare plans docked as the window places it, beside the memory chart
            panel = window.plan_tools.show_compare()
            panel.include_current.setChecked(False)
            panel.add_plans(issue_plans(), "Compare")  # type: ignore[arg-type]
            for _ in range(5):
                app.processEvents()
        # The banner keeps spare room from an earlier verdict until the edits pause (1.2 s);
        # the picture shows the window as a person sees it once they have.
        window.settle_banner()
        for _ in range(3):
            app.processEvents()
        shown = window.grab()
        if export_target:
            dialog = window.plan_tools.export_launch()
            dialog.target.setCurrentIndex(dialog.target.findData(export_target))
            for _ in range(5):
                app.processEvents()
            shown = dialog.grab()
            dialog.close()
        if not shown.save(path):
            raise OSError(f"cannot write {path}")
        window.controller.undo_stack.setClean()
        window.close()


def _scroll_plan_column(app: Any, window: Any, *, llamacpp: bool, local: bool, gpu: str) -> None:
    """The plan column scrolled to the section the picture is about."""
    from PySide6.QtWidgets import QScrollArea

    column = window.plan_dock.widget()
    if not isinstance(column, QScrollArea):
        return
    # llama.cpp on this machine: the Serving form's host RAM rows and what this machine has.
    if llamacpp and local:
        column.ensureWidgetVisible(window.serving_form.host_row, 0, 250)
    else:
        column.ensureWidgetVisible(window.hardware_form if local or gpu else window.parallel_form, 0, 0)
    for _ in range(3):
        app.processEvents()


def _stage(window: Any, *, diagnosis: bool, serving: bool, llamacpp: bool, parallel: bool, local: bool) -> None:
    """The plan and tab each picture shows."""
    if diagnosis:
        from core.plan import Method, Precision
        from core.presets import lesson_plan

        window.controller.reset(lesson_plan(Method.FULL, Precision.BF16, gpu="rtx-4090"))
        window.tabs.setCurrentWidget(window.diagnosis)
    if serving:
        # The README's example: Llama 3.1 8B on one H100 with vLLM's defaults, 8k requests.
        from core.catalogue import find_model
        from core.plan import Hardware, Plan

        plan = Plan(model=find_model("llama-3.1-8b").spec, model_id="llama-3.1-8b", hardware=Hardware(gpu="h100-sxm"))
        window.controller.reset(plan.with_inference(engine="vllm", context=8192, concurrent=51))
        window.tabs.setCurrentWidget(window.compute_panel)
    if llamacpp:
        # A laptop-class case: Llama 3.1 8B as Q4_K_M on an RTX 4090, 20 of 32 layers offloaded.
        from core.presets import plan_for_model

        plan = plan_for_model("llama-3.1-8b").with_hardware(gpu="rtx-4090").with_parallel(host_ram_gb=32)
        window.controller.reset(plan.with_inference(engine="llamacpp", context=8192, gpu_layers=20))
        window.tabs.setCurrentWidget(window.inference_panel)
    if parallel:
        window.controller.reset(parallel_plan())
        window.tabs.setCurrentWidget(window.compute_panel)
    if local:
        stub_this_machine(window)


def _wait_for_diagnosis(app: Any, window: Any) -> None:
    """The diagnosis runs in a worker process: wait (30 s at most) for its report to be drawn."""
    import time

    deadline = time.monotonic() + 30  # the diagnosis runs in a worker process
    while window.diagnosis.stale and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    for _ in range(5):
        app.processEvents()


def stub_this_machine(window: object) -> None:
    """What a machine with one RTX 4090 (24,564 MiB as nvidia-smi reports it, 3,000 MiB held by
    another process), 64 GiB of dual-channel DDR5-5600 and two downloaded models would report; the
    window plans on the card and its RAM as a first start does."""
    from core.catalogue import find_gpu, find_model
    from core.files.hfcache import CachedModel, CacheScan, Skipped
    from core.files.local_gpus import LocalGpu, LocalGpus
    from core.files.local_host import LocalHost, MemoryModule
    from core.units import MiB
    from gui.main_window import MainWindow

    assert isinstance(window, MainWindow)
    total, used = 24564 * MiB, 3000 * MiB
    name, matched = "NVIDIA GeForce RTX 4090", find_gpu("rtx-4090")
    card = LocalGpu(0, name, "nvidia", total, used, total - used, "nvidia-smi", "550.54", catalogue=matched)
    # Two 32 GiB DDR5-5600 modules, one per channel: 2 × 8 B × 5600 MT/s = 89.6 GB/s; MemTotal a little
    # under the 64 GiB installed, as Linux reports it.
    modules = tuple(MemoryModule(32 << 30, 5600, 64, "DDR5", "DIMM 1", f"P0 CHANNEL {c}") for c in "AB")
    host = LocalHost(65_771_102_208, 41_000_000_000, "/proc/meminfo", 89.6, "dmidecode: 2 × DDR5-5600", modules)
    found = LocalGpus((card,), (), ("nvidia-smi",), 0.04, host)
    window.local.set_gpus(found)
    root = "~/.cache/huggingface/hub"
    models = tuple(
        CachedModel(repo, "0123456789abcdef", f"{root}/x", find_model(model_id).spec.renamed(repo), None, size, "main")
        for repo, model_id, size in (
            ("Qwen/Qwen3-8B", "qwen3-8b", 16_400_000_000),
            ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", 16_100_000_000),
        )
    )
    skipped = (Skipped("org/half-downloaded", "has no config.json (download incomplete?)"),)
    window.local.set_cache(CacheScan(root, True, models, skipped, 0.05))


def parallel_plan() -> Plan:
    """The README's many-GPU example: full fine-tuning of Llama 3.1 70B with FSDP2 on 16 H100s
    (two nodes of eight) at 8,192 tokens, activation checkpointing on, 1B tokens."""
    from core.plan import Preset, Strategy
    from core.presets import plan_for_model

    plan = plan_for_model("llama-3.1-70b", preset=Preset.TRAINER_BF16, checkpointing=True)
    plan = plan.with_hardware(gpu="h100-sxm").with_workload(seq_len=8192, tokens=1_000_000_000)
    return plan.on_gpus(16, Strategy.FSDP)


def issue_plans() -> list[tuple[str, object]]:
    """The comparison people ask for: LoRA on a 4090, QLoRA on a 3060, full on 2 × A100, LoRA on an L4.

    The prices per GPU-hour are illustrative inputs (what a user would type), not data.
    """
    from core.plan import LoraSettings, Method, Strategy
    from core.presets import default_plan

    lora = default_plan().with_workload(micro_batch=1, seq_len=2048, grad_accum=16)
    lora = lora.with_changes(lora=LoraSettings(rank=16, alpha=32, targets=("all-linear",)))
    return [
        ("LoRA r16 on an RTX 4090", lora.with_hardware(gpu="rtx-4090", price_per_gpu_hour=0.4)),
        (
            "QLoRA r16 on an RTX 3060",
            lora.with_changes(method=Method.QLORA).with_hardware(gpu="rtx-3060-12gb", price_per_gpu_hour=0.15),
        ),
        (
            "Full on 2 × A100 80GB",
            lora.with_changes(method=Method.FULL)
            .with_hardware(gpu="a100-80gb-sxm", price_per_gpu_hour=1.5)
            .on_gpus(2, Strategy.ZERO3),
        ),
        ("LoRA r16 on an L4", lora.with_hardware(gpu="l4", price_per_gpu_hour=0.6)),
    ]


def render_comparison(path: str, width: int = 1300, height: int = 1060) -> None:
    """docs/comparison.png: View → Compare plans with the four plans of issue_plans()."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from gui.settings import Settings
    from gui.theme import apply_theme

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(["vramplan-screenshot"])
    with tempfile.TemporaryDirectory() as folder:
        QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, folder)
        apply_theme(app, "light")
        from gui.main_window import MainWindow

        window = MainWindow(settings=Settings(os.path.join(folder, "screenshot.ini")))
        window.show()
        panel = window.plan_tools.show_compare()
        panel.include_current.setChecked(False)
        panel.add_plans(issue_plans(), "Compare")  # type: ignore[arg-type]
        dock = window.plan_tools.docks["compare"]
        dock.setFloating(True)
        dock.resize(width, height)  # the panel gives the chart its first share (ComparePanel._share_chart)
        for _ in range(5):
            app.processEvents()
        if not panel.grab().save(path):
            raise OSError(f"cannot write {path}")
        window.controller.undo_stack.setClean()
        window.close()


USAGE = (
    "usage: python -m gui.screenshot OUT.png [--size WIDTHxHEIGHT] [--theme light|dark]"
    " [--inference] [--diagnosis] [--serving] [--llamacpp] [--parallel] [--compare] [--compare-docked] [--local]"
    " [--export TARGET] [--gpu ID]"
)


def _option(args: list[str], name: str, default: str) -> str:
    if name not in args:
        return default
    index = args.index(name)
    if index + 1 >= len(args):
        raise ValueError(f"{name} needs a value")
    return args[index + 1]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if "--compare" in args:
        render_comparison(args[0])
        return 0
    serving = "--serving" in args
    try:
        size = _option(args, "--size", f"{WIDTH}x{HEIGHT}")
        parts = size.lower().split("x")
        if len(parts) != 2 or not all(part.isdigit() for part in parts):
            raise ValueError(f"--size {size!r} is not WIDTHxHEIGHT in pixels, e.g. 1280x720")
        width, height = int(parts[0]), int(parts[1])
        if not (320 <= width <= 8000 and 240 <= height <= 8000):
            raise ValueError(f"--size {size}: width 320 to 8,000 and height 240 to 8,000 pixels")
        theme = _option(args, "--theme", "light")
        if theme not in ("light", "dark"):
            raise ValueError(f"--theme {theme!r} is not light or dark")
        export_target = _option(args, "--export", "")
        from core.files.launch import Target

        if export_target and export_target not in {t.value for t in Target}:
            raise ValueError(f"--export {export_target!r} is not one of {', '.join(t.value for t in Target)}")
        gpu = _option(args, "--gpu", "")
        if gpu:
            from core.catalogue import load_gpus

            if gpu not in {card.id for card in load_gpus()}:
                raise ValueError(f"--gpu {gpu!r} is not a card id of `vramplan gpus`")
    except ValueError as error:
        print(f"gui.screenshot: {error}; {USAGE}", file=sys.stderr)
        return 2
    render(
        args[0],
        width,
        height,
        mode="inference" if "--inference" in args or serving or "--llamacpp" in args else "training",
        diagnosis="--diagnosis" in args,
        theme=theme,
        serving=serving,
        parallel="--parallel" in args,
        local="--local" in args,
        export_target=export_target,
        llamacpp="--llamacpp" in args,
        gpu=gpu,
        compare="--compare-docked" in args,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
