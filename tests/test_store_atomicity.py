"""A failed ingest leaves no partial run: injected faults, a killed writer, a killed server.

Real stores only: faults come from the store's own test hooks (a parameter or
$CTDA_STORE_FAIL_AFTER_BATCHES, and $CTDA_STORE_STALL_AFTER_BATCHES), the writer is a
real process killed with SIGKILL, and the Neo4j server is a private instance killed
with SIGKILL in the middle of a write, then restarted on the same data directory.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctda.analysis.engine import AnalysisOptions
from ctda.store import InjectedFault, StoreError, open_store
from ctda.store import neo4j_store as n4
from ctda.store.config import Target
from ctda.store.faults import STALL_AFTER_ENV, STALL_MARK, FaultCounter
from tests.conftest import DATA
from tests.neo4j_fixture import load_server_module, neo4j_server  # noqa: F401
from tests.test_store_suite import (
    SMALL,
    STEPS,
    check_report,
    counts,
    neo4j_target,
    store_ingest,
    target,
    wipe,
)

__all__ = ["target"]  # the parametrised store fixture, re-exported for pytest

LARGE = DATA / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"  # 63k events, 136k edges
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many Neo4j batches per run, so a fault can hit one in the middle."""
    monkeypatch.setattr(n4, "NODE_BATCH", 500)
    monkeypatch.setattr(n4, "REL_BATCH", 1000)


def assert_no_trace_of(target: Target, name: str, before: dict[str, int]) -> None:
    with open_store(target, read_only=True) as s:
        assert name not in [r.name for r in s.runs(include_incomplete=True)]
    assert counts(target) == before


#: write batches after which to fail: Ladybug writes a run in 6 (one COPY per table and
#: the snapshot), Neo4j in 44 here (15 node, 15 edge and 13 path batches and the snapshot)
FAULTS = {"ladybug": {"early": 2, "late": 5}, "neo4j": {"early": 3, "late": 40}}


@pytest.mark.parametrize("when", ["early", "late"])
def test_injected_fault_leaves_no_partial_run(target: Target, small_batches: None, when: str) -> None:
    fail_after = FAULTS[target.kind][when]
    store_ingest(target, SMALL, name="kept")
    before = counts(target)
    with pytest.raises(InjectedFault):
        store_ingest(target, STEPS, name="victim", fail_after=fail_after)
    assert_no_trace_of(target, "victim", before)
    done = store_ingest(target, STEPS, name="victim")  # and a re-ingest works
    assert done.stored and done.analysis is not None
    check_report(target, "victim", done.analysis)


def test_injected_fault_from_environment(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    before = counts(target)
    monkeypatch.setenv("CTDA_STORE_FAIL_AFTER_BATCHES", "2")
    with pytest.raises(InjectedFault):
        store_ingest(target, STEPS, name="victim")
    monkeypatch.delenv("CTDA_STORE_FAIL_AFTER_BATCHES")
    assert_no_trace_of(target, "victim", before)


def test_failed_replace_keeps_the_old_run(target: Target, small_batches: None) -> None:
    old = store_ingest(target, SMALL, name="r")
    assert old.analysis is not None
    before = counts(target)
    with pytest.raises(InjectedFault):
        store_ingest(target, STEPS, name="r", force=True, fail_after=5)
    assert counts(target) == before
    with open_store(target, read_only=True) as s:
        (run,) = s.runs(include_incomplete=True)
        assert run.id == old.run.id
    check_report(target, "r", old.analysis)


def test_ladybug_writer_killed_mid_write(tmp_path: Path) -> None:
    """SIGKILL in the middle of a write: the run is one transaction, so no reader ever sees
    any of it (not even as pending) and nothing is left to remove."""
    t = Target("ladybug", str(tmp_path / "store.lbug"))
    store_ingest(t, SMALL, name="kept")
    before = counts(t)
    code = (
        "import sys; from pathlib import Path; from ctda.analysis.engine import AnalysisOptions\n"
        "from ctda.store.config import Target; from ctda.store.ingest import ingest\n"
        "ingest(Path(sys.argv[1]), Target('ladybug', sys.argv[2]), AnalysisOptions(), name='victim')\n"
    )
    env = dict(os.environ, **{STALL_AFTER_ENV: "3"})
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(LARGE), t.location],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 300
        for line in proc.stderr:
            if STALL_MARK in line or time.monotonic() > deadline:
                break
        assert proc.poll() is None, "the writer ended before the stall hook"
    finally:
        proc.kill()
        proc.wait()
    with open_store(t, read_only=True) as s:
        assert [(r.name, r.status) for r in s.runs(include_incomplete=True)] == [("kept", "complete")]
    assert_no_trace_of(t, "victim", before)
    with open_store(t) as s:
        assert s.gc() == 0
    done = store_ingest(t, STEPS, name="victim")
    assert done.stored and done.analysis is not None
    check_report(t, "victim", done.analysis)


