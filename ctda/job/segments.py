"""Stage (per rank, in the worker): the rank's binding chains between collectives.

Contract: ``segments(analysis, collectives)`` -> :class:`Segments`: from every place a job
path can enter this rank (a window end, a collective arrival, the node a completion binds
to locally) back along the rank's binding edges to the next such place or to a
collective completion, where the job path may continue on another rank. Where two chains
meet they are cut (the meeting node starts a chain of its own), so the chains are disjoint
and hold at most one row per node of the rank's binding tree; with the collectives they
are all the cross-rank stage needs to walk a job's critical path (``ctda.job.stitch``)
without any rank's graph. Rows carry their event's name, for the reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.attribution import edge_classes
from ctda.analysis.engine import Analysis
from ctda.job.names import NameCodes
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


@dataclass
class Segments:
    """Chains of binding edges, walk order (latest first), one block per start node.

    ``rows``: ``t0`` (rank clock), ``etype``, ``event`` (rank-local, -1 for waits), ``cls``,
    ``name``; ``index`` maps each start node to its block of ``rows`` and the node its chain
    stops at. A row's end time is not sent (it is what the workers send most of): in a
    chain each edge ends where the one before it (later in time) starts, so ``t1`` is the
    previous row's ``t0`` and, on a block's first row, the start node's time (``heads``:
    ``[row, t1]`` per non-empty block). :meth:`t1` rebuilds the column.
    """

    rows: pd.DataFrame
    index: dict[int, tuple[int, int, int]]  # start node -> (row start, row stop, end node)
    source: int  # the rank's SOURCE node
    source_time: int  # its time (a RELEASE edge starts there; the job's SOURCE is the earliest)
    heads: I64 = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def t1(self) -> I64:
        """Each row's end time (rank clock): the previous row's start, or its block's head."""
        t0 = self.rows.t0.to_numpy(dtype=np.int64)
        out = np.empty_like(t0)
        out[1:] = t0[:-1]
        out[self.heads[:, 0]] = self.heads[:, 1]
        return out


def segments(a: Analysis, arrive_events: I64, done_events: I64, names: NameCodes | None = None) -> Segments:
    """The chains from every entry node of one analysed rank (``names``: of its events)."""
    g, tm = a.graph, a.timing
    done_nodes = 2 * np.asarray(done_events, dtype=np.int64) + 1
    ends = np.array([w.end_node for w in a.windows], dtype=np.int64)
    local_src = g.src[np.maximum(tm.binding_edge[done_nodes], 0)]
    local_src = local_src[tm.binding_edge[done_nodes] >= 0]
    entries = np.unique(np.concatenate([ends, 2 * np.asarray(arrive_events, dtype=np.int64), local_src]))
    stop = np.zeros(a.nodes.n_nodes, dtype=np.bool_)
    stop[entries] = True
    stop[done_nodes] = True
    # where two chains meet, both stop and a chain starts: the chains become disjoint
    junctions = np.flatnonzero(_junctions(tm.binding_edge, g.src, entries, stop))
    stop[junctions] = True
    entries = np.concatenate([entries, junctions]).astype(np.int64)
    starts = np.concatenate([entries, done_nodes]).astype(np.int64)
    single = np.concatenate([np.zeros(len(entries), np.bool_), np.ones(len(done_nodes), np.bool_)])
    edges, t0, t1, ptr, end = _walk(tm.binding_edge, g.src, tm.time, starts, stop, single)
    owner = g.owner[edges]
    # the rows' names as categories built from the name codes (decoding a string per row
    # and hashing them again cost seconds per million rows); a wait's name is ""
    if names is None:
        names = NameCodes.of(a.table, a.nodes.uid)
    row_names = names[np.maximum(owner, 0)]
    empty = len(row_names.values)
    row_names = NameCodes(np.where(owner >= 0, row_names.codes, empty), np.append(row_names.values, ""))

    rows = pd.DataFrame(
        {
            "t0": t0,
            "etype": g.etype[edges],
            "event": owner.astype(np.int32),  # rank-local: half the bytes sent
            "cls": edge_classes(g, edges, owner, a.event_cls),
            "name": row_names.categorical(),
        }
    )
    index = {int(s): (int(ptr[k]), int(ptr[k + 1]), int(end[k])) for k, s in enumerate(starts)}
    full = np.flatnonzero(ptr[1:] > ptr[:-1])
    heads = np.stack([ptr[full], t1[ptr[full]]], axis=1).astype(np.int64).reshape(-1, 2)
    return Segments(rows, index, a.nodes.source, int(tm.time[a.nodes.source]), heads)


@kernel
def _junctions(bind, src, starts, stop):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Nodes (not yet stops) that the chains from two starts both reach."""
    seen = np.zeros(bind.shape[0], dtype=np.bool_)
    junction = np.zeros(bind.shape[0], dtype=np.bool_)
    for k in range(starts.shape[0]):
        v = starts[k]
        while True:
            e = bind[v]
            if e < 0:
                break
            u = src[e]
            if stop[u]:
                break
            if seen[u]:
                junction[u] = True
                break
            seen[u] = True
            v = u
    return junction


@kernel
def _walk(bind, src, time, starts, stop, single):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Binding edges back from each start until a stop node (or SOURCE); ``single``: one edge."""
    cap = bind.shape[0] + starts.shape[0] + 1  # disjoint chains: at most one edge per node
    e_out = np.empty(cap, dtype=np.int64)
    t0 = np.empty(cap, dtype=np.int64)
    t1 = np.empty(cap, dtype=np.int64)
    ptr = np.zeros(starts.shape[0] + 1, dtype=np.int64)
    end = np.empty(starts.shape[0], dtype=np.int64)
    m = 0
    for k in range(starts.shape[0]):
        v = starts[k]
        while True:
            e = bind[v]
            if e < 0 or m >= cap:
                break
            u = src[e]
            e_out[m] = e
            t0[m] = time[u]
            t1[m] = time[v]
            m += 1
            v = u
            if stop[u] or single[k]:
                break
        end[k] = v
        ptr[k + 1] = m
    return e_out[:m], t0[:m], t1[:m], ptr, end
