"""Hostile queries, as a read-only user of the CLI, the API and the UI console would type
them, on both stores: every bypass of the old look-alike gate and its variants is refused,
no file is read or written, no address is contacted, and the bounds (length, nesting,
time, rows, memory) end each bomb in one line.

The Neo4j half runs against the real server of ``tests/neo4j_fixture.py`` (hardened the way
``scripts/neo4j_plugins.py`` and docker-compose set it up). An SSRF attempt can only ever
point at ``http://127.0.0.1:PORT`` of a tiny server this module runs itself, which must
never receive a request.

The gates on their own, without a store, are in ``test_hostile_query_gate.py``; the
queries themselves in ``hostile_query_cases.py``.
"""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from typer.testing import CliRunner

import ctda.cli.store_cmds  # noqa: F401  (registers ctda query on the app)
from ctda.cli.common import app
from ctda.queries import gate, loader, plan
from ctda.queries.errors import QueryError
from ctda.queries.limits import QueryLimitError, QueryLimits
from ctda.store import open_store
from ctda.store.base import StoreError
from ctda.store.config import Target
from tests.hostile_query_cases import BOMBS, BOUNDED, WRITES, attacks
from tests.neo4j_fixture import neo4j_server  # noqa: F401

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

pytest.importorskip("ladybug")

SMALL = Path(__file__).parent / "data" / "hta" / "cuda_event_sync_tiny.json.gz"
SECRET = "ctda-hostile-query-sentinel"
RUN = "hostile-small"
CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]


class _Probe(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Probe.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"a,b\n1,2\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def probe() -> Iterator[str]:
    """A loopback HTTP server that must never be contacted; yields its URL."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Probe)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ssrf"
    finally:
        server.shutdown()
    assert _Probe.hits == [], f"a query made the server fetch {_Probe.hits}"


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sentinel") / "sentinel.csv"
    path.write_text(f"a,b\n{SECRET},1\n")
    return path


@pytest.fixture(scope="module", params=["ladybug", "neo4j"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Target:
    """A store of each kind holding one run of the small trace."""
    import ctda.api as api

    if request.param == "ladybug":
        t = Target("ladybug", str(tmp_path_factory.mktemp("hostile-q") / "store.lbug"))
    else:
        info: ServerInfo = request.getfixturevalue("neo4j_server")
        t = Target("neo4j", info.uri, (info.user, info.password))
    with api.open_store(t) as session:
        if not any(r.name == RUN for r in session.runs()):
            session.ingest(SMALL, run=RUN)
    return t


def _db_args(t: Target, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``--db`` for the CLI; Neo4j's credentials go through the environment."""
    if t.kind == "neo4j":
        assert t.auth is not None
        monkeypatch.setenv("CTDA_NEO4J_USER", t.auth[0])
        monkeypatch.setenv("CTDA_NEO4J_PASSWORD", t.auth[1])
    return ["--db", t.location]


def _one_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), text
    assert "Traceback" not in text
    return lines[0]


# --- the database's plan: the gate that decides -------------------------------------------


def test_plan_gate_alone_refuses_on_neo4j(target: Target, probe: str, sentinel: Path) -> None:
    """With the tokenizer out of the way, Neo4j's own plan still refuses every attack that
    parses there (or the hardened server does not know the procedure at all)."""
    if target.kind != "neo4j":
        pytest.skip("the Neo4j plan (the embedded store's is below)")
    cases = attacks(probe, sentinel)
    refused_by_plan = 0
    with open_store(target, read_only=True) as s:
        for name, text in cases.items():
            if name.startswith("ladybug-") or name in WRITES:
                continue
            try:
                s._check_plan(text, {}, gate.Level.READ)
            except gate.GateError:
                refused_by_plan += 1
                continue
            except StoreError:  # a syntax error or an unknown procedure: the server refuses
                continue
            # what the plan lets through is harmless there (a \\U escape is only a string
            # escape to Neo4j): it runs, reads no file and contacts nothing
            got = s._query(text, {}, False, QueryLimits(timeout_s=10, max_rows=10))
            assert SECRET not in str(got.rows), name
        # and at --write: still no LOAD CSV, no dbms/apoc/gds procedure
        for name in ("uescape-string", "comment-cr-load", "backtick-cypher", "subquery-load"):
            with pytest.raises((gate.GateError, StoreError)):
                s._check_plan(cases[name], {}, gate.Level.WRITE)
    assert refused_by_plan >= 10  # the plan, not only syntax errors, did the refusing
    assert SECRET not in str(_Probe.hits)


