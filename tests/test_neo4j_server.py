"""Smoke test: the throwaway Neo4j server answers Cypher through the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.neo4j_fixture import neo4j_server, skip_or_fail  # noqa: F401

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

pytestmark = pytest.mark.neo4j


def test_return_one(neo4j_server: ServerInfo) -> None:  # noqa: F811
    """``RETURN 1 AS x`` round-trips through the official driver."""
    try:
        import neo4j
    except ImportError:
        skip_or_fail("the `neo4j` Python driver is not installed (pip install -e '.[neo4j]')")
    auth = (neo4j_server.user, neo4j_server.password)
    with neo4j.GraphDatabase.driver(neo4j_server.uri, auth=auth) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS x")
    assert records[0]["x"] == 1
