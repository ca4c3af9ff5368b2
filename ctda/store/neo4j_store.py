"""Team store: a Neo4j 5.26 server through the official driver.

Bulk writes: each batch is one ``UNWIND range(0, size($p0) - 1) AS i CREATE ...`` over
columnar list parameters (one list per property: far less Bolt packing than a list of
maps), several sessions write batches in parallel, and relationships find their
endpoints by internal node id (returned when the nodes were created) instead of an index
seek. A run of millions of rows cannot be one transaction (the server holds a
transaction's state in memory), so a run is written as ``status: 'pending'``, refreshed
by a heartbeat while it is written, and made visible by a last transaction that flips it
to ``'complete'`` (and marks a run it replaces ``'deleting'``). While it is written its
nodes carry staging labels (``PendingEvent``, ... :func:`ctda.store.schema.staged`); the
flip gives them their labels, in batches inside its one transaction. A raw query never
sees them: the query gate refuses plans that name a staging label or read nodes or
relationships without a label (docs/security.md). A writer that dies leaves a pending run
whose heartbeat stops; the next writer removes it once it is older than ``CTDA_STALE_S``
seconds.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar

from ctda.queries.gate import Level
from ctda.queries.limits import QueryLimitError, QueryLimits
from ctda.store import migrate, schema
from ctda.store.backends import register
from ctda.store.base import Progress, QueryResult, Run, RunInfo, Store, StoreError
from ctda.store.config import Target
from ctda.store.faults import FaultCounter
from ctda.store.neo4j_cypher import (
    create_nodes,
    create_rels,
    error_code,
    error_line,
    first_line,
    out_of_memory,
    param_lists,
    plain,
    records,
    schema_statements,
)
from ctda.store.neo4j_staging import DELETE_BATCH, Heartbeat, Staging
from ctda.store.schema import DELETING, PENDING

if TYPE_CHECKING:
    # numpy, Arrow and the run model load with a write (listing runs and querying need none)
    import numpy as np
    import pyarrow as pa

    from ctda.store.job_model import JobInfo
    from ctda.store.model import RunData, Segments

T = TypeVar("T")

#: a pending run whose heartbeat is older than this ($CTDA_STALE_S) is a dead writer's leftover
STALE_S = 600.0
#: seconds the driver retries a transaction that failed for a transient reason (the server
#: gone or restarting) before the command fails ($CTDA_NEO4J_RETRY_S)
RETRY_S = 15.0
# Measured on a 2-core machine: small transactions cost the server less per row (its
# transaction state stays small: less garbage collection) and three sessions keep it busy
# while the client packs the next batches; 10k-node batches ran at half the rate.
WRITERS = int(os.environ.get("CTDA_NEO4J_WRITERS", "3"))
NODE_BATCH = int(os.environ.get("CTDA_NEO4J_NODE_BATCH", "1500"))
REL_BATCH = int(os.environ.get("CTDA_NEO4J_REL_BATCH", "3000"))


@register
class Neo4jStore(Staging, Store):
    """Runs in a Neo4j database, written in parallel batches, made visible atomically."""

    kind = "neo4j"
    title = "Neo4j"
    dialect = "neo4j"
    schemes = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
    extra = "neo4j"
    read_procedures = frozenset(
        {
            "db.labels",
            "db.relationshiptypes",
            "db.propertykeys",
            "db.schema.visualization",
            "db.schema.nodetypeproperties",
            "db.schema.reltypeproperties",
            "dbms.components",
            # ctda's own: re-times a stored run in memory, reads only the run's nodes
            "ctda.replay",
            "ctda.replayarrays",  # ctda.replay's paths packed as bytes, for ctda whatif --in-db
            "ctda.replaycache",  # counters of ctda.replay's run cache
        }
    )
    stages_labels = True

    def __init__(
        self,
        uri: str,
        auth: tuple[str, str] | None,
        *,
        database: str | None = None,
        read_only: bool = False,
        writers: int = WRITERS,
    ) -> None:
        import neo4j.exceptions as nx

        import neo4j

        self._neo4j = neo4j
        self.uri = uri
        self.database = database
        self.read_only = read_only
        self.writers = max(1, writers)
        self._function_names: tuple[frozenset[str], frozenset[str]] | None = None
        retry_s = float(os.environ.get("CTDA_NEO4J_RETRY_S", RETRY_S))
        try:
            self._driver = neo4j.GraphDatabase.driver(
                uri,
                auth=auth,
                notifications_min_severity="OFF",  # id() is deprecated but the fastest endpoint lookup
                connection_timeout=10.0,
                max_transaction_retry_time=retry_s,
                max_connection_pool_size=self.writers + 4,
            )
            self._driver.verify_connectivity()
        except nx.AuthError:
            raise StoreError(
                f"Neo4j at {uri} rejected the credentials "
                "(set CTDA_NEO4J_USER/CTDA_NEO4J_PASSWORD or NEO4J_AUTH)"
            ) from None
        except (nx.ServiceUnavailable, nx.DriverError, nx.Neo4jError, OSError, ValueError) as exc:
            raise StoreError(f"cannot reach Neo4j at {uri}: {first_line(exc)}") from None
        if not read_only:
            self._ensure_schema()
        elif migrate.outdated(self):  # written by an older release: migrated once by a writer
            Neo4jStore(uri, auth, database=database, writers=writers).close()

    def _upgrade(self, version: int) -> None:
        if version < 1:
            super()._upgrade(version)
        if version >= 2:
            return  # 2 -> 3 only added labels (and their constraints, made by the DDL)
        # in batches, each its own transaction: a cut-short migration resumes where it was
        self._until_empty(migrate.V1_TO_V2_NEO4J, {"n": DELETE_BATCH, "size": schema.SEGMENT_SIZE})

    @classmethod
    def from_target(cls, target: Target, *, read_only: bool = False) -> Neo4jStore:
        return cls(target.location, target.auth, database=target.database, read_only=read_only)

    @property
    def location(self) -> str:
        return self.uri

    # --- plumbing -------------------------------------------------------------------
    def _session(self, write: bool = True) -> Any:
        mode = self._neo4j.WRITE_ACCESS if write else self._neo4j.READ_ACCESS
        return self._driver.session(database=self.database, default_access_mode=mode)

    def _write(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._session() as s:
            return self._guard(lambda: s.execute_write(records, text, params))

    def _write_none(self, text: str, params: dict[str, Any]) -> None:
        self._write(text, params)

    def _read(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._session(write=False) as s:
            return self._guard(lambda: s.execute_read(records, text, params))

    def _guard(self, fn: Callable[[], Any]) -> Any:
        import neo4j.exceptions as nx

        try:
            return fn()
        except nx.Neo4jError as exc:
            raise StoreError(error_line(error_code(exc), first_line(exc))) from None
        except (nx.DriverError, OSError) as exc:
            raise StoreError(f"lost connection to Neo4j at {self.uri}: {first_line(exc)}") from None

    def _transaction(self, work: Callable[[Run], T]) -> T:
        import neo4j.exceptions as nx

        def in_tx(tx: Any) -> T:
            try:
                return work(functools.partial(records, tx))
            except nx.Neo4jError as exc:
                if out_of_memory(error_code(exc)):
                    # the driver retries this transient error for 30 s, each try redoing the
                    # whole work (a run's flip: minutes at 1M events) to need the same memory
                    raise StoreError(error_line(error_code(exc), first_line(exc))) from None
                raise

        with self._session() as s:
            out: T = self._guard(lambda: s.execute_write(in_tx))
            return out

    def _ddl(self) -> list[str]:
        return schema_statements()

    def _dead(self, run: RunInfo | JobInfo, stale_after_s: float | None) -> bool:
        # several writers may be alive: a pending run is dead once its heartbeat stops
        if stale_after_s is None:
            stale_after_s = float(os.environ.get("CTDA_STALE_S", STALE_S))
        return run.status == DELETING or (
            run.status == PENDING and run.heartbeat <= time.time() - stale_after_s
        )

    def _check_plan(self, text: str, params: dict[str, Any], level: Level) -> None:
        from ctda.queries import plan

        def explain(tx: Any) -> tuple[str, Any]:
            summary = tx.run("EXPLAIN " + text, params).consume()
            return str(summary.query_type or ""), summary.plan

        write = level is not Level.READ
        with self._session(write=write) as s:
            qtype, tree = self._guard(lambda: (s.execute_write if write else s.execute_read)(explain))
        builtins, known = self._functions()
        plan.check_neo4j(
            qtype, tree, level, builtins, known, procedures=self.read_procedures, hidden=schema.STAGED_LABELS
        )

    def _functions(self) -> tuple[frozenset[str], frozenset[str]]:
        """The server's built-in function names and all its function names, lower case
        (asked once per store)."""
        if self._function_names is None:
            rows = self._read("SHOW FUNCTIONS YIELD name, isBuiltIn RETURN name, isBuiltIn")
            self._function_names = (
                frozenset(str(r["name"]).lower() for r in rows if r["isBuiltIn"]),
                frozenset(str(r["name"]).lower() for r in rows),
            )
        return self._function_names

    def _query(
        self, text: str, params: dict[str, Any], write: bool, limits: QueryLimits | None = None
    ) -> QueryResult:
        # an explicit transaction (no retries: a user's query runs once) in a session whose
        # access mode makes the server refuse any write a read query might still attempt;
        # the server stops it at the transaction timeout, the row cap stops reading
        import neo4j.exceptions as nx

        cap = limits.max_rows if limits is not None else None
        timeout = limits.timeout_s if limits is not None else None
        with self._session(write=write) as s:
            try:
                with s.begin_transaction(timeout=timeout) as tx:
                    res = tx.run(text, params)
                    cols = list(res.keys())
                    rows: list[list[Any]] = []
                    for rec in res:
                        if cap is not None and len(rows) >= cap:
                            assert limits is not None
                            raise limits.too_many_rows()
                        rows.append([plain(v) for v in rec.values()])
                    if write:
                        tx.commit()
                    return QueryResult(cols, rows)
            except nx.Neo4jError as exc:
                if limits is not None and "TransactionTimedOut" in error_code(exc):
                    raise limits.timed_out() from None
                if out_of_memory(error_code(exc)):
                    raise QueryLimitError(
                        "the query needed more memory than the server lets one transaction use "
                        "(db.memory.transaction.max) and was stopped"
                    ) from None
                raise StoreError(f"Neo4j: {first_line(exc)}") from None
            except (nx.DriverError, OSError) as exc:
                raise StoreError(f"lost connection to Neo4j at {self.uri}: {first_line(exc)}") from None

    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        from ctda.store.model import int_column, path_segments

        tables = data.keyed(rid)
        beat = Heartbeat(self, [rid])
        total, done = data.n_rows, 0

        def tick(rows: int) -> None:
            nonlocal done
            done += rows
            beat.maybe()
            faults.tick()
            if progress:
                progress(done, total)

        ev_ids = self._nodes(schema.EVENT, tables["Event"], tick, {"run_id": rid}, staged=True)
        self._rels(
            schema.DEP,
            tables["DEP"],
            ev_ids[int_column(data.deps, "src")],
            ev_ids[int_column(data.deps, "dst")],
            tick,
        )
        win_ids = self._scenario(rid, data, tables["Window"])
        win = tables["Window"]
        segs = path_segments(
            rid,
            data.scenario["name"],
            int_column(data.cp, "window"),
            win.column("key").to_pylist(),
            int_column(win, "idx"),
            int_column(data.cp, "pos"),
        )
        seg_ids = self._segments(segs, win_ids)
        self._rels(schema.CP, tables["CP"], seg_ids[segs.of_cp], ev_ids[int_column(data.cp, "target")], tick)
        for label in schema.BREAKDOWN_LABELS.values():
            if label.name in tables:
                self._add_nodes(label, tables[label.name], staged=True)

    def _add_nodes(self, label: schema.Label, rows: pa.Table, *, staged: bool = False) -> None:
        self._nodes(label, rows, lambda _rows: None, staged=staged)

    def _add_rels(self, label: schema.Label, rows: pa.Table, *, staged: bool = False) -> None:
        # endpoints by their unique keys (a job's tables are small: index seeks suffice)
        assert label.ends is not None
        src, dst = (next(n for n in schema.NODES if n.name == end) for end in label.ends)
        at = self._at if staged else str
        props = ", ".join(f"{p}: r.p{k}" for k, p in enumerate(label.columns))
        q = (
            f"UNWIND $rows AS r MATCH (a:{at(src.name)} {{{src.key}: r.f}}) "
            f"MATCH (b:{at(dst.name)} {{{dst.key}: r.t}}) "
            f"CREATE (a)-[:{label.name}{f' {{{props}}}' if props else ''}]->(b)"
        )
        recs = rows.to_pylist()
        for lo in range(0, len(recs), REL_BATCH):
            batch = [
                {"f": r["from"], "t": r["to"]} | {f"p{k}": r[p] for k, p in enumerate(label.columns)}
                for r in recs[lo : lo + REL_BATCH]
            ]
            self._write(q, {"rows": batch})

    def _segments(self, segs: Segments, win_ids: np.ndarray) -> np.ndarray:
        """Segment nodes under their windows, in batches; their internal ids, in row order."""
        import numpy as np

        rows = segs.rows.to_pylist()
        ids = np.zeros(len(rows), dtype=np.int64)
        for lo in range(0, len(rows), NODE_BATCH):
            hi = min(lo + NODE_BATCH, len(rows))
            got = self._write(
                "UNWIND $segs AS g MATCH (w) WHERE id(w) = g.w "
                f"CREATE (w)-[:HAS_SEGMENT]->(x:{self._at('Segment')}) SET x = g.p "
                "RETURN collect(id(x)) AS ids",
                {"segs": [{"w": int(win_ids[segs.window[i]]), "p": rows[i]} for i in range(lo, hi)]},
            )[0]["ids"]
            if len(got) != hi - lo:  # pragma: no cover - would mean a window vanished mid-write
                raise StoreError("Neo4j returned a short segment id batch")
            ids[lo:hi] = got
        return ids

    def _nodes(
        self,
        label: schema.Label,
        table: pa.Table,
        tick: Callable[[int], None],
        same: dict[str, Any] | None = None,
        *,
        staged: bool = False,
    ) -> np.ndarray:
        """Create ``label`` nodes from ``table`` in parallel batches; their internal ids, in row order.

        ``same`` holds properties with one value for every node (sent once per batch);
        ``staged``: under the staging label (a run being written).
        """
        import numpy as np

        same = same or {}
        query = create_nodes(label, {p: p for p in same}, self._at(label.name) if staged else label.name)
        ids = np.zeros(table.num_rows, dtype=np.int64)

        def batch(lo: int, hi: int) -> tuple[int, Callable[[], None]]:
            params = param_lists(table, label.columns, lo, hi, skip=tuple(same)) | same
            return hi - lo, functools.partial(self._store_ids, query, params, ids, lo, hi)

        n = table.num_rows
        self._parallel((batch(lo, min(lo + NODE_BATCH, n)) for lo in range(0, n, NODE_BATCH)), tick)
        return ids

    def _store_ids(self, query: str, params: dict[str, Any], out: np.ndarray, lo: int, hi: int) -> None:
        ids = self._write(query, params)[0]["ids"]
        if len(ids) != hi - lo:  # pragma: no cover - would mean the server reordered rows
            raise StoreError("Neo4j returned a short id batch")
        out[lo:hi] = ids

    def _rels(
        self,
        label: schema.Label,
        table: pa.Table,
        src: np.ndarray,
        dst: np.ndarray,
        tick: Callable[[int], None],
    ) -> None:
        q = create_rels(label)

        def batch(lo: int, hi: int) -> tuple[int, Callable[[], None]]:
            params = param_lists(table, label.columns, lo, hi) | {
                "src": src[lo:hi].tolist(),
                "dst": dst[lo:hi].tolist(),
            }
            return hi - lo, functools.partial(self._write_none, q, params)

        n = table.num_rows
        self._parallel((batch(lo, min(lo + REL_BATCH, n)) for lo in range(0, n, REL_BATCH)), tick)

    def _parallel(
        self, batches: Iterator[tuple[int, Callable[[], None]]], tick: Callable[[int], None]
    ) -> None:
        """Run batch jobs on ``writers`` sessions, at most two per writer in memory at once."""
        pending: dict[Future[None], int] = {}
        pool = ThreadPoolExecutor(self.writers, thread_name_prefix="ctda-neo4j")
        try:
            for rows, job in batches:
                while len(pending) >= 2 * self.writers:
                    self._drain(pending, tick)
                pending[pool.submit(job)] = rows
            while pending:
                self._drain(pending, tick)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _drain(pending: dict[Future[None], int], tick: Callable[[int], None]) -> None:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in done:
            rows = pending.pop(fut)
            fut.result()  # re-raises a failed batch
            tick(rows)

    def _scenario(self, rid: int, data: RunData, windows: pa.Table) -> np.ndarray:
        """Scenario, its windows and links in one transaction; returns window node ids."""
        import numpy as np

        scen = dict(data.scenario, run_id=rid, key=schema.scenario_key(rid, data.scenario["name"]))
        rows = self._write(
            f"MATCH (r:{self._at('Run')} {{id: $rid}}) "
            f"CREATE (r)-[:HAS_SCENARIO]->(s:{self._at('Scenario')}) SET s = $scen "
            f"WITH s UNWIND $windows AS w CREATE (s)-[:HAS_WINDOW]->(x:{self._at('Window')}) SET x = w "
            "RETURN collect(id(x)) AS ids",
            {"rid": rid, "scen": scen, "windows": windows.to_pylist()},
        )
        return np.asarray(rows[0]["ids"], dtype=np.int64)

    def _forget(self, rid: int) -> None:
        with contextlib.suppress(Exception):  # the original error is the one to report
            self._driver.verify_connectivity()  # fails fast when the server is gone
            super()._forget(rid)

    def _delete_parallel(self, rid: int, faults: FaultCounter) -> None:
        """Delete a run's paths and events on several sessions, in disjoint batches.

        Each segment's CP relationships go in one job (they share the segment node); events
        go by ranges of ``Event.key``, which its unique index seeks. Batches
        that meet on an edge between two ranges may deadlock: the driver retries them.
        """
        found = [
            r
            for lab in self._both("Run")
            for r in self._read(f"MATCH (r:{lab} {{id: $rid}}) RETURN r.events AS n", {"rid": rid})
        ]
        n = int(found[0]["n"] or 0) + 2 if found else 0  # + SOURCE and SINK
        base = rid * schema.KEY_SPAN
        for seg, event in zip(self._both("Segment"), self._both("Event")):
            segments = [
                r["k"]
                for r in self._read(f"MATCH (g:{seg}) WHERE g.run_id = $rid RETURN g.key AS k", {"rid": rid})
            ]

            def segment_paths(key: str, seg: str = seg) -> Callable[[], None]:
                q = f"MATCH (g:{seg} {{key: $k}}) DETACH DELETE g"
                return functools.partial(self._write_none, q, {"k": key})

            def events(lo: int, event: str = event) -> Callable[[], None]:
                q = f"MATCH (e:{event}) WHERE e.key >= $lo AND e.key < $hi DETACH DELETE e"
                return functools.partial(
                    self._write_none, q, {"lo": base + lo, "hi": base + min(lo + NODE_BATCH, n)}
                )

            self._parallel(((0, segment_paths(k)) for k in segments), lambda rows: faults.tick())
            # a run's events carry one of the two labels (staged: hidden or never published;
            # visible: marked deleting by an older release): the other pass has nothing to do
            if self._read(f"MATCH (e:{event}) WHERE e.run_id = $rid RETURN e.key LIMIT 1", {"rid": rid}):
                self._parallel(
                    ((0, events(lo)) for lo in range(0, n, NODE_BATCH)), lambda rows: faults.tick()
                )

    def close(self) -> None:
        self._driver.close()
