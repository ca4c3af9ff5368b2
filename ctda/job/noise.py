"""Stage (cross-rank): is a step's straggler real, or within the job's own noise?

Contract: ``job_noise(strag, late, offsets)`` -> :class:`Noise`; ``significance(strag,
noise)`` -> the straggler table with each step's *candidate* (the rank the lateness names)
kept, ``straggler`` set to it only when its lateness clearly exceeds the noise (else -1),
and the noise band and a one-line verdict per step.

Definitions (``docs/jobs.md#straggler-significance``):

- ``L[s, r]``: rank ``r``'s lateness in step ``s`` (arrival at the step's collectives minus
  their median arrival, summed; after host-contention charges, ``charged_by_rank``).
- **Jitter** ``sigma``: how far a rank's lateness moves from step to step by chance, pooled
  over the ranks: the residuals of ``L`` around each rank's own mean over the steps
  (``n - 1`` degrees of freedom per rank). A rank late by the same amount every step adds
  nothing to it. With fewer than ``MIN_STEPS`` steps, the residuals of each collective's
  lateness around the rank's mean, times the square root of the collectives per step.
- **Clock uncertainty** ``u[r]`` (``ClockOffsets.uncertainty``): how far rank ``r``'s clock
  offset may be wrong; it moves each of its arrivals, so a step's band grows by
  ``u[r]`` per collective of the step. Ranks sharing the reference rank's host: 0.
- The candidate ``c`` of step ``s`` is a straggler when its lateness is beyond the step's
  band, ``L[s, c] > K * sigma + clock`` (a one-step outlier), or when it is late throughout
  the job: its mean and its median lateness over the ``n`` steps beyond the band of a mean,
  ``K * sigma / sqrt(n) + clock`` (the median keeps one outlier step from making a rank late
  throughout), and ``L[s, c] > clock`` in this step (it arrived last, beyond what the clocks
  may move).
- A step where neither holds still names the rank late throughout the job when it did
  *extra work* in the step (work beyond what every other rank did, ``hostload``) beyond the
  band of a mean: on an oversubscribed host the scheduler can let such a rank arrive on time
  while its extra work took the cores its peers needed, and that work is what a fix removes.
  Otherwise the step is *balanced*: no straggler, within the job's spread (the step band).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: how many jitters a lateness must exceed to be "clearly" beyond the noise
K = 3.0
#: steps needed to measure the jitter step to step (else from collectives)
MIN_STEPS = 3


@dataclass
class Noise:
    """The job's noise: the jitter of a rank's lateness and what the clocks add."""

    sigma_ns: float
    n_steps: int
    how: str  # "steps" or "collectives"
    #: per (step label, rank): clock-offset uncertainty of the rank's step lateness
    clock_ns: dict[tuple[str, int], float]

    def step_band(self, label: str, rank: int) -> float:
        return K * self.sigma_ns + self.clock_ns.get((label, rank), 0.0)

    def mean_band(self, label: str, rank: int) -> float:
        return K * self.sigma_ns / math.sqrt(max(self.n_steps, 1)) + self.clock_ns.get((label, rank), 0.0)


def lateness_matrix(strag: pd.DataFrame) -> pd.DataFrame:
    """``L``: steps x ranks, the lateness after host-contention charges (ns; NaN where the
    rank met no collective of the step)."""
    rows = [dict(d) for d in strag.charged_by_rank] if len(strag) else []
    return pd.DataFrame(rows, index=strag.label.tolist()).astype(np.float64)


def jitter(matrix: pd.DataFrame) -> float:
    """Pooled spread of each column's values around its own mean (ns), over the values
    present (a rank absent from a collective adds nothing): ``count - 1`` degrees of freedom
    per column."""
    x = matrix.to_numpy(dtype=np.float64)
    ok = ~np.isnan(x)
    n = ok.sum(axis=0)
    mean = np.where(ok, x, 0.0).sum(axis=0) / np.maximum(n, 1)
    res = np.where(ok, x - mean, 0.0)
    dof = int(np.maximum(n - 1, 0).sum())
    return float(np.sqrt((res**2).sum() / dof)) if dof > 0 else 0.0


def job_noise(strag: pd.DataFrame, late: pd.DataFrame, uncertainty: dict[int, int]) -> Noise:
    """The job's noise from its steps' lateness (``late``: per collective part, for the
    fallback and the clock term) and the clock offsets' uncertainty."""
    matrix = lateness_matrix(strag)
    per_step = late.groupby("label").cid.nunique() if len(late) else pd.Series(dtype=int)
    if len(matrix) >= MIN_STEPS:
        sigma, how = jitter(matrix), "steps"
    else:
        per_coll = late.pivot_table(index="cid", columns="rank", values="late_ns", aggfunc="sum")
        m = float(per_step.mean()) if len(per_step) else 1.0
        sigma, how = jitter(per_coll.astype(np.float64)) * math.sqrt(max(m, 1.0)), "collectives"
    clock = {
        (str(label), int(r)): float(n) * float(u)
        for label, n in per_step.items()
        for r, u in uncertainty.items()
        if u > 0
    }
    return Noise(sigma, len(matrix), how, clock)


