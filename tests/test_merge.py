"""``ctda merge``: helper processes of a host merged beside the training process's trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import ctda.cli.convert_cmd  # noqa: F401  (registers the command on the app)
from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.cli.common import app
from ctda.ingest.errors import TraceError
from ctda.ingest.merge import FLOW_ID_STRIDE, merge_processes
from ctda.ingest.reader import read_trace
from ctda.whatif import blind
from ctda.whatif.scenario import run, with_cpus
from ctda.whatif.select import SelectionError, parse_scale

BASE = 1_790_000_000_000_000_000


def _x(name: str, pid: int, ts: float, dur: float, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": pid, "ts": ts, "dur": dur}


def _write(path: Path, events: list[dict[str, Any]], **meta: Any) -> Path:
    doc = {"schemaVersion": 1, "host_name": "h1", "baseTimeNanoseconds": BASE, **meta, "traceEvents": events}
    text = json.dumps(doc, indent=1)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _main(tmp: Path, name: str = "main.json") -> Path:
    return _write(
        tmp / name,
        [
            _x("ProfilerStep#1", 100, 1000.0, 500.0, "user_annotation"),
            _x("aten::conv", 100, 1010.0, 400.0),
            _x("aten::add", 100, 1450.0, 10.0),
            {"ph": "s", "id": 7, "pid": 100, "tid": 100, "ts": 1010.0, "cat": "fwdbwd", "name": "fwdbwd"},
        ],
    )


def _worker(tmp: Path, pid: int, ts: float = 1100.0, name: str | None = None, **meta: Any) -> Path:
    events = [
        _x("record.py(38): mix", pid, ts, 200.0, "python_function"),
        {"ph": "s", "id": 7, "pid": pid, "tid": pid, "ts": ts, "cat": "fwdbwd", "name": "fwdbwd"},
    ]
    return _write(tmp / (name or f"w{pid}.json.gz"), events, **meta)


def _events(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return list(doc["traceEvents"])


def test_helpers_join_the_main_trace_as_more_processes(tmp_path: Path) -> None:
    out = tmp_path / "merged.json.gz"
    s = merge_processes(_main(tmp_path), [_worker(tmp_path, 201), _worker(tmp_path, 202)], out)
    assert s.main_pids == {100} and s.helper_events == 4
    assert sorted(p for h in s.helper_pids.values() for p in h) == [201, 202]
    events = _events(out)
    assert len(events) == 8
    # the main trace's events are untouched; helpers' flow ids cannot pair with them
    flows = sorted((e["pid"], e["id"]) for e in events if e["ph"] == "s")
    assert flows == [(100, 7), (201, 7 + FLOW_ID_STRIDE), (202, 7 + 2 * FLOW_ID_STRIDE)]
    table = read_trace(out)
    assert sorted(str(p) for p in table.lanes.pid.unique()) == ["100", "201", "202"]


def test_helper_times_move_onto_the_main_time_base(tmp_path: Path) -> None:
    # the helper's clock origin is 50 us later: its events are 50 us later on the main's scale
    helper = _worker(tmp_path, 201, ts=1100.0, baseTimeNanoseconds=BASE + 50_000)
    out = tmp_path / "merged.json"
    s = merge_processes(_main(tmp_path), [helper], out)
    (mix,) = [e for e in _events(out) if e["name"].endswith("mix")]
    assert mix["ts"] == pytest.approx(1150.0)
    assert s.helper_events == 2


def test_an_empty_main_array_stays_valid_json(tmp_path: Path) -> None:
    main = _write(tmp_path / "empty.json", [])
    with pytest.raises(TraceError, match="does not overlap"):
        merge_processes(main, [_worker(tmp_path, 201)], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda t: _worker(t, 100), "process 100 is also in"),
        (lambda t: _worker(t, 201, ts=99_000.0), "does not overlap the main trace"),
        (lambda t: _worker(t, 201, host_name="h2"), "recorded on host 'h2'"),
        (
            lambda t: _write(t / "gpu.json", [_x("void gemm", 201, 1100.0, 5.0, "kernel")]),
            "holds GPU events",
        ),
        (lambda t: _write(t / "none.json", []), "holds no complete events"),
        (lambda t: (t / "bad.json").write_text('{"traceEvents": [') and t / "bad.json", "not valid JSON"),
        (lambda t: t / "missing.json", "no such file"),
    ],
)
def test_bad_helpers_are_refused_and_nothing_is_written(tmp_path: Path, make: Any, problem: str) -> None:
    out = tmp_path / "merged.json.gz"
    helper = make(tmp_path)
    with pytest.raises(TraceError, match=problem) as exc:
        merge_processes(_main(tmp_path), [helper], out)
    assert str(helper) in str(exc.value) or str(tmp_path / "main.json") in str(exc.value)
    assert not out.exists() and list(tmp_path.glob(".merged*")) == []


def test_a_truncated_main_trace_or_an_unwritable_output_is_one_error(tmp_path: Path) -> None:
    main = _main(tmp_path, "main.json.gz")
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(main.read_bytes()[:-20])
    with pytest.raises(TraceError, match=r"cut\.json\.gz: truncated gzip"):
        merge_processes(cut, [_worker(tmp_path, 201)], tmp_path / "m.json")
    with pytest.raises(TraceError, match="cannot write"):
        merge_processes(main, [_worker(tmp_path, 201)], tmp_path / "no" / "such" / "dir.json")
    assert not (tmp_path / "m.json").exists()


def test_cli_one_line_error_exit_2_and_store_of_files_unchanged(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    main = _main(tmp_path)
    res = runner.invoke(app, ["merge", str(main), str(main), "-o", str(tmp_path / "o.json")])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "the same process given twice" in res.output
    res = runner.invoke(app, ["merge", str(main), str(_worker(tmp_path, 201)), "-o", str(main)])
    assert res.exit_code == 2 and "is one of the inputs" in res.output
    res = runner.invoke(
        app, ["merge", str(main), str(_worker(tmp_path, 202)), "-o", str(tmp_path / "o.json")]
    )
    assert res.exit_code == 0, res.output
    assert "2 events of process(es) 202" in res.output


# --- a real recording: the accuracy bench's DataLoader pair, workers profiled -------------

TRACES = Path(__file__).resolve().parents[1] / "bench" / "traces"
MAIN = TRACES / "m_loader_traced_before.pt.trace.json.gz"
WORKERS = sorted(TRACES.glob("m_loader_traced_before.worker*.pt.trace.json.gz"))


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    out = tmp_path_factory.mktemp("merge") / "host.json.gz"
    merge_processes(MAIN, WORKERS, out)
    return analyze(read_trace(out), AnalysisOptions())


def test_merged_workers_keep_the_invariants(host: Analysis) -> None:
    lanes = host.table.lanes
    assert len(WORKERS) == 4 and lanes.pid.nunique() == 5  # the training process and 4 workers
    assert np.abs(host.timing.time - host.nodes.time).max() <= 1_000  # replay exact
    starts, ends = host.window_bounds()
    assert len(host.windows) == 15
    for i in range(len(host.windows)):
        assert int(host.charges[host.charges.window == i].ns.sum()) == int(ends[i] - starts[i])
    # the workers' events are in the analysis, on their own lanes
    worker_lanes = set(lanes.lane[lanes.thread_name.str.contains("pt_data_worker")])
    assert len(worker_lanes) == 4 and worker_lanes <= set(np.unique(host.nodes.lane))


def test_cheaper_worker_work_gives_the_training_ops_their_cores_back(host: Analysis) -> None:
    a = with_cpus(host, 2)
    sc = run(a, [parse_scale(a, "name~^mix$=0.3333")])
    st = sc.step_times()
    # the training process never runs mix: only the cores the workers free speed it up
    # (measured in the "after" recording: median step 80.4 -> 45.4 ms)
    assert float(st.predicted_ns.median()) < 0.7 * float(st.base_ns.median())
    # and no step gets slower: the index-queue feeder threads' condition waits end when the
    # training thread notifies them (`wake`); held at their observed length they made two
    # steps 4.5x and 3x slower (61 -> 275 ms, 93 -> 288 ms)
    assert (st.predicted_ns < st.base_ns).all()
    g, n = host.graph, host.nodes
    wake = g.rule == list(g.rule_names).index("wake")
    notifier, woken = set(n.lane[g.src[wake] // 2].tolist()), set(n.lane[g.dst[wake] // 2].tolist())
    # the training thread (the one with the step annotations) notifies 4 feeder threads
    assert notifier == {int(n.lane[host.windows[0].event])}
    assert int(wake.sum()) == 11 and len(woken) == 4 and not woken & notifier
    assert blind.notes(sc) == []  # the workers' load is in the trace: nothing to warn about
    # without the workers' traces the change has nothing to select
    alone = analyze(read_trace(MAIN), AnalysisOptions())
    with pytest.raises(SelectionError):
        parse_scale(alone, "name~^mix$=0.3333")
