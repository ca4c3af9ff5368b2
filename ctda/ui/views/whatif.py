"""What-if page: scale groups of events, see the predicted step time and path at once."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ctda import api
from ctda.api import CLASSES, Analysis, OptimisationError, Override, Scenario, SelectionError, StoreError
from ctda.ui import canvas, data, explain, figures, guide, widgets
from ctda.ui.settings import Settings

KINDS = ("class", "category", "hotspot", "name (regex)", "Cypher query")
#: the API's kind of group (``ctda.api.GROUP_KINDS``) per entry of the kind box
GROUP_KIND = {label: kind for kind, label in guide.KIND_LABELS.items()}
MAX_GROUPS = 8
#: examples for the Cypher group (rows of uid, plus factor or dur in µs; $run is bound)
EXAMPLES = {
    "critical kernels": (
        "MATCH (r:Run {name: $run})\nMATCH (e:Event)\n"
        "WHERE e.run_id = r.id AND e.on_cp AND e.kind = 'kernel'\nRETURN e.uid AS uid"
    ),
    "critical runtime calls": (
        "MATCH (r:Run {name: $run})\nMATCH (e:Event)\n"
        "WHERE e.run_id = r.id AND e.on_cp AND e.kind = 'runtime'\nRETURN e.uid AS uid"
    ),
    "ops over 1 ms capped at 1 ms": (
        "MATCH (r:Run {name: $run})\nMATCH (e:Event)\n"
        "WHERE e.run_id = r.id AND e.kind = 'cpu_op' AND e.dur_ns > 1000000\n"
        "RETURN e.uid AS uid, 1000.0 AS dur"
    ),
}


def query_choices() -> dict[str, str]:
    """Named what-if queries shipped in ctda/queries (``whatif*``), then the built-in examples."""
    out = {}
    for name, q in sorted(api.named_queries().items()):
        if name.startswith("whatif"):
            out[f"{name} (ctda/queries)"] = q.texts.get("", next(iter(q.texts.values())))
    out.update(EXAMPLES)
    return out


def group(a: Analysis, loaded: data.Loaded, s: Settings, i: int) -> list[Override]:
    """One group's widgets; its overrides (none while it changes nothing or is invalid)."""
    c1, c2, c3 = st.columns([1.2, 3, 2.4])
    kind = widgets.choice("Select by", KINDS, key=f"wi_kind_{i}", where=c1)
    # the default goes through the session, not `value=`: a value restored after a visit
    # to another page must not clash with a default passed to the widget
    factor = guide.factor(i, c3)
    if kind == "Cypher query":
        return cypher_group(a, loaded, s, i, factor, c2)
    if kind == "class":
        value = widgets.choice("Class", data.classes_present(loaded.tag, a), key=f"wi_class_{i}", where=c2)
    elif kind == "category":
        value = widgets.choice("Category", data.categories(loaded.tag, a), key=f"wi_cat_{i}", where=c2)
    elif kind == "hotspot":
        names = list(data.names(loaded.tag, a).names)
        value = widgets.choice("Hotspot (event name)", names, key=f"wi_hot_{i}", where=c2)
    else:
        value = c2.text_input("Name pattern (regex)", key=f"wi_name_{i}", placeholder="e.g. ^aten::conv")
        if not value:
            return []
    try:
        # checked even at factor 1, so a bad pattern is reported before the factor moves
        override = api.select_group(a, GROUP_KIND[kind], value, factor)
    except SelectionError as exc:
        st.warning(str(exc))
        return []
    return [] if factor == 1.0 else [override]


