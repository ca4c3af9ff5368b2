"""Stage: one rank's collective skeleton (what the cross-rank stages need, and nothing more).

Contract: ``skeleton(analysis, rank)`` -> :class:`Skeleton`: one row per collective the
rank took part in, with the graph nodes where the rank *arrived* (its share of the
collective can start) and where it *completed*, the rank's step windows, and its identity.

Which events are collectives (strongest evidence first):

- NCCL/RCCL kernels (``ncclKernel_*``, ``ncclDevKernel_*``) on a GPU stream: a kernel
  starts when the rank reaches it and ends when every peer has contributed.
- gloo's ``gloo:*`` annotations on gloo's worker thread: the same, on the CPU. The
  ``c10d::*`` op on the calling thread that queued each one is its *issue* op (gloo has no
  flow linking them; they are paired in order, by operation).
- ``record_param_comms`` and ``c10d::*`` ops only issue work (they return before peers
  arrive), so they are not collectives themselves; where they carry a process group,
  sequence number or message size (newer traces), those become the collective's keys.

Point-to-point transfers (``SendRecv`` kernels, ``gloo:send``/``gloo:recv``) are rows too,
matched in order within their group like the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.nodes import Nodes
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.columns import NA
from ctda.ingest.kinds import Kind
from ctda.job.hostload import Work, work_table
from ctda.job.names import NameCodes
from ctda.job.segments import Segments, segments

I64 = npt.NDArray[np.int64]
NCCL_RE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)")
GLOO_RE = re.compile(r"^gloo:(\w+)")
ISSUE_RE = re.compile(r"^c10d::(\w+)")
#: optional metadata columns (newer traces' record_param_comms args), when the reader kept them
META_COLUMNS = {"group": "pg_name", "seq": "coll_seq", "size": "in_msg_nelems"}

COLUMNS = (
    "kind",
    "op",
    "group",
    "seq",
    "size",
    "event",
    "issue",
    "t_arrive",
    "t_done",
    "window",
    "cls",
    "name",
)


def op_key(name: str) -> str:
    """A collective's operation, spelled the same by NCCL, gloo and c10d: ``allreduce``, ..."""
    for rx in (NCCL_RE, GLOO_RE, ISSUE_RE):
        m = rx.match(name)
        if m:
            return re.sub(r"[^a-z]", "", m.group(1).lower()).removesuffix("base").removesuffix("coalesced")
    return re.sub(r"[^a-z]", "", name.lower())


@dataclass
class Skeleton:
    """One rank's part of the cross-rank stages: identity, collectives, step windows, and
    the binding chains between collectives (``segments``, for the job path).

    ``collectives`` has one row per collective (columns ``COLUMNS``), sorted by issue order
    then arrival; ``windows`` one row per analysis window (label, step, node ids, times).
    Times are the rank's own clock (ns); node ids index the rank's graph.
    """

    rank: int
    host: str | None
    collectives: pd.DataFrame
    windows: pd.DataFrame
    n_nodes: int
    segments: Segments
    #: the rank's CPU work per window, for host contention between ranks (``hostload``)
    work: Work | None = None

    @property
    def n_events(self) -> int:
        return (self.n_nodes - 2) // 2


def skeleton(a: Analysis, rank: int) -> Skeleton:
    """The collective skeleton of one analysed rank."""
    names = NameCodes.of(a.table, a.nodes.uid)
    kind = a.nodes.kind
    nccl = (kind == Kind.KERNEL) & _match(names, NCCL_RE)
    gloo = ~a.nodes.is_gpu & _match(names, GLOO_RE)
    rows = np.flatnonzero(nccl | gloo)
    rows = rows[np.argsort(a.nodes.ts[rows], kind="stable")]
    issue = issue_ops(a.nodes, names, rows[gloo[rows]])
    row_names = names[rows].decoded()
    issue_of = np.full(len(rows), -1, dtype=np.int64)
    issue_of[gloo[rows]] = issue
    frame = pd.DataFrame(
        {
            "kind": np.where(nccl[rows], "nccl", "gloo"),
            "op": [op_key(str(n)) for n in row_names],
            "group": np.where(nccl[rows], "nccl", "gloo"),  # no group recorded: one per backend
            "seq": -1,
            "size": -1,
            "event": rows,
            "issue": issue_of,
            "t_arrive": a.nodes.ts[rows],
            "t_done": a.nodes.end[rows],
            "window": _window_of(a, a.nodes.ts[rows]),
            "cls": a.event_cls[rows],
            "name": row_names.astype(str),
        }
    )
    _attach_meta(a, frame, names)
    # issue order where known (gloo's worker threads may start work out of order)
    key = np.where(frame.issue >= 0, a.nodes.ts[np.maximum(frame.issue.to_numpy(), 0)], frame.t_arrive)
    frame = frame.iloc[np.lexsort((frame.t_arrive.to_numpy(), key))].reset_index(drop=True)
    wins = pd.DataFrame(
        {
            "label": [w.label for w in a.windows],
            "step": [w.step if w.step is not None else -1 for w in a.windows],
            "start_node": [w.start_node for w in a.windows],
            "end_node": [w.end_node for w in a.windows],
        }
    )
    wins["t_start"] = a.timing.time[wins.start_node.to_numpy()]
    wins["t_end"] = a.timing.time[wins.end_node.to_numpy()]
    ev = frame.event.to_numpy(dtype=np.int64)
    work = work_table(a, _window_of(a, a.nodes.ts), frame.t_done.to_numpy(dtype=np.int64), names)
    segs = segments(a, ev, ev, names)
    return Skeleton(rank, a.table.meta.host_name, frame, wins, a.nodes.n_nodes, segs, work)


