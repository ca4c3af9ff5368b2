"""Stage: a job's report tables, computed once for every renderer (terminal, JSON).

Contract: ``job_report(job, top)`` -> :class:`JobReport`: the per-step table (job step by its
collectives and the rank that ended it, the slowest rank's own step, the straggler when it is
beyond the job's noise, the candidate and its lateness with the noise band and a verdict,
where the path ran, the top item on the candidate), the
job path's top items across ranks, the collectives' wait/transfer split, clock offsets and
the matching summary; and the two tables behind the job's pictures: each rank's lateness per
step (the heatmap) and the job path itself, stretch by stretch across the ranks (the
timeline). The store keeps a report and gives it back; the CLI and the UI show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ctda.analysis.classify import CLASSES
from ctda.analysis.report import json_rows
from ctda.job.noise import K
from ctda.job.run import Job
from ctda.job.steps import describe

LATENESS_COLUMNS = ["step", "rank", "late_ns"]
#: step columns on the job's definition and the straggler's significance: ``candidate`` (the
#: rank its lateness names), ``noise_ns`` (the band it must exceed), ``verdict``, ``ended_by``
#: (the rank whose completion ended the job step), ``rank_step_ns`` (the slowest rank's own
#: window) and ``bounds`` (how the step's start and end were found)
STEP_EXTRA = ["candidate", "noise_ns", "verdict", "ended_by", "rank_step_ns", "bounds"]
PATH_COLUMNS = ["step", "pos", "rank", "event", "name", "class", "t0", "t1", "ns"]


@dataclass
class JobReport:
    name: str
    ranks: list[int]
    world_size: int
    missing: list[int]
    steps: pd.DataFrame
    path_items: pd.DataFrame
    waits: pd.DataFrame
    clocks: pd.DataFrame
    matching: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    #: step, rank, late_ns: the rank's arrival at the step's collectives minus the median
    #: arrival, summed over the step's collectives (positive: the others waited for it)
    lateness: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LATENESS_COLUMNS))
    #: the job path in order: step, pos, rank, event (index among the rank's analysed events,
    #: -1 for a gap), name, class, t0/t1 (ns, the job's clock: clock offsets applied), ns
    path: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PATH_COLUMNS))

    def to_json(self) -> dict[str, Any]:
        def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
            return json_rows(df)

        return {
            "job": self.name,
            "ranks": self.ranks,
            "world_size": self.world_size,
            "missing_ranks": self.missing,
            "steps": rows(self.steps),
            "path_items": rows(self.path_items),
            "collective_waits": rows(self.waits),
            "clock_offsets": rows(self.clocks),
            "matching": self.matching,
            "notes": self.notes,
            "checks": self.checks,
            "lateness": rows(self.lateness),
        }


def job_report(job: Job, top: int = 10) -> JobReport:
    """The tables of ``ctda analyze`` for a job."""
    by_rank = job.paths.groupby(["label", "rank"]).ns.sum()
    strag = job.stragglers.set_index("label")
    rows = []
    s: Any
    for s in job.steps.itertuples():
        label = str(s.label)
        shares = by_rank.loc[label] if label in by_rank.index.get_level_values(0) else pd.Series(dtype=int)
        where = ", ".join(
            f"r{r} {ns / s.job_step_ns:.0%}" for r, ns in shares.sort_values(ascending=False).items()
        )
        st = strag.loc[label]
        items = st.top_items
        cand = int(st.get("candidate", st.straggler))
        slowed = _slowed_text(job, label, cand)
        rows.append(
            {
                "step": label,
                "job_step_ns": int(s.job_step_ns),
                "slowest_rank": int(s.slowest_rank),
                "fastest_rank_step_ns": int(s.fastest_ns),
                "straggler": int(st.straggler),
                "late_ns": int(st.late_ns),
                "path_by_rank": where,
                "straggler_top": _item_text(items[0]) if items else "",
                "last_to_arrive": int(st["last"]),
                "host_contention": slowed,
                "straggler_own": _own_text(job, label, cand),
                "late_by_rank": st.late_by_rank,
                "charged_by_rank": st.charged_by_rank,
                # the job step's definition and the straggler's significance (STEP_EXTRA)
                "candidate": cand,
                "noise_ns": int(st.get("noise_ns", 0)),
                "verdict": str(st.get("verdict", "")),
                "ended_by": int(s.end_rank),
                "rank_step_ns": int(s.rank_step_ns),
                "bounds": f"{s.start_by} -> {s.end_by}",
            }
        )
    path = _path_rows(job)
    items = path_items(path, top)
    clocks = pd.DataFrame(
        [
            {
                "rank": r,
                "host": job.parts[r].rank_id.host or "",
                "rank_from": job.parts[r].rank_id.source,
                "offset_ns": job.offsets.offset.get(r, 0),
                "how": job.offsets.how.get(r, ""),
            }
            for r in job.ranks
        ]
    )
    cp = job.paths.groupby("label").ns.sum()
    err = (
        int(np.abs(cp.reindex(job.steps.label).to_numpy() - job.steps.job_step_ns.to_numpy()).max())
        if len(cp)
        else 0
    )
    per_cid = job.matching.parts.groupby("cid").size() if len(job.matching.parts) else pd.Series(dtype=int)
    checks = {
        "replay_exact": all(p.replay_exact for p in job.parts.values())
        and (job.graph is None or job.graph.replay_exact()),
        "cp_vs_job_step_max_error_ns": err,
        "cross_rank_edges": int((per_cid * (per_cid - 1)).sum()),
        "job_graph": job.graph is not None,
        "step_definition": describe(job.steps),
        "noise": _noise(job),
        # per step, the columns a store keeps here rather than in its step rows
        "step_extra": [{c: r[c] for c in STEP_EXTRA} for r in rows],
    }
    return JobReport(
        name=job.name,
        ranks=job.ranks,
        world_size=job.layout.world_size,
        missing=job.layout.missing,
        steps=pd.DataFrame(rows),
        path_items=items,
        waits=job.waits,
        clocks=clocks,
        matching=job.matching.summary(),
        notes=job.notes,
        checks=checks,
        lateness=_lateness(job),
        path=path,
    )


def _noise(job: Job) -> dict[str, Any]:
    """The job's noise as the report keeps it (``ctda.job.noise``)."""
    n = job.noise
    if n is None:
        return {}
    return {"sigma_ns": round(n.sigma_ns), "k": K, "steps": n.n_steps, "from": n.how}


