"""Store commands: ``ingest``, ``runs``, ``rm``, ``report`` and ``query``.

``--db`` (or ``$CTDA_DB``) picks the store: a file path for the embedded store (default
under the user data directory) or a ``bolt://`` / ``neo4j://`` URI for a Neo4j server,
with credentials from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import typer
from rich.text import Text

from ctda import api
from ctda.cli import job_store_cmds
from ctda.cli.common import (
    AllOption,
    CrossThreadOption,
    DbOption,
    ExecutorOption,
    FormatOption,
    ModeOption,
    ParamOption,
    ReportTopOption,
    StepOption,
    WindowsOption,
    app,
    err_console,
    fail,
    guarded,
    one_line_errors,
    parse_params,
    printable,
    read,
    write_progress,
)
from ctda.render.output import Document, Format, emit, emit_each


@app.command("ingest")
@one_line_errors
def ingest_cmd(
    traces: list[Path] = typer.Argument(
        ...,
        help="Kineto traces (.json, .json.gz) or ctda .parquet tables; a job: a directory of rank traces.",
    ),
    run: str = typer.Option(
        None, "--run", help="Run name (default: the file name); a prefix with several traces."
    ),
    job: str = typer.Option(
        None, "--job", help="Store the traces as one distributed job of this name (runs JOB/r<rank>)."
    ),
    executor: ExecutorOption = None,
    db: DbOption = None,
    force: bool = typer.Option(
        False, "--force", help="Store again even if the same file and options are stored."
    ),
    cross_thread: CrossThreadOption = "all",
    windows: WindowsOption = "steps",
    mode: ModeOption = "ctda",
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot tables printed after storing."),
    fmt: FormatOption = Format.table,
) -> None:
    """Analyse traces and store each as a run: events, dependency edges and critical paths.
    A directory (or --job) is a distributed job: a run per rank plus the job's tables."""
    if len(traces) == 1 and job is None:
        api.warm_heap_for(traces[0])  # on another core, while this one imports what follows
    from ctda.render.analyze import report_doc

    options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
    for name, option in ((run, "--run"), (job, "--job")):
        if name is not None:  # before any file is read
            api.check_run_name(name, option)
    if job_store_cmds.is_job_ingest(traces, job):
        if run is not None:
            fail("--run names a single trace's run; a job's runs are named after the job (--job NAME)")
        job_store_cmds.ingest_job_cmd(traces, job, db, options, force, executor, top, fmt)
        return
    failed = 0

    def one(store: api.StoreSession, path: Path, name: str) -> Document:
        api.check_run_name(name, file=None if run else path)
        with write_progress(sys.stderr.isatty()) as progress:
            (done,) = store.ingest(path, name, force=force, progress=progress, options=options)
        run_ = done.run
        if not done.stored:
            err_console.print(
                f"{printable(str(path))}: already stored as run [bold]{printable(run_.name)}[/] "
                "(same file and options); --force stores it again",
                highlight=False,
            )
            return report_doc(store.report(run_.name, top=top))
        rate = done.rows / max(done.seconds, 1e-9)
        err_console.print(
            f"stored run [bold]{printable(run_.name)}[/]: {run_.events:,} events, {run_.edges:,} edges "
            f"in {done.seconds:.1f} s ({rate:,.0f} rows/s) -> {printable(store.location)}",
            highlight=False,
        )
        assert done.analysis is not None
        rep, checked = api.report_and_check(done.analysis, top=top)
        doc = report_doc(rep)
        doc.blocks.append(Text(checked.line()))
        return doc

    def docs() -> Iterator[Document]:
        nonlocal failed
        with api.open_store(db, reader=read) as store:
            for path, name in zip(traces, api.run_names(traces, run)):
                try:
                    yield guarded(partial(one, store, path, name))
                except typer.Exit as exc:  # one line is printed; the other traces are still tried
                    if exc.exit_code != 2:
                        raise
                    failed += 1

    # each report as its run is stored; json: a list of reports, csv: one table
    emit_each(docs(), fmt)
    if failed:
        raise typer.Exit(2)


