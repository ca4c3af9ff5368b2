"""Stage: ranks of one host sharing its cores in a job what-if (processor sharing).

Contract: ``host_cores(job, cpus)`` -> :class:`HostCores` (each host's core count and where
it came from); ``share_weights(job, cores, weights)`` -> the job graph's edge weights under
a scenario, re-timed so that every host's busy threads share its cores at the *predicted*
times, not the observed ones (``docs/host-contention.md#sharing-cores-in-a-what-if``).

The model: a host with ``C`` cores running ``N`` busy threads (of all its ranks' processes,
helper processes merged into a rank included) gives each ``min(1, C / N)`` of a core. A
busy segment of observed length ``b`` whose threads had, on average over it, the rate
``rho_obs`` did ``b * rho_obs`` of work; in a scenario its weight is its scaled weight times
``rho_obs / rho_pred``, ``rho_pred`` the rate over where the re-timed job places it. The
placement depends on the weights, so the two are iterated to a fixed point (damped). With
every factor 1 each segment stays where it was, ``rho_pred == rho_obs``, and the replay is
the observed one exactly. So work removed on one rank gives cores back to the others, and a
rank that no longer sleeps or waits competes with its peers for them.

Busy segments: CPU timeline edges owned by an event that is not a blocking wait
(``BLOCKING_FRAMES``), for the part of the edge its calibrated weight covers (an edge whose
end another edge set, a wait, is busy only for its floor). Collectives count for their
transfer after the last arrival (the calibrated weight of their own duration): gloo on one
host moves and reduces the data on the CPU. The core count is not in a Kineto trace;
``--cpus`` gives it. Without it nothing is re-timed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.contention import _timeline_edges
from ctda.analysis.propagate import Timing, replay
from ctda.analysis.rules.cross_thread import BLOCKING_FRAMES
from ctda.analysis.tables import per_name
from ctda.job.run import Job

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
#: fixed-point rounds, and the share of the new weights taken in each (damping)
ROUNDS = 16
STEP = 0.5


@dataclass
class HostCores:
    """Per host (``None``: not recorded, the rank alone), its cores; ``source`` says where
    they came from (``--cpus``), ``hosts`` the ranks of each."""

    cores: dict[str | None, int]
    source: str
    hosts: dict[str | None, list[int]]

    def describe(self) -> str:
        parts = [f"{h or 'unnamed host'}: {self.cores[h]} cores, ranks {rs}" for h, rs in self.hosts.items()]
        return f"cores shared per host ({self.source}): " + "; ".join(parts)


def host_cores(job: Job, cpus: int) -> HostCores | None:
    """The core count of every host of ``job``: ``cpus`` (Kineto traces record none)."""
    if cpus <= 0:
        return None
    hosts: dict[str | None, list[int]] = {}
    for r in job.ranks:
        h = job.parts[r].skeleton.host
        hosts.setdefault(h if h else f"rank {r}", []).append(r)
    return HostCores({h: cpus for h in hosts}, "--cpus", hosts)


def busy_edges(job: Job, cores: HostCores) -> tuple[I64, I64]:
    """The job graph's busy timeline edges and the index of each one's host in ``cores.hosts``."""
    jg = job.full()
    g, _ = jg.model()
    e = _timeline_edges(g)
    own = g.owner[e]
    rx = re.compile(BLOCKING_FRAMES)
    blocking = per_name(jg.names, lambda v: rx.match(v) is not None, bool)
    e = e[(own >= 0) & ~blocking[np.maximum(own, 0)]]
    rank_host = np.zeros(max(job.ranks) + 1, dtype=np.int64)
    for i, ranks in enumerate(cores.hosts.values()):
        rank_host[ranks] = i
    return e, rank_host[jg.rank_of[g.owner[e]]]


def mean_rates(start: I64, length: F64, host: I64, cores: F64) -> F64:
    """Per busy interval ``[start, start + length)``, the mean of ``min(1, C / N(t))`` over
    it, ``N(t)`` the intervals of its host open at ``t`` and ``C`` its host's cores."""
    m = len(start)
    if m == 0:
        return np.zeros(0)
    pos = np.concatenate([start, start + np.rint(length).astype(np.int64)])
    step = np.concatenate([np.ones(m), -np.ones(m)])
    h = np.concatenate([host, host])
    order = np.lexsort((step, pos, h))
    p, hh = pos[order], h[order]
    n_open = np.cumsum(step[order])[:-1]
    rate = np.where(n_open > 0, np.minimum(1.0, cores[hh[:-1]] / np.maximum(n_open, 1.0)), 1.0)
    dt = np.where(hh[1:] == hh[:-1], np.diff(p), 0).astype(np.float64)
    integral = np.concatenate([[0.0], np.cumsum(rate * dt)])
    at = np.empty(2 * m, dtype=np.int64)
    at[order] = np.arange(2 * m)
    got = integral[at[m:]] - integral[at[:m]]
    return np.where(length > 0, got / np.maximum(length, 1.0), 1.0)  # type: ignore[no-any-return]


def share_weights(job: Job, cores: HostCores, weights: I64) -> tuple[I64, Timing]:
    """``weights`` (the scenario's, before sharing) re-timed for cores shared at the
    predicted times, and the replay they give."""
    jg = job.full()
    (g, cal), t = jg.model(), jg.nodes.time
    e, host = busy_edges(job, cores)
    per_host = np.array([cores.cores[h] for h in cores.hosts], dtype=np.float64)
    observed = mean_rates(t[g.src[e]], np.minimum(cal.weight[e], t[g.dst[e]] - t[g.src[e]]), host, per_host)
    base = weights.astype(np.float64)
    w = base.copy()
    source = int(t[jg.nodes.source])
    for _ in range(ROUNDS):
        tm = replay(g, np.rint(w).astype(np.int64), cal.binding, source, jg.window_ends)
        span = tm.time[g.dst[e]] - tm.time[g.src[e]]
        rho = mean_rates(tm.time[g.src[e]], np.minimum(w[e], span), host, per_host)
        new = base.copy()
        new[e] = base[e] * observed / np.maximum(rho, 1e-9)
        w = (1 - STEP) * w + STEP * new
    out = np.rint(w).astype(np.int64)
    return out, replay(g, out, cal.binding, source, jg.window_ends)
