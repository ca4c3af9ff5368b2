"""The job half of :class:`ctda.api.StoreSession`: store a distributed job, list jobs, read
one back as the :class:`~ctda.job.report.JobReport` its analysis gave.

    with ctda.open_store("runs.lbug") as store:
        store.ingest_job(["traces/job42/"])          # a directory, or files with name=
        rep = store.job("job42")                     # steps, lateness, path, waits, clocks
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctda import lazy
from ctda.api_checks import analysis_options
from ctda.api_checks import top as check_top
from ctda.options import AnalysisOptions
from ctda.store.base import StoreError
from ctda.store.config import Target

if TYPE_CHECKING:
    from ctda.analysis.rule_options import RuleOptions
    from ctda.job.report import JobReport
    from ctda.store.base import Store
    from ctda.store.job_ingest import JobIngested
    from ctda.store.job_model import JobInfo

__all__ = ["JobInfo", "JobIngested", "JobReport", "JobSession"]

#: the job types this module re-exports, loaded on first use: they bring the job model
#: (numpy, pandas), which a session that lists runs or queries never needs
_EXPORTS = {
    "JobInfo": "ctda.store.job_model",
    "JobIngested": "ctda.store.job_ingest",
    "JobReport": "ctda.job.report",
}


_lookup = lazy.exports(globals(), _EXPORTS)


def __getattr__(name: str) -> Any:
    return _lookup(name)


class JobSession:
    """Jobs in one store; mixed into :class:`ctda.api.StoreSession`, which provides
    ``target``, ``_open`` and ``location``."""

    target: Target
    _closed: bool
    _open: Callable[..., Store]

    def ingest_job(
        self,
        paths: str | Path | Sequence[str | Path],
        name: str | None = None,
        *,
        force: bool = False,
        executor: str | None = None,
        top: int = 10,
        options: AnalysisOptions | None = None,
        windows: str | None = None,
        cross_thread: str | Sequence[str] | None = None,
        mode: str | None = None,
        rule_options: RuleOptions | Mapping[str, int] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> JobIngested:
        """Analyse a job and store it: a Job with its tables and a run per rank, ``NAME/rRANK``.

        Args:
            paths: a directory of per-rank traces, or the ranks' files.
            name: the job's name (default: from the directory or the files).
            force: store again files already stored with the same options.
            executor: where the ranks are analysed, as in :func:`ctda.job.run.analyze_job`.
            top: rows of the job path's items kept in its report.
            options, windows, cross_thread, mode, rule_options: the analysis options of
                every rank, as in :func:`ctda.api.analyze`.
            progress: called with (rows written, rows total) while the job is written.

        The options are checked before any file is read.
        """
        from ctda.store.job_ingest import ingest_job

        opts = analysis_options(options, windows, cross_thread, mode, rule_options)
        check_top(top)
        files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        if self._closed:
            raise StoreError(f"the session on {self.target.location} is closed")
        return ingest_job(
            files, self.target, opts, name=name, force=force, executor=executor, top=top, progress=progress
        )

    def jobs(self, include_incomplete: bool = False) -> list[JobInfo]:
        """The stored jobs (with ``include_incomplete``, also those being written or deleted)."""
        with self._open() as s:
            return s.jobs(include_incomplete=include_incomplete)

    def job(self, name: str, top: int = 10) -> JobReport:
        """The report of stored job ``name``, read back from the store: the tables its
        analysis gave (``top`` rows of the path's items)."""
        from ctda.store.job_model import report_from

        with self._open() as s:
            info = s.find_job(name)
            if info is None:
                have = ", ".join(j.name for j in s.jobs()) or "none"
                raise StoreError(f"no job {name!r} in {s.location} (jobs: {have})")
            return report_from(info, s.read_job_rows(info.id), top)

    def rm_job(self, name: str) -> None:
        """Delete job ``name`` with its runs and tables."""
        with self._open() as s:
            if not any(j.name == name for j in s.jobs(include_incomplete=True)):
                raise StoreError(f"no job {name!r} in {s.location}")
        with self._open(write=True) as s:
            s.delete_job(name)

    def _member(self, name: str) -> str | None:
        """The job run ``name`` belongs to, if any."""
        with self._open() as s:
            run = s.find_run(name)
            return None if run is None else s.job_members().get(run.id, (None, 0))[0]
