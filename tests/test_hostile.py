"""Hostile input: every case ends in one line and exit 2 (or a correct result), touches no
file outside the store, loads no library, and leaves a store the next command opens.

The same cases go through the CLI (real subprocesses: no traceback may reach stderr), the
UI's data layer (``ctda.ui.data``) and the library (``Store.query``, ``read_trace``).

The reader's decompression bombs, its linear-time reading and its decode workers are in
``test_hostile_reading.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from ctda.analysis.engine import AnalysisOptions, parse_cross_thread
from ctda.analysis.tables import options_key
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import Limits
from ctda.ingest.reader import read_trace
from ctda.queries import gate
from ctda.queries.errors import QueryError
from ctda.store import backends, open_store
from ctda.store.config import Target
from tests.hostile_helpers import CTDA, gzip_member

pytest.importorskip("ladybug")

DATA = Path(__file__).parent / "data" / "hta"
SMALL = DATA / "cuda_event_sync_tiny.json.gz"
OTHER = DATA / "backward_thread_minimal.json.gz"
SECRET = "ctda-sentinel-7f3a"


# ``ctda`` starts processes: it stays in this module (not in hostile_helpers.py), as
# tests/conftest.py finds ``subprocess`` only in code of a test's own module (the slow tier).
def ctda(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CTDA, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    """The run failed with exit 2 and exactly one line on stderr, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one run (``small``), shared by the read-only cases."""
    folder = tmp_path_factory.mktemp("hostile")
    db = folder / "store.lbug"
    res = ctda("ingest", str(SMALL), "--db", str(db), "--run", "small")
    assert res.returncode == 0, res.stderr
    return db


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    """A file outside the store that no query may read or change."""
    path = tmp_path / "sentinel.csv"
    path.write_text(f"a,b\n{SECRET},1\n")
    return path


def _store_opens(db: Path) -> None:
    res = ctda("runs", "--db", str(db), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert "small" in res.stdout


# --- the query gate -----------------------------------------------------------------------


def _escapes(sentinel: Path, lib: Path) -> list[str]:
    """Queries that read or write files, load code, checkpoint or change settings."""
    out = tmp = str(sentinel)
    return [
        f"RETURN '/*' AS a; COPY (MATCH (e:Event) RETURN e.name) TO '{out}' // */",
        f"RETURN \"/*\" AS a; COPY (MATCH (e:Event) RETURN e.name) TO '{out}' /* */",
        f"MATCH (e:Event) RETURN e.name AS n // '\nCOPY (RETURN 1) TO '{out}'",
        f"LOAD EXTENSION '{lib}'",
        f"LOAD FROM '{tmp}' RETURN *",
        f"MATCH (load) WITH 1 AS x LOAD FROM '{tmp}' RETURN *",
        f"RETURN 1 AS `x` LOAD FROM '{tmp}' RETURN *",
        f"RETURN 1 AS x UNION LOAD FROM '{tmp}' RETURN *",
        f"MATCH (n) WHERE EXISTS {{ LOAD FROM '{tmp}' RETURN * }} RETURN n",
        f"RETURN 1 AS x\u200bLOAD FROM '{tmp}' RETURN *",
        f"LOAD CSV FROM 'file://{tmp}' AS l RETURN l",
        f"CALL apoc.load.csv('file://{tmp}') YIELD list RETURN list",
        f"RETURN apoc.cypher.runFirstColumnSingle('LOAD CSV FROM \"file://{tmp}\" AS l RETURN l', {{}})",
        "CHECKPOINT",
        "RETURN 1; CHECKPOINT",
        "CALL threads=1",
        "CALL checkpoint_threshold=1",
        "INSTALL httpfs",
        f"ATTACH '{tmp}' AS other (dbtype lbug)",
        "DETACH other",
        "USE other",
        f"EXPORT DATABASE '{tmp}.dir'",
        f"IMPORT DATABASE '{tmp}.dir'",
        "CREATE (:Run {id: 99})",
        "MATCH (r:Run) SET r.name = 'x'",
        "MATCH (e:Event) DETACH DELETE e",
        "FOREACH (x IN [1] | CREATE (:Run {id: 98}))",
        "CALL { MATCH (r:Run) DETACH DELETE r } RETURN 1",
        "BEGIN TRANSACTION",
        "EXPLAIN MATCH (n) RETURN n",
        "RETURN 'unterminated",
        "RETURN 1 /* unterminated",
    ]


@pytest.fixture
def library(tmp_path: Path) -> tuple[Path, Path]:
    """A shared library whose constructor writes a marker file, if a C compiler is here."""
    marker = tmp_path / "constructor-ran"
    lib = tmp_path / "evil.so"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        src = tmp_path / "evil.c"
        src.write_text(
            textwrap.dedent(f"""
            #include <stdio.h>
            __attribute__((constructor)) static void run(void) {{
                FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("ran", f); fclose(f); }}
            }}
            """)
        )
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    else:
        lib.write_bytes(b"\x7fELF not really")
    return lib, marker


def test_gate_refuses_every_escape_in_the_library(
    store: Path, sentinel: Path, library: tuple[Path, Path]
) -> None:
    lib, marker = library
    before = sentinel.read_bytes()
    with open_store(Target("ladybug", str(store)), read_only=True) as s:
        for text in _escapes(sentinel, lib):
            with pytest.raises(QueryError):
                s.query(text)
        # --write allows data changes but still no file, extension or database access
        for text in _escapes(sentinel, lib)[:13] + _escapes(sentinel, lib)[16:23]:
            with pytest.raises(QueryError):
                gate.check(text, backends.by_kind("ladybug"), gate.Level.WRITE)
        assert s.query("MATCH (r:Run) RETURN r.name AS name").rows == [["small"]]
    assert sentinel.read_bytes() == before
    assert not marker.exists(), "a library constructor ran"
    assert not Path(f"{sentinel}.dir").exists()


def test_gate_keeps_every_named_query() -> None:
    from ctda.queries import loader

    for q in loader.load_all().values():
        for dialect in ("ladybug", "neo4j"):
            if dialect in q.texts or "" in q.texts:
                # raises if a shipped query is refused; declared writers pass as writes only
                level = gate.Level.WRITE if q.writes else gate.Level.READ
                gate.check(q.text(dialect), backends.by_kind(dialect), level)
                if q.writes:
                    with pytest.raises(gate.GateError):
                        gate.check(q.text(dialect), backends.by_kind(dialect))


@pytest.mark.parametrize(
    "text",
    [
        "MATCH (e:Event) WHERE e.name STARTS WITH 'a' AND e.dur_ns IS NOT NULL "
        "RETURN e.name ORDER BY e.name DESC LIMIT 3",
        "UNWIND [1, 2] AS x WITH x WHERE x > 1 RETURN x",
        "RETURN 1 AS a UNION ALL RETURN 2 AS a",
        "RETURN CASE WHEN 1 > 0 THEN 'LOAD FROM' ELSE 'COPY' END AS c // CHECKPOINT",
        "RETURN [1, 2, 3] AS l, size([1]) * 2 AS n",
        "CALL show_tables() RETURN *",
        "MATCH (r:Run) RETURN count(*) AS n, count(DISTINCT r.name) AS d",
    ],
)
def test_gate_lets_reads_through(store: Path, text: str) -> None:
    with open_store(Target("ladybug", str(store)), read_only=True) as s:
        s.query(text)


def test_cli_query_escapes_are_one_line(store: Path, sentinel: Path, library: tuple[Path, Path]) -> None:
    lib, marker = library
    before = sentinel.read_bytes()
    cases = _escapes(sentinel, lib)
    for text in (cases[0], cases[3], cases[4], cases[14], cases[15]):
        line = one_line(ctda("query", text, "--db", str(store)))
        assert SECRET not in line
    one_line(ctda("query", "--write", cases[0], "--db", str(store)))
    one_line(ctda("query", "--allow-files", "RETURN 1", "--db", str(store)))
    assert sentinel.read_bytes() == before
    assert not marker.exists()
    _store_opens(store)


def test_ui_console_refuses_escapes(store: Path, sentinel: Path, library: tuple[Path, Path]) -> None:
    from ctda.ui import data

    lib, marker = library
    before = sentinel.read_bytes()
    for text in _escapes(sentinel, lib):
        with pytest.raises(data.UIError):
            data.run_query(str(store), text, {})
    assert data.run_query(str(store), "MATCH (r:Run) RETURN r.name", {}).rows == [["small"]]
    assert sentinel.read_bytes() == before
    assert not marker.exists()


def test_api_refuses_escapes_and_bad_input(
    store: Path, sentinel: Path, library: tuple[Path, Path], tmp_path: Path
) -> None:
    """The public API takes the same gate and limits: one-line CtdaError subclasses."""
    import ctda as lib_api

    lib, marker = library
    before = sentinel.read_bytes()
    with lib_api.open_store(store) as session:
        for text in _escapes(sentinel, lib):
            with pytest.raises(QueryError) as refused:
                session.query(text)
            assert isinstance(refused.value, lib_api.CtdaError) and "\n" not in str(refused.value)
        with pytest.raises(QueryError):  # data changes need write=True, files also allow_files
            session.query(_escapes(sentinel, lib)[0], write=True)
        assert session.query("MATCH (r:Run) RETURN r.name AS name").rows == [["small"]]
        assert [r.name for r in session.runs()] == ["small"]
    for path in _deep(tmp_path):
        with pytest.raises(TraceError, match="nested too deeply"):
            lib_api.analyze(path)
    with pytest.raises(lib_api.OptionError, match="not a valid regular expression"):
        lib_api.analyze(SMALL, windows="([")
    assert sentinel.read_bytes() == before
    assert not marker.exists()
    _store_opens(store)


# --- a store left with checkpoint recovery pending ----------------------------------------


def test_pending_checkpoint_recovery_is_completed_by_the_next_command(tmp_path: Path) -> None:
    import ladybug

    db = tmp_path / "store.lbug"
    assert ctda("ingest", str(SMALL), "--db", str(db), "--run", "small").returncode == 0
    # what a failed CHECKPOINT (or kill -9 during one) leaves: only a read-write open repairs it
    raw = ladybug.Database(str(db), read_only=True)
    with pytest.raises(RuntimeError):
        ladybug.Connection(raw).execute("CHECKPOINT")
    raw.close()
    with pytest.raises(RuntimeError, match="recovery is pending"):
        ladybug.Database(str(db), read_only=True)
    for args in (["runs"], ["report", "small"]):
        res = ctda(*args, "--db", str(db))
        assert res.returncode == 0, res.stderr
    res = ctda("ingest", str(OTHER), "--db", str(db), "--run", "other")
    assert res.returncode == 0, res.stderr


# --- a bomb of events and the cap on decompressed bytes -----------------------------------


def test_bomb_of_events_and_the_byte_cap(tmp_path: Path) -> None:
    ev = b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1},'
    unit = gzip_member(ev * ((32 << 20) // len(ev)))
    bomb = tmp_path / "events.json.gz"
    bomb.write_bytes(gzip_member(b'{"traceEvents":[') + unit * 8)
    with pytest.raises(TraceError, match="expands more than"):
        read_trace(bomb)
    # the cap on decompressed bytes: a real trace over it, by option, env and Limits
    cap = ctda("--max-trace-bytes", "10K", "analyze", str(SMALL))  # it expands to 22 KiB
    assert "cap on decompressed bytes" in one_line(cap) and SMALL.name in cap.stderr
    env = ctda("inspect", str(SMALL), env={"CTDA_MAX_TRACE_BYTES": "1K"})
    assert "1 KiB" in one_line(env)
    with pytest.raises(TraceError, match="16 KiB"):
        read_trace(SMALL, limits=Limits(max_bytes=16 << 10))
    one_line(ctda("--max-trace-bytes", "lots", "analyze", str(SMALL)))


# --- nesting, non-regular files, bad options -------------------------------------------------


def _deep(tmp_path: Path) -> list[Path]:
    d = 5000
    args = '{"a":' * d + "1" + "}" * d
    ev = '{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":2,"args":' + args + "}"
    a = tmp_path / "deep_args.json"
    a.write_text('{"traceEvents":[' + ev + "]}")
    m = tmp_path / "deep_meta.json"
    m.write_text(
        '{"meta":'
        + "[" * d
        + "]" * d
        + ',"traceEvents":[{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":2}]}'
    )
    return [a, m]


def test_deep_nesting_is_one_line_everywhere(tmp_path: Path) -> None:
    db = tmp_path / "s.lbug"
    for path in _deep(tmp_path):
        for args in (
            ["inspect", str(path)],
            ["analyze", str(path)],
            ["convert", str(path), str(tmp_path / "o.parquet")],
            ["ingest", str(path), "--db", str(db)],
        ):
            line = one_line(ctda(*args))
            assert path.name in line and "nested too deeply" in line
        with pytest.raises(TraceError, match="nested too deeply"):
            read_trace(path)
    assert not db.exists() and not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("where", [0, 2_345, 4_999], ids=["first", "middle piece", "last piece"])
def test_deep_nesting_names_its_own_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: int
) -> None:
    # msgspec says only that a piece holds a too-deep value; the message must name the
    # event (in pieces of ~64 KiB, with shallower nesting and bracket-like strings before it)
    from ctda.ingest import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 64 << 10)
    shallow = {"ph": "X", "name": "n[{]}", "pid": 1, "tid": 1, "dur": 1, "args": {"a": [[[[1]]]]}}
    ok = [json.dumps({**shallow, "ts": i}) for i in range(5_000)]
    deep = '{"a":' + "[" * 3000 + "]" * 3000 + "}"
    ok[where] = '{"ph":"X","name":"n","pid":1,"tid":1,"ts":1,"dur":2,"args":' + deep + "}"
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents":[' + ",".join(ok) + "]}")
    with pytest.raises(TraceError, match=f"event {where}: JSON nested too deeply"):
        read_trace(path)


def test_endless_and_special_files_are_refused_up_front(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    db = tmp_path / "s.lbug"
    for path, kind in ((Path("/dev/zero"), "character device"), (fifo, "FIFO"), (tmp_path, "directory")):
        for args in (["analyze", str(path)], ["ingest", str(path), "--db", str(db)]):
            line = one_line(ctda(*args, timeout=60))
            assert kind in line and str(path) in line
    assert not db.exists()


def test_bad_windows_regex_is_one_line() -> None:
    assert "not a valid regular expression" in one_line(ctda("analyze", str(SMALL), "--windows", "(["))


# --- smaller items ---------------------------------------------------------------------------


def test_time_overflow_is_one_line_not_a_cycle(tmp_path: Path) -> None:
    big = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "a",
        "pid": 1,
        "tid": 1,
        "ts": 9_000_000_000_000_000,
        "dur": 500_000_000_000_000,
    }
    kernel = {
        **big,
        "cat": "kernel",
        "pid": 0,
        "tid": 7,
        "args": {"device": 0, "stream": 7, "correlation": 1},
    }
    small = {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 5}
    for i, evs in enumerate(([big, small], [small, kernel])):
        path = tmp_path / f"ovf{i}.json"
        path.write_text(json.dumps({"traceEvents": evs}))
        line = one_line(ctda("analyze", str(path)))
        assert "ts + dur" in line and "cycle" not in line


def test_same_options_in_another_order_are_the_same_run(tmp_path: Path) -> None:
    a = options_key(AnalysisOptions(cross_thread=parse_cross_thread("cuda_lock,gil,fwdbwd")))
    b = options_key(AnalysisOptions(cross_thread=parse_cross_thread("fwdbwd,gil,cuda_lock,gil")))
    assert a == b
    assert a != options_key(AnalysisOptions(cross_thread=parse_cross_thread("gil,fwdbwd")))
    db = tmp_path / "s.lbug"
    assert ctda("ingest", str(SMALL), "--db", str(db), "--cross-thread", "cuda_lock,gil").returncode == 0
    res = ctda("ingest", str(SMALL), "--db", str(db), "--cross-thread", "gil,cuda_lock")
    assert res.returncode == 0 and "already stored" in res.stderr


def test_ingest_a_bad_b_stores_a_and_b(tmp_path: Path) -> None:
    db = tmp_path / "s.lbug"
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1}')
    res = ctda("ingest", str(SMALL), str(bad), str(OTHER), "--db", str(db))
    assert res.returncode == 2
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "bad.json" in errors[0] and "Traceback" not in res.stderr
    runs = json.loads(ctda("runs", "--db", str(db), "--format", "json").stdout)
    assert sorted(r["name"] for r in runs) == ["backward_thread_minimal", "cuda_event_sync_tiny"]


def test_control_characters_in_names_are_escaped(tmp_path: Path) -> None:
    db = tmp_path / "s.lbug"
    evil = tmp_path / "evil\x1b[2J.json.gz"
    shutil.copy(SMALL, evil)
    name = "run\x1b]0;pwned\x07\u202e"
    assert ctda("ingest", str(evil), "--db", str(db), "--run", name).returncode == 0
    for args in (["runs"], ["report", name], ["report", name, "--format", "md"]):
        res = ctda(*args, "--db", str(db), env={"COLUMNS": "400"})
        assert res.returncode == 0, res.stderr
        assert "\x1b" not in res.stdout + res.stderr and "\u202e" not in res.stdout
    assert "\\x1b" in ctda("runs", "--db", str(db), env={"COLUMNS": "400"}).stdout
