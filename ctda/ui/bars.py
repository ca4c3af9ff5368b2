"""The pages' small charts as Vega-Lite on a canvas: bound-by bars, hotspot deltas, series
over time (launch queues, allocated memory) and the Job page's lateness heatmap.

They were Plotly figures. A page's first Plotly chart makes the browser load and compile
Plotly's script (3.5 MB) before it draws anything: on a 2-core machine, a bare Streamlit
page took 0.35 s to show a button's result without a chart, 2.4 s with one small Plotly bar
and 0.4-1.1 s with a Vega-Lite one, whose library the timelines load anyway. Every page
but Runs had a Plotly chart, so every first visit paid those 2 s. Drawn here, the charts
also follow the page's theme in the browser (``charts.PATH_STROKE``), with no server-side
theming to go stale on a theme switch. Like every canvas chart, a chart's title is a line
of the page and its table is what tests read (:mod:`ctda.ui.canvas`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ctda.ui.canvas import MS_FORMAT, Chart, class_color, layered, only
from ctda.ui.charts import PATH_STROKE, TICK_ANGLE, short_labels

#: got faster / got slower, in every delta chart
FASTER, SLOWER = "#54A24B", "#E45756"
#: a series chart's plot height, px
SERIES_PX = 220


def _rows(labels: list[str]) -> dict[str, Any]:
    """A y axis of categories (field ``row``), top to bottom in the order given."""
    return {"field": "row", "type": "nominal", "sort": labels, "title": None, "axis": {"labelLimit": 300}}


def bound_by(df: pd.DataFrame, title: str = "Bound by") -> Chart:
    """Horizontal bars of critical-path ms per class (``class``, ``cp_ms``, ``share``), in
    ``df``'s order, each labelled with its share."""
    classes = df["class"].astype(str).tolist()
    data = pd.DataFrame(
        {
            "row": classes,
            "class": classes,
            "ms": df.cp_ms.to_numpy(dtype=float),
            "share": df.share.to_numpy(dtype=float),
            "label": [f"{s:.0%}" for s in df.share],
        }
    )
    top = float(data.ms.max()) * 1.15 if len(data) and data.ms.max() > 0 else 1.0
    tooltip = [
        {"field": "class"},
        {"field": "ms", "title": "critical path (ms)", "format": MS_FORMAT},
        {"field": "share", "format": ".1%"},
    ]
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": _rows(classes),
            # room on the right for the share written after the longest bar
            "x": {
                "field": "ms",
                "type": "quantitative",
                "title": "critical-path ms",
                "scale": {"domain": [0, top]},
            },
            "color": {**class_color(list(dict.fromkeys(classes))), "legend": None},
            "tooltip": tooltip,
        },
    }
    text = {
        "mark": {"type": "text", "align": "left", "dx": 3, "color": PATH_STROKE},
        "encoding": {
            "y": _rows(classes),
            "x": {"field": "ms", "type": "quantitative"},
            "text": {"field": "label"},
        },
    }
    return Chart(title, layered([bars, text], {"step": 24}), data)


def deltas(df: pd.DataFrame, key: str, title: str, top: int = 20) -> Chart:
    """Horizontal bars of the ``top`` non-zero ``delta_ms`` per ``key`` (b - a): green got
    faster, red slower; long names cut (the full one in the tooltip)."""
    part = df[df.delta_ms != 0].head(top)
    rows = short_labels(part[key]).tolist()
    delta = part.delta_ms.to_numpy(dtype=float)
    data = pd.DataFrame(
        {"row": rows, "name": part[key].astype(str).to_numpy(), "delta_ms": delta, "faster": delta < 0}
    )
    bars = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": _rows(rows),
            "x": {"field": "delta_ms", "type": "quantitative", "title": "Δ ms (b − a)"},
            "color": {"condition": {"test": "datum.faster", "value": FASTER}, "value": SLOWER},
            "tooltip": [
                {"field": "name", "title": key},
                {"field": "delta_ms", "title": "Δ ms", "format": "+,.3f"},
            ],
        },
    }
    return Chart(title, layered([bars], {"step": 22}), data)


def binned_peaks(
    ts: np.ndarray, values: np.ndarray, t0: int, t1: int, bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """The largest of ``values`` in each of ``bins`` equal time bins over [t0, t1): each
    non-empty bin's start (ms from t0) and peak. A million samples would not draw; the
    peaks are what matter."""
    edges = np.linspace(t0, t1, bins + 1)
    at = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, bins - 1)
    peak = np.full(bins, -1, dtype=np.int64)
    np.maximum.at(peak, at, values)
    keep = peak >= 0
    return (edges[:-1][keep] - t0) / 1e6, peak[keep]


