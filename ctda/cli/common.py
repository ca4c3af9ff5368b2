"""Shared CLI plumbing: the typer app, one-line errors, progress bars."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ctda import options
from ctda.cli import coercion, helpfmt
from ctda.errors import CtdaError
from ctda.render.output import Format, visible

if TYPE_CHECKING:
    from ctda.ingest.table import EventTable


def _flags_show_no_type() -> None:
    """Help lists a flag (``--force``) without a type: newer typer labels every option with its
    type (``<bool>`` for a flag), which says nothing to someone who just passes the flag."""
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if option is None or shown is None or getattr(shown, "ctda_flags", False):
        return  # an older typer, which shows no type for a flag anyway

    def display_type_rich(self: typer.core.TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich.ctda_flags = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_flags_show_no_type()
coercion.install()
helpfmt.install()
app = typer.Typer(
    name="ctda",
    help="Critical path analysis for PyTorch profiler (Kineto) traces, across threads and GPU streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
# messages on stderr are never broken into lines: a terminal wraps them itself, and a log or a
# test that reads them sees each as the one line it is, whatever width the console guessed
err_console = Console(stderr=True, soft_wrap=True)

#: options shared by every command that analyses a trace (analyze, ingest); their choices
#: are the rule and mode registries' names (without importing the engine: see ctda.analysis.names)
CrossThreadOption = Annotated[
    str,
    typer.Option(
        "--cross-thread",
        help=f"Cross-thread rules: all, none, or a list of {','.join(options.CROSS_THREAD)}.",
    ),
]
ModeOption = Annotated[
    str,
    typer.Option(
        "--mode",
        help="Analysis mode: " + "; ".join(f"'{n}' ({s})" for n, s in options.MODE_SUMMARIES.items()) + ".",
    ),
]
WindowsOption = Annotated[
    str,
    typer.Option(
        "--windows",
        help="'steps' (each ProfilerStep#N), 'trace' (whole trace), or a regex over CPU event names.",
    ),
]
#: every command that reads or writes a store takes ``--db`` (resolved by the library, which
#: falls back to $CTDA_DB and then the default embedded store)
DB_HELP = "Store: a file path (embedded, the default) or bolt:// / neo4j:// URI. Default: $CTDA_DB."
DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP)]
#: every command that prints a table takes ``--format``
FormatOption = Annotated[
    Format,
    typer.Option(
        "--format",
        help="table (rich; full width when piped), md, json, or csv (raw values, full names).",
    ),
]

#: options more than one command declares, declared once here (each command gives the default)
StepOption = Annotated[str, typer.Option("--step", help="A ProfilerStep number, or 'all'.")]
#: ``--top`` of the commands that print ctda analyze's report
ReportTopOption = Annotated[
    int, typer.Option("--top", min=1, help="Rows in the hotspot and near-critical tables.")
]
ExecutorOption = Annotated[
    str | None,
    typer.Option(
        "--executor", help="Jobs: local (processes, default), serial, dask-local, or tcp://HOST:PORT."
    ),
]
ParamOption = Annotated[
    list[str] | None, typer.Option("--param", "-p", help="Query parameter k=v (repeatable).")
]
AllOption = Annotated[bool, typer.Option("--all", help="Also show unfinished ones (pending, being deleted).")]

#: files at least this large get a progress bar while they are read
PROGRESS_MIN_BYTES = 32 << 20
T = TypeVar("T")
P = ParamSpec("P")


def printable(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` escapes (names from a store or a
    trace can hold anything), and Rich markup escaped."""
    return escape(visible(text))


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line to stderr and exit: the contract for every user-facing error."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn: Callable[[], T]) -> T:
    """Run ``fn``; turn the library's user errors into one-line messages with exit code 2."""
    try:
        return fn()
    except CtdaError as exc:
        fail(str(exc))
    except MemoryError:
        fail("out of memory")
    except KeyboardInterrupt:
        fail("interrupted", 130)


def one_line_errors(command: Callable[P, T]) -> Callable[P, T]:
    """A command whose library errors end as one line and exit code 2 (:func:`guarded`), put
    under ``@app.command``; typer reads the options off the wrapped function's signature."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return guarded(lambda: command(*args, **kwargs))

    return run


def read(path: Path) -> EventTable:
    """A trace read with a progress bar on a terminal (the CLI's reader for :mod:`ctda.api`)."""
    from ctda import api

    with file_progress(path, "reading") as progress:
        return api.read(path, progress)


def parse_params(items: list[str]) -> dict[str, str]:
    """``--param k=v`` options as a dict of strings."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--param takes key=value, not {item!r}")
        out[key.strip()] = value
    return out


def _bar_size(path: Path) -> int:
    """The file's size when reading it deserves a progress bar, else 0: large enough, and
    stderr a terminal (or ``$CTDA_PROGRESS`` set)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size < PROGRESS_MIN_BYTES or (not sys.stderr.isatty() and not os.environ.get("CTDA_PROGRESS")):
        return 0
    return size


@contextmanager
def file_progress(path: Path, label: str) -> Iterator[Callable[[int], None] | None]:
    """A progress callback over the compressed bytes of ``path`` (None for small files)."""
    size = _bar_size(path)
    if not size:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

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


@contextmanager
def stream_progress(path: Path) -> Iterator[Callable[[Any], None] | None]:
    """A progress callback for a streamed analysis: one bar for the read, one for the steps."""
    size = _bar_size(path)
    if not size:
        yield None
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        reading = bar.add_task(f"reading {path.name}", total=size)
        steps = bar.add_task("analysing steps", total=None, start=False)

        def update(p: Any) -> None:
            if p.stage == "read":
                bar.update(reading, completed=p.done)
            else:
                bar.start_task(steps)
                bar.update(reading, completed=size)
                bar.update(steps, completed=p.done, total=p.total)

        yield update


@contextmanager
def write_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("storing"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} rows"))
    with Progress(*columns, TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task("store", total=1)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _version(value: bool) -> None:
    if value:
        from ctda import __version__, api

        typer.echo(f"ctda {__version__}")
        typer.echo(f"trace reader: {api.reader_in_use()}")
        typer.echo(f"compiled kernels: {api.kernels_in_use()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    max_trace_bytes: str = typer.Option(
        None,
        "--max-trace-bytes",
        help="Refuse a trace that decompresses to more than this (e.g. 20G). Default: "
        "$CTDA_MAX_TRACE_BYTES or 16G (1T with analyze --stream).",
    ),
) -> None:
    """Critical path analysis for PyTorch profiler (Kineto) traces, across threads and GPU streams."""
    if max_trace_bytes is not None:
        from ctda.ingest.limits import MAX_BYTES_ENV, parse_size

        try:
            parse_size(max_trace_bytes)
        except ValueError as exc:
            fail(f"--max-trace-bytes: {exc}")
        os.environ[MAX_BYTES_ENV] = max_trace_bytes  # read by every trace read of this command
