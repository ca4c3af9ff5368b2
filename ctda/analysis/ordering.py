"""Sorting events by several integer keys at once, fast where the data is nearly in order.

``np.lexsort`` makes one stable pass per key, each over the whole array: sorting 2M
event boundaries by (lane, time, rank, tie) took 0.2 s, most of it in the last pass over
a key in no order at all (a duration), which only matters where all the others tie. Trace
events come nearly sorted by lane and time, and a stable sort of nearly sorted data is
cheap (runs are merged, not re-sorted): :func:`lexsort` packs the leading integer keys
into one int64 where their ranges fit, sorts by it once (0.015 s for the same 2M), then
orders only the rows whose packed keys tie by the remaining keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

#: packed keys stay under this (room for the offsets' arithmetic)
PACK_LIMIT = 1 << 62


def lexsort(keys: Sequence[npt.NDArray[np.integer] | npt.NDArray[np.bool_]]) -> I64:
    """The order ``np.lexsort(keys)`` gives (the last key primary, ties kept in input
    order), for integer or boolean keys of one length."""
    if not keys:
        raise ValueError("lexsort needs at least one key")
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    primary_first = [np.asarray(k) for k in reversed(keys)]
    packed = np.zeros(n, dtype=np.int64)
    span = 1
    used = 0
    for k in primary_first:
        lo, hi = int(k.min()), int(k.max())
        width = hi - lo + 1
        if span * width >= PACK_LIMIT:
            break
        packed = packed * width + (k.astype(np.int64) - lo)
        span *= width
        used += 1
    order: I64 = np.argsort(packed, kind="stable").astype(np.int64)
    rest = primary_first[used:]
    if not rest:
        return order
    # rows whose packed keys tie, in runs; each run is put in order by the other keys
    sorted_keys = packed[order]
    same = sorted_keys[1:] == sorted_keys[:-1]
    tied = np.flatnonzero(np.concatenate([same, [False]]) | np.concatenate([[False], same]))
    if len(tied):
        rows = order[tied]
        order[tied] = rows[np.lexsort([k[rows] for k in reversed(rest)] + [packed[rows]])]
    return order
