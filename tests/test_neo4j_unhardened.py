"""The Neo4j test server without ctda's hardening: what the hardened one refuses works here.

``tests/test_hostile_queries.py`` shows that the hardened server (the settings of
``scripts/neo4j_plugins.py`` and docker-compose) refuses files, outbound connections and
APOC's loaders, each for the hardening's reason. This module starts the same home and APOC
without those settings (``neo4j_server.start(hardened=False)``: Neo4j's defaults, APOC's file
import on) and runs the same attacks for real against a loopback HTTP server of its own:
they succeed, so the refusals there are the settings' doing and the test server exposes
what a user's stock APOC does. Without the jars ``neo4j_fetch.LIB_EXTRAS`` adds to the
home's ``lib/``, every one of them dies of ``NoClassDefFoundError`` instead, and this fails.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from tests.neo4j_fixture import load_server_module, neo4j_server  # noqa: F401

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

neo4j = pytest.importorskip("neo4j")

JSON = '{"ctda": "unhardened", "n": 7}'
CSV = "a,b\nunhardened,7\n"
#: a small server: it only answers a few queries (heap and page cache of a sliver of the
#: hardened one's, which runs beside it)
SMALL = {
    "server.memory.heap.initial_size": "256m",
    "server.memory.heap.max_size": "512m",
    "server.memory.pagecache.size": "64m",
    "db.memory.transaction.max": "256m",
}


class _Files(http.server.BaseHTTPRequestHandler):
    """Serves ``/x.json`` and ``/x.csv`` and records each path asked for."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Files.hits.append(self.path)
        body = {"/x.json": JSON, "/x.csv": CSV}.get(self.path)
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def files_url() -> Iterator[str]:
    """A loopback HTTP server the unhardened Neo4j may reach; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def unhardened(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerInfo]:
    """A short-lived server of the test home with APOC alone and no hardening. It asks for
    ``neo4j_server`` first: the same prerequisites and skips, the home and plugins already
    in the cache, and the Neo4j tests' worker."""
    request.getfixturevalue("neo4j_server")
    server = load_server_module()
    plugins = server._plugins_module()
    info = server.start(
        data_dir=tmp_path_factory.mktemp("neo4j-open"),
        plugins=True,
        hardened=False,
        only=plugins.APOC_JARS,
        extra_conf=SMALL,
    )
    try:
        yield info
    finally:
        server.stop(info)


def compose_settings() -> dict[str, str]:
    """The Neo4j settings docker-compose.yml gives its server, by their neo4j.conf names
    (the image reads ``NEO4J_a_b__c`` as ``a.b_c``); ``${VAR:-default}`` is its default."""
    text = (Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text(encoding="utf-8")
    out = {}
    for env, value in re.findall(r"^\s+NEO4J_([a-z]\w*):\s*\"([^\"]*)\"", text, re.MULTILINE):
        name = env.replace("__", "\0").replace("_", ".").replace("\0", "_")
        out[name] = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
    return out


def test_docker_compose_hardens_as_the_test_server() -> None:
    """The settings the hardened test server runs with are the ones docker-compose ships
    (spelled as the image reads them: a doubled underscore there once made the image read
    ``dbms.security.procedures_allowlist``, a setting that does not exist)."""
    plugins = load_server_module()._plugins_module()
    shipped = compose_settings()
    wanted = {k: plugins.SETTINGS[k] for k in plugins.HARDENING} | plugins.APOC_CONF
    wanted |= {k: plugins.SETTINGS[k] for k in ("db.memory.transaction.max", "db.transaction.timeout")}
    assert {k: shipped.get(k) for k in wanted} == wanted
    assert compose_settings()["server.memory.heap.max_size"] == "2g"  # the name read back


def test_the_home_has_hadoops_missing_closure(unhardened: ServerInfo) -> None:
    fetching = load_server_module()._fetching
    lib = Path(unhardened.home) / "lib"
    assert sorted(j.name for j in fetching.LIB_EXTRAS if (lib / j.name).is_file()) == sorted(
        j.name for j in fetching.LIB_EXTRAS
    )
    assert any(lib.glob("hadoop-common-*.jar"))  # what needs them, and why they matter


def test_unhardened_server_runs_what_the_hardened_one_refuses(unhardened: ServerInfo, files_url: str) -> None:
    """apoc.load.json of a file and of an http URL, LOAD CSV over http and of a file: each
    returns the served content, and the http ones did reach the local server."""
    imports = Path(unhardened.instance) / "import"
    (imports / "x.json").write_text(JSON)
    (imports / "x.csv").write_text(CSV)
    want_json = [{"ctda": "unhardened", "n": 7}]
    want_csv = [["a", "b"], ["unhardened", "7"]]
    queries = {
        "CALL apoc.load.json('file:///x.json') YIELD value RETURN value": want_json,
        f"CALL apoc.load.json('{files_url}/x.json') YIELD value RETURN value": want_json,
        f"LOAD CSV FROM '{files_url}/x.csv' AS l RETURN l": want_csv,
        "LOAD CSV FROM 'file:///x.csv' AS l RETURN l": want_csv,
    }
    _Files.hits.clear()
    auth = (unhardened.user, unhardened.password)
    with neo4j.GraphDatabase.driver(unhardened.uri, auth=auth, notifications_min_severity="OFF") as driver:
        for text, want in queries.items():
            records, _, _ = driver.execute_query(text)
            assert [r[0] for r in records] == want, text
    assert sorted(_Files.hits) == ["/x.csv", "/x.json"]
