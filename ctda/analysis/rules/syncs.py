"""Which device work each blocking host call waits for, by the call's semantics.

A blocking call (a stream, event or device synchronisation, a synchronous copy, a ``free``
of device memory) returns only once the device work queued before it on the stream(s) it
waits for is done, whether or not that work was still running when the call began. The
pairs found here become the ``sync_recorded``, ``sync_inferred`` and ``blocking_copy``
edges (:mod:`ctda.analysis.rules.gpu`), and the what-if invariant
(:mod:`ctda.whatif.invariant`) checks predictions against them. The last queued item per
stream is enough: the stream's own order links everything queued before it.

Which streams, strongest evidence first (docs/model.md#synchronisation):

- a ``cuda_sync`` record names the stream, the event's stream, or the whole context;
- a ``cudaStreamSynchronize`` carrying a ``stream`` argument waits for that stream;
- otherwise a stream synchronisation waits for the thread's *current stream*: the stream
  its latest launch before the call went to (``.item()``, ``.cpu()``, ``nonzero`` and
  blocking ``to``/``copy_`` issue a copy on that stream, then synchronise it);
- an event synchronisation waits for the work queued on the recording thread's current
  stream before the thread's latest ``cudaEventRecord`` preceding the call;
- device synchronisation, and ``cudaFree``/``cudaFreeHost`` (they synchronise the device
  implicitly, as the caching allocator's flushes do), wait for every stream;
- a synchronous copy (``cudaMemcpy``, ``hipMemcpyWithStream``, ...) or a copy from device
  into pageable host memory waits for its own copy, which its stream orders after all
  earlier work there;
- where nothing says which stream (no launch before the call on its thread), every stream.
- an operator that needs a device value on the host (``aten::item``,
  ``aten::_local_scalar_dense``, ``aten::nonzero``) with no blocking call recorded inside
  it waits for the copy it launched (one that launched nothing ran on a CPU tensor).

A pair whose work ended after the call returned in the observed run is left out: the call
evidently did not wait for it (another stream, or clocks that disagree). Besides the
semantic pairs, every blocking call keeps the older evidence: each stream's last queued
work that ended while the call was blocked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.rules import queues as q
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]

#: frees of device or pinned memory: they synchronise the device implicitly, then do
#: work of their own (a workspace free can take tens of ms after the wait resolved)
FREES = r"^(cuda|hip)(Free|FreeHost|HostFree)$|^cu(MemFree|MemFree_v2|MemFreeHost)$"
#: calls that wait for every stream of the device (the allocator's frees included)
DEVICE_SYNCS = rf"^(cuda|hip)(DeviceSynchronize|CtxSynchronize)$|^cuCtxSynchronize$|{FREES}"
#: calls that wait for one stream
STREAM_SYNCS = r"^(cuda|hip)StreamSynchronize$|^cuStreamSynchronize$"
#: calls that wait for an event (the work queued before its record call)
EVENT_SYNCS = r"^(cuda|hip)EventSynchronize$|^cuEventSynchronize$"
#: calls that record an event on a stream
EVENT_RECORDS = r"^(cuda|hip)EventRecord(WithFlags)?$|^cuEventRecord(WithFlags)?$"
#: every runtime call that blocks the calling thread until queued device work completes
BLOCKING_CALLS = f"{DEVICE_SYNCS}|{STREAM_SYNCS}|{EVENT_SYNCS}"
#: synchronous copies and sets: the call returns only once its own device work is done
SYNC_COPY_CALLS = (
    r"^(cuda|hip)(Memcpy|Memset|MemcpyDtoH|MemcpyHtoD|Memcpy2D|MemcpyToSymbol|MemcpyFromSymbol)$"
    r"|^hipMemcpyWithStream$"
)
#: device-to-host copies into pageable memory: the host must wait for the data
PAGEABLE_D2H = r"DtoH.*Pageable|Device -> Pageable"
#: operators that need a device value on the host: they copy it and wait for the copy
SYNC_OPS = r"^aten::(_local_scalar_dense|item|nonzero)$"


@dataclass
class Waits:
    """(blocking call, device work it waits for) pairs, analysed indices."""

    call: I64
    work: I64

    @classmethod
    def empty(cls) -> Waits:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.call)

    def causal(self, ctx: RuleContext) -> Waits:
        """Only pairs whose work ended by the time the call returned (observed)."""
        n = ctx.nodes
        ok = (self.work >= 0) & (self.call >= 0)
        ok[ok] = n.end[self.work[ok]] <= n.end[self.call[ok]]
        return Waits(self.call[ok], self.work[ok])

    @classmethod
    def concat(cls, parts: list[Waits]) -> Waits:
        if not parts:
            return cls.empty()
        return cls(np.concatenate([p.call for p in parts]), np.concatenate([p.work for p in parts]))

    def unique(self, n_events: int) -> Waits:
        key = np.unique(self.call * max(n_events, 1) + self.work)
        return Waits(key // max(n_events, 1), key % max(n_events, 1))


def _host_calls(ctx: RuleContext) -> Bool:
    return (ctx.nodes.kind == Kind.RUNTIME) | (ctx.nodes.kind == Kind.DRIVER)  # type: ignore[no-any-return]


def recorded(ctx: RuleContext) -> Waits:
    """Pairs a ``cuda_sync`` record states: Stream Sync waits for the last work queued on
    its stream before the call; Context Sync for the last work on every stream of the
    device; Event Sync for the last work queued on the recorded stream before the
    matching ``cudaEventRecord``."""
    t, n = ctx.table, ctx.nodes
    rec, call = q.sync_records(ctx)
    if len(rec) == 0:
        return Waits.empty()
    kinds = t.decoded("sync_kind", rec).astype(str)
    dev, strm = t.col("device")[rec], t.col("stream")[rec]
    # Context Sync: every stream of the record's device
    cs = np.flatnonzero(kinds == "Context Sync")
    lanes = q.gpu_lanes(ctx)
    dev_of = q.device_of_lane(ctx)
    c_rec = np.repeat(cs, len(lanes))
    c_lane = np.tile(lanes, len(cs))
    same = dev_of[c_lane] == dev[c_rec]
    c_rec, c_lane = c_rec[same], c_lane[same]
    # Stream Sync: the record's stream
    st = np.flatnonzero(kinds == "Stream Sync")
    # Event Sync: the event's stream, before its record call
    ev = np.flatnonzero(kinds == "Event Sync")
    rec_call = q.calls_by_correlation(ctx, t.col("wait_on_event_corr")[rec[ev]])
    ev = ev[rec_call >= 0]
    rec_call = rec_call[rec_call >= 0]
    r_idx = np.concatenate([c_rec, st, ev])
    ev_lane = q.lane_of(ctx, dev[ev], t.col("wait_on_stream")[rec[ev]])
    r_lane = np.concatenate([c_lane, q.lane_of(ctx, dev[st], strm[st]), ev_lane])
    r_time = np.concatenate([n.ts[call[c_rec]], n.ts[call[st]], n.ts[rec_call]])
    work = q.last_launched_before(ctx, r_lane, r_time)
    keep = (r_lane >= 0) & (work >= 0)
    return Waits(call[r_idx][keep], work[keep])


def _queries(ctx: RuleContext, calls: I64, lanes: I64, when: I64) -> tuple[I64, I64]:
    """(call, last work queued on ``lanes`` before ``when``), where there is such work."""
    work = q.last_launched_before(ctx, lanes, when)
    ok = work >= 0
    return calls[ok], work[ok]


def _every_lane(ctx: RuleContext, calls: I64, lanes: I64) -> tuple[I64, I64]:
    """(call, last work queued before it) on every one of ``lanes``, per call."""
    k = len(lanes)
    return _queries(ctx, np.repeat(calls, k), np.tile(lanes, len(calls)), np.repeat(ctx.nodes.ts[calls], k))


def inferred(ctx: RuleContext) -> Waits:
    """Pairs for the blocking calls no ``cuda_sync`` record covers (see the module doc)."""
    n = ctx.nodes
    lanes = q.gpu_lanes(ctx)
    if len(lanes) == 0:
        return Waits.empty()
    host = _host_calls(ctx)
    covered = np.zeros(n.n, dtype=bool)
    covered[q.sync_records(ctx)[1]] = True
    free = host & ~covered
    dev_calls = np.flatnonzero(ctx.name_mask(DEVICE_SYNCS) & free)
    str_calls = np.flatnonzero(ctx.name_mask(STREAM_SYNCS) & free)
    ev_calls = np.flatnonzero(ctx.name_mask(EVENT_SYNCS) & free)
    s_lane = _stream_sync_lane(ctx, str_calls)
    e_call, e_lane, e_time = _event_sync_queries(ctx, ev_calls)
    # every stream: device-wide calls, and calls whose stream nothing tells
    unknown = np.concatenate([str_calls[s_lane < 0], ev_calls[~np.isin(ev_calls, e_call)]])
    every = np.concatenate([dev_calls, unknown])
    parts = [
        _every_lane(ctx, every, lanes),
        _queries(ctx, str_calls[s_lane >= 0], s_lane[s_lane >= 0], n.ts[str_calls[s_lane >= 0]]),
        _queries(ctx, e_call, e_lane, e_time),
    ]
    semantic = Waits.concat([Waits(c, w) for c, w in parts])
    return Waits.concat([semantic, _blocked(ctx, np.concatenate([str_calls, ev_calls]), lanes)])


def _blocked(ctx: RuleContext, calls: I64, lanes: I64) -> Waits:
    """The observed evidence: each stream's last work queued before the call that ended
    while the call was blocked."""
    n = ctx.nodes
    c, w = _every_lane(ctx, calls, lanes)
    inside = (n.end[w] > n.ts[c]) & (n.end[w] <= n.end[c])
    return Waits(c[inside], w[inside])


def _stream_sync_lane(ctx: RuleContext, calls: I64) -> I64:
    """The stream a stream synchronisation waits for: its ``stream`` argument where the
    trace has one, else its thread's current stream; -1 when neither is known."""
    n, t = ctx.nodes, ctx.table
    strm = t.col("stream")[n.uid[calls]]
    dev = t.col("device")[n.uid[calls]]
    given = np.where(strm != NA, q.lane_of(ctx, dev, strm), -1)
    current = q.current_stream(ctx, n.lane[calls].astype(np.int64), n.ts[calls])
    return np.where(given >= 0, given, current)  # type: ignore[no-any-return]


