"""Hotspots page: what the critical path spends its time on, and why each edge is there."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import streamlit as st

from ctda.analysis.engine import Analysis
from ctda.ui import data, frames, widgets
from ctda.ui.rules import rule_doc

SORTS = {
    "critical-path time": ("cp_ms", False),
    "share of critical path": ("cp_share", False),
    "total self time": ("total_ms", False),
    "share of total": ("total_share", False),
    "count": ("count", False),
    "smallest slack": ("min_slack_ms", True),
    "name": ("name", True),
}
COLUMNS = {
    "cp_ms": st.column_config.NumberColumn("CP ms", format="%.3f"),
    "cp_share": st.column_config.NumberColumn("share of CP", format="percent"),
    "total_ms": st.column_config.NumberColumn("total ms", format="%.3f"),
    "total_share": st.column_config.NumberColumn("share of total", format="percent"),
    "count": st.column_config.NumberColumn("count"),
    "on_cp": st.column_config.NumberColumn("on CP", help="instances charged on the critical path"),
    "min_slack_ms": st.column_config.NumberColumn(
        "min slack ms", format="%.3f", help="how far its least slack instance may slip"
    ),
}


def table(loaded: data.Loaded, sel: list[int], step: str) -> pd.DataFrame:
    return data.hotspots(loaded.tag, step, tuple(sel), loaded.analysis)


def why(rules: pd.Series) -> None:
    """Each distinct rule's full docstring: what it reads and why the dependency is real."""
    for rule in dict.fromkeys(str(r) for r in rules):
        with st.expander(f"rule `{rule}`"):
            st.markdown(rule_doc(rule))


def drill_event(a: Analysis, loaded: data.Loaded, event: int) -> None:
    names = data.names(loaded.tag, a)
    facts = frames.event_facts(a, names, event)
    st.markdown(
        f"**{facts['name']}** · {facts['category']} · class `{facts['class']}` · {facts['lane']} · "
        f"starts {facts['start_ms']:.3f} ms, lasts {facts['dur_ms']:.3f} ms, "
        f"slack {facts['slack_ms']:.3f} ms (event {facts['event']}, trace uid {facts['uid']})"
    )
    charged = frames.event_charges(a, event)
    st.markdown(f"Critical-path stretches charged to it: **{len(charged)}**")
    if len(charged):
        st.dataframe(charged, hide_index=True, width="stretch", height=min(38 + 35 * len(charged), 250))
    edges = frames.event_edges(a, names, event, data.edges_on_path(loaded.tag, a))
    st.markdown("**Its dependency edges** (what its start and end wait for, and what they release)")
    st.dataframe(edges, hide_index=True, width="stretch")
    if len(edges):
        st.markdown("**Why each edge exists**")
        why(edges.rule)


def drill(loaded: data.Loaded, hot: pd.DataFrame, sel: list[int]) -> None:
    st.subheader("Drill down")
    a, tag = loaded.analysis, loaded.tag
    names = data.names(tag, a)
    pick = widgets.choice("Hotspot", [str(x) for x in hot.name], key="hs_pick")
    if pick is None:
        return
    if pick in frames.GAP_CLASS or pick.startswith("("):
        waits = frames.gap_instances(a, names, pick, sel)
        st.markdown(f"**{pick}**: the {len(waits):,} longest stretches, the edge each lies on and who waited")
        st.dataframe(waits, hide_index=True, width="stretch")
        if len(waits):
            why(waits.rule)
        return
    inst = frames.instances(a, names, data.windows_of(tag, a), pick, sel)
    total = int(inst.attrs.get("total", len(inst)))
    shown = f", the {len(inst):,} most critical shown" if total > len(inst) else ", most critical first"
    st.markdown(f"**{total:,}** instance(s) of `{pick}`{shown}")
    st.dataframe(inst, hide_index=True, width="stretch", height=min(38 + 35 * len(inst), 300))
    if len(inst) == 0:
        return
    rows: Iterable[Any] = inst.itertuples()  # rows typed loosely by the stubs
    labels = {
        int(
            r.event
        ): f"event {r.event} · {r.window} · {r.start_ms:.3f} ms · {r.dur_ms:.3f} ms · CP {r.cp_ms:.3f} ms"
        for r in rows
    }
    event = widgets.choice("Instance", list(labels), key="hs_instance", format_func=lambda e: labels[e])
    if event is not None:
        drill_event(a, loaded, int(event))


def render() -> None:
    s = widgets.settings()
    st.title("Hotspots")
    loaded = widgets.current_loaded(s)
    if loaded is None:
        return
    a = loaded.analysis
    steps = data.steps(loaded.tag, a)
    c1, c2, c3 = st.columns([3, 2, 1])
    with c1:
        window = widgets.step_picker(steps, key="hs_step", allow_all=True)
    sel = list(range(len(a.windows))) if window is None else [window]
    step = "all" if window is None else _step_arg(a, window)
    if step == "all" and len(sel) == 1 and len(a.windows) > 1:
        # the report selects windows by step number; this window has none (or shares it)
        st.caption(f"{a.windows[sel[0]].label} has no unique step number: showing every window.")
        sel = list(range(len(a.windows)))
    sort = widgets.choice("Sort by", list(SORTS), key="hs_sort", where=c2)
    top = c3.number_input("Rows", 5, 5000, 50, step=25, key="hs_top")
    hot = table(loaded, sel, step)
    col, ascending = SORTS[sort]
    shown = hot.sort_values(col, ascending=ascending, na_position="last").head(int(top))
    st.caption(
        f"{len(hot):,} names; critical path {hot.cp_ms.sum():,.3f} ms. "
        "Click a column header to re-sort the shown rows."
    )
    st.dataframe(shown, hide_index=True, width="stretch", column_config=COLUMNS, key="hs_table")
    drill(loaded, shown, sel)


def _step_arg(a: Analysis, window: int) -> str:
    """``report.build``'s step argument for one window (windows without a step: all)."""
    w = a.windows[window]
    if w.step is None or sum(1 for x in a.windows if x.step == w.step) != 1:
        return "all"
    return str(w.step)


if __name__ == "__main__":
    render()
