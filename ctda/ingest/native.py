"""The native piece reader: the optional ``ctda_native`` extension (Rust, in ``native/``).

It turns one piece's JSON text into per-event column buffers in one pass, with no Python
object per event; this module only reshapes those buffers into :class:`PieceColumns` with
the same numpy/Arrow operations (and the same kind groups) as :mod:`ctda.ingest.columns`,
so both readers give identical columns. The extension accepts only input it reads exactly
as the Python path does; for anything else (malformed JSON, a wrong field type, an
unusual number) it declines, and the caller decodes that piece with msgspec, which also
words any error. Without the extension, or with ``CTDA_READER=python``, every piece takes
the Python path.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ctda.ingest.columns import (
    GROUPS,
    INT_ARGS,
    STR_ARGS,
    PieceColumns,
    Rows,
    Sparse,
    _joined,
    _rows_of,
    _sparse_ints,
)
from ctda.ingest.encode import strings
from ctda.ingest.kinds import Kind, kind_lut
from ctda.kernels import extension

#: ``python`` forces the msgspec reader (to compare the two); anything else: native if built
READER_ENV = "CTDA_READER"
_DENSE_STRINGS = ("ph", "name", "cat", "pid", "tid")


def _load() -> ModuleType | None:
    ctda_native = extension()  # imported once, shared with the compiled kernels
    if ctda_native is None:
        return None
    # a stale build with other columns must not be used: the Python path is always right
    if list(ctda_native.INT_COLUMNS) != list(INT_ARGS) or list(ctda_native.STR_COLUMNS) != [
        *_DENSE_STRINGS,
        *STR_ARGS,
    ]:
        return None
    return ctda_native


_EXT = _load()
#: what this process read natively and what it left to the Python path (tests, debugging)
STATS = {"pieces": 0, "events": 0, "declined": 0}
_STATS_LOCK = threading.Lock()  # decode threads count too


def _count(**by: int) -> None:
    with _STATS_LOCK:
        for key, n in by.items():
            STATS[key] += n


def built() -> bool:
    """Whether the extension is installed (and matches these columns)."""
    return _EXT is not None


def enabled() -> bool:
    """Whether pieces are read natively now (read per call, so a test can switch it)."""
    return _EXT is not None and os.environ.get(READER_ENV, "").strip().lower() != "python"


def reader_name() -> str:
    """Which reader decodes pieces, for ``ctda --version`` and debug output."""
    if enabled():
        return "native (ctda_native extension)"
    if _EXT is not None:
        return f"python (msgspec; native extension disabled by {READER_ENV}=python)"
    return "python (msgspec; native extension not built)"


def piece_columns(text: bytes | memoryview) -> PieceColumns | None:
    """Columns of one piece read natively, or None when the Python path must read it."""
    if not enabled():
        return None
    assert _EXT is not None
    out = _EXT.piece_columns(bytes(text) if isinstance(text, memoryview) else text)
    if out is None:
        _count(declined=1)
        return None
    n, ts, dur, flow_id, enclosing, ints, strs = out
    by_name = dict(zip([*_DENSE_STRINGS, *STR_ARGS], strs))
    dense: dict[str, pa.Array | npt.NDArray[np.generic]] = {
        k: _dictionary(*by_name[k]) for k in _DENSE_STRINGS
    }
    ph, cat = dense["ph"], dense["cat"]
    assert isinstance(ph, pa.DictionaryArray) and isinstance(cat, pa.DictionaryArray)
    kind = kind_lut(ph.dictionary.to_pylist(), cat.dictionary.to_pylist())[
        ph.indices.to_numpy(), cat.indices.to_numpy()
    ]
    dense = {
        "ph": ph,
        "name": dense["name"],
        "cat": cat,
        "pid": dense["pid"],
        "tid": dense["tid"],
        "ts_ns": _i64(ts),
        "dur_ns": _i64(dur),
        "kind": kind,
    }
    flows = _rows_of(kind, frozenset({Kind.FLOW}))
    sparse = {
        "flow_id": _sparse_ints(flows, _i64(flow_id)[flows]),
        "flow_enclosing": Sparse(flows, _i64(enclosing)[flows]),
    }
    rows = {name: _rows_of(kind, kinds) for name, kinds in GROUPS.items()}
    for col, raw in zip(INT_ARGS, ints):
        values = _i64(raw)
        sparse[col] = _joined([_sparse_ints(rows[g], values[rows[g]]) for g in INT_ARGS[col][0]])
    for col in STR_ARGS:
        sparse[col] = _sparse_strings(np.concatenate([rows[g] for g in STR_ARGS[col][0]]), *by_name[col])
    _count(pieces=1, events=n)
    return PieceColumns(n, dense, sparse)


def _i64(raw: bytes) -> npt.NDArray[np.int64]:
    return np.frombuffer(raw, dtype=np.int64)


def _dictionary(codes: bytes, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(
        pa.array(np.frombuffer(codes, dtype=np.int32)), pa.array(values, pa.string())
    )


def _sparse_strings(rows: Rows, codes_raw: bytes, values: list[str]) -> Sparse:
    """The rows of ``rows`` that have a value, dictionary-encoded in the order of ``rows``
    (the Python path encodes the group-ordered list, so the dictionary order must match)."""
    codes = np.frombuffer(codes_raw, dtype=np.int32)[rows]
    keep = codes >= 0
    if not keep.any():
        return Sparse(rows[:0], strings([]))
    kept = codes[keep]
    seen, first = np.unique(kept, return_index=True)
    order = seen[np.argsort(first)]  # codes in first-occurrence order
    remap = np.empty(len(values), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    dictionary = pa.array(values, pa.string()).take(pa.array(order))
    return Sparse(rows[keep], pa.DictionaryArray.from_arrays(pa.array(remap[kept]), dictionary))


def stack_walk(
    start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], lane: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]] | None:
    """The call-stack walk over slices in walk order, natively: each position's parent
    position (-1: none) and depth; None where the extension is not in use (or predates it)."""
    walk = getattr(_EXT, "stack_walk", None) if enabled() else None
    if walk is None:
        return None
    as_bytes = (
        np.ascontiguousarray(v, dtype=t).tobytes()
        for v, t in ((start, np.int64), (end, np.int64), (lane, np.int32))
    )
    up, depth = walk(*as_bytes)
    return np.frombuffer(up, dtype=np.int32), np.frombuffer(depth, dtype=np.int32)
