"""The What-if page's guidance: the ranked candidates (``ctda opportunities``) one click away,
a group's factor by slider, typed value or "removed", and groups kept per run.

A candidate is applied by writing the group widgets' values before they are drawn (a
button's callback runs before the page), so what it set is what the page then shows and
can still be edited.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pandas as pd
import streamlit as st

from ctda.api import RunInfo
from ctda.ui import data, widgets

#: the factor widgets' range: 0 (removed) to 10 times the observed time
MAX_FACTOR = 10.0
#: candidates offered as buttons (the table above them lists them all)
SHOWN = 8
#: a group's widgets and the optimisations: what belongs to the run they were picked on
GROUP_KEYS: tuple[str, ...] = (
    "wi_n",
    "wi_kind_",
    "wi_class_",
    "wi_cat_",
    "wi_hot_",
    "wi_name_",
    "wi_f_",
    "wi_ft_",
    "wi_fv_",
    "wi_rm_",
)
GROUP_KEYS += ("wi_qpick_", "wi_qtext_", "wi_qlast_", "wi_rows_", "wi_apply", "wi_name")
_OWNER = "_wi_owner"
_BY_RUN = "_wi_by_run"
#: what the page's kind box calls each kind of group (see ``ctda.api.GROUP_KINDS``)
KIND_LABELS = {"class": "class", "category": "category", "hotspot": "hotspot", "name": "name (regex)"}
_VALUE_KEY = {"class": "wi_class_", "category": "wi_cat_", "hotspot": "wi_hot_", "name": "wi_name_"}


def _is_group_key(k: object) -> bool:
    return isinstance(k, str) and k.startswith(GROUP_KEYS) and not k.startswith("wi_step@")


def own_groups(run: str) -> None:
    """Make the group widgets the ones of ``run``: a run's groups stay with it (another run
    has other events, and opens with its own groups, or none), and come back with it."""
    owner = st.session_state.get(_OWNER)
    if owner == run:
        return
    by_run: dict[str, dict[str, Any]] = st.session_state.setdefault(_BY_RUN, {})
    keys = [k for k in map(str, list(st.session_state)) if _is_group_key(k)]
    if owner is not None:
        by_run[owner] = {k: st.session_state[k] for k in keys}
    for k in keys:
        del st.session_state[k]
    st.session_state.update(by_run.get(run, {}))
    st.session_state[_OWNER] = run


def factor(i: int, where: Any) -> float:
    """Group ``i``'s factor: a slider and a typed value showing the same number, or 0 when
    "removed".

    The factor lives in ``wi_fv_{i}`` as (value, slider version, typed version); each widget
    writes it and never the other widget's value. A widget whose value the server changes
    is reported with its old value by a browser that sent another change before it got the
    new one (arrow keys pressed faster than the page reruns), and Streamlit takes that stale
    value for an edit: the slider jumped back to an older factor while the prediction moved
    on. The twin is instead drawn anew under the next version of its key, starting at the
    factor, and a change from a widget of an older version is ignored.
    """
    v = _state(i)[0]
    sk, tk = widget_keys(st.session_state, i)
    st.session_state.setdefault(sk, v)
    st.session_state.setdefault(tk, v)
    removed = where.checkbox("removed", key=f"wi_rm_{i}", help="Remove the events' time (factor 0).")
    c1, c2 = where.columns([3, 2])
    c1.slider(
        "Factor",
        0.0,
        MAX_FACTOR,
        step=notch(v),
        key=sk,
        disabled=removed,
        on_change=_moved,
        args=(i, sk),
        help="New time as a multiple of the old: 0 removes the work, 0.5 halves it, 2 doubles it.",
    )
    c2.number_input(
        "or type it",
        0.0,
        MAX_FACTOR,
        step=0.01,
        format="%.3g",
        key=tk,
        disabled=removed,
        on_change=_moved,
        args=(i, tk),
    )
    return 0.0 if removed else v


#: the slider's notches, coarsest first: 0.05 while the factor is on that grid, finer when a
#: typed factor is not, so the slider shows the factor in use and not the nearest notch
NOTCHES = (0.05, 0.01, 0.001)


def notch(v: float) -> float:
    """The coarsest of :data:`NOTCHES` that ``v`` lies on (the finest when none: the typed
    box shows three significant digits too)."""
    for step in NOTCHES:
        if abs(v / step - round(v / step)) < 1e-6:
            return step
    return NOTCHES[-1]


def _state(i: int) -> tuple[float, int, int]:
    return _parse(st.session_state.get(f"wi_fv_{i}"))


def _parse(got: Any) -> tuple[float, int, int]:
    return (float(got[0]), int(got[1]), int(got[2])) if got else (1.0, 0, 0)


def _names(i: int, state: tuple[float, int, int]) -> tuple[str, str]:
    """The keys of group ``i``'s slider and typed value at their versions ("wi_f_0", then
    "wi_f_0~1", ...)."""
    _, sv, tv = state
    return f"wi_f_{i}" + (f"~{sv}" if sv else ""), f"wi_ft_{i}" + (f"~{tv}" if tv else "")


def widget_keys(state: Any, i: int) -> tuple[str, str]:
    """The keys of group ``i``'s slider and typed value in a session state (an ``AppTest``'s
    too): the widgets to drive."""
    return _names(i, _parse(state.get(f"wi_fv_{i}")))


def _moved(i: int, key: str) -> None:
    """A factor widget changed (its callback): the factor follows it, the twin is redrawn."""
    sk, tk = widget_keys(st.session_state, i)
    if key not in (sk, tk) or key not in st.session_state:
        return  # a widget of an older version, reported by a page behind the server
    v, sv, tv = _state(i)
    new = float(st.session_state[key])
    if new == v:
        return
    st.session_state[f"wi_fv_{i}"] = (new, sv, tv + 1) if key == sk else (new, sv + 1, tv)
    st.session_state.pop(tk if key == sk else sk, None)  # the old twin: neither kept nor restored


def candidates(loaded: data.Loaded) -> None:
    """The ranked what-ifs of the run, each a button that sets it up as the scenario."""
    df = data.whatif_candidates(loaded.tag, loaded.analysis)
    st.markdown("**Where to start**: what each change would save, best first")
    if df.empty:
        st.caption("Nothing on this run's critical path to rank.")
        return
    shown = df.head(SHOWN)
    rows = [
        {
            "change": describe(r.kind, r.target),
            "saves ms": r.saving_ns / 1e6,
            "saves %": 100 * r.saving_share,
            "if removed, saves ms": r.removed_ns / 1e6 if r.removed_ns >= 0 else None,
        }
        for r in shown.itertuples()
    ]
    ms = st.column_config.NumberColumn(format="%.3f")
    config = {
        "saves ms": ms,
        "if removed, saves ms": ms,
        "saves %": st.column_config.NumberColumn(format="%.1f"),
    }
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=config)
    cols = st.columns(4)
    for k, r in enumerate(shown.itertuples()):
        what = str(r.target) if r.kind == "optimisation" else f"{r.target} ×0.5"
        cols[k % 4].button(
            f"Try {short(what, 28)}",
            key=f"wi_try_{k}",
            on_click=apply_candidate,
            args=(str(r.kind), str(r.target), float(r.factor)),
            help=f"Set up {describe(r.kind, r.target)} below (replacing the groups); edit it from there.",
            width="stretch",
        )


def describe(kind: str, target: str) -> str:
    """A candidate for people: "hotspot aten::mm 2x faster", "named optimisation bf16"."""
    return f"named optimisation {target}" if kind == "optimisation" else f"{kind} {target} 2x faster"


def short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def apply_candidate(kind: str, target: str, f: float) -> None:
    """Make the page's groups this candidate alone (a button's callback: before drawing)."""
    _, sv, tv = _state(0)
    for k in [k for k in list(st.session_state) if _is_group_key(k)]:
        del st.session_state[k]
    widgets.unkeep("wi_", _is_group_key)  # else the page's restore brings the old groups back
    st.session_state["wi_n"] = 1
    if kind == "optimisation":
        st.session_state["wi_apply"] = [target]
        return
    st.session_state["wi_apply"] = []
    st.session_state["wi_kind_0"] = KIND_LABELS[kind]
    st.session_state[f"{_VALUE_KEY[kind]}0"] = target
    # the factor widgets drawn anew (not set), like a change of the twin in :func:`_moved`
    st.session_state["wi_fv_0"] = (f, sv + 1, tv + 1)


def saved_note(loaded: data.Loaded, digest: str) -> tuple[str, str] | None:
    """The scenario just saved from what the page shows now (name, verb), if any."""
    got = st.session_state.get("_wi_saved_note")
    if got is None or got[0] != loaded.tag or got[1] != digest:
        return None
    return got[2], got[3]


def note_saved(loaded: data.Loaded, digest: str, name: str, verb: str) -> None:
    st.session_state["_wi_saved_note"] = (loaded.tag, digest, name, verb)


def measured_after(runs: list[RunInfo], run: str) -> str | None:
    """The run a prediction made on ``run`` is checked against: the run ingested just after
    it (a before/after pair is ingested in that order), else the newest other run; None
    when the store holds no other run."""
    order = [r.name for r in widgets.ingestion_order(runs)]
    if run not in order or len(order) < 2:
        return None
    k = order.index(run)
    return order[k + 1] if k + 1 < len(order) else order[-2]


def compare_with_measured(run: str, scenario: str, measured: str) -> None:
    """Open Compare on run ``measured`` as recorded (a) and the scenario of ``run`` that
    predicted it (b): every b − a there is predicted − measured, the prediction's error."""
    st.session_state.update(
        {
            "cmp_run_a": measured,
            "cmp_what_a": widgets.BASELINE,
            "cmp_run_b": run,
            "cmp_what_b": f"scenario {scenario}",
        }
    )
    st.switch_page("views/compare.py")


