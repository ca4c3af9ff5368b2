"""Pieces every page shares: settings, the run picker, step pickers, one-line errors."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ctda.api import RunInfo, StoreError
from ctda.ui import data, share
from ctda.ui.settings import Settings, from_argv

T = TypeVar("T")
RUN_KEY = "run"
_PENDING_RUN = "_pending_run"
_FLASH = "_flash"
#: the Compare page's side that is the run as measured (not one of its scenarios)
BASELINE = "baseline (observed)"


def choice(label: str, options: Sequence[T], key: str, where: DeltaGenerator | None = None, **kw: Any) -> T:
    """A selectbox over non-empty ``options`` that always has a value (typed as one).

    A kept value that is no longer an option (a scenario of another run) is dropped
    first, so the box falls back to its default instead of showing a stale choice."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]
    value = (where or st).selectbox(label, options, key=key, **kw)
    return options[0] if value is None else value


def settings() -> Settings:
    """This server's settings (argv after ``--``, else the environment)."""
    return from_argv()


@st.cache_data(ttl=600, max_entries=16, show_spinner=False)
def _runs(db: str | None, stamp: float) -> list[RunInfo]:
    return data.list_runs(db)


def runs(s: Settings) -> list[RunInfo]:
    """Complete runs in the store; a store problem becomes one line on the page."""
    try:
        return _runs(s.db, data.store_stamp(s.db))
    except StoreError as exc:
        st.error(f"store {s.location}: {exc}")
        return []


def ingestion_order(runs: list[RunInfo]) -> list[RunInfo]:
    """Runs oldest first (ingestion time, then id: ids grow with each ingest)."""
    return sorted(runs, key=lambda r: (r.ingested_at or "", r.id))


def forget_runs() -> None:
    """Drop the cached listing after this UI wrote to the store."""
    _runs.clear()
    data.run_breakdown.clear()


def sidebar(s: Settings) -> None:
    """Store location and the run every page works on (kept across pages)."""
    with st.sidebar:
        st.caption(f"store: `{s.location}`")
        names = [r.name for r in runs(s)]
        wanted = share.wanted(RUN_KEY)  # a shared link's run, on the session's first run
        if wanted in names:
            st.session_state[RUN_KEY] = wanted
        pending = st.session_state.pop(_PENDING_RUN, None)
        if pending in names:
            st.session_state[RUN_KEY] = pending
        if st.session_state.get(RUN_KEY) not in names:
            st.session_state.pop(RUN_KEY, None)
            if s.run in names:  # ``ctda ui --run``: what a session opens on
                st.session_state[RUN_KEY] = s.run
        if names:
            st.selectbox("Run", names, key=RUN_KEY, help="The run the analysis pages show.")
            share.put(RUN_KEY, st.session_state[RUN_KEY])
        else:
            st.info("No runs yet: ingest a trace on the Runs page.")


def select_run(name: str) -> None:
    """Make ``name`` the current run from the next rerun on (the picker is already drawn)."""
    st.session_state[_PENDING_RUN] = name


def flash(kind: str, text: str) -> None:
    """A message that survives one ``st.rerun()`` (shown by :func:`show_flash`)."""
    st.session_state[_FLASH] = (kind, text)


def show_flash() -> None:
    kind, text = st.session_state.pop(_FLASH, ("", ""))
    show = {"success": st.success, "info": st.info, "warning": st.warning, "error": st.error}.get(kind)
    if show is not None:
        show(text)


def current_run(s: Settings) -> RunInfo | None:
    """The run picked in the sidebar, or None (with a hint on the page)."""
    name = st.session_state.get(RUN_KEY)
    info = next((r for r in runs(s) if r.name == name), None)
    if info is None:
        st.info("Pick a run in the sidebar, or ingest a trace on the Runs page.")
    return info


def load(s: Settings, info: RunInfo) -> data.Loaded | None:
    """The run's analysis, or None after showing why it cannot be loaded."""
    try:
        loaded = data.load(s, info)
    except StoreError as exc:
        st.error(str(exc))
        return None
    if loaded.source != "snapshot":
        st.caption(f"Analysis recomputed from {info.file} (the store holds no snapshot of this run).")
    return loaded


def current_loaded(s: Settings) -> data.Loaded | None:
    """The analysis of the run picked in the sidebar, or None after saying why there is none."""
    info = current_run(s)
    return None if info is None else load(s, info)