def cypher_group(
    a: Analysis, loaded: data.Loaded, s: Settings, i: int, factor: float, where: DeltaGenerator
) -> list[Override]:
    """Events picked by a read-only query returning ``uid`` (and ``factor`` or ``dur`` µs)."""
    choices = query_choices()
    pick = widgets.choice("Query", list(choices), key=f"wi_qpick_{i}", where=where)
    text_key = f"wi_qtext_{i}"
    if st.session_state.get(f"wi_qlast_{i}") != pick:
        st.session_state[text_key] = choices[pick]
        st.session_state[f"wi_qlast_{i}"] = pick
    text = st.text_area("Cypher ($run is this run)", key=text_key, height=120)
    rows_key = f"wi_rows_{i}"
    if st.button("Run query", key=f"wi_qrun_{i}"):
        try:
            res = data.run_query(s.db, text, {"run": loaded.ref.name} if "$run" in text else {})
            st.session_state[rows_key] = (text, res.records())
        except (data.UIError, StoreError) as exc:
            st.session_state.pop(rows_key, None)
            st.error(str(exc))
            return []
    got = st.session_state.get(rows_key)
    if not got or got[0] != text:
        st.caption("Run the query to select its events.")
        return []
    rows = got[1]
    # rows without their own factor or duration take the slider's factor
    if rows and "factor" not in rows[0] and "dur" not in rows[0]:
        if factor == 1.0:
            st.caption(f"{len(rows):,} events selected; move the factor to change them.")
            return []
        rows = [{**r, "factor": factor} for r in rows]
    st.caption(f"{len(rows):,} rows")
    try:
        return api.overrides(a, rows=rows, rows_label=f"cypher:{pick}")
    except SelectionError as exc:
        st.warning(f"The query's rows cannot be applied: {exc}.")
        return []


def outcome(loaded: data.Loaded, sc: Scenario, tag: str) -> None:
    """Predicted step time, bound-by breakdown and path of one step (``tag``: the
    scenario's cache tag, :func:`data.scenario_tag`)."""
    stt = sc.step_times()
    base_ms, pred_ms = float(stt.base_ns.mean()) / 1e6, float(stt.predicted_ns.mean()) / 1e6
    joined, left = sc.moved()
    c1, c2, c3 = st.columns(3)
    c1.metric("Mean step (observed)", widgets.ms(base_ms))
    change = (pred_ms - base_ms) / base_ms if base_ms else 0.0
    c2.metric("Mean step (predicted)", widgets.ms(pred_ms), delta=widgets.pct(change), delta_color="inverse")
    c3.metric("Critical path changes", f"+{len(joined):,} / -{len(left):,} events")
    for line in api.blind_spots(sc):
        st.warning(f"Not in this prediction: {line}.", icon=":material/visibility_off:")
    observed = data.by_class(loaded.tag, None, loaded.analysis)
    predicted = data.by_class(tag, None, sc.analysis)
    by = pd.merge(
        observed[["class", "cp_ms"]].rename(columns={"cp_ms": "a_ms"}),
        predicted[["class", "cp_ms"]].rename(columns={"cp_ms": "b_ms"}),
        on="class",
        how="outer",
    ).fillna(0.0)
    by["order"] = [CLASSES.index(c) for c in by["class"]]
    why = explain.reshuffle(
        observed,
        predicted,
        lambda: figures.lane_shares(loaded.tag, loaded.analysis),
        lambda: figures.lane_shares(tag, sc.analysis),
    )
    if why:
        st.info(why)
    left_col, right_col = st.columns(2)
    with left_col:
        chart = canvas.pairs(
            by.sort_values("order"), "class", "observed", "predicted", "Bound by, all windows"
        )
        figures.show(chart, "wi_breakdown")
    with right_col:
        per = pd.DataFrame({"label": stt.window, "a_ms": stt.base_ns / 1e6, "b_ms": stt.predicted_ns / 1e6})
        figures.show(canvas.step_compare(per, "observed", "predicted", "Step time"), "wi_steps")


def predicted_path(s: Settings, loaded: data.Loaded, sc: Scenario, tag: str) -> None:
    a = sc.analysis
    # labelled from the step times the page already has: a per-class table of every
    # predicted window would cost a pass over all charges on each slider move
    stt = sc.step_times()
    labels = {
        i: f"{w} · {p / 1e6:.3f} ms predicted (observed {b / 1e6:.3f} ms)"
        for i, (w, p, b) in enumerate(zip(stt.window, stt.predicted_ns, stt.base_ns))
    }
    # keyed by the scenario: its steps and their predicted times are this scenario's; it
    # opens on the run's step (the one picked on any page, else the median observed one)
    window = widgets.step_picker(
        data.steps(loaded.tag, loaded.analysis),
        key=widgets.scoped("wi_step", tag),
        allow_all=False,
        label="Predicted path of step",
        scope=loaded.ref.name,
        labels=labels,
    )
    assert window is not None
    figures.show(figures.timeline(tag, window, s.max_events, a), "wi_timeline")
    st.caption(figures.TIMELINE_HELP)


