"""Hotspots page: what the critical path spends its time on, and why each edge is there."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import streamlit as st

from ctda.api import Analysis
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
NUM = 72  # px: a number column shows 9 characters
COLUMNS = {
    "kind": st.column_config.TextColumn(
        "kind", width=55, help="event: a trace event; wait: time on the path between events"
    ),
    "name": st.column_config.TextColumn("name", width=240, help="hover a cell for the whole name"),
    "category": st.column_config.TextColumn("category", width=90),
    "class": st.column_config.TextColumn("class", width=110),
    "cp_ms": st.column_config.NumberColumn("CP ms", width=NUM),
    "cp_share": st.column_config.NumberColumn("share of CP", width=NUM),
    "total_ms": st.column_config.NumberColumn("total ms", width=NUM, help="self time, all instances"),
    "total_share": st.column_config.NumberColumn("share of total", width=NUM),
    "count": st.column_config.NumberColumn("count", width=60),
    "on_cp": st.column_config.NumberColumn("on CP", width=60, help="instances charged on the critical path"),
    "min_slack_ms": st.column_config.NumberColumn(
        "min slack ms", width=NUM, help="how far its least slack instance may slip"
    ),
}
#: what fits a laptop screen without scrolling sideways: share of total (total ms over
#: the whole trace's self time) is the one left out, category comes last
ORDER = [
    "kind",
    "name",
    "class",
    "cp_ms",
    "cp_share",
    "total_ms",
    "count",
    "on_cp",
    "min_slack_ms",
    "category",
]


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
        f"**{widgets.md(facts['name'])}** · {facts['category']} · class `{facts['class']}` · "
        f"{facts['lane']} · "
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


def drill(loaded: data.Loaded, hot: pd.DataFrame, sel: list[int], picked: str | None) -> None:
    """Drill into one row of ``hot`` (in the table's order); ``picked``: the row the user
    just clicked in the table, which the picker then shows."""
    st.subheader("Drill down")
    a, tag = loaded.analysis, loaded.tag
    names = data.names(tag, a)
    key = widgets.scoped("hs_pick", tag)
    options = [str(x) for x in hot.name]
    if picked in options:
        st.session_state[key] = picked
    pick = widgets.choice("Hotspot", options, key=key, help="Or click a row of the table.")
    if pick is None:
        return
    if pick in frames.GAP_CLASS or pick.startswith("("):
        waits = frames.gap_instances(a, names, pick, sel)
        st.markdown(
            f"**{widgets.md(pick)}**: the {len(waits):,} longest stretches, the edge each lies on "
            "and who waited"
        )
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
    event = widgets.choice(
        "Instance",
        list(labels),
        key=widgets.scoped("hs_instance", tag, pick, tuple(sel)),
        format_func=lambda e: labels[e],
    )
    if event is not None:
        drill_event(a, loaded, int(event))


#: larger tables are not styled: styling renders every cell in Python
STYLE_ROWS = 500
SYNTHETIC_CSS = "background-color: #EEEEEE; color: #555555; font-style: italic"


def styled(shown: pd.DataFrame) -> Any:
    """The table with its synthetic rows (waits, idle time: not trace events) in grey."""
    if len(shown) > STYLE_ROWS:
        return shown
    synthetic = shown.kind.to_numpy() == "wait"

    def css(df: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame("", index=df.index, columns=df.columns)
        out.loc[synthetic] = SYNTHETIC_CSS
        return out

    fmt: dict[Any, str | Callable[[object], str] | None] = {
        "cp_ms": "{:.3f}",
        "total_ms": "{:.3f}",
        "min_slack_ms": "{:.3f}",
        "cp_share": "{:.1%}",
        "total_share": "{:.1%}",
    }
    return shown.style.apply(css, axis=None).format(fmt, na_rep="")


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
        window = widgets.step_picker(
            steps, key=widgets.scoped("hs_step", loaded.tag), allow_all=True, scope=loaded.ref.name
        )
    sel = list(range(len(a.windows))) if window is None else [window]
    step = "all" if window is None else _step_arg(a, window)
    if step == "all" and len(sel) == 1 and len(a.windows) > 1:
        # the report selects windows by step number; this window has none (or shares it)
        st.caption(f"{widgets.md(a.windows[sel[0]].label)} has no unique step number: showing every window.")
        sel = list(range(len(a.windows)))
    sort = widgets.choice("Sort by", list(SORTS), key="hs_sort", where=c2)
    top = c3.number_input("Rows", 5, 5000, 50, step=25, key="hs_top")
    # every window when step is "all" (the branches above): one cache entry with the preload's
    hot = data.hotspots_of_every_step(loaded.tag, a) if step == "all" else table(loaded, sel, step)
    col, ascending = SORTS[sort]
    shown = hot.sort_values(col, ascending=ascending, na_position="last", kind="stable").head(int(top))
    shown.insert(0, "kind", ["wait" if str(n).startswith("(") else "event" for n in shown.name])
    shown = shown.reset_index(drop=True)
    st.caption(
        f"{len(hot):,} names; critical path {hot.cp_ms.sum():,.3f} ms. Sorted by **{sort}**: the box "
        "decides the order (a header click re-sorts the view until the box changes). Grey rows are "
        "waits and idle time on the path, not trace events. Click a row to drill into it."
    )
    # keyed by the box (and what the rows are): a new order starts from the box's order,
    # never from an older header click
    table_key = widgets.scoped("hs_table", loaded.tag, sort, tuple(sel), int(top))
    event = st.dataframe(
        styled(shown),
        hide_index=True,
        width="stretch",
        column_config=COLUMNS,
        column_order=ORDER,
        key=table_key,
        on_select="rerun",
        selection_mode="single-row",
    )
    rows = list(event.selection.rows) if event is not None else []
    seen = st.session_state.get("_hs_clicked")
    picked = None
    if rows and seen != (table_key, rows[0]):
        # row positions are those of `shown`, whatever order the view is sorted in
        picked = str(shown.name.iloc[rows[0]])
    st.session_state["_hs_clicked"] = (table_key, rows[0]) if rows else None
    drill(loaded, shown, sel, picked)


def _step_arg(a: Analysis, window: int) -> str:
    """``report.build``'s step argument for one window (windows without a step: all)."""
    w = a.windows[window]
    if w.step is None or sum(1 for x in a.windows if x.step == w.step) != 1:
        return "all"
    return str(w.step)


if __name__ == "__main__":
    render()
