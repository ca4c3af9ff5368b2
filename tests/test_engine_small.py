"""Exact expectations of the critical path engine on hand-made timelines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.engine import AnalysisOptions, analyze, parse_cross_thread
from ctda.analysis.graph import GraphCycleError, build
from ctda.analysis.nodes import select
from ctda.ingest.reader import read_trace
from tests import synth


def _analyze(tmp_path: Path, events: list[dict], **opts: object):
    table = read_trace(synth.write(tmp_path / "t.json", events))
    return analyze(table, AnalysisOptions(**opts))  # type: ignore[arg-type]


def _class_ns(a, window: int = 0) -> dict[str, int]:
    c = a.charges[a.charges.window == window]
    return {CLASSES[int(k)]: int(v) for k, v in c.groupby("cls").ns.sum().items()}


def test_gpu_bound_step_is_charged_to_the_kernel_and_waits(tmp_path: Path) -> None:
    # step [0,100]: op launches a 60us kernel at 20, then synchronizes until the kernel ends
    events = [
        synth.cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
        synth.cpu("aten::mm", 10, 15),
        synth.runtime("cudaLaunchKernel", 12, 5, corr=1),
        synth.kernel("gemm", 20, 60, corr=1),
        synth.runtime("cudaDeviceSynchronize", 30, 52, corr=2),
    ]
    a = _analyze(tmp_path, events)
    assert [w.label for w in a.windows] == ["ProfilerStep#1"]
    by = _class_ns(a)
    assert sum(by.values()) == 100_000
    # the kernel's 60us are on the path, and the CPU's wait in the sync call is not
    assert by["gpu_compute"] == 60_000
    names = a.table.decoded("name", a.nodes.uid)
    on = a.charges[a.charges.event >= 0]
    assert "cudaDeviceSynchronize" not in set(names[on.event])
    # launch latency: launch call start (12) -> kernel start (20)
    assert by["launch_overhead"] == 8_000


def test_cpu_bound_step_charges_self_time_in_segments(tmp_path: Path) -> None:
    events = [
        synth.cpu("ProfilerStep#3", 0, 50, cat="user_annotation"),
        synth.cpu("outer", 5, 40),
        synth.cpu("inner_a", 10, 10),
        synth.cpu("inner_b", 25, 10),
    ]
    a = _analyze(tmp_path, events)
    names = a.table.decoded("name", a.nodes.uid)
    c = a.charges[a.charges.event >= 0]
    per = {str(names[e]): int(ns) for e, ns in c.groupby("event").ns.sum().items()}
    # outer's own time: 5..10, 20..25, 35..45; children their durations; the step 0..5, 45..50
    assert per == {"outer": 20_000, "inner_a": 10_000, "inner_b": 10_000, "ProfilerStep#3": 10_000}
    assert int(a.charges.ns.sum()) == 50_000


def test_partial_overlap_keeps_a_contiguous_path(tmp_path: Path) -> None:
    # an annotation opens inside frame f1 and closes inside frame f2 (record_function in Python)
    events = [
        synth.cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
        synth.cpu("f1", 10, 20, cat="python_function"),
        synth.cpu("region", 20, 50, cat="user_annotation"),
        synth.cpu("work", 35, 25),
        synth.cpu("f2", 65, 20, cat="python_function"),
    ]
    a = _analyze(tmp_path, events)
    assert a.table.meta.warnings.get("slices partially overlapping their parent on a thread", 0) >= 1
    assert int(a.charges.ns.sum()) == 100_000
    names = a.table.decoded("name", a.nodes.uid)
    per = {
        str(names[e]): int(ns) for e, ns in a.charges[a.charges.event >= 0].groupby("event").ns.sum().items()
    }
    assert per["work"] == 25_000
    # between two boundaries the innermost open slice is the one opened last:
    # region owns 20..35 (it opened inside f1) and 60..65; f2 owns 65..85
    assert per["region"] == 15_000 + 5_000
    assert per["f1"] == 10_000
    assert per["f2"] == 20_000


def test_gil_handoff_links_a_resuming_thread_to_the_other_thread(tmp_path: Path) -> None:
    # main pauses 20..60 while the aux thread runs 15..58 and then goes quiet
    events = [
        synth.cpu("ProfilerStep#1", 0, 100, cat="user_annotation"),
        synth.cpu("main_a", 5, 15),
        synth.cpu("main_b", 60, 30),
        synth.cpu("bg_work", 15, 43, tid=synth.AUX, cat="python_function"),
    ]
    with_ct = _analyze(tmp_path, events)
    by = _class_ns(with_ct)
    names = with_ct.table.decoded("name", with_ct.nodes.uid)
    per = {
        str(names[e]): int(ns)
        for e, ns in with_ct.charges[with_ct.charges.event >= 0].groupby("event").ns.sum().items()
    }
    assert per["bg_work"] == 43_000 - 0  # 15..58 is on the path
    assert by["cross_thread"] == 2_000  # 58 -> 60 hand-off latency
    without = _analyze(tmp_path, events, cross_thread=parse_cross_thread("none"))
    names2 = without.table.decoded("name", without.nodes.uid)
    on2 = {str(names2[e]) for e in without.charges.event[without.charges.event >= 0]}
    assert "bg_work" not in on2


def test_fwdbwd_and_backward_join_cross_threads(tmp_path: Path) -> None:
    bwd = 9
    events = [
        synth.cpu("ProfilerStep#1", 0, 200, cat="user_annotation"),
        synth.cpu("aten::mul", 10, 20),
        synth.cpu("autograd::engine::evaluate_function: MulBackward0", 50, 100, tid=bwd),
        synth.cpu("MulBackward0", 55, 90, tid=bwd),
        synth.cpu("optimizer", 160, 30),
        synth.flow("fwdbwd", 1, "s", 10, synth.MAIN),
        synth.flow("fwdbwd", 1, "f", 55, bwd),
    ]
    a = _analyze(tmp_path, events)
    rules = {a.graph.rule_names[a.graph.rule[e]] for e in a.charges.edge}
    assert "backward_join" in rules
    lanes = set(a.nodes.lane[a.charges.event[a.charges.event >= 0]])
    assert len(lanes) == 2
    fb = [i for i, n in enumerate(a.graph.rule_names) if n == "fwdbwd"]
    assert fb and np.any(a.graph.rule == fb[0])


def test_cycle_is_an_error_naming_the_rule(tmp_path: Path) -> None:
    table = read_trace(synth.write(tmp_path / "t.json", [synth.cpu("a", 0, 0), synth.cpu("b", 0, 0, tid=3)]))
    nodes = select(table)
    loop = EdgeBatch.of([0, 2], [2, 0], EdgeType.CROSS_THREAD, "my_rule")
    with pytest.raises(GraphCycleError, match="my_rule"):
        build(nodes, [loop])


def test_acausal_edges_are_dropped_and_counted(tmp_path: Path) -> None:
    table = read_trace(synth.write(tmp_path / "t.json", [synth.cpu("a", 0, 5), synth.cpu("b", 10, 5, tid=3)]))
    nodes = select(table)
    back = EdgeBatch.of([3], [0], EdgeType.CROSS_THREAD, "backwards")  # b.end -> a.start
    g = build(nodes, [back])
    assert g.dropped == {"backwards": 1}


def test_unknown_cross_thread_rule_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown cross-thread rule"):
        parse_cross_thread("fwdbwd,telepathy")
