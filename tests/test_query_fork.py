"""A query's worker forked from ``ctda query`` (one thread, no engine loaded): the same
answers and the same one-line limits as a worker in a fresh interpreter, and no fork
where the process runs threads or has an engine loaded (:func:`ctda.queries.worker.can_fork`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctda.queries.worker import THREADED
from tests.neo4j_fixture import neo4j_server  # noqa: F401

SMALL = Path(__file__).parent / "data" / "hta" / "cuda_event_sync_tiny.json.gz"
CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]
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
    import time

    from ctda.queries import worker
    from ctda.queries.limits import QueryLimitError, QueryLimits
    from ctda.store.config import Target

    target = Target("ladybug", "unused.lbug")
    limits = QueryLimits(timeout_s=0.5, max_rows=10)
    monkeypatch.setattr(worker, "GRACE_S", 0.5)
    monkeypatch.setattr(worker, "_answer", lambda *a, **k: time.sleep(60))
    t = time.monotonic()
    with pytest.raises(QueryLimitError, match="timeout"):
        worker._answered(*worker._forked(target, "RETURN 1", {}, False, False, limits), limits)
    assert time.monotonic() - t < 10
    # a child that ran out of memory outside the engine: the parent words it as such

    def starve(*a: object, **k: object) -> None:
        raise MemoryError

    monkeypatch.setattr(worker, "_answer", starve)
    code, out, err = worker._forked(target, "RETURN 1", {}, False, False, limits)
    assert code == 70 and out == b"" and b"MemoryError" in err
    with pytest.raises(QueryLimitError, match="memory"):
        worker._answered(code, out, err, limits)
