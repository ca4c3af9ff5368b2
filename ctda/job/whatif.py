"""Stage: job what-ifs: re-time the job graph under changed durations, per job step.

Contract: ``job_scenario(job, specs, median_straggler)`` -> :class:`JobScenario` with the
predicted job step next to the base, both by the job's step definition (``ctda.job.steps``:
from the end of one step's last collective to the end of the next's, on the re-timed job
graph), so observed and predicted compare step for step.

Selections are the single-rank shorthands (``name~REGEX=F``, ``cat=C=F``, ``class=C=F``,
``thread=TID=F``), applied on every rank, or on one rank with a ``rank=R:`` prefix;
``rank=R=F`` scales everything rank R does. ``median_straggler`` makes each step's named
straggler (``ctda.job.noise``) as fast as the median rank: its extra work (what no other
rank does in the step) is removed and its common work keeps its own times (see
:func:`median_straggler_factors`). Whatever the factors, ops that stalled beside
another rank's extra work on their host are re-timed with that work (``host_factors``).
With ``cpus`` (each host's cores), the ranks of a host then share its cores at the
predicted times (``ctda.job.hostshare``): a rank that stops sleeping competes with its
peers, and work removed gives them cores back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.classify import CLASS_CODE
from ctda.analysis.propagate import Timing, replay
from ctda.job import path as jpath
from ctda.job.hostload import normalize
from ctda.job.hostshare import host_cores, share_weights
from ctda.job.run import Job
from ctda.job.steps import collective_ends
from ctda.whatif.scenario import factors_for, scaled_weights
from ctda.whatif.select import SelectionError, check_factor, parse_scale

F64 = npt.NDArray[np.float64]
_RANK = re.compile(r"^rank=(?P<rank>\d+)(?::(?P<rest>.+)|=(?P<factor>[0-9.eE+-]+))$")


@dataclass
class JobScenario:
    """A job's base steps and the steps predicted under changed durations."""

    name: str
    factors: F64  # per job event
    timing: Timing
    steps: pd.DataFrame  # label, base_ns, predicted_ns, delta_ns, the rank that ended it before/after
    #: how the prediction was made beyond the factors (the cores shared per host, and whence)
    notes: list[str] = field(default_factory=list)

    @property
    def mean_predicted_ns(self) -> float:
        return float(self.steps.predicted_ns.mean())


def rank_factors(job: Job, spec: str) -> F64:
    """Per job event factor of one ``--scale`` spec (``rank=R:`` restricts it to rank R)."""
    jg = job.full()
    f = np.ones(jg.nodes.n, dtype=np.float64)
    m = _RANK.match(spec.strip())
    if m and m.group("factor") is not None:
        r = int(m.group("rank"))
        _check_rank(job, r, spec)
        f[jg.base[r] : jg.base[r] + job.analyses[r].nodes.n] = check_factor(
            m.group("factor"), f"--scale {spec!r}"
        )
        return f
    ranks = [int(m.group("rank"))] if m else jg.ranks
    inner = m.group("rest") if m else spec
    hit = 0
    for r in ranks:
        _check_rank(job, r, spec)
        a = job.analyses[r]
        try:
            o = parse_scale(a, inner)
        except SelectionError:
            if m:
                raise
            continue  # matches nothing on this rank
        hit += 1
        f[jg.base[r] : jg.base[r] + a.nodes.n] = factors_for(a, [o])
    if not hit:
        raise SelectionError(f"--scale {spec!r} matches no event on any rank")
    return f


def _check_rank(job: Job, r: int, spec: str) -> None:
    if r not in job.parts:
        raise SelectionError(f"--scale {spec!r}: rank {r} is not in the job (ranks {sorted(job.parts)})")


def median_straggler_factors(job: Job, own: bool = True) -> F64:
    """Per job event factor making each step's named straggler as fast as the median rank.

    The median rank does what the others all do: the straggler's work that no other rank
    does in the step (its *extra work*: an op beyond the fewest occurrences of its name,
    addresses dropped, that the other ranks have) is removed. Its common work keeps its own
    times (``own``): they are what the trace shows this rank take for that work, while the
    other ranks' times for it were taken on cores shared with the straggler and include
    their waits for it. ``own=False`` gives the common work the other ranks' median time in
    the step instead (the earlier rule). Ops stalled beside another rank's extra work are
    re-timed with that work afterwards (:func:`host_factors`).
    """
    jg = job.full()
    f = np.full(jg.nodes.n, np.nan)
    comm = jg.event_cls == CLASS_CODE["communication"]
    named = job.stragglers.straggler
    # the job's straggler: a fix to its code applies to every step, also those where its
    # lateness stayed within the noise band (none named: no rank is changed anywhere)
    counts = np.bincount(named[named >= 0].to_numpy(dtype=np.int64)) if (named >= 0).any() else None
    top = int(np.argmax(counts)) if counts is not None else -1
    for label, strag in zip(job.stragglers.label.tolist(), named.tolist()):
        strag = strag if strag >= 0 else top
        if strag < 0:
            continue
        keyed = {r: _step_events(job, r, str(label), comm) for r in jg.ranks}
        mine = keyed[int(strag)]
        others = pd.concat([k for r, k in keyed.items() if r != strag], ignore_index=True)
        if mine.empty or others.empty:
            continue
        key = pd.MultiIndex.from_frame(mine[["name", "k"]])
        # the k-th op of a name is common when every other rank has at least k + 1 of them
        fewest = pd.concat([k.groupby("name").size() for r, k in keyed.items() if r != strag], axis=1)
        fewest = fewest.fillna(0).min(axis=1)
        common = mine.k.to_numpy() < mine["name"].map(fewest).fillna(0).to_numpy()
        ev, dur = mine.event.to_numpy(), mine.dur.to_numpy()
        f[ev[~common]] = 0.0  # its extra work: the median rank does not do it
        if not own:
            got = others.groupby(["name", "k"]).dur.median().reindex(key).to_numpy()
            ok = common & ~np.isnan(got) & (dur > 0)
            f[ev[ok]] = got[ok] / dur[ok]
    return np.where(np.isnan(f), 1.0, f)


