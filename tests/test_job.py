"""Multi-rank jobs on real DDP (gloo) and NCCL traces: job graph, job path, stragglers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import CORPUS, SKIP_CORPUS

pytestmark = SKIP_CORPUS

MULTIRANK = ("g_ddp_ws2_balanced", "g_ddp_ws2_sleep40_r1", "g_ddp_ws4_balanced", "g_ddp_ws4_compute30_r2")
DLRM = [f"param/dlrm_ws8_rank{r}.json.gz" for r in range(4)]


def job_dir(name: str) -> Path:
    assert CORPUS is not None
    return CORPUS / "generated" / "multirank" / name


@pytest.fixture(scope="module")
def jobs():  # type: ignore[no-untyped-def]
    from ctda.job.run import analyze_job

    return {name: analyze_job([job_dir(name)], executor="serial") for name in MULTIRANK}


def measured(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((job_dir(name) / "steps.json").read_text())  # type: ignore[no-any-return]


def inside_data_prep(job, rank: int, event: int) -> bool:  # type: ignore[no-untyped-def]
    """The job event lies within one of ``rank``'s ``data_prep`` annotations."""
    jg = job.full()
    dp = np.flatnonzero((jg.names == "data_prep") & (jg.rank_of == rank))
    ts, end = jg.nodes.ts, jg.nodes.end
    return bool(((ts[dp] <= ts[event]) & (end[event] <= end[dp])).any())


@pytest.mark.parametrize("name", MULTIRANK)
def test_job_graph_replays_every_rank_and_path_equals_job_step(jobs, name: str) -> None:  # type: ignore[no-untyped-def]
    job = jobs[name]
    jg = job.full()
    assert jg.replay_exact()
    assert jg.dropped_cross == 0 and jg.n_cross > 0
    world = measured(name)["world_size"]
    assert sorted(job.parts) == list(range(world)) and not job.layout.partial
    # every collective (2 DDP buckets x 5 profiled steps) met on every rank
    assert job.matching.n_collectives == 10
    assert job.matching.summary()["by_ranks"] == {world: 10}
    assert sum(job.matching.unmatched.values()) == 0 and sum(job.matching.inconsistent.values()) == 0
    assert set(job.offsets.offset.values()) == {0}  # one host: one clock
    steps = job.steps
    assert list(steps.label) == [f"ProfilerStep#{i}" for i in range(2, 7)]
    cp = job.paths.groupby("label").ns.sum()
    for s in steps.itertuples():
        durs = [
            int(jg.timing.time[w.end_node] - jg.timing.time[w.start_node])
            for r in jg.ranks
            for w in jg.windows[r]
            if w.label == s.label
        ]
        assert s.rank_step_ns == max(durs)  # the per-rank view: the slowest rank's window
        assert cp[s.label] == s.job_step_ns  # the job path spans the job step exactly
    # the slowest rank's window is the measured one (perf_counter around the same iteration)
    ms = np.array(measured(name)["job_step_ms"])
    assert np.abs(steps.rank_step_ns.to_numpy() / 1e6 - ms).max() < 0.5


def test_sleep_straggler_is_rank1_and_path_runs_through_its_data_prep(jobs) -> None:  # type: ignore[no-untyped-def]
    job = jobs["g_ddp_ws2_sleep40_r1"]
    assert list(job.stragglers.straggler) == [1] * 5
    for row in job.stragglers.itertuples():
        assert row.late_ns > 35e6  # rank 1 arrives ~40 ms after rank 0
        event, name, ns, _cls = row.top_items[0]
        assert inside_data_prep(job, 1, event), name
        assert ns > 39e6  # the 40 ms sleep is on the job path
    # the path crosses ranks: rank 0's slow steps run through rank 1
    on = job.paths.groupby(["label", "rank"]).ns.sum()
    for s in job.steps.itertuples():
        assert on[(s.label, 1)] > 40e6
    # each step ends at rank 1's completion of its last bucket: rank 1 arrived last there, so
    # the path reaches it through rank 1's own work (no wait) and only the transfer remains
    waits = job.waits
    assert len(waits) == 5 and (waits["rank"] == 1).all() and (waits.waited_for == 1).all()
    assert (waits.wait_ns == 0).all() and (waits.transfer_ns < 10e6).all()
    # rank 0 waited for rank 1 at every step's collectives
    assert (job.late[job.late["rank"] == 0].groupby("label").late_ns.sum() < -35e6).all()


