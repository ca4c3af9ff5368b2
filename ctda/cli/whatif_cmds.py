"""What-if commands: ``whatif``, ``opportunities``, ``export`` and ``compare``."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import (
    DbOption,
    FormatOption,
    ParamOption,
    app,
    console,
    err_console,
    fail,
    one_line_errors,
    parse_params,
    read,
)
from ctda.render.output import Format, emit
from ctda.whatif import blind


@app.command("whatif")
@one_line_errors
def whatif_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file to analyse on the fly."),
    scale: list[str] = typer.Option(
        [], "--scale", help="name~REGEX=F, cat=CATEGORY=F, class=CLASS=F or thread=TID=F."
    ),
    remove: list[str] = typer.Option(
        [], "--remove", help="Events whose name matches REGEX take no time (dependencies kept)."
    ),
    apply: list[str] = typer.Option(
        [],
        "--apply",
        help="A named optimisation derived from the trace, NAME or NAME:ARG (repeatable): "
        "cuda-graphs[:NAME|steps=A-B], bf16, fp16, no-sync:NAME, overlap:NAME. "
        "Its assumptions are printed with the answer.",
    ),
    cypher: str | None = typer.Option(
        None,
        "--cypher",
        help="Named query, .cypher file or text returning (uid, factor) or (uid, dur µs) rows "
        "($run is bound).",
    ),
    param: ParamOption = None,
    name: str | None = typer.Option(
        None, "--name", help="Scenario name (default: derived from the selection)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Do not store the scenario."),
    in_db: bool = typer.Option(
        False, "--in-db", help="Re-time inside the Neo4j store (ctda.replay procedure) instead of in Python."
    ),
    perfetto: Path | None = typer.Option(None, "--perfetto", help="Also export the predicted timeline here."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
    top: int = typer.Option(10, "--top", min=1, help="Rows in the predicted hotspot tables."),
    cpus: int = typer.Option(
        0, "--cpus", min=0, help="Cores of the traced host, for CPU contention the trace cannot measure."
    ),
) -> None:
    """Predict the step time if some events took a different time (before writing the fix)."""
    from ctda.render.indb import indb_doc
    from ctda.render.whatif import scenario_doc

    if in_db:
        if apply:
            fail("--in-db does not apply named optimisations; run ctda whatif --apply without --in-db")
        if perfetto:
            fail("--in-db does not export timelines; export the saved scenario: ctda export --scenario")
        with api.open_store(db, reader=read) as store:
            result = store.whatif_in_db(
                run_or_trace, scale, remove, cypher, parse_params(param or []), name, save=not dry_run
            )
        if result.contention_ignored:
            err_console.print(
                "note: this run has a GIL-contention model, which the database does not apply; "
                "ctda whatif without --in-db includes it",
                highlight=False,
            )
        emit(indb_doc(result, top), fmt)
        return
    with api.open_store(db, reader=read) as store:
        sc = store.whatif(
            run_or_trace,
            scale=scale,
            remove=remove,
            cypher=cypher,
            params=parse_params(param or []),
            name=name,
            save=not dry_run,
            cpus=cpus,
            apply=apply,
        )
    if perfetto:
        api.export(sc, perfetto)
    emit(scenario_doc(sc, top), fmt)
    for line in blind.notes(sc):  # on stderr: the output formats stay as they are
        err_console.print(f"note: {line}", highlight=False, soft_wrap=True)


@app.command("opportunities")
@one_line_errors
def opportunities_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file."),
    top: int = typer.Option(10, "--top", min=1, help="How many hotspot names to try."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """What each top hotspot group would buy if it were 2x faster, or gone, and what each
    named optimisation that applies to the trace would buy (with its assumptions)."""
    from ctda.render.whatif import opportunities_doc

    with api.open_store(db, reader=read) as store:
        a = store.analysis(run_or_trace)
    emit(opportunities_doc(api.opportunities(a, top), a, api.optimisation_opportunities(a)), fmt)


@app.command("export")
@one_line_errors
def export_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file."),
    perfetto: Path = typer.Option(
        ..., "--perfetto", help="Output .json or .json.gz for Perfetto / chrome://tracing."
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="A stored scenario of the run (default: the baseline)."
    ),
    db: DbOption = None,
) -> None:
    """Export the (re-timed) timeline with the critical path drawn, for Perfetto."""

    with api.open_store(db, reader=read) as store:
        count = store.export(run_or_trace, perfetto, scenario=scenario)
    console.print(f"wrote {count:,} events to {perfetto}")


@app.command("compare")
@one_line_errors
def compare_cmd(
    a: str = typer.Argument(..., help="Run, trace file, or RUN@SCENARIO."),
    b: str = typer.Argument(..., help="Run, trace file, or RUN@SCENARIO."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
    top: int = typer.Option(15, "--top", min=1, help="Rows in the hotspot and call-path tables."),
) -> None:
    """Before/after: step time, CP, bound-by and hotspots side by side; prediction error for a scenario."""
    from ctda.render.whatif import comparison_doc

    with api.open_store(db, reader=read) as store:
        comparison = store.compare(a, b)
    emit(comparison_doc(comparison, top), fmt)
