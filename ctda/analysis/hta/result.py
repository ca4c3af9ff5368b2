"""HTA's answer: its longest path over its edges, and what that path is charged to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.classify import COMM_RE
from ctda.analysis.hta.edges import edges_of
from ctda.analysis.hta.longest_path import longest_path
from ctda.analysis.hta.model import DEFAULT_OPTIONS, HTA_NAMES, HtaEdge, HtaEdges, HtaOptions
from ctda.analysis.nodes import Nodes, select
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]


@dataclass
class HtaResult:
    """HTA's critical path over one trace, on ctda's analysed events."""

    nodes: Nodes
    edges: HtaEdges
    path_nodes: I64  # ctda node ids, SOURCE side first
    path_edges: I64  # indices into ``edges`` (len(path_nodes) - 1)
    path_events: I64  # sorted analysed indices of the events owning a path node (HTA's args.critical)
    length_ns: int  # HTA's critical path length (sum of path edge weights)
    per_event_cp_ns: I64  # per analysed event: weight of path edges HTA attributes to it
    bound_by_ns: dict[str, int] = field(default_factory=dict)  # HTA's summary() classes

    @property
    def path_uids(self) -> I64:
        """Trace uids (indices in the file's event array) of the critical events."""
        return self.nodes.uid[self.path_events]

    @property
    def span_ns(self) -> int:
        """Time from the path's first node to its last; the length counts only weights, so
        the difference is what HTA leaves out (CPU gaps, waits, blocking calls)."""
        if len(self.path_nodes) == 0:
            return 0
        t = self.edges.time
        return int(t[self.path_nodes[-1]] - t[self.path_nodes[0]])

    def path_frame(self, table: EventTable) -> pd.DataFrame:
        """One row per path edge, in path order: HTA type, times (HTA's clock), weight, the
        event HTA attributes it to (analysed index, uid, name; -1/"" for none)."""
        e, n = self.edges, self.nodes
        pe = self.path_edges
        att = e.attributed[pe]
        uid = np.where(att >= 0, n.uid[np.maximum(att, 0)], -1)
        names = table.decoded("name", np.maximum(uid, 0))
        return pd.DataFrame(
            {
                "type": [HTA_NAMES[HtaEdge(int(x))] for x in e.htype[pe]],
                "src": e.src[pe],
                "dst": e.dst[pe],
                "t0_ns": e.time[e.src[pe]],
                "t1_ns": e.time[e.dst[pe]],
                "weight_ns": e.weight[pe],
                "event": att,
                "uid": uid,
                "name": np.where(att >= 0, names, ""),
            }
        )


def hta_analysis(table: EventTable, options: HtaOptions | None = None) -> HtaResult:
    """HTA's critical path of ``table``: edges, weights, longest path, attribution."""
    nodes = select(table)
    return analyse(RuleContext(table, nodes), options or DEFAULT_OPTIONS)


class Analysed(Protocol):
    """What HTA needs of an existing analysis: its table and analysed events."""

    table: EventTable
    nodes: Nodes


def hta_critical_path(analysis: Analysed, options: HtaOptions | None = None) -> HtaResult:
    """HTA's critical path over the nodes of an existing ctda analysis (same event indices)."""
    return analyse(RuleContext(analysis.table, analysis.nodes), options or DEFAULT_OPTIONS)


def analyse(ctx: RuleContext, options: HtaOptions = DEFAULT_OPTIONS) -> HtaResult:
    """HTA's answer over the analysed events of ``ctx`` (its edges are cached there)."""
    edges = edges_of(ctx, options)
    path_nodes, path_edges, length = longest_path(ctx.nodes.n_nodes, edges.src, edges.dst, edges.weight)
    n = ctx.nodes.n
    events = np.unique(path_nodes // 2) if len(path_nodes) else np.zeros(0, dtype=np.int64)
    per_event = np.zeros(n, dtype=np.int64)
    att = edges.attributed[path_edges]
    ok = att >= 0
    np.add.at(per_event, att[ok], edges.weight[path_edges][ok])
    return HtaResult(
        nodes=ctx.nodes,
        edges=edges,
        path_nodes=path_nodes,
        path_edges=path_edges,
        path_events=events.astype(np.int64),
        length_ns=int(length),
        per_event_cp_ns=per_event,
        bound_by_ns=_bound_by(ctx, edges, path_edges),
    )


def _bound_by(ctx: RuleContext, edges: HtaEdges, path: I64) -> dict[str, int]:
    """HTA's ``summary()`` classes: launch and kernel-kernel overheads, then operator time
    of CPU events, GPU communication kernels and other GPU work."""
    t, w, ev = edges.htype[path], edges.weight[path], edges.attributed[path]
    op = (t == HtaEdge.OPERATOR) & (ev >= 0)
    gpu = ctx.nodes.is_gpu[np.maximum(ev, 0)]
    comm = ctx.name_mask(COMM_RE)[np.maximum(ev, 0)]
    return {
        "cpu_bound": int(w[op & ~gpu].sum()),
        "gpu_compute_bound": int(w[op & gpu & ~comm].sum()),
        "gpu_communication_bound": int(w[op & gpu & comm].sum()),
        "gpu_kernel_kernel_overhead": int(w[t == HtaEdge.KERNEL_KERNEL_DELAY].sum()),
        "gpu_kernel_launch_overhead": int(w[t == HtaEdge.KERNEL_LAUNCH_DELAY].sum()),
    }