def _event_sync_queries(ctx: RuleContext, calls: I64) -> tuple[I64, I64, I64]:
    """(call, stream, time) per event synchronisation whose event can be placed: the
    thread's latest event record before the call, on the recording thread's current
    stream at the record (traces without ``cuda_sync`` records do not say which event)."""
    n = ctx.nodes
    records = np.flatnonzero(ctx.name_mask(EVENT_RECORDS) & _host_calls(ctx))
    none = np.zeros(0, dtype=np.int64)
    if len(calls) == 0 or len(records) == 0:
        return none, none, none
    rec = q.last_call_before(ctx, records, n.lane[calls].astype(np.int64), n.ts[calls])
    calls, rec = calls[rec >= 0], rec[rec >= 0]
    lane = q.current_stream(ctx, n.lane[rec].astype(np.int64), n.ts[rec])
    ok = lane >= 0
    return calls[ok], lane[ok], n.ts[rec[ok]]


def copies(ctx: RuleContext) -> Waits:
    """A synchronous copy or set call waits for its own device work (so, through its
    stream's order, for everything queued there before it); so does a launching call
    whose copy goes from device into pageable host memory, and any launching call whose
    own copy ended while it was blocked (observed)."""
    n = ctx.nodes
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0) & (n.kind != Kind.KERNEL))
    call = li[work]
    semantic = ctx.name_mask(SYNC_COPY_CALLS)[call] | ctx.name_mask(PAGEABLE_D2H)[work]
    inside = n.end[work] > n.ts[call]
    keep = semantic | inside
    return Waits(call[keep], work[keep])


