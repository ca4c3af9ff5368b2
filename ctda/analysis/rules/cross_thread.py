"""Cross-thread rules: what makes one CPU thread wait for another (the "CTDA" part).

Each rule can be switched off by name, so answers with and without cross-thread
dependencies can be compared.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import rule
from ctda.ingest.kinds import Kind
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]
RULE_TYPE = EdgeType.CROSS_THREAD

#: Python frames whose own time is spent blocked in a lock, condition or sleep. CPython
#: releases the GIL around the blocking call inside them; the call itself is often not
#: recorded (it began before profiling started), leaving the time as the frame's own.
BLOCKING_FRAMES = (
    r"^threading\.py\(\d+\): (wait|_wait_for_tstate_lock|join|acquire)$"
    r"|^queue\.py\(\d+\): get$"
    r"|^multiprocessing/(connection|queues|synchronize)\.py\(\d+\): (wait|_poll|poll|_recv|get|__enter__)$"
    r"|^selectors\.py\(\d+\): select$"
    r"|^<built-in method (acquire|acquire_lock|poll|select|wait) of "
    r"|^<built-in function (sleep|select|poll|wait|waitpid)>$"
)


def _flow_pairs(ctx: RuleContext, category: str) -> tuple[I64, I64]:
    """Analysed (src, dst) indices of bound flows of one category."""
    t, n = ctx.table, ctx.nodes
    cats = t.strings("cat")
    if category not in cats:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    fl = t.flows
    sel = fl[(fl.cat == int(np.flatnonzero(cats == category)[0])) & (fl.src_uid >= 0) & (fl.dst_uid >= 0)]
    src = n.index_of_uid[sel.src_uid.to_numpy(dtype=np.int64)]
    dst = n.index_of_uid[sel.dst_uid.to_numpy(dtype=np.int64)]
    keep = (src >= 0) & (dst >= 0)
    return src[keep], dst[keep]


def _root(parent: I64, idx: I64) -> I64:
    """Outermost enclosing event of each index on its own thread."""
    root = idx.copy()
    while True:
        up = parent[root]
        move = up >= 0
        if not move.any():
            return root
        root[move] = up[move]


@rule("fwdbwd", "cross_thread")
def fwdbwd(ctx: RuleContext) -> EdgeBatch:
    """forward op end -> start of the autograd task running its backward on another thread.

    Reads Kineto ``fwdbwd`` flow events (``ph`` ``s`` on the forward op, ``f`` on the
    backward op, paired by ``id``). The backward of an op needs the forward's outputs, so
    it cannot run before the forward op finished. The flow lands on the backward op inside the engine's
    ``evaluate_function`` task, so the edge goes to that task's outermost frame, which is
    what the autograd thread starts. Same-thread pairs are already ordered by the thread's
    own sequence and are skipped.
    """
    n = ctx.nodes
    src, dst = _flow_pairs(ctx, "fwdbwd")
    cross = n.lane[src] != n.lane[dst]
    task = _root(n.parent, dst[cross])
    return EdgeBatch.of(n.finish(src[cross]), n.start(task), RULE_TYPE)


def _backward_lanes(ctx: RuleContext) -> tuple[int, I64]:
    """The main thread (most fwdbwd sources) and the threads its backward ran on.

    Without cross-thread ``fwdbwd`` flows (older traces, compiled autograd functions), the
    autograd threads are those whose outermost events are the engine's
    ``autograd::engine::evaluate_function`` tasks, and the main thread is the one that
    records the ProfilerStep annotations.
    """
    n = ctx.nodes
    src, dst = _flow_pairs(ctx, "fwdbwd")
    cross = n.lane[src] != n.lane[dst]
    if cross.any():
        main = int(np.bincount(n.lane[src[cross]]).argmax())
        bwd = np.unique(n.lane[dst[cross]]).astype(np.int64)
        return main, bwd[bwd != main]
    none = (-1, np.zeros(0, dtype=np.int64))
    cpu = ~n.is_gpu
    step = np.flatnonzero(cpu & ctx.name_mask(r"^ProfilerStep#\d+$"))
    if len(step) == 0:
        return none
    main = int(np.bincount(n.lane[step]).argmax())
    task = cpu & (n.parent < 0) & ctx.name_mask(r"^autograd::engine::evaluate_function")
    lanes, count = np.unique(n.lane[task], return_counts=True)
    top, top_count = np.unique(n.lane[cpu & (n.parent < 0)], return_counts=True)
    share = count / top_count[np.searchsorted(top, lanes)]
    same_proc = ctx.lane_pid[lanes] == ctx.lane_pid[main]
    bwd = lanes[(lanes != main) & (share >= 0.5) & same_proc].astype(np.int64)
    return (main, bwd) if len(bwd) else none


@rule("backward_join", "cross_thread")
def backward_join(ctx: RuleContext) -> EdgeBatch:
    """The ``backward()`` hand-off in both directions between the main and autograd threads.

    Reads thread ids, ``ts``/``dur`` and ``fwdbwd`` flows (to tell which thread ran the
    backward of which). ``loss.backward()`` wakes the autograd thread and then blocks the
    calling thread until the engine is done. So (kick-off) an autograd task that starts
    after the autograd thread sat idle waits for the main thread's latest event boundary
    before it; and (join) the main thread's next event start, or the end of the main
    call enclosing the burst, whichever comes first, waits for the autograd work that
    ended last before it.
    """
    main, bwd = _backward_lanes(ctx)
    if main < 0 or len(bwd) == 0:
        return EdgeBatch.of([], [], RULE_TYPE)
    join = _join_edges(ctx, main, bwd)
    kick = _kickoff_edges(ctx, main, bwd)
    return EdgeBatch.of(np.concatenate([join[0], kick[0]]), np.concatenate([join[1], kick[1]]), RULE_TYPE)


def _kickoff_edges(ctx: RuleContext, main: int, bwd: I64) -> tuple[I64, I64]:
    n = ctx.nodes
    top = np.flatnonzero(np.isin(n.lane, bwd) & (n.parent < 0))
    top = top[np.lexsort((n.ts[top], n.lane[top]))]
    if len(top) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    idle = np.ones(len(top), dtype=bool)
    same = n.lane[top[1:]] == n.lane[top[:-1]]
    idle[1:] = ~same | (n.ts[top[1:]] - n.end[top[:-1]] >= ctx.options.gil_min_gap_ns)
    starts = top[idle]
    on_main = np.flatnonzero(n.lane == main)
    mnodes = np.concatenate([n.start(on_main), n.finish(on_main)])
    mnodes = mnodes[np.argsort(n.time[mnodes], kind="stable")]
    pos = np.searchsorted(n.time[mnodes], n.ts[starts], side="right") - 1
    ok = pos >= 0
    return mnodes[pos[ok]], n.start(starts[ok])


def _join_edges(ctx: RuleContext, main: int, bwd: I64) -> tuple[I64, I64]:
    n = ctx.nodes
    on_main = np.flatnonzero(n.lane == main)
    main_by_start = on_main[np.argsort(n.ts[on_main], kind="stable")]
    burst = np.flatnonzero(np.isin(n.lane, bwd) & (n.parent < 0))
    nxt_pos = np.searchsorted(n.ts[main_by_start], n.end[burst], side="left")
    has_next = nxt_pos < len(main_by_start)
    nxt = np.where(has_next, main_by_start[np.minimum(nxt_pos, len(main_by_start) - 1)], -1)
    target = np.where(has_next, n.start(np.maximum(nxt, 0)), -1)
    encl = _enclosing_on_lane(ctx, main_by_start, burst)
    use_end = (encl >= 0) & (~has_next | (n.end[np.maximum(encl, 0)] < n.ts[np.maximum(nxt, 0)]))
    target = np.where(use_end, n.finish(np.maximum(encl, 0)), target)
    ok = target >= 0
    burst, target = burst[ok], target[ok]
    # keep, per target, only the autograd event that ended last
    order = np.lexsort((n.end[burst], target))
    last = np.ones(len(order), dtype=bool)
    last[:-1] = target[order][:-1] != target[order][1:]
    pick = order[last]
    return n.finish(burst[pick]), target[pick]


def _enclosing_on_lane(ctx: RuleContext, lane_events: I64, probes: I64) -> I64:
    """Deepest event among ``lane_events`` (sorted by start) that contains each probe,
    excluding ProfilerStep annotations (they enclose everything and wait for nothing)."""
    n = ctx.nodes
    step = ctx.name_mask(r"^ProfilerStep#\d+$")
    cand = lane_events[~step[lane_events]]
    return _deepest_containing(
        n.ts[cand], n.end[cand], n.depth[cand].astype(np.int64), cand, n.ts[probes], n.end[probes]
    )


@kernel
def _deepest_containing(ts, end, depth, ids, qs, qe):  # type: ignore[no-untyped-def]  # pragma: no cover
    out = np.full(qs.shape[0], -1, dtype=np.int64)
    for k in range(qs.shape[0]):
        hi = np.searchsorted(ts, qs[k], side="right")
        best_depth = -1
        # walk back over events that started before the probe; stop once far outside
        j = hi - 1
        steps = 0
        while j >= 0 and steps < 256:
            if end[j] >= qe[k] and depth[j] > best_depth:
                best_depth = depth[j]
                out[k] = ids[j]
            if depth[j] == 0 and end[j] >= qe[k]:
                break
            j -= 1
            steps += 1
    return out


@rule("gil", "cross_thread")
def gil_handoff(ctx: RuleContext) -> EdgeBatch:
    """the last thing another thread of the process did -> this thread resuming after a gap.

    Reads ``pid``/``tid`` and ``ts``/``dur`` only: no event or flow marks a GIL hand-off.
    When a thread resumes after a pause (no event boundary for at least
    ``gil_min_gap_ns``) and, within ``gil_max_lag_ns`` before that, another thread of the
    same process reached an event boundary and then went quiet until after the resume,
    the resuming thread was most likely waiting for that thread to release the GIL
    (timestamp backtracking). Boundaries are event starts and ends at any depth, since a
    thread can block inside an open Python frame.

    A hand-off needs evidence that it was one: where the other thread's Python stack is
    recorded, it must have held the GIL over most of the pause (see
    :func:`_held_over_pause`), and hand-offs beyond the lag window are kept only between
    threads whose late resumes follow the releases more closely than chance (see
    :func:`_late_tracks`).
    """
    n, opt = ctx.nodes, ctx.options
    cpu = np.flatnonzero(~n.is_gpu)
    if len(np.unique(n.lane[cpu])) < 2:
        return EdgeBatch.of([], [], RULE_TYPE)
    pid_codes = ctx.lane_proc
    node = np.concatenate([n.start(cpu), n.finish(cpu)])
    lane = np.concatenate([n.lane[cpu], n.lane[cpu]]).astype(np.int64)
    time = n.time[node]
    proc = pid_codes[lane]
    order = np.lexsort((node % 2 == 0, time, proc))  # ends before starts at equal times
    release, blocks = _gil_points(ctx, node)
    src, dst, late, since = _handoffs(
        node[order],
        lane[order],
        time[order],
        proc[order],
        release[order],
        blocks[order],
        opt.gil_min_gap_ns,
        opt.gil_max_lag_ns,
    )
    keep = _late_tracks(n.lane[dst // 2].astype(np.int64), n.lane[src // 2].astype(np.int64), late)
    keep &= _held_over_pause(ctx, src, since)
    return EdgeBatch.of(src[keep], dst[keep], RULE_TYPE)


#: share of the pause (up to the release) the releasing thread must have held the GIL
MIN_HELD = 0.5


def _held_over_pause(ctx: RuleContext, src: I64, since: I64) -> npt.NDArray[np.bool_]:
    """Did the releasing thread hold the GIL over the resuming thread's pause?

    A hand-off can only come from a thread that held the GIL. Where a thread's Python
    stack is recorded, it may hold the GIL while a Python frame, or a builtin called from
    one, is innermost (not a blocking wait: CPython releases the GIL around it; builtins
    count, since most of them keep it, and one that drops it, like a decoder, is where the
    hand-off happens, at its start); an opaque native span
    (a ``record_function`` around NumPy products, a C++ op) does not say it held anything,
    and a thread that was in one for most of the pause did not make the other wait: it
    was more likely starved of a core, and the boundary that ended the pause is the other
    thread's by chance. So on threads with Python frames, a hand-off is kept only when the
    releasing thread held the GIL for at least ``MIN_HELD`` of the pause, from its start
    (``since``) to the release; threads without recorded stacks give no such evidence
    and keep their hand-offs.
    """
    n = ctx.nodes
    keep = np.ones(len(src), dtype=bool)
    if len(src) == 0:
        return keep
    tl = ctx.timeline
    lane = n.lane[tl.src // 2].astype(np.int64)
    has = tl.owner >= 0
    own = np.maximum(tl.owner, 0)
    py = has & (n.kind[own] == Kind.PYTHON)
    holds = py & ~ctx.name_mask(BLOCKING_FRAMES)[own]
    t0, t1 = n.time[tl.src], n.time[tl.dst]
    b_lane = n.lane[src // 2].astype(np.int64)
    stacks = np.bincount(lane[py], minlength=int(max(lane.max(), b_lane.max())) + 1) > 0
    check = np.flatnonzero(stacks[b_lane])
    for b in np.unique(b_lane[check]):
        m = lane == b
        s0, s1 = t0[m], t1[m]
        o = np.argsort(s0, kind="stable")
        s0, s1, h = s0[o], s1[o], holds[m][o]
        # held time up to each segment's start; the held time up to t is read off it
        cum = np.concatenate([[0], np.cumsum(np.where(h, s1 - s0, 0))])
        k = check[b_lane[check] == b]
        held = _held_until(s0, s1, h, cum, n.time[src[k]]) - _held_until(s0, s1, h, cum, since[k])
        pause = n.time[src[k]] - since[k]
        keep[k] = held >= MIN_HELD * pause
    return keep


def _held_until(s0: I64, s1: I64, h: npt.NDArray[np.bool_], cum: I64, t: I64) -> I64:
    """GIL-holding time of one thread (segments ``s0..s1``, sorted) before each time ``t``."""
    i = np.searchsorted(s0, t, side="right") - 1
    ok = i >= 0
    j = np.maximum(i, 0)
    inside = np.where(h[j], np.clip(t - s0[j], 0, s1[j] - s0[j]), 0)
    return np.where(ok, cum[j] + inside, 0)  # type: ignore[no-any-return]


#: a pair's late resumes must sit this many standard errors closer to the releases than
#: chance puts them (one-sided) for its late hand-offs to be kept
LATE_Z = 2.0


def _late_tracks(a_lane: I64, b_lane: I64, late: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Which hand-offs to keep: all those within the lag window, and late ones (``late``
    >= 0) only between threads whose late resumes track the other thread's releases.

    ``late`` is, per late hand-off, where the resume fell between the earliest a late one
    can (the lag window's end) and the latest it could have without another boundary of
    the other threads, or one of its own, coming first, as a fraction (-1 for edges within
    the window). If the resuming thread did not wait for the release (a thread starved of
    cores resumes whenever it is scheduled), its resume is unrelated to the release and
    that fraction is uniform on 0..1 (mean 1/2, standard error ``1 / sqrt(12 k)`` over
    ``k`` resumes). A thread that waited for the release and was woken late resumes early
    in that range. So the late hand-offs of a (resuming, releasing) thread pair are kept
    only when their mean fraction is at least ``LATE_Z`` standard errors below 1/2: a lone
    late resume never is (at most 1.7), two must average within the first 9 % of the range.
    """
    keep = late < 0
    is_late = ~keep
    if not is_late.any():
        return keep
    k = int(max(a_lane.max(), b_lane.max())) + 1
    pair = a_lane[is_late] * k + b_lane[is_late]
    inv = np.unique(pair, return_inverse=True)[1]
    cnt = np.bincount(inv).astype(np.float64)
    mean = np.bincount(inv, weights=late[is_late]) / cnt
    z = (0.5 - mean) * np.sqrt(12.0 * cnt)
    keep[is_late] = (z >= LATE_Z)[inv]
    return keep


