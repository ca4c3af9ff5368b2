"""The Job page's tables and figures on real multi-rank jobs: the lateness heatmap holds the
report's lateness, the per-step table its stragglers, the job timeline one band per rank and
a connector exactly where the job path changes rank, each rank's events on the job's clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.api import open_store
from ctda.ingest.reader import read_trace
from ctda.job.report import JobReport
from ctda.ui import charts, frames, jobcharts, jobframes
from ctda.ui.canvas import MS_FORMAT
from tests.conftest import CORPUS, SKIP_CORPUS, axis_labels

SLEEP = "g_ddp_ws2_sleep40_r1"  # rank 1 sleeps 40 ms per step: the straggler of every one
COMPUTE = "g_ddp_ws4_compute30_r2"  # four ranks; the path changes rank within steps
#: shipped with the tests (no corpus needed): rank 1 computes 30 ms more in every step
SHIPPED = Path(__file__).parent / "data" / "multirank" / "g_ddp_ws2_compute30_r1"


def job_dir(name: str) -> Path:
    assert CORPUS is not None
    return CORPUS / "generated" / "multirank" / name


@pytest.fixture(scope="module")
def reports() -> dict[str, JobReport]:
    from ctda.job.report import job_report
    from ctda.job.run import analyze_job

    return {n: job_report(analyze_job([job_dir(n)], full=False)) for n in (SLEEP, COMPUTE)}


@pytest.fixture(scope="module")
def rank_analyses() -> dict[int, Analysis]:
    """Each rank of the sleep job analysed on its own, as a stored run of it would be."""
    files = {r: job_dir(SLEEP) / f"rank{r}.pt.trace.json.gz" for r in (0, 1)}
    return {r: analyze(read_trace(f), AnalysisOptions()) for r, f in files.items()}


@SKIP_CORPUS
def test_heatmap_holds_the_lateness_in_ms_centred_on_zero(reports: dict[str, JobReport]) -> None:
    for rep in reports.values():
        t = jobframes.tables(rep)
        chart = jobcharts.heatmap(t.lateness)
        cells = chart.data[chart.data.kind == "cell"]
        want = rep.lateness.pivot(index="rank", columns="step", values="late_ns") / 1e6
        want = want.loc[rep.ranks, list(rep.steps.step)]
        got = cells.pivot(index="rank", columns="step", values="late_ms")
        got = got.loc[[f"r{r}" for r in rep.ranks], list(rep.steps.step)]
        np.testing.assert_array_equal(got.to_numpy(dtype=float), want.to_numpy(dtype=float))
        fill, ring = chart.spec["layer"]
        assert fill["encoding"]["y"]["sort"] == [f"r{r}" for r in rep.ranks]
        assert fill["encoding"]["x"]["sort"] == list(rep.steps.step)
        # diverging, centred on 0, symmetric: early and late of one size look alike
        stops = fill["encoding"]["color"]["scale"]["domain"]
        span = float(np.nanmax(np.abs(want.to_numpy(dtype=float))))
        assert stops[len(stops) // 2] == 0 and stops[0] == -stops[-1] == pytest.approx(-span)
        # one unit in the tooltip: ms, formatted like every chart's
        assert fill["encoding"]["tooltip"][-1] == {
            "field": "late_ms",
            "title": "late (ms)",
            "format": MS_FORMAT,
        }
        marks = chart.data[chart.data.kind == "straggler"]
        assert list(marks.step) == list(rep.steps.step)
        assert list(marks["rank"]) == [f"r{r}" for r in rep.steps.straggler]
        assert ring["encoding"]["stroke"]["scale"]["range"] == [jobcharts.STRAGGLER_COLOR]
    # rank 1 sleeps: it is marked in every step, and it is late by ~40 ms or more in each
    sleep = jobcharts.heatmap(jobframes.tables(reports[SLEEP]).lateness).data
    assert set(sleep[sleep.kind == "straggler"]["rank"]) == {"r1"}
    assert (sleep[(sleep.kind == "cell") & (sleep["rank"] == "r1")].late_ms > 35).all()


@SKIP_CORPUS
def test_step_table_names_each_steps_straggler(reports: dict[str, JobReport]) -> None:
    rep = reports[SLEEP]
    t = jobframes.tables(rep)
    assert list(t.steps.straggler) == ["r1"] * 5
    np.testing.assert_allclose(t.steps.late_ms, rep.steps.late_ns / 1e6)
    np.testing.assert_allclose(t.steps.job_step_ms, rep.steps.job_step_ns / 1e6)
    assert all("sleep" in x for x in t.steps.straggler_top)
    assert all(x.startswith("r1 ") for x in t.steps.path_by_rank)
    # collective waits: rank 0 waited for rank 1; the clocks need no correction on one host
    assert set(t.waits.waited_for) == {"r1"} and (t.waits.wait_ms >= 0).all()
    np.testing.assert_allclose(t.waits.wait_ms, rep.waits.wait_ns / 1e6)
    assert list(t.clocks["rank"]) == ["r0", "r1"] and (t.clocks.offset_ms == 0).all()
    assert "2 of 2 ranks, 5 step(s); 10 collectives matched, 0 unmatched" in t.summary


def rank_changes(rep: JobReport, step: str) -> int:
    r = rep.path[rep.path.step == step].sort_values("pos")["rank"].to_numpy()
    return int((r[1:] != r[:-1]).sum())


@SKIP_CORPUS
@pytest.mark.parametrize("name", [SLEEP, COMPUTE])
def test_job_timeline_one_band_per_rank_and_connectors_on_rank_changes(
    reports: dict[str, JobReport], name: str
) -> None:
    rep = reports[name]
    t = jobframes.tables(rep)
    changes = 0
    for step in t.lateness.steps:
        tl = jobframes.timeline(rep, t.base_ns, step)
        chart = jobcharts.timeline(tl)
        # a band per rank (its path row alone: no runs stored here), rank 0 on top
        assert tl.bands == rep.ranks
        assert row_labels(chart.spec) == [f"r{r} · job path" for r in rep.ranks]
        # every stretch of the step's path is drawn, outlined in the path's colour
        part = rep.path[rep.path.step == step]
        bars = chart.data[chart.data.kind == "bar"]
        assert len(bars) == len(part) and (chart.data.kind == "busy").sum() == 0
        assert layer(chart.spec, "bar")["mark"]["stroke"] == charts.PATH_STROKE and bars.outline.max() > 0
        # the drawn range is the job step
        job_ms = float(rep.steps.set_index("step").job_step_ns[step]) / 1e6
        assert tl.end_ms - tl.start_ms == pytest.approx(job_ms, abs=1e-6)
        # connectors: one per change of rank, each joining two different ranks' path rows
        n = rank_changes(rep, step)
        assert len(tl.jumps) == n
        lines = chart.data[chart.data.kind == "link"]
        assert len(lines) == n
        centers = {r.center: r.rank for r in tl.rows if r.is_path}
        assert all(centers[a] != centers[b] for a, b in zip(lines.y0, lines.y1))
        changes += n
    # the compute job's path leaves one rank for another; the sleep job's stays on rank 1,
    # which arrived last at every collective (docs/jobs.md#the-job-step)
    assert changes > 0 if name == COMPUTE else changes == 0


@SKIP_CORPUS
def test_job_timeline_draws_each_ranks_events_on_the_job_clock(
    reports: dict[str, JobReport], rank_analyses: dict[int, Analysis]
) -> None:
    rep = reports[SLEEP]
    t = jobframes.tables(rep)
    step = "ProfilerStep#3"
    busy = {}
    for r, a in rank_analyses.items():
        w = next(k for k, win in enumerate(a.windows) if win.label == step)
        tl = frames.timeline(a, w, 4000, frames.Names(a))
        busy[r] = jobframes.Busy(tl, jobframes.shift_ms(frames.t0(a), t.offsets_ns[r], t.base_ns))
    jt = jobframes.timeline(rep, t.base_ns, step, busy)
    # each band: the path row, then one row per thread / stream of the rank
    for r, b in busy.items():
        labels = [row.label for row in jt.rows if row.rank == r]
        assert labels == [f"r{r} · job path"] + [f"r{r} · {lane.label}" for lane in b.timeline.lanes]
    assert len(jt.busy) == sum(len(b.timeline.events) for b in busy.values())
    # a path stretch on an event lies within that event as the rank's run draws it: the
    # run's times, moved by the rank's clock offset, are the job's
    drawn = {(int(r), int(e)): x for r, e, x in zip(jt.busy["rank"], jt.busy.event, jt.busy.start_ms)}
    checked = 0
    for s in jt.path[jt.path.event >= 0].itertuples():
        r, e = int(s.rank), int(s.event)
        a = rank_analyses[r]
        st, en = frames.event_times(a)
        start = (int(st[e]) + t.offsets_ns[r] - t.base_ns) / 1e6
        end = (int(en[e]) + t.offsets_ns[r] - t.base_ns) / 1e6
        # the same event: the run's raw name of event ``e`` is the path's
        assert a.table.strings("name")[a.table.col("name")[a.nodes.uid[e]]] == s.name
        assert start - 1e-6 <= s.start_ms and s.end_ms <= end + 1e-6
        if (r, e) in drawn:
            assert drawn[(r, e)] == pytest.approx(start, abs=1e-6)
            checked += 1
    assert checked > 100
    # the chart: busy bars pale and not outlined, path bars outlined, a label for every row
    chart = jobcharts.timeline(jt)
    assert row_labels(chart.spec) == [r.label for r in jt.rows]
    pale = chart.data[chart.data.kind == "busy"]
    assert len(pale) == len(jt.busy) and (pale.outline == 0).all()
    assert set(pale.fill) <= set(jobcharts.PALE.values()) | {jobcharts.PALE_OTHER}
    assert isinstance(jt.busy, pd.DataFrame) and jt.busy.start_ms.notna().all()


# --- the page, under Streamlit's AppTest -------------------------------------------------

APP = Path(__file__).resolve().parents[1] / "ctda" / "ui" / "app.py"


def page() -> AppTest:
    """The app opened on the Job page: no exception, no error box."""
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/job.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def canvases(at: AppTest) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    return [
        (json.loads(c.proto.spec), convert_arrow_bytes_to_pandas_df(c.proto.data.data))
        for c in at.get("vega_lite_chart")
    ]


def layer(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    """The layer of a canvas chart that draws the rows of ``kind``."""
    return next(x for x in spec["layer"] if x["transform"][0]["filter"] == f"datum.kind === '{kind}'")


def row_labels(spec: dict[str, Any]) -> list[str]:
    """A timeline's row labels, top to bottom."""
    return axis_labels(layer(spec, "bar")["encoding"]["y"]["axis"])


