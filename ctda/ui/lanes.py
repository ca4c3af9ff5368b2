"""The critical-path timeline, drawn on a canvas (see :mod:`ctda.ui.canvas` for why).

Every layer reads one table (:func:`table`): the events' bars, GPU lane bands and the
connectors where the path changes lane, told apart by ``kind``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.api import CLASSES
from ctda.ui import canvas
from ctda.ui.canvas import Chart
from ctda.ui.charts import PATH_STROKE, fmt_ms
from ctda.ui.frames import Timeline

#: rows of a GPU stream are drawn this many times taller than a CPU call level: a stream
#: has one or two levels, a CPU thread a dozen, and GPU work is what people look for
GPU_ROW = 2.5
LANE_GAP = 0.7
#: events off the path keep their class colour at this opacity
FADED = 0.3


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


def _connectors(tl: Timeline, rows: Rows) -> pd.DataFrame:
    """One segment (x0, y0) -> (x1, y1) wherever the path leaves one lane for another."""
    cols = ["x0", "x1", "y0", "y1"]
    if len(tl.path) < 2:
        return pd.DataFrame(columns=cols, dtype=np.float64)
    x, y = tl.path.x.to_numpy(dtype=np.float64), tl.path.y.to_numpy(dtype=np.float64)
    lane = rows.lane_of(y)
    cy, _ = rows.center(y)
    jump = np.flatnonzero(lane[1:] != lane[:-1])
    return pd.DataFrame({"x0": x[jump], "x1": x[jump + 1], "y0": cy[jump], "y1": cy[jump + 1]})


def table(tl: Timeline) -> pd.DataFrame:
    """What the chart draws, a row per mark: ``kind`` is ``bar`` (an event: its box, class,
    whether it is on the path, its outline width and what its tooltip says), ``band`` (a GPU lane's
    background) or ``link`` (a connector)."""
    ev = tl.events
    rows = rows_of(tl)
    yc, h = rows.center(ev.y.to_numpy(dtype=np.float64))
    crit = ev.on_cp.to_numpy(dtype=bool)
    start, dur = ev.start_ms.to_numpy(dtype=np.float64), ev.dur_ms.to_numpy(dtype=np.float64)
    bars = canvas.boxes(start, dur, yc, h, tl.end_ms - tl.start_ms, crit)
    # the bars' boxes end at the window's edges (their tooltips keep the event's times):
    # the window is the range the data spans (canvas.window_x)
    bars["x0"] = bars.x0.clip(tl.start_ms, tl.end_ms)
    bars["x1"] = bars.x1.clip(tl.start_ms, tl.end_ms)
    bars = bars.assign(
        kind="bar",
        **{"class": ev.cls.astype(str).to_numpy()},
        path=np.where(crit, "critical", "off the path"),
        event=ev.name.astype(str).to_numpy(),
        lane=ev.lane.astype(str).to_numpy(),
    )
    gpu = [lane for lane in tl.lanes if lane.is_gpu]
    bands = pd.DataFrame(
        {
            "kind": "band",
            "fill": canvas.GPU_TINT,
            "x0": tl.start_ms,
            "x1": tl.end_ms,
            "y0": [rows.top[lane.lane] - LANE_GAP / 2 for lane in gpu],
            "y1": [rows.top[lane.lane] + rows.height[lane.lane] + LANE_GAP / 2 - 0.05 for lane in gpu],
        }
    )
    jumps = _connectors(tl, rows).assign(kind="link")
    edge = -LANE_GAP / 2
    span = {"x0": [tl.start_ms], "x1": [tl.end_ms], "y0": [edge], "y1": [edge]}
    window = pd.DataFrame({"kind": ["frame"], **span})
    out = pd.concat([bands, bars, jumps, window], ignore_index=True)
    # repeated strings go out once each (as Arrow dictionaries): half the bytes per redraw
    for col in ("kind", "fill", "class", "path", "event", "lane"):
        out[col] = out[col].astype("category")
    return out


def chart(tl: Timeline) -> Chart:
    """One lane per CPU thread / GPU stream. Critical events are coloured by class and
    outlined; the rest are faded; thin dark connectors show where the path changes lane.
    Ctrl + wheel zooms the time axis, a drag pans it, a double-click resets it."""
    rows = rows_of(tl)
    data = table(tl)
    present = set(data["class"].dropna())
    classes = [c for c in CLASSES if c in present]
    x = canvas.window_x("ms since trace start")
    ticks = [(rows.top[lane.lane] + rows.height[lane.lane] / 2, lane.label) for lane in tl.lanes]
    y = canvas.rows_y(-LANE_GAP / 2, rows.total + LANE_GAP / 2, ticks)
    bars = canvas.outlined(
        "bar",
        x,
        y,
        color=canvas.class_color(classes),
        opacity={
            "field": "path",
            "type": "nominal",
            "title": None,
            "scale": {"domain": ["critical", "off the path"], "range": [1.0, FADED]},
            # the swatch in the path's colour (light on a dark theme), not the
            # renderer's default black
            "legend": {"symbolFillColor": PATH_STROKE, "symbolType": "square"},
        },
        tooltip=[
            {"field": "event"},
            {"field": "lane"},
            {"field": "start_ms", "title": "starts (ms)", "format": canvas.MS_FORMAT},
            {"field": "dur_ms", "title": "lasts (ms)", "format": canvas.MS_FORMAT},
            {"field": "class"},
            {"field": "path", "title": "critical path"},
        ],
    )
    bars["params"] = [canvas.ZOOM]
    spec = canvas.layered(
        [canvas.fills("band", x, y), bars, canvas.links(x, y), canvas.frame(x, y)],
        canvas.rows_height(rows.total),
        resolve=canvas.OWN_COLORS,
    )
    return Chart(f"{tl.label}: {fmt_ms(tl.end_ms - tl.start_ms)}", spec, data)
