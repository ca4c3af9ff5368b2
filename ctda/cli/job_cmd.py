"""``ctda analyze`` over a job: a directory of per-rank traces, or several trace files."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda.analysis.engine import AnalysisOptions
from ctda.cli.common import console, fail


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
        result = analyze_job(traces, options, name=job, executor=executor)
    except (JobError, ExecutorError) as exc:
        fail(str(exc))
    rep = job_report(result, top=top)
    if fmt == "json":
        typer.echo(render_job_json(rep))
    else:
        render_job_table(rep, console)
