"""Which of a window's events a timeline draws, within its budget (``ctda ui --max-events``).

A window of a 1M-event run can hold every event; a timeline draws about a thousand. The
choice is vectorised: partial selections (``argpartition``) per lane and overall, never a
sort of every event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def _top(values: npt.NDArray[np.int64], k: int) -> I64:
    """Indices of the ``k`` largest values, largest first (partial sort: k << n)."""
    if len(values) > k:
        part = np.argpartition(-values, k - 1)[:k]
        return part[np.argsort(-values[part], kind="stable")].astype(np.int64)
    return np.argsort(-values, kind="stable").astype(np.int64)


#: share of the drawing budget kept for every lane's longest events, so a lane whose work
#: is off the path (GPU streams under a launch-bound path) is never drawn empty
LANE_SHARE = 0.25


def pick_events(
    lane: npt.NDArray[Any],
    st: I64,
    en: I64,
    cand: I64,
    crit: I64,
    critical_ns: npt.NDArray[Any],
    max_events: int,
) -> I64:
    """At most ``max_events`` of a window's events ``cand`` to draw (``lane``, ``st``,
    ``en``: every event's lane, start and end): each lane's longest few (``LANE_SHARE`` of
    the budget split over the lanes), then the critical ones (largest charge first), then
    the longest of the rest."""
    taken = np.zeros(len(st), dtype=bool)
    parts: list[I64] = []
    lanes = lane[cand].astype(np.int64)
    counts = np.bincount(lanes) if len(lanes) else np.zeros(0, dtype=np.int64)
    present = np.flatnonzero(counts)
    if len(present) > 1:
        quota = max(int(max_events * LANE_SHARE) // len(present), 1)
        keep = _lane_longest(cand, lanes, (en[cand] - st[cand]).astype(np.int64), counts, quota)
        parts.append(keep)
        taken[keep] = True
    budget = max_events - sum(len(p) for p in parts)
    crit_left = crit[~taken[crit]]
    top_crit = crit_left[_top(critical_ns[crit_left].astype(np.int64), max(budget, 0))]
    parts.append(top_crit)
    taken[top_crit] = True
    budget -= len(top_crit)
    if budget > 0:
        rest = cand[~taken[cand]]
        parts.append(rest[_top(en[rest] - st[rest], budget)])
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def _lane_longest(cand: I64, lanes: I64, dur: I64, counts: I64, quota: int) -> I64:
    """Each lane's ``quota`` longest events of ``cand``, lane by lane, longest first (ties:
    the earlier event first): a partial selection per lane, not a sort of every event."""
    # events grouped by lane, in their order within it (a stable sort of small integers)
    small = lanes.astype(np.int16) if len(counts) < np.iinfo(np.int16).max else lanes
    order = np.argsort(small, kind="stable")
    ends = np.cumsum(counts)
    out: list[I64] = []
    for lane in np.flatnonzero(counts):  # per lane, not per event
        seg = order[ends[lane] - counts[lane] : ends[lane]]
        if len(seg) > quota:
            d = dur[seg]
            # the quota-th longest; then all longer ones and the first of the equal ones
            edge = d[np.argpartition(-d, quota - 1)[quota - 1]]
            longer = seg[d > edge]
            seg = np.concatenate([longer, seg[d == edge][: quota - len(longer)]])
        d = dur[seg]
        out.append(cand[seg[np.lexsort((seg, -d))]])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