@pytest.fixture(scope="module")
def job_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded store holding the shipped job as ``ctda ingest DIR`` stores it: the job
    and a run per rank."""
    db = tmp_path_factory.mktemp("job-store") / "store.lbug"
    with open_store(db) as s:
        s.ingest_job([SHIPPED], executor="serial")
    return db


def test_job_page_without_jobs_says_how_to_store_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTDA_DB", str(tmp_path / "empty.lbug"))
    at = page()
    assert at.title[0].value == "Job"
    assert any("ctda ingest DIR" in i.value for i in at.info)
    assert not at.get("vega_lite_chart")


def test_job_page_on_a_stored_job(job_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctda.job.report import job_report
    from ctda.job.run import analyze_job

    monkeypatch.setenv("CTDA_DB", str(job_store))
    with open_store(job_store) as s:
        rep = s.job(SHIPPED.name)
    # the store gives back the analysis' tables
    fresh = job_report(analyze_job([SHIPPED], executor="serial", full=False))
    pd.testing.assert_frame_equal(rep.lateness, fresh.lateness, check_dtype=False)
    at = page()
    assert at.selectbox(key="job_name").options == [SHIPPED.name]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ranks"] == "2" and metrics["Steps"] == "5"
    assert metrics["Straggler most often"] == "r1 (5 of 5)"
    heat, tl = canvases(at)  # the lateness heatmap, then the step's timeline
    want = rep.lateness.pivot(index="rank", columns="step", values="late_ns") / 1e6
    cells = heat[1][heat[1].kind == "cell"].pivot(index="rank", columns="step", values="late_ms")
    np.testing.assert_allclose(
        cells.loc[["r0", "r1"], list(rep.steps.step)].to_numpy(),
        want.loc[[0, 1], list(rep.steps.step)].to_numpy(),
    )
    assert list(heat[1][heat[1].kind == jobcharts.STRAGGLER]["rank"]) == ["r1"] * 5
    steps = at.dataframe[0].value
    assert list(steps.straggler) == ["r1"] * 5 and list(steps.step) == list(rep.steps.step)
    np.testing.assert_allclose(steps.late_ms, rep.steps.late_ns / 1e6)
    # rank 1 did more work, arrived last, and slowed rank 0 on the shared cores
    assert list(steps["last"]) == ["r1"] * 5
    assert all(x.startswith("slowed r0 ") for x in steps.host_contention)

    def check_timeline(chart: tuple[dict[str, Any], pd.DataFrame], step: str) -> None:
        spec, table = chart
        assert any(m.value.startswith(f"**{step}: ") for m in at.markdown)
        ticks = row_labels(spec)
        # a band per rank: its path row, then its threads from its stored run
        for r in (0, 1):
            band = [x for x in ticks if x.startswith(f"r{r} · ")]
            assert band[0] == f"r{r} · job path" and len(band) > 1
        assert (table.kind == "busy").sum() > 0
        assert (table.kind == "link").sum() == rank_changes(rep, step)

    check_timeline(tl, "ProfilerStep#2")
    # another step redraws it; waits and clocks follow
    box = next(s for s in at.selectbox if str(s.key).startswith("job_step@"))
    box.set_value("ProfilerStep#5").run()
    check_timeline(canvases(at)[1], "ProfilerStep#5")
    waits, clocks = at.dataframe[1].value, at.dataframe[2].value
    assert set(waits.waited_for) == {"r1"} and list(clocks["rank"]) == ["r0", "r1"]
    assert any("the own events of 2 of 2 ranks" in c.value for c in at.caption)


def test_a_rank_opens_its_run(job_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's button opens that rank's own run on the Critical path page."""
    monkeypatch.setenv("CTDA_DB", str(job_store))
    with open_store(job_store) as s:
        want = next(
            r.name for r in s.runs() if r.extra.get("job") == SHIPPED.name and r.extra.get("rank") == 1
        )
    at = page()
    assert [b.label for b in at.button if str(b.key).startswith("job_open_r")] == ["r0", "r1"]
    at.button(key="job_open_r1").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == "Critical path"
    assert at.sidebar.selectbox(key="run").value == want


