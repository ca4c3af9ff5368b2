"""Unreadable input raises one-line TraceErrors; odd but valid events are kept and counted."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctda.ingest.errors import TraceError
from ctda.ingest.kinds import Kind
from ctda.ingest.reader import read_trace


def x_event(name: str, ts: Any = 10, dur: Any = 5, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def trace_text(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def _truncated_gzip() -> bytes:
    data = gzip.compress(trace_text([x_event(f"op{i}", ts=i) for i in range(5000)]))
    return data[: len(data) // 2]


BAD_FILES: dict[str, tuple[bytes, str]] = {
    "not_json.json": (b"hello, world", "not JSON"),
    "empty.json": (b"", "empty file"),
    "blank.json": (b"  \n ", "no JSON content"),
    "truncated.json.gz": (_truncated_gzip(), "truncated gzip"),
    "no_events.json": (trace_text([]), "no events"),
    "no_trace_events.json": (b'{"schemaVersion": 1}', "no traceEvents array"),
    "ts_is_text.json": (trace_text([x_event("a"), x_event("b", ts="soon")]), "event 1: field ts"),
    "pid_is_float.json": (trace_text([{**x_event("a"), "pid": 1.5}]), "event 0: field pid"),
    "event_is_number.json": (b'{"traceEvents": [7]}', "event 0"),
    "x_without_ts.json": (
        trace_text([x_event("a"), {"ph": "X", "name": "b", "dur": 1}]),
        "event 1: complete event (ph X) has no ts",
    ),
    "x_without_dur.json": (
        trace_text([{"ph": "X", "name": "b", "ts": 1}]),
        "event 0: complete event (ph X) has no dur",
    ),
    "cut_short.json": (trace_text([x_event("a"), x_event("b")])[:-20], "truncated JSON"),
    "syntax_error.json": (b'{"traceEvents": [{"ph": "X" "name": "b"}]}', "malformed JSON at byte"),
    "bad_tail.json": (b'{"traceEvents": [], "x": }', "malformed JSON"),
    "ts_out_of_range.json": (trace_text([x_event("a", ts=2**60)]), "event 0: field ts"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_input_is_one_line_naming_file_and_problem(tmp_path: Path, name: str) -> None:
    content, expected = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


def test_directory_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory"):
        read_trace(tmp_path)
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "nope.json.gz")


def test_a_file_that_is_not_a_ctda_parquet_table(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1 but not really")
    with pytest.raises(TraceError, match="not a readable ctda Parquet table"):
        read_trace(path)


def test_odd_but_valid_events_are_kept_and_counted(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "x",
            "ts": 0,
            "dur": 1000,
        },
        x_event("zero", ts=10, dur=0),
        x_event("negative", ts=20, dur=-3),
        x_event("parent", ts=100, dur=50),
        x_event("outlives parent", ts=120, dur=60),  # overlaps its parent's end on the same thread
        x_event("late", ts=5000, dur=1),  # after the profiler's own span
        x_event("custom", ts=30, dur=2, cat="my_category"),
        {"ph": "b", "cat": "async", "name": "async begin", "pid": 1, "tid": 1, "ts": 40, "id": 3},
    ]
    path = tmp_path / "odd.json"
    path.write_bytes(trace_text(events))
    table = read_trace(path)
    assert len(table) == len(events)  # nothing dropped
    assert table.decoded("name").tolist() == [e["name"] for e in events]
    warnings = table.meta.warnings
    assert warnings["complete events with zero duration"] == 1
    assert warnings["complete events with negative duration"] == 1
    assert warnings["slices partially overlapping their parent on a thread"] == 1
    assert warnings["events outside the profiler's trace span"] == 1
    assert warnings["complete events of unknown category 'my_category'"] == 1
    assert warnings["events of unknown phase 'b'"] == 1
    parent = table.col("parent")
    names = table.decoded("name").tolist()
    assert parent[names.index("outlives parent")] == names.index("parent")
    assert table.col("kind")[names.index("custom")] == Kind.OTHER
    assert table.col("lane")[names.index("custom")] >= 0  # still on its thread
    assert table.col("dur_ns")[names.index("negative")] == -3000


def test_clean_trace_has_no_warnings(tmp_path: Path) -> None:
    path = tmp_path / "clean.json"
    path.write_bytes(trace_text([x_event("a", ts=1, dur=10), x_event("b", ts=2, dur=3)]))
    table = read_trace(path)
    assert table.meta.warnings == {}
    assert np.array_equal(table.col("parent"), [-1, 0])