def free_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name (2)``, ``name (3)``, ... whichever is not saved yet."""
    k = 2
    out = name
    while out in taken:
        out, k = f"{name} ({k})", k + 1
    return out


def save_and_export(loaded: data.Loaded, sc: Scenario, tag: str, digest: str) -> None:
    saved, _ = data.scenario_list(loaded)
    taken = {str(r.get("name")) for r in saved}
    # the Replace choice is drawn above the button but after its click is handled, so it
    # offers itself as soon as a Save takes the name (its value is last run's, kept by key)
    choice = st.container()
    # listed before a Save: it changes no run, and a list after it would be read anew
    runs = widgets.runs(widgets.settings())
    wanted = sc.name
    replace = wanted in taken and bool(st.session_state.get("wi_replace", False))
    c1, c2 = st.columns(2)
    with c1:
        if st.button("Save scenario", key="wi_save", help="Store it with the run (Compare can use it)."):
            name = wanted if replace else free_name(wanted, taken)
            if name != wanted:
                sc = data.scenario(
                    loaded.tag,
                    data.overrides_key(sc.overrides),
                    name,
                    loaded.analysis,
                    sc.overrides,
                    tuple(sc.applied),  # a renamed copy keeps its optimisations
                )
            try:
                data.save_scenario(loaded, sc)
            except (data.UIError, StoreError) as exc:
                st.error(str(exc))
            else:
                guide.note_saved(loaded, digest, name, "Replaced" if name in taken else "Saved")
                guide.saved_for_compare(loaded, sc)
                taken.add(name)
                st.session_state["wi_replace"] = False  # ask again for the next save
        just = guide.saved_note(loaded, digest)
        if just is not None:
            # beside the button that saved it, with the way on to what it is for
            name, verb = just
            st.success(f"{verb} scenario **{widgets.md(name)}** with run {widgets.md(loaded.ref.name)}.")
            # the check of a prediction: the run recorded with the change, if ingested
            other = guide.measured_after(runs, loaded.ref.name)
            if other is not None and st.button(
                f"Compare with {widgets.md(other)}",
                key="wi_to_measured",
                type="primary",
                help=f"The prediction against run {other} as measured: its error, step by step.",
            ):
                guide.compare_with_measured(loaded.ref.name, name, other)
            if st.button(
                "Compare with the run",
                key="wi_to_compare",
                type="secondary" if other is not None else "primary",
                help="The prediction against this run as observed: the change it predicts.",
            ):
                guide.compare_with_run(loaded.ref.name, name)
    if wanted in taken:
        choice.checkbox(
            f"Replace the saved scenario **{widgets.md(wanted)}** (otherwise it is saved as "
            f"**{widgets.md(free_name(wanted, taken))}**)",
            key="wi_replace",
        )
    with c2:
        ready = st.session_state.get("wi_export")
        # writing the file walks every event in Python: only on request, then kept per scenario
        stale = ready is None or ready[0] != tag
        if stale and st.button("Prepare Perfetto export", key="wi_export_prep"):
            with st.spinner("Writing the predicted timeline…"):
                st.session_state["wi_export"] = (tag, perfetto_bytes(sc))
            ready = st.session_state["wi_export"]
        if ready is not None and ready[0] == tag:
            st.download_button(
                "Download predicted timeline (.json.gz)",
                ready[1],
                file_name=f"{_slug(loaded.ref.name)}-{_slug(sc.name)}.json.gz",
                mime="application/gzip",
                key="wi_download",
                help="Opens in ui.perfetto.dev or chrome://tracing; critical events have args.critical = 1.",
            )


def saved_scenarios(loaded: data.Loaded) -> None:
    """The run's stored scenarios, with a way to delete one."""
    saved, note = data.scenario_list(loaded)
    with st.expander(f"Saved scenarios of this run ({len(saved)})"):
        if note:
            st.caption(note)
        if not saved:
            st.caption("None yet: save one below once it predicts something worth keeping.")
            return
        rows = [
            {
                "name": r.get("name"),
                "predicted total ms": (r.get("predicted_ns") or 0) / 1e6,
                "observed total ms": (r.get("base_ns") or 0) / 1e6,
                "changes": "; ".join(
                    [*(str(o.get("label")) for o in r.get("overrides", [])), *map(str, r.get("apply", []))]
                ),
            }
            for r in saved
        ]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        c1, c2 = st.columns([3, 1])
        name = widgets.choice("Scenario", [str(r["name"]) for r in saved], key="wi_del_name", where=c1)
        if c2.button("Delete scenario", key="wi_del"):
            try:
                gone = data.delete_scenario(loaded, name)
            except (data.UIError, StoreError) as exc:
                st.error(str(exc))
                return
            widgets.flash(
                "success" if gone else "warning",
                f"Deleted scenario **{widgets.md(name)}**." if gone else f"No scenario {name!r}.",
            )
            st.rerun()


