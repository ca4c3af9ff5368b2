"""Export a (re-timed) timeline as a Chrome/Perfetto trace with the critical path drawn.

Critical events carry ``args.critical = 1`` and consecutive events on a window's path are
joined by ``critical_path`` flow events, the same convention HTA uses, so the file opens
in Perfetto and chrome://tracing and reads back with ctda's own reader.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ctda.analysis.engine import Analysis
from ctda.ingest.outfile import atomic_output, check_output


def _us(ns: np.ndarray) -> np.ndarray:
    return ns / 1000.0


class _Args(msgspec.Struct, omit_defaults=True):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    device: int | None = None
    stream: int | None = None
    critical: int | None = None


class _Slice(msgspec.Struct):
    ph: str
    cat: str
    name: str
    pid: int | str
    tid: int | str
    ts: float
    dur: float
    args: _Args


def _opt(values: np.ndarray, keep: np.ndarray) -> list[int | None]:
    """Column as Python ints with None where absent (for omit_defaults)."""
    return pd.Series(values).where(keep, None).astype(object).tolist()


def timeline_events(a: Analysis, name: str) -> list[Any]:
    """Trace events for every analysed event at its (re-timed) times, plus metadata.

    Columns become msgspec structs through C-level ``map`` calls: no per-event Python
    branches, so a million events export in about a second.
    """
    n, t = a.nodes, a.timing.time
    start = t[0 : 2 * n.n : 2]
    end = t[1 : 2 * n.n : 2]
    pids = np.array([_num(x) for x in a.table.strings("pid")] or [0], dtype=object)[a.table.col("pid")[n.uid]]
    tids = np.array([_num(x) for x in a.table.strings("tid")] or [0], dtype=object)[a.table.col("tid")[n.uid]]
    corr = a.table.col("correlation")[n.uid]
    ext = a.table.col("external_id")[n.uid]
    on = np.zeros(n.n, dtype=bool)
    ev = a.charges.event.to_numpy()
    on[ev[ev >= 0]] = True
    args = list(
        map(
            _Args,
            _opt(corr, corr >= 0),
            _opt(ext, ext >= 0),
            _opt(a.table.col("device")[n.uid], n.is_gpu),
            _opt(a.table.col("stream")[n.uid], n.is_gpu),
            _opt(np.ones(n.n, dtype=np.int64), on),
        )
    )
    out: list[Any] = list(
        map(
            _Slice,
            ["X"] * n.n,
            a.table.decoded("cat", n.uid).tolist(),
            a.table.decoded("name", n.uid).tolist(),
            pids.tolist(),
            tids.tolist(),
            _us(start).tolist(),
            _us(end - start).tolist(),
            args,
        )
    )
    out += _path_flows(a, _us(start), pids, tids)
    out.append(
        {"ph": "M", "name": "process_name", "pid": "ctda", "tid": 0, "args": {"name": f"ctda: {name}"}}
    )
    return out


def _num(label: object) -> int | str:
    text = str(label)
    return int(text) if text.lstrip("-").isdigit() else text


def _path_flows(a: Analysis, ts_us: np.ndarray, pids: np.ndarray, tids: np.ndarray) -> list[dict[str, Any]]:
    """s/f flow pairs between consecutive distinct events along each window's path."""
    # one pair per path hop, far fewer than events, so plain dicts are fine here
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
                    "pid": pids[e],
                    "tid": tids[e],
                    "ts": float(ts_us[e]),
                }
                if ph == "f":
                    ev["bp"] = "e"
                flows.append(ev)
            fid += 1
    return flows


def write_perfetto(a: Analysis, out: Path, name: str = "baseline") -> int:
    """Write the timeline of ``a`` to ``out`` (.json or .json.gz); returns the event count.

    ``out`` is checked first (:func:`ctda.ingest.outfile.check_output`: never the trace
    ``a`` was read from, a directory, a device, a FIFO or a symlink) and written atomically.
    """
    check_output(out, [a.table.meta.path] if a.table.meta.path else [])
    events = timeline_events(a, name)
    doc = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms", "traceName": f"ctda {name}"}
    if a.table.meta.distributed_info:
        doc["distributedInfo"] = a.table.meta.distributed_info
    data = msgspec.json.encode(doc)
    with atomic_output(out, compress=out.suffix == ".gz", level=5) as fh:
        fh.write(data)
    return len(events)
