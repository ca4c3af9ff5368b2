"""GIL contention inside events: the part of a segment spent waiting for another thread.

The hand-off rule (``gil``) sees a thread resume after a visible gap. But a thread also
waits for the GIL *inside* open events: on return from a builtin, and, when the profiler
records Python stacks, at every op start. Those waits are invisible as boundaries; they
show up as inflated self time. We estimate them from timestamps: while another thread of
the process was executing a Python frame (it held the GIL), a thread that needed the GIL
made no progress. So each GIL-needing segment of a thread is split into its own work and
the overlap with other threads' GIL-holding segments.

A what-if then re-weighs a contended segment as
``own * f(owner) + sum(overlap_b * f(owner of b))``: the wait shrinks with the work that
caused it. On a free-running loop (a thread whose only idle time is sleeping, see
:func:`loops`) the cause's factor is instead the change of the loop's busy share: when its
work per round shrinks, it runs its rounds more often, so the load it puts on the others
shrinks with its busy share, not with its work. The baseline is unchanged (all factors,
and every busy share's change, are 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeType
from ctda.analysis.graph import Graph
from ctda.analysis.intervals import intersect, overlap_sums
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.cross_thread import BLOCKING_FRAMES
from ctda.ingest.kinds import Kind
from ctda.ingest.npx import factorize, run_starts
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


@dataclass
class Contention:
    """Sparse (waiting edge, holding edge, overlap ns) triples.

    ``hold_loop`` is, per triple, the free-running loop its holding edge belongs to (-1:
    none); ``loop_edge`` are the busy timeline edges of those loops, ``loop_of`` the loop
    of each, ``loop_busy`` its observed length (ns), and ``loop_idle`` each loop's idle
    time (ns), which stays fixed in a what-if.
    """

    wait_edge: I64
    hold_edge: I64
    overlap: I64
    hold_loop: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loop_edge: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loop_of: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    loop_busy: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    loop_idle: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def empty(cls) -> Contention:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z)

    def __len__(self) -> int:
        return len(self.wait_edge)

    def reweigh(self, weight: I64, owner_factor: npt.NDArray[np.float64], owner: I64) -> I64:
        """Weights under per-edge owner factors, with contended waits scaled by their cause."""
        if len(self) == 0:
            return weight
        hold_loop = self.hold_loop if len(self.hold_loop) == len(self) else np.full(len(self), -1)
        return _reweigh(
            np.asarray(weight, dtype=np.int64),
            np.asarray(owner_factor, dtype=np.float64),
            np.asarray(owner, dtype=np.int64),
            (self.wait_edge, self.hold_edge, self.overlap, np.asarray(hold_loop, dtype=np.int64)),
            (
                np.asarray(self.loop_edge, dtype=np.int64),
                np.asarray(self.loop_of, dtype=np.int64),
                np.asarray(self.loop_busy, dtype=np.float64),
                np.asarray(self.loop_idle, dtype=np.float64),
            ),
        )


@kernel
def _reweigh(weight, owner_factor, owner, triples, loops):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``rint(max(w - waited, 0) * f + sum(overlap * c(holder)))`` per edge.

    ``f`` is an edge's owner's factor; ``c`` is its holder's factor, or, when the holder is
    on a free-running loop, the change of the loop's busy share ``busy' / (busy' + idle)``
    over ``busy / (busy + idle)`` (``busy'``: its observed busy time under the factors).
    With all factors 1, ``busy' == busy`` (same sums in the same order) and the change is
    exactly 1. Sums accumulate in triple order, as ``np.bincount`` does, so results match
    it bit for bit.
    """
    wait_edge, hold_edge, overlap, hold_loop = triples
    loop_edge, loop_of, loop_busy, loop_idle = loops
    m = weight.shape[0]
    f_edge = np.empty(m, dtype=np.float64)
    for e in range(m):
        o = owner[e]
        f_edge[e] = owner_factor[o] if o >= 0 else 1.0
    k_loops = loop_idle.shape[0]
    busy = np.zeros(k_loops, dtype=np.float64)
    busy_new = np.zeros(k_loops, dtype=np.float64)
    for i in range(loop_edge.shape[0]):
        e = loop_edge[i]
        busy[loop_of[i]] += loop_busy[i]
        busy_new[loop_of[i]] += loop_busy[i] * f_edge[e]
    share = np.ones(k_loops, dtype=np.float64)
    for q in range(k_loops):
        if busy[q] > 0 and busy_new[q] + loop_idle[q] > 0:
            share[q] = (busy_new[q] / busy[q]) * ((busy[q] + loop_idle[q]) / (busy_new[q] + loop_idle[q]))
    waited = np.zeros(m, dtype=np.float64)
    caused = np.zeros(m, dtype=np.float64)
    for k in range(wait_edge.shape[0]):
        e = wait_edge[k]
        waited[e] += overlap[k]
        c = share[hold_loop[k]] if hold_loop[k] >= 0 else f_edge[hold_edge[k]]
        caused[e] += overlap[k] * c
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        own = weight[e] - waited[e]
        if own < 0:
            # a non-binding edge weighs less than what it waited (its end was set by another
            # edge): its contended part is at most its weight, so it never outgrows it
            own = 0.0
            if waited[e] > 0:
                caused[e] *= weight[e] / waited[e]
        out[e] = np.int64(np.rint(own * f_edge[e] + caused[e]))
    return out


