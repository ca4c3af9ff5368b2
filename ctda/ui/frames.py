"""Tables behind the pages, computed from an :class:`Analysis` (no Streamlit, no Plotly).

Everything here is vectorised over the analysed events: a 1M-event run must answer each
page interaction well inside a second. Times shown to people are in milliseconds relative
to the trace start (the SOURCE node's observed time), like ``ctda analyze``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.api import (
    CLASSES,
    GAP_NAMES,
    Analysis,
    Names,
    Report,
    Windows,
    class_ns,
    class_table,
    lane_labels,
    window_table,
)
from ctda.ui.picking import pick_events
from ctda.ui.polyline import critical_polyline
from ctda.ui.rules import etype_name, summary

I64 = npt.NDArray[np.int64]
MS = 1e6  # ns per millisecond
#: reverse of GAP_NAMES: the hotspot row label of a wait class -> the class
GAP_CLASS = {label: cls for cls, label in GAP_NAMES.items()}


def t0(a: Analysis) -> int:
    """The trace start every displayed time is relative to (the observed SOURCE time)."""
    return int(a.nodes.time[a.nodes.source])


def event_times(a: Analysis) -> tuple[I64, I64]:
    """Start and end of every analysed event in this analysis' timing (re-timed for scenarios)."""
    t = a.timing.time
    n = a.nodes.n
    return t[0 : 2 * n : 2], t[1 : 2 * n : 2]


# --- steps and bound-by ------------------------------------------------------------


def class_by_window(a: Analysis) -> pd.DataFrame:
    """Critical-path ms per (window, class) present: rows window, label, class, ms."""
    ns, count = class_ns(a)
    win, cls = np.nonzero(count > 0)
    labels = [w.label for w in a.windows]
    return pd.DataFrame(
        {
            "window": win.astype(np.int64),
            "label": [labels[int(w)] for w in win],
            "class": [CLASSES[int(c)] for c in cls],
            "ms": ns[win, cls] / MS,
        }
    )


def steps(a: Analysis) -> pd.DataFrame:
    """:func:`ctda.api.window_table` in milliseconds, one row per window."""
    w = window_table(a)
    return pd.DataFrame(
        {
            "idx": w.idx,
            "window": w.window,
            "step": w.step,
            "start_ms": w.start_ms,
            "duration_ms": w.duration_ns / MS,
            "cp_ms": w.cp_ns / MS,
            "bound_by": w.bound_by,
            "bound_by_share": w.bound_by_share,
        }
    )


def by_class(a: Analysis, sel: list[int] | None = None) -> pd.DataFrame:
    """:func:`ctda.api.class_table` over the windows ``sel`` (all: None), in ms."""
    by = class_table(a, sel)
    return pd.DataFrame({"class": by["class"], "cp_ms": by.cp_ns / MS, "share": by.share})


def breakdown_text(df: pd.DataFrame, top: int = 3) -> str:
    """``gpu_compute 61% · cpu 20% · ...`` from a frame with class and share columns."""
    return " · ".join(f"{r['class']} {r['share']:.0%}" for r in df.head(top).to_dict("records"))


# --- the timeline of one window ------------------------------------------------------


@dataclass
class Lane:
    """One CPU thread or GPU stream in the timeline: its label and rows (depth levels)."""

    lane: int
    label: str
    top: float  # y of its first row (rows grow downwards)
    rows: int
    is_gpu: bool


@dataclass
class Timeline:
    """What the critical-path chart draws for one window."""

    window: int
    label: str
    start_ms: float
    end_ms: float
    events: pd.DataFrame  # event, name, lane, y, start_ms, end_ms, dur_ms, on_cp, cls
    lanes: list[Lane]
    path: pd.DataFrame  # x (ms), y: the path through the critical events, in time order
    total: int  # events overlapping the window
    critical: int  # distinct events charged on the window's path
    path_points: int = 0  # points of the full path before it was thinned for drawing

    @property
    def simplified(self) -> bool:
        return self.path_points > len(self.path)

    @property
    def shown(self) -> int:
        return len(self.events)


MAX_ROWS = 12  # depth levels per lane; deeper calls share the last row
#: a polyline this long is already several points per pixel; more only slows the browser
MAX_PATH_POINTS = 12_000


def window_charges(a: Analysis, window: int) -> pd.DataFrame:
    """The charges of one window; a slice, not a filtered copy, when they are grouped by
    window in order (as ``attribution.window_paths`` builds them)."""
    w = a.charges.window.to_numpy()
    if len(w) and bool(np.all(w[1:] >= w[:-1])):
        lo, hi = np.searchsorted(w, [window, window + 1])
        return a.charges.iloc[int(lo) : int(hi)]
    return a.charges[w == window]


