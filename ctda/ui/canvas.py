"""Charts with hundreds to thousands of marks, as Vega-Lite drawn on a canvas.

Plotly draws each bar as an SVG element; on the Critical path page (a bar per class and
step, a bar per event of the timeline) Plotly's code building and styling those elements
kept the browser busy more than a second per step change on a 2-core machine. A canvas
costs a fraction of that (see the README's UI benchmark). Marks on a canvas are not in the
page's DOM: a chart's title is therefore a line of the page (:attr:`Chart.title`), and its
table is what tests read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.api import CLASSES
from ctda.ui.charts import CLASS_COLORS, PATH_STROKE, ROW_PX, TICK_ANGLE

#: times in tooltips: ms, to the nanosecond, without trailing zeros (one unit everywhere)
MS_FORMAT = ",.6~f"
#: Streamlit picks a canvas by itself only for large charts; small ones are told to
CANVAS = {"embedOptions": {"renderer": "canvas"}}
LEGEND = {"orient": "top", "symbolStrokeWidth": 0, "labelLimit": 300}
#: the width fits the page; the height is the plot's, legend and axes come on top of it
#: (Streamlit's default fits both: a tall legend or slanted labels squashed the plot)
FIT_X = {"type": "fit-x", "contains": "padding"}


@dataclass(frozen=True)
class Chart:
    """A Vega-Lite spec, the one table its layers draw from, and its title."""

    title: str
    spec: dict[str, Any]
    data: pd.DataFrame


def layered(layers: list[dict[str, Any]], height: Any, **more: Any) -> dict[str, Any]:
    """A spec of ``layers`` over one table, ``height`` px of plot (or ``{"step": px}`` per
    band), legend on top, drawn on a canvas."""
    return {
        "height": height,
        "layer": layers,
        "config": {"legend": LEGEND},
        "autosize": FIT_X,
        "usermeta": CANVAS,
        **more,
    }


#: a timeline grows with its rows up to this many px (the page scrolls): rows keep room for
#: their labels, since only the time axis zooms
MAX_HEIGHT_PX = 6000


def rows_height(rows: float) -> int:
    """Plot height of a timeline of ``rows`` row units (ROW_PX each, within bounds)."""
    return int(min(max(200, ROW_PX * rows), MAX_HEIGHT_PX))


def only(kind: str) -> list[dict[str, str]]:
    """A layer's transform: the rows of its ``kind`` (every layer reads the one table)."""
    return [{"filter": f"datum.kind === '{kind}'"}]


def time_x(title: str, start_ms: float, end_ms: float) -> dict[str, Any]:
    """A timeline's x: ``x0`` (to ``x1``) in ms over exactly the drawn range."""
    return {
        "field": "x0",
        "type": "quantitative",
        "title": title,
        "scale": {"domain": [start_ms, end_ms], "nice": False, "zero": False},
    }


def window_x(title: str) -> dict[str, Any]:
    """A timeline's x: ``x0`` (to ``x1``) in ms over the range its data spans, which
    :func:`frame` sets to the window. The spec then holds no time, so the same chart of
    another timing (a what-if's next factor) is the same spec with new data: the page
    replaces the data in place instead of building the chart anew."""
    return {"field": "x0", "type": "quantitative", "title": title, "scale": {"nice": False, "zero": False}}


