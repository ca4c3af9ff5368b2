"""What-if on stored runs, on both stores: Cypher selections, stored scenarios, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from ctda.cli.app import _register
from ctda.cli.common import app
from ctda.ingest.reader import read_trace
from ctda.store.config import Target
from ctda.store.runs import open_run
from ctda.whatif.scenario import run
from ctda.whatif.select import from_rows, parse_scale
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import SMALL, store_ingest, target

__all__ = ["target"]
RUN = "simple"


def _env(t: Target) -> dict[str, str]:
    env = {"CTDA_DB": t.location}
    if t.auth:
        env["CTDA_NEO4J_USER"], env["CTDA_NEO4J_PASSWORD"] = t.auth
    return env


def test_cypher_selection_equals_the_shorthand(target: Target) -> None:
    store_ingest(target, SMALL, name=RUN)
    a, stored = open_run(RUN, target)
    rows = stored.query_rows("whatif_copy_3x")
    assert rows and all(r["factor"] == 1 / 3 for r in rows)
    by_query = run(a, from_rows(a, rows, "q"))
    by_scale = run(a, [parse_scale(a, "name~^aten::copy_$=0.3333333333333333")])
    assert np.array_equal(by_query.timing.time, by_scale.timing.time)
    typed = stored.query_rows(
        "MATCH (r:Run {name: $run}) MATCH (e:Event) WHERE e.run_id = r.id AND e.name = 'aten::copy_' "
        "RETURN e.uid AS uid, 1.0 / 3.0 AS factor"
    )
    assert sorted(r["uid"] for r in typed) == sorted(r["uid"] for r in rows)


def test_scenarios_are_stored_and_reproduced(target: Target) -> None:
    store_ingest(target, SMALL, name=RUN)
    a, stored = open_run(RUN, target)
    sc = run(a, [parse_scale(a, "cat=kernel=0.5"), parse_scale(a, "name~cudaFree=0")], name="faster")
    stored.save_scenario(sc)
    listed = stored.scenarios()
    assert [s["name"] for s in listed] == ["faster"]
    assert listed[0]["predicted_ns"] == int(sc.step_times().predicted_ns.sum())
    again = stored.load_scenario(a, "faster")
    assert again is not None and np.array_equal(again.timing.time, sc.timing.time)
    # a listing carries each override's label and size, not its events
    brief = stored.scenarios(overrides=False)[0]["overrides"]
    assert [(o["label"], o["n_events"]) for o in brief] == [(o.label, len(o.events)) for o in sc.overrides]
    assert all("events" not in o for o in brief)
    whole = listed[0]["overrides"]
    assert [o["events"] for o in whole] == [o.events.tolist() for o in sc.overrides]
    assert stored.saved("nothing") is None
    assert stored.delete_scenario("faster") and stored.scenarios() == []


def test_whatif_compare_export_cli(target: Target, tmp_path: Path) -> None:
    _register()
    cli = CliRunner()
    store_ingest(target, SMALL, name=RUN)
    env = _env(target)
    r = cli.invoke(
        app, ["whatif", RUN, "--scale", "name~cudaFree=0", "--name", "nofree", "--format", "json"], env=env
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["predicted_ns"] < d["base_ns"] and d["events_changed"] > 0
    r = cli.invoke(
        app, ["whatif", RUN, "--cypher", "whatif_copy_3x", "--dry-run", "--format", "json"], env=env
    )
    assert r.exit_code == 0, r.output
    r = cli.invoke(app, ["compare", RUN, f"{RUN}@nofree", "--format", "json"], env=env)
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)
    assert c["prediction_error"]["error_ns"] < 0
    out = tmp_path / "nofree.json"
    r = cli.invoke(app, ["export", RUN, "--scenario", "nofree", "--perfetto", str(out)], env=env)
    assert r.exit_code == 0, r.output
    back = read_trace(out)
    assert (back.decoded("ph") == "X").sum() > 0
    r = cli.invoke(app, ["whatif", RUN, "--scale", "name~^nothing$=0"], env=env)
    assert r.exit_code == 2 and "matches no event" in r.output and "Traceback" not in r.output
    r = cli.invoke(app, ["whatif", RUN, "--cypher", "MATCH (n) DETACH DELETE n RETURN 1 AS uid"], env=env)
    assert r.exit_code == 2 and "read-only" in r.output
    r = cli.invoke(app, ["opportunities", RUN, "--format", "json", "--top", "3"], env=env)
    assert r.exit_code == 0 and json.loads(r.output)[0]["saving_2x_ns"] > 0
