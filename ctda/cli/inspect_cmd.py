"""``ctda inspect``: what a trace contains, one screen per trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer

from ctda.cli.common import FormatOption, app, file_progress, guarded
from ctda.ingest.reader import read_trace
from ctda.ingest.summary import TraceSummary, summarize
from ctda.render.inspect import summary_doc
from ctda.render.output import Document, Format, emit_each


@app.command("inspect")
def inspect_cmd(
    traces: list[Path] = typer.Argument(..., help="Kineto traces (.json, .json.gz) or ctda .parquet tables."),
    fmt: FormatOption = Format.table,
    top: int = typer.Option(3, "--top", min=1, help="Names listed per CPU thread and GPU stream."),
) -> None:
    """Events by category, threads, streams, steps, syncs, NCCL, rank and warnings of each trace."""

    def docs() -> Iterator[Document]:
        for path in traces:

            def run(path: Path = path) -> TraceSummary:
                with file_progress(path, "reading") as progress:
                    table = read_trace(path, progress)
                return summarize(table, top=top)

            yield summary_doc(guarded(run))

    # one screen per trace as each is read; json: a list of summaries, csv: one table
    emit_each(docs(), fmt)
