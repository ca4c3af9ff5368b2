"""The job step bounded by its collectives (``ctda.job.steps``, docs/jobs.md#the-job-step)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctda.job.steps import BY_COLLECTIVE, BY_FIRST_START, BY_WINDOW_END, define_steps
from tests.conftest import CORPUS, SKIP_CORPUS

MULTIRANK = ("g_ddp_ws2_balanced", "g_ddp_ws2_sleep40_r1", "g_ddp_ws4_balanced", "g_ddp_ws4_compute30_r2")
WINDOW_COLS = ["label", "step", "rank", "win", "t_start", "t_end", "start_node", "end_node"]


def test_an_early_start_does_not_lengthen_the_job_step() -> None:
    """Rank 0 starts both steps 5 early; the job step runs collective end to collective end."""
    windows = pd.DataFrame(
        [
            ("S1", 1, 0, 0, 0, 40, 10, 11),
            ("S1", 1, 1, 0, 5, 42, 20, 21),
            ("S2", 2, 0, 0, 40, 90, 12, 13),
            ("S2", 2, 1, 0, 42, 88, 22, 23),
            ("S3", 3, 0, 0, 90, 120, 14, 15),  # no collective in S3
            ("S3", 3, 1, 0, 88, 125, 24, 25),
        ],
        columns=WINDOW_COLS,
    )
    ends = pd.DataFrame(
        [("S1", 0, 3, 35), ("S1", 1, 4, 36), ("S2", 0, 7, 80), ("S2", 1, 8, 79)],
        columns=["label", "rank", "event", "t_done"],
    )
    s = define_steps(windows, ends, [0, 1])
    assert list(s.label) == ["S1", "S2", "S3"]
    # S1: from the last rank's start (5, rank 1) to rank 1's completion at 36
    assert list(s.t_start) == [5, 36, 80] and list(s.t_end) == [36, 80, 125]
    assert list(s.job_step_ns) == [31, 44, 45]
    assert list(s.end_rank) == [1, 0, 1] and list(s.end_node) == [2 * 4 + 1, 2 * 7 + 1, 25]
    assert list(s.start_by) == [BY_FIRST_START, BY_COLLECTIVE, BY_COLLECTIVE]
    assert list(s.end_by) == [BY_COLLECTIVE, BY_COLLECTIVE, BY_WINDOW_END]
    # the per-rank view: rank 0's early windows are the slowest ranks' own steps in S1, S2
    assert list(s.slowest_rank) == [0, 0, 1] and list(s.rank_step_ns) == [40, 50, 37]


def test_a_step_only_one_rank_has_is_not_a_job_step() -> None:
    windows = pd.DataFrame([("S1", 1, 0, 0, 0, 40, 10, 11)], columns=WINDOW_COLS)
    ends = pd.DataFrame(columns=["label", "rank", "event", "t_done"])
    assert define_steps(windows, ends, [0, 1]).empty


@pytest.fixture(scope="module")
def jobs():  # type: ignore[no-untyped-def]
    from ctda.job.run import analyze_job

    assert CORPUS is not None
    out = {n: analyze_job([CORPUS / "generated" / "multirank" / n], executor="serial") for n in MULTIRANK}
    out["dlrm"] = analyze_job(
        [CORPUS / f"param/dlrm_ws8_rank{r}.json.gz" for r in range(4)], executor="serial", name="dlrm"
    )
    return out


def _ends(job) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Each collective's last completion (job clock) and its step."""
    p = job.matching.parts.merge(job.late[["cid", "rank", "label"]], on=["cid", "rank"])
    done = p.t_done + p["rank"].map(job.offsets.offset)
    return p.assign(done=done).groupby("label").done.max()


@SKIP_CORPUS
@pytest.mark.parametrize("name", MULTIRANK)
def test_multirank_job_steps_run_from_collective_end_to_collective_end(jobs, name: str) -> None:  # type: ignore[no-untyped-def]
    job = jobs[name]
    s = job.steps
    last = _ends(job)
    assert (s.t_end.to_numpy() == last.reindex(s.label).to_numpy()).all()
    assert (s.t_start.to_numpy()[1:] == s.t_end.to_numpy()[:-1]).all()  # the steps tile the job
    assert (s.end_by == BY_COLLECTIVE).all() and s.start_by.iloc[0] == BY_FIRST_START
    first = max(int(p.skeleton.windows.t_start.iloc[0]) for p in job.parts.values())
    assert s.t_start.iloc[0] == first  # one host: no clock offsets
    # replay exact per rank and for the job; the job path spans each job step exactly
    assert all(p.replay_exact for p in job.parts.values()) and job.full().replay_exact()
    cp = job.paths.groupby("label").ns.sum()
    assert (cp.reindex(s.label).to_numpy() == s.job_step_ns.to_numpy()).all()
    # the path starts (in time) at the step's start and ends at the completion that ended it
    for label, g in job.paths.groupby("label", sort=False):
        row = s.set_index("label").loc[label]
        assert g.t0.min() <= row.t_start and g.t1.max() == row.t_end
        assert g["rank"].iloc[-1] == row.end_rank
    # the per-rank view is kept: the slowest rank's own window is at least the job step
    # minus what its rank started early
    assert (s.rank_step_ns > 0).all() and (s.rank_step_ns >= s.fastest_ns).all()


