"""Stage: assemble rule outputs into one dependency graph (CDG) with SOURCE and SINK.

Edges that contradict the observed timeline (the predecessor happened after the
successor: clock skew between CPU and GPU, or a rule's heuristic gone wrong) cannot be
calibrated and are dropped, counted per rule. Nodes nothing explains get a RELEASE edge
from SOURCE; nodes nothing waits for get a TERMINAL edge to SINK.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.nodes import Nodes
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


class GraphCycleError(ValueError):
    """The rules produced a cycle; the message names the rules whose edges form it."""


@dataclass
class Graph:
    """Edges as parallel arrays plus CSR indexes and a topological order of the nodes."""

    nodes: Nodes
    src: I64
    dst: I64
    etype: npt.NDArray[np.int8]
    owner: I64  # analysed event whose own time the edge is, -1 for waits and gaps
    rule: npt.NDArray[np.int16]  # index into rule_names
    rule_names: list[str]
    order: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # topological
    in_ptr: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    in_edges: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    out_ptr: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    out_edges: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n_edges(self) -> int:
        return len(self.src)

    @cached_property
    def position(self) -> I64:
        """Each node's index in ``order``."""
        pos = np.empty(len(self.order), dtype=np.int64)
        pos[self.order] = np.arange(len(self.order), dtype=np.int64)
        return pos

    @property
    def gap(self) -> I64:
        """Observed time between each edge's endpoints."""
        t = self.nodes.time
        return t[self.dst] - t[self.src]


def build(nodes: Nodes, batches: Iterable[EdgeBatch]) -> Graph:
    """Concatenate rule batches, drop acausal and duplicate edges, close with SOURCE/SINK."""
    names: list[str] = []
    parts_s, parts_d, parts_t, parts_r, parts_o = [], [], [], [], []
    dropped: dict[str, int] = {}
    for b in batches:
        if len(b) == 0:
            continue
        ok = (nodes.time[b.dst] >= nodes.time[b.src]) & (b.src != b.dst)
        if (~ok).any():
            dropped[b.rule] = dropped.get(b.rule, 0) + int((~ok).sum())
        if b.rule not in names:
            names.append(b.rule)
        parts_s.append(b.src[ok])
        parts_d.append(b.dst[ok])
        parts_t.append(b.etype[ok])
        parts_o.append(b.owner[ok])
        parts_r.append(np.full(int(ok.sum()), names.index(b.rule), dtype=np.int16))
    src = np.concatenate(parts_s) if parts_s else np.zeros(0, dtype=np.int64)
    dst = np.concatenate(parts_d) if parts_d else np.zeros(0, dtype=np.int64)
    et = np.concatenate(parts_t) if parts_t else np.zeros(0, dtype=np.int8)
    rl = np.concatenate(parts_r) if parts_r else np.zeros(0, dtype=np.int16)
    ow = np.concatenate(parts_o) if parts_o else np.zeros(0, dtype=np.int64)
    keep = _dedupe(src, dst, nodes.n_nodes)
    src, dst, et, rl, ow = src[keep], dst[keep], et[keep], rl[keep], ow[keep]
    src, dst, et, rl, names = _close(nodes, src, dst, et, rl, names)
    ow = np.concatenate([ow, np.full(len(src) - len(ow), -1, dtype=np.int64)])
    g = Graph(nodes, src, dst, et, ow, rl, names, dropped=dropped)
    _index(g)
    return g


def from_arrays(
    nodes: Nodes,
    src: I64,
    dst: I64,
    etype: npt.NDArray[np.int8],
    owner: I64,
    rule: npt.NDArray[np.int16],
    rule_names: list[str],
    dropped: dict[str, int],
) -> Graph:
    """Re-index a graph saved earlier (same nodes, same edges, no rules run)."""
    g = Graph(
        nodes, src, dst, etype.astype(np.int8), owner, rule.astype(np.int16), rule_names, dropped=dropped
    )
    _index(g)
    return g


