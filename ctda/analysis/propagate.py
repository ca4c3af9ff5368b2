"""Stage: max-plus propagation, binding edges, critical path and slack (compiled).

``t(v) = max over edges u->v of t(u) + w(u,v)`` in topological order; the edge achieving
the max is binding (ties prefer the calibrated binding edge, then PRIORITY). The critical
path is the chain of binding edges back from SINK. Slack is latest minus earliest time,
from a backward pass with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from ctda.analysis.calibrate import PRIORITY
from ctda.analysis.graph import Graph

I64 = npt.NDArray[np.int64]


@dataclass
class Timing:
    """One replay of the graph: node times, each node's binding in-edge, path and slack."""

    time: I64
    binding_edge: I64  # per node; -1 for SOURCE
    path: I64  # edge ids from SOURCE to SINK (the whole trace's critical path)
    slack: I64  # per node

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
    rank = PRIORITY[g.etype] + np.where(preferred, 1 << 20, 0)
    time, bind = _forward(g.order, g.in_ptr, g.in_edges, g.src, weight, rank, g.nodes.source, t_source)
    path = _backtrack_until(bind, g.src, time, g.nodes.sink, t_source)
    ends = np.array([g.nodes.sink], dtype=np.int64) if anchors is None else np.append(anchors, g.nodes.sink)
    slack = _slack(g.order, g.out_ptr, g.out_edges, g.dst, weight, time, ends.astype(np.int64))
    return Timing(time=time, binding_edge=bind, path=path, slack=slack)


@njit(cache=True)  # type: ignore[misc]
def _forward(order, in_ptr, in_edges, src, weight, rank, source, t_source):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = order.shape[0]
    time = np.zeros(n, dtype=np.int64)
    bind = np.full(n, -1, dtype=np.int64)
    for k in range(n):
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
    return time, bind


def path_to(timing: Timing, g: Graph, end_node: int, not_before: int) -> I64:
    """Binding edges back from ``end_node`` until one starts at or before ``not_before``.

    The result (in time order) covers ``[not_before, time[end_node]]`` without gaps: it is
    the critical path of a window ending at ``end_node``.
    """
    return _backtrack_until(timing.binding_edge, g.src, timing.time, end_node, not_before)


@njit(cache=True)  # type: ignore[misc]
def _backtrack_until(bind, src, time, end_node, not_before):  # type: ignore[no-untyped-def]  # pragma: no cover
    out = np.empty(16, dtype=np.int64)
    m = 0
    v = end_node
    while True:
        e = bind[v]
        if e < 0:
            break
        if m == out.shape[0]:
            grown = np.empty(2 * m, dtype=np.int64)
            grown[:m] = out
            out = grown
        out[m] = e
        m += 1
        v = src[e]
        if time[v] <= not_before:
            break
    return out[:m][::-1].copy()


@njit(cache=True)  # type: ignore[misc]
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
