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
(:mod:`ctda.api_reports`); this module is the one door, importing them all (``__all__``).
Analysis options are typed keyword arguments (``windows``, ``cross_thread``, ``mode``,
``rule_options``, or ``options=`` an :class:`AnalysisOptions` holding them all).

The command-line interface is a layer over these functions: a command parses its
arguments, calls one of them and renders the result. Every problem with the input (a bad
option, an unreadable file, an unknown run, a query that does not bind) is raised as a
:class:`~ctda.errors.CtdaError` subclass whose message is one line.
"""

from __future__ import annotations

from ctda import api_ui, api_views
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
    named_queries,
    opportunities,
    optimisation_names,
    optimisation_opportunities,
    overrides,
    read,
    report,
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
    breakdown_kinds,
    hta_report,
    whatif_job,
)
from ctda.api_store import RunLike, Source, StoreSession, breakdowns, open_store
from ctda.api_ui import *  # noqa: F403  (what the UI asks of a store)
from ctda.api_views import *  # noqa: F403  (what the UI draws from an analysis)
from ctda.errors import CtdaError
from ctda.ingest.errors import TraceError
from ctda.ingest.merge import MergeSummary, merge_processes
from ctda.ingest.native import reader_name as reader_in_use
from ctda.ingest.summary import TraceSummary
from ctda.ingest.table import EventTable
from ctda.options import AnalysisOptions, OptionError, validate_options
from ctda.queries.limits import QueryLimits
from ctda.queries.loader import NamedQuery, QueryError
from ctda.store.base import QueryResult, RunInfo, StoreError
from ctda.store.config import Target
from ctda.store.ingest import Ingested, check_run_name
from ctda.store.runs import StoredRun
from ctda.whatif.indb import InDbResult
from ctda.whatif.scenario import Scenario
from ctda.whatif.select import Override, SelectionError
from ctda.whatif.selfcheck import SelfCheck, floor_check

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
    "breakdown_kinds",
    "breakdowns",
    "check_run_name",
    "compare",
    "convert",
    "export",
    "floor_check",
    "hta_report",
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
    "run_names",
    "summarize",
    "validate",
    "validate_options",
    "whatif",
    "whatif_job",
]
__all__ += [*api_ui.__all__, *api_views.__all__]
