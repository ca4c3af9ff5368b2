"""One set of input limits for every reader: the longest unbroken text, the absolute cap
and file types; rank numbers and world sizes of a job, and errors from its worker
processes; the UI's upload path; and the small safety rules around them (export paths, run
names, the UI's address). Part of issue 29: its bounded what-if factors are in
``test_whatif_limits.py``, ``ctda merge`` is in ``test_merge_hostile.py``.

Each hostile input ends in one line and exit 2 with the store unchanged. Commands run
in-process through typer's CliRunner; a real subprocess is used only where the process
itself is under test: its peak memory (``os.wait4`` in a small probe process) and a
worker process that fails.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctda.cli.ui_cmd import command, is_loopback
from ctda.ingest import chunks, pipeline
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import DEFAULT_MAX_BYTES, Limits, open_regular
from ctda.ingest.reader import read_trace
from ctda.ingest.source import open_stream
from ctda.job.load import MAX_WORLD_SIZE
from ctda.ui.settings import DEFAULT_MAX_TRACE_MB, DEFAULT_MAX_UPLOAD_MB
from tests.input_limits_helpers import JOB, ROOT, SMALL, cli, event, one_line

CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]
MiB = 1 << 20


# --- helpers ---------------------------------------------------------------------------------
# ``measured`` starts processes: it stays in this module (not in input_limits_helpers.py), as
# tests/conftest.py finds ``subprocess`` only in code of a test's own module (the slow tier).


#: runs its arguments as a child and prints the child's exit code and peak RSS (KiB). The
#: child is forked from this small process: a child forked from the (large) test process
#: reports that process's size as its own peak on Linux, whatever it then uses.
PROBE = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, flush=True)\n"
)


def measured(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 180
) -> tuple[int, str, int]:
    """Run ``ctda args`` as a process; its exit code, stderr and peak RSS in MiB (with the
    decode workers it waited for)."""
    try:
        res = subprocess.run(
            [sys.executable, "-c", PROBE, *CTDA, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ctda {' '.join(args)} ran past {timeout} s")
    code, rss_kib = res.stdout.split()
    return int(code), res.stderr, int(rss_kib) // 1024


def _member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1, mtime=0)


def _blank_bomb(path: Path, blank_mib: int = 320) -> Path:
    """2 MiB of random text in one event, then ``blank_mib`` of blanks: about 130x expansion,
    under the 200x ratio cap, on about 2.5 MB of disk (the blank member repeated)."""
    rnd = base64.b64encode(np.random.default_rng(7).bytes(2 * MiB))
    head = b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"' + rnd + b'","pid":1,"tid":1,"ts":1,"dur":2}'
    blank = _member(b" " * (32 * MiB))
    path.write_bytes(_member(head) + blank * (blank_mib // 32) + _member(b"]}"))
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    # a read that blocks on the FIFO would hang the test: fail it instead
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on a FIFO"))
    signal.alarm(60)
    try:
        yield path
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- the reader: the longest unbroken text, the absolute cap, file types ----------------------


def test_blank_bomb_under_the_ratio_cap_is_refused_at_bounded_memory(tmp_path: Path) -> None:
    """The issue's attack, scaled down: random text plus blank space expands ~130x (under the
    200x cap); the reader held the blanks whole (1.2 GB peak for 320 MiB before). Now the
    stretch without an event boundary is capped (64 MiB by default)."""
    bomb = _blank_bomb(tmp_path / "blank.json.gz")
    assert bomb.stat().st_size < 4 * MiB
    code, err, rss = measured(["analyze", str(bomb)])
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "blank.json.gz" in lines[0] and "64 MiB of text without an event boundary" in lines[0]
    assert rss < 600, f"peak RSS {rss} MiB"
    print(f"blank bomb (320 MiB of blanks, 130x): refused, peak RSS {rss} MiB")


def test_unbroken_text_before_inside_and_after_the_array(tmp_path: Path) -> None:
    small = Limits(max_event_bytes=256 << 10)
    ev = json.dumps(event())
    before = tmp_path / "before.json"
    before.write_text('{"meta": "' + " " * (400 << 10) + '", "traceEvents": [' + ev + "]}")
    after = tmp_path / "after.json"
    after.write_text('{"traceEvents": [' + ev + "]" + " " * (400 << 10) + "}")
    for path, where in ((before, "before the event array"), (after, "without an event boundary")):
        chunker = chunks.Chunker(path, chunk_bytes=4096, limits=small)
        with pytest.raises(TraceError, match=f"{path.name}: more than 256 KiB of text {where}"):
            pipeline.decode_pieces(chunker, parallel=False)
    with pytest.raises(TraceError, match="before the event array"):  # the reader's own pieces
        read_trace(before, limits=small, parallel=False)
    # one event whose strings hold "},{" (a cut candidate every few bytes): the glued text
    # of that one event is bounded too
    inner = ",".join(['{"k":1}'] * 60000)
    glued = tmp_path / "glued.json"
    big = json.dumps(event("big", ts=5, dur=1, args={"l": "LIST"})).replace('"LIST"', f"[{inner}]")
    glued.write_text('{"traceEvents": [' + ev + "," + big + "," + ev + "]}")
    chunker = chunks.Chunker(glued, chunk_bytes=4096, limits=Limits(max_event_bytes=64 << 10))
    with pytest.raises(TraceError, match="more than 64 KiB of text without an event boundary"):
        pipeline.decode_pieces(chunker, parallel=False)
    # the same files read whole under the defaults
    assert len(read_trace(before, parallel=False)) == 1 and len(read_trace(glued, parallel=False)) == 3


def test_limit_variables_are_checked_and_documented_defaults(tmp_path: Path) -> None:
    assert DEFAULT_MAX_BYTES == 16 << 30
    assert (DEFAULT_MAX_TRACE_MB, DEFAULT_MAX_UPLOAD_MB) == (2048, 512)  # the UI: a shared server
    assert "CTDA_MAX_EVENT_BYTES" in (ROOT / "docs" / "limits.md").read_text()
    for var, value in (
        ("CTDA_MAX_EVENT_BYTES", "lots"),
        ("CTDA_MAX_EXPANSION", "nan"),
        ("CTDA_MAX_HELPER_BYTES", "-1"),
    ):
        line = one_line(cli("inspect", str(SMALL), env={var: value}))
        assert f"${var}" in line
    line = one_line(cli("inspect", str(SMALL), env={"CTDA_MAX_EVENT_BYTES": "1K"}))
    assert "1 KiB of text" in line and SMALL.name in line


def test_only_regular_files_are_opened(tmp_path: Path, fifo: Path) -> None:
    for path, kind in (
        (fifo, "a FIFO"),
        (Path("/dev/zero"), "a character device"),
        (tmp_path, "a directory"),
    ):
        with pytest.raises(TraceError, match=kind):
            open_stream(path)
    # a symlink is followed to what it names: to a device it is refused, to a trace it is read
    to_dev = tmp_path / "dev.json"
    to_dev.symlink_to("/dev/zero")
    to_trace = tmp_path / "trace.json.gz"
    to_trace.symlink_to(SMALL)
    with pytest.raises(TraceError, match="a character device"):
        read_trace(to_dev)
    assert len(read_trace(to_trace, parallel=False)) == len(read_trace(SMALL, parallel=False))
    with open_regular(SMALL) as fh:
        assert fh.read(2) == b"\x1f\x8b"


# --- jobs: rank numbers and world sizes, errors from worker processes -------------------------


def _rank_trace(path: Path, **dist: Any) -> Path:
    doc = json.loads(gzip.decompress(SMALL.read_bytes()))
    doc["distributedInfo"] = dist
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("name", "dist", "problem"),
    [
        ("rank0.json", {"rank": 0, "world_size": 10**9}, "world_size 1000000000 is outside 1..1,048,576"),
        ("rank99999999999.json", {}, "rank 99999999999 (from its file name) is outside 0..1,048,575"),
        ("rank0.json", {"rank": 2**40, "world_size": 8}, "rank 1099511627776 (from its distributedInfo)"),
    ],
)
def test_rank_numbers_and_world_sizes_are_bounded(
    tmp_path: Path, name: str, dist: dict[str, Any], problem: str
) -> None:
    job = tmp_path / "job"
    job.mkdir()
    _rank_trace(job / name, **dist)
    db = tmp_path / "s.lbug"
    for args in (["analyze", str(job)], ["ingest", str(job), "--db", str(db)]):
        line = one_line(cli(*args))
        assert name in line and problem in line, line
    assert not db.exists()
    assert MAX_WORLD_SIZE == 1 << 20


def test_a_partial_job_lists_its_missing_ranks(tmp_path: Path) -> None:
    from ctda.job.load import RankId, identify

    ids = [RankId(f"r{r}.json", r, "file name", None, 6) for r in (0, 3)]
    layout = identify(ids)
    assert layout.world_size == 6 and layout.missing == [1, 2, 4, 5]


def test_trace_error_pickles_back_from_a_worker() -> None:
    exc = TraceError("/x/rank1.json", "truncated JSON:\n the event array is never closed")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is TraceError and str(back) == str(exc) and back.path == exc.path


def test_a_failing_rank_worker_is_one_line(tmp_path: Path) -> None:
    """A bad rank file fails in a worker process (the local process pool); its error used to
    come back as ``TypeError: TraceError.__init__() missing ... 'problem'`` (a broken pool)."""
    job = tmp_path / "job"
    job.mkdir()
    for f in JOB.glob("rank*.json.gz"):
        (job / f.name).write_bytes(f.read_bytes())
    bad = job / "rank1.pt.trace.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1'))
    code, err, _ = measured(["analyze", str(job), "--executor", "local"])
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert str(bad) in lines[0] and "truncated" in lines[0]


# --- export, run names, the UI's address -----------------------------------------------------


def test_export_never_overwrites_its_input_nor_writes_through_odd_paths(tmp_path: Path, fifo: Path) -> None:
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(SMALL.read_bytes())
    before = _sha(trace)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "nowhere.json")
    hard = tmp_path / "hard.json.gz"
    os.link(trace, hard)
    for out, problem in (
        (trace, "is one of the inputs"),
        (hard, "is one of the inputs"),
        (tmp_path, "is a directory"),
        (link, "is a symbolic link"),
        (fifo, "is not a regular file"),
        (Path("/dev/null"), "is not a regular file"),
    ):
        line = one_line(cli("export", str(trace), "--perfetto", str(out), "--db", str(tmp_path / "s.lbug")))
        assert problem in line and str(out) in line
    assert _sha(trace) == before and link.is_symlink() and not (tmp_path / "nowhere.json").exists()
    assert fifo.is_fifo()
    assert not list(tmp_path.glob(".*.tmp"))
    # a regular output is written (atomically: no temporary file is left behind)
    out = tmp_path / "out.json"
    res = cli("export", str(trace), "--perfetto", str(out), "--db", str(tmp_path / "s.lbug"))
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["traceEvents"] and not list(tmp_path.glob(".*.tmp"))


def test_run_names_with_at_are_refused_and_old_ones_stay_readable(tmp_path: Path) -> None:
    from ctda.analysis.engine import analyze
    from ctda.store import open_store
    from ctda.store.config import Target
    from ctda.store.ingest import run_data

    db = tmp_path / "s.lbug"
    assert "contains '@'" in one_line(cli("ingest", str(SMALL), "--run", "a@b", "--db", str(db)))
    odd = tmp_path / "x@y.json.gz"
    odd.write_bytes(SMALL.read_bytes())
    line = one_line(cli("ingest", str(odd), "--db", str(db)))
    assert str(odd) in line and "'x@y'" in line and "--run" in line
    assert "contains '@'" in one_line(cli("ingest", str(JOB), "--job", "j@1", "--db", str(db)))
    assert not db.exists()
    # a run stored under such a name by an older version is still found by its name
    a = analyze(read_trace(SMALL, parallel=False))
    with open_store(Target("ladybug", str(db))) as store:
        store.write_run(run_data(a, "old@name", SMALL, "0" * 64))
    res = cli("runs", "--db", str(db), "--format", "json")
    assert res.exit_code == 0 and "old@name" in res.stdout, res.output
    res = cli("report", "old@name", "--db", str(db), "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["trace"] == str(SMALL)
    res = cli("compare", "old@name", str(SMALL), "--db", str(db), "--format", "json")
    assert res.exit_code == 0, res.output


def test_ui_serves_loopback_by_default() -> None:
    import inspect

    from ctda.cli.ui_cmd import ui_cmd

    assert inspect.signature(ui_cmd).parameters["address"].default.default == "127.0.0.1"
    res = cli("ui", "--help")
    assert res.exit_code == 0 and "--host" in res.output
    cmd, _ = command(None, 8501, "127.0.0.1", 512, 1000, None)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("example.org")
    compose = (ROOT / "docker-compose.yml").read_text()
    assert '"127.0.0.1:${CTDA_UI_PORT:-8501}:8501"' in compose


def test_an_upload_gets_the_same_limits(tmp_path: Path) -> None:
    """The UI's upload path reads with the same limits (its own, lower cap on size)."""
    from ctda.ui import data
    from ctda.ui.settings import Settings

    db = tmp_path / "ui.lbug"
    settings = Settings(db=str(db), uploads=str(tmp_path / "up"))
    bomb = _blank_bomb(tmp_path / "blank.json.gz", blank_mib=96).read_bytes()
    with pytest.raises(
        data.UIError, match=r"^blank\.json\.gz: more than 64 MiB of text without an event boundary"
    ):
        data.ingest_upload(settings, "blank.json.gz", bomb, name=None, force=False, step=lambda *_: None)
    with pytest.raises(data.UIError, match="contains '@'"):
        data.ingest_upload(
            settings, "a.json.gz", SMALL.read_bytes(), name="a@b", force=False, step=lambda *_: None
        )
    assert not db.exists() and not list((tmp_path / "up").iterdir())
