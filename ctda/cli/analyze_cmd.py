"""``ctda analyze``: the critical path of each step, hotspots and bound-by breakdown."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from ctda.analysis.engine import AnalysisOptions, OptionError, analyze, parse_cross_thread
from ctda.analysis.report import build
from ctda.cli.common import (
    CrossThreadOption,
    FormatOption,
    WindowsOption,
    app,
    fail,
    file_progress,
    guarded,
)
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable
from ctda.render.analyze import report_doc
from ctda.render.output import Format, emit


class Mode(str, Enum):
    ctda = "ctda"
    hta = "hta"


@app.command("analyze")
def analyze_cmd(
    trace: Path = typer.Argument(..., help="Kineto trace (.json, .json.gz) or a ctda .parquet table."),
    step: str = typer.Option("all", "--step", help="A ProfilerStep number, or 'all'."),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot and near-critical tables."),
    fmt: FormatOption = Format.table,
    cross_thread: CrossThreadOption = "all",
    windows: WindowsOption = "steps",
    mode: Mode = typer.Option(
        Mode.ctda, "--mode", help="'hta' reproduces HolisticTraceAnalysis's rules and weights."
    ),
    hta_version: str = typer.Option(
        "current", "--hta-version", help="With --mode hta: 'current' (HTA main) or '0.5' (HTA 0.5.0 on PyPI)."
    ),
) -> None:
    """Critical path of each step through CPU threads, GPU streams and the waits between them."""
    try:
        ct = parse_cross_thread(cross_thread)
    except OptionError as exc:
        fail(str(exc))

    def run() -> None:
        with file_progress(trace, "reading") as progress:
            table = read_trace(trace, progress)
        if mode is Mode.hta:
            _hta(table, hta_version, fmt, top)
            return
        try:
            result = analyze(table, AnalysisOptions(windows=windows, cross_thread=ct, mode=mode.value))
            report = build(result, step=step, top=top)
        except (OptionError, ValueError) as exc:
            fail(f"{trace}: {exc}")
        emit(report_doc(report), fmt)

    guarded(run)


def _hta(table: EventTable, version: str, fmt: Format, top: int) -> None:
    from ctda.analysis.rules.hta import HtaOptions, hta_analysis
    from ctda.render.hta import hta_doc

    if version not in ("current", "0.5"):
        fail(f"--hta-version must be 'current' or '0.5', not {version!r}")
    opts = HtaOptions.release_0_5() if version == "0.5" else HtaOptions()
    emit(hta_doc(hta_analysis(table, opts), table, top), fmt)
