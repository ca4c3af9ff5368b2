"""Tables behind the Job page, computed from a :class:`~ctda.job.report.JobReport` (no
Streamlit, no Plotly).

A job report is what ``ctda analyze DIR`` prints and what the store gives back for a stored
job; everything here reshapes it for drawing, once per report (:func:`tables`) or once per
step (:func:`timeline`). Times shown are milliseconds since the job's start: the earliest
point of the job path, which is the earliest rank's trace start on the job's clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.api_jobs import JobReport
from ctda.ui.frames import Timeline

MS = 1e6  # ns per millisecond
#: a rank's GPU stream row is drawn this many times taller than a CPU thread row, as on
#: the Critical path page (GPU work is what people look for)
GPU_ROW = 2.5
PATH_ROW = 1.5  # the job path's own row in each band: the thing the page is about
ROW_GAP = 0.15
BAND_GAP = 0.8


def rank_label(rank: int) -> str:
    return f"r{int(rank)}" if int(rank) >= 0 else "-"


# --- per report ------------------------------------------------------------------------


@dataclass
class Lateness:
    """Each rank's lateness per step, ms (ranks x steps; NaN where a rank has none), and
    each step's straggler (-1: none)."""

    steps: list[str]
    ranks: list[int]
    ms: npt.NDArray[np.float64]
    straggler: list[int]


@dataclass
class JobTables:
    """Everything the Job page shows about a job besides the per-step timeline."""

    name: str
    base_ns: int  # the job's start on its clock: x = 0 of every timeline
    lateness: Lateness
    #: step, job_step_ms, slowest, straggler, late_ms, straggler_top, path_by_rank,
    #: straggler_own, last, host_contention (as ``ctda analyze DIR`` prints them)
    steps: pd.DataFrame
    waits: pd.DataFrame  # step, op, on_rank, waited_for, wait_ms, transfer_ms
    clocks: pd.DataFrame  # rank, host, rank_from, offset_ms, how
    offsets_ns: dict[int, int]  # per rank: add to a rank's own times for the job's clock
    summary: str  # ranks present, steps, matched collectives and the checks, in one line
    step_labels: dict[str, str]  # step -> its picker label (job step ms, straggler)
    mean_step_ms: float
    top_straggler: str  # the rank most often the straggler, and how often
    notes: list[str] = field(default_factory=list)


def lateness(rep: JobReport) -> Lateness:
    steps = [str(s) for s in _col(rep.steps, "step")]
    ranks = [int(r) for r in rep.ranks]
    grid = np.full((len(ranks), len(steps)), np.nan)
    if len(rep.lateness) and steps and ranks:
        late = rep.lateness
        row = pd.Series(range(len(ranks)), index=ranks).reindex(late["rank"].astype(int)).to_numpy()
        col = pd.Series(range(len(steps)), index=steps).reindex(late.step.astype(str)).to_numpy()
        ok = ~(np.isnan(row) | np.isnan(col))
        grid[row[ok].astype(np.int64), col[ok].astype(np.int64)] = late.late_ns.to_numpy()[ok] / MS
    strag = [int(x) for x in _col(rep.steps, "straggler")]
    return Lateness(steps, ranks, grid, strag)


def _col(df: pd.DataFrame, name: str, dtype: str = "object", fill: object = "") -> pd.Series:
    """A column, or ``fill`` in every row: a job without steps (or waits) has a frame
    without columns, and a job stored by an older ctda lacks the newer columns."""
    if name in df.columns:
        return df[name]
    return pd.Series([fill] * len(df), index=df.index, dtype=dtype)


def _ranks(values: pd.Series) -> list[str]:
    return [rank_label(x) for x in values]


