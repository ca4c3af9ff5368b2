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
from ctda.analysis.propagate import Timing, path_to
from ctda.analysis.windows import Window

I64 = npt.NDArray[np.int64]


def charged_event(g: Graph, edges: I64) -> I64:
    """The analysed event whose own time each edge is, or -1 for waits and gaps."""
    return g.owner[edges]


def edge_classes(g: Graph, edges: I64, event: I64, event_cls: npt.NDArray[np.int8]) -> npt.NDArray[np.int8]:
    """Class of each edge: its event's class, else its type's wait class."""
    gap_cls = np.array(
        [CLASS_CODE.get(SPECS[EdgeType(t)].charge, CLASS_CODE["cpu_gap"]) for t in range(len(EdgeType))],
        dtype=np.int8,
    )
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


def window_paths(
    g: Graph, timing: Timing, windows: list[Window], event_cls: npt.NDArray[np.int8]
) -> pd.DataFrame:
    """Each window's critical path, clipped to the window: (window, edge, ..., ns).

    A window's path is the chain of binding edges back from its end node to its start
    time; the first edge is clipped at the window start, so ``ns`` sums to the duration.
    """
    parts = []
    for w_i, w in enumerate(windows):
        lo, hi = int(timing.time[w.start_node]), int(timing.time[w.end_node])
        frame = path_frame(g, timing, path_to(timing, g, w.end_node, lo), event_cls)
        frame["ns"] = np.minimum(frame.t1.to_numpy(), hi) - np.maximum(frame.t0.to_numpy(), lo)
        frame.insert(0, "window", w_i)
        parts.append(frame[frame.ns > 0])
    return pd.concat(parts, ignore_index=True)
