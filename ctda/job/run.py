"""The job pipeline: files -> per-rank analyses (in parallel) -> skeletons -> matching ->
clock offsets -> job graph -> per-step job paths, waits and stragglers.

analyze_job(paths) = report(graph(offsets(match(skeletons(map(analyze_rank, files))))))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.errors import CtdaError
from ctda.ingest.errors import TraceError
from ctda.ingest.reader import read_trace
from ctda.job import path as jpath
from ctda.job.executor import map_ranks
from ctda.job.graph import JobGraph, build_job_graph
from ctda.job.hostload import HostLoad, host_contention, host_waits
from ctda.job.load import JobLayout, RankId, identify, job_files, rank_of
from ctda.job.match import ClockOffsets, Matching, clock_offsets, match
from ctda.job.noise import Noise, job_noise, significance
from ctda.job.skeleton import Skeleton, issue_rule, skeleton
from ctda.job.steps import collective_ends
from ctda.job.stitch import skeleton_steps, stitched_paths


@dataclass
class RankPart:
    """What one rank's worker hands back: who it is, its skeleton, and (full mode) its analysis."""

    rank_id: RankId
    skeleton: Skeleton
    analysis: Analysis | None = None
    replay_exact: bool = True  # the rank's own graph replays its timestamps


def analyze_rank(path: str, options: AnalysisOptions, keep: bool = True) -> RankPart:
    """Read, identify and analyse one rank's trace (runs in a worker); ``keep`` the analysis."""
    table = read_trace(path, parallel=False)
    rid = rank_of(path, table.meta)
    try:
        a = analyze(table, options, extra=(issue_rule,))
    except ValueError as exc:  # OptionError, GraphCycleError: name the rank's file, one line
        if isinstance(exc, CtdaError):
            raise
        raise TraceError(path, str(exc)) from None
    exact = bool(np.array_equal(a.timing.time, a.nodes.time))
    return RankPart(rid, skeleton(a, rid.rank), a if keep else None, exact)


def skeleton_rank(path: str, options: AnalysisOptions) -> RankPart:
    """A rank's worker result for the cross-rank stage alone: identity and skeleton."""
    return analyze_rank(path, options, keep=False)


@dataclass
class Job:
    """A job's analysis: ranks, matched collectives, clocks, per-step paths and stragglers.

    ``graph`` (the job graph, for what-ifs) is built only in full mode; the per-step results
    are the same either way (the paths are walked over the ranks' skeletons).
    """

    name: str
    layout: JobLayout
    parts: dict[int, RankPart]
    matching: Matching
    offsets: ClockOffsets
    steps: pd.DataFrame
    paths: pd.DataFrame
    waits: pd.DataFrame
    late: pd.DataFrame
    stragglers: pd.DataFrame
    graph: JobGraph | None = None
    notes: list[str] = field(default_factory=list)
    #: ranks of one host slowing each other down (None: skeletons without work tables)
    host: HostLoad | None = None
    #: the job's own noise, against which a straggler is named (``ctda.job.noise``)
    noise: Noise | None = None

    @property
    def ranks(self) -> list[int]:
        return sorted(self.parts)

    @property
    def analyses(self) -> dict[int, Analysis]:
        return {r: p.analysis for r, p in self.parts.items() if p.analysis is not None}

    def full(self) -> JobGraph:
        if self.graph is None:
            raise ValueError("this job was analysed from skeletons only; what-ifs need the job graph")
        return self.graph


def analyze_job(
    paths: Sequence[Path],
    options: AnalysisOptions | None = None,
    name: str | None = None,
    executor: str | None = None,
    full: bool = True,
) -> Job:
    """Analyse a job given as a directory of per-rank traces or a list of trace files.

    ``full``: keep every rank's analysis and build the job graph (needed for what-ifs);
    otherwise workers send back only their skeletons.
    """
    options = options or AnalysisOptions()
    files = job_files(list(paths))
    worker = analyze_rank if full else skeleton_rank
    results = map_ranks(worker, [str(f) for f in files], options, executor)
    layout = identify([r.rank_id for r in results])
    parts = {r.rank_id.rank: r for r in results}
    return assemble_job(name or default_job_name(files), layout, parts)


def assemble_job(name: str, layout: JobLayout, parts: dict[int, RankPart]) -> Job:
    """The cross-rank stages over the ranks' skeletons (plus the job graph in full mode)."""
    skels = {r: parts[r].skeleton for r in sorted(parts)}
    matching = match(list(skels.values()))
    offsets = clock_offsets(list(skels.values()), matching)
    labels = {r: list(s.windows.label) for r, s in skels.items()}
    late = jpath.lateness(offsets, matching, labels)
    steps = skeleton_steps(skels, offsets, collective_ends(matching, offsets, late))
    paths = stitched_paths(skels, matching, offsets, steps)
    base = dict(zip(skels, np.cumsum([0] + [s.n_events for s in skels.values()])[:-1].tolist()))
    waits = jpath.collective_waits(matching, offsets, base, paths)
    host = _host_load(skels, labels, offsets, matching, late, list(steps.label))
    if host is not None:
        paths = host_waits(paths, host.slowed, base)
    strag = jpath.stragglers(late, paths, steps, host.moved if host else None, host.extra if host else None)
    noise = job_noise(strag, late, offsets.uncertainty)
    strag = significance(strag, noise, host.extra if host else None)
    jg = None
    if all(p.analysis is not None for p in parts.values()):
        jg = build_job_graph(
            {r: p.analysis for r, p in parts.items() if p.analysis is not None}, matching, offsets
        )
    notes = []
    if layout.partial:
        notes.append(
            f"partial job: {len(layout.ranks)} of {layout.world_size} ranks;"
            f" missing {_ranges(layout.missing)}"
        )
    if jg is not None and jg.dropped_cross:
        notes.append(f"{jg.dropped_cross} cross-rank edge(s) contradict the clocks and were left out")
    return Job(
        name, layout, parts, matching, offsets, steps, paths, waits, late, strag, jg, notes, host, noise
    )


def _host_load(
    skels: dict[int, Skeleton],
    labels: dict[int, list[str]],
    offsets: ClockOffsets,
    matching: Matching,
    late: pd.DataFrame,
    steps: list[str],
) -> HostLoad | None:
    """Host contention between ranks, when every skeleton carries its work table."""
    works = {r: s.work for r, s in skels.items() if s.work is not None}
    if len(works) != len(skels) or len(late) == 0:
        return None
    parts = matching.parts[["cid", "rank", "t_arrive"]].merge(
        late[["cid", "rank", "label"]], on=["cid", "rank"]
    )
    hosts = {r: s.host for r, s in skels.items()}
    return host_contention(works, hosts, labels, dict(offsets.offset), parts, steps)


def default_job_name(files: list[Path]) -> str:
    """A job's name when none is given: its directory's."""
    parent = files[0].parent.name if files else "job"
    return parent or "job"


def _ranges(values: list[int]) -> str:
    """``[4, 5, 6, 9]`` -> ``4-6, 9``."""
    out: list[str] = []
    for v in values:
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)
