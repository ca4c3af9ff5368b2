"""Stage 3b: the columns of all pieces stacked into one events table.

Dense columns are concatenated (string dictionaries unified first); sparse ones are
scattered once into full-length arrays, NA (or "") everywhere else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ctda.ingest.columns import PieceColumns
from ctda.ingest.errors import TraceError
from ctda.ingest.timestamps import NA

#: column order of the raw events table (derived columns are appended after these)
RAW_COLUMNS = (
    "uid",
    "ph",
    "name",
    "cat",
    "pid",
    "tid",
    "ts_ns",
    "dur_ns",
    "flow_id",
    "flow_enclosing",
    "correlation",
    "external_id",
    "ev_idx",
    "device",
    "stream",
    "wait_on_stream",
    "wait_on_event_corr",
    "python_id",
    "python_parent_id",
    "fwd_thread_id",
    "sequence_nr",
    "nbytes",
    "sync_kind",
    "meta_name",
    "coll_seq",
    "in_msg_nelems",
    "pg_name",
    "mem_bytes",
    "total_allocated",
    "total_reserved",
    "shapes",
    "kind",
)


def assemble(path: Path, pieces: list[PieceColumns]) -> pa.Table:
    """One single-chunk table with ``uid`` = position in the event array.

    ``pieces`` is emptied as columns are built, so each piece's memory goes as soon as
    the table holds its rows.
    """
    n = sum(p.n for p in pieces)
    if n == 0:
        raise TraceError(path, "no events (traceEvents is empty)")
    starts = np.cumsum([0] + [p.n for p in pieces[:-1]])
    columns: dict[str, pa.Array] = {"uid": pa.array(np.arange(n, dtype=np.int64))}
    strings = _unified_strings(pieces)
    absent: dict[int, npt.NDArray[np.int64]] = {}  # one read-only array per fill, shared
    for name in RAW_COLUMNS[1:]:
        if name in strings:
            columns[name] = strings[name]
        elif name in pieces[0].dense:
            columns[name] = pa.array(np.concatenate([p.dense.pop(name) for p in pieces]))
        elif name == "flow_enclosing":
            columns[name] = pa.array(_scatter(n, starts, pieces, name, 0, absent).astype(np.bool_))
        elif isinstance(pieces[0].sparse[name].values, np.ndarray):
            columns[name] = pa.array(_scatter(n, starts, pieces, name, NA, absent))
        else:
            columns[name] = _scatter_strings(n, starts, pieces, name)
    pieces.clear()
    return pa.table(columns)


def _unified_strings(pieces: list[PieceColumns]) -> dict[str, pa.Array]:
    """The dense string columns, with one dictionary across pieces."""
    names = [k for k, v in pieces[0].dense.items() if isinstance(v, pa.DictionaryArray)]
    table = pa.table({k: pa.chunked_array([p.dense.pop(k) for p in pieces]) for k in names})
    table = table.unify_dictionaries()
    return {k: table.column(k).combine_chunks() for k in names}


def _scatter(
    n: int,
    starts: npt.NDArray[np.int64],
    pieces: list[PieceColumns],
    name: str,
    fill: int,
    absent: dict[int, npt.NDArray[np.int64]],
) -> npt.NDArray[np.int64]:
    """A sparse column at full length, ``fill`` where an event has no value.

    A column no event has (most args of a given trace: Python ids in a GPU trace, memory
    counters without memory profiling) is one read-only array shared through ``absent``:
    each would otherwise be ``n`` fresh int64s, written, page by page, for nothing."""
    parts = [piece.sparse.pop(name) for piece in pieces]
    if not any(len(part.rows) for part in parts):
        if fill not in absent:
            absent[fill] = np.full(n, fill, dtype=np.int64)
            absent[fill].flags.writeable = False
        return absent[fill]
    out = np.full(n, fill, dtype=np.int64)
    for start, part in zip(starts, parts):
        out[start + part.rows] = part.values
    return out


def _scatter_strings(
    n: int, starts: npt.NDArray[np.int64], pieces: list[PieceColumns], name: str
) -> pa.Array:
    """A sparse string column as a dictionary column whose code 0 is ""."""
    code_of: dict[str, int] = {"": 0}
    indices = np.zeros(n, dtype=np.int32)
    for start, piece in zip(starts, pieces):
        part = piece.sparse.pop(name)
        assert isinstance(part.values, pa.DictionaryArray)
        dictionary = part.values.dictionary.to_pylist()
        lut = np.array([code_of.setdefault(v, len(code_of)) for v in dictionary] or [0], dtype=np.int32)
        indices[start + part.rows] = lut[part.values.indices.to_numpy()]
    return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(list(code_of), pa.string()))
