"""``ctda ingest DIR`` without the CLI: analyse a distributed job and store it, idempotently.

The same order as a single trace's ingest (:mod:`ctda.store.ingest`), so bad input leaves
the store unchanged: the files' digests are looked up read-only, the job is analysed
(ranks read and checked: two files claiming one rank fail here), and only then is the
store opened for writing, where the job and a run per rank appear at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctda.analysis.engine import AnalysisOptions
from ctda.analysis.tables import options_key
from ctda.job.load import job_files
from ctda.job.report import JobReport, job_report
from ctda.job.run import Job, analyze_job, default_job_name
from ctda.store import open_store
from ctda.store.base import Progress, StoreError
from ctda.store.config import Target
from ctda.store.ingest import check_run_name, digest, run_data
from ctda.store.job_model import JobInfo, job_data, job_digest, run_name


@dataclass
class JobIngested:
    """What happened to one job."""

    job: JobInfo
    stored: bool  # False: the same files and options were already stored (a no-op)
    report: JobReport | None = None  # the analysis's report (None for a no-op)
    seconds: float = 0.0  # time spent writing
    rows: int = 0  # events + dependency edges of all ranks


def ingest_job(
    paths: Sequence[Path],
    target: Target,
    options: AnalysisOptions,
    *,
    name: str | None = None,
    force: bool = False,
    executor: str | None = None,
    top: int = 10,
    fail_after: int | None = None,
    progress: Progress | None = None,
    analyze: Callable[..., Job] = analyze_job,
) -> JobIngested:
    """Store the job made of ``paths`` (a directory of per-rank traces, or the files) as a
    Job with one run per rank (``JOB/rRANK``); a no-op when already there, unless ``force``.

    ``analyze`` is :func:`ctda.job.run.analyze_job` or a function that answers like it (the
    tests reuse one analysis across stores)."""
    files = job_files(list(paths))
    # its runs are JOB/rRANK, so the job's name obeys the rules of run names
    job_name = (
        check_run_name(name, "--job")
        if name
        else check_run_name(default_job_name(files), "--job", files[0].parent)
    )
    shas = {str(f): digest(f) for f in files}
    sha, okey = job_digest(shas.values()), options_key(options)
    with open_store(target, read_only=True) as store:
        same = store.find_job_content(sha, okey)
        if same is not None and not force:
            return JobIngested(same, stored=False)
        clash = store.find_job(job_name)
    if clash is not None and not force:
        raise StoreError(
            f"job {job_name!r} already holds other files or options; "
            "use --force to replace it, or --job to pick another name"
        )
    job = analyze(files, options, name=job_name, executor=executor, full=True)
    rep = job_report(job, top=top)
    runs = {}
    for rank, part in job.parts.items():
        assert part.analysis is not None  # full mode keeps every rank's analysis
        path = Path(part.rank_id.path)
        runs[rank] = run_data(part.analysis, run_name(job_name, rank), path, shas[str(path)])
    data = job_data(rep, runs, sha, options)
    with open_store(target) as store:
        t0 = time.perf_counter()
        info = store.write_job(data, replace=force, fail_after=fail_after, progress=progress)
        seconds = time.perf_counter() - t0
    return JobIngested(info, stored=True, report=rep, seconds=seconds, rows=data.n_rows)
