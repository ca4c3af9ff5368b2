"""``ctda convert``: a trace as a ctda Parquet table, which reads back much faster."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import app, console, guarded, read


@app.command("convert")
def convert_cmd(
    source: Path = typer.Argument(..., help="Kineto trace (.json, .json.gz) or a ctda .parquet table."),
    target: Path = typer.Argument(..., help="Output file; must end in .parquet."),
) -> None:
    """Write the events table (with lanes, flows and metadata) to Parquet; any command reads it back."""
    n = guarded(lambda: api.convert(source, target, reader=read))
    size = target.stat().st_size
    console.print(
        f"{source} -> {target}: {n:,} events, {size / 1e6:,.1f} MB", highlight=False, soft_wrap=True
    )
