"""The UI's tables and figures, computed straight from analyses of real traces (no Streamlit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.analysis.report import build
from ctda.ingest.reader import read_trace
from ctda.ui import bars, canvas, frames, lanes, picking
from ctda.ui.rules import rule_doc, rule_docs, summary
from ctda.whatif.scenario import run
from ctda.whatif.select import parse_scale

DATA = Path(__file__).parent / "data" / "hta"


@pytest.fixture(scope="module")
def minitoy() -> Analysis:
    return analyze(read_trace(DATA / "rocm62_mi250_minitoy_train.json.gz"))


@pytest.fixture(scope="module")
def simple() -> Analysis:
    return analyze(read_trace(DATA / "simple_add_param_benchmark.json.gz"))


def test_steps_charge_each_window_exactly(minitoy: Analysis) -> None:
    steps = frames.steps(minitoy)
    assert list(steps.window) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert np.allclose(steps.cp_ms, steps.duration_ms)
    assert steps.bound_by.iloc[0] == "launch_overhead"
    cw = frames.class_by_window(minitoy)
    assert np.allclose(cw.groupby("window").ms.sum().to_numpy(), steps.duration_ms)
    by = frames.by_class(minitoy)
    assert by.share.sum() == pytest.approx(1.0) and by["class"].iloc[0] == "launch_overhead"
    assert frames.breakdown_text(by).startswith("launch_overhead 71%")


def test_timeline_draws_critical_events_first_within_the_cap(simple: Analysis) -> None:
    names = frames.Names(simple)
    full = frames.timeline(simple, 0, 10**6, names)
    assert full.shown == full.total and full.critical > 0
    assert full.events.on_cp.sum() == full.critical
    capped = frames.timeline(simple, 0, 100, names)
    assert capped.shown == 100 and capped.total == full.total
    # every lane keeps its longest few (no lane is drawn empty); critical events fill the
    # rest of the budget while they fit, then the longest of the others
    lanes = full.events.lane.value_counts()
    quota = int(100 * picking.LANE_SHARE) // len(lanes)
    drawn = capped.events.lane.value_counts()
    assert all(drawn.get(lane, 0) >= min(quota, n) for lane, n in lanes.items())
    reserved = int(sum(min(quota, n) for n in lanes))
    assert capped.events.on_cp.sum() >= min(full.critical, 100 - reserved)
    longest = full.events.sort_values("dur_ms", ascending=False).groupby("lane").head(quota)
    assert set(longest.event) <= set(capped.events.event)
    # the path is the same however many events are drawn, and stays inside the window
    assert capped.path.equals(full.path)
    assert capped.path.x.min() >= capped.start_ms - 1e-9 and capped.path.x.max() <= capped.end_ms + 1e-9
    # one lane per thread / stream that has events in the window; GPU lanes after CPU ones
    gpu = [lane.is_gpu for lane in capped.lanes]
    assert gpu == sorted(gpu) and any(gpu) and not all(gpu)
    tops = [lane.top for lane in capped.lanes]
    assert tops == sorted(tops)


def test_lane_quota_is_each_lanes_longest_ties_to_the_earlier() -> None:
    """The per-lane selection equals a full sort by (lane, longest first, earlier first),
    ties at the quota's edge included."""
    rng = np.random.default_rng(7)
    n = 5000
    lanes = rng.integers(0, 6, n).astype(np.int64)
    lanes[lanes == 3] = 5  # a lane with no events
    dur = rng.integers(0, 40, n).astype(np.int64)  # many equal durations
    cand = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64)
    counts = np.bincount(lanes)
    for quota in (1, 7, 300, n):
        order = np.lexsort((-dur, lanes))
        rank = np.arange(n) - np.searchsorted(lanes[order], lanes[order], side="left")
        want = cand[order[rank < quota]]
        got = picking._lane_longest(cand, lanes, dur, counts, quota)
        assert np.array_equal(got, want), quota


def test_timeline_of_a_scenario_uses_its_times(minitoy: Analysis) -> None:
    sc = run(minitoy, [parse_scale(minitoy, "class=launch_overhead=0")])
    base = frames.timeline(minitoy, 0, 1000, frames.Names(minitoy))
    pred = frames.timeline(sc.analysis, 0, 1000, frames.Names(sc.analysis))
    assert pred.end_ms - pred.start_ms < base.end_ms - base.start_ms
    assert pred.critical > 0 and pred.path.x.max() <= pred.end_ms + 1e-9


def test_hotspots_add_slack_and_drill_down(minitoy: Analysis) -> None:
    names = frames.Names(minitoy)
    wins = frames.Windows(minitoy)
    sel = list(range(len(minitoy.windows)))
    rep = build(minitoy, top=1000)
    hot = frames.hotspots(minitoy, rep, names, wins, sel)
    assert hot.cp_ms.sum() == pytest.approx(rep.total_ns / 1e6)
    top = hot.iloc[0]
    assert top["name"] == "hipLaunchKernel" and top.min_slack_ms == 0.0
    inst = frames.instances(minitoy, names, wins, "hipLaunchKernel", sel)
    assert len(inst) == top["count"] and inst.cp_ms.sum() == pytest.approx(top.cp_ms)
    event = int(inst.event.iloc[0])
    edges = frames.event_edges(minitoy, names, event)
    assert set(edges.point) == {"start", "end"} and set(edges.direction) == {"waits for", "released"}
    assert edges.on_cp.any() and edges.binding.any()
    assert all(r in rule_docs() for r in edges.rule)
    charged = frames.event_charges(minitoy, event)
    assert charged.ms.sum() == pytest.approx(inst.cp_ms.iloc[0])
    facts = frames.event_facts(minitoy, names, event)
    assert facts["name"] == "hipLaunchKernel" and facts["class"] == "launch_overhead"


def test_wait_rows_drill_to_their_edges(minitoy: Analysis) -> None:
    names = frames.Names(minitoy)
    waits = frames.gap_instances(minitoy, names, "(cross-thread wait)", [0, 1])
    assert len(waits) > 0 and set(waits.type) == {"cross_thread"}
    assert waits.why.str.len().min() > 10
    assert frames.gap_instances(minitoy, names, "(no such wait)", [0]).empty


def test_rule_docs_cover_every_rule_of_both_modes(minitoy: Analysis) -> None:
    hta = analyze(minitoy.table, AnalysisOptions(mode="hta"))
    for a in (minitoy, hta):
        for rule in a.graph.rule_names:
            assert not rule_doc(rule).startswith("(no documentation"), rule
            assert "\n" not in summary(rule)


def test_choices_for_whatif(minitoy: Analysis) -> None:
    assert frames.classes_present(minitoy)[0] == "launch_overhead"
    cats = frames.categories(minitoy)
    assert "cpu_op" in cats and "cuda_runtime" in cats


def test_figures_build(minitoy: Analysis) -> None:
    names = frames.Names(minitoy)
    tl = frames.timeline(minitoy, 0, 1000, names)
    chart = lanes.chart(tl)
    assert set(chart.data.kind) == {"bar", "band", "link", "frame"}
    assert set(chart.data.path.dropna()) == {"critical", "off the path"}
    assert len(chart.spec["layer"]) == 4
    assert bars.bound_by(frames.by_class(minitoy)).spec["layer"][0]["mark"]["type"] == "bar"
    assert canvas.steps(frames.class_by_window(minitoy), 0).data.selected.any()
