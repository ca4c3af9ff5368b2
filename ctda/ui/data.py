"""The UI's only door to the store, and its caches.

The embedded store allows one writer *or* readers per moment across processes, so the UI
never keeps it open: each request opens it read-only, reads, and closes it, and the CLI
can ingest while the UI is up. What is expensive and immutable (a run's Analysis, its
report per step, name indexes, timelines, scenarios) is cached in-process with
``st.cache_resource``, keyed by the store location, the run id and its content digest:
a re-ingested run gets a new id, so a stale entry can never be served for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from ctda import api
from ctda.api import (
    BREAKDOWN_KINDS,
    CLASSES,
    Analysis,
    Breakdowns,
    Comparison,
    GraphCycleError,
    Override,
    QueryError,
    QueryLimits,
    QueryResult,
    Report,
    RunInfo,
    Scenario,
    Side,
    StoredRun,
    StoreError,
    TraceError,
    optimisation_specs,
    retime,
)
from ctda.options import OptionError
from ctda.ui import frames
from ctda.ui.settings import Settings

#: analyses kept in memory at once (a 1M-event run holds a few hundred MB)
MAX_ANALYSES = 6


class UIError(Exception):
    """A problem to show as one line (bad upload, read-only query, ...)."""


@dataclass(frozen=True)
class RunRef:
    """A run as a cache key: where it is stored, its id, and what it holds."""

    location: str
    id: int
    name: str
    sha256: str
    options_key: str

    @classmethod
    def of(cls, location: str, info: RunInfo) -> RunRef:
        return cls(location, info.id, info.name, info.sha256, info.options_key)

    @property
    def tag(self) -> str:
        return f"{self.location}#{self.id}:{self.sha256[:16]}:{self.options_key}"


@dataclass
class Loaded:
    """A run's analysis, where it came from, and its store handle."""

    ref: RunRef
    info: RunInfo
    analysis: Analysis
    stored: StoredRun
    source: str  # "snapshot" or "trace file"

    @property
    def tag(self) -> str:
        return self.ref.tag


def list_runs(db: str | None) -> list[RunInfo]:
    """Complete runs, read fresh on every call (the CLI may have written meanwhile)."""
    with api.open_store(db) as s:
        return s.runs()


# --- analyses ------------------------------------------------------------------------


@st.cache_resource(max_entries=MAX_ANALYSES, show_spinner="Loading the run's analysis…")
def _load(db: str | None, ref: RunRef, _info: RunInfo) -> Loaded:
    run = api.load_run(db, _info)
    return Loaded(ref, _info, run.analysis, run.stored, run.source)


def load(settings: Settings, info: RunInfo) -> Loaded:
    """The analysis of a stored run (cached across reruns and sessions)."""
    return _load(settings.db, RunRef.of(settings.location, info), info)


@st.cache_resource(max_entries=64, show_spinner=False)
def report(tag: str, step: str, _a: Analysis) -> Report:
    """``ctda analyze``'s report for one step or all, every hotspot row kept.

    ``top`` also sizes the near-critical table, so it is the number of distinct names
    (plus the wait rows), not "everything": a million near-critical rows cost seconds.
    """
    top = len(names(tag, _a).names) + len(CLASSES)
    return api.report(_a, step=step, top=top)


@st.cache_resource(max_entries=16, show_spinner=False)
def names(tag: str, _a: Analysis) -> frames.Names:
    return frames.Names(_a)


@st.cache_resource(max_entries=32, show_spinner=False)
def windows_of(tag: str, _a: Analysis) -> frames.Windows:
    return frames.Windows(_a)


@st.cache_resource(max_entries=64, show_spinner=False)
def timeline(tag: str, window: int, max_events: int, _a: Analysis) -> frames.Timeline:
    return frames.timeline(_a, window, max_events, names(tag, _a))


@st.cache_resource(max_entries=32, show_spinner=False)
def class_by_window(tag: str, _a: Analysis) -> Any:
    return frames.class_by_window(_a)


@st.cache_resource(max_entries=32, show_spinner=False)
def steps(tag: str, _a: Analysis) -> Any:
    return frames.steps(_a)


# --- scenarios -----------------------------------------------------------------------