def peaks_by(groups: list[tuple[str, np.ndarray, np.ndarray]], bins: int, scale: float = 1.0) -> pd.DataFrame:
    """A :func:`series` table from (name, times, values) groups: each group's
    :func:`binned_peaks` over the time all of them span, times ``scale``."""
    parts = [pd.DataFrame({"series": [], "ms": [], "value": []})]
    if groups:
        t0 = min(int(ts.min()) for _, ts, _ in groups)
        t1 = max(int(ts.max()) for _, ts, _ in groups) + 1
        for name, ts, values in groups:  # per stream or device, not per sample
            ms, peak = binned_peaks(ts, values, t0, t1, bins)
            parts.append(pd.DataFrame({"series": name, "ms": ms, "value": peak * scale}))
    return pd.concat(parts, ignore_index=True)


def series(df: pd.DataFrame, y_title: str, steps: bool = False) -> Chart:
    """One line per ``series`` of ``ms`` (x) against ``value`` (y); ``steps``: drawn as
    steps (a value holds until the next)."""
    line: dict[str, Any] = {"type": "line", "interpolate": "step-after" if steps else "linear"}
    lines = {
        "mark": line,
        "encoding": {
            "x": {"field": "ms", "type": "quantitative", "title": "ms"},
            "y": {"field": "value", "type": "quantitative", "title": y_title},
            "color": {"field": "series", "type": "nominal", "title": None},
            "tooltip": [{"field": "series"}, {"field": "ms", "format": MS_FORMAT}, {"field": "value"}],
        },
    }
    return Chart("", layered([lines], SERIES_PX), df)


def heatmap(
    steps: list[str], ranks: list[str], ms: np.ndarray, straggler: list[str], scale: list[str], mark: str
) -> Chart:
    """Ranks (rows) by steps (columns) coloured by ``ms`` (ranks x steps, NaN: none) on the
    diverging ``scale`` centred on 0; each step's ``straggler`` (a rank label, "" none)
    outlined in ``mark``."""
    span = float(np.nanmax(np.abs(ms))) if ms.size and not np.all(np.isnan(ms)) else 1.0
    span = span or 1.0
    cells = pd.DataFrame(
        {
            "kind": "cell",
            "step": np.tile(steps, len(ranks)),
            "rank": np.repeat(ranks, len(steps)),
            "late_ms": ms.ravel().astype(float),
        }
    )
    marked = [(s, r) for s, r in zip(steps, straggler) if r]
    outline = pd.DataFrame(
        {
            "kind": "straggler",
            "step": [s for s, _ in marked],
            "rank": [r for _, r in marked],
            "late_ms": np.nan,
        }
    )
    x = {"field": "step", "type": "ordinal", "sort": steps, "title": None, "axis": {"labelAngle": TICK_ANGLE}}
    y = {"field": "rank", "type": "ordinal", "sort": ranks, "title": None}
    stops = np.linspace(-span, span, len(scale)).tolist()
    fill = {
        "transform": only("cell"),
        "mark": {"type": "rect", "stroke": {"expr": "background"}, "strokeWidth": 1},
        "encoding": {
            "x": x,
            "y": y,
            "color": {
                "field": "late_ms",
                "type": "quantitative",
                "title": "late ms",
                "scale": {"domain": stops, "range": scale},
                "legend": {"orient": "bottom", "direction": "horizontal", "gradientLength": 240},
            },
            "tooltip": [
                {"field": "step"},
                {"field": "rank"},
                {"field": "late_ms", "title": "late (ms)", "format": MS_FORMAT},
            ],
        },
    }
    ring = {
        "transform": only("straggler"),
        "mark": {"type": "rect", "filled": False, "strokeWidth": 3},
        "encoding": {
            "x": x,
            "y": y,
            "stroke": {
                "field": "kind",
                "type": "nominal",
                "title": None,
                "scale": {"domain": ["straggler"], "range": [mark]},
            },
            "tooltip": [{"field": "step"}, {"field": "rank", "title": "straggler"}],
        },
    }
    spec = layered([fill, ring], {"step": 34}, resolve={"scale": {"color": "independent"}})
    return Chart(
        "Lateness per step and rank: arrival at the step's collectives minus the median",
        spec,
        pd.concat([cells, outline], ignore_index=True),
    )
