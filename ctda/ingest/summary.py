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
from ctda.ingest.kinds import GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

#: host calls that block the calling thread until the device (or a stream/event) catches up
BLOCKING_CALLS = frozenset(
    f"{api}{call}"
    for api in ("cuda", "hip")
    for call in ("DeviceSynchronize", "StreamSynchronize", "EventSynchronize", "StreamWaitEvent", "Memcpy")
)
_NCCL = re.compile(r"nccl|rccl", re.IGNORECASE)
#: CPU-side collectives of any backend (gloo, hccl, ... included)
_COLLECTIVE = re.compile(r"^(c10d::|record_param_comms$|(nccl|rccl|gloo|hccl|mpi|ucc):)")
#: host events that are operators (python_function frames such as torch/cuda/nccl.py are not)
_OPS = frozenset({Kind.CPU_OP, Kind.USER_ANNOTATION})
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
    collective_ops: dict[str, int]  # c10d::*, record_param_comms, nccl:/gloo:/hccl:* ops
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
    by_lane = _rows_by_lane(table)
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
        cpu_threads=_threads(table, top, by_lane),
        gpu_streams=_streams(table, top, by_lane),
        steps=_steps(table, start),
        sync=_sync(table),
        nccl_kernels=_named(table, kind == Kind.KERNEL, _NCCL),
        nccl_cpu_ops=_named(table, in_kinds(kind, _OPS), _NCCL),
        collective_ops=_named(table, in_kinds(kind, _OPS), _COLLECTIVE),
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
    cats, phs = table.strings("cat"), table.strings("ph")
    # one code per (category, phase or "complete"), counted in one pass
    phase = np.where(x, 0, table.col("ph").astype(np.int64) + 1)
    counts = np.bincount(table.col("cat").astype(np.int64) * (len(phs) + 1) + phase)
    out: Counter[str] = Counter()
    for code in np.flatnonzero(counts).tolist():
        c, p = divmod(code, len(phs) + 1)
        out[cats[c] if p == 0 else f"{cats[c] or '-'} [{phs[p - 1]}]"] += int(counts[code])
    return dict(out.most_common())


def _rows_by_lane(table: EventTable) -> dict[int, npt.NDArray[np.int64]]:
    """Rows of each lane, from one sort (not one scan of the table per lane)."""
    lane = table.col("lane")
    order = np.argsort(lane, kind="stable")
    lanes, starts = np.unique(lane[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    return {int(ln): order[bounds[i] : bounds[i + 1]] for i, ln in enumerate(lanes.tolist()) if ln >= 0}


def _top(
    codes: npt.NDArray[np.integer], weights: npt.NDArray[np.int64] | None, top: int
) -> list[tuple[int, int]]:
    """The ``top`` most frequent (or heaviest) name codes, with their counts (or weights)."""
    totals = np.bincount(codes, weights=weights)
    best = np.argsort(-totals, kind="stable")[:top]
    return [(int(c), int(totals[c])) for c in best if totals[c] > 0]


def _threads(table: EventTable, top: int, by_lane: dict[int, npt.NDArray[np.int64]]) -> list[ThreadSummary]:
    lanes, names = table.lanes, table.strings("name")
    depth, ts, dur = table.col("depth"), table.col("ts_ns"), np.maximum(table.col("dur_ns"), 0)
    name = table.col("name")
    out = []
    for row in lanes[~lanes.is_gpu.astype(bool)].itertuples():
        rows = by_lane.get(int(row.lane), np.zeros(0, dtype=np.int64))
        tops = rows[depth[rows] == 0]
        out.append(
            ThreadSummary(
                pid=str(row.pid),
                tid=str(row.tid),
                name=str(row.thread_name),
                n_events=len(rows),
                busy_ms=_covered(ts[tops], ts[tops] + dur[tops]) / NS_PER_MS,
                top_names=[(names[c], n) for c, n in _top(name[rows], None, top)],
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


def _streams(table: EventTable, top: int, by_lane: dict[int, npt.NDArray[np.int64]]) -> list[StreamSummary]:
    lanes, kind, name, names = table.lanes, table.col("kind"), table.col("name"), table.strings("name")
    dur = np.maximum(table.col("dur_ns"), 0)
    out = []
    for row in lanes[lanes.is_gpu.astype(bool)].itertuples():
        rows = by_lane.get(int(row.lane), np.zeros(0, dtype=np.int64))
        k = kind[rows]
        work = rows[in_kinds(k, GPU_WORK_KINDS)]
        out.append(
            StreamSummary(
                device=_maybe(row.device),
                stream=_maybe(row.stream),
                n_kernels=int(np.sum(k == Kind.KERNEL)),
                n_memcpy=int(np.sum(k == Kind.MEMCPY)),
                n_memset=int(np.sum(k == Kind.MEMSET)),
                n_sync=int(np.sum(k == Kind.SYNC)),
                busy_ms=float(dur[work].sum()) / NS_PER_MS,
                top_names=[(names[c], ns / NS_PER_MS) for c, ns in _top(name[work], dur[work], top)],
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
