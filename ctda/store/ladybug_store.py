"""Embedded store: LadybugDB (a Kùzu-derived graph database in one file, no server).

Why it is fast: each table of a run is bulk-loaded from an Arrow table with one
``COPY ... FROM $t`` (columnar end to end). Why it is atomic: the whole run (its Run
node, every COPY, the flip to ``complete``) is one transaction, so no reader, not even a
raw query scanning every table, ever sees a run being written, and a writer killed half
way leaves nothing behind (recovery drops a transaction that never committed). Writing
each COPY in its own transaction was cheaper (docs/security.md gives the measured cost)
but let a raw query count a pending run's rows. Ladybug lets one process write and
several read, so a store opened for writing removes every unfinished run it finds (only
a store written by an older release, which committed each COPY, can hold one).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ctda.queries.gate import GateError, Level
from ctda.queries.limits import QueryLimitError, QueryLimits
from ctda.store import migrate, schema
from ctda.store.backends import register
from ctda.store.base import QueryResult, Run, Store, StoreError
from ctda.store.config import Target

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")

#: how long to wait for another process's write lock before giving up
LOCK_WAIT_S = float(os.environ.get("CTDA_LOCK_WAIT_S", "10"))
#: first and longest pause between open attempts (doubling in between)
RETRY_FIRST_S, RETRY_MAX_S = 0.02, 0.5
_PENDING = "recovery is pending"
#: extra ``ladybug.Database`` options (a query worker bounds the buffer pool and the
#: address space it reserves, so its memory cap holds: see ctda.queries.worker)
DB_OPTIONS: dict[str, Any] = {}
#: in a query worker, the buffer pool gets this share of the memory cap
POOL_SHARE = 4
MIN_RESERVE = 1 << 30
_OUT_OF_POOL = "Unable to allocate memory"


def _torn_wal(text: str) -> bool:
    """Whether an open failed on a WAL whose last record was cut short.

    A writer killed while its commit was being appended to the WAL leaves a partial record
    at the end; the engine refuses the whole file by default (a checksum mismatch, or a
    read past the end when the cut falls inside a record's header).
    """
    return "WAL file is corrupted" in text or ("Reading past the end of the file" in text and ".wal" in text)


def _file_stats(path: Path) -> list[tuple[str, os.stat_result]]:
    """(name, stat) of the store file and of its WAL, those that exist."""
    out = []
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            out.append((p.name, p.stat()))
        except OSError:
            continue
    return out


def _open(path: Path, read_only: bool) -> Any:
    """A ``ladybug.Database`` on ``path``, recovering the file first if it needs it.

    A writer killed during a checkpoint (or a failed CHECKPOINT) leaves the file in a
    state only a read-write open repairs; a read-only open then refuses. So a reader that
    meets it opens the file read-write once, which completes the recovery under the
    writer lock, and opens read-only again. If the lock is held, a live writer is
    checkpointing right now: the reader waits (doubling pauses) until it is done. A writer
    killed while appending its commit to the WAL leaves a torn last record: any open
    (reader or writer) then recovers once leniently, keeping every transaction that
    committed before it.
    """
    import ladybug

    deadline = time.monotonic() + LOCK_WAIT_S
    pause = RETRY_FIRST_S
    torn_once = False
    while True:
        try:
            return ladybug.Database(str(path), read_only=read_only, **DB_OPTIONS)
        except RuntimeError as exc:
            text = str(exc)
        if _PENDING in text and read_only:
            try:
                ladybug.Database(str(path), read_only=False).close()
                continue  # recovered: open read-only again at once
            except RuntimeError as exc:
                text = str(exc)
        if _torn_wal(text) and not torn_once:
            try:
                # replay every transaction before the torn record, drop the rest, and
                # checkpoint: what a commit that finished had written is kept
                ladybug.Database(str(path), read_only=False, throw_on_wal_replay_failure=False).close()
                torn_once = True
                continue
            except RuntimeError as exc:
                text = str(exc)
                torn_once = "lock" not in text.lower()  # a live writer: try again after it
        busy = "lock" in text.lower() or _PENDING in text
        if busy and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, RETRY_MAX_S)
            continue
        if busy:
            pid = re.search(r"PID (\d+)", text)
            who = f" (pid {pid.group(1)})" if pid else ""
            raise StoreError(f"store {path} is being written by another process{who}; try again later")
        raise StoreError(f"cannot open store {path}: {text.splitlines()[0]}")


def ddl(label: schema.Label) -> str:
    """CREATE statement of a node or relationship table for ``label``."""
    cols = ", ".join(f"{p} {t}" for p, t in label.props)
    if label.ends is None:
        return f"CREATE NODE TABLE IF NOT EXISTS {label.name}({cols}, PRIMARY KEY ({label.key}))"
    ends = f"FROM {label.ends[0]} TO {label.ends[1]}"
    return f"CREATE REL TABLE IF NOT EXISTS {label.name}({ends}{', ' + cols if cols else ''})"


def plain(value: Any) -> Any:
    """Ladybug sums integers into INT128 (Decimal in Python); everything else passes."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@register
class LadybugStore(Store):
    """A Ladybug database file; ``read_only`` opens share the file with one writer."""

    kind = "ladybug"
    title = "Ladybug"
    dialect = "ladybug"
    schemes = ()  # a filesystem path
    extra = "embedded"
    read_procedures = frozenset(
        {"show_tables", "table_info", "show_connection", "db_version", "show_functions", "show_indexes"}
    )

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._db: Any = None
        self._conn: Any = None
        self._in_write = False  # inside _whole_write: transactions join it
        if read_only and not self.path.exists():
            return  # an empty store: nothing ingested yet (and no driver to load)
        import ladybug

        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = _open(self.path, read_only)
        self._conn = ladybug.Connection(self._db)
        if not read_only:
            self._ensure_schema()
        elif migrate.outdated(self):
            # written by an older release: a writer migrates it once, then read on
            self.close()
            LadybugStore(self.path).close()
            self._db = _open(self.path, read_only)
            self._conn = ladybug.Connection(self._db)

    @classmethod
    def from_target(cls, target: Target, *, read_only: bool = False) -> LadybugStore:
        return cls(target.location, read_only=read_only)

    @property
    def location(self) -> str:
        return str(self.path)

    @classmethod
    def change_stamp(cls, target: Target) -> float:
        # the file's and its WAL's times: a write by another process shows at once, an
        # unchanged store is never re-read
        times = [st.st_mtime for _, st in _file_stats(Path(target.location))]
        return max(times) if times else super().change_stamp(target)

    @classmethod
    def file_signature(cls, target: Target) -> tuple[tuple[str, int, int, int], ...] | None:
        path = Path(target.location).expanduser()
        out = tuple((name, st.st_mtime_ns, st.st_size, st.st_ino) for name, st in _file_stats(path))
        return out if out and out[0][0] == path.name else None

    @classmethod
    def worker_memory(cls, target: Target, cap: int) -> int:
        # the buffer pool gets a share of the cap; the engine also reserves address space
        # for the database (a power of two, at least twice the file), which RLIMIT_AS counts
        size = 0
        path = Path(str(target.location)).expanduser()
        if path.exists():
            size = path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*"))
        reserve = max(MIN_RESERVE, 1 << (2 * size).bit_length())
        DB_OPTIONS.update(buffer_pool_size=cap // POOL_SHARE, max_db_size=reserve, max_num_threads=2)
        return reserve

    # --- plumbing -------------------------------------------------------------------
    def _exec(self, text: str, params: dict[str, Any] | None = None) -> Any:
        try:
            return self._conn.execute(text, params or {})
        except RuntimeError as exc:
            raise StoreError(str(exc).splitlines()[0]) from None

    def _rows(self, text: str, params: dict[str, Any] | None = None) -> QueryResult:
        res = self._exec(text, params)
        if isinstance(res, list):  # several statements: the last one answers
            res = res[-1]
        cols = list(res.get_column_names())
        rows = [plain(list(r)) for r in res.get_all()]
        return QueryResult(cols, rows)

    # --- engine primitives -----------------------------------------------------------
    def _absent(self) -> bool:
        return self._conn is None

    def _read(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._rows(text, params).records()

    def _write(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._rows(text, params).records()

    def _transaction(self, work: Callable[[Run], T]) -> T:
        if self._in_write:  # part of the run's one transaction (see _whole_write)
            return work(self._write)
        self._exec("BEGIN TRANSACTION")
        try:
            out = work(self._write)
            self._exec("COMMIT")
        except BaseException:
            with contextlib.suppress(StoreError):
                self._exec("ROLLBACK")
            raise
        return out

    @contextlib.contextmanager
    def _whole_write(self) -> Iterator[None]:
        """One transaction around a run's (or job's) whole write or removal: committed at
        the end, rolled back on any error; the flows' own transactions, and a removal
        inside a removal (a job's runs), join it."""
        if self._in_write:
            yield
            return
        self._exec("BEGIN TRANSACTION")
        self._in_write = True
        try:
            yield
            self._in_write = False
            self._exec("COMMIT")
        except BaseException:
            self._in_write = False
            with contextlib.suppress(StoreError):
                self._exec("ROLLBACK")
            raise

    def _ddl(self) -> list[str]:
        tables = [ddl(label) for label in schema.NODES + schema.RELS]
        # columns added after a store was created (additive changes keep the schema version)
        added = [
            f"ALTER TABLE {label.name} ADD IF NOT EXISTS {name} {kind}"
            for label in schema.NODES
            for name, kind in label.props
        ]
        return tables + added

    def _upgrade(self, version: int) -> None:
        if version < 1:
            super()._upgrade(version)
        if version >= 2:
            return  # 2 -> 3 only added tables, which the DDL created
        moved = migrate.v1_segments(self._exec(migrate.V1_PATHS).get_as_arrow())

        def work(run: Run) -> None:
            # CP's endpoints changed, so its table is made again; one transaction, so a
            # kill leaves schema 1 intact for the next writer
            run("DROP TABLE CP", {})
            run(ddl(schema.CP), {})
            for table in ("Segment", "HAS_SEGMENT", "CP"):
                if table in moved and moved[table].num_rows:
                    self._exec(f"COPY {table} FROM $rows", {"rows": moved[table]})

        self._transaction(work)

    def _check_plan(self, text: str, params: dict[str, Any], level: Level) -> None:
        from ctda.queries import plan

        self._present()
        try:  # planning folds constants: a repeat() bomb may already fill the pool here
            res = self._exec("EXPLAIN " + text, params)
        except StoreError as exc:
            if _OUT_OF_POOL in str(exc) or "bad_alloc" in str(exc):
                raise QueryLimitError(
                    "the query needed more memory than the store's buffer pool allows "
                    "(the query memory cap) and was stopped"
                ) from None
            raise
        if isinstance(res, list):  # the tokenizer lets one statement through: never here
            raise GateError("one statement per query")
        rows = res.get_all()
        plan.check_ladybug(str(rows[0][0]) if rows and rows[0] else "", level)

    def _present(self) -> None:
        if self._conn is None:
            raise StoreError(f"no store at {self.path} yet: ingest a trace first (ctda ingest TRACE)")

    def _query(
        self, text: str, params: dict[str, Any], write: bool, limits: QueryLimits | None = None
    ) -> QueryResult:
        self._present()
        if limits is None:
            return self._rows(text, params)
        # the engine's own timeout stops the query between batches of work; a query stuck
        # inside one step (a huge range()) is left to the worker's deadline (ctda.queries.worker)
        self._conn.set_query_timeout(max(1, int(limits.timeout_s * 1000)))
        try:
            res = self._exec(text, params)
            if isinstance(res, list):  # pragma: no cover - one statement passed the gate
                raise GateError("one statement per query")
            cols = list(res.get_column_names())
            rows: list[list[Any]] = []
            while res.has_next():
                if len(rows) >= limits.max_rows:
                    raise limits.too_many_rows()
                rows.append(plain(list(res.get_next())))
            return QueryResult(cols, rows)
        except StoreError as exc:
            if str(exc).startswith("Interrupted"):
                raise limits.timed_out() from None
            if _OUT_OF_POOL in str(exc) or "bad_alloc" in str(exc):
                raise limits.out_of_memory(" (the store's buffer pool)") from None
            raise
        finally:
            self._conn.set_query_timeout(0)

    # --- bulk writes (the run flow's _load and _delete_ids are the base class's) --------
    def _add_nodes(self, label: schema.Label, rows: pa.Table) -> None:
        if rows.num_rows:
            self._exec(f"COPY {label.name} FROM $rows", {"rows": rows})

    def _add_rels(self, label: schema.Label, rows: pa.Table) -> None:
        self._add_nodes(label, rows)  # a COPY either way: FROM and TO keys lead the rows

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._db is not None:
            self._db.close()
            self._db = None