def _gil_points(ctx: RuleContext, node: I64) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per boundary node: does its thread release the GIL there (a Python frame ends, or a
    builtin or blocking call starts), and does its thread block there (a lock, condition,
    sleep or poll starts, so what follows is that wait, not a wait for the GIL)."""
    n = ctx.nodes
    ev = node // 2
    start = node % 2 == 0
    py = n.kind[ev] == Kind.PYTHON
    builtin = ctx.name_mask(r"^<built-in")[ev]
    blocking = ctx.name_mask(BLOCKING_FRAMES)[ev]
    release = (py & ~start & ~builtin) | (start & (builtin | blocking))
    return release, start & blocking


@kernel
def _handoffs(node, lane, time, proc, release, blocks, min_gap, max_lag):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Resumes after a gap -> the latest boundary of another thread of the process in the gap.

    Within ``max_lag`` of the resume any boundary counts (timestamp backtracking). Beyond it,
    only the cause itself: the other thread released the GIL there and our thread was not
    blocked in a wait of its own (on a loaded host the woken thread may take a while to be
    scheduled, so the lag alone does not rule a hand-off out).
    """
    n = node.shape[0]
    nl = lane.max() + 1 if n else 0
    # the next boundary of another thread of the process after each position: a resume
    # could have come as late as that and still be linked to the same release
    nxt = np.full(n, -1, dtype=np.int64)
    for k in range(n - 2, -1, -1):
        if proc[k + 1] == proc[k]:
            nxt[k] = k + 1 if lane[k + 1] != lane[k] else nxt[k + 1]
    last_time = np.full(nl, -(2**62), dtype=np.int64)
    last_blocks = np.zeros(nl, dtype=np.bool_)
    src = np.empty(n, dtype=np.int64)
    dst = np.empty(n, dtype=np.int64)
    late = np.empty(n, dtype=np.float64)
    since = np.empty(n, dtype=np.int64)
    m = 0
    for k in range(n):
        v = node[k]
        ln = lane[k]
        prev = last_time[ln]
        is_start = v % 2 == 0
        if is_start and prev > -(2**62) and time[k] - prev >= min_gap:
            # the latest boundary of another thread of this process inside our gap
            j = k - 1
            while j >= 0 and proc[j] == proc[k] and time[j] > prev:
                if lane[j] != ln:
                    lag = time[k] - time[j]
                    if lag <= max_lag or (release[j] and not last_blocks[ln]):
                        src[m] = node[j]
                        dst[m] = v
                        late[m] = -1.0
                        since[m] = prev
                        if lag > max_lag:
                            # where the resume fell in the range a late one could take:
                            # after the window, before our gap began (going back) and
                            # before the other threads' next boundary
                            span = time[k] - prev
                            if nxt[k] >= 0 and time[nxt[k]] - time[j] < span:
                                span = time[nxt[k]] - time[j]
                            late[m] = min(1.0, (lag - max_lag) / max(span - max_lag, 1))
                        m += 1
                    break
                j -= 1
        last_time[ln] = time[k]
        last_blocks[ln] = blocks[k]
    return src[:m], dst[:m], late[:m], since[:m]


