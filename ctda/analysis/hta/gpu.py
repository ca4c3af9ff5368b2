"""HTA's GPU pass: kernel launch and kernel-kernel delays, and sync dependencies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.hta.clock import Clock, name_lut, names_in
from ctda.analysis.hta.model import GPU_WORK, LAUNCH_CALLS, HtaEdge, HtaOptions, Part, empty_part
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import GPU_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def partners(t: EventTable) -> I64:
    """Per launching call (uid): the device row HTA pairs it with (-1 when none).

    Reads ``args.correlation`` (the reader's ``launcher`` column). HTA links a call to one
    device row only, the last in file order sharing its correlation; a graph launch's
    other kernels are therefore left out of HTA's graph.
    """
    launcher = t.col("launcher")
    rows = np.flatnonzero(in_kinds(t.col("kind"), GPU_KINDS) & (launcher >= 0))
    out = np.full(len(t), -1, dtype=np.int64)
    np.maximum.at(out, launcher[rows], rows)
    return out


@dataclass
class _Launches:
    """HTA's launching calls that have device work, over the whole trace, by start time."""

    call: I64  # uid of the call
    gpu: I64  # uid of its device work (or sync record)
    device: I64
    stream: I64
    ts: I64  # of the call
    gpu_ts: I64  # of the device work
    paired: B  # the device row is the one HTA links the call to (see partners)
    gpu_of_call: dict[int, int]

    @classmethod
    def of(cls, t: EventTable, clock: Clock, stream_all: I64) -> _Launches:
        kind = t.col("kind")
        launcher = t.col("launcher")
        gpu = np.flatnonzero(in_kinds(kind, GPU_WORK | {Kind.SYNC}) & (launcher >= 0) & clock.kept)
        call = launcher[gpu]
        ok = names_in(t, call, LAUNCH_CALLS) & clock.kept[call]
        call, gpu = call[ok], gpu[ok]
        order = np.lexsort((call, clock.row_ts[call]))
        call, gpu = call[order], gpu[order]
        device = _devices(t)[gpu]
        partner = partners(t)
        paired = partner[call] == gpu
        gpu_of_call = dict(zip(call[paired].tolist(), gpu[paired].tolist()))
        return cls(
            call, gpu, device, stream_all[gpu], clock.row_ts[call], clock.row_ts[gpu], paired, gpu_of_call
        )


def _devices(t: EventTable) -> I64:
    dev = t.lanes.sort_values("lane")["device"].to_numpy(dtype=np.int64)
    lane = t.col("lane")
    return np.where(lane >= 0, dev[np.maximum(lane, 0)], NA)


def gpu_edges(
    ctx: RuleContext, clock: Clock, graph_cpu: B, graph_gpu: B, li: I64, options: HtaOptions
) -> Part:
    """HTA's GPU pass: device work (by start) and ``cuda_sync`` records (by end) in order.

    Reads, for device work, ``args.stream`` and the ``args.correlation`` pairing with its
    launching call; for sync records, their name (Context/Stream/Event Sync, Stream Wait
    Event), ``args.stream``, ``args.correlation`` (the waiting call),
    ``args.wait_on_stream`` and ``args.wait_on_cuda_event_record_corr_id``; and the
    ``cudaEventRecord``/``cudaStreamWaitEvent`` calls those refer to.
    """
    t, n = ctx.table, ctx.nodes
    kind = t.col("kind")
    names = t.strings("name")
    name_code = t.col("name")
    lane = t.col("lane")
    launcher = t.col("launcher")
    wait_corr = t.col("wait_on_event_corr")
    lane_stream = ctx.lanes.sort_values("lane")["stream"].to_numpy(dtype=np.int64)
    stream_all = np.where(lane >= 0, lane_stream[np.maximum(lane, 0)], NA)
    launches = _Launches.of(t, clock, stream_all)
    q_run, q_kern = _queue_lengths(launches)
    record_src = _event_record_sources(t, clock, launches)
    wait_dest = _stream_wait_targets(t, clock, launches, stream_all)

    # rows: graph device work, and sync records whose call is a graph event (HTA keeps
    # Stream Wait Event records whatever their call)
    work_uid = n.uid[graph_gpu]
    sync_uid = np.flatnonzero((kind == Kind.SYNC) & (launcher >= 0) & clock.kept)
    call_idx = n.index_of_uid[launcher[sync_uid]]
    sync_name = np.array([names[c] if c >= 0 else "" for c in name_code[sync_uid]], dtype=object)
    partner = partners(t)
    paired = partner[launcher[sync_uid]] == sync_uid
    keep = (call_idx >= 0) & (
        (graph_cpu[np.maximum(call_idx, 0)] & paired) | (sync_name == "Stream Wait Event")
    )
    sync_uid, sync_name, call_idx = sync_uid[keep], sync_name[keep], call_idx[keep]
    uid = np.concatenate([work_uid, sync_uid])
    is_sync = np.concatenate([np.zeros(len(work_uid), bool), np.ones(len(sync_uid), bool)])
    sort_by = np.where(is_sync, clock.row_end[uid], clock.row_ts[uid])
    order = np.lexsort((uid, sort_by))

    out: list[tuple[int, int, int, bool, int]] = []
    sync_pos = {int(u): j for j, u in enumerate(sync_uid)}
    time = clock.node
    kk_limit = options.kernel_kernel_threshold_ns
    last_node: dict[int, int] = {}  # stream -> end node of its last work (insertion ordered)
    kernel_sync: dict[int, int] = {}  # dest work uid -> source work uid (stream wait)
    for r in order.tolist():
        u = int(uid[r])
        if is_sync[r]:
            j = sync_pos[u]
            name, call = sync_name[j], int(call_idx[j])
            if name in ("Stream Wait Event", "Event Sync"):
                src_k = record_src.get(int(wait_corr[u]), -1) if wait_corr[u] != NA else -1
                if src_k < 0:
                    continue
                if name == "Stream Wait Event":
                    dest = launches.gpu_of_call.get(wait_dest.get(int(launcher[u]), -1), -1)
                    if dest >= 0:
                        kernel_sync[dest] = src_k
                else:
                    ki = int(n.index_of_uid[src_k])
                    if ki >= 0 and graph_gpu[ki]:
                        out.append((2 * ki + 1, 2 * call + 1, HtaEdge.SYNC_DEPENDENCY, False, -1))
            elif name == "Context Sync":
                out.extend(
                    (end, 2 * call + 1, HtaEdge.SYNC_DEPENDENCY, False, -1) for end in last_node.values()
                )
            elif name == "Stream Sync":
                end = last_node.get(int(stream_all[u]), -1)
                if end >= 0:
                    out.append((end, 2 * call + 1, HtaEdge.SYNC_DEPENDENCY, False, -1))
            continue
        i = int(n.index_of_uid[u])
        stream, runtime = int(stream_all[u]), int(li[i])
        out.append((2 * i, 2 * i + 1, HtaEdge.OPERATOR, False, i))
        sync_end = -1
        src_k = kernel_sync.pop(u, -1)
        if src_k >= 0:
            ki = int(n.index_of_uid[src_k])
            if ki >= 0 and graph_gpu[ki]:
                sync_end = 2 * ki + 1
                out.append((sync_end, 2 * i, HtaEdge.SYNC_DEPENDENCY, False, -1))
        prev = last_node.get(stream, -1)
        run_ts = time[2 * runtime]
        launch_added = False
        if (
            q_run.get(u, -1) == 1
            and q_kern.get(u, -1) == 0
            and (prev < 0 or time[prev] < run_ts)
            and (sync_end < 0 or time[sync_end] < run_ts)
        ):
            out.append((2 * runtime, 2 * i, HtaEdge.KERNEL_LAUNCH_DELAY, False, -1))
            launch_added = True
        elif (
            prev >= 0
            and (sync_end < 0 or time[sync_end] < time[prev])
            and (kk_limit is None or time[2 * i] - time[prev] <= kk_limit)
        ):
            out.append((prev, 2 * i, HtaEdge.KERNEL_KERNEL_DELAY, False, prev // 2))
        if options.zero_weight_launch_edges and not launch_added:
            out.append((2 * runtime, 2 * i, HtaEdge.KERNEL_LAUNCH_DELAY, True, -1))
        last_node[stream] = 2 * i + 1
    if not out:
        return empty_part()
    cols = list(zip(*out))
    return (
        np.asarray(cols[0], dtype=np.int64),
        np.asarray(cols[1], dtype=np.int64),
        np.asarray(cols[2], dtype=np.int8),
        np.asarray(cols[3], dtype=bool),
        np.asarray(cols[4], dtype=np.int64),
        np.zeros(len(out), dtype=bool),
    )


def _queue_lengths(launches: _Launches) -> tuple[dict[int, int], dict[int, int]]:
    """HTA's queue length per stream (whole trace): +1 at a launch, -1 at its work's start.

    Returns, per device-work uid, the value right after its launch and right after it
    starts. Streams are keyed by number alone, as HTA does.
    """
    if len(launches.call) == 0:
        return {}, {}
    m = len(launches.call)
    stream = np.concatenate([launches.stream, launches.stream])
    time = np.concatenate([launches.ts, launches.gpu_ts])
    delta = np.concatenate([np.ones(m, np.int64), -np.ones(m, np.int64)])
    tag = np.concatenate([launches.gpu, launches.gpu])
    order = np.lexsort((np.arange(2 * m), time, stream))
    s, d = stream[order], delta[order]
    csum = np.cumsum(d)
    first = np.ones(len(s), dtype=bool)
    first[1:] = s[1:] != s[:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(s)), 0))
    before = np.concatenate([[0], csum[:-1]])
    ql = csum - before[base]
    is_call = order < m
    q_run = dict(zip(tag[order][is_call].tolist(), ql[is_call].tolist()))
    q_kern = dict(zip(tag[order][~is_call].tolist(), ql[~is_call].tolist()))
    return q_run, q_kern


def _event_record_sources(t: EventTable, clock: Clock, launches: _Launches) -> dict[int, int]:
    """cudaEventRecord correlation -> uid of the device work launched last, at or before
    the record, onto the recorded (device, stream) named by sync records'
    ``wait_on_stream`` (HTA's ``index_previous_launch``)."""
    wait_stream = t.col("wait_on_stream")
    wait_corr = t.col("wait_on_event_corr")
    rows = np.flatnonzero((wait_stream != NA) & (wait_stream > -1) & (wait_corr != NA) & clock.kept)
    if len(rows) == 0 or len(launches.call) == 0:
        return {}
    dev = _devices(t)
    recorded: dict[int, tuple[int, int]] = {}
    for r in rows.tolist():
        recorded.setdefault(int(wait_corr[r]), (int(dev[r]), int(wait_stream[r])))
    rec = np.flatnonzero(name_lut(t, frozenset({"cudaEventRecord"}))[t.col("name")] & clock.kept)
    corr = t.col("correlation")
    by_queue = _group_launches(launches.device, launches.stream, mask=launches.paired)
    out: dict[int, int] = {}
    for r in rec.tolist():
        c = int(corr[r])
        if c not in recorded or c in out:
            continue
        idx = by_queue.get(recorded[c])
        if idx is None:
            continue
        pos = int(np.searchsorted(launches.ts[idx], clock.row_ts[r], side="right")) - 1
        if pos >= 0:
            out[c] = int(launches.gpu[idx[pos]])
    return out


def _stream_wait_targets(t: EventTable, clock: Clock, launches: _Launches, stream_all: I64) -> dict[int, int]:
    """cudaStreamWaitEvent call uid -> the first launch call after it from the same thread
    onto the stream it made wait (the stream of its Stream Wait Event record)."""
    kind = t.col("kind")
    launcher = t.col("launcher")
    recs = np.flatnonzero((kind == Kind.SYNC) & (launcher >= 0) & clock.kept)
    waits = recs[names_in(t, launcher[recs], frozenset({"cudaStreamWaitEvent"}))]
    if len(waits) == 0 or len(launches.call) == 0:
        return {}
    pid, tid = t.col("pid"), t.col("tid")
    by_queue = _group_launches(pid[launches.call], tid[launches.call], launches.stream, mask=launches.paired)
    out: dict[int, int] = {}
    for rec in waits.tolist():
        w = int(launcher[rec])
        idx = by_queue.get((int(pid[w]), int(tid[w]), int(stream_all[rec])))
        if idx is None:
            continue
        pos = int(np.searchsorted(launches.ts[idx], clock.row_ts[w], side="right"))
        if pos < len(idx):
            out[w] = int(launches.call[idx[pos]])
    return out


def _group_launches(*keys: I64, mask: B) -> dict[tuple[int, ...], I64]:
    """Positions of the masked launches (already in time order) grouped by key columns."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for pos, key in enumerate(zip(*(k.tolist() for k in keys))):
        if mask[pos]:
            groups.setdefault(key, []).append(pos)
    return {k: np.asarray(v, dtype=np.int64) for k, v in groups.items()}
