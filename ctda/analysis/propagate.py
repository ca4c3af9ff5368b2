"""Stage: max-plus propagation, binding edges, critical path and slack (compiled).

``t(v) = max over edges u->v of t(u) + w(u,v)`` in topological order; the edge achieving
the max is binding (ties prefer the calibrated binding edge, then PRIORITY). The critical
path is the chain of binding edges back from SINK. Slack is latest minus earliest time,
from a backward pass with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ctda.analysis.calibrate import PRIORITY
from ctda.analysis.graph import Graph
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


@dataclass
class Timing:
    """One replay of the graph: node times and each node's binding in-edge; the whole
    trace's path and the slack on first use (a what-if's prediction needs neither, and
    they are a third of a replay's time)."""

    time: I64
    binding_edge: I64  # per node; -1 for SOURCE
    graph: Graph = field(repr=False)
    weight: I64 = field(repr=False)
    ends: I64 = field(repr=False)  # SINK and the anchors slack is measured against
    t_source: int = 0
    rank: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)  # ties, per edge

    @cached_property
    def path(self) -> I64:
        """Edge ids from SOURCE to SINK: the whole trace's critical path."""
        g = self.graph
        return _backtrack_until(self.binding_edge, g.src, self.time, g.nodes.sink, self.t_source)  # type: ignore[no-any-return]

    @cached_property
    def slack(self) -> I64:
        """Per node: how far it may slip before SINK or any anchor moves."""
        g = self.graph
        return _slack(g.order, g.out_ptr, g.out_edges, g.dst, self.weight, self.time, self.ends)  # type: ignore[no-any-return]

    @property
    def span(self) -> int:
        return int(self.time[-1] - self.time[-2])


def replay(
    g: Graph, weight: I64, preferred: npt.NDArray[np.bool_], t_source: int, anchors: I64 | None = None
) -> Timing:
    """Propagate ``weight`` through ``g`` from SOURCE at ``t_source``.

    Slack is measured against SINK and every node in ``anchors`` (window ends): it is how
    much a node may slip before any of them moves.
    """
    rank = _rank(g.etype, np.asarray(preferred, dtype=np.bool_), PRIORITY)
    n = len(g.order)
    time = np.zeros(n, dtype=np.int64)
    bind = np.full(n, -1, dtype=np.int64)
    _forward(g.order, g.in_ptr, g.in_edges, g.src, weight, rank, g.nodes.source, t_source, time, bind, 0, n)
    ends = np.array([g.nodes.sink], dtype=np.int64) if anchors is None else np.append(anchors, g.nodes.sink)
    return Timing(time, bind, g, weight, ends.astype(np.int64), t_source, rank)


