"""The timeline's critical-path polyline: the compiled pass against an array-at-a-time oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctda.analysis.engine import Analysis, analyze
from ctda.ingest.reader import read_trace
from ctda.ui import frames, polyline

DATA = Path(__file__).parent / "data" / "hta"
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def oracle(x0: F64, x1: F64, y: F64, max_points: int) -> tuple[F64, F64, int]:
    """The picture by whole-array steps: interleave, drop collinear points, M4 bins."""
    xs, ys = np.empty(2 * len(y)), np.empty(2 * len(y))
    xs[0::2], xs[1::2], ys[0::2], ys[1::2] = x0, x1, y, y
    keep = np.ones(len(ys), dtype=bool)
    keep[1:-1] = ~((ys[1:-1] == ys[:-2]) & (ys[1:-1] == ys[2:]))
    x, yy = xs[keep], ys[keep]
    n = len(x)
    if n <= max_points:
        return x, yy, n
    bins = max(max_points // 4, 1)
    span = float(x[-1] - x[0]) or 1.0
    b = np.minimum(((x - x[0]) / span * bins).astype(np.int64), bins - 1)
    first = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    last = np.r_[first[1:], n] - 1
    keep_at = [first, last]
    for reduce in (np.minimum, np.maximum):
        extreme = np.repeat(reduce.reduceat(yy, first), last - first + 1)
        hit = np.flatnonzero(yy == extreme)
        keep_at.append(hit[np.r_[True, b[hit[1:]] != b[hit[:-1]]]])
    out = np.unique(np.concatenate(keep_at))
    return x[out], yy[out], n


def line_of(t0: I64, t1: I64, rows: I64, budget: int) -> polyline.Polyline:
    """Stretches charged to events 0..m-1, each on one lane at row ``rows[i]``."""
    m = len(rows)
    return polyline.critical_polyline(
        (np.arange(m, dtype=np.int64), np.zeros(m, dtype=np.int64), t0, t1),
        (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), m),
        (np.zeros(m, dtype=np.int64), rows, np.zeros(1), 1 << 30),
        (int(t0.min(initial=0)), int(t1.max(initial=0)), 0),
        budget,
    )


def test_points_inside_a_run_of_one_row_are_dropped() -> None:
    t0, t1 = np.array([0, 1, 2, 3]) * 1_000_000, np.array([1, 2, 3, 4]) * 1_000_000
    line = line_of(t0, t1, np.array([0, 0, 0, 2]), 100)
    assert list(zip(line.x, line.y)) == [(0.0, 0.0), (3.0, 0.0), (3.0, 2.0), (4.0, 2.0)]
    assert line.full == 4


@pytest.mark.parametrize("max_points", [4, 7, 2000, 12_000])
def test_thinning_equals_the_array_version(max_points: int) -> None:
    rng = np.random.default_rng(max_points)
    dur = rng.integers(0, 500_000, 50_000)
    gap = rng.integers(0, 300_000, 50_000) * (rng.random(50_000) < 0.3)
    t0 = np.cumsum(dur + gap) - dur
    t1 = t0 + dur
    rows = rng.integers(0, 10, 50_000)
    rows[1000:3000] = 4  # a long run on one row
    line = line_of(t0, t1, rows, max_points)
    want_x, want_y, full = oracle(t0 / 1e6, t1 / 1e6, rows.astype(float), max_points)
    assert np.array_equal(line.x, want_x) and np.array_equal(line.y, want_y)
    assert line.full == full and len(line.x) <= max(max_points, 4)
    if max_points >= 2000:  # every row the path visits is still visited
        assert set(line.y) == set(rows.astype(float))


def test_a_path_within_the_budget_is_kept_whole() -> None:
    t0 = np.arange(5) * 1_000_000
    line = line_of(t0, t0 + 500_000, np.array([0, 1, 0, 1, 0]), 2000)
    assert line.full == 10 and len(line.x) == 10 and list(line.y[:4]) == [0.0, 0.0, 1.0, 1.0]


def test_empty_path() -> None:
    line = line_of(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 10)
    assert len(line.x) == 0 and line.full == 0


@pytest.fixture(scope="module")
def simple() -> Analysis:
    return analyze(read_trace(DATA / "simple_add_param_benchmark.json.gz"))


def test_timeline_path_equals_the_array_version_on_a_real_trace(simple: Analysis) -> None:
    a = simple
    for window in range(len(a.windows)):
        tl = frames.timeline(a, window, 1000, frames.Names(a))
        s, e = (int(v[window]) for v in a.window_bounds())
        ch = frames.window_charges(a, window)
        ev, edges = ch.event.to_numpy(), ch.edge.to_numpy()
        dst_ev, src_ev = a.graph.dst[edges] // 2, a.graph.src[edges] // 2
        at = np.where(ev >= 0, ev, np.where(dst_ev < a.nodes.n, dst_ev, src_ev))
        ok = at < a.nodes.n
        layout = frames.Layout(a, np.flatnonzero(a.nodes.lane >= -1))
        base = frames.t0(a)
        x0 = (np.clip(ch.t0.to_numpy()[ok], s, e) - base) / frames.MS
        x1 = (np.clip(ch.t1.to_numpy()[ok], s, e) - base) / frames.MS
        for budget in (12, frames.MAX_PATH_POINTS):
            want_x, want_y, full = oracle(x0, x1, layout.y(at[ok]), budget)
            got = polyline.critical_polyline(
                (ev, edges, ch.t0.to_numpy(), ch.t1.to_numpy()),
                (a.graph.src, a.graph.dst, a.nodes.n),
                (a.nodes.lane, a.nodes.depth, layout.top_of, frames.MAX_ROWS),
                (s, e, base),
                budget,
            )
            assert np.array_equal(got.x, want_x) and np.array_equal(got.y, want_y), window
            assert got.full == full
        assert tl.path_points > 100 and len(tl.path) == tl.path_points  # drawn whole here
