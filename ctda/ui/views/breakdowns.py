"""Breakdowns page: where device time goes, why streams sit idle, which kernels cost most,
each with the part on the critical path (the same tables as ``ctda breakdown``)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ctda.api import Analysis, Breakdowns, launch_queue, memory_series
from ctda.ui import bars, canvas, data, figures, widgets

PARTS = tuple(canvas.PART_COLORS)
KERNEL_ROWS = 200
#: shares are fractions in the tables (as ``ctda breakdown`` writes them), shown as %
PERCENT = st.column_config.NumberColumn(format="percent")


def percent(*columns: str) -> dict[str, Any]:
    """A column_config showing ``columns`` as percentages."""
    return {c: PERCENT for c in columns}


@st.cache_resource(max_entries=16, show_spinner=False)
def queue_figure(tag: str, _a: Analysis, bins: int = 1500) -> canvas.Chart:
    """Each stream's queue length over the trace: the longest in each of ``bins`` time bins
    (a million launches would not draw; the peaks are what matter)."""
    q = launch_queue(_a)
    streams = _a.table.lanes["stream"].to_numpy()
    groups = [
        (f"stream {streams[int(part.lane.iloc[0])]}", part.ts.to_numpy(), part.length.to_numpy())
        for _, part in q.groupby("lane")
    ]
    return bars.series(bars.peaks_by(groups, bins), "queued", steps=True)


def render_run(loaded: data.Loaded) -> None:
    b = data.breakdowns(loaded.tag, loaded.analysis)
    if not b.device.any:
        st.info("No device activity: this trace has no GPU work (kernels, copies, memsets).")
        memory_section(loaded, b)
        return
    t = b.temporal
    whole = t[t.window < 0]
    cols = st.columns(4)
    for col, part in zip(cols, PARTS):
        col.metric(f"{part} (whole trace)", f"{float(whole[f'{part}_share'].mean()):.1%}")
    figures.show(canvas.shares(t, "Device time per step"), "bd_temporal")
    st.caption("Compute first; communication not under compute; memory under neither.")
    st.markdown("**Idle time per stream**, and how much of it the critical path spends waiting")
    idle = b.idle.assign(idle_ms=lambda f: f.idle_ns / 1e6, on_path_ms=lambda f: f.cp_ns / 1e6)
    st.dataframe(
        idle[["label", "device", "stream", "on_path_ms", "idle_ms", "idle"]],  # the path's part first
        hide_index=True,
        width="stretch",
        height=min(38 + 35 * len(idle), 320),
    )
    st.caption(
        "Host wait: the launch came after the stream went idle (the CPU was late). Kernel wait: a gap "
        "under 30 µs between dependent kernels. Idle off the critical path costs the step nothing."
    )
    ov = b.table("overlap")
    if len(ov):
        st.markdown("**Communication under compute**, and the exposed rest")
        st.dataframe(
            ov.assign(
                communication_ms=ov.communication_ns / 1e6,
                exposed_ms=ov.exposed_ns / 1e6,
                on_path_ms=ov.cp_ns / 1e6,
            )[["label", "device", "on_path_ms", "communication_ms", "overlap_share", "exposed_ms"]],
            hide_index=True,
            width="stretch",
            column_config=percent("overlap_share"),
        )
    la = b.table("launches")
    if len(la):
        st.markdown(
            "**Launches**: call time, launch delay (work start minus call end), and the delay on the path"
        )
        st.dataframe(
            la.assign(
                **{
                    f"{c[:-3]}_ms": la[c] / 1e6
                    for c in ("call_p95_ns", "delay_p50_ns", "delay_p95_ns", "cp_delay_ns")
                }
            )[
                [
                    "label",
                    "cp_delay_ms",
                    "launches",
                    "call_p95_ms",
                    "call_outliers",
                    "delay_p50_ms",
                    "delay_p95_ms",
                    "delay_outliers",
                    "short_kernels",
                ]
            ],
            hide_index=True,
            width="stretch",
        )
        st.markdown("**Launch queue per stream** (launched, not yet started)")
        figures.show(queue_figure(loaded.tag, loaded.analysis), "bd_queue")
    left, right = st.columns([2, 5])
    with left:
        st.markdown("**Kernel classes**")
        c = b.classes.assign(time_ms=lambda f: f.total_ns / 1e6, on_path_ms=lambda f: f.cp_ns / 1e6)
        st.dataframe(
            c[["class", "on_path_ms", "count", "time_ms", "share"]],
            hide_index=True,
            width="stretch",
            column_config=percent("share"),
        )
    with right:
        st.markdown(f"**Kernels by total time** (first {KERNEL_ROWS})")
        k = b.kernels.head(KERNEL_ROWS)
        k = k.assign(
            **{f"{c[:-3]}_ms": k[c] / 1e6 for c in ("total_ns", "mean_ns", "p50_ns", "p95_ns", "cp_ns")}
        )
        st.dataframe(
            k[["name", "class", "cp_ms", "count", "total_ms", "mean_ms", "p50_ms", "p95_ms"]],
            hide_index=True,
            width="stretch",
            height=360,
        )
    memory_section(loaded, b)


def memory_section(loaded: data.Loaded, b: Breakdowns) -> None:
    """The allocator's table and each device's allocated memory over time, when recorded."""
    mem = b.table("memory")
    if not len(mem):
        return
    st.markdown("**Allocator**: allocated memory per device (-1: host)")
    st.dataframe(
        mem.assign(**{f"{c[:-6]}_mb": mem[c] / 1e6 for c in ("start_bytes", "peak_bytes", "end_bytes")})[
            ["label", "device", "allocations", "frees", "start_mb", "peak_mb", "end_mb"]
        ],
        hide_index=True,
        width="stretch",
    )
    figures.show(memory_figure(loaded.tag, loaded.analysis), "bd_memory")


@st.cache_resource(max_entries=16, show_spinner=False)
def memory_figure(tag: str, _a: Analysis, bins: int = 1500) -> canvas.Chart:
    """Allocated memory of each device over the trace: its peak in each of ``bins`` bins."""
    m = memory_series(_a)
    groups = [
        (_device(int(part.device.iloc[0])), part.ts.to_numpy(), part.allocated.to_numpy())
        for _, part in m.groupby("device")
    ]
    return bars.series(bars.peaks_by(groups, bins, scale=1e-6), "MB")


def _device(d: int) -> str:
    return "host" if d < 0 else f"device {d}"


def render() -> None:
    s = widgets.settings()
    st.title("Breakdowns")
    loaded = widgets.current_loaded(s)
    if loaded is not None:
        render_run(loaded)


if __name__ == "__main__":
    render()