def tables(rep: JobReport) -> JobTables:
    """The page's tables of one job report, each computed here once."""
    s, w, c = rep.steps, rep.waits, rep.clocks
    steps = pd.DataFrame(
        {
            "step": _col(s, "step").astype(str),
            "job_step_ms": _col(s, "job_step_ns", "int64", 0) / MS,
            "ended_by": _ranks(_col(s, "ended_by", "int64", -1)),
            "rank_step_ms": _col(s, "rank_step_ns", "int64", 0) / MS,
            "slowest": _ranks(_col(s, "slowest_rank")),
            "straggler": _ranks(_col(s, "straggler")),
            "late_ms": _col(s, "late_ns", "int64", 0) / MS,
            # the band the lateness must exceed, and what the step's lateness amounts to
            "noise_ms": _col(s, "noise_ns", "int64", 0) / MS,
            "verdict": _col(s, "verdict").astype(str),
            "straggler_top": _col(s, "straggler_top").astype(str),
            "path_by_rank": _col(s, "path_by_rank").astype(str),
            # did the straggler do more work, or was it slowed (and did it slow others)?
            "straggler_own": _col(s, "straggler_own").astype(str),
            "last": _ranks(_col(s, "last_to_arrive", "int64", -1)),
            "host_contention": _col(s, "host_contention").astype(str),
        }
    )
    waits = pd.DataFrame(
        {
            "step": _col(w, "label").astype(str),
            "op": _col(w, "op").astype(str),
            "on_rank": _ranks(_col(w, "rank")),
            "waited_for": _ranks(_col(w, "waited_for")),
            "wait_ms": _col(w, "wait_ns", "int64") / MS,
            "transfer_ms": _col(w, "transfer_ns", "int64") / MS,
        }
    )
    clocks = pd.DataFrame(
        {
            "rank": _ranks(_col(c, "rank")),
            "host": _col(c, "host").astype(str),
            "rank_from": _col(c, "rank_from").astype(str),
            "offset_ms": _col(c, "offset_ns", "int64") / MS,
            "how": _col(c, "how").astype(str),
        }
    )
    offsets = {int(r): int(o) for r, o in zip(_col(c, "rank"), _col(c, "offset_ns"))}
    late = lateness(rep)
    labels = {
        str(x): f"{x} · {ms:,.3f} ms · straggler {r}"
        for x, ms, r in zip(steps.step, steps.job_step_ms, steps.straggler)
    }
    most = Counter(rank_label(r) for r in late.straggler if r >= 0).most_common(1)
    return JobTables(
        name=rep.name,
        base_ns=int(rep.path.t0.min()) if len(rep.path) else 0,
        lateness=late,
        steps=steps,
        waits=waits,
        clocks=clocks,
        offsets_ns=offsets,
        summary=summary(rep),
        step_labels=labels,
        mean_step_ms=float(steps.job_step_ms.mean()) if len(steps) else 0.0,
        top_straggler=f"{most[0][0]} ({most[0][1]} of {len(late.steps)})" if most else "-",
        notes=list(rep.notes),
    )


def summary(rep: JobReport) -> str:
    """Ranks present, collectives matched and the report's own checks, in one line each."""
    present = f"{len(rep.ranks)} of {rep.world_size} ranks"
    if rep.missing:
        present += f" (missing {', '.join(map(str, rep.missing))})"
    m, c = rep.matching, rep.checks
    parts = [f"{present}, {len(rep.steps)} step(s)"]
    if m:
        unmatched = sum(m.get("unmatched", {}).values())
        inconsistent = sum(m.get("inconsistent", {}).values())
        matched = m.get("collectives", 0)
        parts.append(f"{matched} collectives matched, {unmatched} unmatched, {inconsistent} inconsistent")
    if c:
        parts.append(
            f"every rank replays exactly: {c.get('replay_exact')}; path vs job step max error "
            f"{c.get('cp_vs_job_step_max_error_ns')} ns"
        )
    return "; ".join(parts)


# --- the timeline of one step ------------------------------------------------------------


@dataclass
class Row:
    """One row of the job timeline: a rank's path row or one of its threads / streams."""

    rank: int
    label: str
    top: float
    height: float
    is_gpu: bool = False
    is_path: bool = False

    @property
    def center(self) -> float:
        return self.top + self.height / 2


@dataclass
class JobTimeline:
    """What the job timeline draws for one step: a band per rank (its path row, then one
    row per thread / stream when the rank's run is stored), the path's stretches, each
    rank's busy events and the points where the path changes rank."""

    step: str
    start_ms: float
    end_ms: float
    rows: list[Row]
    #: rank, event, name, cls, start_ms, end_ms, dur_ms, y, height (the job path, in order)
    path: pd.DataFrame
    #: rank, event, lane, name, cls, start_ms, dur_ms, y, height (outermost first: inner on top)
    busy: pd.DataFrame
    #: x0, y0, x1, y1: from a stretch's end on one rank to the next stretch's start on another
    jumps: pd.DataFrame
    busy_total: int = 0  # the ranks' events in the step before each run's drawing cap
    ranks_drawn: int = 0  # ranks whose own events are drawn (their runs are stored)

    @property
    def total(self) -> float:
        return max((r.top + r.height for r in self.rows), default=1.0)

    @property
    def bands(self) -> list[int]:
        return sorted({r.rank for r in self.rows})


@dataclass
class Busy:
    """A rank's own timeline of the step (:class:`ctda.ui.frames.Timeline` of its stored
    run) and where it sits on the job's clock."""

    timeline: Timeline
    shift_ms: float  # add to the run's ms (since its trace start) for ms since the job's start
    tag: str = ""  # the run's cache tag (:attr:`ctda.ui.data.Loaded.tag`)


def shift_ms(run_t0_ns: int, offset_ns: int, base_ns: int) -> float:
    """From a run's ms since its own trace start to ms since the job's start: the run's
    start, moved onto the job's clock by the rank's offset, less the job's start."""
    return (run_t0_ns + offset_ns - base_ns) / MS


