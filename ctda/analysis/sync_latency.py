"""A blocking call's own minimum return latency, per call kind, measured from the trace.

A blocking call returns some time after the device work it waits for ends: the driver
notices the completion (it polls a semaphore the GPU writes, or a blocking-sync thread is
woken by an interrupt), the runtime unwinds, and an operator like ``.item()`` still reads
the copied value and returns to Python. That latency is the sync edge's intrinsic weight
(docs/model.md#synchronisation): a sync edge that did not bind in the observed run weighs
``min(observed gap, latency)``, so replay stays exact while a faster host in a what-if
meets the queued work and returns that latency after it, not sooner.

The latency differs by the kind of call (a stream sync polls, an event sync may yield, a
free does work of its own after its wait, ``.item()`` reads a value), and by host and
driver, so it is read off the trace: among the calls of one kind that *did* block (their
awaited work ended after they began), the return latency is ``call end - awaited work
end``, and the kind's latency is a low quantile of those (scheduling and profiler overhead
only ever add to it; the lower tail is the call's own cost, and a quantile rather than the
minimum keeps one instance whose GPU and host clocks disagree by a few hundred ns from
setting it). A kind with no blocked instance in the trace falls back to :data:`KINDS`'
documented constant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.edges import EdgeType, floors
from ctda.analysis.graph import Graph
from ctda.analysis.rules import syncs
from ctda.analysis.rules.context import RuleContext

I64 = npt.NDArray[np.int64]

US = 1_000


@dataclass(frozen=True)
class CallKind:
    """One kind of blocking call: its label, the names it matches, its fallback latency."""

    label: str
    pattern: str
    fallback_ns: int


#: blocking call kinds, first match wins. The fallbacks, used only where a trace has no
#: blocked call of the kind: 5 µs for the calls that wait on the device, the lowest lower
#: decile of blocked stream synchronisations over the recorded H200 traces (4.9-25 µs per
#: trace, PyTorch 2.11, CUDA 13, profiled); 1 µs (the former sync floor) for a launching
#: call whose own copy ended inside it (0.2-12 µs where recorded)
KINDS: tuple[CallKind, ...] = (
    CallKind("stream sync", syncs.STREAM_SYNCS, 5 * US),
    CallKind("event sync", syncs.EVENT_SYNCS, 5 * US),
    CallKind("free", syncs.FREES, 5 * US),
    CallKind("device sync", syncs.DEVICE_SYNCS, 5 * US),
    CallKind("synchronous copy", syncs.SYNC_COPY_CALLS, 5 * US),
    CallKind("value read", syncs.SYNC_OPS, 5 * US),
    CallKind("other blocking call", r"", 1 * US),  # matches every name
)
#: the share of blocked instances allowed below the latency taken
QUANTILE = 0.1


@dataclass(frozen=True)
class Latencies:
    """Per kind of :data:`KINDS`: the latency used (ns), blocked instances seen, and the
    kind of every sync edge of the graph (-1 on other edges)."""

    ns: I64
    blocked: I64
    edge_kind: I64

    def table(self) -> pd.DataFrame:
        """One row per kind: label, latency, blocked instances, where the figure came from."""
        return pd.DataFrame(
            {
                "kind": [k.label for k in KINDS],
                "latency_ns": self.ns,
                "blocked": self.blocked,
                "source": np.where(self.blocked > 0, "trace", "constant"),
            }
        )


def call_kinds(ctx: RuleContext, calls: I64) -> I64:
    """Index into :data:`KINDS` of each analysed call (the first kind whose names match),
    each pattern tried once per distinct name among ``calls``."""
    codes, inv = np.unique(ctx.name_codes[calls], return_inverse=True)
    names = ctx.table.strings("name")[codes] if len(codes) else np.zeros(0, dtype=object)
    rx = [re.compile(k.pattern) for k in KINDS]
    kind = np.array(
        [next(i for i, r in enumerate(rx) if r.search(str(v or ""))) for v in names], dtype=np.int64
    )
    return kind[inv.ravel()] if len(codes) else np.zeros(0, dtype=np.int64)  # type: ignore[no-any-return]


def measure(ctx: RuleContext, g: Graph) -> Latencies:
    """Each kind's return latency from the graph's sync edges whose call blocked."""
    n = g.nodes
    sync = np.flatnonzero((g.etype == EdgeType.SYNC) & (g.dst < 2 * n.n) & (g.dst % 2 == 1))
    call = g.dst[sync] // 2
    kind = call_kinds(ctx, call)
    edge_kind = np.full(g.n_edges, -1, dtype=np.int64)
    edge_kind[sync] = kind
    work_end, call_end = n.time[g.src[sync]], n.time[g.dst[sync]]
    blocked = work_end > n.ts[call]
    # per blocked call, the work it waited for last: the smallest gap of its edges
    c, k, gap = call[blocked], kind[blocked], (call_end - work_end)[blocked]
    order = np.lexsort((gap, c))
    first = np.ones(len(order), dtype=bool)
    first[1:] = c[order][1:] != c[order][:-1]
    k, gap = k[order][first], gap[order][first]
    ns = np.array([k_.fallback_ns for k_ in KINDS], dtype=np.int64)
    count = np.bincount(k, minlength=len(KINDS)).astype(np.int64)
    for i in np.flatnonzero(count):  # at most one pass per kind
        ns[i] = int(np.quantile(gap[k == i], QUANTILE, method="lower"))
    return Latencies(ns=ns, blocked=count, edge_kind=edge_kind)


def edge_floors(ctx: RuleContext, g: Graph) -> I64:
    """Per edge, the most it may weigh when it does not bind: the edge type's floor, and
    for a sync edge its call kind's return latency (:func:`measure`)."""
    lat = measure(ctx, g)
    out = floors()[g.etype]
    is_sync = lat.edge_kind >= 0
    out[is_sync] = lat.ns[lat.edge_kind[is_sync]]
    return out  # type: ignore[no-any-return]


def union_floors(g: Graph, parts: Sequence[tuple[RuleContext, Graph, int]]) -> I64:
    """:func:`edge_floors` of a graph made of several traces' graphs (a job's ranks): each
    sync edge takes the latency its own trace measured for its call kind. ``parts`` holds,
    per trace, its rule context, its own graph and the index of its first event in ``g``."""
    out = floors()[g.etype]
    ev = g.dst // 2
    is_sync = (g.etype == EdgeType.SYNC) & (g.dst < 2 * g.nodes.n) & (g.dst % 2 == 1)
    for ctx, own, base in parts:
        sel = is_sync & (ev >= base) & (ev < base + ctx.nodes.n)
        if sel.any():
            out[sel] = measure(ctx, own).ns[call_kinds(ctx, ev[sel] - base)]
    return out  # type: ignore[no-any-return]
