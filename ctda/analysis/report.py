"""Stage: roll an Analysis up into report data (hotspots, bound-by, steps, slack, advice).

Pure data: rendering lives in :mod:`ctda.render.analyze`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis import tables
from ctda.analysis.advice import recommend
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind

#: the report's per-window table: :func:`ctda.analysis.tables.window_table` columns
STEP_COLUMNS = ["window", "step", "start_ms", "duration_ns", "cp_ns", "bound_by", "bound_by_share"]


#: the hotspot table's columns, in order
HOTSPOT_COLUMNS = (
    "name",
    "category",
    "class",
    "cp_ns",
    "cp_share",
    "total_ns",
    "total_share",
    "count",
    "on_cp",
)


@dataclass
class Report:
    """Everything ``ctda analyze`` prints, as plain tables and numbers."""

    trace: str
    options: dict[str, Any]
    steps: pd.DataFrame  # one row per selected window
    by_class: pd.DataFrame
    hotspots: pd.DataFrame
    by_category: pd.DataFrame
    by_lane: pd.DataFrame
    near_critical: pd.DataFrame
    recommendations: list[str]
    checks: dict[str, Any]
    graph: dict[str, Any] = field(default_factory=dict)

    @property
    def total_ns(self) -> int:
        return int(self.steps.duration_ns.sum())

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "options": self.options,
            "critical_path_ns": self.total_ns,
            "steps": json_rows(self.steps),
            "bound_by": json_rows(self.by_class),
            "hotspots": json_rows(self.hotspots),
            "by_category": json_rows(self.by_category),
            "by_thread_or_stream": json_rows(self.by_lane),
            "near_critical": json_rows(self.near_critical),
            "recommendations": self.recommendations,
            "checks": self.checks,
            "graph": self.graph,
        }


def plain(v: Any) -> Any:
    """``v`` with numpy scalars as Python ones and dict keys as text (JSON can hold it)."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def json_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready dicts."""
    return [{str(k): plain(v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def select_windows(a: Analysis, step: str) -> list[int]:
    """Window indices for ``--step``: ``all`` or a step number."""
    if step == "all":
        return list(range(len(a.windows)))
    wanted = int(step)
    hits = [i for i, w in enumerate(a.windows) if w.step == wanted]
    if not hits:
        have = ", ".join(str(w.step) for w in a.windows if w.step is not None) or "none"
        raise ValueError(f"no ProfilerStep#{wanted} in this trace (steps: {have})")
    return hits


def self_time(a: Analysis) -> npt.NDArray[np.int64]:
    """Self time of every analysed event in this timing: the spans of the edges it owns on
    its thread (a free's sync edge, also its own, overlaps its duration: not counted twice)."""
    g = a.graph
    owned = (g.owner >= 0) & (g.etype != EdgeType.SYNC)
    span = a.timing.time[g.dst[owned]] - a.timing.time[g.src[owned]]
    return np.bincount(g.owner[owned], weights=span, minlength=a.nodes.n).astype(np.int64)


def build(a: Analysis, step: str = "all", top: int = 10, every_hotspot: bool = False) -> Report:
    """Compute every table of the report for the selected windows (``every_hotspot``: the
    hotspot table keeps every name, not the ``top``)."""
    sel = select_windows(a, step)
    ch = tables.selected_charges(a, sel)
    total = int(ch.ns.sum())
    names = tables.Names(a)
    selfns = self_time(a)
    inside = tables.Windows(a).inside(sel)
    hot = _hotspots(ch, names.names, names.group, _Categories(a), selfns, inside, a.event_cls, total)
    by_class = tables.by_class(ch)
    steps = tables.window_table(a).iloc[sel]
    return Report(
        trace=a.table.meta.path,
        options=tables.report_options(tables.options_dict(a.options), step),
        steps=steps[STEP_COLUMNS].reset_index(drop=True),
        by_class=by_class,
        hotspots=(hot if every_hotspot else hot.head(top)).reset_index(drop=True),
        by_category=_rollup(ch, a, total, "category"),
        by_lane=_by_lane(a, ch, total),
        near_critical=_near_critical(a, ch, names.names, names.group, inside, top),
        recommendations=recommend(by_class, hot, bool(a.nodes.is_gpu.any())),
        checks=checks(a),
        graph=tables.graph_summary(a),
    )


class _Categories:
    """Each analysed event's category as a dictionary code, and the dictionary."""

    def __init__(self, a: Analysis) -> None:
        self.codes = a.table.col("cat")[a.nodes.uid].astype(np.int64)
        self.values = a.table.strings("cat")
        self._has_value = np.array([v is not None for v in self.values], dtype=bool)

    def known(self, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Codes that stand for a category (what ``pd.notna`` of the decoded strings says)."""
        ok = codes >= 0
        if len(self.values):
            ok &= self._has_value[np.maximum(codes, 0)]
        return ok


def _first_of(key: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_], size: int) -> npt.NDArray[np.int64]:
    """Per key in ``[0, size)``: the first position where ``valid`` holds (``len(key)`` if none)."""
    first = np.full(size, len(key), dtype=np.int64)
    pos = np.flatnonzero(valid)
    np.minimum.at(first, key[pos], pos)
    return first


def _hotspots(
    ch: pd.DataFrame,
    names: npt.NDArray[np.object_],
    group: npt.NDArray[np.int64],
    cats: _Categories,
    selfns: npt.NDArray[np.int64],
    inside: npt.NDArray[np.bool_],
    event_cls: npt.NDArray[np.int8],
    total: int,
) -> pd.DataFrame:
    """Per display name: time on the path, self time in the windows, count, category, class.

    Grouped by integer name index (``names[group]`` is each event's display name), which
    gives the same table as grouping the names themselves, sorted by name.
    """
    n_names = len(names)
    event, ns = ch.event.to_numpy(), ch.ns.to_numpy()
    is_ev = event >= 0
    e = event[is_ev]
    g_cp = group[e]
    cp_ns = tables.sum_by(g_cp, ns[is_ev], n_names)
    seen = np.zeros(len(group), dtype=bool)
    seen[e] = True
    on_cp = np.bincount(group[np.flatnonzero(seen)], minlength=n_names)  # an event has one name
    has_cp = np.flatnonzero(np.bincount(g_cp, minlength=n_names) > 0)
    by_cp = pd.DataFrame(
        {"cp_ns": cp_ns[has_cp], "on_cp": on_cp[has_cp].astype(np.int64)},
        index=pd.Index(names[has_cp], dtype=object, name="name"),
    )
    idx = np.flatnonzero(inside)
    g_in = group[idx]
    total_ns = tables.sum_by(g_in, selfns[idx], n_names)
    count = np.bincount(g_in, minlength=n_names).astype(np.int64)
    has_in = np.flatnonzero(count > 0)
    # "first" per name, in event order: the class of its first event, the first known category
    first = _first_of(g_in, np.ones(len(g_in), dtype=bool), n_names)[has_in]
    cat_code = cats.codes[idx]
    category = np.full(n_names, None, dtype=object)
    k_first = _first_of(g_in, cats.known(cat_code), n_names)
    k_groups = np.flatnonzero(k_first < len(g_in))
    category[k_groups] = cats.values[cat_code[k_first[k_groups]]]
    by_tot = pd.DataFrame(
        {
            "total_ns": total_ns[has_in],
            "count": count[has_in],
            "category": category[has_in],
            "cls": event_cls[idx][first],
        },
        index=pd.Index(names[has_in], dtype=object, name="name"),
    )
    df = by_cp.join(by_tot, how="outer").fillna({"cp_ns": 0, "on_cp": 0, "total_ns": 0, "count": 0})
    df["category"] = df.category.fillna("")
    df["class"] = [CLASSES[int(c)] if c == c else "" for c in df.cls]
    gap = ~is_ev
    gaps = pd.DataFrame({"cls": ch.cls.to_numpy()[gap], "ns": ns[gap]}).groupby("cls").ns.sum()
    if len(gaps):  # one row per wait class, built at once (a .loc row per class costs ~12 ms)
        gap_cls = [CLASSES[int(c)] for c in gaps.index]
        labels = [tables.GAP_NAMES.get(c, f"({c})") for c in gap_cls]
        rows = pd.DataFrame(
            {
                "cp_ns": gaps.to_numpy(),
                "on_cp": 0,
                "total_ns": 0,
                "count": 0,
                "category": "wait",
                "class": gap_cls,
            },
            index=pd.Index(labels, dtype=object, name="name"),
        )
        df = pd.concat([df.drop(index=labels, errors="ignore"), rows])
    self_total = max(int(selfns[idx].sum()), 1)
    df["cp_share"] = df.cp_ns / max(total, 1)
    df["total_share"] = df.total_ns / self_total
    df = df.reset_index().rename(columns={"index": "name"})
    ints = {"cp_ns": np.int64, "total_ns": np.int64, "count": np.int64, "on_cp": np.int64}
    df = df[list(HOTSPOT_COLUMNS)].astype(ints)
    return df.sort_values(["cp_ns", "total_ns"], ascending=False).reset_index(drop=True)


def _rollup(ch: pd.DataFrame, a: Analysis, total: int, col: str) -> pd.DataFrame:
    """Path time per event category (events without one are left out), plus waits and gaps."""
    event, ns = ch.event.to_numpy(), ch.ns.to_numpy()
    is_ev = event >= 0
    codes = a.table.col("cat")[a.nodes.uid[event[is_ev]]].astype(np.int64)
    values = a.table.strings("cat")
    known = codes >= 0
    size = max(len(values), 1)
    sums = tables.sum_by(codes[known], ns[is_ev][known], size)
    present = np.flatnonzero(np.bincount(codes[known], minlength=size) > 0)
    # few rows: let pandas merge equal labels and order them exactly as a full groupby would
    s = pd.Series(sums[present], index=values[present]).groupby(level=0).sum()
    gap = int(ns[~is_ev].sum())
    df = pd.DataFrame({col: s.index.astype(str), "cp_ns": s.to_numpy(dtype=np.int64)})
    if gap:
        df = pd.concat([df, pd.DataFrame({col: ["(waits and gaps)"], "cp_ns": [gap]})], ignore_index=True)
    df["share"] = df.cp_ns / max(total, 1)
    return df.sort_values("cp_ns", ascending=False).reset_index(drop=True)


def _by_lane(a: Analysis, ch: pd.DataFrame, total: int) -> pd.DataFrame:
    g = a.graph
    dst_ev = g.dst[ch.edge.to_numpy()] // 2
    ok = dst_ev < a.nodes.n
    lanes = np.where(ok, a.nodes.lane[np.minimum(dst_ev, max(a.nodes.n - 1, 0))], -1)
    labels = tables.lane_labels(a)
    shifted = lanes.astype(np.int64) + 1  # lanes are >= -1 (window bounds)
    size = int(shifted.max(initial=0)) + 1
    uniq = np.flatnonzero(np.bincount(shifted, minlength=size) > 0)
    sums = tables.sum_by(shifted, ch.ns.to_numpy(), size)[uniq]
    uniq = uniq - 1
    lab = np.array([labels.get(int(x), "(window bounds)") for x in uniq], dtype=object)
    # one row per lane: pandas merges equal labels and orders them as a full groupby would
    s = pd.Series(sums, index=lab).groupby(level=0).sum()
    df = pd.DataFrame({"lane": s.index.astype(str), "cp_ns": s.to_numpy(dtype=np.int64)})
    df["share"] = df.cp_ns / max(total, 1)
    return df.sort_values("cp_ns", ascending=False).reset_index(drop=True)


def _near_critical(
    a: Analysis,
    ch: pd.DataFrame,
    names: npt.NDArray[np.object_],
    group: npt.NDArray[np.int64],
    inside: npt.NDArray[np.bool_],
    top: int,
) -> pd.DataFrame:
    """Off-path events that could grow by little before they move the step."""
    on = np.zeros(a.nodes.n + 1, dtype=bool)
    g = a.graph
    touched = np.concatenate([g.src[ch.edge.to_numpy()], g.dst[ch.edge.to_numpy()]]) // 2
    on[np.minimum(touched, a.nodes.n)] = True
    # a caller whose self-time segments between callees are on the path is on it too
    on[ch.event[ch.event >= 0].to_numpy()] = True
    on = on[: a.nodes.n]
    slack = a.timing.slack[0 : 2 * a.nodes.n : 2]
    dur = a.nodes.end - a.nodes.ts
    leafish = a.nodes.kind != Kind.USER_ANNOTATION
    cand = np.flatnonzero(inside & ~on & leafish & (dur > 0))
    if len(cand) == 0:
        return pd.DataFrame(columns=["name", "slack_ns", "duration_ns", "lane"])
    if len(cand) > top > 0:
        # only events with a slack among the ``top`` smallest can make the list
        kth = np.partition(slack[cand], top - 1)[top - 1]
        cand = cand[slack[cand] <= kth]
    order = cand[np.lexsort((-dur[cand], slack[cand]))][:top]
    labels = tables.lane_labels(a)
    return pd.DataFrame(
        {
            "name": names[group[order]],
            "slack_ns": slack[order],
            "duration_ns": dur[order],
            "lane": [labels.get(int(x), "") for x in a.nodes.lane[order]],
        }
    )


def checks(a: Analysis) -> dict[str, Any]:
    """The invariants every result must satisfy, measured on this analysis."""
    err = np.abs(a.timing.time - a.nodes.time)
    starts, ends = a.window_bounds()
    cp = a.charges.groupby("window").ns.sum().reindex(range(len(a.windows)), fill_value=0).to_numpy()
    dur = ends - starts
    rel = np.abs(cp - dur) / np.maximum(dur, 1)
    return {
        "nodes": int(a.nodes.n_nodes),
        "replay_within_1us": float(np.mean(err <= 1000)),
        "replay_max_error_ns": int(err.max(initial=0)),
        "cp_vs_window_max_rel_error": float(rel.max(initial=0.0)),
    }
