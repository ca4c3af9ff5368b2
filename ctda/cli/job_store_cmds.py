"""Jobs in the store: ``ctda ingest DIR`` / ``ctda ingest A B --job NAME`` (called by the
ingest command) and ``ctda jobs``."""

from __future__ import annotations

import sys
from pathlib import Path

from ctda import api
from ctda.cli.common import (
    AllOption,
    DbOption,
    FormatOption,
    app,
    err_console,
    one_line_errors,
    printable,
    write_progress,
)
from ctda.options import AnalysisOptions
from ctda.render.output import Format, emit


def is_job_ingest(traces: list[Path], job: str | None) -> bool:
    """A job when ``--job`` is given or the one argument is a directory (several files
    without ``--job`` stay separate runs, as they always were)."""
    return job is not None or (len(traces) == 1 and traces[0].is_dir())


@one_line_errors
def ingest_job_cmd(
    traces: list[Path],
    job: str | None,
    db: str | None,
    options: AnalysisOptions,
    force: bool,
    executor: str | None,
    top: int,
    fmt: Format,
) -> None:
    """Analyse and store a job, then print its report (what ``ctda analyze DIR`` prints)."""
    from ctda.job.load import job_files
    from ctda.render.job import job_doc

    files = job_files(traces)  # a directory without traces: one line before the store opens
    tty = sys.stderr.isatty()
    with api.open_store(db) as store:
        if tty:  # a note while the ranks are analysed; off a terminal only errors, one line each
            what = f"{len(files)} trace(s)" if len(traces) > 1 else f"the {len(files)} traces in {traces[0]}"
            err_console.print(f"analysing {printable(what)} as one job", highlight=False)
        with write_progress(tty) as progress:
            done = store.ingest_job(
                traces, job, force=force, executor=executor, top=top, progress=progress, options=options
            )
        info = done.job
        if not done.stored:
            err_console.print(
                f"already stored as job [bold]{printable(info.name)}[/] (same files and options); "
                "--force stores it again",
                highlight=False,
            )
            rep = store.job(info.name, top=top)
        else:
            assert done.report is not None
            rep = done.report
            rate = done.rows / max(done.seconds, 1e-9)
            missing = f", missing ranks {', '.join(map(str, info.missing))}" if info.missing else ""
            err_console.print(
                f"stored job [bold]{printable(info.name)}[/]: {len(info.ranks)} of {info.world_size} "
                f"rank(s) as runs {printable(info.name)}/r<rank>{missing}, {done.rows:,} rows "
                f"in {done.seconds:.1f} s ({rate:,.0f} rows/s) -> {printable(store.location)}",
                highlight=False,
            )
    emit(job_doc(rep), fmt)


@app.command("jobs")
@one_line_errors
def jobs_cmd(
    db: DbOption = None,
    all_: AllOption = False,
    fmt: FormatOption = Format.table,
) -> None:
    """List the distributed jobs in the store (each rank is a run: ctda runs)."""
    from ctda.render.store import jobs_doc

    with api.open_store(db) as store:
        jobs = store.jobs(include_incomplete=all_)
        where = store.location
    if not jobs and fmt is Format.table:
        err_console.print(f"no jobs in {printable(where)}", highlight=False)
        return
    emit(jobs_doc(jobs, where, with_status=all_), fmt)
