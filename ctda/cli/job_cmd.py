"""``ctda analyze`` over a job: a directory of per-rank traces, or several trace files."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda import api
from ctda.cli.common import ExecutorOption, FormatOption, app, one_line_errors
from ctda.options import AnalysisOptions
from ctda.render.output import Format, emit


def is_job(traces: list[Path], job: str | None) -> bool:
    """A job when several files, a directory, or ``--job`` is given."""
    return job is not None or len(traces) > 1 or (len(traces) == 1 and traces[0].is_dir())


def analyze_job_cmd(
    traces: list[Path], job: str | None, options: AnalysisOptions, fmt: Format, top: int, executor: str | None
) -> None:
    """Analyse a job and print its path, stragglers, clock offsets and matching summary."""
    from ctda.render.job import job_doc

    emit(job_doc(api.analyze_job(traces, job, options=options, executor=executor, top=top)), fmt)


@app.command("whatif-job")
@one_line_errors
def whatif_job_cmd(
    traces: list[Path] = typer.Argument(..., help="A job: a directory of per-rank traces, or several files."),
    scale: list[str] = typer.Option(
        [],
        "--scale",
        help="name~REGEX=F, cat=C=F, class=C=F, thread=TID=F on every rank; prefix rank=R: for one rank;"
        " rank=R=F scales all of rank R.",
    ),
    straggler_median: bool = typer.Option(
        False,
        "--straggler-median",
        help="Each step's straggler (in steps within the noise, the job's) as fast as the median rank.",
    ),
    job: str | None = typer.Option(None, "--job", help="The job's name (default: the directory's)."),
    cpus: int = typer.Option(
        0, "--cpus", min=0, help="Cores of each host; its ranks then share them in the prediction."
    ),
    executor: ExecutorOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Predicted job step if some ranks' events took a different time (re-timed job graph)."""
    from ctda.render.job import job_whatif_doc

    got = api.whatif_job(
        traces, scale, straggler_median=straggler_median, name=job, executor=executor, cpus=cpus
    )
    emit(job_whatif_doc(got.job, got.scenario.name, got.scenario.steps, got.scenario.notes), fmt)
