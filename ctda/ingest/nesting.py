"""Call-stack reconstruction on one thread: parent and depth of every CPU slice.

Slices are walked per lane in (start, longer-first) order with the usual stack rule: a
slice is the child of the innermost open slice that has not ended when it starts. That
stack walk has a closed form, which lets it run vectorised instead of event by event:

* the parent of slice k is the latest earlier slice j on its lane with end[j] > start[k]
  (slices popped before k all ended before k starts; of those still on the stack, the
  walk stops at the topmost open one, which is the latest open one);
* depth[k] = depth[parent] + 1, since nothing below the parent is popped while it is open.

"Latest earlier j with end[j] > x" is answered for all k at once by binary lifting over a
sparse table of range maxima of ``end``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.ingest.npx import unique

I64 = npt.NDArray[np.int64]


def nest(
    rows: I64,
    lane: npt.NDArray[np.int32],
    ts: I64,
    dur: I64,
    n: int,
) -> tuple[I64, npt.NDArray[np.int16], int]:
    """Parent uid (-1 at top level) and depth (0 at top) for ``rows``; counts partial overlaps.

    A child that outlives its parent (a ``record_function`` closed inside another frame) is
    a partial overlap: it is kept under the parent it started in and counted.
    """
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int16)
    if len(rows) == 0:
        return parent, depth, 0
    dur0 = np.maximum(dur[rows], 0)
    order = np.lexsort((-dur0, ts[rows], lane[rows]))
    uid = rows[order]
    start, end, seg = ts[uid], ts[uid] + dur0[order], lane[uid]
    up = _latest_open_before(start, end, _segment_starts(seg))
    has = up >= 0
    parent[uid[has]] = uid[up[has]]
    depth[uid] = np.minimum(_depths(up), np.iinfo(np.int16).max)
    partial = int(np.sum(end[has] > end[up[has]]))
    return parent, depth, partial


def _segment_starts(seg: npt.NDArray[np.int32]) -> I64:
    """For each position, the first position of its lane (lanes are contiguous)."""
    first = np.ones(len(seg), dtype=np.bool_)
    first[1:] = seg[1:] != seg[:-1]
    return np.maximum.accumulate(np.where(first, np.arange(len(seg)), 0))


def _latest_open_before(start: I64, end: I64, lo: I64) -> I64:
    """Per k: the largest j in [lo[k], k) with end[j] > start[k], else -1.

    Binary lifting from k downwards: skip a block [cur - 2**t, cur) when all its ends are
    <= start[k]; the blocks skipped add up to the longest closed run before k.
    """
    n = len(start)
    rank_end, rank_start = _ranks(end, start)
    levels = [rank_end]
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-half], prev[half:]))  # max of end over [x, x + 2**t)
    cur = np.arange(n)
    for t in range(len(levels) - 1, -1, -1):
        cand = cur - (1 << t)
        ok = cand >= lo
        idx = np.flatnonzero(ok)
        ok[idx] = levels[t][cand[idx]] <= rank_start[idx]
        cur = np.where(ok, cand, cur)
    found = cur - 1
    return np.where(found >= lo, found, -1)


def _ranks(end: I64, start: I64) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """``end`` and ``start`` as int32 ranks in their joint order, to halve the table's memory."""
    values = unique(np.concatenate([end, start]))
    if len(values) >= 2**31:  # pragma: no cover - beyond any real trace
        raise ValueError("too many distinct timestamps")
    return (
        np.searchsorted(values, end).astype(np.int32),
        np.searchsorted(values, start).astype(np.int32),
    )


def _depths(up: I64) -> I64:
    """Number of ancestors of each position, by pointer doubling over ``up`` (parent position)."""
    depth = (up >= 0).astype(np.int64)
    jump = up.copy()
    while True:
        live = np.flatnonzero(jump >= 0)
        if not len(live):
            return depth
        target = jump[live]
        depth[live] += depth[target]
        jump[live] = jump[target]
