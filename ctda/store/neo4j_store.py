"""Team store: a Neo4j 5.26 server through the official driver.

Bulk writes: each batch is one ``UNWIND range(0, size($p0) - 1) AS i CREATE ...`` over
columnar list parameters (one list per property: far less Bolt packing than a list of
maps), several sessions write batches in parallel, and relationships find their
endpoints by internal node id (returned when the nodes were created) instead of an index
seek. A run of millions of rows cannot be one transaction (the server holds a
transaction's state in memory), so a run is written as ``status: 'pending'``, refreshed
by a heartbeat while it is written, and made visible by a last transaction that flips it
to ``'complete'`` (and marks a run it replaces ``'deleting'``). Readers only see complete
runs. A writer that dies leaves a pending run whose heartbeat stops; the next writer
removes it once it is older than ``CTDA_STALE_S`` seconds.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa

from ctda.store import schema
from ctda.store.base import FaultCounter, Progress, QueryResult, RunInfo, Store, StoreError
from ctda.store.model import RunData, int_column
from ctda.store.schema import COMPLETE, DELETING, META_KEY, PENDING

#: a pending run whose heartbeat is older than this ($CTDA_STALE_S) is a dead writer's leftover
STALE_S = 600.0
HEARTBEAT_S = 5.0
# Measured on a 2-core machine: small transactions cost the server less per row (its
# transaction state stays small: less garbage collection) and three sessions keep it busy
# while the client packs the next batches; 10k-node batches ran at half the rate.
WRITERS = int(os.environ.get("CTDA_NEO4J_WRITERS", "3"))
NODE_BATCH = int(os.environ.get("CTDA_NEO4J_NODE_BATCH", "1500"))
REL_BATCH = int(os.environ.get("CTDA_NEO4J_REL_BATCH", "3000"))
DELETE_BATCH = 5000

SCHEMA_STATEMENTS = (
    "CREATE CONSTRAINT ctda_meta_key IF NOT EXISTS FOR (m:Meta) REQUIRE m.key IS UNIQUE",
    "CREATE CONSTRAINT ctda_run_id IF NOT EXISTS FOR (r:Run) REQUIRE r.id IS UNIQUE",
    "CREATE INDEX ctda_run_name IF NOT EXISTS FOR (r:Run) ON (r.name)",
    "CREATE CONSTRAINT ctda_event_key IF NOT EXISTS FOR (e:Event) REQUIRE e.key IS UNIQUE",
    "CREATE INDEX ctda_event_run IF NOT EXISTS FOR (e:Event) ON (e.run_id)",
    "CREATE CONSTRAINT ctda_window_key IF NOT EXISTS FOR (w:Window) REQUIRE w.key IS UNIQUE",
    "CREATE INDEX ctda_window_run IF NOT EXISTS FOR (w:Window) ON (w.run_id)",
    "CREATE CONSTRAINT ctda_scenario_key IF NOT EXISTS FOR (s:Scenario) REQUIRE s.key IS UNIQUE",
    "CREATE INDEX ctda_scenario_run IF NOT EXISTS FOR (s:Scenario) ON (s.run_id)",
    "CREATE CONSTRAINT ctda_rule_name IF NOT EXISTS FOR (r:Rule) REQUIRE r.name IS UNIQUE",
    "CREATE CONSTRAINT ctda_blob_key IF NOT EXISTS FOR (b:Blob) REQUIRE b.key IS UNIQUE",
    "CREATE INDEX ctda_blob_run IF NOT EXISTS FOR (b:Blob) ON (b.run_id)",
)


def _create_nodes(label: schema.Label, const: dict[str, str]) -> str:
    """Columnar UNWIND creating ``label`` nodes; ``const`` maps properties to scalar params."""
    props = [f"{p}: ${const[p]}" if p in const else f"{p}: $p{k}[i]" for k, p in enumerate(label.columns)]
    return (
        f"UNWIND range(0, size($p0) - 1) AS i CREATE (n:{label.name} {{{', '.join(props)}}}) "
        "RETURN collect(id(n)) AS ids"
    )


def _create_rels(label: schema.Label) -> str:
    """Columnar UNWIND creating ``label`` relationships between nodes given by internal id."""
    props = ", ".join(f"{p}: $p{k}[i]" for k, p in enumerate(label.columns))
    return (
        "UNWIND range(0, size($src) - 1) AS i "
        "MATCH (a) WHERE id(a) = $src[i] MATCH (b) WHERE id(b) = $dst[i] "
        f"CREATE (a)-[:{label.name}{f' {{{props}}}' if props else ''}]->(b)"
    )


def _lists(
    table: pa.Table, columns: list[str], lo: int, hi: int, skip: tuple[str, ...] = ()
) -> dict[str, list[Any]]:
    """Parameter lists ``p0..pk`` of rows [lo, hi); numpy's tolist is the fast path."""
    out: dict[str, list[Any]] = {}
    for k, c in enumerate(columns):
        if c in skip:
            continue
        col = table.column(c).slice(lo, hi - lo)
        if col.null_count == 0 and (pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
            out[f"p{k}"] = col.to_numpy().tolist()
        else:
            out[f"p{k}"] = col.to_pylist()
    return out


def plain(value: Any) -> Any:
    """Driver values as plain Python: nodes and relationships become property dicts."""
    import neo4j.graph
    import neo4j.time

    if isinstance(value, neo4j.graph.Node):
        return {"_labels": sorted(value.labels), **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Relationship):
        return {"_type": value.type, **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Path):
        return [plain(n) for n in value.nodes]
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (neo4j.time.DateTime, neo4j.time.Date, neo4j.time.Time, neo4j.time.Duration)):
        return value.iso_format()
    return value