def _dedupe(src: I64, dst: I64, n_nodes: int) -> I64:
    """Indices keeping one edge per (src, dst): the first rule's (structural rules run first).

    Ascending; the first occurrence of every pair (what ``np.unique(..., return_index=True)``
    keeps), found per source node instead of by sorting all pairs.
    """
    if len(src) == 0:
        return np.zeros(0, dtype=np.int64)
    _, by_src = _csr(np.asarray(src, dtype=np.int64), n_nodes)
    keep = _first_pairs(by_src, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    return np.flatnonzero(keep).astype(np.int64)


@kernel
def _first_pairs(by_src, src, dst):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Mark the first edge of every (src, dst); ``by_src`` lists edges grouped by src, in order."""
    m = by_src.shape[0]
    keep = np.zeros(m, dtype=np.bool_)
    i = 0
    while i < m:
        j = i
        s = src[by_src[i]]
        while j < m and src[by_src[j]] == s:
            j += 1
        if j - i <= 16:  # small group: look back
            for a in range(i, j):
                e = by_src[a]
                dup = False
                for b in range(i, a):
                    if dst[by_src[b]] == dst[e]:
                        dup = True
                        break
                keep[e] = not dup
        else:  # large group: stable sort by dst, the first of each run is the earliest edge
            grp = by_src[i:j]
            order = np.argsort(dst[grp], kind="mergesort")
            keep[grp[order[0]]] = True
            for a in range(1, order.shape[0]):
                if dst[grp[order[a]]] != dst[grp[order[a - 1]]]:
                    keep[grp[order[a]]] = True
        i = j
    return keep


def _close(
    nodes: Nodes, src: I64, dst: I64, et: npt.NDArray[np.int8], rl: npt.NDArray[np.int16], names: list[str]
) -> tuple[I64, I64, npt.NDArray[np.int8], npt.NDArray[np.int16], list[str]]:
    real = np.arange(2 * nodes.n, dtype=np.int64)
    has_in = np.zeros(nodes.n_nodes, dtype=bool)
    has_in[dst] = True
    has_out = np.zeros(nodes.n_nodes, dtype=bool)
    has_out[src] = True
    rel = real[~has_in[real]]
    ter = real[~has_out[real]]
    names = [*names, "release", "terminal"]
    src = np.concatenate([src, np.full(len(rel), nodes.source), ter])
    dst = np.concatenate([dst, rel, np.full(len(ter), nodes.sink)])
    et = np.concatenate(
        [et, np.full(len(rel), EdgeType.RELEASE, np.int8), np.full(len(ter), EdgeType.TERMINAL, np.int8)]
    )
    rl = np.concatenate(
        [rl, np.full(len(rel), len(names) - 2, np.int16), np.full(len(ter), len(names) - 1, np.int16)]
    )
    if nodes.n == 0:  # an empty window still has a SOURCE -> SINK path
        src, dst = np.array([nodes.source]), np.array([nodes.sink])
        et, rl = np.array([EdgeType.TERMINAL], np.int8), np.array([len(names) - 1], np.int16)
    return src, dst, et, rl, names


def _csr(keys: I64, n: int) -> tuple[I64, I64]:
    """(ptr, order): ``order`` = stable argsort of ``keys`` (a counting sort), ``ptr`` its block starts."""
    return _counting_sort(np.asarray(keys, dtype=np.int64), n)  # type: ignore[no-any-return]


@kernel
def _counting_sort(keys, n):  # type: ignore[no-untyped-def]  # pragma: no cover
    ptr = np.zeros(n + 1, dtype=np.int64)
    for k in keys:
        ptr[k + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    fill = ptr[:-1].copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[fill[k]] = i
        fill[k] += 1
    return ptr, order


def _index(g: Graph) -> None:
    n = g.nodes.n_nodes
    g.in_ptr, g.in_edges = _csr(g.dst, n)
    g.out_ptr, g.out_edges = _csr(g.src, n)
    by_time = np.argsort(g.nodes.time, kind="stable").astype(np.int64)
    order, seen = _kahn(g.out_ptr, g.out_edges, g.dst, np.diff(g.in_ptr), g.nodes.time, by_time)
    if seen < n:
        raise GraphCycleError(_describe_cycle(g, order[:seen]))
    g.order = order


@kernel
def _kahn(out_ptr, out_edges, dst, indeg, time, by_time):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Topological order; nodes become ready in observed-time order (a valid heap-free
    order because every kept edge goes forward or sideways in time). ``by_time`` is the
    stable argsort of ``time``: the nodes in the order they are considered."""
    n = indeg.shape[0]
    deg = indeg.copy()
    order = np.empty(n, dtype=np.int64)
    ready = np.empty(n, dtype=np.int64)
    r_head = 0
    r_tail = 0
    placed = 0
    k = 0
    while placed < n:
        if r_head < r_tail:
            v = ready[r_head]
            r_head += 1
        else:
            # next node in time order with no pending predecessors
            found = False
            while k < n:
                c = by_time[k]
                k += 1
                if deg[c] == 0:
                    deg[c] = -1
                    v = c
                    found = True
                    break
            if not found:
                break
        order[placed] = v
        placed += 1
        for e in range(out_ptr[v], out_ptr[v + 1]):
            w = dst[out_edges[e]]
            deg[w] -= 1
            if deg[w] == 0 and time[w] <= time[v]:
                deg[w] = -1
                ready[r_tail] = w
                r_tail += 1
    return order, placed


def _describe_cycle(g: Graph, placed: I64) -> str:
    done = np.zeros(g.nodes.n_nodes, dtype=bool)
    done[placed] = True
    stuck = ~done[g.src] & ~done[g.dst]
    rules = sorted({g.rule_names[r] for r in g.rule[stuck]})
    return f"dependency cycle among {int((~done).sum())} nodes; edges from rules: {', '.join(rules)}"
