"""Stage: the cross-step transplant self-check (how far to trust a what-if on this trace).

Steps of one trace differ naturally (a slow data-loading step, a GC pause, a late
collective). Step ``i`` is given the own time that the matching events of step ``j``
really had, re-timed with the model, and the predicted duration of step ``i`` is compared
with the observed duration of step ``j``. Over all step pairs this measures the model's
structure -- which waits shrink or grow when work changes -- on any multi-step trace,
with no second run. The naive guess "step j takes as long as step i" is the yardstick.

Matching: an event of step ``i`` matches the event of step ``j`` on the same lane (thread
or stream), with the same name and nesting depth (relative to the step's outermost event
on that lane), and the same occurrence index among
such events in its step (k-th ``aten::conv2d`` at depth 3 on the main thread). CPU events
belong to the step whose window contains their start; GPU work belongs to the step of the
call that launched it (work launched in one step often runs in the next).

A matched event's factor is ``own_j / own_i``, where ``own`` is its observed self time
(its self-time segments) minus the GIL waits the contention model found inside them:
what the model treats as the event's work, not its waits. Unrecorded time between two
matched events on a CPU thread, which the model holds as a fixed delay, takes step
``j``'s value too.
Events of step ``i`` with no partner in step ``j`` take no time (step ``j`` did not do
that work). Transplanting a step onto itself therefore changes no
weight and predicts exactly its own duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.ordering import lexsort
from ctda.analysis.propagate import Timing, replay_span
from ctda.analysis.windows import Window
from ctda.ingest.npx import factorize, run_positions
from ctda.whatif.scenario import replay_weights, reweigh

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: more steps than this give more pairs than a quick check needs; a spread subset is used
MAX_PAIRS = 72
#: pairs behind the one-line summary of ``analyze`` and ``ingest`` (a replay each), and
#: the analysed events above which fewer are used (a replay costs about 0.1 s per 1M)
SUMMARY_PAIRS = 12
SUMMARY_EVENTS = 1_000_000


@dataclass
class SelfCheck:
    """One row per (i, j) step pair: observed, predicted and naive durations, errors."""

    pairs: pd.DataFrame  # i, j, base_ns, observed_ns, predicted_ns, error, naive_error, matched
    n_steps: int

    def __len__(self) -> int:
        return len(self.pairs)

    def _stat(self, col: str, how: str) -> float:
        if not len(self.pairs):
            return float("nan")
        v = self.pairs[col].abs()
        return float(v.median() if how == "median" else v.max())

    @property
    def median_error(self) -> float:
        return self._stat("error", "median")

    @property
    def worst_error(self) -> float:
        return self._stat("error", "max")

    @property
    def naive_median(self) -> float:
        return self._stat("naive_error", "median")

    @property
    def naive_worst(self) -> float:
        return self._stat("naive_error", "max")

    @property
    def matched(self) -> float:
        """Median share of a step's events that found a partner in the other step."""
        return float(self.pairs.matched.median()) if len(self.pairs) else float("nan")

    def summary(self) -> dict[str, float | int]:
        return {
            "steps": self.n_steps,
            "pairs": len(self),
            "median_error": self.median_error,
            "worst_error": self.worst_error,
            "naive_median_error": self.naive_median,
            "naive_worst_error": self.naive_worst,
            "matched": self.matched,
        }

    def line(self) -> str:
        """The one-line summary shown by ``analyze`` and ``ingest``."""
        if not len(self):
            return "self-check: needs at least two steps"
        return (
            f"self-check: median {100 * self.median_error:.1f} % over {len(self)} step pairs "
            f"(naive {100 * self.naive_median:.1f} %), worst {100 * self.worst_error:.1f} %, "
            f"{100 * self.matched:.0f} % of events matched"
        )


def step_of_events(a: Analysis) -> tuple[I64, list[int]]:
    """Per analysed event, the index (into the returned step-window list) of its step, or -1."""
    n = a.nodes
    wins = [k for k, w in enumerate(a.windows) if w.step is not None]
    step = np.full(n.n, -1, dtype=np.int64)
    if len(wins) < 2:
        return step, wins
    t0 = np.array([n.time[a.windows[k].start_node] for k in wins], dtype=np.int64)
    t1 = np.array([n.time[a.windows[k].end_node] for k in wins], dtype=np.int64)
    order = np.argsort(t0, kind="stable")
    pos = np.searchsorted(t0[order], n.ts, side="right") - 1
    ok = (pos >= 0) & (n.ts < t1[order][np.maximum(pos, 0)])
    step = np.where(ok & ~n.is_gpu, order[np.maximum(pos, 0)], -1).astype(np.int64)
    # device work goes with the step of the call that launched it
    g = a.graph
    launch = np.flatnonzero(g.etype == EdgeType.LAUNCH)
    caller, work = g.src[launch] // 2, g.dst[launch] // 2
    keep = (caller < n.n) & (work < n.n)
    step[work[keep]] = step[caller[keep]]
    step = _drop_unaligned(a, step, len(wins))
    # (work whose launch is not in the trace belongs to no step: it was queued before
    # profiling started, and a step that inherits it has no counterpart in the others)
    return _drop_partial(step, wins)


