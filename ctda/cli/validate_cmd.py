"""``ctda validate``: how far to trust a what-if on this trace (the cross-step self-check)."""

from __future__ import annotations

import typer

from ctda import api
from ctda.cli.common import DbOption, FormatOption, app, one_line_errors, read
from ctda.render.output import Format, emit


@app.command("validate")
@one_line_errors
def validate_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file to analyse on the fly."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
    pairs: bool = typer.Option(False, "--pairs", help="Also list every step pair."),
) -> None:
    """Give each step the times another step's events really had; does the model predict that step?

    Also checks every such prediction, and a faster or slower host and device, against the
    device-work floor: no window may be shorter than the device work its blocking calls wait
    for. Exits 1 when a window is.
    """
    from ctda.render.validate import validate_doc

    with api.open_store(db, reader=read) as store:
        a = store.analysis(run_or_trace)
        sc = api.validate(a)
        floor = api.floor_check(a)
    emit(validate_doc(sc, run_or_trace, pairs, floor), fmt)
    if not floor.ok:
        raise typer.Exit(1)
