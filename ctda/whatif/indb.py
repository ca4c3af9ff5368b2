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
from ctda.whatif.select import Override

#: one row per stretch of each window's re-timed path, with the event it is charged to
PATH_QUERY = """
MATCH (r:Run {id: $run_id, status: 'complete'})
CALL ctda.replay(r.id, $factors, {property: $property})
YIELD window, label, step, baseNs, predictedNs, edges, names, waits, charges, classes
UNWIND CASE WHEN size(edges) = 0 THEN [-1] ELSE range(0, size(edges) - 1) END AS pos
RETURN window, label, step, baseNs AS base_ns, predictedNs AS predicted_ns, pos, edges[pos] AS edge,
       CASE WHEN waits[pos] THEN '(' + classes[pos] + ')' ELSE names[pos] END AS name,
       classes[pos] AS class, waits[pos] AS wait, charges[pos] AS ns
"""  # the procedure yields windows in order and each path in order: no sort buffer needed


@dataclass
class InDbResult:
    """What the database computed for one scenario."""

    name: str
    overrides: list[Override]
    steps: pd.DataFrame  # window, label, step, base_ns, predicted_ns, delta_ns
    path: pd.DataFrame  # window, pos, edge, name, class, wait, ns

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
                old = float(durations[int(e)])
                out[str(int(e))] = float(new) / old if old > 0 else 1.0
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
    if getattr(store, "dialect", "") != "neo4j":
        raise StoreError(
            f"{store.location}: the embedded store cannot compute longest paths in Cypher; "
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
    df = pd.DataFrame(rows)
    if df.empty:
        raise StoreError(f"run id {run_id} has no windows to re-time")
    steps = (
        df.groupby("window", as_index=False)
        .agg(
            label=("label", "first"),
            step=("step", "first"),
            base_ns=("base_ns", "first"),
            predicted_ns=("predicted_ns", "first"),
        )
        .sort_values("window")
        .reset_index(drop=True)
    )
    steps["delta_ns"] = steps.predicted_ns - steps.base_ns
    path = df[df.pos >= 0][["window", "pos", "edge", "name", "class", "wait", "ns"]].reset_index(drop=True)
    return InDbResult(name, overrides, steps, path)


def save(store: Store, run_id: int, result: InDbResult) -> None:
    """Store the result as a scenario the CLI and UI list like any other."""
    store.save_scenario(run_id, result.name, json.dumps(result.record()))
