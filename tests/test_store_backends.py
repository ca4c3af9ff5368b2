"""The store backend registry: ``--db`` picks a backend by its declared URL schemes, the
store carries its dialect, and each backend's DDL comes from the one schema declaration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctda.queries import loader
from ctda.store import backends, open_store, schema
from ctda.store.config import resolve
from ctda.store.ladybug_store import LadybugStore, ddl
from ctda.store.neo4j_store import Neo4jStore, schema_statements
from tests.neo4j_fixture import neo4j_server  # noqa: F401


def test_registry_declares_both_backends() -> None:
    found = backends.backends()
    assert found == {"ladybug": LadybugStore, "neo4j": Neo4jStore}
    assert backends.for_paths() is LadybugStore
    for scheme in ("bolt", "bolt+s", "neo4j", "neo4j+s", "NEO4J+SSC"):
        assert backends.for_scheme(scheme) is Neo4jStore
    assert backends.for_scheme("http") is None
    # every dialect a named query may ship a variant for is some backend's
    assert set(backends.dialects()) == set(loader.dialects())


@pytest.mark.parametrize(
    ("spec", "kind", "is_path"),
    [
        ("bolt://host:7687", "neo4j", False),
        ("neo4j+s://u:p@host/db", "neo4j", False),
        ("some/dir/store.lbug", "ladybug", True),
        ("http://host/x", "ladybug", True),  # no backend serves http: a (strange) path
    ],
)
def test_resolve_picks_the_backend_by_scheme(spec: str, kind: str, is_path: bool) -> None:
    t = resolve(spec)
    assert (t.kind, t.is_path) == (kind, is_path)
    assert "p@" not in t.location


def test_open_store_goes_through_the_registry(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.lbug")) as s:
        assert type(s) is LadybugStore and s.dialect == "ladybug" and s.runs() == []
    with open_store(str(tmp_path / "absent.lbug"), read_only=True) as s:
        assert s.runs() == [] and s.get_blob(1, "x") is None and s.scenarios(1) == []


def test_ddl_of_both_backends_comes_from_the_schema() -> None:
    lb = [ddl(label) for label in schema.NODES + schema.RELS]
    neo = schema_statements()
    for label in schema.NODES:
        # Ladybug's primary key is Neo4j's uniqueness constraint
        assert any(f"CREATE NODE TABLE IF NOT EXISTS {label.name}(" in s for s in lb)
        assert any(f"PRIMARY KEY ({label.key})" in s and f" {label.name}(" in s for s in lb)
        assert f"FOR (n:{label.name}) REQUIRE n.{label.key} IS UNIQUE" in " ".join(neo)
        for prop in label.indexed:
            assert any(re.search(rf"FOR \(n:{label.name}\) ON \(n\.{prop}\)", s) for s in neo)
    # one statement per constraint and index, with the names existing stores already have,
    # and the same for the staging label of each label a run or job owns
    for label in schema.OWNED:
        staged = schema.staged(label.name)
        assert f"FOR (n:{staged}) REQUIRE n.{label.key} IS UNIQUE" in " ".join(neo)
    per = [*schema.NODES, *schema.OWNED]
    assert len(neo) == len(per) + sum(len(label.indexed) for label in per)
    assert "CREATE INDEX ctda_event_run IF NOT EXISTS FOR (n:Event) ON (n.run_id)" in neo
    assert "CREATE CONSTRAINT ctda_run_id IF NOT EXISTS FOR (n:Run) REQUIRE n.id IS UNIQUE" in neo


@pytest.mark.neo4j
def test_neo4j_out_of_transaction_memory_says_what_to_raise(request: pytest.FixtureRequest) -> None:
    """A store operation that outgrows the server's transaction memory (as a large run's
    flip does) is one line naming the settings to raise, not the server's bare message."""
    from ctda.store.base import StoreError
    from tests.test_store_suite import neo4j_target

    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    bomb = "UNWIND range(1, 300000000) AS x WITH collect(x) AS l RETURN size(l) AS n"
    with open_store(t) as store:
        assert isinstance(store, Neo4jStore)
        with store._session() as s, pytest.raises(StoreError) as got:
            store._guard(lambda: s.run(bomb).consume())
    line = str(got.value)
    assert "\n" not in line and "db.memory.transaction.max" in line and "NEO4J_TX_MEMORY" in line
    # inside a store transaction (a run's flip): the same line, without the driver's 30 s
    # of retries that each need the same memory again
    import time

    with open_store(t) as store:
        start = time.monotonic()
        with pytest.raises(StoreError) as again:
            store._transaction(lambda run: run(bomb, {}))
    assert "NEO4J_TX_MEMORY" in str(again.value) and "\n" not in str(again.value)
    assert time.monotonic() - start < 20


def test_other_neo4j_errors_keep_their_message() -> None:
    from ctda.store.neo4j_cypher import error_line

    line = error_line("Neo.ClientError.Statement.SyntaxError", "Invalid input 'X'")
    assert line == "Neo4j: Invalid input 'X'"


@pytest.mark.neo4j
def test_neo4j_byte_strings_are_read_whole(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte string (a run's blobs: its analysis snapshot, a scenario's packed path) comes
    back from the store's reads as it is, not through the driver's export, which walks it a
    byte at a time (20 s for the analysis of a 1M-event run); other values still go through
    it."""
    import neo4j._data

    from tests.test_store_suite import neo4j_target

    calls = []
    transform = neo4j._data.RecordExporter.transform

    def counted(self: object, x: object) -> object:
        calls.append(1)
        return transform(self, x)  # type: ignore[arg-type]

    monkeypatch.setattr(neo4j._data.RecordExporter, "transform", counted)
    blob = bytes(range(256)) * 4096  # 1 MiB
    with open_store(neo4j_target(request.getfixturevalue("neo4j_server"))) as store:
        assert isinstance(store, Neo4jStore)
        rows = store._read("RETURN $b AS data, [1, 2] AS ids, 'x' AS name", {"b": blob})
    assert rows == [{"data": blob, "ids": [1, 2], "name": "x"}] and type(rows[0]["data"]) is bytes
    assert 0 < len(calls) < 100  # the list and the string only, not a call per byte
