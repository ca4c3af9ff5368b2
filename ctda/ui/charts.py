"""Plotly figures for the pages, built from the frames in :mod:`ctda.ui.frames`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ctda.analysis.classify import CLASSES
from ctda.ui.frames import Timeline

#: one colour per bound-by class, the same on every chart
CLASS_COLORS = dict(
    zip(
        CLASSES,
        (
            "#4C78A8",  # cpu
            "#9D755D",  # data_loading
            "#B279A2",  # communication
            "#54A24B",  # gpu_compute
            "#E45756",  # gpu_comm
            "#72B7B2",  # gpu_memcpy
            "#F58518",  # launch_overhead
            "#EECA3B",  # sync_wait
            "#FF9DA6",  # cross_thread
            "#BAB0AC",  # cpu_gap
            "#D6D6D6",  # gpu_gap
        ),
    )
)
PATH_COLOR = "#D62728"
OTHER_COLOR = "rgba(160,160,160,0.45)"
ROW_PX = 20


def _hover(df: pd.DataFrame) -> list[str]:
    rows: Iterable[Any] = df.itertuples()  # rows typed loosely by the stubs
    return [
        f"{r.name}<br>{r.lane}<br>{r.start_ms:.3f} ms + {r.dur_ms * 1e3:.1f} µs<br>class {r.cls}"
        for r in rows
    ]


def timeline(tl: Timeline) -> go.Figure:
    """One lane per CPU thread / GPU stream; critical events coloured by class, the rest
    grey, and the critical path drawn through them. Drag to zoom, double-click to reset."""
    fig = go.Figure()
    ev = tl.events
    # a zero-length bar is invisible: give instants a sliver of the window
    min_w = max((tl.end_ms - tl.start_ms) / 2000, 1e-6)
    other = ev[~ev.on_cp]
    if len(other):
        fig.add_bar(
            x=np.maximum(other.dur_ms.to_numpy(), min_w),
            base=other.start_ms.to_numpy(),
            y=other.y.to_numpy(),
            orientation="h",
            width=0.8,
            marker={"color": OTHER_COLOR, "line": {"width": 0}},
            name="other events",
            hovertext=_hover(other),
            hoverinfo="text",
        )
    crit = ev[ev.on_cp]
    for cls, part in crit.groupby("cls", sort=False):
        fig.add_bar(
            x=np.maximum(part.dur_ms.to_numpy(), min_w),
            base=part.start_ms.to_numpy(),
            y=part.y.to_numpy(),
            orientation="h",
            width=0.8,
            marker={"color": CLASS_COLORS.get(str(cls), "#333"), "line": {"width": 0}},
            name=f"critical: {cls}",
            hovertext=_hover(part),
            hoverinfo="text",
        )
    if len(tl.path):
        fig.add_scatter(
            x=tl.path.x.to_numpy(),
            y=tl.path.y.to_numpy(),
            mode="lines",
            line={"color": PATH_COLOR, "width": 2},
            name="critical path",
            hoverinfo="skip",
        )
    rows = sum(lane.rows for lane in tl.lanes) + 0.6 * len(tl.lanes)
    fig.update_layout(
        barmode="overlay",
        height=int(min(max(260, ROW_PX * rows + 120), 1400)),
        margin={"l": 10, "r": 10, "t": 70, "b": 40},
        title={"text": f"{tl.label}: {tl.end_ms - tl.start_ms:.3f} ms", "x": 0, "y": 0.99, "yanchor": "top"},
        # above the plot: below it, the legend would cover the axis title
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        dragmode="zoom",
        modebar={"orientation": "v"},  # along the right edge, clear of the legend
        xaxis={"title": "ms since trace start", "range": [tl.start_ms, tl.end_ms]},
        yaxis={
            "tickvals": [lane.top for lane in tl.lanes],
            "ticktext": [lane.label for lane in tl.lanes],
            "range": [rows, -0.6],  # reversed: the first lane on top
            "showgrid": False,
            "zeroline": False,
        },
    )
    return fig


def breakdown(df: pd.DataFrame, title: str = "Bound by") -> go.Figure:
    """Horizontal bars of critical-path ms per class (``class``, ``cp_ms``, ``share``)."""
    fig = go.Figure(
        go.Bar(
            x=df.cp_ms,
            y=df["class"],
            orientation="h",
            marker={"color": [CLASS_COLORS.get(c, "#333") for c in df["class"]]},
            text=[f"{s:.0%}" for s in df.share],
            textposition="auto",
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title, "x": 0},
        height=max(220, 28 * len(df) + 90),
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        xaxis={"title": "critical-path ms"},
        yaxis={"autorange": "reversed"},
    )
    return fig


def steps(df: pd.DataFrame, selected: int | None = None) -> go.Figure:
    """Stacked bars: each window's critical path split by class (``window``, ``label``,
    ``class``, ``ms``); the selected window is outlined."""
    fig = go.Figure()
    order = df.drop_duplicates("window").sort_values("window")
    for cls in [c for c in CLASSES if c in set(df["class"])]:
        part = df[df["class"] == cls]
        fig.add_bar(
            x=part.window,
            y=part.ms,
            name=cls,
            marker={"color": CLASS_COLORS[cls]},
            customdata=part.label,
            hovertemplate="%{customdata}<br>" + cls + ": %{y:.3f} ms<extra></extra>",
        )
    if selected is not None:
        total = df[df.window == selected].ms.sum()
        fig.add_shape(
            type="rect",
            x0=selected - 0.5,
            x1=selected + 0.5,
            y0=0,
            y1=total,
            line={"color": "#111", "width": 2},
        )
    ticks = order if len(order) <= 30 else order.iloc[:: max(len(order) // 30, 1)]
    fig.update_layout(
        barmode="stack",
        title={"text": "Critical path per step, by class", "x": 0},
        height=300,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        xaxis={"tickvals": ticks.window, "ticktext": ticks.label, "title": None},
        yaxis={"title": "ms"},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def side_by_side(df: pd.DataFrame, key: str, a: str, b: str, title: str) -> go.Figure:
    """Grouped bars of ``a_ms`` and ``b_ms`` per ``key`` (compare and what-if pages)."""
    fig = go.Figure()
    fig.add_bar(y=df[key], x=df.a_ms, name=a, orientation="h", marker={"color": "#4C78A8"})
    fig.add_bar(y=df[key], x=df.b_ms, name=b, orientation="h", marker={"color": "#F58518"})
    fig.update_layout(
        barmode="group",
        title={"text": title, "x": 0},
        height=max(240, 40 * len(df) + 100),
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        xaxis={"title": "ms"},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.15},
    )
    return fig


def deltas(df: pd.DataFrame, key: str, title: str, top: int = 20) -> go.Figure:
    """Horizontal bars of the ``top`` non-zero ``delta_ms`` per ``key``: green got faster, red slower."""
    part = df[df.delta_ms != 0].head(top)
    fig = go.Figure(
        go.Bar(
            y=part[key].astype(str).str.slice(0, 60),
            x=part.delta_ms,
            orientation="h",
            marker={"color": ["#54A24B" if d < 0 else "#E45756" for d in part.delta_ms]},
            hovertemplate="%{y}: %{x:+.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title, "x": 0},
        height=max(240, 24 * len(part) + 100),
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        xaxis={"title": "Δ ms (b − a)"},
        yaxis={"autorange": "reversed"},
    )
    return fig


def step_compare(df: pd.DataFrame, a: str, b: str, title: str) -> go.Figure:
    """Grouped vertical bars per window: ``label``, ``a_ms``, ``b_ms``."""
    fig = go.Figure()
    fig.add_bar(x=df.label, y=df.a_ms, name=a, marker={"color": "#4C78A8"})
    fig.add_bar(x=df.label, y=df.b_ms, name=b, marker={"color": "#F58518"})
    fig.update_layout(
        barmode="group",
        title={"text": title, "x": 0},
        height=300,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        yaxis={"title": "ms"},
        xaxis={"showticklabels": len(df) <= 30},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig
