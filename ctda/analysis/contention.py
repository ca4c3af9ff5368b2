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
caused it. The baseline is unchanged (all factors are 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from ctda.analysis.edges import EdgeType
from ctda.analysis.graph import Graph
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.cross_thread import BLOCKING_FRAMES
from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]


@dataclass
class Contention:
    """Sparse (waiting edge, holding edge, overlap ns) triples."""

    wait_edge: I64
    hold_edge: I64
    overlap: I64

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
        return _reweigh(
            np.asarray(weight, dtype=np.int64),
            np.asarray(owner_factor, dtype=np.float64),
            np.asarray(owner, dtype=np.int64),
            self.wait_edge,
            self.hold_edge,
            self.overlap,
        )


@njit(cache=True)  # type: ignore[misc]
def _reweigh(weight, owner_factor, owner, wait_edge, hold_edge, overlap):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``rint(max(w - waited, 0) * f + sum(overlap * f(holder)))`` per edge (f = its owner's factor).

    Sums accumulate in triple order, as ``np.bincount`` does, so results match it bit for bit.
    """
    m = weight.shape[0]
    f_edge = np.empty(m, dtype=np.float64)
    for e in range(m):
        o = owner[e]
        f_edge[e] = owner_factor[o] if o >= 0 else 1.0
    waited = np.zeros(m, dtype=np.float64)
    caused = np.zeros(m, dtype=np.float64)
    for k in range(wait_edge.shape[0]):
        e = wait_edge[k]
        waited[e] += overlap[k]
        caused[e] += overlap[k] * f_edge[hold_edge[k]]
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        own = weight[e] - waited[e]
        if own < 0:
            own = 0.0
        out[e] = np.int64(np.rint(own * f_edge[e] + caused[e]))
    return out


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
    pid = np.unique(ctx.lane_pid.astype(str), return_inverse=True)[1]
    live = t1 > t0
    # candidates of every lane at once, ordered by start (ties in edge order); a lane's
    # share of them is then already in the order the intersection needs
    need_all = np.flatnonzero(needs & live)
    need_all = need_all[np.argsort(t0[need_all], kind="stable")]
    hold_all = np.flatnonzero(holds & live)
    hold_all = hold_all[np.argsort(t0[hold_all], kind="stable")]
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
        wa, wb, ov = _intersect(t0[a], t1[a], t0[b], t1[b])
        # both threads running Python over the overlap: CPython hands the GIL back and forth
        # (switch interval), so each waited for the other about half of it, not all of it
        ov = np.where(holds[a[wa]], ov // 2, ov)
        waits.append(e[a[wa]])
        holds_e.append(e[b[wb]])
        ovs.append(ov)
    gil = np.bincount(
        np.concatenate(waits) if waits else np.zeros(0, dtype=np.int64),
        weights=np.concatenate(ovs).astype(np.float64) if ovs else None,
        minlength=len(g.src),
    ).astype(np.float64)
    cpu = cpu_contention(ctx, g, e, lane, (t1 > t0) & has & ~waiting, gil)
    waits.append(cpu.wait_edge)
    holds_e.append(cpu.hold_edge)
    ovs.append(cpu.overlap)
    c = Contention(np.concatenate(waits), np.concatenate(holds_e), np.concatenate(ovs))
    return _cap(c, g) if len(c) else Contention.empty()


def cpu_contention(
    ctx: RuleContext,
    g: Graph,
    e: I64,
    lane: I64,
    busy: npt.NDArray[np.bool_],
    gil_waited: npt.NDArray[np.float64],
) -> Contention:
    """Time native ops lost to other threads of the host that were running beside them.

    ``e`` are the CPU timeline edges, ``lane`` their threads, ``busy`` those a thread spent
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
    own = g.owner[e]
    work = busy & (own >= 0)
    work[work] = np.isin(n.kind[own[work]], (Kind.CPU_OP, Kind.PYTHON))
    t0, t1 = n.time[g.src[e]], n.time[g.dst[e]]
    names = ctx.table.col("name")[n.uid].astype(np.int64)
    bus = np.flatnonzero(busy)
    bus = bus[np.argsort(t0[bus], kind="stable")]
    lanes = np.unique(lane[work])
    pairs = {}
    d = np.zeros(n.n)
    over = np.zeros(n.n)
    for a_lane in lanes:
        a = np.flatnonzero(work & (lane == a_lane))
        a = a[np.argsort(t0[a], kind="stable")]
        b = bus[lane[bus] != a_lane]
        if len(b) == 0:
            continue
        wa, wb, ov = _intersect(t0[a], t1[a], t0[b], t1[b])
        pairs[int(a_lane)] = (a, wa, b, wb, ov)
        waited = gil_waited[e[a]]
        d += np.bincount(own[a], weights=(t1[a] - t0[a]) - waited, minlength=n.n)
        over += np.bincount(own[a][wa], weights=ov.astype(np.float64), minlength=n.n)
        over -= np.bincount(own[a], weights=waited, minlength=n.n)
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
    waits, holds, ovs = [z], [z], [z]
    native = n.kind == Kind.CPU_OP
    for a, wa, b, wb, ov in pairs.values():
        keep = native[own[a][wa]]
        waits.append(e[a[wa[keep]]])
        holds.append(e[b[wb[keep]]])
        ovs.append(np.floor(ov[keep] * (slow / (1.0 + slow))).astype(np.int64))
    return Contention(np.concatenate(waits), np.concatenate(holds), np.concatenate(ovs))


#: fewest instances of an op name, and least spread of their overlap share, to fit a slope
MIN_INSTANCES = 4
MIN_SPREAD = 0.1
MAX_SLOWDOWN = 4.0


def _slowdown(d: npt.NDArray[np.float64], x: npt.NDArray[np.float64], name: I64) -> float:
    """``s`` of ``d = b * (1 + s * x)``: per-name least squares, time-weighted median."""
    if len(d) == 0:
        return 0.0
    codes, inv = np.unique(name, return_inverse=True)
    k = len(codes)
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
    return Contention(c.wait_edge, c.hold_edge, np.floor(c.overlap * scale).astype(np.int64))


@njit(cache=True)  # type: ignore[misc]
def _intersect(a0, a1, b0, b1):  # type: ignore[no-untyped-def]  # pragma: no cover
    """All overlapping pairs of two start-sorted interval lists (B may overlap itself)."""
    cap = a0.shape[0] + b0.shape[0] + 16
    wa = np.empty(cap, dtype=np.int64)
    wb = np.empty(cap, dtype=np.int64)
    ov = np.empty(cap, dtype=np.int64)
    m = 0
    j0 = 0
    for i in range(a0.shape[0]):
        while j0 < b0.shape[0] and b1[j0] <= a0[i]:
            j0 += 1
        j = j0
        while j < b0.shape[0] and b0[j] < a1[i]:
            lo = max(a0[i], b0[j])
            hi = min(a1[i], b1[j])
            if hi > lo:
                if m == wa.shape[0]:
                    wa = np.concatenate((wa, np.empty(m, dtype=np.int64)))
                    wb = np.concatenate((wb, np.empty(m, dtype=np.int64)))
                    ov = np.concatenate((ov, np.empty(m, dtype=np.int64)))
                wa[m] = i
                wb[m] = j
                ov[m] = hi - lo
                m += 1
            j += 1
    return wa[:m], wb[:m], ov[:m]
