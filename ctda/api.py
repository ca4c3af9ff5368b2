"""The public Python API: analyse a trace, store runs, query them, re-time them.

    import ctda

    a = ctda.analyze("trace.json.gz", cross_thread="none")   # options as in ctda analyze
    print(ctda.report(a, top=5).hotspots)
    with ctda.open_store("runs.lbug") as store:               # or bolt://..., or None
        store.ingest(["before.json.gz"], run="before")
        sc = store.whatif("before", scale=["cat=kernel=0.5"])
        diff = store.compare("before", "before@" + sc.name)

The functions live by area: one trace in memory (:mod:`ctda.api_analysis`), stored runs
(:mod:`ctda.api_store`, jobs in :mod:`ctda.api_jobs`), reports and jobs on files
(:mod:`ctda.api_reports`); this module is the one door to them all (``__all__``), importing
each name's module on its first use (listing or querying stored runs loads no numpy or pandas).
Analysis options are typed keyword arguments (``windows``, ``cross_thread``, ``mode``,
``rule_options``, or ``options=`` an :class:`AnalysisOptions` holding them all).

The command-line interface is a layer over these functions: a command parses its
arguments, calls one of them and renders the result. Every problem with the input (a bad
option, an unreadable file, an unknown run, a query that does not bind) is raised as a
:class:`~ctda.errors.CtdaError` subclass whose message is one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctda import lazy

if TYPE_CHECKING:
    from ctda.allocation import tune_memory, warm_heap_for
    from ctda.analysis.breakdowns import Breakdowns, JobBreakdowns
    from ctda.analysis.engine import Analysis
    from ctda.analysis.report import Report
    from ctda.analysis.rules.context import RuleOptions
    from ctda.api_analysis import (
        PathLike,
        Reader,
        analyze,
        compare,
        convert,
        export,
        opportunities,
        optimisation_names,
        optimisation_opportunities,
        overrides,
        read,
        report,
        report_and_check,
        run_names,
        summarize,
        validate,
        whatif,
    )
    from ctda.api_jobs import JobSession
    from ctda.api_reports import (
        BREAKDOWN_KINDS,
        HTA_VERSIONS,
        HtaReport,
        JobWhatif,
        analyze_job,
        analyze_stream,
        breakdown_kinds,
        hta_report,
        whatif_job,
    )
    from ctda.api_store import RunLike, Source, StoreSession, breakdowns, named_queries, open_store
    from ctda.api_ui import *  # noqa: F403  (what the UI asks of a store)
    from ctda.api_views import *  # noqa: F403  (what the UI draws from an analysis)
    from ctda.errors import CtdaError
    from ctda.ingest.errors import TraceError
    from ctda.ingest.merge import MergeSummary, merge_processes
    from ctda.ingest.native import reader_name as reader_in_use
    from ctda.ingest.summary import TraceSummary
    from ctda.ingest.table import EventTable
    from ctda.kernels import kernels_name as kernels_in_use
    from ctda.options import AnalysisOptions, OptionError, validate_options
    from ctda.queries.limits import QueryLimits
    from ctda.queries.loader import NamedQuery, QueryError
    from ctda.queries.worker import start_ahead as start_query_worker
    from ctda.store.base import QueryResult, RunInfo, StoreError
    from ctda.store.config import Target
    from ctda.store.ingest import Ingested, check_run_name
    from ctda.store.runs import StoredRun
    from ctda.whatif.indb import InDbResult
    from ctda.whatif.scenario import Scenario
    from ctda.whatif.select import Override, SelectionError
    from ctda.whatif.selfcheck import SelfCheck, floor_check

#: where each public name lives: :func:`__getattr__` imports that module on first use, so
#: ``ctda.api.open_store`` costs the store's session and not the engine (numpy, pandas,
#: numba), which loads with the first function that analyses or re-times
_WHERE = {
    **dict.fromkeys(("Breakdowns", "JobBreakdowns"), "ctda.analysis.breakdowns"),
    "Analysis": "ctda.analysis.engine",
    "Report": "ctda.analysis.report",
    "RuleOptions": "ctda.analysis.rule_options",
    **dict.fromkeys(
        (
            "PathLike",
            "Reader",
            "analyze",
            "compare",
            "convert",
            "export",
            "opportunities",
            "optimisation_names",
            "optimisation_opportunities",
            "overrides",
            "read",
            "report",
            "report_and_check",
            "run_names",
            "summarize",
            "validate",
            "whatif",
        ),
        "ctda.api_analysis",
    ),
    "JobSession": "ctda.api_jobs",
    **dict.fromkeys(
        (
            "BREAKDOWN_KINDS",
            "HTA_VERSIONS",
            "HtaReport",
            "JobWhatif",
            "analyze_job",
            "analyze_stream",
            "breakdown_kinds",
            "hta_report",
            "whatif_job",
        ),
        "ctda.api_reports",
    ),
    **dict.fromkeys(
        ("RunLike", "Source", "StoreSession", "breakdowns", "named_queries", "open_store"), "ctda.api_store"
    ),
    "CtdaError": "ctda.errors",
    **dict.fromkeys(("tune_memory", "warm_heap_for"), "ctda.allocation"),
    "TraceError": "ctda.ingest.errors",
    **dict.fromkeys(("MergeSummary", "merge_processes"), "ctda.ingest.merge"),
    "TraceSummary": "ctda.ingest.summary",
    "EventTable": "ctda.ingest.table",
    **dict.fromkeys(("AnalysisOptions", "OptionError", "validate_options"), "ctda.options"),
    "QueryLimits": "ctda.queries.limits",
    **dict.fromkeys(("NamedQuery", "QueryError"), "ctda.queries.loader"),
    **dict.fromkeys(("QueryResult", "RunInfo", "StoreError"), "ctda.store.base"),
    "Target": "ctda.store.config",
    **dict.fromkeys(("Ingested", "check_run_name"), "ctda.store.ingest"),
    "StoredRun": "ctda.store.runs",
    "InDbResult": "ctda.whatif.indb",
    "Scenario": "ctda.whatif.scenario",
    **dict.fromkeys(("Override", "SelectionError"), "ctda.whatif.select"),
    **dict.fromkeys(("SelfCheck", "floor_check"), "ctda.whatif.selfcheck"),
}
#: names bound under another name in their module
_RENAMED = {
    "reader_in_use": ("ctda.ingest.native", "reader_name"),
    "kernels_in_use": ("ctda.kernels", "kernels_name"),
    "start_query_worker": ("ctda.queries.worker", "start_ahead"),
}
#: what the UI asks of a store and draws from an analysis (their modules' ``__all__``,
#: listed here so that naming them loads neither; a test holds the lists equal)
UI_NAMES = (
    "GraphCycleError",
    "LoadedRun",
    "NamedQuery",
    "QueryError",
    "QueryParam",
    "QueryResult",
    "StoreError",
    "StoreFacts",
    "StoredRun",
    "TraceError",
    "guess_param",
    "load_run",
    "named_query_text",
    "run_class_shares",
    "store_facts",
    "store_stamp",
    "trace_reader",
    "whatif_stored_job",
)
VIEWS_NAMES = (
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
)
for _name in UI_NAMES:
    _WHERE.setdefault(_name, "ctda.api_ui")  # a name also imported above keeps its lighter home
for _name in VIEWS_NAMES:
    _WHERE.setdefault(_name, "ctda.api_views")

__all__ = [
    "BREAKDOWN_KINDS",
    "HTA_VERSIONS",
    "Analysis",
    "AnalysisOptions",
    "Breakdowns",
    "CtdaError",
    "EventTable",
    "HtaReport",
    "InDbResult",
    "Ingested",
    "JobBreakdowns",
    "JobSession",
    "JobWhatif",
    "MergeSummary",
    "NamedQuery",
    "OptionError",
    "Override",
    "PathLike",
    "QueryError",
    "QueryLimits",
    "QueryResult",
    "Reader",
    "Report",
    "RuleOptions",
    "RunInfo",
    "RunLike",
    "Scenario",
    "SelectionError",
    "SelfCheck",
    "Source",
    "StoreError",
    "StoreSession",
    "StoredRun",
    "Target",
    "TraceError",
    "TraceSummary",
    "analyze",
    "analyze_job",
    "analyze_stream",
    "breakdown_kinds",
    "breakdowns",
    "check_run_name",
    "compare",
    "convert",
    "export",
    "floor_check",
    "hta_report",
    "kernels_in_use",
    "merge_processes",
    "named_queries",
    "open_store",
    "opportunities",
    "optimisation_names",
    "optimisation_opportunities",
    "overrides",
    "read",
    "reader_in_use",
    "report",
    "report_and_check",
    "run_names",
    "start_query_worker",
    "summarize",
    "tune_memory",
    "validate",
    "validate_options",
    "warm_heap_for",
    "whatif",
    "whatif_job",
]
__all__ += [*UI_NAMES, *VIEWS_NAMES]


_lookup = lazy.exports(globals(), _WHERE, _RENAMED, {m: f"ctda.{m}" for m in ("api_ui", "api_views")})


def __getattr__(name: str) -> Any:
    """Import the module a public name lives in, on first use (then cache it here)."""
    return _lookup(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
