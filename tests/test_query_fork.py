"""A query's worker forked from ``ctda query`` (one thread, no engine loaded): the same
answers and the same one-line limits as a worker in a fresh interpreter, and no fork
where the process runs threads or has an engine loaded (:func:`ctda.forking.can_fork`)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctda.forking import THREADED, frame, unframe
from tests.neo4j_fixture import neo4j_server  # noqa: F401

SMALL = Path(__file__).parent / "data" / "hta" / "cuda_event_sync_tiny.json.gz"
#: the console script's entry, which forks a query's worker before it builds the command line
CTDA = [sys.executable, "-c", "from ctda.cli.start import main; main()"]
#: a fresh interpreter reports whether it would fork, then runs a query and reports
#: whether the forked path answered it
PROBE = """
import sys, threading, time
import ctda.queries.worker as w
if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
elif sys.argv[1] != "plain":
    __import__(sys.argv[1])
forked = []
real = w._forked
w._forked = lambda *a: forked.append(1) or real(*a)
from ctda import api
with api.open_store(sys.argv[2]) as s:
    rows = s.query("MATCH (r:Run) RETURN r.name AS name").records()
print(w.can_fork(), len(forked), rows)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    from ctda import api

    db = str(tmp_path_factory.mktemp("fork") / "store.lbug")
    with api.open_store(db) as s:
        s.ingest(SMALL, run="small")
    return db


def _ctda(*args: str, fork: bool, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CTDA_QUERY_FORK": "1" if fork else "0", "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([*CTDA, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("state", ["plain", "thread", *THREADED[:3]])
def test_the_worker_is_forked_only_where_safe(store: str, state: str) -> None:
    got = subprocess.run(
        [sys.executable, "-c", PROBE, state, store], capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stderr[-800:]
    can, forked, rows = got.stdout.strip().split(" ", 2)
    safe = state == "plain"
    assert (can, forked) == (str(safe), "1" if safe else "0")
    assert rows == "[{'name': 'small'}]"


def test_forked_and_fresh_workers_answer_the_same(store: str) -> None:
    query = ["query", "--db", store, "hotspots_by_name", "--param", "run=small", "--format", "json"]
    forked, fresh = _ctda(*query, fork=True), _ctda(*query, fork=False)
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    rows = json.loads(forked.stdout)
    assert rows == json.loads(fresh.stdout) and len(rows) > 3 and rows[0]["cp_ns"] > 0


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("RETURN size(repeat('x', 2000000000)) AS n", "memory"),
        ("UNWIND range(1, 30000) AS a UNWIND range(1, 30000) AS b WITH a, b WHERE a * b = -1 RETURN count(*)",
         "timeout"),
        ("UNWIND range(1, 200) AS x RETURN x", "more than 100 rows"),
        ("MATCH (n) DETACH DELETE n", "refused clause"),
    ],
)  # fmt: skip
def test_a_forked_worker_keeps_every_limit(store: str, query: str, said: str) -> None:
    for fork in (True, False):
        res = _ctda("query", "--db", store, query, "--timeout", "2", "--max-rows", "100", fork=fork)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and said in lines[0], (fork, res.stderr[-800:])
        assert "Traceback" not in res.stderr
    # the store is whole after all of it
    assert _ctda("runs", "--db", store, fork=True).stdout.count("small") == 1


@pytest.mark.neo4j
def test_a_forked_worker_queries_neo4j(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forked child loads the Neo4j driver itself (the parent has not): same rows."""
    from ctda import api
    from tests.test_store_suite import neo4j_target, wipe

    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    with api.open_store(t) as s:
        s.ingest(SMALL, run="small")
    assert t.auth is not None
    monkeypatch.setenv("CTDA_NEO4J_USER", t.auth[0])
    monkeypatch.setenv("CTDA_NEO4J_PASSWORD", t.auth[1])
    query = ["query", "--db", t.location, "MATCH (r:Run) RETURN r.name AS name", "--format", "json"]
    forked, fresh = _ctda(*query, fork=True), _ctda(*query, fork=False)
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    assert json.loads(forked.stdout) == json.loads(fresh.stdout) == [{"name": "small"}]
    bomb = _ctda(
        "query", "--db", t.location, "UNWIND range(1, 200) AS x RETURN x", "--max-rows", "100", fork=True
    )
    assert bomb.returncode == 2 and "more than 100 rows" in bomb.stderr


def test_a_forked_worker_past_its_deadline_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's own deadline (for a query the engine's timeout cannot stop), and a
    child that dies: each one line, in about the time allowed."""

    from ctda.queries import worker
    from ctda.queries.limits import QueryLimitError, QueryLimits
    from ctda.store.config import Target

    target = Target("ladybug", "unused.lbug")
    limits = QueryLimits(timeout_s=0.5, max_rows=10)
    monkeypatch.setattr(worker, "GRACE_S", 0.5)
    monkeypatch.setattr(worker, "_answer", lambda *a, **k: time.sleep(60))
    t = time.monotonic()
    request = pickle.dumps((target, "RETURN 1", {}, False, False, limits))
    with pytest.raises(QueryLimitError, match="timeout"):
        worker._answered(*worker._forked(request, limits), limits)
    assert time.monotonic() - t < 10
    # a child that ran out of memory outside the engine: the parent words it as such

    def starve(*a: object, **k: object) -> None:
        raise MemoryError

    monkeypatch.setattr(worker, "_answer", starve)
    code, out, err = worker._forked(request, limits)
    assert code == 70 and out == b"" and b"MemoryError" in err
    with pytest.raises(QueryLimitError, match="memory"):
        worker._answered(code, out, err, limits)


#: a fresh interpreter forks a worker ahead (unless told to kill it first), then queries
AHEAD = """
import os, signal, sys
import ctda.queries.worker as w
w.start_ahead(sys.argv[3] if len(sys.argv) > 3 else None)
ahead = w._ahead
if sys.argv[1] == "kill":
    os.kill(ahead.pid, signal.SIGKILL)
    while open(f"/proc/{ahead.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        pass  # dead before its request: not yet reaped
forked = []
real = w._forked
w._forked = lambda *a: forked.append(1) or real(*a)
from ctda import api
with api.open_store(sys.argv[2]) as s:
    rows = s.query("MATCH (r:Run) RETURN r.name AS name").records()
    again = s.query("MATCH (r:Run) RETURN count(*) AS n").records()
print(ahead is not None, w._ahead is None, len(forked), rows, again)
"""


@pytest.mark.parametrize("fate", ["live", "opened", "other", "kill"])
def test_a_worker_forked_ahead_answers_the_first_query(store: str, fate: str, tmp_path: Path) -> None:
    """The worker forked ahead answers the first query and is used once: with nothing
    opened ahead, with the query's store opened ahead, and with another store opened ahead
    (it opens the query's); one that died before its request is reaped and a fork answers
    instead. The same rows each time."""
    ahead = {"opened": [store], "other": [str(tmp_path / "other.lbug")]}.get(fate, [])
    argv = [sys.executable, "-c", AHEAD, fate, store, *ahead]
    got = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-800:]
    forks = "2" if fate == "kill" else "1"  # the second query always forks anew
    assert got.stdout.strip() == f"True True {forks} [{{'name': 'small'}}] [{{'n': 1}}]"


def test_a_worker_nobody_takes_leaves_with_its_parent() -> None:
    code = "import ctda.queries.worker as w; w.start_ahead(); print(w._ahead.pid)"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid = int(got.stdout)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has left)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["query", "hotspots_by_name", "--param", "run=x"], True),
        (["query", "--db", "s.lbug", "MATCH (n) RETURN n"], True),
        (["query"], False),
        (["query", "--list"], False),
        (["query", "hotspots_by_name", "--help"], False),
        (["runs", "--db", "s.lbug"], False),
    ],
)
def test_only_a_query_forks_its_worker_ahead(args: list[str], runs: bool) -> None:
    from ctda.cli.start import runs_a_query

    assert runs_a_query(args) is runs


