"""``ctda analyze --stream``: a trace read to disk and analysed a few steps at a time gives
the in-memory report, table for table, while holding only a group of steps at once."""

from __future__ import annotations

import gzip
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctda import api
from ctda.analysis.report import Report
from ctda.analysis.stream import StreamResult
from ctda.ingest.kinds import Kind
from ctda.ingest.spill import spill_trace
from tests.conftest import CORPUS, SKIP_CORPUS, corpus_traces
from tests.input_limits_helpers import cli, one_line

ROOT = Path(__file__).resolve().parents[1]
#: a 2020 bare-list CPU trace (6 steps) and a recorded GPU trace (12 steps), both in the repo
RESNET = ROOT / "tests" / "data" / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"
GPU = ROOT / "bench" / "traces" / "gpu" / "b1_bf16_conv_before_r1.pt.trace.json.gz"
ALL = 1 << 20  # every row of every list


def assert_same_report(whole: Report, streamed: Report, outlasting: int = 0) -> None:
    """Every table of the two reports holds the same values (shares to rounding); with
    ``outlasting`` events, their names' self time may only be larger in the streamed one."""
    pd.testing.assert_frame_equal(whole.steps.reset_index(drop=True), streamed.steps.reset_index(drop=True))
    for name in ("by_class", "by_category", "by_lane"):
        a, b = getattr(whole, name), getattr(streamed, name)
        assert list(a.iloc[:, 0]) == list(b.iloc[:, 0]), name  # same rows, same order
        assert a.cp_ns.astype(np.int64).tolist() == b.cp_ns.astype(np.int64).tolist(), name
        np.testing.assert_allclose(a.share.to_numpy(float), b.share.to_numpy(float), rtol=1e-12)
    cols = ["name", "category", "class", "cp_ns", "count", "on_cp"] + ([] if outlasting else ["total_ns"])
    a, b = whole.hotspots[cols], streamed.hotspots[cols]
    by_name = [x.sort_values("name").reset_index(drop=True) for x in (a, b)]
    pd.testing.assert_frame_equal(*by_name, check_dtype=False)
    if outlasting:
        self_ns = [x.set_index("name").total_ns.sort_index() for x in (whole.hotspots, streamed.hotspots)]
        assert (self_ns[1] >= self_ns[0]).all() and (self_ns[1] > self_ns[0]).sum() <= outlasting
    assert list(a.name[:10]) == list(b.name[:10])  # the ranking a user reads
    assert whole.recommendations == streamed.recommendations


def both(path: Path, group_events: int) -> tuple[Report, StreamResult]:
    whole = api.report(api.analyze(path), top=ALL)
    return whole, api.analyze_stream(path, group_events=group_events, top=ALL)


