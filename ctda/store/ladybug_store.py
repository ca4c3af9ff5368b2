"""Embedded store: LadybugDB (a Kùzu-derived graph database in one file, no server).

Why it is fast: each table of a run is bulk-loaded from an Arrow table with one
``COPY ... FROM $t`` (columnar end to end), each COPY committing on its own; one big
transaction around them measured 30% more CPU (the WAL is written again at commit).
Why it is atomic all the same: the run is created ``pending`` and made ``complete``
(replacing an older run of the same name) in one last transaction; readers only see
complete runs. Ladybug lets one process write and several read, so a store opened for
writing removes every unfinished run it finds: no other writer can be alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from ctda.store import schema
from ctda.store.base import FaultCounter, Progress, QueryResult, RunInfo, Store, StoreError
from ctda.store.model import RunData
from ctda.store.schema import COMPLETE, DELETING, META_KEY, PENDING

#: how long to wait for another process's write lock before giving up
LOCK_WAIT_S = float(os.environ.get("CTDA_LOCK_WAIT_S", "10"))
#: first and longest pause between open attempts (doubling in between)
RETRY_FIRST_S, RETRY_MAX_S = 0.02, 0.5
_PENDING = "recovery is pending"


def _open(path: Path, read_only: bool) -> Any:
    """A ``ladybug.Database`` on ``path``, recovering the file first if it needs it.

    A writer killed during a checkpoint (or a failed CHECKPOINT) leaves the file in a
    state only a read-write open repairs; a read-only open then refuses. So a reader that
    meets it opens the file read-write once, which completes the recovery under the
    writer lock, and opens read-only again. If the lock is held, a live writer is
    checkpointing right now: the reader waits (doubling pauses) until it is done.
    """
    import ladybug

    deadline = time.monotonic() + LOCK_WAIT_S
    pause = RETRY_FIRST_S
    while True:
        try:
            return ladybug.Database(str(path), read_only=read_only)
        except RuntimeError as exc:
            text = str(exc)
        if _PENDING in text and read_only:
            try:
                ladybug.Database(str(path), read_only=False).close()
                continue  # recovered: open read-only again at once
            except RuntimeError as exc:
                text = str(exc)
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _scenario_dict(p: dict[str, Any]) -> dict[str, Any]:
    """A scenario as its writer saved it (``data``), with the store's own fields beside it."""
    out = {k: v for k, v in p.items() if not k.startswith("_")}
    out["data"] = out.pop("data_json", "") or ""
    return out


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
        self._db = _open(self.path, read_only)
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
            self._exec(ddl(label))
        # columns added after a store was created (additive changes keep the schema version)
        for label in schema.NODES:
            for name, kind in label.props:
                self._exec(f"ALTER TABLE {label.name} ADD IF NOT EXISTS {name} {kind}")
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

    def query(
        self,
        text: str,
        params: dict[str, Any] | None = None,
        *,
        write: bool = False,
        allow_files: bool = False,
    ) -> QueryResult:
        self._gate(text, write, allow_files)
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
            "MATCH (m:Meta {key: $k}) SET m.next_run_id = m.next_run_id + 1 RETURN m.next_run_id",
            {"k": META_KEY},
        )
        return int(res.rows[0][0])

    def _delete_ids(self, ids: list[int]) -> None:
        for rid in ids:
            # windows first: their CP relationships point into the run's events
            self._exec("MATCH (w:Window) WHERE w.run_id = $r DETACH DELETE w", {"r": rid})
            self._exec("MATCH (s:Scenario) WHERE s.run_id = $r DETACH DELETE s", {"r": rid})
            self._exec("MATCH (e:Event) WHERE e.run_id = $r DETACH DELETE e", {"r": rid})
            self._exec("MATCH (b:Blob) WHERE b.run_id = $r DELETE b", {"r": rid})
            self._exec("MATCH (r:Run) WHERE r.id = $r DETACH DELETE r", {"r": rid})

    def _allocate(self, data: RunData) -> int:
        rid = self._next_run_id()
        props = dict(data.run, id=rid, status=PENDING, heartbeat=int(time.time()))
        sets = ", ".join(f"{k}: ${k}" for k in schema.RUN.columns)
        self._exec(f"CREATE (:Run {{{sets}}})", {k: props[k] for k in schema.RUN.columns})
        return rid

    def _forget(self, rid: int) -> None:
        with contextlib.suppress(StoreError):  # whatever is left, the next writer removes
            self._delete_ids([rid])

    def _purge_deleting(self) -> None:
        self._delete_ids([r.id for r in self.runs(include_incomplete=True) if r.status == DELETING])

    def _flip(self, rid: int, name: str, replace: bool) -> None:
        """One transaction makes the new run visible and hides the run it replaces."""
        self._exec("BEGIN TRANSACTION")
        try:
            olds = [r.id for r in self.runs() if r.name == name]
            if olds and not replace:
                raise StoreError(f"run {name!r} already exists")
            self._exec(
                "MATCH (r:Run) WHERE r.id IN $ids SET r.status = $d", {"ids": olds or [-1], "d": DELETING}
            )
            self._exec("MATCH (r:Run) WHERE r.id = $r SET r.status = $c", {"r": rid, "c": COMPLETE})
            self._exec("COMMIT")
        except BaseException:
            with contextlib.suppress(StoreError):
                self._exec("ROLLBACK")
            raise

    def _copy(self, table: str, rows: pa.Table, faults: FaultCounter) -> None:
        if rows.num_rows:
            self._exec(f"COPY {table} FROM $rows", {"rows": rows})
        faults.tick()

    def _load(self, rid: int, data: RunData, faults: FaultCounter, progress: Progress | None) -> None:
        # each COPY commits on its own: cheaper than one transaction (no second write
        # through the WAL at commit), and the run stays invisible until _flip
        tables = data.keyed(rid)
        total = data.n_rows
        self._copy("Event", tables["Event"], faults)
        if progress:
            progress(data.events.num_rows, total)
        self._copy("DEP", tables["DEP"], faults)
        if progress:
            progress(total, total)
        scen = data.scenario_table(rid)
        self._copy("Scenario", scen, faults)
        self._exec(
            "MATCH (r:Run), (s:Scenario) WHERE r.id = $r AND s.key = $s CREATE (r)-[:HAS_SCENARIO]->(s)",
            {"r": rid, "s": scen.column("key")[0].as_py()},
        )
        self._copy("Window", tables["Window"], faults)
        wkeys = tables["Window"].column("key")
        links = pa.table(
            {"from": pa.array([scen.column("key")[0].as_py()] * len(wkeys), pa.string()), "to": wkeys}
        )
        self._copy("HAS_WINDOW", links, faults)
        self._copy("CP", tables["CP"], faults)
        for name, doc in data.rules.items():
            self._exec("MERGE (r:Rule {name: $n}) SET r.doc = $d", {"n": name, "d": doc})
        for name, blob in data.blobs.items():
            for chunk in schema.blob_chunks(rid, name, blob):
                self._exec(
                    "CREATE (:Blob {key: $key, run_id: $run_id, name: $name, chunk: $chunk, data: $data})",
                    chunk,
                )
                faults.tick()

    def get_blob(self, run_id: int, name: str) -> bytes | None:
        if self._conn is None:
            return None
        rows = self._rows(
            "MATCH (b:Blob) WHERE b.run_id = $r AND b.name = $n RETURN b.chunk, b.data ORDER BY b.chunk",
            {"r": run_id, "n": name},
        ).rows
        return b"".join(bytes(r[1]) for r in rows) if rows else None

    def scenarios(self, run_id: int) -> list[dict[str, Any]]:
        if self._conn is None:
            return []
        rows = self._rows(
            "MATCH (s:Scenario) WHERE s.run_id = $r AND s.name <> $b RETURN properties(s) ORDER BY s.name",
            {"r": run_id, "b": schema.BASELINE},
        ).rows
        return [_scenario_dict(r[0]) for r in rows]

    def save_scenario(self, run_id: int, name: str, data: str) -> None:
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"{schema.BASELINE!r} is the observed run; pick another scenario name")
        props = schema.scenario_props(run_id, name, data, _now())
        sets = ", ".join(f"{k}: ${k}" for k in schema.SCENARIO.columns)
        self._exec("BEGIN TRANSACTION")
        try:
            if not self._rows("MATCH (r:Run) WHERE r.id = $r RETURN r.id", {"r": run_id}).rows:
                raise StoreError(f"no run with id {run_id}")
            self._exec("MATCH (s:Scenario) WHERE s.key = $k DETACH DELETE s", {"k": props["key"]})
            self._exec(f"CREATE (:Scenario {{{sets}}})", props)
            self._exec(
                "MATCH (r:Run), (s:Scenario) WHERE r.id = $r AND s.key = $k CREATE (r)-[:HAS_SCENARIO]->(s)",
                {"r": run_id, "k": props["key"]},
            )
            self._exec("COMMIT")
        except BaseException:
            with contextlib.suppress(StoreError):
                self._exec("ROLLBACK")
            raise

    def delete_scenario(self, run_id: int, name: str) -> bool:
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"the {schema.BASELINE!r} scenario goes with its run (ctda rm)")
        key = schema.scenario_key(run_id, name)
        found = self._rows("MATCH (s:Scenario) WHERE s.key = $k RETURN count(*)", {"k": key}).rows[0][0]
        self._exec("MATCH (s:Scenario) WHERE s.key = $k DETACH DELETE s", {"k": key})
        return bool(found)

    def delete_run(self, name: str) -> bool:
        self._writable()
        ids = [r.id for r in self.runs(include_incomplete=True) if r.name == name]
        if not ids:
            return False
        # hidden first (one statement), so a delete cut short never shows half a run
        self._exec("MATCH (r:Run) WHERE r.id IN $ids SET r.status = $d", {"ids": ids, "d": DELETING})
        self._delete_ids(ids)
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
