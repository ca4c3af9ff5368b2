"""``ctda validate``: how far to trust a what-if on this trace (the cross-step self-check)."""

from __future__ import annotations

import typer
from rich.text import Text

from ctda import api
from ctda.cli.common import FormatOption, app, guarded, read
from ctda.render.output import Block, Col, Document, Format, Section, emit

PAIR_COLS = [
    Col("i", "step i"),
    Col("j", "step j"),
    Col("base_ns", "i ms", "ms"),
    Col("observed_ns", "j ms", "ms"),
    Col("predicted_ns", "predicted ms", "ms"),
    Col("error", "error", "pct"),
    Col("naive_error", "naive", "pct"),
    Col("matched", "matched", "pct"),
]


@app.command("validate")
def validate_cmd(
    run_or_trace: str = typer.Argument(..., help="A stored run name, or a trace file to analyse on the fly."),
    db: str | None = typer.Option(None, "--db", envvar="CTDA_DB", help="Store path or bolt:// URI."),
    fmt: FormatOption = Format.table,
    pairs: bool = typer.Option(False, "--pairs", help="Also list every step pair."),
) -> None:
    """Give each step the times another step's events really had; does the model predict that step?"""

    def go() -> None:
        with api.open_store(db, reader=read) as store:
            sc = api.validate(store.analysis(run_or_trace))
        blocks: list[Block] = [Text(sc.line())]
        if pairs and len(sc):
            blocks.append(Section.of("pairs", "Step pairs", sc.pairs, PAIR_COLS))
        data = {"summary": sc.summary(), "pairs": sc.pairs.to_dict(orient="records") if pairs else None}
        emit(Document(f"Self-check of {run_or_trace}", blocks, data=data, source=run_or_trace), fmt)

    guarded(go)
