"""``cuda-graphs``: the region's device work captured in one CUDA graph and replayed.

The model (docs/optimisations.md#cuda-graphs), per region (every step by default):

- **host**: every CPU event inside the region, on the threads that launch device work
  (the autograd thread's too), takes no time, and so do the gaps between them; one graph
  launch takes their place at the region's first host event, costing ``per-node cost x
  device work items``;
- **device**: the region's kernels keep their durations and run back to back, each after
  the previous one on its stream plus the graph's inter-node gap, the first one a launch
  latency after the graph launch returned;
- **syncs**: a blocking call inside the region no longer waits (a graph cannot contain
  one), except the region's last blocking op when nothing is launched after it (the
  step's ``loss.item()``): it keeps its host cost and still waits for the graph's work.
  The host time before the region's first recorded op stays (the loop's own code); the
  unrecorded time after its final blocking op goes (in eager mode it is the step's
  tensors and autograd graph being freed as the step function returns).

Costs come from the trace's own ``cudaGraphLaunch`` events where it has some; otherwise
from constants measured on real graph launches (:data:`GRAPH_NODE_NS`, ...).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.whatif.effect import NEVER, Effect
from ctda.whatif.optimisations import OptimisationError, optimisation
from ctda.whatif.optimisations import common as c
from ctda.whatif.select import name_mask

I64 = npt.NDArray[np.int64]

#: host cost of cudaGraphLaunch per device work item of the graph, under the profiler:
#: the median of 24 launches of a 70-node graph (MLP fwd/bwd/SGD step) on an NVIDIA H200,
#: CUDA 13, PyTorch 2.11 (1.12 - 1.86 µs per node)
GRAPH_NODE_NS = 1_300
#: the first kernel of a graph starts this long after cudaGraphLaunch returns (5.3 - 6.6 µs)
GRAPH_START_NS = 6_000
#: gap between consecutive kernels of one graph on one stream (median 0.29 µs; an eager
#: back-to-back pair on the same device: 0.9 - 1.2 µs, the front-end processes each launch)
GRAPH_GAP_NS = 290


def _measured(a: Analysis) -> tuple[int, int, int, str]:
    """(per-node launch cost, start latency, inter-kernel gap, where from): from the trace's
    own graph launches when it has some, else the documented constants."""
    n = a.nodes
    gl = np.flatnonzero(name_mask(a, c.GRAPH_LAUNCH) & ~n.is_gpu)
    li = c.launcher(a)
    work = np.flatnonzero(n.is_gpu & (li >= 0) & np.isin(li, gl))
    if len(gl) == 0 or len(work) == 0:
        gap = c.kernel_gaps(a)
        g = GRAPH_GAP_NS if len(gap) == 0 else min(GRAPH_GAP_NS, int(gap.min()))
        return GRAPH_NODE_NS, GRAPH_START_NS, g, "constants measured on real graph launches (H200, CUDA 13)"
    calls, per_call = np.unique(li[work], return_counts=True)
    node = int(np.median((n.end[calls] - n.ts[calls]) / per_call))
    first = np.full(n.n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, li[work], n.ts[work])
    start = int(np.median(np.maximum(first[calls] - n.end[calls], 0)))
    gaps = c.kernel_gaps(a, work)
    g = int(np.median(gaps)) if len(gaps) else GRAPH_GAP_NS
    return node, start, g, f"measured on this trace's {len(calls)} graph launch(es)"


def _kept(a: Analysis, reg: c.Regions, rid: I64, cpu: I64) -> npt.NDArray[np.bool_]:
    """Per analysed event: part of a region's final blocking op (kept as it is).

    The last blocking CPU event of each region, when no device work is launched after it
    inside the region, and everything nested in its outermost op below the region's root."""
    n = a.nodes
    block = cpu[c.blocking(a)[cpu]]
    keep = np.zeros(n.n, dtype=bool)
    if len(block) == 0:
        return keep
    r = rid[np.searchsorted(cpu, block)]
    order = np.lexsort((n.ts[block], r))
    last = np.ones(len(order), dtype=bool)
    last[:-1] = r[order][1:] != r[order][:-1]
    final, final_r = block[order][last], r[order][last]
    stop = np.zeros(n.n, dtype=bool)
    stop[reg.root[reg.root >= 0]] = True
    top = c.top_ancestor_below(a, final, stop)
    launched = cpu[c.launches(a)[cpu]]
    lr = rid[np.searchsorted(cpu, launched)]
    # per region, the latest launch start inside it (excluding the final op's own tree)
    mask = c.subtree(a, top)
    latest = np.full(len(reg), np.iinfo(np.int64).min, dtype=np.int64)
    sel = ~mask[launched]
    np.maximum.at(latest, lr[sel], n.ts[launched[sel]])
    ok = latest[final_r] <= n.ts[top]
    return c.subtree(a, top[ok])