def _drop_unaligned(a: Analysis, step: I64, k: int) -> I64:
    """Leave out CPU threads whose work does not follow the steps (a background producer
    whose iterations drift across step boundaries): their k-th event of one step is not
    the k-th of another, so their times are kept rather than transplanted."""
    n = a.nodes
    inside = (step >= 0) & ~n.is_gpu
    lanes = int(n.lane.max()) + 1 if n.n else 0
    count = np.zeros((lanes, k), dtype=np.int64)
    np.add.at(count, (n.lane[inside], step[inside]), 1)
    step_lanes = {int(n.lane[w.event]) for w in a.windows if w.step is not None and w.event >= 0}
    hi, lo = count.max(axis=1), count.min(axis=1)
    drift = (hi > 0) & (hi - lo > 0.05 * hi)
    drift[list(step_lanes)] = False
    return np.where(inside & drift[n.lane], -1, step)


def _drop_partial(step: I64, wins: list[int]) -> tuple[I64, list[int]]:
    """Leave out steps with less than a quarter of the median step's events (a step cut
    short by the end of profiling has no counterpart in the others)."""
    count = np.bincount(step[step >= 0], minlength=len(wins))
    full = count >= 0.25 * np.median(count)
    if full.all():
        return step, wins
    renum = np.where(full, np.cumsum(full) - 1, -1)
    return np.where(step >= 0, renum[np.maximum(step, 0)], -1), [w for w, f in zip(wins, full) if f]


