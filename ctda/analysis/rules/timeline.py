"""The CPU thread timeline: every event boundary on a thread, in order, with what ran between.

On one thread, consecutive boundaries (event starts and ends) are ordered in time, and
between two of them the thread executed the innermost event still open (or nothing). That
single chain is the call-stack model: for a properly nested tree it yields exactly the
parent-start -> child-start, child-end -> next-child-start and last-child-end ->
parent-end segments; and it stays correct where nesting is not proper (a
``record_function`` that opens inside one Python frame and closes inside another).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.nodes import Nodes
from ctda.analysis.ordering import lexsort
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


@dataclass
class Timeline:
    """Consecutive boundary pairs on CPU threads and the innermost open event between them."""

    src: I64  # node ids
    dst: I64
    owner: I64  # analysed event open between src and dst (-1: the thread ran nothing recorded)
    partial_overlaps: int


def build(nodes: Nodes) -> Timeline:
    """Walk each CPU thread's boundaries with a stack of open events."""
    cpu = np.flatnonzero(~nodes.is_gpu)
    if len(cpu) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Timeline(empty, empty, empty, 0)
    ts, end = nodes.ts[cpu], nodes.end[cpu]
    dur = end - ts
    node = np.concatenate([2 * cpu, 2 * cpu + 1])
    time = np.concatenate([ts, end])
    lane = np.concatenate([nodes.lane[cpu], nodes.lane[cpu]]).astype(np.int64)
    # at one instant: ends of earlier slices, then starts (outer first), then ends of
    # zero-length slices, so every zero-length slice opens before it closes
    rank = np.concatenate([np.ones(len(cpu)), np.where(dur == 0, 2, 0)]).astype(np.int64)
    tie = np.concatenate([-dur, -ts])
    order = lexsort((tie, rank, time, lane))
    src, dst, owner, partial = _walk(node[order], lane[order])
    return Timeline(src, dst, owner, int(partial))


@kernel
def _walk(node, lane):  # type: ignore[no-untyped-def]  # pragma: no cover
    m = node.shape[0]
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    owner = np.empty(m, dtype=np.int64)
    stack = np.empty(m, dtype=np.int64)
    sp = 0
    k_out = 0
    partial = 0
    for k in range(m):
        v = node[k]
        ev = v // 2
        if k > 0 and lane[k] != lane[k - 1]:
            sp = 0
        if v % 2 == 0:
            stack[sp] = ev
            sp += 1
        else:
            # close this event wherever it is on the stack; not on top means it outlived
            # something opened inside it (a partial overlap)
            j = sp - 1
            while j >= 0 and stack[j] != ev:
                j -= 1
            if j >= 0:
                if j != sp - 1:
                    partial += 1
                for q in range(j, sp - 1):
                    stack[q] = stack[q + 1]
                sp -= 1
        if k + 1 < m and lane[k + 1] == lane[k]:
            src[k_out] = v
            dst[k_out] = node[k + 1]
            owner[k_out] = stack[sp - 1] if sp > 0 else -1
            k_out += 1
    return src[:k_out], dst[:k_out], owner[:k_out], partial
