"""Rank what fixes would buy: each top hotspot group made 2x faster, or removed, and each
named optimisation that applies to the trace (:mod:`ctda.whatif.optimisations`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.analysis.classify import CLASSES
from ctda.analysis.engine import Analysis
from ctda.analysis.report import build
from ctda.analysis.tables import display_names
from ctda.analysis.windows import step_annotations
from ctda.whatif import optimisations
from ctda.whatif.scenario import assumption_lines, changed_count, inclusive, retime, retimed, summed_steps

OPTIMISATION_COLUMNS = ["group", "name", "events", "saving_ns", "saving_share", "predicted_ns", "assumptions"]


def groups(a: Analysis, top: int) -> list[tuple[str, str, np.ndarray]]:
    """(kind, label, events) for the top hotspot names and every class on the path; not the
    step annotations (``ProfilerStep#*``, the windows' events: a step, not work in it)."""
    rep = build(a, top=top * 3)
    names = display_names(a)
    steps = step_annotations(a.table, a.nodes, a.windows)
    out: list[tuple[str, str, np.ndarray]] = []
    for name in [n for n in rep.hotspots.name if not str(n).startswith("(")]:
        ev = np.flatnonzero(names == name)
        if len(out) == top:
            break
        if not steps[ev].any():
            out.append(("name", str(name), ev))
    for cls in rep.by_class["class"]:
        ev = np.flatnonzero(a.event_cls == CLASSES.index(cls))
        if len(ev):
            out.append(("class", str(cls), ev))
    return out


def rank(a: Analysis, top: int = 10) -> pd.DataFrame:
    """Predicted saving of the summed window time for 2x faster and for removed groups."""
    base = summed_steps(a, a.timing)
    rows = []
    for kind, label, ev in groups(a, top):
        inside = inclusive(a, ev)  # once for both factors
        half = summed_steps(a, retime(a, np.where(inside, 0.5, 1.0))[1])
        gone = summed_steps(a, retime(a, np.where(inside, 0.0, 1.0))[1])
        rows.append(
            {
                "group": kind,
                "name": label,
                "events": len(ev),
                "saving_2x_ns": base - half,
                "saving_2x_share": (base - half) / max(base, 1),
                "saving_removed_ns": base - gone,
                "saving_removed_share": (base - gone) / max(base, 1),
            }
        )
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.sort_values(["saving_2x_ns", "saving_removed_ns"], ascending=False).reset_index(drop=True)


def by_optimisation(a: Analysis, specs: list[str] | None = None) -> pd.DataFrame:
    """Predicted saving of the summed window time for every named optimisation that applies
    to ``a`` (each one's candidate specs, e.g. ``cuda-graphs``, ``no-sync:log_loss``; or
    ``specs``, when the caller has them already), largest first, with what each assumed.
    One that turns out not to apply is left out."""
    base = summed_steps(a, a.timing)
    rows = []
    if specs is None:
        specs = optimisations.specs_for(a)
    for spec in specs:
        try:
            effects = optimisations.apply(a, [spec])
        except optimisations.OptimisationError:
            continue
        factors, _, timing = retimed(a, [], effects)
        total = summed_steps(a, timing)
        rows.append(
            {
                "group": "optimisation",
                "name": spec,
                "events": changed_count(factors, effects),
                "saving_ns": base - total,
                "saving_share": (base - total) / max(base, 1),
                "predicted_ns": total,
                "assumptions": assumption_lines(effects),
            }
        )
    df = pd.DataFrame(rows, columns=OPTIMISATION_COLUMNS)
    return df.sort_values("saving_ns", ascending=False).reset_index(drop=True)
