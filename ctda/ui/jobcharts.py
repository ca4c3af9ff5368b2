"""Charts of the Job page, from the tables in :mod:`ctda.ui.jobframes`: the lateness
heatmap and the job timeline, on a canvas like the Critical path page's charts.

They keep the Critical path page's conventions (:mod:`ctda.ui.charts`): class colours,
path stretches outlined in the path colour, connectors only where the path changes place
(here: rank), one unit (ms) in every tooltip.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.ui import bars, canvas
from ctda.ui.canvas import Chart
from ctda.ui.charts import CLASS_COLORS, fmt_ms
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
#: (evenly spaced from the largest earliness to the largest lateness)
LATENESS_COLORS = ["#2166AC", "#92C5DE", "#F7F7F7", "#F4A582", "#B2182B"]
STRAGGLER = "straggler"
#: the straggler's outline: apart (CIE ΔE 80 and more) from every colour of the lateness
#: scale and from light and dark pages alike, so the figure needs no theming by the server,
#: which would go stale when the viewer switches theme without a rerun
STRAGGLER_COLOR = "#9B30FF"
#: every other rank's band is shaded
BAND_SHADE = "rgba(0,0,0,0.035)"


def heatmap(late: Lateness) -> Chart:
    """Ranks (rows) by steps (columns), lateness in ms on a diverging scale centred on 0;
    each step's straggler is outlined (see :func:`bars.heatmap`)."""
    ranks = [rank_label(r) for r in late.ranks]
    marked = [rank_label(r) if r in late.ranks else "" for r in late.straggler]
    return bars.heatmap(late.steps, ranks, late.ms, marked, LATENESS_COLORS, STRAGGLER_COLOR)


def timeline_table(tl: JobTimeline) -> pd.DataFrame:
    """What the job timeline draws, a row per mark: ``band`` (a rank's band, shaded every
    other rank, and its GPU rows), ``busy`` (a rank's own events, pale), ``bar`` (the job
    path's stretches) and ``link`` (where the path moves to another rank)."""
    span = max(tl.end_ms - tl.start_ms, 1e-6)
    shade = []
    for k, rank in enumerate(tl.bands):
        rows = [r for r in tl.rows if r.rank == rank]
        if rows and k % 2 == 0:  # alternate shading tells the bands apart
            shade.append((rows[0].top - 0.3, rows[-1].top + rows[-1].height + 0.3, BAND_SHADE))
    shade += [(r.top, r.top + r.height, canvas.GPU_TINT) for r in tl.rows if r.is_gpu]
    bands = pd.DataFrame(
        {
            "kind": "band",
            "x0": tl.start_ms,
            "x1": tl.end_ms,
            "y0": [y0 for y0, _, _ in shade],
            "y1": [y1 for _, y1, _ in shade],
            "fill": [f for _, _, f in shade],
        }
    )

    def marks(df: pd.DataFrame, kind: str, where: pd.Series) -> pd.DataFrame:
        cls = df.cls.astype(str)
        return canvas.boxes(
            df.start_ms.to_numpy(dtype=np.float64),
            df.dur_ms.to_numpy(dtype=np.float64),
            df.y.to_numpy(dtype=np.float64),
            df.height.to_numpy(dtype=np.float64),
            span,
            np.full(len(df), kind == "bar"),
        ).assign(
            kind=kind,
            **{"class": cls.to_numpy()},
            fill=[PALE.get(c, PALE_OTHER) for c in cls] if kind == "busy" else None,
            event=df.name.astype(str).to_numpy(),
            rank=[rank_label(r) for r in df["rank"]],
            where=where.astype(str).to_numpy(),
        )

    busy = marks(tl.busy, "busy", tl.busy.lane) if len(tl.busy) else None
    path = marks(tl.path, "bar", pd.Series(["job path"] * len(tl.path))) if len(tl.path) else None
    jumps = tl.jumps[["x0", "y0", "x1", "y1"]].astype(np.float64).assign(kind="link")
    out = pd.concat([p for p in (bands, busy, path, jumps) if p is not None], ignore_index=True)
    for col in ("kind", "fill", "class", "event", "rank", "where"):
        if col in out:
            out[col] = out[col].astype("category")
    return out


def timeline(tl: JobTimeline) -> Chart:
    """One band per rank: its job path row (stretches in their class colour, outlined) and,
    when its run is stored, its threads and streams (events pale, in an opaque tint of their
    class colour: a rank's row folds nested calls onto one another); a thin dark connector
    wherever the job path moves from one rank to another."""
    data = timeline_table(tl)
    x = canvas.time_x("ms since the job's start", tl.start_ms, tl.end_ms)
    y = canvas.rows_y(-0.5, tl.total + 0.5, [(r.center, r.label) for r in tl.rows])
    tooltip = [
        {"field": "event"},
        {"field": "rank"},
        {"field": "where"},
        {"field": "start_ms", "title": "starts (ms)", "format": canvas.MS_FORMAT},
        {"field": "dur_ms", "title": "lasts (ms)", "format": canvas.MS_FORMAT},
        {"field": "class"},
    ]
    busy = {
        "transform": canvas.only("busy"),
        "mark": {"type": "rect", "clip": True},
        "params": [canvas.ZOOM],
        "encoding": {**canvas.box(x, y), "color": canvas.OWN_FILL, "tooltip": tooltip},
    }
    present = set(data.loc[data.kind == "bar", "class"].dropna()) if "class" in data else set()
    path = canvas.outlined(
        "bar", x, y, color=canvas.class_color([c for c in CLASS_COLORS if c in present]), tooltip=tooltip
    )
    spec = canvas.layered(
        [canvas.fills("band", x, y), busy, path, canvas.links(x, y)],
        canvas.rows_height(tl.total),
        resolve=canvas.OWN_COLORS,
    )
    return Chart(f"{tl.step}: {fmt_ms(tl.end_ms - tl.start_ms)}", spec, data)
