"""What a trace contains, at a glance: the analysis behind ``ctda inspect``.

:func:`summarize` reduces an :class:`EventTable` to plain data (a :class:`TraceSummary`);
rendering lives in :mod:`ctda.render.inspect`, so the same facts feed the table view,
``--format json`` and tests.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.ingest.derive import steps as find_steps
from ctda.ingest.kinds import CPU_KINDS, GPU_KINDS, GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

#: host calls that block the calling thread until the device (or a stream/event) catches up
BLOCKING_CALLS = frozenset(
    f"{api}{call}"
    for api in ("cuda", "hip")
    for call in ("DeviceSynchronize", "StreamSynchronize", "EventSynchronize", "StreamWaitEvent", "Memcpy")
)
_NCCL = re.compile(r"nccl|rccl", re.IGNORECASE)
NS_PER_MS = 1e6


@dataclass
class ThreadSummary:
    """One CPU thread: its events and the names that occur most on it."""

    pid: str
    tid: str
    name: str
    n_events: int
    busy_ms: float  # time covered by its top-level slices
    top_names: list[tuple[str, int]]


@dataclass
class StreamSummary:
    """One GPU stream (device, stream): what ran on it."""

    device: int | None
    stream: int | None
    n_kernels: int
    n_memcpy: int
    n_memset: int
    n_sync: int
    busy_ms: float  # summed duration of kernels, copies and sets
    top_names: list[tuple[str, float]]  # by total duration, ms


@dataclass
class StepSummary:
    """One ``ProfilerStep#N`` span."""

    step: int
    start_ms: float  # from the trace start
    dur_ms: float


@dataclass
class TraceSummary:
    """Everything ``ctda inspect`` shows about one trace."""

    path: str
    n_bytes: int
    n_events: int
    n_complete: int
    n_flows: int
    schema_version: int | None
    bare_list: bool
    devices: list[str]
    rank: int | None
    world_size: int | None
    backend: str | None
    span_ms: float
    events_by_category: dict[str, int]
    cpu_threads: list[ThreadSummary]
    gpu_streams: list[StreamSummary]
    steps: list[StepSummary]
    sync: dict[str, int]
    nccl_kernels: dict[str, int]
    nccl_cpu_ops: dict[str, int]
    warnings: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)


def summarize(table: EventTable, top: int = 3) -> TraceSummary:
    """The facts ``ctda inspect`` shows; ``top`` bounds the per-thread/stream name lists."""
    meta = table.meta
    kind = table.col("kind")
    x = (table.strings("ph") == "X")[table.col("ph")]
    start, end = _span(table, x)
    backend = meta.distributed_info.get("backend")
    return TraceSummary(
        path=meta.path,
        n_bytes=meta.n_bytes,
        n_events=len(table),
        n_complete=int(x.sum()),
        n_flows=int(np.sum(kind == Kind.FLOW)),
        schema_version=meta.schema_version,
        bare_list=meta.bare_list,
        devices=[str(d.get("name", "?")) for d in meta.device_properties],
        rank=meta.rank,
        world_size=meta.world_size,
        backend=backend if isinstance(backend, str) else None,
        span_ms=(end - start) / NS_PER_MS,
        events_by_category=_categories(table, x),
        cpu_threads=_threads(table, top),
        gpu_streams=_streams(table, top),
        steps=_steps(table, start),
        sync=_sync(table),
        nccl_kernels=_named(table, in_kinds(kind, GPU_KINDS), _NCCL),
        nccl_cpu_ops=_named(table, in_kinds(kind, CPU_KINDS), _NCCL),
        warnings=dict(meta.warnings),
    )


def _span(table: EventTable, x: npt.NDArray[np.bool_]) -> tuple[int, int]:
    """First start and last end of the complete events, leaving out the profiler's own span."""
    rows = np.flatnonzero(x & (table.col("kind") != Kind.TRACE_SPAN))
    if not len(rows):
        return 0, 0
    ts, dur = table.col("ts_ns")[rows], np.maximum(table.col("dur_ns")[rows], 0)
    return int(ts.min()), int((ts + dur).max())


