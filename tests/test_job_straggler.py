"""Straggler significance (``ctda.job.noise``, docs/jobs.md#straggler-significance): a
straggler is named only when its lateness clearly exceeds the job's own noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ctda.job.noise import K, Noise, jitter, job_noise, significance
from tests.conftest import CORPUS, SKIP_CORPUS

MULTIRANK = ("g_ddp_ws2_balanced", "g_ddp_ws2_sleep40_r1", "g_ddp_ws4_balanced", "g_ddp_ws4_compute30_r2")
MS = 1_000_000


def strag_table(late: list[dict[int, float]]) -> pd.DataFrame:
    """A straggler table as ``ctda.job.path.stragglers`` gives it: candidate = latest rank."""
    rows = []
    for i, d in enumerate(late):
        c = max(d, key=lambda r: d[r])
        rows.append((f"S{i}", c, d[c], d, d))
    return pd.DataFrame(rows, columns=["label", "straggler", "late_ns", "late_by_rank", "charged_by_rank"])


def test_a_rank_late_by_the_same_amount_every_step_adds_no_jitter() -> None:
    m = pd.DataFrame({0: [-30.0, -30, -30, -30], 1: [30.0, 30, 30, 30]})
    assert jitter(m) == 0.0
    m[1] = [20.0, 40, 20, 40]  # +-10 around its mean: sample sd sqrt(400/3) pooled with 0
    assert np.isclose(jitter(m), np.sqrt(4 * 100 / (3 * 2)))


def test_balanced_steps_are_named_no_straggler_and_a_real_one_is() -> None:
    # ranks trading small leads: jitter ~ the leads, no one beyond 3 sigma
    bal = strag_table([{0: 3 * MS, 1: -3 * MS}, {0: -4 * MS, 1: 4 * MS}, {0: 2 * MS, 1: -2 * MS}])
    late = pd.DataFrame({"label": ["S0"], "cid": [0], "rank": [0], "late_ns": [0]})
    out = significance(bal, job_noise(bal, late, {}))
    assert (out.straggler == -1).all() and list(out.candidate) == [0, 1, 0]
    assert out.verdict.str.startswith("balanced: no straggler (spread ").all()
    # rank 1 is 40 +- 3 ms late every step: late throughout and beyond each step's band
    real = strag_table([{0: -40 * MS, 1: 40 * MS}, {0: -43 * MS, 1: 43 * MS}, {0: -37 * MS, 1: 37 * MS}])
    noise = job_noise(real, late, {})
    assert np.isclose(noise.sigma_ns, 3 * MS) and noise.how == "steps"
    out = significance(real, noise)
    assert list(out.straggler) == [1, 1, 1] and (out.noise_ns == round(K * 3 * MS)).all()
    assert out.verdict.iloc[0] == "r1 40.0 ms late (noise ±9.0 ms)"


def test_a_one_step_outlier_is_named_and_clock_uncertainty_widens_the_band() -> None:
    t = strag_table(
        [{0: 1 * MS, 1: -1 * MS}, {0: -1 * MS, 1: 1 * MS}, {0: 1 * MS, 1: -1 * MS}, {0: -60 * MS, 1: 60 * MS}]
    )
    noise = Noise(sigma_ns=2 * MS, n_steps=4, how="steps", clock_ns={})
    assert list(significance(t, noise).straggler) == [-1, -1, -1, 1]
    # rank 1's offset may be 20 ms off at each of the step's 3 collectives: 60 ms is not enough
    unsure = Noise(sigma_ns=2 * MS, n_steps=4, how="steps", clock_ns={("S3", 1): 60 * MS})
    out = significance(t, unsure)
    assert list(out.straggler) == [-1, -1, -1, -1] and out.noise_ns.iloc[3] == 66 * MS


def test_a_rank_late_throughout_is_named_by_its_extra_work_where_it_arrived_in_time() -> None:
    """Rank 1 is ~30 ms late in three of four steps (late throughout by mean and median); in
    the fourth it arrived early but ran 20 ms of extra work: named there for that work. Rank
    0's 20 ms of extra work in that step does not name it (it is not late throughout), nor
    does rank 1's 1 ms (within the band of a mean)."""
    t = strag_table(
        [
            {0: -30 * MS, 1: 30 * MS},
            {0: -28 * MS, 1: 28 * MS},
            {0: 2 * MS, 1: -2 * MS},
            {0: -32 * MS, 1: 32 * MS},
        ]
    )
    t["top_items"] = [[] for _ in range(len(t))]
    noise = Noise(sigma_ns=4 * MS, n_steps=4, how="steps", clock_ns={})
    assert list(significance(t, noise).straggler) == [1, 1, -1, 1]
    cols = ["label", "rank", "extra_ns", "top_name", "top_ns", "top_event"]
    extra = pd.DataFrame(
        [("S2", 1, 20 * MS, "busy_loop", 18 * MS, 7), ("S2", 0, 25 * MS, "x", 25 * MS, 8)], columns=cols
    )
    out = significance(t, noise, extra)
    assert (
        list(out.straggler) == [1, 1, 1, 1] and out.candidate.iloc[2] == 1 and out.late_ns.iloc[2] == -2 * MS
    )
    assert out.why.iloc[2] == "extra work of a rank late throughout the job"
    assert out.top_items.iloc[2] == [(-1, "busy_loop", 18 * MS, "extra work")]
    assert out.verdict.iloc[2] == (
        "r1 did 20.0 ms of extra work (busy_loop) and is late throughout the job (mean 22.0 ms vs ±6.0 ms);"
        " here it arrived -2.0 ms from the median"
    )
    small = extra.assign(extra_ns=[1 * MS, 25 * MS])
    assert list(significance(t, noise, small).straggler) == [1, 1, -1, 1]