def test_compute_straggler_is_rank2_once_its_host_contention_is_charged(jobs) -> None:  # type: ignore[no-untyped-def]
    """Rank 2 computes 30 ms more per step (a busy loop in data_prep); four ranks share two
    cores. Its loop is the only extra work of the job, and common ops of the other ranks
    that stalled (>= 4x their median) while it ran are charged to it. In ProfilerStep#2
    rank 3 is the last to arrive, but 16.5 ms of its stalls ran beside the loop: charged to
    rank 2, rank 2 is the straggler. In ProfilerStep#3 most of rank 3's stall time (a 24 ms
    aten::mul) came when every other rank had already arrived and was waiting: no rank's
    work explains it, so it is charged to no rank (the host is contended in that step), and
    rank 2 is the straggler there too, named for its loop."""
    job = jobs["g_ddp_ws4_compute30_r2"]
    s = job.stragglers.set_index("label")
    assert list(s.straggler) == [2, 2, 2, 2, 2]
    assert list(s["last"]) == [3, 3, 2, 2, 2]  # the latest to arrive, unchanged
    extra = job.host.extra
    assert set(extra["rank"]) == {2} and len(extra) == 5
    assert extra.top_name.str.endswith("busy_loop").all() and (extra.top_ns > 24e6).all()
    slowed = job.host.slowed
    assert set(slowed.by) == {2} and 2 not in set(slowed["rank"])
    by = slowed.groupby(["label", "rank"]).charged_ns.sum()
    assert 16.0e6 < by[("ProfilerStep#2", 3)] < 17.0e6  # the conv2d call stalled beside the loop
    assert 10.0e6 < by[("ProfilerStep#3", 3)] < 11.0e6  # part of max_pool2d's stall
    assert not (slowed.event_name == "aten::mul").any()
    stalls = job.host.stalls.set_index(["label", "rank"]).stall_ns
    assert 38e6 < stalls[("ProfilerStep#3", 3)] < 39.5e6  # 14.5 (max_pool2d) + 24.1 (aten::mul)
    # the unexplained rest of rank 3's stalls in step 3 (24.1 + 4.0 ms) leaves it, to no rank
    noise = job.host.moved[job.host.moved.by == -1].merge(job.late[["cid", "rank", "label"]])
    unexplained = noise.groupby(["label", "rank"]).charged_ns.sum()
    assert 56e6 < unexplained[("ProfilerStep#3", 3)] < 56.5e6  # 28.1 ms before each all-reduce
    ps3 = s.loc["ProfilerStep#3"]
    assert ps3.late_by_rank[3] > 75e6 and ps3.charged_by_rank[3] < 1e6  # 76.9 measured, 0.4 its own
    assert 34e6 < ps3.charged_by_rank[2] < 35.5e6  # 13.8 measured + 2 x 10.5 charged
    # the path crosses to rank 2's loop where a stall on it was charged to the loop: the
    # stalled op's row gives that time to a host row on rank 2 (the step's sum unchanged)
    from ctda.job.hostload import HOST_ROW

    host = job.paths[job.paths.etype == HOST_ROW]
    assert set(host["rank"]) == {2} and host["name"].str.endswith("busy_loop").all()
    on = host.groupby("label").ns.sum()
    assert 16.4e6 < on["ProfilerStep#2"] < 16.6e6  # rank 3's conv2d stall beside the loop
    assert 10.4e6 < on["ProfilerStep#3"] < 10.6e6  # rank 3's max_pool2d stall
    cp = job.paths.groupby("label").ns.sum()
    assert (cp.reindex(job.steps.label).to_numpy() == job.steps.job_step_ns.to_numpy()).all()
    # each host row lies within its cause's run, and the path stays contiguous in time
    jg = job.full()
    assert (jg.nodes.ts[host.event] <= host.t0).all() and (host.t1 <= jg.nodes.end[host.event]).all()
    p = job.paths
    same = p.label.to_numpy()[1:] == p.label.to_numpy()[:-1]
    assert (p.t1.to_numpy()[:-1][same] == p.t0.to_numpy()[1:][same]).all()
    # ProfilerStep#2 and #3: rank 2 is named for what its loop did to others; its listed
    # item is that loop, on the path through the HOST rows, inside its data_prep
    for label in ("ProfilerStep#2", "ProfilerStep#3"):
        event, name, ns, _ = s.loc[label, "top_items"][0]
        assert name.endswith("busy_loop") and inside_data_prep(job, 2, event)
        assert ns == on[label]
    for label in ("ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"):
        event, name, ns, _ = s.loc[label, "top_items"][0]
        assert inside_data_prep(job, 2, event), name
        assert "busy_loop" in name and ns > 25e6
    for label, row in s.iterrows():
        assert row.late_by_rank[2] > 10e6, label


