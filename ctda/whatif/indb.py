"""What-if inside the database: re-time a stored run with Neo4j's ``ctda.replay`` procedure.

The procedure (``neo4j/procedures``) replays the run's stored dependency graph with its
calibrated weights, scaled by per-event factors, and returns each window's predicted
duration and critical path. It gives the same step times and paths as
:func:`ctda.whatif.scenario.run` when the run has no GIL-contention model (the contention
re-weighting is computed in Python only). The embedded store has no procedures: what-ifs
on it are computed in Python (see docs/in-database.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ctda.store.base import Store, StoreError
from ctda.whatif.select import Override, dur_factor

#: one row per stretch of each window's re-timed path, with the event it is charged to
PATH_QUERY = """
MATCH (r:Run {id: $run_id, status: 'complete'})
CALL ctda.replay(r.id, $factors, {property: $property})
YIELD window, label, step, baseNs, predictedNs, edges, names, waits, charges, classes
RETURN window, label, step, baseNs AS base_ns, predictedNs AS predicted_ns, edges, names, waits, charges,
       classes
"""  # one row per window, its path as lists: far fewer records than one per stretch


@dataclass
class InDbResult:
    """What the database computed for one scenario."""

    name: str
    overrides: list[Override]
    steps: pd.DataFrame  # window, label, step, base_ns, predicted_ns, delta_ns
    path: pd.DataFrame  # window, pos, edge, name, class, wait, ns
    #: the run has a GIL/CPU contention model, which the procedure does not apply
    contention_ignored: bool = False

    def hotspots(self, top: int = 10) -> pd.DataFrame:
        """Time on the re-timed paths per name (waits per class), largest first."""
        total = max(int(self.path.ns.sum()), 1)
        df = self.path.groupby(["name", "class"], as_index=False).agg(
            cp_ns=("ns", "sum"), count=("ns", "size")
        )
        df["cp_share"] = df.cp_ns / total
        return df.sort_values(["cp_ns", "name"], ascending=[False, True]).head(top).reset_index(drop=True)

    def record(self) -> dict[str, Any]:
        """The stored-scenario record, in the format :class:`ctda.store.runs.StoredRun` writes."""
        return {
            "name": self.name,
            "overrides": [
                {
                    "label": o.label,
                    "events": [int(x) for x in o.events],
                    "factor": o.factor,
                    "dur_ns": None if o.dur_ns is None else [int(x) for x in o.dur_ns],
                }
                for o in self.overrides
            ],
            "base_ns": int(self.steps.base_ns.sum()),
            "predicted_ns": int(self.steps.predicted_ns.sum()),
            "step_ns": [int(x) for x in self.steps.predicted_ns],
            "path": [int(x) for x in self.path.edge.dropna()],
            "computed_in": "database",
        }


def factors(overrides: list[Override], durations: np.ndarray) -> dict[str, float]:
    """The procedure's factor map (event idx as text -> factor); later overrides win.

    Absolute durations become the ratio to the observed duration, as in Python's engine.
    """
    out: dict[str, float] = {}
    for o in overrides:
        if o.factor is not None:
            out.update({str(int(e)): float(o.factor) for e in o.events})
        elif o.dur_ns is not None:
            for e, new in zip(o.events, o.dur_ns):
                out[str(int(e))] = dur_factor(float(new), float(durations[int(e)]), o.label)
    return out


def replay(
    store: Store,
    run_id: int,
    overrides: list[Override],
    durations: np.ndarray,
    name: str = "what-if",
    property_name: str = "factor",
) -> InDbResult:
    """Re-time run ``run_id`` in ``store`` under ``overrides`` with the database's procedure."""
    if "ctda.replay" not in store.read_procedures:  # the backend has no such procedure
        raise StoreError(
            f"{store.location}: the {store.title} store cannot compute longest paths in Cypher; "
            "drop --in-db (the what-if is then computed in Python, with the same results)"
        )
    try:
        rows = store.query(
            PATH_QUERY,
            {"run_id": run_id, "factors": factors(overrides, durations), "property": property_name},
        ).records()
    except StoreError as exc:
        if "ctda.replay" in str(exc) and ("not found" in str(exc) or "no procedure" in str(exc).lower()):
            raise StoreError(
                f"{store.location} has no ctda.replay procedure: install ctda's Neo4j plugin "
                "(see 'Team setup with Neo4j' in the README)"
            ) from None
        raise
    if not rows:
        raise StoreError(f"run id {run_id} has no windows to re-time")
    steps = pd.DataFrame(
        {k: [r[k] for r in rows] for k in ("window", "label", "step", "base_ns", "predicted_ns")}
    ).sort_values("window", kind="stable", ignore_index=True)
    steps["delta_ns"] = steps.predicted_ns - steps.base_ns
    sizes = [len(r["edges"]) for r in rows]

    def flat(key: str, dtype: Any) -> np.ndarray:
        parts = [np.asarray(r[key], dtype=dtype) for r in rows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    waits = flat("waits", bool)
    classes = pd.Series(flat("classes", object), dtype=object)
    path = pd.DataFrame(
        {
            "window": np.repeat(np.asarray([r["window"] for r in rows], dtype=np.int64), sizes),
            "pos": np.concatenate([np.arange(k) for k in sizes]) if sizes else np.zeros(0, np.int64),
            "edge": flat("edges", np.int64),
            "name": np.where(waits, ("(" + classes + ")").to_numpy(), flat("names", object)),
            "class": classes.to_numpy(),
            "wait": waits,
            "ns": flat("charges", np.int64),
        }
    ).sort_values(["window", "pos"], kind="stable", ignore_index=True)
    return InDbResult(name, overrides, steps, path)


def save(store: Store, run_id: int, result: InDbResult) -> None:
    """Store the result as a scenario the CLI and UI list like any other."""
    store.save_scenario(run_id, result.name, json.dumps(result.record()))
