"""A distributed job as store rows, and its :class:`~ctda.job.report.JobReport` back from them.

The rows are the report's own tables (steps, lateness, collective waits, clocks, the job
path) plus one run per rank; nothing is recomputed on the way back except the path's top
items, which :func:`ctda.job.report.path_items` derives from the stored path exactly as the
analysis did, so a stored job answers with the same report for any ``top``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ctda import __version__
from ctda.analysis import tables
from ctda.analysis.engine import AnalysisOptions
from ctda.analysis.report import plain
from ctda.job.report import LATENESS_COLUMNS, PATH_COLUMNS, STEP_EXTRA, JobReport, path_items
from ctda.store import schema
from ctda.store.model import RunData

STEP_COLUMNS = [
    "step",
    "job_step_ns",
    "slowest_rank",
    "fastest_rank_step_ns",
    "straggler",
    "late_ns",
    "path_by_rank",
    "straggler_top",
    "last_to_arrive",
    "host_contention",
    "straggler_own",
]
#: per-rank dictionaries of a step row, stored as JSON text (``<column>_json``)
STEP_DICTS = ("late_by_rank", "charged_by_rank")
WAIT_COLUMNS = ["label", "cid", "op", "rank", "waited_for", "wait_ns", "transfer_ns"]
CLOCK_COLUMNS = ["rank", "host", "rank_from", "offset_ns", "how"]
#: matching summary entries keyed by rank count or rank (ints; JSON turns them into text)
_INT_KEYED = ("by_ranks", "unmatched", "inconsistent")


@dataclass
class JobInfo:
    """What ``ctda jobs`` shows about one stored job."""

    id: int
    name: str
    status: str
    world_size: int
    ranks: list[int]
    missing: list[int]
    sha256: str
    options: dict[str, Any]
    options_key: str
    ingested_at: str
    steps: int
    cp_ns: int
    heartbeat: int = 0
    notes: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)  # as stored

    @classmethod
    def from_props(cls, p: dict[str, Any]) -> JobInfo:
        return cls(
            id=int(p["id"]),
            name=str(p.get("name") or ""),
            status=str(p.get("status") or ""),
            world_size=int(p.get("world_size") or 0),
            ranks=[int(x) for x in p.get("ranks") or []],
            missing=[int(x) for x in p.get("missing") or []],
            sha256=str(p.get("sha256") or ""),
            options=_js(p.get("options_json"), {}),
            options_key=str(p.get("options_key") or ""),
            ingested_at=str(p.get("ingested_at") or ""),
            steps=int(p.get("steps") or 0),
            cp_ns=int(p.get("cp_ns") or 0),
            heartbeat=int(p.get("heartbeat") or 0),
            notes=[str(x) for x in _js(p.get("notes_json"), [])],
            props=dict(p),
        )


@dataclass
class JobData:
    """Rows of one job, ready for either store: the report's tables and each rank's run."""

    name: str
    job: dict[str, Any]  # Job properties except id/status/heartbeat
    runs: dict[int, RunData]  # rank -> its run
    report: JobReport

    @property
    def n_rows(self) -> int:
        return sum(r.n_rows for r in self.runs.values())


def run_name(job: str, rank: int) -> str:
    """The run holding rank ``rank`` of job ``job``: ``JOB/rRANK``."""
    return f"{job}/r{rank}"


def job_digest(file_digests: Iterable[str]) -> str:
    """The job's content key: one digest over its files' digests (in any order)."""
    return hashlib.sha256("\n".join(sorted(file_digests)).encode()).hexdigest()


def job_data(rep: JobReport, runs: dict[int, RunData], sha256: str, options: AnalysisOptions) -> JobData:
    """A job's rows from its report and its ranks' runs (``runs[rank].name``: their names)."""
    from datetime import datetime, timezone

    job = {
        "name": rep.name,
        "world_size": int(rep.world_size),
        "ranks": [int(r) for r in rep.ranks],
        "missing": [int(r) for r in rep.missing],
        "sha256": sha256,
        "options_json": json.dumps(tables.options_dict(options), sort_keys=True),
        "options_key": tables.options_key(options),
        "ctda_version": __version__,
        "ingested_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "steps": len(rep.steps),
        "cp_ns": int(rep.steps.job_step_ns.sum()) if len(rep.steps) else 0,
        "notes_json": json.dumps(list(rep.notes)),
        "checks_json": json.dumps(plain(rep.checks)),
        "matching_json": json.dumps(plain(rep.matching)),
    }
    return JobData(rep.name, job, runs, rep)


def job_rows(data: JobData, job_id: int, run_ids: dict[int, int]) -> dict[str, pa.Table]:
    """Node tables (``JobStep``, ``JobLateness``, ``JobWait``, ``JobClock``) and relationship
    tables (``HAS_STEP``, ``JOB_CP``: ``from``/``to`` keys first) of a job, schema order."""
    rep = data.report
    steps = rep.steps
    skeys = [f"{job_id}/{i}" for i in range(len(steps))]
    ids = np.full(len(steps), job_id, np.int64)
    out = {
        "JobStep": _table(
            schema.JOB_STEP,
            {
                "key": skeys,
                "job_id": ids,
                "idx": np.arange(len(steps), dtype=np.int64),
                "step": _col(steps, "step", str),
            }
            | {c: _col(steps, c, str if c in _TEXT else np.int64) for c in STEP_COLUMNS[1:]}
            | {
                f"{c}_json": [json.dumps({str(k): int(v) for k, v in d.items()}) for d in steps.get(c, [])]
                for c in STEP_DICTS
            },
        ),
        "HAS_STEP": pa.table({"from": pa.array(ids), "to": pa.array(skeys, pa.string())}),
    }
    for label, frame, cols in (
        (schema.JOB_LATENESS, rep.lateness, LATENESS_COLUMNS),
        (schema.JOB_WAIT, rep.waits, WAIT_COLUMNS),
        (schema.JOB_CLOCK, rep.clocks, CLOCK_COLUMNS),
    ):
        n = len(frame)
        head = {"key": [f"{job_id}/{i}" for i in range(n)], "job_id": np.full(n, job_id, np.int64)}
        order = {"idx": np.arange(n, dtype=np.int64)} if "idx" in label.columns else {}
        own = {c: _col(frame, c, str if c in _TEXT else np.int64) for c in cols}
        out[label.name] = _table(label, head | order | own)
    out["JOB_CP"] = _path_table(rep.path, steps, skeys, data.runs, run_ids)
    return out


def _path_table(
    path: pd.DataFrame,
    steps: pd.DataFrame,
    skeys: list[str],
    runs: dict[int, RunData],
    run_ids: dict[int, int],
) -> pa.Table:
    """JOB_CP rows: each path row from its job step to the rank's event it charges; a wait
    or gap to the event where the path resumes on that rank (else the last one before it,
    else the rank's SOURCE pseudo event)."""
    n = len(path)
    step_of = {str(s): i for i, s in enumerate(_col(steps, "step", str))}
    sidx = path.step.astype(str).map(step_of).to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64)
    rank = _col(path, "rank")
    event = _col(path, "event")
    # per (step, rank), in path order: the next charged event, else the last one before
    charged = pd.Series(np.where(event >= 0, event, np.nan))
    group = sidx * (max(runs, default=0) + 1) + rank
    after = charged.groupby(group).bfill()
    before = charged.groupby(group).ffill()
    by_rank = pd.Series(rank)
    source = by_rank.map({r: int(d.run["events"]) for r, d in runs.items()}).to_numpy(dtype=np.int64)
    near = after.fillna(before).to_numpy()
    target = np.where(event >= 0, event, np.where(np.isnan(near), source, np.nan_to_num(near))).astype(
        np.int64
    )
    keys = by_rank.map(run_ids).to_numpy(dtype=np.int64) * schema.KEY_SPAN + target
    cols = {
        "pos": _col(path, "pos"),
        "rank": rank,
        "event": event,
        "name": _col(path, "name", str),
        "class": _col(path, "class", str),
        "t0": _col(path, "t0"),
        "t1": _col(path, "t1"),
        "ns": _col(path, "ns"),
        "wait": event < 0,
    }
    step_keys = np.asarray(skeys, dtype=object)[sidx]
    return pa.table(
        {"from": pa.array(step_keys, pa.string()), "to": pa.array(keys, pa.int64())}
        | {c: pa.array(v) for c, v in cols.items()}
    )


