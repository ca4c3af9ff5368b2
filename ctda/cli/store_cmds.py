"""Store commands: ``ingest``, ``runs``, ``rm``, ``report`` and ``query``.

``--db`` (or ``$CTDA_DB``) picks the store: a file path for the embedded store (default
under the user data directory) or a ``bolt://`` / ``neo4j://`` URI for a Neo4j server,
with credentials from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ctda.analysis.engine import AnalysisOptions, OptionError, parse_cross_thread
from ctda.analysis.report import build as build_report
from ctda.cli.common import (
    CrossThreadOption,
    FormatOption,
    WindowsOption,
    app,
    err_console,
    fail,
    file_progress,
    guarded,
)
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable
from ctda.queries import loader
from ctda.queries.loader import QueryError
from ctda.render.analyze import report_doc
from ctda.render.output import Document, Format, emit, emit_each
from ctda.render.store import queries_doc, query_doc, runs_doc
from ctda.store import StoreError, open_store, resolve
from ctda.store.config import Target

T = TypeVar("T")

DB_HELP = "Store: a file path (embedded, the default) or bolt:// / neo4j:// URI. Default: $CTDA_DB."


def _store_guard(fn: Callable[[], T]) -> T:
    """Trace errors (via ``guarded``) and store/query errors become one-line exits."""

    def inner() -> T:
        try:
            return fn()
        except (StoreError, QueryError, OptionError) as exc:
            fail(str(exc))

    return guarded(inner)


def _target(db: str | None) -> Target:
    return resolve(db)


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
    mode: str = typer.Option(
        "ctda", "--mode", help="'ctda', or 'hta' for HolisticTraceAnalysis's rules and weights."
    ),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot tables printed after storing."),
    fmt: FormatOption = Format.table,
) -> None:
    """Analyse traces and store each as a run: events, dependency edges and critical paths."""
    from ctda.store.ingest import default_name, ingest

    if mode not in ("ctda", "hta"):
        fail(f"--mode must be 'ctda' or 'hta', not {mode!r}")
    try:
        options = AnalysisOptions(windows=windows, cross_thread=parse_cross_thread(cross_thread), mode=mode)
    except OptionError as exc:
        fail(str(exc))
    target = _target(db)

    def read(p: Path) -> EventTable:
        with file_progress(p, "reading") as progress:
            return read_trace(p, progress)

    def one(path: Path, name: str | None) -> Document:
        with _write_progress(sys.stderr.isatty()) as progress:
            done = ingest(path, target, options, name=name, force=force, read=read, progress=progress)
        if not done.stored:
            err_console.print(
                f"{path}: already stored as run [bold]{done.run.name}[/] (same file and options); "
                "--force stores it again",
                highlight=False,
            )
            return _stored_report(target, done.run.name, "all", top)
        rate = done.rows / max(done.seconds, 1e-9)
        err_console.print(
            f"stored run [bold]{done.run.name}[/]: {done.run.events:,} events, {done.run.edges:,} edges "
            f"in {done.seconds:.1f} s ({rate:,.0f} rows/s) -> {target.location}",
            highlight=False,
        )
        assert done.analysis is not None
        return report_doc(build_report(done.analysis, top=top))

    def docs() -> Iterator[Document]:
        for path in traces:
            name = run if run and len(traces) == 1 else (f"{run}/{default_name(path)}" if run else None)
            yield _store_guard(partial(one, path, name))

    # each report as its run is stored; json: a list of reports, csv: one table
    emit_each(docs(), fmt)


@app.command("runs")
def runs_cmd(
    db: str = typer.Option(None, "--db", help=DB_HELP),
    all_: bool = typer.Option(False, "--all", help="Also show unfinished runs (pending, being deleted)."),
    fmt: FormatOption = Format.table,
) -> None:
    """List the runs in the store."""

    def go() -> None:
        with open_store(_target(db), read_only=True) as store:
            runs = store.runs(include_incomplete=all_)
            where = store.location
        if not runs and fmt is Format.table:
            err_console.print(f"no runs in {where}", highlight=False)
            return
        emit(runs_doc(runs, where, with_status=all_), fmt)

    _store_guard(go)


@app.command("rm")
def rm_cmd(
    run: str = typer.Argument(..., help="Run name (see ctda runs)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Delete a run and everything stored for it."""

    def go() -> None:
        target = _target(db)
        with open_store(target, read_only=True) as store:
            if not [r for r in store.runs(include_incomplete=True) if r.name == run]:
                fail(f"no run {run!r} in {store.location}")
        with open_store(target) as store:
            store.delete_run(run)
        err_console.print(f"deleted run [bold]{run}[/]", highlight=False)

    _store_guard(go)


def _stored_report(target: Target, run: str, step: str, top: int) -> Document:
    from ctda.store.report import build

    with open_store(target, read_only=True) as store:
        return report_doc(build(store, run, step=step, top=top))


@app.command("report")
def report_cmd(
    run: str = typer.Argument(..., help="Run name (see ctda runs)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    step: str = typer.Option("all", "--step", help="A ProfilerStep number, or 'all'."),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot and near-critical tables."),
    fmt: FormatOption = Format.table,
) -> None:
    """The report of a stored run, read back from the store (the tables of ctda analyze)."""
    emit(_store_guard(lambda: _stored_report(_target(db), run, step, top)), fmt)


@app.command("query")
def query_cmd(
    query: str = typer.Argument(None, help="A named query (see --list) or Cypher text."),
    param: list[str] = typer.Option([], "--param", "-p", help="Query parameter k=v (repeatable)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    fmt: FormatOption = Format.table,
    write: bool = typer.Option(False, "--write", help="Allow a query that changes the store."),
    list_: bool = typer.Option(False, "--list", help="List the named queries and their parameters."),
) -> None:
    """Run Cypher, or a named query from ctda/queries, against the store (read-only unless --write)."""

    def go() -> None:
        if list_ or not query:
            emit(queries_doc(loader.load_all().values()), fmt)
            return
        raw = _params(param)
        if loader.looks_named(query):
            named = loader.get(query)
            params = named.bind(raw)
            text = None
        else:
            named, text = None, query
            params = {k: loader.guess(v) for k, v in raw.items()}
            if loader.is_write(text) and not write:
                fail(
                    "this query may change the store (CREATE, MERGE, SET, DELETE, ...); "
                    "pass --write to run it"
                )
        with open_store(_target(db), read_only=not write) as store:
            body = named.text(store.dialect) if named is not None else text
            assert body is not None
            result = store.query(body, params, write=write)
        emit(query_doc(result), fmt)
        if fmt is Format.table:
            err_console.print(f"{len(result.rows)} row(s)", style="dim")

    _store_guard(go)


def _params(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise QueryError(f"--param takes key=value, not {item!r}")
        out[key.strip()] = value
    return out