def overrides_key(overrides: list[Override]) -> str:
    """A digest of what a scenario changes (labels, events, factors), for cache keys."""
    h = hashlib.sha256()
    for o in overrides:
        h.update(o.label.encode())
        h.update(o.events.tobytes())
        h.update(repr(o.factor).encode())
        if o.dur_ns is not None:
            h.update(o.dur_ns.tobytes())
    return h.hexdigest()[:16]


# a scenario holds its own charges and times (~110 MB at 1M events): two dozen of
# them made every new one allocate fresh memory (page faults cost ~100 ms a move)
@st.cache_resource(max_entries=4, show_spinner=False)
def scenario(
    tag: str, key: str, name: str, _a: Analysis, _overrides: list[Override], apply: tuple[str, ...] = ()
) -> Scenario:
    """One re-propagation (milliseconds to a few hundred on 1M events), cached so moving a
    slider back to one of the last few values is instant. ``apply``: named optimisations
    (:mod:`ctda.whatif.optimisations`) applied on top of the overrides."""
    return retime(_a, _overrides, name=name, apply=apply)


@st.cache_resource(max_entries=8, show_spinner=False)
def optimisation_choices(tag: str, _a: Analysis) -> list[str]:
    """The named optimisations that apply to the run, as ``--apply`` specs."""
    return optimisation_specs(_a)


def stored_scenarios(loaded: Loaded) -> tuple[list[dict[str, Any]], str]:
    """Saved scenarios of a run, each override as its label and size (not its events),
    and a note when the store cannot be read."""
    try:
        return loaded.stored.scenarios(overrides=False), ""
    except StoreError as exc:
        return [], f"scenarios unavailable: {_one_line(exc)}"


def store_stamp(db: str | None) -> float:
    """Changes whenever the store may have changed (:func:`ctda.api.store_stamp`): a CLI
    write shows up at once, an unchanged embedded store is never re-read, and reruns of one
    interaction on a server share a read."""
    return api.store_stamp(db)


@st.cache_resource(max_entries=64, show_spinner=False)
def _scenario_list(tag: str, stamp: float, _loaded: Loaded) -> tuple[list[dict[str, Any]], str]:
    recs, note = stored_scenarios(_loaded)
    # a record's path holds every critical edge: listings need only its summary
    return [{k: v for k, v in r.items() if k not in ("path", "step_ns")} for r in recs], note


def scenario_list(loaded: Loaded) -> tuple[list[dict[str, Any]], str]:
    """:func:`stored_scenarios` without their paths, read again only when the store
    changed (:func:`store_stamp`): each rerun of a page lists them, and a store open costs
    more than the page's own work."""
    return _scenario_list(loaded.tag, store_stamp(loaded.ref.location), loaded)


def forget_scenarios() -> None:
    _scenario_list.clear()


@st.cache_resource(max_entries=32, show_spinner=False)
def _saved(
    tag: str, stamp: float, name: str, _loaded: Loaded
) -> tuple[list[Override], tuple[str, ...]] | None:
    got = _loaded.stored.saved(name)
    return None if got is None else (got[0], tuple(got[1]))


def load_scenario(loaded: Loaded, name: str) -> Scenario:
    """A saved scenario re-applied to the run: its overrides and named optimisations, read
    from the store again only when it changed (:func:`store_stamp`), re-timed once per
    (run, overrides, optimisations) like the What-if page's own (:func:`scenario`)."""
    got = _saved(loaded.tag, store_stamp(loaded.ref.location), name, loaded)
    if got is None:
        raise UIError(f"no scenario {name!r} in run {loaded.ref.name!r}")
    overrides, applied = got
    key = overrides_key(overrides) + "".join(f"+{x}" for x in applied)
    return scenario(loaded.tag, key, name, loaded.analysis, overrides, applied)


def scenario_tag(loaded: Loaded, sc: Scenario | str) -> str:
    """A scenario's cache tag: its run's and the digest of its overrides (``sc`` may be that
    digest, when the caller has taken it)."""
    if isinstance(sc, str):
        return f"{loaded.tag}|{sc}"
    return f"{loaded.tag}|{overrides_key(sc.overrides)}" + "".join(f"+{x}" for x in sc.applied)


def save_scenario(loaded: Loaded, sc: Scenario) -> None:
    try:
        loaded.stored.save_scenario(sc)
    finally:
        forget_scenarios()


