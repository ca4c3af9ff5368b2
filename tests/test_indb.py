"""What-if inside Neo4j (``ctda.replay``) against the Python engine, on a real server.

The session's Neo4j server carries ctda's procedures (and GDS, APOC), built from
``neo4j/procedures`` by ``scripts/neo4j_plugins.py``. Nothing is mocked.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

import ctda.cli.whatif_cmds  # noqa: F401  (registers the command)
from ctda.analysis.calibrate import PRIORITY
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import SPECS, EdgeType
from ctda.analysis.engine import Analysis, AnalysisOptions
from ctda.cli.common import app
from ctda.queries import loader
from ctda.store import StoreError, open_store
from ctda.store.config import Target
from ctda.store.ingest import ingest
from ctda.whatif import indb
from ctda.whatif.scenario import run as run_scenario
from ctda.whatif.select import Override, parse_scale
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import NOGIL, neo4j_target, shipped_in_neo4j

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

pytestmark = pytest.mark.neo4j
ROOT = Path(__file__).resolve().parents[1]
JAVA = ROOT / "neo4j" / "procedures" / "src" / "main" / "java" / "ctda" / "procedures" / "Replay.java"
DEMO = "rocm62_mi250_minitoy_train.json.gz"
#: the gloo trace again, analysed without the GIL rule: no contention model, so the
#: database's predictions must equal Python's (the shipped copy keeps the default options)
GLOO = NOGIL
#: (run, --scale selections) without the GIL-contention model: the procedure must equal Python
SCENARIOS = [
    ("resnet50_nw0_2020_bare_list.json.gz", ["name~conv=0.5"]),
    ("resnet50_nw0_2020_bare_list.json.gz", ["cat=kernel=0.3"]),
    (GLOO, ["name~gloo=0"]),
    (GLOO, ["class=cpu=0.8"]),
    (DEMO, ["class=launch_overhead=0.5"]),
    ("simple_add_param_benchmark.json.gz", ["name~aten::=2"]),
    ("backward_thread_minimal.json.gz", ["class=cpu=0.7"]),
    ("rocm_torch_compile_triton_small.json.gz", ["cat=kernel=0.25", "name~aten::=0.9"]),
]


@pytest.fixture
def stored(neo4j_server: ServerInfo) -> tuple[Target, dict[str, Analysis]]:  # noqa: F811
    """Every shipped trace and the corpus runs, in the server: the store suite's one ingest."""
    shipped = shipped_in_neo4j(neo4j_target(neo4j_server))
    return shipped.target, shipped.runs


def _run_id(t: Target, name: str) -> int:
    with open_store(t, read_only=True) as s:
        info = s.find_run(name)
    assert info is not None
    return info.id


def _in_db(t: Target, name: str, a: Analysis, ovs: list[Override]) -> indb.InDbResult:
    with open_store(t, read_only=True) as s:
        return indb.replay(s, _run_id(t, name), ovs, a)


def test_java_tables_match_the_engine() -> None:
    """The procedure's tie-break priorities and wait classes are the engine's."""
    text = JAVA.read_text(encoding="utf-8")
    table = text.split("PRIORITY = Map.ofEntries(", 1)[1].split(");", 1)[0]
    pairs = dict(re.findall(r'"(\w+)", (\d+)\)', table))
    assert {k: int(v) for k, v in pairs.items()} == {t.name.lower(): int(PRIORITY[t]) for t in EdgeType}
    table = text.split("WAIT_CLASS = Map.of(", 1)[1].split(");", 1)[0]
    waits = dict(re.findall(r'"(\w+)", "(\w+)"', table))
    want = {t.name.lower(): SPECS[t].charge for t in EdgeType if SPECS[t].charge != "event"}
    assert waits == want and set(waits.values()) <= set(CLASSES)