def _candidates(a: Analysis) -> list[str]:
    """Every step, where the trace launches device work."""
    return ["cuda-graphs"] if (c.launcher(a) >= 0).any() else []


@optimisation("cuda-graphs", arg="NAME (a record_function) or steps=A-B", candidates=_candidates)
def cuda_graphs(a: Analysis, arg: str | None) -> Effect:
    """The host side of each region collapses to one graph launch; its kernels run back to
    back at the device's inter-node gap; the syncs inside it no longer wait, except the
    step's final one (its ``loss.item()``).

    The region is every step, the events named ``NAME`` (``cuda-graphs:NAME``), or the
    steps ``A`` to ``B`` (``cuda-graphs:steps=A-B``).
    """
    n = a.nodes
    reg = c.regions(a, arg)
    if len(reg) == 0:
        raise OptimisationError(f"cuda-graphs: no region matches {arg!r}")
    # the host side is the threads that launch device work (the training and autograd
    # threads); a thread that never does (a logger, a pin-memory thread) keeps its time
    li = c.launcher(a)
    launch_lanes = np.unique(n.lane[li[li >= 0]])
    cpu_all = np.flatnonzero(~n.is_gpu & np.isin(n.lane, launch_lanes)).astype(np.int64)
    rid_all = reg.of(a, cpu_all)
    cpu, rid = cpu_all[rid_all >= 0], rid_all[rid_all >= 0]
    if len(cpu) == 0:
        raise OptimisationError(f"cuda-graphs: no host event inside {reg.label}")
    keep = _kept(a, reg, rid, cpu)
    gone = np.zeros(n.n, dtype=bool)
    gone[cpu] = True
    gone &= ~keep
    region_of = np.full(n.n, -1, dtype=np.int64)
    region_of[cpu] = rid
    work = np.flatnonzero(n.is_gpu & (li >= 0) & gone[np.maximum(li, 0)])
    if len(work) == 0:
        raise OptimisationError(f"cuda-graphs: no device work is launched inside {reg.label}")
    node_ns, start_ns, gap_ns, source = _measured(a)
    per_region = np.bincount(region_of[li[work]], minlength=len(reg))
    eff = Effect.identity("cuda-graphs", n.n)
    eff.factor[gone] = 0.0
    _host_edges(a, eff, reg, gone, keep, region_of, node_ns * per_region)
    _device_edges(a, eff, work, start_ns, gap_ns)
    eff.assumptions = [
        f"region: {reg.label} ({len(reg)} region(s)); {int(gone.sum()):,} host events collapse, "
        f"{int(keep.sum()):,} kept (the final blocking op of a region)",
        f"graph launch {node_ns / 1e3:.2f} µs per device work item "
        f"({int(np.median(per_region))} per region: {node_ns * float(np.median(per_region)) / 1e3:.1f} µs), "
        f"first kernel {start_ns / 1e3:.1f} µs after it, {gap_ns / 1e3:.2f} µs between kernels; {source}",
        "kernels keep their durations; the syncs inside a region stop waiting, except its final blocking op",
    ]
    return eff


