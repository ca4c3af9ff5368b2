"""The job pipeline: files -> per-rank analyses (in parallel) -> skeletons -> matching ->
clock offsets -> job graph -> per-step job paths, waits and stragglers.

analyze_job(paths) = report(graph(offsets(match(skeletons(map(analyze_rank, files))))))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from ctda.job import path as jpath
from ctda.job.executor import map_ranks
from ctda.job.graph import JobGraph, build_job_graph
from ctda.job.load import JobLayout, RankId, identify, job_files, rank_of
from ctda.job.match import ClockOffsets, Matching, clock_offsets, match
from ctda.job.skeleton import Skeleton, skeleton


@dataclass
class RankPart:
    """What one rank's worker hands back: who it is, its analysis and its skeleton."""

    rank_id: RankId
    analysis: Analysis
    skeleton: Skeleton


def analyze_rank(path: str, options: AnalysisOptions) -> RankPart:
    """Read, identify and analyse one rank's trace (runs in a worker)."""
    table = read_trace(path, parallel=False)
    rid = rank_of(path, table.meta)
    a = analyze(table, options)
    return RankPart(rid, a, skeleton(a, rid.rank))


@dataclass
class Job:
    """A job's analysis: its ranks, matched collectives, clocks, job graph and per-step results."""

    name: str
    layout: JobLayout
    parts: dict[int, RankPart]
    matching: Matching
    offsets: ClockOffsets
    graph: JobGraph
    steps: pd.DataFrame
    paths: pd.DataFrame
    waits: pd.DataFrame
    late: pd.DataFrame
    stragglers: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def analyses(self) -> dict[int, Analysis]:
        return {r: p.analysis for r, p in self.parts.items()}


def analyze_job(
    paths: Sequence[Path],
    options: AnalysisOptions | None = None,
    name: str | None = None,
    executor: str | None = None,
) -> Job:
    """Analyse a job given as a directory of per-rank traces or a list of trace files."""
    options = options or AnalysisOptions()
    files = job_files(list(paths))
    results = map_ranks(analyze_rank, [str(f) for f in files], options, executor)
    layout = identify([r.rank_id for r in results])
    parts = {r.rank_id.rank: r for r in results}
    return assemble_job(name or _default_name(files), layout, parts)


def assemble_job(name: str, layout: JobLayout, parts: dict[int, RankPart]) -> Job:
    """The cross-rank stages over the ranks' parts (matching and offsets see skeletons only)."""
    skels = [parts[r].skeleton for r in sorted(parts)]
    matching = match(skels)
    offsets = clock_offsets(skels, matching)
    jg = build_job_graph({r: p.analysis for r, p in parts.items()}, matching, offsets)
    steps = jpath.job_steps(jg)
    paths = jpath.job_paths(jg, steps)
    waits = jpath.collective_waits(jg, matching, paths)
    labels = {r: list(parts[r].skeleton.windows.label) for r in parts}
    late = jpath.lateness(jg, matching, labels)
    strag = jpath.stragglers(jg, late, paths, steps)
    notes = []
    if layout.partial:
        notes.append(
            f"partial job: {len(layout.ranks)} of {layout.world_size} ranks;"
            f" missing {_ranges(layout.missing)}"
        )
    if jg.dropped_cross:
        notes.append(f"{jg.dropped_cross} cross-rank edge(s) contradict the clocks and were left out")
    return Job(name, layout, parts, matching, offsets, jg, steps, paths, waits, late, strag, notes)


def _default_name(files: list[Path]) -> str:
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
