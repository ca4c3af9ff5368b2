"""Rules within one CPU thread, all cut from the thread timeline (see ``timeline``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import rule

I64 = npt.NDArray[np.int64]


def _own_span(ctx: RuleContext) -> npt.NDArray[np.bool_]:
    tl = ctx.timeline
    return (tl.owner >= 0) & (tl.src == 2 * tl.owner) & (tl.dst == 2 * tl.owner + 1)


@rule("duration", "structural")
def duration(ctx: RuleContext) -> EdgeBatch:
    """start -> end of every event with nothing recorded inside it (CPU leaves, GPU work).

    Reads ``ts``/``dur``. The event's end is its start plus the work it did.
    """
    n, tl = ctx.nodes, ctx.timeline
    own = _own_span(ctx)
    gpu = np.flatnonzero(n.is_gpu)
    return EdgeBatch.of(
        np.concatenate([tl.src[own], n.start(gpu)]),
        np.concatenate([tl.dst[own], n.finish(gpu)]),
        EdgeType.DURATION,
        owner=np.concatenate([tl.owner[own], gpu]),
    )


@rule("nesting", "structural")
def nesting(ctx: RuleContext) -> EdgeBatch:
    """Self-time segments of an enclosing event, between consecutive boundaries inside it.

    Reads the call stack implied by ``ts``/``dur`` on each ``pid``/``tid``. A nested call
    cannot start before its caller reached it, and the caller cannot return before the
    nested call returned; the time between is the caller's own work, charged to it.
    """
    tl = ctx.timeline
    seg = (tl.owner >= 0) & ~_own_span(ctx)
    return EdgeBatch.of(tl.src[seg], tl.dst[seg], EdgeType.SEGMENT, owner=tl.owner[seg])


@rule("thread_sequence", "structural")
def thread_sequence(ctx: RuleContext) -> EdgeBatch:
    """end of one top-level event -> start of the next on the same CPU thread.

    Reads ``pid``/``tid`` and ``ts``/``dur``. A thread runs one thing at a time, so the next
    top-level call starts after the previous one returned; the gap between is time the
    thread spent outside any recorded event.
    """
    tl = ctx.timeline
    gap = tl.owner < 0
    return EdgeBatch.of(tl.src[gap], tl.dst[gap], EdgeType.THREAD_SEQ)
