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
    fail,
    one_line_errors,
    read,
    stream_progress,
)
from ctda.cli.ending import end_quickly
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
    stream: bool = typer.Option(
        False,
        "--stream",
        help="For a trace larger than memory: read it to a scratch directory, then analyse a few steps at a"
        " time (memory follows --group-events, not the trace). Every step, no --step.",
    ),
    group_events: int = typer.Option(
        50_000,
        "--group-events",
        min=1,
        help="With --stream: about this many events analysed at once (more: faster, more memory).",
    ),
    jobs: int = typer.Option(
        1,
        "--jobs",
        min=1,
        help="With --stream: analyse this many groups at once in worker processes (faster on several cores;"
        " memory for that many groups).",
    ),
    scratch: Path | None = typer.Option(
        None,
        "--scratch",
        help="With --stream: where the read trace is kept meanwhile (default: the temp dir).",
    ),
) -> None:
    """Critical path of each step through CPU threads, GPU streams and the waits between them."""
    parse_step(step)  # a bad --step fails before the trace is read (or the heap warmed)
    if len(traces) == 1 and not stream and job is None:
        # on another core, while this one imports what follows (options needing those
        # imports to be checked end the command with the warm-up unfinished: no time lost)
        api.warm_heap_for(traces[0])
    from ctda.render.analyze import report_doc
    from ctda.render.hta import hta_doc

    options = api.validate_options(windows=windows, cross_thread=cross_thread, mode=mode)
    if stream and (len(traces) > 1 or job is not None or traces[0].is_dir()):
        fail("--stream analyses one trace: leave it out for a job (a directory or several traces)")
    if job_cmd.is_job(traces, job):
        job_cmd.analyze_job_cmd(traces, job, options, fmt, top, executor)
        return
    trace = traces[0]
    if stream:
        _analyze_stream(trace, options, step, top, fmt, group_events, scratch, jobs)
        return
    if options.mode == "hta":  # HTA's own report (same critical path as an HTA-mode analysis)
        got = api.hta_report(trace, hta_version, reader=read)
        emit(hta_doc(got.result, got.table, top), fmt)
        end_quickly()
        return
    result = api.analyze(trace, options=options, reader=read)
    rep, checked = api.report_and_check(result, step=step, top=top)
    doc = report_doc(rep)
    doc.blocks.append(Text(checked.line()))
    emit(doc, fmt)
    end_quickly()  # it wrote only to stdout: no need to free the analysis object by object


def _analyze_stream(
    trace: Path,
    options: api.AnalysisOptions,
    step: str,
    top: int,
    fmt: Format,
    group_events: int,
    scratch: Path | None,
    jobs: int,
) -> None:
    from ctda.render.analyze import report_doc

    if step != "all":
        fail("--stream reports every step: leave out --step")
    if options.mode != "ctda" or options.windows != "steps":
        fail("--stream analyses each ProfilerStep in ctda mode: leave out --mode and --windows")
    with stream_progress(trace) as progress:
        got = api.analyze_stream(
            trace,
            options=options,
            group_events=group_events,
            top=top,
            progress=progress,
            scratch=scratch,
            jobs=jobs,
        )
    doc = report_doc(got.report)
    doc.blocks.append(
        Text(
            f"streamed: {got.events:,} events read to {got.spilled_bytes / 2**20:,.0f} MiB of scratch,"
            f" analysed in {got.groups:,} groups of at most {got.largest_group:,} events"
            " (each with the steps beside it)"
            + (
                f"; the self time of {got.outlasting:,} events that outlast their group's reach is"
                " counted to its end (an upper bound)"
                if got.outlasting
                else ""
            )
        )
    )
    emit(doc, fmt)
