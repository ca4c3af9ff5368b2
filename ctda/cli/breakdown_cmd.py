"""``ctda breakdown``: HTA's everyday breakdowns of device time, tied to the critical path."""

from __future__ import annotations

from pathlib import Path

import typer

from ctda import api
from ctda.analysis.breakdowns import KINDS, Breakdowns, JobBreakdowns
from ctda.cli.common import DbOption, FormatOption, app, guarded, read
from ctda.errors import CtdaError
from ctda.render.breakdown import breakdown_doc
from ctda.render.output import Format, emit


@app.command("breakdown")
def breakdown_cmd(
    run_or_trace: str = typer.Argument(
        ..., help="A stored run name, a trace file to analyse on the fly, or a job's directory (every rank)."
    ),
    kind: str = typer.Option("all", "--kind", help=f"Which breakdowns: all, or a list of {','.join(KINDS)}."),
    top: int = typer.Option(20, "--top", min=1, help="Rows of the kernel list."),
    db: DbOption = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Where device time goes (compute, communication, memory, idle), why streams sit idle,
    and which kernels cost most, each with the part on the critical path."""

    def go() -> None:
        kinds = list(KINDS) if kind.strip().lower() == "all" else [k.strip().lower() for k in kind.split(",")]
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise CtdaError(
                f"--kind: unknown breakdown {', '.join(unknown)}; choose from all, {', '.join(KINDS)}"
            )
        path = Path(run_or_trace)
        if path.is_dir():  # a job: every rank's breakdowns, a rank column first
            from ctda.job.load import job_files

            job = JobBreakdowns.of_files(job_files([path]), lambda p: api.analyze(p, reader=read))
            emit(breakdown_doc(job, run_or_trace, kinds, top), fmt)
            return
        with api.open_store(db, reader=read) as store:
            a = store.analysis(run_or_trace)
        emit(breakdown_doc(Breakdowns(a), run_or_trace, kinds, top), fmt)

    guarded(go)
