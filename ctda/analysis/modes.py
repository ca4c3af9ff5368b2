"""Analysis modes: which rules build the graph, and how its edges are weighed.

A mode is declared once here; the engine, option validation, the CLI's ``--mode`` and the
stored runs all read this registry, so a mode means the same in ``ctda analyze``,
``ctda ingest``, the Python API and the UI. Whatever the mode, the graph is replayed from
SOURCE with the mode's weights and each window's critical path is the chain of binding
edges back from its end (:mod:`ctda.analysis.propagate`, :mod:`ctda.analysis.attribution`).

* ``ctda``: structural rules plus the cross-thread rules the options select, weights
  calibrated so the replay reproduces every observed timestamp
  (:mod:`ctda.analysis.calibrate`); windows as the options say.
* ``hta``: HolisticTraceAnalysis' rules and fixed weights (:mod:`ctda.analysis.hta`); the
  replay is then HTA's longest path, so the window (the whole trace, as HTA's default) is
  HTA's critical path length. No cross-thread rules beyond HTA's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctda.analysis.calibrate import Calibration, calibrate
from ctda.analysis.graph import Graph
from ctda.analysis.names import MODE_SUMMARIES
from ctda.analysis.rules import registry
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import Family, RuleSpec
from ctda.analysis.sync_latency import edge_floors

Weigh = Callable[[RuleContext, Graph], Calibration]


class ModeError(ValueError):
    """An unknown analysis mode or a rule selection the mode cannot run."""


def _ctda_weights(ctx: RuleContext, g: Graph) -> Calibration:
    return calibrate(g, edge_floors(ctx, g))


def _hta_weights(ctx: RuleContext, g: Graph) -> Calibration:
    # imported on use: HTA's package (and the numba kernels it runs) is not ctda mode's
    from ctda.analysis import hta

    return hta.calibration(ctx, g)


@dataclass(frozen=True)
class Mode:
    """One analysis mode: the rule families it runs, in order, and how it weighs edges."""

    name: str
    summary: str
    families: tuple[Family, ...]
    weigh: Weigh
    #: window spec the mode always uses (None: the options' ``windows``)
    windows: str | None = None

    @property
    def selectable(self) -> tuple[str, ...]:
        """Cross-thread rules this mode lets the options switch on and off, in order."""
        return registry.names("cross_thread") if "cross_thread" in self.families else ()

    def cross_thread(self, selected: tuple[str, ...]) -> tuple[str, ...]:
        """The cross-thread rules that actually run for ``selected`` (none if the mode has none)."""
        unknown = [s for s in selected if s not in registry.names("cross_thread")]
        if unknown:
            raise ModeError(
                f"unknown cross-thread rule(s) {', '.join(unknown)}; "
                f"choose from {', '.join(registry.names('cross_thread'))}"
            )
        return tuple(selected) if self.selectable else ()

    def rules(self, cross_thread: tuple[str, ...]) -> tuple[RuleSpec, ...]:
        """The rules to run, in order: the mode's families, cross-thread ones as selected."""
        out: list[RuleSpec] = []
        chosen = self.cross_thread(cross_thread)
        by_name = {s.name: s for s in registry.specs("cross_thread")}
        for family in self.families:
            if family == "cross_thread":
                out += [by_name[n] for n in chosen]
            else:
                out += registry.specs(family)
        return tuple(out)


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(
            "ctda",
            MODE_SUMMARIES["ctda"],
            ("structural", "cross_thread"),
            _ctda_weights,
        ),
        Mode(
            "hta",
            MODE_SUMMARIES["hta"],
            ("hta",),
            _hta_weights,
            windows="trace",
        ),
    )
}


def get(name: str) -> Mode:
    """The mode called ``name`` (exact spelling), or a :class:`ModeError` naming the choices."""
    try:
        return MODES[name]
    except (KeyError, TypeError):
        raise ModeError(f"unknown mode {name!r}; choose from {', '.join(MODES)}") from None


def all_rules() -> tuple[RuleSpec, ...]:
    """Every rule some mode runs, each once, in declaration order."""
    wanted = {f for m in MODES.values() for f in m.families}
    return tuple(s for s in registry.specs() if s.family in wanted)


#: edges the graph builder adds itself, documented like rules
BUILT_IN_DOCS = {
    "release": "SOURCE -> a node no rule explains: it is released at its observed time.",
    "terminal": "A node nothing waits for -> SINK, so the path can end anywhere.",
}


def rule_docs() -> dict[str, str]:
    """Rule name (as in ``Graph.rule_names``) -> its documentation, for every mode's rules."""
    out = {s.name: s.doc for s in all_rules()}
    return {k: v for k, v in (out | BUILT_IN_DOCS).items() if v}
