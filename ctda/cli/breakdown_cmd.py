"""``ctda breakdown``: HTA's everyday breakdowns of device time, tied to the critical path."""

from __future__ import annotations

import typer

from ctda import api, options
from ctda.cli.common import DbOption, FormatOption, app, one_line_errors, read
from ctda.render.output import Format, emit


@app.command("breakdown")
@one_line_errors
def breakdown_cmd(
    run_or_trace: str = typer.Argument(
        ..., help="A stored run name, a trace file to analyse on the fly, or a job's directory (every rank)."
    ),
    kind: str = typer.Option(
        "all", "--kind", help=f"Which breakdowns: all, or a list of {','.join(options.BREAKDOWN_KINDS)}."
    ),
    top: int = typer.Option(20, "--top", min=1, help="Rows of the kernel list."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Where device time goes (compute, communication, memory, idle), why streams sit idle,
    and which kernels cost most, each with the part on the critical path."""
    from ctda.render.breakdown import breakdown_doc

    kinds = api.breakdown_kinds(kind)
    emit(breakdown_doc(api.breakdowns(run_or_trace, db=db, reader=read), run_or_trace, kinds, top), fmt)
