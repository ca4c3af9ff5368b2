"""The native piece reader gives exactly what the Python (msgspec) reader gives.

For every input, valid or not, ``decode_piece`` must return the same columns (same values,
dtypes and dictionary order) or the same problem, whichever reader runs. The native one
reads what it is sure of and declines the rest (the Python path then reads it), so each
case also says which of the two it expects, keeping the fast path from going unused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from ctda.cli.app import app
from ctda.ingest import native
from ctda.ingest.columns import PieceColumns
from ctda.ingest.decode import Decoded, decode_piece
from ctda.ingest.nesting import nest
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable
from tests.conftest import DATA, NATIVE_SKIP

NEEDS_NATIVE = pytest.mark.skipif(not native.built(), reason=NATIVE_SKIP)
SHIPPED = sorted(p for p in DATA.rglob("*.json.gz") if "HTA_OUTPUT" not in p.name)


def _piece(*events: dict[str, Any] | str) -> bytes:
    return ("[" + ",\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "]").encode()


def _with(monkeypatch: pytest.MonkeyPatch, reader: str, fn: Any, *args: Any) -> Any:
    with monkeypatch.context() as m:
        m.setenv(native.READER_ENV, reader)
        return fn(*args)


def _both(monkeypatch: pytest.MonkeyPatch, text: bytes) -> tuple[Decoded, Decoded]:
    return _with(monkeypatch, "python", decode_piece, text), _with(monkeypatch, "native", decode_piece, text)


def _same_array(a: Any, b: Any, where: str) -> None:
    if isinstance(a, pa.Array):
        assert isinstance(b, pa.Array) and a.type == b.type and a.equals(b), where
    else:
        assert a.dtype == b.dtype and np.array_equal(a, b), where


def assert_same_columns(a: PieceColumns, b: PieceColumns) -> None:
    assert a.n == b.n
    assert list(a.dense) == list(b.dense) and list(a.sparse) == list(b.sparse)
    for k in a.dense:
        _same_array(a.dense[k], b.dense[k], k)
    for k in a.sparse:
        _same_array(a.sparse[k].rows, b.sparse[k].rows, f"{k} rows")
        _same_array(a.sparse[k].values, b.sparse[k].values, f"{k} values")


def assert_same_tables(a: EventTable, b: EventTable) -> None:
    assert a.events.schema == b.events.schema
    for name in a.events.column_names:
        assert a.events.column(name).equals(b.events.column(name)), name
    assert a.lanes.equals(b.lanes) and a.flows.equals(b.flows)
    assert a.meta == b.meta


def _native_accepts(text: bytes) -> bool:
    assert native._EXT is not None
    return native._EXT.piece_columns(text) is not None


# --- inputs the native reader reads itself -------------------------------------------------

CPU = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5}
ACCEPTED: dict[str, bytes] = {
    "unicode escapes and raw UTF-8": _piece(
        {**CPU, "name": "caf\u00e9 \U0001f600 \u00fc"},
        r'{"ph": "X", "cat": "cpu_op", "name": "\u00e9\ud83d\ude00 \"q\" \\ \n\/", "pid": 1, "tid": 2,'
        r' "ts": 1, "dur": 1}',
        r'{"p\u0068": "X", "cat": "cpu_op", "name": "esc key", "pid": 1, "tid": 2, "ts": 1, "dur": 1}',
    ),
    "duplicate keys: the last wins, a repeated args replaces the first": _piece(
        '{"ph": "i", "ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1, "ts": 2, "dur": 1,'
        ' "args": {"External id": 5, "Sequence number": 9}, "args": {"External id": 6, "External id": 7}}',
    ),
    "loosely typed integer args and aliases": _piece(
        {**CPU, "args": {"External id": "42", "Ev Idx": 3.0, "Sequence number": 2.5, "Fwd thread id": "abc"}},
        {**CPU, "args": {"External id": None, "external id": 5, "Profiler Event Index": "-7", "device": ""}},
        {**CPU, "args": {"External id": "x", "external id": 5, "Sequence number": 1e3, "stream": 2}},
        {**CPU, "args": {"Sequence number": "99999999999999999999", "Fwd thread id": "  ", "Ev Idx": 1e300}},
        {**CPU, "args": {"Sequence number": -9223372036854775807, "stream_id": 7, "In msg nelems": "12"}},
        # ROCm traces write streams as hex strings
        {**CPU, "args": {"stream": "0x0", "External id": "-0x1F", "Ev Idx": "0b101", "device": "0o17"}},
        {**CPU, "args": {"stream": "0xffffffffffffffff", "External id": "0X7fffffffffffffff"}},
    ),
    "timestamps: ints, floats, more than 3 decimals, missing": _piece(
        {**CPU, "ts": 12, "dur": 3},
        {**CPU, "ts": 12.5, "dur": 0.001},
        {**CPU, "ts": 1234.56789, "dur": 2.0},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": None, "s": "t"},
    ),
    "epoch-scale timestamps reread from their text": _piece(
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": 1700000000123456.789, "dur": 1.5}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": 1700000000123457.78999, "dur": 2}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": 1700000000123458, "dur": 2}',
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "ts": -0.5, "dur": 2}',
    ),
    "pid and tid labels: 7 and '7' are one label": _piece(
        {**CPU, "pid": 7, "tid": "7"},
        {**CPU, "pid": "7", "tid": -3},
        {**CPU, "pid": "proc", "tid": 7},
        {"ph": "C", "name": "mem", "ts": 1, "args": {"x": 1}},
    ),
    "string args: sync kind, metadata names, group names, shapes": _piece(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "s",
            "pid": 0,
            "tid": 7,
            "ts": 1,
            "dur": 1,
            "args": {"cuda_sync_kind": "Event Sync"},
        },
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"labels": "L", "name": None}},
        {**CPU, "args": {"Process Group Name": 3, "Input Dims": [[2, 3], []], "Input type": ["float", ""]}},
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, "ts": 1, "dur": 1, "args": '
        '{"Process Group Name": "default_pg", "Input Dims": [ [1 , 2] ], "Concrete Inputs": ["", "3"]}}',
        {**CPU, "args": {"Input Dims": None, "Process Group Name": None}},
        {
            **CPU,
            "args": {
                "Process Group Name": "default_pg",
                "Input Dims": [[2, 3], []],
                "Input type": ["float", ""],
            },
        },
    ),
    "flows, instants, counters and unknown nested values": _piece(
        {"ph": "s", "id": 11, "pid": 1, "tid": 2, "ts": 5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 6, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "t", "id": None, "pid": 0, "tid": 7, "ts": 6, "cat": "x", "name": "x", "bp": None},
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 2,
            "ts": 7,
            "args": {
                "Bytes": 512,
                "Total Allocated": 1024,
                "Total Reserved": 2048,
                "Device Id": 0,
                "Ev Idx": 4,
            },
        },
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1, "dur": 1,'
        ' "extra": {"a": [1, 2.5e-3, true, false, null, {"b": [[[[]]]]}], "big": 1e400,'
        ' "huge": 1000000000000000000000000000000}}',
        {**CPU, "deep": json.loads("[" * 100 + "]" * 100)},
        "{}",
    ),
}


@NEEDS_NATIVE
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_native_reads_the_same_columns(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ACCEPTED[case]
    assert _native_accepts(text), "the native reader should read this itself"
    py, nat = _both(monkeypatch, text)
    assert py.columns is not None and nat.columns is not None, py.problem
    assert_same_columns(py.columns, nat.columns)


@NEEDS_NATIVE
def test_native_values() -> None:
    """A few values spelled out, so the comparison above is not two identical mistakes."""
    cols = native.piece_columns(ACCEPTED["epoch-scale timestamps reread from their text"])
    assert cols is not None
    assert cols.dense["ts_ns"].tolist() == [
        1700000000123456789,
        1700000000123457789,  # digits past the ns are cut, as the Python path's decimal cast does
        1700000000123458000,
        -500,
    ]
    cols = native.piece_columns(ACCEPTED["loosely typed integer args and aliases"])
    assert cols is not None
    ext = cols.sparse["external_id"]
    assert dict(zip(ext.rows.tolist(), ext.values.tolist())) == {0: 42, 1: 5, 5: -31, 6: 2**63 - 1}
    stream = cols.sparse["stream"]
    assert dict(zip(stream.rows.tolist(), stream.values.tolist())) == {2: 2, 4: 7, 5: 0}
    seq = cols.sparse["sequence_nr"]
    assert dict(zip(seq.rows.tolist(), seq.values.tolist())) == {2: 1000, 4: -9223372036854775807}
    cols = native.piece_columns(ACCEPTED["unicode escapes and raw UTF-8"])
    assert cols is not None
    assert cols.dense["name"].dictionary.to_pylist()[:2] == [
        "caf\u00e9 \U0001f600 \u00fc",
        '\u00e9\U0001f600 "q" \\ \n/',
    ]
    assert cols.dense["ph"].dictionary.to_pylist() == ["X"]


def _spellings(rng: np.random.Generator, n: int, max_whole: int) -> list[str]:
    """Timestamps as traces write them and as they could: 0-7 decimals, trailing zeros,
    signs, whole numbers, up to ``max_whole`` before the point."""
    out = []
    for _ in range(n):
        whole = int(rng.integers(0, max_whole))
        decimals = int(rng.integers(0, 8))
        frac = "".join(str(d) for d in rng.integers(0, 10, decimals))
        sign = "-" if rng.random() < 0.1 else ""
        out.append(f"{sign}{whole}" + (f".{frac}" if decimals else ""))
    return out


@NEEDS_NATIVE
@pytest.mark.parametrize(
    "max_whole", [10**4, 10**9, 2**42, 10**13, 2**52], ids=["small", "1e9", "2^42", "epoch us", "2^52"]
)
def test_native_timestamps_equal_the_python_readers_for_any_spelling(
    max_whole: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The native reader takes a number whose digits form an integer below 2^53 as that
    # integer over a power of ten (one IEEE division: the correctly rounded float), else
    # parses it the general way; each piece mixes both sides of 2^53 and of the 3-decimal cut.
    rng = np.random.default_rng(max_whole % 1000)
    events = [
        f'{{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": {ts}, "dur": {dur}}}'
        for ts, dur in zip(_spellings(rng, 2000, max_whole), _spellings(rng, 2000, 10**6))
    ]
    for start in range(0, len(events), 500):
        text = _piece(*events[start : start + 500])
        assert _native_accepts(text)
        py, nat = _both(monkeypatch, text)
        assert py.columns is not None and nat.columns is not None, py.problem
        assert_same_columns(py.columns, nat.columns)


# --- inputs the native reader leaves to the Python path ------------------------------------

DECLINED: dict[str, bytes] = {
    "truncated inside an event": b'[{"ph": "X", "name": "a", "ts": 1',
    "truncated inside a string": b'[{"ph": "X", "name": "a',
    "not a list of objects": b"[1, 2]",
    "ts as a string": _piece({**CPU, "ts": "12"}),
    "pid as a float": _piece({**CPU, "pid": 1.5}),
    "name as a number": _piece({**CPU, "name": 5}),
    "args as a list": _piece({**CPU, "args": [1]}),
    "sync kind as a number": _piece({**CPU, "args": {"cuda_sync_kind": 3}}),
    "bool arg": _piece({**CPU, "args": {"correlation": True}}),
    "ts beyond float64 range": _piece('{"ph": "X", "ts": 1e400, "dur": 1}'),
    "ts beyond 2**53 us": _piece({**CPU, "ts": 2**60}),
    "integer arg beyond int64": _piece({**CPU, "args": {"correlation": 2**70}}),
    "string flow id (hashed)": _piece({"ph": "s", "id": "abc", "pid": 1, "tid": 2, "ts": 5}),
    "string arg with underscores": _piece({**CPU, "args": {"External id": "1_000"}}),
    "hexadecimal string arg with an underscore": _piece({**CPU, "args": {"External id": "0x_1f"}}),
    "float group name": _piece({**CPU, "args": {"Process Group Name": 1.5}}),
    "lone surrogate": _piece(r'{"ph": "X", "name": "\ud800", "ts": 1, "dur": 1}'),
    "control character in a string": b'[{"ph": "X", "name": "a\x01b", "ts": 1, "dur": 1}]',
    "bad escape": _piece(r'{"ph": "X", "name": "\q", "ts": 1, "dur": 1}'),
    "leading zero": _piece('{"ph": "X", "ts": 01, "dur": 1}'),
    "trailing text": _piece(CPU) + b" x",
    "missing comma": b'[{"ph": "X"} {"ph": "X"}]',
    "nested 300 deep (fine for Python)": _piece({**CPU, "deep": json.loads("[" * 300 + "]" * 300)}),
    "nested 5000 deep (too deep)": b'[{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}]",
    "empty list": b"[]",
}


@NEEDS_NATIVE
@pytest.mark.parametrize("case", list(DECLINED))
def test_native_declines_and_the_outcome_is_the_same(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DECLINED[case]
    assert not _native_accepts(text)
    py, nat = _both(monkeypatch, text)
    assert (py.problem, py.event, py.byte, py.ends_inside) == (
        nat.problem,
        nat.event,
        nat.byte,
        nat.ends_inside,
    )
    assert (py.columns is None) == (nat.columns is None)
    if py.columns is not None and nat.columns is not None:
        assert_same_columns(py.columns, nat.columns)


# --- whole traces -------------------------------------------------------------------------


@NEEDS_NATIVE
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_traces_read_identically(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _with(monkeypatch, "python", read_trace, path)
    b = _with(monkeypatch, "native", read_trace, path)
    assert len(a.events) > 0
    assert_same_tables(a, b)
    # and every event was read natively (in this process: no decode workers)
    before = native.STATS["events"]
    c = _with(monkeypatch, "native", lambda: read_trace(path, parallel=False))
    assert native.STATS["events"] - before >= len(c.events)


def test_version_names_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0
    expected = (
        "trace reader: native"
        if native.built()
        else "trace reader: python (msgspec; native extension not built)"
    )
    assert expected in out.output
    monkeypatch.setenv(native.READER_ENV, "python")
    out = CliRunner().invoke(app, ["--version"])
    assert "trace reader: python" in out.output


# --- the call-stack walk ------------------------------------------------------------------


@NEEDS_NATIVE
@pytest.mark.parametrize("seed", range(6))
def test_stack_walk_matches_the_closed_form(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parents, depths and partial overlaps from the native walk equal the vectorised closed
    form's on slices with ties, zero durations, partial overlaps and interleaved lanes."""
    rng = np.random.default_rng(seed)
    n = 5000
    lane = rng.integers(0, 1 + seed, n).astype(np.int32)  # seed 0: one lane
    ts = rng.integers(0, 400, n).astype(np.int64) * 10  # many equal starts
    dur = rng.choice([0, 1, 10, 35, 200, 3000], n).astype(np.int64)
    rows = np.flatnonzero(rng.random(n) < 0.9)  # not every event is a slice
    args = (rows, lane, ts, dur, n)
    py = _with(monkeypatch, "python", nest, *args)
    nat = _with(monkeypatch, "native", nest, *args)
    assert np.array_equal(py[0], nat[0]) and np.array_equal(py[1], nat[1]) and py[2] == nat[2]
    assert py[2] > 0 and int(py[1].max()) >= 3  # the cases are there: overlaps and depth
