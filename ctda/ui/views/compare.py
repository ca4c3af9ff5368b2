"""Compare page: two runs or scenarios side by side; a prediction against the real run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ctda import api
from ctda.api import Comparison, RunInfo, StoreError
from ctda.ui import bars, canvas, data, figures, share, widgets
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


def default_pair(runs: list[RunInfo], current: str | None) -> tuple[str, str]:
    """Default "before" and "after": the current run and the run ingested just before it
    (or, for the oldest run, just after it), so the older run is always "before"."""
    order = [r.name for r in widgets.ingestion_order(runs)]
    if not order:
        return "", ""
    k = order.index(current) if current in order else len(order) - 1
    if k == 0:
        return order[0], order[min(1, len(order) - 1)]
    return order[k - 1], order[k]


def default_sides(s: Settings, runs: list[RunInfo], current: str | None) -> tuple[str, str, str, str]:
    """The pair Compare opens on: the current run (a, as measured) and a saved scenario of it
    (b: the one saved last in this session, else the last by name), or this session's
    what-if of it; a run without either beside the run ingested before it
    (:func:`default_pair`). (run a, what a, run b, what b)"""
    info = next((r for r in runs if r.name == current), None)
    try:
        loaded = None if info is None else data.load(s, info)
    except StoreError:  # said by the side that loads it
        loaded = None
    if info is not None and loaded is not None:
        names = [str(r["name"]) for r in data.scenario_list(loaded)[0]]
        just = st.session_state.get("_wi_saved_note")  # (run tag, digest, name, verb)
        if names:
            name = just[2] if just is not None and just[0] == loaded.tag and just[2] in names else names[-1]
            return info.name, BASELINE, info.name, f"scenario {name}"
        mine = st.session_state.get("wi_current")
        if mine is not None and mine[0] == loaded.tag:
            return info.name, BASELINE, info.name, SESSION
    before, after = default_pair(runs, current)
    return before, BASELINE, after, BASELINE


def pick_side(
    s: Settings, runs: list[RunInfo], key: str, default: str, what: str = BASELINE
) -> Picked | None:
    names = [r.name for r in widgets.ingestion_order(runs)]
    wkey = f"cmp_run_{key}"
    linked = share.wanted(key)  # a shared link's pair, on the session's first run
    if linked in names:
        st.session_state[wkey] = linked
    # the user's last pick (kept across pages) wins over the default; passing `index`
    # with a value in the session would draw a warning instead
    if st.session_state.get(wkey) not in names:
        st.session_state[wkey] = default if default in names else names[0]
        st.session_state.setdefault(f"cmp_what_{key}", what)
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


def headline(cmp: Comparison, a: Picked, b: Picked) -> None:
    """Mean step of each side and the change b − a (the sign of every table below); for a
    prediction against another measured run, how far off it was."""
    ma, mb = (float(cmp.summary.set_index("metric").loc["mean step ns", k]) for k in ("a", "b"))
    pe = cmp.prediction_error
    same_run = bool(pe) and a.run == b.run
    cols = st.columns(4 if pe and not same_run else 3)
    cols[0].metric("Mean step a" + (" (predicted)" if a.side.predicted else ""), widgets.ms(ma / 1e6))
    cols[1].metric("Mean step b" + (" (predicted)" if b.side.predicted else ""), widgets.ms(mb / 1e6))
    # a scenario against the run it re-times: what the change would do, not an error
    cols[2].metric(
        "Predicted change b − a" if same_run else "Change b − a",
        widgets.pct((mb - ma) / ma if ma else 0.0),
        delta=widgets.ms((mb - ma) / 1e6),
        delta_color="inverse",
    )
    if pe and not same_run:
        cols[3].metric(
            "Prediction error",
            widgets.pct(pe["relative_error"]),
            delta=widgets.ms(pe["error_ns"] / 1e6),
            delta_color="off",
            help="Predicted − measured mean step, of the measured one.",
        )


def per_step(a: Picked, b: Picked) -> None:
    """A prediction and a measured run step by step (b − a, like every delta here)."""
    steps = api.step_pairs(a.side.analysis, b.side.analysis)
    if a.run == b.run:
        what = "the predicted change"
    else:
        what = "predicted − measured" if b.side.predicted else "measured − predicted"
    st.markdown(f"**Per step** (b − a: {what})")
    st.dataframe(
        pd.DataFrame(
            {
                "step": steps.step,
                f"a: {a.label} (ms)": steps.a_ns / 1e6,
                f"b: {b.label} (ms)": steps.b_ns / 1e6,
                "b − a (ms)": steps.delta_ns / 1e6,
                "b − a (%)": 100 * steps.relative,
            }
        ),
        hide_index=True,
        width="stretch",
    )


def render() -> None:
    st.title("Compare")
    widgets.restore("cmp_")
    try:
        page()
    finally:
        widgets.remember("cmp_")


def roles(a: Picked | None, b: Picked | None) -> tuple[str, str]:
    """What the sides are called: a prediction checked against another run as measured is
    "predicted" and "measured", any other pair "before" and "after"."""
    if a is not None and b is not None and a.run != b.run and a.side.predicted != b.side.predicted:
        return ("predicted", "measured") if a.side.predicted else ("measured", "predicted")
    return "before", "after"


def page() -> None:
    s = widgets.settings()
    runs = widgets.runs(s)
    if not runs:
        st.info("Ingest a run first.")
        return
    run_a, what_a, run_b, what_b = default_sides(s, runs, st.session_state.get(widgets.RUN_KEY))
    left, right = st.columns(2)
    with left:
        head_a = st.empty()  # named once both sides are known
        a = pick_side(s, runs, "a", run_a, what_a)
    with right:
        head_b = st.empty()
        b = pick_side(s, runs, "b", run_b, what_b)
    role_a, role_b = roles(a, b)
    head_a.markdown(f"**a** ({role_a})")
    head_b.markdown(f"**b** ({role_b})")
    if a is None or b is None:
        return
    st.caption(
        "Runs are listed oldest first. Compare opens on the current run (a) and a saved scenario "
        "of it (b); a run without one beside the run before it, the older one as a."
    )
    cmp = data.comparison(a.side.tag, b.side.tag, a.side, b.side)
    st.subheader(f"{widgets.md(a.label)}  →  {widgets.md(b.label)}")
    headline(cmp, a, b)
    st.dataframe(named(summary_frame(cmp.summary), a.label, b.label), hide_index=True, width="stretch")
    by = ms_frame(cmp.by_class, "class")
    hot = ms_frame(cmp.hotspots, "name")
    if cmp.prediction_error:
        per_step(a, b)
    notes = api.difference_notes(cmp)
    if notes:
        st.markdown(
            "**Where they differ most** (b − a on the critical path)\n"
            + "\n".join(f"- {widgets.md(n)}" for n in notes)
        )
    figures.show(canvas.pairs(by, "class", f"a: {a.label}", f"b: {b.label}", "Bound by"), "cmp_class")
    st.dataframe(named(by, a.label, b.label), hide_index=True, width="stretch")
    # the full width: hotspot names are long, and half the page left the bars no room
    figures.show(bars.deltas(hot, "name", "Hotspot deltas (largest first)"), "cmp_hot")
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
