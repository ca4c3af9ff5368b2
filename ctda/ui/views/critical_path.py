"""Critical path page: per step, the timeline with the path drawn through it, and what bounds it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from ctda.api import CLASSES, Analysis
from ctda.ui import data, figures, frames, share, widgets
from ctda.ui.rules import etype_name
from ctda.ui.settings import Settings

PATH_ROWS = 500


def view_picker(loaded: data.Loaded) -> tuple[str, Analysis, str]:
    """Baseline or a saved scenario of the run: (label, analysis, cache tag)."""
    saved, note = data.scenario_list(loaded)
    options = ["baseline", *[str(r["name"]) for r in saved]]
    key = widgets.scoped("cp_view", loaded.tag)
    run = loaded.ref.name
    share.seed(key, options, share.scenario(run))  # the one shown last, or a link's
    pick = widgets.choice("View", options, key=key, help="The observed run, or a saved what-if scenario.")
    share.keep_scenario(run, None if pick == "baseline" else pick)
    if note:
        st.caption(note)
    if pick == "baseline":
        return pick, loaded.analysis, loaded.tag
    try:
        sc = data.load_scenario(loaded, pick)
    except data.UIError as exc:
        st.error(str(exc))
        return "baseline", loaded.analysis, loaded.tag
    return f"scenario {pick}", sc.analysis, data.scenario_tag(loaded, sc)


def path_listing(a: Analysis, tag: str, window: int) -> pd.DataFrame:
    """The first stretches of a window's path, in time order."""
    ch = a.charges[a.charges.window == window].head(PATH_ROWS)
    names = data.names(tag, a)
    g, n = a.graph, a.nodes.n
    ev = ch.event.to_numpy()
    waits = ev < 0
    # a wait is shown against the event that waited (the edge's destination)
    at = np.where(waits, g.dst[ch.edge.to_numpy()] // 2, ev)
    known = at < n
    who = np.where(known, names.of(np.where(known, at, 0)), "(SINK)")
    return pd.DataFrame(
        {
            "start_ms": (ch.t0.to_numpy() - frames.t0(a)) / frames.MS,
            "ms": ch.ns.to_numpy() / frames.MS,
            "class": [CLASSES[int(c)] for c in ch.cls],
            "event": who,
            "wait": waits,
            "type": [etype_name(int(t)) for t in ch.etype],
            "rule": [g.rule_names[int(r)] for r in ch.rule],
        }
    )


def render_run(s: Settings, loaded: data.Loaded) -> None:
    label, a, tag = view_picker(loaded)
    steps = data.steps(tag, a)
    # the headline is over the steps after the warm-up: those the picker opens among
    shown = widgets.steady(steps)
    warm = len(steps) - len(shown)
    note = f"{len(shown)} of {len(steps)} windows: the first {warm} (warm-up) left out" if warm else None
    c1, c2, c3, c4 = st.columns([1, 2, 2, 1])  # step times and class names are long
    c1.metric("Windows", f"{len(shown)} of {len(steps)}" if warm else len(steps), help=note)
    c2.metric("Mean step", widgets.ms(float(shown.duration_ms.mean())), help=note)
    total = data.by_class(tag, tuple(int(i) for i in shown.idx) if warm else None, a)
    c3.metric("Bound by", str(total["class"].iloc[0]) if len(total) else "-", help=note)
    c4.metric("Share", f"{float(total.share.iloc[0]):.0%}" if len(total) else "-", help=note)
    # keyed by run and view: the steps (and their durations) are those of this view
    window = widgets.step_picker(
        steps,
        key=widgets.scoped("cp_step", tag),
        allow_all=False,
        label="Step" if tag == loaded.tag else "Step (predicted times)",
        scope=loaded.ref.name,
    )
    assert window is not None
    figures.show(figures.steps(tag, window, a), "cp_steps")
    tl = data.timeline(tag, window, s.max_events, a)
    figures.show(figures.timeline(tag, window, s.max_events, a), "cp_timeline")
    capped = (
        f"; drew {tl.shown:,} of {tl.total:,}: each lane's longest, the most critical, then the longest"
        if tl.shown < tl.total
        else ""
    )
    if tl.simplified:
        capped += f"; the path is drawn with {len(tl.path):,} of its {tl.path_points:,} points"
    st.caption(
        f"{label}: {tl.total:,} events overlap {tl.label}, {tl.critical:,} of them on its critical path"
        f"{capped}. {figures.TIMELINE_HELP}"
    )
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**Bound by, {widgets.md(tl.label)}**")
        figures.show(figures.breakdown(tag, (window,), a), "cp_breakdown")
    with right:
        st.markdown(f"**Path stretches of {widgets.md(tl.label)}** (first {PATH_ROWS}, in order)")
        st.dataframe(_listing(tag, window, a), hide_index=True, width="stretch", height=360)


@st.cache_resource(max_entries=64, show_spinner=False)
def _listing(tag: str, window: int, _a: Analysis) -> pd.DataFrame:
    return path_listing(_a, tag, window)


def render() -> None:
    s = widgets.settings()
    st.title("Critical path")
    loaded = widgets.current_loaded(s)
    if loaded is not None:
        render_run(s, loaded)


if __name__ == "__main__":
    render()
