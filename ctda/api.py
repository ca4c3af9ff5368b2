"""The public Python API: analyse a trace, store runs, query them, re-time them.

    import ctda

    a = ctda.analyze("trace.json.gz", cross_thread="none")   # options as in ctda analyze
    print(ctda.report(a, top=5).hotspots)
    with ctda.open_store("runs.lbug") as store:               # or bolt://..., or None
        store.ingest(["before.json.gz"], run="before")
        sc = store.whatif("before", scale=["cat=kernel=0.5"])
        diff = store.compare("before", "before@" + sc.name)

The command-line interface is a layer over these functions: a command parses its
arguments, calls one of them and renders the result. Every problem with the input (a bad
option, an unreadable file, an unknown run, a query that does not bind) is raised as a
:class:`~ctda.errors.CtdaError` subclass whose message is one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd

from ctda.analysis import engine
from ctda.analysis import report as analysis_report
from ctda.analysis.breakdowns import Breakdowns, JobBreakdowns
from ctda.analysis.engine import Analysis
from ctda.analysis.report import Report
from ctda.api_checks import is_file as _is_file
from ctda.api_checks import label as _label
from ctda.api_checks import read_with as _read
from ctda.api_checks import side as _side
from ctda.api_checks import step as _step
from ctda.api_checks import strings as _strings
from ctda.api_checks import top as _top
from ctda.api_jobs import JobSession
from ctda.api_reports import (
    BREAKDOWN_KINDS,
    HTA_VERSIONS,
    HtaReport,
    JobWhatif,
    analyze_job,
    breakdown_kinds,
    hta_report,
    whatif_job,
)
from ctda.errors import CtdaError
from ctda.ingest.errors import TraceError
from ctda.ingest.merge import MergeSummary, merge_processes
from ctda.ingest.outfile import check_output
from ctda.ingest.reader import read_trace
from ctda.ingest.summary import TraceSummary
from ctda.ingest.summary import summarize as summarize_table
from ctda.ingest.table import EventTable
from ctda.options import AnalysisOptions, OptionError, validate_options
from ctda.queries import gate, loader
from ctda.queries.limits import QueryLimits
from ctda.queries.loader import NamedQuery, QueryError
from ctda.store import backends
from ctda.store.base import QueryResult, RunInfo, StoreError
from ctda.store.base import Store as Backend
from ctda.store.config import Target, resolve
from ctda.store.ingest import Ingested, check_run_name, default_name
from ctda.store.runs import StoredRun, open_run
from ctda.whatif import compare as cmp
from ctda.whatif import indb, optimisations
from ctda.whatif.export import write_perfetto
from ctda.whatif.indb import InDbResult
from ctda.whatif.opportunities import by_optimisation, rank
from ctda.whatif.scenario import Scenario, with_cpus
from ctda.whatif.scenario import run as run_scenario
from ctda.whatif.select import Override, SelectionError, from_rows, parse_remove, parse_scale
from ctda.whatif.selfcheck import SelfCheck, check, floor_check
from ctda.whatif.selfcheck import summary as quick_check

__all__ = [
    "BREAKDOWN_KINDS",
    "HTA_VERSIONS",
    "Analysis",
    "AnalysisOptions",
    "Breakdowns",
    "HtaReport",
    "Ingested",
    "JobBreakdowns",
    "JobWhatif",
    "MergeSummary",
    "QueryLimits",
    "Report",
    "RunInfo",
    "Scenario",
    "StoreSession",
    "analyze",
    "analyze_job",
    "breakdown_kinds",
    "breakdowns",
    "check_run_name",
    "compare",
    "convert",
    "export",
    "floor_check",
    "hta_report",
    "merge_processes",
    "named_queries",
    "open_store",
    "opportunities",
    "optimisation_names",
    "optimisation_opportunities",
    "overrides",
    "read",
    "report",
    "run_names",
    "summarize",
    "validate",
    "validate_options",
    "whatif",
    "whatif_job",
]

PathLike = str | Path
#: reads a trace file (the CLI passes one that draws a progress bar)
Reader = Callable[[Path], EventTable]
#: what a what-if, export or comparison can start from: a stored run name, a trace file,
#: or an analysis already in memory
RunLike = str | Path | Analysis


# --- one trace, in memory ----------------------------------------------------------------


def read(path: PathLike, progress: Callable[[int], None] | None = None) -> EventTable:
    """The events table of a trace (``.json``, ``.json.gz``, or a ctda ``.parquet``)."""
    return read_trace(Path(path), progress)


def summarize(source: PathLike | EventTable, top: int = 3, *, reader: Reader | None = None) -> TraceSummary:
    """What a trace holds (``ctda inspect``): events by category, threads, streams, steps,
    syncs, NCCL, rank, warnings; ``top`` names per thread and stream."""
    _top(top)
    table = source if isinstance(source, EventTable) else _read(Path(source), reader)
    return summarize_table(table, top=top)


def convert(source: PathLike, target: PathLike, *, reader: Reader | None = None) -> int:
    """Write a trace's events table to ``target`` (``.parquet``), which every function
    reads back much faster than JSON; the number of events."""
    out = Path(target)
    if out.suffix != ".parquet":
        raise CtdaError(f"{out}: the output must end in .parquet")
    check_output(out, [source])  # never over the source, a device, a FIFO or a symlink
    table = _read(Path(source), reader)
    try:
        table.write_parquet(out)
    except OSError as exc:
        raise CtdaError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return len(table)


def analyze(
    source: PathLike | EventTable,
    *,
    progress: Callable[[int], None] | None = None,
    reader: Reader | None = None,
    **options: Any,
) -> Analysis:
    """The critical path analysis of a trace file or an events table.

    ``options`` are the fields of :class:`~ctda.options.AnalysisOptions` (``windows``,
    ``cross_thread``, ``mode``, ``rule_options``), or ``options=`` one of them; they are
    checked before the trace is read. For a file, a problem that only the analysis finds
    (no window matches) is a :class:`TraceError` naming the file.
    """
    opts = validate_options(**options)
    if isinstance(source, EventTable):
        return engine.analyze(source, opts)
    path = Path(source)
    table = reader(path) if reader is not None else read_trace(path, progress)
    try:
        return engine.analyze(table, opts)
    except ValueError as exc:  # OptionError, GraphCycleError: this input cannot be analysed
        raise TraceError(path, str(exc)) from None


def report(analysis: Analysis, step: str | int = "all", top: int = 10) -> Report:
    """The tables ``ctda analyze`` prints: per window, bound-by, hotspots, lanes, advice."""
    s = _step(step)
    _top(top)
    try:
        analysis_report.select_windows(analysis, s)
    except ValueError as exc:  # the step is not in this trace
        raise OptionError(str(exc)) from None
    return analysis_report.build(analysis, step=s, top=top)


def overrides(
    analysis: Analysis,
    scale: Sequence[str] = (),
    remove: Sequence[str] = (),
    *,
    rows: Iterable[Mapping[str, Any]] | None = None,
    rows_label: str = "query",
) -> list[Override]:
    """The event changes a what-if applies: events scaled (``name~REGEX=F``, ``cat=CAT=F``,
    ``class=CLASS=F``, ``thread=TID=F``), removed (name regex), or set by query rows
    (``uid`` with ``factor`` or ``dur`` in µs)."""
    ovs: list[Override] = [parse_scale(analysis, s) for s in _strings(scale, "scale")]
    ovs += [parse_remove(analysis, r) for r in _strings(remove, "remove")]
    if rows is not None:
        ovs += from_rows(analysis, rows, label=rows_label)
    if not ovs:
        raise SelectionError("nothing to change: give a scale, remove or cypher selection")
    return ovs


def whatif(
    analysis: Analysis,
    scale: Sequence[str] = (),
    remove: Sequence[str] = (),
    *,
    rows: Iterable[Mapping[str, Any]] | None = None,
    rows_label: str = "query",
    name: str | None = None,
    cpus: int = 0,
    apply: Sequence[str] = (),
) -> Scenario:
    """Re-time ``analysis`` under :func:`overrides` and the named optimisations ``apply``
    (``NAME`` or ``NAME:ARG``, see :func:`optimisation_names`); the name defaults to the
    selections. ``cpus``: the traced host's cores, for CPU contention the trace cannot
    measure. The scenario's ``assumptions`` say what each optimisation assumed."""
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 0:
        raise OptionError(f"cpus must be a non-negative integer, not {cpus!r}")
    if cpus:
        analysis = with_cpus(analysis, cpus)
    specs = _strings(apply, "apply")
    if specs and not (scale or remove or rows is not None):
        ovs: list[Override] = []
    else:
        ovs = overrides(analysis, scale, remove, rows=rows, rows_label=rows_label)
    effects = optimisations.apply(analysis, specs)
    label = "; ".join([*(o.label for o in ovs), *(e.label for e in effects)])
    return run_scenario(analysis, ovs, name=name or label, effects=effects)


