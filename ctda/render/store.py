"""Store listings as printable documents: the runs, a query's result, the named queries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctda.queries.loader import NamedQuery
from ctda.render.output import Col, Document, Section, Shown
from ctda.store.base import QueryResult, RunInfo

RUN_COLS = [
    Col("name", "name"),
    Col("events", "events", "int"),
    Col("edges", "edges", "int"),
    Col("steps", "steps", "int"),
    Col("cp_ns", "CP ms", "ms"),
    Col("ingested_at", "ingested"),
    Col("file", "file"),
]


def run_dict(r: RunInfo) -> dict[str, Any]:
    """A run's facts as JSON-ready data."""
    return {
        "name": r.name,
        "status": r.status,
        "file": r.file,
        "sha256": r.sha256,
        "ctda_version": r.ctda_version,
        "options": r.options,
        "ingested_at": r.ingested_at,
        "steps": r.steps,
        "step_ns": r.step_ns,
        "cp_ns": r.cp_ns,
        "events": r.events,
        "edges": r.edges,
    }


def runs_doc(runs: Sequence[RunInfo], where: str, with_status: bool) -> Document:
    """The runs of a store, one row each (with their status when unfinished ones are listed)."""
    cols = RUN_COLS + ([Col("status", "status")] if with_status else [])
    rows = [[r.name, r.events, r.edges, r.steps, r.cp_ns, r.ingested_at, r.file, r.status] for r in runs]
    section = Section("runs", f"Runs in {where}", cols, [row[: len(cols)] for row in rows])
    return Document(f"Runs in {where}", [section], data=[run_dict(r) for r in runs])


def query_doc(result: QueryResult) -> Document:
    """A query's rows under the columns it returned."""
    cols = [Col(c, c, "cell") for c in result.columns]
    return Document(
        "Query result", [Section("rows", "", cols, [list(r) for r in result.rows])], data=result.records()
    )


def queries_doc(queries: Iterable[NamedQuery]) -> Document:
    """The named queries: name, parameters (with defaults) and what each answers."""
    cols = [
        Col("name", "name"),
        Col("parameters", "parameters"),
        Col("description", "what it answers", "prose"),
    ]
    rows = []
    for q in queries:
        params = [{"name": p.name, "required": p.required, "default": p.default} for p in q.params]
        text = ", ".join(p.name if p.required else f"{p.name}={p.default}" for p in q.params)
        rows.append([q.name, Shown(params, text), q.description])
    title = "Named queries (ctda query NAME --param k=v)"
    return Document(title, [Section("queries", title, cols, rows)])
