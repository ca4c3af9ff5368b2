"""What the optimisations read off an analysis: regions, launches, syncs, names (vectorised).

Not an optimisation itself (it is not in :data:`~ctda.whatif.optimisations.BUILTIN`).
Sync edges are told by their edge type (``SYNC``) and by the names of the rules that make
them (``sync_recorded``, ``sync_inferred``, ``blocking_copy``, and any rule whose name
starts with ``sync``), so new synchronisation rules are picked up without a change here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.classify import inherit_down
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.rules.syncs import BLOCKING_CALLS, SYNC_COPY_CALLS
from ctda.ingest.kinds import Kind
from ctda.whatif.select import name_mask

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

#: rules whose edges are CPU-waits-for-GPU synchronisation
SYNC_RULES = frozenset({"sync_recorded", "sync_inferred", "blocking_copy"})
#: host ops that read a device value back (they block on the stream they read from)
BLOCKING_OPS = r"^aten::(item|_local_scalar_dense|nonzero|cpu)$"  # the runtime calls: BLOCKING_CALLS
#: calls that launch work on the device as part of a CUDA graph
GRAPH_LAUNCH = r"^(cuda|hip)GraphLaunch$|^cuGraphLaunch$"


def sync_edges(a: Analysis) -> Mask:
    """Per edge: a CPU-waits-for-GPU synchronisation edge."""
    g = a.graph
    by_rule = np.array([n in SYNC_RULES or n.startswith("sync") for n in g.rule_names] + [False])
    return np.asarray((g.etype == EdgeType.SYNC) | by_rule[g.rule], dtype=bool)


def node_event(a: Analysis, node: npt.ArrayLike) -> I64:
    """Analysed event of each node (-1 for SOURCE and SINK)."""
    v = np.asarray(node, dtype=np.int64)
    return np.where(v < 2 * a.nodes.n, v // 2, -1)


def launcher(a: Analysis) -> I64:
    """Per analysed event: the analysed index of the call that launched it (-1: none)."""
    n = a.nodes
    lu = a.table.col("launcher")[n.uid]
    return np.where(lu >= 0, n.index_of_uid[np.maximum(lu, 0)], -1)


def names(a: Analysis) -> npt.NDArray[np.object_]:
    """Per analysed event: its name."""
    return a.table.decoded("name", a.nodes.uid)


def blocking(a: Analysis) -> Mask:
    """Per analysed event: a CPU event that waits for the device (a sync edge ends at it,
    or its name says it blocks: synchronise calls, synchronous copies, ``.item()``)."""
    n = a.nodes
    out = np.zeros(n.n, dtype=bool)
    g = a.graph
    ev = node_event(a, g.dst[sync_edges(a)])
    out[ev[ev >= 0]] = True
    pattern = f"{BLOCKING_CALLS}|{SYNC_COPY_CALLS}|{BLOCKING_OPS}"
    return out | (name_mask(a, pattern) & ~n.is_gpu)


@dataclass
class Regions:
    """Time spans ``[t0, t1]`` (observed ns) with the CPU event that defines each (-1: none)."""

    t0: I64
    t1: I64
    root: I64
    label: str

    def __len__(self) -> int:
        return len(self.t0)

    def of(self, a: Analysis, events: I64) -> I64:
        """Region index containing each event's whole span (-1 where none does)."""
        n = a.nodes
        order = np.argsort(self.t0, kind="stable")
        t0, t1 = self.t0[order], self.t1[order]
        pos = np.searchsorted(t0, n.ts[events], side="right") - 1
        ok = pos >= 0
        pc = np.maximum(pos, 0)
        ok &= n.end[events] <= t1[pc]
        return np.where(ok & (events != self.root[order][pc]), order[pc], -1)


_STEPS = re.compile(r"^steps?=(\d+)(?:-(\d+))?$")


def regions(a: Analysis, arg: str | None) -> Regions:
    """The spans an optimisation applies to: every analysis window (``None``), the windows
    of steps ``A..B`` (``steps=A-B``), or every CPU event named ``arg`` exactly."""
    n = a.nodes
    if arg is None or _STEPS.match(arg):
        wins = a.windows
        if arg is not None:
            m = _STEPS.match(arg)
            assert m is not None
            lo = int(m.group(1))
            hi = int(m.group(2) or lo)
            wins = [w for w in wins if w.step is not None and lo <= w.step <= hi]
        t0 = np.array([n.time[w.start_node] for w in wins], dtype=np.int64)
        t1 = np.array([n.time[w.end_node] for w in wins], dtype=np.int64)
        root = node_event(a, np.array([w.start_node for w in wins], dtype=np.int64))
        return Regions(t0, t1, root, "every step" if arg is None else arg)
    hit = np.flatnonzero((names(a) == arg) & ~n.is_gpu)
    return Regions(n.ts[hit], n.end[hit], hit.astype(np.int64), f"events named {arg!r}")


