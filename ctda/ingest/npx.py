"""Sort-based set helpers: numpy >= 2.3's hash-based ``np.unique`` is ~50x slower on int64."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T", bound=np.generic)


def unique(values: npt.NDArray[T]) -> npt.NDArray[T]:
    """Sorted distinct values."""
    s = np.sort(values, kind="stable")  # timsort: our data is mostly in order already
    keep = np.ones(len(s), dtype=np.bool_)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def factorize(values: npt.NDArray[T]) -> tuple[npt.NDArray[T], npt.NDArray[np.int64]]:
    """Sorted distinct values and, per input value, the index of its distinct value.

    Integers of a small range (a lane's pid and tid codes, a device's streams) go through a
    table over the range, in one pass; the rest are sorted."""
    if len(values) and (values.dtype.kind == "i" or (values.dtype.kind == "u" and values.itemsize < 8)):
        lo, hi = int(values.min()), int(values.max())
        if hi - lo <= 4 * len(values) + 1024:
            at = values.astype(np.int64) - lo
            present = np.zeros(hi - lo + 1, dtype=np.bool_)
            present[at] = True
            rank = np.cumsum(present) - 1
            return (np.flatnonzero(present) + lo).astype(values.dtype), rank[at]
    order = np.argsort(values, kind="stable")
    s = values[order]
    new = np.ones(len(s), dtype=np.bool_)
    new[1:] = s[1:] != s[:-1]
    codes = np.empty(len(s), dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return s[new], codes


def first_of_each(values: npt.NDArray[T]) -> tuple[npt.NDArray[T], npt.NDArray[np.int64]]:
    """Sorted distinct values and the position of each one's first occurrence."""
    order = np.argsort(values, kind="stable")
    s = values[order]
    new = np.ones(len(s), dtype=np.bool_)
    new[1:] = s[1:] != s[:-1]
    return s[new], order[new]


def run_starts(values: npt.NDArray[T]) -> npt.NDArray[np.int64]:
    """Where each run of equal consecutive values begins (``values`` grouped already)."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, values[1:] != values[:-1]])


def run_positions(values: npt.NDArray[T]) -> npt.NDArray[np.int64]:
    """Per value, its position within its run of equal consecutive values (0 for the first)."""
    starts = run_starts(values)
    return np.arange(len(values), dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, len(values)]))
