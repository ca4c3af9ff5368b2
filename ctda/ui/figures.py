"""The pages' charts, cached like the tables of :mod:`ctda.ui.data`: Plotly figures of
:mod:`ctda.ui.charts` and canvas charts of :mod:`ctda.ui.canvas` and :mod:`ctda.ui.lanes`.

Building a Plotly figure validates every array it holds, and ``st.plotly_chart``
deep-copies it into a dict on every rerun. So a figure is built once per run, view and
step, frozen into its dict (see :class:`Frozen`), and each rerun that shows it again pays
only the JSON encoding.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ctda.api import Analysis
from ctda.ui import canvas, charts, data, explain, lanes

#: no mode bar: it floated over the titles and legends of the narrower charts (a drag
#: still zooms, a double-click resets), and so no plotly logo link (an external site)
CONFIG: dict[str, Any] = {"displayModeBar": False, "displaylogo": False}


class Frozen(go.Figure):
    """A finished figure whose ``to_dict`` (what ``st.plotly_chart`` serialises) is computed
    once: the cached figure is never changed, so its dict need not be copied per rerun."""

    def __init__(self, fig: go.Figure) -> None:
        super().__init__(fig)
        self._frozen = go.Figure.to_dict(self)

    def to_dict(self) -> dict[str, Any]:
        return self._frozen


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
    st.markdown(f"**{chart.title}**")
    st.vega_lite_chart(chart.data, chart.spec, width="stretch", key=key)


def plotly(fig: go.Figure, key: str) -> None:
    """A Plotly figure without a mode bar. Its own colours must read on light and dark
    pages alike (Streamlit themes the rest in the browser): a figure themed here would keep
    its colours after the viewer switches theme, which reruns nothing."""
    st.plotly_chart(fig, width="stretch", key=key, config=CONFIG)


@st.cache_resource(max_entries=64, show_spinner=False)
def steps(tag: str, selected: int | None, _a: Analysis) -> canvas.Chart:
    """Critical path per step by class, ``selected`` outlined (see :func:`canvas.steps`)."""
    return canvas.steps(data.class_by_window(tag, _a), selected)


@st.cache_resource(max_entries=128, show_spinner=False)
def breakdown(tag: str, windows: tuple[int, ...] | None, _a: Analysis) -> go.Figure:
    """Bound-by bars of the windows (all: None), see :func:`charts.breakdown`."""
    return Frozen(charts.breakdown(data.by_class(tag, windows, _a), ""))


@st.cache_resource(max_entries=32, show_spinner=False)
def lane_shares(tag: str, _a: Analysis) -> pd.Series:
    """Share of the critical path per lane (see :func:`explain.lane_shares`)."""
    return explain.lane_shares(_a)
