"""Stage: apply overrides to the calibrated weights, re-propagate, and compare with base.

A scenario scales the *inclusive* time of each selected event: its own time segments and
those of everything nested inside it on its thread. Launch, sync and ordering edges keep
their calibrated weights, so waits shrink when what they wait for gets faster. Named
optimisations (:mod:`ctda.whatif.optimisations`) add :class:`~ctda.whatif.effect.Effect`s:
more factors, and edge weights they set (a CUDA graph's launch gaps, a sync that no longer
waits).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis import attribution
from ctda.analysis.classify import inherit_down
from ctda.analysis.engine import Analysis, contention, window_ends
from ctda.analysis.propagate import Timing, replay
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.reader import TIME_LIMIT_NS
from ctda.kernels import kernel
from ctda.whatif.effect import Effect, apply_edges
from ctda.whatif.select import Override, SelectionError, dur_factor

I64 = npt.NDArray[np.int64]


@dataclass
class Scenario:
    """A base analysis, the overrides applied to it, and the re-timed result."""

    name: str
    base: Analysis
    overrides: list[Override]
    weight: I64
    timing: Timing
    analysis: Analysis  # the base with re-timed nodes and re-computed window paths
    factors: npt.NDArray[np.float64] = field(repr=False)
    effects: list[Effect] = field(default_factory=list)

    @property
    def applied(self) -> list[str]:
        """The named optimisations applied (their specs, as given)."""
        return [e.label for e in self.effects]

    @property
    def assumptions(self) -> list[str]:
        """What the applied optimisations assumed, one line each, prefixed by their name."""
        return assumption_lines(self.effects)

    def step_times(self) -> pd.DataFrame:
        """Per window: observed (base) and predicted duration, and the change."""
        b0, b1 = self.base.window_bounds()
        p0, p1 = self.analysis.window_bounds()
        return pd.DataFrame(
            {
                "window": [w.label for w in self.base.windows],
                "step": [w.step if w.step is not None else -1 for w in self.base.windows],
                "base_ns": b1 - b0,
                "predicted_ns": p1 - p0,
                "delta_ns": (p1 - p0) - (b1 - b0),
            }
        )

    def moved(self) -> tuple[I64, I64]:
        """Analysed events that joined / left the windows' critical paths."""
        before = _on_path(self.base)
        after = _on_path(self.analysis)
        return np.flatnonzero(after & ~before), np.flatnonzero(before & ~after)

    @property
    def n_changed(self) -> int:
        return changed_count(self.factors, self.effects)


def assumption_lines(effects: list[Effect]) -> list[str]:
    """What the effects' optimisations assumed, one line each, prefixed by their name."""
    return [f"{e.label}: {line}" for e in effects for line in e.assumptions]


def changed_count(factors: npt.NDArray[np.float64], effects: list[Effect]) -> int:
    """Events whose factor is not 1, plus the distinct edges the effects set."""
    edges = [e.edges for e in effects if len(e.edges)]
    if not edges:
        return int(np.sum(factors != 1.0))
    # distinct edge ids by a mask, not np.unique's sort (0.2 s a call at 1M events)
    ids = np.concatenate(edges)
    seen = np.zeros(int(ids.max()) + 1, dtype=bool)
    seen[ids] = True
    return int(np.sum(factors != 1.0)) + int(seen.sum())


def _on_path(a: Analysis) -> npt.NDArray[np.bool_]:
    on = np.zeros(a.nodes.n, dtype=bool)
    ev = a.charges.event.to_numpy()
    on[ev[ev >= 0]] = True
    return on


def with_cpus(a: Analysis, cpus: int) -> Analysis:
    """``a`` with its contention estimate redone for a host of ``cpus`` cores.

    Only the contention triples change (the calibrated graph and the replay do not), so
    the baseline stays exact. See docs/whatif-accuracy.md for what the core count adds.
    """
    opts = replace(a.options, rule_options=replace(a.options.rule_options, cpus=cpus))
    ctx = RuleContext(a.table, a.nodes, opts.rule_options)
    return replace(a, options=opts, contention=contention(ctx, a.graph, opts))


def inclusive(a: Analysis, events: I64) -> npt.NDArray[np.bool_]:
    """Selected events plus everything nested inside them on their threads."""
    mask = np.zeros(a.nodes.n, dtype=bool)
    mask[events] = True
    return inherit_down(mask, a.nodes.parent, a.nodes.depth)


def factors_for(a: Analysis, overrides: list[Override]) -> npt.NDArray[np.float64]:
    """Per-event factor; later overrides win over earlier ones on shared events."""
    f = np.ones(a.nodes.n, dtype=np.float64)
    dur: npt.NDArray[np.float64] | None = None
    for o in overrides:
        if o.factor is not None:
            f[inclusive(a, o.events)] = o.factor
        elif o.dur_ns is not None:
            if dur is None:
                dur = (a.nodes.end - a.nodes.ts).astype(np.float64)
            for ev, new in zip(o.events, o.dur_ns):
                f[inclusive(a, np.array([ev]))] = dur_factor(float(new), float(dur[ev]), o.label)
    return f


