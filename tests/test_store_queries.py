"""The named-query loader and the store locator: parsing, typing, write detection, secrets."""

from __future__ import annotations

import pytest

from ctda.queries import loader
from ctda.queries.loader import QueryError
from ctda.store import backends, schema
from ctda.store.config import Target, resolve


def test_every_named_query_parses_for_both_dialects() -> None:
    queries = loader.load_all()
    expected = {
        "hotspots_by_name", "hotspots_by_class", "hotspots_by_lane", "hotspots_by_category", "waits",
        "steps", "bound_by", "cp_listing", "edge_provenance", "event_neighbourhood", "event_deps",
        "near_critical", "runs",
    }  # fmt: skip
    assert expected <= set(queries)
    assert all(queries[name].has(d) for name in expected for d in loader.dialects())
    for q in queries.values():
        assert q.description, q.name
        assert q.has("neo4j"), q.name  # the team store runs every named query
        for dialect in (d for d in loader.dialects() if q.has(d)):
            text = q.text(dialect)
            assert loader.is_write(text, backends.by_kind(dialect)) == q.writes, (
                q.name
            )  # only declared writers write
            for p in q.params:
                assert f"${p.name}" in text, (q.name, p.name)


def test_params_are_typed_and_checked() -> None:
    q = loader.get("hotspots_by_name")
    assert q.bind({"run": "r"}) == {"run": "r", "step": -1, "scenario": "baseline", "top": 1000000}
    assert q.bind({"run": "5", "step": "3", "top": "0x10"})["step"] == 3
    with pytest.raises(QueryError, match="needs --param run"):
        q.bind({})
    with pytest.raises(QueryError, match="must be int"):
        q.bind({"run": "r", "step": "three"})
    with pytest.raises(QueryError, match="no parameter"):
        q.bind({"run": "r", "stepp": "3"})
    with pytest.raises(QueryError, match="no named query"):
        loader.get("nope")
    assert loader.coerce("yes", "bool") is True and loader.coerce("2.5", "float") == 2.5
    assert loader.guess("12") == 12 and loader.guess("[1, 2]") == [1, 2] and loader.guess("true") is True
    assert loader.guess("x' OR 1=1") == "x' OR 1=1" and loader.guess('{"a": 1}') == '{"a": 1}'


@pytest.mark.parametrize(
    ("text", "writes"),
    [
        ("MATCH (n) RETURN n", False),
        ("MATCH (n {name: 'CREATE (x)'}) RETURN n.set AS s // DELETE everything", False),
        ('MATCH (n) WHERE n.name = "DETACH DELETE" RETURN n', False),
        ("MATCH (n) DETACH DELETE n", True),
        ("match (n) set n.x = 1", True),
        ("MERGE (n:X)", True),
        ("MATCH (e) CALL (e) { MATCH (e)-[d]->(o) RETURN o } RETURN o", False),
        ("COPY Event FROM 'x.csv'", True),
        ("MATCH (n) /* CREATE */ RETURN n", False),
    ],
)
def test_write_clause_detection(text: str, writes: bool) -> None:
    assert loader.is_write(text) is writes


def test_looks_named() -> None:
    assert loader.looks_named("hotspots_by_name")
    assert not loader.looks_named("MATCH (n) RETURN n")


def test_resolve_store_location(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for var in ("CTDA_DB", "CTDA_NEO4J_USER", "CTDA_NEO4J_PASSWORD", "NEO4J_AUTH", "CTDA_NEO4J_DATABASE"):
        monkeypatch.delenv(var, raising=False)
    default = resolve(None)
    assert default.kind == "ladybug" and default.location.endswith("store.lbug")
    monkeypatch.setenv("CTDA_DB", "/some/where.lbug")
    assert resolve(None) == Target("ladybug", "/some/where.lbug")
    assert resolve("other.lbug").location == "other.lbug"
    t = resolve("bolt://alice:s3cr%40t@db.example:7687")
    assert (t.kind, t.location, t.auth) == ("neo4j", "bolt://db.example:7687", ("alice", "s3cr@t"))
    assert "s3cr" not in str(t) and "s3cr" not in repr(t)
    monkeypatch.setenv("NEO4J_AUTH", "neo4j/from-env")
    assert resolve("neo4j://h").auth == ("neo4j", "from-env")
    monkeypatch.setenv("CTDA_NEO4J_PASSWORD", "pw")
    monkeypatch.setenv("CTDA_NEO4J_USER", "bob")
    assert resolve("neo4j+s://h:1/mydb") == Target("neo4j", "neo4j+s://h:1", ("bob", "pw"), "mydb")


def test_schema_keys() -> None:
    assert schema.event_key(3, 7) == 3 * schema.KEY_SPAN + 7
    assert all(label.props for label in schema.NODES)
    # names Ladybug reserves are not used as properties
    reserved = {"options", "order", "end"}
    for label in schema.NODES + schema.RELS:
        assert not reserved & set(label.columns), label.name
    data = b"a" * (schema.BLOB_CHUNK + 1)
    chunks = schema.blob_chunks(1, "x", data)
    assert [c["chunk"] for c in chunks] == [0, 1]
    assert b"".join(bytes(c["data"]) for c in chunks) == data  # type: ignore[call-overload]
    assert schema.blob_chunks(1, "x", b"")[0]["data"] == b""
