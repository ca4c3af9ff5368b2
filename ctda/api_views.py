"""What a client that draws an analysis (the UI) reads besides its report: the bound-by
classes, the name and window indexes, per-window tables, lane labels, the rules'
documentation, the launch queue and the allocator over time, and scenarios re-timed from
overrides already parsed. Re-exported by :mod:`ctda.api` (which it must not import).

    a = ctda.analyze("trace.json.gz")
    ctda.api.window_table(a)                    # one row per window: duration, bound-by
    ctda.api.class_table(a, [0])                # critical path per class, window 0
    ov = ctda.api.overrides(a, ["cat=kernel=0.5"])
    sc = ctda.api.retime(a, ov, name="half kernels", apply=["bf16"])

These read an :class:`~ctda.analysis.engine.Analysis` in memory; nothing here opens a store.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ctda.analysis import tables
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.launches import queue_series
from ctda.analysis.memory import memory_series
from ctda.analysis.tables import GAP_NAMES, Names, Windows, class_ns, lane_labels, rule_docs, window_table
from ctda.whatif import blind, optimisations
from ctda.whatif.compare import Comparison, Side
from ctda.whatif.optimisations import OptimisationError
from ctda.whatif.scenario import Scenario, run
from ctda.whatif.select import Override, SelectionError

__all__ = [
    "CLASSES",
    "GAP_NAMES",
    "Comparison",
    "Names",
    "OptimisationError",
    "Override",
    "SelectionError",
    "Side",
    "Windows",
    "blind_spots",
    "class_ns",
    "class_table",
    "edge_type_name",
    "lane_labels",
    "launch_queue",
    "memory_series",
    "optimisation_specs",
    "retime",
    "rule_docs",
    "window_table",
]


def class_table(a: Analysis, windows: Sequence[int] | None = None) -> pd.DataFrame:
    """Critical-path time per bound-by class over ``windows`` (None: all): ``class``,
    ``cp_ns``, ``share``, largest first (ties in :data:`CLASSES` order)."""
    return tables.by_class(tables.selected_charges(a, None if windows is None else list(windows)))


def edge_type_name(code: int) -> str:
    """An edge's type for people (``launch``, ``cross_thread``, ...); an unknown code as is."""
    try:
        return EdgeType(int(code)).name.lower()
    except ValueError:
        return str(code)


def launch_queue(a: Analysis) -> pd.DataFrame:
    """Each stream's launch queue over the trace (launched, not yet started): ``lane``,
    ``ts``, ``length``, one row per change."""
    return queue_series(a)


def retime(a: Analysis, overrides: Sequence[Override], *, name: str, apply: Sequence[str] = ()) -> Scenario:
    """:func:`ctda.api.whatif` from overrides already parsed (:func:`ctda.api.overrides`):
    ``a`` re-timed with them and the named optimisations ``apply`` on top."""
    return run(a, list(overrides), name=name, effects=optimisations.apply(a, apply))


def optimisation_specs(a: Analysis) -> list[str]:
    """The named optimisations that apply to ``a``, as ``apply`` specs (``NAME[:ARG]``)."""
    return [spec for o in optimisations.registry().values() for spec in o.specs_for(a)]


def blind_spots(sc: Scenario) -> list[str]:
    """One line per part of a scenario's change that the trace cannot show (none: [])."""
    return blind.notes(sc)