def frame(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    """An invisible layer of the ``frame`` row: its x0..x1 is the drawn range."""
    return {
        "transform": only("frame"),
        "mark": {"type": "rule", "opacity": 0, "tooltip": None},
        "encoding": box(x, y),
    }


def rows_y(top: float, bottom: float, ticks: list[tuple[float, str]]) -> dict[str, Any]:
    """A timeline's y: ``y0`` (to ``y1``) downwards from ``top``, each row labelled at its
    ``ticks`` position (a quantitative axis labelled by an expression)."""
    ticks = [(round(v, 4), label) for v, label in ticks]
    expr = "".join(f"datum.value === {v} ? {json.dumps(label)} : " for v, label in ticks) + "''"
    axis = {
        "values": [v for v, _ in ticks],
        "labelExpr": expr,
        "grid": False,
        "ticks": False,
        "domain": False,
        "labelLimit": 0,
        "labelOverlap": False,  # every row keeps its label (rows are sized to fit one)
        "title": None,
    }
    return {
        "field": "y0",
        "type": "quantitative",
        "scale": {"domain": [bottom, top], "nice": False, "zero": False},  # reversed: first row on top
        "axis": axis,
    }


#: the background fills' colours are their own, not entries of the classes' legend
OWN_COLORS = {"scale": {"color": "independent"}, "legend": {"color": "independent"}}

#: a timeline's time axis moves: Ctrl + wheel zooms, a drag pans, a double-click resets
#: (not Shift: browsers turn Shift + wheel into a sideways scroll, which Vega's zoom ignores;
#: Ctrl also takes a trackpad's pinch, and the chart keeps the event from zooming the page)
ZOOM = {
    "name": "zoom",
    "select": {"type": "interval", "encodings": ["x"], "zoom": "wheel![event.ctrlKey]"},
    "bind": "scales",
}


#: how to move a timeline, for the captions under them
ZOOM_HELP = "Ctrl + scroll zooms time, drag pans, double-click resets."
#: a GPU stream's rows are tinted green on every timeline
GPU_TINT = "rgba(84,162,75,0.07)"
#: a mark coloured by its row's own ``fill`` value, not by a scale
OWN_FILL = {"field": "fill", "type": "nominal", "scale": None, "legend": None}


def boxes(
    start: npt.NDArray[np.float64],
    dur: npt.NDArray[np.float64],
    center: npt.NDArray[np.float64],
    height: npt.NDArray[np.float64],
    span: float,
    outlined: npt.NDArray[np.bool_],
) -> pd.DataFrame:
    """Timeline bars (``x0``, ``x1``, ``y0``, ``y1``, ``outline``, ``start_ms``, ``dur_ms``) of
    events starting at ``start`` ms for ``dur`` ms, in rows centred at ``center``, over a
    window of ``span`` ms. An instant gets a sliver of the window (a zero-length bar is
    invisible); an ``outlined`` bar is outlined only when wide enough to show a fill inside."""
    return pd.DataFrame(
        {
            "x0": start,
            "x1": start + np.maximum(dur, max(span / 2000, 1e-6)),
            "y0": center - height / 2,
            "y1": center + height / 2,
            "outline": np.where(outlined & (dur >= span / 300), 1.2, 0.0),
            "start_ms": start,
            "dur_ms": dur,
        }
    )


def box(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    """The encoding of a rectangle from (``x0``, ``y0``) to (``x1``, ``y1``)."""
    return {"x": x, "x2": {"field": "x1"}, "y": y, "y2": {"field": "y1"}}


def fills(kind: str, x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    """A layer of background rectangles, each in its row's ``fill`` colour (no tooltip)."""
    return {
        "transform": only(kind),
        "mark": {"type": "rect", "clip": True, "tooltip": None},
        "encoding": {**box(x, y), "color": OWN_FILL},
    }


def outlined(kind: str, x: dict[str, Any], y: dict[str, Any], **encoding: Any) -> dict[str, Any]:
    """A layer of bars, outlined in the path colour as wide as their ``outline`` says."""
    return {
        "transform": only(kind),
        "mark": {"type": "rect", "clip": True, "stroke": PATH_STROKE},
        "encoding": {
            **box(x, y),
            "strokeWidth": {"field": "outline", "type": "quantitative", "scale": None, "legend": None},
            **encoding,
        },
    }


def links(x: dict[str, Any], y: dict[str, Any]) -> dict[str, Any]:
    """Thin segments (x0, y0) -> (x1, y1) in the path colour: where it changes lane or rank."""
    return {
        "transform": only("link"),
        "mark": {"type": "rule", "color": PATH_STROKE, "strokeWidth": 1, "clip": True, "tooltip": None},
        "encoding": box(x, y),
    }


def class_color(classes: list[str]) -> dict[str, Any]:
    """A colour encoding of the ``class`` field: each class in its colour of every chart."""
    return {
        "field": "class",
        "type": "nominal",
        "title": None,
        "scale": {"domain": classes, "range": [CLASS_COLORS[c] for c in classes]},
        "legend": {"columns": 6},
    }


def unique(labels: pd.Series, keys: pd.Series) -> pd.Series:
    """Axis labels: a band per distinct label, so two rows of one label (e.g. windows both
    called "trace") get their key appended and stay two bars."""
    label = labels.astype(str)
    dup = label.duplicated(keep=False)
    return label.where(~dup, label + " (" + keys.astype(str) + ")")


def step_x(labels: pd.Series) -> dict[str, Any]:
    """An x axis of steps (field ``step``) in the order of ``labels``, slanted labels
    thinned where they would overlap."""
    return {
        "field": "step",
        "type": "ordinal",
        "sort": labels.tolist(),
        "title": None,
        "axis": {"labelAngle": TICK_ANGLE, "labelOverlap": True, "labelLimit": 160},
    }


def steps(df: pd.DataFrame, selected: int | None = None) -> Chart:
    """Stacked bars: each window's critical path split by class (``window``, ``label``,
    ``class``, ``ms``); the ``selected`` window is outlined."""
    order = df.drop_duplicates("window").sort_values("window")
    label = unique(order.label, order.window)
    step = dict(zip(order.window.tolist(), label.tolist()))
    classes = [c for c in CLASSES if c in set(df["class"])]
    data = pd.DataFrame(
        {
            "step": df.window.map(step).astype(str),
            "class": df["class"].astype(str),
            "ms": df.ms.astype(float),
            "stack": df["class"].map({c: i for i, c in enumerate(CLASSES)}).astype(int),
            "selected": df.window == selected,
        }
    )
    x = step_x(label)
    # the picked step's segments outlined (an outline layer on top would take the hover)
    bars = {
        "mark": {"type": "bar", "stroke": "#111"},
        "encoding": {
            "x": x,
            "y": {"field": "ms", "type": "quantitative", "title": "ms", "stack": "zero"},
            "color": class_color(classes),
            "order": {"field": "stack", "type": "quantitative"},
            "strokeWidth": {"condition": {"test": "datum.selected", "value": 2}, "value": 0},
            "tooltip": [
                {"field": "step"},
                {"field": "class"},
                {"field": "ms", "title": "critical path (ms)", "format": MS_FORMAT},
            ],
        },
    }
    spec = layered([bars], 200)
    return Chart("Critical path per step, by class", spec, data)


#: the parts of device time, coloured like the classes they correspond to
PART_COLORS = {
    "compute": CLASS_COLORS["gpu_compute"],
    "communication": CLASS_COLORS["gpu_comm"],
    "memory": CLASS_COLORS["gpu_memcpy"],
    "idle": CLASS_COLORS["gpu_gap"],
}


def shares(t: pd.DataFrame, title: str) -> Chart:
    """One stacked horizontal bar per row of ``t`` (``label``, ``device``, and ``P_share``,
    ``P_ns`` for each part P of :data:`PART_COLORS`): the parts as shares of the row."""
    several = t.device.nunique() > 1
    label = unique(t.label.astype(str) + (" · device " + t.device.astype(str) if several else ""), t.window)
    parts = list(PART_COLORS)
    data = pd.DataFrame(
        {
            "row": np.repeat(label.to_numpy(), len(parts)),
            "part": np.tile(parts, len(t)),
            "share": np.column_stack([t[f"{p}_share"].to_numpy(dtype=float) for p in parts]).ravel(),
            "ms": np.column_stack([t[f"{p}_ns"].to_numpy(dtype=float) / 1e6 for p in parts]).ravel(),
            "stack": np.tile(np.arange(len(parts)), len(t)),
        }
    )
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": {
                "field": "row",
                "type": "ordinal",
                "sort": label.tolist(),
                "title": None,
                "axis": {"labelLimit": 300},
            },
            "x": {
                "field": "share",
                "type": "quantitative",
                "title": None,
                "stack": "zero",
                "axis": {"format": ".0%"},
                "scale": {"domain": [0, 1]},
            },
            "color": {
                "field": "part",
                "type": "nominal",
                "title": None,
                "scale": {"domain": parts, "range": list(PART_COLORS.values())},
            },
            "order": {"field": "stack", "type": "quantitative"},
            "tooltip": [
                {"field": "row", "title": "step"},
                {"field": "part"},
                {"field": "share", "format": ".1%"},
                {"field": "ms", "title": "time (ms)", "format": MS_FORMAT},
            ],
        },
    }
    spec = layered([bars], {"step": 22})
    return Chart(title, spec, data)


