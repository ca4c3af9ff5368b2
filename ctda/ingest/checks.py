"""Odd-but-valid events, counted into the trace's warnings; nothing is ever dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.ingest.kinds import Kind
from ctda.ingest.table import EventTable
from ctda.ingest.timestamps import NA


def warnings_for(table: EventTable, partial: int, odd_flows: dict[str, int]) -> None:
    """Count odd-but-valid events into ``table.meta.warnings``."""
    meta = table.meta
    kind, ts, dur, lane = table.col("kind"), table.col("ts_ns"), table.col("dur_ns"), table.col("lane")
    x = (table.strings("ph") == "X")[table.col("ph")]
    meta.warn("complete events with zero duration", int(np.sum(x & (dur == 0))))
    meta.warn("complete events with negative duration", int(np.sum(x & (dur < 0) & (dur != NA))))
    meta.warn("slices partially overlapping their parent on a thread", partial)
    unknown = kind == Kind.OTHER
    for mask, column, what in (
        (x & unknown, "cat", "complete events of unknown category {!r}"),
        (~x & unknown, "ph", "events of unknown phase {!r}"),
    ):
        values = table.decoded(column, np.flatnonzero(mask))
        for value, count in pd.Series(values).value_counts().items():
            meta.warn(what.format(value), int(count))
    span = np.flatnonzero(kind == Kind.TRACE_SPAN)
    if len(span):
        lo, hi = ts[span].min(), (ts[span] + dur[span]).max()
        on = np.flatnonzero(lane >= 0)
        meta.warn("events outside the profiler's trace span", int(np.sum((ts[on] < lo) | (ts[on] > hi))))
    for what, count in odd_flows.items():
        meta.warn(what, count)
