"""HTA-compatible mode: HolisticTraceAnalysis' critical-path graph, weights and path.

HolisticTraceAnalysis (``hta.analyzers.critical_path_analysis``) builds a graph with the
same node model as ctda (a start and an end node per event) but fixed weights, and takes
its critical path as the *longest* weighted path through that DAG. This module rebuilds
HTA's edges over ctda's nodes (event ``i`` owns nodes ``2i``/``2i+1``) so a user can
reproduce HTA's answer and compare it with ctda's replay-calibrated one.

HTA's graph, as implemented here (weights are observed time gaps unless said otherwise):

* Events: CPU operators and runtime/driver calls (cats ``cpu_op``, ``cuda_runtime``,
  ``cuda_driver``; ctda's kinds, so also the legacy ``Operator``/``Runtime`` spellings)
  with ``dur > 0`` that start inside the window, and the GPU work they launched (kernels,
  copies, sets paired by ``args.correlation``).
* **operator** edges walk each CPU thread's call stack: parent start -> first child start,
  child end -> next child start, last child end -> parent end, a leaf's start -> end. The
  edge into the end of a blocking call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
  ``cudaEventQuery``, ``cudaEventSynchronize``, ``cudaMemcpy``, ``cudaMemcpyAsync``) weighs
  0: its wait is expressed by a sync edge instead. A GPU work item's start -> end is an
  operator edge too.
* **dependency** edges (weight 0) chain consecutive top-level operators of a thread: the
  time a thread spends outside any operator (Python, data loading, idling) is never on
  HTA's path ("CPU gaps weigh 0").
* **kernel launch delay**: runtime call start -> its kernel's start, only when the stream
  was idle at the launch (the stream's queue length, +1 per launch, -1 per kernel start,
  over the whole trace, is 1 right after the launch and 0 right after the kernel starts)
  and the previous kernel on the stream (and a stream-wait source, if any) ended before
  the launch.
* **kernel-kernel delay**: otherwise, previous kernel end -> kernel start on the stream
  (newer HTA: only across gaps up to 1.5 ms; a longer gap means something unrecorded held
  the stream, and the kernel gets no incoming edge at all).
* **sync dependency** (weight 0): from the ``cuda_sync`` records. Stream Sync: last
  kernel started on that stream (kernels ordered by start, sync records by end) -> end of
  the runtime call; Context Sync: the last kernel of every stream seen so far -> end of the
  call; Event Sync: the kernel launched last on the recorded stream before the matching
  ``cudaEventRecord`` -> end of the call; Stream Wait Event: that kernel -> start of the
  next kernel launched from the same thread onto the waiting stream.
* Cross-thread: none, except (newer HTA, after the 0.5.0 release) the backward thread is
  merged into the forward thread before the call stacks are walked, and calls that take
  the CUDA runtime lock (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ``cudaHostAlloc``) are
  chained by completion order across threads; that rule also gives those calls their full
  duration (``cudaMemcpyAsync`` is no longer zeroed). :class:`HtaOptions` selects these.

What HTA's loader does first is reproduced too: fractional-microsecond timestamps are
rounded inward to whole microseconds, the last ProfilerStep is dropped when there are two
or more, a launching call is paired with one device row only (the last sharing its
correlation, so only one kernel of a graph launch takes part), and CPU slices carrying an
integer ``args.stream`` are dropped.

The path is networkx' ``dag_longest_path`` with HTA's weights, reproduced with its tie
rules (first maximal predecessor in edge insertion order; the first node in networkx'
topological order among those of maximal distance ends the path), so the set of events on
the path matches HTA's ``args.critical`` marks exactly. Its length is HTA's critical path
length, usually shorter than the window since CPU gaps and waits weigh nothing.

Use :func:`hta_analysis` for the whole answer, :data:`RULES` to put HTA's edges into a
ctda :class:`~ctda.analysis.graph.Graph`, and :func:`graph_weights` for their HTA weights.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from numba import njit

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.nodes import Nodes, select
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import GPU_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

if TYPE_CHECKING:
    from collections.abc import Callable

    from ctda.analysis.engine import Analysis
    from ctda.analysis.graph import Graph

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


class HtaEdge(IntEnum):
    """HTA's edge types (``CPEdgeType``); ``str(HtaEdge.X)`` is HTA's name for it."""

    OPERATOR = 0
    DEPENDENCY = 1
    KERNEL_LAUNCH_DELAY = 2
    KERNEL_KERNEL_DELAY = 3
    SYNC_DEPENDENCY = 4

    def __str__(self) -> str:
        return HTA_NAMES[self]


HTA_NAMES = {
    HtaEdge.OPERATOR: "critical_path_operator",
    HtaEdge.DEPENDENCY: "critical_path_dependency",
    HtaEdge.KERNEL_LAUNCH_DELAY: "critical_path_kernel_launch_delay",
    HtaEdge.KERNEL_KERNEL_DELAY: "critical_path_kernel_kernel_delay",
    HtaEdge.SYNC_DEPENDENCY: "critical_path_sync_dependency",
}

#: HTA's ``BLOCKING_SYNC_CALLS``: the edge into their end weighs 0 (exact names)
BLOCKING_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
#: HTA's kernel/copy launching calls (queue length, event record/wait matching)
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
        "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream",
    }
)  # fmt: skip
#: calls that take the CUDA runtime lock (HTA after 0.5.0)
RUNTIME_LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})

_GRAPH_CPU_KINDS = frozenset({Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER})
_GPU_WORK = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET})


@dataclass(frozen=True)
class HtaOptions:
    """Which HTA to reproduce, and over which window.

    The defaults reproduce current HTA (the version that wrote the overlaid trace in
    ``tests/data/hta``). :meth:`release_0_5` gives the 0.5.0 release's rules.
    """

    #: HTA's ``annotation``: substring of event names bounding the window; "" = whole trace
    annotation: str = ""
    #: HTA's ``instance_id``: which match(es), by position in file order, inclusive range
    instance: int | tuple[int, int] = 0
    #: chain CUDA-runtime-lock calls across threads (HTA after 0.5.0)
    runtime_lock: bool = True
    #: walk the autograd thread's events as part of the forward thread (HTA after 0.5.0)
    merge_backward_thread: bool = True
    #: HTA's CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE: a 0-weight launch edge when the
    #: launch delay edge was not added (off by default in HTA)
    zero_weight_launch_edges: bool = False
    #: newer HTA (KERNEL_KERNEL_DELAY_THRESHOLD_US): no kernel-kernel edge across a
    #: longer stream gap (something unrecorded held the stream); None = no limit (0.5.0)
    kernel_kernel_threshold_ns: int | None = 1_500_000
    #: ``TraceAnalysis(include_last_profiler_step=...)``: by default HTA drops the last
    #: ProfilerStep of a trace with two or more
    include_last_profiler_step: bool = False

    @classmethod
    def release_0_5(cls, **kw: Any) -> HtaOptions:
        """The rules of the HolisticTraceAnalysis 0.5.0 release (no cross-thread edges)."""
        return cls(runtime_lock=False, merge_backward_thread=False, kernel_kernel_threshold_ns=None, **kw)


DEFAULT_OPTIONS = HtaOptions()


@dataclass
class HtaEdges:
    """HTA's edges over ctda node ids, in HTA's insertion order (which decides ties)."""

    src: I64
    dst: I64
    htype: npt.NDArray[np.int8]  # HtaEdge code
    weight: I64  # HTA's weight in ns (observed gap, or 0), never negative
    attributed: I64  # analysed event HTA charges the edge to (operator, kernel-kernel), else -1
    cross_thread: B  # lock-rule dependency between threads
    events: I64  # analysed indices of the events HTA's graph has nodes for
    time: I64  # per ctda node: its time as HTA sees it (ns)
    negative_clamped: int = 0  # edges HTA would weigh negative (timestamp skew), set to 0

    def __len__(self) -> int:
        return len(self.src)


@dataclass
class HtaResult:
    """HTA's critical path over one trace, on ctda's analysed events."""

    nodes: Nodes
    edges: HtaEdges
    path_nodes: I64  # ctda node ids, SOURCE side first
    path_edges: I64  # indices into ``edges`` (len(path_nodes) - 1)
    path_events: I64  # sorted analysed indices of the events owning a path node (HTA's args.critical)
    length_ns: int  # HTA's critical path length (sum of path edge weights)
    per_event_cp_ns: I64  # per analysed event: weight of path edges HTA attributes to it
    bound_by_ns: dict[str, int] = field(default_factory=dict)  # HTA's summary() classes

    @property
    def path_uids(self) -> I64:
        """Trace uids (indices in the file's event array) of the critical events."""
        return self.nodes.uid[self.path_events]

    @property
    def span_ns(self) -> int:
        """Time from the path's first node to its last; the length counts only weights, so
        the difference is what HTA leaves out (CPU gaps, waits, blocking calls)."""
        if len(self.path_nodes) == 0:
            return 0
        t = self.edges.time
        return int(t[self.path_nodes[-1]] - t[self.path_nodes[0]])

    def path_frame(self, table: EventTable) -> pd.DataFrame:
        """One row per path edge, in path order: HTA type, times (HTA's clock), weight, the
        event HTA attributes it to (analysed index, uid, name; -1/"" for none)."""
        e, n = self.edges, self.nodes
        pe = self.path_edges
        att = e.attributed[pe]
        uid = np.where(att >= 0, n.uid[np.maximum(att, 0)], -1)
        names = table.decoded("name", np.maximum(uid, 0))
        return pd.DataFrame(
            {
                "type": [HTA_NAMES[HtaEdge(int(x))] for x in e.htype[pe]],
                "src": e.src[pe],
                "dst": e.dst[pe],
                "t0_ns": e.time[e.src[pe]],
                "t1_ns": e.time[e.dst[pe]],
                "weight_ns": e.weight[pe],
                "event": att,
                "uid": uid,
                "name": np.where(att >= 0, names, ""),
            }
        )


# --- entry points --------------------------------------------------------------------------


def hta_analysis(table: EventTable, options: HtaOptions | None = None) -> HtaResult:
    """HTA's critical path of ``table``: edges, weights, longest path, attribution."""
    nodes = select(table)
    return _analyse(RuleContext(table, nodes), options or DEFAULT_OPTIONS)


def hta_critical_path(analysis: Analysis, options: HtaOptions | None = None) -> HtaResult:
    """HTA's critical path over the nodes of an existing ctda analysis (same event indices)."""
    return _analyse(RuleContext(analysis.table, analysis.nodes), options or DEFAULT_OPTIONS)


def _analyse(ctx: RuleContext, options: HtaOptions) -> HtaResult:
    edges = build_edges(ctx, options)
    path_nodes, path_edges, length = longest_path(ctx.nodes.n_nodes, edges.src, edges.dst, edges.weight)
    n = ctx.nodes.n
    events = np.unique(path_nodes // 2) if len(path_nodes) else np.zeros(0, dtype=np.int64)
    per_event = np.zeros(n, dtype=np.int64)
    att = edges.attributed[path_edges]
    ok = att >= 0
    np.add.at(per_event, att[ok], edges.weight[path_edges][ok])
    return HtaResult(
        nodes=ctx.nodes,
        edges=edges,
        path_nodes=path_nodes,
        path_edges=path_edges,
        path_events=events.astype(np.int64),
        length_ns=int(length),
        per_event_cp_ns=per_event,
        bound_by_ns=_bound_by(ctx, edges, path_edges),
    )


def _bound_by(ctx: RuleContext, edges: HtaEdges, path: I64) -> dict[str, int]:
    """HTA's ``summary()`` classes: launch and kernel-kernel overheads, then operator time
    of CPU events, GPU communication kernels and other GPU work."""
    from ctda.analysis.classify import COMM_RE

    t, w, ev = edges.htype[path], edges.weight[path], edges.attributed[path]
    op = (t == HtaEdge.OPERATOR) & (ev >= 0)
    gpu = ctx.nodes.is_gpu[np.maximum(ev, 0)]
    comm = ctx.name_mask(COMM_RE)[np.maximum(ev, 0)]
    return {
        "cpu_bound": int(w[op & ~gpu].sum()),
        "gpu_compute_bound": int(w[op & gpu & ~comm].sum()),
        "gpu_communication_bound": int(w[op & gpu & comm].sum()),
        "gpu_kernel_kernel_overhead": int(w[t == HtaEdge.KERNEL_KERNEL_DELAY].sum()),
        "gpu_kernel_launch_overhead": int(w[t == HtaEdge.KERNEL_LAUNCH_DELAY].sum()),
    }


# --- rules (EdgeBatches for a ctda Graph) ---------------------------------------------------


def _cached(ctx: RuleContext) -> HtaEdges:
    """HTA edges with default options, computed once per rule context."""
    key = "_hta_edges"
    if key not in ctx.__dict__:
        ctx.__dict__[key] = build_edges(ctx, DEFAULT_OPTIONS)
    out: HtaEdges = ctx.__dict__[key]
    return out


def _batch(ctx: RuleContext, htype: HtaEdge, rule: str, etype: Callable[[HtaEdges, I64], Any]) -> EdgeBatch:
    e = _cached(ctx)
    sel = np.flatnonzero(e.htype == int(htype))
    owner = e.attributed[sel] if htype == HtaEdge.OPERATOR else None
    return EdgeBatch.of(e.src[sel], e.dst[sel], etype(e, sel), rule, owner=owner)


def operator(ctx: RuleContext) -> EdgeBatch:
    """HTA operator edges: call-stack segments of CPU ops and GPU work start -> end.

    Reads ``ts``/``dur``, ``pid``/``tid``, ``cat`` and names (blocking calls weigh 0; see
    :func:`graph_weights`). An event's own time; charged to the event HTA attributes it to.
    """

    def etype(e: HtaEdges, sel: I64) -> I64:
        own = (e.src[sel] // 2 == e.dst[sel] // 2) & (e.src[sel] % 2 == 0)
        return np.where(own, int(EdgeType.DURATION), int(EdgeType.SEGMENT))

    return _batch(ctx, HtaEdge.OPERATOR, "hta_operator", etype)


def dependency(ctx: RuleContext) -> EdgeBatch:
    """HTA dependency edges (weight 0): previous top-level op end -> next top-level op start.

    Reads ``ts``/``dur`` and ``pid``/``tid`` (and, for the runtime-lock chain, the names of
    lock-taking CUDA calls on every thread). The thread's gap between operators weighs 0.
    """

    def etype(e: HtaEdges, sel: I64) -> I64:
        return np.where(e.cross_thread[sel], int(EdgeType.CROSS_THREAD), int(EdgeType.THREAD_SEQ))

    return _batch(ctx, HtaEdge.DEPENDENCY, "hta_dependency", etype)


def launch_delay(ctx: RuleContext) -> EdgeBatch:
    """HTA kernel launch delay: runtime call start -> kernel start when the stream was idle.

    Reads ``args.correlation`` pairing, ``args.stream`` and ``ts`` of launches and kernels
    over the whole trace (the stream queue length).
    """
    return _batch(ctx, HtaEdge.KERNEL_LAUNCH_DELAY, "hta_launch_delay", lambda e, s: int(EdgeType.LAUNCH))


def kernel_kernel_delay(ctx: RuleContext) -> EdgeBatch:
    """HTA kernel-kernel delay: previous kernel end -> kernel start on the same stream.

    Reads ``args.stream`` and ``ts``/``dur`` of GPU work.
    """
    return _batch(
        ctx, HtaEdge.KERNEL_KERNEL_DELAY, "hta_kernel_kernel_delay", lambda e, s: int(EdgeType.STREAM_SEQ)
    )


def sync_dependency(ctx: RuleContext) -> EdgeBatch:
    """HTA sync dependency (weight 0): GPU work end -> end of the CPU call waiting for it,
    or -> start of the kernel a ``cudaStreamWaitEvent`` held back.

    Reads ``cuda_sync`` records (name, ``args.stream``, ``args.correlation``,
    ``args.wait_on_stream``, ``args.wait_on_cuda_event_record_corr_id``) and
    ``cudaEventRecord``/``cudaStreamWaitEvent`` calls.
    """

    def etype(e: HtaEdges, sel: I64) -> I64:
        to_start = e.dst[sel] % 2 == 0
        return np.where(to_start, int(EdgeType.STREAM_WAIT), int(EdgeType.SYNC))

    return _batch(ctx, HtaEdge.SYNC_DEPENDENCY, "hta_sync_dependency", etype)


RULES: tuple[Callable[[RuleContext], EdgeBatch], ...] = (
    operator,
    dependency,
    launch_delay,
    kernel_kernel_delay,
    sync_dependency,
)


def graph_weights(g: Graph, edges: HtaEdges) -> I64:
    """HTA's weight of every edge of a Graph built from :data:`RULES` (0 for release and
    terminal edges), looked up by (src, dst); a repeated edge weighs what HTA gave it last.

    ``edges`` is :attr:`HtaResult.edges` (or :func:`build_edges`) over the graph's nodes.
    """
    m = g.nodes.n_nodes
    if len(edges) == 0:
        return np.zeros(g.n_edges, dtype=np.int64)
    key = edges.src * m + edges.dst
    order = np.argsort(key, kind="stable")
    k_sorted = key[order]
    last = np.ones(len(k_sorted), dtype=bool)
    last[:-1] = k_sorted[:-1] != k_sorted[1:]
    k_sorted, w_sorted = k_sorted[last], edges.weight[order][last]
    q = g.src * m + g.dst
    pos = np.clip(np.searchsorted(k_sorted, q), 0, len(k_sorted) - 1)
    return np.where(k_sorted[pos] == q, w_sorted[pos], 0).astype(np.int64)


# --- edge construction ----------------------------------------------------------------------


US = 1_000  # ns per microsecond


@dataclass
class _Clock:
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
    def of(cls, table: EventTable, nodes: Nodes, options: HtaOptions) -> _Clock:
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
    device = on_device & (stream != NA) & (stream >= 0) & (corr_v >= 0) | _names_in(
        table, np.arange(len(ts)), _DEVICE_SYNCS
    )
    cpu_step = step & ~device
    if not cpu_step.any():
        return np.ones(len(ts), dtype=bool)
    last_start = ts[cpu_step].max()
    keep_cpu = rows & ~device & (ts < last_start)
    return keep_cpu | (device & np.isin(corr_v, np.unique(corr_v[keep_cpu])))


_DEVICE_SYNCS = frozenset({"Context Sync", "Event Sync"})


def _name_lut(table: EventTable, names: frozenset[str]) -> B:
    values = table.strings("name")
    return np.array([v in names for v in values] + [False], dtype=bool)


def _names_in(table: EventTable, rows: I64, names: frozenset[str]) -> B:
    codes = table.col("name")[rows]
    lut = _name_lut(table, names)
    return lut[np.where(codes >= 0, codes, len(lut) - 1)]


def _window(table: EventTable, clock: _Clock, options: HtaOptions) -> tuple[int, int]:
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


Part = tuple[
    I64, I64, npt.NDArray[np.int8], B, I64, B
]  # src, dst, type, zero weight, attributed, cross-thread


def build_edges(ctx: RuleContext, options: HtaOptions = DEFAULT_OPTIONS) -> HtaEdges:
    """HTA's edges over ctda's nodes, in HTA's insertion order, with HTA's weights.

    Order: runtime-lock chain (if enabled), then each CPU thread's call stack (threads in
    (pid, tid) order), then the GPU pass over kernels and sync records in time order.
    """
    t, n = ctx.table, ctx.nodes
    clock = _Clock.of(t, n, options)
    lo, hi = _window(t, clock, options)
    # HTA files a CPU slice that carries an integer ``args.stream`` (Triton launches carry
    # stream 0) as device work and drops it; runtime calls are kept (HIP writes "0x0",
    # which HTA cannot read as a number)
    stream = t.col("stream")[n.uid]
    host = (n.kind == Kind.RUNTIME) | (n.kind == Kind.DRIVER)
    cpu = ~n.is_gpu & (host | (stream == NA) | (stream == -1)) & clock.kept[n.uid]
    in_win = cpu & (clock.ev_ts >= lo) & (clock.ev_ts <= hi) & (clock.ev_end > clock.ev_ts)
    graph_cpu = in_win & in_kinds(n.kind, _GRAPH_CPU_KINDS)
    launcher_uid = t.col("launcher")[n.uid]
    li = np.where(launcher_uid >= 0, n.index_of_uid[np.maximum(launcher_uid, 0)], -1)
    partner = _partners(t)
    graph_gpu = (
        in_kinds(n.kind, _GPU_WORK)
        & (li >= 0)
        & graph_cpu[np.maximum(li, 0)]
        & clock.kept[n.uid]
        & (partner[np.maximum(launcher_uid, 0)] == n.uid)
    )

    parts: list[Part] = []
    lock = _names_in(t, n.uid, RUNTIME_LOCK_CALLS) & graph_cpu
    if options.runtime_lock:
        parts.append(_lock_edges(n, clock, lock))
    groups = _thread_groups(ctx, in_win, options)
    parts.append(
        _call_stack_edges(ctx, clock, in_win, graph_cpu, groups, lock if options.runtime_lock else None)
    )
    parts.append(_gpu_edges(ctx, clock, graph_cpu, graph_gpu, li, options))

    src = np.concatenate([p[0] for p in parts])
    dst = np.concatenate([p[1] for p in parts])
    ht = np.concatenate([p[2] for p in parts]).astype(np.int8)
    zero = np.concatenate([p[3] for p in parts])
    timed = (
        (ht == HtaEdge.OPERATOR) | (ht == HtaEdge.KERNEL_LAUNCH_DELAY) | (ht == HtaEdge.KERNEL_KERNEL_DELAY)
    )
    weight = np.where(timed & ~zero, clock.node[dst] - clock.node[src], 0)
    return HtaEdges(
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        htype=ht,
        weight=np.maximum(weight, 0).astype(np.int64),
        attributed=np.concatenate([p[4] for p in parts]).astype(np.int64),
        cross_thread=np.concatenate([p[5] for p in parts]),
        events=np.flatnonzero(graph_cpu | graph_gpu).astype(np.int64),
        time=clock.node,
        negative_clamped=int((weight < 0).sum()),
    )


def _partners(t: EventTable) -> I64:
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


def _empty_part() -> Part:
    z = np.zeros(0, dtype=np.int64)
    return z, z, np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool), z, np.zeros(0, dtype=bool)


def _lock_edges(n: Nodes, clock: _Clock, lock: B) -> Part:
    """CUDA runtime lock chain (HTA after 0.5.0).

    Reads names and ``ts``/``dur`` of lock-taking calls on every thread. Their boundaries
    are walked in (time, uid) order; each end closes every call started since the previous
    end (its own start -> end is an operator edge, another call's start -> it a dependency),
    and follows the previous boundary when that was an end (the lock passed on).
    """
    ev = np.flatnonzero(lock)
    if len(ev) == 0:
        return _empty_part()
    node = np.concatenate([2 * ev, 2 * ev + 1])
    order = np.lexsort((n.uid[node // 2], clock.node[node]))
    src, dst, own = _lock_walk(node[order].astype(np.int64))
    ht = np.where(own, int(HtaEdge.OPERATOR), int(HtaEdge.DEPENDENCY)).astype(np.int8)
    att = np.where(own, dst // 2, -1)
    cross = ~own & (n.lane[src // 2] != n.lane[dst // 2])
    return src, dst, ht, np.zeros(len(src), dtype=bool), att, cross


@njit(cache=True)  # type: ignore[misc]
def _lock_walk(nodes):  # type: ignore[no-untyped-def]  # pragma: no cover
    m = nodes.shape[0]
    src = np.empty(2 * m, dtype=np.int64)
    dst = np.empty(2 * m, dtype=np.int64)
    own = np.empty(2 * m, dtype=np.bool_)
    pending = np.empty(m, dtype=np.int64)
    sp = 0
    k = 0
    last = -1
    for i in range(m):
        v = nodes[i]
        if v % 2 == 0:
            pending[sp] = v
            sp += 1
        else:
            while sp > 0:
                sp -= 1
                u = pending[sp]
                src[k] = u
                dst[k] = v
                own[k] = u // 2 == v // 2
                k += 1
            if last >= 0 and last % 2 == 1:
                src[k] = last
                dst[k] = v
                own[k] = False
                k += 1
        last = v
    return src[:k], dst[:k], own[:k]


def _label_key(values: npt.NDArray[np.object_]) -> list[tuple[int, float, str]]:
    """Sort key for pid/tid labels: numbers numerically, then text (pandas groupby order)."""
    out = []
    for v in values:
        try:
            out.append((0, float(v), ""))
        except (TypeError, ValueError):
            out.append((1, 0.0, str(v)))
    return out


def _thread_groups(ctx: RuleContext, in_win: B, options: HtaOptions) -> I64:
    """Call-stack group of every analysed CPU event: its (pid, tid), with the backward
    thread merged into the forward thread when enabled; groups numbered in (pid, tid) order.

    Reads ``pid``/``tid``, ``cat`` and names: HTA takes as forward (backward) thread the
    only thread with a ``cpu_op`` or ``user_annotation`` whose name contains "forward"
    ("autograd") in the window.
    """
    n = ctx.nodes
    lanes = ctx.lanes.sort_values("lane")
    pid = lanes["pid"].to_numpy(dtype=object)
    tid = lanes["tid"].to_numpy(dtype=object)
    if options.merge_backward_thread:
        fwd = _only_thread(ctx, in_win, "forward")
        bwd = _only_thread(ctx, in_win, "autograd")
        if fwd is not None and bwd is not None and fwd != bwd:
            tid = np.array([fwd if x == bwd else x for x in tid], dtype=object)
    keys = list(zip(_label_key(pid), _label_key(tid)))
    code = {k: i for i, k in enumerate(sorted(set(keys)))}
    lane_group = np.array([code[k] for k in keys], dtype=np.int64)
    return np.where(n.lane >= 0, lane_group[np.maximum(n.lane, 0)], -1)


def _only_thread(ctx: RuleContext, in_win: B, needle: str) -> object | None:
    n = ctx.nodes
    kinds = (n.kind == Kind.CPU_OP) | (n.kind == Kind.USER_ANNOTATION)
    named = ctx.name_mask(re.escape(needle)) & in_win & kinds
    if not named.any():
        return None
    tids = set(ctx.lanes.sort_values("lane")["tid"].to_numpy(dtype=object)[n.lane[named]].tolist())
    return next(iter(tids)) if len(tids) == 1 else None


def _call_stack_edges(
    ctx: RuleContext, clock: _Clock, in_win: B, graph_cpu: B, groups: I64, lock: B | None
) -> Part:
    """HTA's call-stack walk on every CPU thread (``CallStackGraph`` + DFS callbacks).

    Reads ``ts``/``dur`` and ``pid``/``tid`` of every CPU slice with ``dur > 0`` (any
    category), names of blocking calls, and (newer HTA) lock-taking calls. Boundaries are
    ordered as HTA's ``compare_events``: by time; at one instant ends before starts, ends
    shorter-first (then higher uid first), starts longer-first (then lower uid first). A
    start's parent is the top of the stack; an end pops the top of the stack, whichever
    event that is. Only graph events (ops, runtime/driver calls) emit edges; annotations
    and Python frames shape the stack and are otherwise transparent.
    """
    n = ctx.nodes
    ev = np.flatnonzero(in_win)
    if len(ev) == 0:
        return _empty_part()
    dur = clock.ev_end[ev] - clock.ev_ts[ev]
    uid = n.uid[ev]
    k = len(ev)
    node = np.concatenate([2 * ev, 2 * ev + 1])
    time = np.concatenate([clock.ev_ts[ev], clock.ev_end[ev]])
    is_start = np.concatenate([np.ones(k, np.int64), np.zeros(k, np.int64)])  # ends (0) first
    k3 = np.concatenate([-dur, dur])
    k4 = np.concatenate([uid, -uid])
    grp = np.concatenate([groups[ev], groups[ev]])
    order = np.lexsort((k4, k3, is_start, time, grp))
    blocking = _names_in(ctx.table, n.uid, BLOCKING_SYNC_CALLS)
    lk = lock if lock is not None else np.zeros(n.n, dtype=bool)
    src, dst, ht, zero, att = _stack_walk(
        node[order].astype(np.int64), grp[order].astype(np.int64), graph_cpu, blocking, lk, lock is not None
    )
    return src, dst, ht.astype(np.int8), zero, att, np.zeros(len(src), dtype=bool)


@njit(cache=True)  # type: ignore[misc]
def _stack_walk(nodes, grp, is_op, blocking, lock, newer):  # type: ignore[no-untyped-def]  # pragma: no cover
    m = nodes.shape[0]
    src = np.empty(2 * m, dtype=np.int64)
    dst = np.empty(2 * m, dtype=np.int64)
    ht = np.empty(2 * m, dtype=np.int64)
    zero = np.zeros(2 * m, dtype=np.bool_)
    att = np.empty(2 * m, dtype=np.int64)
    parent = np.full(is_op.shape[0], -1, dtype=np.int64)
    stack = np.empty(m, dtype=np.int64)
    sp = 0
    k = 0
    last = -1  # last node visited on this thread
    last_top = -1  # end node of the previous top-level op (HTA 0.5's last_highlevel_op)
    last_parent = -1
    depth = 0
    for i in range(m):
        if i == 0 or grp[i] != grp[i - 1]:
            sp = 0
            last = -1
            last_top = -1
            last_parent = -1
            depth = 0
        v = nodes[i]
        if v % 2 == 0:
            e = v // 2
            parent[e] = stack[sp - 1] if sp > 0 else -1
            stack[sp] = e
            sp += 1
            if not is_op[e]:
                continue
            if newer:
                if last >= 0 and not (lock[last // 2] and lock[e] and last % 2 == 0):
                    src[k] = last
                    dst[k] = v
                    ht[k] = 1 if depth == 0 else 0
                    att[k] = -1 if depth == 0 else _attr(last, v, last_parent)
                    k += 1
            else:
                if depth == 0 and last_top >= 0:
                    src[k] = last_top
                    dst[k] = v
                    ht[k] = 1
                    att[k] = -1
                    k += 1
                if last >= 0:
                    src[k] = last
                    dst[k] = v
                    ht[k] = 0
                    att[k] = _attr(last, v, last_parent)
                    k += 1
            last = v
            last_parent = parent[e]
            depth += 1
        else:
            if sp == 0:
                continue
            sp -= 1
            e = stack[sp]  # HTA pops the top, whichever event ended
            if not is_op[e]:
                continue
            w = 2 * e + 1
            depth -= 1
            if last >= 0 and not (newer and lock[last // 2] and lock[e]):
                src[k] = last
                dst[k] = w
                ht[k] = 0
                zero[k] = blocking[e]
                att[k] = _attr(last, w, last_parent)
                k += 1
            if not newer and depth == 0:
                last = -1
                last_top = w
            else:
                last = w
                last_parent = parent[e]
    return src[:k], dst[:k], ht[:k], zero[:k], att[:k]


@njit(cache=True)  # type: ignore[misc]
def _attr(a, b, parent):  # type: ignore[no-untyped-def]  # pragma: no cover
    """HTA's attribution of an operator edge a -> b: a start's event, else b's if b is an
    end, else (end -> start) the call-stack parent of a's event."""
    if a % 2 == 0:
        return a // 2
    if b % 2 == 1:
        return b // 2
    return parent


@dataclass
class _Launches:
    """HTA's launching calls that have device work, over the whole trace, by start time."""

    call: I64  # uid of the call
    gpu: I64  # uid of its device work (or sync record)
    device: I64
    stream: I64
    ts: I64  # of the call
    gpu_ts: I64  # of the device work
    paired: B  # the device row is the one HTA links the call to (see _partners)
    gpu_of_call: dict[int, int]

    @classmethod
    def of(cls, t: EventTable, clock: _Clock, stream_all: I64) -> _Launches:
        kind = t.col("kind")
        launcher = t.col("launcher")
        gpu = np.flatnonzero(in_kinds(kind, _GPU_WORK | {Kind.SYNC}) & (launcher >= 0) & clock.kept)
        call = launcher[gpu]
        ok = _names_in(t, call, LAUNCH_CALLS) & clock.kept[call]
        call, gpu = call[ok], gpu[ok]
        order = np.lexsort((call, clock.row_ts[call]))
        call, gpu = call[order], gpu[order]
        device = _devices(t)[gpu]
        partner = _partners(t)
        paired = partner[call] == gpu
        gpu_of_call = dict(zip(call[paired].tolist(), gpu[paired].tolist()))
        return cls(
            call, gpu, device, stream_all[gpu], clock.row_ts[call], clock.row_ts[gpu], paired, gpu_of_call
        )


def _devices(t: EventTable) -> I64:
    dev = t.lanes.sort_values("lane")["device"].to_numpy(dtype=np.int64)
    lane = t.col("lane")
    return np.where(lane >= 0, dev[np.maximum(lane, 0)], NA)


def _gpu_edges(
    ctx: RuleContext, clock: _Clock, graph_cpu: B, graph_gpu: B, li: I64, options: HtaOptions
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
    partner = _partners(t)
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
        return _empty_part()
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


def _event_record_sources(t: EventTable, clock: _Clock, launches: _Launches) -> dict[int, int]:
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
    rec = np.flatnonzero(_name_lut(t, frozenset({"cudaEventRecord"}))[t.col("name")] & clock.kept)
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


def _stream_wait_targets(
    t: EventTable, clock: _Clock, launches: _Launches, stream_all: I64
) -> dict[int, int]:
    """cudaStreamWaitEvent call uid -> the first launch call after it from the same thread
    onto the stream it made wait (the stream of its Stream Wait Event record)."""
    kind = t.col("kind")
    launcher = t.col("launcher")
    recs = np.flatnonzero((kind == Kind.SYNC) & (launcher >= 0) & clock.kept)
    waits = recs[_names_in(t, launcher[recs], frozenset({"cudaStreamWaitEvent"}))]
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


# --- longest path (networkx.dag_longest_path semantics) -------------------------------------


def longest_path(n_nodes: int, src: I64, dst: I64, weight: I64) -> tuple[I64, I64, int]:
    """networkx' ``dag_longest_path`` over edges given in insertion order.

    Nodes exist only through edges and are ordered by first appearance; a repeated edge
    keeps its first position and its last weight; the topological order is networkx'
    (generations, FIFO); each node takes its first maximal predecessor; the path ends at
    the first node (in that order) of maximal distance. Returns (path nodes, path edge
    indices into the given arrays, length).
    """
    if len(src) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    flat = np.empty(2 * len(src), dtype=np.int64)
    flat[0::2], flat[1::2] = src, dst
    uniq, first = np.unique(flat, return_index=True)
    ids = uniq[np.argsort(first, kind="stable")]  # compact id -> node, insertion order
    compact = np.full(n_nodes, -1, dtype=np.int64)
    compact[ids] = np.arange(len(ids))
    cs, cd = compact[src], compact[dst]
    key = cs * len(ids) + cd
    order = np.argsort(key, kind="stable")
    ks = key[order]
    grp_first = np.ones(len(ks), dtype=bool)
    grp_first[1:] = ks[1:] != ks[:-1]
    grp_last = np.ones(len(ks), dtype=bool)
    grp_last[:-1] = ks[1:] != ks[:-1]
    keep = np.sort(order[grp_first])  # first position of each distinct edge
    last_of = np.empty(len(ks), dtype=np.int64)
    last_of[grp_first] = order[grp_last]  # edge index carrying the last weight
    rep = np.empty(len(key), dtype=np.int64)
    rep[order[grp_first]] = last_of[grp_first]
    e_src, e_dst, e_w = cs[keep], cd[keep], weight[rep[keep]]
    m = len(ids)
    in_order = np.argsort(e_dst, kind="stable")
    in_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_dst, minlength=m), out=in_ptr[1:])
    out_order = np.argsort(e_src, kind="stable")
    out_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_src, minlength=m), out=out_ptr[1:])
    path_c, path_e, length, ok = _nx_longest(
        m, e_src, e_dst, e_w.astype(np.int64), in_ptr, in_order, out_ptr, out_order
    )
    if not ok:
        raise ValueError("HTA graph has a cycle")
    return ids[path_c], keep[path_e], int(length)


@njit(cache=True)  # type: ignore[misc]
def _nx_longest(m, src, dst, w, in_ptr, in_order, out_ptr, out_order):  # type: ignore[no-untyped-def]  # pragma: no cover
    indeg = in_ptr[1:] - in_ptr[:-1]
    deg = indeg.copy()
    topo = np.empty(m, dtype=np.int64)
    tail = 0
    for v in range(m):
        if deg[v] == 0:
            topo[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = topo[head]
        head += 1
        for j in range(out_ptr[v], out_ptr[v + 1]):
            c = dst[out_order[j]]
            deg[c] -= 1
            if deg[c] == 0:
                topo[tail] = c
                tail += 1
    if tail < m:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0, False
    dist = np.zeros(m, dtype=np.int64)
    via = np.full(m, -1, dtype=np.int64)  # edge taken into the node, -1 at a path start
    for k in range(m):
        v = topo[k]
        best = -1
        best_e = -1
        for j in range(in_ptr[v], in_ptr[v + 1]):
            e = in_order[j]
            d = dist[src[e]] + w[e]
            if best_e < 0 or d > best:
                best = d
                best_e = e
        if best_e >= 0 and best >= 0:
            dist[v] = best
            via[v] = best_e
    end = topo[0]
    for k in range(m):
        if dist[topo[k]] > dist[end]:
            end = topo[k]
    n_path = 1
    v = end
    while via[v] >= 0:
        v = src[via[v]]
        n_path += 1
    nodes = np.empty(n_path, dtype=np.int64)
    edges = np.empty(n_path - 1, dtype=np.int64)
    v = end
    i = n_path - 1
    nodes[i] = v
    while via[v] >= 0:
        edges[i - 1] = via[v]
        v = src[via[v]]
        i -= 1
        nodes[i] = v
    return nodes, edges, dist[end], True
