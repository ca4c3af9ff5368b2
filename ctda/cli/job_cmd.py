"""``ctda analyze`` over a job: a directory of per-rank traces, or several trace files."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda.analysis.engine import AnalysisOptions
from ctda.cli.common import app, console, fail, guarded


def is_job(traces: list[Path], job: str | None) -> bool:
    """A job when several files, a directory, or ``--job`` is given."""
    return job is not None or len(traces) > 1 or (len(traces) == 1 and traces[0].is_dir())


def analyze_job_cmd(
    traces: list[Path], job: str | None, options: AnalysisOptions, fmt: str, top: int, executor: str | None
) -> None:
    """Analyse a job and print its path, stragglers, clock offsets and matching summary."""
    from ctda.job.executor import ExecutorError
    from ctda.job.load import JobError
    from ctda.job.report import job_report
    from ctda.job.run import analyze_job
    from ctda.render.job import render_job_json, render_job_table

    try:
        result = analyze_job(traces, options, name=job, executor=executor, full=False)
    except (JobError, ExecutorError) as exc:
        fail(str(exc))
    rep = job_report(result, top=top)
    if fmt == "json":
        typer.echo(render_job_json(rep))
    else:
        render_job_table(rep, console)


@app.command("whatif-job")
def whatif_job_cmd(
    traces: list[Path] = typer.Argument(..., help="A job: a directory of per-rank traces, or several files."),
    scale: list[str] = typer.Option(
        [],
        "--scale",
        help="name~REGEX=F, cat=C=F, class=C=F, thread=TID=F on every rank; prefix rank=R: for one rank;"
        " rank=R=F scales all of rank R.",
    ),
    straggler_median: bool = typer.Option(
        False, "--straggler-median", help="Each step's straggler as fast as the median of the other ranks."
    ),
    job: str | None = typer.Option(None, "--job", help="The job's name (default: the directory's)."),
    executor: str | None = typer.Option(
        None, "--executor", help="local (default), serial, dask-local, tcp://HOST:PORT."
    ),
    fmt: str = typer.Option("table", "--format", help="table or json."),
) -> None:
    """Predicted job step if some ranks' events took a different time (re-timed job graph)."""
    from ctda.job.executor import ExecutorError
    from ctda.job.load import JobError
    from ctda.job.run import analyze_job
    from ctda.job.whatif import job_scenario
    from ctda.render.job import render_job_whatif

    def run() -> None:
        try:
            result = analyze_job(traces, AnalysisOptions(), name=job, executor=executor)
        except (JobError, ExecutorError) as exc:
            fail(str(exc))
        scn = job_scenario(result, list(scale), straggler_median)
        render_job_whatif(result.name, scn.name, scn.steps, console, fmt)

    guarded(run)