@pytest.mark.parametrize("name", ["g_ddp_ws2_balanced", "g_ddp_ws4_balanced", "g_ddp_ws2_sleep40_r1"])
def test_no_host_contention_is_charged_without_busy_extra_work(jobs, name: str) -> None:  # type: ignore[no-untyped-def]
    """Balanced jobs have no extra work; a sleep takes no core. Nothing moves: the straggler
    is the latest to arrive and its lateness the measured one."""
    job = jobs[name]
    assert job.host is not None and job.host.slowed.empty and job.host.moved.empty
    s = job.stragglers
    assert (s.candidate == s["last"]).all()  # named or not (tests/test_job_straggler.py)
    assert (s.late_ns == [r.late_by_rank[r.candidate] for r in s.itertuples()]).all()
    # the report says what the straggler did: extra work, or stalls of common ops only
    from ctda.job.report import job_report

    own = job_report(job).steps.straggler_own
    if name == "g_ddp_ws4_balanced":  # the latest is 57.3 and 45.4 ms late, yet did nothing extra
        assert list(own[:2]) == ["0.0 / 20.1", "0.0 / 24.1"]
    if name == "g_ddp_ws2_sleep40_r1":
        assert set(job.host.extra["rank"]) == {1}
        assert (job.host.extra.top_name == "<built-in function sleep>").all()
    else:
        assert job.host.extra.empty


def test_balanced_jobs_have_no_30ms_straggler(jobs) -> None:  # type: ignore[no-untyped-def]
    for name in ("g_ddp_ws2_balanced",):
        assert (jobs[name].stragglers.late_ns < 15e6).all()


def test_ranks_on_other_hosts_charge_nothing(jobs) -> None:  # type: ignore[no-untyped-def]
    """The same compute job with each rank on a host of its own: the stalls stay with the
    ranks that stalled, and the straggler is again the latest to arrive."""
    from dataclasses import replace

    from ctda.job.run import assemble_job

    job = jobs["g_ddp_ws4_compute30_r2"]
    parts = {
        r: replace(p, skeleton=replace(p.skeleton, host=f"node{r}"), analysis=None)
        for r, p in job.parts.items()
    }
    apart = assemble_job("apart", job.layout, parts)
    assert apart.host is not None and apart.host.slowed.empty and len(apart.host.extra) == 5
    assert list(apart.stragglers.candidate) == [3, 3, 2, 2, 2]
    st = apart.stragglers
    assert list(st.late_ns) == [late[s] for late, s in zip(st.late_by_rank, st.candidate)]


def test_dlrm_partial_nccl_job_matches_collectives_across_four_ranks() -> None:
    from ctda.job.run import analyze_job

    assert CORPUS is not None
    job = analyze_job([CORPUS / p for p in DLRM], executor="serial")
    assert job.layout.world_size == 8 and job.layout.missing == [4, 5, 6, 7]
    assert any("missing 4-7" in n for n in job.notes)
    summary = job.matching.summary()
    assert summary["collectives"] == 8 and summary["by_ranks"] == {4: 8}  # 5 all-to-all, 3 all-reduce
    assert summary["unmatched"] == {0: 0, 1: 0, 2: 0, 3: 0}
    ops = job.matching.parts.groupby("cid").op.first().value_counts().to_dict()
    assert ops == {"sendrecv": 5, "allreduce": 3}
    assert job.full().replay_exact()
    cp = job.paths.groupby("label").ns.sum()
    assert (cp.to_numpy() == job.steps.job_step_ns.to_numpy()).all()


