"""Compare page: two runs or scenarios side by side; a prediction against the real run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ctda.store.base import RunInfo, StoreError
from ctda.ui import charts, data, widgets
from ctda.ui.settings import Settings

BASELINE = "baseline (observed)"
SESSION = "this session's what-if (unsaved)"
TOP = 30


@dataclass
class Picked:
    """One side as picked: a label, the side itself, and whether it is a prediction."""

    label: str
    side: data.CachedSide


def pick_side(s: Settings, runs: list[RunInfo], key: str, default: int) -> Picked | None:
    names = [r.name for r in runs]
    run = widgets.choice("Run", names, key=f"cmp_run_{key}", index=min(default, len(names) - 1))
    info = next(r for r in runs if r.name == run)
    loaded = widgets.load(s, info)
    if loaded is None:
        return None
    saved, note = data.stored_scenarios(loaded)
    options = [BASELINE, *[f"scenario {r['name']}" for r in saved]]
    current = st.session_state.get("wi_current")
    if current is not None and current[0] == loaded.tag:
        options.append(SESSION)
    what = widgets.choice("What", options, key=f"cmp_what_{key}")
    if note:
        st.caption(note)
    a = loaded.analysis
    if what == BASELINE:
        return Picked(run, data.CachedSide(run, a, predicted=False, tag=loaded.tag))
    if what == SESSION and current is not None:
        _, name, overrides = current
        sc = data.scenario(loaded.tag, data.overrides_key(overrides), name, a, overrides)
    else:
        try:
            sc = data.load_scenario(loaded, what.removeprefix("scenario "))
        except (data.UIError, StoreError) as exc:
            st.error(str(exc))
            return None
    label = f"{run} / {sc.name}"
    return Picked(
        label, data.CachedSide(label, sc.analysis, predicted=True, tag=data.scenario_tag(loaded, sc))
    )


def ms_frame(df: pd.DataFrame, key: str) -> pd.DataFrame:
    return pd.DataFrame(
        {key: df[key], "a_ms": df.a_ns / 1e6, "b_ms": df.b_ns / 1e6, "delta_ms": df.delta_ns / 1e6}
    )


def summary_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary with nanosecond metrics shown in ms."""
    rows = []
    for r in summary.to_dict("records"):
        scale, metric = (
            (1e6, str(r["metric"]).replace(" ns", " (ms)"))
            if r["metric"].endswith(" ns")
            else (1, r["metric"])
        )
        rows.append({"metric": metric, "a": r["a"] / scale, "b": r["b"] / scale, "delta": r["delta"] / scale})
    return pd.DataFrame(rows)


def render() -> None:
    s = widgets.settings()
    st.title("Compare")
    runs = widgets.runs(s)
    if not runs:
        st.info("Ingest a run first.")
        return
    left, right = st.columns(2)
    with left:
        st.markdown("**a** (before)")
        a = pick_side(s, runs, "a", 0)
    with right:
        st.markdown("**b** (after)")
        b = pick_side(s, runs, "b", 1)
    if a is None or b is None:
        return
    cmp = data.comparison(a.side.tag, b.side.tag, a.side, b.side)
    st.subheader(f"{a.label}  →  {b.label}")
    if cmp.prediction_error:
        pe = cmp.prediction_error
        c1, c2, c3 = st.columns(3)
        c1.metric("Predicted mean step", widgets.ms(pe["predicted_mean_step_ns"] / 1e6))
        c2.metric("Measured mean step", widgets.ms(pe["measured_mean_step_ns"] / 1e6))
        c3.metric(
            "Prediction error",
            widgets.pct(pe["relative_error"]),
            delta=widgets.ms(pe["error_ns"] / 1e6),
            delta_color="off",
        )
    st.dataframe(summary_frame(cmp.summary), hide_index=True, width="stretch")
    by = ms_frame(cmp.by_class, "class")
    hot = ms_frame(cmp.hotspots, "name")
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(
            charts.side_by_side(by, "class", "a", "b", "Bound by"), width="stretch", key="cmp_class"
        )
        st.dataframe(by, hide_index=True, width="stretch")
    with c2:
        st.plotly_chart(
            charts.deltas(hot, "name", "Hotspot deltas (largest first)"), width="stretch", key="cmp_hot"
        )
    st.markdown(f"**Hotspot deltas** (top {TOP} by size of change)")
    st.dataframe(hot.head(TOP), hide_index=True, width="stretch")
    st.markdown(f"**Call-path deltas** (top {TOP})")
    st.dataframe(ms_frame(cmp.call_paths, "call_path").head(TOP), hide_index=True, width="stretch")


if __name__ == "__main__":
    render()
