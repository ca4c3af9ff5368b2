"""HTA's whole edge list over ctda's nodes, in HTA's insertion order, with HTA's weights."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.hta.clock import Clock, names_in, window
from ctda.analysis.hta.cpu import call_stack_edges, lock_edges, thread_groups
from ctda.analysis.hta.gpu import gpu_edges, partners
from ctda.analysis.hta.model import (
    DEFAULT_OPTIONS,
    GPU_WORK,
    GRAPH_CPU_KINDS,
    RUNTIME_LOCK_CALLS,
    HtaEdge,
    HtaEdges,
    HtaOptions,
    Part,
)
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import Kind, in_kinds

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def build_edges(ctx: RuleContext, options: HtaOptions = DEFAULT_OPTIONS) -> HtaEdges:
    """HTA's edges over ctda's nodes, in HTA's insertion order, with HTA's weights.

    Order: runtime-lock chain (if enabled), then each CPU thread's call stack (threads in
    (pid, tid) order), then the GPU pass over kernels and sync records in time order.
    """
    t, n = ctx.table, ctx.nodes
    clock = Clock.of(t, n, options)
    lo, hi = window(t, clock, options)
    # HTA files a CPU slice that carries an integer ``args.stream`` (Triton launches carry
    # stream 0) as device work and drops it; runtime calls are kept (HIP writes "0x0",
    # which HTA cannot read as a number)
    stream = t.col("stream")[n.uid]
    host = (n.kind == Kind.RUNTIME) | (n.kind == Kind.DRIVER)
    cpu = ~n.is_gpu & (host | (stream == NA) | (stream == -1)) & clock.kept[n.uid]
    in_win = cpu & (clock.ev_ts >= lo) & (clock.ev_ts <= hi) & (clock.ev_end > clock.ev_ts)
    graph_cpu = in_win & in_kinds(n.kind, GRAPH_CPU_KINDS)
    launcher_uid = t.col("launcher")[n.uid]
    li = np.where(launcher_uid >= 0, n.index_of_uid[np.maximum(launcher_uid, 0)], -1)
    partner = partners(t)
    graph_gpu = (
        in_kinds(n.kind, GPU_WORK)
        & (li >= 0)
        & graph_cpu[np.maximum(li, 0)]
        & clock.kept[n.uid]
        & (partner[np.maximum(launcher_uid, 0)] == n.uid)
    )

    parts: list[Part] = []
    lock = names_in(t, n.uid, RUNTIME_LOCK_CALLS) & graph_cpu
    if options.runtime_lock:
        parts.append(lock_edges(n, clock, lock))
    groups = thread_groups(ctx, in_win, options)
    parts.append(
        call_stack_edges(ctx, clock, in_win, graph_cpu, groups, lock if options.runtime_lock else None)
    )
    parts.append(gpu_edges(ctx, clock, graph_cpu, graph_gpu, li, options))

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


def edges_of(ctx: RuleContext, options: HtaOptions = DEFAULT_OPTIONS) -> HtaEdges:
    """:func:`build_edges`, computed once per rule context and options: HTA's five rules
    and its longest path all read the same edge list."""
    cache: dict[HtaOptions, HtaEdges] = ctx.__dict__.setdefault("_hta_edges", {})
    if options not in cache:
        cache[options] = build_edges(ctx, options)
    return cache[options]
