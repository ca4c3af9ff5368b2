"""A run (or job) too large for one Neo4j transaction to relabel (``ATOMIC_NODES``,
``ctda/store/neo4j_staging.py``): its nodes are published in transactions of their own
before the flip, which then publishes the Run (and Job) nodes alone; removing one hides its
Run node and deletes the rest as it is. Against the real server, with the limit lowered so
that the shipped traces count as large: each reads back exactly as the engine analysed it
and leaves nothing staged or half removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctda import api
from ctda.store import neo4j_staging, open_store, schema
from ctda.store.config import Target
from ctda.store.neo4j_store import Neo4jStore
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import STEPS, check_stored, counts, neo4j_target, store_ingest, wipe

pytestmark = pytest.mark.neo4j

JOB = Path(__file__).parent / "data" / "multirank" / "g_ddp_ws2_compute30_r1"


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Target:
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    return t


def _events_at_flip(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Per flip of a run: how many of its events a raw query could see just before it."""
    seen: list[int] = []
    flip = Neo4jStore._flip

    def spy(self: Neo4jStore, rid: int, *args: Any) -> None:
        q = "MATCH (e:Event) WHERE e.run_id = $r RETURN count(e) AS n"
        seen.append(int(self._read(q, {"r": rid})[0]["n"]))
        flip(self, rid, *args)

    monkeypatch.setattr(Neo4jStore, "_flip", spy)
    return seen


def _events_at_removal(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Per removal: how many events of the runs removed still carry their visible label
    when the batched deletes begin (the removal's transaction has hidden their Run nodes)."""
    seen: list[int] = []
    delete = Neo4jStore._delete_ids

    def spy(self: Neo4jStore, ids: list[int]) -> None:
        q = "MATCH (e:Event) WHERE e.run_id IN $ids RETURN count(e) AS n"
        seen.append(int(self._read(q, {"ids": ids})[0]["n"]))
        delete(self, ids)

    monkeypatch.setattr(Neo4jStore, "_delete_ids", spy)
    return seen


def _left(t: Target) -> dict[str, int]:
    """Nodes and relationships of every label, staged or visible, that are not zero."""
    return {k: n for k, n in counts(t).items() if n}


def test_a_run_under_the_limit_is_published_in_the_flip_alone(
    server: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _events_at_flip(monkeypatch)
    store_ingest(server, STEPS, name="small")
    assert seen == [0]  # nothing of it readable until the flip's one transaction
    removed = _events_at_removal(monkeypatch)
    api.open_store(server).rm("small")
    assert removed == [0] and _left(server) == {}  # hidden whole before the deletes


def test_a_large_run_is_published_before_its_flip_and_reads_back_whole(
    server: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(neo4j_staging, "ATOMIC_NODES", 100)
    seen = _events_at_flip(monkeypatch)
    done = store_ingest(server, STEPS, name="big")
    assert done.analysis is not None
    with open_store(server, read_only=True) as s:
        info = next(r for r in s.runs() if r.name == "big")
    assert seen == [info.events + 2]  # + SOURCE and SINK: all published before the flip
    check_stored(server, "big", done.analysis)
    left = _left(server)
    assert not any(k.startswith(schema.STAGED_PREFIX) for k in left), left
    assert left["Run"] == 1 and left["Event"] == info.events + 2

    # replaced: the new run whole, nothing of the old one left under either label; the
    # old one's Run node hidden in the flip, its events deleted as they were
    removed = _events_at_removal(monkeypatch)
    again = store_ingest(server, STEPS, name="big", force=True)
    assert again.analysis is not None
    check_stored(server, "big", again.analysis)
    assert _left(server) == left
    assert removed == [info.events + 2]

    api.open_store(server).rm("big")
    assert _left(server) == {}


def test_a_large_job_is_published_before_its_flip(server: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctda.analysis.engine import AnalysisOptions
    from ctda.store.job_ingest import ingest_job

    monkeypatch.setattr(neo4j_staging, "ATOMIC_NODES", 100)
    seen: list[int] = []
    flip = Neo4jStore._flip_job

    def spy(self: Neo4jStore, jid: int, run_ids: list[int], *args: Any) -> None:
        q = "MATCH (e:Event) WHERE e.run_id IN $ids RETURN count(e) AS n"
        seen.append(int(self._read(q, {"ids": run_ids})[0]["n"]))
        flip(self, jid, run_ids, *args)

    monkeypatch.setattr(Neo4jStore, "_flip_job", spy)
    done = ingest_job([JOB], server, AnalysisOptions(), name="job")
    with open_store(server, read_only=True) as s:
        runs = {r.name: r for r in s.runs()}
        assert [j.name for j in s.jobs()] == ["job"]
    assert sorted(runs) == ["job/r0", "job/r1"]
    left = _left(server)
    assert not any(k.startswith(schema.STAGED_PREFIX) for k in left), left
    assert seen == [left["Event"]] == [sum(r.events + 2 for r in runs.values())]
    rep = api.open_store(server).job("job")
    assert rep.ranks == done.job.ranks == [0, 1]
    api.open_store(server).rm("job")
    assert _left(server) == {}
