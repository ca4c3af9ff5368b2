"""The store interface both backends implement, and the types they exchange.

A run becomes visible atomically: readers only ever see runs whose status is
``complete``. Both backends get there the same way (:meth:`Store.write_run`): a
``pending`` run written in many transactions (Ladybug: one COPY per table; Neo4j: many
parallel batches) and flipped to ``complete`` in a last one. After a failure no partial
run is visible, and the next writer removes what was left behind.
"""

from __future__ import annotations

import json
import os
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctda.errors import CtdaError
from ctda.queries.errors import QueryError
from ctda.store.model import RunData

#: test hook: raise :class:`InjectedFault` after this many write batches
FAIL_AFTER_ENV = "CTDA_STORE_FAIL_AFTER_BATCHES"
#: test hook: stop (sleep) after this many write batches, so a test can kill the writer
STALL_AFTER_ENV = "CTDA_STORE_STALL_AFTER_BATCHES"
STALL_MARK = "ctda-store: stalled"

Progress = Callable[[int, int], None]  # (rows written, rows total)


class StoreError(CtdaError):
    """A store problem worth one line to the user (no credentials in the message)."""


class RefusedQuery(StoreError, QueryError):
    """A query the gate refuses, raised by :meth:`Store.query` before the engine sees it."""


class InjectedFault(StoreError):
    """Raised on purpose by the fault-injection hook to test atomicity."""


@dataclass
class RunInfo:
    """What ``ctda runs`` shows about one run."""

    id: int
    name: str
    status: str
    file: str
    sha256: str
    ctda_version: str
    options: dict[str, Any]
    options_key: str
    ingested_at: str
    steps: int
    step_ns: list[int]
    cp_ns: int
    events: int
    edges: int
    heartbeat: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_props(cls, p: dict[str, Any]) -> RunInfo:
        def js(key: str) -> dict[str, Any]:
            try:
                value = json.loads(p.get(key) or "{}")
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}

        return cls(
            id=int(p["id"]),
            name=str(p.get("name") or ""),
            status=str(p.get("status") or ""),
            file=str(p.get("file") or ""),
            sha256=str(p.get("sha256") or ""),
            ctda_version=str(p.get("ctda_version") or ""),
            options=js("options_json"),
            options_key=str(p.get("options_key") or ""),
            ingested_at=str(p.get("ingested_at") or ""),
            steps=int(p.get("steps") or 0),
            step_ns=[int(x) for x in (p.get("step_ns") or [])],
            cp_ns=int(p.get("cp_ns") or 0),
            events=int(p.get("events") or 0),
            edges=int(p.get("edges") or 0),
            heartbeat=int(p.get("heartbeat") or 0),
            extra={
                "checks": js("checks_json"),
                "graph": js("graph_json"),
                "trace": js("trace_json"),
                "has_gpu": bool(p.get("has_gpu")),
                "t0_ns": int(p.get("t0_ns") or 0),
            },
        )