def optimisation_names() -> dict[str, str]:
    """The named optimisations ``apply`` accepts: ``NAME`` (or ``NAME:ARG``) -> summary."""
    return {
        (f"{o.name}:{o.arg.split(' ')[0]}" if o.needs_arg else o.name): o.summary
        for o in optimisations.registry().values()
    }


def validate(analysis: Analysis, *, quick: bool = False) -> SelfCheck:
    """The cross-step self-check (``ctda validate``): each step re-timed with the durations
    another step's events really had, against that step's measured time. ``quick``: the
    few pairs behind the one-line summary ``ctda analyze`` prints."""
    return quick_check(analysis) if quick else check(analysis)


def export(source: Analysis | Scenario, out: PathLike, name: str | None = None) -> int:
    """Write the (re-timed) timeline with the critical path drawn, for Perfetto; the count
    of events written."""
    if isinstance(source, Scenario):
        return write_perfetto(source.analysis, Path(out), name=name or source.name)
    return write_perfetto(source, Path(out), name=name or "baseline")


def opportunities(analysis: Analysis, top: int = 10) -> pd.DataFrame:
    """What each of the ``top`` hotspot groups would buy at 2x faster, or removed."""
    _top(top)
    return rank(analysis, top)


def optimisation_opportunities(analysis: Analysis) -> pd.DataFrame:
    """What each named optimisation that applies to ``analysis`` would buy, ranked."""
    return by_optimisation(analysis)


