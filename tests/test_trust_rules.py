"""Rules that find the cause of a wait instead of widening a time window (real traces)."""

from __future__ import annotations

import numpy as np
import pytest

from ctda.analysis.contention import _slowdown
from ctda.analysis.engine import analyze
from ctda.analysis.nodes import select
from ctda.analysis.rules import cross_thread, gpu
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.cross_thread import BLOCKING_FRAMES
from ctda.ingest.reader import read_trace
from tests.conftest import CORPUS, SKIP_CORPUS


def _ctx(rel: str) -> RuleContext:
    assert CORPUS is not None
    t = read_trace(CORPUS / rel)
    return RuleContext(t, select(t))


@SKIP_CORPUS
def test_stream_wait_call_links_sendrecv_beyond_the_lag_window() -> None:
    ctx = _ctx("hta/trace_diff_ws2_rank1_dataloader.json.gz")
    n = ctx.nodes
    src, dst = gpu._wait_call_edges(ctx)
    assert len(src) > 150  # one per cudaStreamWaitEvent that is followed by a launch (186 calls)
    lag = n.ts[dst] - n.end[src]
    assert (lag >= 0).all()  # nothing waits for work that ended after it started
    sendrecv = np.array(["SendRecv" in str(ctx.names[d]) for d in dst])
    # the SendRecv kernels that waited ~130 us for stream-7 work: beyond the 50 us window
    hit = sendrecv & (lag > ctx.options.stream_wait_max_lag_ns) & (lag < 140_000)
    assert hit.sum() >= 4
    assert (n.lane[src[hit]] != n.lane[dst[hit]]).all()
    batch = gpu.stream_wait_inferred(ctx)
    edges = set(zip(batch.src.tolist(), batch.dst.tolist()))
    assert all((int(2 * s + 1), int(2 * d)) in edges for s, d in zip(src[hit], dst[hit]))


@SKIP_CORPUS
def test_autograd_thread_found_without_fwdbwd_flows() -> None:
    ctx = _ctx("hta/trace_diff_ws2_rank1_dataloader.json.gz")
    main, bwd = cross_thread._backward_lanes(ctx)
    assert main == 0
    assert bwd.tolist() == [1]
    assert len(cross_thread.backward_join(ctx)) > 0


@SKIP_CORPUS
def test_blocked_threads_neither_hold_nor_want_the_gil() -> None:
    assert CORPUS is not None
    a = analyze(read_trace(CORPUS / "generated/a1_cnn_loader_w2.pt.trace.json.gz"))
    c, g = a.contention, a.graph
    ctx = RuleContext(a.table, a.nodes)
    blocked = ctx.name_mask(BLOCKING_FRAMES)
    assert blocked.sum() > 20  # the queue feeder threads' waits and lock acquires
    for edges in (c.wait_edge, c.hold_edge):
        owner = g.owner[edges]
        assert not blocked[owner[owner >= 0]].any()
    # the first step's main thread is no longer charged tens of ms for the feeder's wait
    w = a.windows[0]
    t0, t1 = a.nodes.time[w.start_node], a.nodes.time[w.end_node]
    in_step = (a.nodes.time[g.src[c.wait_edge]] >= t0) & (a.nodes.time[g.dst[c.wait_edge]] <= t1)
    assert c.overlap[in_step].sum() < 10_000_000


@pytest.mark.parametrize("s", [0.0, 0.5, 1.5])
def test_slowdown_fit_recovers_the_slope(s: float) -> None:
    rng = np.random.default_rng(0)
    names = np.repeat(np.arange(3), 20)
    base = np.array([100.0, 2000.0, 50_000.0])[names]
    x = rng.uniform(0, 1, len(names))
    d = base * (1 + s * x)
    assert _slowdown(d, x, names) == pytest.approx(s, abs=1e-6)
    # no spread in the overlap share: nothing can be said
    assert _slowdown(d, np.ones_like(x), names) == 0.0


@SKIP_CORPUS
def test_cpu_contention_with_cores_keeps_the_baseline_and_scales_with_the_cause() -> None:
    from ctda.whatif.scenario import run, with_cpus
    from ctda.whatif.select import parse_scale

    assert CORPUS is not None
    a = analyze(read_trace(CORPUS / "generated/e_cnn_bgthread_before.pt.trace.json.gz"))
    b = with_cpus(a, 2)
    assert len(b.contention) > len(a.contention)  # native ops slowed by the busy thread
    same = run(b, []).step_times()
    assert (same.predicted_ns == same.base_ns).all()  # no change: the replay is exact
    spec = "name~python_heavy_stats=0.2667"
    plain = run(a, [parse_scale(a, spec)]).step_times().predicted_ns
    cores = run(b, [parse_scale(b, spec)]).step_times().predicted_ns
    # the background thread's cores come back to the training thread's ops
    assert (cores < plain).all()
    assert ((plain - cores) / plain).median() > 0.04