def scoped(key: str, *scope: object) -> str:
    """``key`` re-keyed for what it depends on (a run, a scenario, a hotspot).

    A keyed Streamlit widget keeps its identity, and so its value and what the browser
    shows, while its options change underneath it: a step picker keyed by its name alone
    still shows the previous run's step. Keyed by what it shows, it starts afresh instead.
    """
    digest = hashlib.sha1("\x1f".join(map(str, scope)).encode()).hexdigest()[:10]
    return f"{key}@{digest}"


def key_of(state_keys: Iterable[str], key: str) -> str | None:
    """The scoped key (see :func:`scoped`) of ``key`` among ``state_keys``, if drawn."""
    return next((k for k in state_keys if k.startswith(f"{key}@")), None)


_KEPT = "_kept_"


def restore(prefix: str) -> None:
    """Put back the widget values a page had when it was last left (see :func:`remember`).

    Streamlit drops a widget's value from the session once a run does not draw it, so a
    page's choices would reset each time the user visits another page. Values are only
    restored for widgets not already in the session (the user's latest action wins).
    """
    for k, v in st.session_state.get(_KEPT + prefix, {}).items():
        if k not in st.session_state:
            st.session_state[k] = v


def unkeep(prefix: str, drop: Callable[[str], bool]) -> None:
    """Forget the kept values (see :func:`remember`) whose keys ``drop`` selects: a callback
    that clears widgets clears them here too, or :func:`restore` would put them back."""
    kept = st.session_state.get(_KEPT + prefix, {})
    for k in [k for k in kept if drop(k)]:
        del kept[k]


def remember(prefix: str, skip: Iterable[str] = ()) -> None:
    """Keep the values of the widgets whose keys start with ``prefix`` (not the buttons
    named in ``skip``, whose values cannot be set) for :func:`restore`."""
    skip = tuple(skip)
    st.session_state[_KEPT + prefix] = {
        k: st.session_state[k]
        for k in list(st.session_state)
        if isinstance(k, str) and k.startswith(prefix) and not k.startswith(skip)
    }


def step_label(row: Any) -> str:
    """A step row (Series or itertuples row) as its picker label."""
    return f"{row.window} · {row.duration_ms:.3f} ms · {row.bound_by}"


def step_picker(
    steps: pd.DataFrame,
    key: str,
    allow_all: bool,
    label: str = "Step",
    scope: str = "",
    labels: dict[int, str] | None = None,
) -> int | None:
    """Window index picked (None: all windows, when ``allow_all``).

    With a ``scope`` (the run's name) the picker opens on the step last picked for that
    run on any page, or a shared link's step, else on the representative step (the median
    one after the warm-up, :func:`share.representative`; all windows when ``allow_all``),
    and its pick is kept for the run and written to the URL. Warm-up steps say so."""
    options: list[int | None] = [None] if allow_all else []
    options += [int(i) for i in steps.idx]
    rows: Sequence[Any] = list(steps.itertuples())  # rows typed loosely by the stubs
    shown = labels or {int(r.idx): step_label(r) for r in rows}
    warm = {int(i) for i in steps.idx.iloc[: share.warmup(steps.duration_ms)]}
    shown = {i: f"{t} · warm-up" if i in warm else t for i, t in shown.items()}
    if scope:
        kept = share.window_of(steps, share.kept_step(scope))
        first = None if allow_all or not len(steps) else share.opening_window(steps)
        share.seed(key, options, kept if kept is not None else first)
    picked: int | None = st.selectbox(
        label,
        options,
        key=key,
        format_func=lambda i: f"all {len(steps)} windows" if i is None else shown[i],
    )
    if scope:
        share.keep_step(scope, "all" if picked is None else share.step_token(steps, picked))
    return picked


def steady(steps: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``steps`` after the warm-up (all of them when there is none)."""
    return steps.iloc[share.warmup(steps.duration_ms) :]


#: what Streamlit's Markdown reads as formatting (``$`` opens LaTeX, ``:x:`` an emoji)
_MARKDOWN = re.compile(r"([\\`*_\[\]<>#|~$:])")


def md(text: object) -> str:
    """``text`` (an event, run or scenario name) escaped for Markdown: ``__next__`` shows as
    written, not as a bold "next"."""
    return _MARKDOWN.sub(r"\\\1", str(text))


def ms(v: float) -> str:
    return f"{v:,.3f} ms"


def pct(v: float) -> str:
    return f"{v:+.1%}"
