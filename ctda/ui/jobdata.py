"""The Job page's door to the store, and its caches (as :mod:`ctda.ui.data` for runs).

A stored job is a :class:`~ctda.job.report.JobReport` plus one run per rank (named
``JOB/rRANK``). :func:`read_store` is the one place the page reads them. The list of jobs
is read again whenever the store may have changed (:func:`ctda.ui.data.store_stamp`); a
job's report, and what is drawn from it, is cached by the job's key (its id and content
digest: a job stored again under its name gets a new one), so a server store's changing
stamp does not re-read and redraw an unchanged job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from ctda.api import JobWhatif, RunInfo, StoreError, StoreSession, whatif_stored_job
from ctda.api_jobs import JobReport
from ctda.ui import data, frames, jobcharts, jobframes
from ctda.ui.canvas import Chart
from ctda.ui.settings import Settings


@dataclass
class StoredJobs:
    """What the store holds for the Job page: each job's key by name and, for the one
    asked for, its report and the stored run of each of its ranks (absent: not stored)."""

    keys: dict[str, str]
    report: JobReport | None = None
    runs: dict[int, RunInfo] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.keys)


def read_store(db: str | None, name: str | None) -> StoredJobs:
    """The store's jobs, and job ``name`` read back with its ranks' runs (None: just the
    list). Raises :class:`~ctda.store.base.StoreError` when the store cannot be read."""
    with StoreSession(db) as s:
        keys = {j.name: f"{j.id}:{j.sha256[:16]}:{j.options_key}" for j in s.jobs()}
        if name is None or name not in keys:
            return StoredJobs(keys)
        rep = s.job(name)
        # a job's runs name their job and rank (``ctda runs`` lists them as NAME/rRANK)
        runs = {int(r.extra["rank"]): r for r in s.runs() if r.extra.get("job") == name}
    return StoredJobs(keys, rep, runs)


@st.cache_resource(max_entries=16, show_spinner=False)
def listing(db: str | None, stamp: float) -> StoredJobs:
    """The stored jobs, read again only when the store changed (``stamp``)."""
    return read_store(db, None)


def job_key(s: Settings, jobs: StoredJobs, name: str) -> str:
    """A cache key for job ``name``: where it is stored and which version of it."""
    return f"{s.location}#job:{name}:{jobs.keys[name]}"


@st.cache_resource(max_entries=8, show_spinner="Reading the job…")
def stored(db: str | None, key: str, name: str) -> StoredJobs:
    """Job ``name`` read back (once per version of it, ``key``)."""
    return read_store(db, name)


@st.cache_resource(max_entries=16, show_spinner=False)
def tables(key: str, _rep: JobReport) -> jobframes.JobTables:
    return jobframes.tables(_rep)


@st.cache_resource(max_entries=16, show_spinner=False)
def heatmap(key: str, _t: jobframes.JobTables) -> Chart:
    return jobcharts.heatmap(_t.lateness)


def busy(s: Settings, job: StoredJobs, t: jobframes.JobTables, step: str) -> dict[int, jobframes.Busy]:
    """Each stored rank's own timeline of ``step`` (the Critical path page's, cached per
    run), placed on the job's clock. A rank whose run cannot be loaded is left out."""
    out: dict[int, jobframes.Busy] = {}
    per_rank = max(s.max_events // max(len(job.runs), 1), 100)
    for rank, info in sorted(job.runs.items()):
        try:
            loaded = data.load(s, info)
        except StoreError:  # a run that will not load leaves its band with the path alone
            continue
        a = loaded.analysis
        window = next((k for k, w in enumerate(a.windows) if w.label == step), None)
        if window is None:
            continue
        tl = data.timeline(loaded.tag, window, per_rank, a)
        shift = jobframes.shift_ms(frames.t0(a), t.offsets_ns.get(rank, 0), t.base_ns)
        out[rank] = jobframes.Busy(tl, shift, loaded.tag)
    return out


def timeline(
    s: Settings, job: StoredJobs, key: str, t: jobframes.JobTables, step: str
) -> tuple[jobframes.JobTimeline, Chart]:
    """The job timeline of ``step`` and its chart.

    Keyed by the ranks' runs as stored (not by their loaded analyses): a job of more ranks
    than the analysis cache holds would otherwise load every rank again on each rerun.
    """
    runs = ",".join(f"{r}={data.RunRef.of(s.location, i).tag}" for r, i in sorted(job.runs.items()))
    return _timeline(key, step, runs, s.max_events, s, job, t)


@st.cache_resource(max_entries=32, show_spinner="Drawing the job's step…")
def _timeline(
    key: str,
    step: str,
    runs: str,
    max_events: int,
    _s: Settings,
    _job: StoredJobs,
    _t: jobframes.JobTables,
) -> tuple[jobframes.JobTimeline, Chart]:
    assert _job.report is not None
    tl = jobframes.timeline(_job.report, _t.base_ns, step, busy(_s, _job, _t, step))
    return tl, jobcharts.timeline(tl)


@st.cache_resource(max_entries=8, show_spinner="Re-timing the job (its ranks' traces are read again)…")
def whatif(db: str | None, key: str, name: str, scale: tuple[str, ...], median: bool, cpus: int) -> JobWhatif:
    """Job ``name``'s predicted steps (:func:`ctda.api.whatif_stored_job`), once per version
    of the job (``key``) and change."""
    return whatif_stored_job(db, name, list(scale), straggler_median=median, cpus=cpus)