def delete_scenario(loaded: Loaded, name: str) -> bool:
    try:
        return loaded.stored.delete_scenario(name)
    finally:
        forget_scenarios()


# --- queries -------------------------------------------------------------------------


def run_query(db: str | None, text: str, params: dict[str, Any], max_rows: int | None = None) -> QueryResult:
    """A read-only query through the same API function as ``ctda query``
    (:meth:`ctda.api.StoreSession.query`): both gates, then a worker process with a
    timeout, a row cap and a memory cap, so no query can take the UI server down."""
    if not text.strip():
        raise UIError("the query is empty")
    limits = QueryLimits.from_env()
    if max_rows is not None:
        limits = dataclasses.replace(limits, max_rows=max_rows)
    try:
        with api.open_store(db) as session:
            return session.query(text, params, limits=limits)
    except QueryError as exc:
        raise UIError(f"the console is read-only and bounded: {exc}") from None


def named_text(db: str | None, name: str) -> str:
    """A named query's text in this store's dialect."""
    return api.named_query_text(name, db)


@st.cache_data(max_entries=256, show_spinner=False)
def run_breakdown(db: str | None, tag: str, name: str) -> str:
    """``class share · ...`` of a run's whole critical path, from the store (immutable per run)."""
    try:
        shares = api.run_class_shares(db, name)
    except (StoreError, QueryError) as exc:
        return f"({_one_line(exc)})"
    return frames.breakdown_text(shares)


def run_breakdowns(s: Settings, runs: list[RunInfo], budget_s: float | None = None) -> list[str]:
    """The Runs table's "CP breakdown" cells, in ``runs``' order (each cached per run).

    Each reads the run's whole path from the store (~0.2 s at 1M events). With
    ``budget_s`` (the server's preload) it stops once that much time has gone, leaving
    the rest to the page.
    """
    t = time.perf_counter()
    cells = []
    for r in runs:
        if budget_s is not None and time.perf_counter() - t > budget_s:
            break
        cells.append(run_breakdown(s.db, RunRef.of(s.location, r).tag, r.name))
    return cells


# --- writes (short-lived write opens) -------------------------------------------------


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def ingest_upload(
    settings: Settings,
    filename: str,
    data: bytes,
    *,
    name: str | None,
    force: bool,
    step: Callable[[str, float], None],
) -> Any:
    """Keep an uploaded trace under the uploads folder and ingest it as a run.

    ``step(message, fraction)`` reports progress. Raises :class:`UIError` with one line
    (naming the uploaded file, not the temporary path) for anything that goes wrong.
    """
    limit = settings.max_upload_mb << 20
    if len(data) > limit:
        raise UIError(
            f"{filename}: {len(data) / 2**20:.1f} MB is over the upload limit of {settings.max_upload_mb} MB"
        )
    if not data:
        raise UIError(f"{filename}: the file is empty")
    digest = hashlib.sha256(data).hexdigest()
    folder = settings.uploads_dir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest[:12]}-{_UNSAFE.sub('_', Path(filename).name)}"
    existed = path.exists()
    if not existed:
        path.write_bytes(data)
    step("reading the trace", 0.1)
    size = max(len(data), 1)

    def progress(done: int) -> None:
        step("reading the trace", 0.1 + 0.5 * min(done / size, 1.0))

    # the upload limit counts compressed bytes; this one what they expand to
    read_limited = api.trace_reader(settings.max_trace_mb << 20, progress)

    def read(p: Path) -> Any:
        table = read_limited(p)
        step("analysing", 0.65)
        return table

    def stored(done: int, total: int) -> None:
        step(f"storing {done:,}/{total:,} rows", 0.75 + 0.25 * done / max(total, 1))

    run_name = (name or "").strip() or api.run_names([filename])[0]
    try:
        with api.open_store(settings.db, reader=read) as session:
            (out,) = session.ingest(path, run=run_name, force=force, progress=stored)
    except TraceError as exc:
        _discard(path, existed)
        raise UIError(f"{filename}: {exc.problem}") from None
    except (StoreError, OptionError, GraphCycleError) as exc:
        _discard(path, existed)
        raise UIError(f"{filename}: {_one_line(exc)}") from None
    except MemoryError:
        _discard(path, existed)
        raise UIError(f"{filename}: out of memory while analysing") from None
    except Exception as exc:  # a reader or engine bug must still read as one line
        _discard(path, existed)
        raise UIError(f"{filename}: could not ingest ({type(exc).__name__}: {_one_line(exc)})") from None
    step("done", 1.0)
    return out


