"""``ctda validate``: how far to trust a what-if on this trace (the cross-step self-check)."""

from __future__ import annotations

import json
from enum import Enum

import typer
from rich.table import Table

from ctda import api
from ctda.cli.common import app, console, guarded, read


class Format(str, Enum):
    table = "table"
    json = "json"


@app.command("validate")
def validate_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file to analyse on the fly."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB", help="Store path or bolt:// URI."),
    fmt: Format = typer.Option(Format.table, "--format"),
    pairs: bool = typer.Option(False, "--pairs", help="Also list every step pair."),
) -> None:
    """Give each step the times another step's events really had; does the model predict that step?"""

    def go() -> None:
        with api.open_store(db, reader=read) as store:
            sc = api.validate(store.analysis(run_or_trace))
        if fmt is Format.json:
            out = {"summary": sc.summary(), "pairs": sc.pairs.to_dict(orient="records") if pairs else None}
            typer.echo(json.dumps(out, default=float))
            return
        console.print(sc.line(), highlight=False)
        if pairs and len(sc):
            t = Table("step i", "step j", "i ms", "j ms", "predicted ms", "error", "naive", "matched")
            for r in sc.pairs.to_dict(orient="records"):
                t.add_row(
                    str(r["i"]).replace("ProfilerStep", ""),
                    str(r["j"]).replace("ProfilerStep", ""),
                    f"{r['base_ns'] / 1e6:.3f}",
                    f"{r['observed_ns'] / 1e6:.3f}",
                    f"{r['predicted_ns'] / 1e6:.3f}",
                    f"{100 * r['error']:+.2f}%",
                    f"{100 * r['naive_error']:+.2f}%",
                    f"{100 * r['matched']:.0f}%",
                )
            console.print(t)

    guarded(go)
