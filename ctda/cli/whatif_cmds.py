"""``ctda whatif``, ``ctda opportunities``, ``ctda export``, ``ctda compare``."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ctda.analysis.engine import Analysis, OptionError
from ctda.cli.common import app, console, err_console, fail, guarded
from ctda.cli.sources import load_analysis, load_scenario, save_scenario
from ctda.render.whatif import (
    render_comparison,
    render_opportunities,
    render_scenario,
)
from ctda.whatif import compare as cmp
from ctda.whatif.export import write_perfetto
from ctda.whatif.opportunities import rank
from ctda.whatif.scenario import Scenario, run, with_cpus
from ctda.whatif.select import Override, SelectionError, from_rows, parse_remove, parse_scale


class Format(str, Enum):
    table = "table"
    json = "json"


def _overrides(
    a: Analysis,
    scale: list[str],
    remove: list[str],
    cypher: str | None,
    rows_for: Callable[[str], list[dict[str, Any]]],
) -> list[Override]:
    out = [parse_scale(a, s) for s in scale] + [parse_remove(a, r) for r in remove]
    if cypher:
        text = Path(cypher).read_text() if Path(cypher).is_file() else cypher
        out += from_rows(a, rows_for(text), label=cypher if len(cypher) < 40 else "cypher")
    if not out:
        raise SelectionError("nothing to change: give --scale, --remove or --cypher")
    return out


@app.command("whatif")
def whatif_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file to analyse on the fly."),
    scale: list[str] = typer.Option(
        [], "--scale", help="name~REGEX=F, cat=CATEGORY=F, class=CLASS=F or thread=TID=F."
    ),
    remove: list[str] = typer.Option(
        [], "--remove", help="Events whose name matches REGEX take no time (dependencies kept)."
    ),
    cypher: str | None = typer.Option(
        None,
        "--cypher",
        help="Named query, .cypher file or text returning (uid, factor) or (uid, dur µs) rows.",
    ),
    param: list[str] = typer.Option(
        [], "--param", "-p", help="Query parameter k=v for --cypher ($run is bound)."
    ),
    name: str | None = typer.Option(
        None, "--name", help="Scenario name (default: derived from the selection)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Do not store the scenario."),
    in_db: bool = typer.Option(
        False, "--in-db", help="Re-time inside the Neo4j store (ctda.replay procedure) instead of in Python."
    ),
    perfetto: Path | None = typer.Option(None, "--perfetto", help="Also export the predicted timeline here."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB", help="Store path or bolt:// URI."),
    fmt: Format = typer.Option(Format.table, "--format"),
    top: int = typer.Option(10, "--top", min=1),
    cpus: int = typer.Option(
        0, "--cpus", min=0, help="Cores of the traced host, for CPU contention the trace cannot measure."
    ),
) -> None:
    """Predict the step time if some events took a different time (before writing the fix)."""

    def go() -> None:
        a, store_run = load_analysis(run_or_trace, db)
        if cpus:
            a = with_cpus(a, cpus)
        try:
            params = dict(kv.split("=", 1) for kv in param if "=" in kv)
            ovs = _overrides(
                a,
                scale,
                remove,
                cypher,
                lambda q: store_run.query_rows(q, params) if store_run else _no_store(),
            )
        except SelectionError as exc:
            fail(f"{run_or_trace}: {exc}")
        label = name or "; ".join(o.label for o in ovs)
        if in_db:
            _in_db(a, store_run, ovs, label, dry_run, perfetto, fmt.value, top)
            return
        sc = run(a, ovs, name=label)
        if store_run is not None and not dry_run:
            save_scenario(store_run, sc)
        if perfetto:
            write_perfetto(sc.analysis, perfetto, name=label)
        render_scenario(sc, console, fmt.value, top)

    guarded(go)


def _in_db(
    a: Analysis, store_run: Any, ovs: list[Override], label: str, dry_run: bool, perfetto: Path | None,
    fmt: str, top: int,
) -> None:  # fmt: skip
    """``whatif --in-db``: the database re-times the run; the result is stored like any scenario."""
    from ctda.render.indb import render_indb
    from ctda.store import open_store
    from ctda.whatif import indb

    if store_run is None:
        fail("--in-db needs a stored run (ctda ingest first)")
    if perfetto:
        fail("--in-db does not export timelines; export the saved scenario with ctda export --scenario")
    if len(a.contention):
        err_console.print(
            "note: this run has a GIL-contention model, which the database does not apply; "
            "ctda whatif without --in-db includes it",
            highlight=False,
        )
    with open_store(store_run.db, read_only=dry_run) as store:
        result = indb.replay(store, store_run.info.id, ovs, a.nodes.end - a.nodes.ts, name=label)
        if not dry_run:
            indb.save(store, store_run.info.id, result)
    render_indb(result, console, fmt, top)


def _no_store() -> list[dict[str, object]]:
    raise SelectionError("--cypher needs a stored run (ctda ingest first)")


@app.command("opportunities")
def opportunities_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file."),
    top: int = typer.Option(10, "--top", min=1, help="How many hotspot names to try."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB"),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """What each top hotspot group would buy if it were 2x faster, or gone."""

    def go() -> None:
        a, _ = load_analysis(run_or_trace, db)
        render_opportunities(rank(a, top), a, console, fmt.value)

    guarded(go)


@app.command("export")
def export_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file."),
    perfetto: Path = typer.Option(
        ..., "--perfetto", help="Output .json or .json.gz for Perfetto / chrome://tracing."
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="A stored scenario of the run (default: the baseline)."
    ),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB"),
) -> None:
    """Export the (re-timed) timeline with the critical path drawn, for Perfetto."""

    def go() -> None:
        a, store_run = load_analysis(run_or_trace, db)
        target: Analysis = a
        label = "baseline"
        if scenario:
            if store_run is None:
                fail("--scenario needs a stored run")
            sc = load_scenario(store_run, a, scenario)
            target, label = sc.analysis, scenario
        count = write_perfetto(target, perfetto, name=label)
        console.print(f"wrote {count:,} events to {perfetto}")

    guarded(go)


@app.command("compare")
def compare_cmd(
    a: str = typer.Argument(..., help="Run, trace file, or RUN@SCENARIO."),
    b: str = typer.Argument(..., help="Run, trace file, or RUN@SCENARIO."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB"),
    fmt: Format = typer.Option(Format.table, "--format"),
    top: int = typer.Option(15, "--top", min=1),
) -> None:
    """Before/after: step time, CP, bound-by and hotspots side by side; prediction error for a scenario."""

    def go() -> None:
        sa, sb = _side(a, db), _side(b, db)
        render_comparison(cmp.compare(sa, sb), console, fmt.value, top)

    guarded(go)


def _side(spec: str, db: str | None) -> cmp.Side:
    base, _, scen = spec.partition("@")
    a, store_run = load_analysis(base, db)
    if not scen:
        return cmp.Side(spec, a)
    if store_run is None:
        fail(f"{spec}: a scenario needs a stored run")
    sc: Scenario = load_scenario(store_run, a, scen)
    return cmp.Side(spec, sc.analysis, predicted=True)


__all__ = ["OptionError"]