def _step_events(job: Job, rank: int, label: str, comm: npt.NDArray[np.bool_]) -> pd.DataFrame:
    """A rank's events inside its window ``label``: job id, name (without object
    addresses, which differ per process), occurrence, duration."""
    jg = job.full()
    w = next(w for w in jg.windows[rank] if w.label == label)
    t0, t1 = jg.nodes.time[w.start_node], jg.nodes.time[w.end_node]
    lo, hi = jg.base[rank], jg.base[rank] + job.analyses[rank].nodes.n
    ev = np.arange(lo, hi)
    ev = ev[(jg.nodes.ts[ev] >= t0) & (jg.nodes.end[ev] <= t1) & ~comm[ev]]
    ev = ev[np.argsort(jg.nodes.ts[ev], kind="stable")]
    frame = pd.DataFrame(
        {"event": ev, "name": normalize(jg.names[ev]), "dur": (jg.nodes.end - jg.nodes.ts)[ev]}
    )
    frame["k"] = frame.groupby("name").cumcount()
    return frame


def host_factors(job: Job, f: F64) -> F64:
    """Factors with the stalls other ranks' extra work caused re-scaled with that work.

    The charges of ``ctda/job/hostload.py`` (``docs/host-contention.md``): a stalled op of
    self time ``d`` lost ``c`` to an extra event on its host; re-timed, it takes
    ``(d - c) * f(op) + c * f(extra event)``, so shrinking the extra work gives its
    neighbours their cores back (the same rule the in-process contention model applies to
    threads). With every factor 1 nothing changes.
    """
    if job.host is None or job.host.slowed.empty:
        return f
    jg = job.full()
    s = job.host.slowed
    victim = s.event.to_numpy(dtype=np.int64) + s["rank"].map(jg.base).to_numpy(dtype=np.int64)
    cause = s.by_event.to_numpy(dtype=np.int64) + s.by.map(jg.base).to_numpy(dtype=np.int64)
    charged = s.charged_ns.to_numpy(dtype=np.float64)
    own = np.maximum(s.self_ns.to_numpy(dtype=np.float64), 1.0)
    shift = np.bincount(victim, weights=charged * (f[cause] - f[victim]) / own, minlength=len(f))
    return np.maximum(f + shift, 0.0)


def job_scenario(
    job: Job, specs: list[str] | None = None, median_straggler: bool = False, cpus: int = 0
) -> JobScenario:
    """Re-time the job graph: factors from ``specs`` (later ones win) and the straggler
    shorthand; with ``cpus``, every host's ranks share that many cores at the predicted times."""
    jg = job.full()
    f = np.ones(jg.nodes.n, dtype=np.float64)
    parts = []
    if median_straggler:
        m = median_straggler_factors(job)
        f = np.where(m != 1.0, m, f)
        parts.append("straggler as fast as the median rank")
    for spec in specs or []:
        s = rank_factors(job, spec)
        f = np.where(s != 1.0, s, f)
        parts.append(spec)
    if not parts:
        raise SelectionError("a job what-if needs --scale or the straggler shorthand")
    f = host_factors(job, f)
    g, cal = jg.model()
    w = scaled_weights(cal.weight, f, g.owner)
    cores = host_cores(job, cpus)
    notes = ["cores shared per host: not modelled (the traces record no core count; give --cpus)"]
    if cores is None:
        timing = replay(g, w, cal.binding, int(jg.nodes.time[jg.nodes.source]), jg.window_ends)
    else:
        _, timing = share_weights(job, cores, w)
        notes = [cores.describe()]
    return JobScenario(" + ".join(parts), f, timing, predicted_steps(job, timing), notes)


def predicted_steps(job: Job, timing: Timing) -> pd.DataFrame:
    """Per job step: base and predicted job step, both by the job's step definition
    (``ctda.job.steps``: collective end to collective end) at each timing, and the rank
    whose completion ended the step before and after."""
    jg = job.full()
    ends = collective_ends(job.matching, job.offsets, job.late)
    after = jpath.job_steps(jg, ends, timing).set_index("label")
    rows = []
    s: Any
    for s in job.steps.itertuples():
        p = after.loc[s.label]
        rows.append((s.label, int(s.job_step_ns), int(p.job_step_ns), int(s.end_rank), int(p.end_rank)))
    out = pd.DataFrame(
        rows, columns=["label", "base_ns", "predicted_ns", "ended_by_before", "ended_by_after"]
    )
    out["delta_ns"] = out.predicted_ns - out.base_ns
    return out
