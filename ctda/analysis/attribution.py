"""Stage: charge every critical-path edge to an event or a wait class, per window.

Charges are clipped to each window, so a window's charges sum to its duration exactly:
the path is contiguous in time from SOURCE to SINK.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.classify import CLASS_CODE
from ctda.analysis.edges import SPECS, EdgeType
from ctda.analysis.graph import Graph
from ctda.analysis.propagate import Timing, backtrack_chains
from ctda.analysis.windows import Window
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


def charged_event(g: Graph, edges: I64) -> I64:
    """The analysed event whose own time each edge is, or -1 for waits and gaps."""
    return g.owner[edges]


def edge_classes(g: Graph, edges: I64, event: I64, event_cls: npt.NDArray[np.int8]) -> npt.NDArray[np.int8]:
    """Class of each edge: its event's class, else its type's wait class."""
    gap_cls = _gap_classes()
    return np.where(event >= 0, event_cls[np.maximum(event, 0)], gap_cls[g.etype[edges]]).astype(np.int8)


def path_frame(g: Graph, timing: Timing, edges: I64, event_cls: npt.NDArray[np.int8]) -> pd.DataFrame:
    """One row per path edge in time order: times, type, rule, event, class."""
    ev = charged_event(g, edges)
    return pd.DataFrame(
        {
            "edge": edges,
            "t0": timing.time[g.src[edges]],
            "t1": timing.time[g.dst[edges]],
            "etype": g.etype[edges],
            "rule": g.rule[edges],
            "event": ev,
            "cls": edge_classes(g, edges, ev, event_cls),
        }
    )


def _gap_classes() -> npt.NDArray[np.int8]:
    """Wait class charged for an edge of each type when it belongs to no event."""
    return np.array(
        [CLASS_CODE.get(SPECS[EdgeType(t)].charge, CLASS_CODE["cpu_gap"]) for t in range(len(EdgeType))],
        dtype=np.int8,
    )


def window_paths(
    g: Graph, timing: Timing, windows: list[Window], event_cls: npt.NDArray[np.int8]
) -> pd.DataFrame:
    """Each window's critical path, clipped to the window: (window, edge, ..., ns).

    A window's path is the chain of binding edges back from its end node to its start
    time; the first edge is clipped at the window start, so ``ns`` sums to the duration.
    """
    if not windows:
        return pd.concat([])  # nothing to report: the same error as concatenating no windows
    ends = np.array([w.end_node for w in windows], dtype=np.int64)
    lo = np.array([timing.time[w.start_node] for w in windows], dtype=np.int64)
    hi = timing.time[ends]
    edges, t0, t1, start = backtrack_chains(timing.binding_edge, g.src, timing.time, ends, lo)
    cols = _clip_chains(
        edges,
        t0,
        t1,
        start,
        lo,
        hi,
        g.etype,
        g.rule,
        g.owner,
        np.asarray(event_cls, dtype=np.int8),
        _gap_classes(),
    )
    names = ("window", "edge", "t0", "t1", "etype", "rule", "event", "cls", "ns")
    # copy=False: the columns are fresh arrays; consolidating them would only copy
    return pd.DataFrame(dict(zip(names, cols)), copy=False)


@kernel
def _clip_chains(edges, t0, t1, start, lo, hi, etype, rule, owner, event_cls, gap_cls):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Window paths as columns: each chain in time order, clipped to its window, empty edges dropped."""
    n_win = start.shape[0] - 1
    k = 0
    for w in range(n_win):
        for q in range(start[w], start[w + 1]):
            if min(t1[q], hi[w]) - max(t0[q], lo[w]) > 0:
                k += 1
    win = np.empty(k, dtype=np.int64)
    edge = np.empty(k, dtype=np.int64)
    c_t0 = np.empty(k, dtype=np.int64)
    c_t1 = np.empty(k, dtype=np.int64)
    et = np.empty(k, dtype=np.int8)
    rl = np.empty(k, dtype=np.int16)
    ev = np.empty(k, dtype=np.int64)
    cl = np.empty(k, dtype=np.int8)
    ns = np.empty(k, dtype=np.int64)
    i = 0
    for w in range(n_win):
        for q in range(start[w + 1] - 1, start[w] - 1, -1):
            clipped = min(t1[q], hi[w]) - max(t0[q], lo[w])
            if clipped <= 0:
                continue
            e = edges[q]
            o = owner[e]
            win[i] = w
            edge[i] = e
            c_t0[i] = t0[q]
            c_t1[i] = t1[q]
            et[i] = etype[e]
            rl[i] = rule[e]
            ev[i] = o
            cl[i] = event_cls[o] if o >= 0 else gap_cls[etype[e]]
            ns[i] = clipped
            i += 1
    return win, edge, c_t0, c_t1, et, rl, ev, cl, ns
