"""``ctda ingest / runs / rm / report / query``: output, exit codes, one-line errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import ctda.cli.analyze_cmd
import ctda.cli.store_cmds  # noqa: F401  (registers the commands on the app)
from ctda.cli.common import app
from ctda.store.config import Target
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import HOSTILE, SMALL, STEPS, counts, neo4j_target, target, wipe

__all__ = ["target"]


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("CTDA_DB", raising=False)
    return CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def cli(runner: CliRunner, target: Target, *args: str, env: dict[str, str] | None = None) -> Result:
    """Run ctda with --db pointing at ``target`` (credentials through the environment)."""
    extra = dict(env or {})
    if target.auth is not None:
        extra |= {"CTDA_NEO4J_USER": target.auth[0], "CTDA_NEO4J_PASSWORD": target.auth[1]}
    return runner.invoke(app, [*args, "--db", target.location], env=extra)


def _rounded(v: object) -> object:
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


def test_ingest_runs_report_rm(runner: CliRunner, target: Target) -> None:
    res = cli(runner, target, "ingest", str(STEPS), "--top", "3")
    assert res.exit_code == 0, res.output
    assert "stored run cpu_only_gloo_rank34_full" in res.stderr
    assert "Top hotspots" in res.stdout and "ProfilerStep#" in res.stdout
    analyzed = runner.invoke(app, ["analyze", str(STEPS), "--top", "3"])
    assert res.stdout == analyzed.stdout  # ingest prints what analyze prints

    again = cli(runner, target, "ingest", str(STEPS), "--top", "3")
    assert again.exit_code == 0 and "already stored as run cpu_only_gloo_rank34_full" in again.stderr

    runs = cli(runner, target, "runs", "--format", "json")
    assert runs.exit_code == 0, runs.output
    (run,) = json.loads(runs.stdout)
    assert run["name"] == "cpu_only_gloo_rank34_full" and run["events"] == 7479 and run["steps"] == 5
    assert run["options"]["cross_thread"] and len(run["sha256"]) == 64
    table = cli(runner, target, "runs")
    assert "cpu_only_gloo_rank34_full" in table.stdout

    for fmt in ("json", "md", "table"):
        rep = cli(
            runner,
            target,
            "report",
            "cpu_only_gloo_rank34_full",
            "--format",
            fmt,
            "--step",
            "553",
            "--top",
            "3",
        )
        ref = runner.invoke(app, ["analyze", str(STEPS), "--format", fmt, "--step", "553", "--top", "3"])
        assert rep.exit_code == 0, rep.output
        if fmt == "json":
            got, want = json.loads(rep.stdout), json.loads(ref.stdout)
            for key in (
                "critical_path_ns",
                "steps",
                "bound_by",
                "hotspots",
                "by_category",
                "by_thread_or_stream",
            ):
                assert _rounded(got[key]) == _rounded(want[key]), key
        else:
            assert "ProfilerStep#553" in rep.stdout

    gone = cli(runner, target, "rm", "cpu_only_gloo_rank34_full")
    assert gone.exit_code == 0 and "deleted run" in gone.stderr
    assert json.loads(cli(runner, target, "runs", "--format", "json").stdout) == []
    assert "no run 'cpu_only_gloo_rank34_full'" in one_line_error(
        cli(runner, target, "rm", "cpu_only_gloo_rank34_full")
    )


def test_ingest_errors_are_one_line(runner: CliRunner, target: Target, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b"[{]"))
    before = counts(target)
    assert str(bad) in one_line_error(cli(runner, target, "ingest", str(bad)))
    assert "missing.json" in one_line_error(cli(runner, target, "ingest", str(tmp_path / "missing.json")))
    assert "unknown cross-thread" in one_line_error(
        cli(runner, target, "ingest", str(SMALL), "--cross-thread", "nope")
    )
    no_window = cli(runner, target, "ingest", str(SMALL), "--windows", "^no such annotation$")
    assert "no analysis window" in one_line_error(no_window)
    assert counts(target) == before
    assert cli(runner, target, "ingest", str(SMALL), "--run", "r").exit_code == 0
    assert "already holds" in one_line_error(cli(runner, target, "ingest", str(STEPS), "--run", "r"))
    res = cli(runner, target, "ingest", str(STEPS), "--run", "r2", env={"CTDA_STORE_FAIL_AFTER_BATCHES": "2"})
    assert "injected fault" in one_line_error(res)
    assert "no run 'r2'" in one_line_error(cli(runner, target, "report", "r2"))
    assert "no ProfilerStep#9" in one_line_error(cli(runner, target, "report", "r", "--step", "9"))


def test_query_named_and_cypher(runner: CliRunner, target: Target) -> None:
    assert cli(runner, target, "ingest", str(STEPS), "--run", HOSTILE).exit_code == 0
    res = cli(
        runner,
        target,
        "query",
        "hotspots_by_name",
        "--param",
        f"run={HOSTILE}",
        "--param",
        "top=3",
        "--format",
        "json",
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 3 and rows[0]["cp_ns"] >= rows[1]["cp_ns"] >= rows[2]["cp_ns"]
    csv_out = cli(runner, target, "query", "steps", "-p", f"run={HOSTILE}", "--format", "csv")
    assert csv_out.stdout.splitlines()[0].startswith("idx,window,step")
    assert len(csv_out.stdout.splitlines()) == 6
    adhoc = cli(
        runner,
        target,
        "query",
        "MATCH (r:Run) WHERE r.name = $n RETURN r.events AS events",
        "-p",
        f"n={HOSTILE}",
    )
    assert adhoc.exit_code == 0 and "7479" in adhoc.stdout
    listing = cli(runner, target, "query", "--list")
    assert "hotspots_by_name" in listing.stdout and "edge_provenance" in listing.stdout

    assert "--write" in one_line_error(cli(runner, target, "query", "MATCH (r:Run) DETACH DELETE r"))
    assert "no named query" in one_line_error(cli(runner, target, "query", "hotspots_by_nam"))
    assert "needs --param run" in one_line_error(cli(runner, target, "query", "hotspots_by_name"))
    assert "must be int" in one_line_error(
        cli(runner, target, "query", "steps", "-p", "run=x", "-p", "step=two")
    )
    assert "no parameter" in one_line_error(
        cli(runner, target, "query", "steps", "-p", "run=x", "-p", "stp=1")
    )
    one_line_error(cli(runner, target, "query", "MATCH (n RETURN n"))  # a syntax error is one line too
    assert [r.name for r in _runs(runner, target)] == [HOSTILE]

    wrote = cli(runner, target, "query", "MATCH (r:Run) SET r.file = 'moved' RETURN r.file AS f", "--write")
    assert wrote.exit_code == 0 and "moved" in wrote.stdout


class _Run:
    def __init__(self, d: dict[str, object]) -> None:
        self.name = d["name"]


def _runs(runner: CliRunner, target: Target) -> list[_Run]:
    return [_Run(d) for d in json.loads(cli(runner, target, "runs", "--format", "json").stdout)]


@pytest.mark.neo4j
def test_credentials_never_printed(runner: CliRunner, request: pytest.FixtureRequest) -> None:
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    secret = "wrong-Secret-9f3b"
    res = runner.invoke(
        app, ["runs", "--db", t.location], env={"CTDA_NEO4J_USER": "neo4j", "CTDA_NEO4J_PASSWORD": secret}
    )
    assert "rejected the credentials" in one_line_error(res)
    assert secret not in res.output
    host = t.location.removeprefix("bolt://")
    res = runner.invoke(
        app, ["runs", "--db", f"bolt://neo4j:{secret}@{host}"], env={"CTDA_NEO4J_PASSWORD": ""}
    )
    assert res.exit_code == 2 and secret not in res.output
    assert t.auth is not None
    ok = runner.invoke(app, ["runs", "--db", t.location], env={"NEO4J_AUTH": f"{t.auth[0]}/{t.auth[1]}"})
    assert ok.exit_code == 0, ok.output
    assert t.auth[1] not in ok.output


def test_default_store_from_environment(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "env.lbug"
    res = runner.invoke(app, ["ingest", str(SMALL), "--run", "e"], env={"CTDA_DB": str(db)})
    assert res.exit_code == 0, res.output
    assert str(db) in res.stderr and db.exists()
    res = runner.invoke(app, ["runs", "--format", "json"], env={"CTDA_DB": str(db)})
    assert [r["name"] for r in json.loads(res.stdout)] == ["e"]
    empty = runner.invoke(app, ["runs"], env={"CTDA_DB": str(tmp_path / "none.lbug")})
    assert empty.exit_code == 0 and "no runs" in empty.stderr
    assert not (tmp_path / "none.lbug").exists()