@kernel
def _rank(etype, preferred, priority):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Tie-break rank per edge: PRIORITY of its type, preferred (calibrated binding) edges first."""
    m = etype.shape[0]
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        out[e] = priority[etype[e]] + ((1 << 20) if preferred[e] else 0)
    return out


def replay_span(base: Timing, weight: I64, nodes: I64) -> I64:
    """Node times under ``weight``, exact at ``nodes`` (and every node ordered before them).

    Only an edge whose weight differs from ``base.weight`` can move a node, and only one
    ordered at or after that edge's head; nodes ordered after the last of ``nodes`` cannot
    move them. So the replay runs over that span of the topological order alone, from
    ``base``'s times: a what-if confined to a few steps costs those steps, not the trace
    (the self-check's nine transplants, 0.3 s a 2.5M-node trace in full). Ties break as in
    ``base`` (its preferred edges); times outside the span are ``base``'s.
    """
    g = base.graph
    time = base.time.copy()
    changed = np.flatnonzero(weight != base.weight)
    if not len(changed) or not len(nodes):
        return time
    pos = g.position
    k0, k1 = int(pos[g.dst[changed]].min()), int(pos[nodes].max()) + 1
    if k0 < k1:
        bind = np.empty(len(time), dtype=np.int64)  # written in the span only, and not returned
        src, rank = g.nodes.source, base.rank
        _forward(g.order, g.in_ptr, g.in_edges, g.src, weight, rank, src, base.t_source, time, bind, k0, k1)
    return time


@kernel
def _forward(order, in_ptr, in_edges, src, weight, rank, source, t_source, time, bind, k0, k1):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Times and binding in-edges of the nodes at positions ``k0:k1`` of ``order``, in
    place (nodes before ``k0`` must already hold their times)."""
    for k in range(k0, k1):
        v = order[k]
        if v == source:
            time[v] = t_source
            continue
        best = np.iinfo(np.int64).min
        best_e = -1
        for j in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[j]
            a = time[src[e]] + weight[e]
            if a > best or (a == best and rank[e] > rank[best_e]):
                best = a
                best_e = e
        time[v] = best
        bind[v] = best_e


def path_to(timing: Timing, g: Graph, end_node: int, not_before: int) -> I64:
    """Binding edges back from ``end_node`` until one starts at or before ``not_before``.

    The result (in time order) covers ``[not_before, time[end_node]]`` without gaps: it is
    the critical path of a window ending at ``end_node``.
    """
    return _backtrack_until(timing.binding_edge, g.src, timing.time, end_node, not_before)


@kernel
def _backtrack_until(bind, src, time, end_node, not_before):  # type: ignore[no-untyped-def]  # pragma: no cover
    ends = np.full(1, end_node, dtype=np.int64)
    limit = np.full(1, not_before, dtype=np.int64)
    edges, _, _, _ = backtrack_chains(bind, src, time, ends, limit)
    return edges[::-1].copy()


@kernel(native=False)
def _walk_into(bind, src, time, v, not_before, e_out, t0_out, t1_out, m):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Follow binding edges back from ``v``, appending at ``m`` until done or the buffers are full.

    Returns ``(m, v, done)``; when not done, the walk resumes at ``v``. (A separate function
    so the hot loop never sees its buffers reassigned, which would cost reference counting
    on every step.)
    """
    t_v = time[v]
    cap = e_out.shape[0]
    while m < cap:
        e = bind[v]
        if e < 0:
            return m, v, True
        u = src[e]
        t_u = time[u]
        e_out[m] = e
        t0_out[m] = t_u
        t1_out[m] = t_v
        m += 1
        v = u
        t_v = t_u
        if t_u <= not_before:
            return m, v, True
    return m, v, False


@kernel(native=False)
def _grow(a, size, used):  # type: ignore[no-untyped-def]  # pragma: no cover
    out = np.empty(size, dtype=a.dtype)
    out[:used] = a[:used]
    return out


@kernel
def backtrack_chains(bind, src, time, ends, not_before):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The binding chains back from each ``ends[w]`` until an edge starts at or before ``not_before[w]``.

    Returns ``(edges, t0, t1, start)``: chain ``w`` is ``edges[start[w]:start[w + 1]]`` in
    walk order (latest edge first) with each edge's start and end node times.
    """
    # one chain visits each node at most once: with room for every node, growing is only
    # needed when chains overlap (untouched room costs address space, not memory)
    cap = bind.shape[0] + 1
    e_buf = np.empty(cap, dtype=np.int64)
    t0_buf = np.empty(cap, dtype=np.int64)
    t1_buf = np.empty(cap, dtype=np.int64)
    start = np.empty(ends.shape[0] + 1, dtype=np.int64)
    m = 0
    for w in range(ends.shape[0]):
        start[w] = m
        v = ends[w]
        while True:
            m, v, done = _walk_into(bind, src, time, v, not_before[w], e_buf, t0_buf, t1_buf, m)
            if done:
                break
            cap *= 2
            e_buf = _grow(e_buf, cap, m)
            t0_buf = _grow(t0_buf, cap, m)
            t1_buf = _grow(t1_buf, cap, m)
    start[ends.shape[0]] = m
    return e_buf[:m], t0_buf[:m], t1_buf[:m], start


@kernel
def _slack(order, out_ptr, out_edges, dst, weight, time, anchors):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = order.shape[0]
    latest = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    for a in anchors:
        latest[a] = time[a]
    for k in range(n - 1, -1, -1):
        v = order[k]
        for j in range(out_ptr[v], out_ptr[v + 1]):
            e = out_edges[j]
            cand = latest[dst[e]] - weight[e]
            if cand < latest[v]:
                latest[v] = cand
    return latest - time
