"""Saved what-if scenarios in a store, shared by both backends (mixed into ``Store``).

A scenario is a ``Scenario`` node beside its run's baseline: the writer's own JSON record
(``data_json``: name, each override's label, factor and size, named optimisations, totals),
the overrides whole (``overrides_json``: every selected event id, the JSON list Neo4j's
``ctda.replay`` queries read), the predicted step times, and the predicted path's edge ids
packed (``path_packed``, :func:`pack_ids`). The record stays small so a listing reads
little; a 1M-id path as an ``INT64[]`` list cost the embedded engine ~0.3 s to parse and
0.4-0.7 s to checkpoint, the packed form (~1 MB) 0.05 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ctda.store import schema
from ctda.store.faults import StoreError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ctda.store.contract import Run


class ScenarioFlows:
    """Scenarios of a run: list, save (or replace), delete.

    A mixin of :class:`ctda.store.base.Store`, which provides the engine primitives
    declared here.
    """

    _absent: Callable[[], bool]
    _read: Callable[..., list[dict[str, Any]]]
    _transaction: Callable[[Callable[[Any], Any]], Any]
    _writable: Callable[[], None]

    def scenarios(
        self, run_id: int, path: bool = False, overrides: bool = True, name: str | None = None
    ) -> list[dict[str, Any]]:
        """What-if scenarios saved for a run (not the baseline): name, data (JSON), ...;
        with ``path``, the predicted path's edge ids too (a list per scenario as long as
        the run's path: ~1M at 1M events, so only on request); without ``overrides``, no
        ``overrides_json`` (a selection's event ids: MBs at 1M events); with ``name``,
        that scenario only."""
        if self._absent():
            return []
        skip = {"path", "path_packed"} if not path else set()
        if not overrides:
            skip.add("overrides_json")
        cols = [c for c in schema.SCENARIO.columns if c not in skip]
        where = " AND s.name = $n" if name is not None else ""
        params = {"r": run_id, "b": schema.BASELINE, **({"n": name} if name is not None else {})}

        def read(cols: list[str]) -> list[dict[str, Any]]:
            return self._read(
                f"MATCH (s:Scenario) WHERE s.run_id = $r AND s.name <> $b{where} "
                f"RETURN {', '.join(f's.{c} AS {c}' for c in cols)} ORDER BY s.name",
                params,
            )

        try:
            rows = read(cols)
        except StoreError as exc:
            # an embedded store last written before the column was added (a write adds it)
            if "path_packed" not in str(exc):
                raise
            rows = read([c for c in cols if c != "path_packed"])
        for p in rows:
            # as its writer saved it (``data``), with the store's own fields beside it
            p["data"] = p.pop("data_json", "") or ""
            if path:
                # the in-database save writes the list; the others write it packed
                packed = p.pop("path_packed", None)
                p["path"] = p.get("path") or unpack_ids(packed)
        return rows

    def save_scenario(
        self,
        run_id: int,
        name: str,
        data: str,
        path: Sequence[int] | npt.NDArray[np.int64] | None = None,
        overrides: str | None = None,
    ) -> None:
        """Save (or replace) what-if scenario ``name``; ``data`` is its writer's JSON record.

        Known keys of the record fill the Scenario's properties: ``overrides``,
        ``step_ns``, ``predicted_ns`` (-> ``cp_ns``) and ``path`` (edge ids), unless
        ``path`` (the bulk of a record: ~1M ids at 1M events) or ``overrides`` (their
        JSON) is given apart. The path is stored packed (``path_packed``,
        :func:`pack_ids`).
        """
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"{schema.BASELINE!r} is the observed run; pick another scenario name")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        props = scenario_props(run_id, name, data, now, overrides=overrides, path=path)
        sets = ", ".join(f"{k}: ${k}" for k in schema.SCENARIO.columns)

        def work(run: Run) -> None:
            if not run("MATCH (r:Run) WHERE r.id = $r RETURN r.id AS id", {"r": run_id}):
                raise StoreError(f"no run with id {run_id}")
            run("MATCH (s:Scenario) WHERE s.key = $k DETACH DELETE s", {"k": props["key"]})
            run(f"CREATE (:Scenario {{{sets}}})", props)
            run(
                "MATCH (r:Run), (s:Scenario) WHERE r.id = $r AND s.key = $k CREATE (r)-[:HAS_SCENARIO]->(s)",
                {"r": run_id, "k": props["key"]},
            )

        self._transaction(work)

    def delete_scenario(self, run_id: int, name: str) -> bool:
        """Remove a what-if scenario; False when there is none."""
        self._writable()
        if name == schema.BASELINE:
            raise StoreError(f"the {schema.BASELINE!r} scenario goes with its run (ctda rm)")
        key = schema.scenario_key(run_id, name)

        def work(run: Run) -> bool:
            found = run("MATCH (s:Scenario) WHERE s.key = $k RETURN count(*) AS n", {"k": key})
            run("MATCH (s:Scenario) WHERE s.key = $k DETACH DELETE s", {"k": key})
            return bool(found and int(found[0]["n"]))

        return self._transaction(work)


def scenario_props(
    run_id: int,
    name: str,
    data: str,
    now: str,
    overrides: str | None = None,
    path: Sequence[int] | npt.NDArray[np.int64] | None = None,
) -> dict[str, object]:
    """Scenario node properties for a what-if record saved by its writer (JSON text).

    ``overrides`` is the overrides' JSON and ``path`` the path's edge ids when the writer
    keeps them out of the record (the record then lists only the overrides' labels, so a
    listing reads little); else the record's own ``overrides`` and ``path``. The path is
    stored packed."""
    import json

    try:
        rec = json.loads(data)
    except ValueError:
        rec = {}
    rec = rec if isinstance(rec, dict) else {}
    ints = lambda key: [int(x) for x in rec.get(key) or []]  # noqa: E731
    return {
        "key": schema.scenario_key(run_id, name),
        "run_id": run_id,
        "name": name,
        "overrides_json": overrides if overrides is not None else json.dumps(rec.get("overrides", [])),
        "step_ns": ints("step_ns"),
        "cp_ns": int(rec.get("predicted_ns") or sum(ints("step_ns"))),
        "path": [],
        "created_at": now,
        "data_json": data,
        "path_packed": pack_ids(ints("path") if path is None else path),
    }


#: first bytes of a packed id list: the format's version
PACKED = b"ctda-ids1"


def pack_ids(values: object) -> bytes:
    """A list of int64 ids as bytes: :data:`PACKED`, then zlib (level 1) of the
    little-endian int64 differences between consecutive ids (the first from 0).

    A critical path's edge ids run in near-sequential stretches, so the differences are
    small and compress ~8x: 977k ids in 1.0 MB, 0.03 s each way."""
    import zlib

    import numpy as np

    ids = np.asarray(values, dtype=np.int64).ravel()
    deltas = np.diff(ids, prepend=np.int64(0)).astype("<i8")
    return PACKED + zlib.compress(deltas.tobytes(), 1)


def unpack_ids(data: bytes | None) -> list[int]:
    """The ids :func:`pack_ids` packed (none for an empty or absent value)."""
    import zlib

    import numpy as np

    if not data:
        return []
    raw = bytes(data)
    if not raw.startswith(PACKED):
        raise ValueError("not a packed id list")
    deltas = np.frombuffer(zlib.decompress(raw[len(PACKED) :]), dtype="<i8")
    ids: list[int] = np.cumsum(deltas, dtype=np.int64).tolist()
    return ids