@dataclass(frozen=True)
class Timeline:
    """The CPU timeline edges the contention model works on, with what each pass reads of
    them: their threads, the events that own them (-1: none), start and end times, and
    their order by start (ties in edge order), each computed once."""

    edge: I64
    lane: I64
    owner: I64
    t0: I64
    t1: I64
    by_start: I64


def _timeline_edges(g: Graph) -> I64:
    n = g.nodes.n
    t = (g.etype == EdgeType.DURATION) | (g.etype == EdgeType.SEGMENT) | (g.etype == EdgeType.THREAD_SEQ)
    return np.flatnonzero(
        t & (g.src < 2 * n) & (g.dst < 2 * n) & ~g.nodes.is_gpu[np.minimum(g.src, 2 * n - 1) // 2]
    )


def estimate(ctx: RuleContext, g: Graph) -> Contention:
    """Overlaps between GIL-needing segments of each thread and GIL-holding ones of others."""
    n = ctx.nodes
    e = _timeline_edges(g)
    if len(e) == 0:
        return Contention.empty()
    lane = n.lane[g.src[e] // 2].astype(np.int64)
    lanes = np.flatnonzero(np.bincount(lane))  # lanes of analysed events are >= 0
    if len(lanes) < 2:
        return Contention.empty()
    own = g.owner[e]
    builtin = ctx.name_mask(r"^<built-in")
    blocked = ctx.name_mask(BLOCKING_FRAMES)
    is_py = np.zeros(len(e), dtype=bool)
    has = own >= 0
    is_py[has] = n.kind[own[has]] == Kind.PYTHON
    waiting = np.where(has, blocked[np.maximum(own, 0)], False)
    holds = is_py & ~np.where(has, builtin[np.maximum(own, 0)], False) & ~waiting
    # needs the GIL: Python frames, gaps, and anything that ends in an op start (stack
    # capture); a thread blocked on a lock or condition neither holds nor wants it
    needs = (is_py | ~has | (g.dst[e] % 2 == 0)) & ~waiting
    t0, t1 = n.time[g.src[e]], n.time[g.dst[e]]
    pid = ctx.lane_proc
    live = t1 > t0
    # every timeline edge ordered by start (ties in edge order), once: each subset taken
    # from it below (candidates of every lane at once, a lane's share of them) is then
    # already in the order the intersection needs
    by_start = np.argsort(t0, kind="stable")
    need_all = by_start[(needs & live)[by_start]]
    hold_all = by_start[(holds & live)[by_start]]
    need_lane, hold_lane = lane[need_all], lane[hold_all]
    hold_pid = pid[hold_lane]
    waits: list[I64] = []
    holds_e: list[I64] = []
    ovs: list[I64] = []
    for a_lane in lanes:
        a = need_all[need_lane == a_lane]
        b = hold_all[(hold_lane != a_lane) & (hold_pid == pid[a_lane])]
        if len(a) == 0 or len(b) == 0:
            continue
        wa, wb, ov = intersect(t0[a], t1[a], t0[b], t1[b])
        waits.append(a[wa])
        holds_e.append(b[wb])
        ovs.append(ov)
    if waits:
        w_all, h_all, o_all = np.concatenate(waits), np.concatenate(holds_e), np.concatenate(ovs)
        o_all = _python_share(ctx, own, lane, holds, t1 - t0, w_all, o_all)
        waits, holds_e, ovs = [e[w_all]], [e[h_all]], [o_all]
    gil = np.bincount(
        np.concatenate(waits) if waits else np.zeros(0, dtype=np.int64),
        weights=np.concatenate(ovs).astype(np.float64) if ovs else None,
        minlength=len(g.src),
    ).astype(np.float64)
    busy = (t1 > t0) & has & ~waiting
    tl = Timeline(e, lane, own, t0, t1, by_start)
    cpu = cpu_contention(ctx, g, tl, busy, gil)
    waits.append(cpu.wait_edge)
    holds_e.append(cpu.hold_edge)
    ovs.append(cpu.overlap)
    c = Contention(np.concatenate(waits), np.concatenate(holds_e), np.concatenate(ovs))
    if not len(c):
        return Contention.empty()
    return _cap(_with_loops(c, loops(ctx, g, tl, busy, waiting, gil[e]), g), g)


#: fewest uncontended instances of a Python frame on a thread to read its own work from
MIN_FREE = 4


def _python_share(
    ctx: RuleContext, own: I64, lane: I64, holds: npt.NDArray[np.bool_], span: I64, w: I64, ov: I64
) -> I64:
    """The part of each overlap (waiting segment ``w``, by index into the timeline edges)
    that its thread spent waiting, when it was itself running Python.

    Two threads whose Python frames overlap took turns on the GIL. How the overlap divides
    depends on how much Python the waiting side had to run: a frame that runs for long
    stretches alternates with the other thread (switch interval) and waited about half of
    it; a frame that runs a few microseconds of Python between two ops waited for nearly all
    of it. The trace says which: the same frame's segments on the same thread that no other
    thread's Python overlapped show its own work. Where a thread has at least ``MIN_FREE``
    such segments of a frame, a contended segment of that frame waited its length less their
    median (at most its overlaps); elsewhere it waited half of each overlap.
    """
    runs = holds[w]
    if not runs.any():
        return ov
    total = np.bincount(w, weights=ov.astype(np.float64), minlength=len(span))
    names = ctx.name_codes
    key = lane * (int(names.max()) + 1) + names[np.maximum(own, 0)]
    free = np.flatnonzero(holds & (total == 0) & (span > 0))
    waited = ov // 2
    if len(free):
        order = np.lexsort((span[free], key[free]))
        k, d = key[free][order], span[free][order]
        first = run_starts(k)
        count = np.diff(np.r_[first, len(k)])
        ok = count >= MIN_FREE
        keys, median = k[first][ok], d[first + count // 2][ok]
        pos = np.clip(np.searchsorted(keys, key[w[runs]]), 0, max(len(keys) - 1, 0))
        known = np.zeros(len(w), dtype=bool)
        if len(keys):
            known[runs] = keys[pos] == key[w[runs]]
        seg = w[known]
        wait_seg = np.clip(span[seg] - median[pos[known[runs]]], 0, total[seg])
        share = wait_seg / np.maximum(total[seg], 1.0)
        waited[known] = np.floor(ov[known] * share).astype(np.int64)
    return np.where(runs, waited, ov)  # type: ignore[no-any-return]


#: a thread that sleeps at least this often, and whose other waits are shorter than its
#: sleeps, is taken for a free-running loop
MIN_SLEEPS = 2
SLEEP_FRAMES = r"^<built-in function sleep>$|^time\.sleep$"


@dataclass
class Loops:
    """Free-running loops: per loop its thread, busy edges and fixed idle time (ns)."""

    lane: I64
    edge: I64
    of: I64
    busy: npt.NDArray[np.float64]
    idle: npt.NDArray[np.float64]
    since: I64  # per loop: its first sleep's start (ns)


def loops(
    ctx: RuleContext,
    g: Graph,
    tl: Timeline,
    busy: npt.NDArray[np.bool_],
    waiting: npt.NDArray[np.bool_],
    gil_waited: npt.NDArray[np.float64],
) -> Loops:
    """Threads that run their work in a loop paced by sleeping, not by other threads.

    A thread that sleeps between rounds (``time.sleep``: it waits for no one) repeats its
    work at a rate set by its own round: work ``W`` then idle ``I``. If its work per round
    shrinks to ``W'``, it comes back ``(W + I) / (W' + I)`` times as often, so its busy
    share, hence the cores and the GIL it takes from the others, falls from ``W / (W + I)``
    only to ``W' / (W' + I)``: a thread that is almost always busy keeps loading the host
    whatever each round costs. A thread that waits for other threads (a queue, a lock, a
    condition) or never waits is paced by them or by its data: its load scales with its
    work, as an event's factor says. So a loop is a thread with at least ``MIN_SLEEPS``
    sleeps whose other waits add up to less than its sleeping; its idle ``I`` is all of
    its waiting (sleeps and the rest), and ``W`` its busy time less the GIL waits found in
    it (``gil_waited``, per edge of ``e``: a thread waiting for the GIL is not running),
    both over its whole rounds (first sleep to last).
    """
    z = np.zeros(0, dtype=np.int64)
    e, lane, own, t0, t1 = tl.edge, tl.lane, tl.owner, tl.t0, tl.t1
    has = own >= 0
    sleep = np.zeros(len(e), dtype=bool)
    sleep[has] = ctx.name_mask(SLEEP_FRAMES)[own[has]]
    k = int(lane.max()) + 1 if len(lane) else 0
    # sleep calls (the segment each opens with), not segments
    call = sleep & ((g.src[e] % 2) == 0) & (g.src[e] // 2 == own)
    calls = np.bincount(lane[call], minlength=k)
    # whole rounds only: from the first sleep's start to the last one's. Before the first
    # one the thread may have been asleep already (a call begun before profiling started is
    # not recorded, and reads as busy time of the frame around it)
    lo = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(k, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, lane[call], t0[call])
    np.maximum.at(hi, lane[call], t0[call])
    dur = np.maximum(np.minimum(t1, hi[lane]) - np.maximum(t0, lo[lane]), 0).astype(np.float64)
    slept = np.bincount(lane, weights=np.where(sleep, dur, 0.0), minlength=k)
    other = np.bincount(lane, weights=np.where(waiting & ~sleep, dur, 0.0), minlength=k)
    is_loop = (calls >= MIN_SLEEPS) & (slept > other)
    ids = np.flatnonzero(is_loop)
    if len(ids) == 0:
        return Loops(z, z, z, np.zeros(0), np.zeros(0), z)
    loop_of_lane = np.full(k, -1, dtype=np.int64)
    loop_of_lane[ids] = np.arange(len(ids))
    sel = np.flatnonzero(busy & is_loop[lane] & (dur > 0))
    # the part of each segment inside the rounds, less its GIL waits (pro rata)
    ran = dur[sel] * np.maximum(1.0 - gil_waited[sel] / np.maximum(t1[sel] - t0[sel], 1), 0.0)
    idle = np.asarray((slept + other)[ids], dtype=np.float64)
    return Loops(ids.astype(np.int64), e[sel], loop_of_lane[lane[sel]], ran, idle, lo[ids])


def _with_loops(c: Contention, lp: Loops, g: Graph) -> Contention:
    """``c`` with each triple's holding loop (-1 when its holder is on none, or ran before
    the loop's first sleep: the thread may have been asleep then, unrecorded, and the
    loop's rate says nothing about it; the last round, cut by the end of profiling, is
    still one of the loop's)."""
    if len(lp.lane) == 0:
        return c
    lane_of_edge = g.nodes.lane[np.minimum(g.src[c.hold_edge], 2 * g.nodes.n - 1) // 2].astype(np.int64)
    loop_of_lane = np.full(int(max(lane_of_edge.max(), lp.lane.max())) + 1, -1, dtype=np.int64)
    loop_of_lane[lp.lane] = np.arange(len(lp.lane))
    loop = loop_of_lane[lane_of_edge]
    at = g.nodes.time[g.src[c.hold_edge]]
    q = np.maximum(loop, 0)
    loop = np.where((loop >= 0) & (at >= lp.since[q]), loop, -1)
    return replace(
        c,
        hold_loop=loop,
        loop_edge=lp.edge,
        loop_of=lp.of,
        loop_busy=lp.busy,
        loop_idle=lp.idle,
    )


def cpu_contention(
    ctx: RuleContext,
    g: Graph,
    tl: Timeline,
    busy: npt.NDArray[np.bool_],
    gil_waited: npt.NDArray[np.float64],
) -> Contention:
    """Time native ops lost to other threads of the host that were running beside them.

    ``tl`` are the CPU timeline edges with their threads, ``busy`` those a thread spent
    running (inside a recorded event that is not a blocking wait), ``gil_waited`` the GIL
    wait already found in each edge (indexed by edge id). On a host with fewer cores than
    runnable threads, work gets a share of the cores: it runs slower while other threads
    are busy. How much slower is measured on the trace itself: over instances of the same
    event name on one thread, the self time (less its GIL waits) grows with the share ``x``
    of it that overlapped other threads' busy time, ``d = b * (1 + s * x)`` (least squares
    per name; ``s`` is the time-weighted median over all threads' names with enough spread
    in ``x``, since a busy thread takes cores from every other one). A native op's segment
    that overlapped busy time ``ov`` of another thread then lost ``ov * s / (1 + s)`` to it,
    and a what-if scales that loss with the factor of the busy segment's event, as for GIL
    waits. (Python frames are left to the GIL model, which already explains their waits.)
    """
    n = ctx.nodes
    z = np.zeros(0, dtype=np.int64)
    e, lane, own, t0, t1 = tl.edge, tl.lane, tl.owner, tl.t0, tl.t1
    work = busy & (own >= 0)
    working = np.zeros(max(Kind) + 1, dtype=bool)  # by kind: a lookup, not np.isin's sort
    working[[Kind.CPU_OP, Kind.PYTHON]] = True
    work[work] = working[n.kind[own[work]]]
    names = ctx.name_codes
    bus = tl.by_start[busy[tl.by_start]]  # by start, ties in edge order (as each lane's)
    worked = tl.by_start[work[tl.by_start]]
    # a lane whose threads' work has no other lane's busy time to meet is left out
    n_bus = np.bincount(lane[bus], minlength=int(lane.max()) + 1)
    worked = worked[(len(bus) - n_bus)[lane[worked]] > 0]
    waited = gil_waited[e[worked]]
    # per event: its self time, and the other threads' busy time beside it (less GIL waits)
    d = np.bincount(own[worked], weights=(t1[worked] - t0[worked]) - waited, minlength=n.n).astype(
        np.float64, copy=False
    )
    over = np.bincount(own[worked], weights=_beside(tl, worked, bus).astype(np.float64), minlength=n.n)
    over -= np.bincount(own[worked], weights=waited, minlength=n.n)
    events = np.flatnonzero(d > 0)
    group = n.lane[events].astype(np.int64) * (int(names.max()) + 1) + names[events]
    slow = _slowdown(d[events], np.maximum(over[events], 0) / np.maximum(d[events], 1.0), group)
    if slow <= 0 and ctx.options.cpus > 0:
        # nothing to measure (e.g. another thread was busy throughout): with C cores, a
        # native op is taken to run on all of them (intra-op threads), and each other busy
        # thread to take an equal share, leaving the op C / (C + 1) of the machine
        slow = 1.0 / ctx.options.cpus
    if slow <= 0:
        return Contention(z, z, z)
    # only now the pairs themselves, of native ops (a trace with no slowdown never needs them)
    native = worked[n.kind[own[worked]] == Kind.CPU_OP]
    waits, holds, ovs = [z], [z], [z]
    for a_lane in np.flatnonzero(np.bincount(lane[native])):
        a = native[lane[native] == a_lane]
        b = bus[lane[bus] != a_lane]
        wa, wb, ov = intersect(t0[a], t1[a], t0[b], t1[b])
        waits.append(e[a[wa]])
        holds.append(e[b[wb]])
        ovs.append(np.floor(ov * (slow / (1.0 + slow))).astype(np.int64))
    return Contention(np.concatenate(waits), np.concatenate(holds), np.concatenate(ovs))


def _beside(tl: Timeline, a: I64, b: I64) -> I64:
    """Per edge of ``a``: its summed overlap with the edges of ``b`` on other lanes than its
    own (what adding up every overlapping pair gives, without listing the pairs).

    ``a`` and ``b`` are ordered by start (``tl.by_start``'s order)."""
    out = np.zeros(len(a), dtype=np.int64)
    for a_lane in np.flatnonzero(np.bincount(tl.lane[a])):
        rows = np.flatnonzero(tl.lane[a] == a_lane)
        bb = b[tl.lane[b] != a_lane]
        out[rows] = overlap_sums(tl.t0[a[rows]], tl.t1[a[rows]], tl.t0[bb], tl.t1[bb])
    return out


#: fewest instances of an op name, and least spread of their overlap share, to fit a slope
MIN_INSTANCES = 4
MIN_SPREAD = 0.1
MAX_SLOWDOWN = 4.0


def _slowdown(d: npt.NDArray[np.float64], x: npt.NDArray[np.float64], name: I64) -> float:
    """``s`` of ``d = b * (1 + s * x)``: per-name least squares, time-weighted median."""
    if len(d) == 0:
        return 0.0
    uniq, inv = factorize(name)
    k = len(uniq)
    cnt = np.bincount(inv, minlength=k).astype(np.float64)
    sx = np.bincount(inv, weights=x, minlength=k)
    sd = np.bincount(inv, weights=d, minlength=k)
    sxx = np.bincount(inv, weights=x * x, minlength=k)
    sxd = np.bincount(inv, weights=x * d, minlength=k)
    var = sxx / np.maximum(cnt, 1) - (sx / np.maximum(cnt, 1)) ** 2
    ok = (cnt >= MIN_INSTANCES) & (np.sqrt(np.maximum(var, 0)) >= MIN_SPREAD)
    if not ok.any():
        return 0.0
    slope = (cnt * sxd - sx * sd)[ok] / (cnt * sxx - sx * sx)[ok]
    base = (sd[ok] - slope * sx[ok]) / cnt[ok]
    s = np.where(base > 0, slope / np.maximum(base, 1e-9), 0.0)
    order = np.argsort(s)
    w = sd[ok][order]
    med = s[order][np.searchsorted(np.cumsum(w), 0.5 * w.sum())]
    return float(np.clip(med, 0.0, MAX_SLOWDOWN))


def _cap(c: Contention, g: Graph) -> Contention:
    """Several other threads may overlap one segment; never attribute more than its length."""
    w = c.wait_edge
    span = g.nodes.time[g.dst[w]] - g.nodes.time[g.src[w]]  # per triple: its waiting edge's span
    total = np.bincount(w, weights=c.overlap, minlength=len(g.src))[w]
    scale = np.where(total > span, span / np.maximum(total, 1), 1.0)
    return replace(c, overlap=np.floor(c.overlap * scale).astype(np.int64))
