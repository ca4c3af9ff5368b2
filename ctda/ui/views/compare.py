"""Compare page: two runs or scenarios side by side; a prediction against the real run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ctda.api import RunInfo, StoreError
from ctda.ui import canvas, charts, data, figures, share, widgets
from ctda.ui.settings import Settings

BASELINE = widgets.BASELINE
SESSION = "this session's what-if (unsaved)"
TOP = 30


@dataclass
class Picked:
    """One side as picked: a label, the side itself, and the run it belongs to."""

    label: str
    side: data.CachedSide
    run: str = ""


def ingestion_order(runs: list[RunInfo]) -> list[RunInfo]:
    """Runs oldest first (ingestion time, then id: ids grow with each ingest)."""
    return sorted(runs, key=lambda r: (r.ingested_at or "", r.id))


def default_pair(runs: list[RunInfo], current: str | None) -> tuple[str, str]:
    """Default "before" and "after": the current run and the run ingested just before it
    (or, for the oldest run, just after it), so the older run is always "before"."""
    order = [r.name for r in ingestion_order(runs)]
    if not order:
        return "", ""
    k = order.index(current) if current in order else len(order) - 1
    if k == 0:
        return order[0], order[min(1, len(order) - 1)]
    return order[k - 1], order[k]


def pick_side(s: Settings, runs: list[RunInfo], key: str, default: str) -> Picked | None:
    names = [r.name for r in ingestion_order(runs)]
    wkey = f"cmp_run_{key}"
    linked = share.wanted(key)  # a shared link's pair, on the session's first run
    if linked in names:
        st.session_state[wkey] = linked
    # the user's last pick (kept across pages) wins over the default; passing `index`
    # with a value in the session would draw a warning instead
    if st.session_state.get(wkey) not in names:
        st.session_state[wkey] = default if default in names else names[0]
    run = widgets.choice("Run", names, key=wkey)
    share.put(key, run)
    info = next(r for r in runs if r.name == run)
    loaded = widgets.load(s, info)
    if loaded is None:
        return None
    saved, note = data.scenario_list(loaded)
    options = [BASELINE, *[f"scenario {r['name']}" for r in saved]]
    current = st.session_state.get("wi_current")
    if current is not None and current[0] == loaded.tag:
        options.append(SESSION)
    what = widgets.choice("What", options, key=f"cmp_what_{key}")
    if note:
        st.caption(note)
    a = loaded.analysis
    if what == BASELINE:
        return Picked(run, data.CachedSide(run, a, predicted=False, tag=loaded.tag), run)
    if what == SESSION and current is not None:
        _, name, overrides, *rest = current
        applied = tuple(rest[0]) if rest else ()
        key = data.overrides_key(overrides) + "".join(f"+{x}" for x in applied)
        sc = data.scenario(loaded.tag, key, name, a, overrides, applied)
    else:
        try:
            sc = data.load_scenario(loaded, what.removeprefix("scenario "))
        except (data.UIError, StoreError) as exc:
            st.error(str(exc))
            return None
    label = f"{run} / {sc.name}"
    return Picked(
        label, data.CachedSide(label, sc.analysis, predicted=True, tag=data.scenario_tag(loaded, sc)), run
    )


def ms_frame(df: pd.DataFrame, key: str) -> pd.DataFrame:
    return pd.DataFrame(
        {key: df[key], "a_ms": df.a_ns / 1e6, "b_ms": df.b_ns / 1e6, "delta_ms": df.delta_ns / 1e6}
    )


def named(df: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """``df`` with its a/b columns named after the two sides (what people read)."""
    cols = {"a_ms": f"a: {a} (ms)", "b_ms": f"b: {b} (ms)", "delta_ms": "b − a (ms)"}
    cols |= {"a": f"a: {a}", "b": f"b: {b}", "delta": "b − a"}
    return df.rename(columns=cols)


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
    st.title("Compare")
    widgets.restore("cmp_")
    try:
        page()
    finally:
        widgets.remember("cmp_")


def page() -> None:
    s = widgets.settings()
    runs = widgets.runs(s)
    if not runs:
        st.info("Ingest a run first.")
        return
    before, after = default_pair(runs, st.session_state.get(widgets.RUN_KEY))
    left, right = st.columns(2)
    with left:
        st.markdown("**a** (before)")
        a = pick_side(s, runs, "a", before)
    with right:
        st.markdown("**b** (after)")
        b = pick_side(s, runs, "b", after)
    if a is None or b is None:
        return
    st.caption("Runs are listed oldest first; by default the older run is a (before).")
    cmp = data.comparison(a.side.tag, b.side.tag, a.side, b.side)
    st.subheader(f"{widgets.md(a.label)}  →  {widgets.md(b.label)}")
    if cmp.prediction_error:
        pe = cmp.prediction_error
        c1, c2, c3 = st.columns(3)
        c1.metric("Predicted mean step", widgets.ms(pe["predicted_mean_step_ns"] / 1e6))
        if a.run == b.run:
            # a scenario against the run it re-times: what the change would do, not an error
            c2.metric("Observed mean step", widgets.ms(pe["measured_mean_step_ns"] / 1e6))
            pred, meas = pe["predicted_mean_step_ns"], pe["measured_mean_step_ns"]
            c3.metric(
                "Predicted change",
                widgets.pct((pred - meas) / meas if meas else 0.0),
                delta=widgets.ms((pred - meas) / 1e6),
                delta_color="inverse",
            )
        else:
            c2.metric("Measured mean step", widgets.ms(pe["measured_mean_step_ns"] / 1e6))
            c3.metric(
                "Prediction error",
                widgets.pct(pe["relative_error"]),
                delta=widgets.ms(pe["error_ns"] / 1e6),
                delta_color="off",
            )
    st.dataframe(named(summary_frame(cmp.summary), a.label, b.label), hide_index=True, width="stretch")
    by = ms_frame(cmp.by_class, "class")
    hot = ms_frame(cmp.hotspots, "name")
    c1, c2 = st.columns(2)
    with c1:
        figures.show(canvas.pairs(by, "class", f"a: {a.label}", f"b: {b.label}", "Bound by"), "cmp_class")
        st.dataframe(named(by, a.label, b.label), hide_index=True, width="stretch")
    with c2:
        st.plotly_chart(
            charts.deltas(hot, "name", "Hotspot deltas (largest first)"),
            width="stretch",
            key="cmp_hot",
            config=figures.CONFIG,
        )
    st.markdown(f"**Hotspot deltas** (top {TOP} by size of change)")
    st.dataframe(named(hot.head(TOP), a.label, b.label), hide_index=True, width="stretch")
    st.markdown(f"**Call-path deltas** (top {TOP})")
    st.dataframe(
        named(ms_frame(cmp.call_paths, "call_path").head(TOP), a.label, b.label),
        hide_index=True,
        width="stretch",
    )


if __name__ == "__main__":
    render()