@app.command("runs")
@one_line_errors
def runs_cmd(
    db: DbOption = None,
    all_: AllOption = False,
    fmt: FormatOption = Format.table,
) -> None:
    """List the runs in the store."""
    from ctda.render.store import runs_doc

    with api.open_store(db) as store:
        runs = store.runs(include_incomplete=all_)
        where = store.location
    if not runs and fmt is Format.table:
        err_console.print(f"no runs in {printable(where)}", highlight=False)
        return
    emit(runs_doc(runs, where, with_status=all_), fmt)


@app.command("rm")
@one_line_errors
def rm_cmd(
    run: str = typer.Argument(..., help="Run or job name (see ctda runs, ctda jobs)."),
    db: DbOption = None,
    job: bool = typer.Option(False, "--job", help="The name is a job's: delete it with its runs."),
) -> None:
    """Delete a run and everything stored for it, or a job with all its runs."""

    with api.open_store(db) as store:
        is_job = job or (
            not any(r.name == run for r in store.runs(include_incomplete=True))
            and any(j.name == run for j in store.jobs(include_incomplete=True))
        )
        if is_job:
            store.rm_job(run)
        else:
            store.rm(run)
    what = "job" if is_job else "run"
    err_console.print(f"deleted {what} [bold]{printable(run)}[/]", highlight=False)


@app.command("report")
@one_line_errors
def report_cmd(
    run: str = typer.Argument(..., help="Run name (see ctda runs)."),
    db: DbOption = None,
    step: StepOption = "all",
    top: ReportTopOption = 10,
    fmt: FormatOption = Format.table,
) -> None:
    """The report of a stored run, read back from the store (the tables of ctda analyze)."""
    from ctda.render.analyze import report_doc

    with api.open_store(db) as store:
        report = store.report(run, step=step, top=top)
    if fmt is not Format.json:  # a stored path can hold anything
        report = dataclasses.replace(report, trace=printable(report.trace))
    emit(report_doc(report), fmt)


@app.command("query")
@one_line_errors
def query_cmd(
    query: str = typer.Argument(None, help="A named query (see --list) or Cypher text."),
    param: ParamOption = None,
    db: DbOption = None,
    fmt: FormatOption = Format.table,
    write: bool = typer.Option(False, "--write", help="Allow a query that changes the store."),
    allow_files: bool = typer.Option(
        False,
        "--allow-files",
        help="With --write: send the text unchecked (file import/export, extensions, attach, settings).",
    ),
    list_: bool = typer.Option(False, "--list", help="List the named queries and their parameters."),
    timeout: float = typer.Option(
        None,
        "--timeout",
        help="Stop the query after this many seconds (default $CTDA_QUERY_TIMEOUT_S or 60).",
    ),
    max_rows: int = typer.Option(
        None, "--max-rows", help="Refuse a result of more rows (default $CTDA_QUERY_MAX_ROWS or 100000)."
    ),
) -> None:
    """Run Cypher, or a named query from ctda/queries, against the store (read-only unless --write).

    The query runs in a worker process with a timeout, a row cap and a memory cap
    ($CTDA_QUERY_MEMORY_MB); each one that trips is one line and exit code 2."""
    from ctda.render.store import queries_doc, query_doc

    if list_ or not query:
        emit(queries_doc(api.named_queries().values()), fmt)
        return
    limits = api.QueryLimits.from_env()
    if timeout is not None or max_rows is not None:
        limits = api.QueryLimits(
            timeout_s=limits.timeout_s if timeout is None else timeout,
            max_rows=limits.max_rows if max_rows is None else max_rows,
            memory_mb=limits.memory_mb,
        )
    with api.open_store(db) as store:
        result = store.query(
            query, parse_params(param or []), write=write, allow_files=allow_files, limits=limits
        )
    emit(query_doc(result), fmt)
    if fmt is Format.table:
        err_console.print(f"{len(result.rows)} row(s)", style="dim")
