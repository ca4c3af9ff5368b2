"""Distributed jobs in the store, on both backends: a job read back is the report its analysis
gave, its path walks the ranks' stored events, and the run invariants hold for jobs too
(atomic, idempotent, bad input leaves the store unchanged, rm removes everything).

Real stores and the real multi-rank traces of the shared corpus (skipped without it); one
analysis per job is shared by the tests through ``ingest_job``'s ``analyze`` argument.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import ctda.cli.analyze_cmd
import ctda.cli.job_store_cmds
import ctda.cli.store_cmds  # noqa: F401  (registers the commands on the app)
from ctda import api
from ctda.analysis.engine import AnalysisOptions
from ctda.cli.common import app
from ctda.job.load import JobError
from ctda.job.report import JobReport
from ctda.job.run import Job, analyze_job
from ctda.queries import loader
from ctda.store import InjectedFault, StoreError, open_store, schema
from ctda.store.config import Target
from ctda.store.faults import STALL_MARK
from ctda.store.job_ingest import JobIngested, ingest_job
from tests.conftest import CORPUS, DATA, SKIP_CORPUS
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import neo4j_target, store_ingest, wipe

pytestmark = SKIP_CORPUS
STORES = ["ladybug", pytest.param("neo4j", marks=pytest.mark.neo4j)]
NAME = "g_ddp_ws2_sleep40_r1"
LABELS = (
    "Run",
    "Event",
    "Window",
    "Segment",
    "Scenario",
    "Blob",
    "Job",
    "JobStep",
    "JobLateness",
    "JobWait",
    "JobClock",
)
LABELS += tuple(x.name for x in schema.BREAKDOWN_LABELS.values())
RELS = ("DEP", "CP", "HAS_WINDOW", "HAS_SEGMENT", "HAS_SCENARIO", "HAS_RANK", "HAS_STEP", "JOB_CP")


def job_dir(name: str = NAME) -> Path:
    assert CORPUS is not None
    return CORPUS / "generated" / "multirank" / name


_ANALYSED: dict[tuple[str, ...], Job] = {}


def analyzed(paths: list[Path], options: AnalysisOptions, **kw: Any) -> Job:
    """``analyze_job``, once per set of files for the whole module (the analysis is pure)."""
    key = (*map(str, paths), kw.get("name") or "")
    if key not in _ANALYSED:
        _ANALYSED[key] = analyze_job(paths, options, **{**kw, "executor": "serial"})
    return _ANALYSED[key]


def store_job(target: Target, paths: list[Path] | None = None, **kw: Any) -> JobIngested:
    return ingest_job(paths or [job_dir()], target, AnalysisOptions(), analyze=analyzed, **kw)


@pytest.fixture(params=STORES)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "ladybug":
        return Target("ladybug", str(tmp_path / "store.lbug"))
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    return t


def counts(target: Target) -> dict[str, int]:
    """Nodes per label and relationships per type, job tables included."""
    if target.kind == "ladybug" and not Path(target.location).exists():
        return dict.fromkeys(LABELS + RELS, 0)
    with open_store(target, read_only=True) as s:
        out = {x: int(s.query(f"MATCH (n:{x}) RETURN count(n) AS n").rows[0][0]) for x in LABELS}
        return out | {x: int(s._read(f"MATCH ()-[r:{x}]->() RETURN count(r) AS n")[0]["n"]) for x in RELS}


def assert_same_report(got: JobReport, want: JobReport) -> None:
    for table in ("steps", "lateness", "path", "waits", "clocks", "path_items"):
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), obj=table)
    for field in ("name", "ranks", "world_size", "missing", "matching", "notes", "checks"):
        assert getattr(got, field) == getattr(want, field), field


def test_a_stored_job_answers_with_its_report(target: Target) -> None:
    """Read back, the job is its report; written again it is left alone, replaced whole with
    ``force`` (a failed forced write changes nothing), and removed whole."""
    done = store_job(target)
    assert done.stored and done.report is not None
    want = done.report
    assert done.job.name == NAME and done.job.ranks == [0, 1] and done.job.missing == []
    session = api.open_store(target)
    got = session.job(NAME)
    assert_same_report(got, want)
    assert len(got.path) > 1000 and len(got.steps) == 5
    assert_same_report(session.job(NAME, top=3), api.open_store(target).job(NAME, top=3))
    assert len(session.job(NAME, top=3).path_items) == 3
    # rank 1 sleeps 40 ms a step: the straggler of every step, 35+ ms late
    assert list(got.steps.straggler) == [1] * 5 and (got.steps.late_ns > 35e6).all()
    assert [(j.name, j.ranks, j.world_size) for j in session.jobs()] == [(NAME, [0, 1], 2)]
    runs = {r.name: r for r in session.runs()}
    assert set(runs) == {f"{NAME}/r0", f"{NAME}/r1"}
    assert {n: (r.extra["job"], r.extra["rank"]) for n, r in runs.items()} == {
        f"{NAME}/r0": (NAME, 0),
        f"{NAME}/r1": (NAME, 1),
    }
    # a rank's run is an ordinary run: its report reads back like any other
    assert len(session.report(f"{NAME}/r1").steps) == 5

    with open_store(target, read_only=True) as s:
        steps = loader.run(s, "job_steps", job=NAME).records()
        late = loader.run(s, "job_stragglers", job=NAME).records()
        path = loader.run(s, "job_path", job=NAME).records()
        one = loader.run(s, "job_path", job=NAME, step="ProfilerStep#4").records()
    assert [r["step"] for r in steps] == list(want.steps.step)
    # the Cypher walk of each step's path sums to the job step
    assert [r["path_ns"] for r in steps] == [r["job_step_ns"] for r in steps] == list(want.steps.job_step_ns)
    by_step = pd.DataFrame(path).groupby("step").ns.sum()
    assert by_step.to_dict() == dict(zip(want.steps.step, want.steps.job_step_ns))
    assert sum(r["ns"] for r in one) == int(want.steps.set_index("step").job_step_ns["ProfilerStep#4"])
    assert [r["straggler"] for r in steps] == [1] * 5
    assert [(r["step"], r["rank"], r["late_ns"]) for r in late] == list(
        want.lateness.itertuples(index=False, name=None)
    )
    # each row reaches its rank's run and, unless a wait, the very event the report names
    rows = pd.DataFrame(path)
    assert list(rows["rank"]) == list(want.path["rank"])
    assert list(rows.run) == [f"{NAME}/r{r}" for r in want.path["rank"]]
    charged = ~rows.wait.astype(bool)
    assert (rows.event[charged].to_numpy() == want.path.event[charged].to_numpy()).all()
    assert (want.path.event[~charged] == -1).all()

    # the same files and options again: nothing is written
    before = counts(target)
    again = store_job(target)
    assert not again.stored and again.job.id == done.job.id
    assert counts(target) == before

    # --force replaces the job whole, and a forced write that fails changes nothing (one
    # ingest of the job serves every check of this test: each costs a whole job write)
    with pytest.raises(InjectedFault):
        store_job(target, force=True, fail_after=3)
    assert counts(target) == before
    assert api.open_store(target).job(NAME).steps.equals(want.steps)
    forced = store_job(target, force=True)
    assert forced.stored and forced.job.id != done.job.id
    assert counts(target) == before  # the old job and its runs are gone
    assert [j.id for j in api.open_store(target).jobs(include_incomplete=True)] == [forced.job.id]

    # a run of a job goes only with its job; the job takes everything with it
    with pytest.raises(StoreError, match="belongs to job"):
        session.rm(f"{NAME}/r0")
    session.rm(NAME)
    left = counts(target)
    assert all(n == 0 for n in left.values()), left


def test_a_partial_job_names_its_missing_ranks(target: Target) -> None:
    done = store_job(target, [job_dir() / "rank1.pt.trace.json.gz"], name="half")
    assert done.job.ranks == [1] and done.job.missing == [0] and done.job.world_size == 2
    rep = api.open_store(target).job("half")
    assert rep.missing == [0] and any("partial job" in n for n in rep.notes)
    assert [r.name for r in api.open_store(target).runs()] == ["half/r1"]


def test_two_traces_claiming_one_rank_leave_the_store_unchanged(target: Target, tmp_path: Path) -> None:
    store_ingest(target, DATA / "hta" / "simple_add_param_benchmark.json.gz", name="other")
    before = counts(target)
    twin = tmp_path / "copy_of_rank0.json.gz"
    shutil.copy(job_dir() / "rank0.pt.trace.json.gz", twin)
    with pytest.raises(JobError, match="claims rank 0"):
        store_job(target, [job_dir() / "rank0.pt.trace.json.gz", twin], name="dup")
    assert counts(target) == before


def test_schema2_store_gains_the_job_tables(tmp_path: Path) -> None:
    """A store of schema 2 (no job tables) opens, migrates to the current schema and takes a job."""
    target = Target("ladybug", str(tmp_path / "old.lbug"))
    store_ingest(target, DATA / "hta" / "simple_add_param_benchmark.json.gz", name="small")
    with open_store(target) as s:
        for rel in ("JOB_CP", "HAS_STEP", "HAS_RANK"):
            s.query(f"DROP TABLE {rel}", write=True, allow_files=True)
        for label in (*schema.JOB_TABLES, schema.JOB):
            s.query(f"DROP TABLE {label.name}", write=True, allow_files=True)
        s.query("MATCH (m:Meta) SET m.schema_version = 2", write=True)
    session = api.open_store(target)
    assert session.jobs() == []  # a read-only open migrated it first
    with open_store(target, read_only=True) as s:
        assert s.query("MATCH (m:Meta) RETURN m.schema_version").rows == [[schema.SCHEMA_VERSION]]
        assert s.query("MATCH (j:Job) RETURN count(j)").rows == [[0]]
    assert [r.name for r in session.runs()] == ["small"]
    assert store_job(target).stored
    assert [r.name for r in session.runs()] == [f"{NAME}/r0", f"{NAME}/r1", "small"]


@pytest.mark.neo4j
def test_schema2_neo4j_store_is_brought_to_3(request: pytest.FixtureRequest) -> None:
    target = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(target)
    store_ingest(target, DATA / "hta" / "simple_add_param_benchmark.json.gz", name="small")
    import neo4j

    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver, driver.session() as s:
        s.run("DROP CONSTRAINT ctda_job_id IF EXISTS").consume()
        s.run("MATCH (m:Meta) SET m.schema_version = 2").consume()
    with open_store(target, read_only=True) as s:
        assert s.query("MATCH (m:Meta) RETURN m.schema_version").rows == [[schema.SCHEMA_VERSION]]
    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver, driver.session() as s:
        names = {r["name"] for r in s.run("SHOW CONSTRAINTS YIELD name RETURN name")}
    assert {"ctda_job_id", "ctda_jobstep_key"} <= names


# --- the CLI ---------------------------------------------------------------------------


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("CTDA_DB", raising=False)
    return CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def test_cli_ingest_jobs_runs_rm(runner: CliRunner, tmp_path: Path) -> None:
    db = str(tmp_path / "store.lbug")
    res = runner.invoke(app, ["ingest", str(job_dir()), "--db", db, "--executor", "serial"])
    assert res.exit_code == 0, res.output
    assert f"stored job {NAME}: 2 of 2 rank(s)" in res.stderr
    analyzed_out = runner.invoke(app, ["analyze", str(job_dir()), "--executor", "serial"])
    assert res.stdout == analyzed_out.stdout  # ingest prints what analyze prints

    again = runner.invoke(app, ["ingest", str(job_dir()), "--db", db])
    assert again.exit_code == 0 and f"already stored as job {NAME}" in again.stderr
    assert again.stdout == res.stdout  # the report, read back from the store

    jobs = json.loads(runner.invoke(app, ["jobs", "--db", db, "--format", "json"]).stdout)
    assert [(j["name"], j["ranks"], j["missing"], j["steps"]) for j in jobs] == [(NAME, [0, 1], [], 5)]
    runs = json.loads(runner.invoke(app, ["runs", "--db", db, "--format", "json"]).stdout)
    assert [(r["name"], r["job"], r["rank"]) for r in runs] == [
        (f"{NAME}/r0", NAME, 0),
        (f"{NAME}/r1", NAME, 1),
    ]
    table = runner.invoke(app, ["runs", "--db", db]).stdout
    assert "job" in table and "r1" in table

    twin = tmp_path / "copy_r0.json.gz"
    shutil.copy(job_dir() / "rank0.pt.trace.json.gz", twin)
    target = Target("ladybug", db)
    before = counts(target)
    dup = runner.invoke(
        app, ["ingest", str(job_dir() / "rank0.pt.trace.json.gz"), str(twin), "--job", "d", "--db", db]
    )
    assert dup.exit_code == 2
    lines = [x for x in dup.stderr.splitlines() if x.strip() and not x.startswith("analysing")]
    assert len(lines) == 1 and lines[0].startswith("error:") and "claims rank 0" in lines[0], dup.stderr
    assert counts(target) == before

    member = runner.invoke(app, ["rm", f"{NAME}/r0", "--db", db])
    assert member.exit_code == 2 and "belongs to job" in member.stderr
    gone = runner.invoke(app, ["rm", "--job", NAME, "--db", db])
    assert gone.exit_code == 0 and f"deleted job {NAME}" in gone.stderr
    assert all(n == 0 for n in counts(target).values())
    assert runner.invoke(app, ["rm", "--job", NAME, "--db", db]).exit_code == 2


def test_a_killed_job_write_leaves_a_usable_store(tmp_path: Path) -> None:
    """kill -9 of ``ctda ingest DIR`` in the middle of the write: nothing of the job is
    visible (not even as pending: the embedded store writes it in one transaction), and
    the next write stores the job whole."""
    db = tmp_path / "store.lbug"
    target = Target("ladybug", str(db))
    clean = counts_after(Target("ladybug", str(tmp_path / "clean.lbug")))
    env = dict(os.environ, CTDA_STORE_STALL_AFTER_BATCHES="12")
    cmd = [sys.executable, "-c", "from ctda.cli.app import main; main()"]
    proc = subprocess.Popen(
        [*cmd, "ingest", str(job_dir()), "--db", str(db), "--executor", "serial"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the writer says when it stalls
            if STALL_MARK in line:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    session = api.open_store(target)
    assert session.jobs() == [] and session.runs() == []  # nothing half-written is visible
    assert session.jobs(include_incomplete=True) == []
    assert store_job(target).stored
    assert counts(target) == clean


def counts_after(target: Target) -> dict[str, int]:
    """The counts of a store holding just the job, written without incident."""
    store_job(target)
    return counts(target)
