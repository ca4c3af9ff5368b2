"""Stage: roll an Analysis up into report data (hotspots, bound-by, steps, slack, advice).

Pure data: rendering lives in :mod:`ctda.render.analyze`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.advice import recommend
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind

GAP_NAMES = {
    "cpu_gap": "(CPU idle / unrecorded)",
    "gpu_gap": "(GPU stream idle between work)",
    "launch_overhead": "(launch latency)",
    "sync_wait": "(sync latency)",
    "cross_thread": "(cross-thread wait)",
}
_STEP_NUM = re.compile(r"^ProfilerStep#\d+$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


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
        def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [{k: _plain(v) for k, v in r.items()} for r in df.to_dict(orient="records")]

        return {
            "trace": self.trace,
            "options": self.options,
            "critical_path_ns": self.total_ns,
            "steps": rows(self.steps),
            "bound_by": rows(self.by_class),
            "hotspots": rows(self.hotspots),
            "by_category": rows(self.by_category),
            "by_thread_or_stream": rows(self.by_lane),
            "near_critical": rows(self.near_critical),
            "recommendations": self.recommendations,
            "checks": self.checks,
            "graph": self.graph,
        }


def _plain(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


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


def display_names(a: Analysis) -> npt.NDArray[np.object_]:
    """Names used for rollups: step numbers and object addresses folded so instances aggregate."""
    codes = a.table.col("name")[a.nodes.uid]
    values = a.table.strings("name")
    folded = np.array(
        ["ProfilerStep#*" if _STEP_NUM.match(str(v)) else _ADDRESS.sub("", str(v)) for v in values] or [""],
        dtype=object,
    )
    return folded[codes]


def self_time(a: Analysis) -> npt.NDArray[np.int64]:
    """Self time of every analysed event in this timing: the spans of the edges it owns."""
    g = a.graph
    owned = g.owner >= 0
    span = a.timing.time[g.dst[owned]] - a.timing.time[g.src[owned]]
    return np.bincount(g.owner[owned], weights=span, minlength=a.nodes.n).astype(np.int64)


def _in_windows(a: Analysis, sel: list[int]) -> npt.NDArray[np.bool_]:
    starts, ends = a.window_bounds()
    inside = np.zeros(a.nodes.n, dtype=bool)
    for i in sel:
        inside |= (a.nodes.ts >= starts[i]) & (a.nodes.ts < ends[i])
    return inside


def build(a: Analysis, step: str = "all", top: int = 10) -> Report:
    """Compute every table of the report for the selected windows."""
    sel = select_windows(a, step)
    ch = a.charges[a.charges.window.isin(sel)]
    total = int(ch.ns.sum())
    names = display_names(a)
    kinds = a.table.decoded("cat", a.nodes.uid)
    selfns = self_time(a)
    inside = _in_windows(a, sel)
    hot = _hotspots(ch, names, kinds, selfns, inside, a.event_cls, total)
    return Report(
        trace=a.table.meta.path,
        options={
            "windows": a.options.windows,
            "cross_thread": list(a.options.cross_thread),
            "mode": a.options.mode,
            "step": step,
        },
        steps=_steps(a, sel),
        by_class=_by_class(ch, total),
        hotspots=hot.head(top).reset_index(drop=True),
        by_category=_rollup(ch, kinds, total, "category"),
        by_lane=_by_lane(a, ch, total),
        near_critical=_near_critical(a, ch, names, inside, top),
        recommendations=recommend(_by_class(ch, total), hot, bool(a.nodes.is_gpu.any())),
        checks=checks(a),
        graph=graph_summary(a),
    )


def _steps(a: Analysis, sel: list[int]) -> pd.DataFrame:
    starts, ends = a.window_bounds()
    rows = []
    t0 = int(a.nodes.time[a.nodes.source])
    for i in sel:
        w = a.windows[i]
        c = a.charges[a.charges.window == i]
        by = c.groupby("cls").ns.sum()
        top_cls = CLASSES[int(by.idxmax())] if len(by) else ""
        rows.append(
            {
                "window": w.label,
                "step": w.step if w.step is not None else -1,
                "start_ms": (int(starts[i]) - t0) / 1e6,
                "duration_ns": int(ends[i] - starts[i]),
                "cp_ns": int(c.ns.sum()),
                "bound_by": top_cls,
                "bound_by_share": float(by.max() / max(c.ns.sum(), 1)) if len(by) else 0.0,
            }
        )
    return pd.DataFrame(rows)


def _by_class(ch: pd.DataFrame, total: int) -> pd.DataFrame:
    by = ch.groupby("cls").ns.sum()
    df = pd.DataFrame({"class": [CLASSES[int(c)] for c in by.index], "cp_ns": by.to_numpy(dtype=np.int64)})
    df["share"] = df.cp_ns / max(total, 1)
    return df.sort_values("cp_ns", ascending=False).reset_index(drop=True)


def _hotspots(
    ch: pd.DataFrame,
    names: npt.NDArray[np.object_],
    cats: npt.NDArray[np.object_],
    selfns: npt.NDArray[np.int64],
    inside: npt.NDArray[np.bool_],
    event_cls: npt.NDArray[np.int8],
    total: int,
) -> pd.DataFrame:
    ev = ch[ch.event >= 0]
    e = ev.event.to_numpy()
    cp = pd.DataFrame({"name": names[e], "ns": ev.ns.to_numpy(), "event": e})
    by_cp = cp.groupby("name").agg(cp_ns=("ns", "sum"), on_cp=("event", "nunique"))
    idx = np.flatnonzero(inside)
    tot = pd.DataFrame({"name": names[idx], "self": selfns[idx], "cat": cats[idx], "cls": event_cls[idx]})
    by_tot = tot.groupby("name").agg(
        total_ns=("self", "sum"), count=("self", "size"), category=("cat", "first"), cls=("cls", "first")
    )
    df = by_cp.join(by_tot, how="outer").fillna({"cp_ns": 0, "on_cp": 0, "total_ns": 0, "count": 0})
    df["category"] = df.category.fillna("")
    df["class"] = [CLASSES[int(c)] if c == c else "" for c in df.cls]
    gaps = ch[ch.event < 0].groupby("cls").ns.sum()
    for c, ns in gaps.items():
        label = GAP_NAMES.get(CLASSES[int(c)], f"({CLASSES[int(c)]})")
        df.loc[label, ["cp_ns", "on_cp", "total_ns", "count", "category", "class"]] = [
            ns,
            0,
            0,
            0,
            "wait",
            CLASSES[int(c)],
        ]
    self_total = max(int(tot.self.sum()), 1)
    df["cp_share"] = df.cp_ns / max(total, 1)
    df["total_share"] = df.total_ns / self_total
    df = df.reset_index().rename(columns={"index": "name"})
    cols = ["name", "category", "class", "cp_ns", "cp_share", "total_ns", "total_share", "count", "on_cp"]
    df = df[cols].astype({"cp_ns": np.int64, "total_ns": np.int64, "count": np.int64, "on_cp": np.int64})
    return df.sort_values(["cp_ns", "total_ns"], ascending=False).reset_index(drop=True)


def _rollup(ch: pd.DataFrame, labels: npt.NDArray[np.object_], total: int, col: str) -> pd.DataFrame:
    ev = ch[ch.event >= 0]
    s = pd.Series(ev.ns.to_numpy(), index=labels[ev.event.to_numpy()]).groupby(level=0).sum()
    gap = int(ch[ch.event < 0].ns.sum())
    df = pd.DataFrame({col: s.index.astype(str), "cp_ns": s.to_numpy(dtype=np.int64)})
    if gap:
        df = pd.concat([df, pd.DataFrame({col: ["(waits and gaps)"], "cp_ns": [gap]})], ignore_index=True)
    df["share"] = df.cp_ns / max(total, 1)
    return df.sort_values("cp_ns", ascending=False).reset_index(drop=True)


def lane_labels(a: Analysis) -> dict[int, str]:
    """Readable name per lane: "thread <tid> (<name>)" or "GPU <d> stream <s>"."""
    out = {}
    for r in a.table.lanes.itertuples():
        if r.is_gpu:
            out[int(r.lane)] = f"GPU {r.device} stream {r.stream}"
        else:
            name = f" ({r.thread_name})" if r.thread_name and str(r.tid) not in str(r.thread_name) else ""
            out[int(r.lane)] = f"thread {r.tid}{name}" if not r.thread_name or name else str(r.thread_name)
    return out


def _by_lane(a: Analysis, ch: pd.DataFrame, total: int) -> pd.DataFrame:
    g = a.graph
    dst_ev = g.dst[ch.edge.to_numpy()] // 2
    ok = dst_ev < a.nodes.n
    lanes = np.where(ok, a.nodes.lane[np.minimum(dst_ev, max(a.nodes.n - 1, 0))], -1)
    labels = lane_labels(a)
    lab = np.array([labels.get(int(x), "(window bounds)") for x in lanes], dtype=object)
    s = pd.Series(ch.ns.to_numpy(), index=lab).groupby(level=0).sum()
    df = pd.DataFrame({"lane": s.index.astype(str), "cp_ns": s.to_numpy(dtype=np.int64)})
    df["share"] = df.cp_ns / max(total, 1)
    return df.sort_values("cp_ns", ascending=False).reset_index(drop=True)


def _near_critical(
    a: Analysis, ch: pd.DataFrame, names: npt.NDArray[np.object_], inside: npt.NDArray[np.bool_], top: int
) -> pd.DataFrame:
    """Off-path events that could grow by little before they move the step."""
    on = np.zeros(a.nodes.n + 1, dtype=bool)
    g = a.graph
    touched = np.concatenate([g.src[ch.edge.to_numpy()], g.dst[ch.edge.to_numpy()]]) // 2
    on[np.minimum(touched, a.nodes.n)] = True
    on = on[: a.nodes.n]
    slack = a.timing.slack[0 : 2 * a.nodes.n : 2]
    dur = a.nodes.end - a.nodes.ts
    leafish = a.nodes.kind != Kind.USER_ANNOTATION
    cand = np.flatnonzero(inside & ~on & leafish & (dur > 0))
    if len(cand) == 0:
        return pd.DataFrame(columns=["name", "slack_ns", "duration_ns", "lane"])
    order = cand[np.lexsort((-dur[cand], slack[cand]))][:top]
    labels = lane_labels(a)
    return pd.DataFrame(
        {
            "name": names[order],
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


def graph_summary(a: Analysis) -> dict[str, Any]:
    g = a.graph
    by_rule = pd.Series(g.rule).map(lambda r: g.rule_names[r]).value_counts()
    return {
        "events": int(a.nodes.n),
        "edges": int(g.n_edges),
        "edges_by_rule": {str(k): int(v) for k, v in by_rule.items()},
        "dropped_acausal_edges": dict(g.dropped),
        "binding_cross_thread_edges": int(np.sum(a.calibration.binding & (g.etype == EdgeType.CROSS_THREAD))),
    }
