"""The trace reader pipeline: file -> pieces -> columns -> one table -> derived columns.

read_trace(path) = derive(assemble(decode_pieces(Chunker(path))))
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctda.ingest import chunks
from ctda.ingest.assemble import assemble
from ctda.ingest.decode import TOO_DEEP
from ctda.ingest.derive import derive
from ctda.ingest.errors import TraceError
from ctda.ingest.events import METADATA
from ctda.ingest.flows import bind_flows
from ctda.ingest.limits import Limits, check_regular, open_regular
from ctda.ingest.memory import release_free_memory, warm_for_analysis
from ctda.ingest.pipeline import decode_pieces
from ctda.ingest.source import Framing
from ctda.ingest.table import EventTable, TraceMeta, column_array, lanes_frame
from ctda.ingest.timestamps import NA

Progress = Callable[[int], None]
#: |ts + dur| bound in ns: int64 with room for differences and sums (about 146 years)
TIME_LIMIT_NS = 1 << 62
_PARQUET_MAGIC = b"PAR1"


def read_trace(
    path: str | Path,
    progress: Progress | None = None,
    *,
    parallel: bool = True,
    limits: Limits | None = None,
) -> EventTable:
    """Read a Kineto trace (``.json``, ``.json.gz``, or ctda ``.parquet``) into an EventTable.

    ``progress`` is called with the number of (compressed) file bytes consumed so far.
    ``parallel`` lets large files be decoded by worker threads (native reader) or
    processes (Python reader) as well. ``limits`` bounds what the file may cost (default:
    :meth:`Limits.from_env`).
    Raises :class:`TraceError` (one line: file and problem) for anything unreadable.
    """
    p = Path(path)
    check_regular(p)  # a FIFO or a device may never end
    if is_parquet(p):
        try:
            return read_parquet(p)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
            raise TraceError(p, f"not a readable ctda Parquet table ({exc})") from None
    chunker = chunks.Chunker(p, chunks.CHUNK_BYTES, limits)
    pieces, tail = decode_pieces(chunker, progress, parallel)
    warm_for_analysis(chunker.n_bytes)  # while this core stacks the table
    meta = TraceMeta(path=str(p), n_bytes=chunker.n_bytes)
    assert chunker.framing is not None  # set before the last piece is produced
    chunker.framing.tail = tail
    read_document_meta(p, chunker.framing, meta)
    release_free_memory()
    events = assemble(p, pieces)
    check_complete_events(p, events)
    release_free_memory()
    return derive(events, meta)


def from_arrow(table: pa.Table, flows: pd.DataFrame | None = None) -> EventTable:
    """The inverse of :meth:`EventTable.to_arrow`: events, lanes and metadata; ``flows``
    as bound before (an analysis snapshot keeps them), else bound again."""
    if any(c.num_chunks > 1 for c in table.columns):  # e.g. one chunk per row group
        table = table.unify_dictionaries().combine_chunks()
    md = table.schema.metadata or {}
    if b"ctda.meta" not in md:
        raise ValueError("not a ctda events table (no ctda metadata)")
    meta = TraceMeta.from_json(md[b"ctda.meta"].decode())
    lanes = lanes_frame(md[b"ctda.lanes"])
    out = EventTable(events=table.replace_schema_metadata(None), lanes=lanes, flows=pd.DataFrame(), meta=meta)
    out.flows = bind_flows(out) if flows is None else flows
    return out


def read_parquet(path: Path) -> EventTable:
    """Read a table written by :meth:`EventTable.write_parquet`."""
    return from_arrow(pq.read_table(path))


def is_parquet(path: Path) -> bool:
    """Whether ``path`` is a Parquet file (by suffix, else by its magic bytes)."""
    if path.suffix == ".parquet":
        return path.is_file()
    try:
        with open_regular(path) as fh:  # never blocks on a FIFO put there since the check
            return fh.read(4) == _PARQUET_MAGIC
    except (OSError, TraceError):
        return False  # the JSON path reports missing files, directories and FIFOs


def read_document_meta(path: Path, framing: Framing, meta: TraceMeta) -> None:
    """Fill ``meta`` from the document's top-level keys (absent in the 2020 bare list)."""
    meta.bare_list = framing.bare_list
    if framing.bare_list:
        return
    try:
        raw = METADATA.decode(framing.head + b"[]" + framing.tail)
        doc: dict[str, Any] = {k: msgspec.json.decode(v) for k, v in raw.items() if k != "traceEvents"}
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceError(path, f"malformed JSON outside the event array ({exc})") from None
    except RecursionError:
        raise TraceError(path, f"outside the event array: {TOO_DEEP}") from None
    meta.top_level_keys = sorted([*doc, "traceEvents"])
    sv = doc.get("schemaVersion")
    meta.schema_version = sv if isinstance(sv, int) else None
    di = doc.get("distributedInfo")
    meta.distributed_info = di if isinstance(di, dict) else {}
    dp = doc.get("deviceProperties")
    meta.device_properties = [d for d in dp if isinstance(d, dict)] if isinstance(dp, list) else []
    bt = doc.get("baseTimeNanoseconds")
    meta.base_time_ns = bt if isinstance(bt, int) else None
    name = doc.get("traceName")
    meta.trace_name = name if isinstance(name, str) else None
    host = doc.get("host_name")
    meta.host_name = host if isinstance(host, str) and host else None


def check_complete_events(path: Path, events: pa.Table, first: int = 0) -> None:
    """Complete events (ph X) need ts and dur; the first one lacking either is an error.

    ``first`` is the position in the trace of the table's first row (for the message)."""
    ph = column_array(events, "ph")
    is_x = np.array([v == "X" for v in ph.dictionary.to_pylist()] or [False])[ph.indices.to_numpy()]
    for field in ("ts", "dur"):
        bad = np.flatnonzero(is_x & (events.column(f"{field}_ns").to_numpy() == NA))
        if len(bad):
            raise TraceError(path, f"event {first + int(bad[0])}: complete event (ph X) has no {field}")
    # end times must leave int64 room for the sums the analysis makes (no silent wrap)
    ts = events.column("ts_ns").to_numpy()
    dur = np.where(is_x, events.column("dur_ns").to_numpy(), 0)
    known = ts != NA
    over = known & ((ts > TIME_LIMIT_NS - np.maximum(dur, 0)) | (ts < -TIME_LIMIT_NS))
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise TraceError(
            path,
            f"event {first + i}: ts + dur ({int(ts[i]) / 1e3:.0f} + {int(dur[i]) / 1e3:.0f} us) is outside "
            f"the time range ctda can compute with (+-2^62 ns)",
        )
