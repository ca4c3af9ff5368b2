"""How an overlap of two threads' Python frames divides into waiting (contention model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from tests import synth

PY = "python_function"
FORWARD = "app.py(10): forward"
LOOP = "worker.py(5): loop"


def _forward(ts: float, op_at: float, tid: int = synth.MAIN) -> list[dict[str, Any]]:
    """A frame that runs a little Python, calls an op, and returns 1 µs after it."""
    return [
        synth.cpu(FORWARD, ts, op_at + 8 - ts, tid=tid, cat=PY),
        synth.cpu("aten::relu", op_at, 7, tid=tid),
    ]


def _waited(a: Analysis, name: str) -> dict[int, int]:
    """Per waiting segment of ``name``'s frames (by start, µs): the GIL wait found in it (ns)."""
    g, n, c = a.graph, a.nodes, a.contention
    names = a.table.decoded("name", n.uid)
    out: dict[int, int] = {}
    for edge, ov in zip(c.wait_edge, c.overlap):
        if g.owner[edge] >= 0 and names[g.owner[edge]] == name:
            t = int(n.time[g.src[edge]]) // 1000
            out[t] = out.get(t, 0) + int(ov)
    return out


def test_a_frame_that_runs_microseconds_of_python_waited_for_nearly_all_the_overlap(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#1", 0, 400, cat="user_annotation"),
        # four times alone: 2 µs of Python before the op, 1 µs after it
        *[x for k in range(4) for x in _forward(10 + 20 * k, 12 + 20 * k)],
        # then while another thread's pure-Python loop runs: 55 µs to reach the op
        *_forward(200, 255),
        synth.cpu(LOOP, 150, 150, tid=synth.AUX, cat=PY),
    ]
    a = analyze(read_trace(synth.write(tmp_path / "t.json", events)), AnalysisOptions())
    # its own work is read off the frame's free segments (median 2 µs): it waited 53 of the
    # 55 µs before the op, and nothing of the 1 µs after it
    assert _waited(a, FORWARD) == {200: 53_000, 262: 0}
    # the loop has no free instance to compare with: it waited half of each overlap
    assert _waited(a, LOOP) == {150: (55_000 + 1_000) // 2}
    assert np.array_equal(a.timing.time, a.nodes.time)  # the baseline replays exactly


def test_without_free_instances_each_side_waited_half(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#1", 0, 400, cat="user_annotation"),
        *_forward(200, 255),
        synth.cpu(LOOP, 150, 150, tid=synth.AUX, cat=PY),
    ]
    a = analyze(read_trace(synth.write(tmp_path / "t.json", events)), AnalysisOptions())
    assert _waited(a, FORWARD) == {200: 27_500, 262: 500}