@rule("cuda_lock", "cross_thread")
def cuda_runtime_lock(ctx: RuleContext) -> EdgeBatch:
    """end of a runtime call on one thread -> end of an overlapping runtime call on another.

    Reads runtime call ``ts``/``dur`` and thread ids. The CUDA runtime serialises many
    calls on a process-wide lock: a call that started while another thread's call was in
    flight and returned after it could not complete before that call released the lock.
    """
    n, opt = ctx.nodes, ctx.options
    rt = np.flatnonzero(n.kind == Kind.RUNTIME)
    if len(np.unique(n.lane[rt])) < 2:
        return EdgeBatch.of([], [], RULE_TYPE)
    rt = rt[np.argsort(n.ts[rt], kind="stable")]
    src, dst = _lock_pairs(rt, n.ts[rt], n.end[rt], n.lane[rt].astype(np.int64), opt.lock_lookback)
    return EdgeBatch.of(n.finish(src), n.finish(dst), RULE_TYPE)


@kernel
def _lock_pairs(ids, ts, end, lane, lookback):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = ids.shape[0]
    src = np.empty(n, dtype=np.int64)
    dst = np.empty(n, dtype=np.int64)
    m = 0
    for k in range(n):
        for j in range(k - 1, max(k - 1 - lookback, -1), -1):
            if lane[j] != lane[k] and ts[j] < ts[k] and ts[k] < end[j] and end[j] < end[k]:
                src[m] = ids[j]
                dst[m] = ids[k]
                m += 1
                break
    return src[:m], dst[:m]