def compare_with_run(run: str, scenario: str) -> None:
    """Open Compare on the run (a, observed) and its scenario (b): its boxes are set here,
    before it draws them (and win over what it showed last)."""
    st.session_state.update(
        {
            "cmp_run_a": run,
            "cmp_what_a": widgets.BASELINE,
            "cmp_run_b": run,
            "cmp_what_b": f"scenario {scenario}",
        }
    )
    st.switch_page("views/compare.py")


# --- Save's way on to Compare, prepared while the person reads the confirmation ---------

_PREPARE = "_compare_prepare"


def saved_for_compare(loaded: data.Loaded, sc: Any) -> None:
    """Remember the scenario saved in this script run, for :func:`prepare_compare`."""
    st.session_state[_PREPARE] = (loaded, sc)


def prepare_compare() -> None:
    """Start preparing Compare for the scenario saved in this script run, if any: called
    once the page is drawn, as the computation would slow the drawing down."""
    got = st.session_state.pop(_PREPARE, None)
    if got is not None:
        threading.Thread(target=_prepare_compare, args=got, daemon=True, name="ctda-compare").start()


def _prepare_compare(loaded: data.Loaded, sc: Any) -> None:
    """The report and call paths of both sides of "Compare with the run" (~0.35 s at 1M
    events for a new scenario), computed in a thread: the caches are keyed as Compare's
    sides key them, and a Compare opened before this ends waits for it (one computation
    per key) instead of computing again."""
    # only a head start: Compare computes (and reports) whatever failed here itself
    with contextlib.suppress(Exception):
        for tag, a in ((data.scenario_tag(loaded, sc), sc.analysis), (loaded.tag, loaded.analysis)):
            data.report(tag, "all", a)
            data.side_call_paths(tag, a)
