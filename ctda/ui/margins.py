"""Margins sized from the text they hold, so the browser draws a figure once.

By default plotly.js grows a margin to fit whatever sits outside the plot area (tick
labels, axis titles, a legend, the title) by drawing the *whole* figure again once it
has measured them; with a few thousand bars that second pass doubles the drawing time
(about 0.3 s of the 0.5 s a critical-path timeline took in headless Chromium). The
figures of the pages turn that off (``margin.autoexpand``) and size their margins here,
from the length of the labels, with a little room to spare.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

#: width of one character of a tick label or legend entry (12 px sans-serif, generous)
CHAR_PX = 7.0
#: height of one line of labels, and of one row of a horizontal legend
LINE_PX = 20
#: the title line above the plot (its text is 16-17 px)
TITLE_PX = 30
#: room a legend entry needs besides its text (its symbol and the gap to the next)
LEGEND_ENTRY_PX = 46
#: the plot width a horizontal legend is laid out for: the main column of the wide layout
#: on a laptop screen; on a narrower one a long legend may reach into the title
LEGEND_WIDTH_PX = 800


def text_px(labels: Iterable[object]) -> float:
    """Width of the longest of ``labels`` drawn in one line."""
    return CHAR_PX * max((len(str(s)) for s in labels), default=0)


def legend_rows(names: Iterable[object], width: float = LEGEND_WIDTH_PX) -> int:
    """Rows of a horizontal legend of these entries (plotly.js gives every column the
    widest entry's width once the entries do not fit in one row)."""
    widths = [LEGEND_ENTRY_PX + CHAR_PX * len(str(n)) for n in names]
    if not widths:
        return 0
    if sum(widths) <= width:
        return 1
    per_row = max(int(width // max(widths)), 1)
    return math.ceil(len(widths) / per_row)


def legend_names(fig: go.Figure) -> list[str]:
    """The entries the figure's legend shows (one per legend group)."""
    out: list[str] = []
    groups: set[str] = set()
    for t in fig.data:
        if t.showlegend is False or not t.name:
            continue
        if t.legendgroup:
            if t.legendgroup in groups:
                continue
            groups.add(t.legendgroup)
        out.append(str(t.name))
    return out


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


def legend_on_top(fig: go.Figure, *, title: bool = True) -> float:
    """Put the legend in rows just above the plot (under the title); the top margin
    that title and legend need."""
    rows = legend_rows(legend_names(fig))
    fig.update_layout(legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"})
    return (TITLE_PX if title else 6) + rows * LINE_PX + (6 if rows else 0)


def y_labels_px(labels: Iterable[object]) -> float:
    """Left margin for horizontal tick labels of a y axis (no axis title)."""
    return text_px(labels) + 14


#: left margin of a numeric y axis with a short title ("ms"): numbers up to 6 digits
NUMERIC_Y_PX = 62
#: bottom margin of a numeric x axis: one line of tick labels and the axis title
NUMERIC_X_PX = 52
