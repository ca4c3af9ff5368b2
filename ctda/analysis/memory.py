"""The allocator timeline: PyTorch's ``[memory]`` instant events, per device.

Each such event (written with ``profile_memory=True``) carries the change (``Bytes``,
negative for a free) and the caching allocator's totals after it (``Total Allocated``,
``Total Reserved``) for one device (``Device Id``; -1 is host memory). A trace without
them has an empty table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.analysis.breakdown import TRACE, Device
from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind
from ctda.ingest.timestamps import NA


def memory_series(a: Analysis) -> pd.DataFrame:
    """Every allocator event, in time order: ts, device, bytes, allocated, reserved.

    Traces from before PyTorch recorded the totals (2021) carry the change alone; their
    allocated memory is the running sum of changes, so it starts at 0 with the trace.
    """
    t = a.table
    if "total_allocated" not in t.events.column_names:  # a table stored by an earlier ctda
        return pd.DataFrame(
            {c: np.zeros(0, np.int64) for c in ("ts", "device", "bytes", "allocated", "reserved")}
        )
    total, change = t.col("total_allocated"), t.col("mem_bytes")
    sel = np.flatnonzero((t.col("kind") == Kind.INSTANT) & ((total != NA) | (change != NA)))
    sel = sel[np.argsort(t.col("ts_ns")[sel], kind="stable")]
    out = pd.DataFrame(
        {
            "ts": t.col("ts_ns")[sel],
            "device": np.where(t.col("device")[sel] == NA, -1, t.col("device")[sel]),
            "bytes": np.where(change[sel] == NA, 0, change[sel]),
            "allocated": total[sel],
            "reserved": np.where(t.col("total_reserved")[sel] == NA, 0, t.col("total_reserved")[sel]),
        }
    )
    missing = out.allocated.to_numpy() == NA
    if missing.any():
        running = out.groupby("device").bytes.cumsum().to_numpy()
        out["allocated"] = np.where(missing, running, out.allocated.to_numpy())
    return out


def memory(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Per window (and whole trace, ``window`` -1) and device: allocations and frees (count
    and bytes), allocated memory at the start, at the end and at its peak, and the peak
    reserved by the caching allocator."""
    cols = [
        "window", "label", "device", "allocations", "allocated_bytes", "frees", "freed_bytes",
        "start_bytes", "end_bytes", "peak_bytes", "peak_reserved_bytes",
    ]  # fmt: skip
    m = memory_series(a)
    if not len(m):
        return pd.DataFrame(columns=cols)
    starts, ends = a.window_bounds()
    spans = [(k, w.label, int(starts[k]), int(ends[k])) for k, w in enumerate(a.windows)]
    spans.append((TRACE, "(trace)", int(m.ts.min()), int(m.ts.max()) + 1))
    out = []
    for d in np.unique(m.device.to_numpy()):
        part = m[m.device == d]
        ts, change = part.ts.to_numpy(), part.bytes.to_numpy()
        alloc, reserved = part.allocated.to_numpy(), part.reserved.to_numpy()
        for k, label, s, e in spans:
            lo, hi = np.searchsorted(ts, s, side="left"), np.searchsorted(ts, e, side="left")
            before = alloc[lo - 1] if lo > 0 else alloc[0] - change[0]
            held = reserved[lo - 1] if lo > 0 else reserved[0]
            if hi == lo and k == TRACE:
                continue
            inside = slice(lo, hi)
            c = change[inside]
            out.append(
                {
                    "window": k,
                    "label": label,
                    "device": int(d),
                    "allocations": int((c > 0).sum()),
                    "allocated_bytes": int(c[c > 0].sum()),
                    "frees": int((c < 0).sum()),
                    "freed_bytes": int(-c[c < 0].sum()),
                    "start_bytes": int(before),
                    "end_bytes": int(alloc[hi - 1]) if hi > lo else int(before),
                    "peak_bytes": int(max(before, alloc[inside].max())) if hi > lo else int(before),
                    "peak_reserved_bytes": int(max(held, reserved[inside].max())) if hi > lo else int(held),
                }
            )
    return pd.DataFrame(out, columns=cols)