def timeline(a: Analysis, window: int, max_events: int, names: Names) -> Timeline:
    """Events overlapping ``window`` (critical ones first, then the longest, at most
    ``max_events``), one lane per thread/stream, and the path drawn through them."""
    starts, ends = a.window_bounds()
    s, e = int(starts[window]), int(ends[window])
    base = t0(a)
    st, en = event_times(a)
    g, n = a.graph, a.nodes.n
    cand = np.flatnonzero((st < e) & (en > s) | ((st == en) & (st >= s) & (st < e)))
    ch = window_charges(a, window)
    ev = ch.event.to_numpy()
    charged = ev >= 0
    critical_ns = np.bincount(ev[charged], weights=ch.ns.to_numpy()[charged], minlength=n)
    crit = np.flatnonzero(critical_ns > 0)
    layout = Layout(a, cand)
    chosen = pick_events(a.nodes.lane, st, en, cand, crit, critical_ns, max_events)
    on_cp = critical_ns[chosen] > 0
    labels = lane_labels(a)
    events = pd.DataFrame(
        {
            "event": chosen,
            "name": names.of(chosen),
            "lane": [labels.get(int(x), str(x)) for x in a.nodes.lane[chosen]],
            "y": layout.y(chosen),
            "start_ms": (st[chosen] - base) / MS,
            "end_ms": (en[chosen] - base) / MS,
            "dur_ms": (en[chosen] - st[chosen]) / MS,
            "on_cp": on_cp,
            "cls": [CLASSES[int(c)] for c in a.event_cls[chosen]],
        }
    )
    # a wait is drawn on the event that waited (its edge's destination), like the store's CP rows
    line = critical_polyline(
        (ev, ch.edge.to_numpy(), ch.t0.to_numpy(), ch.t1.to_numpy()),
        (g.src, g.dst, n),
        (a.nodes.lane, a.nodes.depth, layout.top_of, MAX_ROWS),
        (s, e, base),
        MAX_PATH_POINTS,
    )
    return Timeline(
        window=window,
        label=a.windows[window].label,
        start_ms=(s - base) / MS,
        end_ms=(e - base) / MS,
        events=events,
        lanes=layout.lanes,
        path=pd.DataFrame({"x": line.x, "y": line.y}, copy=False),
        total=len(cand),
        critical=len(crit),
        path_points=line.full,
    )


class Layout:
    """Lanes (CPU threads first, then GPU streams) sized by the depths present, and the
    y of any analysed event on them."""

    def __init__(self, a: Analysis, events: I64) -> None:
        self.a = a
        n_lanes = int(a.nodes.lane.max(initial=0)) + 1
        lane_of = a.nodes.lane[events].astype(np.int64)
        depth = np.minimum(a.nodes.depth[events].astype(np.int64), MAX_ROWS - 1)
        max_depth = np.full(n_lanes, -1, dtype=np.int64)
        np.maximum.at(max_depth, lane_of, depth)
        present = np.flatnonzero(max_depth >= 0)
        is_gpu = a.table.lanes.set_index("lane").is_gpu
        labels = lane_labels(a)
        gpu = {int(x): bool(is_gpu.get(int(x), False)) for x in present}
        self.lanes: list[Lane] = []
        self.top_of = np.zeros(n_lanes, dtype=np.float64)
        y = 0.0
        for x in sorted((int(x) for x in present), key=lambda x: (gpu[x], x)):
            rows = int(max_depth[x]) + 1
            self.lanes.append(Lane(x, labels.get(x, str(x)), y, rows, gpu[x]))
            self.top_of[x] = y
            y += rows + 0.6  # a little air between lanes

    def y(self, idx: I64) -> npt.NDArray[np.float64]:
        """Row of each event: its lane's first row plus its (capped) call depth."""
        n = self.a.nodes
        d = np.minimum(n.depth[idx].astype(np.int64), MAX_ROWS - 1)
        return np.asarray(self.top_of[np.maximum(n.lane[idx], 0)] + d, dtype=np.float64)


# --- hotspots and drill-down ---------------------------------------------------------