def ops(ctx: RuleContext) -> Waits:
    """An operator that needs a device value on the host (``.item()``, ``nonzero``) waits
    for the last device work it launched (its copy), where no blocking runtime call inside
    it was recorded (sampled traces); operators that launched nothing ran on CPU tensors."""
    n = ctx.nodes
    op = np.flatnonzero(ctx.name_mask(SYNC_OPS) & ~n.is_gpu & ~_host_calls(ctx))
    li = ctx.launcher
    work = np.flatnonzero(n.is_gpu & (li >= 0))
    if len(op) == 0 or len(work) == 0:
        return Waits.empty()
    # per launching call, its last work (by start)
    order = np.lexsort((n.ts[work], li[work]))
    last = np.ones(len(order), dtype=bool)
    last[:-1] = li[work][order][:-1] != li[work][order][1:]
    callers, their_work = li[work][order][last], work[order][last]
    lane = n.lane[op].astype(np.int64)
    call = q.last_call_before(ctx, callers, lane, n.end[op])
    inside = (call >= 0) & (n.ts[np.maximum(call, 0)] >= n.ts[op])
    blocking = np.flatnonzero(ctx.name_mask(f"{BLOCKING_CALLS}|{SYNC_COPY_CALLS}") & _host_calls(ctx))
    blk = q.last_call_before(ctx, blocking, lane, n.end[op]) if len(blocking) else np.full(len(op), -1)
    covered = (blk >= 0) & (n.ts[np.maximum(blk, 0)] >= n.ts[op])
    keep = inside & ~covered
    pos = np.searchsorted(callers, call[keep])
    return Waits(op[keep], their_work[pos])


def blocking_waits(ctx: RuleContext) -> Waits:
    """Every (blocking call, last device work it waits for) pair of the trace, causal in
    the observed run, without duplicates: what the sync edges link and the invariant
    checks."""
    parts = [recorded(ctx), inferred(ctx), copies(ctx), ops(ctx)]
    return Waits.concat([p.causal(ctx) for p in parts]).unique(ctx.nodes.n)