def _item_text(item: tuple[Any, ...]) -> str:
    what = ", extra work" if item[3] == "extra work" else ""
    return f"{item[1]} ({item[2] / 1e6:.1f} ms{what})"


def _slowed_text(job: Job, label: str, straggler: int) -> str:
    """``r3 16.5 ms, r0 7.3 ms``: stall time of other ranks charged to the straggler's extra
    work on their shared host (see ``ctda/job/hostload.py``); empty when none."""
    if job.host is None or straggler < 0 or job.host.slowed.empty:
        return ""
    s = job.host.slowed
    mine = s[(s.label == label) & (s.by == straggler)]
    if mine.empty:
        return ""
    per = mine.groupby("rank").charged_ns.sum().sort_values(ascending=False)
    return "slowed " + ", ".join(f"r{int(r)} {ns / 1e6:.1f} ms" for r, ns in per.items())


def _own_text(job: Job, label: str, straggler: int) -> str:
    """``24.4 / 0.0``: the straggler's own extra work and the excess of its stalled common
    ops in the step, ms (no extra work and only stalls: it was slow, not busier)."""
    if job.host is None or straggler < 0:
        return ""
    x, s = job.host.extra, job.host.stalls
    extra = x[(x.label == label) & (x["rank"] == straggler)].extra_ns.sum()
    stall = s[(s.label == label) & (s["rank"] == straggler)].stall_ns.sum()
    return f"{extra / 1e6:.1f} / {stall / 1e6:.1f}"


def _lateness(job: Job) -> pd.DataFrame:
    if len(job.late) == 0:
        return pd.DataFrame(columns=LATENESS_COLUMNS)
    out = job.late.groupby(["label", "rank"], sort=False).late_ns.sum().reset_index()
    return out.rename(columns={"label": "step"})[LATENESS_COLUMNS].astype({"rank": int, "late_ns": np.int64})


def _path_rows(job: Job) -> pd.DataFrame:
    """The job path with rank-local event indexes (the job numbers ranks' events one after
    another: rank r's first event is the sum of the earlier ranks' counts)."""
    p = job.paths
    if len(p) == 0:
        return pd.DataFrame(columns=PATH_COLUMNS)
    ranks = sorted(job.parts)
    counts = [job.parts[r].skeleton.n_events for r in ranks]
    base = dict(zip(ranks, np.cumsum([0, *counts])[:-1].tolist()))
    rank = p["rank"].to_numpy(dtype=np.int64)
    ev = p.event.to_numpy(dtype=np.int64)
    local = np.where(ev >= 0, ev - pd.Series(rank).map(base).to_numpy(dtype=np.int64), -1)
    out = pd.DataFrame(
        {
            "step": p.label.to_numpy(),
            "pos": p.groupby("label", sort=False).cumcount().to_numpy(),
            "rank": rank,
            "event": local,
            "name": p["name"].astype(str).to_numpy(),
            "class": [CLASSES[int(c)] for c in p.cls],
            "t0": p.t0.to_numpy(dtype=np.int64),
            "t1": p.t1.to_numpy(dtype=np.int64),
            "ns": p.ns.to_numpy(dtype=np.int64),
        }
    )
    return out


def path_items(path: pd.DataFrame, top: int) -> pd.DataFrame:
    """The job path's items over all steps (``path``: :data:`PATH_COLUMNS` rows in order):
    rank, event name (a gap: its class in brackets), class, time on the path. The store
    recomputes them from its path rows with this same function."""
    if len(path) == 0:
        return pd.DataFrame(columns=["rank", "name", "class", "cp_ns", "share"])
    ev = path.event.to_numpy()
    cls = path["class"].astype(str).to_numpy()
    names = np.where(ev >= 0, path["name"].astype(str).to_numpy(), "(" + pd.Series(cls) + ")")
    frame = pd.DataFrame(
        {"rank": path["rank"].to_numpy(), "name": names, "class": cls, "ns": path.ns.to_numpy()}
    )
    agg = frame.groupby(["rank", "name", "class"], sort=False).ns.sum().reset_index(name="cp_ns")
    agg["share"] = agg.cp_ns / max(int(path.ns.sum()), 1)
    return agg.sort_values("cp_ns", ascending=False).head(top).reset_index(drop=True)
