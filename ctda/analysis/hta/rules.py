"""HTA's edges as ctda edge rules (family ``hta``), so a ctda Graph can hold HTA's graph."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.hta.edges import edges_of
from ctda.analysis.hta.model import HtaEdge, HtaEdges
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import rule

I64 = npt.NDArray[np.int64]


def _batch(ctx: RuleContext, htype: HtaEdge, etype: Callable[[HtaEdges, I64], Any]) -> EdgeBatch:
    """HTA's edges of one type (with HTA's default options), typed for ctda's graph."""
    e = edges_of(ctx)
    sel = np.flatnonzero(e.htype == int(htype))
    owner = e.attributed[sel] if htype == HtaEdge.OPERATOR else None
    return EdgeBatch.of(e.src[sel], e.dst[sel], etype(e, sel), owner=owner)


@rule("hta_operator", "hta")
def operator(ctx: RuleContext) -> EdgeBatch:
    """HTA operator edges: call-stack segments of CPU ops and GPU work start -> end.

    Reads ``ts``/``dur``, ``pid``/``tid``, ``cat`` and ``name`` (blocking calls weigh 0;
    see :func:`~ctda.analysis.hta.weights.graph_weights`). An event's own time; charged to
    the event HTA attributes it to.
    """

    def etype(e: HtaEdges, sel: I64) -> I64:
        own = (e.src[sel] // 2 == e.dst[sel] // 2) & (e.src[sel] % 2 == 0)
        return np.where(own, int(EdgeType.DURATION), int(EdgeType.SEGMENT))

    return _batch(ctx, HtaEdge.OPERATOR, etype)


@rule("hta_dependency", "hta")
def dependency(ctx: RuleContext) -> EdgeBatch:
    """HTA dependency edges (weight 0): previous top-level op end -> next top-level op start.

    Reads ``ts``/``dur`` and ``pid``/``tid`` (and, for the runtime-lock chain, the names of
    lock-taking CUDA calls on every thread). The thread's gap between operators weighs 0.
    """

    def etype(e: HtaEdges, sel: I64) -> I64:
        return np.where(e.cross_thread[sel], int(EdgeType.CROSS_THREAD), int(EdgeType.THREAD_SEQ))

    return _batch(ctx, HtaEdge.DEPENDENCY, etype)


@rule("hta_launch_delay", "hta")
def launch_delay(ctx: RuleContext) -> EdgeBatch:
    """HTA kernel launch delay: runtime call start -> kernel start when the stream was idle.

    Reads ``args.correlation`` pairing, ``args.stream`` and ``ts`` of launches and kernels
    over the whole trace (the stream queue length).
    """
    return _batch(ctx, HtaEdge.KERNEL_LAUNCH_DELAY, lambda e, s: int(EdgeType.LAUNCH))


@rule("hta_kernel_kernel_delay", "hta")
def kernel_kernel_delay(ctx: RuleContext) -> EdgeBatch:
    """HTA kernel-kernel delay: previous kernel end -> kernel start on the same stream.

    Reads ``args.stream`` and ``ts``/``dur`` of GPU work.
    """
    return _batch(ctx, HtaEdge.KERNEL_KERNEL_DELAY, lambda e, s: int(EdgeType.STREAM_SEQ))


@rule("hta_sync_dependency", "hta")
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

    return _batch(ctx, HtaEdge.SYNC_DEPENDENCY, etype)
