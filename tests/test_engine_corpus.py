"""The engine's invariants on every real trace of the shared corpus (docs/model.md#invariants)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.analysis.propagate import path_to
from ctda.ingest.reader import read_trace
from tests.conftest import SKIP_CORPUS, corpus_analysis, corpus_traces

TRACES = corpus_traces()
IDS = [f"{p.parent.name}/{p.name}" for p in TRACES]


def _analysis(path: Path) -> Analysis:
    a: Analysis = corpus_analysis(path)
    return a


def _has_ops(a: Analysis) -> bool:
    return a.nodes.n > 0


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_replay_fidelity(path: Path) -> None:
    a = _analysis(path)
    if not _has_ops(a):
        pytest.skip("no CPU or GPU ops")
    err = np.abs(a.timing.time - a.nodes.time)
    within = np.mean(err <= 1_000)
    off = np.flatnonzero(err > 1_000)
    assert within >= 0.999, f"{len(off)} nodes replay more than 1us off, e.g. {off[:5]}"


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_path_spans_each_window(path: Path) -> None:
    a = _analysis(path)
    if not _has_ops(a):
        pytest.skip("no CPU or GPU ops")
    g, tm = a.graph, a.timing
    starts, ends = a.window_bounds()
    for i, w in enumerate(a.windows):
        c = a.charges[a.charges.window == i]
        duration = int(ends[i] - starts[i])
        # attribution sums to the window, hence the CP length equals it
        assert abs(int(c.ns.sum()) - duration) <= max(duration * 1e-3, 1), w.label
        if duration == 0:
            continue
        e = path_to(tm, g, w.end_node, int(starts[i]))
        # the charged edges are that path's edges of non-zero length
        assert set(c.edge.to_numpy()) <= set(e.tolist())
        # a connected chain: each edge starts where the previous one ended
        assert np.array_equal(g.src[e[1:]], g.dst[e[:-1]]), w.label
        assert g.dst[e[-1]] == w.end_node
        assert tm.time[g.src[e[0]]] <= starts[i] < tm.time[g.dst[e[0]]]
        # every edge on it is binding in the replay
        assert np.array_equal(tm.binding_edge[g.dst[e]], e)


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_graph_is_acyclic_and_topologically_ordered(path: Path) -> None:
    a = _analysis(path)
    g = a.graph
    pos = np.empty(a.nodes.n_nodes, dtype=np.int64)
    pos[g.order] = np.arange(len(g.order))
    assert len(np.unique(g.order)) == a.nodes.n_nodes
    assert np.all(pos[g.src] < pos[g.dst])


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize(
    "rel", ["hta/ddp_nccl_allreduce_ws2_rank0.json.gz", "tracelens/mi300_resnet18_train_bwd_thread.json.gz"]
)
def test_backward_thread_traces_cross_threads(rel: str) -> None:
    from tests.conftest import CORPUS

    assert CORPUS is not None
    table = read_trace(CORPUS / rel)
    a = analyze(table)
    names = a.graph.rule_names
    rules_on_path = {names[r] for r in a.graph.rule[a.charges.edge.to_numpy()]}
    assert rules_on_path & {"fwdbwd", "backward_join"}, rules_on_path
    cpu_lanes = {
        int(x) for x in a.nodes.lane[a.charges.event[a.charges.event >= 0]] if not a.table.lanes.is_gpu[x]
    }
    assert len(cpu_lanes) >= 2
    # without cross-thread edges the path never leaves the thread it ends on
    b = analyze(table, AnalysisOptions(cross_thread=()))
    cpu_lanes_b = {
        int(x) for x in b.nodes.lane[b.charges.event[b.charges.event >= 0]] if not b.table.lanes.is_gpu[x]
    }
    assert len(cpu_lanes_b) == 1
    on_a = set(a.charges.event[a.charges.event >= 0])
    on_b = set(b.charges.event[b.charges.event >= 0])
    assert on_a != on_b


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_breakdowns_add_up_and_tie_to_the_path(path: Path) -> None:
    """Every breakdown computes on every real trace (CPU-only, ROCm, MTIA, 2020 format); the
    temporal parts fill the span; the device idle and launch delay on the path are the
    path's own bound-by classes, window by window (docs/breakdowns.md)."""
    from ctda.analysis.breakdown import on_path_idle_by_window
    from ctda.analysis.breakdowns import KINDS, Breakdowns
    from ctda.analysis.classify import CLASS_CODE

    a = _analysis(path)
    b = Breakdowns(a)
    tables = {kind: b.table(kind) for kind in KINDS}
    t = tables["temporal"]
    assert (t.compute_ns + t.communication_ns + t.memory_ns + t.idle_ns == t.span_ns).all()
    idle = tables["idle"]
    per_window = idle[idle.window >= 0].groupby("window").cp_ns.sum()
    assert [int(per_window.get(w, 0)) for w in range(len(a.windows))] == on_path_idle_by_window(a).tolist()
    ch = a.charges
    launch = ch[(ch.event < 0) & (ch.cls == CLASS_CODE["launch_overhead"])].groupby("window").ns.sum()
    for r in tables["launches"].query("window >= 0").itertuples():
        assert r.cp_delay_ns == int(launch.get(r.window, 0))
    if not b.has_device:
        assert all(len(tables[k]) == 0 for k in ("temporal", "idle", "overlap", "launches", "kernels"))
