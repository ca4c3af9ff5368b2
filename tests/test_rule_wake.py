"""The `wake` rule: a condition wait ends when another thread of the process notifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze, parse_cross_thread
from ctda.ingest.reader import read_trace
from ctda.whatif.scenario import run
from ctda.whatif.select import parse_scale
from tests import synth

PY = "python_function"
WAIT = "threading.py(295): wait"
ACQUIRE = "<built-in method acquire of _thread.lock object at 0x7f3a10c42b40>"
NOTIFY = "threading.py(366): notify"
RELEASE = "<built-in method release of _thread.lock object at 0x7f3a10c43e00>"


def _wait(ts: float, end: float, tid: int) -> list[dict[str, Any]]:
    return [
        synth.cpu(WAIT, ts, end - ts, tid=tid, cat=PY),
        synth.cpu(ACQUIRE, ts + 1, end - ts - 2, tid=tid, cat=PY),
    ]


def _notify(ts: float, tid: int = synth.MAIN) -> list[dict[str, Any]]:
    return [synth.cpu(NOTIFY, ts, 4, tid=tid, cat=PY), synth.cpu(RELEASE, ts + 2, 1, tid=tid, cat=PY)]


def _analyze(tmp_path: Path, events: list[dict[str, Any]], **opts: Any) -> Analysis:
    return analyze(read_trace(synth.write(tmp_path / "t.json", events)), AnalysisOptions(**opts))


def _wakes(a: Analysis) -> list[tuple[str, int, str, int]]:
    """(source event, its start µs, woken event, its end µs) of every `wake` edge."""
    g, n = a.graph, a.nodes
    names = a.table.decoded("name", n.uid)
    code = list(g.rule_names).index("wake") if "wake" in g.rule_names else -1
    sel = np.flatnonzero(g.rule == code)
    return sorted(
        (
            str(names[g.src[e] // 2]),
            int(n.time[g.src[e]]) // 1000,
            str(names[g.dst[e] // 2]),
            int(n.time[g.dst[e]]) // 1000,
        )
        for e in sel
    )


def test_the_notify_ends_the_wait_and_a_scenario_moves_it(tmp_path: Path) -> None:
    feeder = 5
    events = [
        synth.cpu("ProfilerStep#1", 0, 200, cat="user_annotation"),
        synth.cpu("prepare", 5, 55),  # main thread's work before it puts the next item
        *_notify(60),
        synth.cpu("train", 70, 120),
        *_wait(10, 110, feeder),  # woken 47 µs after the release (a busy host)
        synth.cpu("send", 112, 20, tid=feeder, cat=PY),
    ]
    a = _analyze(tmp_path, events)
    # linked from the waiter-lock release inside the notify, not the notify's start
    assert _wakes(a) == [(RELEASE, 62, ACQUIRE, 109)]
    assert np.array_equal(a.timing.time, a.nodes.time)  # the baseline replays exactly
    acquire = int(np.flatnonzero(a.table.decoded("name", a.nodes.uid) == ACQUIRE)[0])
    sc = run(a, [parse_scale(a, "name~^prepare$=0.5")])
    # the put comes 27.5 µs sooner, so the wait ends 27.5 µs sooner (it would not, held rigid)
    assert int(a.nodes.time[2 * acquire + 1] - sc.timing.time[2 * acquire + 1]) == 27_500
    off = _analyze(tmp_path, events, cross_thread=parse_cross_thread("fwdbwd,backward_join,gil,cuda_lock"))
    sc_off = run(off, [parse_scale(off, "name~^prepare$=0.5")])
    assert sc_off.timing.time[2 * acquire + 1] == off.nodes.time[2 * acquire + 1]


def test_one_notify_wakes_one_waiter_in_the_order_the_waits_ended(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#1", 0, 300, cat="user_annotation"),
        *_notify(50),
        *_notify(70),
        *_wait(10, 90, 5),  # ends last: takes the notify the other wait left (50)
        *_wait(20, 80, 6),  # ends first: the latest notify before its end (70)
        *_wait(100, 150, synth.MAIN),  # the notifying thread waits in turn, for thread 8
        *_notify(140, tid=8),
        *_notify(160, tid=9),  # a notify nobody waits for
        *_wait(170, 200, 7),  # no notify after it began: a timeout, kept as observed
    ]
    a = _analyze(tmp_path, events)
    assert _wakes(a) == [(RELEASE, 52, ACQUIRE, 89), (RELEASE, 72, ACQUIRE, 79), (RELEASE, 142, ACQUIRE, 149)]
    lanes = a.nodes.lane
    g = a.graph
    code = list(g.rule_names).index("wake")
    woken = sorted(int(lanes[d // 2]) for d in g.dst[g.rule == code])
    assert len(set(woken)) == 3  # threads 5, 6 and the main thread


def test_no_python_stacks_no_edges(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#1", 0, 200, cat="user_annotation"),
        synth.cpu("aten::mm", 10, 50),
        synth.cpu("aten::add", 20, 30, tid=5),
    ]
    assert _wakes(_analyze(tmp_path, events)) == []
