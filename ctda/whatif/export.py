"""Export a (re-timed) timeline as a Chrome/Perfetto trace with the critical path drawn.

Critical events carry ``args.critical = 1`` and consecutive events on a window's path are
joined by ``critical_path`` flow events, the same convention HTA uses, so the file opens
in Perfetto and chrome://tracing and reads back with ctda's own reader.
"""

from __future__ import annotations

import gzip
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ctda.analysis.engine import Analysis


def _us(ns: np.ndarray) -> np.ndarray:
    return ns / 1000.0


def timeline_events(a: Analysis, name: str) -> list[dict[str, Any]]:
    """Trace events for every analysed event at its (re-timed) times, plus metadata."""
    n, t = a.nodes, a.timing.time
    start = t[0 : 2 * n.n : 2]
    end = t[1 : 2 * n.n : 2]
    names = a.table.decoded("name", n.uid)
    cats = a.table.decoded("cat", n.uid)
    pids = a.table.decoded("pid", n.uid)
    tids = a.table.decoded("tid", n.uid)
    corr = a.table.col("correlation")[n.uid]
    ext = a.table.col("external_id")[n.uid]
    dev = a.table.col("device")[n.uid]
    strm = a.table.col("stream")[n.uid]
    on = np.zeros(n.n, dtype=bool)
    ev = a.charges.event.to_numpy()
    on[ev[ev >= 0]] = True
    out: list[dict[str, Any]] = []
    ts_us, dur_us = _us(start), _us(end - start)
    for i in range(n.n):
        args: dict[str, Any] = {}
        if corr[i] >= 0:
            args["correlation"] = int(corr[i])
        if ext[i] >= 0:
            args["External id"] = int(ext[i])
        if n.is_gpu[i]:
            args["device"], args["stream"] = int(dev[i]), int(strm[i])
        if on[i]:
            args["critical"] = 1
        out.append(
            {
                "ph": "X",
                "cat": str(cats[i]),
                "name": str(names[i]),
                "pid": _num(pids[i]),
                "tid": _num(tids[i]),
                "ts": float(ts_us[i]),
                "dur": float(dur_us[i]),
                "args": args,
            }
        )
    out += _path_flows(a, ts_us, pids, tids)
    out.append(
        {"ph": "M", "name": "process_name", "pid": "ctda", "tid": 0, "args": {"name": f"ctda: {name}"}}
    )
    return out


def _num(label: object) -> int | str:
    text = str(label)
    return int(text) if text.lstrip("-").isdigit() else text


def _path_flows(a: Analysis, ts_us: np.ndarray, pids: np.ndarray, tids: np.ndarray) -> list[dict[str, Any]]:
    """s/f flow pairs between consecutive distinct events along each window's path."""
    flows: list[dict[str, Any]] = []
    fid = 1
    for _, c in a.charges.groupby("window", sort=True):
        seq = [int(e) for e in c.event.to_numpy() if e >= 0]
        chain = [e for k, e in enumerate(seq) if k == 0 or e != seq[k - 1]]
        for u, v in pairwise(chain):
            for ph, e in (("s", u), ("f", v)):
                ev = {
                    "ph": ph,
                    "id": fid,
                    "cat": "critical_path",
                    "name": "critical_path",
                    "pid": _num(pids[e]),
                    "tid": _num(tids[e]),
                    "ts": float(ts_us[e]),
                }
                if ph == "f":
                    ev["bp"] = "e"
                flows.append(ev)
            fid += 1
    return flows


def write_perfetto(a: Analysis, out: Path, name: str = "baseline") -> int:
    """Write the timeline of ``a`` to ``out`` (.json or .json.gz); returns the event count."""
    events = timeline_events(a, name)
    doc = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms", "traceName": f"ctda {name}"}
    if a.table.meta.distributed_info:
        doc["distributedInfo"] = a.table.meta.distributed_info
    data = msgspec.json.encode(doc)
    if out.suffix == ".gz":
        with gzip.open(out, "wb", compresslevel=5) as fh:
            fh.write(data)
    else:
        out.write_bytes(data)
    return len(events)