def test_plan_gate_on_the_embedded_store(target: Target) -> None:
    if target.kind != "ladybug":
        pytest.skip("the embedded store's plan")
    with open_store(target, read_only=True) as s:
        s._check_plan("MATCH (r:Run) RETURN r.name AS n", {}, gate.Level.READ)
    box = "│     {}[0]     │"
    with pytest.raises(gate.GateError, match="COPY_TO"):
        plan.check_ladybug(box.format("COPY_TO") + "\n" + box.format("PROJECTION"), gate.Level.READ)
    with pytest.raises(gate.GateError, match="INSERT"):
        plan.check_ladybug(box.format("INSERT"), gate.Level.READ)
    with pytest.raises(gate.GateError, match="could not be read"):
        plan.check_ladybug("no plan here", gate.Level.READ)
    plan.check_ladybug(box.format("INSERT"), gate.Level.WRITE)


def test_every_named_query_passes_the_plan_gate(target: Target) -> None:
    """The allow-lists keep every query ctda ships (their plans on the real engine)."""
    checked, refused = 0, []
    with open_store(target, read_only=False) as s:
        for q in loader.load_all().values():
            if not q.has(target.kind):
                continue
            given = {"int": "1", "float": "1.0", "bool": "true", "string": "x"}
            raw = {p.name: RUN if p.name == "run" else given[p.type] for p in q.params if p.required}
            text, params = loader.prepare(q.name, raw, target.kind)
            level = gate.Level.WRITE if q.writes else gate.Level.READ
            try:
                s._check_plan(text, params, level)
            except gate.GateError as exc:
                refused.append(f"{q.name}: {exc}")
            checked += 1
    assert refused == []
    assert checked >= 20


# --- every public path: API, UI console, CLI ---------------------------------------------


def test_api_refuses_every_attack(target: Target, probe: str, sentinel: Path) -> None:
    import ctda.api as api

    before = sentinel.read_bytes()
    with api.open_store(target) as session:
        for name, text in attacks(probe, sentinel).items():
            with pytest.raises(QueryError) as refused:
                session.query(text)
            assert "\n" not in str(refused.value) and SECRET not in str(refused.value), name
        rows = session.query("MATCH (r:Run) WHERE r.name = $n RETURN r.name AS name", {"n": RUN}).rows
    assert rows == [[RUN]]
    assert sentinel.read_bytes() == before
    assert not Path(f"{sentinel}.out.csv").exists()


def test_ui_console_refuses_every_attack(target: Target, probe: str, sentinel: Path) -> None:
    from ctda.ui import data

    db = target.location
    env = {}
    if target.kind == "neo4j":
        assert target.auth is not None
        env = {"CTDA_NEO4J_USER": target.auth[0], "CTDA_NEO4J_PASSWORD": target.auth[1]}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        for text in attacks(probe, sentinel).values():
            with pytest.raises(data.UIError):
                data.run_query(db, text, {})
        for text in BOMBS.values():
            with pytest.raises(data.UIError, match=BOUNDED):
                data.run_query(db, text, {})
        got = data.run_query(db, "MATCH (r:Run) WHERE r.name = $n RETURN r.name AS name", {"n": RUN})
        assert got.rows == [[RUN]]
        with pytest.raises(data.UIError, match="more than 10 rows"):
            data.run_query(db, "UNWIND range(1, 11) AS x RETURN x", {}, max_rows=10)


