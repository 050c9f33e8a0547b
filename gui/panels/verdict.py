"""The verdict: Fits / Over headroom / Borderline / Out of memory, in words and symbol as well
as colour.

The verdict and its figures are the core's (``Estimate.judgement(mode)``, one rule for
training and serving); this panel only words and colours them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QWidget

from core.estimate import JUDGED_SHORT, Estimate
from core.plan import Offload, training_refusal
from core.verdict import NARROW_LABEL, VERDICT_LABELS, Judgement, Mode, Verdict
from gui import colours, theme
from gui.format import Unit, counted, measurement_label, memory
from gui.plaintext import html as escape  # the one escape for text shown in rich labels

if TYPE_CHECKING:
    from core.files.measurement import Measurement

# Okabe-Ito bluish green / orange / vermillion, with a symbol so colour is never the only cue.
VERDICT_STYLE = {
    Verdict.FITS: ("✔", colours.FITS),
    Verdict.OVER_HEADROOM: ("⚠", colours.CAUTION),
    Verdict.BORDERLINE: ("≈", colours.UNCERTAIN),
    Verdict.OOM: ("✖", colours.PROBLEM),
    Verdict.WONT_START: ("✖", colours.PROBLEM),
}
# A narrow fit (core.verdict: fits, its range reaching into the headroom): the fit's symbol on
# borderline's yellow, never the plain green of a fit with margin.
NARROW_STYLE = ("✔", colours.UNCERTAIN)


def verdict_style(verdict: Verdict, narrow: bool = False) -> tuple[str, str]:
    """The symbol and colour of a verdict, a narrow fit's own."""
    return NARROW_STYLE if narrow and verdict is Verdict.FITS else VERDICT_STYLE[verdict]


def text_colour(colour: str, palette: QPalette | None = None) -> str:
    """A verdict colour readable as text on ``palette``'s (the application's) Base and Window, light or dark: mixed
    towards its Text until 4.5:1 (gui.theme.legible), keeping its hue as far as it can. h95ui: fixed shades for a
    light background stood here, under 4.5:1 (#B07800 on white 3.8:1, Fits' bluish green 3.4:1, Out of memory's
    vermillion 3.9:1: colours.OKABE_ITO) and darker still on a dark theme (#7A6A00 on #1f2023 3.0:1)."""
    palette = palette or QGuiApplication.palette()
    backgrounds = (palette.color(QPalette.ColorRole.Base), palette.color(QPalette.ColorRole.Window))
    return theme.legible(QColor(colour), backgrounds, palette.color(QPalette.ColorRole.Text)).name().upper()


SERVING_LABELS = {
    Verdict.FITS: "Serving fits",
    Verdict.OVER_HEADROOM: "Serving: over headroom",
    Verdict.BORDERLINE: "Serving: borderline",
    Verdict.OOM: "Serving: out of memory",
    Verdict.WONT_START: "Serving: would not start",
}


# The banner's and the Diagnosis' large text was chosen at a 9 pt application font (the offscreen platform's,
# and most Linux desktops'): 17 pt badges, a 13 pt headline. Fixed, they were no larger than the text around
# them under an OS text scale of 1.5 (13.5 pt) or on macOS (13 pt): each keeps its ratio to the font instead.
CHOSEN_AT_PT = 9.0


def text_pt(pt: float) -> str:
    """``pt``, chosen at CHOSEN_AT_PT, at the application's font, as a style sheet's size ("13pt" at 9 pt)."""
    app = QGuiApplication.font().pointSizeF()
    return f"{pt * app / CHOSEN_AT_PT if app > 0 else pt:g}pt"


# The training view of a model whose step is not estimated (a hybrid recurrent model): grey, no verdict.
UNTRAINED_SYMBOL = "–"
UNTRAINED_LABEL = "Not estimated"
UNTRAINED_HEADLINE = "Training is not estimated for this plan"


def untrained_style() -> str:
    return (
        f"QLabel {{ background: {colours.OKABE_ITO['grey']}; color: #000000;"
        f" border-radius: 6px; padding: 8px 14px; font-size: {text_pt(17)}; font-weight: 600; }}"
    )


def _headline(total: str, usable: str, margin: str = "") -> str:
    tail = f" — {margin}" if margin else ""
    return f"<span style='font-size:{text_pt(13)}'><b>{total}</b> of {usable} usable{tail}</span>"


