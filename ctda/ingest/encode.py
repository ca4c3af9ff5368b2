"""Python lists of field values -> typed numpy/Arrow arrays (the per-column encoders)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ctda.ingest.timestamps import NA

I64 = npt.NDArray[np.int64]


def strings(values: Sequence[str]) -> pa.DictionaryArray:
    """Dictionary-encoded strings (int32 codes)."""
    return pc.dictionary_encode(pa.array(values, pa.string()))


def ints(values: list[object]) -> I64:
    """Loosely typed integer args ("4096", 4096.0, 4096) as int64; anything else is NA."""
    if values.count(None) == len(values):  # the common case for rare keys: no conversion
        return np.full(len(values), NA, dtype=np.int64)
    try:
        # no target type: pyarrow would silently truncate 2.5 to 2 when asked for int64
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = None
    if arr is None or not pa.types.is_integer(arr.type):
        try:
            arr = pa.array(
                [v if v is None or type(v) is int else _as_int(v) for v in values], type=pa.int64()
            )
        except (pa.ArrowInvalid, OverflowError):  # an int beyond int64
            arr = pa.array([_as_int(v) for v in values], type=pa.int64())
    return arr.cast(pa.int64()).fill_null(NA).to_numpy(zero_copy_only=False)


def _as_int(value: object) -> int | None:
    """Coerce one loosely typed integer arg; anything that is not an integer is missing."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) < value < 2**63 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else None
    try:
        return _as_int(int(str(value), 0))
    except ValueError:
        return None


def labels(values: Sequence[int | str]) -> pa.DictionaryArray:
    """Dictionary-encode pid/tid labels as strings; the all-int case avoids per-event str()."""
    try:
        codes = pc.dictionary_encode(pa.array(values, type=pa.int64()))
        return pa.DictionaryArray.from_arrays(codes.indices, codes.dictionary.cast(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    # mixed: 7 and "7" name the same thread, so codes follow the label, not the value
    label_code: dict[str, int] = {}
    value_code = {v: label_code.setdefault(str(v), len(label_code)) for v in dict.fromkeys(values)}
    codes_np = np.fromiter(map(value_code.__getitem__, values), dtype=np.int32, count=len(values))
    return pa.DictionaryArray.from_arrays(pa.array(codes_np), pa.array(list(label_code), pa.string()))


def flow_ids(values: Sequence[int | str | None]) -> I64:
    """Flow ids are ints in every known trace; strings and huge ints are hashed stably."""
    try:
        return pa.array(values, type=pa.int64()).fill_null(NA).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    return np.array([_flow_id(v) for v in values], dtype=np.int64)


def _flow_id(value: int | str | None) -> int:
    if value is None:
        return int(NA)
    if isinstance(value, str):
        try:
            number = int(value, 0)
        except ValueError:
            return hash_label(value)
    else:
        number = value
    return number if -(2**63) < number < 2**63 else hash_label(str(number))


def hash_label(text: str) -> int:
    """A stable 62-bit id for a non-numeric label (Python's hash() is salted per run)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2
