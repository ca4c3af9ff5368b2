"""Stage: the job graph, calibrated and replayed like a rank's.

Contract: ``build_job_graph(analyses, skeletons, matching, offsets)`` -> :class:`JobGraph`.
It is the union of the ranks' dependency graphs (every rank's edges, rules and owners kept,
times moved onto the reference clock) plus, for every matched collective, an edge from each
participant's arrival to the collective's completion on every other participant (type
``CROSS_RANK``, charged to the collective on the completing rank), and for gloo an edge
from the ``c10d::*`` op that queued the work to the start of that work on gloo's thread
(``collective_issue``; nothing else says the worker thread waited for the caller).

Calibration is the single-rank one (the last arrival binds; every other edge weighs at most
its floor, a sync edge its rank's measured return latency), so replay reproduces every
rank's timestamps. One refinement makes a changed
run honest: a collective needs its transfer time after the last arrival whoever arrives
last, so its non-binding in-edges (its own duration, the other ranks' arrivals) weigh up to
the transfer observed on that rank instead of a fixed floor.

A second refinement binds waits the worker thread closes late (``collective_wait_edges``):
a thread of a rank that woke after a collective's last arrival but before the collective's
event on gloo's thread closed was woken by that collective (gloo signals the waiting
future, then is descheduled before it closes its profiler event). Nothing else ties the
wake to the collective, so without these edges the wait would replay as the waiter's own
work and hold a changed job at its observed length. They re-time predictions only
(``JobGraph.model``): the observed job path stays the one the cross-rank stage walks over
the ranks' skeletons, which know collectives, not wakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis import graph as cdg
from ctda.analysis.calibrate import Calibration, calibrate
from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.nodes import Nodes
from ctda.analysis.propagate import Timing, replay
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.sync_latency import union_floors
from ctda.analysis.windows import Window
from ctda.job.match import ClockOffsets, Matching

I64 = npt.NDArray[np.int64]


@dataclass
class JobGraph:
    """Every rank's events in one graph; event ``i`` of rank ``r`` is job event ``base[r] + i``."""

    ranks: list[int]
    base: dict[int, int]
    nodes: Nodes
    graph: cdg.Graph
    calibration: Calibration
    timing: Timing
    event_cls: npt.NDArray[np.int8]
    rank_of: I64  # per job event
    names: npt.NDArray[np.object_]  # per job event
    windows: dict[int, list[Window]]  # per rank, node ids of the job graph
    offsets: ClockOffsets
    dropped_cross: int = 0  # cross-rank edges the clocks could not make causal
    n_cross: int = 0
    n_issue: int = 0
    #: the graph and weights what-ifs replay: ``graph`` plus the ``collective_wait`` edges
    whatif_graph: cdg.Graph | None = None
    whatif_calibration: Calibration | None = None

    def model(self) -> tuple[cdg.Graph, Calibration]:
        """The graph and calibration a what-if re-times (replaying them as observed is exact)."""
        if self.whatif_graph is None or self.whatif_calibration is None:
            return self.graph, self.calibration
        return self.whatif_graph, self.whatif_calibration

    window_ends: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def job_node(self, rank: int, local_node: I64 | int) -> I64:
        return np.asarray(local_node, dtype=np.int64) + 2 * self.base[rank]

    def replay_exact(self) -> bool:
        return bool(np.array_equal(self.timing.time, self.nodes.time))


