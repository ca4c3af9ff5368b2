"""``ctda whatif``, ``ctda opportunities``, ``ctda export``, ``ctda compare``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ctda.analysis.engine import Analysis, OptionError
from ctda.cli.common import FormatOption, app, console, fail, guarded
from ctda.cli.sources import load_analysis, load_scenario, save_scenario
from ctda.render.output import Format, emit
from ctda.render.whatif import comparison_doc, opportunities_doc, scenario_doc
from ctda.whatif import compare as cmp
from ctda.whatif.export import write_perfetto
from ctda.whatif.opportunities import rank
from ctda.whatif.scenario import Scenario, run
from ctda.whatif.select import Override, SelectionError, from_rows, parse_remove, parse_scale


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
    perfetto: Path | None = typer.Option(None, "--perfetto", help="Also export the predicted timeline here."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB", help="Store path or bolt:// URI."),
    fmt: FormatOption = Format.table,
    top: int = typer.Option(10, "--top", min=1),
) -> None:
    """Predict the step time if some events took a different time (before writing the fix)."""

    def go() -> None:
        a, store_run = load_analysis(run_or_trace, db)
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
        sc = run(a, ovs, name=label)
        if store_run is not None and not dry_run:
            save_scenario(store_run, sc)
        if perfetto:
            write_perfetto(sc.analysis, perfetto, name=label)
        emit(scenario_doc(sc, top), fmt)

    guarded(go)


def _no_store() -> list[dict[str, object]]:
    raise SelectionError("--cypher needs a stored run (ctda ingest first)")


@app.command("opportunities")
def opportunities_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file."),
    top: int = typer.Option(10, "--top", min=1, help="How many hotspot names to try."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB"),
    fmt: FormatOption = Format.table,
) -> None:
    """What each top hotspot group would buy if it were 2x faster, or gone."""

    def go() -> None:
        a, _ = load_analysis(run_or_trace, db)
        emit(opportunities_doc(rank(a, top), a), fmt)

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
    fmt: FormatOption = Format.table,
    top: int = typer.Option(15, "--top", min=1),
) -> None:
    """Before/after: step time, CP, bound-by and hotspots side by side; prediction error for a scenario."""

    def go() -> None:
        sa, sb = _side(a, db), _side(b, db)
        emit(comparison_doc(cmp.compare(sa, sb), top), fmt)

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