def report_from(info: JobInfo, rows: dict[str, list[dict[str, Any]]], top: int = 10) -> JobReport:
    """The job's report from its stored rows (``rows``: table name -> records in order, as
    :meth:`ctda.store.job_flows.JobFlows.read_job_rows` reads them)."""
    steps = _frame(rows["JobStep"], STEP_COLUMNS)
    for c in STEP_DICTS:
        per = [{int(k): int(v) for k, v in _js(r.get(f"{c}_json"), {}).items()} for r in rows["JobStep"]]
        steps[c] = pd.Series(per, index=steps.index, dtype=object)
    checks = _js(info.props.get("checks_json"), {})
    _step_extra(steps, checks.get("step_extra"))
    path = _frame(rows["JOB_CP"], PATH_COLUMNS)
    p = info.props
    matching = _js(p.get("matching_json"), {})
    for key in _INT_KEYED:
        if isinstance(matching.get(key), dict):
            matching[key] = {int(k): v for k, v in matching[key].items()}
    return JobReport(
        name=info.name,
        ranks=info.ranks,
        world_size=info.world_size,
        missing=info.missing,
        steps=steps,
        path_items=path_items(path, top),
        waits=_frame(rows["JobWait"], WAIT_COLUMNS),
        clocks=_frame(rows["JobClock"], CLOCK_COLUMNS),
        matching=matching,
        notes=info.notes,
        checks=checks,
        lateness=_frame(rows["JobLateness"], LATENESS_COLUMNS),
        path=path,
    )


