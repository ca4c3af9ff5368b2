"""What-if scenarios: exact expectations on synthetic steps and real traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ctda.analysis.engine import Analysis, analyze
from ctda.analysis.report import build
from ctda.ingest.reader import read_trace
from ctda.whatif import compare as cmp
from ctda.whatif.export import write_perfetto
from ctda.whatif.opportunities import rank
from ctda.whatif.scenario import run
from ctda.whatif.select import Override, SelectionError, from_rows, parse_remove, parse_scale
from tests import synth
from tests.conftest import CORPUS, DATA, SKIP_CORPUS


def _a(tmp_path: Path, events: list[dict]) -> Analysis:
    return analyze(read_trace(synth.write(tmp_path / "t.json", events)))


GAP_FREE = [
    synth.cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
    synth.cpu("a", 0, 40),
    synth.cpu("a_inner", 10, 20),
    synth.cpu("b", 40, 60),
]


@pytest.fixture(scope="module")
def real() -> Analysis:
    return analyze(read_trace(DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"))


def test_identity_scenario_reproduces_the_base(real: Analysis) -> None:
    sc = run(real, [parse_scale(real, "name~.*=1")])
    assert np.array_equal(sc.timing.time, real.timing.time)
    assert sc.analysis.charges.equals(real.charges)
    st = sc.step_times()
    assert (st.delta_ns == 0).all()


@pytest.mark.parametrize("f", [0.5, 0.25, 2.0])
def test_scaling_every_duration_scales_a_gap_free_step(tmp_path: Path, f: float) -> None:
    a = _a(tmp_path, GAP_FREE)
    sc = run(a, [parse_scale(a, f"name~.*={f}")])
    assert int(sc.step_times().predicted_ns.iloc[0]) == round(100_000 * f)


def test_scaling_within_slack_leaves_the_step_unchanged(real: Analysis) -> None:
    slack = real.timing.slack[0 : 2 * real.nodes.n : 2]
    on = set(real.charges.event[real.charges.event >= 0].tolist())
    dur = real.nodes.end - real.nodes.ts
    # an off-path leaf with room to grow: grow it by less than its slack
    cand = [i for i in np.flatnonzero((slack > 10_000) & (dur > 0)) if i not in on]
    assert cand
    i = int(cand[0])
    factor = 1 + (slack[i] - 1) / dur[i] * 0.9
    sc = run(real, [Override("grow", np.array([i]), factor=float(factor))])
    base = real.window_bounds()
    pred = sc.analysis.window_bounds()
    assert np.array_equal(base[1] - base[0], pred[1] - pred[0])


def test_faster_kernels_shorten_an_elastic_wait(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
        synth.runtime("cudaLaunchKernel", 5, 5, corr=1),
        synth.kernel("gemm", 12, 80, corr=1),
        synth.runtime("cudaDeviceSynchronize", 15, 80, corr=2),
    ]
    a = _a(tmp_path, events)
    sc = run(a, [parse_scale(a, "cat=kernel=0.5")])
    # the kernel ends 40us earlier; the sync returns 1us after it (calibrated latency)
    assert int(sc.step_times().predicted_ns.iloc[0]) == 100_000 - 40_000


def test_rows_and_shorthand_select_the_same_scenario(real: Analysis) -> None:
    by_scale = run(real, [parse_scale(real, "name~^aten::=0.5")])
    uids = real.nodes.uid[np.flatnonzero(real.table.decoded("name", real.nodes.uid).astype(str) != "")]
    names = real.table.decoded("name", uids).astype(str)
    rows = [{"uid": int(u), "factor": 0.5} for u, n in zip(uids, names) if n.startswith("aten::")]
    by_rows = run(real, from_rows(real, rows, "rows"))
    assert np.array_equal(by_scale.timing.time, by_rows.timing.time)
    dur_rows = [
        {"uid": int(u), "dur": float(real.table.col("dur_ns")[u]) / 2000} for u in (r["uid"] for r in rows)
    ]
    by_dur = run(real, from_rows(real, dur_rows, "durs"))
    assert np.abs(by_dur.timing.time - by_scale.timing.time).max() <= 2_000 * len(rows)


def test_bad_selections_are_reported(real: Analysis) -> None:
    with pytest.raises(SelectionError, match="matches no event"):
        parse_scale(real, "name~^no_such_op$=0.5")
    with pytest.raises(SelectionError, match="cannot parse"):
        parse_scale(real, "name=0.5")
    with pytest.raises(SelectionError, match="unknown class"):
        parse_scale(real, "class=quantum=0")
    with pytest.raises(SelectionError, match="uid"):
        from_rows(real, [{"x": 1}], "q")


def test_remove_zeroes_inclusive_time(real: Analysis) -> None:
    sc = run(real, [parse_remove(real, "^Optimizer.step")])
    opt = np.flatnonzero(real.table.decoded("name", real.nodes.uid).astype(str) == "Optimizer.step#SGD.step")
    assert len(opt)
    t = sc.timing.time
    assert (t[2 * opt + 1] - t[2 * opt] == 0).all()
    assert sc.step_times().delta_ns.sum() < 0


def test_perfetto_export_reads_back_with_predicted_times(real: Analysis, tmp_path: Path) -> None:
    sc = run(real, [parse_scale(real, "name~hipLaunchKernel=0.1")])
    out = tmp_path / "pred.json.gz"
    write_perfetto(sc.analysis, out, name="fast launches")
    back = read_trace(out)
    x = np.flatnonzero(back.decoded("ph") == "X")
    n = real.nodes
    t = sc.timing.time
    assert len(x) == n.n
    assert np.array_equal(back.col("ts_ns")[x], t[0 : 2 * n.n : 2])
    assert np.array_equal(back.col("dur_ns")[x], t[1 : 2 * n.n : 2] - t[0 : 2 * n.n : 2])
    doc = json.loads(__import__("gzip").decompress(out.read_bytes()))
    crit = [e for e in doc["traceEvents"] if e.get("args", {}).get("critical")]
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "critical_path"]
    assert crit and flows and len(flows) % 2 == 0
    # and ctda can analyse its own export
    assert len(analyze(back).windows) == len(real.windows)


def test_opportunities_rank_by_saving(real: Analysis) -> None:
    df = rank(real, top=5)
    assert {"name", "class"} <= set(df.group)
    assert (df.saving_2x_ns.diff().dropna() <= 0).all()
    assert (df.saving_removed_ns >= df.saving_2x_ns - 1).all()
    top = df.iloc[0]
    assert top.saving_2x_ns > 0


def test_compare_aligns_names_and_call_paths(real: Analysis) -> None:
    sc = run(real, [parse_scale(real, "name~hipLaunchKernel=0.5")])
    c = cmp.compare(cmp.Side("base", real), cmp.Side("pred", sc.analysis, predicted=True))
    assert c.summary.set_index("metric").loc["critical path ns", "delta"] < 0
    hot = c.hotspots.set_index("name")
    assert hot.loc["hipLaunchKernel", "delta_ns"] < 0
    assert any("hipLaunchKernel" in p for p in c.call_paths.call_path)
    assert c.prediction_error["error_ns"] == c.summary.set_index("metric").loc["mean step ns", "delta"]


@SKIP_CORPUS
@pytest.mark.corpus
def test_gil_before_after_prediction() -> None:
    """The background-thread change expressed on "before", compared with the real "after" run."""
    assert CORPUS is not None
    gen = CORPUS / "generated"
    before = analyze(read_trace(gen / "e_cnn_bgthread_before.pt.trace.json.gz"))
    after = analyze(read_trace(gen / "f_cnn_bgthread_after.pt.trace.json.gz"))
    sc = run(before, [parse_scale(before, f"name~python_heavy_stats={1 / 3.7}")])
    c = cmp.compare(cmp.Side("before@faster", sc.analysis, predicted=True), cmp.Side("after", after))
    measured = np.mean(
        [s["wall_ms"] for s in json.loads((gen / "f_cnn_bgthread_after.steps.json").read_text())["steps"][2:]]
    )
    pe = c.prediction_error
    assert abs(pe["measured_mean_step_ns"] / 1e6 - measured) < 1.0  # the trace's steps match the stopwatch
    # the prediction moves most of the way from before (~330 ms) to after (~171 ms)
    base = build(before).steps.duration_ns.mean()
    assert pe["predicted_mean_step_ns"] < base - 0.6 * (base - pe["measured_mean_step_ns"])
    assert abs(pe["relative_error"]) < 0.30


def test_snapshot_round_trip_keeps_scenarios_identical(tmp_path: Path) -> None:
    from ctda.analysis import snapshot

    events = [
        synth.cpu("ProfilerStep#1", 0, 200, cat="user_annotation"),
        synth.cpu("main_py", 5, 150, cat="python_function"),
        synth.cpu("aten::mm", 10, 30),  # main's Python after it overlaps the bg thread's Python
        synth.cpu("bg_loop", 20, 90, tid=synth.AUX, cat="python_function"),
        synth.cpu("bg_inner", 30, 40, tid=synth.AUX, cat="python_function"),
    ]
    a = _a(tmp_path, events)
    b = snapshot.load(snapshot.dump(a))
    assert len(a.contention) == len(b.contention) > 0
    sa = run(a, [parse_scale(a, "name~bg_loop=0.25")])
    sb = run(b, [parse_scale(b, "name~bg_loop=0.25")])
    assert np.array_equal(sa.timing.time, sb.timing.time)
    assert sa.analysis.charges.equals(sb.analysis.charges)


def _format_1(a: Analysis, tmp_path: Path) -> bytes:
    """A snapshot as the first ctda release wrote it (Parquet events, npz graph)."""
    import io
    import zipfile
    from dataclasses import asdict

    from ctda.analysis import snapshot

    g, c = a.graph, a.calibration
    arrays = io.BytesIO()
    np.savez_compressed(
        arrays, **{k: getattr(g, k) for k in snapshot.ARRAYS}, weight=c.weight, binding=c.binding, gap=c.gap
    )
    a.table.write_parquet(tmp_path / "events.parquet")
    meta = {
        "format": 1,
        "rule_names": g.rule_names,
        "dropped": g.dropped,
        "options": asdict(a.options),
        "windows": [asdict(w) for w in a.windows],
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.write(tmp_path / "events.parquet", "events.parquet")
        z.writestr("graph.npz", arrays.getvalue())
        z.writestr("meta.json", json.dumps(meta))
    return out.getvalue()


def test_snapshots_of_both_formats_load_the_same_run(tmp_path: Path) -> None:
    """Runs stored by the first release (format 1) still load, identical to format 2."""
    import io
    import zipfile

    from ctda.analysis import snapshot

    a = analyze(read_trace(DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"))
    new, old = snapshot.load(snapshot.dump(a)), snapshot.load(_format_1(a, tmp_path))
    for b in (new, old):
        assert b.table.events.equals(a.table.events)
        assert np.array_equal(b.graph.src, a.graph.src) and np.array_equal(
            b.calibration.weight, a.calibration.weight
        )
        assert b.calibration.binding.dtype == bool and b.calibration.weight.flags.writeable
        assert np.array_equal(b.timing.time, a.timing.time)
        assert b.charges.equals(a.charges)
    # a format-2 snapshot written before the flows were kept binds them again, the same
    blob = snapshot.dump(a)
    assert len(a.table.flows) > 0 and "flows.arrow" in zipfile.ZipFile(io.BytesIO(blob)).namelist()
    without = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as src, zipfile.ZipFile(without, "w") as dst:
        for member in src.namelist():
            if member != "flows.arrow":
                dst.writestr(member, src.read(member))
    for b in (snapshot.load(blob), snapshot.load(without.getvalue()), new, old):
        assert b.table.flows.equals(a.table.flows)
    future = io.BytesIO()
    with zipfile.ZipFile(future, "w") as z:
        z.writestr("meta.json", json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="format 99"):
        snapshot.load(future.getvalue())
