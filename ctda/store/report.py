"""Rebuild ``ctda analyze``'s :class:`~ctda.analysis.report.Report` from a stored run.

Every table comes from a named query (``ctda/queries``), so what ``ctda report`` prints
is what anyone gets from Cypher; only the final merge (hotspot rows for waits, the
recommendations) is Python, shared with :mod:`ctda.analysis.report`.
"""

from __future__ import annotations

import pandas as pd

from ctda.analysis import report as analysis_report
from ctda.analysis.report import Report
from ctda.analysis.tables import GAP_NAMES, report_options
from ctda.queries import loader
from ctda.store.base import RunInfo, Store, StoreError

HOT_COLS = ["name", "category", "class", "cp_ns", "cp_share", "total_ns", "total_share", "count", "on_cp"]


def _frame(store: Store, name: str, columns: list[str], **params: object) -> pd.DataFrame:
    res = loader.run(store, name, **params)
    df = pd.DataFrame(res.rows, columns=res.columns)
    return df[columns] if len(df) else pd.DataFrame({c: [] for c in columns})


def step_param(store: Store, run: RunInfo, step: str) -> int:
    """``--step`` as the queries' parameter, checked against the run's windows."""
    if step == "all":
        return -1
    try:
        wanted = int(step)
    except ValueError:
        raise StoreError(f"--step must be a ProfilerStep number or 'all', not {step!r}") from None
    steps = _frame(store, "steps", ["step"], run=run.name)
    have = sorted(int(s) for s in steps.step if int(s) >= 0)
    if wanted not in have:
        raise StoreError(
            f"no ProfilerStep#{wanted} in run {run.name!r} (steps: {', '.join(map(str, have)) or 'none'})"
        )
    return wanted


def hotspots(store: Store, run: str, step: int) -> pd.DataFrame:
    """Every hotspot row, events and waits, sorted as the report sorts them."""
    ev = _frame(store, "hotspots_by_name", HOT_COLS, run=run, step=step)
    waits = _frame(store, "waits", ["class", "cp_ns", "cp_share"], run=run, step=step)
    gap = pd.DataFrame(
        {
            "name": [GAP_NAMES.get(c, f"({c})") for c in waits["class"]],
            "category": "wait",
            "class": waits["class"],
            "cp_ns": waits.cp_ns,
            "cp_share": waits.cp_share,
            "total_ns": 0,
            "total_share": 0.0,
            "count": 0,
            "on_cp": 0,
        }
    )
    df = pd.concat([ev, gap], ignore_index=True) if len(gap) else ev
    df = df.astype({"cp_ns": "int64", "total_ns": "int64", "count": "int64", "on_cp": "int64"})
    df = df.astype({"cp_share": "float64", "total_share": "float64"})
    return df.sort_values(["cp_ns", "total_ns", "name"], ascending=[False, False, True]).reset_index(
        drop=True
    )


def build(store: Store, run_name: str, step: str = "all", top: int = 10) -> Report:
    """The report of a stored run, as ``ctda analyze`` would print it for the same trace."""
    run = store.find_run(run_name)
    if run is None:
        raise StoreError(f"no run {run_name!r} in {store.location} (see ctda runs)")
    s = step_param(store, run, step)
    steps = _frame(
        store,
        "steps",
        ["window", "step", "start_ms", "duration_ns", "cp_ns", "bound_by", "bound_by_share"],
        run=run.name,
        step=s,
    )
    by_class = _frame(store, "hotspots_by_class", ["class", "cp_ns", "share"], run=run.name, step=s)
    hot = hotspots(store, run.name, s)
    by_category = _frame(store, "hotspots_by_category", ["category", "cp_ns", "share"], run=run.name, step=s)
    by_lane = _frame(store, "hotspots_by_lane", ["lane", "cp_ns", "share"], run=run.name, step=s)
    near = _frame(
        store, "near_critical", ["name", "slack_ns", "duration_ns", "lane"], run=run.name, step=s, top=top
    )
    return Report(
        trace=run.file,
        options=report_options(run.options, step),
        steps=steps,
        by_class=by_class,
        hotspots=hot.head(top).reset_index(drop=True),
        by_category=by_category,
        by_lane=by_lane,
        near_critical=near,
        recommendations=analysis_report.recommend(by_class, hot, bool(run.extra.get("has_gpu"))),
        checks=run.extra.get("checks", {}),
        graph=run.extra.get("graph", {}),
    )