@pytest.mark.parametrize("path", [RESNET, GPU], ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("group_events", [1, 1_000_000])
def test_streamed_report_equals_the_in_memory_one(path: Path, group_events: int) -> None:
    whole, got = both(path, group_events)
    assert_same_report(whole, got.report)
    steps = len(whole.steps)
    assert got.groups == (steps if group_events == 1 else 1)
    assert got.report.checks["replay_max_error_ns"] == 0
    assert got.report.checks["cp_vs_window_max_rel_error"] == 0.0


@pytest.mark.parametrize("path", [RESNET, GPU], ids=lambda p: p.name.split(".")[0])
def test_groups_in_worker_processes_give_the_same_report(path: Path) -> None:
    """Two forked workers, one step per group: the same tables, in step order."""
    whole = api.report(api.analyze(path), top=ALL)
    got = api.analyze_stream(path, group_events=1, top=ALL, jobs=2)
    assert_same_report(whole, got.report)
    assert got.groups == len(whole.steps)


def test_memory_follows_the_group_not_the_trace() -> None:
    """One step at a time, each group holds that step and its two neighbours: about a
    quarter of this 12-step trace, and never the whole of it."""
    got = api.analyze_stream(GPU, group_events=1)
    assert got.groups == 12
    assert 0 < got.largest_group < got.events * 0.3
    assert got.spilled_bytes > 0


def test_the_spill_keeps_trace_order_and_metadata(tmp_path: Path) -> None:
    spill = spill_trace(GPU, tmp_path, batch_events=500)
    assert len(spill.batches) > 1  # a batch is whole pieces of text, at least batch_events
    table = api.read(GPU).events
    assert spill.n_events == table.num_rows
    assert [s[0] for s in spill.steps] == list(range(spill.steps[0][0], spill.steps[0][0] + 12))
    # the second step's stretch: every event overlapping it, every metadata event, in trace order
    lo, hi = spill.steps[1][2], spill.steps[1][3]
    part = spill.between(lo, hi)
    uid = part.column("uid").to_numpy()
    assert (np.diff(uid) > 0).all()
    ts, dur, kind = (table.column(c).to_numpy() for c in ("ts_ns", "dur_ns", "kind"))
    end = ts + np.maximum(dur, 0)
    want = np.flatnonzero((kind == Kind.METADATA) | ((ts <= hi) & (end >= lo)))
    assert uid.tolist() == want.tolist()
    # each step's count: the events starting in its stretch, all of the spilled ones in all
    assert spill.count_by_step().sum() == spill.n_events - spill.aside.num_rows


def test_cli_prints_the_report_and_how_it_streamed() -> None:
    whole = cli("analyze", str(GPU))
    res = cli("analyze", str(GPU), "--stream", "--group-events", "20000")
    assert res.exit_code == 0, res.output
    # the same tables, line for line, up to the checks (the node count includes the context)
    cut = whole.stdout.index("checks:")
    assert res.stdout[:cut] == whole.stdout[:cut]
    assert "streamed: " in res.stdout and " groups of at most " in res.stdout


def _no_steps(tmp_path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0}
        for i in range(10)
    ]
    path = tmp_path / "nosteps.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    return path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--step", "3"], "--stream reports every step"),
        (["--windows", "trace"], "leave out --mode and --windows"),
        (["--group-events", "0"], "--group-events"),
        (["--jobs", "0"], "--jobs"),
    ],
)
def test_cli_refuses_what_a_stream_cannot_do(args: list[str], says: str) -> None:
    res = cli("analyze", str(GPU), "--stream", *args)
    assert res.exit_code == 2
    assert says in res.output


def test_a_trace_without_steps_is_one_line(tmp_path: Path) -> None:
    path = _no_steps(tmp_path)
    line = one_line(cli("analyze", str(path), "--stream"))
    assert str(path) in line and "no ProfilerStep#N events" in line


def _long_wait(tmp_path: Path) -> Path:
    """Six 100 us steps; a loader thread's wait starts in the first and lasts to the last,
    with a callee in every step (so its self time depends on all of them)."""
    ev = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "loader"}}]
    for k in range(6):
        t0 = 100.0 * k
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k}",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 100.0,
            }
        )
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 80.0}
        )
        ev.append(
            {"ph": "X", "cat": "cpu_op", "name": "decode", "pid": 1, "tid": 2, "ts": t0 + 60, "dur": 20.0}
        )
    ev.append(
        {"ph": "X", "cat": "cpu_op", "name": "loader_wait", "pid": 1, "tid": 2, "ts": 50.0, "dur": 545.0}
    )
    path = tmp_path / "long_wait.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_an_event_outlasting_its_group_is_reached_or_counted(tmp_path: Path) -> None:
    path = _long_wait(tmp_path)
    whole = api.report(api.analyze(path), top=ALL)
    # a group of all six steps holds the wait whole
    assert_same_report(whole, api.analyze_stream(path, group_events=1000, top=ALL).report)
    # one step per group: the wait reaches four steps past the context, more than one
    # step's events, so it is not loaded whole; it is counted, its self time an upper bound
    got = api.analyze_stream(path, group_events=1, top=ALL)
    assert got.outlasting == 1
    assert_same_report(whole, got.report, got.outlasting)
    self_ns = {r.name: r.total_ns for r in got.report.hotspots.itertuples()}
    assert self_ns["loader_wait"] > {r.name: r.total_ns for r in whole.hotspots.itertuples()}["loader_wait"]
    res = cli("analyze", str(path), "--stream", "--group-events", "1")
    assert "the self time of 1 events that outlast their group's reach" in res.stdout


def test_a_parquet_table_or_a_job_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t.parquet"
    api.read(GPU).write_parquet(table)
    line = one_line(cli("analyze", str(table), "--stream"))
    assert str(table) in line and "analysed whole" in line
    line = one_line(cli("analyze", str(GPU), str(RESNET), "--stream"))
    assert "--stream analyses one trace" in line
    line = one_line(cli("analyze", str(tmp_path), "--stream"))
    assert "--stream analyses one trace" in line