def run(
    a: Analysis, overrides: list[Override], name: str = "what-if", effects: list[Effect] | None = None
) -> Scenario:
    """Re-time ``a`` under ``overrides`` and the optimisations' ``effects``: one compiled
    forward and backward pass. Factors compose by product; effects set edge weights last."""
    effects = list(effects or [])
    f, w, timing = retimed(a, overrides, effects)
    charges = attribution.window_paths(a.graph, timing, a.windows, a.event_cls)
    view = replace(a, timing=timing, charges=charges)
    return Scenario(
        name=name,
        base=a,
        overrides=overrides,
        weight=w,
        timing=timing,
        analysis=view,
        factors=f,
        effects=effects,
    )


def retimed(
    a: Analysis, overrides: list[Override], effects: list[Effect]
) -> tuple[npt.NDArray[np.float64], I64, Timing]:
    """A scenario's per-event factors, edge weights and replay, without its window paths:
    what a ranking of many scenarios needs (only their step times), at a fraction of
    :func:`run`'s cost."""
    f = factors_for(a, overrides)
    for e in effects:
        f = f * e.factor
    w = apply_edges(reweigh(a, f), effects)
    return f, w, replay_weights(a, w)


def summed_steps(a: Analysis, timing: Timing) -> int:
    """The summed duration of ``a``'s windows under ``timing``."""
    s, e = a.window_bounds(timing)
    return int((e - s).sum())


def retime(a: Analysis, factor: npt.NDArray[np.float64]) -> tuple[I64, Timing]:
    """Weights with each event's own time scaled by ``factor[event]``, and their replay.

    The one re-timing step every prediction goes through (scenarios, the self-check):
    contended waits scale with the work that caused them, everything else keeps its
    calibrated weight. All factors 1 reproduces the observed timeline exactly.
    """
    w = reweigh(a, factor)
    return w, replay_weights(a, w)


def reweigh(a: Analysis, factor: npt.NDArray[np.float64]) -> I64:
    """Edge weights with each event's own time scaled by ``factor[event]`` (no replay)."""
    g = a.graph
    waits = a.contention.wait_edge if len(a.contention) else None
    check_scaled(a.calibration.weight, factor, g.owner, waits)
    if len(a.contention):
        return a.contention.reweigh(a.calibration.weight, factor, g.owner)
    return _scaled(a.calibration.weight, factor, g.owner)  # type: ignore[no-any-return]


def check_scaled(weight: I64, factor: npt.NDArray[np.float64], owner: I64, waits: I64 | None = None) -> None:
    """Refuse factors under which a replay could leave int64 nanoseconds (it would wrap).

    A replayed time is the origin plus the weights along one path, so it stays within
    ``TIME_LIMIT_NS`` (2^62; the reader keeps the origin within it too) when the sum of all
    scaled weights does. ``waits``: contended waits, which scale with their holder's factor,
    bounded here by the largest factor. Factors are bounded (``MAX_FACTOR``), so only a
    run of extreme length meets this; then the error says so instead of a wrapped time.
    """
    top = float(factor.max(initial=1.0))
    if top <= 1.0 and len(weight):
        # no factor above 1 (NaN fails the test): every scaled weight and every wait is at
        # most its calibrated one, so twice their count times the largest bounds the total
        # (two reductions instead of a float copy and a gather of every edge)
        largest = max(abs(float(weight.min())), abs(float(weight.max())))
        if 2.0 * largest * len(weight) < TIME_LIMIT_NS:
            return
    if len(factor):
        # one pass, no float copies of every edge (0.09 s a check at 2M edges before)
        total = float(_scaled_total(weight, np.asarray(factor, dtype=np.float64), owner))
    else:
        total = float(np.abs(weight.astype(np.float64)).sum())
    if waits is not None and len(waits):
        total += float(np.abs(weight[waits].astype(np.float64)).sum()) * max(top, 1.0)
    if not total < TIME_LIMIT_NS:  # NaN too
        raise SelectionError(
            f"the scaled durations add up to {total / 1e9:.3g} s, past the time range ctda computes "
            "with (2^62 ns, about 146 years): use smaller factors"
        )


def replay_weights(a: Analysis, w: I64) -> Timing:
    """Replay ``a``'s graph under edge weights ``w``."""
    return replay(
        a.graph, w, a.calibration.binding, int(a.nodes.time[a.nodes.source]), window_ends(a.windows)
    )


@kernel
def _scaled(weight, factor, owner):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each edge's weight times its owner event's factor, rounded half to even; waits unchanged."""
    w = weight.copy()
    for e in range(w.shape[0]):
        o = owner[e]
        if o >= 0:
            w[e] = np.int64(np.rint(weight[e] * factor[o]))
    return w


@kernel
def _scaled_total(weight, factor, owner):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The sum over edges of |weight| times the owner event's factor (1 for waits)."""
    total = 0.0
    for e in range(weight.shape[0]):
        o = owner[e]
        total += abs(float(weight[e])) * (factor[o] if o >= 0 else 1.0)
    return total


def scaled_weights(weight: I64, factor: npt.NDArray[np.float64], owner: I64) -> I64:
    """Each edge's weight times its owner event's factor (waits and gaps unchanged); a
    :class:`SelectionError` where the result could leave int64 (:func:`check_scaled`)."""
    check_scaled(weight, factor, owner)
    return _scaled(weight, factor, owner)  # type: ignore[no-any-return]