def hotspots(a: Analysis, report: Report, names: Names, wins: Windows, sel: list[int]) -> pd.DataFrame:
    """The report's hotspot table in ms, plus each name's smallest slack in the windows."""
    hot = report.hotspots
    inside = wins.inside(sel)
    idx = np.flatnonzero(inside)
    slack = a.timing.slack[0 : 2 * a.nodes.n : 2][idx]
    min_slack = pd.Series(slack).groupby(names.group[idx]).min()
    gid = [names.index(str(x)) for x in hot.name]
    slack_ms = [float(min_slack.get(k, np.nan)) / MS if k is not None else np.nan for k in gid]
    return pd.DataFrame(
        {
            "name": hot.name,
            "category": hot.category,
            "class": hot["class"],
            "cp_ms": hot.cp_ns / MS,
            "cp_share": hot.cp_share,
            "total_ms": hot.total_ns / MS,
            "total_share": hot.total_share,
            "count": hot["count"],
            "on_cp": hot.on_cp,
            "min_slack_ms": slack_ms,
        }
    )


def instances(
    a: Analysis, names: Names, wins: Windows, name: str, sel: list[int], limit: int = 500
) -> pd.DataFrame:
    """Events called ``name`` in the windows ``sel``, most critical (then longest) first, at most
    ``limit``: where, how long, CP time and slack. ``attrs["total"]`` counts them all."""
    k = names.index(name)
    cols = ["event", "uid", "lane", "window", "start_ms", "dur_ms", "cp_ms", "slack_ms"]
    if k is None:
        return pd.DataFrame(columns=cols)
    idx = np.flatnonzero((names.group == k) & wins.inside(sel))
    ch = a.charges[a.charges.window.isin(sel) & (a.charges.event >= 0)]
    cp = ch[ch.event.isin(idx)].groupby("event").ns.sum()
    # instances that start outside the windows but are charged inside them (long ops)
    idx = np.union1d(idx, cp.index.to_numpy(dtype=np.int64))
    st, en = event_times(a)
    cp_ns = cp.reindex(idx, fill_value=0).to_numpy()
    dur = en[idx] - st[idx]
    # rank before building labels: a common op has 100k instances, the page shows `limit`
    total = len(idx)
    top = np.lexsort((-dur, -cp_ns))[:limit]
    idx, cp_ns, dur = idx[top], cp_ns[top], dur[top]
    labels = lane_labels(a)
    win = wins.of_event[idx]
    df = pd.DataFrame(
        {
            "event": idx,
            "uid": a.nodes.uid[idx],
            "lane": [labels.get(int(x), str(x)) for x in a.nodes.lane[idx]],
            "window": [a.windows[int(w)].label if w >= 0 else "" for w in win],
            "start_ms": (st[idx] - t0(a)) / MS,
            "dur_ms": dur / MS,
            "cp_ms": cp_ns / MS,
            "slack_ms": a.timing.slack[2 * idx] / MS,
        }
    )
    df.attrs["total"] = total  # before the cut to `limit` rows
    return df


def gap_instances(a: Analysis, names: Names, label: str, sel: list[int], limit: int = 500) -> pd.DataFrame:
    """Path stretches of a wait row (``(launch latency)``, ...): the edges and who waited."""
    cls = GAP_CLASS.get(label, label.strip("()"))
    cols = ["edge", "window", "start_ms", "ms", "type", "rule", "waiting", "waiting_event", "why"]
    if cls not in CLASSES:
        return pd.DataFrame(columns=cols)
    ch = a.charges[a.charges.window.isin(sel) & (a.charges.event < 0) & (a.charges.cls == CLASSES.index(cls))]
    ch = ch.sort_values("ns", ascending=False).head(limit)
    g, n = a.graph, a.nodes.n
    dst = g.dst[ch.edge.to_numpy()] // 2
    rules = [g.rule_names[int(r)] for r in ch.rule]
    return pd.DataFrame(
        {
            "edge": ch.edge.to_numpy(),
            "window": [a.windows[int(w)].label for w in ch.window],
            "start_ms": (ch.t0.to_numpy() - t0(a)) / MS,
            "ms": ch.ns.to_numpy() / MS,
            "type": [etype_name(int(t)) for t in ch.etype],
            "rule": rules,
            "waiting": [str(names.of(np.array([d]))[0]) if d < n else "(SINK)" for d in dst],
            "waiting_event": np.where(dst < n, dst, -1),
            "why": [summary(r) for r in rules],
        }
    ).reset_index(drop=True)


def _endpoint(a: Analysis, names: Names, node: int) -> tuple[int, str, str, str]:
    """(event, name, point, lane) of a graph node; SOURCE and SINK have no event."""
    n = a.nodes.n
    if node >= 2 * n:
        return -1, "(SOURCE)" if node == a.nodes.source else "(SINK)", "", ""
    i = node // 2
    lane = lane_labels(a).get(int(a.nodes.lane[i]), "")
    return i, str(names.of(np.array([i]))[0]), "end" if node % 2 else "start", lane


