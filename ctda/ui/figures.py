"""The pages' charts, cached like the tables of :mod:`ctda.ui.data`: Vega-Lite charts on a
canvas, from :mod:`ctda.ui.canvas`, :mod:`ctda.ui.bars` and :mod:`ctda.ui.lanes`, built once
per run, view and step.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ctda.api import Analysis
from ctda.ui import bars, canvas, data, explain, lanes


@st.cache_resource(max_entries=64, show_spinner=False)
def timeline(tag: str, window: int, max_events: int, _a: Analysis) -> canvas.Chart:
    """The critical-path timeline of one window (see :func:`lanes.chart`)."""
    return lanes.chart(data.timeline(tag, window, max_events, _a))


#: how to read and move the timeline (its marks are on a canvas: the caption says it)
TIMELINE_HELP = (
    "Critical events in full colour and outlined, the rest faded; thin dark lines: the path "
    f"changing lane. {canvas.ZOOM_HELP}"
)


def show(chart: canvas.Chart, key: str) -> None:
    """A canvas chart under its title (a line of the page, so it reads as text); its path
    colour follows the page's theme in the browser (``charts.PATH_STROKE``)."""
    if chart.title:  # else the page says what it is, in a line of its own above
        st.markdown(f"**{chart.title}**")
    st.vega_lite_chart(chart.data, chart.spec, width="stretch", key=key)


@st.cache_resource(max_entries=64, show_spinner=False)
def steps(tag: str, selected: int | None, _a: Analysis) -> canvas.Chart:
    """Critical path per step by class, ``selected`` outlined (see :func:`canvas.steps`)."""
    return canvas.steps(data.class_by_window(tag, _a), selected)


@st.cache_resource(max_entries=128, show_spinner=False)
def breakdown(tag: str, windows: tuple[int, ...] | None, _a: Analysis) -> canvas.Chart:
    """Bound-by bars of the windows (all: None), see :func:`bars.bound_by`."""
    return bars.bound_by(data.by_class(tag, windows, _a), "")


@st.cache_resource(max_entries=32, show_spinner=False)
def lane_shares(tag: str, _a: Analysis) -> pd.Series:
    """Share of the critical path per lane (see :func:`explain.lane_shares`)."""
    return explain.lane_shares(_a)
