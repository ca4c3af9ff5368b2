"""Render HTA-compatible results: HTA's path length next to the span it leaves out."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console, Group
from rich.text import Text

from ctda.analysis.hta import HtaResult
from ctda.ingest.table import EventTable
from ctda.render.analyze import _table, ms


def hta_dict(r: HtaResult, table: EventTable, top: int) -> dict[str, Any]:
    names = table.decoded("name", r.nodes.uid)
    per = pd.Series(r.per_event_cp_ns, index=names).groupby(level=0).sum()
    per = per[per > 0].sort_values(ascending=False)
    return {
        "trace": table.meta.path,
        "mode": "hta",
        "critical_path_length_ns": int(r.length_ns),
        "path_span_ns": int(r.span_ns),
        "left_out_ns": int(r.span_ns - r.length_ns),
        "critical_events": len(r.path_events),
        "critical_uids": [int(x) for x in r.path_uids],
        "bound_by_ns": {k: int(v) for k, v in r.bound_by_ns.items()},
        "top": [{"name": str(k), "cp_ns": int(v)} for k, v in per.head(top).items()],
    }


def render_hta(r: HtaResult, table: EventTable, console: Console, fmt: str, top: int) -> None:
    d = hta_dict(r, table, top)
    if fmt == "json":
        console.print_json(json.dumps(d))
        return
    span = max(d["path_span_ns"], 1)
    head = Text.assemble(
        ("HTA-compatible critical path ", "bold"),
        (f"{ms(d['critical_path_length_ns'])} ms", "bold cyan"),
        f" over a span of {ms(d['path_span_ns'])} ms "
        f"({d['critical_path_length_ns'] / span:.1%}; HTA weighs CPU gaps and waits 0), "
        f"{d['critical_events']:,} critical events",
    )
    bound = pd.DataFrame({"class": list(d["bound_by_ns"]), "cp_ns": list(d["bound_by_ns"].values())})
    bound = bound[bound.cp_ns > 0].sort_values("cp_ns", ascending=False)
    tops = pd.DataFrame(d["top"]) if d["top"] else pd.DataFrame({"name": [], "cp_ns": np.zeros(0)})
    console.print(
        Group(
            head,
            _table("HTA bound by", bound, [("class", "class", "str"), ("cp_ns", "ms", "ms")]),
            _table("Top events on HTA's path", tops, [("name", "name", "str"), ("cp_ns", "ms", "ms")]),
            Text("compare: ctda analyze (default mode) gives a path as long as each step", style="dim"),
        )
    )
