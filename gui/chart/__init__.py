"""The live memory chart, in parts a newcomer can read one at a time:

- :mod:`gui.chart.geometry`: what is drawn, worked out without Qt (the bars, how they stack,
  their labels, the y range, the caption); tests read it with no display.
- :mod:`gui.chart.items`: the pyqtgraph items the chart draws with (bars, the capacity and
  usable lines, the headroom band, the value labels).
- :mod:`gui.chart.axis`: the axis that redraws only what changed.
- :mod:`gui.chart.legend`: the legend and its columns.
- :mod:`gui.chart.widget`: :class:`~gui.chart.widget.MemoryChart`, which puts them together.
- :mod:`gui.chart.export`: the chart as PNG or SVG, with its caption.

Nothing is imported here, so that the geometry imports neither Qt nor pyqtgraph.
"""