def headline_templates() -> dict[str, str]:
    return {
        "training": _headline("88.8 GB", "88.8 GB", "88.8 GB to spare"),
        "inference": _headline("88.8 GB", "88.8 GB", "88.8 GB to spare"),
    }


def badge_text_colour(verdict: Verdict, narrow: bool = False) -> str:
    """Black on the light orange of over-headroom and the yellow of borderline and a narrow fit,
    white on the darker green and vermillion."""
    return "#000000" if narrow or verdict in (Verdict.OVER_HEADROOM, Verdict.BORDERLINE) else "#FFFFFF"


def badge_background(verdict: Verdict, narrow: bool = False) -> str:
    """The verdict's colour behind its badge's text, mixed away from that text until 4.5:1 (gui.theme.legible; the
    badge's own colours, whatever the theme): white read 3.4:1 on Fits' bluish green and 3.9:1 on Out of memory's
    vermillion (colours.OKABE_ITO; h95ui); black on the orange and the yellow already reads over 9:1, so they stay
    as they are."""
    text = QColor(badge_text_colour(verdict, narrow))
    away = QColor("#FFFFFF" if text.lightness() < 128 else "#000000")
    return theme.legible(QColor(verdict_style(verdict, narrow)[1]), (text,), away).name().upper()


def margin_text(judged: Judgement, headroom: float, unit: Unit) -> str:
    """The margin in words: to spare, into the headroom (and how far under the card), over, or
    (borderline) the card's capacity inside the estimate's range."""
    if judged.verdict is Verdict.BORDERLINE:
        low, high = judged.range_bytes
        return (
            f"the card's {memory(judged.capacity_bytes, unit)} lies within the range "
            f"{memory(low, unit)}–{memory(high, unit)}: it may or may not fit"
        )
    if judged.fits_narrowly:  # core.verdict's words: fits with X to spare, but the range reaches Y ...
        return judged.narrow_words(unit)
    # An engine that would not start: the memory's sense and the engine's, in core.verdict's one clause (h92verd)
    refused = f"; {judged.start_words}" if judged.start_words else ""
    if judged.margin_bytes >= 0:  # the command line's and the report's words after the margin (h94start: the banner
        spare = f"{memory(judged.margin_bytes, unit)} to spare"  # said "… to spare on the card, but no request fits")
        return f"{spare}; {judged.after_margin}" if judged.after_margin else spare
    over = f"{memory(-judged.margin_bytes, unit)} over the usable memory"
    if refused:
        return f"{over}{refused}"
    if judged.verdict is Verdict.OVER_HEADROOM:
        return (
            f"{over}: into the {headroom:.0%} headroom you keep free, "
            f"{memory(judged.capacity_margin_bytes, unit)} under the card's capacity"
        )
    return over


def badge_style(verdict: Verdict, narrow: bool = False) -> str:
    return (
        f"QLabel {{ background: {badge_background(verdict, narrow)}; color: {badge_text_colour(verdict, narrow)};"
        f" border-radius: 6px; padding: 8px 14px; font-size: {text_pt(17)}; font-weight: 600; }}"
    )


def card_figures_text(estimate: Estimate, unit: Unit) -> str:
    """The reserved and nvidia-smi figures, which one the verdict reads, and its range, ending
    a line and opening the next (the detail's tooltip says why that figure and how sure).
    Lesson accounting has one figure, the lesson's sum, and shows none of this."""
    low, high = estimate.range_bytes
    return (
        f"{memory(estimate.reserved_bytes, unit)} reserved · <b>{memory(estimate.total_bytes, unit)}</b> "
        f"{estimate.judged_figure}, judged<br>range {memory(low, unit)}–{memory(high, unit)} · "
    )


