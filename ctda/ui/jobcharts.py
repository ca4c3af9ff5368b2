"""Plotly figures of the Job page, from the tables in :mod:`ctda.ui.jobframes`.

They keep the Critical path page's conventions (:mod:`ctda.ui.charts`): class colours,
path stretches outlined in the path colour, connectors only where the path changes place
(here: rank), one unit (ms) in every tooltip, the mode bar in a margin of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ctda.ui.charts import CLASS_COLORS, CLASS_PATTERNS, PATH_COLOR, ROW_PX, fmt_ms
from ctda.ui.jobframes import JobTimeline, Lateness, rank_label


def _pale(hex_color: str, keep: float = 0.28) -> str:
    """``hex_color`` mixed with white, opaque: a rank's row folds nested calls onto one
    another, and translucent bars would darken with every level of nesting."""
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(255 - keep * (255 - v)):02X}" for v in (r, g, b))


#: a rank's own events, in their class colour made pale (the path's are in full colour)
PALE = {cls: _pale(c) for cls, c in CLASS_COLORS.items()}
PALE_OTHER = "#E4EAF2"
#: diverging: early (others waited less) blue, on time white, late (others waited) red
LATENESS_SCALE = [[0.0, "#2166AC"], [0.25, "#92C5DE"], [0.5, "#F7F7F7"], [0.75, "#F4A582"], [1.0, "#B2182B"]]
STRAGGLER = "straggler"
PATH_TRACE = "job path changes rank"
#: the mode bar sits in this right margin, vertically, so it never covers data
MARGIN = {"l": 10, "r": 46, "t": 60, "b": 40}
MODEBAR = {"orientation": "v"}


def heatmap(late: Lateness) -> go.Figure:
    """Ranks (rows) by steps (columns), lateness in ms on a diverging scale centred on 0;
    each step's straggler is marked with an outlined square."""
    ranks = [rank_label(r) for r in late.ranks]
    z = late.ms
    span = float(np.nanmax(np.abs(z))) if z.size and not np.all(np.isnan(z)) else 1.0
    text = [[("-" if np.isnan(v) else fmt_ms(float(v))) for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=late.steps,
            y=ranks,
            zmid=0,
            zmin=-span,
            zmax=span,
            colorscale=LATENESS_SCALE,
            # under the chart: the right margin is the mode bar's
            colorbar={
                "title": {"text": "late ms", "side": "right"},
                "orientation": "h",
                "x": 0,
                "xanchor": "left",
                "y": 0.0,
                "yanchor": "bottom",
                "yref": "container",
                "len": 0.5,
                "thickness": 10,
            },
            customdata=text,
            hovertemplate="%{x} · %{y}<br>late %{customdata}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    marked = [(s, rank_label(r)) for s, r in zip(late.steps, late.straggler) if r in late.ranks]
    if marked:
        fig.add_scatter(
            x=[s for s, _ in marked],
            y=[r for _, r in marked],
            mode="markers",
            marker={"symbol": "square-open", "size": 22, "color": PATH_COLOR, "line": {"width": 2}},
            name=STRAGGLER,
            showlegend=True,
            hovertemplate="%{x}: straggler %{y}<extra></extra>",
        )
    fig.update_layout(
        title={
            "text": "Lateness per step and rank: arrival at the step's collectives minus the median",
            "x": 0,
        },
        height=int(min(max(240, 34 * len(ranks) + 180), 900)),
        margin={**MARGIN, "b": 90},
        modebar=MODEBAR,
        plot_bgcolor="white",
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
        xaxis={"type": "category", "title": None},
        yaxis={"type": "category", "autorange": "reversed", "title": None},
    )
    return fig


def _hover(df: pd.DataFrame, where: str, tail: str) -> list[str]:
    rows: Iterable[Any] = df.itertuples()  # rows typed loosely by the stubs
    return [
        f"{r.name}<br>{rank_label(r.rank)} · {getattr(r, where)}<br>starts {fmt_ms(r.start_ms)}"
        f" · lasts {fmt_ms(r.dur_ms)}<br>class {r.cls}{tail}"
        for r in rows
    ]


def timeline(tl: JobTimeline) -> go.Figure:
    """One band per rank: its job path row (stretches in their class colour, outlined) and,
    when its run is stored, its threads and streams (events faded); a thin dark connector
    wherever the job path moves from one rank to another."""
    fig = go.Figure()
    span = max(tl.end_ms - tl.start_ms, 1e-6)
    min_w = span / 2000  # a zero-length bar is invisible: instants get a sliver
    outline_min = span / 300  # thinner bars would show only outline colour
    busy = tl.busy
    if len(busy):
        busy = busy.assign(where=busy.lane)
        fig.add_bar(
            x=np.maximum(busy.dur_ms.to_numpy(), min_w),
            base=busy.start_ms.to_numpy(),
            y=busy.y.to_numpy(),
            width=busy.height.to_numpy(),
            orientation="h",
            marker={"color": [PALE.get(str(c), PALE_OTHER) for c in busy.cls], "line": {"width": 0}},
            name="rank's events (class colour, pale)",
            hovertext=_hover(busy, "where", ""),
            hoverinfo="text",
        )
    path = tl.path.assign(where="job path")
    for cls, part in path.groupby("cls", sort=False):
        c = str(cls)
        dur = part.dur_ms.to_numpy()
        marker: dict[str, Any] = {
            "color": CLASS_COLORS.get(c, "#333"),
            "line": {"width": np.where(dur >= outline_min, 1.2, 0.0), "color": PATH_COLOR},
        }
        if c in CLASS_PATTERNS:
            marker["pattern"] = {"shape": CLASS_PATTERNS[c], "fgcolor": "#777", "size": 5}
        fig.add_bar(
            x=np.maximum(dur, min_w),
            base=part.start_ms.to_numpy(),
            y=part.y.to_numpy(),
            width=part.height.to_numpy(),
            orientation="h",
            marker=marker,
            name=f"job path: {c}",
            hovertext=_hover(part, "where", "<br><b>on the job path</b>"),
            hoverinfo="text",
        )
    if len(tl.jumps):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for x0, y0, x1, y1 in tl.jumps[["x0", "y0", "x1", "y1"]].to_numpy(dtype=np.float64).tolist():
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            line={"color": PATH_COLOR, "width": 1},
            name=PATH_TRACE,
            hoverinfo="skip",
        )
    shapes = []
    for k, rank in enumerate(tl.bands):
        rows = [r for r in tl.rows if r.rank == rank]
        top, bottom = rows[0].top, rows[-1].top + rows[-1].height
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": top - 0.3,
                "y1": bottom + 0.3,
                # alternate shading tells the bands apart; GPU rows get the page's green tint
                "fillcolor": "rgba(0,0,0,0.035)" if k % 2 == 0 else "rgba(0,0,0,0)",
                "line": {"width": 0},
                "layer": "below",
            }
        )
    shapes += [
        {
            "type": "rect",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": r.top,
            "y1": r.top + r.height,
            "fillcolor": "rgba(84,162,75,0.07)",
            "line": {"width": 0},
            "layer": "below",
        }
        for r in tl.rows
        if r.is_gpu
    ]
    fig.update_layout(
        barmode="overlay",
        height=int(min(max(260, ROW_PX * tl.total + 150), 1600)),
        margin={**MARGIN, "t": 80},
        title={"text": f"{tl.step}: {fmt_ms(tl.end_ms - tl.start_ms)}", "x": 0, "y": 0.995, "yanchor": "top"},
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        dragmode="zoom",
        modebar=MODEBAR,
        hoverlabel={"align": "left"},
        plot_bgcolor="white",
        shapes=shapes,
        xaxis={"title": "ms since the job's start", "range": [tl.start_ms, tl.end_ms]},
        yaxis={
            "tickvals": [r.center for r in tl.rows],
            "ticktext": [r.label for r in tl.rows],
            "range": [tl.total + 0.5, -0.5],  # reversed: rank 0 on top
            "showgrid": False,
            "zeroline": False,
        },
    )
    return fig