def _step_extra(steps: pd.DataFrame, extra: Any) -> None:
    """The step columns a job keeps in its checks (``STEP_EXTRA``: the step's definition and
    the straggler's significance), back as columns; absent in jobs stored before them."""
    if not isinstance(extra, list) or len(extra) != len(steps):
        return
    for c in STEP_EXTRA:
        vals = pd.Series([e.get(c) for e in extra], index=steps.index)
        steps[c] = vals.astype(str) if c in ("verdict", "bounds") else vals.astype(np.int64)


_TEXT = {
    "step",
    "path_by_rank",
    "straggler_top",
    "host_contention",
    "straggler_own",
    "label",
    "op",
    "host",
    "rank_from",
    "how",
    "name",
    "class",
}


def _frame(records: list[dict[str, Any]], cols: list[str]) -> pd.DataFrame:
    """Records as a frame with the report's column types (ints as int64, text as str)."""
    if not records:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame.from_records(records, columns=cols)
    return df.astype({c: (str if c in _TEXT else np.int64) for c in cols})


def _col(df: pd.DataFrame, name: str, kind: type = np.int64) -> np.ndarray:
    if name not in df or len(df) == 0:
        return np.zeros(0, dtype=object if kind is str else np.int64)
    if kind is str:
        return np.asarray(df[name].astype(str).to_numpy(), dtype=object)
    return np.asarray(df[name].to_numpy(), dtype=np.int64)


def _table(label: schema.Label, cols: dict[str, Any]) -> pa.Table:
    types = dict(label.props)
    arrow = {"INT64": pa.int64(), "STRING": pa.string(), "BOOL": pa.bool_()}
    return pa.table({c: pa.array(list(cols[c]), arrow[types[c]]) for c in label.columns})


def _js(text: Any, default: Any) -> Any:
    try:
        value = json.loads(text or "null")
    except (TypeError, ValueError):
        return default
    return value if isinstance(value, type(default)) else default