@dataclass
class QueryResult:
    """Column names and rows of a query, values as plain Python (ints, floats, str, ...)."""

    columns: list[str]
    rows: list[list[Any]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else None


class FaultCounter:
    """Counts committed write batches for the atomicity tests' hooks.

    ``fail_after`` (or $CTDA_STORE_FAIL_AFTER_BATCHES) raises :class:`InjectedFault` once
    that many batches are done; $CTDA_STORE_STALL_AFTER_BATCHES prints ``STALL_MARK`` to
    stderr and sleeps for good instead, for tests that kill the writing process.
    """

    def __init__(self, fail_after: int | None) -> None:
        self.fail_after = fail_after if fail_after is not None else _env_int(FAIL_AFTER_ENV)
        self.stall_after = _env_int(STALL_AFTER_ENV)
        self.done = 0

    def tick(self) -> None:
        self.done += 1
        if self.fail_after is not None and self.done >= self.fail_after:
            raise InjectedFault(f"injected fault after {self.done} write batch(es) ({FAIL_AFTER_ENV})")
        if self.stall_after is not None and self.done >= self.stall_after:
            print(STALL_MARK, file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)


class Store(ABC):
    """One graph store holding many runs (see :mod:`ctda.store.schema`)."""

    #: query dialect, used to pick ``name.<dialect>.cypher`` variants
    dialect: str = ""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, printable (never includes credentials)."""

    @abstractmethod
    def runs(self, include_incomplete: bool = False) -> list[RunInfo]:
        """Runs by name; only complete ones unless asked."""

    def find_run(self, name: str) -> RunInfo | None:
        """The complete run called ``name``."""
        return next((r for r in self.runs() if r.name == name), None)

    def find_content(self, sha256: str, options_key: str) -> RunInfo | None:
        """A complete run of the same file bytes analysed with the same options."""
        return next((r for r in self.runs() if r.sha256 == sha256 and r.options_key == options_key), None)

    def write_run(
        self,
        data: RunData,
        *,
        replace: bool = False,
        fail_after: int | None = None,
        progress: Progress | None = None,
    ) -> RunInfo:
        """Store a run atomically; with ``replace`` it takes over the name of an existing run.

        ``fail_after`` (or $CTDA_STORE_FAIL_AFTER_BATCHES) raises :class:`InjectedFault`
        after that many batches: the atomicity tests use it. The steps are the same for
        both backends: a hidden (pending) run is allocated, loaded and flipped visible in
        one last transaction; a failure removes what was written (or leaves it to gc).
        """
        self._writable()
        faults = FaultCounter(fail_after)
        self.gc()  # what failed writers left behind
        if not replace and self.find_run(data.name) is not None:
            raise StoreError(f"run {data.name!r} already exists")
        rid = self._allocate(data)
        try:
            self._load(rid, data, faults, progress)
            self._flip(rid, data.name, replace)
        except BaseException:
            self._forget(rid)
            raise
        self._purge_deleting()
        info = next((r for r in self.runs() if r.id == rid), None)
        if info is None:  # pragma: no cover - flipped but not readable: a store bug
            raise StoreError(f"run {data.name!r} was not stored")
        return info

    # --- the steps of write_run, per backend ------------------------------------------
    @abstractmethod
    def _writable(self) -> None:
        """Raise :class:`StoreError` unless the store was opened for writing."""

    @abstractmethod
    def _allocate(self, data: RunData) -> int:
        """Create the run's node as ``pending`` (invisible to readers); returns its new id."""

    @abstractmethod
    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        """Write the run's events, edges, windows, paths and blobs, ticking ``faults`` per batch."""

    @abstractmethod
    def _flip(self, rid: int, name: str, replace: bool) -> None:
        """One transaction makes the run visible and marks a run it replaces ``deleting``."""

    @abstractmethod
    def _forget(self, rid: int) -> None:
        """Best-effort removal of a failed run; what is left, a later writer removes."""

    @abstractmethod
    def _purge_deleting(self) -> None:
        """Remove runs marked ``deleting`` (replaced ones)."""

    @abstractmethod
    def delete_run(self, name: str) -> bool:
        """Remove a run and everything it owns; False when there is no such run."""

    @abstractmethod
    def gc(self, stale_after_s: float | None = None) -> int:
        """Remove runs a failed writer left behind; returns how many were removed."""

    @abstractmethod
    def get_blob(self, run_id: int, name: str) -> bytes | None:
        """A payload stored with a run (``RunData.blobs``), or None."""

    @abstractmethod
    def scenarios(self, run_id: int) -> list[dict[str, Any]]:
        """What-if scenarios saved for a run (not the baseline): name, data (JSON), ..."""

    @abstractmethod
    def save_scenario(self, run_id: int, name: str, data: str) -> None:
        """Save (or replace) what-if scenario ``name``; ``data`` is its writer's JSON record.

        Known keys of the record fill the Scenario's properties: ``overrides``,
        ``step_ns``, ``predicted_ns`` (-> ``cp_ns``) and ``path`` (edge ids).
        """

    @abstractmethod
    def delete_scenario(self, run_id: int, name: str) -> bool:
        """Remove a what-if scenario; False when there is none."""

    @abstractmethod
    def query(
        self,
        text: str,
        params: dict[str, Any] | None = None,
        *,
        write: bool = False,
        allow_files: bool = False,
    ) -> QueryResult:
        """Run Cypher with parameters; read-only unless ``write``.

        Every text passes :func:`ctda.queries.gate.check` first: read clauses only, or with
        ``write`` data changes too; ``write`` and ``allow_files`` together send it unchecked.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections and locks."""

    def _gate(self, text: str, write: bool, allow_files: bool) -> None:
        """Refuse what the query gate refuses: a :class:`RefusedQuery` (a store error and a
        query error, so callers of either kind see it)."""
        from ctda.queries import gate

        level = gate.Level.READ
        if write:
            level = gate.Level.UNSAFE if allow_files else gate.Level.WRITE
        try:
            gate.check(text, self.dialect, level)
        except gate.GateError as exc:
            raise RefusedQuery(str(exc)) from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
