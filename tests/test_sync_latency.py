"""A blocking call's own return latency (ctda/analysis/sync_latency.py): measured per call
kind from the calls of that kind that blocked, the weight of the sync edges that did not
bind, so a faster host meets the queued work and returns that latency after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ctda.analysis.edges import EdgeType, floors
from ctda.analysis.engine import Analysis, analyze
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.sync_latency import KINDS, edge_floors, measure, union_floors
from ctda.ingest.reader import read_trace
from ctda.whatif.scenario import run
from ctda.whatif.select import parse_scale
from tests import synth

SYNC = "cudaStreamSynchronize"
STREAM = [k.label for k in KINDS].index("stream sync")


def _blocked_step() -> list[dict[str, Any]]:
    """A launch, then a stream sync that blocks: the kernel ends at 1020 µs, the call
    returns 7 µs later."""
    return [
        synth.cpu("ProfilerStep#1", 0, 1050, cat="user_annotation"),
        synth.runtime("cudaLaunchKernel", 0, 10, 1),
        synth.kernel("gemm", 20, 1000, 1),
        synth.runtime(SYNC, 100, 927, 2),
    ]


def _unblocked_step() -> list[dict[str, Any]]:
    """Host work, a launch, more host work, then a stream sync long after the kernel
    ended (3610 µs): it never waited."""
    return [
        synth.cpu("ProfilerStep#2", 1100, 4100, cat="user_annotation"),
        synth.cpu("python_prep", 1100, 2000),
        synth.runtime("cudaLaunchKernel", 3100, 10, 3),
        synth.kernel("gemm", 3110, 500, 3),
        synth.cpu("python_post", 3120, 2000),
        synth.runtime(SYNC, 5120, 10, 4),
    ]


def _analyse(tmp_path: Path, events: list[dict[str, Any]]) -> Analysis:
    return analyze(read_trace(synth.write(tmp_path / "sync_latency.json", events)))


def _sync_end(a: Analysis, ts_us: float) -> int:
    """Finish node of the stream sync that started at ``ts_us``."""
    n = a.nodes
    names = RuleContext(a.table, n).names
    (i,) = np.flatnonzero((names == SYNC) & (n.ts == int(ts_us * 1000)))
    return int(n.finish(i))


def test_latency_is_read_from_a_blocked_call_and_weighs_the_unbound_sync(tmp_path: Path) -> None:
    a = _analyse(tmp_path, _blocked_step() + _unblocked_step())
    lat = measure(RuleContext(a.table, a.nodes), a.graph)
    assert lat.ns[STREAM] == 7_000  # call end 1027 µs - kernel end 1020 µs
    assert lat.blocked[STREAM] == 1
    assert lat.table().set_index("kind").loc["stream sync", "source"] == "trace"
    # the sync that did not wait: its edge from the kernel weighs the latency, not its gap
    g, end = a.graph, _sync_end(a, 5120)
    (e,) = np.flatnonzero((g.dst == end) & (g.etype == EdgeType.SYNC))
    assert not a.calibration.binding[e]
    assert int(a.calibration.gap[e]) == 1_520_000
    assert int(a.calibration.weight[e]) == 7_000
    # replay stays exact; with the host work after the launch gone the call meets the
    # kernel (ends 3610 µs) and returns 7 µs after it
    assert np.array_equal(a.timing.time[: 2 * a.nodes.n], a.nodes.time[: 2 * a.nodes.n])
    sc = run(a, [parse_scale(a, "name~python_post=0")])
    assert int(sc.timing.time[end]) == 3_617_000
    # a job's graph: each part's sync edges take its own trace's latencies; edges of
    # events outside every part keep their type's floor
    ctx = RuleContext(a.table, a.nodes)
    assert np.array_equal(union_floors(g, [(ctx, g, 0)]), edge_floors(ctx, g))
    assert np.array_equal(union_floors(g, [(ctx, g, a.nodes.n)]), floors()[g.etype])


def test_a_kind_without_blocked_calls_takes_its_documented_constant(tmp_path: Path) -> None:
    a = _analyse(tmp_path, _unblocked_step())
    lat = measure(RuleContext(a.table, a.nodes), a.graph)
    assert lat.blocked[STREAM] == 0
    assert lat.ns[STREAM] == KINDS[STREAM].fallback_ns == 5_000
    assert lat.table().set_index("kind").loc["stream sync", "source"] == "constant"
    sc = run(a, [parse_scale(a, "name~python_post=0")])
    assert int(sc.timing.time[_sync_end(a, 5120)]) == 3_615_000
