"""``ctda analyze``: the critical path of each step, hotspots and bound-by breakdown."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from ctda import api
from ctda.cli import job_cmd
from ctda.cli.common import (
    CrossThreadOption,
    ExecutorOption,
    FormatOption,
    ModeOption,
    ReportTopOption,
    StepOption,
    WindowsOption,
    app,
    one_line_errors,
    read,
)
from ctda.options import parse_step
from ctda.render.output import Format, emit


@app.command("analyze")
@one_line_errors
def analyze_cmd(
    traces: list[Path] = typer.Argument(
        ...,
        help="Kineto trace (.json, .json.gz) or a ctda .parquet table; a job: a directory or several files.",
    ),
    step: StepOption = "all",
    top: ReportTopOption = 10,
    fmt: FormatOption = Format.table,
    cross_thread: CrossThreadOption = "all",
    windows: WindowsOption = "steps",
    mode: ModeOption = "ctda",
    hta_version: str = typer.Option(
        "current", "--hta-version", help="With --mode hta: 'current' (HTA main) or '0.5' (HTA 0.5.0 on PyPI)."
    ),
    job: str | None = typer.Option(None, "--job", help="Analyse the traces as one job of this name."),
    executor: ExecutorOption = None,
) -> None:
    """Critical path of each step through CPU threads, GPU streams and the waits between them."""
    from ctda.render.analyze import report_doc
    from ctda.render.hta import hta_doc

    options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
    if job_cmd.is_job(traces, job):
        job_cmd.analyze_job_cmd(traces, job, options, fmt, top, executor)
        return
    trace = traces[0]
    parse_step(step)  # a bad --step fails before the trace is read
    if options.mode == "hta":  # HTA's own report (same critical path as an HTA-mode analysis)
        got = api.hta_report(trace, hta_version, reader=read)
        emit(hta_doc(got.result, got.table, top), fmt)
        return
    result = api.analyze(trace, options=options, reader=read)
    doc = report_doc(api.report(result, step=step, top=top))
    doc.blocks.append(Text(api.validate(result, quick=True).line()))
    emit(doc, fmt)