def test_clock_offsets_know_how_far_they_may_be_off() -> None:
    from ctda.job.match import clock_offsets, match
    from tests.test_job_match import skel

    ops = ["allreduce", "allreduce"]
    a = skel(0, ops, [2.0, 4.0], host="a", arrive_ms=[1.0, 3.0])
    b = skel(1, ops, [2.25, 4.25], host="b", arrive_ms=[1.5, 3.25])
    off = clock_offsets([a, b], match([a, b]))
    assert off.how[1] == "consistent" and off.offset[1] == 0
    # no rank completes before the last arrives: o in [max(a_0 - d_1), min(d_0 - a_1)]
    # = [-1.25, 0.5] ms; 0 taken, so the offset may be 1.25 ms off
    assert off.uncertainty == {0: 0, 1: 1_250_000}


@pytest.fixture(scope="module")
def jobs():  # type: ignore[no-untyped-def]
    from ctda.job.run import analyze_job

    assert CORPUS is not None
    return {
        n: analyze_job([CORPUS / "generated" / "multirank" / n], executor="serial", full=False)
        for n in MULTIRANK
    }


@SKIP_CORPUS
@pytest.mark.parametrize("name", ["g_ddp_ws2_balanced", "g_ddp_ws4_balanced"])
def test_balanced_jobs_have_no_straggler_in_any_step(jobs, name: str) -> None:  # type: ignore[no-untyped-def]
    s = jobs[name].stragglers
    assert (s.straggler == -1).all()
    assert (s.late_ns < s.noise_ns).all()  # the candidates stay within the band
    assert s.verdict.str.match(r"^balanced: no straggler \(spread \d+\.\d ms\)$").all()


@SKIP_CORPUS
def test_injected_stragglers_are_named_in_every_step(jobs) -> None:  # type: ignore[no-untyped-def]
    sleep, comp = jobs["g_ddp_ws2_sleep40_r1"], jobs["g_ddp_ws4_compute30_r2"]
    assert list(sleep.stragglers.straggler) == [1] * 5
    assert (sleep.stragglers.late_ns > 2.9 * sleep.stragglers.noise_ns).all()  # 43.7-54.9 ms vs 14.6
    assert list(comp.stragglers.straggler) == [2] * 5
    assert list(comp.stragglers.why) == [
        "beyond the step's noise",
        "late throughout the job",
        "beyond the step's noise",
        "beyond the step's noise",
        "late throughout the job",
    ]


@SKIP_CORPUS
def test_the_noise_measured_on_the_shipped_jobs(jobs) -> None:  # type: ignore[no-untyped-def]
    sigma = {n: jobs[n].noise.sigma_ns / MS for n in MULTIRANK}
    assert 4.6 < sigma["g_ddp_ws2_balanced"] < 4.9 and 4.7 < sigma["g_ddp_ws2_sleep40_r1"] < 5.0
    assert 22.3 < sigma["g_ddp_ws4_balanced"] < 22.7  # four ranks on two cores: a noisy job
    assert 13.1 < sigma["g_ddp_ws4_compute30_r2"] < 13.5
    assert all(jobs[n].noise.how == "steps" and not jobs[n].noise.clock_ns for n in MULTIRANK)


@SKIP_CORPUS
def test_dlrm_one_step_noise_from_its_collectives_and_clocks() -> None:
    from ctda.job.run import analyze_job

    assert CORPUS is not None
    job = analyze_job(
        [CORPUS / f"param/dlrm_ws8_rank{r}.json.gz" for r in range(4)], executor="serial", full=False
    )
    n = job.noise
    assert n.how == "collectives" and 2.7e6 < n.sigma_ns < 3.0e6
    # no host recorded: ranks 1-3 keep offset 0 within +-0.13 ms, 8 collectives in the step
    assert job.offsets.uncertainty == {0: 0, 1: 132_000, 2: 131_000, 3: 132_000}
    s = job.stragglers.iloc[0]
    assert s.candidate == 2 and s.straggler == -1 and s.noise_ns == round(3 * n.sigma_ns + 8 * 131_000)


@SKIP_CORPUS
def test_cli_and_stored_job_show_lateness_with_its_noise_band(tmp_path: Path) -> None:
    import ctda.cli.analyze_cmd  # noqa: F401  (registers the command)
    from ctda import api
    from ctda.analysis.engine import AnalysisOptions
    from ctda.cli.common import app
    from ctda.store.config import Target
    from ctda.store.job_ingest import ingest_job

    assert CORPUS is not None
    d = CORPUS / "generated" / "multirank" / "g_ddp_ws2_balanced"
    res = CliRunner().invoke(app, ["analyze", str(d), "--executor", "serial", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    steps = doc["steps"]
    assert [s["straggler"] for s in steps] == [-1] * 5
    assert all(s["verdict"].startswith("balanced: no straggler") for s in steps)
    assert all(s["noise_ns"] > s["late_ns"] for s in steps)
    assert doc["checks"]["noise"]["from"] == "steps" and doc["checks"]["noise"]["k"] == K
    table = CliRunner().invoke(app, ["analyze", str(d), "--executor", "serial"])
    assert "balanced: no straggler (spread 14.3 ms)" in table.output and "noise ±" in table.output

    target = Target("ladybug", str(tmp_path / "s.lbug"))
    done = ingest_job([d], target, AnalysisOptions())
    assert done.report is not None
    got = api.open_store(target).job("g_ddp_ws2_balanced")
    pd.testing.assert_frame_equal(got.steps, done.report.steps)
    assert list(got.steps.verdict) == list(done.report.steps.verdict)
    assert (got.steps.noise_ns == 14_262_555).all() and (got.steps.candidate >= 0).all()
    assert got.checks["noise"] == done.report.checks["noise"]
