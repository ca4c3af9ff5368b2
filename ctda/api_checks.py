"""Argument checks and small conversions :mod:`ctda.api` shares (kept apart so the API
module reads as the list of what ctda does)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ctda.options import AnalysisOptions, OptionError, RuleOptions, parse_step, validate_options

if TYPE_CHECKING:
    # the checks a stored run's listing or query uses load none of the engine (numpy,
    # pandas): the checks on analyses and scenarios import it when they run
    from ctda.analysis.engine import Analysis
    from ctda.ingest.table import EventTable
    from ctda.whatif import compare as cmp
    from ctda.whatif.scenario import Scenario

Reader = Callable[[Path], "EventTable"]


def read_with(path: Path, reader: Reader | None) -> EventTable:
    from ctda.ingest.reader import read_trace

    return reader(path) if reader is not None else read_trace(path)


def step(step: str | int) -> str:
    s = parse_step(step)
    return "all" if s is None else str(s)


def top(top: int) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise OptionError(f"top must be a positive integer, not {top!r}")


def strings(values: Sequence[str], what: str) -> list[str]:
    from ctda.whatif.select import SelectionError

    if isinstance(values, str):  # one selection given bare
        return [values]
    if not all(isinstance(v, str) for v in values):
        raise SelectionError(f"{what} takes strings, not {values!r}")
    return list(values)


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. Cypher text too long to be a file name
        return False


def label(x: Analysis | Scenario | cmp.Side, default: str) -> str:
    from ctda.whatif import compare as cmp
    from ctda.whatif.scenario import Scenario

    if isinstance(x, Scenario):
        return x.name
    if isinstance(x, cmp.Side):
        return x.label
    return str(x.table.meta.path or default)


def side(x: Analysis | Scenario | cmp.Side, label: str) -> cmp.Side:
    from ctda.whatif import compare as cmp
    from ctda.whatif.scenario import Scenario

    if isinstance(x, cmp.Side):
        return x
    if isinstance(x, Scenario):
        return cmp.Side(label, x.analysis, predicted=True, of=x.base)
    return cmp.Side(label, x)


def analysis_options(
    options: AnalysisOptions | None,
    windows: str | None,
    cross_thread: str | Sequence[str] | None,
    mode: str | None,
    rule_options: RuleOptions | Mapping[str, int] | None,
) -> AnalysisOptions:
    """The analysis options of a call: ``options`` (default :class:`AnalysisOptions`) with
    each field given (not None) in its place, checked (an :class:`OptionError`)."""
    given = {"windows": windows, "cross_thread": cross_thread, "mode": mode, "rule_options": rule_options}
    return validate_options(options, **{k: v for k, v in given.items() if v is not None})
