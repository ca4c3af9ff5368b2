"""Tiny synthetic Kineto traces with exact, hand-checkable timelines (times in µs)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PID = 100
MAIN, AUX = 1, 2


def cpu(
    name: str, ts: float, dur: float, tid: int = MAIN, cat: str = "cpu_op", **args: Any
) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def runtime(name: str, ts: float, dur: float, corr: int, tid: int = MAIN) -> dict[str, Any]:
    return cpu(name, ts, dur, tid=tid, cat="cuda_runtime", correlation=corr)


def kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr},
    }


def flow(cat: str, fid: int, ph: str, ts: float, tid: int) -> dict[str, Any]:
    ev = {"ph": ph, "id": fid, "pid": PID, "tid": tid, "ts": ts, "cat": cat, "name": cat}
    if ph == "f":
        ev["bp"] = "e"
    return ev


def write(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    doc = {"schemaVersion": 1, "traceEvents": events, **top}
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as fh:  # type: ignore[operator]
        json.dump(doc, fh)
    return path
