"""The analysis pipeline: table -> nodes -> edges -> graph -> weights -> replay -> charges.

analyze(table, options) = attribute(replay(weigh(build(rules(select(table))))))

The mode (:mod:`ctda.analysis.modes`) decides the rules and the weighing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis import attribution, graph, modes
from ctda.analysis.calibrate import Calibration
from ctda.analysis.classify import event_classes
from ctda.analysis.contention import Contention
from ctda.analysis.contention import estimate as estimate_contention
from ctda.analysis.edges import EdgeBatch
from ctda.analysis.graph import Graph
from ctda.analysis.nodes import Nodes, select
from ctda.analysis.propagate import Timing, replay
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.windows import Window, resolve
from ctda.ingest.table import EventTable

# options live (and are validated) in ctda.options; importable from here as before
from ctda.options import AnalysisOptions, OptionError, parse_cross_thread  # noqa: F401
from ctda.threads import beside

ALL_CROSS_THREAD = modes.get("ctda").selectable


@dataclass
class Analysis:
    """Everything computed for one trace; reports and stores read from here."""

    table: EventTable
    options: AnalysisOptions
    nodes: Nodes
    graph: Graph
    calibration: Calibration
    timing: Timing
    windows: list[Window]
    event_cls: npt.NDArray[np.int8]
    charges: pd.DataFrame  # per window: its critical path edges, clipped, with charges
    contention: Contention = field(default_factory=Contention.empty)

    def window_bounds(
        self, timing: Timing | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        tm = timing or self.timing
        starts = np.array([tm.time[w.start_node] for w in self.windows], dtype=np.int64)
        ends = np.array([tm.time[w.end_node] for w in self.windows], dtype=np.int64)
        return starts, ends


def window_ends(windows: list[Window]) -> npt.NDArray[np.int64]:
    return np.array([w.end_node for w in windows], dtype=np.int64)


def edge_batches(ctx: RuleContext, options: AnalysisOptions) -> list[EdgeBatch]:
    """Run the mode's rules in order (structural first, so deduplication keeps them)."""
    return [spec(ctx) for spec in _mode(options).rules(options.cross_thread)]


def _mode(options: AnalysisOptions) -> modes.Mode:
    try:
        return modes.get(options.mode)
    except modes.ModeError as exc:
        raise OptionError(str(exc)) from None


def effective(options: AnalysisOptions) -> AnalysisOptions:
    """``options`` as the mode runs them: its own windows, only the rules it uses.

    HTA mode, for one, always analyses the whole trace and runs no cross-thread rule of
    ctda's; recording that (rather than what was asked) keeps every report and stored
    run honest about what was computed.
    """
    mode = _mode(options)
    try:
        ct = mode.cross_thread(tuple(options.cross_thread))
    except modes.ModeError as exc:
        raise OptionError(str(exc)) from None
    return replace(options, windows=mode.windows or options.windows, cross_thread=ct)


def analyze(
    table: EventTable,
    options: AnalysisOptions | None = None,
    extra: Sequence[Callable[[RuleContext], EdgeBatch]] = (),
) -> Analysis:
    """Build, weigh and replay the dependency graph of ``table``; attribute the path.

    ``extra`` rules run after the mode's (a job adds its ranks' collective issue edges).
    """
    options = effective(options or AnalysisOptions())
    mode = _mode(options)
    nodes = select(table)
    ctx = RuleContext(table, nodes, options.rule_options)
    windows = resolve(table, nodes, options.windows)
    if not windows:
        raise OptionError(f"no analysis window matches {options.windows!r}")
    g = graph.build(nodes, [*edge_batches(ctx, options), *(rule(ctx) for rule in extra)])
    # the contention model reads the graph and the events only: it runs beside the path
    held = beside(contention, ctx, g, options)
    cal = mode.weigh(ctx, g)
    timing = replay(g, cal.weight, cal.binding, int(nodes.time[nodes.source]), window_ends(windows))
    cls = event_classes(ctx)
    charges = attribution.window_paths(g, timing, windows, cls)
    return Analysis(table, options, nodes, g, cal, timing, windows, cls, charges, held())


def contention(ctx: RuleContext, g: Graph, options: AnalysisOptions) -> Contention:
    """GIL contention inside events, estimated when the ``gil`` rule runs."""
    if "gil" in options.cross_thread and options.mode == "ctda":
        return estimate_contention(ctx, g)
    return Contention.empty()
