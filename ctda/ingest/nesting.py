"""Call-stack reconstruction on one thread: parent and depth of every CPU slice.

Slices are walked per lane in (start, longer-first) order with the usual stack rule: a
slice is the child of the innermost open slice that has not ended when it starts. That
stack walk has a closed form, which lets it run vectorised instead of event by event:

* the parent of slice k is the latest earlier slice j on its lane with end[j] > start[k]
  (slices popped before k all ended before k starts; of those still on the stack, the
  walk stops at the topmost open one, which is the latest open one);
* depth[k] = depth[parent] + 1, since nothing below the parent is popped while it is open.

"Latest earlier j with end[j] > x" is answered for all k at once by walking a max-tree of
``end`` over aligned power-of-two blocks (2n values), O(log n) vector steps in all. Where
the native extension is built, the walk itself runs there instead (one pass with a stack,
the same answer: ``native/src/stack.rs``); this form remains the path without it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.ingest import native

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


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
    uid = rows[_walk_order(lane[rows], ts[rows], np.maximum(dur[rows], 0))]
    start = ts[uid]
    end = start + np.maximum(dur[uid], 0)
    walked = native.stack_walk(start, end, lane[uid])  # one pass where the extension is built
    if walked is None:
        up = _latest_open_before(start, end, _segment_starts(lane[uid]))
        walked = up, _depths(up)
    up, levels = walked
    has = up >= 0
    parent[uid[has]] = uid[up[has]]
    depth[uid] = np.minimum(levels, np.iinfo(np.int16).max)
    partial = int(np.sum(end[has] > end[up[has]]))
    return parent, depth, partial


def _walk_order(lane: npt.NDArray[np.int32], ts: I64, dur: I64) -> I64:
    """Order by (lane, ts, longer first), using cheap sorts where the data allows.

    Events mostly come in time order, so a stable argsort on ts is nearly free, and lanes
    fit a 16-bit radix sort. Equal (lane, ts) runs are then reordered by duration.
    """
    if len(lane) and int(lane.max()) >= 2**16:
        return np.lexsort((-dur, ts, lane))
    order = np.argsort(ts, kind="stable")
    order = order[np.argsort(lane[order].astype(np.uint16), kind="stable")]
    t, ln = ts[order], lane[order]
    tie = np.zeros(len(order), dtype=np.bool_)
    tie[1:] = (t[1:] == t[:-1]) & (ln[1:] == ln[:-1])
    if tie.any():
        tie[:-1] |= tie[1:]  # include the first member of each run
        pos = np.flatnonzero(tie)
        run = np.cumsum(
            ~np.concatenate([[False], (t[pos[1:]] == t[pos[:-1]]) & (ln[pos[1:]] == ln[pos[:-1]])])
        )
        order[pos] = order[pos][np.lexsort((-dur[order[pos]], run))]
    return order


def _segment_starts(seg: npt.NDArray[np.int32]) -> I32:
    """For each position, the first position of its lane (lanes are contiguous)."""
    first = np.ones(len(seg), dtype=np.bool_)
    first[1:] = seg[1:] != seg[:-1]
    return np.maximum.accumulate(np.where(first, np.arange(len(seg), dtype=np.int32), 0))


def _floor_log2(x: npt.NDArray[np.integer]) -> npt.NDArray[np.int8]:
    """floor(log2(x)) for positive ints below 2**53, exactly (frexp, not float log2)."""
    return (np.frexp(x.astype(np.float64))[1] - 1).astype(np.int8)


def _latest_open_before(start: I64, end: I64, lo: I32) -> I32:
    """Per k: the largest j in [lo[k], k) with end[j] > start[k], else -1.

    ``tree`` holds max(end) over every aligned block [b * 2**t, (b + 1) * 2**t). Walking
    left from k, whole blocks whose max is <= start[k] are skipped, taking the largest
    aligned block that fits each time; the first block that cannot be skipped contains
    the answer and is then halved down to one position, keeping the right half when it
    holds a value > start[k]. (Growing the blocks gradually instead was measured to do
    more work: the far searches dominate.)
    """
    n = len(start)
    levels = [end]
    while len(levels[-1]) > 1:
        prev = levels[-1]
        half = len(prev) // 2
        levels.append(np.maximum(prev[0 : 2 * half : 2], prev[1 : 2 * half : 2]))
    offset = np.cumsum([0] + [len(level) for level in levels[:-1]])
    tree = np.concatenate(levels)
    # per position p: trailing zeros of p and floor(log2(p)), looked up instead of recomputed
    pos = np.arange(n + 1, dtype=np.int32)
    pos[0] = 1
    log2 = _floor_log2(pos)
    tz = _floor_log2(pos & -pos)
    del pos

    def block_max(t: npt.NDArray[np.int8], stop: I32) -> I64:  # max over [stop - 2**t, stop)
        return tree[offset[t] + (stop >> t) - 1]

    cur = np.arange(n, dtype=np.int32)  # exclusive right end of the unexplored part
    size = np.full(n, -1, dtype=np.int8)  # log2 size of the block holding the answer
    # the previous slice still open is the commonest case: settle it without the walk
    direct = np.zeros(n, dtype=np.bool_)
    direct[1:] = (lo[1:] < cur[1:]) & (end[:-1] > start[1:])
    size[direct] = 0
    live = np.flatnonzero(~direct & (cur > lo))
    while len(live):
        c = cur[live]
        t = np.minimum(tz[c], log2[c - lo[live]])
        skip = block_max(t, c) <= start[live]
        size[live[~skip]] = t[~skip]
        live, c = live[skip], c[skip] - (np.int32(1) << t[skip])
        cur[live] = c
        live = live[c > lo[live]]
    live = np.flatnonzero(size > 0)
    while len(live):
        t = size[live] - 1
        c = cur[live]
        cur[live] = np.where(block_max(t, c) <= start[live], c - (np.int32(1) << t), c)
        size[live] = t
        live = live[t > 0]
    return np.where(size >= 0, cur - 1, -1).astype(np.int32)


def _depths(up: I32) -> npt.NDArray[np.int32]:
    """Number of ancestors of each position, by pointer doubling over ``up`` (parent position)."""
    depth = (up >= 0).astype(np.int32)
    jump = up.astype(np.int32)
    while True:
        live = np.flatnonzero(jump >= 0)
        if not len(live):
            return depth
        target = jump[live]
        depth[live] += depth[target]
        jump[live] = jump[target]
