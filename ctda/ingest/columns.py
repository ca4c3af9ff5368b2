"""Stage 3: one piece of decoded events -> its raw columns.

Pulling attributes out of msgspec structs is the only per-event Python work in the
reader, so it is kept to the minimum: one list comprehension per top-level field, and the
``args`` fields only from the events whose kind carries them (``Python id`` is read from
python_function events only, ``correlation`` from launches and device work, ...). The
kind is known per piece because it depends on (ph, cat) alone. Each event's ``args`` is
gathered at most once, since the kind groups below are disjoint. Everything else is
vectorised. Missing integers use the ``NA`` sentinel rather than Arrow nulls so columns
convert to numpy without copies or masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ctda.ingest.encode import flow_ids, ints, labels, strings
from ctda.ingest.events import RAW_TS_LIST, Args, Event
from ctda.ingest.kinds import GPU_KINDS, Kind, kind_lut
from ctda.ingest.timestamps import NA, TimestampError, exact_micros_to_ns, micros_to_ns

_EMPTY = Args()
Rows = npt.NDArray[np.int32]
Extract = Callable[[Sequence[Args]], list[object]]

#: disjoint groups of kinds whose events carry args we keep
GROUPS: dict[str, frozenset[Kind]] = {
    "python": frozenset({Kind.PYTHON}),
    "cpu_span": frozenset({Kind.CPU_OP, Kind.USER_ANNOTATION}),
    "device_side": frozenset({Kind.RUNTIME, Kind.DRIVER}) | GPU_KINDS,  # launches, GPU work, syncs
    "metadata": frozenset({Kind.METADATA}),
    "instant": frozenset({Kind.INSTANT}),  # e.g. cpu_instant_event, with an Ev Idx
}
#: integer args: column -> (groups that carry it, extractor over those events' args).
#: Aliases of one key are read in the same pass, the first spelling winning.
INT_ARGS: dict[str, tuple[tuple[str, ...], Extract]] = {
    "correlation": (("device_side",), lambda a: [x.correlation for x in a]),
    "external_id": (
        ("cpu_span", "device_side", "instant"),
        lambda a: [x.external_id if x.external_id is not None else x.external_id_old for x in a],
    ),
    "ev_idx": (
        ("cpu_span", "python", "instant"),
        lambda a: [x.ev_idx if x.ev_idx is not None else x.ev_idx_new for x in a],
    ),
    # ops taking a stream (record_stream, copies) carry it too
    "device": (
        ("device_side", "cpu_span", "instant"),
        lambda a: [x.device if x.device is not None else x.device_id for x in a],
    ),
    "stream": (
        ("device_side", "cpu_span"),
        lambda a: [x.stream if x.stream is not None else x.stream_id for x in a],
    ),
    "wait_on_stream": (("device_side",), lambda a: [x.wait_on_stream for x in a]),
    "wait_on_event_corr": (("device_side",), lambda a: [x.wait_on_event_corr for x in a]),
    "python_id": (("python",), lambda a: [x.python_id for x in a]),
    "python_parent_id": (("python",), lambda a: [x.python_parent_id for x in a]),
    "fwd_thread_id": (("cpu_span",), lambda a: [x.fwd_thread_id for x in a]),
    "sequence_nr": (("cpu_span",), lambda a: [x.sequence_nr for x in a]),
    "nbytes": (("device_side",), lambda a: [x.nbytes for x in a]),
    "coll_seq": (("cpu_span", "device_side"), lambda a: [x.coll_seq for x in a]),
    "in_msg_nelems": (("cpu_span", "device_side"), lambda a: [x.in_msg_nelems for x in a]),
    "mem_bytes": (("instant",), lambda a: [x.mem_bytes for x in a]),
    "total_allocated": (("instant",), lambda a: [x.total_allocated for x in a]),
    "total_reserved": (("instant",), lambda a: [x.total_reserved for x in a]),
}
#: string args, same scheme; metadata events carry names in ``name`` or ``labels``
STR_ARGS: dict[str, tuple[tuple[str, ...], Extract]] = {
    "sync_kind": (("device_side",), lambda a: [x.sync_kind for x in a]),
    "meta_name": (("metadata",), lambda a: [x.name if x.name is not None else x.labels for x in a]),
    # a group's name is a string ("0", "default_pg"); a writer emitting a number gets it as text
    "pg_name": (
        ("cpu_span", "device_side"),
        lambda a: [None if x.pg_name is None else str(x.pg_name) for x in a],
    ),
    # an op's recorded inputs, ``[Input Dims, Input type, Concrete Inputs]`` as JSON text:
    # dictionary-encoded, so the many ops sharing a signature share one string
    "shapes": (("cpu_span",), lambda a: [_shapes(x) if x.input_dims else None for x in a]),
}


def _shapes(a: Args) -> str:
    """``[dims, types, scalars]`` JSON of an op recorded with shapes (the caller skips ops
    without them, the common case, before the call)."""
    rest = [bytes(r).decode() or "[]" for r in (a.input_types, a.concrete_inputs)]
    return f"[{bytes(a.input_dims).decode()},{rest[0]},{rest[1]}]"


class ChunkProblem(Exception):
    """A field value the table cannot hold; ``index`` is the event's position in the piece."""

    def __init__(self, index: int, problem: str) -> None:
        self.index, self.problem = index, problem
        super().__init__(problem)