def match_keys(a: Analysis, step: I64) -> I64:
    """Per event, a key equal for matching events of different steps (-1 outside steps).

    Two events' keys are equal when they share lane, relative depth and name, and the
    occurrence index among such events of their step (by start, ties in event order)."""
    n = a.nodes
    inside = np.flatnonzero(step >= 0)
    key = np.full(n.n, -1, dtype=np.int64)
    if len(inside) == 0:
        return key
    name = a.table.col("name")[n.uid].astype(np.int64)
    # the step annotations themselves match each other (their names carry the step number)
    name[[w.event for w in a.windows if w.step is not None and w.event >= 0]] = -1
    st = step[inside].astype(np.int64)
    lane = n.lane[inside].astype(np.int64)
    depth = n.depth[inside].astype(np.int64)
    name = name[inside] + 1
    # depth relative to the step's outermost event on the lane: in traces where the step
    # annotation opens inside the previous step's frames, absolute depths grow step by step
    _, step_lane = factorize(st * (int(lane.max()) + 1) + lane)
    low = np.full(int(step_lane.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(low, step_lane, depth)
    depth -= low[step_lane]
    _, group = factorize((lane * (int(depth.max()) + 1) + depth) * (int(name.max()) + 1) + name)
    # occurrence: the rank by start within (step, group), ties in event order
    order = lexsort((n.ts[inside], group, st))
    occ = np.empty(len(order), dtype=np.int64)
    occ[order] = run_positions((st * (int(group.max()) + 1) + group)[order])
    key[inside] = group * (int(occ.max()) + 1) + occ
    return key


def _own_time(a: Analysis, weights: bool) -> F64:
    """Per edge, its observed gap (or calibrated weight) minus the GIL waits found in it."""
    w = (a.calibration.weight if weights else a.calibration.gap).astype(np.float64)
    if len(a.contention):
        waited = np.bincount(a.contention.wait_edge, weights=a.contention.overlap, minlength=len(w))
        w = np.maximum(w - waited, 0.0)
    return w


def own_work(a: Analysis) -> F64:
    """Per event, its observed self time minus the GIL waits the contention model found in it.

    (Observed gaps, not calibrated weights: an event whose wait bound it, such as a
    blocking call, keeps a tiny weight, and a ratio of tiny weights means nothing.)
    """
    g = a.graph
    w = _own_time(a, weights=False)
    # a free's sync edge is its own too, but overlaps its duration: count the thread's edges
    owned = (g.owner >= 0) & (g.etype != EdgeType.SYNC)
    return np.bincount(g.owner[owned], weights=w[owned], minlength=a.nodes.n).astype(np.float64)


@dataclass
class Gaps:
    """Unrecorded time between matched events on a CPU thread (``thread_sequence`` edges).

    The model holds such a gap as the thread's own fixed delay, so a transplant gives step
    ``i`` the gap step ``j`` had between the same two events.
    """

    edge: I64
    step: I64
    key: I64  # equal for matching gaps of different steps
    own: F64

    @classmethod
    def of(cls, a: Analysis, key: I64, step: I64) -> Gaps:
        g = a.graph
        n = a.nodes.n
        e = np.flatnonzero(
            (g.etype == EdgeType.THREAD_SEQ) & (g.owner < 0) & (g.src < 2 * n) & (g.dst < 2 * n)
        )
        u, v = g.src[e] // 2, g.dst[e] // 2
        e = e[(key[u] >= 0) & (key[v] >= 0) & (step[u] == step[v])]
        u, v = g.src[e] // 2, g.dst[e] // 2
        m = 2 * (int(key.max()) + 1)
        ek = (2 * key[u] + g.src[e] % 2) * m + (2 * key[v] + g.dst[e] % 2)
        return cls(e, step[u], ek, _own_time(a, weights=True)[e])

    def deltas(self, i: int, j: int) -> tuple[I64, F64]:
        """Edges of step ``i`` and how much longer (ns) step ``j``'s matching gap was."""
        ei = np.flatnonzero(self.step == i)
        ej = np.flatnonzero(self.step == j)
        _, pi, pj = np.intersect1d(self.key[ei], self.key[ej], assume_unique=True, return_indices=True)
        return self.edge[ei[pi]], self.own[ej[pj]] - self.own[ei[pi]]


def _pairs(k: int, limit: int) -> list[tuple[int, int]]:
    every = [(i, j) for i in range(k) for j in range(k) if i != j]
    if len(every) <= limit:
        return every
    pick = np.unique(np.linspace(0, len(every) - 1, limit).round().astype(int))
    return [every[p] for p in pick]


def transplant_factors(a: Analysis, key: I64, step: I64, own: F64, i: int, j: int) -> tuple[F64, float]:
    """Factors that give step ``i``'s events step ``j``'s own times, and the share matched."""
    ev_i = np.flatnonzero(step == i)
    ev_j = np.flatnonzero(step == j)
    _, pi, pj = np.intersect1d(key[ev_i], key[ev_j], assume_unique=True, return_indices=True)
    mi, mj = ev_i[pi], ev_j[pj]
    f = np.ones(a.nodes.n, dtype=np.float64)
    # step i's events with no partner in step j: step j did not do that work
    f[ev_i] = 0.0
    f[mi] = 1.0
    has = own[mi] > 0
    f[mi[has]] = own[mj[has]] / own[mi[has]]
    share = 2 * len(mi) / max(len(ev_i) + len(ev_j), 1)
    return f, share


def _predict(a: Analysis, key: I64, step: I64, own: F64, gaps: Gaps, i: int, j: int) -> tuple[I64, float]:
    """Step ``i`` re-timed with step ``j``'s own times (and ``i - 1`` with ``j - 1``'s).

    A step's duration also depends on what the step before it left queued (GPU work
    launched in one step often runs into the next), so the preceding steps are
    transplanted as well when both exist: the check then compares like with like.
    Returns the edge weights to replay and the share of events matched.
    """
    f, share = transplant_factors(a, key, step, own, i, j)
    edges, delta = gaps.deltas(i, j)
    if i > 0 and j > 0 and i - 1 != j:
        f_prev, _ = transplant_factors(a, key, step, own, i - 1, j - 1)
        prev = step == i - 1
        f[prev] = f_prev[prev]
        e_prev, d_prev = gaps.deltas(i - 1, j - 1)
        edges, delta = np.concatenate([edges, e_prev]), np.concatenate([delta, d_prev])
    w = reweigh(a, f)
    if len(edges):
        w = w.copy()
        w[edges] = np.maximum(w[edges] + np.rint(delta).astype(np.int64), 0)
    return w, share


def _predicted_step(a: Analysis, w: I64, win: Window) -> int:
    """Step window ``win``'s duration under weights ``w`` (replaying only what can move it)."""
    time = replay_span(a.timing, w, np.array([win.start_node, win.end_node]))
    return int(time[win.end_node] - time[win.start_node])


def transplant(a: Analysis, i: int, j: int) -> tuple[int, int]:
    """(predicted duration of step ``i`` given step ``j``'s own times, observed duration of ``j``).

    ``i`` and ``j`` index the trace's step windows in order.
    """
    step, wins = step_of_events(a)
    key = match_keys(a, step)
    w, _ = _predict(a, key, step, own_work(a), Gaps.of(a, key, step), i, j)
    wj, t = a.windows[wins[j]], a.nodes.time
    return _predicted_step(a, w, a.windows[wins[i]]), int(t[wj.end_node] - t[wj.start_node])


def check(a: Analysis, max_pairs: int = MAX_PAIRS) -> SelfCheck:
    """Transplant every step's matched own times onto every other step and re-time."""
    step, wins = step_of_events(a)
    cols = ["i", "j", "base_ns", "observed_ns", "predicted_ns", "error", "naive_error", "matched"]
    if len(wins) < 2:
        return SelfCheck(pd.DataFrame(columns=cols), len(wins))
    key = match_keys(a, step)
    own = own_work(a)
    gaps = Gaps.of(a, key, step)
    t = a.nodes.time
    obs = np.array([t[a.windows[k].end_node] - t[a.windows[k].start_node] for k in wins], dtype=np.int64)
    rows = []
    for i, j in _pairs(len(wins), max_pairs):
        w, share = _predict(a, key, step, own, gaps, i, j)
        pred = _predicted_step(a, w, a.windows[wins[i]])
        rows.append(
            (
                a.windows[wins[i]].label,
                a.windows[wins[j]].label,
                int(obs[i]),
                int(obs[j]),
                pred,
                (pred - obs[j]) / obs[j] if obs[j] else 0.0,
                (obs[i] - obs[j]) / obs[j] if obs[j] else 0.0,
                share,
            )
        )
    return SelfCheck(pd.DataFrame(rows, columns=cols), len(wins))


def summary(a: Analysis) -> SelfCheck:
    """The quick check behind the one-line summary of ``analyze`` and ``ingest``."""
    scale = min(1.0, SUMMARY_EVENTS / max(a.nodes.n, 1))
    return check(a, max(2, int(SUMMARY_PAIRS * scale)))


#: stress scenarios the floor is checked under besides the transplants: (label, factor of
#: host events, factor of device work); a faster host is where a missing wait shows
STRESS = (
    ("host x1/3", 1 / 3, 1.0),
    ("host removed", 0.0, 1.0),
    ("device x3", 1.0, 3.0),
    ("device x1/3", 1.0, 1 / 3),
)


@dataclass
class FloorCheck:
    """The device-work floor (:mod:`ctda.whatif.invariant`) over many predictions of one trace."""

    predictions: int
    windows: int  # windows checked per prediction
    bound: int  # (prediction, window) checks where some device work had to fit
    violations: pd.DataFrame  # scenario, window, label, predicted_ns, floor_ns, short_ns

    @property
    def ok(self) -> bool:
        return len(self.violations) == 0

    def summary(self) -> dict[str, int | bool]:
        return {
            "predictions": self.predictions,
            "windows": self.windows,
            "bound": self.bound,
            "violations": len(self.violations),
            "ok": self.ok,
        }

    def line(self) -> str:
        """One line for ``ctda validate``."""
        head = f"device-work floor: {self.predictions} predictions x {self.windows} windows"
        if self.ok:
            return f"{head}: every window at least its queued device work ({self.bound} bound)"
        worst = self.violations.sort_values("short_ns").iloc[-1]
        return (
            f"{head}: {len(self.violations)} window(s) shorter than their queued device work, e.g. "
            f"{worst.label} under '{worst.scenario}': {worst.predicted_ns / 1e6:.3f} ms < "
            f"{worst.floor_ns / 1e6:.3f} ms (a wait the model misses)"
        )


def floor_check(a: Analysis, max_pairs: int = SUMMARY_PAIRS) -> FloorCheck:
    """Check the floor under the stress scenarios and up to ``max_pairs`` transplants."""
    from ctda.whatif.invariant import chains, device_floor, waits_of
    from ctda.whatif.scenario import retime

    waits, ch = waits_of(a), chains(a)
    host = ~a.nodes.is_gpu
    timings: list[tuple[str, Timing]] = []
    for label, f_host, f_dev in STRESS:
        timings.append((label, retime(a, np.where(host, f_host, f_dev))[1]))
    step, wins = step_of_events(a)
    if len(wins) >= 2:
        key, own = match_keys(a, step), own_work(a)
        gaps = Gaps.of(a, key, step)
        for i, j in _pairs(len(wins), max_pairs):
            w, _ = _predict(a, key, step, own, gaps, i, j)
            timings.append((f"step {i} as step {j}", replay_weights(a, w)))
    bad, bound = [], 0
    for label, tm in timings:
        fl = device_floor(a, tm.weight, tm, waits, ch)
        bound += int((fl.table.floor_ns > 0).sum())
        v = fl.violations.assign(scenario=label)
        if len(v):
            bad.append(v)
    cols = ["scenario", "window", "label", "predicted_ns", "floor_ns", "short_ns"]
    viol = pd.concat(bad)[cols] if bad else pd.DataFrame(columns=cols)
    return FloorCheck(len(timings), len(a.windows), bound, viol.reset_index(drop=True))