def _match(names: NameCodes, rx: re.Pattern[str]) -> npt.NDArray[np.bool_]:
    return names.map(lambda v: rx.match(v) is not None, bool)


def issue_rule(ctx: RuleContext) -> EdgeBatch:
    """``collective_issue``: the ``c10d::*`` op that queued gloo work (start) -> that work's
    start on gloo's thread. Reads names, threads and times; pairs in order per operation."""
    names = NameCodes.of(ctx.table, ctx.nodes.uid)
    gloo = np.flatnonzero(~ctx.nodes.is_gpu & _match(names, GLOO_RE))
    gloo = gloo[np.argsort(ctx.nodes.ts[gloo], kind="stable")]
    src = issue_ops(ctx.nodes, names, gloo)
    ok = src >= 0
    return EdgeBatch.of(2 * src[ok], 2 * gloo[ok], EdgeType.CROSS_THREAD, "collective_issue")


def issue_ops(nodes: Nodes, names: NameCodes, gloo_rows: I64) -> I64:
    """For each gloo annotation, the ``c10d::*`` op that queued it (-1 if none).

    Outermost c10d ops on non-gloo threads, paired in time order with the annotations of
    the same operation: each annotation takes the earliest unpaired op that started before it.
    """
    out = np.full(len(gloo_rows), -1, dtype=np.int64)
    if len(gloo_rows) == 0:
        return out
    c10d = np.flatnonzero(_match(names, ISSUE_RE) & ~nodes.is_gpu)
    par = nodes.parent[c10d]
    outer = c10d[(par < 0) | ~_match(names[np.maximum(par, 0)], ISSUE_RE)]
    gloo_lanes = set(nodes.lane[gloo_rows].tolist())
    outer = outer[~np.isin(nodes.lane[outer], list(gloo_lanes))]
    outer = outer[np.argsort(nodes.ts[outer], kind="stable")]
    pending: dict[str, list[int]] = {}
    outer_names = names[outer].decoded()
    for i, name in zip(outer.tolist(), outer_names):
        pending.setdefault(op_key(str(name)), []).append(i)
    for k, (g, name) in enumerate(zip(gloo_rows.tolist(), names[gloo_rows].decoded())):
        queue = pending.get(op_key(str(name)), [])
        if queue and nodes.ts[queue[0]] <= nodes.ts[g]:
            out[k] = queue.pop(0)
    return out


def _window_of(a: Analysis, t: I64) -> I64:
    """Index of the window (in ``a.windows``) whose span holds each time, -1 if none."""
    starts, ends = a.window_bounds()
    order = np.argsort(starts, kind="stable")
    pos = np.searchsorted(starts[order], t, side="right") - 1
    w = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
    inside = (w >= 0) & (t <= ends[np.maximum(w, 0)])
    return np.where(inside, w, -1).astype(np.int64)


def _attach_meta(a: Analysis, frame: pd.DataFrame, names: NameCodes) -> None:
    """Group, sequence number and size, where the trace records them: on the collective's
    own event (newer NCCL kernels), else on the ``record_param_comms`` op inside its issue
    op, else on the issue op itself."""
    if "coll_seq" not in a.table.events.column_names:
        return  # a table saved before these columns existed
    rpc = np.flatnonzero(names.map(lambda v: v == "record_param_comms", bool) & (a.nodes.parent >= 0))
    rpc_of = np.full(a.nodes.n, -1, dtype=np.int64)
    rpc_of[a.nodes.parent[rpc]] = rpc
    own = frame.event.to_numpy(dtype=np.int64)
    issue = frame.issue.to_numpy(dtype=np.int64)
    inner = np.where(issue >= 0, rpc_of[np.maximum(issue, 0)], -1)
    for col, field_name in META_COLUMNS.items():
        # start from what is known without args (group: one per backend)
        out = frame[col].to_numpy(dtype=object if col == "group" else np.int64).copy()
        for cand in (issue, inner, own):  # later candidates win
            ok = cand >= 0
            uid = a.nodes.uid[cand[ok]]
            if col == "group":
                vals = a.table.decoded(field_name, uid)
                has = np.array([bool(v) for v in vals], dtype=bool)
            else:
                vals = a.table.col(field_name)[uid]
                has = vals != NA
            idx = np.flatnonzero(ok)[has]
            out[idx] = vals[has]
        frame[col] = out
