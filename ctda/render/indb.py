"""Render an in-database what-if (table or JSON)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

from ctda.render.analyze import _table, ms
from ctda.whatif.indb import InDbResult


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


def render_indb(r: InDbResult, console: Console, fmt: str, top: int) -> None:
    d = indb_dict(r, top)
    if fmt == "json":
        console.print_json(json.dumps(d, default=int))
        return
    console.print(
        Text.assemble(
            ("what-if (in the database) ", "bold"),
            (r.name, "cyan"),
            f": total {ms(d['base_ns'])} ms -> ",
            (f"{ms(d['predicted_ns'])} ms", "bold green" if d["delta_ns"] < 0 else "bold red"),
            f" ({d['delta_ns'] / max(d['base_ns'], 1):+.1%})",
        )
    )
    console.print(
        _table(
            "Per window",
            r.steps,
            [
                ("label", "window", "str"),
                ("base_ns", "base ms", "ms"),
                ("predicted_ns", "predicted ms", "ms"),
                ("delta_ns", "delta ms", "ms"),
            ],
        )
    )
    console.print(
        _table(
            "Critical path after the change",
            r.hotspots(top),
            [
                ("name", "name", "str"),
                ("class", "class", "str"),
                ("cp_ns", "CP ms", "ms"),
                ("cp_share", "% of CP", "pct"),
            ],
        )
    )