def compare(
    a: Analysis | Scenario | cmp.Side,
    b: Analysis | Scenario | cmp.Side,
    labels: tuple[str, str] | None = None,
) -> cmp.Comparison:
    """Two results side by side; a scenario counts as a prediction (its error is shown
    against a measured side). Labels default to the trace files and scenario names."""
    la, lb = labels or (_label(a, "a"), _label(b, "b"))
    return cmp.compare(_side(a, la), _side(b, lb))


def breakdowns(
    source: PathLike, *, db: PathLike | Target | None = None, reader: Reader | None = None
) -> Breakdowns | JobBreakdowns:
    """HTA's breakdowns of device time, each tied to the critical path: of a stored run (in
    ``db``), a trace file analysed on the fly, or every rank of a job's directory."""
    path = Path(source)
    if path.is_dir():  # a job: every rank's breakdowns, a rank column first
        from ctda.job.load import job_files

        return JobBreakdowns.of_files(job_files([path]), lambda p: analyze(p, reader=reader))
    with open_store(db, reader=reader) as store:
        return Breakdowns(store.analysis(str(source)))


def named_queries() -> dict[str, NamedQuery]:
    """The named Cypher queries shipped with ctda, by name."""
    return loader.load_all()


def run_names(paths: Sequence[PathLike], run: str | None = None) -> list[str]:
    """Run names for traces stored together: ``run`` for one trace, ``run/<file name>``
    for several, the file name (``rank0.pt.trace.json.gz`` -> ``rank0``) without ``run``."""
    files = [Path(p) for p in paths]
    if run and len(files) == 1:
        return [run]
    return [f"{run}/{default_name(p)}" if run else default_name(p) for p in files]


# --- runs in a store -----------------------------------------------------------------------


@dataclass
class Source:
    """An analysis, its label, and the stored run it belongs to (None: not stored)."""

    label: str
    analysis: Analysis
    run: StoredRun | None = None


