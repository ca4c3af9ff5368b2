"""Smoke test of the analyze and whatif benchmark suites' measurement code (no HTA, no corpus).

The suites run their measurements in child processes on large traces; here the same
functions run in-process on one small shipped trace, and the figures they return must be
coherent: stages add up, the critical path matches the analysis, what-if timings exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bench import hta_runner, suite_analyze, suite_hta, suite_store, suite_whatif
from bench.suites import Context
from bench.synth import Target
from ctda.analysis.engine import analyze
from ctda.ingest.reader import read_trace

TRACE = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


@pytest.fixture(scope="module")
def measured() -> tuple[Any, dict[str, Any]]:
    return suite_analyze.measure_analysis(TRACE)


def test_analysis_figures_are_coherent(measured: tuple[Any, dict[str, Any]]) -> None:
    a, out = measured
    table = read_trace(TRACE)
    assert out["events"] == len(table) > 0
    assert out["analysed_events"] == a.nodes.n > 0
    assert out["edges"] == a.graph.n_edges > 0
    assert out["windows"] == len(a.windows) >= 1
    assert out["json_bytes"] > 0
    for key in ("read_s", "graph_s", "calibrate_s", "cp_s", "analyze_s", "total_s"):
        assert 0 < out[key] < 60, key
    assert out["analyze_s"] == pytest.approx(out["graph_s"] + out["calibrate_s"] + out["cp_s"])
    assert out["total_s"] == pytest.approx(out["read_s"] + out["analyze_s"])
    st = out["stages"]
    for key in ("select", "rules", "build", "calibrate", "replay", "window_paths", "report"):
        assert st[key] > 0, key
    # the groups partition the timed analyze call
    parts = st["graph"] + st["calibrate"] + st["replay"] + st["window_paths"]
    assert parts == pytest.approx(st["total"], abs=1e-5)  # stages are rounded to 1 µs
    assert out["cp_ns"] == int(a.charges.ns.sum()) > 0
    assert out["replay_within_1us"] == 1.0
    assert out["analyze_cpu_s"] > 0 and out["stages_cpu"]["total"] > 0
    json.dumps(out)  # the child prints it as JSON


def test_timed_analyze_is_the_real_analysis() -> None:
    table = read_trace(TRACE)
    timed, stages = suite_analyze.timed_analyze(table)
    plain = analyze(table)
    pd.testing.assert_frame_equal(timed.charges, plain.charges)
    assert np.array_equal(timed.timing.time, plain.timing.time)
    assert stages["total"] > 0
    # the stage wrappers are removed afterwards
    from ctda.analysis import graph, modes

    assert modes.calibrate.__module__ == "ctda.analysis.calibrate"
    assert graph.build.__module__ == "ctda.analysis.graph"


def test_whatif_figures_are_coherent(measured: tuple[Any, dict[str, Any]]) -> None:
    a, _ = measured
    w = suite_whatif.measure_whatif(a)
    for run in ("in_memory", "loaded"):
        r = w[run]
        assert r["n_scenarios"] >= 2, run
        assert 0 < r["median_ms"] <= r["max_ms"] < 10_000
        assert r["median_cpu_ms"] > 0
        assert set(r["per_scenario_ms"]) <= set(suite_whatif.SCENARIOS)
        assert r["predicted_change"]["class=cpu=0.5"] < 0  # halving CPU work shortens the steps
    assert w["loaded"]["predicted_change"] == pytest.approx(w["in_memory"]["predicted_change"], abs=0.05)
    assert w["snapshot_load_s"] > 0 and w["snapshot_mb"] > 0
    json.dumps(w)
    assert "loaded" not in suite_whatif.measure_whatif(a, loaded=False)


def test_child_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert suite_analyze.child_main([str(TRACE), "--whatif"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    rep = json.loads(line)
    assert rep["peak_rss_mb"] >= rep["baseline_rss_mb"] > 0
    assert rep["whatif"]["loaded"]["n_scenarios"] >= 2


def test_tables_render(measured: tuple[Any, dict[str, Any]], tmp_path: Path) -> None:
    _, out = measured
    row = {"family": "corpus", "trace": "t", "file": "t.json.gz", "size_class": None, **out}
    row["peak_rss_mb"], row["read_mb_s"] = 100.0, 50.0
    text = suite_analyze._section([row, {"family": "synthetic", "trace": "x", "error": "boom"}], ["n"], True)
    assert "| `t` |" in text and "**boom**" in text
    a, _ = measured
    wrow = suite_whatif._row({**row, "whatif": suite_whatif.measure_whatif(a)})
    assert "| `t` |" in suite_whatif._section([wrow], [], False)
    ctx = Context(repo=Path("."), results=tmp_path, cache=tmp_path, corpus=None)
    t = Target("synthetic", "t", TRACE, size_class=1_000_000)
    hta = {"ok": True, "load_s": 1.0, "cp_s": 9.0, "report_s": 1.0, "peak_rss_mb": 10.0}
    hta.update(cp_cpu_s=8.0, report_cpu_s=1.0)
    ti = {**hta, "cp_s": 19.0}
    peers = {"hta": (hta, "ok"), "traceinsight": (ti, "ok")}
    hrow = suite_hta._row(t, {**row, "family": "synthetic"}, peers)
    assert hrow["ratio_analysis"] == pytest.approx(10.0 / out["analyze_s"])
    assert hrow["ratio_analysis_cpu"] == pytest.approx(9.0 / out["analyze_cpu_s"])
    assert hrow["ratio_analysis_ti"] == pytest.approx(20.0 / out["analyze_s"])
    assert hrow["traceinsight_total_s"] == pytest.approx(21.0)
    env = suite_hta.hta_env.HtaEnv(None, {}, "not installed")
    envs = {p.key: env for p in suite_hta.hta_env.PEERS}
    text = suite_hta._section([hrow], [], envs, ctx.quick)
    assert "| `t` |" in text and "| 21.00 |" in text and "ok; ok" in text


def test_hta_runner_helpers(tmp_path: Path) -> None:
    assert hta_runner.trace_rank(TRACE) == 0
    p = tmp_path / "r.json"
    p.write_text('{"distributedInfo": {"backend": "nccl", "rank": 3}, "traceEvents": []}')
    assert hta_runner.trace_rank(p) == 3
    assert hta_runner.first_line(ValueError("bad thing\nmore")) == "ValueError: bad thing"


def test_store_suite_tables() -> None:
    w = {"store": "ladybug", "trace": "corpus t", "rows": 10, "all_rows": 14, "goal_rows_per_s": 1_000_000}
    writes = [
        {
            **w,
            "kind": "write",
            "pass": 1,
            "seconds": 2.0,
            "rows_per_s": 5.0,
            "all_rows_per_s": 7.0,
            "ok": False,
        },
        {
            **w,
            "kind": "write",
            "pass": 2,
            "seconds": 1.0,
            "rows_per_s": 10.0,
            "all_rows_per_s": 14.0,
            "ok": False,
        },
    ]
    floor = {**w, "kind": "floor", "seconds": 0.5, "rows_per_s": 20.0}
    table = suite_store.write_table(writes)
    assert "| ladybug | `corpus t` | 2 | 10 | 1.00 | 10 ✗ | 1,000,000 | 14 | 14 |" in table
    assert "| keys only | 10 | 0.50 | 20 | 50% |" in suite_store.floor_table([floor], writes)
    assert suite_store.verdicts(writes) == [
        "ladybug: goal 1,000,000 rows/s **NOT met**, best pass 10 (corpus)."
    ]
    fast = {**floor, "rows_per_s": 2e6}
    assert suite_store.floor_notes([fast]) == []
    assert "with the model's properties alone" in suite_store.floor_notes([{**floor, "properties": True}])[0]
