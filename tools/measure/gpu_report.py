"""What a real-GPU run of the measuring tool says against the estimate, case by case.

``tools/measure/gpu_check.sh`` measures a few training cases on the card (``--backend cuda``:
``torch.cuda.max_memory_allocated`` through the tool's phase marks, and
``torch.cuda.max_memory_reserved``), then runs this: for each case it prints the allocator
peak and the reserved peak the card showed beside the estimate's (``Estimate.peak_bytes`` and
the worst rank's ``reserved_bytes``, core.estimate) and the committed fake-CUDA peak, with the
errors. The card is matched to the catalogue from the name and memory ``nvidia-smi`` gives
(core.files.gpu_match), so the reserved prediction uses that card's allocator rules.

Results measured before branch h76memtr carry the tool's module hooks' retention (tools/measure
README, "The tracker's module hooks"; since then the tracker keeps nothing an untracked run frees).
Read the reserved error as the first independent check of the fragmentation fraction on a card of ours.

    python -m tools.measure.gpu_report OUT [--gpu-name NAME --gpu-memory-mib N]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from core.errors import PlanFileError
from core.estimate import estimate
from core.files.gpu_match import match_catalogue
from core.files.measurement import load_measurement, plan_for_case

FAKE = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "measured"


@dataclass(frozen=True)
class Row:
    case: str
    allocated: int  # the card's allocator peak
    estimated: float  # the estimate's allocator peak
    reserved: int | None  # the card's max_memory_reserved (None: not measured on a GPU)
    estimated_reserved: float
    fake: int | None  # the committed fake-CUDA allocator peak of the same case

    @property
    def allocated_error_pct(self) -> float:
        return (self.estimated - self.allocated) / self.allocated * 100

    @property
    def reserved_error_pct(self) -> float | None:
        if not self.reserved:
            return None
        return (self.estimated_reserved - self.reserved) / self.reserved * 100


def rows(folder: Path, gpu: str | None = None, fake_folder: Path = FAKE) -> list[Row]:
    """One row per measurement in ``folder``; ``gpu``: the catalogue id the plans run on."""
    out = []
    for path in sorted(folder.glob("*.json")):
        measured = load_measurement(path)
        config = json.loads(path.read_text()).get("model_config")
        plan = plan_for_case(measured.case, config, measured.torch_version)
        if gpu is not None:
            plan = plan.with_hardware(gpu=gpu)
        est = estimate(plan)
        twin = fake_folder / path.name
        fake = load_measurement(twin).peak_allocated_bytes if twin.is_file() else None
        out.append(
            Row(
                measured.case_id,
                measured.peak_allocated_bytes,
                est.peak_bytes,
                measured.peak_reserved_bytes,
                est.worst.reserved_bytes,
                fake,
            )
        )
    return out


def card(name: str | None, memory_mib: int | None) -> str | None:
    """The catalogue id of the card ``nvidia-smi`` names, or None when it is not in the catalogue."""
    if not name or not memory_mib:
        return None
    entry = match_catalogue(name, "nvidia", memory_mib * 2**20)
    return None if entry is None else entry.id


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value / 2**30:.2f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def render(table: list[Row]) -> str:
    head = f"{'case':58} {'alloc':>7} {'est':>7} {'err':>8}  {'reserved':>8} {'est':>7} {'err':>8}  {'fake':>7}"
    lines = [head, "-" * len(head)]
    for r in table:
        lines.append(
            f"{r.case[:58]:58} {_gib(r.allocated):>7} {_gib(r.estimated):>7} {_pct(r.allocated_error_pct):>8}  "
            f"{_gib(r.reserved):>8} {_gib(r.estimated_reserved):>7} {_pct(r.reserved_error_pct):>8}  {_gib(r.fake):>7}"
        )
    lines.append("GiB; err = (estimate - card) / card. fake: the committed fake-CUDA allocator peak of the case.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.measure.gpu_report", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder of a --backend cuda run (its JSON files)")
    parser.add_argument("--gpu-name", help="the card as nvidia-smi names it")
    parser.add_argument("--gpu-memory-mib", type=int, help="its memory as nvidia-smi gives it (MiB)")
    args = parser.parse_args(argv)
    gpu = card(args.gpu_name, args.gpu_memory_mib)
    if args.gpu_name and gpu is None:
        print(f"{args.gpu_name} is not in the GPU catalogue: the plans keep their default card", file=sys.stderr)
    try:
        table = rows(args.folder, gpu)
    except PlanFileError as error:
        print(f"gpu_report: {error}", file=sys.stderr)
        return 2
    if not table:
        print(f"gpu_report: no measurement in {args.folder}", file=sys.stderr)
        return 1
    where = gpu or "the plans' default card"
    print(f"card: {where}")
    print(render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
