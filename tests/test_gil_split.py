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


def _analysis(tmp_path: Path, alone: int) -> Analysis:
    """``alone`` calls of the frame with no other thread running (2 µs of Python before its
    op, 1 µs after), then one while another thread's pure-Python loop runs (55 µs to reach
    its op: the loop held the GIL)."""
    events = [
        synth.cpu("ProfilerStep#1", 0, 400, cat="user_annotation"),
        *[x for k in range(alone) for x in _forward(10 + 20 * k, 12 + 20 * k)],
        *_forward(200, 255),
        synth.cpu(LOOP, 150, 150, tid=synth.AUX, cat=PY),
    ]
    return analyze(read_trace(synth.write(tmp_path / "t.json", events)), AnalysisOptions())


def test_a_frame_that_runs_microseconds_of_python_waited_for_nearly_all_the_overlap(tmp_path: Path) -> None:
    a = _analysis(tmp_path, alone=4)
    # its own work is read off the frame's free segments (median 2 µs): it waited 53 of the
    # 55 µs before the op, and nothing of the 1 µs after it
    assert _waited(a, FORWARD) == {200: 53_000, 262: 0}
    # the loop has no free instance to compare with: it waited half of each overlap
    assert _waited(a, LOOP) == {150: (55_000 + 1_000) // 2}
    assert np.array_equal(a.timing.time, a.nodes.time)  # the baseline replays exactly


def test_without_enough_free_instances_each_side_waited_half(tmp_path: Path) -> None:
    # one call alone: two free segments, fewer than MIN_FREE (4) to read its own work from
    assert _waited(_analysis(tmp_path, alone=1), FORWARD) == {200: 27_500, 262: 500}