def significance(strag: pd.DataFrame, noise: Noise, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """The straggler table with ``candidate``, ``straggler`` (-1 unless significant),
    ``noise_ns`` (the candidate's step band), ``why`` and ``verdict`` per step.

    ``extra`` (``hostload``: per step and rank, ``extra_ns`` and its largest event
    ``top_name``/``top_ns``) lets a step name the rank late throughout the job by its extra
    work there; that step's candidate, lateness and top item become that rank's."""
    out = strag.copy()
    out["candidate"] = out.straggler.astype(int)
    matrix = lateness_matrix(strag)
    means = matrix.mean(axis=0) if len(matrix) else pd.Series(dtype=float)
    medians = matrix.median(axis=0) if len(matrix) else pd.Series(dtype=float)
    steady = pd.concat([means, medians], axis=1).min(axis=1)

    def throughout(label: str, r: int) -> bool:
        return r in steady.index and float(steady[r]) > noise.mean_band(label, r)

    work = _extra_of(extra)
    named, band, why, verdict = [], [], [], []
    for i, (label, c, late_ns) in enumerate(
        zip(out.label.tolist(), out.candidate.tolist(), out.late_ns.tolist())
    ):
        label = str(label)
        b = noise.step_band(label, c) if c >= 0 else K * noise.sigma_ns
        w = ""
        if c >= 0 and late_ns > b:
            w = "beyond the step's noise"
        elif c >= 0 and throughout(label, c) and late_ns > noise.clock_ns.get((label, c), 0.0):
            w = "late throughout the job"
        text = "no straggler: no rank arrived late"
        if c >= 0:
            text = f"balanced: no straggler (spread {_ms(b)} ms)"
        if w:
            text = f"r{c} {_ms(late_ns)} ms late (noise ±{_ms(b)} ms"
            if w == "late throughout the job":
                mb = noise.mean_band(label, c)
                text += f"; late throughout: mean {_ms(float(means[c]))} ms vs ±{_ms(mb)} ms"
            text += ")"
        else:
            hit = _steady_extra(label, work, throughout, noise)
            if hit is not None:
                c, x_ns, x_name, x_top = hit
                w = "extra work of a rank late throughout the job"
                charged = dict(out.at[i, "charged_by_rank"])
                late_ns = int(charged.get(c, 0))
                b = noise.step_band(label, c)
                out.at[i, "candidate"], out.at[i, "late_ns"] = c, late_ns
                out.at[i, "top_items"] = [(-1, x_name, x_top, "extra work")]
                text = _work_verdict(c, x_ns, x_name, float(means[c]), noise.mean_band(label, c), charged)
        named.append(c if w else -1)
        band.append(round(b))
        why.append(w)
        verdict.append(text)
    out["straggler"] = named
    out["noise_ns"] = band
    out["why"] = why
    out["verdict"] = verdict
    return out


ExtraWork = dict[str, list[tuple[int, int, str, int]]]


def _extra_of(extra: pd.DataFrame | None) -> ExtraWork:
    """Per step label: (rank, extra_ns, top_name, top_ns), the most extra work first."""
    out: ExtraWork = {}
    if extra is None or extra.empty:
        return out
    x = extra.sort_values("extra_ns", ascending=False, kind="stable")
    for label, r, ns, name, top in zip(x.label, x["rank"], x.extra_ns, x.top_name, x.top_ns):
        out.setdefault(str(label), []).append((int(r), int(ns), str(name), int(top)))
    return out


def _steady_extra(
    label: str, work: ExtraWork, throughout: Callable[[str, int], bool], noise: Noise
) -> tuple[int, int, str, int] | None:
    """The rank late throughout the job that did extra work in step ``label`` beyond the
    band of a mean (the most such work first), or None."""
    for r, ns, name, top in work.get(label, []):
        if throughout(label, r) and ns > noise.mean_band(label, r):
            return r, ns, name, top
    return None


def _work_verdict(
    r: int, x_ns: int, name: str, mean: float, mean_band: float, charged: dict[int, int]
) -> str:
    """The verdict of a step that names rank ``r`` by its extra work (``charged``: the
    step's lateness per rank after host charges; empty when no rank was late)."""
    here = (
        f"here it arrived {_ms(charged[r])} ms from the median"
        if r in charged
        else "no rank was late here once stalls were charged"
    )
    return (
        f"r{r} did {_ms(x_ns)} ms of extra work ({name}) and is late throughout the job"
        f" (mean {_ms(mean)} ms vs ±{_ms(mean_band)} ms); {here}"
    )


def _ms(ns: float) -> str:
    """ms with one decimal, three below 1 ms (a microsecond job's noise is not 0.0)."""
    return f"{ns / 1e6:.1f}" if abs(ns) >= 1e6 else f"{ns / 1e6:.3f}"
