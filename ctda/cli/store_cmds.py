"""Store commands: ``ingest``, ``runs``, ``rm``, ``report`` and ``query``.

``--db`` (or ``$CTDA_DB``) picks the store: a file path for the embedded store (default
under the user data directory) or a ``bolt://`` / ``neo4j://`` URI for a Neo4j server,
with credentials from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ctda import api
from ctda.analysis.report import Report
from ctda.cli.common import (
    CrossThreadOption,
    ModeOption,
    WindowsOption,
    app,
    console,
    err_console,
    guarded,
    parse_params,
    printable,
    read,
)
from ctda.render.analyze import render_json, render_markdown, render_table
from ctda.store.base import QueryResult, RunInfo
from ctda.whatif.selfcheck import summary as selfcheck

DB_HELP = "Store: a file path (embedded, the default) or bolt:// / neo4j:// URI. Default: $CTDA_DB."


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    md = "md"


class QueryFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class RunsFormat(str, Enum):
    table = "table"
    json = "json"


@contextmanager
def _write_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not enabled:
        yield None
        return
    columns = (TextColumn("storing"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} rows"))
    with Progress(*columns, TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task("store", total=1)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@app.command("ingest")
def ingest_cmd(
    traces: list[Path] = typer.Argument(..., help="Kineto traces (.json, .json.gz) or ctda .parquet tables."),
    run: str = typer.Option(
        None, "--run", help="Run name (default: the file name); a prefix with several traces."
    ),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    force: bool = typer.Option(
        False, "--force", help="Store again even if the same file and options are stored."
    ),
    cross_thread: CrossThreadOption = "all",
    windows: WindowsOption = "steps",
    mode: ModeOption = "ctda",
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot tables printed after storing."),
) -> None:
    """Analyse traces and store each as a run: events, dependency edges and critical paths."""

    def go() -> int:
        options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
        failed = 0
        with api.open_store(db, reader=read) as store:
            for path, name in zip(traces, api.run_names(traces, run)):

                def one(path: Path = path, name: str = name) -> None:
                    with _write_progress(sys.stderr.isatty()) as progress:
                        (done,) = store.ingest(path, name, force=force, progress=progress, options=options)
                    _print_ingested(store, path, done, top)

                try:
                    guarded(one)
                except typer.Exit as exc:  # one line is printed; the other traces are still tried
                    if exc.exit_code != 2:
                        raise
                    failed += 1
        return failed

    if guarded(go):
        raise typer.Exit(2)


def _print_ingested(store: api.StoreSession, path: Path, done: api.Ingested, top: int) -> None:
    run = done.run
    if not done.stored:
        err_console.print(
            f"{printable(str(path))}: already stored as run [bold]{printable(run.name)}[/] "
            "(same file and options); --force stores it again",
            highlight=False,
        )
        render_table(_shown(store.report(run.name, top=top)), console)
        return
    rate = done.rows / max(done.seconds, 1e-9)
    err_console.print(
        f"stored run [bold]{printable(run.name)}[/]: {run.events:,} events, {run.edges:,} edges "
        f"in {done.seconds:.1f} s ({rate:,.0f} rows/s) -> {printable(store.location)}",
        highlight=False,
    )
    assert done.analysis is not None
    render_table(api.report(done.analysis, top=top), console)
    console.print(selfcheck(done.analysis).line(), highlight=False)


@app.command("runs")
def runs_cmd(
    db: str = typer.Option(None, "--db", help=DB_HELP),
    all_: bool = typer.Option(False, "--all", help="Also show unfinished runs (pending, being deleted)."),
    fmt: RunsFormat = typer.Option(RunsFormat.table, "--format", help="'table' or 'json'."),
) -> None:
    """List the runs in the store."""

    def go() -> None:
        with api.open_store(db) as store:
            runs = store.runs(include_incomplete=all_)
            where = store.location
        if fmt is RunsFormat.json:
            typer.echo(json.dumps([_run_dict(r) for r in runs], indent=2))
            return
        if not runs:
            err_console.print(f"no runs in {printable(where)}", highlight=False)
            return
        t = Table(
            title=f"Runs in {printable(where)}", title_justify="left", show_edge=False, header_style="bold"
        )
        for col in (
            "name",
            "events",
            "edges",
            "steps",
            "CP ms",
            "ingested",
            "file",
            *(["status"] if all_ else []),
        ):
            t.add_column(col, justify="right" if col in ("events", "edges", "steps", "CP ms") else "left")
        for r in runs:
            cells = [
                printable(r.name),
                f"{r.events:,}",
                f"{r.edges:,}",
                str(r.steps),
                f"{r.cp_ns / 1e6:,.3f}",
                printable(r.ingested_at),
                printable(r.file),
            ]
            t.add_row(*cells, *([r.status] if all_ else []))
        console.print(t)

    guarded(go)


def _run_dict(r: RunInfo) -> dict[str, Any]:
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


@app.command("rm")
def rm_cmd(
    run: str = typer.Argument(..., help="Run name (see ctda runs)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Delete a run and everything stored for it."""

    def go() -> None:
        with api.open_store(db) as store:
            store.rm(run)
        err_console.print(f"deleted run [bold]{printable(run)}[/]", highlight=False)

    guarded(go)


