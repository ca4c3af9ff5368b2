"""Read a trace to disk instead of memory: its events as Arrow files of bounded size.

The streaming analysis (:mod:`ctda.analysis.stream`) reads a trace once with the same
pieces, decoders and checks as :func:`ctda.ingest.reader.read_trace`, but each batch of
pieces is stacked into a table and written to a scratch directory as soon as it is
complete, so memory holds a batch, not the trace. What the later stages need to pick the
events of a time range without reading every batch stays in memory, and it is small:

- each batch's time range, over its events that are neither metadata nor long;
- the long events (longer than :data:`LONG_NS`, e.g. a step or a module's forward), the
  metadata events (names of threads and processes, which hold for the whole trace) and
  events without a timestamp, which would otherwise widen every batch's range to the
  whole trace; they are few;
- the ``ProfilerStep#N`` events on CPU threads, which define the windows.

Events keep their position in the trace as ``uid``, so a table cut from the spill is in
document order and its events can be named as the whole trace names them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.ipc as ipc

from ctda.ingest import chunks
from ctda.ingest.assemble import assemble
from ctda.ingest.columns import PieceColumns
from ctda.ingest.errors import TraceError
from ctda.ingest.kinds import CPU_KINDS, GPU_KINDS, GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.limits import STREAM_MAX_BYTES, Limits, check_regular
from ctda.ingest.memory import release_free_memory
from ctda.ingest.pipeline import decode_pieces
from ctda.ingest.reader import check_complete_events, read_document_meta
from ctda.ingest.table import TraceMeta, column_array
from ctda.ingest.timestamps import NA

#: events per spilled batch: stacking one briefly costs about 1-2 kB per event (32k: the
#: read peaked about 80 MB above the imports on a 381 MB trace; 256k: about 200 MB)
BATCH_EVENTS = 1 << 15
#: events longer than this are kept aside in memory (10 ms: steps, modules, long ops)
LONG_NS = 10_000_000
#: LZ4 frames: sparse columns are mostly NA, so a spill takes about a tenth of the disk
#: (a 30.7 GB trace: 3.0 GB of scratch; uncompressed it would be about 28 GB)
_WRITE = ipc.IpcWriteOptions(compression="lz4")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Batch:
    """One spilled Arrow file: rows ``first .. first + n - 1`` of the trace, except the aside ones."""

    path: Path
    first: int
    n: int
    lo: int  # earliest start of its events (ns); lo > hi when it holds none
    hi: int  # latest end


@dataclass
class Spill:
    """A trace read to a scratch directory: the batches, and what stays in memory."""

    path: Path
    meta: TraceMeta
    batches: list[Batch]
    aside: pa.Table  # long events and events without a timestamp, uid order
    steps: list[tuple[int, int, int, int]]  # (step number, uid, start ns, end ns) in time order
    n_events: int
    t0: int  # earliest start of an event that can be analysed (the whole trace's SOURCE)
    spilled_bytes: int = 0

    def count_by_step(self) -> I64:
        """Events starting in each step's stretch: before the second step's start counts
        for the first, and so on (reads only the ``ts_ns`` column of each batch)."""
        starts = np.array([s[2] for s in self.steps], dtype=np.int64)
        out = np.zeros(len(starts), dtype=np.int64)
        for batch in self.batches:
            ts = _read(batch.path).column("ts_ns").to_numpy()
            out += np.bincount(np.maximum(np.searchsorted(starts, ts, "right") - 1, 0), minlength=len(starts))
        return out

    def between(self, lo: int, hi: int) -> pa.Table:
        """Every event that overlaps ``[lo, hi]``, every metadata event and every event
        without a timestamp, in trace order; ``uid`` is still the position in the trace."""
        parts = [_overlapping(self.aside, lo, hi)]
        for batch in self.batches:
            if batch.lo <= hi and batch.hi >= lo:
                parts.append(_overlapping(_read(batch.path), lo, hi))
        table = pa.concat_tables(parts).unify_dictionaries().combine_chunks()
        order = np.argsort(table.column("uid").to_numpy(), kind="stable")
        return table.take(pa.array(order))


def spill_trace(
    path: Path,
    directory: Path,
    progress: Callable[[int], None] | None = None,
    *,
    limits: Limits | None = None,
    batch_events: int = BATCH_EVENTS,
) -> Spill:
    """Read ``path`` into Arrow files under ``directory`` (which must exist).

    The same checks as the in-memory reader apply, with the same one-line errors, except
    the default cap on decompressed bytes: memory does not bound a spilled read, so it is
    :data:`STREAM_MAX_BYTES` (1 TiB) unless ``$CTDA_MAX_TRACE_BYTES`` says otherwise.
    """
    check_regular(path)
    limits = limits if limits is not None else Limits.from_env(STREAM_MAX_BYTES)
    chunker = chunks.Chunker(path, chunks.CHUNK_BYTES, limits)
    writer = _Writer(path, directory, batch_events)
    _, tail = decode_pieces(chunker, progress, sink=writer.add)
    writer.flush()
    if writer.n_events == 0:
        raise TraceError(path, "no events (traceEvents is empty)")
    meta = TraceMeta(path=str(path), n_bytes=chunker.n_bytes)
    assert chunker.framing is not None  # set before the last piece is produced
    chunker.framing.tail = tail
    read_document_meta(path, chunker.framing, meta)
    aside = (
        pa.concat_tables(writer.aside).unify_dictionaries().combine_chunks()
        if writer.aside
        else _read(writer.batches[0].path).schema.empty_table()
    )
    steps = sorted(writer.steps, key=lambda s: (s[2], s[1]))
    return Spill(path, meta, writer.batches, aside, steps, writer.n_events, writer.t0, writer.bytes)


def _read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return ipc.open_file(source).read_all()


def _overlapping(table: pa.Table, lo: int, hi: int) -> pa.Table:
    ts = table.column("ts_ns").to_numpy()
    dur = table.column("dur_ns").to_numpy()
    end = ts + np.where(dur == NA, 0, np.maximum(dur, 0))
    # metadata (thread and process names) holds for the whole trace, whatever its ts
    meta = table.column("kind").to_numpy() == Kind.METADATA
    keep = meta | (ts == NA) | ((ts <= hi) & (end >= lo))
    return table.filter(pa.array(keep))


@dataclass
class _Writer:
    """Takes pieces in document order; every ``batch_events`` events, writes a batch."""

    path: Path
    directory: Path
    batch_events: int
    pending: list[PieceColumns] = field(default_factory=list)
    n_pending: int = 0
    n_events: int = 0
    batches: list[Batch] = field(default_factory=list)
    aside: list[pa.Table] = field(default_factory=list)
    steps: list[tuple[int, int, int, int]] = field(default_factory=list)
    t0: int = NA
    bytes: int = 0

    def add(self, piece: PieceColumns) -> None:
        self.pending.append(piece)
        self.n_pending += piece.n
        if self.n_pending >= self.batch_events:
            self.flush()

    def flush(self) -> None:
        if not self.n_pending:
            return
        first, n = self.n_events, self.n_pending
        table = assemble(self.path, self.pending)  # empties the list
        self.n_pending = 0
        self.n_events += n
        check_complete_events(self.path, table, first)
        table = table.set_column(0, "uid", pa.array(np.arange(first, first + n, dtype=np.int64)))
        ts = table.column("ts_ns").to_numpy()
        dur = table.column("dur_ns").to_numpy()
        span = np.where(dur == NA, 0, np.maximum(dur, 0))
        kind = table.column("kind").to_numpy().astype(np.int8, copy=False)
        self._note_steps(table, kind, ts, ts + span)
        self._note_start(kind, ts)
        aside = (ts == NA) | (kind == Kind.METADATA) | (span > LONG_NS)
        if aside.any():
            self.aside.append(table.filter(pa.array(aside)))
            table = table.filter(pa.array(~aside))
            ts, span = ts[~aside], span[~aside]
        out = self.directory / f"batch{len(self.batches):06d}.arrow"
        with pa.OSFile(str(out), "wb") as sink, ipc.new_file(sink, table.schema, options=_WRITE) as w:
            w.write_table(table)
        self.bytes += out.stat().st_size
        release_free_memory()  # the batch's pieces and columns, before the next batch
        lo = int(ts.min()) if len(ts) else 1
        hi = int((ts + span).max()) if len(ts) else 0
        self.batches.append(Batch(out, first, n, lo, hi))

    def _note_steps(self, table: pa.Table, kind: npt.NDArray[np.int8], ts: I64, end: I64) -> None:
        name = column_array(table, "name")
        values = name.dictionary.to_pylist()
        number = np.array([_step_number(v) for v in values] or [-1], dtype=np.int64)
        codes = name.indices.to_numpy(zero_copy_only=False)
        step = np.where(codes >= 0, number[np.maximum(codes, 0)], -1)
        rows = np.flatnonzero((step >= 0) & ~in_kinds(kind, GPU_KINDS) & (ts != NA))
        uid = table.column("uid").to_numpy()
        self.steps.extend((int(step[i]), int(uid[i]), int(ts[i]), int(end[i])) for i in rows.tolist())

    def _note_start(self, kind: npt.NDArray[np.int8], ts: I64) -> None:
        # the kinds the analysis makes nodes of (its SOURCE is their earliest start)
        analysed = in_kinds(kind, CPU_KINDS | GPU_WORK_KINDS) | (kind == Kind.OTHER)
        known = ts[(ts != NA) & analysed]
        if len(known):
            low = int(known.min())
            self.t0 = low if self.t0 == NA else min(self.t0, low)


def _step_number(name: str | None) -> int:
    m = STEP_RE.match(name or "")
    return int(m.group(1)) if m else -1


def step_pattern(numbers: list[int]) -> str:
    """A windows regex naming exactly these ``ProfilerStep#N``."""
    return r"^ProfilerStep#(?:" + "|".join(str(n) for n in sorted(set(numbers))) + r")$"


__all__ = ["BATCH_EVENTS", "LONG_NS", "Batch", "Spill", "spill_trace", "step_pattern"]
