"""``ctda analyze``: the critical path of each step, hotspots and bound-by breakdown."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from ctda import api
from ctda.cli import job_cmd
from ctda.cli.common import CrossThreadOption, ModeOption, WindowsOption, app, console, fail, guarded, read
from ctda.ingest.table import EventTable
from ctda.options import parse_step
from ctda.render.analyze import render_json, render_markdown, render_table
from ctda.whatif.selfcheck import summary as selfcheck


class Format(str, Enum):
    table = "table"
    json = "json"
    md = "md"


@app.command("analyze")
def analyze_cmd(
    traces: list[Path] = typer.Argument(
        ...,
        help="Kineto trace (.json, .json.gz) or a ctda .parquet table; a job: a directory or several files.",
    ),
    step: str = typer.Option("all", "--step", help="A ProfilerStep number, or 'all'."),
    top: int = typer.Option(10, "--top", min=1, help="Rows in the hotspot and near-critical tables."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
    cross_thread: CrossThreadOption = "all",
    windows: WindowsOption = "steps",
    mode: ModeOption = "ctda",
    hta_version: str = typer.Option(
        "current", "--hta-version", help="With --mode hta: 'current' (HTA main) or '0.5' (HTA 0.5.0 on PyPI)."
    ),
    job: str | None = typer.Option(None, "--job", help="Analyse the traces as one job of this name."),
    executor: str | None = typer.Option(
        None, "--executor", help="Jobs: local (processes, default), serial, dask-local, or tcp://HOST:PORT."
    ),
) -> None:
    """Critical path of each step through CPU threads, GPU streams and the waits between them."""
    if job_cmd.is_job(traces, job):

        def run_job() -> None:
            options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
            job_cmd.analyze_job_cmd(traces, job, options, fmt.value, top, executor)

        guarded(run_job)
        return
    trace = traces[0]

    def run() -> None:
        options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
        parse_step(step)  # a bad --step fails before the trace is read
        if options.mode == "hta":  # HTA's own report (same critical path as an HTA-mode analysis)
            _hta(read(trace), hta_version, fmt, top)
            return
        result = api.analyze(trace, options=options, reader=read)
        report = api.report(result, step=step, top=top)
        if fmt is Format.json:
            typer.echo(render_json(report))
        elif fmt is Format.md:
            typer.echo(render_markdown(report))
        else:
            render_table(report, console)
            console.print(selfcheck(result).line(), highlight=False)

    guarded(run)


def _hta(table: EventTable, version: str, fmt: Format, top: int) -> None:
    from ctda.analysis.hta import HtaOptions, hta_analysis
    from ctda.render.hta import render_hta

    if version not in ("current", "0.5"):
        fail(f"--hta-version must be 'current' or '0.5', not {version!r}")
    opts = HtaOptions.release_0_5() if version == "0.5" else HtaOptions()
    render_hta(hta_analysis(table, opts), table, console, "json" if fmt is Format.json else "table", top)
