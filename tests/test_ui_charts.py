"""The critical-path timeline as drawn: its own path style, lanes sized by content, GPU
work visible, one unit per tooltip (on real traces)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("plotly")

from ctda.analysis.engine import AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from ctda.ui import charts, frames
from tests.conftest import CORPUS, SKIP_CORPUS

MINITOY = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


def drawn(fig: object, tl: frames.Timeline) -> dict[str, int]:
    """Bars drawn per lane label (by the y of each bar's centre)."""
    rows = charts.rows_of(tl)
    out: dict[str, int] = {}
    labels = {lane.lane: lane.label for lane in tl.lanes}
    for t in fig.data:  # type: ignore[attr-defined]
        if t.type != "bar":
            continue
        for y in np.asarray(t.y, dtype=float):
            lane = next(
                x for x in rows.lanes if rows.top[x] - 0.01 <= y <= rows.top[x] + rows.height[x] + 0.01
            )
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
    fig = charts.timeline(tl)
    per_lane = drawn(fig, tl)
    assert per_lane["GPU 0 stream 7"] >= 100 and per_lane["GPU 0 stream 40"] >= 7
    assert sum(per_lane.values()) == 4000


def test_path_style_lanes_and_tooltips() -> None:
    a = analyze(read_trace(MINITOY), AnalysisOptions())
    tl = frames.timeline(a, 0, 1000, frames.Names(a))
    fig = charts.timeline(tl)
    rows = charts.rows_of(tl)
    # GPU stream rows are taller than a CPU call level
    gpu = [lane for lane in tl.lanes if lane.is_gpu]
    cpu = [lane for lane in tl.lanes if not lane.is_gpu]
    assert gpu and cpu
    assert all(rows.row[lane.lane] == charts.GPU_ROW for lane in gpu)
    assert all(rows.height[lane.lane] == lane.rows for lane in cpu)
    # the path has its own colour, used by no class
    assert charts.PATH_COLOR not in charts.CLASS_COLORS.values()
    assert charts.CLASS_COLORS["cpu_gap"] != charts.CLASS_COLORS["gpu_gap"]
    # connectors only where the path changes lane: each segment joins two different lanes
    conn = next(t for t in fig.data if t.name == "path changes lane")
    xs, ys = list(conn.x), list(conn.y)
    assert len(xs) % 3 == 0 and len(xs) >= 3 and all(v is None for v in xs[2::3])

    def lane_at(y: float) -> int:
        return next(x for x in rows.lanes if rows.top[x] - 0.01 <= y <= rows.top[x] + rows.height[x] + 0.01)

    for k in range(0, len(ys), 3):
        assert lane_at(ys[k]) != lane_at(ys[k + 1])
    # critical bars are outlined in the path colour; the rest are not
    for t in fig.data:
        if t.type == "bar" and t.name.startswith("critical: "):
            assert t.marker.line.color == charts.PATH_COLOR
        elif t.type == "bar":
            assert t.marker.line.width == 0
    # one unit per tooltip
    texts = [s for t in fig.data if t.type == "bar" for s in t.hovertext]
    assert texts and all(" ms" in s and "µs" not in s and " us" not in s for s in texts)


def test_margins_are_sized_here_so_the_browser_draws_once() -> None:
    # plotly.js grows a margin by drawing the whole figure again: every chart of the pages
    # sizes its own margins instead, wide enough for its labels
    from ctda.ui import margins

    a = analyze(read_trace(MINITOY), AnalysisOptions())
    tl = frames.timeline(a, 0, 1000, frames.Names(a))
    by = frames.by_class(a)
    per = frames.class_by_window(a)
    pair = by.assign(a_ms=by.cp_ms, b_ms=by.cp_ms / 2)
    steps = per.drop_duplicates("window").assign(a_ms=1.0, b_ms=2.0)
    figs = {
        "timeline": charts.timeline(tl),
        "breakdown": charts.breakdown(by),
        "steps": charts.steps(per, 0),
        "side_by_side": charts.side_by_side(pair, "class", "a", "b", "t"),
        "step_compare": charts.step_compare(steps, "a", "b", "t"),
        "deltas": charts.deltas(pair.assign(delta_ms=1.0), "class", "t"),
    }
    for name, fig in figs.items():
        lay = fig.layout
        assert lay.margin.autoexpand is False, name
        assert lay.xaxis.automargin is False and lay.yaxis.automargin is False, name
        assert lay.margin.t >= margins.TITLE_PX, name
    labels = [lane.label for lane in tl.lanes]
    assert figs["timeline"].layout.margin.l >= margins.text_px(labels)
    assert figs["breakdown"].layout.margin.l >= margins.text_px(by["class"])
    # a legend with more entries than fit in a row gets more room above the plot
    assert margins.legend_rows(["x" * 30] * 12) > 1 == margins.legend_rows(["a", "b"])
    assert figs["timeline"].layout.margin.t >= margins.TITLE_PX + margins.LINE_PX
