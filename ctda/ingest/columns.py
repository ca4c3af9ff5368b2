"""Stage 3: one chunk of decoded events -> one Arrow record batch of raw columns.

Pulling attributes out of msgspec structs is the only per-event Python work in the
reader, so it is kept to the minimum: one list comprehension per top-level field, and the
``args`` fields only for the events whose kind uses them (e.g. ``Python id`` is read from
python_function events only). That skips most passes on the largest event classes, and
the kind is known per chunk because it depends on (ph, cat) alone. Everything else is
vectorised. Missing integers use the ``NA`` sentinel rather than Arrow nulls so columns
convert to numpy without copies or masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ctda.ingest.events import RAW_TS_LIST, Args, Event
from ctda.ingest.kinds import CPU_KINDS, GPU_KINDS, GPU_WORK_KINDS, Kind, kind_lut
from ctda.ingest.timestamps import NA, TimestampError, exact_micros_to_ns, micros_to_ns

_EMPTY = Args()
I64 = npt.NDArray[np.int64]
Extract = Callable[[Sequence[Args]], list[object]]


class ChunkProblem(Exception):
    """A field value the table cannot hold; ``index`` is the event's position in the chunk."""

    def __init__(self, index: int, problem: str) -> None:
        self.index, self.problem = index, problem
        super().__init__(problem)


def _kinds(*members: Kind) -> frozenset[Kind]:
    return frozenset(members)


_HOST = _kinds(Kind.RUNTIME, Kind.DRIVER)
_CPU_SPANS = _kinds(Kind.CPU_OP, Kind.USER_ANNOTATION)

#: integer args: column -> (kinds that carry it, extractor over those events' args).
#: Aliases of one key are read in the same pass, the first spelling winning.
INT_ARGS: dict[str, tuple[frozenset[Kind], Extract]] = {
    "correlation": (_HOST | GPU_KINDS, lambda a: [x.correlation for x in a]),
    "external_id": (
        _CPU_SPANS | _HOST | GPU_KINDS,
        lambda a: [x.external_id if x.external_id is not None else x.external_id_old for x in a],
    ),
    "ev_idx": (CPU_KINDS, lambda a: [x.ev_idx if x.ev_idx is not None else x.ev_idx_new for x in a]),
    "device": (GPU_KINDS | _HOST, lambda a: [x.device for x in a]),
    "stream": (GPU_KINDS | _HOST, lambda a: [x.stream if x.stream is not None else x.stream_id for x in a]),
    "wait_on_stream": (GPU_WORK_KINDS | {Kind.SYNC}, lambda a: [x.wait_on_stream for x in a]),
    "wait_on_event_corr": (_kinds(Kind.SYNC), lambda a: [x.wait_on_event_corr for x in a]),
    "python_id": (_kinds(Kind.PYTHON), lambda a: [x.python_id for x in a]),
    "python_parent_id": (_kinds(Kind.PYTHON), lambda a: [x.python_parent_id for x in a]),
    "fwd_thread_id": (_CPU_SPANS, lambda a: [x.fwd_thread_id for x in a]),
    "sequence_nr": (_CPU_SPANS, lambda a: [x.sequence_nr for x in a]),
    "nbytes": (_kinds(Kind.MEMCPY, Kind.MEMSET) | _HOST, lambda a: [x.nbytes for x in a]),
}
#: string args, same scheme; metadata events carry names in ``name`` or ``labels``
STR_ARGS: dict[str, tuple[frozenset[Kind], Extract]] = {
    "sync_kind": (_kinds(Kind.SYNC), lambda a: [x.sync_kind for x in a]),
    "meta_name": (_kinds(Kind.METADATA), lambda a: [x.name if x.name is not None else x.labels for x in a]),
}
STR_COLUMNS = ("ph", "name", "cat", "pid", "tid", "sync_kind", "meta_name")


def chunk_to_batch(events: list[Event], text: bytes) -> pa.RecordBatch:
    """Columns of one chunk (``text`` is the chunk's JSON, reread only for exact timestamps)."""
    ph, cat = _strings([e.ph for e in events]), _strings([e.cat for e in events])
    kind = kind_lut(ph.dictionary.to_pylist(), cat.dictionary.to_pylist())[
        ph.indices.to_numpy(), cat.indices.to_numpy()
    ]
    cols: dict[str, pa.Array | npt.NDArray[np.generic]] = {
        "ph": ph,
        "name": _strings([e.name for e in events]),
        "cat": cat,
        "pid": _labels([e.pid for e in events]),
        "tid": _labels([e.tid for e in events]),
        "ts_ns": _timestamps(events, text),
        "dur_ns": _durations([e.dur for e in events]),
    }
    flows = np.flatnonzero(kind == Kind.FLOW)
    flow_events = [events[i] for i in flows.tolist()]
    cols["flow_id"] = _scatter(len(events), flows, _flow_ids([e.id for e in flow_events]))
    enclosing = np.zeros(len(events), dtype=np.bool_)
    enclosing[flows] = np.array([e.bp == "e" for e in flow_events], dtype=np.bool_)
    cols["flow_enclosing"] = enclosing
    args = _ArgsByKind([e.args for e in events], kind)
    for col, (kinds, extract) in INT_ARGS.items():
        rows, sub = args.of(kinds)
        cols[col] = _scatter(len(events), rows, _ints(extract(sub)))
    for col, (kinds, extract) in STR_ARGS.items():
        rows, sub = args.of(kinds)
        cols[col] = _sparse_strings(len(events), rows, extract(sub))
    cols["kind"] = kind
    return pa.RecordBatch.from_pydict({k: pa.array(v) if isinstance(v, np.ndarray) else v for k, v in cols.items()})