@SKIP_CORPUS
def test_job_path_crosses_ranks_where_another_rank_ended_a_collective(jobs) -> None:  # type: ignore[no-untyped-def]
    """Balanced and compute jobs: the path moves between ranks; the sleep job's path stays on
    the straggler, which arrived last at every collective (nothing else bound a step)."""
    for name in ("g_ddp_ws2_balanced", "g_ddp_ws4_balanced", "g_ddp_ws4_compute30_r2"):
        assert jobs[name].paths["rank"].nunique() > 1, name
    sleep = jobs["g_ddp_ws2_sleep40_r1"]
    assert set(sleep.paths["rank"]) == {1}
    last = sleep.matching.parts.loc[sleep.matching.parts.groupby("cid").t_arrive.idxmax(), "rank"]
    assert set(last) == {1}


@SKIP_CORPUS
def test_dlrm_step_ends_at_its_last_collective_and_leaves_the_early_rank(jobs) -> None:  # type: ignore[no-untyped-def]
    """DLRM (4 of 8 ranks, NCCL): rank 1 began ProfilerStep#10 6.9 ms before the last rank,
    so its window (19.9 ms) is the longest; the job step (12.2 ms) runs from the last rank's
    start to the end of the last all-reduce, and the path never charges rank 1."""
    from ctda.job.stitch import stitched_paths

    job = jobs["dlrm"]
    s = job.steps.iloc[0]
    assert (s.slowest_rank, s.rank_step_ns) == (1, 19_901_000)
    assert s.job_step_ns == 12_246_000 and (s.start_rank, s.end_rank) == (2, 2)
    assert s.t_end == _ends(job).iloc[0]
    cp = job.paths.groupby("label").ns.sum()
    assert cp.iloc[0] == s.job_step_ns
    assert 1 not in set(job.paths["rank"])
    # at the last all-reduce the path leaves rank 2 for rank 3, whose arrival ended it
    p = job.matching.parts
    last_cid = int(p.cid.max())
    mine = p[p.cid == last_cid]
    latest = int(mine.loc[mine.t_arrive.idxmax(), "rank"])
    assert latest == 3
    assert list(job.paths["rank"].iloc[-2:]) == [3, 2]
    # walked from rank 1's own completion of it, the path leaves rank 1 for rank 3 at once
    ev1 = int(mine[mine["rank"] == 1].event.iloc[0])
    from_r1 = job.steps.assign(end_rank=1, end_node=2 * ev1 + 1)
    skels = {r: q.skeleton for r, q in job.parts.items()}
    walk = stitched_paths(skels, job.matching, job.offsets, from_r1)
    assert walk["rank"].iloc[-1] == 1 and walk["rank"].iloc[-2] == 3
    assert (walk["rank"].iloc[:-1] != 1).all()
    # the job graph backtracks the same path
    from ctda.job import path as jpath
    from ctda.job.steps import collective_ends

    jg = job.full()
    full = jpath.job_paths(jg, jpath.job_steps(jg, collective_ends(job.matching, job.offsets, job.late)))
    assert (full.ns.to_numpy() == job.paths.ns.to_numpy()).all()
    assert (full["rank"].to_numpy() == job.paths["rank"].to_numpy()).all()


@SKIP_CORPUS
def test_the_report_says_how_the_step_is_defined(jobs) -> None:  # type: ignore[no-untyped-def]
    from ctda.job.report import job_report
    from ctda.render.job import job_doc

    rep = job_report(jobs["dlrm"])
    assert "end of the step's last collective" in rep.checks["step_definition"]
    row = rep.steps.iloc[0]
    assert (row.ended_by, row.rank_step_ns, row.bounds) == (2, 19_901_000, "last rank's start -> collective")
    doc = job_doc(rep)
    text = " ".join(str(b) for b in doc.blocks)
    assert "(1 of 1 step(s) end at a collective)" in text
    assert np.isclose(row.job_step_ns / 1e6, 12.246)