class VerdictPanel(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("verdictPanel")
        self.setAccessibleName("Verdict")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.unit: Unit = "GB"
        self.measurement: Measurement | None = None
        self._estimate: Estimate | None = None
        self.mode = "training"
        grid = QGridLayout(self)
        grid.setContentsMargins(14, 10, 14, 10)
        grid.setHorizontalSpacing(18)
        self.badge = QLabel()
        self.badge.setAccessibleName("Verdict")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setMinimumWidth(200)
        self._badge_widths: dict[tuple[str, str], int] = {}  # (mode, font) -> widest verdict
        grid.addWidget(self.badge, 0, 0, 2, 1)
        self.headline = QLabel()
        self.headline.setAccessibleName("Verdict detail")
        # Wide enough for the mode's usual headline on one line, the width the window is laid
        # out for; a longer one ("over the usable memory") wraps instead of widening the window
        # at an edit, or squeezing the badge.
        self.headline.ensurePolished()
        self._headline_widths: dict[str, int] = {}
        for mode, template in headline_templates().items():
            self.headline.setText(template)
            self._headline_widths[mode] = self.headline.sizeHint().width()
        self.headline.setText("")
        self.headline.setWordWrap(True)
        self.headline.setMinimumWidth(self._headline_widths["training"])
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.headline, 0, 1)
        self.headline.setAutoFillBackground(True)  # opaque: new text repaints the label alone
        self.detail = QLabel()
        self.detail.setAccessibleName("Verdict figures")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.detail, 1, 1)
        self.detail.setAutoFillBackground(True)
        grid.setColumnStretch(1, 1)
        # Room the banner keeps for a while after a longer verdict (see MainWindow._fit_banner)
        # lies under the text, not between the headline and its figures.
        grid.setRowStretch(2, 1)

    def show_estimate(self, estimate: Estimate) -> None:
        self._estimate = estimate
        if self.mode == "inference":
            self._show_serving(estimate)
        else:
            self._show_training(estimate)

    def set_unit(self, unit: Unit) -> None:
        self.unit = unit
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def set_measurement(self, measurement: Measurement | None) -> None:
        self.measurement = measurement
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self.headline.setMinimumWidth(self._headline_widths["inference" if mode == "inference" else "training"])
        if self._estimate is not None:
            self.show_estimate(self._estimate)

    def _show_badge(self, verdict: Verdict, label: str, narrow: bool = False) -> None:
        text = f"{verdict_style(verdict, narrow)[0]}  {label}"
        style = badge_style(verdict, narrow)
        if text == self.badge.text() and style == self.badge.styleSheet():
            return
        self.badge.setText(text)
        if style != self.badge.styleSheet():
            # Only on a change of colour: a new style sheet re-polishes the widget.
            self.badge.setStyleSheet(style)
        self.badge.ensurePolished()
        self.badge.setMinimumWidth(self._badge_width())  # never clipped

    def _badge_width(self) -> int:
        """The width of the mode's widest verdict: a badge that changed width with the verdict
        moved the headline beside it and re-laid out the window at each flip."""
        labels = SERVING_LABELS if self.mode == "inference" else VERDICT_LABELS
        key = (self.mode, self.badge.font().key())
        width = self._badge_widths.get(key)
        if width is None:
            text, style = self.badge.text(), self.badge.styleSheet()
            width = 200
            shown = [(verdict, label, False) for verdict, label in labels.items()]
            if self.mode != "inference":  # a training step is never refused at start-up (WONT_START: serving's)
                shown = [s for s in shown if s[0] is not Verdict.WONT_START]
                shown.append((Verdict.FITS, NARROW_LABEL, True))
            for verdict, label, narrow in shown:
                self.badge.setStyleSheet(badge_style(verdict, narrow))
                self.badge.setText(f"{verdict_style(verdict, narrow)[0]}  {label}")
                self.badge.ensurePolished()
                width = max(width, self.badge.sizeHint().width())
            self.badge.setStyleSheet(style)
            self.badge.setText(text)
            self._badge_widths[key] = width
        return width

    def _show_serving(self, estimate: Estimate) -> None:
        inf = estimate.inference
        plan = estimate.plan.inference
        judged = estimate.judgement(Mode.INFERENCE)
        verdict = judged.verdict
        self._show_badge(verdict, SERVING_LABELS[verdict])
        u = self.unit
        margin = margin_text(judged, estimate.plan.hardware.headroom, u)
        self.headline.setText(_headline(memory(judged.total_bytes, u), memory(judged.usable_bytes, u), margin))
        waits = "waits" if inf.queued == 1 else "wait"
        queue = f" · ⚠ {counted(inf.queued, 'request')} {waits} in the queue" if inf.queued else ""
        held = estimate.plan.hardware.held_by_others
        others = f" ({memory(held, u)} held by other processes)" if held else ""
        self.detail.setText(
            f"{counted(plan.concurrent, 'request')} × {plan.context:,} tokens · "
            f"{inf.limits_sentence(estimate.plan)} · {estimate.gpu.name}{others}{queue}"
        )
        self._describe(f"{SERVING_LABELS[verdict]}. {memory(judged.total_bytes, u)}; {margin}.")

    def _describe(self, text: str) -> None:
        if self.accessibleDescription() != text:
            self.setAccessibleDescription(text)

    def _show_untrained(self, estimate: Estimate) -> None:
        """A model whose training step the core does not estimate (a hybrid recurrent one,
        core.plan.hybrid_refusal): no verdict and no figure, the reason and where its figures are."""
        text = f"{UNTRAINED_SYMBOL}  {UNTRAINED_LABEL}"
        if text != self.badge.text() or self.badge.styleSheet() != untrained_style():
            self.badge.setText(text)
            self.badge.setStyleSheet(untrained_style())
            self.badge.ensurePolished()
            self.badge.setMinimumWidth(self._badge_width())
        self.headline.setText(f"<span style='font-size:{text_pt(13)}'><b>{UNTRAINED_HEADLINE}</b></span>")
        why = escape(training_refusal(estimate.plan) or "")
        self.detail.setText(f"{why}. Switch to <b>Inference</b> for its figures.")
        self.detail.setToolTip("")
        self._describe(f"{UNTRAINED_LABEL}. {UNTRAINED_HEADLINE}.")

    def _show_training(self, estimate: Estimate) -> None:
        if training_refusal(estimate.plan) is not None:
            self._show_untrained(estimate)
            return
        judged = estimate.judgement(Mode.TRAINING)
        label = judged.label  # core.verdict's: "Fits narrowly" for a fit whose range reaches the headroom
        self._show_badge(judged.verdict, label, judged.fits_narrowly)
        u = self.unit
        margin = margin_text(judged, estimate.plan.hardware.headroom, u)
        self.headline.setText(_headline(memory(judged.total_bytes, u), memory(judged.usable_bytes, u), margin))
        plan = estimate.plan
        gpus = f" × {plan.world_size}" if plan.world_size > 1 else ""
        text = f"Peak at the <b>{estimate.peak_phase}</b>: {memory(estimate.peak_bytes, u)} allocated"
        figures = card_figures_text(estimate, u)
        text += " · " + figures if estimate.confidence is not None else "<br>"
        held = plan.hardware.held_by_others
        others = f" (after {memory(held, u)} other processes hold)" if held else ""
        text += (
            f"{estimate.gpu.name}{gpus}: {memory(estimate.capacity_bytes, u)}{others}, "
            f"{plan.hardware.headroom:.0%} kept as headroom"
        )
        if len(estimate.ranks) > 1:
            worst = estimate.worst
            text += f" · The worst rank decides: <b>{escape(worst.label)}</b> ({counted(worst.count, 'GPU')})"
        host = estimate.host
        if host is not None and (plan.world_size > 1 or plan.parallel.offload is not Offload.NONE):
            line = f"host RAM {memory(host.bytes, u)} of {memory(host.capacity_bytes, u)} per node"
            if host.verdict is None:
                line = f"host RAM {memory(host.bytes, u)} per node needed (RAM not given: not judged)"
            elif host.verdict is not Verdict.FITS:
                problem = f"⚠ {line}: {VERDICT_LABELS[host.verdict].lower()}"
                line = f"<span style='color:{text_colour(colours.PROBLEM, self.palette())}'><b>{problem}</b></span>"
            text += " · " + line
        if self.measurement is not None:
            from core.files.measurement import compare  # loaded with the measurement

            # A fake-tensor run is compared with the tensor peak, a run on a card with the
            # allocated peak (its workspaces included): core.files.measurement.estimated_peak.
            c = compare(estimate, self.measurement)
            text += f"<br>Measured peak: <b>{memory(c.measured_bytes, u)}</b> allocated"
            text += f" — {escape(measurement_label(self.measurement))}"
            text += f"; the estimate's {c.figure}: {memory(c.estimated_bytes, u)} ({c.error_pct:+.1f} %)"
        self.detail.setText(text)
        how_sure = f"Judged on {estimate.judged_figure}, {JUDGED_SHORT}: {estimate.judged_why}."
        if estimate.confidence is not None:
            how_sure += f"\nHow sure: {estimate.confidence.text}."
        if self.detail.toolTip() != how_sure:
            self.detail.setToolTip(how_sure)
        self._describe(f"{label}. {memory(estimate.total_bytes, u)}; {margin}.")
