"""Microsecond timestamps (JSON int or float) to exact int64 nanoseconds.

Integer microseconds are exact in float64 up to 2**53, so they convert by multiplication.
Fractional microseconds (Kineto writes ns as three decimals) are exact in float64 only
below about 2**42 µs (50 days, e.g. time since boot); epoch-based stamps (~1.7e15 µs)
lose up to 0.25 µs there, so those are reparsed from their JSON text as decimals.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

NA = np.iinfo(np.int64).min
#: beyond this float64 cannot hold whole microseconds, and the ns value nears int64's limit
LIMIT_US = 2.0**53
#: below this a float64 microsecond value with three decimals rounds back to its exact ns
FLOAT_EXACT_US = 2.0**42
I64 = npt.NDArray[np.int64]


class TimestampError(ValueError):
    """A timestamp the table cannot hold; ``index`` is its position in the input."""

    def __init__(self, index: int, problem: str) -> None:
        self.index, self.problem = index, problem
        super().__init__(problem)


def _floats(values: Sequence[int | float | None]) -> npt.NDArray[np.float64]:
    try:
        arr = pa.array(values, type=pa.float64())
    except (pa.ArrowInvalid, OverflowError):  # ints too large for float64 to hold exactly
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return arr.fill_null(np.nan).to_numpy(zero_copy_only=False)


def micros_to_ns(values: Sequence[int | float | None]) -> tuple[I64, bool]:
    """ns per value (NA where missing) and whether every value is exact.

    Not exact means some fractional value is too large for float64 to keep its ns digits;
    :func:`exact_micros_to_ns` then fixes them from the text.
    """
    f = _floats(values)
    out = np.full(len(f), NA, dtype=np.int64)
    finite = np.isfinite(f)
    too_big = np.flatnonzero(finite & (np.abs(f) >= LIMIT_US))
    if len(too_big):
        i = int(too_big[0])
        raise TimestampError(i, f"{values[i]} µs is out of range (more than 2**53 µs)")
    whole = finite & (f == np.trunc(f))
    out[whole] = f[whole].astype(np.int64) * 1000
    frac = finite & ~whole
    if not frac.any():
        return out, True
    v = f[frac]
    # subtracting an integer base first keeps the scaled remainder small enough for float64
    base = np.floor(v.min())
    out[frac] = int(base) * 1000 + np.rint((v - base) * 1000.0).astype(np.int64)
    return out, bool(np.abs(v).max() < FLOAT_EXACT_US)


def exact_micros_to_ns(texts: Sequence[msgspec.Raw], approx: I64) -> I64:
    """Replace ``approx`` by the exact value of each JSON number text (3 decimals = ns)."""
    valid = approx != NA
    n = len(texts)
    if n != len(approx) or not valid.any():
        return approx
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n), out=offsets[1:])
    if offsets[-1] >= 2**31:
        return approx
    strings = pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(texts))
    ).filter(pa.array(valid))
    try:
        # decimal128 with scale 3 stores value * 1000 exactly: the ns; digits past ns are cut
        dec = pc.cast(strings, pa.decimal128(38, 3), safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return approx
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64)
    out = approx.copy()
    # little-endian 128-bit integers: the low word is the value (|ns| < 2**63 by LIMIT_US)
    out[valid] = words[2 * dec.offset : 2 * (dec.offset + len(dec)) : 2]
    return out
