"""Compare two results (runs, scenarios, or a scenario and the run it predicted).

Step time and CP length, bound-by classes and hotspots side by side with deltas;
operations are aligned by name and by call path (the chain of enclosing event names).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ctda.analysis.engine import Analysis
from ctda.analysis.report import Report, build
from ctda.analysis.tables import display_names


@dataclass
class Side:
    """One side of a comparison: a label, its report, and its analysis (for call paths)."""

    label: str
    analysis: Analysis
    predicted: bool = False  # a scenario's prediction rather than a measurement
    #: for a prediction, the measured analysis it re-times (None: not known)
    of: Analysis | None = None

    @property
    def report(self) -> Report:
        return build(self.analysis, top=10**6)

    @property
    def call_paths(self) -> pd.Series:
        """CP time per call path (:func:`call_paths`); a caller may keep it per side."""
        return call_paths(self.analysis)


@dataclass
class Comparison:
    a: str
    b: str
    summary: pd.DataFrame
    by_class: pd.DataFrame
    hotspots: pd.DataFrame
    call_paths: pd.DataFrame
    prediction_error: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
            return json_ready(df.to_dict(orient="records"))

        return {
            "a": self.a,
            "b": self.b,
            "summary": rows(self.summary),
            "bound_by": rows(self.by_class),
            "hotspots": rows(self.hotspots),
            "call_paths": rows(self.call_paths),
            "prediction_error": self.prediction_error,
        }


def json_ready(rows: Sequence[Mapping[Hashable, Any]]) -> list[dict[str, Any]]:
    """DataFrame records as JSON-able dicts: string keys, numpy scalars as Python ones."""
    out = []
    for r in rows:
        out.append({str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()})
    return out


def call_paths(a: Analysis) -> pd.Series:
    """CP time per call path ("outer/inner/op") over all windows.

    Paths are hash-consed level by level as (parent path id, name) integer pairs, so only
    the paths that carry CP time are ever spelled out as strings.
    """
    names = display_names(a)
    codes, uniq = pd.factorize(names)
    n = a.nodes
    pid = np.full(n.n, -1, dtype=np.int64)
    parent_of: list[np.ndarray] = []
    name_of: list[np.ndarray] = []
    base = 0
    for d in range(int(n.depth.max(initial=0)) + 1):
        at = np.flatnonzero(n.depth == d)
        if len(at) == 0:
            continue
        up = np.where(n.parent[at] >= 0, pid[np.maximum(n.parent[at], 0)], -1)
        key = (up + 1) * (len(uniq) + 1) + codes[at]
        levels, inv = np.unique(key, return_inverse=True)
        pid[at] = base + inv
        parent_of.append(levels // (len(uniq) + 1) - 1)
        name_of.append(levels % (len(uniq) + 1))
        base += len(levels)
    parents = np.concatenate(parent_of) if parent_of else np.zeros(0, dtype=np.int64)
    leaf = np.concatenate(name_of) if name_of else np.zeros(0, dtype=np.int64)
    ev = a.charges[a.charges.event >= 0]
    per = pd.Series(ev.ns.to_numpy()).groupby(pid[ev.event.to_numpy()]).sum()
    spelled: dict[int, str] = {}

    def spell(p: int) -> str:
        if p not in spelled:
            head = spell(int(parents[p])) + "/" if parents[p] >= 0 else ""
            spelled[p] = head + str(uniq[leaf[p]])
        return spelled[p]

    return pd.Series(per.to_numpy(), index=[spell(int(p)) for p in per.index]).groupby(level=0).sum()


def _mean_step(r: Report) -> float:
    return float(r.steps.duration_ns.mean()) if len(r.steps) else 0.0


def _retimes(pred: Side, meas: Side) -> bool:
    """Whether the prediction re-times the measured side's own trace: then the difference is
    the change the scenario predicts, not an error of the prediction."""
    if pred.of is None:
        return False
    if pred.of is meas.analysis:
        return True
    path = pred.of.table.meta.path
    return path is not None and path == meas.analysis.table.meta.path


def compare(a: Side, b: Side) -> Comparison:
    """Side-by-side tables; when exactly one side is a prediction, how far it is from the
    measured side: its error against another measurement, or, against the very run it
    re-times, the change it predicts (``versus`` says which: "measurement" or "base")."""
    ra, rb = a.report, b.report
    summary = pd.DataFrame(
        {
            "metric": ["windows", "mean step ns", "critical path ns"],
            "a": [len(ra.steps), _mean_step(ra), ra.total_ns],
            "b": [len(rb.steps), _mean_step(rb), rb.total_ns],
        }
    )
    summary["delta"] = summary.b - summary.a
    cls = _merge(ra.by_class.set_index("class").cp_ns, rb.by_class.set_index("class").cp_ns, "class")
    hot = _merge(ra.hotspots.set_index("name").cp_ns, rb.hotspots.set_index("name").cp_ns, "name")
    cp = _merge(a.call_paths, b.call_paths, "call_path")
    err: dict[str, Any] = {}
    if a.predicted != b.predicted:
        pred, meas = (ra, rb) if a.predicted else (rb, ra)
        p, m = _mean_step(pred), _mean_step(meas)
        base = _retimes(*((a, b) if a.predicted else (b, a)))
        err = {
            "versus": "base" if base else "measurement",
            "predicted_mean_step_ns": p,
            "measured_mean_step_ns": m,
            "error_ns": p - m,
            "relative_error": (p - m) / m if m else float("nan"),
        }
    return Comparison(a.label, b.label, summary, cls, hot, cp, err)


def _merge(sa: pd.Series, sb: pd.Series, key: str) -> pd.DataFrame:
    df = pd.concat([sa.rename("a_ns"), sb.rename("b_ns")], axis=1).fillna(0)
    df.index.name = key
    df = df.reset_index()
    df["delta_ns"] = df.b_ns - df.a_ns
    df = df.astype({"a_ns": np.int64, "b_ns": np.int64, "delta_ns": np.int64})
    return df.reindex(df.delta_ns.abs().sort_values(ascending=False).index).reset_index(drop=True)
