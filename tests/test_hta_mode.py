"""HTA-compatible mode: ctda reproduces HolisticTraceAnalysis' critical path.

The reference is HTA's own overlaid trace of ``simple_add_param_benchmark`` (whole trace,
``annotation=""``): critical events carry ``args.critical == 1``; the path's dependency,
kernel-launch and sync edges are drawn as ``critical_path`` s/f flow events whose
``args`` hold the edge ``type`` and ``weight``. That file was written by HTA after the
0.5.0 release; the 0.5.0 rules (``HtaOptions.release_0_5()``) are checked against numbers
obtained by running HolisticTraceAnalysis 0.5.0 on the same inputs.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctda.analysis import hta
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import AnalysisOptions, analyze
from ctda.ingest.columns import NA
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable

DATA = Path(__file__).parent / "data" / "hta"
TRACE = DATA / "simple_add_param_benchmark.json.gz"
HTA_OUTPUT = DATA / "simple_add_overlaid_critical_path_HTA_OUTPUT.json.gz"
US = 1_000

Key = tuple[str, int, int, str, str]


@pytest.fixture(scope="module")
def table() -> EventTable:
    return read_trace(TRACE)


@pytest.fixture(scope="module")
def result(table: EventTable) -> hta.HtaResult:
    return hta.hta_analysis(table)


@pytest.fixture(scope="module")
def hta_events() -> list[dict[str, Any]]:
    with gzip.open(HTA_OUTPUT, "rt") as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


def _key(name: str, ts_us: int, dur_us: int, pid: object, tid: object) -> Key:
    return (name, int(ts_us), int(dur_us), str(pid), str(tid))


def _ctda_keys(table: EventTable, uids: np.ndarray) -> set[Key]:
    names = table.decoded("name", uids)
    pid, tid = table.decoded("pid", uids), table.decoded("tid", uids)
    ts, dur = table.col("ts_ns")[uids] // US, table.col("dur_ns")[uids] // US
    return {_key(*row) for row in zip(names, ts, dur, pid, tid)}


def _hta_critical(events: list[dict[str, Any]]) -> set[Key]:
    return {
        _key(e["name"], e["ts"], e["dur"], e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1
    }


def test_critical_events_match_hta(
    table: EventTable, result: hta.HtaResult, hta_events: list[dict[str, Any]]
) -> None:
    expected = _hta_critical(hta_events)
    got = _ctda_keys(table, result.path_uids)
    assert len(expected) == 624
    assert got == expected, f"missing {sorted(expected - got)[:5]}, extra {sorted(got - expected)[:5]}"
    # the overlay keeps the input's event order, so trace indices agree too
    by_index = {
        i for i, e in enumerate(hta_events) if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1
    }
    assert set(result.path_uids.tolist()) == by_index


def _flow_point(table: EventTable, result: hta.HtaResult, node: int) -> tuple[str, str, int]:
    """Where HTA's overlay draws an edge endpoint: event start, or end (device work's end
    pulled back by up to 1 us so the arrow lands inside the slice)."""
    uid = int(result.nodes.uid[node // 2])
    ts, dur = int(table.col("ts_ns")[uid] // US), int(table.col("dur_ns")[uid] // US)
    at = ts
    if node % 2 == 1:
        device = table.col("device")[uid]
        at = ts + dur - (min(1, dur) if device != NA and device >= 0 else 0)
    return str(table.decoded("pid", np.array([uid]))[0]), str(table.decoded("tid", np.array([uid]))[0]), at


def test_path_edges_match_hta_flows(
    table: EventTable, result: hta.HtaResult, hta_events: list[dict[str, Any]]
) -> None:
    """Every dependency, launch-delay and sync edge on HTA's path, with its weight."""
    flows: dict[int, dict[str, dict[str, Any]]] = {}
    for ev in hta_events:
        if ev.get("name") == "critical_path":
            flows.setdefault(ev["id"], {})[ev["ph"]] = ev
    expected = Counter(
        (
            f["s"]["args"]["type"],
            f["s"]["args"]["weight"],
            (str(f["s"]["pid"]), str(f["s"]["tid"]), f["s"]["ts"]),
            (str(f["f"]["pid"]), str(f["f"]["tid"]), f["f"]["ts"]),
        )
        for f in flows.values()
    )
    assert all(f["s"]["args"]["critical"] for f in flows.values())
    e = result.edges
    shown = {hta.HtaEdge.DEPENDENCY, hta.HtaEdge.KERNEL_LAUNCH_DELAY, hta.HtaEdge.SYNC_DEPENDENCY}
    got = Counter(
        (
            str(hta.HtaEdge(int(e.htype[i]))),
            int(e.weight[i] // US),
            _flow_point(table, result, int(e.src[i])),
            _flow_point(table, result, int(e.dst[i])),
        )
        for i in result.path_edges
        if hta.HtaEdge(int(e.htype[i])) in shown
    )
    assert sum(expected.values()) == 192
    assert got == expected
    launch = sum(
        w
        for (t, w, _, _), c in expected.items()
        for _ in range(c)
        if t == "critical_path_kernel_launch_delay"
    )
    assert result.bound_by_ns["gpu_kernel_launch_overhead"] == launch * US == 1_572 * US


def test_critical_path_length(result: hta.HtaResult, table: EventTable) -> None:
    """HTA's CP length: the sum of its path's weights, well under the path's time span.

    HTA's overlay does not record the length. ctda's path equals HTA's event for event and
    edge for edge (the two tests above), and every weight is an observed gap or 0, so the
    length below is HTA's: 41,435,012 us over a 41,577,653 us span. HTA 0.5.0, run on this
    input, reports 41,435,234 us for its (slightly different) path.
    """
    e = result.edges
    assert result.length_ns == int(e.weight[result.path_edges].sum())
    assert result.length_ns == 41_435_012 * US
    assert result.span_ns == 41_577_653 * US
    old = hta.hta_analysis(table, hta.HtaOptions.release_0_5())
    assert old.length_ns == 41_435_234 * US
    assert len(old.path_events) == 600
    # attribution: operator and kernel-kernel time goes to events, launch delays to none
    assert (
        int(result.per_event_cp_ns.sum()) + result.bound_by_ns["gpu_kernel_launch_overhead"]
        == result.length_ns
    )
    assert sum(result.bound_by_ns.values()) == result.length_ns
    frame = result.path_frame(table)
    assert len(frame) == len(result.path_edges) and int(frame.weight_ns.sum()) == result.length_ns


def test_newer_hta_drops_long_kernel_kernel_delays(table: EventTable, result: hta.HtaResult) -> None:
    """The only difference from 0.5.0 here: an 11.9 ms stream gap (the CPU sat in
    cudaMalloc) is no kernel-kernel delay any more, so the path stays on the CPU."""
    old = hta.hta_analysis(table, hta.HtaOptions.release_0_5())
    e = old.edges
    kk = e.htype[old.path_edges] == hta.HtaEdge.KERNEL_KERNEL_DELAY
    assert int(e.weight[old.path_edges][kk].max()) == 11_865 * US
    e = result.edges
    assert int(e.weight[e.htype == hta.HtaEdge.KERNEL_KERNEL_DELAY].max()) <= 1_500 * US


# critical events found by HolisticTraceAnalysis 0.5.0 (whole trace, annotation="")
HTA_0_5 = {
    "cuda_event_sync_tiny": (
        2_401,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 17, 21, 23, 25, 29, 31, 33, 35, 41, 45, 47],
    ),
    "backward_thread_minimal": (64_232, [2, 3, 4, 5, 6]),
    # fractional-microsecond timestamps: HTA rounds them inward first
    "rocm62_mi250_minitoy_train": (
        7_448,
        [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
         29, 30, 32, 33, 34, 35, 36, 37, 101, 103, 105, 111, 113, 115, 117],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HTA_0_5))
