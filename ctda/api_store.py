"""The public functions on stored runs: :func:`open_store` and its :class:`StoreSession`.

Part of :mod:`ctda.api` (import them from there). The store is opened per call, read-only
unless the call writes; the job half of the session is :mod:`ctda.api_jobs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ctda.api_checks import Reader, analysis_options
from ctda.api_checks import is_file as _is_file
from ctda.api_checks import label as _label
from ctda.api_checks import side as _side
from ctda.api_checks import step as _step
from ctda.api_checks import top as _top
from ctda.api_jobs import JobSession
from ctda.options import AnalysisOptions
from ctda.queries import gate, loader
from ctda.queries.limits import QueryLimits
from ctda.queries.loader import QueryError
from ctda.store import backends
from ctda.store.base import QueryResult, RunInfo, StoreError
from ctda.store.base import Store as Backend
from ctda.store.config import Target, resolve

if TYPE_CHECKING:
    # listing runs and querying them load none of these (numpy, pandas, the engine): each
    # method that analyses, re-times or compares imports what it uses when it runs
    from ctda.analysis.breakdowns import Breakdowns, JobBreakdowns
    from ctda.analysis.engine import Analysis
    from ctda.analysis.report import Report
    from ctda.analysis.rule_options import RuleOptions
    from ctda.api_analysis import PathLike
    from ctda.store.ingest import Ingested
    from ctda.store.runs import StoredRun
    from ctda.whatif import compare as cmp
    from ctda.whatif.indb import InDbResult
    from ctda.whatif.scenario import Scenario

    #: what a what-if, export or comparison can start from: a stored run name, a trace
    #: file, or an analysis already in memory
    RunLike = str | Path | Analysis


def __getattr__(name: str) -> Any:
    # ``RunLike`` names the engine's Analysis class, so it is built on first use
    if name == "RunLike":
        from ctda.analysis.engine import Analysis

        value = globals()["RunLike"] = str | Path | Analysis
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        options: AnalysisOptions | None = None,
        windows: str | None = None,
        cross_thread: str | Sequence[str] | None = None,
        mode: str | None = None,
        rule_options: RuleOptions | Mapping[str, int] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Ingested]:
        """Analyse and store each trace as a run.

        Args:
            paths: one trace or several.
            run: the run's name (several traces: ``RUN/<file name>``; see :func:`run_names`).
            force: store again a trace already stored with the same options (otherwise
                the stored run is returned, ``stored`` False).
            options, windows, cross_thread, mode, rule_options: the analysis options, as
                in :func:`ctda.api.analyze`.
            progress: called with (rows written, rows total) while a run is written.

        The options and the run names are checked before any file is read.
        """
        from ctda.api_analysis import run_names
        from ctda.store.ingest import check_run_name
        from ctda.store.ingest import ingest as store_ingest

        opts = analysis_options(options, windows, cross_thread, mode, rule_options)
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
        if not include_incomplete:
            from ctda.store.listing import complete_runs

            return complete_runs(self.target, self._read_runs)
        return self._read_runs(include_incomplete=True)

    def _read_runs(self, include_incomplete: bool = False) -> list[RunInfo]:
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
        from ctda.analysis.engine import Analysis
        from ctda.api_analysis import analyze
        from ctda.store.runs import open_run

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
        from ctda.api_analysis import whatif
        from ctda.whatif import optimisations
        from ctda.whatif.select import SelectionError

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
        from ctda.api_analysis import overrides
        from ctda.whatif import indb
        from ctda.whatif.select import SelectionError

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
            result = indb.replay(store, stored.info.id, ovs, a, name=label)
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
        from ctda.api_analysis import export

        if scenario:
            return export(self.scenario(str(source), scenario), out)
        return export(self.analysis(source), out)

    def compare(self, a: RunLike | Scenario, b: RunLike | Scenario) -> cmp.Comparison:
        """Two runs, trace files, analyses or scenarios; ``RUN@SCENARIO`` names a stored
        scenario (a prediction, compared with a measured side it gets an error)."""
        from ctda.whatif import compare as cmp

        return cmp.compare(self._side(a), self._side(b))

    def _side(self, spec: RunLike | Scenario) -> cmp.Side:
        from ctda.analysis.engine import Analysis
        from ctda.whatif import compare as cmp
        from ctda.whatif.scenario import Scenario

        if isinstance(spec, (Analysis, Scenario)):
            return _side(spec, _label(spec, "analysis"))
        base, at, scen = str(spec).partition("@")
        if not at or _is_file(Path(spec)) or self._is_run(str(spec)):
            return cmp.Side(str(spec), self.analysis(spec))
        sc = self.scenario(base, scen)
        return cmp.Side(str(spec), sc.analysis, predicted=True, of=sc.base)


def named_queries() -> dict[str, loader.NamedQuery]:
    """The named Cypher queries shipped with ctda, by name."""
    return loader.load_all()


def open_store(db: PathLike | Target | None = None, *, reader: Reader | None = None) -> StoreSession:
    """The runs in store ``db``: a path (embedded store), a ``bolt://`` / ``neo4j://`` URI
    (credentials from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``), or
    None for ``$CTDA_DB`` or the default embedded store. ``reader`` reads trace files."""
    return StoreSession(db, reader=reader)


def _stored(src: Source, what: str) -> StoredRun:
    from ctda.whatif.select import SelectionError

    if src.run is None:
        raise SelectionError(f"{what} needs a stored run, and {src.label} is not one (ingest it first)")
    return src.run


def breakdowns(
    source: PathLike, *, db: PathLike | Target | None = None, reader: Reader | None = None
) -> Breakdowns | JobBreakdowns:
    """HTA's breakdowns of device time, each tied to the critical path: of a stored run (in
    ``db``), a trace file analysed on the fly, or every rank of a job's directory."""
    from ctda.analysis.breakdowns import Breakdowns, JobBreakdowns
    from ctda.api_analysis import analyze

    path = Path(source)
    if path.is_dir():  # a job: every rank's breakdowns, a rank column first
        from ctda.job.load import job_files

        return JobBreakdowns.of_files(job_files([path]), lambda p: analyze(p, reader=reader))
    with open_store(db, reader=reader) as store:
        return Breakdowns(store.analysis(str(source)))
