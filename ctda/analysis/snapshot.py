"""A self-contained columnar snapshot of an Analysis (events, graph, weights, windows).

Stores keep it next to a run so what-if scenarios re-time the run without re-reading the
trace or the graph database (design: "keep a columnar copy of the graph").
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ctda.analysis import attribution, graph
from ctda.analysis.calibrate import Calibration
from ctda.analysis.classify import event_classes
from ctda.analysis.engine import Analysis, AnalysisOptions, contention, window_ends
from ctda.analysis.nodes import select
from ctda.analysis.propagate import replay
from ctda.analysis.rules.context import RuleContext, RuleOptions
from ctda.analysis.windows import Window
from ctda.ingest.table import EventTable

FORMAT = 1
ARRAYS = ("src", "dst", "etype", "owner", "rule")


def dump(a: Analysis) -> bytes:
    """Serialise ``a`` to bytes (a zip of Parquet, npz and JSON)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "events.parquet"
            a.table.write_parquet(p)
            z.write(p, "events.parquet")
        arrays = io.BytesIO()
        g, c = a.graph, a.calibration
        np.savez_compressed(
            arrays, **{k: getattr(g, k) for k in ARRAYS}, weight=c.weight, binding=c.binding, gap=c.gap
        )
        z.writestr("graph.npz", arrays.getvalue())
        opts = asdict(a.options)
        meta = {
            "format": FORMAT,
            "rule_names": g.rule_names,
            "dropped": g.dropped,
            "options": opts,
            "windows": [asdict(w) for w in a.windows],
        }
        z.writestr("meta.json", json.dumps(meta))
    return out.getvalue()


def load(blob: bytes) -> Analysis:
    """Rebuild an Analysis from :func:`dump` output (no rules run, no trace read)."""
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        meta = json.loads(z.read("meta.json"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"snapshot format {meta.get('format')} is not supported")
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "events.parquet"
            p.write_bytes(z.read("events.parquet"))
            table = EventTable.read_parquet(p)
        arr = np.load(io.BytesIO(z.read("graph.npz")))
    nodes = select(table)
    g = graph.from_arrays(
        nodes,
        arr["src"],
        arr["dst"],
        arr["etype"],
        arr["owner"],
        arr["rule"],
        rule_names=list(meta["rule_names"]),
        dropped=dict(meta["dropped"]),
    )
    cal = Calibration(weight=arr["weight"], binding=arr["binding"], gap=arr["gap"])
    opts = meta["options"]
    options = AnalysisOptions(
        windows=opts["windows"],
        cross_thread=tuple(opts["cross_thread"]),
        mode=opts["mode"],
        rule_options=RuleOptions(**opts["rule_options"]),
    )
    windows = [Window(**w) for w in meta["windows"]]
    timing = replay(g, cal.weight, cal.binding, int(nodes.time[nodes.source]), window_ends(windows))
    ctx = RuleContext(table, nodes, options.rule_options)
    cls = event_classes(ctx)
    charges = attribution.window_paths(g, timing, windows, cls)
    return Analysis(table, options, nodes, g, cal, timing, windows, cls, charges, contention(ctx, g, options))
