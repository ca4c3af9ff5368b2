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

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from ctda.analysis import tables
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.analysis.launches import queue_series
from ctda.analysis.memory import memory_series
from ctda.analysis.tables import GAP_NAMES, Names, Windows, class_ns, lane_labels, rule_docs, window_table
from ctda.whatif import blind, optimisations
from ctda.whatif.compare import Comparison, Side, call_paths
from ctda.whatif.opportunities import by_optimisation
from ctda.whatif.opportunities import rank as opportunity_rank
from ctda.whatif.optimisations import OptimisationError
from ctda.whatif.scenario import Scenario, run
from ctda.whatif.select import MAX_FACTOR, Override, SelectionError, parse_scale

__all__ = [
    "CLASSES",
    "GAP_NAMES",
    "GROUP_KINDS",
    "Comparison",
    "Names",
    "OptimisationError",
    "Override",
    "SelectionError",
    "Side",
    "Windows",
    "blind_spots",
    "call_paths",
    "class_ns",
    "class_table",
    "difference_notes",
    "edge_type_name",
    "lane_labels",
    "launch_queue",
    "memory_series",
    "optimisation_specs",
    "retime",
    "rule_docs",
    "select_group",
    "step_pairs",
    "whatif_candidates",
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
    return optimisations.specs_for(a)


def blind_spots(sc: Scenario) -> list[str]:
    """One line per part of a scenario's change that the trace cannot show (none: [])."""
    return blind.notes(sc)


# --- a guided what-if: candidates, groups in the UI's words, two sides step by step ---------

#: how a what-if group picks its events: a bound-by class, a category (or event kind), a
#: hotspot (one display name, as the hotspot tables show it), or a name regex
GROUP_KINDS = ("class", "category", "hotspot", "name")
_SPEC = {"class": "class=", "category": "cat=", "name": "name~"}
_SAID = {"class": "bound by", "category": "in category", "hotspot": "named", "name": "named like"}


def select_group(a: Analysis, kind: str, value: str, factor: float) -> Override:
    """The events of one what-if group (``kind`` of :data:`GROUP_KINDS`) at ``factor``;
    :class:`SelectionError` in the words of a page, not of the command line ("No event
    named like 'x' in this run"). The override's label is the ``--scale`` spec it equals
    (``hotspot=NAME=F`` for a hotspot, which has none)."""
    if kind not in GROUP_KINDS:
        raise SelectionError(f"Unknown kind of group {kind!r}; choose from {', '.join(GROUP_KINDS)}.")
    if not 0.0 <= factor <= MAX_FACTOR:
        raise SelectionError(f"The factor must be a number from 0 to {MAX_FACTOR:g}, not {factor!r}.")
    if kind == "name":
        try:
            re.compile(value)
        except re.error as exc:
            raise SelectionError(f"'{value}' is not a valid name pattern: {exc}.") from None
    if kind == "hotspot":
        events = np.flatnonzero(tables.display_names(a) == value).astype(np.int64)
        label = f"hotspot={value}={factor:g}"
    else:
        label = f"{_SPEC[kind]}{value}={factor:g}"
        try:
            events = parse_scale(a, label).events
        except SelectionError:
            events = np.zeros(0, dtype=np.int64)
    if not len(events):
        raise SelectionError(f"No event {_SAID[kind]} '{value}' in this run.")
    return Override(label=label, events=events, factor=factor)


CANDIDATE_COLUMNS = ["kind", "target", "factor", "saving_ns", "saving_share", "removed_ns", "assumptions"]


def whatif_candidates(a: Analysis, top: int = 5, specs: Sequence[str] | None = None) -> pd.DataFrame:
    """What-ifs worth trying on ``a``, best first (``ctda opportunities``, one table): each
    of the ``top`` hotspots and each bound-by class on the path made 2x faster (``kind``
    hotspot or class, ``target`` its name, ``factor`` 0.5, ``removed_ns`` the saving if it
    were gone), and each named optimisation that applies (``kind`` optimisation, ``target``
    its spec for ``apply``, ``assumptions`` what it assumed). ``saving_ns``: the predicted
    saving of the summed window time, ``saving_share`` of it. ``specs``: the named
    optimisations to try (:func:`optimisation_specs`, when the caller has them), else all."""
    # the two rankings read ``a`` only, and their compiled passes release the GIL: side by
    # side they take about 0.6 of their sum on two cores (1M events: 2.4 -> 1.4 s)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ctda-rank") as pool:
        ranked = pool.submit(opportunity_rank, a, top)
        named = pool.submit(by_optimisation, a, None if specs is None else list(specs))
        groups, optimised = ranked.result(), named.result()
    rows: list[dict[str, Any]] = [
        {
            "kind": "hotspot" if r["group"] == "name" else "class",
            "target": r["name"],
            "factor": 0.5,
            "saving_ns": int(r["saving_2x_ns"]),
            "saving_share": float(r["saving_2x_share"]),
            "removed_ns": int(r["saving_removed_ns"]),
            "assumptions": [],
        }
        for r in groups.to_dict("records")
    ]
    rows += [
        {
            "kind": "optimisation",
            "target": r["name"],
            "factor": float("nan"),
            "saving_ns": int(r["saving_ns"]),
            "saving_share": float(r["saving_share"]),
            "removed_ns": -1,
            "assumptions": list(r["assumptions"]),
        }
        for r in optimised.to_dict("records")
    ]
    df = pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)
    return df.sort_values("saving_ns", ascending=False, kind="stable").reset_index(drop=True)


def step_pairs(a: Analysis, b: Analysis) -> pd.DataFrame:
    """Two results step by step: ``step`` (a's label), ``a_ns``, ``b_ns``, ``delta_ns``
    (b - a) and ``relative`` (of a). Steps are paired by label where both sides have the
    same labels (a run and its scenario, two runs of one script), else in order; the
    longer side's extra steps are left out."""
    wa, wb = window_table(a), window_table(b)
    if list(wa.window) != list(wb.window) and set(wa.window) == set(wb.window) and wa.window.is_unique:
        wb = wb.set_index("window").loc[list(wa.window)].reset_index()
    n = min(len(wa), len(wb))
    a_ns = wa.duration_ns.to_numpy()[:n].astype(np.int64)
    b_ns = wb.duration_ns.to_numpy()[:n].astype(np.int64)
    delta = b_ns - a_ns
    return pd.DataFrame(
        {
            "step": wa.window.to_numpy()[:n],
            "a_ns": a_ns,
            "b_ns": b_ns,
            "delta_ns": delta,
            "relative": np.where(a_ns > 0, delta / np.maximum(a_ns, 1), np.nan),
        }
    )


def difference_notes(cmp: Comparison, top: int = 3) -> list[str]:
    """Where two results differ most, one line each (b - a on the critical path): the
    ``top`` hotspots and the bound-by classes that moved, largest first."""
    out = []
    for title, df, key in (("hotspots", cmp.hotspots, "name"), ("bound by", cmp.by_class, "class")):
        moved = df[df.delta_ns != 0].head(top)
        if len(moved):
            parts = [f"{k} {d / 1e6:+,.3f} ms" for k, d in zip(moved[key], moved.delta_ns)]
            out.append(f"{title}: " + ", ".join(parts))
    return out
