"""Launch statistics, stream queue lengths and communication/computation overlap.

The three breakdowns of docs/breakdowns.md that pair device work with something else: its
launch call on the CPU (launch delay, runtime outliers, queue length) or the other class
of work running at the same time (overlap). Rows per analysis window (by the work's start)
and for the whole trace (``window`` -1); everything vectorised.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.breakdown import (
    COMMUNICATION,
    COMPUTE,
    MEMORY,
    TRACE,
    Device,
    by_device,
    cp_ns_by_event,
    spans,
    union_ns,
)
from ctda.analysis.classify import CLASS_CODE
from ctda.analysis.engine import Analysis
from ctda.analysis.tables import Windows

I64 = npt.NDArray[np.int64]

#: HTA's defaults (get_cuda_kernel_launch_stats): a launch call longer than this is an
#: outlier, and so is a launch delay longer than the second
RUNTIME_OUTLIER_NS = 50_000
DELAY_OUTLIER_NS = 100_000
#: a kernel shorter than this is "short": launching it costs about as much as running it
SHORT_KERNEL_NS = 10_000
#: CUDA's default number of launches a stream queues before the launching call blocks
MAX_QUEUE = 1024


def _launched(a: Analysis, dev: Device) -> tuple[I64, I64, I64]:
    """Device work with its launch call in the trace: rows of ``dev``, and the call's start and end."""
    n = a.nodes
    launcher = a.table.col("launcher")[n.uid[dev.idx]]
    call = np.where(launcher >= 0, n.index_of_uid[np.maximum(launcher, 0)], -1)
    rows = np.flatnonzero(call >= 0)
    return rows, n.ts[call[rows]], n.end[call[rows]]


