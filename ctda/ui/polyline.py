"""A window's critical path as the polyline the timeline draws, built and thinned in compiled passes.

Contract: ``critical_polyline(charges, graph_ends, rows, bounds, max_points)`` -> :class:`Polyline`:
the x (ms) and y (row) of the path's points, in time order, and how many points the path
had before thinning. It is what the Critical path and What-if timelines draw, so it runs on
every step change and every what-if move: a 1M-event window has about 1M charged stretches,
and the array-at-a-time version (gather, clip, interleave, mask, then bin) spent ~0.25 s
writing temporaries of tens of MB; two compiled passes (40 ms there) walk the stretches and write
only the points kept: the first counts them (the bins need the x range), the second bins.

The picture:

- each charged stretch ``[t0, t1]`` of the path, clipped to the window, is a horizontal
  segment at the row of the event it is drawn on: the charged event, or for a wait the
  event that waited (its edge's destination; the source when the destination is the
  SINK/window end);
- points strictly inside a run of one row are dropped (they add nothing to the line);
- with more than ``max_points`` points left, the x range is cut into ``max_points / 4``
  bins and each bin keeps its first and last points and the first with the lowest and the
  highest row (M4 decimation), so every jump between rows that a pixel column could show is
  still drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]
Ints = npt.NDArray[np.integer[Any]]
F64 = npt.NDArray[np.float64]
MS = 1e6  # ns per millisecond


@dataclass
class Polyline:
    x: F64  # ms from the trace start
    y: F64  # row on the timeline
    full: int  # points before thinning (after dropping collinear ones)


def critical_polyline(
    charges: tuple[I64, I64, I64, I64],
    graph_ends: tuple[I64, I64, int],
    rows: tuple[Ints, Ints, F64, int],
    bounds: tuple[int, int, int],
    max_points: int,
) -> Polyline:
    """The drawn path of one window.

    ``charges``: per charged stretch in path order, its event (-1 for a wait), edge, start
    and end (ns). ``graph_ends``: the graph's edge sources and destinations (node ids,
    ``2 * event`` and ``2 * event + 1``) and the number of analysed events. ``rows``: per
    event its lane and call depth, per lane its first row, and the deepest row drawn.
    ``bounds``: the window's start and end and the trace start (ns).
    """
    ev, edge, t0, t1 = charges
    src, dst, n = graph_ends
    lane, depth, top_of, max_rows = rows
    lo, hi, base = bounds
    args = (ev, edge, t0, t1, src, dst, n, lane, depth, top_of, max_rows, lo, hi, base)
    # first pass: count the points kept and find their x range (the bins need it)
    _, full, x_first, x_last = _walk(*args, 0, 0.0, 0.0, np.empty((0, 2)))
    bins = -1 if full <= max_points else max(max_points // 4, 1)
    out = np.empty((full if bins < 0 else min(full, 4 * bins), 2))
    k = _walk(*args, bins, x_first, x_last, out)[0]
    return Polyline(out[:k, 0].copy(), out[:k, 1].copy(), int(full))


@kernel(native=False)
def _walk(  # type: ignore[no-untyped-def]  # pragma: no cover
    ev, edge, t0, t1, src, dst, n, lane, depth, top_of, max_rows, lo, hi, base, bins, x_first, x_last, out
):
    """The path's points in order, collinear ones dropped: with ``bins`` 0 only counted
    (returns the count and the first and last x), with ``bins`` < 0 all written to ``out``,
    else per bin of ``[x_first, x_last]`` its first, last, lowest and highest point (the
    first of equal ones), in order. Returns the rows written first.

    A stretch is drawn on its charged event, or for a wait on the event that waited (its
    edge's destination; the source where that is the SINK). Its start is a point only where
    the row changes from the previous stretch, its end only where it changes to the next:
    inside a run of one row both lie on the line. (One loop, the stretch's fields computed
    inline: a helper function called per stretch made the pass six times slower.)
    """
    width = x_last - x_first
    if width == 0.0:
        width = 1.0
    k, j, cur, first, last = 0, 0, -1, 0.0, 0.0
    # the current bin's first, last, lowest and highest point: sequence number, x, y
    fj, fx, fy, lj, lx, ly, loj, lox, loy, hij, hix, hiy = 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0.0
    m = ev.shape[0]
    started, prow, px1 = False, 0.0, 0.0
    for i in range(m + 1):
        # this stretch's new points (up to two), in order; past the last, the pending end
        got, ax, ay, bx, by = 0, 0.0, 0.0, 0.0, 0.0
        if i == m:
            if started:
                got, ax, ay = 1, px1, prow
        else:
            at = ev[i]
            if at < 0:
                at = dst[edge[i]] // 2
                if at >= n:
                    at = src[edge[i]] // 2
            if at >= n:
                continue
            row = top_of[max(lane[at], 0)] + min(depth[at], max_rows - 1)
            x0 = (min(max(t0[i], lo), hi) - base) / MS
            if not started:
                got, ax, ay = 1, x0, row
            elif row != prow:
                got, ax, ay, bx, by = 2, px1, prow, x0, row
            started, prow, px1 = True, row, (min(max(t1[i], lo), hi) - base) / MS
        for q in range(got):
            x, y = (ax, ay) if q == 0 else (bx, by)
            if bins == 0:
                if j == 0:
                    first = x
                last = x
            elif bins < 0:
                out[k, 0], out[k, 1] = x, y
                k += 1
            else:
                b = min(np.int64((x - x_first) / width * bins), bins - 1)
                if b != cur:
                    if cur >= 0:
                        k = _flush(out, k, fj, fx, fy, lj, lx, ly, loj, lox, loy, hij, hix, hiy)
                    cur = b
                    fj, fx, fy, lj, lx, ly, loj, lox, loy, hij, hix, hiy = j, x, y, j, x, y, j, x, y, j, x, y
                else:
                    lj, lx, ly = j, x, y
                    if y < loy:
                        loj, lox, loy = j, x, y
                    if y > hiy:
                        hij, hix, hiy = j, x, y
            j += 1
    if bins > 0 and cur >= 0:
        k = _flush(out, k, fj, fx, fy, lj, lx, ly, loj, lox, loy, hij, hix, hiy)
    return k, j, first, last


@kernel(native=False)
def _flush(out, k, fj, fx, fy, lj, lx, ly, loj, lox, loy, hij, hix, hiy):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Write one bin's kept points in order, each once; returns the next free row."""
    js = (fj, loj, hij, lj)
    xs = (fx, lox, hix, lx)
    ys = (fy, loy, hiy, ly)
    prev = -1
    for _ in range(4):
        nxt = -1
        for r in range(4):
            if js[r] > prev and (nxt < 0 or js[r] < js[nxt]):
                nxt = r
        if nxt < 0:
            break
        out[k, 0], out[k, 1] = xs[nxt], ys[nxt]
        k += 1
        prev = js[nxt]
    return k
