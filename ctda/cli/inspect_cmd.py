"""``ctda inspect``: what a trace contains, one screen per trace."""

from __future__ import annotations

import json
from enum import Enum
from functools import partial
from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import app, console, guarded, read
from ctda.ingest.summary import TraceSummary
from ctda.render.inspect import render_summary


class Format(str, Enum):
    table = "table"
    json = "json"


@app.command("inspect")
def inspect_cmd(
    traces: list[Path] = typer.Argument(..., help="Kineto traces (.json, .json.gz) or ctda .parquet tables."),
    fmt: Format = typer.Option(
        Format.table, "--format", help="'table' (one screen per trace) or 'json' (a list of summaries)."
    ),
    top: int = typer.Option(3, "--top", min=1, help="Names listed per CPU thread and GPU stream."),
) -> None:
    """Events by category, threads, streams, steps, syncs, NCCL, rank and warnings of each trace."""
    summaries: list[TraceSummary] = []
    for path in traces:
        summary = guarded(partial(api.summarize, path, top, reader=read))
        if fmt is Format.json:
            summaries.append(summary)
        else:
            render_summary(console, summary)
    if fmt is Format.json:
        typer.echo(json.dumps([s.to_dict() for s in summaries], indent=2))
