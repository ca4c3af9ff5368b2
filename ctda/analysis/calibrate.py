"""Stage: replay-calibrated weights (docs/model.md#replay-calibrated-weights).

For every node the predecessor that happened last is binding and its edge weighs the
observed gap; every other incoming edge weighs ``min(observed gap, floor)``. Replaying
with these weights reproduces every observed timestamp. The floor is the edge type's
(:func:`ctda.analysis.edges.floors`) unless the caller gives one per edge: the analysis
gives each sync edge its call kind's return latency measured in the trace
(:mod:`ctda.analysis.sync_latency`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeType, floors
from ctda.analysis.graph import Graph
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]

#: tie-break among predecessors that happened at the same instant: structure first,
#: heuristic cross-thread edges last (they must not steal a path an event explains)
PRIORITY = np.zeros(len(EdgeType), dtype=np.int64)
for _rank, _t in enumerate(
    [
        EdgeType.TERMINAL,
        EdgeType.RELEASE,
        EdgeType.CROSS_RANK,
        EdgeType.CROSS_THREAD,
        EdgeType.THREAD_SEQ,
        EdgeType.STREAM_WAIT,
        EdgeType.SYNC,
        EdgeType.LAUNCH,
        EdgeType.STREAM_SEQ,
        EdgeType.SEGMENT,
        EdgeType.DURATION,
    ]
):
    PRIORITY[int(_t)] = _rank


@dataclass
class Calibration:
    """Weights and binding flags of a graph's edges."""

    weight: I64
    binding: npt.NDArray[np.bool_]
    gap: I64


def calibrate(g: Graph, floor: I64 | None = None) -> Calibration:
    """Binding edge per node = latest-happening predecessor (ties by PRIORITY); ``floor``
    per edge (default: its type's) caps the weight of the edges that do not bind."""
    t = g.nodes.time
    gap = g.gap
    arrive = t[g.src]
    if len(g.in_ptr) == g.nodes.n_nodes + 1 and len(g.in_edges) == len(gap):
        # per node, scan its in-edges (the graph's CSR lists them in edge order)
        binding = _last_arrivals(g.in_ptr, g.in_edges, arrive, PRIORITY[g.etype])
    else:  # an unindexed graph: sort edges by (dst, arrival, priority), last of each dst
        order = np.lexsort((PRIORITY[g.etype], arrive, g.dst))
        d = g.dst[order]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = d[:-1] != d[1:]
        binding = np.zeros(len(gap), dtype=bool)
        binding[order[last]] = True
    cap = floors()[g.etype] if floor is None else floor
    weight = np.where(binding, gap, np.minimum(gap, cap))
    return Calibration(weight=weight.astype(np.int64), binding=binding, gap=gap)


@kernel
def _last_arrivals(in_ptr, in_edges, arrive, prio):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per node, the in-edge that sorts last by (arrival, priority, edge id): what a stable
    sort of all edges by (dst, arrival, priority) puts at the end of each node's block."""
    binding = np.zeros(arrive.shape[0], dtype=np.bool_)
    for v in range(in_ptr.shape[0] - 1):
        best = -1
        for j in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[j]
            if (
                best < 0
                or arrive[e] > arrive[best]
                or (
                    arrive[e] == arrive[best]
                    and (prio[e] > prio[best] or (prio[e] == prio[best] and e > best))
                )
            ):
                best = e
        if best >= 0:
            binding[best] = True
    return binding
