"""More of the public API the commands and the UI need: jobs without a store, HTA's own
report, the breakdown kinds. Re-exported by :mod:`ctda.api` (which it must not import).

    rep = ctda.api.analyze_job(["traces/job42/"], executor="serial")  # JobReport
    sc = ctda.api.whatif_job(["traces/job42/"], straggler_median=True)  # JobWhatif
    h = ctda.api.hta_report("trace.json.gz", version="0.5")            # HtaReport

Every problem with the input is a one-line :class:`~ctda.errors.CtdaError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ctda.analysis.breakdowns import KINDS as BREAKDOWN_KINDS
from ctda.api_checks import Reader, read_with
from ctda.api_checks import top as check_top
from ctda.errors import CtdaError
from ctda.options import AnalysisOptions, OptionError

if TYPE_CHECKING:
    from ctda.analysis.hta.result import HtaResult
    from ctda.analysis.stream import Progress as StreamProgress
    from ctda.analysis.stream import StreamResult
    from ctda.ingest.table import EventTable
    from ctda.job.report import JobReport
    from ctda.job.whatif import JobScenario

PathLike = str | Path
HTA_VERSIONS = ("current", "0.5")

__all__ = [
    "BREAKDOWN_KINDS",
    "HTA_VERSIONS",
    "HtaReport",
    "JobWhatif",
    "analyze_job",
    "analyze_stream",
    "breakdown_kinds",
    "hta_report",
    "whatif_job",
]


def _paths(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def analyze_job(
    paths: PathLike | Sequence[PathLike],
    name: str | None = None,
    *,
    options: AnalysisOptions | None = None,
    executor: str | None = None,
    top: int = 10,
) -> JobReport:
    """The report of a distributed job (a directory of per-rank traces, or the ranks'
    files): steps, stragglers, the job's path, clock offsets, collective matching.
    ``executor``: local (processes, the default), serial, dask-local or tcp://HOST:PORT."""
    from ctda.job.report import job_report
    from ctda.job.run import analyze_job as run_job

    check_top(top)
    job = run_job(_paths(paths), options or AnalysisOptions(), name=name, executor=executor, full=False)
    return job_report(job, top=top)


@dataclass(frozen=True)
class JobWhatif:
    """A job's name and its re-timed steps under a what-if."""

    job: str
    scenario: JobScenario


def whatif_job(
    paths: PathLike | Sequence[PathLike],
    scale: Sequence[str] = (),
    *,
    straggler_median: bool = False,
    name: str | None = None,
    options: AnalysisOptions | None = None,
    executor: str | None = None,
    cpus: int = 0,
) -> JobWhatif:
    """The job's predicted steps if some ranks' events took a different time: ``scale`` as in
    ``ctda whatif`` on every rank (``rank=R:`` prefixes one rank, ``rank=R=F`` scales all of
    it); ``straggler_median`` makes each step's straggler as fast as the median rank;
    ``cpus``: each host's cores, shared by its ranks at the predicted times (0: not modelled)."""
    from ctda.job.run import analyze_job as run_job
    from ctda.job.whatif import job_scenario

    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 0:
        raise OptionError(f"cpus must be a non-negative integer, not {cpus!r}")
    job = run_job(_paths(paths), options or AnalysisOptions(), name=name, executor=executor)
    return JobWhatif(job.name, job_scenario(job, list(scale), straggler_median, cpus=cpus))


def breakdown_kinds(kind: str | Sequence[str] = "all") -> list[str]:
    """The breakdown kinds ``kind`` names ("all", a comma list, or a list), checked."""
    items = kind.split(",") if isinstance(kind, str) else list(kind)
    kinds = [k.strip().lower() for k in items if k.strip()]
    if kinds == ["all"]:
        return list(BREAKDOWN_KINDS)
    unknown = [k for k in kinds if k not in BREAKDOWN_KINDS]
    if unknown or not kinds:
        choices = ", ".join(BREAKDOWN_KINDS)
        raise CtdaError(f"--kind: unknown breakdown {', '.join(unknown)}; choose from all, {choices}")
    return kinds


@dataclass(frozen=True)
class HtaReport:
    """HTA's critical path of a trace and the trace it was found in."""

    result: HtaResult
    table: EventTable


def hta_report(
    source: PathLike | EventTable, version: str = "current", *, reader: Reader | None = None
) -> HtaReport:
    """HolisticTraceAnalysis' own critical path (``--mode hta``'s report): ``version``
    'current' (HTA main) or '0.5' (HTA 0.5.0 on PyPI)."""
    from ctda.analysis.hta import HtaOptions, hta_analysis
    from ctda.ingest.table import EventTable

    if version not in HTA_VERSIONS:
        raise CtdaError(f"--hta-version must be 'current' or '0.5', not {version!r}")
    table = source if isinstance(source, EventTable) else read_with(Path(source), reader)
    opts = HtaOptions.release_0_5() if version == "0.5" else HtaOptions()
    return HtaReport(hta_analysis(table, opts), table)


def analyze_stream(
    source: PathLike,
    *,
    options: AnalysisOptions | None = None,
    group_events: int = 50_000,
    top: int = 10,
    progress: Callable[[StreamProgress], None] | None = None,
    scratch: PathLike | None = None,
    jobs: int = 1,
) -> StreamResult:
    """The report of :func:`ctda.api.report` over every step of a trace larger than memory:
    read once to a temporary directory (under ``scratch``, default the system's), then
    analysed ``group_events`` events at a time, each group with the steps beside it as
    context. Memory follows the group, not the trace. ``progress`` gets a
    :class:`~ctda.analysis.stream.Progress` (the read's bytes, then the steps analysed).
    ``jobs`` > 1 analyses that many groups at once in forked processes (Linux): faster on
    several cores, with memory for that many groups."""
    from ctda.analysis.stream import analyze_stream as run

    check_top(top)
    if isinstance(group_events, bool) or not isinstance(group_events, int) or group_events < 1:
        raise OptionError(f"group_events must be a positive integer, not {group_events!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise OptionError(f"jobs must be a positive integer, not {jobs!r}")
    path = Path(source)
    if scratch is not None and not Path(scratch).is_dir():
        raise OptionError(f"scratch directory {str(scratch)!r} does not exist")
    where = None if scratch is None else Path(scratch)
    return run(path, options, group_events=group_events, progress=progress, scratch=where, top=top, jobs=jobs)
