"""Property tests of the max-plus engine on random small timelines (hypothesis)."""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis, analyze
from ctda.analysis.propagate import replay
from ctda.ingest.reader import read_trace
from tests import synth


@st.composite
def timelines(draw: st.DrawFn) -> list[dict]:
    """Random CPU work on two threads plus kernels launched from the main thread."""
    events: list[dict] = []
    corr = 0
    for tid in (synth.MAIN, synth.AUX):
        t = float(draw(st.integers(0, 20)))
        for _ in range(draw(st.integers(1, 6))):
            dur = float(draw(st.integers(1, 30)))
            events.append(synth.cpu(f"op{tid}_{len(events)}", t, dur, tid=tid))
            if tid == synth.MAIN and draw(st.booleans()):
                corr += 1
                launch_ts = t + min(1.0, dur)
                events.append(synth.runtime("cudaLaunchKernel", launch_ts, max(dur - 1, 0.5), corr=corr))
                events.append(
                    synth.kernel(
                        f"k{corr}",
                        launch_ts + draw(st.integers(1, 10)),
                        float(draw(st.integers(1, 40))),
                        corr=corr,
                    )
                )
            t += dur + draw(st.integers(0, 15))
    # kernels on one stream must not overlap: push each after the previous
    kernels = sorted((e for e in events if e["cat"] == "kernel"), key=lambda e: e["ts"])
    for prev, nxt in pairwise(kernels):
        nxt["ts"] = max(nxt["ts"], prev["ts"] + prev["dur"])
    return events


def _analyze(events: list[dict]) -> Analysis:
    with tempfile.TemporaryDirectory() as d:
        table = read_trace(synth.write(Path(d) / "t.json", events))
    return analyze(table)


def _longest(a: Analysis, weight: np.ndarray) -> int:
    """Brute force: the longest SOURCE -> SINK path over every path (small graphs only)."""
    g = a.graph
    out: dict[int, list[int]] = {}
    for e in range(g.n_edges):
        out.setdefault(int(g.src[e]), []).append(e)
    best = -(2**62)
    stack = [(a.nodes.source, 0)]
    while stack:
        v, length = stack.pop()
        if v == a.nodes.sink:
            best = max(best, length)
            continue
        for e in out.get(v, []):
            stack.append((int(g.dst[e]), length + int(weight[e])))
    return best


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(timelines())
def test_backtracked_path_is_the_longest_path(events: list[dict]) -> None:
    a = _analyze(events)
    w = a.calibration.weight
    length = int(w[a.timing.path].sum())
    assert length == a.timing.span == _longest(a, w)


@SETTINGS
@given(timelines(), st.data())
def test_shrinking_a_duration_never_lengthens_the_trace(events: list[dict], data: st.DataObject) -> None:
    a = _analyze(events)
    g = a.graph
    dur_edges = np.flatnonzero(g.etype == EdgeType.DURATION)
    e = data.draw(st.sampled_from(dur_edges.tolist()))
    w = a.calibration.weight.copy()
    w[e] = w[e] * data.draw(st.sampled_from([0, 0.25, 0.5, 0.9]))
    t = replay(g, w, a.calibration.binding, int(a.nodes.time[a.nodes.source]))
    assert t.span <= a.timing.span
    assert t.span == _longest(a, w)


@SETTINGS
@given(timelines(), st.data())
def test_growing_within_slack_keeps_the_trace_length(events: list[dict], data: st.DataObject) -> None:
    a = _analyze(events)
    g = a.graph
    t0 = int(a.nodes.time[a.nodes.source])
    dur_edges = np.flatnonzero(g.etype == EdgeType.DURATION)
    e = data.draw(st.sampled_from(dur_edges.tolist()))
    start_slack = int(a.timing.slack[g.src[e]])
    end_slack = int(a.timing.slack[g.dst[e]])
    assert 0 <= start_slack <= end_slack
    w = a.calibration.weight.copy()
    w[e] += data.draw(st.integers(0, start_slack))
    assert replay(g, w, a.calibration.binding, t0).span == a.timing.span
    # past its slack, the growth shows up one for one
    over = data.draw(st.integers(1, 50_000))
    w[e] = a.calibration.weight[e] + end_slack + over
    assert replay(g, w, a.calibration.binding, t0).span == a.timing.span + over