class Neo4jStore(Store):
    """Runs in a Neo4j database, written in parallel batches, made visible atomically."""

    dialect = "neo4j"

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
        try:
            self._driver = neo4j.GraphDatabase.driver(
                uri,
                auth=auth,
                notifications_min_severity="OFF",  # id() is deprecated but the fastest endpoint lookup
                connection_timeout=10.0,
                max_transaction_retry_time=15.0,
                max_connection_pool_size=self.writers + 4,
            )
            self._driver.verify_connectivity()
        except nx.AuthError:
            raise StoreError(
                f"Neo4j at {uri} rejected the credentials "
                "(set CTDA_NEO4J_USER/CTDA_NEO4J_PASSWORD or NEO4J_AUTH)"
            ) from None
        except (nx.ServiceUnavailable, nx.DriverError, nx.Neo4jError, OSError, ValueError) as exc:
            raise StoreError(f"cannot reach Neo4j at {uri}: {_first_line(exc)}") from None
        if not read_only:
            self._ensure_schema()

    @property
    def location(self) -> str:
        return self.uri

    # --- plumbing -------------------------------------------------------------------
    def _session(self, write: bool = True) -> Any:
        mode = self._neo4j.WRITE_ACCESS if write else self._neo4j.READ_ACCESS
        return self._driver.session(database=self.database, default_access_mode=mode)

    def _write(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        def work(tx: Any) -> list[dict[str, Any]]:
            return [r.data() for r in tx.run(text, params or {})]

        with self._session() as s:
            return self._guard(lambda: s.execute_write(work))

    def _write_none(self, text: str, params: dict[str, Any]) -> None:
        self._write(text, params)

    def _read(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        def work(tx: Any) -> list[dict[str, Any]]:
            return [r.data() for r in tx.run(text, params or {})]

        with self._session(write=False) as s:
            return self._guard(lambda: s.execute_read(work))

    def _guard(self, fn: Callable[[], Any]) -> Any:
        import neo4j.exceptions as nx

        try:
            return fn()
        except nx.Neo4jError as exc:
            raise StoreError(f"Neo4j: {_first_line(exc)}") from None
        except (nx.DriverError, OSError) as exc:
            raise StoreError(f"lost connection to Neo4j at {self.uri}: {_first_line(exc)}") from None

    def _ensure_schema(self) -> None:
        with self._session() as s:
            for stmt in SCHEMA_STATEMENTS:
                self._guard(functools.partial(_consume, s, stmt))
        have = self._write(
            "MERGE (m:Meta {key: $k}) ON CREATE SET m.schema_version = $v, m.next_run_id = 0 "
            "RETURN m.schema_version AS v",
            {"k": META_KEY, "v": schema.SCHEMA_VERSION},
        )
        if have[0]["v"] != schema.SCHEMA_VERSION:
            raise StoreError(
                f"store has schema version {have[0]['v']}, this ctda writes {schema.SCHEMA_VERSION}"
            )

    # --- reads ----------------------------------------------------------------------
    def runs(self, include_incomplete: bool = False) -> list[RunInfo]:
        rows = self._read("MATCH (r:Run) RETURN properties(r) AS p ORDER BY r.name, r.id")
        out = [RunInfo.from_props(plain(r["p"])) for r in rows]
        return [r for r in out if include_incomplete or r.status == COMPLETE]

    def query(
        self,
        text: str,
        params: dict[str, Any] | None = None,
        *,
        write: bool = False,
        allow_files: bool = False,
    ) -> QueryResult:
        self._gate(text, write, allow_files)
        if write and self.read_only:
            raise StoreError("store opened read-only")

        def work(tx: Any) -> QueryResult:
            res = tx.run(text, params or {})
            cols = list(res.keys())
            return QueryResult(cols, [[plain(v) for v in rec.values()] for rec in res])

        # the gate keeps LOAD CSV and apoc.load/import/export out of read queries; a READ
        # access-mode session makes the server refuse any write the gate could have missed
        with self._session(write=write) as s:
            out: QueryResult = self._guard(lambda: (s.execute_write if write else s.execute_read)(work))
            return out

    # --- writes ---------------------------------------------------------------------
    def _writable(self) -> None:
        if self.read_only:
            raise StoreError("store opened read-only")

    def _allocate(self, data: RunData) -> int:
        props = {k: v for k, v in data.run.items() if k in schema.RUN.columns}
        rows = self._write(
            "MATCH (m:Meta {key: $k}) SET m.lock = 1 "  # the write lock makes the increment atomic
            "WITH m SET m.next_run_id = coalesce(m.next_run_id, 0) + 1 "
            "WITH m.next_run_id AS rid CREATE (r:Run) SET r = $props, r.id = rid, r.status = $pending, "
            "r.heartbeat = $now RETURN rid",
            {"k": META_KEY, "props": props, "pending": PENDING, "now": int(time.time())},
        )
        return int(rows[0]["rid"])

    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        tables = data.keyed(rid)
        beat = _Heartbeat(self, rid)
        total, done = data.n_rows, 0

        def tick(rows: int) -> None:
            nonlocal done
            done += rows
            beat.maybe()
            faults.tick()
            if progress:
                progress(done, total)

        ev_ids = self._nodes(schema.EVENT, tables["Event"], tick, {"run_id": rid})
        self._rels(
            schema.DEP,
            tables["DEP"],
            ev_ids[int_column(data.deps, "src")],
            ev_ids[int_column(data.deps, "dst")],
            tick,
        )
        win_ids = self._scenario(rid, data, tables["Window"])
        cp = tables["CP"]
        self._rels(
            schema.CP, cp, win_ids[int_column(data.cp, "window")], ev_ids[int_column(data.cp, "target")], tick
        )
        for name, doc in data.rules.items():
            self._write("MERGE (r:Rule {name: $n}) SET r.doc = $d", {"n": name, "d": doc})
        for name, blob in data.blobs.items():
            for chunk in schema.blob_chunks(rid, name, blob):
                self._write("CREATE (b:Blob) SET b = $p", {"p": chunk})
                tick(0)

    def _nodes(
        self,
        label: schema.Label,
        table: pa.Table,
        tick: Callable[[int], None],
        same: dict[str, Any] | None = None,
    ) -> np.ndarray:
        """Create ``label`` nodes from ``table`` in parallel batches; their internal ids, in row order.

        ``same`` holds properties with one value for every node (sent once per batch).
        """
        same = same or {}
        query = _create_nodes(label, {p: p for p in same})
        ids = np.zeros(table.num_rows, dtype=np.int64)

        def batch(lo: int, hi: int) -> tuple[int, Callable[[], None]]:
            params = _lists(table, label.columns, lo, hi, skip=tuple(same)) | same
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
        q = _create_rels(label)

        def batch(lo: int, hi: int) -> tuple[int, Callable[[], None]]:
            params = _lists(table, label.columns, lo, hi) | {
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
        scen = dict(data.scenario, run_id=rid, key=schema.scenario_key(rid, data.scenario["name"]))
        rows = self._write(
            "MATCH (r:Run {id: $rid}) CREATE (r)-[:HAS_SCENARIO]->(s:Scenario) SET s = $scen "
            "WITH s UNWIND $windows AS w CREATE (s)-[:HAS_WINDOW]->(x:Window) SET x = w "
            "RETURN collect(id(x)) AS ids",
            {"rid": rid, "scen": scen, "windows": windows.to_pylist()},
        )
        return np.asarray(rows[0]["ids"], dtype=np.int64)

    def _flip(self, rid: int, name: str, replace: bool) -> None:
        def work(tx: Any) -> None:
            # every flip writes the Meta node first, so flips run one at a time
            tx.run("MATCH (m:Meta {key: $k}) SET m.lock = $rid", k=META_KEY, rid=rid).consume()
            olds = [
                r["id"]
                for r in tx.run(
                    "MATCH (r:Run {name: $n}) WHERE r.status = $c RETURN r.id AS id", n=name, c=COMPLETE
                )
            ]
            if olds and not replace:
                raise StoreError(f"run {name!r} already exists")
            tx.run("MATCH (r:Run) WHERE r.id IN $ids SET r.status = $d", ids=olds, d=DELETING).consume()
            flipped = tx.run(
                "MATCH (r:Run {id: $rid}) WHERE r.status = $p SET r.status = $c RETURN count(r) AS n",
                rid=rid,
                p=PENDING,
                c=COMPLETE,
            ).single()
            if not flipped or flipped["n"] != 1:
                raise StoreError(f"run {name!r} was removed while it was written (stale heartbeat?)")

        with self._session() as s:
            self._guard(lambda: s.execute_write(work))

    def _forget(self, rid: int) -> None:
        """Best effort removal of a failed run; if the server is gone, gc() does it later."""
        with contextlib.suppress(Exception):  # the original error is the one to report
            self._driver.verify_connectivity()  # fails fast when the server is gone
            self._delete_id(rid)

    def _delete_id(self, rid: int) -> None:
        # hide it first, so a half-deleted run is never visible
        self._write(
            "MATCH (r:Run {id: $rid}) WHERE r.status = $c SET r.status = $d",
            {"rid": rid, "c": COMPLETE, "d": DELETING},
        )
        self._delete_parallel(rid)
        # whatever the parallel pass missed (an unknown event count): one batch at a time
        steps = (
            "MATCH (w:Window)-[c:CP]->() WHERE w.run_id = $rid WITH c LIMIT $n DELETE c RETURN count(*) AS n",
            "MATCH (e:Event) WHERE e.run_id = $rid WITH e LIMIT $n DETACH DELETE e RETURN count(*) AS n",
            "MATCH (w:Window) WHERE w.run_id = $rid WITH w LIMIT $n DETACH DELETE w RETURN count(*) AS n",
            "MATCH (s:Scenario) WHERE s.run_id = $rid WITH s LIMIT $n DETACH DELETE s RETURN count(*) AS n",
            "MATCH (b:Blob) WHERE b.run_id = $rid WITH b LIMIT 4 DELETE b RETURN count(*) AS n",
        )
        for q in steps:
            self._until_empty(q, {"rid": rid, "n": DELETE_BATCH})
        self._write("MATCH (r:Run {id: $rid}) DETACH DELETE r", {"rid": rid})

    def _delete_parallel(self, rid: int) -> None:
        """Delete a run's paths and events on several sessions, in disjoint batches.

        Each window's CP relationships go in one job (the window node is shared by all of
        them); events go by ranges of ``Event.key``, which its unique index seeks. Batches
        that meet on an edge between two ranges may deadlock: the driver retries them.
        """
        windows = [
            r["k"]
            for r in self._read("MATCH (w:Window) WHERE w.run_id = $rid RETURN w.key AS k", {"rid": rid})
        ]
        found = self._read("MATCH (r:Run {id: $rid}) RETURN r.events AS n", {"rid": rid})
        n = int(found[0]["n"] or 0) + 2 if found else 0  # + SOURCE and SINK
        base = rid * schema.KEY_SPAN

        def window_paths(key: str) -> Callable[[], None]:
            q = "MATCH (w:Window {key: $k})-[c:CP]->() WITH c LIMIT $n DELETE c RETURN count(*) AS n"
            return functools.partial(self._until_empty, q, {"k": key, "n": DELETE_BATCH})

        def events(lo: int) -> Callable[[], None]:
            q = "MATCH (e:Event) WHERE e.key >= $lo AND e.key < $hi DETACH DELETE e"
            return functools.partial(
                self._write_none, q, {"lo": base + lo, "hi": base + min(lo + NODE_BATCH, n)}
            )

        self._parallel(((0, window_paths(k)) for k in windows), lambda rows: None)
        self._parallel(((0, events(lo)) for lo in range(0, n, NODE_BATCH)), lambda rows: None)

    def _until_empty(self, query: str, params: dict[str, Any]) -> None:
        """Run a batched delete (it returns how many it removed) until it removes nothing."""
        while self._write(query, params)[0]["n"]:
            pass

    def _purge_deleting(self) -> None:
        for r in self.runs(include_incomplete=True):
            if r.status == DELETING:
                self._forget(r.id)

    def get_blob(self, run_id: int, name: str) -> bytes | None:
        rows = self._read(
            "MATCH (b:Blob) WHERE b.run_id = $r AND b.name = $n RETURN b.data AS data ORDER BY b.chunk",
            {"r": run_id, "n": name},
        )
        return b"".join(bytes(r["data"]) for r in rows) if rows else None

    def scenarios(self, run_id: int) -> list[dict[str, Any]]:
        rows = self._read(
            "MATCH (s:Scenario) WHERE s.run_id = $r AND s.name <> $b "
            "RETURN properties(s) AS p ORDER BY s.name",
            {"r": run_id, "b": schema.BASELINE},
        )
        out = []
        for r in rows:
            p = plain(r["p"])
            p["data"] = p.pop("data_json", "") or ""
            out.append(p)
        return out

    def save_scenario(self, run_id: int, name: str, data: str) -> None:
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"{schema.BASELINE!r} is the observed run; pick another scenario name")
        props = schema.scenario_props(
            run_id, name, data, datetime.now(timezone.utc).isoformat(timespec="seconds")
        )

        def work(tx: Any) -> None:
            if tx.run("MATCH (r:Run {id: $r}) RETURN r.id", r=run_id).single() is None:
                raise StoreError(f"no run with id {run_id}")
            tx.run("MATCH (s:Scenario {key: $k}) DETACH DELETE s", k=props["key"]).consume()
            tx.run(
                "MATCH (r:Run {id: $r}) CREATE (r)-[:HAS_SCENARIO]->(s:Scenario) SET s = $p",
                r=run_id,
                p=props,
            ).consume()

        with self._session() as s:
            self._guard(lambda: s.execute_write(work))

    def delete_scenario(self, run_id: int, name: str) -> bool:
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"the {schema.BASELINE!r} scenario goes with its run (ctda rm)")
        rows = self._write(
            "MATCH (s:Scenario {key: $k}) DETACH DELETE s RETURN count(*) AS n",
            {"k": schema.scenario_key(run_id, name)},
        )
        return bool(rows and rows[0]["n"])

    def delete_run(self, name: str) -> bool:
        self._writable()
        ids = [r.id for r in self.runs(include_incomplete=True) if r.name == name]
        for rid in ids:
            self._delete_id(rid)
        return bool(ids)

    def gc(self, stale_after_s: float | None = None) -> int:
        if self.read_only:
            return 0
        if stale_after_s is None:
            stale_after_s = float(os.environ.get("CTDA_STALE_S", STALE_S))
        cutoff = time.time() - stale_after_s
        dead = [
            r.id
            for r in self.runs(include_incomplete=True)
            if r.status == DELETING or (r.status == PENDING and r.heartbeat <= cutoff)
        ]
        for rid in dead:
            self._delete_id(rid)
        return len(dead)

    def close(self) -> None:
        self._driver.close()


class _Heartbeat:
    """Refreshes a pending run's heartbeat so other writers do not take it for dead."""

    def __init__(self, store: Neo4jStore, rid: int) -> None:
        self.store, self.rid = store, rid
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def maybe(self) -> None:
        now = time.monotonic()
        if now - self.last < HEARTBEAT_S:
            return
        with self.lock:
            self.last = now
            self.store._write(
                "MATCH (r:Run {id: $rid}) SET r.heartbeat = $t", {"rid": self.rid, "t": int(time.time())}
            )


def _consume(session: Any, text: str) -> None:
    session.run(text).consume()


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]