class _ArgsByKind:
    """The ``args`` of the events of some kinds, gathered once per distinct kind set."""

    def __init__(self, args: list[Args | None], kind: npt.NDArray[np.int8]) -> None:
        self._args, self._kind = args, kind
        self._cache: dict[frozenset[Kind], tuple[I64, list[Args]]] = {}

    def of(self, kinds: frozenset[Kind]) -> tuple[I64, list[Args]]:
        if kinds not in self._cache:
            lut = np.zeros(max(Kind) + 1, dtype=np.bool_)
            lut[[int(k) for k in kinds]] = True
            rows = np.flatnonzero(lut[self._kind])
            args = self._args
            self._cache[kinds] = rows, [args[i] or _EMPTY for i in rows.tolist()]
        return self._cache[kinds]


def _scatter(n: int, rows: I64, values: I64) -> I64:
    out = np.full(n, NA, dtype=np.int64)
    out[rows] = values
    return out


def _ints(values: Sequence[object]) -> I64:
    """Loosely typed integer args ("4096", 4096.0, 4096) as int64; anything else is NA."""
    try:
        # no target type: pyarrow would silently truncate 2.5 to 2 when asked for int64
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = pa.array([], pa.null())
    if not (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)) or len(arr) != len(values):
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


def _timestamps(events: list[Event], text: bytes) -> I64:
    """``ts`` in ns; epoch-scale float microseconds are reparsed from the text to stay exact."""
    try:
        ns, exact = micros_to_ns([e.ts for e in events])
        if not exact:
            ns = exact_micros_to_ns([r.ts for r in RAW_TS_LIST.decode(text)], ns)
    except TimestampError as exc:
        raise ChunkProblem(exc.index, f"field ts: {exc.problem}") from None
    return ns


def _durations(values: Sequence[int | float | None]) -> I64:
    try:
        # durations are small, so float64 holds them to the ns; no text reparse needed
        return micros_to_ns(values)[0]
    except TimestampError as exc:
        raise ChunkProblem(exc.index, f"field dur: {exc.problem}") from None


def _strings(values: Sequence[str]) -> pa.DictionaryArray:
    return pc.dictionary_encode(pa.array(values, pa.string()))


def _sparse_strings(n: int, rows: I64, values: Sequence[object]) -> pa.DictionaryArray:
    """A string column set only at ``rows``; the rest are "" (code 0)."""
    indices = np.zeros(n, dtype=np.int32)
    if not len(rows):
        return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array([""]))
    sub = pc.dictionary_encode(pa.array([v if isinstance(v, str) else "" for v in values], pa.string()))
    indices[rows] = sub.indices.to_numpy() + 1
    return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array([""] + sub.dictionary.to_pylist()))


def _labels(values: Sequence[int | str]) -> pa.DictionaryArray:
    """Dictionary-encode pid/tid labels as strings; the all-int case avoids per-event str()."""
    try:
        ints = pc.dictionary_encode(pa.array(values, type=pa.int64()))
        return pa.DictionaryArray.from_arrays(ints.indices, ints.dictionary.cast(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    # mixed: 7 and "7" name the same thread, so codes follow the label, not the value
    label_code: dict[str, int] = {}
    value_code = {v: label_code.setdefault(str(v), len(label_code)) for v in dict.fromkeys(values)}
    codes = np.fromiter(map(value_code.__getitem__, values), dtype=np.int32, count=len(values))
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(list(label_code), pa.string()))


def _flow_ids(values: Sequence[int | str | None]) -> I64:
    """Flow ids are ints in every known trace; strings (hex or text) and huge ints are hashed stably."""
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
            value = int(value, 0)
        except ValueError:
            return hash_label(value)
    return value if -(2**63) < value < 2**63 else hash_label(str(value))


def hash_label(text: str) -> int:
    """A stable 62-bit id for a non-numeric label (Python's hash() is salted per run)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2
