"""What a long-lived client of a store (the UI) asks beyond :class:`ctda.api.StoreSession`:
where the store is and whether it may have changed since it last looked, a run's analysis
with the handle that keeps its scenarios, a named query's text in the store's dialect, a
run's bound-by shares, and a trace reader with a cap on what a trace expands to.
Re-exported by :mod:`ctda.api` (which it must not import).

    facts = ctda.api.store_facts("runs.lbug")       # location, engine title, dialect, folder
    stamp = ctda.api.store_stamp("runs.lbug")       # changes when the store may have changed
    with ctda.open_store("runs.lbug") as s:
        run = ctda.api.load_run("runs.lbug", s.runs()[0])   # .analysis, .stored.scenarios()

The store is opened per call, read-only, as by :class:`~ctda.api.StoreSession`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctda.analysis.engine import Analysis, analyze
from ctda.analysis.graph import GraphCycleError
from ctda.api_reports import JobWhatif, whatif_job
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import Limits
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable
from ctda.options import AnalysisOptions
from ctda.queries import loader
from ctda.queries.loader import NamedQuery, QueryError
from ctda.queries.loader import Param as QueryParam
from ctda.store import backends, open_store
from ctda.store.base import QueryResult, RunInfo, StoreError
from ctda.store.config import Target, resolve
from ctda.store.runs import StoredRun, open_run

__all__ = [
    "GraphCycleError",
    "LoadedRun",
    "NamedQuery",
    "QueryError",
    "QueryParam",
    "QueryResult",
    "StoreError",
    "StoreFacts",
    "StoredRun",
    "TraceError",
    "guess_param",
    "load_run",
    "named_query_text",
    "run_class_shares",
    "store_facts",
    "store_stamp",
    "trace_reader",
    "whatif_stored_job",
]

DbLike = str | Path | Target | None
#: a query parameter typed as text, read as the value it spells (JSON literal, else text)
guess_param = loader.guess


def _target(db: DbLike) -> Target:
    return db if isinstance(db, Target) else resolve(None if db is None else str(db))


@dataclass(frozen=True)
class StoreFacts:
    """What a store is, for people and for the files kept beside it."""

    location: str  # a path, or a URI without credentials
    title: str  # the engine's name ("Ladybug", "Neo4j")
    dialect: str  # the Cypher dialect its named queries are read in
    folder: Path | None  # the folder an embedded store lives in; None for a server


def store_facts(db: DbLike = None) -> StoreFacts:
    """Where store ``db`` is and what serves it (``db`` as :func:`ctda.api.open_store`'s);
    nothing is opened."""
    t = _target(db)
    backend = backends.by_kind(t.kind)
    return StoreFacts(
        t.location, backend.title, backend.dialect, Path(t.location).parent if t.is_path else None
    )


def store_stamp(db: DbLike = None) -> float:
    """A number that changes whenever store ``db`` may have changed, cheap to get without
    opening it: the backend's change stamp (an embedded store's file times, so an unchanged
    store keeps its stamp; for a server, the clock in short steps)."""
    t = _target(db)
    return backends.by_kind(t.kind).change_stamp(t)


def named_query_text(name: str, db: DbLike = None) -> str:
    """Named query ``name``'s text in the dialect of store ``db`` (:class:`QueryError`:
    no such query)."""
    return loader.get(name).text(backends.by_kind(_target(db).kind).dialect)


def run_class_shares(db: DbLike, run: str) -> pd.DataFrame:
    """Stored run ``run``'s whole critical path per bound-by class, read from the store
    with the named query ``hotspots_by_class``: ``class`` and ``share``, largest first."""
    with open_store(_target(db), read_only=True) as s:
        res = loader.run(s, "hotspots_by_class", run=run)
    recs = res.records()
    return pd.DataFrame({"class": [r["class"] for r in recs], "share": [float(r["share"]) for r in recs]})


@dataclass
class LoadedRun:
    """A stored run's analysis and the handle to its scenarios."""

    info: RunInfo
    analysis: Analysis
    stored: StoredRun  # scenarios(), load_scenario(), save_scenario(), delete_scenario()
    source: str  # "snapshot" (stored with the run) or "trace file" (analysed again)


def load_run(db: str | Target | None, info: RunInfo) -> LoadedRun:
    """The analysis of stored run ``info``: its snapshot, or, for a run stored without one,
    the trace file it was ingested from analysed again with the run's options
    (:class:`StoreError` when that file is gone too)."""
    try:
        a, stored = open_run(info.name, db)
        return LoadedRun(info, a, stored, "snapshot")
    except StoreError as exc:
        path = Path(info.file)
        if not path.is_file():
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"run {info.name!r} has no analysis snapshot ({first}) and its trace "
                f"{info.file} is gone; re-ingest it"
            ) from None
    a = analyze(read_trace(path), AnalysisOptions.from_dict(info.options))
    return LoadedRun(info, a, StoredRun(db, info), "trace file")


def trace_reader(
    max_bytes: int, progress: Callable[[int], None] | None = None
) -> Callable[[Path], EventTable]:
    """A trace reader (``reader=`` of :func:`ctda.api.open_store`) that refuses a trace
    expanding to more than ``max_bytes`` (the other input limits from the environment);
    ``progress`` gets the bytes read so far."""
    limits = dataclasses.replace(Limits.from_env(), max_bytes=max_bytes)

    def read(path: Path) -> EventTable:
        return read_trace(path, progress, limits=limits)

    return read


def whatif_stored_job(
    db: DbLike,
    job: str,
    scale: Sequence[str] = (),
    *,
    straggler_median: bool = False,
    cpus: int = 0,
    executor: str | None = "serial",
) -> JobWhatif:
    """:func:`ctda.api.whatif_job` on stored job ``job``: its ranks' trace files (as their
    runs recorded them) analysed again with the job's options, then re-timed.
    :class:`StoreError` when the job is unknown or a rank's trace is gone."""
    with open_store(_target(db), read_only=True) as s:
        info = next((j for j in s.jobs() if j.name == job), None)
        if info is None:
            raise StoreError(f"no job {job!r} in {s.location}")
        member = s.job_members()  # run id -> (job, rank)
        files = {member[r.id][1]: Path(r.file) for r in s.runs() if member.get(r.id, ("",))[0] == job}
    gone = [f"r{r} ({f})" for r, f in sorted(files.items()) if not f.is_file()]
    if not files or gone:
        raise StoreError(f"job {job!r}: the trace files of {', '.join(gone) or 'its ranks'} are gone")
    return whatif_job(
        [files[r] for r in sorted(files)],
        scale,
        straggler_median=straggler_median,
        name=job,
        options=AnalysisOptions.from_dict(info.options),
        executor=executor,
        cpus=cpus,
    )