def test_a_broken_trace_is_the_readers_error_and_leaves_no_scratch(tmp_path: Path) -> None:
    text = gzip.decompress(GPU.read_bytes())
    broken = tmp_path / "broken.json"
    broken.write_bytes(text[: len(text) // 2])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    whole = one_line(cli("analyze", str(broken)))
    line = one_line(cli("analyze", str(broken), "--stream", "--scratch", str(scratch)))
    assert line == whole
    assert list(scratch.iterdir()) == []


def _small_files() -> None:  # pragma: no cover - runs in the child before exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def test_a_full_scratch_disk_is_one_line_and_cleaned_up(tmp_path: Path) -> None:
    """Files may not grow past 20 kB in the child: the spill's first batch cannot be written."""
    cmd = [sys.executable, "-m", "ctda.cli.app", "analyze", str(GPU), "--stream", "--scratch", str(tmp_path)]
    done = subprocess.run(cmd, preexec_fn=_small_files, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the scratch copy" in lines[0] and "--scratch" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_api_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(api.OptionError, match="group_events"):
        api.analyze_stream(GPU, group_events=0)
    with pytest.raises(api.OptionError, match="jobs"):
        api.analyze_stream(GPU, jobs=0)
    with pytest.raises(api.OptionError, match="scratch directory"):
        api.analyze_stream(GPU, scratch=tmp_path / "missing")
    with pytest.raises(api.OptionError, match="windows 'steps'"):
        api.analyze_stream(GPU, options=api.AnalysisOptions(windows="trace"))
    with pytest.raises(api.OptionError, match="ctda mode"):
        api.analyze_stream(GPU, options=api.AnalysisOptions(mode="hta"))


#: every real trace: those with ProfilerStep windows, each step analysed alone with its
#: neighbours; the others refused
STEPPED = corpus_traces() + (sorted((CORPUS / "generated" / "gpu").glob("*.json.gz")) if CORPUS else [])


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", STEPPED, ids=lambda p: str(p.relative_to(CORPUS)) if CORPUS else str(p))
def test_corpus_streamed_equals_in_memory(path: Path) -> None:
    a = api.analyze(path)
    if not any(w.step is not None for w in a.windows):  # one window, the whole trace
        with pytest.raises(api.TraceError, match="no ProfilerStep#N events"):
            api.analyze_stream(path)
        return
    got = api.analyze_stream(path, group_events=1, top=ALL)
    assert_same_report(api.report(a, top=ALL), got.report, got.outlasting)


def test_progress_reports_the_read_then_every_step() -> None:
    seen: list[tuple[str, int, int]] = []
    api.analyze_stream(GPU, group_events=1, progress=lambda p: seen.append((p.stage, p.done, p.total)))
    reads = [s for s in seen if s[0] == "read"]
    steps = [s for s in seen if s[0] == "analyse"]
    assert reads and all(total == GPU.stat().st_size for _, _, total in reads)
    assert [done for _, done, _ in reads] == sorted(done for _, done, _ in reads)
    assert reads[-1][1] == GPU.stat().st_size  # the whole file was consumed
    assert steps == [("analyse", k, 12) for k in range(1, 13)]
    assert seen.index(reads[-1]) < seen.index(steps[0])


def test_cli_progress_bar_runs_on_a_pipe_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CTDA_PROGRESS=1`` turns the bars on without a terminal (and, here, below the size
    at which a bar is worth it): the callbacks run through both stages, the report is the
    same. (A transient bar leaves nothing on a pipe to compare.)"""
    from ctda.cli import common

    monkeypatch.setattr(common, "PROGRESS_MIN_BYTES", 0)
    quiet = cli("analyze", str(GPU), "--stream")
    shown = cli("analyze", str(GPU), "--stream", env={"CTDA_PROGRESS": "1"})
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == quiet.stdout


def test_the_api_default_is_the_engine_default() -> None:
    import inspect

    from ctda.analysis.stream import GROUP_EVENTS

    assert inspect.signature(api.analyze_stream).parameters["group_events"].default == GROUP_EVENTS
