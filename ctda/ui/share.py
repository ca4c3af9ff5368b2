"""The UI's state in the URL, and the step each run is looked at on.

A link is how a colleague is shown something: the page is the URL's path, and the run (or
job), step, scenario and compare pair are its query string. The URL is read once, when a
session starts (:func:`read_once`); from then on the session is the truth and every rerun
writes what the page shows back to the URL (:func:`put` while the page draws,
:func:`publish` once it is drawn), so the address bar always holds a link to this view.

The step is kept per run (or job) rather than per page: a step picked on Critical path is
the one Hotspots and What-if open on, and coming back finds it again, where a widget's own
value is dropped by Streamlit as soon as a page does not draw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
import pandas as pd
import streamlit as st

T = TypeVar("T")

#: the query parameters this module owns, in the order a link shows them
PARAMS = ("run", "job", "step", "scenario", "a", "b")
_READ = "_url_read"
_NOW = "_url_now"
_STEPS = "_steps"
_SCENARIOS = "_scenarios"
#: the scope a step of the URL waits under until the first step picker claims it
_ANY = ""


def read_once() -> None:
    """Copy the URL's state into the session, on the session's first run only (a later
    rerun must not undo what the user picked since)."""
    st.session_state[_NOW] = {}
    if st.session_state.get(_READ):
        return
    st.session_state[_READ] = True
    q = st.query_params
    # a link with a job is one of the Job page: its step is the job's
    scope = job_scope(q["job"]) if q.get("job") else q.get("run") or _ANY
    if q.get("step"):
        _steps()[scope] = q["step"]
    if q.get("scenario"):
        st.session_state.setdefault(_SCENARIOS, {})[scope] = q["scenario"]
    for k in ("run", "job", "a", "b"):
        if q.get(k):
            st.session_state[f"_url_{k}"] = q[k]


def job_scope(name: str) -> str:
    """The scope a job's step is kept under (apart from a run of the same name)."""
    return f"job {name}"


def wanted(key: str) -> str | None:
    """What the URL the session started from asked for ``key`` (run, job, a, b), once:
    the caller applies it and the user's picks win from then on."""
    return st.session_state.pop(f"_url_{key}", None)


def put(key: str, value: object) -> None:
    """``key=value`` is part of what this rerun shows (written by :func:`publish`)."""
    st.session_state.setdefault(_NOW, {})[key] = str(value)


def publish() -> None:
    """Make the URL's query string exactly what this rerun put (others' parameters kept)."""
    now: dict[str, str] = st.session_state.get(_NOW, {})
    current = st.query_params.to_dict()
    target = {k: v for k, v in current.items() if k not in PARAMS}
    target.update({k: now[k] for k in PARAMS if k in now})
    if target != current:
        st.query_params.from_dict(target)


def _steps() -> dict[str, str]:
    """The session's picked step per run (or job): scope -> step token."""
    out: dict[str, str] = st.session_state.setdefault(_STEPS, {})
    return out


def step_token(steps_df: pd.DataFrame, idx: int) -> str:
    """How window ``idx`` of ``steps_df`` (a :func:`frames.steps` table) is written in a
    link: its profiler step number where that number names one window, else ``w<idx>``."""
    row = steps_df[steps_df.idx == idx]
    if len(row):
        n = int(row.step.iloc[0])
        if n >= 0 and int((steps_df.step == n).sum()) == 1:
            return str(n)
    return f"w{idx}"


def window_of(steps_df: pd.DataFrame, token: str | None) -> int | None:
    """The window a link's step token names (see :func:`step_token`), or None."""
    if not token:
        return None
    if token.startswith("w") and token[1:].isdigit():
        k = int(token[1:])
        return k if k in set(steps_df.idx.tolist()) else None
    if token.lstrip("-").isdigit():
        hit = steps_df[steps_df.step == int(token)]
        return int(hit.idx.iloc[0]) if len(hit) == 1 else None
    return None


def kept_step(scope: str) -> str | None:
    """The step token picked last for ``scope``, or the URL's step if none was yet."""
    kept = _steps()
    return kept.get(scope) or kept.pop(_ANY, None)


def keep_step(scope: str, token: str) -> None:
    """Remember ``token`` as ``scope``'s step and show it in the URL."""
    _steps()[scope] = token
    put("step", token)


def seed(key: str, options: Sequence[T], value: T | None) -> None:
    """Start the widget keyed ``key`` on ``value`` when it has no value of its own yet
    (a widget's own value, the user's latest pick, wins)."""
    if value is not None and value in options and key not in st.session_state:
        st.session_state[key] = value


def scenario(scope: str) -> str | None:
    """The scenario shown last for ``scope`` (a run), or the URL's."""
    kept: dict[str, str] = st.session_state.setdefault(_SCENARIOS, {})
    return kept.get(scope) or kept.pop(_ANY, None)


def keep_scenario(scope: str, name: str | None) -> None:
    """Remember the scenario shown for ``scope`` (None: the baseline) and link it."""
    kept: dict[str, str] = st.session_state.setdefault(_SCENARIOS, {})
    if name is None:
        kept.pop(scope, None)
        return
    kept[scope] = name
    put("scenario", name)


#: a leading step is warm-up when it takes more than this many times the median of the
#: steps after it (the first step compiles, allocates and autotunes: often 10-100x)
WARMUP_FACTOR = 2.0
#: at most this many leading steps are called warm-up
MAX_WARMUP = 2
#: step durations, in window order
Durations = Sequence[float] | pd.Series | np.ndarray


def warmup(durations: Durations) -> int:
    """How many leading steps of ``durations`` (in window order) are warm-up outliers;
    the last step never is."""
    d = np.asarray(durations, dtype=float)
    k = 0
    while k < min(MAX_WARMUP, len(d) - 1) and d[k] > WARMUP_FACTOR * float(np.median(d[k + 1 :])):
        k += 1
    return k


def representative(durations: Durations) -> int:
    """The position of the median step by duration among the steps after the warm-up (the
    lower median of an even count, the earlier of equal steps): the step a run is shown on
    first. ``durations`` must not be empty."""
    d = np.asarray(durations, dtype=float)
    k = warmup(d)
    order = np.argsort(d[k:], kind="stable")
    return k + int(order[(len(order) - 1) // 2])


def opening_window(steps: pd.DataFrame) -> int:
    """The window index a run's pages open on (``steps``: ``idx`` and ``duration_ms`` per
    window, not empty): its :func:`representative` step."""
    return int(steps.idx.iloc[representative(steps.duration_ms)])
