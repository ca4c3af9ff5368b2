"""Stores of the previous schema are migrated by the first command that opens them and then
answer every named query exactly as a store written by this release does."""

from __future__ import annotations

import ast
import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest

from ctda.queries import loader
from ctda.store import open_store, schema
from ctda.store.config import Target
from tests.conftest import DATA
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import neo4j_target, store_ingest, wipe

V1_STORE = DATA / "stores" / "schema1_small.lbug.gz"  # see tests/data/stores/README.md
TRACE = DATA / "kineto" / "tb_plugin_gpu_metrics_input_small.json.gz"
#: a Neo4j store of this release rewritten to schema 1's layout (paths under the window)
TO_V1_NEO4J = (
    "MATCH (w:Window)-[:HAS_SEGMENT]->(:Segment)-[c:CP]->(e:Event) "
    "CREATE (w)-[x:CP]->(e) SET x = properties(c)",
    "MATCH (g:Segment) DETACH DELETE g",
    *(f"MATCH (x:{label.name}) DELETE x" for label in schema.BREAKDOWN_LABELS.values()),
    "MATCH (m:Meta) SET m.schema_version = 1",
)


def answers(target: Target) -> dict[str, list[Any]]:
    """Every read-only named query about run ``small``, rows sorted."""
    out: dict[str, list[Any]] = {}
    with open_store(target, read_only=True) as s:
        path = loader.run(s, "cp_listing", run="small").records()
        first = path[len(path) // 2]
        params = {"run": "small", "edge": first["edge"], "event": first["event"]}
        for q in loader.load_all().values():
            # runs: names the file and time of ingest; what-ifs, replays, jobs: tested with them
            if q.writes or q.name == "runs" or q.name.startswith(("whatif_", "replay_", "job_")):
                continue
            given = {k: v for k, v in params.items() if k in {p.name for p in q.params}}
            out[q.name] = sorted(map(repr, loader.run(s, q.name, **given).rows))
    return out


#: what the schema 1 store cannot share with a store of this release: it holds the analysis
#: of its own release, and the synchronisation rule has since added edges (blocking calls
#: wait for the work queued before them): edge ids along the path renumber, and the slack
#: of near-critical events moved by 1 µs. Columns: cp_listing's ``edge``, near_critical's
#: ``slack_ns``.
MODEL_COLUMNS = {"cp_listing": 11, "near_critical": 1}


def model_free(ans: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``ans`` without the columns that depend on the analysis model (:data:`MODEL_COLUMNS`)."""
    out = dict(ans)
    for name, col in MODEL_COLUMNS.items():
        rows = [ast.literal_eval(r) for r in ans[name]]
        out[name] = sorted(repr([v for i, v in enumerate(row) if i != col]) for row in rows)
    return out


def version(target: Target) -> int:
    with open_store(target, read_only=True) as s:
        return int(s.query("MATCH (m:Meta) RETURN m.schema_version AS v").rows[0][0])


def test_a_schema1_store_is_migrated_by_a_reader(tmp_path: Path) -> None:
    old = tmp_path / "old.lbug"
    with gzip.open(V1_STORE) as src, old.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    fresh = Target("ladybug", str(tmp_path / "fresh.lbug"))
    store_ingest(fresh, TRACE, name="small")
    expected = answers(fresh)
    assert len(expected["cp_listing"]) == 236  # the path the schema 1 store holds
    got = answers(Target("ladybug", str(old)))  # a read-only open migrates
    assert model_free(got) == model_free(expected)
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in expected.items()}
    assert version(Target("ladybug", str(old))) == schema.SCHEMA_VERSION
    with open_store(Target("ladybug", str(old)), read_only=True) as s:  # schema 3's tables too
        assert s.query("MATCH (j:Job)-[:HAS_STEP]->(x:JobStep) RETURN count(x)").rows == [[0]]
    # and it is an ordinary store now: writes and deletes work
    target = Target("ladybug", str(old))
    assert store_ingest(target, DATA / "hta" / "simple_add_param_benchmark.json.gz", name="again").stored
    with open_store(target) as s:
        assert s.delete_run("small")
        assert [r.name for r in s.runs()] == ["again"]
        left = s.query("MATCH (g:Segment)-[c:CP]->() RETURN DISTINCT g.run_id AS r").rows
        assert left == [[s.runs()[0].id]]  # the deleted run's path went with it


@pytest.mark.neo4j
def test_a_schema1_neo4j_store_is_migrated_by_a_reader(request: pytest.FixtureRequest) -> None:
    """A Neo4j store rewritten to schema 1's layout (paths under windows, no breakdowns)
    migrates to the same answers; this trace's path spans several segments."""
    target = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(target)
    store_ingest(target, DATA / "hta" / "simple_add_param_benchmark.json.gz", name="small")
    expected = answers(target)
    assert max(int(r.split(",")[2]) for r in expected["cp_listing"]) >= schema.SEGMENT_SIZE
    assert expected["breakdown_kernels"] and expected["breakdown_idle"]  # a GPU trace: backfilled below
    import neo4j

    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver, driver.session() as s:
        for stmt in TO_V1_NEO4J:
            s.run(stmt).consume()
    assert version(target) == schema.SCHEMA_VERSION  # the read-only open above migrated it
    assert answers(target) == expected


def test_scenarios_read_from_a_store_without_packed_paths(tmp_path: Path) -> None:
    """An embedded store last written before ``Scenario.path_packed`` existed: its saved
    scenarios (paths as lists) are read whole, and the next write adds the column."""
    import json

    import ladybug

    db = str(tmp_path / "old.lbug")
    done = store_ingest(Target("ladybug", db), TRACE, name="old")
    rid = done.run.id
    with open_store(db) as s:
        s.save_scenario(rid, "kept", json.dumps({"name": "kept", "step_ns": [5]}), path=[3, 1, 2])
    # what the previous release wrote: the list in Scenario.path, no packed column
    conn = ladybug.Connection(database := ladybug.Database(db))
    conn.execute("MATCH (s:Scenario) WHERE s.name = 'kept' SET s.path = [3, 1, 2]")
    conn.execute("ALTER TABLE Scenario DROP path_packed")
    conn.execute("MATCH (m:Meta) SET m.ddl = 'the previous release'")
    database.close()
    with open_store(db, read_only=True) as s:
        assert [(x["name"], x["path"]) for x in s.scenarios(rid, path=True)] == [("kept", [3, 1, 2])]
    with open_store(db) as s:
        s.save_scenario(rid, "new", json.dumps({"name": "new"}), path=[9, 8])
        got = {x["name"]: x["path"] for x in s.scenarios(rid, path=True)}
    assert got == {"kept": [3, 1, 2], "new": [9, 8]}