@dataclass
class Sparse:
    """Values of a column at some rows of a piece; every other row is NA (or "")."""

    rows: Rows
    values: npt.NDArray[np.int64] | pa.DictionaryArray


@dataclass
class PieceColumns:
    """The raw columns of one piece of events, ready to be stacked with the others.

    Columns that only some event kinds carry stay sparse until the whole table is built,
    which keeps the pieces small to ship between processes and avoids filling NA twice.
    """

    n: int
    dense: dict[str, pa.Array | npt.NDArray[np.generic]]
    sparse: dict[str, Sparse]


def piece_columns(events: list[Event], text: bytes | memoryview) -> PieceColumns:
    """Columns of one piece (``text`` is its JSON, reread only for exact timestamps)."""
    ph, cat = strings([e.ph for e in events]), strings([e.cat for e in events])
    kind = kind_lut(ph.dictionary.to_pylist(), cat.dictionary.to_pylist())[
        ph.indices.to_numpy(), cat.indices.to_numpy()
    ]
    dense: dict[str, pa.Array | npt.NDArray[np.generic]] = {
        "ph": ph,
        "name": strings([e.name for e in events]),
        "cat": cat,
        "pid": labels([e.pid for e in events]),
        "tid": labels([e.tid for e in events]),
        "ts_ns": _timestamps(events, text),
        "dur_ns": _durations([e.dur for e in events]),
        "kind": kind,
    }
    flows = _rows_of(kind, frozenset({Kind.FLOW}))
    flow_events = [events[i] for i in flows.tolist()]
    sparse = {
        "flow_id": _sparse_ints(flows, flow_ids([e.id for e in flow_events])),
        "flow_enclosing": Sparse(flows, np.array([e.bp == "e" for e in flow_events], dtype=np.int64)),
    }
    groups = {name: _gather_args(events, _rows_of(kind, kinds)) for name, kinds in GROUPS.items()}
    for col, (names, extract) in INT_ARGS.items():
        sparse[col] = _joined([_sparse_ints(groups[g][0], ints(extract(groups[g][1]))) for g in names])
    for col, (names, extract) in STR_ARGS.items():
        rows = np.concatenate([groups[g][0] for g in names])
        sparse[col] = _sparse_strings(rows, [v for g in names for v in extract(groups[g][1])])
    return PieceColumns(len(events), dense, sparse)


def _rows_of(kind: npt.NDArray[np.int8], kinds: frozenset[Kind]) -> Rows:
    lut = np.zeros(max(Kind) + 1, dtype=np.bool_)
    lut[[int(k) for k in kinds]] = True
    return np.flatnonzero(lut[kind]).astype(np.int32)


def _gather_args(events: list[Event], rows: Rows) -> tuple[Rows, list[Args]]:
    return rows, [events[i].args or _EMPTY for i in rows.tolist()]


def _sparse_ints(rows: Rows, values: npt.NDArray[np.int64]) -> Sparse:
    keep = values != NA
    return Sparse(rows[keep], values[keep])


def _sparse_strings(rows: Rows, values: list[object]) -> Sparse:
    if values.count(None) == len(values):
        return Sparse(rows[:0], strings([]))
    keep = np.array([isinstance(v, str) for v in values], dtype=np.bool_)
    return Sparse(rows[keep], strings([v for v in values if isinstance(v, str)]))


def _joined(parts: list[Sparse]) -> Sparse:
    if len(parts) == 1:
        return parts[0]
    return Sparse(np.concatenate([p.rows for p in parts]), np.concatenate([p.values for p in parts]))


def _timestamps(events: list[Event], text: bytes | memoryview) -> npt.NDArray[np.int64]:
    """``ts`` in ns; epoch-scale float microseconds are reparsed from the text to stay exact."""
    try:
        ns, exact = micros_to_ns([e.ts for e in events])
        if not exact:
            ns = exact_micros_to_ns([r.ts for r in RAW_TS_LIST.decode(text)], ns)
    except TimestampError as exc:
        raise ChunkProblem(exc.index, f"field ts: {exc.problem}") from None
    return ns


def _durations(values: Sequence[int | float | None]) -> npt.NDArray[np.int64]:
    try:
        # durations are small, so float64 holds them to the ns; no text reparse needed
        return micros_to_ns(values)[0]
    except TimestampError as exc:
        raise ChunkProblem(exc.index, f"field dur: {exc.problem}") from None
