"""Draw the VRAM Planner app icon and write every container the platforms want.

    python packaging/make_icons.py            # writes resources/icons/app/

The motif is the app's own chart in miniature: three stacked memory bars (forward,
backward, optimizer step) in the chart's Okabe-Ito colours under a vermillion capacity
line, on a dark rounded square. Geometry lives on a 16-unit grid so that the 16 px icon
is pixel-exact and every larger size scales it; edges are snapped to whole pixels.

Outputs (all committed):
  vramplan-<N>.png   N = 16 … 1024, painted with QPainter
  vramplan.svg       the same geometry as vector art (Linux hicolor/scalable)
  vramplan.ico       Windows: PNG-compressed entries 16 … 256 (valid since Windows Vista)
  vramplan.icns      macOS: PNG-based 'ic07'…'ic14' elements (valid since OS X 10.7)

The .ico and .icns containers are written byte by byte here, so no Pillow is needed.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "resources" / "icons" / "app"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512, 1024)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# Apple's icns element types that hold PNG data, with the pixel size each holds.
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"ic11", 32),  # 16 @2x
    (b"ic12", 64),  # 32 @2x
    (b"ic07", 128),
    (b"ic13", 256),  # 128 @2x
    (b"ic08", 256),
    (b"ic14", 512),  # 256 @2x
    (b"ic09", 512),
    (b"ic10", 1024),  # 512 @2x
)

BACKGROUND = "#1f2023"  # the dark theme's Base colour (gui/theme.py)
BORDER = "#45484d"
CAPACITY = "#D55E00"  # vermillion: the card's usable memory
# (colour, height in grid units) from the bottom up: weights, gradients, optimizer, activations.
WEIGHTS, GRADIENTS, OPTIMIZER, ACTIVATIONS = "#0072B2", "#E69F00", "#009E73", "#CC79A7"
BARS: tuple[tuple[float, tuple[tuple[str, float], ...]], ...] = (
    (3.0, ((WEIGHTS, 4.0), (ACTIVATIONS, 3.0))),  # forward
    (7.0, ((WEIGHTS, 4.0), (GRADIENTS, 2.0), (ACTIVATIONS, 2.0))),  # backward
    (11.0, ((WEIGHTS, 4.0), (GRADIENTS, 2.0), (OPTIMIZER, 4.0))),  # optimizer step: the peak
)
BAR_WIDTH = 2.0
BASELINE = 13.0
CAPACITY_Y = 2.0  # top edge of the capacity line, one unit thick
CORNER = 3.0


def _snap(value: float, unit: float) -> int:
    return round(value * unit)


def paint_png(size: int, path: Path) -> None:
    from PySide6.QtCore import QRect, QRectF, Qt
    from PySide6.QtGui import QColor, QImage, QPainter, QPen

    unit = size / 16
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    inset = 0.5 if size < 64 else unit * 0.25
    border = QPen(QColor(BORDER))
    border.setWidthF(1.0 if size < 64 else unit * 0.25)
    painter.setPen(border)
    painter.setBrush(QColor(BACKGROUND))
    painter.drawRoundedRect(QRectF(inset, inset, size - 2 * inset, size - 2 * inset), CORNER * unit, CORNER * unit)

    # Bars and the line are axis-aligned and snapped, so they stay sharp without antialiasing.
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
    painter.setPen(Qt.PenStyle.NoPen)
    for x, segments in BARS:
        left, right = _snap(x, unit), _snap(x + BAR_WIDTH, unit)
        bottom = BASELINE
        for colour, height in segments:
            top = bottom - height
            y0, y1 = _snap(top, unit), _snap(bottom, unit)
            # From 64 px up a thin gap separates the segments, as the chart's bars do.
            gap = max(1, round(unit / 8)) if size >= 64 else 0
            painter.setBrush(QColor(colour))
            painter.drawRect(QRect(left, y0 + gap, right - left, y1 - y0 - gap))
            bottom = top
    thickness = max(1, _snap(1.0, unit) // 2)
    y = _snap(CAPACITY_Y, unit)
    left, right = _snap(2.0, unit), _snap(14.0, unit)
    painter.setBrush(QColor(CAPACITY))
    if size >= 64:  # dashed, like the chart's capacity line
        dash, step = _snap(1.5, unit), _snap(2.0, unit)
        for start in range(left, right, step):
            painter.drawRect(QRect(start, y, min(dash, right - start), thickness))
    else:
        painter.drawRect(QRect(left, y, right - left, thickness))
    painter.end()
    if not image.save(str(path), "PNG"):
        raise OSError(f"could not write {path}")


def svg_text() -> str:
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256" viewBox="0 0 16 16">',
        f'  <rect x="0.125" y="0.125" width="15.75" height="15.75" rx="{CORNER}" fill="{BACKGROUND}" '
        f'stroke="{BORDER}" stroke-width="0.25"/>',
    ]
    for x, segments in BARS:
        bottom = BASELINE
        for colour, height in segments:
            top = bottom - height
            parts.append(
                f'  <rect x="{x:g}" y="{top + 0.125:g}" width="{BAR_WIDTH:g}" height="{height - 0.125:g}" '
                f'fill="{colour}"/>'
            )
            bottom = top
    parts.append(
        f'  <line x1="2" y1="{CAPACITY_Y + 0.25:g}" x2="14" y2="{CAPACITY_Y + 0.25:g}" stroke="{CAPACITY}" '
        'stroke-width="0.5" stroke-dasharray="1.5 0.5"/>'
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """ICONDIR + one ICONDIRENTRY per image + the PNG streams (Microsoft 'Icons' reference)."""
    header = struct.pack("<HHH", 0, 1, len(ICO_SIZES))
    offset = len(header) + 16 * len(ICO_SIZES)
    entries, blobs = b"", b""
    for size in ICO_SIZES:
        data = pngs[size]
        side = 0 if size >= 256 else size  # 0 means 256
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset)
        blobs += data
        offset += len(data)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """'icns' + total length, then (type, length incl. 8-byte header, PNG data) elements."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    pngs: dict[int, bytes] = {}
    for size in PNG_SIZES:
        path = OUT_DIR / f"vramplan-{size}.png"
        paint_png(size, path)
        pngs[size] = path.read_bytes()
    (OUT_DIR / "vramplan.svg").write_text(svg_text(), encoding="utf-8")
    (OUT_DIR / "vramplan.ico").write_bytes(ico_bytes(pngs))
    (OUT_DIR / "vramplan.icns").write_bytes(icns_bytes(pngs))
    del app
    print(f"wrote {len(PNG_SIZES)} PNGs, vramplan.svg, vramplan.ico, vramplan.icns to {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
