"""Render HTA-compatible results: HTA's path length next to the span it leaves out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from rich.text import Text

from ctda.ingest.table import EventTable
from ctda.render.analyze import ms
from ctda.render.output import Col, Document, Section

if TYPE_CHECKING:  # HTA's package only where its results are rendered (``analyze`` imports this)
    from ctda.analysis.hta import HtaResult


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


def hta_doc(r: HtaResult, table: EventTable, top: int) -> Document:
    """HTA's path length, the span it covers, its bound-by classes and top events."""
    d = hta_dict(r, table, top)
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
    return Document(
        f"HTA-compatible critical path of {d['trace']}",
        [
            head,
            Section.of("bound_by", "HTA bound by", bound, [Col("class", "class"), Col("cp_ns", "ms", "ms")]),
            Section.of(
                "top", "Top events on HTA's path", tops, [Col("name", "name"), Col("cp_ns", "ms", "ms")]
            ),
            Text("compare: ctda analyze (default mode) gives a path as long as each step", style="dim"),
        ],
        data=d,
        source=str(d["trace"]),
    )
