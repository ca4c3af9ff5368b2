"""Rules that involve GPU streams: stream order, launches, and CPU/GPU synchronisation."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules import queues as q
from ctda.analysis.rules import syncs
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import rule
from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]


@rule("stream_sequence", "structural")
def stream_sequence(ctx: RuleContext) -> EdgeBatch:
    """end of one kernel/copy/set -> start of the next on the same GPU stream.

    Reads ``args.device``/``args.stream`` (or pid/tid) and ``ts``/``dur``. A stream executes
    its work in order, so each item waits for the previous one to finish.
    """
    n = ctx.nodes
    order = ctx.by_lane_time
    work = order[n.is_gpu[order]]
    same = n.lane[work[1:]] == n.lane[work[:-1]]
    prev, nxt = work[:-1][same], work[1:][same]
    ordered = n.end[prev] <= n.ts[nxt]
    src = np.where(ordered, n.finish(prev), n.start(prev))
    return EdgeBatch.of(src, n.start(nxt), EdgeType.STREAM_SEQ)


@rule("launch", "structural")
def launch(ctx: RuleContext) -> EdgeBatch:
    """runtime call start -> start of the device work it enqueued.

    Reads ``args.correlation`` on runtime/driver calls and device work (the reader's
    ``launcher`` column), which also pairs ROCm ``hipGraphLaunch`` and every kernel of a
    ``cudaGraphLaunch`` with no flow event needed. Work cannot start before it was
    submitted; ac2g/async flows carry the same pairing and are not needed on top.
    """
    n = ctx.nodes
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0))
    return EdgeBatch.of(n.start(li[work]), n.start(work), EdgeType.LAUNCH)


def _sync_edges(ctx: RuleContext, waits: syncs.Waits) -> EdgeBatch:
    """device work end -> blocking call end, for the pairs causal in the observed run.

    Calibration weighs a pair that did not bind ``min(observed gap, latency)``: the
    call's minimum return latency after the work ends, measured per kind of call in the
    trace (:mod:`ctda.analysis.sync_latency`), never more than was observed, so replay
    stays exact while a faster host in a what-if meets the queued work.

    Where the work ended inside a free (``cudaFree``, ``hipFree``, ...), the edge belongs to
    the free: what follows its wait is the free's own work, not a return latency, so a
    scenario that scales the call scales it (the edge binds there, and lies inside the call).
    """
    w = waits.causal(ctx)
    n = ctx.nodes
    own = ctx.name_mask(syncs.FREES)[w.call] & (n.end[w.work] >= n.ts[w.call])
    owner = np.where(own, w.call, -1)
    return EdgeBatch.of(n.finish(w.work), n.finish(w.call), EdgeType.SYNC, owner=owner)


@rule("sync_recorded", "structural")
def sync_recorded(ctx: RuleContext) -> EdgeBatch:
    """device work end -> end of the runtime call a ``cuda_sync`` record says waited for it.

    Reads ``cuda_sync`` events (``args.cuda_sync_kind``, ``stream``, ``device``,
    ``correlation`` of the waiting call, ``wait_on_stream`` and
    ``wait_on_cuda_event_record_corr_id``). Stream Sync waits for the last work queued on
    its stream before the call; Context Sync for the last work on every stream of the
    device; Event Sync for the last work queued on the recorded stream before the
    matching ``cudaEventRecord``. The call cannot return before that work ends, whether
    or not it was still running when the call began.
    """
    return _sync_edges(ctx, syncs.recorded(ctx))


@rule("sync_inferred", "structural")
def sync_inferred(ctx: RuleContext) -> EdgeBatch:
    """device work end -> end of a blocking runtime call, for calls no cuda_sync record covers.

    Reads runtime/driver call names (device, stream and event synchronisation,
    ``cudaFree``/``cudaFreeHost`` and HIP equivalents), ``args.stream`` where present,
    ``ts``/``dur`` and the launch pairing. Such a call returns once the work queued before
    it on the streams it waits for is done, blocked or not: a stream sync waits for its
    ``stream`` argument, else the thread's current stream (its latest launch's stream); an
    event sync for the stream and position of the thread's latest ``cudaEventRecord``; a
    device sync or free for every stream (rules in :mod:`ctda.analysis.rules.syncs`). Each
    stream's last item queued before the call that ended while it blocked is linked too.
    """
    return _sync_edges(ctx, syncs.inferred(ctx))


@rule("blocking_copy", "structural")
def blocking_copy(ctx: RuleContext) -> EdgeBatch:
    """copy/set end -> end of the synchronous call that issued it.

    Reads ``args.correlation`` (the launch pairing), ``name`` of the call (cudaMemcpy,
    cudaMemset, hipMemcpyWithStream, ...) and of the copy ("Memcpy DtoH (Device ->
    Pageable)") and ``ts``/``dur``. A synchronous call, or an async-named one copying into
    pageable host memory, cannot return before its copy is done, whether or not the copy
    was still queued when it began; any launching call whose own copy finished inside it
    counts too (observed blocking). An operator that needs a device value on the host
    (``aten::item``, ``aten::_local_scalar_dense``, ``aten::nonzero``) waits for the copy it
    launched where no blocking call inside it was recorded.
    """
    return _sync_edges(ctx, syncs.Waits.concat([syncs.copies(ctx), syncs.ops(ctx)]))


@rule("stream_wait_event", "structural")
def stream_wait_event(ctx: RuleContext) -> EdgeBatch:
    """last work on the recorded stream -> next work on the waiting stream (GPU -> GPU).

    Reads ``cuda_sync`` records of kind "Stream Wait Event" (``stream`` = the waiting
    stream, ``wait_on_stream`` and ``wait_on_cuda_event_record_corr_id`` = the
    cudaEventRecord call). Work queued on the waiting stream after the
    cudaStreamWaitEvent call cannot start before the event's work completed. Traces without
    these records do not say which streams an event joined: see :func:`stream_wait_inferred`.
    """
    t, n = ctx.table, ctx.nodes
    rec, call = q.sync_records(ctx)
    kinds = t.decoded("sync_kind", rec)
    sw = np.flatnonzero(np.array([k == "Stream Wait Event" for k in kinds], dtype=bool))
    if len(sw) == 0:
        return EdgeBatch.of([], [], EdgeType.STREAM_WAIT)
    r = rec[sw]
    rec_call = q.calls_by_correlation(ctx, t.col("wait_on_event_corr")[r])
    ok = rec_call >= 0
    dev = t.col("device")[r][ok]
    src_lane = q.lane_of(ctx, dev, t.col("wait_on_stream")[r][ok])
    dst_lane = q.lane_of(ctx, dev, t.col("stream")[r][ok])
    before = q.last_launched_before(ctx, src_lane, n.ts[rec_call[ok]])
    wait_call = call[sw][ok]
    after = q.first_launched_after(ctx, dst_lane, n.ts[wait_call])
    keep = (src_lane >= 0) & (dst_lane >= 0) & (before >= 0) & (after >= 0)
    return EdgeBatch.of(n.finish(before[keep]), n.start(after[keep]), EdgeType.STREAM_WAIT)


@rule("stream_wait_inferred", "structural")
def stream_wait_inferred(ctx: RuleContext) -> EdgeBatch:
    """work on another stream of the device -> GPU work held back by it, in traces without
    "Stream Wait Event" records.

    Reads runtime call names and threads, ``ts``/``dur`` and device/stream of GPU work, and
    the launch pairing. First the cause: each ``cudaStreamWaitEvent`` call links the work
    its thread queued last on another stream before it to the work the thread queued
    first after it (see :func:`_wait_call_edges`), whatever the delay. Then, for work that
    started long after it was launched and after its stream went idle with no such call
    to explain it, the work that ended on another stream of the same device just before
    the start (within ``stream_wait_max_lag_ns``) is taken as what it waited for
    (timestamp backtracking).
    """
    n = ctx.nodes
    c_src, c_dst = _wait_call_edges(ctx)
    t_src, t_dst = _late_start_edges(ctx, explained=c_dst)
    return EdgeBatch.of(
        np.concatenate([n.finish(c_src), n.finish(t_src)]),
        np.concatenate([n.start(c_dst), n.start(t_dst)]),
        EdgeType.STREAM_WAIT,
        "stream_wait_inferred",
    )


#: runtime calls that make a stream wait for an event recorded on another stream
WAIT_CALLS = r"^(cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent$"


def _wait_call_edges(ctx: RuleContext) -> tuple[I64, I64]:
    """(recorded work, waiting work) pairs read from cudaStreamWaitEvent calls on the CPU.

    Without "Stream Wait Event" records the call's arguments are not in the trace, but its
    place is. The wait applies to the stream its thread queues to next (PyTorch's
    collectives and side-stream copies follow the record -> wait -> launch pattern), and
    the event captured work queued before the call on another stream of the device. Of
    that work, only work that had ended when the waiting work started can have been
    waited for; the one that ended last is what held it back, however long that took.
    """
    n = ctx.nodes
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if len(q.sync_records(ctx)[0]):  # recorded waits are handled by stream_wait_event
        return none
    calls = np.flatnonzero(ctx.name_mask(WAIT_CALLS) & (n.kind == Kind.RUNTIME))
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0))
    if len(calls) == 0 or len(work) == 0:
        return none
    t0 = int(n.time.min())
    span = int(n.time.max()) - t0 + 1
    # the waiting work: the first this thread launches after the call
    when = n.ts[li[work]]
    thread = n.lane[li[work]].astype(np.int64)
    by_launch = np.lexsort((work, when, thread))
    key = thread[by_launch] * span + (when[by_launch] - t0)
    nxt = np.searchsorted(key, n.lane[calls].astype(np.int64) * span + (n.ts[calls] - t0), side="right")
    nxt_c = np.minimum(nxt, len(work) - 1)
    has = (nxt < len(work)) & (thread[by_launch][nxt_c] == n.lane[calls])
    calls, dst = calls[has], work[by_launch][nxt_c[has]]
    dev = q.device_of_lane(ctx)
    gpu_lanes = np.flatnonzero(dev >= 0).astype(np.int64)
    if len(calls) == 0 or len(gpu_lanes) == 0:
        return none
    # per (call, other stream of the device): the last work that ended before dst started
    q_call = np.repeat(np.arange(len(calls)), len(gpu_lanes))
    q_lane = np.tile(gpu_lanes, len(calls))
    ok = (q_lane != n.lane[dst[q_call]]) & (dev[q_lane] == dev[n.lane[dst[q_call]]])
    q_call, q_lane = q_call[ok], q_lane[ok]
    gw = np.flatnonzero(n.is_gpu)
    by_end = gw[np.lexsort((n.end[gw], n.lane[gw]))]
    ekey = n.lane[by_end].astype(np.int64) * span + (n.end[by_end] - t0)
    pos = np.searchsorted(ekey, q_lane * span + (n.ts[dst[q_call]] - t0), side="right") - 1
    cand = np.full(len(q_call), -1, dtype=np.int64)
    for _ in range(ctx.options.stream_wait_lookback):
        c = by_end[np.maximum(pos, 0)]
        launched = np.where(li[c] >= 0, n.ts[np.maximum(li[c], 0)], np.iinfo(np.int64).max)
        hit = (cand < 0) & (pos >= 0) & (n.lane[c] == q_lane) & (launched < n.ts[calls[q_call]])
        cand[hit] = c[hit]
        pos = pos - 1
    found = cand >= 0
    q_call, cand = q_call[found], cand[found]
    # the candidate that ended last, per call
    order = np.lexsort((n.end[cand], q_call))
    last = np.ones(len(order), dtype=bool)
    last[:-1] = q_call[order][:-1] != q_call[order][1:]
    pick = order[last]
    return cand[pick], dst[q_call[pick]]


def _late_start_edges(ctx: RuleContext, explained: I64) -> tuple[I64, I64]:
    """(work on another stream, late work) pairs by timestamp backtracking, for late work
    no wait call explains."""
    n, opt = ctx.nodes, ctx.options
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    work = np.flatnonzero(n.is_gpu)
    if len(work) == 0:
        return none
    li = ctx.launcher
    ready = np.where(li[work] >= 0, n.ts[np.maximum(li[work], 0)], np.iinfo(np.int64).min)
    order = work[np.lexsort((n.ts[work], n.lane[work]))]
    prev_end = np.full(n.n, np.iinfo(np.int64).min, dtype=np.int64)
    same = n.lane[order[1:]] == n.lane[order[:-1]]
    prev_end[order[1:][same]] = n.end[order[:-1][same]]
    ready = np.maximum(ready, prev_end[work])
    late = work[((n.ts[work] - ready) >= opt.stream_wait_min_gap_ns) & ~np.isin(work, explained)]
    if len(late) == 0:
        return none
    dev = q.device_of_lane(ctx)
    t0 = int(n.time.min())
    span = int(n.time.max()) - t0 + 1
    by_end = work[np.lexsort((n.end[work], dev[n.lane[work]]))]
    key = dev[n.lane[by_end]] * span + (n.end[by_end] - t0)
    at = dev[n.lane[late]] * span + (n.ts[late] - t0)
    pos = np.searchsorted(key, at, side="right") - 1
    found = np.full(len(late), -1, dtype=np.int64)
    for _ in range(opt.stream_wait_lookback):
        ok = (pos >= 0) & (found < 0)
        cand = by_end[np.maximum(pos, 0)]
        hit = ok & (n.lane[cand] != n.lane[late]) & (dev[n.lane[cand]] == dev[n.lane[late]])
        found[hit] = cand[hit]
        pos = pos - 1
    src_ready = np.where(found >= 0, n.end[np.maximum(found, 0)], 0)
    lag = n.ts[late] - src_ready
    late_ready = ready[np.searchsorted(work, late)]
    keep = (found >= 0) & (lag <= opt.stream_wait_max_lag_ns) & (src_ready > late_ready)
    return found[keep], late[keep]
