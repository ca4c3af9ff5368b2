"""The public functions on one trace, in memory: read, analyse, report, re-time, compare.

Part of :mod:`ctda.api` (import them from there); the functions on stored runs are in
:mod:`ctda.api_store`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ctda.analysis import engine
from ctda.analysis import report as analysis_report
from ctda.analysis.engine import Analysis
from ctda.analysis.report import Report
from ctda.analysis.rules.context import RuleOptions
from ctda.api_checks import analysis_options
from ctda.api_checks import label as _label
from ctda.api_checks import read_with as _read
from ctda.api_checks import side as _side
from ctda.api_checks import step as _step
from ctda.api_checks import strings as _strings
from ctda.api_checks import top as _top
from ctda.errors import CtdaError
from ctda.ingest.errors import TraceError
from ctda.ingest.memory import keeping_freed
from ctda.ingest.outfile import check_output
from ctda.ingest.reader import read_trace
from ctda.ingest.summary import TraceSummary
from ctda.ingest.summary import summarize as summarize_table
from ctda.ingest.table import EventTable
from ctda.options import AnalysisOptions, OptionError
from ctda.store.ingest import default_name
from ctda.threads import beside
from ctda.whatif import compare as cmp
from ctda.whatif import optimisations
from ctda.whatif.export import write_perfetto
from ctda.whatif.opportunities import by_optimisation, rank
from ctda.whatif.scenario import Scenario, with_cpus
from ctda.whatif.scenario import run as run_scenario
from ctda.whatif.select import Override, SelectionError, from_rows, parse_remove, parse_scale
from ctda.whatif.selfcheck import SelfCheck, check
from ctda.whatif.selfcheck import summary as quick_check

PathLike = str | Path
#: reads a trace file (the CLI passes one that draws a progress bar)
Reader = Callable[[Path], EventTable]


def read(path: PathLike, progress: Callable[[int], None] | None = None) -> EventTable:
    """The events table of a trace (``.json``, ``.json.gz``, or a ctda ``.parquet``)."""
    return read_trace(Path(path), progress)


def summarize(source: PathLike | EventTable, top: int = 3, *, reader: Reader | None = None) -> TraceSummary:
    """What a trace holds (``ctda inspect``): events by category, threads, streams, steps,
    syncs, NCCL, rank, warnings; ``top`` names per thread and stream."""
    _top(top)
    table = source if isinstance(source, EventTable) else _read(Path(source), reader)
    return summarize_table(table, top=top)


def convert(source: PathLike, target: PathLike, *, reader: Reader | None = None) -> int:
    """Write a trace's events table to ``target`` (``.parquet``), which every function
    reads back much faster than JSON; the number of events."""
    out = Path(target)
    if out.suffix != ".parquet":
        raise CtdaError(f"{out}: the output must end in .parquet")
    check_output(out, [source])  # never over the source, a device, a FIFO or a symlink
    table = _read(Path(source), reader)
    try:
        table.write_parquet(out)
    except OSError as exc:
        raise CtdaError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return len(table)


def analyze(
    source: PathLike | EventTable,
    *,
    options: AnalysisOptions | None = None,
    windows: str | None = None,
    cross_thread: str | Sequence[str] | None = None,
    mode: str | None = None,
    rule_options: RuleOptions | Mapping[str, int] | None = None,
    progress: Callable[[int], None] | None = None,
    reader: Reader | None = None,
) -> Analysis:
    """The critical path analysis of a trace file or an events table.

    Args:
        source: a trace (``.json``, ``.json.gz``, a ctda ``.parquet``) or its events table.
        options: all the analysis options at once; the fields below replace its own.
        windows: ``steps`` (each ``ProfilerStep#N``; the whole trace when there are none),
            ``trace``, or a regex over CPU event names.
        cross_thread: the cross-thread rules to run: ``all``, ``none``, a comma list or a
            sequence of rule names.
        mode: ``ctda`` (calibrated weights) or ``hta`` (HolisticTraceAnalysis' rules and
            weights), see :data:`ctda.analysis.modes.MODES`.
        rule_options: tunables of the timestamp-based rules (a
            :class:`~ctda.analysis.rules.context.RuleOptions` or a mapping of its fields).
        progress: called with the bytes read so far.
        reader: reads the trace file instead of :func:`read`.

    The options are checked (an :class:`OptionError`) before the trace is read. For a
    file, a problem that only the analysis finds (no window matches) is a
    :class:`TraceError` naming the file.
    """
    opts = analysis_options(options, windows, cross_thread, mode, rule_options)
    if isinstance(source, EventTable):
        return engine.analyze(source, opts)
    path = Path(source)
    with keeping_freed():  # the analysis reuses what the read frees (ctda.ingest.memory)
        table = reader(path) if reader is not None else read_trace(path, progress)
    try:
        return engine.analyze(table, opts)
    except ValueError as exc:  # OptionError, GraphCycleError: this input cannot be analysed
        raise TraceError(path, str(exc)) from None


def report(analysis: Analysis, step: str | int = "all", top: int = 10) -> Report:
    """The tables ``ctda analyze`` prints: per window, bound-by, hotspots, lanes, advice."""
    s = _step(step)
    _top(top)
    try:
        analysis_report.select_windows(analysis, s)
    except ValueError as exc:  # the step is not in this trace
        raise OptionError(str(exc)) from None
    return analysis_report.build(analysis, step=s, top=top)


def report_and_check(analysis: Analysis, step: str | int = "all", top: int = 10) -> tuple[Report, SelfCheck]:
    """:func:`report` and the quick :func:`validate` that ``ctda analyze`` prints under it,
    the self-check computed beside the report (a thread: they only read the analysis)."""
    checked = beside(quick_check, analysis)
    return report(analysis, step=step, top=top), checked()


def overrides(
    analysis: Analysis,
    scale: Sequence[str] = (),
    remove: Sequence[str] = (),
    *,
    rows: Iterable[Mapping[str, Any]] | None = None,
    rows_label: str = "query",
) -> list[Override]:
    """The event changes a what-if applies: events scaled (``name~REGEX=F``, ``cat=CAT=F``,
    ``class=CLASS=F``, ``thread=TID=F``), removed (name regex), or set by query rows
    (``uid`` with ``factor`` or ``dur`` in µs)."""
    ovs: list[Override] = [parse_scale(analysis, s) for s in _strings(scale, "scale")]
    ovs += [parse_remove(analysis, r) for r in _strings(remove, "remove")]
    if rows is not None:
        ovs += from_rows(analysis, rows, label=rows_label)
    if not ovs:
        raise SelectionError("nothing to change: give a scale, remove or cypher selection")
    return ovs


def whatif(
    analysis: Analysis,
    scale: Sequence[str] = (),
    remove: Sequence[str] = (),
    *,
    rows: Iterable[Mapping[str, Any]] | None = None,
    rows_label: str = "query",
    name: str | None = None,
    cpus: int = 0,
    apply: Sequence[str] = (),
) -> Scenario:
    """Re-time ``analysis`` under :func:`overrides` and the named optimisations ``apply``
    (``NAME`` or ``NAME:ARG``, see :func:`optimisation_names`); the name defaults to the
    selections. ``cpus``: the traced host's cores, for CPU contention the trace cannot
    measure. The scenario's ``assumptions`` say what each optimisation assumed."""
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 0:
        raise OptionError(f"cpus must be a non-negative integer, not {cpus!r}")
    if cpus:
        analysis = with_cpus(analysis, cpus)
    specs = _strings(apply, "apply")
    if specs and not (scale or remove or rows is not None):
        ovs: list[Override] = []
    else:
        ovs = overrides(analysis, scale, remove, rows=rows, rows_label=rows_label)
    effects = optimisations.apply(analysis, specs)
    label = "; ".join([*(o.label for o in ovs), *(e.label for e in effects)])
    return run_scenario(analysis, ovs, name=name or label, effects=effects)


def optimisation_names() -> dict[str, str]:
    """The named optimisations ``apply`` accepts: ``NAME`` (or ``NAME:ARG``) -> summary."""
    return {
        (f"{o.name}:{o.arg.split(' ')[0]}" if o.needs_arg else o.name): o.summary
        for o in optimisations.registry().values()
    }


def validate(analysis: Analysis, *, quick: bool = False) -> SelfCheck:
    """The cross-step self-check (``ctda validate``): each step re-timed with the durations
    another step's events really had, against that step's measured time. ``quick``: the
    few pairs behind the one-line summary ``ctda analyze`` prints."""
    return quick_check(analysis) if quick else check(analysis)


def export(source: Analysis | Scenario, out: PathLike, name: str | None = None) -> int:
    """Write the (re-timed) timeline with the critical path drawn, for Perfetto; the count
    of events written."""
    if isinstance(source, Scenario):
        return write_perfetto(source.analysis, Path(out), name=name or source.name)
    return write_perfetto(source, Path(out), name=name or "baseline")


def opportunities(analysis: Analysis, top: int = 10) -> pd.DataFrame:
    """What each of the ``top`` hotspot groups would buy at 2x faster, or removed."""
    _top(top)
    return rank(analysis, top)


def optimisation_opportunities(analysis: Analysis) -> pd.DataFrame:
    """What each named optimisation that applies to ``analysis`` would buy, ranked."""
    return by_optimisation(analysis)


def compare(
    a: Analysis | Scenario | cmp.Side,
    b: Analysis | Scenario | cmp.Side,
    labels: tuple[str, str] | None = None,
) -> cmp.Comparison:
    """Two results side by side; a scenario counts as a prediction (its error is shown
    against a measured side). Labels default to the trace files and scenario names."""
    la, lb = labels or (_label(a, "a"), _label(b, "b"))
    return cmp.compare(_side(a, la), _side(b, lb))


def run_names(paths: Sequence[PathLike], run: str | None = None) -> list[str]:
    """Run names for traces stored together: ``run`` for one trace, ``run/<file name>``
    for several, the file name (``rank0.pt.trace.json.gz`` -> ``rank0``) without ``run``."""
    files = [Path(p) for p in paths]
    if run and len(files) == 1:
        return [run]
    return [f"{run}/{default_name(p)}" if run else default_name(p) for p in files]
