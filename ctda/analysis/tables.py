"""The tables every surface shows, computed once: ``ctda analyze``, the store and the UI.

Each function here is the one definition of its table; the report
(:mod:`ctda.analysis.report`), the store's rows (:mod:`ctda.store.model`) and the UI
(:mod:`ctda.ui.frames`) call it instead of keeping their own copy, so they cannot disagree:

- display names (:class:`Names`): step numbers and object addresses folded so instances
  of one op aggregate;
- the window of each event (:func:`window_of`, see there for overlapping windows);
- the per-window table (:func:`window_table`): bounds, critical-path length, what bounds it;
- the bound-by table (:func:`by_class`);
- the graph summary (:func:`graph_summary`);
- analysis options as plain data (:func:`options_dict`, :func:`options_key`);
- what each edge rule reads (:func:`rule_docs`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis import modes
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis, AnalysisOptions, effective

I64 = npt.NDArray[np.int64]

#: hotspot row label of each wait class (path time charged to no event)
GAP_NAMES = {
    "cpu_gap": "(CPU idle / unrecorded)",
    "gpu_gap": "(GPU stream idle between work)",
    "launch_overhead": "(launch latency)",
    "sync_wait": "(sync latency)",
    "cross_thread": "(cross-thread wait)",
}
_STEP_NUM = re.compile(r"^ProfilerStep#\d+$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


# --- display names --------------------------------------------------------------------


def fold_name(name: object) -> str:
    """The rollup name of one trace name: ``ProfilerStep#7`` -> ``ProfilerStep#*``, and
    ``<object at 0x7f...>`` addresses dropped, so every instance of an op aggregates."""
    text = str(name)
    return "ProfilerStep#*" if _STEP_NUM.match(text) else _ADDRESS.sub("", text)


class Names:
    """Display names of an analysis' events, grouped by integer code.

    ``names`` holds the distinct display names, sorted; ``group[i]`` is event ``i``'s index
    into them. Per-name work on millions of events groups by that integer and never
    touches a Python string per event.
    """

    def __init__(self, a: Analysis) -> None:
        codes = a.table.col("name")[a.nodes.uid]
        folded = np.array([fold_name(v) for v in a.table.strings("name")] or [""], dtype=object)
        names, of_value = np.unique(folded, return_inverse=True)
        self.names: npt.NDArray[np.object_] = names.astype(object)
        # a negative code (no name) indexes from the end, like numpy indexing of ``folded``
        self.group: I64 = of_value.reshape(-1)[np.where(codes < 0, codes + len(folded), codes)].astype(
            np.int64
        )

    def of(self, events: I64) -> npt.NDArray[np.object_]:
        """Display names of the given events."""
        return self.names[self.group[events]]

    def all(self) -> npt.NDArray[np.object_]:
        """Display name of every analysed event, in event order."""
        return self.names[self.group]

    def index(self, name: str) -> int | None:
        """Index of a display name in :attr:`names`, or None."""
        k = int(np.searchsorted(self.names, name))
        return k if k < len(self.names) and self.names[k] == name else None


def display_names(a: Analysis) -> npt.NDArray[np.object_]:
    """Display name of every analysed event (see :class:`Names`)."""
    return Names(a).all()


def lane_labels(a: Analysis) -> dict[int, str]:
    """Readable name per lane: "thread <tid> (<name>)" or "GPU <d> stream <s>"."""
    out = {}
    lanes: Iterable[Any] = a.table.lanes.itertuples()  # rows typed loosely by the stubs
    for r in lanes:
        if r.is_gpu:
            out[int(r.lane)] = f"GPU {r.device} stream {r.stream}"
        else:
            name = f" ({r.thread_name})" if r.thread_name and str(r.tid) not in str(r.thread_name) else ""
            out[int(r.lane)] = f"thread {r.tid}{name}" if not r.thread_name or name else str(r.thread_name)
    return out


# --- windows ----------------------------------------------------------------------------


def event_starts(a: Analysis) -> I64:
    """Start of every analysed event in this analysis' timing (re-timed for a what-if;
    the observed start for a baseline, which the replay reproduces)."""
    return a.timing.time[0 : 2 * a.nodes.n : 2]


def window_of(starts: I64, ends: I64, ts: I64) -> I64:
    """The window each event belongs to: -1 outside every window.

    An event belongs to the **innermost** window ``[start, end)`` holding its start: the
    shortest one, and of equally long ones the first (lowest index). ProfilerStep windows
    never overlap, so there this is simply the step the event starts in; windows can
    overlap when ``--windows REGEX`` matches nested annotations (a ``forward`` inside a
    step), and then the event is counted in the most specific one. Every event is in at
    most one window, so per-window self times and counts add up to the whole trace's and
    an event is never counted twice; a window's critical path is its own either way.
    """
    out = np.full(len(ts), -1, dtype=np.int64)
    if len(starts) == 0 or len(ts) == 0:
        return out
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    if bool(np.all(s[1:] >= e[:-1])):  # disjoint (ProfilerSteps): one binary search per event
        k = np.searchsorted(s, ts, side="right") - 1
        ok = (k >= 0) & (ts < e[np.maximum(k, 0)])
        out[ok] = order[k[ok]]
        return out
    # overlapping: paint each window's events, longest window first and, among equally
    # long ones, the highest index first, so the innermost window is painted last
    by_ts = np.argsort(ts, kind="stable")
    sorted_ts = ts[by_ts]
    lo = np.searchsorted(sorted_ts, starts, side="left")
    hi = np.searchsorted(sorted_ts, ends, side="left")
    idx = np.arange(len(starts))
    painted = np.full(len(ts), -1, dtype=np.int64)
    for w in np.lexsort((-idx, -(ends - starts))):
        if hi[w] > lo[w]:
            painted[lo[w] : hi[w]] = w
    out[by_ts] = painted
    return out


class Windows:
    """The analysis windows of one timing: their bounds and which window each event is in."""

    def __init__(self, a: Analysis) -> None:
        self.a = a
        self.starts, self.ends = a.window_bounds()

    @cached_property
    def of_event(self) -> I64:
        """:func:`window_of` every analysed event (-1: outside every window)."""
        return window_of(self.starts, self.ends, event_starts(self.a))

    def inside(self, sel: Iterable[int]) -> npt.NDArray[np.bool_]:
        """Events that belong to one of the windows ``sel``."""
        mark = np.zeros(len(self.starts) + 1, dtype=bool)
        mark[list(sel)] = True
        return mark[self.of_event]  # -1 reads the last slot, which stays False


# --- per window and per class -----------------------------------------------------------


def per_name(names: npt.NDArray[np.object_], fn: Callable[[str], Any], dtype: Any) -> npt.NDArray[Any]:
    """``fn`` of every name, computed once per distinct name. Names are hashed, not sorted:
    sorting a million Python strings (``np.unique``) took most of a rank's job stage, and
    4-5 s a call of the what-if ranking on a 1M-event trace."""
    codes, values = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=False)
    lut = np.empty(len(values), dtype=dtype)
    lut[:] = [fn(str(v)) for v in values]
    return lut[codes]


def sum_by(key: I64, values: npt.ArrayLike, size: int) -> I64:
    """Integer sums of ``values`` per ``key`` in ``[0, size)``."""
    v = np.asarray(values)
    if len(v) == 0:
        return np.zeros(size, dtype=np.int64)
    if np.abs(v).max() * len(v) < 2**53:  # float sums of such integers are exact
        return np.rint(np.bincount(key, weights=v, minlength=size)).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, key, v.astype(np.int64))
    return out


def class_ns(a: Analysis) -> tuple[I64, I64]:
    """Critical-path ns per (window, class), and how many charges each sum has."""
    n_cls = len(CLASSES)
    size = len(a.windows) * n_cls
    key = a.charges.window.to_numpy().astype(np.int64) * n_cls + a.charges.cls.to_numpy().astype(np.int64)
    count = np.bincount(key, minlength=size).reshape(-1, n_cls)
    return sum_by(key, a.charges.ns.to_numpy(), size).reshape(-1, n_cls), count


def window_table(a: Analysis) -> pd.DataFrame:
    """One row per window: idx, window (label), step (-1: none), start_ns, end_ns, start_ms
    (from the trace start), duration_ns, cp_ns, and bound_by, the class with the most path
    time (ties: the first class in :data:`CLASSES` order), with its bound_by_share."""
    starts, ends = a.window_bounds()
    ns, count = class_ns(a)
    present = count > 0
    cp = ns.sum(axis=1)
    # the largest sum among the classes present; argmax takes the first of equal ones
    top = np.argmax(np.where(present, ns, -1), axis=1)
    top_ns = ns[np.arange(len(ns)), top] if len(ns) else np.zeros(0, dtype=np.int64)
    has = np.asarray(present.any(axis=1), dtype=bool)
    t0 = int(a.nodes.time[a.nodes.source])
    return pd.DataFrame(
        {
            "idx": np.arange(len(a.windows), dtype=np.int64),
            "window": [w.label for w in a.windows],
            "step": np.array([w.step if w.step is not None else -1 for w in a.windows], dtype=np.int64),
            "start_ns": starts,
            "end_ns": ends,
            "start_ms": (starts - t0) / 1e6,
            "duration_ns": (ends - starts).astype(np.int64),
            "cp_ns": cp.astype(np.int64),
            "bound_by": [CLASSES[int(c)] if h else "" for c, h in zip(top, has)],
            "bound_by_share": np.where(has, top_ns / np.maximum(cp, 1), 0.0),
        }
    )


def by_class(charges: pd.DataFrame) -> pd.DataFrame:
    """Critical-path time per bound-by class of ``charges`` (rows of ``Analysis.charges``):
    class, cp_ns and share, largest first (ties in :data:`CLASSES` order)."""
    by = charges.groupby("cls").ns.sum()
    df = pd.DataFrame({"class": [CLASSES[int(c)] for c in by.index], "cp_ns": by.to_numpy(dtype=np.int64)})
    df["share"] = df.cp_ns / max(int(df.cp_ns.sum()), 1)
    return df.sort_values("cp_ns", ascending=False, kind="stable").reset_index(drop=True)


def selected_charges(a: Analysis, sel: list[int] | None) -> pd.DataFrame:
    """The charges of the windows ``sel`` (None or every window: all of them, uncopied)."""
    if sel is None or len(set(sel)) >= len(a.windows):
        return a.charges
    return a.charges[a.charges.window.isin(sel)]


# --- the graph ----------------------------------------------------------------------------


def graph_summary(a: Analysis) -> dict[str, Any]:
    """Events, edges (per rule, most first), edges dropped as acausal, binding cross-thread edges."""
    g = a.graph
    counts = np.bincount(g.rule, minlength=len(g.rule_names))
    order = sorted((i for i in range(len(counts)) if counts[i]), key=lambda i: -counts[i])
    return {
        "events": int(a.nodes.n),
        "edges": int(g.n_edges),
        "edges_by_rule": {g.rule_names[i]: int(counts[i]) for i in order},
        "dropped_acausal_edges": dict(g.dropped),
        "binding_cross_thread_edges": int(np.sum(a.calibration.binding & (g.etype == EdgeType.CROSS_THREAD))),
    }


# --- options as data -----------------------------------------------------------------------


def options_dict(options: AnalysisOptions) -> dict[str, Any]:
    """The analysis options that change results, as the mode runs them, as plain JSON-able
    values (:meth:`AnalysisOptions.to_dict` of :func:`~ctda.analysis.engine.effective`)."""
    return effective(options).to_dict()


def options_key(options: AnalysisOptions) -> str:
    """Stable digest of :func:`options_dict`: same file + same key = same run."""
    return effective(options).key()


def report_options(d: dict[str, Any], step: str) -> dict[str, Any]:
    """The options a report prints: :func:`options_dict` without rule tuning, plus ``step``."""
    out = {k: v for k, v in d.items() if k != "rule_options"}
    out["step"] = step
    return out


# --- edge rules ----------------------------------------------------------------------------


def rule_docs() -> dict[str, str]:
    """Rule name (as in ``Graph.rule_names``, every mode's) -> its documentation, which names
    the trace fields the rule reads and why the dependency is real."""
    return modes.rule_docs()
