"""Smoke test: the throwaway Neo4j server answers Cypher through the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.neo4j_fixture import load_server_module, neo4j_server, skip_or_fail  # noqa: F401

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo


def test_passwords_never_read_as_an_option() -> None:
    # neo4j-admin takes a password starting with '-' for an option and fails to start
    mod = load_server_module()
    assert not any(mod.new_password().startswith("-") for _ in range(2000))
    assert len(mod.new_password()) >= mod.MIN_PASSWORD_LENGTH
    with pytest.raises(mod.StartError, match="must not start with '-'"):
        mod._check_password("-" + "x" * 20)


@pytest.mark.neo4j
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
