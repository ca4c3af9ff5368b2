"""Stage (cross-rank): the job's steps, bounded by the collectives the ranks met at.

Contract: ``define_steps(windows, ends, ranks)`` -> one row per step every rank has, with
the job step's bounds, its length and the per-rank (ProfilerStep) view beside it.

The definition (``docs/jobs.md#the-job-step``): a collective ends for the job when its
last participant completes it; the *end* of job step ``k`` is the latest completion of any
collective of step ``k`` (a collective belongs to the step its earliest part ran in, on the
job's clock: clock offsets applied). Job step ``k`` runs from the end of step ``k - 1`` to
the end of step ``k``. The first step has no earlier collective: it starts when the last
rank began it (the latest start of the ranks' step windows). A step without collectives
ends when the last rank ends its window. So a rank that began its ProfilerStep early is
not slower for that: the job's step is measured where the ranks meet. Each rank's own
window stays beside it (``slowest_rank``, ``rank_step_ns``, ``fastest_ns``, ``median_ns``).

``windows``: per (rank, window) ``label``, ``step``, ``rank``, ``win``, ``t_start``,
``t_end`` (job clock), ``start_node``, ``end_node`` (the rank's own node ids).
``ends``: per collective part ``label``, ``rank``, ``event`` (rank-local), ``t_done``
(job clock). Node ids in the result are the rank's own (``start_rank``/``end_rank``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.job.match import ClockOffsets, Matching

#: how a step's bounds were found (``bound`` column: start, end)
BY_COLLECTIVE = "collective"
BY_FIRST_START = "last rank's start"
BY_WINDOW_END = "last rank's window end"

COLUMNS = [
    "label",
    "step",
    "t_start",
    "t_end",
    "job_step_ns",
    "start_rank",
    "start_node",
    "end_rank",
    "end_node",
    "start_by",
    "end_by",
    "slowest_rank",
    "win",
    "rank_step_ns",
    "fastest_ns",
    "median_ns",
]


def collective_ends(matching: Matching, offsets: ClockOffsets, late: pd.DataFrame) -> pd.DataFrame:
    """Each matched part's completion on the job clock with its collective's step (``late``:
    :func:`ctda.job.path.lateness` rows, which label every collective)."""
    p = matching.parts
    if len(p) == 0 or len(late) == 0:
        return pd.DataFrame(columns=["label", "rank", "event", "t_done"])
    off = p["rank"].map(offsets.offset).fillna(0).to_numpy(dtype=np.int64)
    out = p[["cid", "rank", "event"]].assign(t_done=p.t_done.to_numpy(dtype=np.int64) + off)
    return out.merge(late[["cid", "rank", "label"]], on=["cid", "rank"])[["label", "rank", "event", "t_done"]]


def define_steps(windows: pd.DataFrame, ends: pd.DataFrame, ranks: list[int]) -> pd.DataFrame:
    """The job steps (see the module doc), in time order."""
    per = windows.copy()
    per["dur_ns"] = per.t_end - per.t_start
    shared = per.groupby("label")["rank"].nunique() == len(ranks)
    per = per[per.label.map(shared).fillna(False).astype(bool)]
    if per.empty:
        return pd.DataFrame(columns=COLUMNS)
    slow = per.sort_values(["dur_ns", "rank"], ascending=[False, True]).groupby("label", sort=False).head(1)
    slow = slow.set_index("label")
    spread = per.groupby("label").dur_ns.agg(["min", "median"])
    # the step's last completion (ties: the lower rank) and the ranks' last window start/end
    last_done = ends.sort_values(["t_done", "rank"], ascending=[False, True]).groupby("label").head(1)
    last_done = last_done.set_index("label")
    last_start = per.sort_values(["t_start", "rank"], ascending=[False, True]).groupby("label").head(1)
    last_start = last_start.set_index("label")
    last_end = per.sort_values(["t_end", "rank"], ascending=[False, True]).groupby("label").head(1)
    last_end = last_end.set_index("label")
    order = per.groupby("label").t_start.min().sort_values().index.tolist()
    rows = []
    prev: tuple[int, int, int, str] | None = None  # (t, rank, node, how) of the last step's end
    for label in order:
        ls = last_start.loc[label]
        start = (
            prev
            if prev is not None
            else (int(ls.t_start), int(ls["rank"]), int(ls.start_node), BY_FIRST_START)
        )
        if label in last_done.index:
            d = last_done.loc[label]
            end = (int(d.t_done), int(d["rank"]), 2 * int(d.event) + 1, BY_COLLECTIVE)
        else:
            le = last_end.loc[label]
            end = (int(le.t_end), int(le["rank"]), int(le.end_node), BY_WINDOW_END)
        if end[0] <= start[0]:  # an end before the start: the step is its ranks' own windows
            start = (int(ls.t_start), int(ls["rank"]), int(ls.start_node), BY_FIRST_START)
        s = slow.loc[label]
        rows.append(
            (
                label,
                int(s.step),
                start[0],
                end[0],
                end[0] - start[0],
                start[1],
                start[2],
                end[1],
                end[2],
                start[3],
                end[3],
                int(s["rank"]),
                int(s.win),
                int(s.dur_ns),
                int(spread.loc[label, "min"]),
                float(spread.loc[label, "median"]),
            )
        )
        prev = end
    return pd.DataFrame(rows, columns=COLUMNS)


def describe(steps: pd.DataFrame) -> str:
    """One line saying how the job's steps were bounded, for the reports."""
    if len(steps) == 0:
        return "no step every rank has"
    by_coll = int((steps.end_by == BY_COLLECTIVE).sum())
    return (
        "job step: from the end of the previous step's last collective (the first step: the last"
        " rank's start) to the end of the step's last collective, across all ranks"
        f" ({by_coll} of {len(steps)} step(s) end at a collective)"
    )