def test_release_0_5_matches_hta(name: str) -> None:
    length_us, uids = HTA_0_5[name]
    r = hta.hta_analysis(read_trace(DATA / f"{name}.json.gz"), hta.HtaOptions.release_0_5())
    assert sorted(r.path_uids.tolist()) == uids
    assert r.length_ns == length_us * US


def test_engine_mode_hta(table: EventTable, result: hta.HtaResult) -> None:
    """``analyze(mode="hta")`` builds its graph from HTA's edges; HTA's weights on it give
    back HTA's path length."""
    a = analyze(table, AnalysisOptions(mode="hta", windows="trace"))
    assert a.graph.rule_names[:5] == [
        "hta_operator", "hta_dependency", "hta_launch_delay", "hta_kernel_kernel_delay", "hta_sync_dependency"
    ]  # fmt: skip
    assert a.graph.dropped == {}
    r = hta.hta_critical_path(a)
    assert np.array_equal(r.path_events, result.path_events)
    w = hta.graph_weights(a.graph, r.edges)
    key = {(int(s), int(d)): i for i, (s, d) in enumerate(zip(a.graph.src, a.graph.dst))}
    on_path = [key[(int(r.edges.src[i]), int(r.edges.dst[i]))] for i in r.path_edges]
    assert int(w[on_path].sum()) == r.length_ns
    assert int(w[a.graph.etype == EdgeType.TERMINAL].sum()) == 0


def test_longest_path_follows_networkx_ties() -> None:
    """First maximal predecessor in insertion order; the path ends at the first node of
    maximal distance in networkx' topological order (so trailing 0-weight edges are left)."""
    src = np.array([0, 0, 1, 2, 3], dtype=np.int64)
    dst = np.array([1, 2, 3, 3, 4], dtype=np.int64)
    w = np.array([5, 5, 1, 1, 0], dtype=np.int64)
    nodes, edges, length = hta.longest_path(6, src, dst, w)
    assert nodes.tolist() == [0, 1, 3] and edges.tolist() == [0, 2] and length == 6
    # a repeated edge keeps its first position and its last weight
    nodes, _, length = hta.longest_path(4, np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([1, 7, 2]))
    assert nodes.tolist() == [0, 1, 2] and length == 9