def perfetto_bytes(sc: Scenario) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "predicted.json.gz"
        api.export(sc, out)
        return out.read_bytes()


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:60] or "scenario"


#: button keys (their values cannot be set) and plain state the page keeps by itself
NOT_KEPT = (
    "wi_add",
    "wi_remove",
    "wi_save",
    "wi_export",
    "wi_download",
    "wi_del",
    "wi_qrun_",
    "wi_current",
    "wi_try_",
    "wi_to_compare",
    "wi_to_measured",
    "wi_step@",  # the step is the run's, kept across pages by widgets.step_picker
)


def render() -> None:
    st.title("What-if")
    widgets.show_flash()
    # groups, factors and names survive a visit to another page
    widgets.restore("wi_")
    try:
        page()
    finally:
        widgets.remember("wi_", skip=NOT_KEPT)


def page() -> None:
    s = widgets.settings()
    loaded = widgets.current_loaded(s)
    if loaded is None:
        return
    a = loaded.analysis
    guide.own_groups(loaded.ref.name)  # the groups picked on this run (another run has its own)
    guide.candidates(loaded)
    n = int(st.session_state.setdefault("wi_n", 1))
    overrides: list[Override] = []
    for i in range(n):
        with st.container(border=True):
            overrides += group(a, loaded, s, i)
    b1, b2, _ = st.columns([1, 1, 4])
    if b1.button("Add group", disabled=n >= MAX_GROUPS, key="wi_add"):
        st.session_state["wi_n"] = n + 1
        st.rerun()
    if b2.button("Remove last group", disabled=n <= 1, key="wi_remove"):
        st.session_state["wi_n"] = n - 1
        st.rerun()
    applied = tuple(
        st.multiselect(
            "Named optimisations",
            data.optimisation_choices(loaded.tag, a),
            key="wi_apply",
            help="Optimisations derived from the trace, no factor to guess (ctda whatif --apply); "
            "each says what it assumed. Combined with the groups above.",
        )
    )
    # the saved list is drawn here but filled last, so a Save below counts in it at once
    # (a rerun to redraw it doubled Save's wait)
    listing = st.container()
    predict(s, loaded, overrides, applied)
    with listing:
        saved_scenarios(loaded)
    guide.prepare_compare()  # after the page is drawn: it would slow the drawing down


def predict(s: Settings, loaded: data.Loaded, overrides: list[Override], applied: tuple[str, ...]) -> None:
    """The scenario of the groups and optimisations picked: its outcome, path and Save."""
    a = loaded.analysis
    if not overrides and not applied:
        st.info(
            "Try one of the changes above, or pick events and move a factor away from 1, or pick "
            "a named optimisation, to predict the step time."
        )
        return
    label = "; ".join([*(o.label for o in overrides), *applied])
    name = st.text_input("Scenario name", key="wi_name", placeholder=label) or label
    # a digest of the selected events, taken once per run: every cache below is keyed by it
    digest = data.overrides_key(overrides) + "".join(f"+{x}" for x in applied)
    try:
        sc = data.scenario(loaded.tag, digest, name, a, overrides, applied)
    except OptimisationError as exc:
        st.error(str(exc))
        return
    tag = data.scenario_tag(loaded, digest)
    st.session_state["wi_current"] = (loaded.tag, name, overrides, applied)  # for the Compare page
    changed = int(np.sum(sc.factors != 1.0))
    st.caption(
        f"{len(overrides)} selection(s) change {changed:,} events. A factor applies to the events' nested "
        "calls too; where groups overlap, the later group wins."
    )
    for line in sc.assumptions:
        st.caption(f"Assumed: {line}")
    outcome(loaded, sc, tag)
    predicted_path(s, loaded, sc, tag)
    save_and_export(loaded, sc, tag, digest)


if __name__ == "__main__":
    render()
