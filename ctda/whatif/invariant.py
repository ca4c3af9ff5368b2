"""The device-work floor: no predicted window is shorter than the device work that must
finish inside it (docs/model.md#synchronisation).

A blocking call (a stream/event/device synchronisation, a synchronous copy, a free) cannot
return before the work queued ahead of it on the streams it waits for is done
(:func:`ctda.analysis.rules.syncs.blocking_waits`). Work launched inside a window runs on
its stream one item after another, so a window whose blocking call returns inside it
lasts at least as long as that stream's queued work since the window began: per stream,
the durations (as the scenario scaled them) of the items launched at or after the
window's start, queued up to the last item the call waits for.

The floor is a consequence of the model's edges (launch, stream order, sync) whatever the
weights, so it holds in every scenario exactly when the graph carries a sync edge for
every wait the semantics imply. A rule that links a wait only where it was observed to
block breaks it the moment a scenario makes the host faster: that is the bug this check
exists to catch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.propagate import Timing
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.syncs import Waits, blocking_waits
from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


@dataclass
class Chains:
    """GPU work in stream order, with what the floor needs per item (position ``k``).

    ``item[k]`` is the analysed event; ``lane[k]`` its stream; ``launch[k]`` its launch
    call's start node (-1 when the graph has no launch edge to it); ``serial[k]`` whether a
    ``finish -> start`` edge ties it to the next item on its stream; ``linked[k]`` whether
    any edge does (a stream whose items overlap in the trace is ordered start to start).
    """

    item: I64
    lane: I64
    launch: I64
    serial: npt.NDArray[np.bool_]
    linked: npt.NDArray[np.bool_]
    pos: I64  # analysed event -> its position k (-1 for CPU events)
    dur_edge: I64  # per position: the edge of the item's own duration (-1 when none)


def chains(a: Analysis) -> Chains:
    """Stream order and the edges the floor relies on, read from ``a``'s graph."""
    n, g = a.nodes, a.graph
    gpu = np.flatnonzero(n.is_gpu)
    item = gpu[np.lexsort((-(n.end[gpu] - n.ts[gpu]), n.ts[gpu], n.lane[gpu]))].astype(np.int64)
    lane = n.lane[item].astype(np.int64)
    pos = np.full(n.n, -1, dtype=np.int64)
    pos[item] = np.arange(len(item))
    m = n.n_nodes
    edge_keys = g.src * m + g.dst
    order = np.argsort(edge_keys, kind="stable")
    sorted_keys = edge_keys[order]

    def edge_of(src: I64, dst: I64) -> I64:
        k = src * m + dst
        if len(sorted_keys) == 0:
            return np.full(len(k), -1, dtype=np.int64)
        p = np.minimum(np.searchsorted(sorted_keys, k), len(sorted_keys) - 1)
        return np.where(sorted_keys[p] == k, order[p], -1)  # type: ignore[no-any-return]

    nxt_same = np.zeros(len(item), dtype=bool)
    nxt_same[:-1] = lane[1:] == lane[:-1]
    nxt = np.append(item[1:], -1)
    serial = nxt_same & (edge_of(n.finish(item), n.start(np.maximum(nxt, 0))) >= 0)
    linked = serial | (nxt_same & (edge_of(n.start(item), n.start(np.maximum(nxt, 0))) >= 0))
    launch_e = np.flatnonzero(g.etype == EdgeType.LAUNCH)
    launch = np.full(len(item), -1, dtype=np.int64)
    tgt = g.dst[launch_e]
    is_start = (tgt < 2 * n.n) & (tgt % 2 == 0)
    tgt_pos = pos[np.where(is_start, tgt // 2, 0)]
    ok = is_start & (tgt_pos >= 0)
    launch[tgt_pos[ok]] = g.src[launch_e][ok]
    dur_edge = edge_of(n.start(item), n.finish(item))
    return Chains(item, lane, launch, serial, linked, pos, dur_edge)


@dataclass
class Floor:
    """Per window: its predicted duration and the device work that must fit in it."""

    table: pd.DataFrame  # window, label, predicted_ns, floor_ns, short_ns, ok

    @property
    def ok(self) -> bool:
        return bool(self.table.ok.all()) if len(self.table) else True

    @property
    def violations(self) -> pd.DataFrame:
        return self.table[~self.table.ok]


def device_floor(
    a: Analysis, weight: I64, timing: Timing, waits: Waits | None = None, ch: Chains | None = None
) -> Floor:
    """Check a predicted timeline (``timing``, replayed under edge ``weight``) against the
    device-work floor of every window of ``a``.

    ``waits`` and ``ch`` depend on the graph only; pass them (from :func:`waits_of` and
    :func:`chains`) when checking many scenarios of one analysis.
    """
    waits = waits_of(a) if waits is None else waits
    ch = chains(a) if ch is None else ch
    n = a.nodes
    t = timing.time
    k = len(ch.item)
    own = np.where(ch.dur_edge >= 0, weight[np.maximum(ch.dur_edge, 0)], 0) if k else np.zeros(0, np.int64)
    # a chain from an item to a later one adds each item's duration where the stream ties
    # its end to the next start, and nothing where only the starts are ordered
    contrib = np.where(ch.serial, own, 0)
    csum = np.concatenate([[0], np.cumsum(contrib)])
    wk = ch.pos[waits.work] if len(waits) else np.zeros(0, dtype=np.int64)
    keep = wk >= 0
    wk, call_end = wk[keep], t[n.finish(waits.call[keep])]
    launched = np.where(ch.launch >= 0, t[np.maximum(ch.launch, 0)], np.iinfo(np.int64).min)
    idx = np.arange(k)
    # items not tied to the next one at all break every chain, whatever the window
    brk_after = ~ch.linked | (np.append(ch.lane[1:], -1) != ch.lane)
    last_after = np.maximum.accumulate(np.where(brk_after, idx, -1))
    rows = []
    for w_i, w in enumerate(a.windows):
        s, e = int(t[w.start_node]), int(t[w.end_node])
        inside = (call_end >= s) & (call_end <= e)
        floor = 0
        if inside.any() and k:
            # the chain to a wait starts after the last break before it: an item not tied
            # to the next, or one launched before the window
            p = wk[inside]
            broken = np.where(p > 0, last_after[np.maximum(p - 1, 0)], -1)
            first = _chain_starts(p, broken, launched, s)
            need = np.where(first <= p, csum[p] - csum[np.minimum(first, p)] + own[p], 0)
            floor = int(need.max())
        rows.append((w_i, w.label, e - s, floor))
    df = pd.DataFrame(rows, columns=["window", "label", "predicted_ns", "floor_ns"])
    df["short_ns"] = np.maximum(df.floor_ns - df.predicted_ns, 0)
    df["ok"] = df.short_ns == 0
    return Floor(df)


def waits_of(a: Analysis) -> Waits:
    """The blocking waits of ``a``'s trace (graph-independent; compute once per analysis)."""
    return blocking_waits(RuleContext(a.table, a.nodes, a.options.rule_options))


@kernel
def _chain_starts(p, broken, launched, s):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per wait's item ``p``: the first item of its chain, the one after the last item at or
    before ``p`` that was launched before ``s`` (the window's start) or, failing one after
    ``broken`` (the last item not tied to its next), ``broken + 1``. A walk back from ``p``,
    never past the chain's own length."""
    out = np.empty(p.shape[0], dtype=np.int64)
    for q in range(p.shape[0]):
        i = p[q]
        while i > broken[q] and launched[i] >= s:
            i -= 1
        out[q] = i + 1
    return out
