"""The store's flows for distributed jobs, shared by both backends (mixed into ``Store``).

A job becomes visible the way a run does, all at once: the Job node and every rank's run
are written ``pending`` (each run by the run flow's own steps, without its flip), then one
transaction flips the job and all its runs to ``complete``, marking a job (and runs) they
replace ``deleting``. A writer that dies leaves pending rows that no reader sees and the
next writer removes (:meth:`JobFlows._gc_jobs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ctda.store import schema
from ctda.store.faults import FaultCounter, StoreError
from ctda.store.schema import COMPLETE, DELETING, META_KEY, PENDING

if TYPE_CHECKING:
    from ctda.store.job_model import JobData, JobInfo

Progress = Callable[[int, int], None]

#: a job's tables read back, in the report's order (JOB_CP: see job_model.report_from)
_READS = {
    "JobStep": "MATCH (s:JobStep) WHERE s.job_id = $j RETURN properties(s) AS p ORDER BY s.idx",
    "JobLateness": "MATCH (x:JobLateness) WHERE x.job_id = $j RETURN properties(x) AS p ORDER BY x.idx",
    "JobWait": "MATCH (x:JobWait) WHERE x.job_id = $j RETURN properties(x) AS p ORDER BY x.idx",
    "JobClock": "MATCH (x:JobClock) WHERE x.job_id = $j RETURN properties(x) AS p ORDER BY x.rank",
}
_PATH = (
    "MATCH (s:JobStep)-[c:JOB_CP]->(e:Event) WHERE s.job_id = $j "
    "RETURN s.idx AS sidx, s.step AS step, c.pos AS pos, c.rank AS rank, c.event AS event, c.name AS name, "
    "c.class AS class, c.t0 AS t0, c.t1 AS t1, c.ns AS ns ORDER BY sidx, pos"
)


class JobFlows:
    """Jobs in a store: list, write atomically, read back, delete.

    A mixin of :class:`ctda.store.base.Store`, which provides what is declared here (the
    engine primitives and the run flow's steps); kept apart so the store's run flows stay
    readable on their own.
    """

    _absent: Callable[[], bool]
    _read: Callable[..., list[dict[str, Any]]]
    _write: Callable[..., list[dict[str, Any]]]
    _transaction: Callable[[Callable[[Any], Any]], Any]
    _writable: Callable[[], None]
    _allocate: Callable[[Any], int]
    _create_pending: Callable[[schema.Label, dict[str, Any]], int]
    _load: Callable[[int, Any, FaultCounter, Any], None]
    _write_extras: Callable[[int, Any, FaultCounter], None]
    _add_owned: Callable[[schema.Label, Any], None]
    _at: Callable[[str], str]
    _both: Callable[[str], list[str]]
    _prepublish: Callable[[list[int], list[int]], None]
    _beat: Callable[[list[int], list[int]], None]
    _publish: Callable[[Any, list[int], list[int]], None]
    _hide: Callable[[Any, list[int], list[int]], None]
    _whole_write: Callable[[], contextlib.AbstractContextManager[None]]
    _delete_ids: Callable[[list[int]], None]
    _purge_deleting: Callable[[], None]
    _dead: Callable[[Any, float | None], bool]
    gc: Callable[..., int]
    runs: Callable[..., list[Any]]

    # --- reads --------------------------------------------------------------------------
    def jobs(self, include_incomplete: bool = False) -> list[JobInfo]:
        """Jobs by name; only complete ones unless asked."""
        from ctda.store.job_model import JobInfo  # the job model loads the engine's tables

        if self._absent():
            return []
        labels = self._both("Job") if include_incomplete else ["Job"]
        rows = [r for lab in labels for r in self._read(f"MATCH (j:{lab}) RETURN properties(j) AS p")]
        out = sorted((JobInfo.from_props(r["p"]) for r in rows), key=lambda j: (j.name, j.id))
        return [j for j in out if include_incomplete or j.status == COMPLETE]

    def find_job(self, name: str) -> JobInfo | None:
        """The complete job called ``name``."""
        return next((j for j in self.jobs() if j.name == name), None)

    def find_job_content(self, sha256: str, options_key: str) -> JobInfo | None:
        """A complete job of the same files analysed with the same options."""
        return next((j for j in self.jobs() if j.sha256 == sha256 and j.options_key == options_key), None)

    def job_members(self) -> dict[int, tuple[str, int]]:
        """Run id -> (job name, rank) for the runs of complete jobs."""
        if self._absent():
            return {}
        rows = self._read(
            "MATCH (j:Job)-[h:HAS_RANK]->(r:Run) WHERE j.status = $c "
            "RETURN r.id AS run, j.name AS job, h.rank AS rank",
            {"c": COMPLETE},
        )
        return {int(r["run"]): (str(r["job"]), int(r["rank"])) for r in rows}

    def read_job_rows(self, job_id: int) -> dict[str, list[dict[str, Any]]]:
        """A job's stored tables as records, in the report's order."""
        out = {name: [r["p"] for r in self._read(q, {"j": job_id})] for name, q in _READS.items()}
        path = self._read(_PATH, {"j": job_id})
        out["JOB_CP"] = path
        return out

    def _job_run_ids(self, job_ids: list[int]) -> list[int]:
        rows = [
            r
            for job in self._both("Job")
            for r in self._read(
                f"MATCH (j:{job})-[:HAS_RANK]->(r) WHERE j.id IN $ids RETURN r.id AS id",
                {"ids": job_ids or [-1]},
            )
        ]
        return sorted({int(r["id"]) for r in rows})

    # --- writes -------------------------------------------------------------------------
    def write_job(
        self,
        data: JobData,
        *,
        replace: bool = False,
        fail_after: int | None = None,
        progress: Progress | None = None,
    ) -> JobInfo:
        """Store a job and a run per rank atomically; with ``replace`` it takes over the
        name of an existing job and of runs named like its ranks' runs."""
        self._writable()
        faults = FaultCounter(fail_after)
        self.gc()
        names = {r.name for r in data.runs.values()}
        if not replace:
            if self.find_job(data.name) is not None:
                raise StoreError(f"job {data.name!r} already exists")
            taken = sorted(r.name for r in self.runs() if r.name in names)
            if taken:
                raise StoreError(f"run {taken[0]!r} already exists; use --force to replace it")
        written: dict[int, int] = {}  # -1: the job's id, rank: its run's id
        try:
            with self._whole_write():
                self._write_job_rows(data, written, faults, progress, replace)
        except BaseException:
            if -1 in written:
                with contextlib.suppress(Exception):  # the original error is the one to report
                    runs = [rid for rank, rid in written.items() if rank >= 0]
                    self._delete_job_ids([written[-1]], extra_runs=runs)
            raise
        jid = written[-1]
        self._purge_deleting()
        self._purge_deleting_jobs()
        info = next((j for j in self.jobs() if j.id == jid), None)
        if info is None:  # pragma: no cover - flipped but not readable: a store bug
            raise StoreError(f"job {data.name!r} was not stored")
        return info

    def _write_job_rows(
        self,
        data: JobData,
        written: dict[int, int],
        faults: FaultCounter,
        progress: Progress | None,
        replace: bool,
    ) -> None:
        """Write the job pending, its runs and tables, then flip it; ``written`` receives
        the ids as they are allocated (-1: the job, each rank: its run), so a failure
        anywhere knows what to remove."""
        from ctda.store.job_model import job_rows

        jid = written[-1] = self._allocate_job(data)
        run_ids: dict[int, int] = {}
        total, done = data.n_rows, 0
        for rank, run in sorted(data.runs.items()):
            rid = written[rank] = run_ids[rank] = self._allocate(run)
            self._write(
                f"MATCH (j:{self._at('Job')}), (r:{self._at('Run')}) WHERE j.id = $j AND r.id = $r "
                "CREATE (j)-[:HAS_RANK {rank: $k}]->(r)",
                {"j": jid, "r": rid, "k": rank},
            )
            base = done
            tick = None if progress is None else (lambda d, _t, b=base: progress(b + d, total))
            self._load(rid, run, faults, tick)
            self._write_extras(rid, run, faults)
            done += run.n_rows
            self._beat(list(run_ids.values()), [jid])  # the job and its runs so far: alive
        rows = job_rows(data, jid, run_ids)
        for label in schema.JOB_TABLES:
            self._add_owned(label, rows[label.name])
            faults.tick()
        self._add_owned(schema.HAS_STEP, rows["HAS_STEP"])
        self._add_owned(schema.JOB_CP, rows["JOB_CP"])
        faults.tick()
        names = {r.name for r in data.runs.values()}
        self._prepublish(sorted(run_ids.values()), [jid])
        self._flip_job(jid, sorted(run_ids.values()), data.name, names, replace)

    def _allocate_job(self, data: JobData) -> int:
        """The Job node, ``pending``, with an id from the run id sequence."""
        return self._create_pending(schema.JOB, data.job)

    def _flip_job(self, jid: int, run_ids: list[int], name: str, run_names: set[str], replace: bool) -> None:
        """One transaction makes the job and its runs visible, and marks what they replace."""

        def work(run: Any) -> None:
            run("MATCH (m:Meta) WHERE m.key = $k SET m.lock = $j", {"k": META_KEY, "j": jid})
            olds = [
                int(r["id"])
                for r in run(
                    "MATCH (j:Job) WHERE j.name = $n AND j.status = $c RETURN j.id AS id",
                    {"n": name, "c": COMPLETE},
                )
            ]
            old_runs = run(
                "MATCH (j:Job)-[:HAS_RANK]->(r:Run) WHERE j.id IN $ids RETURN r.id AS id",
                {"ids": olds or [-1]},
            )
            old_runs += run(
                "MATCH (r:Run) WHERE r.name IN $names AND r.status = $c RETURN r.id AS id",
                {"names": sorted(run_names) or [""], "c": COMPLETE},
            )
            if (olds or old_runs) and not replace:
                raise StoreError(f"job {name!r} or one of its runs already exists")
            gone = sorted({int(r["id"]) for r in old_runs}) or [-1]
            run("MATCH (r:Run) WHERE r.id IN $ids SET r.status = $d", {"ids": gone, "d": DELETING})
            run("MATCH (j:Job) WHERE j.id IN $ids SET j.status = $d", {"ids": olds or [-1], "d": DELETING})
            if olds or old_runs:  # out of sight with this commit, though their removal comes after
                self._hide(run, [i for i in gone if i >= 0], olds)
            flipped = run(
                f"MATCH (j:{self._at('Job')}) WHERE j.id = $j AND j.status = $p "
                "SET j.status = $c RETURN count(j) AS n",
                {"j": jid, "p": PENDING, "c": COMPLETE},
            )
            runs = run(
                f"MATCH (r:{self._at('Run')}) WHERE r.id IN $ids AND r.status = $p "
                "SET r.status = $c RETURN count(r) AS n",
                {"ids": run_ids or [-1], "p": PENDING, "c": COMPLETE},
            )
            if int(flipped[0]["n"]) != 1 or int(runs[0]["n"]) != len(run_ids):
                raise StoreError(f"job {name!r} was removed while it was written (stale heartbeat?)")
            self._publish(run, run_ids, [jid])

        self._transaction(work)

    def delete_job(self, name: str) -> bool:
        """Remove a job, its runs and its tables; False when there is no such job."""
        self._writable()
        ids = [j.id for j in self.jobs(include_incomplete=True) if j.name == name]
        if not ids:
            return False
        runs = self._job_run_ids(ids)

        def hide(run: Any) -> None:
            # hidden first (one transaction), so a delete cut short never shows half a job
            for job in self._both("Job"):
                run(f"MATCH (j:{job}) WHERE j.id IN $ids SET j.status = $d", {"ids": ids, "d": DELETING})
                run(
                    f"MATCH (j:{job})-[:HAS_RANK]->(r) WHERE j.id IN $ids SET r.status = $d",
                    {"ids": ids, "d": DELETING},
                )
            self._hide(run, runs, ids)

        self._transaction(hide)
        self._delete_job_ids(ids)
        return True

    def _delete_job_ids(self, ids: list[int], extra_runs: Sequence[int] = ()) -> None:
        """Remove jobs ``ids`` with their runs (and ``extra_runs``, not linked yet)."""
        runs = sorted(set(self._job_run_ids(ids)) | set(extra_runs))
        with self._whole_write():  # one transaction where the backend has one (_delete_ids)
            self._delete_job_rows(ids, runs)

    def _delete_job_rows(self, ids: list[int], runs: list[int]) -> None:
        """The statements of :meth:`_delete_job_ids`, in its transaction where there is one."""
        for jid in ids:
            for step in self._both("JobStep"):
                self._write(f"MATCH (s:{step}) WHERE s.job_id = $j DETACH DELETE s", {"j": jid})
            for label in schema.JOB_TABLES[1:]:
                for lab in self._both(label.name):
                    self._write(f"MATCH (x:{lab}) WHERE x.job_id = $j DELETE x", {"j": jid})
        if runs:
            self._delete_ids(runs)
        for jid in ids:
            for job in self._both("Job"):
                self._write(f"MATCH (j:{job}) WHERE j.id = $j DETACH DELETE j", {"j": jid})

    def _purge_deleting_jobs(self) -> None:
        """Remove jobs marked ``deleting`` (replaced ones) with whatever they still hold."""
        ids = [j.id for j in self.jobs(include_incomplete=True) if j.status == DELETING]
        if ids:
            with contextlib.suppress(Exception):
                self._delete_job_ids(ids)

    def _gc_jobs(self, stale_after_s: float | None) -> int:
        """Remove jobs a failed writer left behind (as :meth:`gc` does for runs)."""
        dead = [
            j.id
            for j in self.jobs(include_incomplete=True)
            if j.status != COMPLETE and self._dead(j, stale_after_s)
        ]
        if dead:
            self._delete_job_ids(dead)
        return len(dead)
