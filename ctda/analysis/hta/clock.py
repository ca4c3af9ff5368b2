"""The trace as HTA's loader leaves it (rounded times, dropped last step) and HTA's window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.hta.model import HtaOptions
from ctda.analysis.nodes import Nodes
from ctda.ingest.columns import NA
from ctda.ingest.kinds import GPU_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

US = 1_000  # ns per microsecond


@dataclass
class Clock:
    """The trace as HTA's loader leaves it: which rows it keeps, and their times (ns).

    HTA rounds traces with fractional-microsecond timestamps inward (start up, end down to
    whole microseconds); integer-microsecond traces are used as is. When the trace has two
    or more ``ProfilerStep`` names, ``TraceAnalysis`` drops the last step as incomplete:
    CPU slices starting at or after its start, and device work and sync records whose
    correlation no remaining CPU slice has (unless ``include_last_profiler_step``).
    """

    kept: B  # per table row
    row_ts: I64  # per table row
    row_end: I64
    ev_ts: I64  # per analysed event
    ev_end: I64
    node: I64  # per ctda node (SOURCE/SINK: first start, last end)

    @classmethod
    def of(cls, table: EventTable, nodes: Nodes, options: HtaOptions) -> Clock:
        ts = table.col("ts_ns")
        dur = table.col("dur_ns")
        ok = ts != NA
        end = np.where(ok & (dur != NA), ts + np.where(dur != NA, dur, 0), ts)
        if ((ts[ok] % US) != 0).any():
            # HTA adds and rounds the microsecond doubles it parsed. Python's exact integer
            # division gives back the same doubles (numpy would round ns > 2**53 first), so
            # the float sum, and its floor, come out exactly as HTA's do
            ts_us = np.array([x / US for x in ts.tolist()], dtype=np.float64)
            dur_us = np.array([x / US for x in np.where(dur != NA, dur, 0).tolist()], dtype=np.float64)
            end_us = ts_us + dur_us
            ts = np.where(ok, np.ceil(ts_us).astype(np.int64) * US, ts)
            end = np.where(ok, np.floor(end_us).astype(np.int64) * US, end)
        kept = ok & (dur != NA) & (table.col("kind") != Kind.TRACE_SPAN)
        if not options.include_last_profiler_step:
            kept &= _before_last_step(table, ts, kept)
        ev_ts, ev_end = ts[nodes.uid], end[nodes.uid]
        node = np.empty(nodes.n_nodes, dtype=np.int64)
        node[0 : 2 * nodes.n : 2] = ev_ts
        node[1 : 2 * nodes.n : 2] = ev_end
        node[-2] = ev_ts.min() if nodes.n else 0
        node[-1] = ev_end.max() if nodes.n else 0
        return cls(kept, ts, end, ev_ts, ev_end, node)


def _before_last_step(table: EventTable, ts: I64, rows: B) -> B:
    """Rows HTA's loader keeps when it drops the last ProfilerStep (all, with < 2 steps).

    Reads names, ``args.stream`` and ``args.correlation``: device rows (a stream and a
    correlation, or a Context/Event Sync record) survive when a kept CPU row has their
    correlation.
    """
    values = table.strings("name")
    is_step = np.array([("ProfilerStep" in (v or "")) for v in values] + [False], dtype=bool)
    codes = table.col("name")
    step = is_step[np.where(codes >= 0, codes, len(is_step) - 1)] & rows
    if len(np.unique(codes[step])) < 2:
        return np.ones(len(ts), dtype=bool)
    stream = table.col("stream")
    corr = table.col("correlation")
    corr_v = np.where(corr != NA, corr, -1)
    on_device = in_kinds(table.col("kind"), GPU_KINDS)
    device = on_device & (stream != NA) & (stream >= 0) & (corr_v >= 0) | names_in(
        table, np.arange(len(ts)), _DEVICE_SYNCS
    )
    cpu_step = step & ~device
    if not cpu_step.any():
        return np.ones(len(ts), dtype=bool)
    last_start = ts[cpu_step].max()
    keep_cpu = rows & ~device & (ts < last_start)
    return keep_cpu | (device & np.isin(corr_v, np.unique(corr_v[keep_cpu])))


_DEVICE_SYNCS = frozenset({"Context Sync", "Event Sync"})


def name_lut(table: EventTable, names: frozenset[str]) -> B:
    values = table.strings("name")
    return np.array([v in names for v in values] + [False], dtype=bool)


def names_in(table: EventTable, rows: I64, names: frozenset[str]) -> B:
    codes = table.col("name")[rows]
    lut = name_lut(table, names)
    return lut[np.where(codes >= 0, codes, len(lut) - 1)]


def window(table: EventTable, clock: Clock, options: HtaOptions) -> tuple[int, int]:
    """HTA's window: the whole trace, or the span of the selected annotation matches
    (events whose name contains ``annotation``, taken by position in file order)."""
    ts, end = clock.row_ts, clock.row_end
    has = clock.kept
    if options.annotation == "":
        return int(ts[has].min()), int(end[has].max())
    values = table.strings("name")
    lut = np.array([options.annotation in (v or "") for v in values] + [False], dtype=bool)
    codes = table.col("name")
    hits = np.flatnonzero(lut[np.where(codes >= 0, codes, len(lut) - 1)] & has)
    lo, hi = (options.instance, options.instance) if isinstance(options.instance, int) else options.instance
    sel = hits[lo : hi + 1]
    if len(sel) == 0:
        raise ValueError(f"no instance {options.instance} of annotation {options.annotation!r}")
    return int(ts[sel].min()), int(end[sel].max())
