"""``ctda convert``: a trace as a ctda Parquet table, which reads back much faster."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda.cli.common import app, console, fail, guarded, read


@app.command("convert")
def convert_cmd(
    source: Path = typer.Argument(..., help="Kineto trace (.json, .json.gz) or a ctda .parquet table."),
    target: Path = typer.Argument(..., help="Output file; must end in .parquet."),
) -> None:
    """Write the events table (with lanes, flows and metadata) to Parquet; any command reads it back."""
    if target.suffix != ".parquet":
        fail(f"{target}: the output must end in .parquet")

    def run() -> int:
        table = read(source)
        try:
            table.write_parquet(target)
        except OSError as exc:
            fail(f"{target}: cannot write ({exc.strerror or exc})")
        return len(table)

    n = guarded(run)
    size = target.stat().st_size
    console.print(
        f"{source} -> {target}: {n:,} events, {size / 1e6:,.1f} MB", highlight=False, soft_wrap=True
    )
