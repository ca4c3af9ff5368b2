"""One-line explanations of what a what-if scenario did to the critical path.

Scaling one class of work can make *other* classes grow: halve the GPU kernels and the
path may leave the GPU stream for a CPU thread, whose launch calls then bound the step.
The bound-by bars show that the classes moved; the line here says where the path went.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ctda.api import Analysis, lane_labels

#: a class that grows by less than this share of the observed path is not worth a sentence
MIN_GROWTH = 0.02


def lane_shares(a: Analysis) -> pd.Series:
    """Share of the critical path (all windows) per lane label, largest first.

    A wait stretch counts for the lane of the event that waited (its edge's destination),
    as on the timeline."""
    ch = a.charges
    n = a.nodes.n
    ev = ch.event.to_numpy()
    dst = a.graph.dst[ch.edge.to_numpy()] // 2
    at = np.where(ev >= 0, ev, dst)
    ok = at < n
    lanes = a.nodes.lane[at[ok]].astype(np.int64)
    ns = np.bincount(lanes, weights=ch.ns.to_numpy()[ok].astype(np.float64))
    total = float(ns.sum()) or 1.0
    labels = lane_labels(a)
    present = np.flatnonzero(ns > 0)
    out = pd.Series(ns[present] / total, index=[labels.get(int(x), str(x)) for x in present])
    return out.sort_values(ascending=False)


def reshuffle(
    observed: pd.DataFrame,
    predicted: pd.DataFrame,
    lanes_before: Callable[[], pd.Series],
    lanes_after: Callable[[], pd.Series],
) -> str | None:
    """Why the bound-by classes moved, or None when nothing grew.

    ``observed``/``predicted``: per class ``class`` and ``cp_ms`` (all windows);
    ``lanes_*``: :func:`lane_shares` of the run and of the scenario, called only when a
    class grew (a pass over every charge of the scenario: most slider moves need none).
    """
    before = observed.set_index("class").cp_ms
    after = predicted.set_index("class").cp_ms
    total = float(before.sum()) or 1.0
    delta = after.reindex(before.index.union(after.index), fill_value=0.0) - before.reindex(
        before.index.union(after.index), fill_value=0.0
    )
    grown = delta[delta > MIN_GROWTH * total].sort_values(ascending=False)
    if grown.empty:
        return None
    return _why(before, after, str(grown.index[0]), lanes_before(), lanes_after())


def _why(
    before: pd.Series, after: pd.Series, cls: str, lanes_before: pd.Series, lanes_after: pd.Series
) -> str | None:
    """The line for class ``cls``, which grew, from where the path ran before and after."""
    if lanes_before.empty or lanes_after.empty:
        return None
    what = f"{cls} grew {float(before.get(cls, 0.0)):,.3f} → {float(after.get(cls, 0.0)):,.3f} ms"
    top_b, top_a = str(lanes_before.index[0]), str(lanes_after.index[0])
    if top_b != top_a:
        return (
            f"Why: the critical path moved from {top_b} ({lanes_before.iloc[0]:.0%} of it) to "
            f"{top_a} ({lanes_after.iloc[0]:.0%}), so {what}."
        )
    moved = (lanes_after - lanes_before.reindex(lanes_after.index, fill_value=0.0)).sort_values()
    gainer = str(moved.index[-1])
    return (
        f"Why: with that work changed, the path runs more through {gainer} "
        f"({float(lanes_before.get(gainer, 0.0)):.0%} → {float(lanes_after[gainer]):.0%} of it), so {what}."
    )