def test_an_answer_is_taken_before_the_child_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole answer is returned while its child still runs (the child's exit is reaped by
    the next fork); a cut answer is not whole."""
    from ctda.queries import worker
    from ctda.queries.limits import QueryLimits
    from ctda.store.config import Target

    limits = QueryLimits(timeout_s=30, max_rows=10)
    request = pickle.dumps((Target("ladybug", "unused.lbug"), "RETURN 1", {}, False, False, limits))
    leave = os._exit

    def linger(code: int) -> None:  # the child answers, then takes 2 s to exit
        time.sleep(2)
        leave(code)

    monkeypatch.setattr(worker, "_answer", lambda *a, **k: ("ok", "rows"))
    monkeypatch.setattr(os, "_exit", linger)
    monkeypatch.setattr(worker, "_exiting", [])
    t = time.monotonic()
    code, out, _ = worker._forked(request, limits)
    assert time.monotonic() - t < 1.5
    assert (code, pickle.loads(out)) == (0, ("ok", "rows")) and len(worker._exiting) == 1
    first = worker._exiting[0]
    time.sleep(2.5)
    worker._forked(request, limits)
    assert first not in worker._exiting and len(worker._exiting) == 1
    os.waitpid(worker._exiting[0], 0)
    whole = frame(b"12345")
    assert unframe(whole) == b"12345" and unframe(whole[:-1]) is None and unframe(b"") is None


@pytest.mark.parametrize(
    ("args", "db"),
    [
        (["query", "--db", "a.lbug", "q"], "a.lbug"),
        (["query", "q", "--db=b.lbug"], "b.lbug"),
        (["query", "q", "--db"], None),
        (["query", "q"], None),
    ],
)
def test_the_store_named_for_the_worker_ahead(args: list[str], db: str | None) -> None:
    from ctda.cli.start import named_store

    assert named_store(args) == db