def launches(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Per window and whole trace: launches, launch-call and launch-delay percentiles (delay:
    work start minus call end, at least 0), outliers, short kernels, and the critical
    path's launch delay (its ``launch_overhead`` class)."""
    dev = dev or Device(a)
    cols = [
        "window", "label", "launches", "call_p50_ns", "call_p95_ns", "call_outliers", "delay_p50_ns",
        "delay_p95_ns", "delay_max_ns", "delay_outliers", "delay_ns", "short_kernels", "shorter_than_call",
        "cp_delay_ns",
    ]  # fmt: skip
    rows, call_ts, call_end = _launched(a, dev)
    if not len(rows):
        return pd.DataFrame(columns=cols)
    call = call_end - call_ts
    delay = np.maximum(dev.ts[rows] - call_end, 0)
    dur = dev.end[rows] - dev.ts[rows]
    win = Windows(a).of_event[dev.idx[rows]]
    ch = a.charges
    cp = ch[(ch.event < 0) & (ch.cls == CLASS_CODE["launch_overhead"])]
    cp_by_window = np.bincount(cp.window.to_numpy(), weights=cp.ns.to_numpy(), minlength=len(a.windows))
    labels = [w.label for w in a.windows]
    by_window = np.argsort(win, kind="stable")  # each window's launches, one slice each
    first = np.searchsorted(win[by_window], np.arange(len(a.windows) + 1), "left")
    out = []
    for k in [*range(len(a.windows)), TRACE]:
        sel = np.arange(len(rows)) if k == TRACE else by_window[first[k] : first[k + 1]]
        if not len(sel):
            continue
        c, d = call[sel], delay[sel]
        out.append(
            {
                "window": k,
                "label": "(trace)" if k == TRACE else labels[k],
                "launches": len(sel),
                "call_p50_ns": float(np.percentile(c, 50)),
                "call_p95_ns": float(np.percentile(c, 95)),
                "call_outliers": int((c > RUNTIME_OUTLIER_NS).sum()),
                "delay_p50_ns": float(np.percentile(d, 50)),
                "delay_p95_ns": float(np.percentile(d, 95)),
                "delay_max_ns": int(d.max()),
                "delay_outliers": int((d > DELAY_OUTLIER_NS).sum()),
                "delay_ns": int(d.sum()),
                "short_kernels": int((dur[sel] < SHORT_KERNEL_NS).sum()),
                "shorter_than_call": int((dur[sel] < c).sum()),
                "cp_delay_ns": int(cp_by_window.sum() if k == TRACE else cp_by_window[k]),
            }
        )
    return pd.DataFrame(out, columns=cols)


def queue_series(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Queue length of each stream over time: +1 when a launch call starts, -1 when its
    work starts; one row per change (``ts``, ``lane``, ``length``), a step function."""
    dev = dev or Device(a)
    rows, call_ts, _ = _launched(a, dev)
    lane = np.r_[dev.lane[rows], dev.lane[rows]].astype(np.int64)
    ts = np.r_[call_ts, dev.ts[rows]]
    step = np.r_[np.ones(len(rows), np.int64), -np.ones(len(rows), np.int64)]
    order = np.lexsort((-step, ts, lane))  # a launch at the same instant counts first
    lane, ts, step = lane[order], ts[order], step[order]
    start = np.ones(len(lane), dtype=bool)
    start[1:] = lane[1:] != lane[:-1]
    total = np.cumsum(step)
    first = np.maximum.accumulate(np.where(start, np.arange(len(lane)), 0))  # each row's lane start
    before = np.r_[0, total[:-1]]
    return pd.DataFrame({"ts": ts, "lane": lane, "length": total - before[first]})


def queues(a: Analysis, dev: Device | None = None, max_queue: int = MAX_QUEUE) -> pd.DataFrame:
    """Per window (and whole trace) and stream: the longest queue, its time-weighted mean,
    and the time it was at ``max_queue`` or more (a launching call blocks then)."""
    dev = dev or Device(a)
    cols = ["window", "label", "device", "stream", "max_length", "mean_length", "full_ns"]
    q = queue_series(a, dev)
    if not len(q):
        return pd.DataFrame(columns=cols)
    lanes = a.table.lanes
    lane, ts, length = q.lane.to_numpy(), q.ts.to_numpy(), q.length.to_numpy()
    bounds = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1], True])  # rows come sorted by lane
    first_call = int(ts.min())
    out = []
    for k, label, _step, s, e in spans(a, dev):
        if k == TRACE:  # the whole trace's queue starts with its first launch call
            s = min(s, first_call)
        for lo, hi in itertools.pairwise(bounds):
            ln, t, v = int(lane[lo]), ts[lo:hi], length[lo:hi]
            # the step function clipped to [s, e): the value holding at s, then changes inside
            at_s = np.searchsorted(t, s, side="right") - 1
            first, last = at_s + 1, np.searchsorted(t, e, side="left")
            tt = np.r_[s, t[first:last], e]
            vv = np.r_[v[at_s] if at_s >= 0 else 0, v[first:last]]
            held = np.diff(tt)
            if e <= s or not vv.any():
                continue
            out.append(
                {
                    "window": k,
                    "label": label,
                    "device": int(lanes["device"].iloc[ln]),
                    "stream": int(lanes["stream"].iloc[ln]),
                    "max_length": int(vv.max()),
                    "mean_length": float((vv * held).sum() / (e - s)),
                    "full_ns": int(held[vv >= max_queue].sum()),
                }
            )
    return pd.DataFrame(out, columns=cols)


def overlap(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Per window (and whole trace) and device: communication time, the part of it under
    compute (HTA's overlap ratio is their quotient), the exposed rest, and the critical
    path's time in communication kernels."""
    dev = dev or Device(a)
    cols = [
        "window",
        "label",
        "device",
        "communication_ns",
        "overlapped_ns",
        "overlap_share",
        "exposed_ns",
        "cp_ns",
    ]
    comm_all = dev.cls == COMMUNICATION
    if not comm_all.any():
        return pd.DataFrame(columns=cols)
    # the path's time in each device's communication work, per window and in all
    rows = np.flatnonzero(comm_all)
    mine = pd.DataFrame(
        {
            "device": dev.device[rows],
            "window": Windows(a).of_event[dev.idx[rows]],
            "cp": cp_ns_by_event(a)[dev.idx[rows]],
        }
    )
    cp_in = {(int(d), int(k)): int(v) for (d, k), v in mine.groupby(["device", "window"]).cp.sum().items()}
    cp_all = {int(d): int(v) for d, v in mine.groupby("device").cp.sum().items()}
    per_device = [part for part in by_device(dev) if part[0] in cp_all]
    out = []
    for k, label, _step, s, e in spans(a, dev):
        for d, work in per_device:
            ts, en, c = work.clipped(s, e)
            comm = union_ns(ts[c == COMMUNICATION], en[c == COMMUNICATION])
            comp = union_ns(ts[c == COMPUTE], en[c == COMPUTE])
            both = union_ns(ts[c != MEMORY], en[c != MEMORY])
            over = comm + comp - both
            out.append(
                {
                    "window": k,
                    "label": label,
                    "device": int(d),
                    "communication_ns": comm,
                    "overlapped_ns": over,
                    "overlap_share": over / comm if comm else 0.0,
                    "exposed_ns": comm - over,
                    "cp_ns": cp_all[d] if k == TRACE else cp_in.get((d, k), 0),
                }
            )
    return pd.DataFrame(out, columns=cols)


#: launch calls HTA 0.5 pairs with device work: for its launch statistics, and (a longer
#: list) for its queue lengths; ctda pairs every call with the work that shares its
#: correlation id (graph launches, driver calls, every ROCm and MTIA launch)
HTA_LAUNCH_STATS_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",
    }
)
HTA_QUEUE_CALLS = HTA_LAUNCH_STATS_CALLS | {
    "cuLaunchKernel",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
}


def launches_hta_skips(a: Analysis, dev: Device | None = None) -> dict[str, int]:
    """Device work launched by a call HTA does not pair, per HTA figure (see above)."""
    dev = dev or Device(a)
    rows, _, _ = _launched(a, dev)
    t, n = a.table, a.nodes
    launcher = t.col("launcher")[n.uid[dev.idx[rows]]]
    codes, count = np.unique(t.col("name")[launcher], return_counts=True)
    names = np.asarray(t.strings("name"), dtype=object)[codes]  # one check per distinct call name
    return {
        "launches_hta_skips": int(count[[x not in HTA_LAUNCH_STATS_CALLS for x in names]].sum()),
        "queued_launches_hta_skips": int(count[[x not in HTA_QUEUE_CALLS for x in names]].sum()),
    }