def timeline(rep: JobReport, base_ns: int, step: str, busy: dict[int, Busy] | None = None) -> JobTimeline:
    """The job timeline of ``step``: one band per rank, the job path drawn across them."""
    p = rep.path[rep.path.step.astype(str) == step].sort_values("pos", kind="stable")
    busy = busy or {}
    rows: list[Row] = []
    path_row: dict[int, Row] = {}
    lane_rows: dict[tuple[int, str], Row] = {}
    y = 0.0
    for rank in sorted(int(r) for r in rep.ranks):
        row = Row(rank, f"{rank_label(rank)} · job path", y, PATH_ROW, is_path=True)
        rows.append(row)
        path_row[rank] = row
        y += PATH_ROW + ROW_GAP
        b = busy.get(rank)
        for lane in b.timeline.lanes if b is not None else []:
            h = GPU_ROW if lane.is_gpu else 1.0
            lr = Row(rank, f"{rank_label(rank)} · {lane.label}", y, h, is_gpu=lane.is_gpu)
            rows.append(lr)
            lane_rows[(rank, lane.label)] = lr
            y += h + ROW_GAP
        y += BAND_GAP - ROW_GAP
    ranks = p["rank"].to_numpy(dtype=np.int64)
    t1 = (p.t1.to_numpy(dtype=np.int64) - base_ns) / MS
    # the step is the path's length back from its end: the first stretch can be a
    # collective that began in the step before, of which only the part inside counts
    end = float(t1.max()) if len(p) else 1.0
    start = end - float(p.ns.sum()) / MS if len(p) else 0.0
    t0 = np.maximum((p.t0.to_numpy(dtype=np.int64) - base_ns) / MS, start)
    centers = np.array([path_row[int(r)].center for r in ranks], dtype=np.float64)
    ev = p.event.to_numpy(dtype=np.int64)
    cls = p["class"].astype(str).to_numpy()
    # a gap on the path has no event: it is named by its class, as ``ctda analyze`` does
    names = np.where(ev >= 0, p["name"].astype(str).to_numpy(), np.char.add(np.char.add("(", cls), ")"))
    path = pd.DataFrame(
        {
            "rank": ranks,
            "event": ev,
            "name": names,
            "cls": cls,
            "start_ms": t0,
            "end_ms": t1,
            "dur_ms": t1 - t0,
            "y": centers,
            "height": np.full(len(p), PATH_ROW * 0.8),
        }
    )
    change = np.flatnonzero(ranks[1:] != ranks[:-1])
    jumps = pd.DataFrame(
        {"x0": t1[change], "y0": centers[change], "x1": t0[change + 1], "y1": centers[change + 1]}
    )
    frames_ = [_busy(rank, b, lane_rows) for rank, b in sorted(busy.items()) if rank in path_row]
    busy_df = pd.concat(frames_, ignore_index=True) if frames_ else _busy_empty()
    return JobTimeline(
        step=step,
        start_ms=start,
        end_ms=end,
        rows=rows,
        path=path,
        busy=busy_df,
        jumps=jumps,
        busy_total=sum(b.timeline.total for b in busy.values()),
        ranks_drawn=len(busy),
    )


def _busy_empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": pd.Series(dtype=np.int64),
            "event": pd.Series(dtype=np.int64),
            "lane": pd.Series(dtype=str),
            "name": pd.Series(dtype=str),
            "cls": pd.Series(dtype=str),
            "start_ms": pd.Series(dtype=np.float64),
            "dur_ms": pd.Series(dtype=np.float64),
            "y": pd.Series(dtype=np.float64),
            "height": pd.Series(dtype=np.float64),
        }
    )


def _busy(rank: int, b: Busy, lane_rows: dict[tuple[int, str], Row]) -> pd.DataFrame:
    """A rank's drawn events, each lane's call levels folded into its one row: outermost
    first, so where calls nest the innermost (what the thread is doing) shows on top."""
    ev = b.timeline.events
    if len(ev) == 0:
        return _busy_empty()
    top = {lane.label: lane.top for lane in b.timeline.lanes}
    depth = ev.y.to_numpy() - ev.lane.map(top).to_numpy(dtype=np.float64)
    order = np.argsort(depth, kind="stable")
    ev = ev.iloc[order]
    rows = [lane_rows[(rank, str(x))] for x in ev.lane]
    return pd.DataFrame(
        {
            "rank": np.full(len(ev), rank, dtype=np.int64),
            "event": ev.event.to_numpy(dtype=np.int64),
            "lane": ev.lane.astype(str).to_numpy(),
            "name": ev["name"].astype(str).to_numpy(),
            "cls": ev.cls.astype(str).to_numpy(),
            "start_ms": ev.start_ms.to_numpy() + b.shift_ms,
            "dur_ms": ev.dur_ms.to_numpy(),
            "y": np.array([r.center for r in rows], dtype=np.float64),
            "height": np.array([0.8 * r.height for r in rows], dtype=np.float64),
        }
    )
