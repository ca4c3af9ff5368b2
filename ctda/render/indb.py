"""The document of an in-database what-if (see :mod:`ctda.render.output` for the formats)."""

from __future__ import annotations

from typing import Any

from ctda.render.output import Col, Document, Section, clip
from ctda.render.whatif import headline
from ctda.whatif.indb import InDbResult

STEP_COLS = [
    Col("label", "window"),
    Col("base_ns", "base ms", "ms"),
    Col("predicted_ns", "predicted ms", "ms"),
    Col("delta_ns", "delta ms", "ms"),
]
PATH_COLS = [
    Col("name", "name"),
    Col("class", "class"),
    Col("cp_ns", "CP ms", "ms"),
    Col("cp_share", "% of CP", "pct"),
]


def indb_dict(r: InDbResult, top: int) -> dict[str, Any]:
    base, pred = int(r.steps.base_ns.sum()), int(r.steps.predicted_ns.sum())
    return {
        "scenario": r.name,
        "computed_in": "database",
        "overrides": [o.to_json() for o in r.overrides],
        "base_ns": base,
        "predicted_ns": pred,
        "delta_ns": pred - base,
        "steps": r.steps.to_dict(orient="records"),
        "hotspots": r.hotspots(top).to_dict(orient="records"),
    }


def indb_doc(r: InDbResult, top: int) -> Document:
    """Predicted step times and the re-timed path's hotspots, as the database computed them."""
    d = indb_dict(r, top)
    head = headline("what-if (in the database) ", r.name, d)
    return Document(
        f"What-if {clip(r.name)} (in the database)",
        [
            head,
            Section.of("steps", "Per window", r.steps, STEP_COLS),
            Section.of("hotspots", "Critical path after the change", r.hotspots(top), PATH_COLS),
        ],
        data=d,
        source=r.name,
    )
