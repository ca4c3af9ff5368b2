"""Stage: replay-calibrated weights (design.md, "Replay-calibrated weights").

For every node the predecessor that happened last is binding and its edge weighs the
observed gap; every other incoming edge weighs ``min(observed gap, floor)``. Replaying
with these weights reproduces every observed timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeType, floors
from ctda.analysis.graph import Graph

I64 = npt.NDArray[np.int64]

#: tie-break among predecessors that happened at the same instant: structure first,
#: heuristic cross-thread edges last (they must not steal a path an event explains)
PRIORITY = np.zeros(len(EdgeType), dtype=np.int64)
for _rank, _t in enumerate(
    [
        EdgeType.TERMINAL,
        EdgeType.RELEASE,
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


def calibrate(g: Graph) -> Calibration:
    """Binding edge per node = latest-happening predecessor (ties by PRIORITY)."""
    t = g.nodes.time
    gap = g.gap
    arrive = t[g.src]
    # sort edges by (dst, arrival, priority) and take the last one of each dst block
    order = np.lexsort((PRIORITY[g.etype], arrive, g.dst))
    d = g.dst[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = d[:-1] != d[1:]
    binding = np.zeros(len(gap), dtype=bool)
    binding[order[last]] = True
    weight = np.where(binding, gap, np.minimum(gap, floors()[g.etype]))
    return Calibration(weight=weight.astype(np.int64), binding=binding, gap=gap)
