"""A stored run as what-if commands and the UI use it: its Analysis and its scenarios.

The run's Analysis comes from the columnar snapshot stored with it (no trace re-read, no
graph re-read per scenario). Scenarios are stored as their overrides, the named optimisations they
applied with what those assumed, and summary results; re-applying the overrides and the
optimisations to the snapshot reproduces them exactly.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctda.analysis import snapshot
from ctda.analysis.engine import Analysis
from ctda.queries import loader
from ctda.queries.limits import QueryLimits
from ctda.store import open_store
from ctda.store.base import RunInfo, Store, StoreError
from ctda.store.config import Target
from ctda.whatif import optimisations
from ctda.whatif.scenario import Scenario, run
from ctda.whatif.select import Override

SNAPSHOT_KEY = "snapshot"
#: loaded analyses kept per process (a UI serves a few runs; each can be GBs at 1e7 events)
CACHE_SIZE = 4
_CACHE: OrderedDict[tuple[str, str, int], Analysis] = OrderedDict()


@dataclass
class StoredRun:
    """One complete run in one store."""

    db: str | Target | None
    info: RunInfo

    @property
    def name(self) -> str:
        return self.info.name

    def _store(self, write: bool = False) -> Store:
        return open_store(self.db, read_only=not write)

    def query_rows(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a read-only query: a named query or Cypher text; ``$run`` is this run."""
        with self._store() as s:
            if not loader.looks_named(cypher) and loader.is_write(cypher, s):
                raise StoreError("a what-if selection must be a read-only query")
            text, bound = loader.prepare(cypher, params, s.dialect, run=self.name)
            return s.query(text, bound, limits=QueryLimits.from_env()).records()

    def scenarios(self, overrides: bool = True) -> list[dict[str, Any]]:
        """Stored scenarios of this run (name, overrides, predicted totals); without
        ``overrides``, each override as its label, factor and event count only (what a
        listing shows: a selection's event ids are MBs at 1M events)."""
        with self._store() as s:
            return [_decode(r, overrides) for r in s.scenarios(self.info.id, overrides=overrides)]

    def save_scenario(self, sc: Scenario) -> None:
        st = sc.step_times()
        full = [_override_json(o) for o in sc.overrides]
        record = {
            "name": sc.name,
            # the overrides go whole to the Scenario's ``overrides_json`` only, and the
            # path's edge ids to ``path_packed``: the record stays small to list
            "overrides": [_override_summary(o) for o in full],
            "apply": sc.applied,
            "assumptions": sc.assumptions,
            "base_ns": int(st.base_ns.sum()),
            "predicted_ns": int(st.predicted_ns.sum()),
            "step_ns": [int(x) for x in st.predicted_ns],
        }
        path = sc.analysis.charges.edge.to_numpy().astype("int64")
        with self._store(write=True) as s:
            s.save_scenario(self.info.id, sc.name, json.dumps(record), path=path, overrides=json.dumps(full))

    def delete_scenario(self, name: str) -> bool:
        with self._store(write=True) as s:
            return bool(s.delete_scenario(self.info.id, name))

    def saved(self, name: str) -> tuple[list[Override], list[str]] | None:
        """Stored scenario ``name`` as saved: its overrides and named optimisations."""
        with self._store() as s:
            rows = s.scenarios(self.info.id, name=name)
        if not rows:
            return None
        rec = _decode(rows[0])
        return [_override_from(o) for o in rec["overrides"]], [str(x) for x in rec.get("apply", [])]

    def load_scenario(self, a: Analysis, name: str) -> Scenario | None:
        got = self.saved(name)
        if got is None:
            return None
        overrides, applied = got
        return run(a, overrides, name=name, effects=optimisations.apply(a, applied))


def _override_json(o: Override) -> dict[str, Any]:
    return {
        "label": o.label,
        "events": np.asarray(o.events, dtype=np.int64).tolist(),
        "factor": o.factor,
        "dur_ns": None if o.dur_ns is None else np.asarray(o.dur_ns, dtype=np.int64).tolist(),
    }


def _override_from(d: dict[str, Any]) -> Override:
    dur = d.get("dur_ns")
    return Override(
        label=str(d["label"]),
        events=np.asarray(d["events"], dtype=np.int64),
        factor=d.get("factor"),
        dur_ns=None if dur is None else np.asarray(dur, dtype=np.int64),
    )


def _override_summary(o: dict[str, Any]) -> dict[str, Any]:
    return {"label": o["label"], "factor": o["factor"], "n_events": len(o["events"])}


def _decode(r: dict[str, Any], overrides: bool = True) -> dict[str, Any]:
    """A stored scenario's record as its writer saved it; with ``overrides``, whole
    overrides (from ``overrides_json`` where the record keeps only their summaries)."""
    rec = dict(json.loads(r["data"])) if isinstance(r.get("data"), str) and r["data"] else dict(r)
    listed = rec.get("overrides") or []
    if overrides and any("events" not in o for o in listed) and r.get("overrides_json"):
        rec["overrides"] = json.loads(r["overrides_json"])
    return rec


def open_run(name: str, db: str | Target | None) -> tuple[Analysis, StoredRun]:
    """The Analysis of stored run ``name`` (cached per process) and its handle."""
    with open_store(db, read_only=True) as s:
        info = s.find_run(name)
        if info is None:
            have = ", ".join(r.name for r in s.runs()) or "none"
            raise StoreError(f"no run {name!r} in {s.location} (runs: {have}); ingest the trace first")
        key = (s.location, info.sha256 + info.options_key, info.id)
        if key in _CACHE:
            _CACHE.move_to_end(key)
        else:
            blob = s.get_blob(info.id, SNAPSHOT_KEY)
            if blob is None:
                raise StoreError(f"run {name!r} has no analysis snapshot; re-ingest it with --force")
            _CACHE[key] = snapshot.load(blob)
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
    return _CACHE[key], StoredRun(db, info)
