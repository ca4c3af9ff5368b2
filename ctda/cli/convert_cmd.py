"""``ctda convert``: a trace as a ctda Parquet table, which reads back much faster."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import app, console, one_line_errors, read


@app.command("convert")
@one_line_errors
def convert_cmd(
    source: Path = typer.Argument(..., help="Kineto trace (.json, .json.gz) or a ctda .parquet table."),
    target: Path = typer.Argument(..., help="Output file; must end in .parquet."),
) -> None:
    """Write the events table (with lanes, flows and metadata) to Parquet; any command reads it back."""
    n = api.convert(source, target, reader=read)
    size = target.stat().st_size
    console.print(
        f"{source} -> {target}: {n:,} events, {size / 1e6:,.1f} MB", highlight=False, soft_wrap=True
    )


@app.command("merge")
@one_line_errors
def merge_cmd(
    main: Path = typer.Argument(..., help="The training process's trace (the one with the steps)."),
    helpers: list[Path] = typer.Argument(
        ..., help="Traces of other processes of the same host and run (e.g. DataLoader workers)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Merged trace to write (.json or .json.gz)."),
) -> None:
    """One trace of a host's processes: the helpers' CPU work beside the training process, so
    the what-if counts the cores it takes (profile the workers, then merge)."""
    s = api.merge_processes(main, helpers, out)
    pids = ", ".join(str(p) for h in s.helper_pids.values() for p in sorted(h))
    console.print(
        f"{out}: {main} + {len(helpers)} helper trace(s), {s.helper_events:,} events of process(es) {pids}",
        highlight=False,
        soft_wrap=True,
    )
