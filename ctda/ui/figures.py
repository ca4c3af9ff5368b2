"""Plotly figures of :mod:`ctda.ui.charts`, cached like the tables of :mod:`ctda.ui.data`.

Building a figure validates every array it holds (a 4,000-bar timeline takes about a
second of plotly's own checks), so a figure is built once per run, view and step and
reused by every rerun that shows it again; only its JSON encoding is paid per rerun.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ctda.analysis.engine import Analysis
from ctda.ui import charts, data, explain

#: no plotly logo link (an external site) and no cloud-editing buttons
CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "modeBarButtonsToRemove": ["sendDataToCloud", "lasso2d", "select2d"],
}


@st.cache_resource(max_entries=64, show_spinner=False)
def timeline(tag: str, window: int, max_events: int, _a: Analysis) -> go.Figure:
    """The critical-path timeline of one window (see :func:`charts.timeline`)."""
    return charts.timeline(data.timeline(tag, window, max_events, _a))


@st.cache_resource(max_entries=64, show_spinner=False)
def steps(tag: str, selected: int | None, _a: Analysis) -> go.Figure:
    """Critical path per step by class, ``selected`` outlined (see :func:`charts.steps`)."""
    return charts.steps(data.class_by_window(tag, _a), selected)


@st.cache_resource(max_entries=32, show_spinner=False)
def lane_shares(tag: str, _a: Analysis) -> pd.Series:
    """Share of the critical path per lane (see :func:`explain.lane_shares`)."""
    return explain.lane_shares(_a)