def _discard(path: Path, existed: bool) -> None:
    if not existed:
        path.unlink(missing_ok=True)


def delete_run(settings: Settings, name: str) -> bool:
    """Remove a run (and its uploaded trace, if the UI kept it and no other run uses it);
    False when there is no such run. Through the API, so the same rules hold as in ``ctda
    rm``: a run that belongs to a job raises a one-line :class:`StoreError` (the job goes
    as a whole)."""
    with api.open_store(settings.db) as session:
        info = next((r for r in session.runs(include_incomplete=True) if r.name == name), None)
        if info is None:
            return False
        session.rm(name)
        others = {r.file for r in session.runs()}
    f = Path(info.file)
    if f.parent == settings.uploads_dir and info.file not in others:
        f.unlink(missing_ok=True)
    return True


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --- comparisons ---------------------------------------------------------------------


@dataclass
class CachedSide(Side):
    """A comparison side whose report comes from the UI's cache (built once per side)."""

    tag: str = ""

    @property
    def report(self) -> Report:
        return report(self.tag, "all", self.analysis)

    @property
    def call_paths(self) -> pd.Series:
        return side_call_paths(self.tag, self.analysis)


@st.cache_resource(max_entries=16, show_spinner=False)
def side_call_paths(tag: str, _a: Analysis) -> pd.Series:
    """A side's CP time per call path (~0.17 s at 1M events), once per run or scenario:
    each comparison of a run with another side needed it again."""
    return api.call_paths(_a)


@st.cache_resource(max_entries=8, show_spinner="Comparing…")
def comparison(tag_a: str, tag_b: str, _a: CachedSide, _b: CachedSide) -> Comparison:
    return api.compare(_a, _b)


# --- small per-run tables, cached so a rerun that changes nothing about them is free -----


@st.cache_resource(max_entries=128, show_spinner=False)
def by_class(tag: str, windows: tuple[int, ...] | None, _a: Analysis) -> pd.DataFrame:
    return frames.by_class(_a, None if windows is None else list(windows))


@st.cache_resource(max_entries=16, show_spinner=False)
def classes_present(tag: str, _a: Analysis) -> list[str]:
    return frames.classes_present(_a)


@st.cache_resource(max_entries=16, show_spinner=False)
def categories(tag: str, _a: Analysis) -> list[str]:
    return frames.categories(_a)


@st.cache_resource(max_entries=16, show_spinner=False)
def edges_on_path(tag: str, _a: Analysis) -> Any:
    return frames.edges_on_path(_a)


@st.cache_resource(max_entries=64, show_spinner=False)
def hotspots(tag: str, step: str, windows: tuple[int, ...], _a: Analysis) -> pd.DataFrame:
    """The hotspot table of :func:`frames.hotspots` (report, names, slack) per selection."""
    return frames.hotspots(_a, report(tag, step, _a), names(tag, _a), windows_of(tag, _a), list(windows))


def hotspots_of_every_step(tag: str, _a: Analysis) -> pd.DataFrame:
    """The hotspot table over every window: the Hotspots page's opening view (and what
    the server preloads for it)."""
    return hotspots(tag, "all", tuple(range(len(_a.windows))), _a)


@st.cache_resource(max_entries=8, show_spinner="Ranking what each change would save…")
def whatif_candidates(tag: str, _a: Analysis) -> pd.DataFrame:
    """The run's what-if candidates, best first (:func:`ctda.api.whatif_candidates`)."""
    # the named optimisations the page offers anyway: found once, not again by the ranking
    return api.whatif_candidates(_a, specs=optimisation_choices(tag, _a))


@st.cache_resource(max_entries=16, show_spinner=False)
def breakdowns(tag: str, _a: Analysis) -> Breakdowns:
    """Every breakdown table of the run (the Breakdowns page's), computed once."""
    every = Breakdowns(_a)
    for kind in BREAKDOWN_KINDS:
        every.table(kind)  # computed once here, read by every rerun
    return every
