"""Margins sized from the text they hold, so the browser draws a figure once.

By default plotly.js grows a margin to fit whatever sits outside the plot area (tick
labels, axis titles, a legend, the title) by drawing the *whole* figure again once it
has measured them; with a few thousand bars that second pass doubles the drawing time
(about 0.3 s of the 0.5 s a critical-path timeline took in headless Chromium). The
figures of the pages turn that off (``margin.autoexpand``) and size their margins here,
from the length of the labels, with a little room to spare.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

#: width of one character of a tick label (12 px sans-serif, generous)
CHAR_PX = 7.0
#: the title line above the plot (its text is 16-17 px)
TITLE_PX = 30


def text_px(labels: Iterable[object]) -> float:
    """Width of the longest of ``labels`` drawn in one line."""
    return CHAR_PX * max((len(str(s)) for s in labels), default=0)


def fix(fig: go.Figure, *, left: float, right: float, top: float, bottom: float) -> go.Figure:
    """Set the margins and keep plotly.js from growing them (see the module doc)."""
    margin: dict[str, Any] = {
        "l": round(left),
        "r": round(right),
        "t": round(top),
        "b": round(bottom),
        "autoexpand": False,
    }
    fig.update_layout(margin=margin)
    for axis in ("xaxis", "yaxis"):
        fig.layout[axis].automargin = False
    return fig


def y_labels_px(labels: Iterable[object]) -> float:
    """Left margin for horizontal tick labels of a y axis (no axis title)."""
    return text_px(labels) + 14


#: bottom margin of a numeric x axis: one line of tick labels and the axis title
NUMERIC_X_PX = 52
