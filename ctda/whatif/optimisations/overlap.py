"""``overlap:NAME``: a collective or copy moved off the compute stream's path.

The device work named NAME (a regex over kernel, copy and set names, or over the CPU ops
that launched them: ``overlap:nccl``, ``overlap:Memcpy HtoD``) is taken to run beside the
compute instead of in its way:

- on a stream of its own (an NCCL stream, a copy stream), the other streams' waits for it
  (stream-wait edges out of it) no longer block;
- on a stream it shares with compute, its own time leaves that stream's path (it runs on a
  side stream; the order of the work around it stays).

Overlapping also means issuing it asynchronously (a copy from pinned memory with
``non_blocking=True``, a collective on its own stream), so on the host:

- the call that launched it keeps only a launch's cost: a copy from pageable memory blocks
  its launching call (``cudaMemcpyAsync``) while the driver stages the data, and that time
  was the copy, not host work. The cost kept is the median launch call of the trace;
- the synchronisations inside the operator that issued it (``.to()`` without
  ``non_blocking`` synchronises its stream after the copy) stop waiting.

The overlapped work is assumed to fit behind the compute it overlaps: a host call elsewhere
that waits for it (a sync) still waits for its end, which no longer includes its own time
when it shared the stream.
"""

from __future__ import annotations

import numpy as np

from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind
from ctda.whatif.effect import NEVER, Effect
from ctda.whatif.optimisations import OptimisationError, optimisation
from ctda.whatif.optimisations import common as c
from ctda.whatif.select import name_mask

#: work worth trying to overlap: collectives and host<->device copies
CANDIDATES = (("nccl", r"(?i)nccl|rccl"), ("Memcpy HtoD", r"Memcpy HtoD"), ("Memcpy DtoH", r"Memcpy DtoH"))


def _selected(a: Analysis, pattern: str) -> np.ndarray:
    n = a.nodes
    by_name = name_mask(a, pattern)
    li = c.launcher(a)
    by_op = np.zeros(n.n, dtype=bool)
    ops = c.subtree(a, np.flatnonzero(by_name & ~n.is_gpu))
    by_op[n.is_gpu] = (li[n.is_gpu] >= 0) & ops[np.maximum(li[n.is_gpu], 0)]
    return np.flatnonzero(n.is_gpu & (by_name | by_op))


def _candidates(a: Analysis) -> list[str]:
    return [f"overlap:{label}" for label, rx in CANDIDATES if len(_selected(a, rx))]


@optimisation(
    "overlap",
    arg="NAME (regex over the device work, or the ops that launched it)",
    needs_arg=True,
    candidates=_candidates,
)
def overlap(a: Analysis, arg: str | None) -> Effect:
    """A collective or copy named NAME runs beside the compute: the other streams' waits
    for it stop blocking, and on a shared stream its time leaves the stream's path."""
    n, g = a.nodes, a.graph
    work = _selected(a, str(arg))
    if len(work) == 0:
        raise OptimisationError(f"overlap: no device work matches {arg!r}")
    sel = np.zeros(n.n, dtype=bool)
    sel[work] = True
    # a lane is shared when it also runs work that is not selected
    gpu = np.flatnonzero(n.is_gpu)
    lanes_other = np.unique(n.lane[gpu[~sel[gpu]]])
    shared = np.isin(n.lane[work], lanes_other)
    eff = Effect.identity("overlap", n.n)
    eff.factor[work[shared]] = 0.0
    src = c.node_event(a, g.src)
    waits = np.flatnonzero((g.etype == EdgeType.STREAM_WAIT) & (src >= 0) & sel[np.maximum(src, 0)])
    calls, issuers = _issuers(a, work)
    shrunk = _as_launches(a, calls, eff)
    dst = c.node_event(a, g.dst)
    inside = c.subtree(a, issuers)
    syncs = np.flatnonzero(c.sync_edges(a) & (dst >= 0) & inside[np.maximum(dst, 0)])
    eff.set_edges(np.concatenate([waits, syncs]), NEVER)
    eff.assumptions = [
        f"{len(work):,} device work items match {arg!r}: {int((~shared).sum()):,} on their own streams "
        f"({len(waits):,} stream waits for them stop blocking), {int(shared.sum()):,} sharing a stream with "
        "compute (their time leaves that stream's path)",
        f"issued asynchronously: {shrunk:,} launch calls that blocked for their work keep a launch's cost "
        f"(the trace's median launch call), and {len(syncs):,} waits inside the {len(issuers):,} operators "
        "that issued it stop binding",
        "the overlapped work is assumed to fit behind the compute beside it (no bandwidth or SM contention)",
    ]
    return eff


def _issuers(a: Analysis, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the calls that launched ``work``, the CPU operators directly around those calls:
    an annotation or step around a bare call is no operator, so its syncs stay)."""
    li = c.launcher(a)[work]
    calls = np.unique(li[li >= 0])
    parents = a.nodes.parent[calls] if len(calls) else calls
    parents = np.unique(parents[parents >= 0])
    return calls, parents[a.nodes.kind[parents] == Kind.CPU_OP]


def _as_launches(a: Analysis, calls: np.ndarray, eff: Effect) -> int:
    """Scale each of ``calls`` that took longer than the trace's median launch call down to
    it (their extra time was the work they blocked for); the number scaled."""
    n = a.nodes
    launch = c.launches(a)
    dur = (n.end - n.ts).astype(np.float64)
    if len(calls) == 0 or not launch.any():
        return 0
    typical = float(np.median(dur[launch]))
    d = dur[calls]
    long = d > typical
    eff.factor[calls[long]] = np.minimum(eff.factor[calls[long]], typical / d[long])
    return int(long.sum())
