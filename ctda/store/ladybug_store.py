"""Embedded store: LadybugDB (a Kùzu-derived graph database in one file, no server).

Why it is fast: the whole run is bulk-loaded from Arrow tables with ``COPY ... FROM $t``,
which is columnar end to end. Why it is atomic: the load, and the removal of a run it
replaces, happen inside one transaction; a crash leaves an uncommitted WAL tail that
the next open discards. Ladybug lets one process write and several read (each reader
keeps the snapshot it opened), so a store opened for writing can remove any unfinished
run it finds: no other writer can be running.
"""

from __future__ import annotations

import os
import re
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctda.store import schema
from ctda.store.base import FaultCounter, Progress, QueryResult, RunInfo, Store, StoreError
from ctda.store.model import RunData
from ctda.store.schema import COMPLETE, META_KEY

#: how long to wait for another process's write lock before giving up
LOCK_WAIT_S = float(os.environ.get("CTDA_LOCK_WAIT_S", "10"))


def _ddl(label: schema.Label) -> str:
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


class LadybugStore(Store):
    """A Ladybug database file; ``read_only`` opens share the file with one writer."""

    dialect = "ladybug"

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        import ladybug

        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._db: Any = None
        self._conn: Any = None
        if read_only and not self.path.exists():
            return  # an empty store: nothing ingested yet
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                self._db = ladybug.Database(str(self.path), read_only=read_only)
                break
            except RuntimeError as exc:
                text = str(exc)
                if "lock" in text.lower() and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                if "lock" in text.lower():
                    pid = re.search(r"PID (\d+)", text)
                    who = f" (pid {pid.group(1)})" if pid else ""
                    raise StoreError(f"store {self.path} is being written by another process{who}; try again later") from None
                raise StoreError(f"cannot open store {self.path}: {text.splitlines()[0]}") from None
        self._conn = ladybug.Connection(self._db)
        if not read_only:
            self._ensure_schema()

    @property
    def location(self) -> str:
        return str(self.path)

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

    def _ensure_schema(self) -> None:
        for label in schema.NODES + schema.RELS:
            self._exec(_ddl(label))
        have = self._rows("MATCH (m:Meta {key: $k}) RETURN m.schema_version", {"k": META_KEY}).rows
        if not have:
            self._exec(
                "CREATE (:Meta {key: $k, schema_version: $v, next_run_id: 0, lock: 0})",
                {"k": META_KEY, "v": schema.SCHEMA_VERSION},
            )
        elif have[0][0] != schema.SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema version {have[0][0]}, this ctda writes {schema.SCHEMA_VERSION}"
            )

    # --- reads ----------------------------------------------------------------------
    def runs(self, include_incomplete: bool = False) -> list[RunInfo]:
        if self._conn is None:
            return []
        res = self._rows("MATCH (r:Run) RETURN properties(r) AS p ORDER BY r.name, r.id")
        out = [RunInfo.from_props(r[0]) for r in res.rows]
        return [r for r in out if include_incomplete or r.status == COMPLETE]

    def query(self, text: str, params: dict[str, Any] | None = None, *, write: bool = False) -> QueryResult:
        if self._conn is None:
            raise StoreError(f"no store at {self.path} yet: ingest a trace first (ctda ingest TRACE)")
        if write and self.read_only:
            raise StoreError("store opened read-only")
        return self._rows(text, params)

    # --- writes ---------------------------------------------------------------------
    def _writable(self) -> None:
        if self._conn is None or self.read_only:
            raise StoreError("store opened read-only")

    def _next_run_id(self) -> int:
        res = self._rows(
            "MATCH (m:Meta {key: $k}) SET m.next_run_id = m.next_run_id + 1 RETURN m.next_run_id", {"k": META_KEY}
        )
        return int(res.rows[0][0])

    def _delete_ids(self, ids: list[int]) -> None:
        for rid in ids:
            # windows first: their CP relationships point into the run's events
            self._exec("MATCH (w:Window) WHERE w.run_id = $r DETACH DELETE w", {"r": rid})
            self._exec("MATCH (s:Scenario) WHERE s.run_id = $r DETACH DELETE s", {"r": rid})
            self._exec("MATCH (e:Event) WHERE e.run_id = $r DETACH DELETE e", {"r": rid})
            self._exec("MATCH (r:Run) WHERE r.id = $r DETACH DELETE r", {"r": rid})

    def write_run(
        self,
        data: RunData,
        *,
        replace: bool = False,
        fail_after: int | None = None,
        progress: Progress | None = None,
    ) -> RunInfo:
        self._writable()
        faults = FaultCounter(fail_after)
        self._exec("BEGIN TRANSACTION")
        try:
            old = [r.id for r in self.runs(include_incomplete=True) if r.name == data.name]
            complete = [r.id for r in self.runs() if r.name == data.name]
            if complete and not replace:
                raise StoreError(f"run {data.name!r} already exists")
            self._delete_ids(old)
            rid = self._next_run_id()
            self._load(rid, data, faults, progress)
            self._exec("COMMIT")
        except BaseException:
            try:
                self._exec("ROLLBACK")
            except StoreError:
                pass  # the transaction is already gone; nothing was committed
            raise
        info = next((r for r in self.runs() if r.id == rid), None)
        if info is None:  # pragma: no cover - committed but not readable: a store bug
            raise StoreError(f"run {data.name!r} was not stored")
        return info

    def _copy(self, table: str, rows: pa.Table, faults: FaultCounter) -> None:
        if rows.num_rows:
            self._exec(f"COPY {table} FROM $rows", {"rows": rows})
        faults.tick()

    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        tables = data.keyed(rid)
        props = dict(data.run, id=rid, status=COMPLETE, heartbeat=int(time.time()))
        sets = ", ".join(f"{k}: ${k}" for k in schema.RUN.columns)
        self._exec(f"CREATE (:Run {{{sets}}})", {k: props[k] for k in schema.RUN.columns})
        total = data.n_rows
        self._copy("Event", tables["Event"], faults)
        if progress:
            progress(data.events.num_rows, total)
        self._copy("DEP", tables["DEP"], faults)
        if progress:
            progress(total, total)
        scen = dict(data.scenario, run_id=rid, key=schema.scenario_key(rid, data.scenario["name"]))
        sets = ", ".join(f"{k}: ${k}" for k in schema.SCENARIO.columns)
        self._exec(f"CREATE (:Scenario {{{sets}}})", {k: scen[k] for k in schema.SCENARIO.columns})
        self._exec(
            "MATCH (r:Run), (s:Scenario) WHERE r.id = $r AND s.key = $s CREATE (r)-[:HAS_SCENARIO]->(s)",
            {"r": rid, "s": scen["key"]},
        )
        self._copy("Window", tables["Window"], faults)
        wkeys = tables["Window"].column("key")
        links = pa.table({"from": pa.array([scen["key"]] * len(wkeys), pa.string()), "to": wkeys})
        self._copy("HAS_WINDOW", links, faults)
        self._copy("CP", tables["CP"], faults)
        for name, doc in data.rules.items():
            self._exec("MERGE (r:Rule {name: $n}) SET r.doc = $d", {"n": name, "d": doc})

    def delete_run(self, name: str) -> bool:
        self._writable()
        ids = [r.id for r in self.runs(include_incomplete=True) if r.name == name]
        if not ids:
            return False
        self._exec("BEGIN TRANSACTION")
        try:
            self._delete_ids(ids)
            self._exec("COMMIT")
        except BaseException:
            self._exec("ROLLBACK")
            raise
        return True

    def gc(self, stale_after_s: float | None = None) -> int:
        # holding the write lock means no other writer is alive: every unfinished run is dead
        if self._conn is None or self.read_only:
            return 0
        dead = [r.id for r in self.runs(include_incomplete=True) if r.status != COMPLETE]
        if dead:
            self._delete_ids(dead)
        return len(dead)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._db is not None:
            self._db.close()
            self._db = None
