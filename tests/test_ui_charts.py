"""The critical-path timeline as drawn: its own path style, lanes sized by content, GPU
work visible, one unit per tooltip (on real traces); the small charts, on a canvas too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")

from ctda.analysis.engine import AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from ctda.ui import canvas, charts, frames, lanes
from tests.conftest import CORPUS, SKIP_CORPUS, axis_labels

MINITOY = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


def drawn(chart: lanes.Chart, tl: frames.Timeline) -> dict[str, int]:
    """Bars drawn per lane label (by the y of each bar's centre)."""
    rows = lanes.rows_of(tl)
    labels = {lane.lane: lane.label for lane in tl.lanes}
    bars = chart.data[chart.data.kind == "bar"]
    out: dict[str, int] = {}
    for y in ((bars.y0 + bars.y1) / 2).tolist():
        lane = next(x for x in rows.lanes if rows.top[x] - 0.01 <= y <= rows.top[x] + rows.height[x] + 0.01)
        out[labels[lane]] = out.get(labels[lane], 0) + 1
    return out


@SKIP_CORPUS
def test_gpu_streams_are_drawn_even_when_the_path_stays_on_the_cpu() -> None:
    # a DDP step whose 7,695 critical events are all CPU work: with critical events first,
    # 4,000 bars went to the CPU threads and both GPU streams were drawn empty
    assert CORPUS is not None
    a = analyze(read_trace(CORPUS / "hta" / "ddp_nccl_allreduce_ws2_rank0.json.gz"), AnalysisOptions())
    tl = frames.timeline(a, 0, 4000, frames.Names(a))
    assert tl.critical == 7695 and tl.shown == 4000
    per_lane = drawn(lanes.chart(tl), tl)
    assert per_lane["GPU 0 stream 7"] >= 100 and per_lane["GPU 0 stream 40"] >= 7
    assert sum(per_lane.values()) == 4000


def test_path_style_lanes_and_tooltips() -> None:
    a = analyze(read_trace(MINITOY), AnalysisOptions())
    tl = frames.timeline(a, 0, 1000, frames.Names(a))
    chart = lanes.chart(tl)
    data = chart.data
    rows = lanes.rows_of(tl)
    # GPU stream rows are taller than a CPU call level, and GPU lanes have a band behind them
    gpu = [lane for lane in tl.lanes if lane.is_gpu]
    cpu = [lane for lane in tl.lanes if not lane.is_gpu]
    assert gpu and cpu
    assert all(rows.row[lane.lane] == lanes.GPU_ROW for lane in gpu)
    assert all(rows.height[lane.lane] == lane.rows for lane in cpu)
    assert (data.kind == "band").sum() == len(gpu)
    # the path has its own colour, used by no class
    assert charts.PATH_COLOR not in charts.CLASS_COLORS.values()
    assert charts.CLASS_COLORS["cpu_gap"] != charts.CLASS_COLORS["gpu_gap"]
    # connectors only where the path changes lane: each segment joins two different lanes
    links = data[data.kind == "link"]
    assert len(links) >= 1

    def lane_at(y: float) -> int:
        return next(x for x in rows.lanes if rows.top[x] - 0.01 <= y <= rows.top[x] + rows.height[x] + 0.01)

    assert all(lane_at(y0) != lane_at(y1) for y0, y1 in zip(links.y0, links.y1))
    ends = links[["x0", "x1"]].to_numpy()
    assert (ends >= tl.start_ms - 1e-9).all() and (ends <= tl.end_ms + 1e-9).all()
    # critical bars wide enough to show a fill are outlined (in the path colour); the rest not
    bars = data[data.kind == "bar"]
    crit = bars.path == "critical"
    assert crit.any() and (~crit).any()
    assert (bars.outline[~crit] == 0).all() and (bars.outline[crit] > 0).any()
    layer = next(x for x in chart.spec["layer"] if x["transform"][0]["filter"] == "datum.kind === 'bar'")
    assert layer["mark"]["stroke"] == charts.PATH_STROKE
    # each class in its colour; off the path faded
    enc = layer["encoding"]
    assert dict(zip(enc["color"]["scale"]["domain"], enc["color"]["scale"]["range"])) == {
        c: charts.CLASS_COLORS[c] for c in set(bars["class"])
    }
    assert enc["opacity"]["scale"]["range"] == [1.0, lanes.FADED]
    # lanes labelled at their centres
    axis = enc["y"]["axis"]
    assert axis_labels(axis) == [lane.label for lane in tl.lanes]
    centre = {lane.label: rows.top[lane.lane] + rows.height[lane.lane] / 2 for lane in tl.lanes}
    assert axis["values"] == pytest.approx([centre[lane.label] for lane in tl.lanes], abs=1e-4)
    # one unit per tooltip
    tips = enc["tooltip"]
    assert [t["field"] for t in tips] == ["event", "lane", "start_ms", "dur_ms", "class", "path"]
    assert all(t["title"].endswith("(ms)") and t["format"] == canvas.MS_FORMAT for t in tips[2:4])
    assert bars.dur_ms.to_numpy() == pytest.approx(tl.events.dur_ms.to_numpy())
    assert chart.title.startswith(tl.label + ": ") and chart.title.endswith(" ms")


def test_bound_by_bars_and_deltas_on_a_canvas() -> None:
    """The pages' small charts are Vega-Lite on a canvas, like the timelines: no chart
    library for the browser to load besides the one every page has."""
    from ctda.ui import bars

    a = analyze(read_trace(MINITOY), AnalysisOptions())
    by = frames.by_class(a)
    chart = bars.bound_by(by)
    assert chart.spec["usermeta"] == canvas.CANVAS
    # a bar per class in the table's order, in its class colour, labelled with its share
    assert list(chart.data.row) == list(by["class"])
    np.testing.assert_allclose(chart.data.ms, by.cp_ms)
    bar, text = chart.spec["layer"]
    assert bar["encoding"]["y"]["sort"] == list(by["class"])
    scale = bar["encoding"]["color"]["scale"]
    assert scale["range"] == [charts.CLASS_COLORS[c] for c in scale["domain"]]
    assert list(chart.data.label) == [f"{s:.0%}" for s in by.share]
    assert text["mark"]["color"] == charts.PATH_STROKE  # the theme's text colour, in the browser
    # deltas: zero changes left out, faster green and slower red, the full name on hover
    d = pd.DataFrame({"name": ["a", "b", "c"], "delta_ms": [1.5, 0.0, -2.0]})
    delta = bars.deltas(d, "name", "t")
    assert list(delta.data.row) == ["a", "c"] and list(delta.data.faster) == [False, True]
    assert delta.spec["layer"][0]["encoding"]["color"]["condition"]["value"] == bars.FASTER


def test_series_keep_each_bins_peak() -> None:
    from ctda.ui import bars

    ts = np.array([0, 10, 20, 1_000_000, 1_500_000, 2_999_999], dtype=np.int64)
    ms, peak = bars.binned_peaks(ts, np.array([1, 5, 2, 7, 3, 4]), 0, 3_000_000, 3)
    assert ms.tolist() == [0.0, 1.0, 2.0] and peak.tolist() == [5, 7, 4]
    # an empty bin draws nothing (a gap, not a zero)
    ms, peak = bars.binned_peaks(np.array([0, 2_500_000]), np.array([1, 2]), 0, 3_000_000, 3)
    assert ms.tolist() == [0.0, 2.0] and peak.tolist() == [1, 2]


def test_steps_chart_stacks_classes_and_outlines_the_picked_step() -> None:
    a = analyze(read_trace(MINITOY), AnalysisOptions())
    per = frames.class_by_window(a)
    chart = canvas.steps(per, 1)
    data = chart.data
    # one bar segment per (step, class) with its ms; the steps in window order on the axis
    assert len(data) == len(per) and data.ms.sum() == pytest.approx(per.ms.sum())
    [bars] = chart.spec["layer"]
    assert bars["encoding"]["x"]["sort"] == ["ProfilerStep#1", "ProfilerStep#2"]
    # the stack follows the classes' fixed order, in their colours
    stack = data.drop_duplicates("class").set_index("class")["stack"]
    assert all(stack[c] == canvas.CLASSES.index(c) for c in stack.index)
    assert bars["encoding"]["color"]["scale"]["range"] == [
        charts.CLASS_COLORS[c] for c in bars["encoding"]["color"]["scale"]["domain"]
    ]
    # only the picked step is outlined
    assert set(data[data.selected].step) == {"ProfilerStep#2"}
    assert bars["encoding"]["strokeWidth"]["condition"] == {"test": "datum.selected", "value": 2}
    # two windows of one label stay two bars
    twice = canvas.steps(per.assign(label="trace"), None).data
    assert set(twice.step) == {"trace (0)", "trace (1)"} and not twice.selected.any()


def test_step_compare_pairs_the_two_sides_per_step() -> None:
    df = pd.DataFrame({"label": ["s1", "s2", "s2"], "a_ms": [1.0, 2.0, 3.0], "b_ms": [0.5, 1.5, 2.5]})
    chart = canvas.step_compare(df, "observed", "predicted", "Step time")
    d = chart.data
    assert d.step.tolist() == ["s1", "s1", "s2 (1)", "s2 (1)", "s2 (2)", "s2 (2)"]
    assert d.side.tolist() == ["observed", "predicted"] * 3
    assert d.ms.tolist() == [1.0, 0.5, 2.0, 1.5, 3.0, 2.5]
    assert chart.spec["layer"][0]["encoding"]["x"]["sort"] == ["s1", "s2 (1)", "s2 (2)"]


def test_pairs_keep_the_given_order_a_before_b() -> None:
    df = pd.DataFrame({"class": ["gpu_compute", "cpu"], "a_ms": [4.0, 1.0], "b_ms": [2.0, 1.5]})
    chart = canvas.pairs(df, "class", "observed", "predicted", "Bound by")
    d = chart.data
    assert d.row.tolist() == ["gpu_compute", "gpu_compute", "cpu", "cpu"]
    assert d.side.tolist() == ["observed", "predicted"] * 2
    assert d.ms.tolist() == [4.0, 2.0, 1.0, 1.5]
    enc = chart.spec["layer"][0]["encoding"]
    assert enc["y"]["sort"] == ["gpu_compute", "cpu"] and enc["yOffset"]["sort"] == ["observed", "predicted"]
    assert (
        enc["color"]["scale"]["domain"] == ["observed", "predicted"]
        and enc["color"]["legend"]["columns"] == 1
    )
    assert chart.title == "Bound by"


def test_row_labels_survive_quotes_backslashes_and_unicode() -> None:
    # lane labels come from thread names in the trace: the axis expression quotes them
    labels = ['thread 7 ("io")', "back\\slash", "GPU 0 · stream 7", "it's"]
    y = canvas.rows_y(-0.5, 4.5, [(i + 0.5, label) for i, label in enumerate(labels)])
    assert axis_labels(y["axis"]) == labels