def subtree(a: Analysis, events: I64) -> Mask:
    """``events`` and everything nested inside them on their threads."""
    m = np.zeros(a.nodes.n, dtype=bool)
    m[events] = True
    return np.asarray(inherit_down(m, a.nodes.parent, a.nodes.depth), dtype=bool)


def launches(a: Analysis) -> Mask:
    """Per analysed event: a call that launched device work."""
    li = launcher(a)
    out = np.zeros(a.nodes.n, dtype=bool)
    out[li[li >= 0]] = True
    return out


def top_ancestor_below(a: Analysis, events: I64, stop: Mask) -> I64:
    """For each event, its outermost ancestor on its thread that is not in ``stop`` (the
    event itself when its parent is in ``stop`` or it has none)."""
    parent = a.nodes.parent
    cur = np.asarray(events, dtype=np.int64).copy()
    for _ in range(int(a.nodes.depth.max(initial=0)) + 1):
        p = parent[cur]
        up = (p >= 0) & ~stop[np.maximum(p, 0)]
        if not up.any():
            break
        cur = np.where(up, p, cur)
    return cur


def kernel_gaps(a: Analysis, work: I64 | None = None) -> I64:
    """Gaps between back-to-back device work on one stream: the next item was queued
    (its launch call had returned) before the previous one ended, so the gap is the
    device's own, not a wait for the host. ``work`` limits the pairs to those items."""
    n = a.nodes
    gw = np.flatnonzero(n.is_gpu & (n.kind == Kind.KERNEL))
    if work is not None:
        gw = np.intersect1d(gw, work)
    if len(gw) < 2:
        return np.zeros(0, dtype=np.int64)
    o = gw[np.lexsort((n.ts[gw], n.lane[gw]))]
    same = n.lane[o[1:]] == n.lane[o[:-1]]
    prev, nxt = o[:-1][same], o[1:][same]
    li = launcher(a)[nxt]
    queued = (li >= 0) & (n.end[np.maximum(li, 0)] <= n.end[prev]) & (n.ts[nxt] >= n.end[prev])
    return (n.ts[nxt] - n.end[prev])[queued].astype(np.int64)


def one_launch_op_cost(a: Analysis, skip: Mask) -> tuple[int, int]:
    """(median inclusive host time, count) of the CPU operators that directly launch exactly
    one piece of device work, none of it in ``skip`` (library calls such as cuBLAS's do
    more host work), and do not block: what one small op that allocates its output and
    launches one kernel costs on this host, under this profiler."""
    n = a.nodes
    li = launcher(a)
    work = np.flatnonzero(li >= 0)
    par = n.parent[li[work]]
    op = (n.kind == Kind.CPU_OP) & ~n.is_gpu & ~blocking(a)
    ok = par >= 0
    work, par = work[ok], par[ok]
    ok = op[par]
    work, par = work[ok], par[ok]
    if len(par) == 0:
        return 0, 0
    ev, count = np.unique(par, return_counts=True)
    bad = np.zeros(len(ev), dtype=bool)
    np.logical_or.at(bad, np.searchsorted(ev, par), skip[work])
    one = ev[(count == 1) & ~bad]
    if len(one) == 0:
        return 0, 0
    return int(np.median(n.end[one] - n.ts[one])), len(one)


def ancestor_in(a: Analysis, marked: Mask) -> I64:
    """Per analysed event: itself or its nearest ancestor on its thread in ``marked`` (-1: none)."""
    n = a.nodes
    out = np.full(n.n, -1, dtype=np.int64)
    cur = np.arange(n.n, dtype=np.int64)
    for _ in range(int(n.depth.max(initial=0)) + 2):
        live = (cur >= 0) & (out < 0)
        if not live.any():
            break
        hit = live & marked[np.maximum(cur, 0)]
        out[hit] = cur[hit]
        cur = np.where(live & ~hit, n.parent[np.maximum(cur, 0)], -1)
    return out