class StoreSession(JobSession):
    """Runs and jobs in one store (embedded file or Neo4j server); see :func:`open_store`.

    The store is opened per call, read-only unless the call writes, and closed again: the
    embedded store admits one writing process at a time, so holding a session never
    blocks another process (a UI, another CLI) between calls.
    """

    def __init__(self, db: PathLike | Target | None = None, *, reader: Reader | None = None) -> None:
        self.target = db if isinstance(db, Target) else resolve(None if db is None else str(db))
        self.reader = reader
        self._closed = False

    def __enter__(self) -> StoreSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True

    @property
    def location(self) -> str:
        """Where the store is (a path, or a URI without credentials)."""
        return self.target.location

    def _open(self, write: bool = False) -> Backend:
        if self._closed:
            raise StoreError(f"the session on {self.location} is closed")
        from ctda.store import open_store as open_backend

        return open_backend(self.target, read_only=not write)

    # -- runs

    def ingest(
        self,
        paths: PathLike | Sequence[PathLike],
        run: str | None = None,
        *,
        force: bool = False,
        progress: Callable[[int, int], None] | None = None,
        **options: Any,
    ) -> list[Ingested]:
        """Analyse and store each trace as a run (see :func:`run_names`); a trace already
        stored with the same options is not stored again unless ``force``. Options are
        checked before any file is read."""
        from ctda.store.ingest import ingest as store_ingest

        opts = validate_options(**options)
        files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        names = run_names(files, run)
        for p, n in zip(files, names):  # before any file is read
            check_run_name(n, file=None if run else p)
        if self._closed:
            raise StoreError(f"the session on {self.location} is closed")
        return [
            store_ingest(p, self.target, opts, name=n, force=force, read=self.reader, progress=progress)
            for p, n in zip(files, names)
        ]

    def runs(self, include_incomplete: bool = False) -> list[RunInfo]:
        """The stored runs (with ``include_incomplete``, also those being written or deleted);
        a job's runs have ``extra["job"]`` and ``extra["rank"]``."""
        with self._open() as s:
            runs, member = s.runs(include_incomplete=include_incomplete), s.job_members()
        for r in runs:
            if r.id in member:
                r.extra["job"], r.extra["rank"] = member[r.id]
        return runs

    def rm(self, name: str) -> None:
        """Delete run ``name`` and everything stored for it; a job's name deletes the job
        (:meth:`rm_job`). A run of a job goes only with its job."""
        with self._open() as s:
            is_run = any(r.name == name for r in s.runs(include_incomplete=True))
            is_job = any(j.name == name for j in s.jobs(include_incomplete=True))
        if not is_run and is_job:
            return self.rm_job(name)
        if not is_run:
            raise StoreError(f"no run {name!r} in {self.location}")
        job = self._member(name)
        if job is not None:
            raise StoreError(f"run {name!r} belongs to job {job!r}: delete the job (ctda rm --job {job})")
        with self._open(write=True) as s:
            s.delete_run(name)

    def report(self, run: str, step: str | int = "all", top: int = 10) -> Report:
        """The report of a stored run, read back with the named queries (what
        :func:`report` gives for the same trace)."""
        from ctda.store.report import build

        s = _step(step)
        _top(top)
        with self._open() as store:
            return build(store, run, step=s, top=top)

    def query(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        write: bool = False,
        allow_files: bool = False,
        limits: QueryLimits | None = None,
    ) -> QueryResult:
        """A named query (see :func:`named_queries`) or Cypher text; ``params`` may be
        strings as given on the command line or Python values. Every text passes the query
        gate (:mod:`ctda.queries.gate`) before the store is opened: read clauses only, data
        changes with ``write``, and unchecked text only with ``write`` and ``allow_files``;
        then the database's plan of it (:mod:`ctda.queries.plan`). It runs in a worker
        process (:mod:`ctda.queries.worker`) under ``limits`` (default
        :meth:`QueryLimits.from_env`: a timeout, a row cap and a memory cap), so a query
        that crashes or exhausts the engine ends in one :class:`QueryError` line here. The
        CLI's ``ctda query`` and the UI's console both come through this method."""
        from ctda.queries.worker import run_isolated

        if allow_files and not write:
            raise QueryError("allow_files (--allow-files) needs write (--write)")
        bounds = limits if limits is not None else QueryLimits.from_env()
        engine = backends.by_kind(self.target.kind)
        text, bound = loader.prepare(query, params, engine.dialect)
        level = gate.Level.READ if not write else gate.Level.UNSAFE if allow_files else gate.Level.WRITE
        gate.check(text, engine, level)  # a refused query never opens the store
        if self._closed:
            raise StoreError(f"the session on {self.location} is closed")
        if not engine.isolated_queries:  # its data lives in this process: no worker can see it
            with self._open(write=write) as s:
                return s.query(text, bound, write=write, allow_files=allow_files, limits=bounds)
        result: QueryResult = run_isolated(
            self.target, text, bound, write=write, allow_files=allow_files, limits=bounds
        )
        return result

    # -- analyses and scenarios

    def _is_run(self, name: str) -> bool:
        """Whether a run is stored under exactly ``name`` (one with ``@`` from before new
        names refused it is still read whole, not as ``RUN@SCENARIO``)."""
        try:
            with self._open() as s:
                return s.find_run(name) is not None
        except StoreError:
            return False  # no store yet: nothing is stored under any name

    def load(self, source: RunLike) -> Source:
        """An analysis in memory as is, a trace file analysed now, or a stored run."""
        if isinstance(source, Analysis):
            return Source(_label(source, "analysis"), source)
        path = Path(source)
        if _is_file(path):
            return Source(str(source), analyze(path, reader=self.reader))
        if self._closed:
            raise StoreError(f"the session on {self.location} is closed")
        a, stored = open_run(str(source), self.target)
        return Source(str(source), a, stored)

    def analysis(self, source: RunLike) -> Analysis:
        """The analysis of a stored run (from its snapshot) or of a trace file."""
        return self.load(source).analysis

    def scenarios(self, run: str) -> list[dict[str, Any]]:
        """The scenarios stored with ``run``: name, overrides and predicted totals."""
        return _stored(self.load(run), "listing scenarios").scenarios()

    def scenario(self, run: str, name: str) -> Scenario:
        """Stored scenario ``name`` of ``run``, re-applied to the run's analysis."""
        src = self.load(run)
        sc = _stored(src, "a stored scenario").load_scenario(src.analysis, name)
        if sc is None:
            raise StoreError(f"no scenario {name!r} in run {src.label!r}")
        return sc

    def whatif(
        self,
        source: RunLike,
        scale: Sequence[str] = (),
        remove: Sequence[str] = (),
        cypher: str | None = None,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        save: bool = True,
        cpus: int = 0,
        apply: Sequence[str] = (),
    ) -> Scenario:
        """:func:`whatif` on a stored run or a trace file. ``cypher`` (a named query, a
        ``.cypher`` file or text, with ``params``; ``$run`` is bound) selects events of a
        stored run; the scenario is stored with the run when ``save``."""
        src = self.load(source)
        rows, label = self._rows(src, cypher, params)
        try:
            sc = whatif(
                src.analysis, scale, remove, rows=rows, rows_label=label, name=name, cpus=cpus, apply=apply
            )
        except (SelectionError, optimisations.OptimisationError) as exc:
            raise type(exc)(f"{src.label}: {exc}") from None
        if save and src.run is not None:
            src.run.save_scenario(sc)
        return sc

    def whatif_in_db(
        self,
        run: str,
        scale: Sequence[str] = (),
        remove: Sequence[str] = (),
        cypher: str | None = None,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        save: bool = True,
    ) -> InDbResult:
        """The what-if of :meth:`whatif`, re-timed by the Neo4j store itself (the
        ``ctda.replay`` procedure); stored with the run like any scenario when ``save``.
        Runs with a GIL-contention model are re-timed without it (``contention_ignored``)."""
        src = self.load(run)
        stored = _stored(src, "--in-db")
        rows, label = self._rows(src, cypher, params)
        try:
            ovs = overrides(src.analysis, scale, remove, rows=rows, rows_label=label)
        except SelectionError as exc:
            raise SelectionError(f"{src.label}: {exc}") from None
        a = src.analysis
        label = name or "; ".join(o.label for o in ovs)
        with self._open(write=save) as store:
            result = indb.replay(store, stored.info.id, ovs, a.nodes.end - a.nodes.ts, name=label)
            if save:
                indb.save(store, stored.info.id, result)
        result.contention_ignored = bool(len(a.contention))
        return result

    def _rows(
        self, src: Source, cypher: str | None, params: Mapping[str, Any] | None
    ) -> tuple[list[dict[str, Any]] | None, str]:
        if not cypher:
            return None, "query"
        text = Path(cypher).read_text() if _is_file(Path(cypher)) else cypher
        rows = _stored(src, "a --cypher selection").query_rows(text, params)
        return rows, cypher if len(cypher) < 40 else "cypher"

    def export(self, source: RunLike, out: PathLike, scenario: str | None = None) -> int:
        """Write a run's timeline (or one of its stored scenarios) for Perfetto."""
        if scenario:
            return export(self.scenario(str(source), scenario), out)
        return export(self.analysis(source), out)

    def compare(self, a: RunLike | Scenario, b: RunLike | Scenario) -> cmp.Comparison:
        """Two runs, trace files, analyses or scenarios; ``RUN@SCENARIO`` names a stored
        scenario (a prediction, compared with a measured side it gets an error)."""
        return cmp.compare(self._side(a), self._side(b))

    def _side(self, spec: RunLike | Scenario) -> cmp.Side:
        if isinstance(spec, (Analysis, Scenario)):
            return _side(spec, _label(spec, "analysis"))
        base, at, scen = str(spec).partition("@")
        if not at or _is_file(Path(spec)) or self._is_run(str(spec)):
            return cmp.Side(str(spec), self.analysis(spec))
        sc = self.scenario(base, scen)
        return cmp.Side(str(spec), sc.analysis, predicted=True, of=sc.base)


def open_store(db: PathLike | Target | None = None, *, reader: Reader | None = None) -> StoreSession:
    """The runs in store ``db``: a path (embedded store), a ``bolt://`` / ``neo4j://`` URI
    (credentials from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``), or
    None for ``$CTDA_DB`` or the default embedded store. ``reader`` reads trace files."""
    return StoreSession(db, reader=reader)


def _stored(src: Source, what: str) -> StoredRun:
    if src.run is None:
        raise SelectionError(f"{what} needs a stored run, and {src.label} is not one (ingest it first)")
    return src.run