def build_job_graph(analyses: dict[int, Analysis], matching: Matching, offsets: ClockOffsets) -> JobGraph:
    """Union of the ranks' graphs plus cross-rank and issue edges; calibrated and replayed."""
    ranks = sorted(analyses)
    base, n_total = {}, 0
    for r in ranks:
        base[r] = n_total
        n_total += analyses[r].nodes.n
    nodes = _union_nodes(analyses, base, offsets)
    batches = [b for r in ranks for b in _rank_batches(analyses[r], base[r], n_total)]
    cross = cross_rank_edges(matching, base)
    issue = issue_edges(matching, base)
    g = cdg.build(nodes, [*batches, issue, cross])
    ctxs = [(RuleContext(analyses[r].table, analyses[r].nodes), analyses[r].graph, base[r]) for r in ranks]
    cal = calibrate(g, union_floors(g, ctxs))
    waits = collective_wait_edges(g, cal, matching, base, offsets)
    cal = _collective_floors(g, cal, matching, base, offsets)
    wg, wcal = None, None
    if len(waits):
        wg = cdg.build(nodes, [*batches, issue, cross, waits])
        wcal = _collective_floors(wg, calibrate(wg, union_floors(wg, ctxs)), matching, base, offsets)
    windows = {
        r: [_shift(w, base[r], analyses[r].nodes.n, n_total) for w in analyses[r].windows] for r in ranks
    }
    ends = np.array([w.end_node for r in ranks for w in windows[r]], dtype=np.int64)
    timing = replay(g, cal.weight, cal.binding, int(nodes.time[nodes.source]), ends)
    return JobGraph(
        ranks=ranks,
        base=base,
        nodes=nodes,
        graph=g,
        calibration=cal,
        timing=timing,
        event_cls=np.concatenate([analyses[r].event_cls for r in ranks]).astype(np.int8),
        rank_of=np.concatenate([np.full(analyses[r].nodes.n, r, dtype=np.int64) for r in ranks]),
        names=np.concatenate([analyses[r].table.decoded("name", analyses[r].nodes.uid) for r in ranks]),
        windows=windows,
        offsets=offsets,
        dropped_cross=int(g.dropped.get("cross_rank", 0)),
        n_cross=len(cross),
        n_issue=len(issue),
        window_ends=ends,
        whatif_graph=wg,
        whatif_calibration=wcal,
    )


def _union_nodes(analyses: dict[int, Analysis], base: dict[int, int], offsets: ClockOffsets) -> Nodes:
    ranks = sorted(analyses)
    parts = [analyses[r].nodes for r in ranks]
    off = [offsets.offset.get(r, 0) for r in ranks]
    lane_base = np.cumsum([0] + [int(p.lane.max()) + 1 if p.n else 0 for p in parts[:-1]])
    ts = np.concatenate([p.ts + o for p, o in zip(parts, off)])
    end = np.concatenate([p.end + o for p, o in zip(parts, off)])
    parent = np.concatenate([np.where(p.parent >= 0, p.parent + base[r], -1) for p, r in zip(parts, ranks)])
    time = np.empty(2 * len(ts) + 2, dtype=np.int64)
    time[0 : 2 * len(ts) : 2] = ts
    time[1 : 2 * len(ts) : 2] = end
    time[-2] = min(int(p.time[p.source]) + o for p, o in zip(parts, off))
    time[-1] = max(int(p.time[p.sink]) + o for p, o in zip(parts, off))
    return Nodes(
        uid=np.concatenate([p.uid for p in parts]),
        ts=ts,
        end=end,
        lane=np.concatenate([p.lane + b for p, b in zip(parts, lane_base)]).astype(np.int32),
        kind=np.concatenate([p.kind for p in parts]),
        parent=parent.astype(np.int64),
        depth=np.concatenate([p.depth for p in parts]),
        is_gpu=np.concatenate([p.is_gpu for p in parts]),
        index_of_uid=np.zeros(0, dtype=np.int64),  # uids repeat across ranks
        time=time,
    )


def _rank_batches(a: Analysis, base: int, n_total: int) -> list[EdgeBatch]:
    """A rank's edges per rule, on job node ids; SOURCE/SINK edges are re-made for the job."""
    g = a.graph
    keep = (g.etype != EdgeType.RELEASE) & (g.etype != EdgeType.TERMINAL)
    out = []
    for code in np.unique(g.rule[keep]):
        sel = keep & (g.rule == code)
        out.append(
            EdgeBatch.of(
                g.src[sel] + 2 * base,
                g.dst[sel] + 2 * base,
                g.etype[sel],
                g.rule_names[int(code)],
                np.where(g.owner[sel] >= 0, g.owner[sel] + base, -1),
            )
        )
    return out


def _parts_nodes(matching: Matching, base: dict[int, int]) -> tuple[I64, I64]:
    """Job event id of every matched part, and its collective id."""
    p = matching.parts
    ev = p.event.to_numpy(dtype=np.int64) + p["rank"].map(base).to_numpy(dtype=np.int64)
    return ev, p.cid.to_numpy(dtype=np.int64)


