"""Plotly figures for the pages, built from the frames in :mod:`ctda.ui.frames`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go

from ctda.analysis.classify import CLASSES
from ctda.ui import margins
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
            "#8A8A8A",  # cpu_gap: mid grey
            "#D4D4D4",  # gpu_gap: light grey, and hatched where it is drawn as bars
        ),
    )
)
#: the path's own style: critical events outlined in it, and thin connectors where the
#: path jumps from one lane to another (no class uses a colour this dark)
#: a second cue besides the grey level, so the two gap classes never read as one
CLASS_PATTERNS = {"gpu_gap": "/"}
PATH_COLOR = "#1B1B1B"
OTHER_COLOR = "rgba(164,184,210,0.45)"  # events off the path: pale blue-grey, unlike both gaps
ROW_PX = 18


def _faded(hex_color: str, alpha: float = 0.28) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


#: events off the path keep a hint of their class (GPU work reads as GPU work)
FADED = {cls: _faded(c) for cls, c in CLASS_COLORS.items()}
#: rows of a GPU stream are drawn this many times taller than a CPU call level: a stream
#: has one or two levels, a CPU thread a dozen, and GPU work is what people look for
GPU_ROW = 2.5
LANE_GAP = 0.7


def fmt_ms(v: float) -> str:
    """A time in ms with enough digits for sub-microsecond events (one unit everywhere)."""
    return f"{v:,.3f} ms" if abs(v) >= 0.01 or v == 0 else f"{v:.5f} ms"


def _hover(df: pd.DataFrame, critical: bool) -> list[str]:
    rows: Iterable[Any] = df.itertuples()  # rows typed loosely by the stubs
    tail = "<br><b>on the critical path</b>" if critical else ""
    return [
        f"{r.name}<br>{r.lane}<br>starts {fmt_ms(r.start_ms)} · lasts {fmt_ms(r.dur_ms)}"
        f"<br>class {r.cls}{tail}"
        for r in rows
    ]


@dataclass
class Rows:
    """Where each lane of a :class:`Timeline` is drawn: its top, row height and total height."""

    top: dict[int, float]
    row: dict[int, float]
    height: dict[int, float]
    old_top: npt.NDArray[np.float64]  # the frames' lane tops, ascending
    lanes: list[int]  # lane ids in the order of old_top
    total: float

    def lane_of(self, y: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Index into ``lanes`` of the frames' row coordinate ``y``."""
        k = np.searchsorted(self.old_top, y, side="right") - 1
        return np.maximum(k, 0).astype(np.int64)

    def center(self, y: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Centre and bar thickness of each frames' row ``y``, in this layout."""
        k = self.lane_of(y)
        top = np.array([self.top[i] for i in self.lanes])[k]
        row = np.array([self.row[i] for i in self.lanes])[k]
        depth = y - self.old_top[k]
        return top + (depth + 0.5) * row, 0.8 * row


def rows_of(tl: Timeline) -> Rows:
    """Lane heights by content: one unit per call level on CPU threads, ``GPU_ROW`` per
    level on GPU streams."""
    lanes = sorted(tl.lanes, key=lambda lane: lane.top)
    top: dict[int, float] = {}
    row: dict[int, float] = {}
    height: dict[int, float] = {}
    y = 0.0
    for lane in lanes:
        r = GPU_ROW if lane.is_gpu else 1.0
        top[lane.lane], row[lane.lane], height[lane.lane] = y, r, lane.rows * r
        y += lane.rows * r + LANE_GAP
    return Rows(
        top,
        row,
        height,
        np.array([lane.top for lane in lanes], dtype=np.float64),
        [lane.lane for lane in lanes],
        max(y - LANE_GAP, 1.0),
    )


def _connectors(tl: Timeline, rows: Rows) -> tuple[list[float | None], list[float | None]]:
    """Thin segments where the path leaves one lane for another (None-separated)."""
    if len(tl.path) < 2:
        return [], []
    x, y = tl.path.x.to_numpy(), tl.path.y.to_numpy()
    lane = rows.lane_of(y)
    cy, _ = rows.center(y)
    jump = np.flatnonzero(lane[1:] != lane[:-1])
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i in jump.tolist():
        xs += [float(x[i]), float(x[i + 1]), None]
        ys += [float(cy[i]), float(cy[i + 1]), None]
    return xs, ys


def timeline(tl: Timeline) -> go.Figure:
    """One lane per CPU thread / GPU stream. Critical events are coloured by class and
    outlined; the rest are pale; thin dark connectors show where the path changes lane.
    Drag to zoom, double-click to reset."""
    traces: list[dict[str, Any]] = []
    ev = tl.events
    rows = rows_of(tl)
    # a zero-length bar is invisible: give instants a sliver of the window
    min_w = max((tl.end_ms - tl.start_ms) / 2000, 1e-6)

    # outlines only on bars wide enough to show a fill inside them; thinner ones would
    # turn into solid outline colour
    outline_min = (tl.end_ms - tl.start_ms) / 300

    def bars(
        part: pd.DataFrame, color: str | list[str], name: str, critical: bool, pattern: str = ""
    ) -> None:
        y, width = rows.center(part.y.to_numpy(dtype=np.float64))
        dur = part.dur_ms.to_numpy()
        marker: dict[str, Any] = {
            "color": color,
            "line": {"width": np.where(dur >= outline_min, 1.2, 0.0) if critical else 0, "color": PATH_COLOR},
        }
        if pattern:
            marker["pattern"] = {"shape": pattern, "fgcolor": "#777", "size": 5}
        traces.append(
            {
                "type": "bar",
                "x": np.maximum(dur, min_w),
                "base": part.start_ms.to_numpy(dtype=np.float64),
                "y": y,
                "width": width,
                "orientation": "h",
                "marker": marker,
                "name": name,
                "hovertext": _hover(part, critical),
                "hoverinfo": "text",
            }
        )

    other = ev[~ev.on_cp]
    if len(other):
        faded = [FADED.get(str(c), OTHER_COLOR) for c in other.cls]
        bars(other, faded, "off the path (class colour, faded)", critical=False)
    crit = ev[ev.on_cp]
    for cls, part in crit.groupby("cls", sort=False):
        c = str(cls)
        bars(part, CLASS_COLORS.get(c, "#333"), f"critical: {c}", True, CLASS_PATTERNS.get(c, ""))
    xs, ys = _connectors(tl, rows)
    if xs:
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "lines",
                "line": {"color": PATH_COLOR, "width": 1},
                "name": "path changes lane",
                "hoverinfo": "skip",
            }
        )
    shapes = [
        {
            "type": "rect",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": rows.top[lane.lane] - LANE_GAP / 2,
            "y1": rows.top[lane.lane] + rows.height[lane.lane] + LANE_GAP / 2 - 0.05,
            "fillcolor": "rgba(84,162,75,0.07)" if lane.is_gpu else "rgba(0,0,0,0)",
            "line": {"width": 0},
            "layer": "below",
        }
        for lane in tl.lanes
    ]
    # built from plain values of known types: plotly's checks of every array (a few hundred
    # ms for 2,000 bars, on each step and what-if change) are skipped
    fig = go.Figure(data=traces, _validate=False)
    top = margins.legend_on_top(fig)
    fig.update_layout(
        barmode="overlay",
        height=int(min(max(280, ROW_PX * rows.total + 70 + top), 1600)),
        title={
            "text": f"{tl.label}: {fmt_ms(tl.end_ms - tl.start_ms)}",
            "x": 0,
            "y": 0.995,
            "yanchor": "top",
        },
        dragmode="zoom",
        modebar={"orientation": "v"},
        hoverlabel={"align": "left"},
        plot_bgcolor="white",
        shapes=shapes,
        xaxis={"title": "ms since trace start", "range": [tl.start_ms, tl.end_ms]},
        yaxis={
            "tickvals": [rows.top[lane.lane] + rows.height[lane.lane] / 2 for lane in tl.lanes],
            "ticktext": [lane.label for lane in tl.lanes],
            "range": [rows.total + LANE_GAP / 2, -LANE_GAP / 2],  # reversed: the first lane on top
            "showgrid": False,
            "zeroline": False,
        },
    )
    # the right margin holds the (vertical) mode bar, so it never covers data
    labels = [lane.label for lane in tl.lanes]
    return margins.fix(fig, left=margins.y_labels_px(labels), right=46, top=top, bottom=margins.NUMERIC_X_PX)


