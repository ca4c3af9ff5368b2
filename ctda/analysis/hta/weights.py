"""HTA's weights on a ctda Graph built from HTA's rules, and HTA mode's calibration."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.calibrate import Calibration
from ctda.analysis.graph import Graph
from ctda.analysis.hta.model import HtaEdges
from ctda.analysis.hta.result import analyse
from ctda.analysis.rules.context import RuleContext

I64 = npt.NDArray[np.int64]


def graph_weights(g: Graph, edges: HtaEdges) -> I64:
    """HTA's weight of every edge of a Graph built from HTA's rules (0 for release and
    terminal edges), looked up by (src, dst); a repeated edge weighs what HTA gave it last.

    ``edges`` is :attr:`HtaResult.edges` (or :func:`build_edges`) over the graph's nodes.
    """
    m = g.nodes.n_nodes
    if len(edges) == 0:
        return np.zeros(g.n_edges, dtype=np.int64)
    key = edges.src * m + edges.dst
    order = np.argsort(key, kind="stable")
    k_sorted = key[order]
    last = np.ones(len(k_sorted), dtype=bool)
    last[:-1] = k_sorted[:-1] != k_sorted[1:]
    k_sorted, w_sorted = k_sorted[last], edges.weight[order][last]
    q = g.src * m + g.dst
    pos = np.clip(np.searchsorted(k_sorted, q), 0, len(k_sorted) - 1)
    return np.where(k_sorted[pos] == q, w_sorted[pos], 0).astype(np.int64)


def calibration(ctx: RuleContext, g: Graph) -> Calibration:
    """HTA mode's weights: HTA's, with the edges of HTA's longest path marked binding.

    Replaying ``g`` from SOURCE with these weights is a longest-path computation: every
    node lands at SOURCE plus its longest weighted path, so SINK lands HTA's critical path
    length after SOURCE, and preferring the binding edges at ties walks back along HTA's
    own path. Reports, stores and what-ifs of an HTA-mode run therefore show HTA's answer.
    """
    r = analyse(ctx)
    weight = graph_weights(g, r.edges)
    binding = np.zeros(g.n_edges, dtype=bool)
    p = r.path_nodes
    if len(p):
        nodes = g.nodes
        src = np.concatenate([[nodes.source], r.edges.src[r.path_edges], [p[-1]]])
        dst = np.concatenate([[p[0]], r.edges.dst[r.path_edges], [nodes.sink]])
        ids = _edge_ids(g, src.astype(np.int64), dst.astype(np.int64))
        binding[ids[ids >= 0]] = True
    return Calibration(weight=weight, binding=binding, gap=g.gap)


def _edge_ids(g: Graph, src: I64, dst: I64) -> I64:
    """The graph edge from each ``src`` to each ``dst`` (-1 where there is none)."""
    m = g.nodes.n_nodes
    key = g.src * m + g.dst
    order = np.argsort(key, kind="stable")
    ks = key[order]
    q = src * m + dst
    pos = np.clip(np.searchsorted(ks, q), 0, max(len(ks) - 1, 0))
    if len(ks) == 0:
        return np.full(len(q), -1, dtype=np.int64)
    return np.where(ks[pos] == q, order[pos], -1).astype(np.int64)