def cross_rank_edges(matching: Matching, base: dict[int, int]) -> EdgeBatch:
    """Every participant's arrival -> the collective's completion on every other participant."""
    if len(matching.parts) == 0:
        return EdgeBatch.of([], [], EdgeType.CROSS_RANK, "cross_rank")
    ev, cid = _parts_nodes(matching, base)
    # all ordered pairs of parts within a collective (parts are sorted by cid)
    frame = pd.DataFrame({"cid": cid, "ev": ev})
    pairs = frame.merge(frame, on="cid", suffixes=("_q", "_r"))
    pairs = pairs[pairs.ev_q != pairs.ev_r]
    q = pairs.ev_q.to_numpy(dtype=np.int64)
    r = pairs.ev_r.to_numpy(dtype=np.int64)
    return EdgeBatch.of(2 * q, 2 * r + 1, EdgeType.CROSS_RANK, "cross_rank", owner=r)


def issue_edges(matching: Matching, base: dict[int, int]) -> EdgeBatch:
    """gloo: the queuing ``c10d::*`` op's start -> its work's start on gloo's thread."""
    p = matching.parts
    has = p.issue.to_numpy() >= 0
    b = p["rank"].map(base).to_numpy(dtype=np.int64)[has]
    src = 2 * (p.issue.to_numpy(dtype=np.int64)[has] + b)
    dst = 2 * (p.event.to_numpy(dtype=np.int64)[has] + b)
    return EdgeBatch.of(src, dst, EdgeType.CROSS_THREAD, "collective_issue")


