"""``no-sync:NAME``: the blocking calls inside the events named NAME no longer wait.

For a ``record_function("log_loss")`` around a logging ``.item()``, say: made asynchronous
(read a step later, or copied with ``non_blocking=True`` to pinned memory), it stops
waiting for the device. Every CPU-waits-for-GPU edge into a call nested in an event named
NAME (on its thread) stops binding; the calls keep their own host time (the part of their
duration that was not the wait), and every other dependency stays.
"""

from __future__ import annotations

import numpy as np

from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind
from ctda.whatif.effect import NEVER, Effect
from ctda.whatif.optimisations import OptimisationError, optimisation
from ctda.whatif.optimisations import common as c


def _candidates(a: Analysis) -> list[str]:
    """Annotations (user record_function scopes) with a blocking call inside them."""
    n = a.nodes
    ann = np.flatnonzero((n.kind == Kind.USER_ANNOTATION) & ~n.is_gpu)
    if len(ann) == 0:
        return []
    marked = np.zeros(n.n, dtype=bool)
    marked[ann] = True
    g = a.graph
    block = np.unique(c.node_event(a, g.dst[c.sync_edges(a)]))
    block = block[block >= 0]
    anc = c.ancestor_in(a, marked)[block]
    names = c.names(a)
    found = sorted({str(names[x]) for x in anc[anc >= 0] if not str(names[x]).startswith("ProfilerStep#")})
    return [f"no-sync:{x}" for x in found]


@optimisation(
    "no-sync", arg="NAME (events whose blocking calls stop waiting)", needs_arg=True, candidates=_candidates
)
def no_sync(a: Analysis, arg: str | None) -> Effect:
    """The blocking calls inside events named NAME no longer wait for the device; their
    host cost stays."""
    n, g = a.nodes, a.graph
    scope = np.flatnonzero((c.names(a) == arg) & ~n.is_gpu)
    if len(scope) == 0:
        raise OptimisationError(f"no-sync: no event named {arg!r}")
    inside = c.subtree(a, scope)
    dst = c.node_event(a, g.dst)
    edges = np.flatnonzero(c.sync_edges(a) & (dst >= 0) & inside[np.maximum(dst, 0)])
    if len(edges) == 0:
        raise OptimisationError(f"no-sync: nothing inside the events named {arg!r} waits for the device")
    eff = Effect.identity("no-sync", n.n)
    eff.set_edges(edges, NEVER)
    eff.assumptions = [
        f"{len(scope):,} events named {arg!r}; {len(edges):,} device-to-host waits inside them stop binding",
        "the blocking calls keep their own host time; the value read is assumed not needed before it arrives",
    ]
    return eff