def breakdown(df: pd.DataFrame, title: str = "Bound by") -> go.Figure:
    """Horizontal bars of critical-path ms per class (``class``, ``cp_ms``, ``share``)."""
    fig = go.Figure(
        go.Bar(
            x=df.cp_ms,
            y=df["class"],
            orientation="h",
            marker={
                "color": [CLASS_COLORS.get(c, "#333") for c in df["class"]],
                "pattern": {"shape": [CLASS_PATTERNS.get(c, "") for c in df["class"]], "fgcolor": "#777"},
            },
            text=[f"{s:.0%}" for s in df.share],
            textposition="auto",
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title, "x": 0},
        height=max(220, 28 * len(df) + 90),
        xaxis={"title": "critical-path ms"},
        yaxis={"autorange": "reversed"},
    )
    # the title line stays even without a title: the mode bar sits there
    top = margins.TITLE_PX + 10
    return margins.fix(
        fig, left=margins.y_labels_px(df["class"]), right=10, top=top, bottom=margins.NUMERIC_X_PX
    )


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
            marker={
                "color": CLASS_COLORS[cls],
                "pattern": {"shape": CLASS_PATTERNS.get(cls, ""), "fgcolor": "#777"},
            },
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
    ticks = order if len(order) <= MAX_TICKS else order.iloc[:: -(-len(order) // MAX_TICKS)]
    fig.update_layout(
        barmode="stack",
        title={"text": "Critical path per step, by class", "x": 0},
        xaxis={"tickvals": ticks.window, "ticktext": ticks.label, "title": None, "tickangle": TICK_ANGLE},
        yaxis={"title": "ms"},
    )
    top = margins.legend_on_top(fig)
    bottom = _slanted_px(ticks.label)
    fig.update_layout(height=int(top + bottom + 200))
    return margins.fix(fig, left=margins.NUMERIC_Y_PX, right=10, top=top, bottom=bottom)


#: step labels on a step axis: at most this many, slanted so long names fit
MAX_TICKS = 20
TICK_ANGLE = -35


def _slanted_px(labels: Iterable[object]) -> float:
    """Bottom margin of x tick labels drawn at ``TICK_ANGLE``."""
    a = math.radians(abs(TICK_ANGLE))
    return margins.text_px(labels) * math.sin(a) + 14 * math.cos(a) + 16


def side_by_side(df: pd.DataFrame, key: str, a: str, b: str, title: str) -> go.Figure:
    """Grouped bars of ``a_ms`` and ``b_ms`` per ``key`` (compare and what-if pages)."""
    fig = go.Figure()
    fig.add_bar(y=df[key], x=df.a_ms, name=a, orientation="h", marker={"color": "#4C78A8"})
    fig.add_bar(y=df[key], x=df.b_ms, name=b, orientation="h", marker={"color": "#F58518"})
    fig.update_layout(
        barmode="group",
        title={"text": title, "x": 0},
        xaxis={"title": "ms"},
        yaxis={"autorange": "reversed"},
    )
    top = margins.legend_on_top(fig)
    fig.update_layout(height=max(240, 40 * len(df) + 60) + top)
    return margins.fix(fig, left=margins.y_labels_px(df[key]), right=10, top=top, bottom=margins.NUMERIC_X_PX)


def deltas(df: pd.DataFrame, key: str, title: str, top: int = 20) -> go.Figure:
    """Horizontal bars of the ``top`` non-zero ``delta_ms`` per ``key``: green got faster, red slower."""
    part = df[df.delta_ms != 0].head(top)
    labels = part[key].astype(str).str.slice(0, 60)
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=part.delta_ms,
            orientation="h",
            marker={"color": ["#54A24B" if d < 0 else "#E45756" for d in part.delta_ms]},
            hovertemplate="%{y}: %{x:+.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": title, "x": 0},
        height=max(240, 24 * len(part) + 100),
        xaxis={"title": "Δ ms (b − a)"},
        yaxis={"autorange": "reversed"},
    )
    return margins.fix(
        fig,
        left=margins.y_labels_px(labels),
        right=10,
        top=margins.TITLE_PX + 10,
        bottom=margins.NUMERIC_X_PX,
    )


def step_compare(df: pd.DataFrame, a: str, b: str, title: str) -> go.Figure:
    """Grouped vertical bars per window: ``label``, ``a_ms``, ``b_ms``."""
    fig = go.Figure()
    fig.add_bar(x=df.label, y=df.a_ms, name=a, marker={"color": "#4C78A8"})
    fig.add_bar(x=df.label, y=df.b_ms, name=b, marker={"color": "#F58518"})
    shown = len(df) <= 30
    fig.update_layout(
        barmode="group",
        title={"text": title, "x": 0},
        yaxis={"title": "ms"},
        xaxis={"showticklabels": shown, "tickangle": TICK_ANGLE},
    )
    top = margins.legend_on_top(fig)
    bottom = _slanted_px(df.label) if shown else 16
    fig.update_layout(height=int(top + bottom + 200))
    return margins.fix(fig, left=margins.NUMERIC_Y_PX, right=10, top=top, bottom=bottom)