def _paired(labels: npt.NDArray[Any], df: pd.DataFrame, a: str, b: str, field: str) -> pd.DataFrame:
    """Two rows per label, ``a`` then ``b`` (``side``), with ``df``'s ``a_ms`` and ``b_ms``."""
    return pd.DataFrame(
        {
            field: np.repeat(labels, 2),
            "side": np.tile([a, b], len(df)),
            "ms": np.column_stack([df.a_ms.to_numpy(dtype=float), df.b_ms.to_numpy(dtype=float)]).ravel(),
        }
    )


def _side_color(a: str, b: str) -> dict[str, Any]:
    """``a`` in the first colour of every before/after chart, ``b`` in the second; one legend
    entry per line (run and scenario names are long: side by side, the second was cut off)."""
    return {
        "field": "side",
        "type": "nominal",
        "title": None,
        "scale": {"domain": [a, b], "range": [CLASS_COLORS["cpu"], CLASS_COLORS["launch_overhead"]]},
        "legend": {"columns": 1, "labelLimit": 420},
    }


def step_compare(df: pd.DataFrame, a: str, b: str, title: str) -> Chart:
    """Two bars per window, ``a`` then ``b`` (``label``, ``a_ms``, ``b_ms``; e.g. observed
    and predicted step time)."""
    label = unique(df.label, pd.Series(range(len(df)), index=df.index))
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "x": step_x(label),
            "xOffset": {"field": "side", "sort": [a, b]},
            "y": {"field": "ms", "type": "quantitative", "title": "ms"},
            "color": _side_color(a, b),
            "tooltip": [{"field": "step"}, {"field": "side"}, {"field": "ms", "format": MS_FORMAT}],
        },
    }
    return Chart(title, layered([bars], 200), _paired(label.to_numpy(), df, a, b, "step"))


def pairs(df: pd.DataFrame, key: str, a: str, b: str, title: str) -> Chart:
    """Two horizontal bars per ``key`` value, ``a_ms`` then ``b_ms`` (e.g. the bound-by
    classes of a run and of its what-if), in ``df``'s order."""
    label = df[key].astype(str)
    rows = {
        "field": "row",
        "type": "nominal",
        "sort": label.tolist(),
        "title": None,
        "axis": {"labelLimit": 300},
    }
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": rows,
            "yOffset": {"field": "side", "sort": [a, b]},
            "x": {"field": "ms", "type": "quantitative", "title": "critical-path ms"},
            "color": _side_color(a, b),
            "tooltip": [
                {"field": "row", "title": key},
                {"field": "side"},
                {"field": "ms", "format": MS_FORMAT},
            ],
        },
    }
    # the step is each bar's: a class's band holds its two
    return Chart(title, layered([bars], {"step": 14}), _paired(label.to_numpy(), df, a, b, "row"))
