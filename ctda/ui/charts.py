"""Plotly figures for the pages, built from the frames in :mod:`ctda.ui.frames`."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ctda.api import CLASSES
from ctda.ui import margins

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
            "#D4D4D4",  # gpu_gap: light grey (and hatched in the Plotly bound-by bars)
        ),
    )
)
#: a second cue besides the grey level, so the two gap classes never read as one
CLASS_PATTERNS = {"gpu_gap": "/"}
#: the path's own style: critical events outlined in it, and thin connectors where the
#: path jumps from one lane to another (no class uses a colour this dark)
PATH_COLOR = "#1B1B1B"
ROW_PX = 18


def fmt_ms(v: float) -> str:
    """A time in ms with enough digits for sub-microsecond events (one unit everywhere)."""
    return f"{v:,.3f} ms" if abs(v) >= 0.01 or v == 0 else f"{v:.5f} ms"


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


#: step labels on a step axis, slanted so long names fit
TICK_ANGLE = -35


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
