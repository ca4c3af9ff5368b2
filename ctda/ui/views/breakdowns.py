"""Breakdowns page: where device time goes, why streams sit idle, which kernels cost most,
each with the part on the critical path (the same tables as ``ctda breakdown``)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ctda.analysis.breakdown import Breakdowns
from ctda.analysis.engine import Analysis
from ctda.ui import data, figures, widgets

PARTS = ("compute", "communication", "memory", "idle")
KERNEL_ROWS = 200


@st.cache_resource(max_entries=16, show_spinner=False)
def breakdowns(tag: str, _a: Analysis) -> Breakdowns:
    every = Breakdowns(_a)
    for kind in ("temporal", "idle", "classes", "kernels"):
        every.table(kind)  # computed once here, read by every rerun
    return every


def temporal_figure(t: pd.DataFrame) -> go.Figure:
    """One stacked bar per window and device: the four parts as shares of the window."""
    label = t.label + t.device.map(lambda d: f" · device {d}" if t.device.nunique() > 1 else "")
    fig = go.Figure(
        [
            go.Bar(
                name=p,
                x=t[f"{p}_share"],
                y=label,
                orientation="h",
                customdata=t[f"{p}_ns"] / 1e6,
                hovertemplate=f"{p}: %{{x:.1%}} (%{{customdata:.3f}} ms)<extra></extra>",
            )
            for p in PARTS
        ]
    )
    fig.update_layout(
        barmode="stack",
        height=90 + 28 * len(t),
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        xaxis={"tickformat": ".0%"},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h"},
    )
    return fig


def render_run(loaded: data.Loaded) -> None:
    b = breakdowns(loaded.tag, loaded.analysis)
    if not b.device.any:
        st.info("No device activity: this trace has no GPU work (kernels, copies, memsets).")
        return
    t = b.temporal
    whole = t[t.window < 0]
    cols = st.columns(4)
    for col, part in zip(cols, PARTS):
        col.metric(f"{part} (whole trace)", f"{float(whole[f'{part}_share'].mean()):.1%}")
    st.markdown(
        "**Device time per step** (compute first; communication not under compute; memory under neither)"
    )
    st.plotly_chart(temporal_figure(t), width="stretch", key="bd_temporal", config=figures.CONFIG)
    st.markdown("**Idle time per stream**, and how much of it the critical path spends waiting")
    idle = b.idle.assign(idle_ms=lambda f: f.idle_ns / 1e6, on_path_ms=lambda f: f.cp_ns / 1e6)
    st.dataframe(
        idle[["label", "device", "stream", "idle", "idle_ms", "on_path_ms"]],
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * len(idle), 320),
    )
    st.caption(
        "Host wait: the launch came after the stream went idle (the CPU was late). Kernel wait: a gap "
        "under 30 µs between dependent kernels. Idle off the critical path costs the step nothing."
    )
    left, right = st.columns([2, 5])
    with left:
        st.markdown("**Kernel classes**")
        c = b.classes.assign(time_ms=lambda f: f.total_ns / 1e6, on_path_ms=lambda f: f.cp_ns / 1e6)
        st.dataframe(
            c[["class", "count", "time_ms", "share", "on_path_ms"]], hide_index=True, width="stretch"
        )
    with right:
        st.markdown(f"**Kernels by total time** (first {KERNEL_ROWS})")
        k = b.kernels.head(KERNEL_ROWS)
        k = k.assign(
            **{f"{c[:-3]}_ms": k[c] / 1e6 for c in ("total_ns", "mean_ns", "p50_ns", "p95_ns", "cp_ns")}
        )
        st.dataframe(
            k[["name", "class", "count", "total_ms", "mean_ms", "p50_ms", "p95_ms", "cp_ms"]],
            hide_index=True,
            width="stretch",
            height=360,
        )


def render() -> None:
    s = widgets.settings()
    st.title("Breakdowns")
    loaded = widgets.current_loaded(s)
    if loaded is not None:
        render_run(loaded)


if __name__ == "__main__":
    render()