def test_job_page_predicts_the_job_step(job_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job what-if on the Job page: the straggler kept up, each host's cores shared; the
    predicted job step beside the observed one is the API's."""
    from ctda import api

    monkeypatch.setenv("CTDA_DB", str(job_store))
    at = page()
    assert any(c.value.startswith("Make the stragglers keep up") for c in at.caption)
    at.checkbox(key="job_wi_median").check().run()
    at.number_input(key="job_wi_cpus").set_value(2).run()
    # the heatmap and the timeline: nothing predicted before it is asked for
    assert len(at.get("vega_lite_chart")) == 2
    at.button(key="job_wi_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    want = api.whatif_stored_job(job_store, SHIPPED.name, straggler_median=True, cpus=2).scenario
    metrics = {m.label: float(m.value.split()[0]) for m in at.metric if m.label.startswith("Mean job step (")}
    assert metrics["Mean job step (observed)"] == pytest.approx(want.steps.base_ns.mean() / 1e6, abs=1e-3)
    assert metrics["Mean job step (predicted)"] == pytest.approx(want.mean_predicted_ns / 1e6, abs=1e-3)
    table = at.dataframe[-1].value
    assert list(table.step) == list(want.steps.label)
    np.testing.assert_allclose(table["observed ms"], want.steps.base_ns / 1e6)
    np.testing.assert_allclose(table["predicted ms"], want.steps.predicted_ns / 1e6)
    # rank 1 computes 30 ms more each step: kept up with rank 0, every step is shorter
    assert (table["predicted − observed ms"] < -10).all()
    assert any("2 cores" in c.value for c in at.caption)
    # observed and predicted side by side, a pair of bars per step
    pairs = canvases(at)[-1][1]
    assert set(pairs.side) == {"observed", "predicted"} and len(pairs) == 2 * len(table)


def test_a_job_stored_from_a_relative_path_is_predicted_from_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctda ingest job/`` in one directory, the UI started in another: the job's what-if
    finds its ranks' trace files (stored absolute), not "the trace files ... are gone"."""
    import shutil

    from ctda import api

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    shutil.copytree(SHIPPED, work / "job")
    elsewhere.mkdir()
    db = tmp_path / "store.lbug"
    monkeypatch.chdir(work)
    with open_store(db) as s:
        s.ingest_job([Path("job")], executor="serial")
    monkeypatch.chdir(elsewhere)
    with open_store(db) as s:
        files = sorted(r.file for r in s.runs())
    assert files == [str(work / "job" / f.name) for f in sorted(SHIPPED.glob("rank*"))]
    sc = api.whatif_stored_job(db, "job", ["rank=1=0.5"]).scenario
    assert (sc.steps.predicted_ns < sc.steps.base_ns).all()
