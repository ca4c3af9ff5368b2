"""HTA's CPU edges: each thread's call stack walk and the CUDA runtime lock chain."""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from ctda.analysis.hta.clock import Clock, names_in
from ctda.analysis.hta.model import BLOCKING_SYNC_CALLS, HtaEdge, HtaOptions, Part, empty_part
from ctda.analysis.nodes import Nodes
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.kinds import Kind
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def lock_edges(n: Nodes, clock: Clock, lock: B) -> Part:
    """CUDA runtime lock chain (HTA after 0.5.0).

    Reads names and ``ts``/``dur`` of lock-taking calls on every thread. Their boundaries
    are walked in (time, uid) order; each end closes every call started since the previous
    end (its own start -> end is an operator edge, another call's start -> it a dependency),
    and follows the previous boundary when that was an end (the lock passed on).
    """
    ev = np.flatnonzero(lock)
    if len(ev) == 0:
        return empty_part()
    node = np.concatenate([2 * ev, 2 * ev + 1])
    order = np.lexsort((n.uid[node // 2], clock.node[node]))
    src, dst, own = _lock_walk(node[order].astype(np.int64))
    ht = np.where(own, int(HtaEdge.OPERATOR), int(HtaEdge.DEPENDENCY)).astype(np.int8)
    att = np.where(own, dst // 2, -1)
    cross = ~own & (n.lane[src // 2] != n.lane[dst // 2])
    return src, dst, ht, np.zeros(len(src), dtype=bool), att, cross


@kernel(native=False)
def _lock_walk(nodes):  # type: ignore[no-untyped-def]  # pragma: no cover
    m = nodes.shape[0]
    src = np.empty(2 * m, dtype=np.int64)
    dst = np.empty(2 * m, dtype=np.int64)
    own = np.empty(2 * m, dtype=np.bool_)
    pending = np.empty(m, dtype=np.int64)
    sp = 0
    k = 0
    last = -1
    for i in range(m):
        v = nodes[i]
        if v % 2 == 0:
            pending[sp] = v
            sp += 1
        else:
            while sp > 0:
                sp -= 1
                u = pending[sp]
                src[k] = u
                dst[k] = v
                own[k] = u // 2 == v // 2
                k += 1
            if last >= 0 and last % 2 == 1:
                src[k] = last
                dst[k] = v
                own[k] = False
                k += 1
        last = v
    return src[:k], dst[:k], own[:k]


def _label_key(values: npt.NDArray[np.object_]) -> list[tuple[int, float, str]]:
    """Sort key for pid/tid labels: numbers numerically, then text (pandas groupby order)."""
    out = []
    for v in values:
        try:
            out.append((0, float(v), ""))
        except (TypeError, ValueError):
            out.append((1, 0.0, str(v)))
    return out


def thread_groups(ctx: RuleContext, in_win: B, options: HtaOptions) -> I64:
    """Call-stack group of every analysed CPU event: its (pid, tid), with the backward
    thread merged into the forward thread when enabled; groups numbered in (pid, tid) order.

    Reads ``pid``/``tid``, ``cat`` and names: HTA takes as forward (backward) thread the
    only thread with a ``cpu_op`` or ``user_annotation`` whose name contains "forward"
    ("autograd") in the window.
    """
    n = ctx.nodes
    lanes = ctx.lanes.sort_values("lane")
    pid = lanes["pid"].to_numpy(dtype=object)
    tid = lanes["tid"].to_numpy(dtype=object)
    if options.merge_backward_thread:
        fwd = _only_thread(ctx, in_win, "forward")
        bwd = _only_thread(ctx, in_win, "autograd")
        if fwd is not None and bwd is not None and fwd != bwd:
            tid = np.array([fwd if x == bwd else x for x in tid], dtype=object)
    keys = list(zip(_label_key(pid), _label_key(tid)))
    code = {k: i for i, k in enumerate(sorted(set(keys)))}
    lane_group = np.array([code[k] for k in keys], dtype=np.int64)
    return np.where(n.lane >= 0, lane_group[np.maximum(n.lane, 0)], -1)


def _only_thread(ctx: RuleContext, in_win: B, needle: str) -> object | None:
    n = ctx.nodes
    kinds = (n.kind == Kind.CPU_OP) | (n.kind == Kind.USER_ANNOTATION)
    named = ctx.name_mask(re.escape(needle)) & in_win & kinds
    if not named.any():
        return None
    tids = set(ctx.lanes.sort_values("lane")["tid"].to_numpy(dtype=object)[n.lane[named]].tolist())
    return next(iter(tids)) if len(tids) == 1 else None


def call_stack_edges(
    ctx: RuleContext, clock: Clock, in_win: B, graph_cpu: B, groups: I64, lock: B | None
) -> Part:
    """HTA's call-stack walk on every CPU thread (``CallStackGraph`` + DFS callbacks).

    Reads ``ts``/``dur`` and ``pid``/``tid`` of every CPU slice with ``dur > 0`` (any
    category), names of blocking calls, and (newer HTA) lock-taking calls. Boundaries are
    ordered as HTA's ``compare_events``: by time; at one instant ends before starts, ends
    shorter-first (then higher uid first), starts longer-first (then lower uid first). A
    start's parent is the top of the stack; an end pops the top of the stack, whichever
    event that is. Only graph events (ops, runtime/driver calls) emit edges; annotations
    and Python frames shape the stack and are otherwise transparent.
    """
    n = ctx.nodes
    ev = np.flatnonzero(in_win)
    if len(ev) == 0:
        return empty_part()
    dur = clock.ev_end[ev] - clock.ev_ts[ev]
    uid = n.uid[ev]
    k = len(ev)
    node = np.concatenate([2 * ev, 2 * ev + 1])
    time = np.concatenate([clock.ev_ts[ev], clock.ev_end[ev]])
    is_start = np.concatenate([np.ones(k, np.int64), np.zeros(k, np.int64)])  # ends (0) first
    k3 = np.concatenate([-dur, dur])
    k4 = np.concatenate([uid, -uid])
    grp = np.concatenate([groups[ev], groups[ev]])
    order = np.lexsort((k4, k3, is_start, time, grp))
    blocking = names_in(ctx.table, n.uid, BLOCKING_SYNC_CALLS)
    lk = lock if lock is not None else np.zeros(n.n, dtype=bool)
    src, dst, ht, zero, att = _stack_walk(
        node[order].astype(np.int64), grp[order].astype(np.int64), graph_cpu, blocking, lk, lock is not None
    )
    return src, dst, ht.astype(np.int8), zero, att, np.zeros(len(src), dtype=bool)


@kernel(native=False)
def _stack_walk(nodes, grp, is_op, blocking, lock, newer):  # type: ignore[no-untyped-def]  # pragma: no cover
    m = nodes.shape[0]
    src = np.empty(2 * m, dtype=np.int64)
    dst = np.empty(2 * m, dtype=np.int64)
    ht = np.empty(2 * m, dtype=np.int64)
    zero = np.zeros(2 * m, dtype=np.bool_)
    att = np.empty(2 * m, dtype=np.int64)
    parent = np.full(is_op.shape[0], -1, dtype=np.int64)
    stack = np.empty(m, dtype=np.int64)
    sp = 0
    k = 0
    last = -1  # last node visited on this thread
    last_top = -1  # end node of the previous top-level op (HTA 0.5's last_highlevel_op)
    last_parent = -1
    depth = 0
    for i in range(m):
        if i == 0 or grp[i] != grp[i - 1]:
            sp = 0
            last = -1
            last_top = -1
            last_parent = -1
            depth = 0
        v = nodes[i]
        if v % 2 == 0:
            e = v // 2
            parent[e] = stack[sp - 1] if sp > 0 else -1
            stack[sp] = e
            sp += 1
            if not is_op[e]:
                continue
            if newer:
                if last >= 0 and not (lock[last // 2] and lock[e] and last % 2 == 0):
                    src[k] = last
                    dst[k] = v
                    ht[k] = 1 if depth == 0 else 0
                    att[k] = -1 if depth == 0 else _attr(last, v, last_parent)
                    k += 1
            else:
                if depth == 0 and last_top >= 0:
                    src[k] = last_top
                    dst[k] = v
                    ht[k] = 1
                    att[k] = -1
                    k += 1
                if last >= 0:
                    src[k] = last
                    dst[k] = v
                    ht[k] = 0
                    att[k] = _attr(last, v, last_parent)
                    k += 1
            last = v
            last_parent = parent[e]
            depth += 1
        else:
            if sp == 0:
                continue
            sp -= 1
            e = stack[sp]  # HTA pops the top, whichever event ended
            if not is_op[e]:
                continue
            w = 2 * e + 1
            depth -= 1
            if last >= 0 and not (newer and lock[last // 2] and lock[e]):
                src[k] = last
                dst[k] = w
                ht[k] = 0
                zero[k] = blocking[e]
                att[k] = _attr(last, w, last_parent)
                k += 1
            if not newer and depth == 0:
                last = -1
                last_top = w
            else:
                last = w
                last_parent = parent[e]
    return src[:k], dst[:k], ht[:k], zero[:k], att[:k]


@kernel(native=False)
def _attr(a, b, parent):  # type: ignore[no-untyped-def]  # pragma: no cover
    """HTA's attribution of an operator edge a -> b: a start's event, else b's if b is an
    end, else (end -> start) the call-stack parent of a's event."""
    if a % 2 == 0:
        return a // 2
    if b % 2 == 1:
        return b // 2
    return parent
