"""Streaming in pieces: cuts inside events are undone, and pieces decoded by worker processes
give exactly the table a one-piece read gives."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ctda.forking import usable_cpus
from ctda.ingest import chunks, native, pipeline, pool, source
from ctda.ingest.decode import decode_piece
from ctda.ingest.errors import TraceError
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable

DATA = Path(__file__).parent / "data"


def tricky_events(n: int) -> list[dict[str, Any]]:
    """Events whose text contains the "}, {" cut pattern inside strings and nested args."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"op}}, {{{i}" if i % 3 == 0 else f"op{i}",
                "pid": 1,
                "tid": 1 + i % 2,
                "ts": 10 * i,
                "dur": 5,
                "args": {"External id": i, "nested": [{"a": i}, {"b": [1, 2]}], "Input Dims": [[1], [2, 3]]},
            }
        )
        if i % 4 == 0:
            out.append(
                {
                    "ph": "s",
                    "id": i,
                    "pid": 1,
                    "tid": 1 + i % 2,
                    "ts": 10 * i,
                    "cat": "fwdbwd",
                    "name": "fwdbwd",
                }
            )
    return out


def write_doc(path: Path, events: list[dict[str, Any]], bare: bool = False) -> Path:
    doc: Any = (
        events
        if bare
        else {
            "schemaVersion": 1,
            "traceEvents": events,
            "deviceProperties": [{"id": 0, "name": "a ] b"}],
            "traceName": "x]}, {y",
        }
    )
    path.write_text(json.dumps(doc, indent=1))
    return path


def same(a: EventTable, b: EventTable) -> None:
    assert a.events.equals(b.events)
    assert a.lanes.equals(b.lanes)
    assert a.flows.equals(b.flows)
    assert a.meta == b.meta


@pytest.mark.parametrize("bare", [False, True])
@pytest.mark.parametrize("parallel", [False, True])
def test_small_pieces_and_bad_cuts_give_the_same_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bare: bool, parallel: bool
) -> None:
    path = write_doc(tmp_path / "t.json", tricky_events(300), bare)
    whole = read_trace(path, parallel=False)
    assert len(whole) == 375
    assert whole.decoded("name")[0] == "op}, {0"
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 300)  # dozens of pieces, many cut inside events
    same(read_trace(path, parallel=parallel), whole)


@pytest.mark.parametrize("parallel", [False, True])
def test_cuts_in_the_metadata_after_the_array_are_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    """A long tail of objects after traceEvents: cuts land there and must not make events."""
    doc = {
        "traceEvents": tricky_events(100),
        "deviceProperties": [{"id": i, "name": f"gpu}}, {{{i}"} for i in range(300)],
        "distributedInfo": {"rank": 2, "world_size": 4},
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    whole = read_trace(path, parallel=False)
    assert len(whole) == 125 and len(whole.meta.device_properties) == 300
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 700)
    same(read_trace(path, parallel=parallel), whole)


def test_error_in_a_late_piece_names_the_global_event_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = tricky_events(200)
    events[180]["ts"] = "late"
    path = write_doc(tmp_path / "t.json", events)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 500)
    with pytest.raises(TraceError, match=r"event 180: field ts"):
        read_trace(path, parallel=True)


def test_truncated_document_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": tricky_events(200)})[:-5000])
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 400)
    with pytest.raises(TraceError, match="truncated JSON"):
        read_trace(path, parallel=True)


def _die(text: bytes) -> Any:
    os._exit(3)


def _raise(text: bytes) -> Any:
    raise RuntimeError("worker bug")


@pytest.mark.parametrize("fault", [_die, _raise], ids=["worker dies", "worker raises"])
def test_worker_failures_fall_back_to_decoding_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: Any
) -> None:
    monkeypatch.setenv(native.READER_ENV, "python")  # the Python path decodes in processes
    if not pool.pool_available():
        pytest.skip("needs fork and two CPUs")
    path = write_doc(tmp_path / "t.json", tricky_events(300))
    whole = read_trace(path, parallel=False)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(pool, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(pool, "decode_piece", fault)  # the forked workers inherit the fault
    same(read_trace(path, parallel=True), whole)


@pytest.mark.skipif(not native.built(), reason="the native reader decodes in threads")
def test_native_pieces_decode_in_threads_and_a_failed_one_again_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if usable_cpus() < 2:
        pytest.skip("one CPU: no decode workers")
    path = write_doc(tmp_path / "t.json", tricky_events(300))
    whole = read_trace(path, parallel=False)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 2000)
    started: list[pool.ThreadDecodePool | pool.DecodePool] = []
    real_start = pool.start_pool

    def recording(*args: Any) -> pool.ThreadDecodePool | pool.DecodePool:
        started.append(real_start(*args))
        return started[-1]

    monkeypatch.setattr(pipeline, "start_pool", recording)
    failed: list[str] = []

    def fail_in_worker(text: bytes) -> Any:
        if threading.current_thread() is not threading.main_thread():
            failed.append(threading.current_thread().name)
            raise RuntimeError("worker bug")
        return decode_piece(text)

    monkeypatch.setattr(pool, "decode_piece", fail_in_worker)
    same(read_trace(path, parallel=True), whole)
    assert [type(p) for p in started] == [pool.ThreadDecodePool]
    assert failed and all(name.startswith("ctda-decode") for name in failed)


def test_shipped_trace_in_pieces_equals_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / "kineto/resnet50_nw0_2020_bare_list.json.gz"
    whole = read_trace(path, parallel=False)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 20)
    same(read_trace(path, parallel=True), whole)


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_progress_reports_file_bytes_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    path = tmp_path / name
    text = json.dumps({"traceEvents": tricky_events(300)}).encode()
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    monkeypatch.setattr(source, "READ_BLOCK", 4096)
    seen: list[int] = []
    read_trace(path, progress=seen.append)
    assert len(seen) > 3
    assert seen == sorted(seen) and seen[-1] == path.stat().st_size


def test_decode_piece_reports_where_a_piece_ends_inside_an_event() -> None:
    assert decode_piece(b'[{"ph": "X", "name": "a}, {b"]').ends_inside
    assert decode_piece(b'[{"ph": "X", "args": {"l": [{"a": 1}]').ends_inside
    syntax = decode_piece(b'[{"ph": "X" "name": "a"}, {"ph": "i"}]')
    assert syntax.byte > 0 and not syntax.ends_inside