def _categories(table: EventTable, x: npt.NDArray[np.bool_]) -> dict[str, int]:
    """Counts by category for complete events, by "category [phase]" for the rest."""
    cat, ph = table.decoded("cat"), table.decoded("ph")
    keys = np.where(x, cat, np.char.add(np.char.add(np.where(cat == "", "-", cat).astype(str), " ["), ph.astype(str)))
    keys = np.char.add(keys.astype(str), np.where(x, "", "]"))
    return dict(Counter(keys.tolist()).most_common())


def _threads(table: EventTable, top: int) -> list[ThreadSummary]:
    lanes, lane = table.lanes, table.col("lane")
    depth, ts, dur = table.col("depth"), table.col("ts_ns"), np.maximum(table.col("dur_ns"), 0)
    out = []
    for row in lanes[~lanes.is_gpu.astype(bool)].itertuples():
        rows = np.flatnonzero(lane == row.lane)
        tops = rows[depth[rows] == 0]
        out.append(
            ThreadSummary(
                pid=str(row.pid),
                tid=str(row.tid),
                name=str(row.thread_name),
                n_events=len(rows),
                busy_ms=_covered(ts[tops], ts[tops] + dur[tops]) / NS_PER_MS,
                top_names=Counter(table.decoded("name", rows).tolist()).most_common(top),
            )
        )
    return out


def _covered(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> int:
    """Length of the union of intervals."""
    if not len(starts):
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    gaps = np.maximum(s[1:] - e[:-1], 0)
    return int(e[-1] - s[0] - gaps.sum())


def _streams(table: EventTable, top: int) -> list[StreamSummary]:
    lanes, lane, kind = table.lanes, table.col("lane"), table.col("kind")
    dur = np.maximum(table.col("dur_ns"), 0)
    out = []
    for row in lanes[lanes.is_gpu.astype(bool)].itertuples():
        rows = np.flatnonzero(lane == row.lane)
        k = kind[rows]
        work = rows[in_kinds(k, GPU_WORK_KINDS)]
        by_name: Counter[str] = Counter()
        for name, d in zip(table.decoded("name", work).tolist(), dur[work].tolist(), strict=True):
            by_name[name] += d
        out.append(
            StreamSummary(
                device=_maybe(row.device),
                stream=_maybe(row.stream),
                n_kernels=int(np.sum(k == Kind.KERNEL)),
                n_memcpy=int(np.sum(k == Kind.MEMCPY)),
                n_memset=int(np.sum(k == Kind.MEMSET)),
                n_sync=int(np.sum(k == Kind.SYNC)),
                busy_ms=float(dur[work].sum()) / NS_PER_MS,
                top_names=[(n, d / NS_PER_MS) for n, d in by_name.most_common(top)],
            )
        )
    return out


def _maybe(value: object) -> int | None:
    number = int(value)  # type: ignore[call-overload]
    return None if number < -(2**62) else number


def _steps(table: EventTable, start: int) -> list[StepSummary]:
    _, frame = find_steps(table.events, table.col("kind"), table.col("lane"), table.col("launcher"))
    return [
        StepSummary(step=int(s), start_ms=(int(t) - start) / NS_PER_MS, dur_ms=int(d) / NS_PER_MS)
        for s, t, d in zip(frame["step"], frame["ts_ns"], frame["dur_ns"], strict=True)
    ]


def _sync(table: EventTable) -> dict[str, int]:
    """GPU-side ``cuda_sync`` records by kind, and blocking host calls by name."""
    kind = table.col("kind")
    out: Counter[str] = Counter()
    sync_rows = np.flatnonzero(kind == Kind.SYNC)
    for what in table.decoded("sync_kind", sync_rows).tolist():
        out[f"cuda_sync: {what or '?'}"] += 1
    host = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
    for name in table.decoded("name", host).tolist():
        if name in BLOCKING_CALLS:
            out[name] += 1
    return dict(out.most_common())


def _named(table: EventTable, mask: npt.NDArray[np.bool_], pattern: re.Pattern[str]) -> dict[str, int]:
    """Counts of the names matching ``pattern`` among the rows in ``mask``."""
    values = table.strings("name")
    matching = np.array([bool(pattern.search(v or "")) for v in values] or [False])
    rows = np.flatnonzero(mask & matching[table.col("name")])
    return dict(Counter(table.decoded("name", rows).tolist()).most_common())