def test_baseline_reproduced_exactly(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """Every stored trace: the database's replay gives the observed windows and paths."""
    t, runs = stored
    for name, a in runs.items():
        got = _in_db(t, name, a, [])
        b0, b1 = a.window_bounds()
        assert got.steps.predicted_ns.tolist() == (b1 - b0).tolist(), name
        assert got.steps.base_ns.tolist() == (b1 - b0).tolist(), name
        for w in range(len(a.windows)):
            want = a.charges[a.charges.window == w]
            have = got.path[got.path.window == w]
            assert have.edge.tolist() == want.edge.tolist(), (name, w)
            assert have.ns.tolist() == want.ns.tolist(), (name, w)
            assert have["class"].tolist() == [CLASSES[c] for c in want.cls], (name, w)


@pytest.mark.parametrize(("name", "specs"), SCENARIOS)
def test_scenarios_equal_python(
    stored: tuple[Target, dict[str, Analysis]], name: str, specs: list[str]
) -> None:
    t, runs = stored
    a = runs[name]
    assert len(a.contention) == 0  # the procedure does not model GIL contention
    ovs = [parse_scale(a, s) for s in specs]
    py = run_scenario(a, ovs)
    got = _in_db(t, name, a, ovs)
    assert got.steps.predicted_ns.tolist() == py.step_times().predicted_ns.tolist()
    assert got.path.edge.tolist() == py.analysis.charges.edge.tolist()
    assert got.path.ns.tolist() == py.analysis.charges.ns.tolist()


def test_rebuilt_path_is_the_procedures(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """``indb.replay`` gets edge ids and charges packed (``ctda.replayArrays``) and names and
    classes each stretch from the analysis: the same rows ``ctda.replay`` lists for Cypher."""
    t, runs = stored
    waits = []
    for name, specs in [(GLOO, ["class=cpu=0.8"]), (DEMO, ["class=launch_overhead=0.5"]), (DEMO, [])]:
        a = runs[name]
        ovs = [parse_scale(a, s) for s in specs]
        got = _in_db(t, name, a, ovs)
        with open_store(t, read_only=True) as s:
            rows = s.query(
                "CALL ctda.replay($r, $f) YIELD window, predictedNs, edges, waits, charges, classes, names "
                "RETURN * ORDER BY window",
                {"r": _run_id(t, name), "f": indb.factors(ovs, a.nodes.end - a.nodes.ts)},
            ).records()
        assert [r["predictedNs"] for r in rows] == got.steps.predicted_ns.tolist()
        lists = {
            k: [x for r in rows for x in r[k]] for k in ("edges", "waits", "charges", "classes", "names")
        }
        assert got.path.edge.tolist() == lists["edges"] and got.path.ns.tolist() == lists["charges"]
        assert got.path.wait.tolist() == lists["waits"]
        assert got.path["class"].tolist() == lists["classes"]
        assert got.path.name.tolist() == [
            f"({c})" if w else x for x, w, c in zip(lists["names"], lists["waits"], lists["classes"])
        ]
        waits += lists["waits"]
    assert any(waits) and not all(waits)  # both kinds of stretch were compared


def test_some_scenario_changes_the_step(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """The equalities above are not all 'nothing changed'."""
    t, runs = stored
    a = runs[GLOO]
    got = _in_db(t, GLOO, a, [parse_scale(a, "class=cpu=0.8")])
    assert (got.steps.delta_ns < 0).all()


def _readme_flow() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("### What-if inside Neo4j", 1)[1].split("```cypher", 1)[1].split("```", 1)[0]
    return [s.strip() for s in block.split(";") if s.strip()]


def test_readme_cypher_flow(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """The README's Cypher-only what-if, typed statement by statement into a driver session."""
    import neo4j

    t, runs = stored
    a = runs[DEMO]
    with open_store(t) as s:  # the flow names the run 'myrun'
        s.query("MATCH (r:Run {name: $n}) SET r.name = 'myrun'", {"n": DEMO}, write=True)
    try:
        statements = _readme_flow()
        assert len(statements) == 5
        assert t.auth is not None
        with neo4j.GraphDatabase.driver(t.location, auth=t.auth) as driver, driver.session() as session:
            results = [session.run(q).data() for q in statements]
            left = session.run("MATCH (e:Event) WHERE e.factor IS NOT NULL RETURN count(e) AS n").single()
    finally:
        with open_store(t) as s:
            s.query("MATCH (r:Run {name: 'myrun'}) SET r.name = $n", {"n": DEMO}, write=True)
    py = run_scenario(a, [parse_scale(a, "name~^aten::=0.5")])
    steps = py.step_times()
    assert [r["predictedNs"] for r in results[1]] == steps.predicted_ns.tolist()
    assert [r["baseNs"] for r in results[1]] == steps.base_ns.tolist()
    assert steps.delta_ns.sum() < 0  # the edit shortened the run
    path0 = py.analysis.charges[py.analysis.charges.window == 0]
    assert [r["ns"] for r in results[2]] == path0.ns.tolist()
    base0 = a.charges[a.charges.window == 0]
    assert [r["ns"] for r in results[3]] == base0.ns.tolist()
    assert left is not None and left["n"] == 0


def test_named_queries_and_saved_scenario(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """replay_* answer like the library; replay_save stores a scenario the CLI re-times alike."""
    t, runs = stored
    name = GLOO
    a = runs[name]
    ovs = [parse_scale(a, "class=cpu=0.5")]
    py = run_scenario(a, ovs)
    assert (py.step_times().delta_ns < 0).all()
    with open_store(t) as s:
        s.query(
            "MATCH (r:Run {name: $n}), (e:Event) WHERE e.run_id = r.id AND e.idx IN $ids SET e.factor = 0.5",
            {"n": name, "ids": [int(x) for x in ovs[0].events]},
            write=True,
        )
        try:
            steps = loader.run(s, "replay_steps", run=name).records()
            path = loader.run(s, "replay_path", run=name, step=-1).records()
            hot = loader.run(s, "replay_hotspots", run=name, top=5).records()
            saved = s.query(
                loader.get("replay_save").text("neo4j"),
                {"run": name, "name": "cpu_half", "property": "factor"},
                write=True,
            ).records()
        finally:
            s.query("MATCH (e:Event) WHERE e.factor IS NOT NULL REMOVE e.factor", write=True)
        assert [r["predicted_ns"] for r in steps] == py.step_times().predicted_ns.tolist()
        assert [r["edge"] for r in path] == py.analysis.charges.edge.tolist()
        assert sum(r["cp_ns"] for r in hot) <= int(py.analysis.charges.ns.sum())
        assert hot[0]["cp_ns"] >= hot[-1]["cp_ns"]
        assert saved[0]["predicted_ns"] == int(py.step_times().predicted_ns.sum())
        listed = {r["name"] for r in s.scenarios(_run_id(t, name))}
    assert "cpu_half" in listed
    # the CLI and UI re-time a stored scenario from its overrides: the same prediction
    from ctda.store.runs import open_run

    base, handle = open_run(name, t)
    again = handle.load_scenario(base, "cpu_half")
    assert again is not None
    assert again.step_times().predicted_ns.tolist() == py.step_times().predicted_ns.tolist()


def _cli(t: Target, *args: str) -> Any:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert t.auth is not None
    env = {"CTDA_NEO4J_USER": t.auth[0], "CTDA_NEO4J_PASSWORD": t.auth[1]}
    return runner.invoke(app, [*args, "--db", t.location], env=env)


def test_cli_in_db(stored: tuple[Target, dict[str, Analysis]], tmp_path: Path) -> None:
    t, runs = stored
    name = GLOO
    a = runs[name]
    want = run_scenario(a, [parse_scale(a, "class=cpu=0.7")]).step_times()
    assert (want.delta_ns < 0).all()
    res = _cli(
        t, "whatif", name, "--scale", "class=cpu=0.7", "--in-db", "--name", "cpu_07", "--format", "json"
    )
    assert res.exit_code == 0, res.output
    import json

    d = json.loads(res.stdout)
    assert d["computed_in"] == "database"
    assert [s["predicted_ns"] for s in d["steps"]] == want.predicted_ns.tolist()
    with open_store(t, read_only=True) as s:
        assert "cpu_07" in {r["name"] for r in s.scenarios(_run_id(t, name))}
    # the embedded store cannot: one line, exit 2
    lb = Target("ladybug", str(tmp_path / "s.lbug"))
    ingest(ROOT / "tests" / "data" / "hta" / DEMO, lb, AnalysisOptions(), name="demo")
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    res = runner.invoke(app, ["whatif", "demo", "--scale", "name~aten=0.5", "--in-db", "--db", lb.location])
    assert res.exit_code == 2
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "cannot compute longest paths in Cypher" in lines[0]


def test_errors_are_clear(stored: tuple[Target, dict[str, Analysis]]) -> None:
    t, _ = stored
    with open_store(t, read_only=True) as s, pytest.raises(StoreError, match="no complete ctda run"):
        s.query("CALL ctda.replay(987654321)").records()
    with open_store(t, read_only=True) as s, pytest.raises(StoreError, match="no analysed event"):
        rid = _run_id(t, DEMO)
        s.query("CALL ctda.replay($r, {`99999999`: 0.5})", {"r": rid}).records()


def _cache(s: Any) -> dict[str, int]:
    (row,) = s.query("CALL ctda.replayCache()").records()
    return {k: int(row[k]) for k in ("runs", "hits", "loads")}


def test_replay_cache_reuses_and_rereads(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """Repeated calls replay the run's graph read once; evicted or re-written runs are read again.

    The cache holds at most four runs, least recently used first out; a write of the run (its
    stamp) makes the next call read it from the store, and every call gives the same answer.
    """
    t, runs = stored
    five = sorted(runs, key=lambda k: runs[k].nodes.n)[:5]  # the smallest: cheap to read
    first = {}
    with open_store(t, read_only=True) as s:
        for name in five:
            first[name] = indb.replay(s, _run_id(t, name), [], runs[name])
        c0 = _cache(s)
        assert c0["runs"] == 4  # the five calls left the last four
        a = runs[five[-1]]
        again = indb.replay(s, _run_id(t, five[-1]), [], a)  # held: no read
        c1 = _cache(s)
        assert (c1["hits"], c1["loads"]) == (c0["hits"] + 1, c0["loads"])
        assert again.steps.equals(first[five[-1]].steps) and again.path.equals(first[five[-1]].path)
        a = runs[five[0]]
        back = indb.replay(s, _run_id(t, five[0]), [], a)  # evicted: read again
        c2 = _cache(s)
        assert (c2["hits"], c2["loads"], c2["runs"]) == (c1["hits"], c1["loads"] + 1, 4)
        assert back.steps.equals(first[five[0]].steps) and back.path.equals(first[five[0]].path)
    name = five[0]
    a = runs[name]
    b0, b1 = a.window_bounds()
    with open_store(t) as s:
        s.query("MATCH (r:Run {name: $n}) SET r.ingested_at = r.ingested_at + '!'", {"n": name}, write=True)
        try:
            got = indb.replay(s, _run_id(t, name), [], a)
            c3 = _cache(s)
        finally:
            s.query(
                "MATCH (r:Run {name: $n}) SET r.ingested_at = left(r.ingested_at, size(r.ingested_at) - 1)",
                {"n": name},
                write=True,
            )
    assert (c3["hits"], c3["loads"]) == (c2["hits"], c2["loads"] + 1)
    assert got.steps.predicted_ns.tolist() == (b1 - b0).tolist()


def test_bench_suite_measures_cold_and_warm(stored: tuple[Target, dict[str, Analysis]]) -> None:
    """The in-database bench suite's measurement, on a small stored run: agreement, cache use."""
    from bench import suite_indb

    t, runs = stored
    a = runs[DEMO]
    with open_store(t, read_only=True) as s:
        before = _cache(s)
        row = suite_indb.measure(s, _run_id(t, DEMO), a)
    assert row["same_ns"] is True
    # each call either reads the run or is answered from the cache: only the cold one may read
    calls = 1 + 2 * suite_indb.WARM_CALLS + 1  # cold, warm full and steps, one warm lists call
    loads, hits = row["cache_loads"] - before["loads"], row["cache_hits"] - before["hits"]
    assert loads <= 1 and loads + hits == calls