def edges_on_path(a: Analysis) -> npt.NDArray[np.bool_]:
    """Per graph edge: on the critical path of some window."""
    mark = np.zeros(a.graph.n_edges, dtype=bool)
    mark[a.charges.edge.to_numpy()] = True
    return mark


def event_edges(
    a: Analysis, names: Names, event: int, on_path: npt.NDArray[np.bool_] | None = None
) -> pd.DataFrame:
    """Every dependency edge into or out of an event's start and end, and why it exists.

    ``on_path`` is :func:`edges_on_path` (pass it when asking repeatedly: it is O(edges)).
    """
    g = a.graph
    if on_path is None:
        on_path = edges_on_path(a)
    rows = []
    for node in (2 * event, 2 * event + 1):
        for direction, ptr, lst, other_end in (
            ("waits for", g.in_ptr, g.in_edges, g.src),
            ("released", g.out_ptr, g.out_edges, g.dst),
        ):
            for edge in lst[ptr[node] : ptr[node + 1]]:
                edge = int(edge)
                oi, oname, opoint, olane = _endpoint(a, names, int(other_end[edge]))
                rule = g.rule_names[int(g.rule[edge])]
                dst = int(g.dst[edge])
                rows.append(
                    {
                        "point": "end" if node % 2 else "start",
                        "direction": direction,
                        "other_event": oi,
                        "other": f"{oname} ({opoint})" if opoint else oname,
                        "other_lane": olane,
                        "edge": edge,
                        "type": etype_name(int(g.etype[edge])),
                        "rule": rule,
                        "gap_us": float(a.nodes.time[dst] - a.nodes.time[int(g.src[edge])]) / 1e3,
                        "weight_us": float(a.calibration.weight[edge]) / 1e3,
                        "binding": bool(a.timing.binding_edge[dst] == edge),
                        "on_cp": bool(on_path[edge]),
                        "why": summary(rule),
                    }
                )
    cols = ["point", "direction", "other", "type", "rule", "why", "binding", "on_cp", "gap_us", "weight_us"]
    cols += ["other_lane", "other_event", "edge"]
    return pd.DataFrame(rows, columns=cols)


def event_charges(a: Analysis, event: int) -> pd.DataFrame:
    """The critical-path stretches charged to one event, per window."""
    ch = a.charges[a.charges.event == event]
    g = a.graph
    return pd.DataFrame(
        {
            "window": [a.windows[int(w)].label for w in ch.window],
            "start_ms": (ch.t0.to_numpy() - t0(a)) / MS,
            "ms": ch.ns.to_numpy() / MS,
            "edge": ch.edge.to_numpy(),
            "type": [etype_name(int(t)) for t in ch.etype],
            "rule": [g.rule_names[int(r)] for r in ch.rule],
        }
    )


def event_facts(a: Analysis, names: Names, event: int) -> dict[str, object]:
    """A few lines about one event (for the drill-down header)."""
    st, en = event_times(a)
    return {
        "event": event,
        "uid": int(a.nodes.uid[event]),
        "name": str(names.of(np.array([event]))[0]),
        "category": str(a.table.decoded("cat", a.nodes.uid[[event]])[0]),
        "class": CLASSES[int(a.event_cls[event])],
        "lane": lane_labels(a).get(int(a.nodes.lane[event]), ""),
        "start_ms": (int(st[event]) - t0(a)) / MS,
        "dur_ms": int(en[event] - st[event]) / MS,
        "slack_ms": int(a.timing.slack[2 * event]) / MS,
    }


# --- choices for the what-if page ----------------------------------------------------


def categories(a: Analysis) -> list[str]:
    """Trace categories of the analysed events, most frequent first."""
    cats = a.table.col("cat")[a.nodes.uid]
    values = a.table.strings("cat")
    counts = np.bincount(cats[cats >= 0], minlength=len(values))
    return [str(values[i]) for i in np.argsort(-counts, kind="stable") if counts[i] > 0]


def classes_present(a: Analysis) -> list[str]:
    """Classes of the analysed events: those with most critical-path time first."""
    counts = np.bincount(a.event_cls.astype(np.int64), minlength=len(CLASSES))
    ch = a.charges[a.charges.event >= 0]
    cp = np.bincount(ch.cls.to_numpy().astype(np.int64), weights=ch.ns.to_numpy(), minlength=len(CLASSES))
    order = np.lexsort((-counts, -cp))
    return [CLASSES[i] for i in order if counts[i] > 0]