def _event_count(uri: str, auth: tuple[str, str]) -> int:
    import neo4j

    try:
        with neo4j.GraphDatabase.driver(uri, auth=auth) as d:
            # a run being written holds its events under a staging label
            records, _, _ = d.execute_query("MATCH (e) WHERE e:Event OR e:PendingEvent RETURN count(e) AS n")
            return int(records[0]["n"])
    except Exception:
        return -1


def _restart(server: Any, info: Any) -> Any:
    """Start the killed instance again on its own data directory and ports."""
    process = server._launch(Path(info.home), Path(info.instance))
    server._wait_until_ready(process, Path(info.instance), info.bolt_port, 180.0)
    fresh = dataclasses.replace(info, pid=process.pid)
    auth = (info.user, info.password)
    deadline = time.monotonic() + 120
    while _event_count(info.uri, auth) < 0:  # bolt answers before the database is online
        assert time.monotonic() < deadline, "restarted Neo4j did not come online"
        time.sleep(0.5)
    return fresh


#: the victim's write is held after this many committed batches (500 events each, see
#: ``small_batches``) until the server is killed: the kill lands in the middle every time
HOLD_AFTER = 6


@pytest.mark.neo4j
@pytest.mark.slow
def test_neo4j_server_killed_mid_write(
    request: pytest.FixtureRequest, tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kill a private server in the middle of an ingest, restart it: no run is visible, and
    the next ingest removes the dead run's rows."""
    request.getfixturevalue("neo4j_server")  # Java, Neo4j and the driver are there (or skip)
    server = load_server_module()
    info = server.start(data_dir=tmp_path)
    try:
        t = neo4j_target(info)
        auth = (info.user, info.password)
        errors: list[BaseException] = []
        held, killed = threading.Event(), threading.Event()
        tick = FaultCounter.tick

        def hold(counter: FaultCounter) -> None:
            """The store's batch counter, pausing the writer once (the real writes go on)."""
            tick(counter)
            if counter.done == HOLD_AFTER:
                held.set()
                killed.wait(300)

        monkeypatch.setattr(FaultCounter, "tick", hold)
        # the writer's driver gives up on the dead server after a second instead of 15 s per
        # transaction it tries there (about 30 s in all): how the writer fails is under test,
        # not how long its driver retried
        monkeypatch.setenv("CTDA_NEO4J_RETRY_S", "1")

        def write() -> None:
            try:
                store_ingest(t, STEPS, name="victim")
            except BaseException as exc:
                errors.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + 300
        while not held.wait(0.1):
            assert writer.is_alive(), f"the ingest ended before the kill: {errors}"
            assert time.monotonic() < deadline
        os.killpg(info.pid, signal.SIGKILL)
        killed.set()
        writer.join(timeout=300)
        assert not writer.is_alive()
        assert errors and isinstance(errors[0], StoreError), errors

        info = _restart(server, info)
        t = neo4j_target(info)
        with open_store(t, read_only=True) as s:
            assert s.runs() == []  # the partial run is invisible ...
            (dead,) = s.runs(include_incomplete=True)
            assert dead.name == "victim" and dead.status == "pending"
            assert s.query("MATCH (r:Run {name: 'victim', status: 'complete'}) RETURN r").rows == []
        assert _event_count(info.uri, auth) >= HOLD_AFTER * 500  # ... though its committed rows survived
        monkeypatch.undo()  # normal batch sizes and batch counter again
        monkeypatch.setenv("CTDA_STALE_S", "0")  # its heartbeat stopped: the next writer removes it
        done = store_ingest(t, STEPS, name="victim", options=AnalysisOptions())
        assert done.stored and done.analysis is not None
        with open_store(t, read_only=True) as s:
            (run,) = s.runs(include_incomplete=True)
            assert run.status == "complete" and run.id == done.run.id
        assert counts(t)["Event"] == done.run.events + 2
        check_report(t, "victim", done.analysis)
    finally:
        server.stop(info)


@pytest.mark.neo4j
def test_neo4j_gc_keeps_a_live_writers_run(request: pytest.FixtureRequest) -> None:
    """A pending run with a fresh heartbeat belongs to a writer still at work: gc leaves it."""
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    with open_store(t) as s:
        assert isinstance(s, n4.Neo4jStore)
        from ctda.store.model import build

        done = store_ingest(t, SMALL, name="other")
        assert done.analysis is not None
        rid = s._allocate(build(done.analysis, "pending-one", "f", "0" * 64))
        assert s.gc() == 0
        assert [r.status for r in s.runs(include_incomplete=True) if r.id == rid] == ["pending"]
        assert s.gc(stale_after_s=0) == 1
        assert [r.name for r in s.runs(include_incomplete=True)] == ["other"]
