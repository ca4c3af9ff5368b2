"""The backend contract: what a store engine declares and the primitives it implements.

A backend is a :class:`ctda.store.base.Store` subclass (the flows every backend shares
live there); this module is the part a new backend reads. It declares, as class
attributes, what it is (:attr:`Engine.kind`, :attr:`~Engine.dialect`, :attr:`~Engine.schemes`,
:attr:`~Engine.read_procedures`, ...), and implements every abstract method below: reads,
writes, a transaction, its DDL, row inserts, the query plan check, a user's query. The
methods with a body are defaults a backend may override (a faster bulk load, a smarter
idea of when a store changed). Registration: :mod:`ctda.store.backends`.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ctda.queries.errors import QueryError
from ctda.store.faults import StoreError

if TYPE_CHECKING:
    from ctda.queries.gate import Level
    from ctda.queries.limits import QueryLimits
    from ctda.store.job_model import JobInfo
    from ctda.store.schema import Label

Progress = Callable[[int, int], None]  # (rows written, rows total)


class RefusedQuery(StoreError, QueryError):
    """A query the gate refuses, raised by ``Store.query`` before the engine sees it."""


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


#: one statement inside a write transaction: Cypher and parameters -> rows as dicts
Run = Callable[[str, dict[str, Any]], list[dict[str, Any]]]
T = TypeVar("T")
E = TypeVar("E", bound="Engine")


class Engine(ABC):
    """What a backend is and the engine primitives it implements (see the module doc)."""

    #: registry name (``Target.kind``, the ``ctda.stores`` entry point's name)
    kind: ClassVar[str] = ""
    #: the engine's name for people ("Neo4j")
    title: ClassVar[str] = ""
    #: Cypher dialect, which picks ``name.<dialect>.cypher`` variants of named queries;
    #: backends speaking the same Cypher share one (and the variants written for it)
    dialect: ClassVar[str] = ""
    #: URL schemes this backend serves; a backend with none opens filesystem paths
    schemes: ClassVar[tuple[str, ...]] = ()
    #: the pip extra that installs its driver
    extra: ClassVar[str] = ""
    #: procedures a read-only query may ``CALL`` (lower case, full dotted names): the
    #: query gate (:mod:`ctda.queries.gate`) and the plan check allow these and no others
    read_procedures: ClassVar[frozenset[str]] = frozenset()
    #: whether a user's query runs in a worker process (:mod:`ctda.queries.worker`), so an
    #: engine that crashes or exhausts memory cannot take the caller down. A backend whose
    #: data lives only in the calling process (nothing another process could open) says
    #: False: its queries run in-process, under the same limits
    isolated_queries: ClassVar[bool] = True
    #: whether the nodes of a run being written carry staging labels until the flip
    #: (:func:`ctda.store.schema.staged`), so raw queries cannot see them; a backend that
    #: says True puts them there (``Store._add_owned``) and relabels them (``Store._publish``)
    stages_labels: ClassVar[bool] = False

    read_only: bool = False

    @classmethod
    @abstractmethod
    def from_target(cls: type[E], target: Any, *, read_only: bool = False) -> E:
        """Open the store at ``target`` (a resolved ``--db``: a :class:`ctda.store.config.Target`;
        not imported here, as the config module finds backends through the registry)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, printable (never includes credentials)."""

    @abstractmethod
    def _read(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a read statement, as dicts (no read-only gate: internal use)."""

    @abstractmethod
    def _write(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of one write statement, committed on its own."""

    @abstractmethod
    def _transaction(self, work: Callable[[Run], T]) -> T:
        """``work(run)`` in one write transaction: committed if it returns, else rolled back."""

    @abstractmethod
    def _ddl(self) -> list[str]:
        """Statements creating this engine's tables, constraints and indexes (idempotent)."""

    @abstractmethod
    def _add_nodes(self, label: Label, rows: Any) -> None:
        """Create ``label`` nodes from ``rows`` (an Arrow table: the label's columns, in order;
        possibly empty)."""

    @abstractmethod
    def _add_rels(self, label: Label, rows: Any) -> None:
        """Create ``label`` relationships from ``rows`` (an Arrow table: ``from`` and ``to``,
        the endpoints' keys, then the label's columns; possibly empty)."""

    @abstractmethod
    def _check_plan(self, text: str, params: dict[str, Any], level: Level) -> None:
        """Plan ``text`` without running it and raise :class:`ctda.queries.gate.GateError`
        unless the plan is allowed at ``level`` (see :mod:`ctda.queries.plan`)."""

    @abstractmethod
    def _query(
        self, text: str, params: dict[str, Any], write: bool, limits: QueryLimits | None = None
    ) -> QueryResult:
        """A user's query, already through both gates, in a read or a write transaction,
        stopped by ``limits`` (:class:`ctda.queries.limits.QueryLimitError`)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and locks."""

    # --- defaults a backend may override ------------------------------------------------
    def _absent(self) -> bool:
        """True when there is no store yet (an embedded file not created): reads are empty."""
        return False

    def _dead(self, run: RunInfo | JobInfo, stale_after_s: float | None) -> bool:
        """Whether an unfinished run was left by a writer that is gone (see ``Store.gc``).

        The default suits engines with one writer at a time: holding the write lock means
        no other writer is alive, so every unfinished run is dead.
        """
        return True

    @classmethod
    def change_stamp(cls, target: Any) -> float:
        """A number that changes whenever the store at ``target`` may have changed, cheap
        to get without opening it (a UI re-reads only when it moves). The default: the
        clock in 2 s steps (the reruns of one interaction share a read)."""
        return float(int(time.time() / 2))

    @classmethod
    def file_signature(cls, target: Any) -> tuple[tuple[str, int, int, int], ...] | None:
        """Per file the store at ``target`` keeps (name, mtime in ns, size, inode): a
        committed write changes at least one. None for a store with no files here (a server)
        or none yet; then nothing read from it is kept between processes (``ctda.store.listing``)."""
        return None

    @classmethod
    def worker_memory(cls, target: Any, cap: int) -> int:
        """Bound the engine for a query worker whose memory cap is ``cap`` bytes (an
        embedded engine's buffer pool, say); the address space it reserves beyond the cap,
        in bytes (the worker's ``RLIMIT_AS`` is the cap plus this)."""
        return 0
