"""Store listings as printable documents: the runs, a query's result, the named queries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ctda.render.output import Col, Document, Section, Shown

if TYPE_CHECKING:  # types only: the job model would load the engine's tables
    from ctda.queries.loader import NamedQuery
    from ctda.store.base import QueryResult, RunInfo
    from ctda.store.job_model import JobInfo

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
    """The runs of a store, one row each (with their status when unfinished ones are listed;
    with the job and rank of runs that belong to a job, when any does)."""
    jobbed = any("job" in r.extra for r in runs)
    cols = RUN_COLS + ([Col("status", "status")] if with_status else [])
    cols += [Col("job", "job"), Col("rank", "rank")] if jobbed else []
    rows = []
    for r in runs:
        row = [r.name, r.events, r.edges, r.steps, r.cp_ns, r.ingested_at, r.file]
        row += [r.status] if with_status else []
        row += [r.extra.get("job", ""), _rank(r.extra.get("rank"))] if jobbed else []
        rows.append(row)
    section = Section("runs", f"Runs in {where}", cols, rows)
    data = [
        run_dict(r) | ({"job": r.extra["job"], "rank": r.extra["rank"]} if "job" in r.extra else {})
        for r in runs
    ]
    return Document(f"Runs in {where}", [section], data=data)


def _rank(rank: object) -> str:
    return "" if rank is None else f"r{rank}"


JOB_COLS = [
    Col("name", "name"),
    Col("ranks", "ranks"),
    Col("missing", "missing"),
    Col("steps", "steps", "int"),
    Col("cp_ns", "job CP ms", "ms"),
    Col("ingested_at", "ingested"),
]


def jobs_doc(jobs: Sequence[JobInfo], where: str, with_status: bool) -> Document:
    """The jobs of a store, one row each: ranks present of the world, missing ranks, steps."""
    cols = JOB_COLS + ([Col("status", "status")] if with_status else [])
    rows = [
        [
            j.name,
            f"{len(j.ranks)} of {j.world_size}",
            ", ".join(map(str, j.missing)),
            j.steps,
            j.cp_ns,
            j.ingested_at,
            j.status,
        ][: len(cols)]
        for j in jobs
    ]
    data = [
        {
            "name": j.name,
            "status": j.status,
            "world_size": j.world_size,
            "ranks": j.ranks,
            "missing": j.missing,
            "steps": j.steps,
            "cp_ns": j.cp_ns,
            "ingested_at": j.ingested_at,
            "options": j.options,
            "sha256": j.sha256,
            "notes": j.notes,
        }
        for j in jobs
    ]
    return Document(f"Jobs in {where}", [Section("jobs", f"Jobs in {where}", cols, rows)], data=data)


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