@app.command("report")
def report_cmd(
    run: str = typer.Argument(..., help="Run name (see ctda runs)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    step: str = typer.Option("all", "--step", help="A ProfilerStep number, or 'all'."),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot and near-critical tables."),
    fmt: ReportFormat = typer.Option(ReportFormat.table, "--format", help="Output format."),
) -> None:
    """The report of a stored run, read back from the store (the tables of ctda analyze)."""

    def go() -> None:
        with api.open_store(db) as store:
            report = store.report(run, step=step, top=top)
        if fmt is ReportFormat.json:
            typer.echo(render_json(report))
        elif fmt is ReportFormat.md:
            typer.echo(render_markdown(_shown(report)))
        else:
            render_table(_shown(report), console)

    guarded(go)


def _shown(report: Report) -> Report:
    """``report`` with its trace path made printable (a stored path can hold anything)."""
    return dataclasses.replace(report, trace=printable(report.trace))


@app.command("query")
def query_cmd(
    query: str = typer.Argument(None, help="A named query (see --list) or Cypher text."),
    param: list[str] = typer.Option([], "--param", "-p", help="Query parameter k=v (repeatable)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    fmt: QueryFormat = typer.Option(QueryFormat.table, "--format", help="'table', 'csv' or 'json'."),
    write: bool = typer.Option(False, "--write", help="Allow a query that changes the store."),
    allow_files: bool = typer.Option(
        False,
        "--allow-files",
        help="With --write: send the text unchecked (file import/export, extensions, attach, settings).",
    ),
    list_: bool = typer.Option(False, "--list", help="List the named queries and their parameters."),
) -> None:
    """Run Cypher, or a named query from ctda/queries, against the store (read-only unless --write)."""

    def go() -> None:
        if list_ or not query:
            _list_queries()
            return
        with api.open_store(db) as store:
            result = store.query(query, parse_params(param), write=write, allow_files=allow_files)
        _print_result(result, fmt)

    guarded(go)


def _list_queries() -> None:
    t = Table(
        title="Named queries (ctda query NAME --param k=v)",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    t.add_column("name")
    t.add_column("parameters")
    t.add_column("what it answers", overflow="fold", max_width=70)
    for q in api.named_queries().values():
        ps = ", ".join(p.name if p.required else f"{p.name}={p.default}" for p in q.params)
        t.add_row(q.name, ps, q.description)
    console.print(t)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return "" if v is None else str(v)


def _print_result(result: QueryResult, fmt: QueryFormat) -> None:
    if fmt is QueryFormat.json:
        typer.echo(json.dumps(result.records(), indent=2, default=str))
    elif fmt is QueryFormat.csv:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(result.columns)
        for row in result.rows:
            w.writerow([json.dumps(v, default=str) if isinstance(v, (dict, list)) else v for v in row])
        typer.echo(buf.getvalue(), nl=False)
    else:
        t = Table(show_edge=False, header_style="bold")
        for c in result.columns:
            t.add_column(c, overflow="fold", max_width=60)
        for row in result.rows:
            t.add_row(*[_cell(v) for v in row])
        console.print(t)
        err_console.print(f"{len(result.rows)} row(s)", style="dim")
