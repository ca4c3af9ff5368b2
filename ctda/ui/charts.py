"""The pages' shared chart conventions: class colours, the path's colour, label lengths."""

from __future__ import annotations

import pandas as pd

from ctda.api import CLASSES

#: one colour per bound-by class, the same on every chart
CLASS_COLORS = dict(
    zip(
        CLASSES,
        (
            "#4C78A8",  # cpu
            "#9D755D",  # data_loading
            "#6B6ECF",  # communication: blue-violet, apart from gpu_comm's red and cross_thread's pink
            "#54A24B",  # gpu_compute
            "#E45756",  # gpu_comm
            "#72B7B2",  # gpu_memcpy
            "#F58518",  # launch_overhead
            "#EECA3B",  # sync_wait
            "#FF9DA6",  # cross_thread
            "#6E6E6E",  # cpu_gap: dark grey
            "#E0E0E0",  # gpu_gap: light grey
        ),
    )
)
#: the path's own style: critical events outlined in it, and thin connectors where the
#: path jumps from one lane to another (no class uses a colour this dark); on a dark theme
#: it is drawn in PATH_COLOR_DARK instead (see PATH_STROKE)
PATH_COLOR = "#1B1B1B"
PATH_COLOR_DARK = "#EDEDED"
#: the path's colour in a Vega-Lite spec: picked by the browser as it draws, from the
#: chart's background (the page's theme), so it is right from the first load and follows a
#: theme switch at once. The server's idea of the theme is the one the browser reported
#: with its last rerun: stale after a switch (and, Streamlit warns, on a first load).
PATH_STROKE = {"expr": f"luminance(background) < 0.5 ? '{PATH_COLOR_DARK}' : '{PATH_COLOR}'"}
ROW_PX = 18


def fmt_ms(v: float) -> str:
    """A time in ms with enough digits for sub-microsecond events (one unit everywhere)."""
    return f"{v:,.3f} ms" if abs(v) >= 0.01 or v == 0 else f"{v:.5f} ms"


#: step labels on a step axis, slanted so long names fit
TICK_ANGLE = -35


#: a bar chart's category labels are cut to this many characters (the full one in the
#: tooltip): longer ones left the plot of a half-page chart no width at all
LABEL_CHARS = 40


def short_labels(labels: pd.Series, n: int = LABEL_CHARS) -> pd.Series:
    """``labels`` cut to ``n`` characters with an ellipsis, kept distinct (a cut label that
    meets another gets its position appended: two bars never share one row)."""
    text = labels.astype(str)
    cut = text.where(text.str.len() <= n, text.str.slice(0, n - 1) + "…")
    clash = cut.duplicated(keep=False) & (cut != text)
    return cut.where(~clash, cut + " #" + pd.Series(range(1, len(cut) + 1), index=cut.index).astype(str))