def _host_edges(
    a: Analysis,
    eff: Effect,
    reg: c.Regions,
    gone: npt.NDArray[np.bool_],
    keep: npt.NDArray[np.bool_],
    region_of: I64,
    launch_ns: I64,
) -> None:
    """Host edges of the collapsed events: no time between or inside them, one graph launch
    (``launch_ns`` per region) at each region's first, their syncs no longer waiting."""
    n, g = a.nodes, a.graph
    se, de = c.node_event(a, g.src), c.node_event(a, g.dst)
    s_ok, d_ok = se >= 0, de >= 0
    s_ev, d_ev = np.maximum(se, 0), np.maximum(de, 0)
    s_gone = s_ok & gone[s_ev]
    # what comes in from outside (the step's lead-in) stays
    host = s_gone & ~n.is_gpu[s_ev] & d_ok & ~n.is_gpu[d_ev]
    # the unrecorded host time after the final blocking op is eager teardown (the step's
    # tensors and autograd graph freed as its function returns): a replay frees nothing
    is_root_end = np.zeros(n.n_nodes, dtype=bool)
    is_root_end[2 * reg.root[reg.root >= 0] + 1] = True
    host |= s_ok & keep[s_ev] & is_root_end[g.dst]
    eff.set_edges(np.flatnonzero(host), 0)
    first = _first_gone(a, reg, region_of, gone)
    lead = np.flatnonzero(d_ok & np.isin(de, first[first >= 0]) & ~s_gone & (g.dst == 2 * de))
    eff.set_edges(lead, a.calibration.weight[lead] + launch_ns[region_of[de[lead]]])
    eff.set_edges(np.flatnonzero(c.sync_edges(a) & d_ok & gone[d_ev]), NEVER)


def _device_edges(a: Analysis, eff: Effect, work: I64, start_ns: int, gap_ns: int) -> None:
    """The graph's work: ready a start latency after the launch, back to back on its stream."""
    n, g = a.nodes, a.graph
    se, de = c.node_event(a, g.src), c.node_event(a, g.dst)
    s_ok, d_ok = se >= 0, de >= 0
    in_graph = np.zeros(n.n, dtype=bool)
    in_graph[work] = True
    s_in, d_in = s_ok & in_graph[np.maximum(se, 0)], d_ok & in_graph[np.maximum(de, 0)]
    eff.set_edges(np.flatnonzero((g.etype == EdgeType.LAUNCH) & d_in), start_ns)
    seq = (g.etype == EdgeType.STREAM_SEQ) & s_ok & d_ok & (s_in | d_in) & (g.src == 2 * se + 1)
    eff.set_edges(np.flatnonzero(seq), gap_ns)  # ordered pairs only (end -> start)
    wait = (g.etype == EdgeType.STREAM_WAIT) & d_in
    eff.set_edges(np.flatnonzero(wait), np.minimum(a.calibration.weight[wait], gap_ns))


def _first_gone(a: Analysis, reg: c.Regions, region_of: I64, gone: npt.NDArray[np.bool_]) -> I64:
    """Per region: its earliest collapsed event, preferring the root's thread (-1: none)."""
    n = a.nodes
    ev = np.flatnonzero(gone)
    r = region_of[ev]
    root_lane = np.where(reg.root >= 0, n.lane[np.maximum(reg.root, 0)], -1)
    on_root = (root_lane[r] < 0) | (n.lane[ev] == root_lane[r])
    order = np.lexsort((n.ts[ev], ~on_root, r))
    first = np.full(len(reg), -1, dtype=np.int64)
    ev_o, r_o = ev[order], r[order]
    head = np.ones(len(order), dtype=bool)
    head[1:] = r_o[1:] != r_o[:-1]
    first[r_o[head]] = ev_o[head]
    return first
