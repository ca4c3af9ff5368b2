"""What was queued where: lookups over device work by stream and launch time.

Shared by the GPU rules (:mod:`ctda.analysis.rules.gpu`, :mod:`ctda.analysis.rules.syncs`)
and by the what-if invariant that checks their predictions. Every lookup is one sort and
one ``searchsorted`` over a combined (lane, time) key: lane blocks are spaced wider than
the whole time span, so a single sorted array answers queries on every lane at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]


def _span(ctx: RuleContext) -> tuple[int, int]:
    """(earliest node time, width of a lane block) for combined (lane, time) keys."""
    t = ctx.nodes.time
    t0 = int(t.min()) if len(t) else 0
    return t0, (int(t.max()) - t0 + 1) if len(t) else 1


def _nearest(keys: I64, lanes_sorted: I64, items: I64, lanes: I64, q: I64, after: bool) -> I64:
    """Per query (lane, key): the item with the largest key below ``q`` on that lane
    (``after=False``) or the smallest key above it (``after=True``); -1 where none."""
    if len(items) == 0 or len(lanes) == 0:
        return np.full(len(lanes), -1, dtype=np.int64)
    if after:
        pos = np.minimum(np.searchsorted(keys, q, side="right"), len(items) - 1)
        ok = (keys[pos] > q) & (lanes_sorted[pos] == lanes)
    else:
        pos = np.maximum(np.searchsorted(keys, q, side="left") - 1, 0)
        ok = (keys[pos] < q) & (lanes_sorted[pos] == lanes)
    return np.where(ok, items[pos], -1)


def launched_near(ctx: RuleContext, lanes: I64, when_q: I64, after: bool) -> I64:
    """Per (GPU lane, time) query: the work on that lane launched last before the time
    (``after=False``) or first after it (``after=True``); -1 where there is none.
    """
    keys, wl, work = ctx.once("launches", lambda: _launches(ctx))
    t0, span = _span(ctx)
    lanes = np.asarray(lanes, dtype=np.int64)
    q = lanes * span + (np.asarray(when_q, dtype=np.int64) - t0)
    return _nearest(keys, wl, work, lanes, q, after)


def _launches(ctx: RuleContext) -> tuple[I64, I64, I64]:
    """Launched device work sorted by (lane, launch time): its combined keys, lanes and indices."""
    n = ctx.nodes
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0))
    when = n.ts[li[work]]
    order = np.lexsort((when, n.lane[work]))
    work, when = work[order], when[order]
    wl = n.lane[work].astype(np.int64)
    t0, span = _span(ctx)
    return wl * span + (when - t0), wl, work


def last_launched_before(ctx: RuleContext, lanes: I64, before: I64) -> I64:
    return launched_near(ctx, lanes, before, after=False)


def first_launched_after(ctx: RuleContext, lanes: I64, after: I64) -> I64:
    return launched_near(ctx, lanes, after, after=True)


def current_stream(ctx: RuleContext, threads: I64, when_q: I64) -> I64:
    """Per (CPU lane, time) query: the GPU lane of the work that thread launched last
    before the time (-1 when it launched nothing before).

    PyTorch queues a thread's work to its current stream, and a stream synchronisation,
    a ``.item()`` or a synchronous copy without a recorded stream concerns that stream:
    the stream the thread's latest launch went to is the best evidence of it.
    """
    n = ctx.nodes
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0))
    thread = n.lane[li[work]].astype(np.int64)
    when = n.ts[li[work]]
    order = np.lexsort((work, when, thread))
    work, thread, when = work[order], thread[order], when[order]
    t0, span = _span(ctx)
    threads = np.asarray(threads, dtype=np.int64)
    q = threads * span + (np.asarray(when_q, dtype=np.int64) - t0)
    hit = _nearest(thread * span + (when - t0), thread, work, threads, q, after=False)
    return np.where(hit >= 0, n.lane[np.maximum(hit, 0)], -1).astype(np.int64)  # type: ignore[no-any-return]


def gpu_lanes(ctx: RuleContext) -> I64:
    """Every GPU lane (device, stream) of the trace."""
    lanes = ctx.table.lanes
    return lanes.lane[lanes.is_gpu].to_numpy(dtype=np.int64)  # type: ignore[no-any-return]


def device_of_lane(ctx: RuleContext) -> I64:
    """Device of every lane (-1 for CPU lanes), indexed by lane."""
    lanes = ctx.table.lanes.sort_values("lane")
    dev = lanes.device.to_numpy(dtype=np.int64)
    return np.where(lanes.is_gpu.to_numpy(dtype=bool), dev, -1)  # type: ignore[no-any-return]


def lane_of(ctx: RuleContext, device: I64, stream: I64) -> I64:
    """GPU lane of each (device, stream); a device that is NA matches the stream on any
    device (the lowest such lane); -1 where no lane has that stream."""
    lanes = ctx.table.lanes
    gpu = lanes[lanes.is_gpu].sort_values(["stream", "device", "lane"])
    g_dev = gpu.device.to_numpy(dtype=np.int64)
    g_str = gpu.stream.to_numpy(dtype=np.int64)
    g_lane = gpu.lane.to_numpy(dtype=np.int64)
    device = np.asarray(device, dtype=np.int64)
    stream = np.asarray(stream, dtype=np.int64)
    if len(g_lane) == 0 or len(stream) == 0:
        return np.full(len(stream), -1, dtype=np.int64)
    # exact (device, stream) first: rows are sorted by stream, then device
    lo = np.searchsorted(g_str, stream, side="left")
    hi = np.searchsorted(g_str, stream, side="right")
    any_dev = np.where(lo < hi, g_lane[np.minimum(lo, len(g_lane) - 1)], -1)
    key = g_str * (int(g_dev.max()) + 2) + (g_dev + 1)
    qk = stream * (int(g_dev.max()) + 2) + (device + 1)
    pos = np.minimum(np.searchsorted(key, qk), len(key) - 1)
    exact = np.where(key[pos] == qk, g_lane[pos], -1)
    return np.where(device == NA, any_dev, exact)  # type: ignore[no-any-return]


def sync_records(ctx: RuleContext) -> tuple[I64, I64]:
    """cuda_sync records and the analysed runtime call each belongs to (by correlation)."""
    t = ctx.table
    rec = np.flatnonzero(t.col("kind") == Kind.SYNC)
    lau = t.col("launcher")[rec]
    call = np.where(lau >= 0, ctx.nodes.index_of_uid[np.maximum(lau, 0)], -1)
    keep = call >= 0
    return rec[keep], call[keep]


def calls_by_correlation(ctx: RuleContext, corr: I64) -> I64:
    """Analysed runtime calls (cudaEventRecord, ...) with the given correlation ids (-1: none)."""
    n = ctx.nodes
    c = ctx.table.col("correlation")[n.uid]
    runtime = np.flatnonzero((n.kind == Kind.RUNTIME) & (c != NA))
    order = runtime[np.argsort(c[runtime], kind="stable")]
    keys = c[order]
    if len(keys) == 0:
        return np.full(len(corr), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, corr), 0, len(keys) - 1)
    return np.where(keys[pos] == corr, order[pos], -1)  # type: ignore[no-any-return]


def last_call_before(ctx: RuleContext, calls: I64, threads: I64, when_q: I64) -> I64:
    """Per (CPU lane, time) query: the latest of ``calls`` on that thread starting before
    the time (-1 when none)."""
    n = ctx.nodes
    calls = np.asarray(calls, dtype=np.int64)
    thread = n.lane[calls].astype(np.int64)
    order = np.lexsort((calls, n.ts[calls], thread))
    calls, thread = calls[order], thread[order]
    t0, span = _span(ctx)
    threads = np.asarray(threads, dtype=np.int64)
    q = threads * span + (np.asarray(when_q, dtype=np.int64) - t0)
    return _nearest(thread * span + (n.ts[calls] - t0), thread, calls, threads, q, after=False)