def _collective_floors(
    g: cdg.Graph, cal: Calibration, matching: Matching, base: dict[int, int], offsets: ClockOffsets
) -> Calibration:
    """Non-binding in-edges of a collective's completion weigh up to its observed transfer,
    and those of a wake it caused (``collective_wait``) up to the observed delay of the wake."""
    if len(matching.parts) == 0:
        return cal
    ev, _, _, last = _arrivals(matching, base, offsets)
    done = g.nodes.time[2 * ev + 1]
    transfer = np.zeros(g.nodes.n, dtype=np.int64)
    last_of = np.zeros(g.nodes.n, dtype=np.int64)
    is_coll = np.zeros(g.nodes.n, dtype=bool)
    transfer[ev] = np.maximum(done - last, 0)
    last_of[ev] = last
    is_coll[ev] = True
    into = g.dst % 2 == 1
    owner_ev = np.where(into & (g.dst < 2 * g.nodes.n), g.dst // 2, 0)
    sel = into & (g.dst < 2 * g.nodes.n) & is_coll[owner_ev] & ~cal.binding
    sel &= (g.etype == EdgeType.CROSS_RANK) | (g.owner == owner_ev)
    w = cal.weight.copy()
    w[sel] = np.minimum(cal.gap[sel], np.maximum(cal.weight[sel], transfer[owner_ev[sel]]))
    if "collective_wait" in g.rule_names:
        cw = (g.rule == g.rule_names.index("collective_wait")) & ~cal.binding
        delay = g.nodes.time[g.dst[cw]] - last_of[g.owner[cw]]
        w[cw] = np.minimum(cal.gap[cw], np.maximum(cal.weight[cw], delay))
    return Calibration(weight=w, binding=cal.binding, gap=cal.gap)


#: the shortest wait taken for a wake by a collective (shorter gaps are the waiter's own)
MIN_WAIT_NS = 1_000_000


def _arrivals(matching: Matching, base: dict[int, int], offsets: ClockOffsets) -> tuple[I64, I64, I64, I64]:
    """Per matched part: its job event, collective id, its arrival and the collective's last."""
    p = matching.parts
    ev, cid = _parts_nodes(matching, base)
    t_arr = p.t_arrive.to_numpy() + p["rank"].map(offsets.offset).fillna(0).to_numpy(dtype=np.int64)
    last = pd.Series(t_arr).groupby(cid).transform("max").to_numpy(dtype=np.int64)
    return ev, cid, t_arr.astype(np.int64), last


def collective_wait_edges(
    g: cdg.Graph, cal: Calibration, matching: Matching, base: dict[int, int], offsets: ClockOffsets
) -> EdgeBatch:
    """Every participant's arrival -> a wake its collective caused but no edge explains.

    A wake is the end of a binding gap or stretch of own time on another CPU thread of a
    participating rank that arrived at least ``MIN_WAIT_NS`` before the last: the thread
    went into it by the rank's arrival (within ``MIN_WAIT_NS``) and stayed until after the
    last arrival, and left it before the collective's event closed or within
    ``MIN_WAIT_NS`` after (no edge from the event's end binds it): the rank's first such
    wake after the last arrival. A thread that kept computing through the wait began its
    stretch later, and is left alone. The edges are ``CROSS_RANK`` and charged to the collective on the waking
    rank; with the observed times the last arrival binds the wake and replay is unchanged.
    """
    empty = EdgeBatch.of([], [], EdgeType.CROSS_RANK, "collective_wait")
    if len(matching.parts) == 0:
        return empty
    ev, cid, arrive, last = _arrivals(matching, base, offsets)
    n = g.nodes
    waited = (last - arrive >= MIN_WAIT_NS) & ~n.is_gpu[ev]
    ev, cid, arrive, last = ev[waited], cid[waited], arrive[waited], last[waited]
    inner = (g.src < 2 * n.n) & (g.dst < 2 * n.n)
    timeline = np.isin(g.etype, [EdgeType.SEGMENT, EdgeType.DURATION, EdgeType.THREAD_SEQ])
    k = np.flatnonzero(cal.binding & inner & timeline & (cal.gap >= MIN_WAIT_NS))
    k = k[~n.is_gpu[g.dst[k] // 2]]
    if len(k) == 0 or len(ev) == 0:
        return empty
    starts = np.array([base[r] for r in sorted(base)], dtype=np.int64)
    rank_ix = np.searchsorted(starts, g.dst[k] // 2, side="right") - 1
    # candidate wakes sorted by (rank, time): each part searches its rank's block
    span = int(n.time.max() - n.time.min()) + 1
    key = rank_ix * span + (n.time[g.dst[k]] - n.time.min())
    order = np.argsort(key, kind="stable")
    k, key = k[order], key[order]
    p_rank = np.searchsorted(starts, ev, side="right") - 1
    done = n.time[2 * ev + 1] + MIN_WAIT_NS
    lo = np.searchsorted(key, p_rank * span + (last - n.time.min()), side="left")
    hi = np.searchsorted(key, p_rank * span + (done - n.time.min()), side="left")
    count = np.maximum(hi - lo, 0)
    part = np.repeat(np.arange(len(ev)), count)
    cand = k[np.repeat(lo, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))]
    began = n.time[g.src[cand]]
    ok = (began < last[part]) & (began <= arrive[part] + MIN_WAIT_NS)
    ok &= n.lane[g.dst[cand] // 2] != n.lane[ev[part]]
    part, cand = part[ok], cand[ok]
    if len(part) == 0:
        return empty
    first = np.unique(part, return_index=True)[1]  # candidates are in time order per part
    part, wake = part[first], g.dst[cand[first]]
    # every participant of the part's collective arrives -> the wake
    every, every_cid = _parts_nodes(matching, base)
    frame = pd.DataFrame({"cid": every_cid, "arrive": 2 * every})
    woke = pd.DataFrame({"cid": cid[part], "wake": wake, "owner": ev[part]})
    pairs = woke.merge(frame, on="cid")
    return EdgeBatch.of(
        pairs.arrive.to_numpy(dtype=np.int64),
        pairs.wake.to_numpy(dtype=np.int64),
        EdgeType.CROSS_RANK,
        "collective_wait",
        owner=pairs.owner.to_numpy(dtype=np.int64),
    )


def _shift(w: Window, base: int, n_rank: int, n_total: int) -> Window:
    def node(k: int) -> int:
        if k == 2 * n_rank:
            return 2 * n_total
        if k == 2 * n_rank + 1:
            return 2 * n_total + 1
        return k + 2 * base

    return Window(
        w.label, w.step, node(w.start_node), node(w.end_node), w.event + base if w.event >= 0 else -1
    )
