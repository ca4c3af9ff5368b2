"""Cross-thread rule: a thread blocked in a condition wait resumes when another notifies it.

Kept apart from the timestamp rules in :mod:`~ctda.analysis.rules.cross_thread`: this one
reads what the threads were doing (recorded Python frames), not when they paused.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import rule
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]

#: ``threading.Condition.wait``: the frame and the lock acquire it blocks in (the profiler
#: may append an object address to a builtin's name; it is cached per call site, so it
#: does not tell which lock was taken)
CONDITION_WAIT = r"^threading\.py\(\d+\): wait$"
LOCK_ACQUIRE = r"^<built-in method (acquire|acquire_lock) of _thread\.(lock|RLock) object( at 0x[0-9a-f]+)?>$"
#: ``Condition.notify`` (``notify_all``, ``Event.set`` and ``queue.Queue.put`` go through
#: it), and the waiter-lock release inside it that wakes the waiting thread
NOTIFY = r"^threading\.py\(\d+\): notify$"
LOCK_RELEASE = r"^<built-in method (release|release_lock) of _thread\.(lock|RLock) object( at 0x[0-9a-f]+)?>$"


@rule("wake", "cross_thread")
def wake(ctx: RuleContext) -> EdgeBatch:
    """another thread's notify -> the end of the condition wait it woke (Python stacks).

    Reads ``name``, ``pid``/``tid`` and ``ts``/``dur`` of recorded Python calls. A thread in
    ``threading.Condition.wait`` (``Event.wait``, ``queue.Queue.get``, a ``multiprocessing``
    queue's feeder thread) blocks in a lock acquire until another thread of its process
    calls ``notify`` (directly, or through ``notify_all``, ``Event.set``, a queue put): the
    acquire's length is how long the other thread took to get there, not the waiting
    thread's work. One notify wakes one waiter, so waits are matched to notifies in the
    order the waits ended: a wait's cause is the latest notify of another thread of the
    process, not yet matched, that came after the wait began and before it ended (its
    waiter-lock release where recorded, else its start). A wait that ended with no such
    notify (a timeout) keeps its observed length. Without Python stacks the rule finds
    nothing.
    """
    n = ctx.nodes
    parent = n.parent
    waits = np.flatnonzero(ctx.name_mask(LOCK_ACQUIRE) & (parent >= 0))
    waits = waits[ctx.name_mask(CONDITION_WAIT)[parent[waits]]]
    notify = np.flatnonzero(ctx.name_mask(NOTIFY))
    if len(waits) == 0 or len(notify) == 0:
        return EdgeBatch.of([], [], EdgeType.CROSS_THREAD)
    point = n.start(notify)
    rel = np.flatnonzero(ctx.name_mask(LOCK_RELEASE) & (parent >= 0))
    rel = rel[np.isin(parent[rel], notify)]
    rel = rel[np.lexsort((n.ts[rel], parent[rel]))]
    first = np.unique(parent[rel], return_index=True)[1]  # each notify's first release
    point[np.searchsorted(notify, parent[rel[first]])] = n.start(rel[first])
    proc = ctx.lane_proc
    lane = n.lane.astype(np.int64)
    # notifies grouped by process, in time order: a wait only looks at its own process's
    s_proc = proc[lane[point // 2]]
    point = point[np.lexsort((n.time[point], s_proc))]
    seg = np.searchsorted(proc[lane[point // 2]], np.arange(int(proc.max()) + 2))
    waits = waits[np.argsort(n.end[waits], kind="stable")]
    pos = _match(
        n.ts[waits], n.end[waits], lane[waits], proc[lane[waits]], n.time[point], lane[point // 2], seg
    )
    ok = pos >= 0
    return EdgeBatch.of(point[pos[ok]], n.finish(waits[ok]), EdgeType.CROSS_THREAD)


@kernel
def _match(w_ts, w_end, w_lane, w_proc, s_time, s_lane, seg):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per wait (sorted by end): index of the notify that woke it, or -1.

    Notifies are sorted by (process, time); ``seg[p]:seg[p + 1]`` are process ``p``'s. The
    latest unused notify of another thread of the wait's process in (start, end].
    """
    used = np.zeros(s_time.shape[0], dtype=np.bool_)
    out = np.full(w_ts.shape[0], -1, dtype=np.int64)
    for k in range(w_ts.shape[0]):
        lo, hi = seg[w_proc[k]], seg[w_proc[k] + 1]
        j = lo + np.searchsorted(s_time[lo:hi], w_end[k], side="right") - 1
        while j >= lo and s_time[j] > w_ts[k]:
            if not used[j] and s_lane[j] != w_lane[k]:
                used[j] = True
                out[k] = j
                break
            j -= 1
    return out
