"""``ctda inspect``: what a trace contains, one screen per trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import FormatOption, app, one_line_errors, read
from ctda.render.output import Document, Format, emit_each


@app.command("inspect")
@one_line_errors
def inspect_cmd(
    traces: list[Path] = typer.Argument(..., help="Kineto traces (.json, .json.gz) or ctda .parquet tables."),
    fmt: FormatOption = Format.table,
    top: int = typer.Option(3, "--top", min=1, help="Names listed per CPU thread and GPU stream."),
) -> None:
    """Events by category, threads, streams, steps, syncs, NCCL, rank and warnings of each trace."""
    from ctda.render.inspect import summary_doc

    def docs() -> Iterator[Document]:
        for path in traces:
            yield summary_doc(api.summarize(path, top, reader=read))

    # one screen per trace as each is read; json: a list of summaries, csv: one table
    emit_each(docs(), fmt)