def test_two_traces_claiming_one_rank_is_a_one_line_error(tmp_path: Path) -> None:
    from ctda.job.load import JobError
    from ctda.job.run import analyze_job

    src = job_dir("g_ddp_ws2_balanced") / "rank0.pt.trace.json.gz"
    shutil.copy(src, tmp_path / "a.json.gz")
    shutil.copy(src, tmp_path / "b.json.gz")
    with pytest.raises(JobError, match=r"b\.json\.gz: claims rank 0, as does .*a\.json\.gz$"):
        analyze_job([tmp_path], executor="serial")


def test_rank_from_file_name() -> None:
    from ctda.job.load import rank_from_name

    assert rank_from_name(Path("rank3.pt.trace.json.gz")) == 3
    assert rank_from_name(Path("dlrm_ws8_rank12.json.gz")) == 12
    assert rank_from_name(Path("job_r5_trace.json")) == 5
    assert rank_from_name(Path("worker_7.json.gz")) == 7
    assert rank_from_name(Path("trace.json")) is None


def test_cli_analyze_job_directory_with_local_processes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import ctda.cli.analyze_cmd  # noqa: F401  (registers the command)
    from ctda.cli.common import app

    runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})
    res = runner.invoke(app, ["analyze", str(job_dir("g_ddp_ws2_sleep40_r1")), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["job"] == "g_ddp_ws2_sleep40_r1" and out["ranks"] == [0, 1]
    assert [s["straggler"] for s in out["steps"]] == [1] * 5
    assert out["checks"]["replay_exact"] and out["checks"]["cp_vs_job_step_max_error_ns"] == 0
    assert out["matching"]["collectives"] == 10
    assert [c["how"] for c in out["clock_offsets"]] == ["reference", "same host"]
    # the table names the straggler's sleep and the wait/transfer split
    res = runner.invoke(
        app,
        [
            "analyze",
            *map(str, sorted(job_dir("g_ddp_ws2_sleep40_r1").glob("rank*"))),
            "--job",
            "pair",
            "--executor",
            "serial",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "job pair: 2 of 2 ranks, 5 step(s)" in res.stdout
    assert "<built-in function sleep>" in res.stdout and "waited for" in res.stdout
    assert "Lateness per step and rank" in res.stdout
    # two files claiming one rank: one line, exit 2
    src = job_dir("g_ddp_ws2_balanced") / "rank1.pt.trace.json.gz"
    shutil.copy(src, tmp_path / "x.json.gz")
    shutil.copy(src, tmp_path / "y.json.gz")
    res = runner.invoke(app, ["analyze", str(tmp_path), "--executor", "serial"])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "claims rank 1" in res.output


def test_whatif_straggler_as_fast_as_median_predicts_the_balanced_job(jobs) -> None:  # type: ignore[no-untyped-def]
    """sleep40 -> balanced is a real before/after pair. The straggler's sleep (its extra
    work) removed, its own times kept, predicts 25.85 ms for the balanced job's 28.85 (both
    by the job step's definition, collective end to collective end): -10.4 %, the two ranks
    then computing at once on two cores, which the model does not see (tests/test_job_whatif_pairs.py)."""
    from ctda.job.whatif import job_scenario

    job = jobs["g_ddp_ws2_sleep40_r1"]
    sc = job_scenario(job, median_straggler=True)
    after = jobs["g_ddp_ws2_balanced"].steps.job_step_ns.mean() / 1e6  # 28.85 ms
    predicted = sc.mean_predicted_ns / 1e6
    assert abs(predicted - after) / after < 0.12, (predicted, after)
    assert 25.5 < predicted < 26.2  # 25.85 ms: the same as removing the sleep alone
    assert predicted == job_scenario(job, ["rank=1:name~sleep=0"]).mean_predicted_ns / 1e6
    assert (sc.steps.predicted_ns < sc.steps.base_ns - 20e6).all()
    # only rank 1's events changed
    changed = np.flatnonzero(sc.factors != 1.0)
    assert len(changed) and set(job.graph.rank_of[changed].tolist()) == {1}
    # unchanged weights replay the base exactly
    base = job_scenario(job, ["rank=0=1"])
    assert (base.steps.predicted_ns == base.steps.base_ns).all()


def test_whatif_compute_straggler_as_fast_as_median_gives_cores_back(jobs) -> None:  # type: ignore[no-untyped-def]
    """compute30 -> ws4_balanced (same generator, no injected loop): with the stalls rank 2's
    loop caused re-timed with it, rank 2 (the straggler of every step) as fast as the median
    rank predicts 53.0 ms for the balanced job's 51.35 (+3.2 %; both by the job step's
    definition), the same as removing its loop; held rigid, the stalls would leave it at
    65.9 ms (+28 %)."""
    from ctda.job import whatif

    job = jobs["g_ddp_ws4_compute30_r2"]
    after = jobs["g_ddp_ws4_balanced"].steps.job_step_ns.mean() / 1e6
    predicted = whatif.job_scenario(job, median_straggler=True).mean_predicted_ns / 1e6
    assert abs(predicted - after) / after < 0.05, (predicted, after)
    f = whatif.median_straggler_factors(job)
    changed = np.flatnonzero(whatif.host_factors(job, f) != f)
    slowed = job.host.slowed
    victims = set((slowed.event + slowed["rank"].map(job.full().base)).tolist())
    assert len(changed) > 10 and set(changed.tolist()) <= victims  # only stalled ops move
    # removing the loop alone: the stalled ranks get their cores back too
    sc = whatif.job_scenario(job, ["rank=2:name~busy_loop$=0"])
    assert 52e6 < sc.steps.predicted_ns.mean() < 54e6  # 53.0 ms
    assert abs(sc.steps.predicted_ns.mean() / 1e6 - predicted) < 1.5  # the same fix, in effect
    # all factors 1: the charges change nothing and the base replays exactly
    ones = np.ones(len(f))
    assert (whatif.host_factors(job, ones) == ones).all()
    base = whatif.job_scenario(job, ["rank=0=1"])
    assert (base.steps.predicted_ns == base.steps.base_ns).all()


def test_whatif_rank_selectors(jobs) -> None:  # type: ignore[no-untyped-def]
    from ctda.job.whatif import job_scenario
    from ctda.whatif.select import SelectionError

    job = jobs["g_ddp_ws2_sleep40_r1"]
    # removing rank 1's data_prep removes the sleep (nested inside it)
    sc = job_scenario(job, ["rank=1:name~^data_prep$=0"])
    assert (sc.steps.base_ns - sc.steps.predicted_ns > 35e6).all()
    # making rank 0 (the waiting rank) twice as slow at its own work does little
    sc0 = job_scenario(job, ["rank=0:cat=cpu_op=2"])
    assert (
        (sc0.steps.predicted_ns - sc0.steps.base_ns) < 0.5 * (sc.steps.base_ns - sc.steps.predicted_ns)
    ).all()
    with pytest.raises(SelectionError, match="rank 7 is not in the job"):
        job_scenario(job, ["rank=7:name~x=0"])
    with pytest.raises(SelectionError, match="matches no event on any rank"):
        job_scenario(job, ["name~^no such op$=0"])


def test_dask_cluster_executor_gives_the_same_job(jobs) -> None:  # type: ignore[no-untyped-def]
    """Per-rank work on a real Dask cluster (two worker processes on this machine)."""
    distributed = pytest.importorskip("distributed")
    from ctda.job.run import analyze_job

    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        # workers send back skeletons only: no rank's events or graph reach this process
        job = analyze_job([job_dir("g_ddp_ws2_sleep40_r1")], executor=cluster.scheduler_address, full=False)
        # the command line, pointed at the same running scheduler (as the README shows)
        assert cluster.scheduler_address.startswith("tcp://")
        out = _cli_json(
            ["analyze", str(job_dir("g_ddp_ws2_sleep40_r1")), "--executor", cluster.scheduler_address]
        )
    base = jobs["g_ddp_ws2_sleep40_r1"]
    assert job.graph is None and all(p.analysis is None and p.replay_exact for p in job.parts.values())
    assert list(job.steps.job_step_ns) == list(base.steps.job_step_ns)
    assert list(job.stragglers.straggler) == [1] * 5
    for col in ("t0", "t1", "ns", "event", "rank"):
        assert (job.paths[col].to_numpy() == base.paths[col].to_numpy()).all()
    assert [s["straggler"] for s in out["steps"]] == [1] * 5
    assert [s["job_step_ns"] for s in out["steps"]] == list(base.steps.job_step_ns)
    assert out["checks"]["cp_vs_job_step_max_error_ns"] == 0


def test_dask_local_executor_forks_its_workers_and_gives_the_same_job(jobs) -> None:  # type: ignore[no-untyped-def]
    """``--executor dask-local``: a cluster started here, its workers forked from this
    process (on Linux) as local processes are; the job is the same as analysed serially."""
    pytest.importorskip("distributed")
    import sys

    import dask

    from ctda.analysis.engine import AnalysisOptions
    from ctda.job import executor
    from ctda.job.run import analyze_job

    seen: list[str] = []

    def method(path: str, options: object) -> str:  # runs on a worker
        seen.append(path)
        return str(dask.config.get("distributed.worker.multiprocessing-method"))

    if sys.platform.startswith("linux"):
        # the configuration the workers were started under is passed on to them
        assert executor.map_ranks(method, ["a", "b"], AnalysisOptions(), "dask-local") == ["fork", "fork"]
        assert seen == []  # run in the workers, not here
    # results are taken as ranks finish, and given back in the ranks' order: the first
    # path's task ends last here
    paths = ["0.6", "0", "0.2", "0"]
    assert executor.map_ranks(_slept, paths, AnalysisOptions(), "dask-local") == paths
    job = analyze_job([job_dir("g_ddp_ws2_sleep40_r1")], executor="dask-local", full=False)
    base = jobs["g_ddp_ws2_sleep40_r1"]
    assert list(job.steps.job_step_ns) == list(base.steps.job_step_ns)
    assert list(job.stragglers.straggler) == [1] * 5
    assert (job.paths.ns.to_numpy() == base.paths.ns.to_numpy()).all()


def _slept(path: str, options: object) -> str:
    """Sleeps the seconds ``path`` names; returns it (a task for the executor's order)."""
    import time

    time.sleep(float(path))
    return path


def _cli_json(args: list[str]) -> dict:  # type: ignore[type-arg]
    from typer.testing import CliRunner

    import ctda.cli.analyze_cmd  # noqa: F401  (registers the command)
    from ctda.cli.common import app

    res = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"}).invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_unknown_executor_is_a_clear_error() -> None:
    from ctda.job.executor import ExecutorError
    from ctda.job.run import analyze_job

    with pytest.raises(ExecutorError, match="unknown executor 'ray://x'"):
        analyze_job([job_dir("g_ddp_ws2_balanced")], executor="ray://x")


@pytest.mark.parametrize("name", MULTIRANK)
def test_path_walked_over_skeletons_is_the_job_graphs_path(jobs, name: str) -> None:  # type: ignore[no-untyped-def]
    """The cross-rank stage's path (ranks' chains stitched at collectives) is, row for row,
    the path backtracked through the whole job graph (both with the stalls charged to
    other ranks' extra work moved onto it as host rows)."""
    from ctda.job import path as jpath
    from ctda.job.hostload import host_waits

    job = jobs[name]
    jg = job.full()
    from ctda.job.steps import collective_ends

    steps = jpath.job_steps(jg, collective_ends(job.matching, job.offsets, job.late))
    assert list(steps.job_step_ns) == list(job.steps.job_step_ns)
    full = host_waits(jpath.job_paths(jg, steps), job.host.slowed, jg.base)
    assert len(full) == len(job.paths)
    for col in ("t0", "t1", "ns", "event", "rank", "etype"):
        assert (full[col].to_numpy() == job.paths[col].to_numpy()).all(), col
    # the chains hold at most one row per node of each rank's graph
    for p in job.parts.values():
        assert len(p.skeleton.segments.rows) <= p.skeleton.n_nodes


def test_bench_job_is_a_consistent_eight_rank_job(tmp_path: Path) -> None:
    """The job benchmark's synthetic job: two hosts, replicated steps that still meet."""
    from bench.suite_job import _measure, make_job
    from bench.suites import Context

    ctx = Context(repo=Path("."), results=tmp_path / "r", cache=tmp_path / "c", corpus=CORPUS)
    row = _measure(ctx, make_job(ctx, 8000), "serial")
    assert row["ranks"] == 8 and row["events_per_rank"] > 4000
    assert row["collectives"] == 20 and row["unmatched"] == 0  # 10 per copy, one copy added
    assert row["steps"] == 10 and row["cp_equals_step"]
    assert row["offsets"] == ["consistent", "reference", "same host"]
