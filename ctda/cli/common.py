"""Shared CLI plumbing: the typer app, one-line errors, progress bars."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from ctda.ingest.errors import TraceError
from ctda.render.output import Format

app = typer.Typer(
    name="ctda",
    help="Critical path analysis for PyTorch profiler (Kineto) traces, across threads and GPU streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

#: options shared by every command that analyses a trace (analyze, ingest)
CrossThreadOption = Annotated[
    str,
    typer.Option(
        "--cross-thread",
        help="Cross-thread rules: all, none, or a list of fwdbwd,backward_join,gil,cuda_lock.",
    ),
]
WindowsOption = Annotated[
    str,
    typer.Option(
        "--windows",
        help="'steps' (each ProfilerStep#N), 'trace' (whole trace), or a regex over CPU event names.",
    ),
]
#: every command that prints a table takes ``--format``
FormatOption = Annotated[
    Format,
    typer.Option(
        "--format",
        help="table (rich; full width when piped), md, json, or csv (raw values, full names).",
    ),
]

#: files at least this large get a progress bar while they are read
PROGRESS_MIN_BYTES = 32 << 20
T = TypeVar("T")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line to stderr and exit: the contract for every user-facing error."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message is meant for the user (imported late: the CLI loads fast)."""
    from ctda.analysis.engine import OptionError
    from ctda.queries.loader import QueryError
    from ctda.store.base import StoreError
    from ctda.whatif.select import SelectionError

    return (TraceError, StoreError, QueryError, SelectionError, OptionError)


def guarded(fn: Callable[[], T]) -> T:
    """Run ``fn``; turn known input errors into one-line messages with exit code 2."""
    try:
        return fn()
    except _user_errors() as exc:
        fail(str(exc))
    except MemoryError:
        fail("out of memory")
    except KeyboardInterrupt:
        fail("interrupted", 130)


@contextmanager
def file_progress(path: Path, label: str) -> Iterator[Callable[[int], None] | None]:
    """A progress callback over the compressed bytes of ``path`` (None for small files)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size < PROGRESS_MIN_BYTES or (not sys.stderr.isatty() and not os.environ.get("CTDA_PROGRESS")):
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{label} {path.name}", total=size)
        yield lambda done: bar.update(task, completed=done)


def _version(value: bool) -> None:
    if value:
        from ctda import __version__

        typer.echo(f"ctda {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Critical path analysis for PyTorch profiler (Kineto) traces, across threads and GPU streams."""
