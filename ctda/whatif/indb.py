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
import numpy.typing as npt
import pandas as pd

from ctda.analysis.attribution import edge_classes
from ctda.analysis.classify import CLASSES
from ctda.analysis.engine import Analysis
from ctda.analysis.tables import Names
from ctda.store.base import Store, StoreError
from ctda.whatif.select import Override, dur_factor

I64 = npt.NDArray[np.int64]

#: one row per window: its re-timed bounds and its path as two packed arrays (edge ids, charged
#: ns); names and classes are rebuilt here from the run's analysis, so only numbers cross Bolt
PATH_QUERY = """
MATCH (r:Run {id: $run_id, status: 'complete'})
CALL ctda.replayArrays(r.id, $factors, {property: $property})
YIELD window, label, step, baseNs, predictedNs, edges, charges
RETURN window, label, step, baseNs AS base_ns, predictedNs AS predicted_ns, edges, charges
"""


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
    a: Analysis,
    name: str = "what-if",
    property_name: str = "factor",
) -> InDbResult:
    """Re-time run ``run_id`` in ``store`` under ``overrides`` with the database's procedure;
    ``a`` is the run's analysis (as stored), which names and classes the returned path."""
    if "ctda.replayarrays" not in store.read_procedures:  # the backend has no such procedure
        raise StoreError(
            f"{store.location}: the {store.title} store cannot compute longest paths in Cypher; "
            "drop --in-db (the what-if is then computed in Python, with the same results)"
        )
    try:
        rows = store.query(
            PATH_QUERY,
            {
                "run_id": run_id,
                "factors": factors(overrides, a.nodes.end - a.nodes.ts),
                "property": property_name,
            },
        ).records()
    except StoreError as exc:
        if "ctda.replay" in str(exc) and ("not found" in str(exc) or "no procedure" in str(exc).lower()):
            raise StoreError(
                f"{store.location} has no ctda.replayArrays procedure: install this ctda's Neo4j plugin "
                "(see 'Team setup with Neo4j' in the README)"
            ) from None
        raise
    if not rows:
        raise StoreError(f"run id {run_id} has no windows to re-time")
    rows = sorted(rows, key=lambda r: r["window"])
    steps = pd.DataFrame(
        {k: [r[k] for r in rows] for k in ("window", "label", "step", "base_ns", "predicted_ns")}
    )
    steps["delta_ns"] = steps.predicted_ns - steps.base_ns
    edges = [np.frombuffer(r["edges"], dtype="<i4") for r in rows]
    charges = [np.frombuffer(r["charges"], dtype="<i8") for r in rows]
    sizes = np.array([len(e) for e in edges], dtype=np.int64)
    if any(len(c) != len(e) for e, c in zip(edges, charges)):
        raise StoreError(f"run id {run_id}: the procedure returned paths of mismatched lengths")
    windows = np.array([r["window"] for r in rows], dtype=np.int64)
    path = path_frame(a, windows, sizes, np.concatenate(edges).astype(np.int64), np.concatenate(charges))
    return InDbResult(name, overrides, steps, path)


def path_frame(a: Analysis, windows: I64, sizes: I64, edges: I64, ns: I64) -> pd.DataFrame:
    """The re-timed path's rows (window, pos, edge, name, class, wait, ns) from each window's
    edge ids and charges (``sizes[k]`` of them for ``windows[k]``), named and classed as the
    procedure's ``ctda.replay`` lists them: a stretch of an event's own time by the event's
    display name and class, a wait by its class, named ``(class)``."""
    g = a.graph
    if len(edges) and (edges.min() < 0 or edges.max() >= g.n_edges):
        raise StoreError("the stored run's edges differ from its analysis: re-ingest the run")
    owner = g.owner[edges]
    wait = owner < 0
    code = edge_classes(g, edges, owner, a.event_cls)
    cls = np.asarray(CLASSES, dtype=object)
    wait_names = np.asarray([f"({c})" for c in CLASSES], dtype=object)
    names = np.where(wait, wait_names[code], Names(a).of(np.maximum(owner, 0)))
    return pd.DataFrame(
        {
            "window": np.repeat(windows, sizes),
            "pos": np.arange(len(edges)) - np.repeat(np.cumsum(sizes) - sizes, sizes),
            "edge": edges,
            "name": names,
            "class": cls[code],
            "wait": wait,
            "ns": ns.astype(np.int64),
        }
    )


def save(store: Store, run_id: int, result: InDbResult) -> None:
    """Store the result as a scenario the CLI and UI list like any other."""
    store.save_scenario(run_id, result.name, json.dumps(result.record()))
