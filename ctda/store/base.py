"""The store: what every backend shares (the flows). What a backend must declare and
implement is :mod:`ctda.store.contract` (whose types are re-exported here).

A run becomes visible atomically: readers only ever see runs whose status is
``complete``. Every backend gets there the same way (:meth:`Store.write_run`): a
``pending`` run is written and flipped to ``complete`` in a last transaction. After a
failure no partial run is visible, and the next writer removes what was left behind.
Raw queries must not see a pending run either (:meth:`Store._whole_write`): Ladybug
writes the whole run in one transaction, Neo4j keeps its nodes under staging labels
until the flip (:attr:`Engine.stages_labels`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import TYPE_CHECKING, Any

from ctda.store import migrate, schema
from ctda.store.contract import Engine, Progress, QueryResult, RefusedQuery, Run, RunInfo
from ctda.store.faults import FaultCounter, StoreError
from ctda.store.job_flows import JobFlows
from ctda.store.scenario_flows import ScenarioFlows
from ctda.store.schema import COMPLETE, DELETING, META_KEY, PENDING

if TYPE_CHECKING:
    from ctda.queries.gate import Level
    from ctda.queries.limits import QueryLimits
    from ctda.store.model import RunData  # a write's: listing and querying load no Arrow

__all__ = ["Progress", "QueryResult", "RefusedQuery", "Run", "RunInfo", "Store", "StoreError"]


class Store(JobFlows, ScenarioFlows, Engine):
    """One graph store holding many runs (see :mod:`ctda.store.schema`).

    The flows are written once, here, in the Cypher both engines understand: listing runs,
    the steps of :meth:`write_run`, the bulk load of a run's tables (from
    :meth:`_add_nodes` and :meth:`_add_rels`), deletion, scenarios, blobs, rule docs, the
    query gate, the read-only guard. A backend declares what it is and implements the
    engine primitives of :class:`ctda.store.contract.Engine`; it may replace :meth:`_load`
    and :meth:`_delete_ids` with faster ones. Backends are found through
    :mod:`ctda.store.backends`.
    """

    def query(
        self,
        text: str,
        params: dict[str, Any] | None = None,
        *,
        write: bool = False,
        allow_files: bool = False,
        limits: QueryLimits | None = None,
    ) -> QueryResult:
        """Run Cypher with parameters; read-only unless ``write``.

        Every text passes two gates before it runs: :func:`ctda.queries.gate.check` (the
        tokenizer: read clauses only, or with ``write`` data changes too; length and
        nesting caps) and the engine's own plan of it (:mod:`ctda.queries.plan`: query
        type, operators, procedures and functions on allow-lists). ``write`` and
        ``allow_files`` together send it unchecked, and a shipped named query that only
        reads is neither tokenized nor planned again
        (:func:`ctda.queries.shipped.shipped_reader`). ``limits``
        bounds its time and rows (:class:`ctda.queries.limits.QueryLimits`; none for
        ctda's own named queries).
        """
        from ctda.queries.gate import GateError, Level
        from ctda.queries.shipped import shipped_reader

        level = self._gate(text, write, allow_files)
        if write and self.read_only:
            raise StoreError("store opened read-only")
        bound = params or {}
        # a shipped named query that reads was checked and planned by the test suite
        if level is Level.WRITE or (level is Level.READ and not shipped_reader(text)):
            try:
                self._check_plan(text, bound, level)
            except GateError as exc:
                raise RefusedQuery(str(exc)) from None
        return self._query(text, bound, write, limits)

    def _at(self, name: str) -> str:
        """The label ``name`` nodes of a run being written carry: :func:`schema.staged` on a
        store that :attr:`stages_labels`, else ``name`` itself."""
        return schema.staged(name) if self.stages_labels else name

    def _both(self, name: str) -> list[str]:
        """The labels ``name`` nodes may carry: visible, and staged where the store stages."""
        return [name, schema.staged(name)] if self.stages_labels else [name]

    def _add_owned(self, label: schema.Label, rows: Any) -> None:
        """Nodes or relationships (by ``label.ends``) of a run or job being written, from
        ``rows`` as :meth:`_add_nodes` and :meth:`_add_rels` take them. A backend that
        :attr:`stages_labels` puts them under the staging labels; the default, for one
        that does not, is the plain insert."""
        (self._add_nodes if label.ends is None else self._add_rels)(label, rows)

    # --- reads --------------------------------------------------------------------------
    def runs(self, include_incomplete: bool = False) -> list[RunInfo]:
        """Runs by name; only complete ones unless asked."""
        if self._absent():
            return []
        labels = self._both("Run") if include_incomplete else ["Run"]
        rows = [r for lab in labels for r in self._read(f"MATCH (r:{lab}) RETURN properties(r) AS p")]
        out = sorted((RunInfo.from_props(r["p"]) for r in rows), key=lambda r: (r.name, r.id))
        return [r for r in out if include_incomplete or r.status == COMPLETE]

    def find_run(self, name: str) -> RunInfo | None:
        """The complete run called ``name``."""
        return next((r for r in self.runs() if r.name == name), None)

    def find_content(self, sha256: str, options_key: str) -> RunInfo | None:
        """A complete run of the same file bytes analysed with the same options."""
        return next((r for r in self.runs() if r.sha256 == sha256 and r.options_key == options_key), None)

    def get_blob(self, run_id: int, name: str) -> bytes | None:
        """A payload stored with a run (``RunData.blobs``), or None."""
        if self._absent():
            return None
        rows = self._read(
            "MATCH (b:Blob) WHERE b.run_id = $r AND b.name = $n RETURN b.chunk AS chunk, b.data AS data "
            "ORDER BY b.chunk",
            {"r": run_id, "n": name},
        )
        return b"".join(bytes(r["data"]) for r in rows) if rows else None

    # --- writes -------------------------------------------------------------------------
    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        """Bulk-write the run's events, edges, scenario, windows and paths, ticking ``faults``
        per table. Each insert may commit on its own: the run stays invisible until
        :meth:`_flip`, and a failure removes it (:meth:`_forget`)."""
        import pyarrow as pa

        tables = data.keyed(rid)
        total = data.n_rows

        def put(label: schema.Label, rows: Any) -> None:
            self._add_owned(label, rows)
            faults.tick()

        put(schema.EVENT, tables["Event"])
        if progress:
            progress(data.events.num_rows, total)
        put(schema.DEP, tables["DEP"])
        if progress:
            progress(total, total)
        scen = data.scenario_table(rid)
        put(schema.SCENARIO, scen)
        key = scen.column("key")[0].as_py()
        self._write(
            "MATCH (r:Run), (s:Scenario) WHERE r.id = $r AND s.key = $s CREATE (r)-[:HAS_SCENARIO]->(s)",
            {"r": rid, "s": key},
        )
        put(schema.WINDOW, tables["Window"])
        wkeys = tables["Window"].column("key")
        put(schema.HAS_WINDOW, pa.table({"from": pa.array([key] * len(wkeys), pa.string()), "to": wkeys}))
        put(schema.SEGMENT, tables["Segment"])
        put(schema.HAS_SEGMENT, tables["HAS_SEGMENT"])
        put(schema.CP, tables["CP"])
        for label in schema.BREAKDOWN_LABELS.values():
            if label.name in tables:
                put(label, tables[label.name])

    def _delete_ids(self, ids: list[int]) -> None:
        """Remove the runs ``ids`` and everything they own. By default in one transaction
        (the scope of :meth:`_whole_write`, where the backend has one): a reader sees each
        run whole until it commits, nothing after. A backend that removes in many
        transactions hides the runs first (:meth:`_hide`)."""
        faults = FaultCounter.removal()
        with self._whole_write():
            for rid in ids:
                # paths first, from their segments: a node holding fewer relationships loses
                # each one faster (see schema.SEGMENT_SIZE)
                self._write("MATCH (g:Segment) WHERE g.run_id = $r DETACH DELETE g", {"r": rid})
                faults.tick()
                self._write("MATCH (w:Window) WHERE w.run_id = $r DETACH DELETE w", {"r": rid})
                self._write("MATCH (s:Scenario) WHERE s.run_id = $r DETACH DELETE s", {"r": rid})
                self._write("MATCH (e:Event) WHERE e.run_id = $r DETACH DELETE e", {"r": rid})
                faults.tick()
                self._write("MATCH (b:Blob) WHERE b.run_id = $r DELETE b", {"r": rid})
                for label in schema.BREAKDOWN_LABELS.values():
                    self._write(f"MATCH (x:{label.name}) WHERE x.run_id = $r DELETE x", {"r": rid})
                self._write("MATCH (r:Run) WHERE r.id = $r DETACH DELETE r", {"r": rid})

    def _writable(self) -> None:
        """Raise :class:`StoreError` unless the store was opened for writing."""
        if self.read_only or self._absent():
            raise StoreError("store opened read-only")

    def _ensure_schema(self) -> None:
        """Create what is missing; refuse a store written by another schema version.

        A store whose Meta names this DDL's fingerprint at this schema version was made by
        it already: its ~250 idempotent statements are skipped (0.6 s of every write open
        of an embedded store, e.g. each saved scenario)."""
        ddl = self._ddl()
        mark = hashlib.sha256("\n".join(ddl).encode()).hexdigest()[:16]
        if self._schema_mark() == mark:
            return
        for stmt in ddl:
            self._write(stmt)
        have = self._write(
            "MERGE (m:Meta {key: $k}) ON CREATE SET m.schema_version = $v, m.next_run_id = 0, m.lock = 0 "
            "RETURN m.schema_version AS v",
            {"k": META_KEY, "v": schema.SCHEMA_VERSION},
        )
        version = int(have[0]["v"])
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"store {self.location} has schema version {version}, written by a newer ctda "
                f"(this one reads {schema.SCHEMA_VERSION}): upgrade ctda"
            )
        if version < schema.SCHEMA_VERSION:
            self._upgrade(version)
            if version < 2:  # the breakdown tables arrived with schema 2
                migrate.backfill_breakdowns(self)
            if version < 4:  # unfinished runs of the old layout were visible: remove the dead
                self.gc()
            self._write(
                "MATCH (m:Meta {key: $k}) SET m.schema_version = $v",
                {"k": META_KEY, "v": schema.SCHEMA_VERSION},
            )
        self._write("MATCH (m:Meta {key: $k}) SET m.ddl = $d", {"k": META_KEY, "d": mark})

    def _schema_mark(self) -> str | None:
        """The DDL fingerprint the store's Meta holds at this schema version, if any (none
        in a new store, one of an older schema or one written before the mark)."""
        try:
            rows = self._read(
                "MATCH (m:Meta) WHERE m.key = $k RETURN m.schema_version AS v, m.ddl AS d", {"k": META_KEY}
            )
        except StoreError:  # no Meta table or no ddl column yet
            return None
        if not rows or rows[0]["v"] != schema.SCHEMA_VERSION:
            return None
        return str(rows[0]["d"]) if rows[0]["d"] else None

    def _upgrade(self, version: int) -> None:
        """Migrate a store of an older schema ``version`` (see :mod:`ctda.store.migrate`)."""
        raise StoreError(
            f"store {self.location} has schema version {version}, which this ctda cannot migrate"
        )

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
        after that many batches: the atomicity tests use it. A hidden (pending) run is
        allocated, loaded and flipped visible in one last transaction; a failure removes
        what was written (or leaves it to :meth:`gc`).
        """
        self._writable()
        faults = FaultCounter(fail_after)
        self.gc()  # what failed writers left behind
        if not replace and self.find_run(data.name) is not None:
            raise StoreError(f"run {data.name!r} already exists")
        rid = -1
        try:
            with self._whole_write():
                rid = self._allocate(data)
                self._load(rid, data, faults, progress)
                self._write_extras(rid, data, faults)
                self._prepublish([rid], [])
                self._flip(rid, data.name, replace)
        except BaseException:
            if rid >= 0:
                self._forget(rid)
            raise
        self._purge_deleting()
        info = next((r for r in self.runs() if r.id == rid), None)
        if info is None:  # pragma: no cover - flipped but not readable: a store bug
            raise StoreError(f"run {data.name!r} was not stored")
        return info

    def _whole_write(self) -> contextlib.AbstractContextManager[None]:
        """The scope of one run's (or job's) whole write. By default none: each step commits
        on its own and the run stays ``pending`` until :meth:`_flip`, so readers that skip
        pending runs never see it. A backend whose raw queries could see those rows writes
        the whole run in one transaction instead (Ladybug), or keeps them under staging
        labels until the flip (Neo4j)."""
        return contextlib.nullcontext()

    def _allocate(self, data: RunData) -> int:
        """Create the run's node as ``pending`` (invisible to readers); returns its new id."""
        return self._create_pending(schema.RUN, data.run)

    def _create_pending(self, label: schema.Label, props: dict[str, Any]) -> int:
        """A ``pending`` node of ``label`` (a Run or a Job) with the next id of the one
        sequence runs and jobs share (ids are never reused); returns the id."""

        def work(run: Run) -> int:
            # writing the Meta node first takes its write lock: the increment is atomic
            nid = int(
                run(
                    "MATCH (m:Meta) WHERE m.key = $k "
                    "SET m.lock = 1, m.next_run_id = coalesce(m.next_run_id, 0) + 1 "
                    "RETURN m.next_run_id AS rid",
                    {"k": META_KEY},
                )[0]["rid"]
            )
            row = dict(props, id=nid, status=PENDING, heartbeat=int(time.time()))
            sets = ", ".join(f"{k}: ${k}" for k in label.columns)
            run(f"CREATE (:{self._at(label.name)} {{{sets}}})", {k: row[k] for k in label.columns})
            return nid

        return self._transaction(work)

    def _write_extras(self, rid: int, data: RunData, faults: FaultCounter) -> None:
        """The rule docs (shared by all runs) and the run's blobs, one chunk per statement."""
        for name, doc in data.rules.items():
            self._write("MERGE (r:Rule {name: $n}) SET r.doc = $d", {"n": name, "d": doc})
        props = ", ".join(f"{k}: ${k}" for k in schema.BLOB.columns)
        for name, blob in data.blobs.items():
            for chunk in schema.blob_chunks(rid, name, blob):
                self._write(f"CREATE (:{self._at('Blob')} {{{props}}})", chunk)
                faults.tick()

    def _flip(self, rid: int, name: str, replace: bool) -> None:
        """One transaction makes the run visible and marks a run it replaces ``deleting``."""

        def work(run: Run) -> None:
            # every flip writes the Meta node first, so flips run one at a time
            run("MATCH (m:Meta) WHERE m.key = $k SET m.lock = $rid", {"k": META_KEY, "rid": rid})
            olds = [
                int(r["id"])
                for r in run(
                    "MATCH (r:Run) WHERE r.name = $n AND r.status = $c RETURN r.id AS id",
                    {"n": name, "c": COMPLETE},
                )
            ]
            if olds and not replace:
                raise StoreError(f"run {name!r} already exists")
            # (a list parameter never empty: Ladybug cannot type an empty list)
            run("MATCH (r:Run) WHERE r.id IN $ids SET r.status = $d", {"ids": olds or [-1], "d": DELETING})
            if olds:  # out of sight with this commit, though its removal comes after
                self._hide(run, olds, [])
            flipped = run(
                f"MATCH (r:{self._at('Run')}) WHERE r.id = $rid AND r.status = $p "
                "SET r.status = $c RETURN count(r) AS n",
                {"rid": rid, "p": PENDING, "c": COMPLETE},
            )
            if not flipped or int(flipped[0]["n"]) != 1:
                raise StoreError(f"run {name!r} was removed while it was written (stale heartbeat?)")
            self._publish(run, [rid], [])

        self._transaction(work)

    def _beat(self, run_ids: list[int], job_ids: list[int]) -> None:
        """Refresh the heartbeat of pending runs ``run_ids`` and jobs ``job_ids``, so other
        writers do not take them for abandoned."""
        now = int(time.time())
        for name, ids in (("Run", run_ids), ("Job", job_ids)):
            if ids:
                q = f"MATCH (x:{self._at(name)}) WHERE x.id IN $ids SET x.heartbeat = $t"
                self._write(q, {"ids": ids, "t": now})

    def _prepublish(self, run_ids: list[int], job_ids: list[int]) -> None:
        """Before the flip: publish, in transactions of their own, what its one transaction
        could not hold (the nodes of a very large run, Neo4j). Nothing by default."""

    def _publish(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        """Inside the flip's transaction: give the nodes of runs ``run_ids`` and jobs
        ``job_ids`` their visible labels. Nothing to do where runs are not staged."""

    def _hide(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        """Inside the transaction that marks runs ``run_ids`` and jobs ``job_ids``
        ``deleting``: hide all they own from raw queries, so that no reader sees one half
        removed. Nothing to do where the removal is one transaction (:meth:`_delete_ids`)."""

    def _forget(self, rid: int) -> None:
        """Best-effort removal of a failed run; what is left, a later writer removes."""
        with contextlib.suppress(Exception):  # the original error is the one to report
            self._delete_ids([rid])

    def _purge_deleting(self) -> None:
        """Remove runs marked ``deleting`` (replaced ones)."""
        for r in self.runs(include_incomplete=True):
            if r.status == DELETING:
                self._forget(r.id)

    def delete_run(self, name: str) -> bool:
        """Remove a run and everything it owns; False when there is no such run."""
        self._writable()
        ids = [r.id for r in self.runs(include_incomplete=True) if r.name == name]
        if not ids:
            return False

        def hide(run: Run) -> None:
            # hidden first (one transaction), so a delete cut short never shows half a run
            for lab in self._both("Run"):
                run(f"MATCH (r:{lab}) WHERE r.id IN $ids SET r.status = $d", {"ids": ids, "d": DELETING})
            self._hide(run, ids, [])

        self._transaction(hide)
        self._delete_ids(ids)
        return True

    def gc(self, stale_after_s: float | None = None) -> int:
        """Remove runs a failed writer left behind; returns how many were removed."""
        if self.read_only or self._absent():
            return 0
        dead = [
            r.id
            for r in self.runs(include_incomplete=True)
            if r.status != COMPLETE and self._dead(r, stale_after_s)
        ]
        if dead:
            self._delete_ids(dead)
        return len(dead) + self._gc_jobs(stale_after_s)

    def _gate(self, text: str, write: bool, allow_files: bool) -> Level:
        """Refuse what the query gate refuses: a :class:`RefusedQuery` (a store error and a
        query error, so callers of either kind see it). Returns the query's level."""
        from ctda.queries import gate

        level = gate.Level.READ
        if write:
            level = gate.Level.UNSAFE if allow_files else gate.Level.WRITE
        try:
            gate.check(text, self, level)
        except gate.GateError as exc:
            raise RefusedQuery(str(exc)) from None
        return level

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
