"""Streaming analysis: a trace larger than memory, analysed a few steps at a time.

Steps are independent once the events around them are known: a step's critical path is
the chain of binding edges back from its end to its start, and with replay exact (every
calibrated weight reproduces the observed times) an edge binds or not by the times of its
two ends alone. So the trace is read once to disk (:mod:`ctda.ingest.spill`), the steps
are cut into groups of about ``group_events`` events, and each group is analysed on its
own with the events of the step before it and the step after it as context: every
dependency into or out of the group's steps that starts or ends within one step of them
is in the graph. Peak memory follows the largest group (plus the spill's small index),
not the trace.

Each group's report is computed by the same code as a whole trace's (:func:`report.build`
over the group's steps only); the tables are then added up across groups: times, counts
and path time are sums, shares are recomputed from the sums. ``tests/test_stream.py``
holds the streamed report equal to the in-memory one on the corpus.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ctda.analysis.advice import recommend
from ctda.analysis.classify import CLASSES
from ctda.analysis.engine import analyze
from ctda.analysis.report import HOTSPOT_COLUMNS, Report, build
from ctda.analysis.tables import Names, options_dict, report_options
from ctda.ingest.derive import derive
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import Limits
from ctda.ingest.memory import release_free_memory
from ctda.ingest.reader import is_parquet
from ctda.ingest.spill import Spill, spill_trace, step_pattern
from ctda.ingest.timestamps import NA
from ctda.options import AnalysisOptions, OptionError

#: events per analysed group (and about as many of context): 150-250 MB of analysis, whatever
#: the trace's size; twice as many run about 1.5x faster for about 1.5x the memory
GROUP_EVENTS = 50_000
_EVERY = 1 << 62
#: report tables whose path time is summed across groups, by their key column
_SUMMED = {"by_class": "class", "by_category": "category", "by_lane": "lane"}
_HOT = ["name", "category", "class", "cp_ns", "total_ns", "count", "on_cp"]


@dataclass
class StreamResult:
    """The report of a streamed analysis, and what the streaming cost."""

    report: Report
    events: int
    groups: int
    largest_group: int  # events analysed in the largest group (its steps and their context)
    spilled_bytes: int
    outlasting: int = 0  # events outlasting their group's reach: their self time is an upper bound


@dataclass(frozen=True)
class Progress:
    """Where a streamed analysis is: ``stage`` is ``read`` (done = compressed bytes) or
    ``analyse`` (done = steps analysed, of ``total``)."""

    stage: str
    done: int
    total: int


def analyze_stream(
    path: Path,
    options: AnalysisOptions | None = None,
    *,
    group_events: int = GROUP_EVENTS,
    progress: Callable[[Progress], None] | None = None,
    scratch: Path | None = None,
    limits: Limits | None = None,
    top: int = 10,
    jobs: int = 1,
) -> StreamResult:
    """The report of :func:`report.build` over every step of ``path``, computed a group of
    steps at a time (spilled to a temporary directory under ``scratch``, removed after);
    ``jobs`` groups at once, in forked worker processes when more than one."""
    options = options or AnalysisOptions()
    if options.windows != "steps":
        raise OptionError("a streamed analysis has one window per ProfilerStep: use windows 'steps'")
    if options.mode != "ctda":
        raise OptionError("a streamed analysis runs in ctda mode (HTA's analyses the trace whole)")
    if group_events < 1:
        raise OptionError(f"group_events must be at least 1, not {group_events}")
    if jobs < 1:
        raise OptionError(f"jobs must be at least 1, not {jobs}")
    size = path.stat().st_size if path.exists() else 0
    if is_parquet(path):
        raise TraceError(path, "a ctda Parquet table is analysed whole: leave out --stream")
    with tempfile.TemporaryDirectory(prefix="ctda-stream-", dir=scratch) as tmp:
        try:
            spill = spill_trace(
                path,
                Path(tmp),
                None if progress is None else lambda done: progress(Progress("read", done, size)),
                limits=limits,
            )
        except OSError as exc:  # the scratch disk full or gone; the reader words its own
            raise TraceError(
                path,
                f"cannot write the scratch copy in {tmp} ({exc.strerror or exc}): "
                "give --scratch a disk with room",
            ) from None
        if not spill.steps:
            raise TraceError(
                path, "no ProfilerStep#N events: a streamed analysis needs steps (analyse it whole)"
            )
        totals = Totals(top)
        largest = 0
        for part in _reports(spill, _groups(spill, group_events), options, top, jobs):
            totals.add(part)
            largest = max(largest, part.events)
            if progress is not None:
                progress(Progress("analyse", totals.n_steps, len(spill.steps)))
        merged = totals.report(spill, options)
    return StreamResult(
        merged, spill.n_events, totals.groups, largest, spill.spilled_bytes, totals.outlasting
    )


@dataclass(frozen=True)
class _Group:
    """Consecutive steps and the time range of their context."""

    numbers: list[int]
    start: int  # the first step's start
    end: int  # the last step's end
    lo: int  # the context: from the start of the step before
    hi: int  # to the end of the step after
    step_starts: npt.NDArray[np.int64]  # every step's start, and the events starting in its stretch
    counts: npt.NDArray[np.int64]
    budget: int  # events the context may grow by to reach where the group's events end


def _groups(spill: Spill, group_events: int) -> Iterator[_Group]:
    """Consecutive steps of about ``group_events`` events, each with its context range:
    from the start of the step before the group to the end of the step after it."""
    steps = spill.steps
    counts = spill.count_by_step()
    starts = np.array([s[2] for s in steps], dtype=np.int64)
    first = 0
    while first < len(steps):
        last, total = first, int(counts[first])
        while last + 1 < len(steps) and total + int(counts[last + 1]) <= group_events:
            last += 1
            total += int(counts[last])
        lo = steps[first - 1][2] if first > 0 else -_EVERY
        hi = max(s[3] for s in steps[first : last + 2]) if last + 1 < len(steps) else _EVERY
        end = max(s[3] for s in steps[first : last + 1])
        numbers = [s[0] for s in steps[first : last + 1]]
        yield _Group(numbers, steps[first][2], end, lo, hi, starts, counts, max(total, group_events))
        first = last + 1


def _context(spill: Spill, g: _Group) -> tuple[pa.Table, int]:
    """The group's events and their context, and how many events outlast it.

    An event that starts in the group's steps and ends after the context (a wait on a
    loader thread, a long Python frame) would lose the callees beyond it from its self
    time. The context reaches to where those events end when that adds at most
    ``g.budget`` events (estimated from the steps' counts); past that they are counted as
    outlasting, and their self time is an upper bound.
    """
    events = spill.between(g.lo, g.hi)
    ts = events.column("ts_ns").to_numpy()
    dur = events.column("dur_ns").to_numpy()
    end = ts + np.where(dur == NA, 0, np.maximum(dur, 0))
    mine = (ts != NA) & (ts >= g.start) & (ts <= g.end)
    reach = int(end[mine].max(initial=g.hi))
    if reach <= g.hi:
        return events, 0
    first, last = np.searchsorted(g.step_starts, [g.hi, reach], side="right")
    if int(g.counts[first:last].sum()) <= g.budget:
        return spill.between(g.lo, reach), 0
    return events, int((mine & (end > g.hi)).sum())


def _reports(
    spill: Spill, groups: Iterator[_Group], options: AnalysisOptions, top: int, jobs: int
) -> Iterator[_Part]:
    """Each group's report and size, in group order; ``jobs`` > 1 analyses that many groups
    at once in forked processes (each holds one group: memory grows with ``jobs``)."""
    global _WORK  # forked workers inherit it: nothing but each group is sent to them
    _WORK = (spill, options, top)
    pending: deque[Future[_Part]] = deque()
    try:
        if jobs == 1 or not sys.platform.startswith("linux"):  # fork: Linux only, as the reader's pool
            yield from map(_in_worker, groups)
            return
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) as pool:
            for g in groups:
                pending.append(pool.submit(_in_worker, g))
                if len(pending) >= 2 * jobs:  # a few queued, not every group's report at once
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    except BrokenProcessPool:
        raise TraceError(
            spill.path, "a worker analysing a group of steps died (out of memory?): try fewer --jobs"
        ) from None
    finally:
        _WORK = None


_WORK: tuple[Spill, AnalysisOptions, int] | None = None


def _in_worker(g: _Group) -> _Part:
    """Group ``g``'s part, in this process or a forked worker (:data:`_WORK` set)."""
    assert _WORK is not None
    spill, options, top = _WORK
    out = _group_report(spill, g, options, top)
    release_free_memory()  # the group's graph, before the next one is built
    return out


@dataclass
class _Part:
    """One group's report, and what adding the groups up needs beside it."""

    report: Report
    events: int  # analysed, context included
    spanning: pd.DataFrame  # (name, uid) of path events reaching past the group's steps
    gpu: bool  # the group has GPU work (the advice's wording)
    outlasting: int


def _group_report(spill: Spill, g: _Group, options: AnalysisOptions, top: int = 10) -> _Part:
    events, outlasting = _context(spill, g)
    uid = events.column("uid").to_numpy()
    events = events.set_column(0, "uid", pa.array(np.arange(len(uid), dtype=np.int64)))  # uid = row again
    table = derive(events, replace(spill.meta, warnings={}))
    try:
        a = analyze(table, replace(options, windows=step_pattern(g.numbers)))
    except ValueError as exc:  # OptionError, GraphCycleError
        raise TraceError(spill.path, str(exc)) from None
    # every name's hotspot row (they are summed across groups); the merged near-critical
    # list's top rows are among the groups' own top rows
    report = build(a, top=top, every_hotspot=True)
    starts, ends = a.window_bounds()
    report.steps["start_ms"] = (starts - spill.t0) / 1e6  # from the whole trace's start
    # an event on the path of steps in two groups is counted once: name the ones that
    # reach past this group's steps, by their place in the trace
    on = np.unique(a.charges.event.to_numpy())
    on = on[on >= 0]
    wide = on[(a.nodes.ts[on] < starts.min()) | (a.nodes.end[on] > ends.max())]
    spanning = pd.DataFrame({"name": Names(a).of(wide), "uid": uid[a.nodes.uid[wide]]})
    return _Part(report, len(uid), spanning, bool(a.nodes.is_gpu.any()), outlasting)


@dataclass
class Totals:
    """The groups' reports added up as they come (their windows are disjoint), so memory
    holds one row per step and per name, not every group's tables."""

    top: int = 10
    groups: int = 0
    n_steps: int = 0
    steps: list[pd.DataFrame] = field(default_factory=list)
    summed: dict[str, pd.DataFrame] = field(default_factory=dict)
    hot: pd.DataFrame | None = None
    spanning: pd.DataFrame | None = None  # (name, uid) of path events reaching past their group
    near: pd.DataFrame | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    is_gpu: bool = False
    outlasting: int = 0

    def add(self, part: _Part) -> None:
        r = part.report
        self.groups += 1
        self.n_steps += len(r.steps)
        self.steps.append(r.steps)
        for name, key in _SUMMED.items():
            both = pd.concat([self.summed.get(name), getattr(r, name)[[key, "cp_ns"]]], ignore_index=True)
            self.summed[name] = both.groupby(key, sort=False, as_index=False).cp_ns.sum()
        rows = pd.concat([self.hot, r.hotspots[_HOT]], ignore_index=True)
        firsts = rows.groupby("name", sort=False)[["category", "class"]].first()
        sums = rows.groupby("name", sort=False)[["cp_ns", "total_ns", "count", "on_cp"]].sum()
        self.hot = firsts.join(sums).reset_index()
        self.spanning = pd.concat([self.spanning, part.spanning], ignore_index=True)
        near = pd.concat([self.near, r.near_critical], ignore_index=True)
        near = near.sort_values(["slack_ns", "duration_ns"], ascending=[True, False], kind="stable")
        self.near = near.head(self.top).reset_index(drop=True)
        c = r.checks
        old = self.checks or {**c, "nodes": 0}
        self.checks = {
            "nodes": int(old["nodes"]) + int(c["nodes"]),
            "replay_within_1us": min(float(old["replay_within_1us"]), float(c["replay_within_1us"])),
            "replay_max_error_ns": max(int(old["replay_max_error_ns"]), int(c["replay_max_error_ns"])),
            "cp_vs_window_max_rel_error": max(
                float(old["cp_vs_window_max_rel_error"]), float(c["cp_vs_window_max_rel_error"])
            ),
        }
        self.is_gpu = self.is_gpu or part.gpu
        self.outlasting += part.outlasting

    def report(self, spill: Spill, options: AnalysisOptions) -> Report:
        """The whole trace's report: shares from the sums, the top rows of each list."""
        assert self.hot is not None and self.spanning is not None and self.near is not None
        steps = pd.concat(self.steps, ignore_index=True)
        total = int(steps.cp_ns.sum())
        tables = {}
        for name, key in _SUMMED.items():
            df = self.summed[name].copy()
            df["share"] = df.cp_ns / max(total, 1)
            if name == "by_class":  # ties in class order, as the whole trace's table
                df = df.iloc[np.argsort([CLASSES.index(c) for c in df[key]], kind="stable")]
            tables[name] = df.sort_values("cp_ns", ascending=False, kind="stable").reset_index(drop=True)
        hot = self.hot.copy()
        seen_again = self.spanning[self.spanning.duplicated(["name", "uid"])].groupby("name").size()
        hot["on_cp"] = hot.on_cp - seen_again.reindex(hot.name, fill_value=0).to_numpy()
        hot["cp_share"] = hot.cp_ns / max(total, 1)
        hot["total_share"] = hot.total_ns / max(int(hot.total_ns.sum()), 1)
        hot = hot[list(HOTSPOT_COLUMNS)].sort_values(["cp_ns", "total_ns"], ascending=False)
        hot = hot.reset_index(drop=True)
        return Report(
            trace=str(spill.path),
            options=report_options(options_dict(options), "all"),
            steps=steps,
            by_class=tables["by_class"],
            hotspots=hot.head(self.top).reset_index(drop=True),
            by_category=tables["by_category"],
            by_lane=tables["by_lane"],
            near_critical=self.near,
            recommendations=recommend(tables["by_class"], hot, self.is_gpu),
            checks=self.checks,
            graph={"events": spill.n_events, "groups": self.groups, "outlasting": self.outlasting},
        )


__all__ = ["GROUP_EVENTS", "Progress", "StreamResult", "Totals", "analyze_stream"]
