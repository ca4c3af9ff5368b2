"""Hostile trace files at the reader: decompression bombs (refused by the command line
quickly and at small peak memory; counted decompressed by the UI's upload), linear-time
reading of pathological text, and decode workers that die with their parent.

Every other hostile input (queries, nesting, special files, names) is in ``test_hostile.py``.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctda.ingest.reader import read_trace
from tests.hostile_helpers import CTDA, gzip_bomb

pytest.importorskip("ladybug")


# --- decompression bombs ---------------------------------------------------------------------


def test_gzip_bomb_is_refused_quickly_and_small(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.json.gz")
    assert bomb.stat().st_size < 12 << 20
    # the child's peak RSS, measured in a process that has no other children
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.monotonic()\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60)\n"
        "print(r.returncode, time.monotonic() - t,"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)\n"
        "sys.stderr.write(r.stderr)\n"
    )
    for cmd in ("analyze", "ingest"):
        extra = ["--db", str(tmp_path / "s.lbug")] if cmd == "ingest" else []
        out = subprocess.run(
            [sys.executable, "-c", probe, *CTDA, cmd, str(bomb), *extra],
            capture_output=True,
            text=True,
            timeout=120,
        )
        code, seconds, rss_kib = out.stdout.split()
        assert int(code) == 2, out.stderr
        lines = [x for x in out.stderr.splitlines() if x.strip()]
        # blank space compresses best: the cap on unbroken text may meet it before the ratio does
        refused = "200x" in lines[0] or "without an event boundary" in lines[0]
        assert len(lines) == 1 and "bomb.json.gz" in lines[0] and refused, out.stderr
        assert int(rss_kib) < 500 * 1024, f"peak RSS {int(rss_kib) / 1024:.0f} MB"
        print(f"{cmd}: refused in {float(seconds):.1f} s, peak RSS {int(rss_kib) / 1024:.0f} MB")
    assert not (tmp_path / "s.lbug").exists()  # nothing was stored, not even an empty store


def test_ui_upload_counts_decompressed_bytes(tmp_path: Path) -> None:
    from ctda.ui import data
    from ctda.ui.settings import Settings

    db = tmp_path / "ui.lbug"
    settings = Settings(db=str(db), max_upload_mb=64, max_trace_mb=1, uploads=str(tmp_path / "up"))
    with pytest.raises(data.UIError, match=r"small\.json\.gz: more than 1 MiB"):
        big = gzip.compress(json.dumps({"traceEvents": [{"ph": "i", "name": "x" * 100}] * 20000}).encode())
        assert len(big) < 1 << 20
        data.ingest_upload(settings, "small.json.gz", big, name=None, force=False, step=lambda *_: None)
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", gib=1).read_bytes()
    settings = Settings(db=str(db), max_upload_mb=64, uploads=str(tmp_path / "up"))
    with pytest.raises(data.UIError, match=r"bomb\.json\.gz: (expands more than|more than 64 MiB of text)"):
        data.ingest_upload(settings, "bomb.json.gz", bomb, name=None, force=False, step=lambda *_: None)
    assert not db.exists()
    assert not list((tmp_path / "up").iterdir())  # the refused uploads are not kept


# --- linear-time reading of pathological text ------------------------------------------------


def test_an_event_spanning_many_pieces_is_decoded_a_few_times(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ctda.ingest import chunks, pipeline

    inner = ",".join(['{"k":1}'] * 20000)  # "},{" inside one event: a cut candidate every few bytes
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "big",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 5,
            "args": {"l": "LIST"},
        },
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 20, "dur": 5},
    ]
    text = json.dumps({"traceEvents": events}).replace('"LIST"', f"[{inner}]")
    path = tmp_path / "t.json"
    path.write_text(text)
    calls = []
    real = pipeline.decode_piece
    monkeypatch.setattr(pipeline, "decode_piece", lambda t: calls.append(len(t)) or real(t))
    chunker = chunks.Chunker(path, chunk_bytes=1024)
    cols, _ = pipeline.decode_pieces(chunker, parallel=False)
    assert sum(c.n for c in cols) == 3
    pieces = len(text) // 1024
    # one decode per piece would be quadratic in bytes: the doubling keeps the total linear
    assert sum(calls) < 6 * len(text), (len(calls), pieces, sum(calls))


def test_blank_runs_between_events_do_not_rescan(tmp_path: Path) -> None:
    body = (
        (" " * 5000)
        .join(
            json.dumps(
                {"ph": "X", "cat": "cpu_op", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
            )
            + ","
            for i in range(200)
        )
        .rstrip(",")
    )
    path = tmp_path / "blanks.json"
    path.write_text('{"traceEvents":[' + body.rstrip().rstrip(",") + "]}")
    assert len(read_trace(path, parallel=False)) == 200


# --- the decode workers die with their parent -------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the decode pool is Linux-only")
def test_decode_worker_dies_with_its_parent(tmp_path: Path) -> None:
    from ctda.ingest.pool import pool_available

    if not pool_available():
        pytest.skip("one CPU: no decode workers")
    ev = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::add",
        "pid": 1,
        "tid": 1,
        "dur": 1,
        "args": {"x": "y" * 40},
    }
    path = tmp_path / "big.json"
    with path.open("w") as fh:
        fh.write('{"traceEvents":[')
        fh.write(",".join(json.dumps({**ev, "ts": i}) for i in range(400_000)))
        fh.write("]}")
    proc = subprocess.Popen(  # the Python path decodes in worker processes (native: threads)
        [*CTDA, "analyze", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CTDA_READER": "python"},
    )
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.01)
    if not workers:
        proc.kill()
        proc.wait()
        pytest.skip("the analysis ended before a decode worker was seen")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [
            w
            for w in alive
            if Path(f"/proc/{w}").exists()
            and "Z" not in Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0]
        ]
        time.sleep(0.05)
    assert not alive, f"decode workers {alive} outlived their parent"