def test_cli_refuses_every_attack_in_one_line(
    target: Target, probe: str, sentinel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    db = _db_args(target, monkeypatch)
    for name, text in {**attacks(probe, sentinel), **BOMBS}.items():
        res = runner.invoke(app, ["query", text, *db])
        assert res.exit_code == 2, (name, res.output)
        assert SECRET not in _one_line(res.output), name
    # --write allows data changes, never files, extensions or other procedures
    for name in ("uescape-string", "comment-cr-config", "backtick-cypher", "apoc-periodic-repeat"):
        res = runner.invoke(app, ["query", "--write", attacks(probe, sentinel)[name], *db])
        assert res.exit_code == 2, (name, res.output)
        _one_line(res.output)


def test_cli_subprocess_deep_nesting_is_one_line(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a real process: no SIGSEGV, no traceback, exit 2 and one line."""
    db = _db_args(target, monkeypatch)
    for name in ("deep-brackets", "deep-parens", "long-sum", "parens-33", "sum-257"):
        res = subprocess.run(
            [*CTDA, "query", BOMBS[name], *db],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        assert res.returncode == 2, (name, res.returncode, res.stderr[-500:])
        assert re.search(BOUNDED, _one_line(res.stderr)), name


# --- bombs that parse: stopped by the row cap, the memory cap or the timeout --------------


def test_row_bomb_is_stopped_by_the_row_cap(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    res = runner.invoke(
        app,
        [
            "query",
            "UNWIND range(1, 30000000) AS x RETURN x",
            "--timeout",
            "30",
            *_db_args(target, monkeypatch),
        ],
    )
    assert res.exit_code == 2, res.output
    line = _one_line(res.output)
    assert "row cap" in line or "timeout" in line or "memory" in line


def test_memory_bomb_is_stopped_in_one_line(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    # Neo4j 5 has no repeat(): its bomb is a list collected in one transaction
    bomb = {
        "ladybug": "RETURN size(repeat('x', 2000000000)) AS n",
        "neo4j": "UNWIND range(1, 300000000) AS x WITH collect(x) AS l RETURN size(l) AS n",
    }[target.kind]
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    res = runner.invoke(app, ["query", bomb, "--timeout", "30", *_db_args(target, monkeypatch)])
    assert res.exit_code == 2, res.output
    line = _one_line(res.output)
    assert "memory" in line or "timeout" in line, line


def test_timeout_stops_a_long_query(target: Target) -> None:
    import ctda.api as api

    slow = (
        "UNWIND range(1, 30000) AS a UNWIND range(1, 30000) AS b WITH a, b WHERE a * b = -1 RETURN count(*)"
    )
    with api.open_store(target) as session, pytest.raises(QueryLimitError, match=r"timeout|memory"):
        session.query(slow, limits=QueryLimits(timeout_s=1, max_rows=10))


# --- the hardened server, asked directly (the layer under both gates) ---------------------


def test_neo4j_server_refuses_files_procedures_and_outbound(
    target: Target, probe: str, sentinel: Path
) -> None:
    """Each refusal for its setting's reason (tests/test_neo4j_unhardened.py runs the same
    on the same home without the settings: there they work)."""
    if target.kind != "neo4j":
        pytest.skip("Neo4j's own settings")
    import neo4j

    assert target.auth is not None
    unknown = "no procedure with the name `{}` registered"
    queries = {
        f"LOAD CSV FROM '{probe}' AS l RETURN l": "cypher_ip_blocklist",
        f"LOAD CSV FROM 'file://{sentinel}' AS l RETURN l": "allow_csv_import_from_file_urls",
        f"CALL apoc.load.json('{probe}') YIELD value RETURN value": unknown.format("apoc.load.json"),
        f"CALL apoc.load.json('file://{sentinel}') YIELD value RETURN value": unknown.format(
            "apoc.load.json"
        ),
        f"CALL apoc.load.csv('{probe}') YIELD list RETURN list": unknown.format("apoc.load.csv"),
        "RETURN apoc.cypher.runFirstColumnSingle('RETURN 1', {}) AS x": "Unknown function",
        "CALL apoc.periodic.repeat('x', 'RETURN 1', 1000)": unknown.format("apoc.periodic.repeat"),
        "CALL gds.graph.list()": unknown.format("gds.graph.list"),
    }
    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver:
        for text, reason in queries.items():
            with driver.session() as s, pytest.raises(neo4j.exceptions.Neo4jError) as refused:
                s.run(text).consume()
            message = str(refused.value.message)
            assert reason in message and "NoClassDefFound" not in message, (text, message)
        with driver.session() as s:  # what ctda calls is there
            assert s.run("RETURN apoc.convert.toJson([1]) AS j").single()["j"] == "[1]"
    assert _Probe.hits == []
