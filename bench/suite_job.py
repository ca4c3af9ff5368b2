"""Job suite: synthetic jobs of 8 and 64 ranks analysed end to end (``ctda analyze DIR``).

A job is made from a real one (the 4-rank DDP job with a 30 ms compute straggler on
rank 2): its ranks 0-3 become ranks 0-3 on host ``node0`` and, copied, ranks 4-7 on host
``node1`` and so on (same timeline: the clock stage must find no correction), each grown
to the target size by the step replicator with one common copy count and time shift, so
the ranks' collectives still meet. Measured, each in a fresh process (``python -m
bench.suite_job DIR EXECUTOR``): wall time of the whole job with local processes and with
a Dask cluster started on this machine (``dask-local``: its start-up included), the
per-rank stage's CPU time (the workers' own: on a shared machine the wall time follows the
load, which each row records), the cross-rank stage alone (matching, clocks, the step
paths over the ranks' skeletons, stragglers), the size of what the workers send back, and
the peak RSS of the job's process (the skeletons and the cross-rank stage) and of its
largest worker (one rank's analysis).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.replicate import load, plan, replicate
from bench.suites import Context, SuiteResult, fmt_num, markdown_table, register
from ctda.api import tune_memory

SOURCE = "generated/multirank/g_ddp_ws4_compute30_r2"
RANKS_PER_HOST = 4
HOSTS = 2
EVENTS = 1_000_000
EVENTS_QUICK = 40_000
#: the large job: 16 hosts of 4 ranks, on a Dask cluster
HOSTS_LARGE = 16
EVENTS_LARGE = 125_000
EVENTS_LARGE_QUICK = 5_000


def make_job(ctx: Context, n_events: int, hosts: int = HOSTS) -> Path:
    """The ``4 * hosts`` rank traces of about ``n_events`` each (cached)."""
    assert ctx.corpus is not None
    ranks = hosts * RANKS_PER_HOST
    out = ctx.cache / (f"job8_{n_events}" if ranks == 8 else f"job{ranks}_{n_events}")
    done = out / "done"
    if done.is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    src = ctx.corpus / SOURCE
    sources: list[Path] = []
    for host in range(hosts):
        for r in range(RANKS_PER_HOST):
            doc = json.loads(gzip.decompress((src / f"rank{r}.pt.trace.json.gz").read_bytes()))
            rank = host * RANKS_PER_HOST + r
            doc["distributedInfo"] = {
                **doc["distributedInfo"],
                "rank": rank,
                "world_size": ranks,
            }
            doc["host_name"] = f"node{host}"
            path = out / f"src_rank{rank}.json"
            path.write_text(json.dumps(doc))
            sources.append(path)
    # one shift and one copy count for every rank, so copy k of a collective meets copy k
    plans = [plan(load(p)[1]) for p in sources]
    shift = max(p.shift_us for p in plans) + 1000
    window = min(len(p.members) for p in plans)
    copies = max(0, -(-(n_events - window) // window))
    for rank, path in enumerate(sources):
        ctx.log(f"job: rank {rank}, {copies} copies")
        replicate(path, out / f"rank{rank}.json.gz", copies=copies, shift_us=shift)
        path.unlink()
    done.write_text("ok")
    return out


def _measure(ctx: Context, job_dir: Path, executor: str) -> dict[str, Any]:
    """One job analysed in this process (see :func:`_child` for a fresh one)."""
    from ctda.analysis.engine import AnalysisOptions
    from ctda.job.executor import map_ranks
    from ctda.job.load import identify, job_files
    from ctda.job.run import assemble_job, skeleton_rank

    files = [str(f) for f in job_files([job_dir])]
    load = os.getloadavg()[0]
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    parts = map_ranks(skeleton_rank, files, AnalysisOptions(), executor)
    t_ranks = time.perf_counter() - t0
    t1 = time.perf_counter()
    layout = identify([p.rank_id for p in parts])
    job = assemble_job(job_dir.name, layout, {p.rank_id.rank: p for p in parts})
    t_cross = time.perf_counter() - t1
    sent = sum(len(pickle.dumps(p)) for p in parts)
    cp = job.paths.groupby("label").ns.sum()
    return {
        "executor": executor,
        "ranks": len(parts),
        "events_per_rank": int(sum(p.skeleton.n_events for p in parts) / len(parts)),
        "load_1m": load,
        "wall_s": t_ranks + t_cross,
        "per_rank_stage_s": t_ranks,
        "per_rank_cpu_s": _children_cpu() - cpu0 if executor != "serial" else None,
        "cross_rank_s": t_cross,
        "sent_mb": sent / 1e6,
        "job_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "collectives": job.matching.n_collectives,
        "unmatched": sum(job.matching.unmatched.values()),
        "steps": len(job.steps),
        "cp_equals_step": bool(
            (cp.reindex(job.steps.label).to_numpy() == job.steps.job_step_ns.to_numpy()).all()
        ),
        "offsets": sorted(set(job.offsets.how.values())),
        "stragglers": job.stragglers.straggler.value_counts().to_dict(),
    }


def _children_cpu() -> float:
    """CPU seconds of this process's finished descendants (local workers, Dask's nannies and
    workers: each is waited for by its parent)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time, with every run's wall time (``walls_s``)."""
    ordered = sorted(runs, key=lambda r: float(r["wall_s"]))
    return {**ordered[(len(ordered) - 1) // 2], "walls_s": [float(r["wall_s"]) for r in runs]}


def _child(ctx: Context, job_dir: Path, executor: str) -> dict[str, Any]:
    """:func:`_measure` in a fresh process: its peak RSS is this job's alone."""
    proc = subprocess.run(
        [ctx.python(), "-m", "bench.suite_job", str(job_dir), executor],
        env=ctx.child_env(),
        capture_output=True,
        text=True,
        timeout=ctx.timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"job {job_dir.name} on {executor} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@register("job", title="Distributed jobs (8 and 64 ranks)", order=60)
def run(ctx: Context) -> SuiteResult:
    if ctx.corpus is None:
        return SuiteResult([], "Skipped: the trace corpus is not available.")
    small = make_job(ctx, EVENTS_QUICK if ctx.quick else EVENTS)
    large = make_job(ctx, EVENTS_LARGE_QUICK if ctx.quick else EVENTS_LARGE, HOSTS_LARGE)
    # the two executors of the 8-rank job take turns (--repeat rounds), so each meets the
    # machine's same moments; a row is the run of median wall time, with every run's
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "dask-local": []}
    for k in range(max(ctx.repeat, 1)):
        for executor in runs:
            ctx.log(f"job: {small.name} on {executor} (round {k + 1})")
            runs[executor].append(_child(ctx, small, executor))
    rows = [_median(each) for each in runs.values()]
    ctx.log(f"job: {large.name} on dask-local")
    rows.append(_median([_child(ctx, large, "dask-local")]))
    table = markdown_table(
        [
            "executor",
            "ranks x events",
            "load",
            "wall s",
            "wall s, every run",
            "per-rank stage s",
            "per-rank CPU s",
            "cross-rank s",
            "skeletons MB",
            "job peak RSS MB",
            "worker peak RSS MB",
            "collectives (unmatched)",
            "CP == step",
        ],
        [
            [
                r["executor"],
                f"{r['ranks']} x {r['events_per_rank']:,}",
                fmt_num(r["load_1m"], 1),
                fmt_num(r["wall_s"]),
                ", ".join(fmt_num(w) for w in r["walls_s"]),
                fmt_num(r["per_rank_stage_s"]),
                fmt_num(r["per_rank_cpu_s"]),
                fmt_num(r["cross_rank_s"], 2),
                fmt_num(r["sent_mb"]),
                fmt_num(r["job_peak_rss_mb"]),
                fmt_num(r["worker_peak_rss_mb"]),
                f"{r['collectives']} ({r['unmatched']})",
                str(r["cp_equals_step"]),
            ]
            for r in rows
        ],
    )
    body = (
        "Synthetic jobs of 8 ranks (two hosts of four) and 64 ranks (16 hosts of four), grown"
        " from the real 4-rank DDP job with a compute straggler, analysed by `ctda analyze DIR`:"
        " each worker reads, analyses and returns its rank's skeleton; the cross-rank stage holds"
        " only those. Each run is a fresh process; `load` is the 1-minute load average when it"
        " started (the wall times on a shared machine follow it; the workers' CPU time does not)."
        " With `--repeat N` the 8-rank job runs N times on each executor, taking turns; a row is"
        " the run of median wall time."
        "\n\n" + table
    )
    return SuiteResult(rows, body)


if __name__ == "__main__":
    tune_memory()  # as the command line does
    print(
        json.dumps(_measure(Context(Path("."), Path("."), Path("."), None), Path(sys.argv[1]), sys.argv[2]))
    )
